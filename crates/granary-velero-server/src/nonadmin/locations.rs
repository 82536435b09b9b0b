//! The NonAdminBackupStorageLocation controller (as NAC's
//! `nonadminbackupstoragelocation_controller.go` does it; see
//! docs/controllers.md#non-admin-controllers). A valid NABSL gets a NACUUID, the
//! finalizer, a copy of its credentials Secret and a Velero BackupStorageLocation in the
//! Velero namespace, both named by the NACUUID, the location's prefix forced under
//! `<namespace>/`; its status mirrors the location. An invalid one is `BackingOff` with
//! `Accepted=False` naming the field, and nothing is created. With
//! `nonAdmin.requireApprovalForBSL` nothing is created either until an administrator
//! approves the NonAdminBackupStorageLocationRequest filed for it
//! ([`super::location_requests`]); a spec changed later waits for a new approval while
//! the approved one stays in use. Deleting a NABSL removes the location, the Secret copy
//! and the request first.

use granary_runtime::passes::run_passes;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use tokio::sync::Notify;

use super::location_requests;
use super::plan::{
    Approval, approval, credential_problem, location_problems, message, origin_matches, refused_at,
    reserved_bucket_problem, secret_copy, set_condition, shared_directory_problem, velero_location,
};
use super::{is_conflict, is_not_found, list_params, now, poke, set_finalizer, write_status};
use crate::context::VeleroContext;
use crate::watch::each_event;
use granary_api::oadp::{
    CONDITION_ACCEPTED, CONDITION_BACKUP_STORAGE_LOCATION_SYNCED, CONDITION_CLUSTER_ADMIN_APPROVED,
    CONDITION_SECRET_SYNCED, CONDITION_SPEC_UPDATE_APPROVED, MESSAGE_BSL_ACCEPTED,
    MESSAGE_BSL_APPROVED, MESSAGE_BSL_CREATED, MESSAGE_BSL_PENDING_APPROVAL, MESSAGE_BSL_REJECTED,
    MESSAGE_BSL_UPDATE_APPROVED, MESSAGE_BSL_UPDATE_PENDING, MESSAGE_BSL_UPDATED,
    MESSAGE_SECRET_CREATED, MESSAGE_SECRET_UPDATED, NABSL_FINALIZER,
    NABSL_ORIGIN_NAMESPACE_ANNOTATION, NonAdminBackupStorageLocation,
    NonAdminBackupStorageLocationRequest, NonAdminBackupStorageLocationStatus, NonAdminPhase,
    REASON_BSL_APPROVED, REASON_BSL_CREATED, REASON_BSL_PENDING_APPROVAL, REASON_BSL_REJECTED,
    REASON_BSL_SPEC_VALIDATION, REASON_BSL_UPDATE_APPROVED, REASON_BSL_UPDATE_PENDING,
    REASON_BSL_UPDATED, REASON_SECRET_CREATED, REASON_SECRET_UPDATED, VeleroBackupStorageLocation,
    nac_object_name,
};
use granary_api::velero::BackupStorageLocation;

/// Runs the controller until dropped: a pass on every change of a NABSL, a Velero
/// location or an approval request, and every recheck period (which also picks up
/// changed credentials in the user's Secret).
pub async fn run(ctx: Arc<VeleroContext>) {
    let wake = Arc::new(Notify::new());
    let feeds = async {
        tokio::join!(
            each_event(
                Api::<NonAdminBackupStorageLocation>::all(ctx.client.clone()),
                "NonAdminBackupStorageLocations",
                poke(wake.clone())
            ),
            each_event(
                ctx.api::<BackupStorageLocation>(),
                "BackupStorageLocations",
                poke(wake.clone())
            ),
            async {
                if ctx.settings.non_admin.require_approval_for_bsl {
                    each_event(
                        ctx.api::<NonAdminBackupStorageLocationRequest>(),
                        "NonAdminBackupStorageLocationRequests",
                        poke(wake.clone()),
                    )
                    .await
                }
            },
        )
    };
    let work = async {
        let every = ctx.settings.queued_backup_recheck_frequency.0;
        run_passes(
            "non-admin backup storage location pass failed",
            Some(&wake),
            every,
            || pass(&ctx),
        )
        .await
    };
    tokio::join!(feeds, work);
}

async fn pass(ctx: &VeleroContext) -> Result<(), kube::Error> {
    let nabsls = Api::<NonAdminBackupStorageLocation>::all(ctx.client.clone())
        .list(&list_params(ctx))
        .await?
        .items;
    if nabsls.is_empty() {
        return Ok(());
    }
    let lp = ListParams::default();
    let locations = ctx.api::<BackupStorageLocation>().list(&lp).await?.items;
    let requests = if ctx.settings.non_admin.require_approval_for_bsl {
        ctx.api::<NonAdminBackupStorageLocationRequest>()
            .list(&lp)
            .await?
            .items
    } else {
        Vec::new()
    };
    let landscape = landscape_buckets(ctx).await?;
    for nabsl in nabsls {
        if let Err(e) = reconcile(ctx, &nabsl, &locations, &requests, &landscape).await {
            tracing::warn!(namespace = %nabsl.namespace().unwrap_or_default(), name = %nabsl.name_any(), error = %e, "non-admin backup storage location");
        }
    }
    Ok(())
}

/// The landscape's shared buckets this server knows: the seed's extension BackupBuckets
/// (none where the kind is not served, as under `granary server` on a plain cluster).
async fn landscape_buckets(ctx: &VeleroContext) -> Result<Vec<String>, kube::Error> {
    match Api::<granary_api::extensions::BackupBucket>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(list.items.iter().map(|b| b.name_any()).collect()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

fn nacuuid(status: &NonAdminBackupStorageLocationStatus) -> Option<String> {
    status
        .velero_backup_storage_location
        .as_ref()?
        .nacuuid
        .clone()
}

fn condition(
    ctx: &VeleroContext,
    status: &mut NonAdminBackupStorageLocationStatus,
    type_: &str,
    ok: bool,
    why: (&str, &str),
    generation: Option<i64>,
) {
    set_condition(
        status.conditions.get_or_insert_with(Vec::new),
        type_,
        ok,
        why,
        generation,
        now(ctx),
    );
}

async fn reconcile(
    ctx: &VeleroContext,
    nabsl: &NonAdminBackupStorageLocation,
    locations: &[BackupStorageLocation],
    requests: &[NonAdminBackupStorageLocationRequest],
    landscape: &[String],
) -> Result<(), kube::Error> {
    let ns = nabsl.namespace().unwrap_or_default();
    let old = nabsl.status.clone();
    let mut status = old.clone().unwrap_or_default();
    let uuid = nacuuid(&status);
    let generation = nabsl.meta().generation;
    if nabsl.meta().deletion_timestamp.is_some() {
        return finalize(ctx, nabsl, &mut status, uuid.as_deref()).await;
    }
    // Only a location made for this namespace counts as this NABSL's.
    let velero = uuid.as_ref().and_then(|u| {
        locations.iter().find(|l| {
            l.name_any() == *u
                && origin_matches(l.annotations(), NABSL_ORIGIN_NAMESPACE_ANNOTATION, &ns)
        })
    });
    if refused_at(status.conditions.as_ref(), generation) {
        return Ok(());
    }
    status.phase.get_or_insert(NonAdminPhase::New);

    let spec = &nabsl.spec.backup_storage_location_spec;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let source = match spec.credential.as_ref().filter(|c| !c.name.is_empty()) {
        Some(c) => secrets.get_opt(&c.name).await?,
        None => None,
    };
    let nac_sync = chrono::TimeDelta::from_std(ctx.settings.non_admin.backup_sync_period.0).ok();
    let mut problems = location_problems(
        nabsl,
        &ctx.settings.non_admin.enforce_bsl_spec,
        ctx.namespace(),
        nac_sync,
    );
    if spec.credential.as_ref().is_some_and(|c| !c.name.is_empty())
        && let Some(p) = credential_problem(nabsl, source.as_ref())
        && !problems.iter().any(|have| have.path == p.path)
    {
        problems.push(p);
    }
    // The location it would become must not share keys with any other location of the
    // Velero namespace (an administrator's above all).
    let draft = velero_location(
        nabsl,
        &ctx.settings.non_admin.enforce_bsl_spec,
        ctx.namespace(),
        uuid.as_deref().unwrap_or_default(),
    );
    let others: Vec<BackupStorageLocation> = locations
        .iter()
        .filter(|l| Some(l.name_any()) != uuid)
        .cloned()
        .collect();
    if let Some(p) = shared_directory_problem(&draft, &others)
        && !problems.iter().any(|have| have.path == p.path)
    {
        problems.push(p);
    }
    let admins: Vec<BackupStorageLocation> = others
        .into_iter()
        .filter(|l| crate::location::tenant_namespace(l).is_none())
        .collect();
    if let Some(p) = reserved_bucket_problem(
        &draft,
        &ctx.settings.non_admin.enforce_bsl_spec,
        &admins,
        landscape,
        &ctx.settings.non_admin.allowed_local_buckets,
    ) && !problems.iter().any(|have| have.path == p.path)
    {
        problems.push(p);
    }
    if !problems.is_empty() {
        status.phase = Some(NonAdminPhase::BackingOff);
        condition(
            ctx,
            &mut status,
            CONDITION_ACCEPTED,
            false,
            (REASON_BSL_SPEC_VALIDATION, &message(&problems)),
            generation,
        );
        return write_status(ctx, nabsl, old.as_ref(), &status).await;
    }
    condition(
        ctx,
        &mut status,
        CONDITION_ACCEPTED,
        true,
        (REASON_BSL_SPEC_VALIDATION, MESSAGE_BSL_ACCEPTED),
        generation,
    );
    let uuid =
        uuid.unwrap_or_else(|| nac_object_name(&ns, &nabsl.name_any(), &uuid::Uuid::new_v4()));
    let mirrored = status
        .velero_backup_storage_location
        .take()
        .unwrap_or_default();
    status.velero_backup_storage_location = Some(VeleroBackupStorageLocation {
        nacuuid: Some(uuid.clone()),
        name: Some(uuid.clone()),
        namespace: Some(ctx.namespace().to_string()),
        ..mirrored
    });
    // The NACUUID is recorded before anything is created, so a restart finds the same one.
    write_status(ctx, nabsl, old.as_ref(), &status).await?;
    let current = super::namespaced(ctx, nabsl).get(&nabsl.name_any()).await?;
    set_finalizer(ctx, &current, NABSL_FINALIZER, true).await?;

    if ctx.settings.non_admin.require_approval_for_bsl {
        let request = requests.iter().find(|r| r.name_any() == uuid);
        let decision = approval(nabsl, request);
        location_requests::record(ctx, nabsl, &uuid, request, decision).await?;
        match decision {
            Approval::Approved => {
                condition(
                    ctx,
                    &mut status,
                    CONDITION_CLUSTER_ADMIN_APPROVED,
                    true,
                    (REASON_BSL_APPROVED, MESSAGE_BSL_APPROVED),
                    generation,
                );
                let waited = status
                    .conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == CONDITION_SPEC_UPDATE_APPROVED && c.status == "False");
                if waited {
                    condition(
                        ctx,
                        &mut status,
                        CONDITION_SPEC_UPDATE_APPROVED,
                        true,
                        (REASON_BSL_UPDATE_APPROVED, MESSAGE_BSL_UPDATE_APPROVED),
                        generation,
                    );
                }
            }
            Approval::Rejected => {
                remove_velero_objects(ctx, &uuid).await?;
                status.phase = Some(NonAdminPhase::BackingOff);
                if let Some(v) = status.velero_backup_storage_location.as_mut() {
                    v.status = None;
                }
                condition(
                    ctx,
                    &mut status,
                    CONDITION_CLUSTER_ADMIN_APPROVED,
                    false,
                    (REASON_BSL_REJECTED, MESSAGE_BSL_REJECTED),
                    generation,
                );
                return finish(ctx, nabsl, &status).await;
            }
            Approval::Missing | Approval::Outdated | Approval::Pending => {
                match velero {
                    // An approved location whose spec changed: the approved spec stays
                    // in use until the change is approved.
                    Some(v) => {
                        condition(
                            ctx,
                            &mut status,
                            CONDITION_SPEC_UPDATE_APPROVED,
                            false,
                            (REASON_BSL_UPDATE_PENDING, MESSAGE_BSL_UPDATE_PENDING),
                            generation,
                        );
                        mirror(&mut status, v);
                    }
                    None => condition(
                        ctx,
                        &mut status,
                        CONDITION_CLUSTER_ADMIN_APPROVED,
                        false,
                        (REASON_BSL_PENDING_APPROVAL, MESSAGE_BSL_PENDING_APPROVAL),
                        generation,
                    ),
                }
                return finish(ctx, nabsl, &status).await;
            }
        }
    }

    // The credentials: the user's Secret copied into the Velero namespace.
    if let Some(source) = &source {
        let mut copy = secret_copy(source, nabsl, ctx.namespace(), &uuid);
        ctx.selector
            .label(copy.metadata.labels.get_or_insert_default());
        let api: Api<Secret> = ctx.api();
        match api.get_opt(&uuid).await? {
            None => {
                match api.create(&PostParams::default(), &copy).await {
                    Err(e) if !is_conflict(&e) => return Err(e),
                    _ => {}
                }
                condition(
                    ctx,
                    &mut status,
                    CONDITION_SECRET_SYNCED,
                    true,
                    (REASON_SECRET_CREATED, MESSAGE_SECRET_CREATED),
                    generation,
                );
            }
            Some(have) if have.data != copy.data || have.type_ != copy.type_ => {
                let mut next = copy;
                next.metadata.resource_version = have.resource_version();
                api.replace(&uuid, &PostParams::default(), &next).await?;
                condition(
                    ctx,
                    &mut status,
                    CONDITION_SECRET_SYNCED,
                    true,
                    (REASON_SECRET_UPDATED, MESSAGE_SECRET_UPDATED),
                    generation,
                );
            }
            Some(_) => {}
        }
    }
    // The Velero location.
    let mut body = velero_location(
        nabsl,
        &ctx.settings.non_admin.enforce_bsl_spec,
        ctx.namespace(),
        &uuid,
    );
    ctx.selector
        .label(body.metadata.labels.get_or_insert_default());
    let api = ctx.api::<BackupStorageLocation>();
    let applied = match velero {
        None => {
            let made = match api.create(&PostParams::default(), &body).await {
                Ok(l) => l,
                Err(e) if is_conflict(&e) => api.get(&uuid).await?,
                Err(e) => return Err(e),
            };
            condition(
                ctx,
                &mut status,
                CONDITION_BACKUP_STORAGE_LOCATION_SYNCED,
                true,
                (REASON_BSL_CREATED, MESSAGE_BSL_CREATED),
                generation,
            );
            made
        }
        Some(have) if have.spec != body.spec => {
            let mut next = have.clone();
            next.spec = body.spec;
            let updated = api.replace(&uuid, &PostParams::default(), &next).await?;
            condition(
                ctx,
                &mut status,
                CONDITION_BACKUP_STORAGE_LOCATION_SYNCED,
                true,
                (REASON_BSL_UPDATED, MESSAGE_BSL_UPDATED),
                generation,
            );
            updated
        }
        Some(have) => have.clone(),
    };
    status.phase = Some(NonAdminPhase::Created);
    mirror(&mut status, &applied);
    finish(ctx, nabsl, &status).await
}

/// Copies the Velero location's status into the NABSL's.
fn mirror(status: &mut NonAdminBackupStorageLocationStatus, location: &BackupStorageLocation) {
    if let Some(v) = status.velero_backup_storage_location.as_mut() {
        v.status = location.status.clone();
    }
}

/// Writes `status` over the object as it is now (its finalizer patch moved its version).
async fn finish(
    ctx: &VeleroContext,
    nabsl: &NonAdminBackupStorageLocation,
    status: &NonAdminBackupStorageLocationStatus,
) -> Result<(), kube::Error> {
    let current = super::namespaced(ctx, nabsl).get(&nabsl.name_any()).await?;
    write_status(ctx, &current, current.status.as_ref(), status).await
}

/// Deletes the Velero location and the Secret copy made under `uuid`, if any.
async fn remove_velero_objects(ctx: &VeleroContext, uuid: &str) -> Result<(), kube::Error> {
    let dp = DeleteParams::default();
    for r in [
        ctx.api::<BackupStorageLocation>()
            .delete(uuid, &dp)
            .await
            .map(|_| ()),
        ctx.api::<Secret>().delete(uuid, &dp).await.map(|_| ()),
    ] {
        match r {
            Err(e) if !is_not_found(&e) => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// A NABSL being deleted: its location, Secret copy and approval request go, then the
/// finalizer.
async fn finalize(
    ctx: &VeleroContext,
    nabsl: &NonAdminBackupStorageLocation,
    status: &mut NonAdminBackupStorageLocationStatus,
    uuid: Option<&str>,
) -> Result<(), kube::Error> {
    if !nabsl.finalizers().iter().any(|f| f == NABSL_FINALIZER) {
        return Ok(());
    }
    let old = nabsl.status.clone();
    status.phase = Some(NonAdminPhase::Deleting);
    write_status(ctx, nabsl, old.as_ref(), status).await?;
    if let Some(uuid) = uuid {
        remove_velero_objects(ctx, uuid).await?;
        location_requests::remove(ctx, uuid).await?;
    }
    let current = super::namespaced(ctx, nabsl).get(&nabsl.name_any()).await?;
    set_finalizer(ctx, &current, NABSL_FINALIZER, false).await
}
