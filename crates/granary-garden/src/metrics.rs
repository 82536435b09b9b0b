//! The garden's own metrics (docs/operations.md#health-and-metrics), registered into the
//! process registry next to the shared `granary_reconcile_*`: pool sizes, shard fill,
//! placements and conflicts, and bucket hand-overs. The per-bucket and per-pool gauges
//! follow the objects: a bucket's label set goes with the bucket, a pool's with its last
//! bucket, so the registry does not grow with objects that no longer exist.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use prometheus::core::{Collector, Desc, MetricVec, MetricVecBuilder};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts};

use crate::context::Stores;
use crate::health::{Protection, protection};
use crate::pools::PoolKey;
use granary_runtime::metrics::Metrics;

/// Handles to the garden metrics. Cheap to clone.
#[derive(Clone)]
pub struct GardenMetrics {
    /// `granary_garden_pool_shards{pool_kind, owner, region}`: buckets per pool (the
    /// pool-kind label is named as in every other metric).
    pub pool_shards: IntGaugeVec,
    /// `granary_garden_bucket_entries{bucket}`: entries placed in a bucket.
    pub bucket_entries: IntGaugeVec,
    /// `granary_garden_bucket_fill_ratio{bucket}`: entries / limit (only with a limit).
    pub bucket_fill: GaugeVec,
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
            pool_shards: IntGaugeVec::new(
                Opts::new(
                    "granary_garden_pool_shards",
                    "BackupBuckets per bucket pool.",
                ),
                &["pool_kind", "owner", "region"],
            )?,
            bucket_entries: IntGaugeVec::new(
                Opts::new(
                    "granary_garden_bucket_entries",
                    "BackupEntries placed in a BackupBucket (status.entryCount).",
                ),
                &["bucket"],
            )?,
            bucket_fill: GaugeVec::new(
                Opts::new(
                    "granary_garden_bucket_fill_ratio",
                    "Entries of a BackupBucket divided by its provider's quota limit.",
                ),
                &["bucket"],
            )?,
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
        metrics.register(Box::new(m.pool_shards.clone()))?;
        metrics.register(Box::new(m.bucket_entries.clone()))?;
        metrics.register(Box::new(m.bucket_fill.clone()))?;
        metrics.register(Box::new(m.placements.clone()))?;
        metrics.register(Box::new(m.placement_conflicts.clone()))?;
        metrics.register(Box::new(m.assignments.clone()))?;
        metrics.register(Box::new(LandscapeGauges::new(m.landscape.clone())?))?;
        Ok(m)
    }

    /// Reads the scrape-time gauges from `stores` (the term holding leadership) until
    /// the returned guard is dropped; a replica standing by reports none of them.
    pub(crate) fn watch(&self, stores: Stores) -> WatchGuard {
        *self.landscape.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(stores);
        WatchGuard(self.landscape.clone())
    }

    /// Sets the entry count of `bucket`, and its fill ratio when its provider has a
    /// quota `limit` (removing a ratio left from a limit since dropped).
    pub(crate) fn record_bucket(&self, bucket: &str, entries: u32, limit: Option<u32>) {
        self.bucket_entries
            .with_label_values(&[bucket])
            .set(i64::from(entries));
        match limit {
            Some(limit) => self
                .bucket_fill
                .with_label_values(&[bucket])
                .set(f64::from(entries) / f64::from(limit)),
            None => {
                let _ = self.bucket_fill.remove_label_values(&[bucket]);
            }
        }
    }

    /// Removes the gauges of a bucket that is gone.
    pub(crate) fn forget_bucket(&self, bucket: &str) {
        let _ = self.bucket_entries.remove_label_values(&[bucket]);
        let _ = self.bucket_fill.remove_label_values(&[bucket]);
    }

    /// Sets the shard count of every pool that has buckets (`sizes`, all pools of all
    /// owners) and removes the gauges of every other pool, and of every bucket not in
    /// `live` (gone while no reconcile of it saw the deletion).
    pub(crate) fn record_pools(&self, sizes: &BTreeMap<PoolKey, i64>, live: &HashSet<String>) {
        for (key, size) in sizes {
            self.pool_shards
                .with_label_values(&[key.kind.as_str(), key.owner.as_str(), key.region.as_str()])
                .set(*size);
        }
        retain(&self.pool_shards, |labels| {
            sizes.keys().any(|k| {
                labels.get("pool_kind") == Some(&k.kind.as_str())
                    && labels.get("owner") == Some(&k.owner.as_str())
                    && labels.get("region") == Some(&k.region.as_str())
            })
        });
        retain(&self.bucket_entries, |labels| {
            labels.get("bucket").is_some_and(|b| live.contains(*b))
        });
        retain(&self.bucket_fill, |labels| {
            labels.get("bucket").is_some_and(|b| live.contains(*b))
        });
    }
}

/// The caches of the term holding leadership, if any.
#[derive(Clone, Default)]
struct Landscape(Arc<Mutex<Option<Stores>>>);

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
///
/// Nothing is reported until the caches hold their initial lists: a half-filled cache
/// would show every shoot unprotected.
struct LandscapeGauges {
    landscape: Landscape,
    unprotected: IntGaugeVec,
    entries: IntGaugeVec,
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
        })
    }
}

impl Collector for LandscapeGauges {
    fn desc(&self) -> Vec<&Desc> {
        let mut d = self.unprotected.desc();
        d.extend(self.entries.desc());
        d
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let stores = self
            .landscape
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(stores) = stores else {
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
        for entry in stores.entries.state() {
            let state = entry
                .status
                .as_ref()
                .and_then(|s| s.last_operation.as_ref())
                .map_or("None", |op| op.state.as_str());
            entries.with_label_values(&[state]).inc();
        }
        let mut out = unprotected.collect();
        out.extend(entries.collect());
        out
    }
}

/// Removes every label set of `vec` that `keep` rejects.
fn retain<T: MetricVecBuilder>(vec: &MetricVec<T>, keep: impl Fn(&HashMap<&str, &str>) -> bool) {
    for family in vec.collect() {
        for metric in family.get_metric() {
            let labels: HashMap<&str, &str> = metric
                .get_label()
                .iter()
                .map(|pair| (pair.name(), pair.value()))
                .collect();
            if !keep(&labels) {
                let _ = vec.remove(&labels);
            }
        }
    }
}

/// Label sets of `vec`, each as its values in label-name order, sorted.
#[cfg(test)]
fn label_sets<T: MetricVecBuilder>(vec: &MetricVec<T>) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = vec
        .collect()
        .iter()
        .flat_map(|f| f.get_metric().iter())
        .map(|m| {
            let mut pairs: Vec<(&str, &str)> = m
                .get_label()
                .iter()
                .map(|p| (p.name(), p.value()))
                .collect();
            pairs.sort();
            pairs.into_iter().map(|(_, v)| v.to_string()).collect()
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pools::PoolKind;

    fn pool(owner: &str, region: &str) -> PoolKey {
        PoolKey {
            kind: PoolKind::CloudProfile,
            owner: owner.into(),
            region: region.into(),
        }
    }

    #[test]
    fn a_gone_bucket_leaves_no_gauges() {
        let m = GardenMetrics::register(&Metrics::new()).unwrap();
        m.record_bucket("a", 3, Some(10));
        m.record_bucket("b", 1, Some(10));
        assert_eq!(label_sets(&m.bucket_entries), [["a"], ["b"]]);
        m.forget_bucket("a");
        assert_eq!(label_sets(&m.bucket_entries), [["b"]]);
        assert_eq!(label_sets(&m.bucket_fill), [["b"]]);
        // A quota that is dropped takes the ratio with it.
        m.record_bucket("b", 1, None);
        assert_eq!(label_sets(&m.bucket_entries), [["b"]]);
        assert!(label_sets(&m.bucket_fill).is_empty());
    }

    #[test]
    fn pools_and_buckets_that_are_gone_are_dropped_by_the_recount() {
        let m = GardenMetrics::register(&Metrics::new()).unwrap();
        for b in ["a", "b", "c"] {
            m.record_bucket(b, 1, Some(10));
        }
        let live: HashSet<String> = ["a", "b", "c"].map(String::from).into();
        let sizes = BTreeMap::from([(pool("p", "eu"), 2), (pool("p", "us"), 1)]);
        m.record_pools(&sizes, &live);
        assert_eq!(label_sets(&m.pool_shards).len(), 2);

        // The US pool's only bucket and bucket "b" are gone.
        let live: HashSet<String> = ["a"].map(String::from).into();
        m.record_pools(&BTreeMap::from([(pool("p", "eu"), 1)]), &live);
        assert_eq!(
            label_sets(&m.pool_shards),
            [["p", "cloudprofile", "eu"]],
            "owner, pool_kind, region (label names in sorted order)"
        );
        assert_eq!(label_sets(&m.bucket_entries), [["a"]]);
        assert_eq!(label_sets(&m.bucket_fill), [["a"]]);
    }
}
