//! The garden BackupBucket controller: keeps the deletion guard (finalizer), re-derives
//! `status.entryCount`, assigns the bucket to a seed and hands it over when its seed is
//! gone or unready too long (docs/architecture.md#bucket-assignment), keeps the
//! `granary.gardener.cloud/seed` label on the responsible seed, and removes empty
//! non-first shards when configured to.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::assignment::{Assignment, assign_bucket, next_check};
use crate::buckets::{
    DeletionGuard, EmptyShard, PoolLabelRepair, deletion_guard, empty_shard, empty_since,
    pool_label_repair, pool_of, reader_labels_patch, seed_label_patch, shard_of,
};
use crate::context::{Context, GardenError};
use crate::ledger::pool_candidates;
use crate::pools::{PoolKey, PoolKind};
use granary_api::common::LastOperationType;
use granary_api::core::{ANNOTATION_EMPTY_SINCE, BackupBucket, FINALIZER_GARDEN_BUCKET_GUARD};
use granary_runtime::status;

/// The controller's name in metrics and events.
pub const CONTROLLER: &str = "garden-backupbucket";
/// `lastError.taskID` of the errors this controller writes, so it clears only its own.
pub const TASK_ID: &str = "granary-garden";
/// Periodic re-check of every bucket.
const RESYNC: Duration = Duration::from_secs(300);

fn api(ctx: &Context) -> Api<BackupBucket> {
    Api::all(ctx.client.clone())
}

async fn merge(ctx: &Context, name: &str, patch: &Value) -> Result<BackupBucket, GardenError> {
    Ok(api(ctx)
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?)
}

async fn merge_status(
    ctx: &Context,
    name: &str,
    patch: &Value,
) -> Result<BackupBucket, GardenError> {
    Ok(api(ctx)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?)
}

fn our_error(bucket: &BackupBucket) -> Option<&str> {
    let error = bucket.status.as_ref()?.last_error.as_ref()?;
    (error.task_id.as_deref() == Some(TASK_ID)).then_some(error.description.as_str())
}

/// Sets (or, with `None`, clears) this controller's lastError; writes only on change.
/// A seed's own lastError is overwritten by a new garden one but never cleared here.
async fn set_error(
    ctx: &Context,
    bucket: &BackupBucket,
    message: Option<String>,
    operation: LastOperationType,
) -> Result<bool, GardenError> {
    let current = our_error(bucket);
    let patch = match (&message, current) {
        (None, None) => return Ok(false),
        (Some(m), Some(c)) if m == c => return Ok(false),
        (None, Some(_)) => json!({ "status": { "lastError": null } }),
        (Some(m), _) => {
            let now = ctx.clock.now();
            let mut error = status::last_error(m.clone(), [], now);
            error.task_id = Some(TASK_ID.to_string());
            json!({ "status": {
                "lastError": error,
                "lastOperation": status::errored(operation, m.clone(), now),
            }})
        }
    };
    merge_status(ctx, &bucket.name_any(), &patch).await?;
    Ok(true)
}

/// Reconciles one garden BackupBucket.
pub async fn reconcile(
    bucket: Arc<BackupBucket>,
    ctx: Arc<Context>,
) -> Result<Action, GardenError> {
    ctx.metrics
        .reconciles
        .with_label_values(&[CONTROLLER])
        .inc();
    let _timer = ctx
        .metrics
        .reconcile_duration
        .with_label_values(&[CONTROLLER])
        .start_timer();
    ctx.stores.wait_ready().await?;
    let name = bucket.name_any();
    let key = pool_of(&bucket);
    if bucket.meta().deletion_timestamp.is_some() {
        return guard(&ctx, &bucket, key.as_ref()).await;
    }
    let mut bucket = (*bucket).clone();
    if !bucket
        .finalizers()
        .iter()
        .any(|f| f == FINALIZER_GARDEN_BUCKET_GUARD)
    {
        let mut finalizers = bucket.finalizers().to_vec();
        finalizers.push(FINALIZER_GARDEN_BUCKET_GUARD.to_string());
        bucket = merge(
            &ctx,
            &name,
            &json!({ "metadata": {
                "resourceVersion": bucket.resource_version(),
                "finalizers": finalizers,
            }}),
        )
        .await?;
    }
    match pool_label_repair(&bucket) {
        None => {}
        Some(PoolLabelRepair::Record(patch)) => {
            bucket = merge(&ctx, &name, &patch).await?;
        }
        Some(PoolLabelRepair::Restore { patch, message }) => {
            bucket = merge(&ctx, &name, &patch).await?;
            tracing::warn!(bucket = %name, %message, "pool labels put back");
            ctx.event(
                &bucket,
                EventType::Warning,
                "PoolLabelsRestored",
                "Reconcile",
                message,
            )
            .await;
        }
    }
    if let Some(key) = &key {
        // The seeds of the pool read each other's Velero prefixes in its buckets.
        let readers = ctx.stores.pool_readers(key);
        if let Some(patch) = reader_labels_patch(&bucket, &readers) {
            bucket = merge(&ctx, &name, &patch).await?;
            tracing::info!(bucket = %name, ?readers, "Velero reader labels written");
        }
    }
    let mut requeue = RESYNC;
    if let Some(key) = &key {
        let count = ctx.ledger.recount(&ctx, key, &name).await?;
        // The limit the garden enforces, where tools read it (a migration's dry run).
        if let Some(limit) = ctx.entry_limit(key, &bucket)
            && bucket.status.as_ref().and_then(|s| s.entry_limit) != limit
        {
            bucket =
                merge_status(&ctx, &name, &json!({ "status": { "entryLimit": limit } })).await?;
        }
        // Places reserved ahead and not handed out are given back once they expire.
        if let Some(expiry) = ctx.ledger.spare_expires_in(key, &name).await {
            requeue = requeue.min(expiry + Duration::from_millis(50));
        }
        if key.kind != PoolKind::Legacy {
            let (updated, next) = assign(&ctx, bucket, key).await?;
            bucket = updated;
            requeue = requeue.min(next);
        }
        if let Some(next) = empty_shards(&ctx, &bucket, key, count).await? {
            requeue = requeue.min(next);
        }
    }
    if let Some(patch) = seed_label_patch(bucket.labels(), bucket.responsible_seed()) {
        merge(&ctx, &name, &patch).await?;
    }
    Ok(Action::requeue(requeue))
}

/// The deletion guard: keep the finalizer while entries reference the bucket.
async fn guard(
    ctx: &Context,
    bucket: &BackupBucket,
    key: Option<&PoolKey>,
) -> Result<Action, GardenError> {
    let name = bucket.name_any();
    let mut referencing = ctx.stores.entries_in(&name);
    if let Some(key) = key {
        // Includes entries placed here that the cache does not show yet.
        let count = ctx.ledger.recount(ctx, key, &name).await? as usize;
        while referencing.len() < count {
            referencing.push("(an entry being created)".to_string());
        }
    }
    let has_finalizer = bucket
        .finalizers()
        .iter()
        .any(|f| f == FINALIZER_GARDEN_BUCKET_GUARD);
    let decision = deletion_guard(has_finalizer, referencing);
    match &decision {
        DeletionGuard::Refuse { .. } => {
            let message = decision
                .refusal_message()
                .unwrap_or_else(|| "deletion refused".to_string());
            if set_error(
                ctx,
                bucket,
                Some(message.clone()),
                LastOperationType::Delete,
            )
            .await?
            {
                ctx.event(
                    bucket,
                    EventType::Warning,
                    "DeletionRefused",
                    "Delete",
                    message,
                )
                .await;
            }
            // Places reserved ahead count until they expire; then a recount gives them
            // back and the refusal may end (no entry change may come to wake this).
            let mut requeue = RESYNC;
            if let Some(key) = key
                && let Some(expiry) = ctx.ledger.spare_expires_in(key, &name).await
            {
                requeue = requeue.min(expiry + Duration::from_millis(50));
            }
            Ok(Action::requeue(requeue))
        }
        DeletionGuard::Release => {
            let finalizers: Vec<String> = bucket
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER_GARDEN_BUCKET_GUARD)
                .cloned()
                .collect();
            merge(
                ctx,
                &name,
                &json!({ "metadata": {
                    "resourceVersion": bucket.resource_version(),
                    "finalizers": finalizers,
                }}),
            )
            .await?;
            if let Some(key) = key {
                ctx.ledger.forget(key, &name).await;
            }
            tracing::info!(bucket = %name, "no entry references the bucket any more: deletion released");
            Ok(Action::await_change())
        }
        DeletionGuard::Done => Ok(Action::await_change()),
    }
}

/// Bucket → seed assignment. Returns the bucket as it is now and when to look again.
async fn assign(
    ctx: &Context,
    bucket: BackupBucket,
    key: &PoolKey,
) -> Result<(BackupBucket, Duration), GardenError> {
    let name = bucket.name_any();
    let candidates = pool_candidates(ctx, key);
    let now = ctx.clock.now();
    let timings = ctx.timings();
    let current = bucket.spec.seed_name.clone().filter(|s| !s.is_empty());
    let decision = assign_bucket(current.as_deref(), &key.region, &candidates, now, timings);
    let metric = |change: &str| {
        ctx.garden_metrics
            .assignments
            .with_label_values(&[change])
            .inc()
    };
    let bucket = match decision {
        Assignment::Keep => {
            set_error(ctx, &bucket, None, LastOperationType::Reconcile).await?;
            bucket
        }
        Assignment::Assign(seed) => {
            metric("assign");
            let updated = merge(ctx, &name, &json!({ "spec": { "seedName": seed } })).await?;
            set_error(ctx, &updated, None, LastOperationType::Reconcile).await?;
            ctx.event(
                &updated,
                EventType::Normal,
                "Assigned",
                "Assign",
                format!("assigned to seed {seed}"),
            )
            .await;
            updated
        }
        Assignment::HandOver { from, to } => {
            metric("hand_over");
            let mut updated = merge(ctx, &name, &json!({ "spec": { "seedName": to } })).await?;
            // The old seed is gone or has been unready past the hand-over time: it cannot
            // take part in the migration, so the garden releases it.
            if updated.status.as_ref().and_then(|s| s.seed_name.as_deref()) == Some(from.as_str()) {
                updated =
                    merge_status(ctx, &name, &json!({ "status": { "seedName": null } })).await?;
            }
            set_error(ctx, &updated, None, LastOperationType::Reconcile).await?;
            let note = format!("handed over from seed {from} to seed {to}");
            tracing::info!(bucket = %name, %from, %to, "bucket handed over");
            ctx.event(&updated, EventType::Normal, "HandedOver", "HandOver", note)
                .await;
            updated
        }
        Assignment::Stuck(reason) => {
            if set_error(
                ctx,
                &bucket,
                Some(reason.clone()),
                LastOperationType::Reconcile,
            )
            .await?
            {
                metric("stuck");
                ctx.event(
                    &bucket,
                    EventType::Warning,
                    "AssignmentFailed",
                    "Assign",
                    reason,
                )
                .await;
            }
            bucket
        }
    };
    let holder = bucket
        .spec
        .seed_name
        .as_deref()
        .and_then(|s| candidates.iter().find(|c| c.name == s));
    let next = next_check(holder, now, timings)
        .and_then(|t| (t - now).to_std().ok())
        .map_or(RESYNC, |d| d + Duration::from_millis(50));
    Ok((bucket, next))
}

/// Removal of empty non-first shards. Returns when to look again, if sooner than usual.
async fn empty_shards(
    ctx: &Context,
    bucket: &BackupBucket,
    key: &PoolKey,
    count: u32,
) -> Result<Option<Duration>, GardenError> {
    let Some(shard) = shard_of(bucket) else {
        return Ok(None);
    };
    let name = bucket.name_any();
    let remove_after = chrono::Duration::from_std(
        ctx.config
            .controllers
            .backup_bucket
            .remove_empty_shards_after
            .0,
    )
    .unwrap_or(chrono::Duration::MAX);
    let now = ctx.clock.now();
    let annotate =
        |value: Value| json!({ "metadata": { "annotations": { ANNOTATION_EMPTY_SINCE: value } } });
    match empty_shard(shard, count, empty_since(bucket), remove_after, now) {
        EmptyShard::Keep => Ok(None),
        EmptyShard::ClearEmptySince => {
            merge(ctx, &name, &annotate(Value::Null)).await?;
            Ok(None)
        }
        EmptyShard::MarkEmptySince => {
            merge(ctx, &name, &annotate(json!(now.to_rfc3339()))).await?;
            Ok(remove_after.to_std().ok())
        }
        EmptyShard::WaitUntil(t) => Ok((t - now).to_std().ok()),
        EmptyShard::Remove => {
            if ctx.ledger.remove_if_empty(ctx, key, &name).await? {
                ctx.event(
                    bucket,
                    EventType::Normal,
                    "EmptyShardRemoved",
                    "Delete",
                    format!("shard {shard} held no entry for {remove_after}; removed"),
                )
                .await;
            }
            Ok(None)
        }
    }
}
