//! The NonAdminBackupStorageLocationRequests of `nonAdmin.requireApprovalForBSL`: filed in
//! the Velero namespace (where only administrators reach them) under the NABSL's NACUUID,
//! kept asking about the NABSL's current spec (a changed spec sets the decision back to
//! `pending`), their phase following the administrator's decision, and removed with the
//! NABSL. What a decision means is [`super::plan::approval`].

use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::plan::{Approval, location_request, request_status};
use super::{is_conflict, is_not_found};
use crate::context::VeleroContext;
use granary_api::oadp::{
    NonAdminBackupStorageLocation, NonAdminBackupStorageLocationRequest, NonAdminBslRequestPhase,
};

/// Brings the request for `nabsl` (named `uuid`) in line with `decision`: files it when
/// missing, asks again about a changed spec, and records the decision's phase.
pub async fn record(
    ctx: &VeleroContext,
    nabsl: &NonAdminBackupStorageLocation,
    uuid: &str,
    request: Option<&NonAdminBackupStorageLocationRequest>,
    decision: Approval,
) -> Result<(), kube::Error> {
    let api = ctx.api::<NonAdminBackupStorageLocationRequest>();
    let phase = match decision {
        Approval::Missing => {
            let mut body = location_request(nabsl, ctx.namespace(), uuid);
            ctx.selector
                .label(body.metadata.labels.get_or_insert_default());
            match api.create(&PostParams::default(), &body).await {
                Err(e) if !is_conflict(&e) => return Err(e),
                _ => {}
            }
            NonAdminBslRequestPhase::Pending
        }
        Approval::Outdated => {
            // The earlier decision was about another spec: ask again.
            api.patch(
                uuid,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"approvalDecision": "pending"}})),
            )
            .await?;
            NonAdminBslRequestPhase::Pending
        }
        Approval::Pending => NonAdminBslRequestPhase::Pending,
        Approval::Approved => NonAdminBslRequestPhase::Approved,
        Approval::Rejected => NonAdminBslRequestPhase::Rejected,
    };
    let status = request_status(nabsl, uuid, phase);
    if request.and_then(|r| r.status.as_ref()) == Some(&status) {
        return Ok(());
    }
    // The whole status is replaced: a merge would keep fields the new spec left out.
    let mut current = api.get(uuid).await?;
    current.status = Some(status);
    api.replace_status(uuid, &PostParams::default(), &current)
        .await
        .map(|_| ())
}

/// Deletes the request named `uuid`, if any.
pub async fn remove(ctx: &VeleroContext, uuid: &str) -> Result<(), kube::Error> {
    match ctx
        .api::<NonAdminBackupStorageLocationRequest>()
        .delete(uuid, &DeleteParams::default())
        .await
    {
        Err(e) if !is_not_found(&e) => Err(e),
        _ => Ok(()),
    }
}
