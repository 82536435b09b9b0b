//! The garden → seed mirror (the gardenlet's role, docs/architecture.md#seed-mirror): for
//! garden BackupBuckets and BackupEntries this seed is responsible for, copy the
//! credentials into the seed, create or update the extension objects (asking for a
//! reconcile with `gardener.cloud/operation` when the spec or the credentials change),
//! and report the extension's result back to the garden object's status. Deletion in the
//! garden becomes deletion of the seed object; a hand-over becomes `migrate` here and
//! `restore` on the next seed.
//!
//! The helpers here are shared by [`bucket`] and [`entry`]: copying credentials,
//! creating/updating an extension object, and turning an extension object's status into
//! what the garden shows.

pub(crate) mod bucket;
pub(crate) mod entry;

use crate::context::{Context, ReconcileError};
use crate::extension::ExtensionObject;
use crate::kube_ops::{ensure_namespace, is_not_found, patch_annotations};
use chrono::{DateTime, Utc};
use granary_api::common::{
    ErrorCode, LastError, LastOperation, LastOperationState, LastOperationType, ObjectReference,
};
use granary_api::core::{
    ANNOTATION_OPERATION, ANNOTATION_TIMESTAMP, GARDEN_NAMESPACE, OPERATION_MIGRATE,
    OPERATION_RECONCILE, OPERATION_RESTORE,
};
use granary_runtime::readiness::{Readiness, ReadinessInput, readiness};
use granary_runtime::status;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::{Map, Value, json};
use std::time::Duration;

/// Buckets are reconciled again when their last success is older than this (Gardener
/// PR #12226), so a bucket removed at the provider comes back.
pub(crate) const BUCKET_MAX_SUCCESS_AGE: Duration = Duration::from_secs(12 * 3600);

/// The time format of `gardener.cloud/timestamp`.
pub(crate) fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

fn parse_timestamp(v: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Copies the garden credentials `reference` into `garden/<target>` in the seed,
/// rewriting the copy only when the data changed. Returns the copy's timestamp.
pub(crate) async fn copy_credentials(
    ctx: &Context,
    reference: &ObjectReference,
    target: &str,
) -> Result<DateTime<Utc>, ReconcileError> {
    if !(reference.kind.is_empty() || reference.kind == "Secret") {
        return Err(ReconcileError::Invalid(format!(
            "spec.credentialsRef: kind {:?} is not supported (only Secret)",
            reference.kind
        )));
    }
    let garden: Api<Secret> = Api::namespaced(ctx.garden.clone(), &reference.namespace);
    let source = garden.get_opt(&reference.name).await?.ok_or_else(|| {
        ReconcileError::Dependency(format!(
            "credentials secret {}/{} not found in the garden",
            reference.namespace, reference.name
        ))
    })?;
    let data = source.data.unwrap_or_default();
    ensure_namespace(&ctx.seed, GARDEN_NAMESPACE).await?;
    let seed: Api<Secret> = Api::namespaced(ctx.seed.clone(), GARDEN_NAMESPACE);
    let now = ctx.clock.now();
    match seed.get_opt(target).await? {
        Some(mut existing) => {
            let stamp = existing
                .annotations()
                .get(ANNOTATION_TIMESTAMP)
                .and_then(|v| parse_timestamp(v));
            if let Some(stamp) = stamp
                && existing.data.clone().unwrap_or_default() == data
            {
                return Ok(stamp);
            }
            existing.data = Some(data);
            existing
                .annotations_mut()
                .insert(ANNOTATION_TIMESTAMP.to_string(), timestamp(now));
            seed.replace(target, &PostParams::default(), &existing)
                .await?;
        }
        None => {
            let mut secret = Secret {
                data: Some(data),
                ..Default::default()
            };
            secret.metadata.name = Some(target.to_string());
            secret.metadata.annotations =
                Some([(ANNOTATION_TIMESTAMP.to_string(), timestamp(now))].into());
            let mut labels = std::collections::BTreeMap::new();
            ctx.selector.label(&mut labels);
            secret.metadata.labels = (!labels.is_empty()).then_some(labels);
            seed.create(&PostParams::default(), &secret).await?;
        }
    }
    Ok(now)
}

/// Deletes the seed copy `garden/<name>` of some credentials (absent is fine).
pub(crate) async fn delete_copied_secret(ctx: &Context, name: &str) -> Result<(), ReconcileError> {
    let seed: Api<Secret> = Api::namespaced(ctx.seed.clone(), GARDEN_NAMESPACE);
    match seed.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// What a mirror did to the extension object.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ensured {
    /// Created, or asked to reconcile: the result comes with the next status change.
    Requested,
    /// Up to date: report its status.
    Current,
}

/// Creates the extension object, or updates its spec and metadata and asks for a
/// reconcile when the spec or the credentials changed (or the last success is older
/// than `max_success_age`). `desired` carries name, labels, annotations and spec.
pub(crate) async fn ensure_extension<O: ExtensionObject>(
    ctx: &Context,
    existing: Option<&O>,
    mut desired: O,
    credentials_changed_at: DateTime<Utc>,
    max_success_age: Option<Duration>,
    restore: bool,
) -> Result<Ensured, ReconcileError> {
    let api: Api<O> = Api::all(ctx.seed.clone());
    let now = ctx.clock.now();
    let Some(existing) = existing else {
        let annotations = desired.annotations_mut();
        annotations.insert(
            ANNOTATION_OPERATION.to_string(),
            if restore {
                OPERATION_RESTORE
            } else {
                OPERATION_RECONCILE
            }
            .to_string(),
        );
        annotations.insert(ANNOTATION_TIMESTAMP.to_string(), timestamp(now));
        // The finalizer is there from the start, so a deletion can never skip the
        // provider-side cleanup.
        desired.meta_mut().finalizers = Some(vec![O::FINALIZER.to_string()]);
        api.create(&PostParams::default(), &desired).await?;
        return Ok(Ensured::Requested);
    };
    let spec_of = |o: &O| {
        serde_json::to_value(o)
            .ok()
            .and_then(|v| v.get("spec").cloned())
    };
    let mut desired_spec = spec_of(&desired).unwrap_or(Value::Null);
    keep_class(spec_of(existing).as_ref(), &mut desired_spec);
    let spec_differs = spec_of(existing).as_ref() != Some(&desired_spec);
    let mut metadata_patch = Map::new();
    for (k, v) in desired.labels() {
        if existing.labels().get(k) != Some(v) {
            metadata_patch.insert(k.clone(), Value::String(v.clone()));
        }
    }
    let mut annotation_patch = Map::new();
    for (k, v) in desired.annotations() {
        if existing.annotations().get(k) != Some(v) {
            annotation_patch.insert(k.clone(), Value::String(v.clone()));
        }
    }
    let annotation = existing.annotations().get(ANNOTATION_OPERATION);
    let requested_at = existing
        .annotations()
        .get(ANNOTATION_TIMESTAMP)
        .and_then(|v| parse_timestamp(v));
    let last = existing
        .status_default()
        .and_then(|s| s.last_operation.as_ref());
    let stale = match last {
        None => annotation.is_none(),
        Some(l) => {
            l.state == LastOperationState::Failed
                || (annotation.is_none() && l.last_update_time < credentials_changed_at)
                || max_success_age.is_some_and(|age| {
                    annotation.is_none()
                        && l.state == LastOperationState::Succeeded
                        && (now - l.last_update_time).to_std().unwrap_or_default() > age
                })
        }
    };
    let request = spec_differs || requested_at.is_none() || stale;
    if request {
        annotation_patch.insert(
            ANNOTATION_OPERATION.to_string(),
            Value::String(OPERATION_RECONCILE.to_string()),
        );
        annotation_patch.insert(
            ANNOTATION_TIMESTAMP.to_string(),
            Value::String(timestamp(now)),
        );
    }
    if !spec_differs && metadata_patch.is_empty() && annotation_patch.is_empty() {
        return Ok(Ensured::Current);
    }
    let mut patch =
        json!({"metadata": {"labels": metadata_patch, "annotations": annotation_patch}});
    if spec_differs {
        // Fields the desired spec leaves out are removed.
        let mut spec = desired_spec;
        if let (Some(new), Some(Value::Object(old))) = (spec.as_object_mut(), spec_of(existing)) {
            for key in old.keys() {
                new.entry(key.clone()).or_insert(Value::Null);
            }
        }
        patch["spec"] = spec;
    }
    api.patch(
        &existing.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(if request {
        Ensured::Requested
    } else {
        Ensured::Current
    })
}

/// `spec.class` is immutable once set (Gardener enforces it with a CEL rule, Granary's
/// CRDs have none): a class already on the object stays, whatever `desired` says, so
/// the mirror never changes or removes the class Gardener or an operator set.
fn keep_class(existing: Option<&Value>, desired: &mut Value) {
    let class = existing
        .and_then(|spec| spec.get("class"))
        .filter(|class| !class.is_null());
    if let (Some(class), Some(spec)) = (class, desired.as_object_mut()) {
        spec.insert("class".to_string(), class.clone());
    }
}

/// Asks the extension object to let go (hand-over). Returns true once it is gone.
pub(crate) async fn release_extension<O: ExtensionObject>(
    ctx: &Context,
    existing: Option<&O>,
) -> Result<bool, ReconcileError> {
    let Some(ext) = existing else {
        return Ok(true);
    };
    if ext
        .annotations()
        .get(ANNOTATION_OPERATION)
        .map(String::as_str)
        != Some(OPERATION_MIGRATE)
    {
        let api: Api<O> = Api::all(ctx.seed.clone());
        match patch_annotations(
            &api,
            &ext.name_any(),
            &[
                (ANNOTATION_OPERATION, Some(OPERATION_MIGRATE.to_string())),
                (ANNOTATION_TIMESTAMP, Some(timestamp(ctx.clock.now()))),
            ],
        )
        .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => return Ok(true),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

/// What the garden object shows about its extension object.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Report {
    pub last_operation: LastOperation,
    pub last_error: Option<LastError>,
    pub ready: bool,
}

/// The garden view of an extension object's state, decided by the one readiness
/// function. `op` names the operation when the extension has recorded none yet.
pub(crate) fn report<O: ExtensionObject>(
    ext: &O,
    op: LastOperationType,
    now: DateTime<Utc>,
) -> Report {
    let status = ext.status_default();
    let last = status.and_then(|s| s.last_operation.as_ref());
    let verdict = readiness(ReadinessInput {
        generation: ext.meta().generation,
        observed_generation: status.and_then(|s| s.observed_generation),
        operation_annotation: ext
            .annotations()
            .get(ANNOTATION_OPERATION)
            .map(String::as_str),
        requested_at: ext
            .annotations()
            .get(ANNOTATION_TIMESTAMP)
            .and_then(|v| parse_timestamp(v)),
        last_error: status.and_then(|s| s.last_error.as_ref()),
        last_operation: last,
    });
    match verdict {
        Readiness::Ready => Report {
            last_operation: last
                .cloned()
                .unwrap_or_else(|| status::succeeded(op, "ready", now)),
            last_error: None,
            ready: true,
        },
        Readiness::Failed { description, codes } => Report {
            last_operation: match last {
                Some(l) if l.state != LastOperationState::Succeeded => l.clone(),
                _ => status::errored(op, description.clone(), now),
            },
            last_error: Some(
                status
                    .and_then(|s| s.last_error.clone())
                    .unwrap_or_else(|| status::last_error(description, codes, now)),
            ),
            ready: false,
        },
        Readiness::Progressing(why) => Report {
            last_operation: match last {
                Some(l)
                    if matches!(
                        l.state,
                        LastOperationState::Processing | LastOperationState::Pending
                    ) =>
                {
                    l.clone()
                }
                _ => status::processing(op, format!("waiting for the seed: {why}"), now),
            },
            last_error: None,
            ready: false,
        },
    }
}

/// A report for an object that waits for something else (e.g. its bucket), in state
/// Error with that thing's codes, as Gardener shows it.
pub(crate) fn waiting(
    op: LastOperationType,
    description: String,
    codes: Vec<ErrorCode>,
    now: DateTime<Utc>,
) -> Report {
    let codes = if codes.is_empty() {
        vec![ErrorCode::RetryableInfraDependencies]
    } else {
        codes
    };
    Report {
        last_operation: status::errored(op, description.clone(), now),
        last_error: Some(status::last_error(description, codes, now)),
        ready: false,
    }
}

/// A report while a dependency is still being made (a bucket being created, not there
/// yet): Pending with what it waits for, no error. A fresh landscape comes up without
/// transient errors; a dependency that failed is [`waiting`]'s Error.
pub(crate) fn pending_on(op: LastOperationType, description: String, now: DateTime<Utc>) -> Report {
    Report {
        last_operation: status::pending(op, description, now),
        last_error: None,
        ready: false,
    }
}

/// True when two lastOperations say the same, whatever their times.
pub(crate) fn same_operation(a: Option<&LastOperation>, b: Option<&LastOperation>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.type_ == b.type_
                && a.state == b.state
                && a.progress == b.progress
                && a.description == b.description
        }
        _ => false,
    }
}

/// True when two lastErrors say the same, whatever their times.
pub(crate) fn same_error(a: Option<&LastError>, b: Option<&LastError>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.description == b.description && a.codes == b.codes,
        _ => false,
    }
}

/// The operation the garden object is in, for reports before the seed recorded any: a
/// deletion, a restore of an object handed over by another seed (or by the garden for a
/// seed that is gone), a creation, or a reconcile.
pub(crate) fn garden_operation(deleting: bool, last: Option<&LastOperation>) -> LastOperationType {
    if deleting {
        LastOperationType::Delete
    } else if handed_over(last) {
        LastOperationType::Restore
    } else if last.is_none() {
        LastOperationType::Create
    } else {
        LastOperationType::Reconcile
    }
}

/// Whether a garden object handed over by another seed should be restored here: it was
/// released (Migrate), or its restore has not succeeded yet (a report while it waits,
/// e.g. for its bucket, must not lose that it is a restore).
pub(crate) fn handed_over(last: Option<&LastOperation>) -> bool {
    last.is_some_and(|l| {
        l.type_ == LastOperationType::Migrate
            || (l.type_ == LastOperationType::Restore && l.state != LastOperationState::Succeeded)
    })
}

/// Whether the seed object of a deleting garden object is known to be cleaned up: never
/// provisioned, or its deletion was under way when it disappeared.
pub(crate) fn deletion_finished(last: Option<&LastOperation>) -> bool {
    last.is_none_or(|l| l.type_ == LastOperationType::Delete)
}

/// `lastOperation` the mirror writes to the garden object just before it deletes the
/// seed object, so the object's disappearance reads as the end of that deletion.
pub(crate) fn deletion_requested(now: DateTime<Utc>) -> LastOperation {
    status::processing(
        LastOperationType::Delete,
        "deletion requested in the seed",
        now,
    )
}

/// Names a Kubernetes object for events.
pub(crate) fn reference<K: Resource<DynamicType = ()>>(
    obj: &K,
) -> k8s_openapi::api::core::v1::ObjectReference {
    obj.object_ref(&())
}

#[cfg(test)]
mod tests {
    use super::{garden_operation, handed_over, keep_class};
    use chrono::DateTime;
    use granary_api::common::{LastOperationState, LastOperationType};
    use granary_runtime::status;
    use serde_json::json;

    /// An entry the garden handed over for a seed that is gone, whose new seed first
    /// waits (for its bucket, which is being handed over too), stays a restore: the
    /// waiting report says Restore, and the seed object is then created for a restore.
    #[test]
    fn a_handed_over_object_stays_a_restore_while_it_waits() {
        let at = DateTime::UNIX_EPOCH;
        let released = status::pending(LastOperationType::Migrate, "released", at);
        assert!(handed_over(Some(&released)));
        assert_eq!(
            garden_operation(false, Some(&released)),
            LastOperationType::Restore
        );
        let waiting = status::processing(LastOperationType::Restore, "waiting for bucket", at);
        assert!(handed_over(Some(&waiting)));
        assert_eq!(
            garden_operation(false, Some(&waiting)),
            LastOperationType::Restore
        );
        let restored = status::succeeded(LastOperationType::Restore, "done", at);
        assert!(!handed_over(Some(&restored)));
        assert_eq!(
            garden_operation(false, Some(&restored)),
            LastOperationType::Reconcile
        );
        assert_eq!(garden_operation(false, None), LastOperationType::Create);
        assert_eq!(
            garden_operation(true, Some(&released)),
            LastOperationType::Delete
        );
        assert_eq!(restored.state, LastOperationState::Succeeded);
    }

    #[test]
    fn an_existing_class_survives_the_mirrors_spec() {
        // The mirror's desired spec has no class; the patch would remove the one Gardener
        // or an operator set, and Gardener's CRD forbids changing it.
        let existing = json!({"type": "aws", "class": "seed"});
        let mut desired = json!({"type": "aws"});
        keep_class(Some(&existing), &mut desired);
        assert_eq!(desired, json!({"type": "aws", "class": "seed"}));

        let mut changed = json!({"type": "aws", "class": "shoot"});
        keep_class(Some(&existing), &mut changed);
        assert_eq!(changed["class"], "seed");

        let mut unset = json!({"type": "aws"});
        keep_class(Some(&json!({"type": "aws"})), &mut unset);
        assert_eq!(unset, json!({"type": "aws"}));
    }
}
