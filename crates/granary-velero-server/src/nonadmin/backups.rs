//! The NonAdminBackup controller (as NAC's `nonadminbackup_controller.go` does it; see
//! docs/controllers.md#non-admin-controllers). A valid NAB gets a NACUUID, the finalizer
//! and a Velero Backup of its own namespace in the Velero namespace; its status mirrors
//! that backup with NAC's phases, conditions and queue estimate. An invalid one is
//! `BackingOff` with `Accepted=False`/`InvalidBackupSpec` and a message naming the field,
//! and nothing is created. `spec.deleteBackup: true` deletes the data through a
//! DeleteBackupRequest; a plain delete removes only the Velero Backup CR.

use granary_runtime::passes::run_passes;
use std::sync::Arc;

use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use tokio::sync::Notify;

use super::plan::{
    adopted_nacuuid, backup_problems, message, nab_annotations, nab_labels, origin_matches,
    queue_position, refused_at, set_condition, velero_backup, was_queued,
};
use super::{is_conflict, is_not_found, list_params, now, poke, set_finalizer, write_status};
use crate::context::VeleroContext;
use crate::watch::each_event;
use granary_api::common::FieldError;
use granary_api::oadp::{
    CONDITION_ACCEPTED, CONDITION_DELETING, CONDITION_QUEUED, MESSAGE_BACKUP_ACCEPTED,
    MESSAGE_BACKUP_DELETION_ACCEPTED, MESSAGE_BACKUP_SCHEDULED,
    MESSAGE_PERMANENT_DELETION_REQUIRED, NAB_FINALIZER, NAB_ORIGIN_NACUUID_LABEL,
    NAB_ORIGIN_NAMESPACE_ANNOTATION, NABSL_ORIGIN_NAMESPACE_ANNOTATION, NonAdminBackup,
    NonAdminBackupStatus, NonAdminBackupStorageLocation, NonAdminPhase, NonAdminRestore, QueueInfo,
    REASON_BACKUP_ACCEPTED, REASON_BACKUP_SCHEDULED, REASON_DELETION_PENDING,
    REASON_INVALID_BACKUP_SPEC, REASON_LOCATION_NOT_READY, REASON_VELERO_BACKUP_NOT_FOUND,
    VeleroBackup, VeleroDeleteBackupRequest, nac_object_name,
};
use granary_api::velero::{
    BACKUP_NAME_LABEL, BACKUP_UID_LABEL, Backup, BackupStorageLocation, BackupStorageLocationPhase,
    DeleteBackupRequest, DeleteBackupRequestSpec,
};

/// Runs the controller until dropped: a pass on every change of a NonAdminBackup, a
/// Velero Backup, a DeleteBackupRequest or a NonAdminBackupStorageLocation, and every
/// recheck period.
pub async fn run(ctx: Arc<VeleroContext>) {
    let wake = Arc::new(Notify::new());
    let nabs: Api<NonAdminBackup> = Api::all(ctx.client.clone());
    let feeds = async {
        tokio::join!(
            each_event(nabs, "NonAdminBackups", poke(wake.clone())),
            each_event(ctx.api::<Backup>(), "Backups", poke(wake.clone())),
            each_event(
                ctx.api::<DeleteBackupRequest>(),
                "DeleteBackupRequests",
                poke(wake.clone())
            ),
            // A NAB waiting for its own location goes on once the location is ready.
            each_event(
                Api::<NonAdminBackupStorageLocation>::all(ctx.client.clone()),
                "NonAdminBackupStorageLocations",
                poke(wake.clone())
            ),
        )
    };
    let work = async {
        let every = ctx.settings.queued_backup_recheck_frequency.0;
        run_passes("non-admin backup pass failed", Some(&wake), every, || {
            pass(&ctx)
        })
        .await
    };
    tokio::join!(feeds, work);
}

async fn pass(ctx: &VeleroContext) -> Result<(), kube::Error> {
    let nabs = Api::<NonAdminBackup>::all(ctx.client.clone())
        .list(&list_params(ctx))
        .await?
        .items;
    let backups = ctx
        .api::<Backup>()
        .list(&ListParams::default())
        .await?
        .items;
    for nab in nabs {
        if let Err(e) = reconcile(ctx, &nab, &backups).await {
            tracing::warn!(namespace = %nab.namespace().unwrap_or_default(), name = %nab.name_any(), error = %e, "non-admin backup");
        }
    }
    Ok(())
}

fn nacuuid(status: &NonAdminBackupStatus) -> Option<String> {
    status.velero_backup.as_ref()?.nacuuid.clone()
}

async fn reconcile(
    ctx: &VeleroContext,
    nab: &NonAdminBackup,
    backups: &[Backup],
) -> Result<(), kube::Error> {
    let ns = nab.namespace().unwrap_or_default();
    let old = nab.status.clone();
    let mut status = old.clone().unwrap_or_default();
    // A NAB the sync recreated takes over its Velero Backup.
    let uuid = nacuuid(&status).or_else(|| adopted_nacuuid(nab, backups));
    // Only a Velero Backup made for this namespace counts as this NAB's.
    let velero = uuid.as_ref().and_then(|u| {
        backups.iter().find(|b| {
            b.name_any() == *u
                && origin_matches(b.annotations(), NAB_ORIGIN_NAMESPACE_ANNOTATION, &ns)
        })
    });
    let generation = nab.meta().generation;

    if nab.meta().deletion_timestamp.is_some() {
        return finalize(ctx, nab, &mut status, uuid.as_deref(), velero).await;
    }
    if nab.delete_requested() {
        status.phase = Some(NonAdminPhase::Deleting);
        set_condition(
            status.conditions.get_or_insert_with(Vec::new),
            CONDITION_DELETING,
            true,
            (REASON_DELETION_PENDING, MESSAGE_BACKUP_DELETION_ACCEPTED),
            generation,
            now(ctx),
        );
        write_status(ctx, nab, old.as_ref(), &status).await?;
        // The finalizer holds the NAB until the data is gone.
        return match super::namespaced(ctx, nab)
            .delete(&nab.name_any(), &DeleteParams::default())
            .await
        {
            Err(e) if !is_not_found(&e) => Err(e),
            _ => Ok(()),
        };
    }

    let velero = match velero {
        Some(v) => v.clone(),
        None if was_queued(status.conditions.as_ref()) => {
            // The Velero Backup went away under a NAB that had one.
            status.phase = Some(NonAdminPhase::BackingOff);
            let name = uuid.clone().unwrap_or_default();
            set_condition(
                status.conditions.get_or_insert_with(Vec::new),
                CONDITION_QUEUED,
                false,
                (
                    REASON_VELERO_BACKUP_NOT_FOUND,
                    &format!("Velero Backup {name} not found"),
                ),
                generation,
                now(ctx),
            );
            return write_status(ctx, nab, old.as_ref(), &status).await;
        }
        None => {
            // A refusal stands for its generation, except for a backup that names a
            // location: the location may come after the backup (both applied together,
            // the backup seen first), so that backup is looked at again on every pass;
            // an unchanged refusal writes nothing.
            let names_location = nab
                .spec
                .backup_spec
                .storage_location
                .as_deref()
                .is_some_and(|l| !l.is_empty());
            if refused_at(status.conditions.as_ref(), generation) && !names_location {
                return Ok(());
            }
            let mut problems = backup_problems(
                nab,
                &ctx.settings.non_admin.enforce_backup_spec,
                ctx.namespace(),
            );
            let mut waiting = None;
            let location = match storage_location(ctx, nab).await? {
                Ok(l) => l,
                Err(LocationProblem::Refused(e)) => {
                    problems.push(e);
                    None
                }
                Err(LocationProblem::NotReady(e)) => {
                    waiting = Some(e);
                    None
                }
            };
            if let (true, Some(e)) = (problems.is_empty(), &waiting) {
                // Nothing wrong with the spec: the location is not ready yet.
                status.phase = Some(NonAdminPhase::BackingOff);
                set_condition(
                    status.conditions.get_or_insert_with(Vec::new),
                    CONDITION_ACCEPTED,
                    false,
                    (REASON_LOCATION_NOT_READY, &message(std::slice::from_ref(e))),
                    generation,
                    now(ctx),
                );
                return write_status(ctx, nab, old.as_ref(), &status).await;
            }
            problems.extend(waiting);
            if !problems.is_empty() {
                status.phase = Some(NonAdminPhase::BackingOff);
                set_condition(
                    status.conditions.get_or_insert_with(Vec::new),
                    CONDITION_ACCEPTED,
                    false,
                    (REASON_INVALID_BACKUP_SPEC, &message(&problems)),
                    generation,
                    now(ctx),
                );
                return write_status(ctx, nab, old.as_ref(), &status).await;
            }
            set_condition(
                status.conditions.get_or_insert_with(Vec::new),
                CONDITION_ACCEPTED,
                true,
                (REASON_BACKUP_ACCEPTED, MESSAGE_BACKUP_ACCEPTED),
                generation,
                now(ctx),
            );
            let uuid = uuid
                .unwrap_or_else(|| nac_object_name(&ns, &nab.name_any(), &uuid::Uuid::new_v4()));
            status.phase.get_or_insert(NonAdminPhase::New);
            status.velero_backup = Some(VeleroBackup {
                nacuuid: Some(uuid.clone()),
                name: Some(uuid.clone()),
                namespace: Some(ctx.namespace().to_string()),
                ..Default::default()
            });
            // The NACUUID is recorded before the Velero Backup exists, so a restart
            // finds the same one.
            write_status(ctx, nab, old.as_ref(), &status).await?;
            let fresh = super::namespaced(ctx, nab).get(&nab.name_any()).await?;
            set_finalizer(ctx, &fresh, NAB_FINALIZER, true).await?;
            let mut body = velero_backup(
                nab,
                &ctx.settings.non_admin.enforce_backup_spec,
                ctx.namespace(),
                &uuid,
                location,
            );
            ctx.selector
                .label(body.metadata.labels.get_or_insert_default());
            match ctx
                .api::<Backup>()
                .create(&PostParams::default(), &body)
                .await
            {
                Ok(b) => b,
                Err(e) if is_conflict(&e) => ctx.api::<Backup>().get(&uuid).await?,
                Err(e) => return Err(e),
            }
        }
    };
    set_condition(
        status.conditions.get_or_insert_with(Vec::new),
        CONDITION_QUEUED,
        true,
        (REASON_BACKUP_SCHEDULED, MESSAGE_BACKUP_SCHEDULED),
        generation,
        now(ctx),
    );
    status.phase = Some(NonAdminPhase::Created);
    let name = velero.name_any();
    status.velero_backup = Some(VeleroBackup {
        spec: Some(velero.spec.clone()),
        status: velero.status.clone(),
        nacuuid: Some(name.clone()),
        name: Some(name.clone()),
        namespace: Some(ctx.namespace().to_string()),
    });
    let completed = |b: &Backup| {
        b.status
            .as_ref()
            .is_some_and(|s| s.completion_timestamp.is_some())
    };
    status.queue_info = Some(QueueInfo {
        estimated_queue_position: queue_position(
            velero.meta().creation_timestamp.as_ref(),
            completed(&velero),
            backups
                .iter()
                .filter(|b| b.name_any() != name)
                .map(|b| (b.meta().creation_timestamp.clone(), completed(b))),
        ),
    });
    // Re-read so the status write does not race the finalizer patch's version; a NAB
    // that took over a synced Velero Backup gets its finalizer here.
    let current = super::namespaced(ctx, nab).get(&nab.name_any()).await?;
    set_finalizer(ctx, &current, NAB_FINALIZER, true).await?;
    write_status(ctx, &current, current.status.as_ref(), &status).await
}

/// Why a NAB's `storageLocation` cannot be used.
enum LocationProblem {
    /// Not a location of this namespace: the NAB is refused until its spec changes.
    Refused(FieldError),
    /// The owner's location exists but is not ready yet: the NAB waits for it.
    NotReady(FieldError),
}

/// `storageLocation` must name a NonAdminBackupStorageLocation of the NAB's namespace
/// that is `Created` and whose Velero location is `Available`; the Velero location's
/// name is returned. Unset means Velero's default location.
async fn storage_location(
    ctx: &VeleroContext,
    nab: &NonAdminBackup,
) -> Result<Result<Option<String>, LocationProblem>, kube::Error> {
    let Some(name) = nab
        .spec
        .backup_spec
        .storage_location
        .clone()
        .filter(|s| !s.is_empty())
    else {
        return Ok(Ok(None));
    };
    let ns = nab.namespace().unwrap_or_default();
    let field = "spec.backupSpec.storageLocation";
    let refuse = |m: String| Ok(Err(LocationProblem::Refused(FieldError::new(field, m))));
    let not_ready = |m: String| Ok(Err(LocationProblem::NotReady(FieldError::new(field, m))));
    let api: Api<NonAdminBackupStorageLocation> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(nabsl) = api.get_opt(&name).await? else {
        return refuse(format!(
            "NonAdminBackupStorageLocation {name:?} not found in namespace {ns}"
        ));
    };
    let status = nabsl.status.unwrap_or_default();
    let uuid = status
        .velero_backup_storage_location
        .and_then(|v| v.nacuuid)
        .filter(|_| status.phase == Some(NonAdminPhase::Created));
    let Some(uuid) = uuid else {
        return not_ready(format!(
            "NonAdminBackupStorageLocation {name:?} is not ready (phase Created required)"
        ));
    };
    // Only a Velero location made for a NABSL of this namespace counts.
    let available = ctx
        .api::<BackupStorageLocation>()
        .get_opt(&uuid)
        .await?
        .filter(|l| origin_matches(l.annotations(), NABSL_ORIGIN_NAMESPACE_ANNOTATION, &ns))
        .and_then(|l| l.status)
        .and_then(|s| s.phase)
        == Some(BackupStorageLocationPhase::Available);
    if !available {
        return not_ready(format!(
            "the backup storage location of NonAdminBackupStorageLocation {name:?} is not Available"
        ));
    }
    Ok(Ok(Some(uuid)))
}

/// A NAB being deleted: with `deleteBackup`, its restores and a DeleteBackupRequest
/// first and the finalizer once the Velero Backup is gone; without, only the Velero
/// Backup CR (the data stays in object storage).
async fn finalize(
    ctx: &VeleroContext,
    nab: &NonAdminBackup,
    status: &mut NonAdminBackupStatus,
    uuid: Option<&str>,
    velero: Option<&Backup>,
) -> Result<(), kube::Error> {
    if !nab.finalizers().iter().any(|f| f == NAB_FINALIZER) {
        return Ok(());
    }
    let old = nab.status.clone();
    let ns = nab.namespace().unwrap_or_default();
    let dbrs = ctx.api::<DeleteBackupRequest>();
    let requests = match uuid {
        Some(u) => {
            dbrs.list(&ListParams::default().labels(&format!("{NAB_ORIGIN_NACUUID_LABEL}={u}")))
                .await?
                .items
        }
        None => Vec::new(),
    };
    let generation = nab.meta().generation;
    if nab.delete_requested() {
        let restores: Api<NonAdminRestore> = Api::namespaced(ctx.client.clone(), &ns);
        for r in restores.list(&ListParams::default()).await?.items {
            if r.spec.restore_spec.backup_name.as_deref() == Some(nab.name_any().as_str()) {
                match restores
                    .delete(&r.name_any(), &DeleteParams::default())
                    .await
                {
                    Err(e) if !is_not_found(&e) => return Err(e),
                    _ => {}
                }
            }
        }
        if let (Some(velero), Some(uuid)) = (velero, uuid) {
            let request = match requests.first() {
                Some(r) => r.clone(),
                None => {
                    let mut labels = nab_labels(uuid);
                    labels.insert(BACKUP_NAME_LABEL.into(), velero.name_any());
                    labels.insert(BACKUP_UID_LABEL.into(), velero.uid().unwrap_or_default());
                    ctx.selector.label(&mut labels);
                    let mut r = DeleteBackupRequest::new(
                        "",
                        DeleteBackupRequestSpec {
                            backup_name: velero.name_any(),
                        },
                    );
                    r.metadata.name = None;
                    r.metadata.generate_name = Some(format!("{}-", velero.name_any()));
                    r.metadata.labels = Some(labels);
                    r.metadata.annotations = Some(nab_annotations(nab));
                    dbrs.create(&PostParams::default(), &r).await?
                }
            };
            status.velero_delete_backup_request = Some(VeleroDeleteBackupRequest {
                status: request.status.clone(),
                nacuuid: Some(uuid.to_string()),
                name: Some(request.name_any()),
                namespace: Some(ctx.namespace().to_string()),
            });
            return write_status(ctx, nab, old.as_ref(), status).await;
        }
    } else {
        status.phase = Some(NonAdminPhase::Deleting);
        set_condition(
            status.conditions.get_or_insert_with(Vec::new),
            CONDITION_DELETING,
            true,
            (REASON_DELETION_PENDING, MESSAGE_PERMANENT_DELETION_REQUIRED),
            generation,
            now(ctx),
        );
        write_status(ctx, nab, old.as_ref(), status).await?;
        for r in &requests {
            match dbrs.delete(&r.name_any(), &DeleteParams::default()).await {
                Err(e) if !is_not_found(&e) => return Err(e),
                _ => {}
            }
        }
        if let Some(velero) = velero {
            match ctx
                .api::<Backup>()
                .delete(&velero.name_any(), &DeleteParams::default())
                .await
            {
                Err(e) if !is_not_found(&e) => return Err(e),
                _ => return Ok(()),
            }
        }
    }
    let current = super::namespaced(ctx, nab).get(&nab.name_any()).await?;
    set_finalizer(ctx, &current, NAB_FINALIZER, false).await
}
