//! OADP's non-admin API (`oadp.openshift.io/v1alpha1`) served by Granary's own
//! controllers: a namespace owner backs up and restores their own namespace, and nothing
//! else, with NonAdminBackup and NonAdminRestore, in their own locations
//! (NonAdminBackupStorageLocation) if they like, and download their files
//! (NonAdminDownloadRequest); see docs/architecture.md#non-admin-backups. The Velero
//! objects they make live in the Velero namespace, which namespace owners cannot reach
//! themselves. Off unless `velero.nonAdmin.enable` is on.
//!
//! - [`plan`] (pure): validation, the Velero objects, the queue estimate, conditions;
//! - [`backups`]: the NonAdminBackup controller (deletion through DeleteBackupRequest);
//! - [`restores`]: the NonAdminRestore controller;
//! - [`locations`]: the NonAdminBackupStorageLocation controller, with
//!   [`location_requests`] for the administrator's approval;
//! - [`downloads`]: the NonAdminDownloadRequest controller;
//! - [`sync`]: NonAdminBackups recreated for their Velero Backups;
//! - [`gc`]: Velero objects whose non-admin origin is gone deleted.

pub mod backups;
pub mod downloads;
pub mod gc;
pub mod location_requests;
pub mod locations;
pub mod plan;
pub mod restores;
pub mod sync;

use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::context::VeleroContext;

/// Runs the NonAdminBackup, NonAdminRestore, NonAdminBackupStorageLocation,
/// NonAdminDownloadRequest, sync and garbage-collection controllers until dropped.
pub async fn run(ctx: Arc<VeleroContext>) {
    tokio::join!(
        backups::run(ctx.clone()),
        restores::run(ctx.clone()),
        locations::run(ctx.clone()),
        downloads::run(ctx.clone()),
        sync::run(ctx.clone()),
        gc::run(ctx)
    );
}

/// A watch callback that wakes a pass on every change (not on the initial listing).
fn poke<K>(wake: Arc<tokio::sync::Notify>) -> impl FnMut(kube::runtime::watcher::Event<K>) {
    use kube::runtime::watcher::Event;
    move |e| {
        if !matches!(e, Event::Init | Event::InitApply(_)) {
            wake.notify_one()
        }
    }
}

/// The list parameters for the non-admin objects this instance looks at.
fn list_params(ctx: &VeleroContext) -> ListParams {
    match ctx.selector.label_selector() {
        Some(s) => ListParams::default().labels(&s),
        None => ListParams::default(),
    }
}

fn now(ctx: &VeleroContext) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(granary_runtime::clock::to_k8s(
        ctx.clock.now(),
    ))
}

fn namespaced<K>(ctx: &VeleroContext, obj: &K) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default())
}

/// Writes `status` when it differs from what the object has.
async fn write_status<K, S>(
    ctx: &VeleroContext,
    obj: &K,
    old: Option<&S>,
    status: &S,
) -> Result<(), kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if old == Some(status) {
        return Ok(());
    }
    namespaced(ctx, obj)
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map(|_| ())
}

/// Adds (`true`) or removes `finalizer`, guarded by the object's resourceVersion.
async fn set_finalizer<K>(
    ctx: &VeleroContext,
    obj: &K,
    finalizer: &str,
    present: bool,
) -> Result<(), kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let has = obj.finalizers().iter().any(|f| f == finalizer);
    if has == present {
        return Ok(());
    }
    let mut finalizers: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    if present {
        finalizers.push(finalizer.to_string());
    }
    let body = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": obj.resource_version(),
    }});
    namespaced(ctx, obj)
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
        .map(|_| ())
}

/// True when `e` is the API server's "not found".
fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// True when `e` is the API server's "already exists".
fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}
