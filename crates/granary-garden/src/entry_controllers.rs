//! Shoot → BackupEntry (docs/architecture.md#entry-placement): for every Shoot with a
//! seed, its entry exists, follows the shoot's seed and purpose, and was placed exactly
//! once (placement through the [`Ledger`](crate::ledger::Ledger), committed before the
//! entry is written). A second small controller keeps every entry's
//! `granary.gardener.cloud/seed` label on its responsible seed, also for entries whose
//! shoot is gone, and hands an entry being deleted to its bucket's seed when its own seed
//! cannot clean up, and answers a migration's request for a place in another bucket
//! ([`crate::moves`]).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use serde_json::json;

use crate::assignment::{
    EntryHandOver, SeedCandidate, cleanup_hand_over, entry_hand_over, missing_seed, next_check,
};
use crate::buckets::seed_label_patch;
use crate::context::{Context, GardenError};
use crate::entries::entry_update;
use crate::ledger::Reservation;
use crate::moves::{MoveStep, move_step};
use crate::placer::{self, Outcome};
use granary_api::common::{LastOperationState, LastOperationType};
use granary_api::core::{
    ANNOTATION_MIGRATION_REFUSED, ANNOTATION_MIGRATION_RESERVED, BackupEntry, Shoot,
};
use granary_runtime::status;

/// Controller names in metrics and events.
pub const SHOOT_CONTROLLER: &str = "garden-shoot";
pub const ENTRY_CONTROLLER: &str = "garden-backupentry";

const RESYNC: Duration = Duration::from_secs(600);
const WAIT_FOR_DEPENDENCY: Duration = Duration::from_secs(30);

async fn pending(ctx: &Context, shoot: &Shoot, reason: &str, note: String) -> Action {
    tracing::debug!(shoot = %shoot.name_any(), reason, %note, "no BackupEntry yet");
    ctx.event(shoot, EventType::Warning, reason, "Backup", note)
        .await;
    Action::requeue(WAIT_FOR_DEPENDENCY)
}

/// Reconciles one Shoot.
pub async fn reconcile_shoot(shoot: Arc<Shoot>, ctx: Arc<Context>) -> Result<Action, GardenError> {
    ctx.metrics
        .reconciles
        .with_label_values(&[SHOOT_CONTROLLER])
        .inc();
    let _timer = ctx
        .metrics
        .reconcile_duration
        .with_label_values(&[SHOOT_CONTROLLER])
        .start_timer();
    // Not the whole shoot list: this reads no other shoot.
    ctx.stores.wait_ready_but_shoots().await?;
    if shoot.meta().deletion_timestamp.is_some() {
        // Garbage collection removes the entry through its owner reference.
        return Ok(Action::await_change());
    }
    if shoot.spec.seed_name.as_deref().is_none_or(str::is_empty) {
        return Ok(Action::await_change());
    }
    if let Some(entry) = ctx.stores.entry_of(&shoot) {
        // An entry on its way out is no longer steered by its shoot (its cleanup may
        // have been handed to another seed).
        if entry.meta().deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        if let Some(patch) = entry_update(&entry, &shoot) {
            Api::<BackupEntry>::namespaced(
                ctx.client.clone(),
                &entry.namespace().unwrap_or_default(),
            )
            .patch(
                &entry.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        }
        // Every change of the shoot or of its entry wakes this reconcile: no resync.
        return Ok(Action::await_change());
    }
    // No entry yet: the placer's path, for this one shoot.
    let step = placer::plan(&ctx, vec![shoot.clone()]).await?.pop();
    let outcome = match step {
        Some(step) => placer::carry_out(&ctx, step).await.1,
        None => Outcome::Nothing,
    };
    match outcome {
        Outcome::Created | Outcome::Nothing => Ok(Action::await_change()),
        // Its entry is being created, or exists after all: the cache will show it.
        Outcome::InFlight | Outcome::Exists | Outcome::NotTried => {
            Ok(Action::requeue(Duration::from_secs(1)))
        }
        Outcome::Waits(note) => Ok(pending(&ctx, &shoot, "BackupEntryPending", note).await),
        Outcome::Failed(e) => Err(e),
    }
}

/// Keeps an entry's seed label on its responsible seed.
pub async fn reconcile_entry(
    entry: Arc<BackupEntry>,
    ctx: Arc<Context>,
) -> Result<Action, GardenError> {
    ctx.metrics
        .reconciles
        .with_label_values(&[ENTRY_CONTROLLER])
        .inc();
    let _timer = ctx
        .metrics
        .reconcile_duration
        .with_label_values(&[ENTRY_CONTROLLER])
        .start_timer();
    let api: Api<BackupEntry> =
        Api::namespaced(ctx.client.clone(), &entry.namespace().unwrap_or_default());
    let mut action = Action::await_change();
    let mut entry = entry;
    if entry.meta().deletion_timestamp.is_some() {
        ctx.stores.wait_ready().await?;
        let (handed, next) = cleanup_hand_over_entry(&ctx, &api, &entry).await?;
        if let Some(updated) = handed {
            entry = Arc::new(updated);
        }
        // Seeds' liveness changes trigger no entry reconcile: look again at the latest
        // when the entry's seed would lose it, and every so often while it waits.
        action = Action::requeue(next.unwrap_or(WAIT_FOR_DEPENDENCY).min(WAIT_FOR_DEPENDENCY));
    } else if entry.responsible_seed() != entry.spec.seed_name.as_deref() {
        ctx.stores.wait_ready().await?;
        let (updated, next) = seed_hand_over_entry(&ctx, &api, &entry).await?;
        if let Some(updated) = updated {
            entry = Arc::new(updated);
        }
        action = Action::requeue(next);
    } else {
        ctx.stores.wait_ready().await?;
        let (updated, waits) = say_missing_seed(&ctx, &api, &entry).await?;
        if let Some(updated) = updated {
            entry = Arc::new(updated);
        }
        if waits {
            // Seeds appearing trigger no entry reconcile: look again every so often.
            action = Action::requeue(WAIT_FOR_DEPENDENCY);
        }
    }
    apply_move(&ctx, &api, &entry).await?;
    if let Some(patch) = seed_label_patch(entry.labels(), entry.responsible_seed()) {
        api.patch(
            &entry.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(action)
}

/// An entry being deleted whose seed can no longer clean up goes to its bucket's seed
/// (docs/architecture.md#hand-over-between-seeds). Returns the entry when it was handed
/// over, and when to look again if its seed may lose it later without any watch event.
async fn cleanup_hand_over_entry(
    ctx: &Context,
    api: &Api<BackupEntry>,
    entry: &BackupEntry,
) -> Result<(Option<BackupEntry>, Option<Duration>), GardenError> {
    let candidates = candidates(ctx);
    let bucket = ctx
        .stores
        .buckets
        .get(&ObjectRef::new(&entry.spec.bucket_name));
    let from = entry.responsible_seed();
    let now = ctx.clock.now();
    let timings = ctx.timings();
    let Some((to, why)) = cleanup_hand_over(
        from,
        bucket.as_ref().and_then(|b| b.responsible_seed()),
        &candidates,
        now,
        timings,
    ) else {
        let holder = from.and_then(|f| candidates.iter().find(|c| c.name == f));
        let next = next_check(holder, now, timings)
            .and_then(|t| (t - now).to_std().ok())
            .map(|d| d + Duration::from_millis(50));
        return Ok((None, next));
    };
    let name = entry.name_any();
    let mut updated = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "seedName": to } })),
        )
        .await?;
    if updated
        .status
        .as_ref()
        .and_then(|s| s.seed_name.as_deref())
        .is_some_and(|s| s != to)
    {
        updated = api
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": { "seedName": null } })),
            )
            .await?;
    }
    let note = format!("{why}: handed to seed {to}, which holds the bucket, for the cleanup");
    tracing::info!(entry = %name, seed = %to, %why, "deleted entry handed over for cleanup");
    ctx.event(&updated, EventType::Normal, "HandedOver", "HandOver", note)
        .await;
    Ok((Some(updated), None))
}

/// A live entry whose shoot moved to another seed (see
/// docs/architecture.md#hand-over-between-seeds): the old seed normally releases it;
/// until it does, the entry's status says what it waits for (the seed's earlier Succeeded
/// is not true for the new seed); when the old seed is gone, being deleted or unready
/// past the hand-over time, the garden releases it, as it hands over buckets. Returns the
/// entry when the garden changed it, and when to look again.
async fn seed_hand_over_entry(
    ctx: &Context,
    api: &Api<BackupEntry>,
    entry: &BackupEntry,
) -> Result<(Option<BackupEntry>, Duration), GardenError> {
    let candidates = candidates(ctx);
    let status = entry.status.clone().unwrap_or_default();
    let now = ctx.clock.now();
    let timings = ctx.timings();
    let name = entry.name_any();
    let decision = entry_hand_over(
        entry.spec.seed_name.as_deref(),
        status.seed_name.as_deref(),
        &candidates,
        now,
        timings,
    );
    // A status write on the entry as the garden saw it (409 when the seed wrote since).
    let write = |body: serde_json::Value| async move {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({
                "metadata": { "resourceVersion": entry.resource_version() },
                "status": body,
            })),
        )
        .await
    };
    match decision {
        EntryHandOver::None => Ok((None, RESYNC)),
        EntryHandOver::Wait { message } => {
            let holder = status
                .seed_name
                .as_deref()
                .and_then(|f| candidates.iter().find(|c| c.name == f));
            let next = next_check(holder, now, timings)
                .and_then(|t| (t - now).to_std().ok())
                .map_or(WAIT_FOR_DEPENDENCY, |d| d + Duration::from_millis(50))
                .min(WAIT_FOR_DEPENDENCY);
            let last = status.last_operation.as_ref();
            // The old seed reporting the move itself is the truth already.
            let seed_reports = last.is_some_and(|o| {
                o.type_ == LastOperationType::Migrate && o.state == LastOperationState::Processing
            });
            let said = last.is_some_and(|o| {
                o.type_ == LastOperationType::Migrate
                    && o.state == LastOperationState::Pending
                    && o.description == message
            });
            if seed_reports || said {
                return Ok((None, next));
            }
            let updated =
                write(json!({ "lastOperation": status::pending(LastOperationType::Migrate, message.clone(), now) }))
                    .await?;
            tracing::info!(entry = %entry.name_any(), %message, "hand-over pending");
            ctx.event(
                &updated,
                EventType::Normal,
                "HandOverPending",
                "HandOver",
                message,
            )
            .await;
            Ok((Some(updated), next))
        }
        EntryHandOver::Release { from, to, why } => {
            let message = format!(
                "{why}: the garden released the entry from seed {from}; waiting for seed {to} \
                 to take it over"
            );
            let updated = write(json!({
                "seedName": null,
                "lastError": null,
                "lastOperation": status::pending(LastOperationType::Migrate, message.clone(), now),
            }))
            .await?;
            tracing::info!(entry = %entry.name_any(), %from, %to, %why, "entry handed over");
            ctx.event(
                &updated,
                EventType::Normal,
                "HandedOver",
                "HandOver",
                message,
            )
            .await;
            Ok((Some(updated), RESYNC))
        }
    }
}

fn candidates(ctx: &Context) -> Vec<SeedCandidate> {
    ctx.stores
        .seeds
        .state()
        .iter()
        .map(|s| ctx.stores.candidate(s))
        .collect()
}

/// An entry on a seed the garden does not have ([`missing_seed`]): its last operation
/// Pending with the reason, and a Warning event naming the seed, once per wait. The
/// operation's type is kept (a released entry stays a hand-over, so the seed that takes
/// it restores it). Returns the entry when it was written, and whether it waits.
async fn say_missing_seed(
    ctx: &Context,
    api: &Api<BackupEntry>,
    entry: &BackupEntry,
) -> Result<(Option<BackupEntry>, bool), GardenError> {
    let status = entry.status.clone().unwrap_or_default();
    let Some(message) = missing_seed(
        entry.spec.seed_name.as_deref(),
        status.seed_name.as_deref(),
        &candidates(ctx),
    ) else {
        return Ok((None, false));
    };
    let last = status.last_operation.as_ref();
    if last.is_some_and(|o| o.state == LastOperationState::Pending && o.description == message) {
        return Ok((None, true));
    }
    let op = last.map_or(LastOperationType::Create, |o| o.type_);
    let now = ctx.clock.now();
    let updated = api
        .patch_status(
            &entry.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({
                "metadata": { "resourceVersion": entry.resource_version() },
                "status": { "lastOperation": status::pending(op, message.clone(), now) },
            })),
        )
        .await?;
    tracing::warn!(entry = %entry.name_any(), %message, "entry on a seed that does not exist");
    ctx.event(
        &updated,
        EventType::Warning,
        "SeedNotFound",
        "Backup",
        message,
    )
    .await;
    Ok((Some(updated), true))
}

/// Answers a migration's request for a place in another bucket, or lets go of a place
/// no longer needed ([`crate::moves`]).
async fn apply_move(
    ctx: &Context,
    api: &Api<BackupEntry>,
    entry: &BackupEntry,
) -> Result<(), GardenError> {
    let step = move_step(
        entry.annotations(),
        &entry.spec.bucket_name,
        entry.meta().deletion_timestamp.is_some(),
    );
    let name = entry.name_any();
    let key = (entry.namespace().unwrap_or_default(), name.clone());
    let mark = |value: serde_json::Value| json!({ "metadata": { "annotations": value } });
    match step {
        MoveStep::None => Ok(()),
        MoveStep::Release(bucket) => {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&mark(json!({ ANNOTATION_MIGRATION_RESERVED: null }))),
            )
            .await?;
            let pool = ctx
                .stores
                .buckets
                .get(&ObjectRef::new(&bucket))
                .and_then(|b| crate::buckets::pool_of(&b));
            if let Some(pool) = pool {
                ctx.ledger.release_move(ctx, &pool, &key, &bucket).await?;
            }
            tracing::info!(entry = %name, %bucket, "place held for a move released");
            Ok(())
        }
        MoveStep::Reserve(bucket) => {
            ctx.stores.wait_ready().await?;
            ctx.wait_counts_ready().await?;
            match ctx.ledger.reserve(ctx, &bucket, &key).await? {
                Reservation::Held(pool) => {
                    let marked = api
                        .patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(&mark(json!({
                                ANNOTATION_MIGRATION_RESERVED: bucket,
                                ANNOTATION_MIGRATION_REFUSED: null,
                            }))),
                        )
                        .await;
                    if let Err(e) = marked {
                        ctx.ledger.release(ctx, &pool, &key, &bucket).await?;
                        return Err(e.into());
                    }
                    let note = format!("a place in bucket {bucket} is held for the migration");
                    tracing::info!(entry = %name, %bucket, "place held for a move");
                    ctx.event(
                        entry,
                        EventType::Normal,
                        "MigrationPlaceHeld",
                        "Migrate",
                        note,
                    )
                    .await;
                    Ok(())
                }
                Reservation::Refused(why) => {
                    api.patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&mark(json!({ ANNOTATION_MIGRATION_REFUSED: why }))),
                    )
                    .await?;
                    tracing::info!(entry = %name, %bucket, %why, "move refused");
                    ctx.event(
                        entry,
                        EventType::Warning,
                        "MigrationRefused",
                        "Migrate",
                        why,
                    )
                    .await;
                    Ok(())
                }
            }
        }
    }
}
