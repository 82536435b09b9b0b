//! The garden's own metrics (DESIGN §6), registered into the process registry next to
//! the shared `granary_reconcile_*`: pool sizes, shard fill, placements and conflicts,
//! and bucket hand-overs.

use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts};

use crate::runtime::metrics::Metrics;

/// Handles to the garden metrics. Cheap to clone.
#[derive(Clone)]
pub struct GardenMetrics {
    /// `granary_garden_pool_shards{kind, owner, region}`: buckets per pool.
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
                &["kind", "owner", "region"],
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
        };
        metrics.register(Box::new(m.pool_shards.clone()))?;
        metrics.register(Box::new(m.bucket_entries.clone()))?;
        metrics.register(Box::new(m.bucket_fill.clone()))?;
        metrics.register(Box::new(m.placements.clone()))?;
        metrics.register(Box::new(m.placement_conflicts.clone()))?;
        metrics.register(Box::new(m.assignments.clone()))?;
        Ok(m)
    }
}
