//! The extension controllers (the provider extension's role, see
//! docs/controllers.md#seed-controllers), written as Gardener's extension library is: one
//! generic reconciler owns the bookkeeping — finalizers on the object and its secret,
//! `lastOperation` (Processing → Succeeded/Error/Pending), `observedGeneration`,
//! `lastError` with codes, the operation annotation, events and retries — and calls an
//! [`Actuator`] that does the provider work through the `ObjectStore` trait. No
//! reconciler knows which cloud it talks to.
//!
//! The operation comes from [`operation_type`] (Gardener's `ComputeOperationType`):
//! Create/Reconcile/Restore provision, Delete removes (entries after their grace
//! period), Migrate releases the object with no provider call at all.

pub(crate) mod bucket;
pub(crate) mod entry;
pub(crate) mod records;

use crate::context::{Context, ReconcileError};
use crate::grace::DeletionSchedule;
use crate::kube_ops::{
    add_finalizer, is_not_found, patch_annotations, patch_status, remove_finalizer,
};
use granary_api::common::{LastOperation, LastOperationState, LastOperationType, SecretReference};
use granary_api::core::{ANNOTATION_OPERATION, OPERATION_RECONCILE, OPERATION_RESTORE};
use granary_api::extensions::DefaultStatus;
use granary_providers::{ObjectStore, SecretData};
use granary_runtime::operation::operation_type;
use granary_runtime::status;
use granary_runtime::work_queue::Next;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

/// A seed-side extension kind the generic reconciler can drive.
pub(crate) trait ExtensionObject:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static
{
    /// `extensions.gardener.cloud/backupbucket|backupentry`.
    const FINALIZER: &'static str;
    /// The controller name in metrics, logs and `--disable-controllers`.
    const CONTROLLER: &'static str;
    fn provider_type(&self) -> &str;
    fn region(&self) -> &str;
    fn secret_ref(&self) -> &SecretReference;
    fn status_default(&self) -> Option<&DefaultStatus>;
}

/// What a successful provisioning reports.
#[derive(Debug, Default)]
pub(crate) struct Provisioned {
    pub description: String,
    pub provider_status: Option<Value>,
    /// Hardening the store could not apply or verify: one Warning event each.
    pub warnings: Vec<String>,
}

/// The provider work of one kind. Only the reconcile and delete calls touch the store.
pub(crate) trait Actuator<O: ExtensionObject>: Send + Sync {
    fn reconcile(
        &self,
        ctx: &Context,
        obj: &O,
        store: &dyn ObjectStore,
        credentials: &SecretData,
    ) -> impl Future<Output = Result<Provisioned, ReconcileError>> + Send;

    /// When the provider-side deletion may start (before any provider call).
    fn deletion_schedule(&self, _ctx: &Context, _obj: &O) -> DeletionSchedule {
        DeletionSchedule::Now
    }

    /// Tells the actuator where `obj`'s deletion stands (for metrics): `None` when it is
    /// not being deleted or is gone, else its schedule.
    fn set_deletion(&self, _ctx: &Context, _name: &str, _deletion: Option<DeletionSchedule>) {}

    fn delete(
        &self,
        ctx: &Context,
        obj: &O,
        store: &dyn ObjectStore,
        credentials: &SecretData,
    ) -> impl Future<Output = Result<String, ReconcileError>> + Send;

    /// Anything besides the bookkeeping to release on a hand-over. Never calls a store.
    fn migrate(
        &self,
        _ctx: &Context,
        _obj: &O,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send {
        async { Ok(()) }
    }
}

/// One reconcile of extension object `name`: metrics, logging and retry policy around
/// [`reconcile_inner`].
pub(crate) async fn reconcile<O: ExtensionObject, A: Actuator<O>>(
    ctx: &Context,
    actuator: &A,
    name: String,
) -> Next {
    let started = Instant::now();
    let m = &ctx.metrics.shared;
    m.reconciles.with_label_values(&[O::CONTROLLER]).inc();
    let key = format!("{}/{name}", O::CONTROLLER);
    let result = reconcile_inner(ctx, actuator, &name, &key).await;
    m.reconcile_duration
        .with_label_values(&[O::CONTROLLER])
        .observe(started.elapsed().as_secs_f64());
    match result {
        Ok(next) => next,
        Err(e) => {
            m.reconcile_errors
                .with_label_values(&[O::CONTROLLER, e.kind().as_str()])
                .inc();
            if e.kind() == granary_runtime::error_codes::FailureKind::Conflict {
                // A 409 is retried at once: not a warning.
                tracing::debug!(controller = O::CONTROLLER, name, error = %e, "reconcile retried");
            } else {
                tracing::warn!(controller = O::CONTROLLER, name, error = %e, "reconcile failed");
            }
            Next::After(ctx.back_off(&key))
        }
    }
}

fn api<O: ExtensionObject>(ctx: &Context) -> Api<O> {
    Api::all(ctx.seed.clone())
}

/// How long until a failed operation may be retried; `None` when it may run now.
fn retry_wait(ctx: &Context, key: &str, last: &LastOperation) -> Option<Duration> {
    if last.state != LastOperationState::Error {
        return None;
    }
    let due = last.last_update_time
        + chrono::Duration::from_std(ctx.current_back_off(key)).unwrap_or_default();
    (due - ctx.clock.now())
        .to_std()
        .ok()
        .filter(|d| !d.is_zero())
}

async fn reconcile_inner<O: ExtensionObject, A: Actuator<O>>(
    ctx: &Context,
    actuator: &A,
    name: &str,
    key: &str,
) -> Result<Next, ReconcileError> {
    let api = api::<O>(ctx);
    let Some(obj) = api.get_opt(name).await? else {
        ctx.succeeded(key);
        actuator.set_deletion(ctx, name, None);
        return Ok(Next::Done);
    };
    if !ctx.selector.matches(obj.meta().labels.as_ref()) {
        return Ok(Next::Done);
    }
    let annotation = obj.annotations().get(ANNOTATION_OPERATION).cloned();
    let deleting = obj.meta().deletion_timestamp.is_some();
    let last = obj.status_default().and_then(|s| s.last_operation.clone());
    let op = operation_type(annotation.as_deref(), deleting, last.as_ref());
    match op {
        LastOperationType::Migrate => migrate(ctx, actuator, &api, &obj).await,
        LastOperationType::Delete => delete(ctx, actuator, &api, obj, key, last.as_ref()).await,
        _ => provision(ctx, actuator, &api, obj, op, annotation, key, last.as_ref()).await,
    }
}

#[allow(clippy::too_many_arguments)]
async fn provision<O: ExtensionObject, A: Actuator<O>>(
    ctx: &Context,
    actuator: &A,
    api: &Api<O>,
    obj: O,
    op: LastOperationType,
    annotation: Option<String>,
    key: &str,
    last: Option<&LastOperation>,
) -> Result<Next, ReconcileError> {
    let name = obj.name_any();
    let generation = obj.meta().generation;
    let observed = obj.status_default().and_then(|s| s.observed_generation);
    if annotation.is_none()
        && observed == generation
        && let Some(last) = last
    {
        if last.state == LastOperationState::Succeeded {
            return Ok(Next::Done);
        }
        if let Some(wait) = retry_wait(ctx, key, last) {
            return Ok(Next::After(wait));
        }
    }
    let obj = add_finalizer(api, &obj, O::FINALIZER).await?;
    patch_status(
        api,
        &name,
        json!({"lastOperation": status::processing(op, format!("{op:?} of the {} is running", O::CONTROLLER), ctx.clock.now())}),
    )
    .await?;
    if matches!(
        annotation.as_deref(),
        Some(OPERATION_RECONCILE | OPERATION_RESTORE)
    ) {
        patch_annotations(api, &name, &[(ANNOTATION_OPERATION, None)]).await?;
    }
    let result = async {
        let credentials = read_secret(ctx, obj.secret_ref(), Some(O::FINALIZER)).await?;
        let store = ctx
            .open_store(obj.provider_type(), obj.region(), &credentials)
            .await?;
        actuator
            .reconcile(ctx, &obj, store.as_ref(), &credentials)
            .await
    }
    .await;
    let now = ctx.clock.now();
    match result {
        Ok(done) => {
            let reference = obj.object_ref(&());
            for warning in &done.warnings {
                ctx.seed_event(
                    &reference,
                    EventType::Warning,
                    "HardeningIncomplete",
                    warning.clone(),
                )
                .await;
            }
            let mut patch = json!({
                "lastOperation": status::succeeded(op, done.description, now),
                "lastError": null,
                "observedGeneration": generation,
            });
            if let Some(ps) = done.provider_status {
                patch["providerStatus"] = ps;
            }
            patch_status(api, &name, patch).await?;
            ctx.succeeded(key);
            Ok(Next::Done)
        }
        Err(e) => {
            record_error(ctx, api, &obj, op, &e, "ReconcileError").await?;
            Ok(Next::After(ctx.back_off(key)))
        }
    }
}

/// Writes Error with codes and a Warning event for a failed operation.
async fn record_error<O: ExtensionObject>(
    ctx: &Context,
    api: &Api<O>,
    obj: &O,
    op: LastOperationType,
    error: &ReconcileError,
    reason: &str,
) -> Result<(), ReconcileError> {
    let kind = error.kind();
    ctx.metrics
        .shared
        .reconcile_errors
        .with_label_values(&[O::CONTROLLER, kind.as_str()])
        .inc();
    let now = ctx.clock.now();
    let description = format!("{op:?} of the {} failed: {error}", O::CONTROLLER);
    tracing::warn!(controller = O::CONTROLLER, name = %obj.name_any(), error = %error, "operation failed");
    ctx.seed_event(
        &obj.object_ref(&()),
        EventType::Warning,
        reason,
        description.clone(),
    )
    .await;
    patch_status(
        api,
        &obj.name_any(),
        json!({
            "lastOperation": status::errored(op, description.clone(), now),
            "lastError": status::last_error(description, kind.codes(), now),
            "observedGeneration": obj.meta().generation,
        }),
    )
    .await?;
    Ok(())
}

async fn delete<O: ExtensionObject, A: Actuator<O>>(
    ctx: &Context,
    actuator: &A,
    api: &Api<O>,
    obj: O,
    key: &str,
    last: Option<&LastOperation>,
) -> Result<Next, ReconcileError> {
    let name = obj.name_any();
    if !obj.finalizers().iter().any(|f| f == O::FINALIZER) {
        actuator.set_deletion(ctx, &name, None);
        return Ok(Next::Done);
    }
    let now = ctx.clock.now();
    let schedule = actuator.deletion_schedule(ctx, &obj);
    actuator.set_deletion(ctx, &name, Some(schedule));
    if let DeletionSchedule::At(due) = schedule {
        let description = format!("deletion scheduled for {}", due.to_rfc3339());
        let written = last.is_some_and(|l| {
            l.state == LastOperationState::Pending
                && l.type_ == LastOperationType::Delete
                && l.description == description
        });
        if !written {
            patch_status(
                api,
                &name,
                json!({
                    "lastOperation": status::pending(LastOperationType::Delete, description, now),
                    "lastError": null,
                    "observedGeneration": obj.meta().generation,
                }),
            )
            .await?;
        }
        // Requeue exactly at the scheduled time (plus a hair, so the clock has passed it).
        let wait = (due - now).to_std().unwrap_or_default() + Duration::from_millis(50);
        return Ok(Next::After(wait));
    }
    if let Some(last) = last.filter(|l| l.type_ == LastOperationType::Delete)
        && let Some(wait) = retry_wait(ctx, key, last)
    {
        return Ok(Next::After(wait));
    }
    patch_status(
        api,
        &name,
        json!({"lastOperation": status::processing(LastOperationType::Delete, format!("deleting the {}", O::CONTROLLER), now)}),
    )
    .await?;
    let result = async {
        let credentials = read_secret(ctx, obj.secret_ref(), None).await?;
        let store = ctx
            .open_store(obj.provider_type(), obj.region(), &credentials)
            .await?;
        actuator
            .delete(ctx, &obj, store.as_ref(), &credentials)
            .await
    }
    .await;
    match result {
        Ok(description) => {
            patch_status(
                api,
                &name,
                json!({
                    "lastOperation": status::succeeded(LastOperationType::Delete, description, ctx.clock.now()),
                    "lastError": null,
                }),
            )
            .await?;
            release_secret(ctx, obj.secret_ref(), O::FINALIZER, false).await?;
            remove_finalizer(api, &obj, O::FINALIZER).await?;
            actuator.set_deletion(ctx, &name, None);
            ctx.succeeded(key);
            Ok(Next::Done)
        }
        Err(e) => {
            record_error(ctx, api, &obj, LastOperationType::Delete, &e, "DeleteError").await?;
            Ok(Next::After(ctx.back_off(key)))
        }
    }
}

/// Hand-over: drop the finalizers and the copied secret, record Migrate Succeeded and
/// let the object go. Not one provider call.
async fn migrate<O: ExtensionObject, A: Actuator<O>>(
    ctx: &Context,
    actuator: &A,
    api: &Api<O>,
    obj: &O,
) -> Result<Next, ReconcileError> {
    let name = obj.name_any();
    actuator.migrate(ctx, obj).await?;
    actuator.set_deletion(ctx, &name, None);
    release_secret(ctx, obj.secret_ref(), O::FINALIZER, true).await?;
    if obj.meta().deletion_timestamp.is_none() {
        patch_status(
            api,
            &name,
            json!({"lastOperation": status::succeeded(LastOperationType::Migrate, "released for another seed", ctx.clock.now())}),
        )
        .await?;
    }
    remove_finalizer(api, obj, O::FINALIZER).await?;
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Next::Done)
}

/// Reads the referenced secret's data, adding `finalizer` to it when given.
pub(crate) async fn read_secret(
    ctx: &Context,
    reference: &SecretReference,
    finalizer: Option<&str>,
) -> Result<SecretData, ReconcileError> {
    let api: Api<Secret> = Api::namespaced(ctx.seed.clone(), &reference.namespace);
    let secret = api.get_opt(&reference.name).await?.ok_or_else(|| {
        ReconcileError::Dependency(format!(
            "secret {}/{} (spec.secretRef) not found",
            reference.namespace, reference.name
        ))
    })?;
    if let Some(f) = finalizer {
        add_finalizer(&api, &secret, f).await?;
    }
    Ok(secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect())
}

/// Removes `finalizer` from the referenced secret, and deletes the secret (a copy the
/// mirror made) when `delete` is set.
async fn release_secret(
    ctx: &Context,
    reference: &SecretReference,
    finalizer: &str,
    delete: bool,
) -> Result<(), ReconcileError> {
    let api: Api<Secret> = Api::namespaced(ctx.seed.clone(), &reference.namespace);
    let Some(secret) = api.get_opt(&reference.name).await? else {
        return Ok(());
    };
    remove_finalizer(&api, &secret, finalizer).await?;
    if delete {
        match api.delete(&reference.name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
