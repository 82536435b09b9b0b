//! The controllers of the pools' owners. CloudProfile: validates `spec.backup` into the
//! `BackupConfigurationValid` condition (with a Warning event naming the field path;
//! no buckets while invalid), creates the first shard of every pool the profile needs
//! now (lazily, per region that has a seed) and passes credential and providerConfig
//! changes to every bucket of its pools. Seed: the same for a seed's own `spec.backup`,
//! plus the `BackupBucketsReady` condition from the buckets the seed is responsible for.
//! Both keep the garden's deletion guard ([`crate::guards`]): a finalizer removed
//! only once no shoot uses the profile, no entry or bucket is on the seed.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::buckets::{PoolSource, spec_drift};
use crate::conditions::{backup_buckets_ready, backup_configuration_valid, seed_lost};
use crate::context::{Context, GardenError};
use crate::guards::{
    CONDITION_DELETION_REFUSED, FINALIZER_GARDEN_GUARD, OwnerGuard, REASON_STILL_IN_USE,
    owner_guard, profile_dependents, seed_dependents,
};
use crate::pools::{PoolKey, PoolKind, ProfileView, SeedView, profile_pools, seed_pool};
use granary_api::common::{Condition, ConditionStatus};
use granary_api::core::{
    BackupBucket, CONDITION_BACKUP_BUCKETS_READY, CONDITION_BACKUP_CONFIGURATION_VALID,
    CONDITION_SEED_LOST, CloudProfile, Seed, validate_cloud_profile, validate_seed,
};
use granary_runtime::conditions::set_condition;

/// Controller names in metrics and events.
pub const PROFILE_CONTROLLER: &str = "garden-cloudprofile";
pub const SEED_CONTROLLER: &str = "garden-seed";
const RESYNC: Duration = Duration::from_secs(300);

/// Passes the owner's credentials and providerConfig to every bucket of its pools of
/// `kind`. Reads the owner's pools from the pool index: an owner's reconcile follows
/// every bucket change, so a scan of every bucket here made the cost grow with the
/// square of the number of buckets.
async fn propagate(
    ctx: &Context,
    kind: PoolKind,
    owner: &str,
    source_for: impl Fn(PoolKey) -> Option<PoolSource>,
) -> Result<(), GardenError> {
    let api: Api<BackupBucket> = Api::all(ctx.client.clone());
    let pools: Vec<(PoolKey, Vec<Arc<BackupBucket>>)> = ctx.stores.pools.read(|pools| {
        pools
            .of_owner(kind, owner)
            .map(|(key, buckets)| {
                let live = buckets.filter(|b| b.meta().deletion_timestamp.is_none());
                (key.clone(), live.cloned().collect())
            })
            .collect()
    });
    for (key, buckets) in pools {
        // One source per pool: it clones the owner's credentials and providerConfig.
        let Some(source) = source_for(key) else {
            continue;
        };
        for bucket in buckets {
            if let Some(patch) = spec_drift(&bucket, &source) {
                api.patch(
                    &bucket.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
                tracing::info!(bucket = %bucket.name_any(), owner, "credentials/providerConfig passed on to bucket");
            }
        }
    }
    Ok(())
}

/// The seeds that count for pools: registered and not being deleted.
fn live_seeds(ctx: &Context) -> Vec<SeedView> {
    ctx.stores
        .seeds
        .state()
        .iter()
        .filter(|s| s.meta().deletion_timestamp.is_none())
        .map(|s| SeedView::of(s))
        .collect()
}

/// A cluster-scoped kind whose status has Gardener conditions.
trait Guarded:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + serde::Serialize
{
    /// "seed", "cloud profile": how messages name the kind.
    const WHAT: &'static str;
    fn conditions(&self) -> &[Condition];
}

impl Guarded for CloudProfile {
    const WHAT: &'static str = "cloud profile";
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |s| s.conditions.as_slice())
    }
}

impl Guarded for Seed {
    const WHAT: &'static str = "seed";
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |s| s.conditions.as_slice())
    }
}

fn has_guard<K: Guarded>(obj: &K) -> bool {
    obj.finalizers().iter().any(|f| f == FINALIZER_GARDEN_GUARD)
}

/// Puts the garden's finalizer on `obj` (compare-and-swap on its resourceVersion).
async fn ensure_guard<K: Guarded>(ctx: &Context, obj: &K) -> Result<(), GardenError> {
    if has_guard(obj) {
        return Ok(());
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(FINALIZER_GARDEN_GUARD.to_string());
    Api::<K>::all(ctx.client.clone())
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({ "metadata": {
                "resourceVersion": obj.resource_version(),
                "finalizers": finalizers,
            }})),
        )
        .await?;
    Ok(())
}

/// The deletion guard of a Seed or CloudProfile being deleted: keeps the finalizer while
/// `dependents` exist (saying so in the `DeletionRefused` condition and a Warning event
/// when the reason changes), removes it once none is left.
async fn guard<K: Guarded>(
    ctx: &Context,
    obj: &K,
    dependents: &[String],
) -> Result<Action, GardenError> {
    let name = obj.name_any();
    let api = Api::<K>::all(ctx.client.clone());
    match owner_guard(has_guard(obj), K::WHAT, dependents) {
        OwnerGuard::Done => Ok(Action::await_change()),
        OwnerGuard::Release => {
            let finalizers: Vec<String> = obj
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER_GARDEN_GUARD)
                .cloned()
                .collect();
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "metadata": {
                    "resourceVersion": obj.resource_version(),
                    "finalizers": finalizers,
                }})),
            )
            .await?;
            tracing::info!(what = K::WHAT, %name, "nothing depends on it any more: deletion released");
            Ok(Action::await_change())
        }
        OwnerGuard::Refuse(message) => {
            let current = obj.conditions();
            let conditions = set_condition(
                current,
                CONDITION_DELETION_REFUSED,
                ConditionStatus::True,
                REASON_STILL_IN_USE,
                &message,
                ctx.clock.now(),
            );
            if conditions.as_slice() != current {
                api.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({ "status": { "conditions": conditions } })),
                )
                .await?;
                tracing::info!(what = K::WHAT, %name, %message, "deletion waits");
                ctx.event(
                    obj,
                    EventType::Warning,
                    REASON_STILL_IN_USE,
                    "Delete",
                    message,
                )
                .await;
            }
            // Dependents going away wake the guard; look again now and then anyway.
            Ok(Action::requeue(Duration::from_secs(30)))
        }
    }
}

/// Reconciles one CloudProfile.
pub async fn reconcile_profile(
    profile: Arc<CloudProfile>,
    ctx: Arc<Context>,
) -> Result<Action, GardenError> {
    ctx.metrics
        .reconciles
        .with_label_values(&[PROFILE_CONTROLLER])
        .inc();
    let _timer = ctx
        .metrics
        .reconcile_duration
        .with_label_values(&[PROFILE_CONTROLLER])
        .start_timer();
    ctx.stores.wait_ready().await?;
    let name = profile.name_any();
    if profile.meta().deletion_timestamp.is_some() {
        // Deleting a profile deletes no bucket; it goes once no shoot uses it.
        let dependents = profile_dependents(&name, ctx.stores.shoots.state().iter().map(|s| &**s));
        return guard(&ctx, profile.as_ref(), &dependents).await;
    }
    ensure_guard(&ctx, profile.as_ref()).await?;
    let errors = validate_cloud_profile(&profile);
    let (status, reason, message) =
        backup_configuration_valid(profile.spec.backup.is_some(), &errors);
    tracing::debug!(profile = %name, %status, %message, "cloud profile validated");
    let current: &[Condition] = profile
        .status
        .as_ref()
        .map_or(&[], |s| s.conditions.as_slice());
    let conditions = set_condition(
        current,
        CONDITION_BACKUP_CONFIGURATION_VALID,
        status,
        reason,
        &message,
        ctx.clock.now(),
    );
    if conditions.as_slice() != current {
        let api: Api<CloudProfile> = Api::all(ctx.client.clone());
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": { "conditions": conditions } })),
        )
        .await?;
        if status == ConditionStatus::False {
            ctx.event(
                profile.as_ref(),
                EventType::Warning,
                reason,
                "Validate",
                message.clone(),
            )
            .await;
        }
    }
    if !errors.is_empty() || profile.spec.backup.is_none() {
        return Ok(Action::requeue(RESYNC));
    }
    for key in profile_pools(&ProfileView::of(&profile), &live_seeds(&ctx)) {
        if let Some(source) = PoolSource::from_profile(&profile, key) {
            ctx.ledger.ensure_first_shard(&ctx, &source).await?;
        }
    }
    propagate(&ctx, PoolKind::CloudProfile, &name, |key| {
        PoolSource::from_profile(&profile, key)
    })
    .await?;
    Ok(Action::requeue(RESYNC))
}

/// Reconciles one Seed.
pub async fn reconcile_seed(seed: Arc<Seed>, ctx: Arc<Context>) -> Result<Action, GardenError> {
    ctx.metrics
        .reconciles
        .with_label_values(&[SEED_CONTROLLER])
        .inc();
    let _timer = ctx
        .metrics
        .reconcile_duration
        .with_label_values(&[SEED_CONTROLLER])
        .start_timer();
    ctx.stores.wait_ready().await?;
    let name = seed.name_any();
    let (seed_conditions, look_again) = mark_lost(&ctx, &seed).await?;
    if seed.meta().deletion_timestamp.is_some() {
        // Deleting a seed deletes no bucket; its buckets and the entries leaving it are
        // handed over, and it goes once nothing is on it.
        let entries = ctx.stores.entries.state();
        let buckets = ctx.stores.buckets.state();
        let dependents = seed_dependents(
            &name,
            entries.iter().map(|e| &**e),
            buckets.iter().map(|b| &**b),
        );
        // The guard's own condition joins the `Lost` one just written.
        let mut marked = (*seed).clone();
        marked
            .status
            .get_or_insert_with(Default::default)
            .conditions = seed_conditions;
        return guard(&ctx, &marked, &dependents).await;
    }
    ensure_guard(&ctx, seed.as_ref()).await?;
    if seed.spec.backup.is_some() {
        let errors = validate_seed(&seed);
        if errors.is_empty() {
            if let Some(source) =
                seed_pool(&SeedView::of(&seed)).and_then(|key| PoolSource::from_seed(&seed, key))
            {
                ctx.ledger.ensure_first_shard(&ctx, &source).await?;
            }
            propagate(&ctx, PoolKind::Seed, &name, |key| {
                PoolSource::from_seed(&seed, key)
            })
            .await?;
        } else {
            ctx.event(
                seed.as_ref(),
                EventType::Warning,
                "InvalidBackupConfiguration",
                "Validate",
                format!(
                    "no backup buckets are created for the seed's own spec.backup: {}",
                    granary_api::common::describe_field_errors(&errors)
                ),
            )
            .await;
        }
    }
    let buckets: Vec<(String, Option<String>)> = ctx
        .stores
        .buckets
        .state()
        .iter()
        .filter(|b| b.responsible_seed() == Some(name.as_str()))
        .map(|b| {
            let error = b
                .status
                .as_ref()
                .and_then(|s| s.last_error.as_ref())
                .map(|e| e.description.clone());
            (b.name_any(), error)
        })
        .collect();
    let (status, reason, message) = backup_buckets_ready(&buckets);
    // As `mark_lost` left them.
    let current: &[Condition] = &seed_conditions;
    let conditions = set_condition(
        current,
        CONDITION_BACKUP_BUCKETS_READY,
        status,
        reason,
        &message,
        ctx.clock.now(),
    );
    if conditions.as_slice() != current {
        let api: Api<Seed> = Api::all(ctx.client.clone());
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": { "conditions": conditions } })),
        )
        .await?;
    }
    Ok(Action::requeue(
        look_again.map_or(RESYNC, |d| d.min(RESYNC)),
    ))
}

/// Keeps the seed's `Lost` condition ([`seed_lost`]), with a Warning event `SeedLost`
/// when it turns True. Returns the seed's conditions as written, and the time until an
/// unready seed would turn lost, if it will.
async fn mark_lost(
    ctx: &Context,
    seed: &Seed,
) -> Result<(Vec<Condition>, Option<Duration>), GardenError> {
    let name = seed.name_any();
    let now = ctx.clock.now();
    let timings = ctx.timings();
    let candidate = ctx.stores.candidate(seed);
    let view = SeedView::of(seed);
    let (seeds, profiles) = ctx.stores.pool_views();
    let mut readers: Vec<String> = crate::pools::seed_velero_pools(&view, &profiles)
        .iter()
        .flat_map(|key| crate::pools::pool_readers(key, &seeds, &profiles))
        .filter(|s| *s != name)
        .collect();
    readers.sort();
    readers.dedup();
    let ((status, reason, message), next) = seed_lost(
        &name,
        candidate.deleting,
        candidate.unready_since(now, timings.ready_within),
        now,
        timings.hand_over_after,
        &readers,
    );
    let current: &[Condition] = seed
        .status
        .as_ref()
        .map_or(&[], |s| s.conditions.as_slice());
    let was_lost = current
        .iter()
        .any(|c| c.type_ == CONDITION_SEED_LOST && c.status == ConditionStatus::True);
    let conditions = set_condition(current, CONDITION_SEED_LOST, status, reason, &message, now);
    if conditions.as_slice() != current {
        Api::<Seed>::all(ctx.client.clone())
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": { "conditions": conditions } })),
            )
            .await?;
        if status == ConditionStatus::True && !was_lost {
            ctx.event(seed, EventType::Warning, "SeedLost", "MarkLost", message)
                .await;
        }
    }
    let look_again =
        next.map(|t| (t - now).to_std().unwrap_or_default() + Duration::from_millis(10));
    Ok((conditions, look_again))
}
