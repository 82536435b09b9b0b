//! Mirrors one garden BackupBucket into the seed's extension BackupBucket and reports
//! back (docs/architecture.md#seed-mirror).

use super::{
    BUCKET_MAX_SUCCESS_AGE, Ensured, Report, copy_credentials, delete_copied_secret,
    deletion_finished, deletion_requested, ensure_extension, garden_operation, handed_over,
    reference, release_extension, report, same_error, same_operation,
};
use crate::context::{Context, ReconcileError};
use crate::kube_ops::{
    add_finalizer, is_not_found, patch_annotations, patch_status, remove_finalizer,
};
use granary_api::common::{LastOperationType, SecretReference};
use granary_api::core::{
    self, ANNOTATION_DELETION_REQUESTED_AT, ANNOTATION_GENERATED_SECRET_NAMESPACE,
    FINALIZER_GARDEN_BUCKET_GUARD, FINALIZER_GARDENER, GARDEN_NAMESPACE, bucket_secret_name,
};
use granary_api::extensions::{self, BackupBucketSpec};
use granary_runtime::clock::from_k8s;
use granary_runtime::status;
use granary_runtime::work_queue::Next;
use kube::api::{Api, DeleteParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

fn garden_api(ctx: &Context) -> Api<core::BackupBucket> {
    Api::all(ctx.garden.clone())
}

fn seed_api(ctx: &Context) -> Api<extensions::BackupBucket> {
    Api::all(ctx.seed.clone())
}

/// One mirror pass over garden bucket `name`.
pub(crate) async fn reconcile(ctx: &Context, name: &str) -> Result<Next, ReconcileError> {
    let garden = crate::kube_ops::get_assigned(&garden_api(ctx), name).await?;
    let ext = seed_api(ctx).get_opt(name).await?;
    let ext = ext.filter(|e| ctx.selector.matches(e.meta().labels.as_ref()));
    let Some(garden) = garden.filter(|g| ctx.selector.matches(g.meta().labels.as_ref())) else {
        // The garden object is gone: let go of the seed object without touching the
        // provider (the garden is the source of truth; nothing asked for a deletion).
        if release_extension(ctx, ext.as_ref()).await? {
            delete_copied_secret(ctx, &bucket_secret_name(name)).await?;
        }
        return Ok(Next::Done);
    };
    let me = ctx.seed_name.as_str();
    if garden.responsible_seed() != Some(me) {
        // Another seed is responsible: release what this seed still holds.
        if release_extension(ctx, ext.as_ref()).await? {
            delete_copied_secret(ctx, &bucket_secret_name(name)).await?;
        }
        return Ok(Next::Done);
    }
    if garden.meta().deletion_timestamp.is_some() {
        if garden
            .finalizers()
            .iter()
            .any(|f| f == FINALIZER_GARDEN_BUCKET_GUARD)
        {
            // The garden still refuses this deletion (entries reference the bucket; it
            // says why in status and events). Nothing may be deleted at the provider
            // until it lets go; its finalizer removal wakes this reconcile again.
            return Ok(Next::Done);
        }
        return delete(ctx, garden, ext).await;
    }
    if garden.spec.seed_name.as_deref() != Some(me) {
        return hand_over(ctx, &garden, ext).await;
    }
    provision(ctx, garden, ext).await
}

fn desired(ctx: &Context, garden: &core::BackupBucket) -> extensions::BackupBucket {
    let name = garden.name_any();
    let mut ext = extensions::BackupBucket::new(
        &name,
        BackupBucketSpec {
            type_: garden.spec.provider.type_.clone(),
            region: garden.spec.provider.region.clone(),
            secret_ref: SecretReference {
                name: bucket_secret_name(&name),
                namespace: GARDEN_NAMESPACE.to_string(),
            },
            provider_config: garden.spec.provider_config.clone(),
            class: None,
        },
    );
    let mut labels = std::collections::BTreeMap::new();
    ctx.selector.label(&mut labels);
    // Only a request for the layout of a bucket Granary has not recorded yet: the
    // bucket's own record decides (crate::ownership).
    if let Some(kind) = garden.labels().get(granary_api::core::LABEL_POOL_KIND) {
        labels.insert(granary_api::core::LABEL_POOL_KIND.to_string(), kind.clone());
    }
    ext.metadata.labels = Some(labels);
    ext.metadata.annotations = Some(
        [(
            ANNOTATION_GENERATED_SECRET_NAMESPACE.to_string(),
            GARDEN_NAMESPACE.to_string(),
        )]
        .into(),
    );
    ext
}

async fn provision(
    ctx: &Context,
    garden: core::BackupBucket,
    ext: Option<extensions::BackupBucket>,
) -> Result<Next, ReconcileError> {
    let name = garden.name_any();
    let garden = add_finalizer(&garden_api(ctx), &garden, FINALIZER_GARDENER).await?;
    let last = garden
        .status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref());
    let op = garden_operation(false, last);
    // A bucket this seed has not created yet must pass the one bucket-name rule (and the
    // rest of the garden bucket's validation) before anything is created for it: a
    // hand-made BackupBucket skips the garden controller that names pool shards.
    let problems = granary_api::core::validate_backup_bucket(&garden);
    if ext.is_none() && !problems.is_empty() {
        let now = ctx.clock.now();
        let description = format!(
            "invalid BackupBucket, nothing is created for it: {}",
            granary_api::common::describe_field_errors(&problems)
        );
        if garden
            .status
            .as_ref()
            .and_then(|s| s.last_error.as_ref())
            .is_none_or(|e| e.description != description)
        {
            ctx.garden_warning(
                &reference(&garden),
                "InvalidBackupBucket",
                description.clone(),
            )
            .await;
        }
        let r = Report {
            last_operation: status::errored(op, description.clone(), now),
            last_error: Some(status::last_error(
                description,
                granary_runtime::error_codes::FailureKind::Invalid.codes(),
                now,
            )),
            ready: false,
        };
        write_status(ctx, &garden, &r, None).await?;
        return Ok(Next::After(ctx.resync));
    }
    let prepared = async {
        let credentials = garden
            .credentials()
            .ok_or_else(|| ReconcileError::Invalid("spec.credentialsRef: required".to_string()))?;
        copy_credentials(ctx, &credentials, &bucket_secret_name(&name)).await
    }
    .await;
    let changed_at = match prepared {
        Ok(t) => t,
        Err(e) => {
            let now = ctx.clock.now();
            let description = format!("preparing the seed failed: {e}");
            ctx.garden_warning(&reference(&garden), "ReconcileError", description.clone())
                .await;
            let r = Report {
                last_operation: status::errored(op, description.clone(), now),
                last_error: Some(status::last_error(description, e.kind().codes(), now)),
                ready: false,
            };
            write_status(ctx, &garden, &r, None).await?;
            return Err(e);
        }
    };
    if ext
        .as_ref()
        .is_some_and(|e| e.meta().deletion_timestamp.is_some())
    {
        // Someone deleted the seed object; wait until it is gone, then recreate it.
        return Ok(Next::After(ctx.resync));
    }
    let ensured = ensure_extension(
        ctx,
        ext.as_ref(),
        desired(ctx, &garden),
        changed_at,
        Some(BUCKET_MAX_SUCCESS_AGE),
        handed_over(last),
    )
    .await?;
    let now = ctx.clock.now();
    let r = match (&ensured, &ext) {
        (Ensured::Current, Some(ext)) => report(ext, op, now),
        _ => Report {
            last_operation: status::processing(op, "reconcile requested in the seed", now),
            last_error: None,
            ready: false,
        },
    };
    if !r.ready && r.last_error.is_some() {
        let description = r
            .last_error
            .as_ref()
            .map(|e| e.description.clone())
            .unwrap_or_default();
        if !same_error(
            garden.status.as_ref().and_then(|s| s.last_error.as_ref()),
            r.last_error.as_ref(),
        ) {
            ctx.garden_warning(&reference(&garden), "ReconcileError", description)
                .await;
        }
    }
    write_status(ctx, &garden, &r, ext.as_ref().filter(|_| r.ready)).await?;
    Ok(Next::After(ctx.resync))
}

/// Writes the report into the garden status (only when it says something new).
async fn write_status(
    ctx: &Context,
    garden: &core::BackupBucket,
    r: &Report,
    ready_ext: Option<&extensions::BackupBucket>,
) -> Result<(), ReconcileError> {
    let current = garden.status.clone().unwrap_or_default();
    let me = ctx.seed_name.clone();
    let generation = garden.meta().generation;
    let provider_status = ready_ext
        .and_then(|e| e.default_status())
        .and_then(|s| s.provider_status.clone());
    let generated = ready_ext
        .and_then(|e| e.status.as_ref())
        .and_then(|s| s.generated_secret_ref.clone());
    let unchanged = same_operation(current.last_operation.as_ref(), Some(&r.last_operation))
        && same_error(current.last_error.as_ref(), r.last_error.as_ref())
        && current.observed_generation == generation
        && current.seed_name.as_deref() == Some(me.as_str())
        && (ready_ext.is_none()
            || (current.provider_status == provider_status
                && current.generated_secret_ref == generated));
    if unchanged {
        return Ok(());
    }
    let mut patch = json!({
        "lastOperation": r.last_operation,
        "lastError": r.last_error,
        "observedGeneration": generation,
        "seedName": me,
    });
    if ready_ext.is_some() {
        patch["providerStatus"] = provider_status.unwrap_or(Value::Null);
        patch["generatedSecretRef"] = serde_json::to_value(generated).unwrap_or(Value::Null);
    }
    patch_status(&garden_api(ctx), &garden.name_any(), patch).await?;
    Ok(())
}

async fn delete(
    ctx: &Context,
    garden: core::BackupBucket,
    ext: Option<extensions::BackupBucket>,
) -> Result<Next, ReconcileError> {
    let name = garden.name_any();
    let last = garden
        .status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref());
    let now = ctx.clock.now();
    match ext {
        Some(ext) => {
            if ext.meta().deletion_timestamp.is_none() {
                let requested = garden
                    .meta()
                    .deletion_timestamp
                    .as_ref()
                    .map(|t| super::timestamp(from_k8s(t.0)));
                let r = Report {
                    last_operation: deletion_requested(now),
                    last_error: None,
                    ready: false,
                };
                write_status(ctx, &garden, &r, None).await?;
                patch_annotations(
                    &seed_api(ctx),
                    &name,
                    &[(ANNOTATION_DELETION_REQUESTED_AT, requested)],
                )
                .await?;
                match seed_api(ctx).delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(e.into()),
                }
                return Ok(Next::Done);
            }
            let r = report(&ext, LastOperationType::Delete, now);
            write_status(ctx, &garden, &r, None).await?;
            Ok(Next::After(ctx.resync))
        }
        None if deletion_finished(last) => {
            delete_copied_secret(ctx, &bucket_secret_name(&name)).await?;
            remove_finalizer(&garden_api(ctx), &garden, FINALIZER_GARDENER).await?;
            Ok(Next::Done)
        }
        // Provisioned by a seed before and not yet deleted at the provider: bring the
        // seed object back so its deletion runs here.
        None => provision(ctx, garden, None).await,
    }
}

async fn hand_over(
    ctx: &Context,
    garden: &core::BackupBucket,
    ext: Option<extensions::BackupBucket>,
) -> Result<Next, ReconcileError> {
    if !release_extension(ctx, ext.as_ref()).await? {
        let now = ctx.clock.now();
        let r = Report {
            last_operation: status::processing(
                LastOperationType::Migrate,
                format!(
                    "handing over to seed {}",
                    garden.spec.seed_name.clone().unwrap_or_default()
                ),
                now,
            ),
            last_error: None,
            ready: false,
        };
        write_status(ctx, garden, &r, None).await?;
        return Ok(Next::After(ctx.resync));
    }
    delete_copied_secret(ctx, &bucket_secret_name(&garden.name_any())).await?;
    patch_status(
        &garden_api(ctx),
        &garden.name_any(),
        json!({
            "lastOperation": status::succeeded(LastOperationType::Migrate, "released by the previous seed", ctx.clock.now()),
            "lastError": null,
            "seedName": null,
        }),
    )
    .await?;
    Ok(Next::Done)
}
