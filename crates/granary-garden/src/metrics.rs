//! The garden's own metrics (docs/operations.md#health-and-metrics), registered into the
//! process registry next to the shared `granary_reconcile_*`: pool sizes, shard fill,
//! placements and conflicts, and bucket hand-overs. The per-bucket and per-pool gauges
//! are read from the caches at each scrape ([`LandscapeGauges`]), so a gauge goes with
//! its object and the controllers keep no books for them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts};

use crate::buckets::recorded_count;
use crate::config::GardenConfiguration;
use crate::context::Stores;
use crate::health::{Protection, protection};
use crate::pool_index::Pools;
use granary_runtime::metrics::Metrics;

/// Handles to the garden metrics. Cheap to clone.
#[derive(Clone)]
pub struct GardenMetrics {
    /// `granary_garden_placements_total{outcome}`: entries placed (`existing` shard or
    /// `new_shard`).
    pub placements: IntCounterVec,
    /// `granary_garden_placement_conflicts_total{pool_kind}`: compare-and-swap conflicts
    /// that made placement recompute.
    pub placement_conflicts: IntCounterVec,
    /// `granary_garden_bucket_assignments_total{change}`: `assign`, `hand_over`, `stuck`.
    pub assignments: IntCounterVec,
    /// The caches the scrape-time gauges read ([`Landscape`]).
    landscape: Landscape,
}

impl GardenMetrics {
    /// Creates the metrics and registers them into `metrics`' registry.
    pub fn register(metrics: &Metrics) -> Result<Self, prometheus::Error> {
        let m = GardenMetrics {
            placements: IntCounterVec::new(
                Opts::new(
                    "granary_garden_placements_total",
                    "BackupEntries placed, by whether a new shard was needed.",
                ),
                &["outcome"],
            )?,
            placement_conflicts: IntCounterVec::new(
                Opts::new(
                    "granary_garden_placement_conflicts_total",
                    "Compare-and-swap conflicts on a bucket's entry count during placement.",
                ),
                &["pool_kind"],
            )?,
            assignments: IntCounterVec::new(
                Opts::new(
                    "granary_garden_bucket_assignments_total",
                    "Bucket to seed assignment changes.",
                ),
                &["change"],
            )?,
            landscape: Landscape::default(),
        };
        metrics.register(Box::new(m.placements.clone()))?;
        metrics.register(Box::new(m.placement_conflicts.clone()))?;
        metrics.register(Box::new(m.assignments.clone()))?;
        metrics.register(Box::new(LandscapeGauges::new(m.landscape.clone())?))?;
        Ok(m)
    }

    /// Reads the scrape-time gauges from `stores` (the term holding leadership, with
    /// its configuration's quotas) until the returned guard is dropped; a replica
    /// standing by reports none of them.
    pub(crate) fn watch(&self, stores: Stores, config: GardenConfiguration) -> WatchGuard {
        *self.landscape.0.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((stores, Arc::new(config)));
        WatchGuard(self.landscape.clone())
    }
}

/// The caches of the term holding leadership, if any.
#[derive(Clone, Default)]
struct Landscape(Arc<Mutex<Option<Watched>>>);

/// What the scrape-time gauges read: the leading term's caches and configuration.
type Watched = (Stores, Arc<GardenConfiguration>);

/// Stops the scrape-time gauges when the term that set them ends.
pub(crate) struct WatchGuard(Landscape);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        *self.0.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Gauges computed from the caches at each scrape (as kube-state-metrics does), so they
/// never go stale and need no bookkeeping in the controllers:
/// - `granary_garden_shoot_unprotected{namespace, shoot, seed, backupentry}`: 1 for each
///   shoot [`protection`] finds unprotected (no entry, or one not Succeeded); the state
///   is not a label, so an alert's `for` runs on across Processing → Error.
/// - `granary_garden_backupentries{state}`: entries by their last operation's state
///   (`None` before any).
/// - the pools and their buckets ([`PoolGauges`]).
///
/// Nothing is reported until the caches hold their initial lists: a half-filled cache
/// would show every shoot unprotected.
struct LandscapeGauges {
    landscape: Landscape,
    unprotected: IntGaugeVec,
    entries: IntGaugeVec,
    pools: PoolGauges,
}

/// The pool gauges, from the pool index:
/// - `granary_garden_pool_shards{pool_kind, owner, region}`: buckets per pool;
/// - `granary_garden_bucket_entries{bucket}`: each pool bucket's `status.entryCount`
///   (entries placed and places reserved);
/// - `granary_garden_bucket_fill_ratio{bucket}`: that count over its provider's quota
///   limit, for providers with one.
struct PoolGauges {
    shards: IntGaugeVec,
    entries: IntGaugeVec,
    fill: GaugeVec,
}

impl PoolGauges {
    fn new() -> Result<Self, prometheus::Error> {
        Ok(PoolGauges {
            shards: IntGaugeVec::new(
                Opts::new(
                    "granary_garden_pool_shards",
                    "BackupBuckets per bucket pool.",
                ),
                &["pool_kind", "owner", "region"],
            )?,
            entries: IntGaugeVec::new(
                Opts::new(
                    "granary_garden_bucket_entries",
                    "BackupEntries placed in a BackupBucket (status.entryCount).",
                ),
                &["bucket"],
            )?,
            fill: GaugeVec::new(
                Opts::new(
                    "granary_garden_bucket_fill_ratio",
                    "Entries of a BackupBucket divided by its provider's quota limit.",
                ),
                &["bucket"],
            )?,
        })
    }

    fn desc(&self) -> Vec<&Desc> {
        let mut d = self.shards.desc();
        d.extend(self.entries.desc());
        d.extend(self.fill.desc());
        d
    }

    /// The gauges of `pools`, each provider's limit from `quota`.
    fn read(pools: &Pools, quota: impl Fn(&str) -> Option<u32>) -> Vec<MetricFamily> {
        let Ok(gauges) = PoolGauges::new() else {
            return Vec::new();
        };
        for (key, size) in pools.sizes() {
            gauges
                .shards
                .with_label_values(&[key.kind.as_str(), key.owner.as_str(), key.region.as_str()])
                .set(i64::try_from(size).unwrap_or(i64::MAX));
            for (_, bucket) in pools.shards(key) {
                let name = bucket.metadata.name.as_deref().unwrap_or_default();
                let count = recorded_count(bucket);
                gauges
                    .entries
                    .with_label_values(&[name])
                    .set(i64::from(count));
                if let Some(limit) = quota(&bucket.spec.provider.type_) {
                    gauges
                        .fill
                        .with_label_values(&[name])
                        .set(f64::from(count) / f64::from(limit));
                }
            }
        }
        let mut out = gauges.shards.collect();
        out.extend(gauges.entries.collect());
        out.extend(gauges.fill.collect());
        out
    }
}

impl LandscapeGauges {
    fn unprotected_vec() -> Result<IntGaugeVec, prometheus::Error> {
        IntGaugeVec::new(
            Opts::new(
                "granary_garden_shoot_unprotected",
                "1 for each shoot whose BackupEntry is missing or not Succeeded.",
            ),
            &["namespace", "shoot", "seed", "backupentry"],
        )
    }

    fn entries_vec() -> Result<IntGaugeVec, prometheus::Error> {
        IntGaugeVec::new(
            Opts::new(
                "granary_garden_backupentries",
                "BackupEntries by the state of their last operation.",
            ),
            &["state"],
        )
    }

    fn new(landscape: Landscape) -> Result<Self, prometheus::Error> {
        Ok(LandscapeGauges {
            landscape,
            unprotected: Self::unprotected_vec()?,
            entries: Self::entries_vec()?,
            pools: PoolGauges::new()?,
        })
    }
}

impl Collector for LandscapeGauges {
    fn desc(&self) -> Vec<&Desc> {
        let mut d = self.unprotected.desc();
        d.extend(self.entries.desc());
        d.extend(self.pools.desc());
        d
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let stores = self
            .landscape
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some((stores, config)) = stores else {
            return Vec::new();
        };
        let filled = stores
            .ready
            .iter()
            .chain([&stores.shoots_ready])
            .all(|r| *r.borrow());
        if !filled {
            return Vec::new();
        }
        let (Ok(unprotected), Ok(entries)) = (Self::unprotected_vec(), Self::entries_vec()) else {
            return Vec::new();
        };
        for shoot in stores.shoots.state() {
            let namespace = shoot.namespace().unwrap_or_default();
            let name = shoot.backup_entry_name();
            let entry = name
                .as_deref()
                .and_then(|n| stores.entries.get(&ObjectRef::new(n).within(&namespace)));
            if let Protection::Unprotected(_) = protection(&shoot, entry.as_deref()) {
                unprotected
                    .with_label_values(&[
                        namespace.as_str(),
                        shoot.name_any().as_str(),
                        shoot.spec.seed_name.as_deref().unwrap_or_default(),
                        name.as_deref().unwrap_or_default(),
                    ])
                    .set(1);
            }
        }
        // Tallied first: one label lookup (a hash and a lock) per state, not per entry.
        let mut by_state: BTreeMap<String, i64> = BTreeMap::new();
        for entry in stores.entries.state() {
            let state = entry
                .status
                .as_ref()
                .and_then(|s| s.last_operation.as_ref())
                .map_or("None", |op| op.state.as_str());
            match by_state.get_mut(state) {
                Some(n) => *n += 1,
                None => {
                    by_state.insert(state.to_string(), 1);
                }
            }
        }
        for (state, n) in &by_state {
            entries.with_label_values(&[state.as_str()]).set(*n);
        }
        let mut out = unprotected.collect();
        out.extend(entries.collect());
        out.extend(
            stores
                .pools
                .read(|pools| PoolGauges::read(pools, |provider| config.quota_for(provider))),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pools::{PoolKey, PoolKind};
    use granary_api::core::BackupBucket;

    fn pool(owner: &str, region: &str) -> PoolKey {
        PoolKey {
            kind: PoolKind::CloudProfile,
            owner: owner.into(),
            region: region.into(),
        }
    }

    fn bucket(owner: &str, region: &str, shard: u32, count: u32) -> BackupBucket {
        let source = crate::buckets::PoolSource {
            key: pool(owner, region),
            owner_uid: format!("{owner}-uid"),
            provider: if region == "us" { "gcp" } else { "aws" }.into(),
            credentials: None,
            provider_config: None,
        };
        let mut b = crate::buckets::new_shard_bucket(&source, shard, None, &Default::default());
        b.status = Some(granary_api::core::BackupBucketStatus {
            entry_count: Some(count),
            ..Default::default()
        });
        b
    }

    fn values(families: &[MetricFamily], name: &str) -> Vec<(Vec<String>, f64)> {
        let mut out: Vec<(Vec<String>, f64)> = families
            .iter()
            .filter(|f| f.name() == name)
            .flat_map(|f| f.get_metric().iter())
            .map(|m| {
                let labels = m
                    .get_label()
                    .iter()
                    .map(|p| p.value().to_string())
                    .collect();
                let value = m.get_gauge().get_value();
                (labels, value)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn pool_gauges_follow_the_index_and_the_quota() {
        let mut pools = Pools::default();
        let eu0 = bucket("p", "eu", 0, 100);
        let eu1 = bucket("p", "eu", 1, 25);
        let us0 = bucket("p", "us", 0, 7);
        for b in [&eu0, &eu1, &us0] {
            pools.apply(b);
        }
        let name = |b: &BackupBucket| b.metadata.name.clone().unwrap();
        let quota = |provider: &str| (provider == "aws").then_some(100);
        let families = PoolGauges::read(&pools, quota);
        assert_eq!(
            values(&families, "granary_garden_pool_shards"),
            [
                (vec!["p".into(), "cloudprofile".into(), "eu".into()], 2.0),
                (vec!["p".into(), "cloudprofile".into(), "us".into()], 1.0),
            ],
            "owner, pool_kind, region (label names in sorted order)"
        );
        let mut entries = vec![
            (vec![name(&eu0)], 100.0),
            (vec![name(&eu1)], 25.0),
            (vec![name(&us0)], 7.0),
        ];
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(values(&families, "granary_garden_bucket_entries"), entries);
        let mut fill = vec![(vec![name(&eu0)], 1.0), (vec![name(&eu1)], 0.25)];
        fill.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            values(&families, "granary_garden_bucket_fill_ratio"),
            fill,
            "no ratio for a provider without a limit"
        );
        // A bucket gone takes its gauges with it, and a pool gone its size.
        pools.remove(&name(&eu1));
        pools.remove(&name(&us0));
        let families = PoolGauges::read(&pools, quota);
        assert_eq!(values(&families, "granary_garden_pool_shards").len(), 1);
        assert_eq!(
            values(&families, "granary_garden_bucket_entries"),
            [(vec![name(&eu0)], 100.0)]
        );
    }
}
