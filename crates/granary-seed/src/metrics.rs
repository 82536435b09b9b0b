//! The seed's `granary_*` metrics (docs/operations.md#health-and-metrics): the shared
//! reconcile counters and durations from [`Metrics`], plus entries waiting out their
//! deletion grace period and objects deleted from buckets.

use chrono::{DateTime, Utc};
use granary_runtime::metrics::Metrics;
use prometheus::{IntCounterVec, IntGaugeVec, Opts};

/// Metrics of one `granary seed` process. Cheap to clone.
#[derive(Clone)]
pub struct SeedMetrics {
    pub shared: Metrics,
    /// `granary_backupentries_pending_deletion{seed}`: entries in their grace period.
    pub pending_deletion: IntGaugeVec,
    /// `granary_objects_deleted_total{provider}`: objects deleted from buckets.
    pub objects_deleted: IntCounterVec,
    /// `granary_backupentry_deletion_due_timestamp_seconds{seed, backupentry}`: when the
    /// grace period of an entry being deleted ends or ended (Unix seconds), while the
    /// entry is there; an entry long past it is stuck.
    pub deletion_due: IntGaugeVec,
}

impl SeedMetrics {
    pub fn new(shared: Metrics) -> Self {
        let pending_deletion = IntGaugeVec::new(
            Opts::new(
                "granary_backupentries_pending_deletion",
                "BackupEntries whose data waits for the end of the deletion grace period.",
            ),
            &["seed"],
        )
        .expect("static metric options are valid");
        let objects_deleted = IntCounterVec::new(
            Opts::new(
                "granary_objects_deleted_total",
                "Objects deleted from buckets when BackupEntries were deleted.",
            ),
            &["provider"],
        )
        .expect("static metric options are valid");
        let deletion_due = IntGaugeVec::new(
            Opts::new(
                "granary_backupentry_deletion_due_timestamp_seconds",
                "When the deletion grace period of a BackupEntry being deleted ends or ended \
                 (Unix seconds); set until the entry is gone.",
            ),
            &["seed", "backupentry"],
        )
        .expect("static metric options are valid");
        // Registering twice (a second agent on the same registry) keeps the first.
        let _ = shared.register(Box::new(pending_deletion.clone()));
        let _ = shared.register(Box::new(objects_deleted.clone()));
        let _ = shared.register(Box::new(deletion_due.clone()));
        SeedMetrics {
            shared,
            pending_deletion,
            objects_deleted,
            deletion_due,
        }
    }

    /// Sets (`Some`) or removes (`None`) the deletion due time of `entry`.
    pub fn deletion_due(&self, seed: &str, entry: &str, due: Option<DateTime<Utc>>) {
        match due {
            Some(due) => self
                .deletion_due
                .with_label_values(&[seed, entry])
                .set(due.timestamp()),
            None => {
                let _ = self.deletion_due.remove_label_values(&[seed, entry]);
            }
        }
    }
}
