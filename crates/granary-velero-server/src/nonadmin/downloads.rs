//! The NonAdminDownloadRequest controller (NAC's `nonadmindownloadrequest_controller.go`):
//! a request whose target is a NonAdminBackup or NonAdminRestore of its own namespace
//! ([`super::plan::velero_download_request`]) gets a Velero DownloadRequest `nadr-<uid>`
//! in the Velero namespace, which the `download-request` controller serves; its status
//! (URL, expiration, phase) is mirrored into `status.velero.status` and the request is
//! `Created`. Any other target leaves it `BackingOff` with NAC's condition type (`True`)
//! and a message naming the field; nothing is created. Once the URL has expired the
//! Velero DownloadRequest and then the request are deleted; a Velero DownloadRequest
//! whose NonAdminDownloadRequest is gone is deleted too.

use granary_runtime::passes::run_passes;
use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use tokio::sync::Notify;

use super::plan::{backup_name, expired, nadr_origin, velero_download_request};
use super::{is_conflict, is_not_found, list_params, now, poke, write_status};
use crate::context::VeleroContext;
use crate::watch::each_event;
use granary_api::oadp::{
    CONDITION_PROCESSED, NonAdminBackup, NonAdminDownloadRequest, NonAdminPhase, NonAdminRestore,
    REASON_DOWNLOAD_PROCESSED, REASON_ERROR, VeleroDownloadRequest,
};
use granary_api::velero::{Backup, DownloadRequest, DownloadRequestPhase, Restore};

/// Runs the controller until dropped: a pass on every change of a NonAdminDownloadRequest
/// or a Velero DownloadRequest, and every recheck period (which notices expiry).
pub async fn run(ctx: Arc<VeleroContext>) {
    let wake = Arc::new(Notify::new());
    let feeds = async {
        tokio::join!(
            each_event(
                Api::<NonAdminDownloadRequest>::all(ctx.client.clone()),
                "NonAdminDownloadRequests",
                poke(wake.clone())
            ),
            each_event(
                ctx.api::<DownloadRequest>(),
                "DownloadRequests",
                poke(wake.clone())
            ),
        )
    };
    let work = async {
        let every = ctx.settings.queued_backup_recheck_frequency.0;
        run_passes(
            "non-admin download request pass failed",
            Some(&wake),
            every,
            || pass(&ctx),
        )
        .await
    };
    tokio::join!(feeds, work);
}

async fn pass(ctx: &VeleroContext) -> Result<(), kube::Error> {
    let lp = ListParams::default();
    // Velero requests first: an origin created after this list cannot be taken as gone.
    let velero = ctx.api::<DownloadRequest>().list(&lp).await?.items;
    let nadrs = Api::<NonAdminDownloadRequest>::all(ctx.client.clone())
        .list(&list_params(ctx))
        .await?
        .items;
    let all_nadrs: BTreeSet<(String, String)> =
        Api::<NonAdminDownloadRequest>::all(ctx.client.clone())
            .list(&lp)
            .await?
            .items
            .iter()
            .map(|n| (n.namespace().unwrap_or_default(), n.name_any()))
            .collect();
    for dr in &velero {
        if let Some(origin) = nadr_origin(dr)
            && !all_nadrs.contains(&origin)
        {
            delete(ctx.api::<DownloadRequest>(), &dr.name_any()).await?;
        }
    }
    if nadrs.is_empty() {
        return Ok(());
    }
    let backups = ctx.api::<Backup>().list(&lp).await?.items;
    let restores = ctx.api::<Restore>().list(&lp).await?.items;
    for nadr in nadrs {
        if let Err(e) = reconcile(ctx, &nadr, &velero, &backups, &restores).await {
            tracing::warn!(namespace = %nadr.namespace().unwrap_or_default(), name = %nadr.name_any(), error = %e, "non-admin download request");
        }
    }
    Ok(())
}

async fn delete<K>(api: Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Err(e) if !is_not_found(&e) => Err(e),
        _ => Ok(()),
    }
}

async fn reconcile(
    ctx: &VeleroContext,
    nadr: &NonAdminDownloadRequest,
    velero: &[DownloadRequest],
    backups: &[Backup],
    restores: &[Restore],
) -> Result<(), kube::Error> {
    let Some(name) = nadr.velero_download_request_name() else {
        return Ok(());
    };
    if nadr.meta().deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = nadr.namespace().unwrap_or_default();
    let old = nadr.status.clone();
    let mut status = old.clone().unwrap_or_default();
    let mirrored = status.velero.as_ref().and_then(|v| v.status.as_ref());
    if expired(mirrored, ctx.clock.now()) {
        delete(ctx.api::<DownloadRequest>(), &name).await?;
        return delete(super::namespaced(ctx, nadr), &nadr.name_any()).await;
    }
    // A refused request stays refused: NAC expects a new one.
    if status.phase == Some(NonAdminPhase::BackingOff) {
        return Ok(());
    }
    let existing = velero.iter().find(|d| d.name_any() == name);
    let existing = match existing {
        Some(d) => d.clone(),
        None if status.phase == Some(NonAdminPhase::Created) => {
            // Served before and gone since (expired and deleted by Velero's side).
            return delete(super::namespaced(ctx, nadr), &nadr.name_any()).await;
        }
        None => {
            let target = &nadr.spec.target;
            let nars: Api<NonAdminRestore> = Api::namespaced(ctx.client.clone(), &ns);
            let nabs: Api<NonAdminBackup> = Api::namespaced(ctx.client.clone(), &ns);
            let nar = if target.kind.is_restore_target() && !target.name.is_empty() {
                nars.get_opt(&target.name).await?
            } else {
                None
            };
            let nab_name = backup_name(target, nar.as_ref());
            let nab = if nab_name.is_empty() {
                None
            } else {
                nabs.get_opt(&nab_name).await?
            };
            match velero_download_request(
                nadr,
                ctx.namespace(),
                nab.as_ref(),
                nar.as_ref(),
                backups,
                restores,
            ) {
                Ok(mut body) => {
                    ctx.selector
                        .label(body.metadata.labels.get_or_insert_default());
                    match ctx
                        .api::<DownloadRequest>()
                        .create(&PostParams::default(), &body)
                        .await
                    {
                        Ok(d) => d,
                        Err(e) if is_conflict(&e) => {
                            ctx.api::<DownloadRequest>().get(&name).await?
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(refusal) => {
                    status.phase = Some(NonAdminPhase::BackingOff);
                    status.conditions = Some(vec![Condition {
                        type_: refusal.condition.to_string(),
                        status: "True".into(),
                        reason: REASON_ERROR.into(),
                        message: refusal.error.to_string(),
                        last_transition_time: now(ctx),
                        observed_generation: nadr.meta().generation,
                    }]);
                    return write_status(ctx, nadr, old.as_ref(), &status).await;
                }
            }
        }
    };
    let processed = existing.status.as_ref().is_some_and(|s| {
        s.phase == Some(DownloadRequestPhase::Processed)
            && s.download_url.as_ref().is_some_and(|u| !u.is_empty())
    });
    status.velero = Some(VeleroDownloadRequest {
        status: existing.status.clone(),
    });
    if processed {
        status.phase = Some(NonAdminPhase::Created);
        let keep = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == CONDITION_PROCESSED)
            .cloned();
        status.conditions = Some(vec![keep.unwrap_or_else(|| Condition {
            type_: CONDITION_PROCESSED.into(),
            status: "True".into(),
            reason: REASON_DOWNLOAD_PROCESSED.into(),
            message: "the download URL is ready".into(),
            last_transition_time: now(ctx),
            observed_generation: nadr.meta().generation,
        })]);
    } else {
        status.phase.get_or_insert(NonAdminPhase::New);
    }
    write_status(ctx, nadr, old.as_ref(), &status).await
}
