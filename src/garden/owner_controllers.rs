//! The controllers of the pools' owners. CloudProfile: validates `spec.backup` into the
//! `BackupConfigurationValid` condition (with a Warning event naming the field path;
//! no buckets while invalid), creates the first shard of every pool the profile needs
//! now (lazily, per region that has a seed) and passes credential and providerConfig
//! changes to every bucket of its pools. Seed: the same for a seed's own `spec.backup`,
//! plus the `BackupBucketsReady` condition from the buckets the seed is responsible for.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::common::{Condition, ConditionStatus};
use crate::api::core::{
    BackupBucket, CONDITION_BACKUP_BUCKETS_READY, CONDITION_BACKUP_CONFIGURATION_VALID,
    CloudProfile, Seed, validate_cloud_profile, validate_seed,
};
use crate::garden::buckets::{PoolSource, pool_of, spec_drift};
use crate::garden::conditions::{backup_buckets_ready, backup_configuration_valid};
use crate::garden::context::{Context, GardenError};
use crate::garden::pools::{PoolKey, PoolKind, ProfileView, SeedView, profile_pools, seed_pool};
use crate::runtime::conditions::set_condition;

/// Controller names in metrics and events.
pub const PROFILE_CONTROLLER: &str = "garden-cloudprofile";
pub const SEED_CONTROLLER: &str = "garden-seed";
const RESYNC: Duration = Duration::from_secs(300);

/// Passes the owner's credentials and providerConfig to every bucket of its pools of
/// `kind`, and records the sizes of all pools (dropping the gauges of pools and buckets
/// that are gone, whoever owned them).
async fn propagate(
    ctx: &Context,
    kind: PoolKind,
    owner: &str,
    source_for: impl Fn(PoolKey) -> Option<PoolSource>,
) -> Result<(), GardenError> {
    let api: Api<BackupBucket> = Api::all(ctx.client.clone());
    let mut sizes: BTreeMap<PoolKey, i64> = BTreeMap::new();
    let mut live: HashSet<String> = HashSet::new();
    for bucket in ctx.stores.buckets.state() {
        live.insert(bucket.name_any());
        let Some(key) = pool_of(&bucket) else {
            continue;
        };
        *sizes.entry(key.clone()).or_default() += 1;
        if key.kind != kind || key.owner != owner || bucket.meta().deletion_timestamp.is_some() {
            continue;
        }
        let Some(source) = source_for(key) else {
            continue;
        };
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
    ctx.garden_metrics.record_pools(&sizes, &live);
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
    let errors = validate_cloud_profile(&profile);
    let (status, reason, message) =
        backup_configuration_valid(profile.spec.backup.is_some(), &errors);
    tracing::debug!(profile = %name, ?status, %message, "cloud profile validated");
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
    if seed.meta().deletion_timestamp.is_some() {
        // Deleting a seed deletes no bucket; its buckets are handed over.
        return Ok(Action::await_change());
    }
    let name = seed.name_any();
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
                    crate::api::common::describe_field_errors(&errors)
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
    let current: &[Condition] = seed
        .status
        .as_ref()
        .map_or(&[], |s| s.conditions.as_slice());
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
    Ok(Action::requeue(RESYNC))
}
