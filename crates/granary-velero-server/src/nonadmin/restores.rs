//! The NonAdminRestore controller (as NAC's `nonadminrestore_controller.go` does it, plus
//! the check NAC's issue #225 asks for; docs/controllers.md#non-admin-controllers): a NAR
//! naming a NonAdminBackup of its own namespace whose Velero Backup is Completed or
//! PartiallyFailed gets a Velero Restore into that namespace only; anything else is
//! `BackingOff` with `Accepted=False`/`InvalidRestoreSpec` naming the field, and nothing
//! is created. Deleting a NAR deletes its Velero Restore first.

use granary_runtime::passes::run_passes;
use std::sync::Arc;

use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use tokio::sync::Notify;

use super::plan::{
    message, origin_matches, queue_position, refused_at, restorable_backup, restore_problems,
    set_condition, velero_restore, was_queued,
};
use super::{is_conflict, is_not_found, list_params, now, poke, set_finalizer, write_status};
use crate::context::VeleroContext;
use crate::watch::each_event;
use granary_api::oadp::{
    CONDITION_ACCEPTED, CONDITION_QUEUED, MESSAGE_RESTORE_ACCEPTED, MESSAGE_RESTORE_SCHEDULED,
    NAR_FINALIZER, NAR_ORIGIN_NAMESPACE_ANNOTATION, NonAdminBackup, NonAdminPhase, NonAdminRestore,
    QueueInfo, REASON_INVALID_RESTORE_SPEC, REASON_RESTORE_ACCEPTED, REASON_RESTORE_SCHEDULED,
    REASON_VELERO_RESTORE_NOT_FOUND, VeleroRestore, nac_object_name,
};
use granary_api::velero::{Backup, Restore};

/// Runs the controller until dropped: a pass on every change of a NonAdminRestore, a
/// NonAdminBackup, a Velero Restore or Backup, and every recheck period.
pub async fn run(ctx: Arc<VeleroContext>) {
    let wake = Arc::new(Notify::new());
    let feeds = async {
        tokio::join!(
            each_event(
                Api::<NonAdminRestore>::all(ctx.client.clone()),
                "NonAdminRestores",
                poke(wake.clone())
            ),
            each_event(ctx.api::<Restore>(), "Restores", poke(wake.clone())),
            each_event(ctx.api::<Backup>(), "Backups", poke(wake.clone())),
        )
    };
    let work = async {
        let every = ctx.settings.queued_backup_recheck_frequency.0;
        run_passes("non-admin restore pass failed", Some(&wake), every, || {
            pass(&ctx)
        })
        .await
    };
    tokio::join!(feeds, work);
}

async fn pass(ctx: &VeleroContext) -> Result<(), kube::Error> {
    let nars = Api::<NonAdminRestore>::all(ctx.client.clone())
        .list(&list_params(ctx))
        .await?
        .items;
    if nars.is_empty() {
        return Ok(());
    }
    let restores = ctx
        .api::<Restore>()
        .list(&ListParams::default())
        .await?
        .items;
    let backups = ctx
        .api::<Backup>()
        .list(&ListParams::default())
        .await?
        .items;
    for nar in nars {
        if let Err(e) = reconcile(ctx, &nar, &restores, &backups).await {
            tracing::warn!(namespace = %nar.namespace().unwrap_or_default(), name = %nar.name_any(), error = %e, "non-admin restore");
        }
    }
    Ok(())
}

async fn reconcile(
    ctx: &VeleroContext,
    nar: &NonAdminRestore,
    restores: &[Restore],
    backups: &[Backup],
) -> Result<(), kube::Error> {
    let ns = nar.namespace().unwrap_or_default();
    let old = nar.status.clone();
    let mut status = old.clone().unwrap_or_default();
    let uuid = status
        .velero_restore
        .as_ref()
        .and_then(|v| v.nacuuid.clone());
    let velero = uuid.as_ref().and_then(|u| {
        restores.iter().find(|r| {
            r.name_any() == *u
                && origin_matches(r.annotations(), NAR_ORIGIN_NAMESPACE_ANNOTATION, &ns)
        })
    });
    let generation = nar.meta().generation;

    if nar.meta().deletion_timestamp.is_some() {
        if !nar.finalizers().iter().any(|f| f == NAR_FINALIZER) {
            return Ok(());
        }
        if let Some(v) = velero {
            if v.meta().deletion_timestamp.is_none() {
                match ctx
                    .api::<Restore>()
                    .delete(&v.name_any(), &DeleteParams::default())
                    .await
                {
                    Err(e) if !is_not_found(&e) => return Err(e),
                    _ => {}
                }
            }
            // The finalizer goes once the Velero Restore is gone.
            return Ok(());
        }
        return set_finalizer(ctx, nar, NAR_FINALIZER, false).await;
    }

    let velero = match velero {
        Some(v) => v.clone(),
        None if was_queued(status.conditions.as_ref()) => {
            status.phase = Some(NonAdminPhase::BackingOff);
            let name = uuid.clone().unwrap_or_default();
            set_condition(
                status.conditions.get_or_insert_with(Vec::new),
                CONDITION_QUEUED,
                false,
                (
                    REASON_VELERO_RESTORE_NOT_FOUND,
                    &format!("Velero Restore {name} not found"),
                ),
                generation,
                now(ctx),
            );
            return write_status(ctx, nar, old.as_ref(), &status).await;
        }
        None => {
            if refused_at(status.conditions.as_ref(), generation) {
                return Ok(());
            }
            let enforced = &ctx.settings.non_admin.enforce_restore_spec;
            let mut problems = restore_problems(nar, enforced, ctx.namespace());
            let mut velero_backup = None;
            if let Some(name) = nar.non_admin_backup_name().filter(|_| problems.is_empty()) {
                let nabs: Api<NonAdminBackup> = Api::namespaced(ctx.client.clone(), &ns);
                let nab = nabs.get_opt(name).await?;
                let vb = nab
                    .as_ref()
                    .and_then(|n| n.velero_backup_name())
                    .and_then(|vb| backups.iter().find(|b| b.name_any() == vb));
                match restorable_backup(&ns, name, nab.as_ref(), vb) {
                    Ok(b) => velero_backup = Some(b),
                    Err(e) => problems.push(e),
                }
            }
            let Some(velero_backup) = velero_backup.filter(|_| problems.is_empty()) else {
                status.phase = Some(NonAdminPhase::BackingOff);
                set_condition(
                    status.conditions.get_or_insert_with(Vec::new),
                    CONDITION_ACCEPTED,
                    false,
                    (REASON_INVALID_RESTORE_SPEC, &message(&problems)),
                    generation,
                    now(ctx),
                );
                return write_status(ctx, nar, old.as_ref(), &status).await;
            };
            set_condition(
                status.conditions.get_or_insert_with(Vec::new),
                CONDITION_ACCEPTED,
                true,
                (REASON_RESTORE_ACCEPTED, MESSAGE_RESTORE_ACCEPTED),
                generation,
                now(ctx),
            );
            let uuid = uuid
                .unwrap_or_else(|| nac_object_name(&ns, &nar.name_any(), &uuid::Uuid::new_v4()));
            status.phase.get_or_insert(NonAdminPhase::New);
            status.velero_restore = Some(VeleroRestore {
                nacuuid: Some(uuid.clone()),
                name: Some(uuid.clone()),
                namespace: Some(ctx.namespace().to_string()),
                ..Default::default()
            });
            write_status(ctx, nar, old.as_ref(), &status).await?;
            let fresh = super::namespaced(ctx, nar).get(&nar.name_any()).await?;
            set_finalizer(ctx, &fresh, NAR_FINALIZER, true).await?;
            let mut body = velero_restore(nar, enforced, ctx.namespace(), &uuid, &velero_backup);
            ctx.selector
                .label(body.metadata.labels.get_or_insert_default());
            match ctx
                .api::<Restore>()
                .create(&PostParams::default(), &body)
                .await
            {
                Ok(r) => r,
                Err(e) if is_conflict(&e) => ctx.api::<Restore>().get(&uuid).await?,
                Err(e) => return Err(e),
            }
        }
    };
    set_condition(
        status.conditions.get_or_insert_with(Vec::new),
        CONDITION_QUEUED,
        true,
        (REASON_RESTORE_SCHEDULED, MESSAGE_RESTORE_SCHEDULED),
        generation,
        now(ctx),
    );
    status.phase = Some(NonAdminPhase::Created);
    let name = velero.name_any();
    status.velero_restore = Some(VeleroRestore {
        status: velero.status.clone(),
        name: Some(name.clone()),
        nacuuid: Some(name.clone()),
        namespace: Some(ctx.namespace().to_string()),
    });
    let completed = |r: &Restore| {
        r.status
            .as_ref()
            .is_some_and(|s| s.completion_timestamp.is_some())
    };
    status.queue_info = Some(QueueInfo {
        estimated_queue_position: queue_position(
            velero.meta().creation_timestamp.as_ref(),
            completed(&velero),
            restores
                .iter()
                .filter(|r| r.name_any() != name)
                .map(|r| (r.meta().creation_timestamp.clone(), completed(r))),
        ),
    });
    let current = super::namespaced(ctx, nar).get(&nar.name_any()).await?;
    write_status(ctx, &current, current.status.as_ref(), &status).await
}
