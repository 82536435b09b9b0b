//! Velero's metric names for the Velero-compatible controllers, in the process's one
//! registry (docs/operations.md#health-and-metrics).

use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts};

/// The Velero-compatible controllers' metrics. Cheap to clone.
#[derive(Clone)]
pub struct VeleroMetrics {
    /// `velero_backup_location_status_gauge{backup_location_name}`: 1 Available, 0 not.
    pub location_status: IntGaugeVec,
    /// `velero_backup_total`: Backup objects that exist (Velero's gauge, no labels).
    pub backup_total: IntGauge,
    /// `velero_backup_attempt_total{schedule}`.
    pub backup_attempt: IntCounterVec,
    /// `velero_backup_success_total{schedule}`.
    pub backup_success: IntCounterVec,
    /// `velero_backup_partial_failure_total{schedule}`.
    pub backup_partial_failure: IntCounterVec,
    /// `velero_backup_failure_total{schedule}`.
    pub backup_failure: IntCounterVec,
    /// `velero_backup_validation_failure_total{schedule}`.
    pub backup_validation_failure: IntCounterVec,
    /// `velero_backup_items_total{schedule}`: items of the last backup.
    pub backup_items: IntGaugeVec,
    /// `velero_backup_items_errors{schedule}`: errors of the last backup.
    pub backup_items_errors: IntGaugeVec,
    /// `velero_backup_warning_total{schedule}`.
    pub backup_warning: IntCounterVec,
    /// `velero_backup_tarball_size_bytes{schedule}`: of the last backup.
    pub backup_tarball_size: IntGaugeVec,
    /// `velero_backup_last_successful_timestamp{schedule}` (Unix seconds).
    pub backup_last_successful: IntGaugeVec,
    /// `velero_backup_last_status{schedule}`: 1 success, 0 failure.
    pub backup_last_status: IntGaugeVec,
    /// `velero_backup_duration_seconds{schedule}`.
    pub backup_duration: HistogramVec,
    /// `velero_backup_deletion_attempt_total{schedule}`.
    pub deletion_attempt: IntCounterVec,
    /// `velero_backup_deletion_success_total{schedule}`.
    pub deletion_success: IntCounterVec,
    /// `velero_backup_deletion_failure_total{schedule}`.
    pub deletion_failure: IntCounterVec,
    /// `velero_backup_queue_length` (Granary's name for a figure Velero logs).
    pub queue_length: IntGauge,
    /// The restore controller's.
    pub restore: RestoreMetrics,
    /// `granary_backup_integrity_total{check,result}`: integrity checks of backups in
    /// storage by where they ran (`sync`, `scrub`) and verdict (`verified`, `unsigned`,
    /// `unknown-key`, `mismatch`).
    pub integrity: IntCounterVec,
    /// `granary_backup_verification_total{result}`: the scrubber's checks by verdict.
    pub verification: IntCounterVec,
    /// `granary_backup_last_verified_timestamp{backup}`: when the scrubber last found a
    /// backup verified (Unix seconds).
    pub last_verified: IntGaugeVec,
    /// `granary_schedule_interval_seconds{schedule}`: the longest wait between two runs
    /// of an enabled, unpaused schedule (absent otherwise).
    pub schedule_interval: IntGaugeVec,
    /// `granary_schedule_created_timestamp_seconds{schedule}`: when an enabled, unpaused
    /// schedule was created, what its first backup is due after (Unix seconds).
    pub schedule_created: IntGaugeVec,
}

/// Velero's restore metrics, under Velero's names; counters carry the `schedule` label of
/// the restored backup.
#[derive(Clone)]
pub struct RestoreMetrics {
    /// `velero_restore_total`: Restore objects that exist.
    pub total: IntGauge,
    /// `velero_restore_attempt_total{schedule}`.
    pub attempt: IntCounterVec,
    /// `velero_restore_success_total{schedule}`.
    pub success: IntCounterVec,
    /// `velero_restore_partial_failure_total{schedule}`.
    pub partial_failure: IntCounterVec,
    /// `velero_restore_failed_total{schedule}`.
    pub failed: IntCounterVec,
    /// `velero_restore_validation_failed_total{schedule}`.
    pub validation_failed: IntCounterVec,
}

impl VeleroMetrics {
    /// Creates the metrics and registers them into `metrics`' registry.
    pub fn new(metrics: &granary_runtime::metrics::Metrics) -> Self {
        let counter = |name: &str, help: &str| {
            IntCounterVec::new(Opts::new(name, help), &["schedule"])
                .expect("static metric options are valid")
        };
        let gauge = |name: &str, help: &str| {
            IntGaugeVec::new(Opts::new(name, help), &["schedule"])
                .expect("static metric options are valid")
        };
        let m = VeleroMetrics {
            schedule_interval: gauge(
                "granary_schedule_interval_seconds",
                "The longest wait between two runs of an enabled, unpaused schedule.",
            ),
            schedule_created: gauge(
                "granary_schedule_created_timestamp_seconds",
                "When an enabled, unpaused schedule was created (Unix seconds).",
            ),
            backup_total: IntGauge::new(
                "velero_backup_total",
                "Current number of existent backups",
            )
            .expect("static metric options are valid"),
            backup_items_errors: gauge("velero_backup_items_errors", "Errors of the last backup."),
            backup_warning: counter(
                "velero_backup_warning_total",
                "Backups that ended with warnings.",
            ),
            backup_tarball_size: gauge(
                "velero_backup_tarball_size_bytes",
                "Size of the last backup's tarball, in bytes.",
            ),
            backup_last_successful: gauge(
                "velero_backup_last_successful_timestamp",
                "When the last successful backup ended (Unix seconds).",
            ),
            backup_last_status: gauge(
                "velero_backup_last_status",
                "The last backup's result: 1 success, 0 failure.",
            ),
            backup_duration: HistogramVec::new(
                HistogramOpts::new("velero_backup_duration_seconds", "Time a backup took.")
                    .buckets(
                        [
                            60.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 14400.0,
                        ]
                        .to_vec(),
                    ),
                &["schedule"],
            )
            .expect("static metric options are valid"),
            location_status: IntGaugeVec::new(
                Opts::new(
                    "velero_backup_location_status_gauge",
                    "Backup storage location availability: 1 Available, 0 Unavailable.",
                ),
                &["backup_location_name"],
            )
            .expect("static metric options are valid"),
            backup_attempt: counter("velero_backup_attempt_total", "Backups attempted."),
            backup_success: counter("velero_backup_success_total", "Backups completed."),
            backup_partial_failure: counter(
                "velero_backup_partial_failure_total",
                "Backups partially failed.",
            ),
            backup_failure: counter("velero_backup_failure_total", "Backups failed."),
            backup_validation_failure: counter(
                "velero_backup_validation_failure_total",
                "Backups that failed validation.",
            ),
            backup_items: IntGaugeVec::new(
                Opts::new("velero_backup_items_total", "Items in the last backup."),
                &["schedule"],
            )
            .expect("static metric options are valid"),
            deletion_attempt: counter(
                "velero_backup_deletion_attempt_total",
                "Backup deletions attempted.",
            ),
            deletion_success: counter(
                "velero_backup_deletion_success_total",
                "Backup deletions that succeeded.",
            ),
            deletion_failure: counter(
                "velero_backup_deletion_failure_total",
                "Backup deletions that failed.",
            ),
            queue_length: IntGauge::new(
                "granary_velero_backup_queue_length",
                "Backups waiting in the queue (Queued).",
            )
            .expect("static metric options are valid"),
            integrity: IntCounterVec::new(
                Opts::new(
                    "granary_backup_integrity_total",
                    "Integrity checks of backups in storage, by check and verdict.",
                ),
                &["check", "result"],
            )
            .expect("static metric options are valid"),
            verification: IntCounterVec::new(
                Opts::new(
                    "granary_backup_verification_total",
                    "Backups the backup-verification scrubber checked, by verdict.",
                ),
                &["result"],
            )
            .expect("static metric options are valid"),
            last_verified: IntGaugeVec::new(
                Opts::new(
                    "granary_backup_last_verified_timestamp",
                    "When the scrubber last found the backup verified (Unix seconds).",
                ),
                &["backup"],
            )
            .expect("static metric options are valid"),
            restore: RestoreMetrics {
                total: IntGauge::new("velero_restore_total", "Restores that exist.")
                    .expect("static metric options are valid"),
                attempt: counter("velero_restore_attempt_total", "Restores attempted."),
                success: counter("velero_restore_success_total", "Restores completed."),
                partial_failure: counter(
                    "velero_restore_partial_failure_total",
                    "Restores partially failed.",
                ),
                failed: counter("velero_restore_failed_total", "Restores failed."),
                validation_failed: counter(
                    "velero_restore_validation_failed_total",
                    "Restores that failed validation.",
                ),
            },
        };
        for c in [
            Box::new(m.location_status.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.backup_total.clone()),
            Box::new(m.backup_attempt.clone()),
            Box::new(m.backup_success.clone()),
            Box::new(m.backup_partial_failure.clone()),
            Box::new(m.backup_failure.clone()),
            Box::new(m.backup_validation_failure.clone()),
            Box::new(m.backup_items.clone()),
            Box::new(m.backup_items_errors.clone()),
            Box::new(m.backup_warning.clone()),
            Box::new(m.backup_tarball_size.clone()),
            Box::new(m.backup_last_successful.clone()),
            Box::new(m.backup_last_status.clone()),
            Box::new(m.backup_duration.clone()),
            Box::new(m.deletion_attempt.clone()),
            Box::new(m.deletion_success.clone()),
            Box::new(m.deletion_failure.clone()),
            Box::new(m.queue_length.clone()),
            Box::new(m.restore.total.clone()),
            Box::new(m.restore.attempt.clone()),
            Box::new(m.restore.success.clone()),
            Box::new(m.restore.partial_failure.clone()),
            Box::new(m.restore.failed.clone()),
            Box::new(m.restore.validation_failed.clone()),
            Box::new(m.integrity.clone()),
            Box::new(m.verification.clone()),
            Box::new(m.last_verified.clone()),
            Box::new(m.schedule_interval.clone()),
            Box::new(m.schedule_created.clone()),
        ] {
            // A second set of controllers in one process (tests) shares the first set's.
            let _ = metrics.register(c);
        }
        m
    }
}

impl VeleroMetrics {
    /// Velero's `InitSchedule`: the per-schedule backup and restore series exist at 0
    /// from the moment a schedule is seen (`""` for backups of no schedule, at start), so
    /// a schedule that has never run (or never been restored) shows up in queries and
    /// alerts instead of being absent.
    pub fn init_schedule(&self, schedule: &str) {
        for c in [
            &self.backup_attempt,
            &self.backup_success,
            &self.backup_partial_failure,
            &self.backup_failure,
            &self.backup_validation_failure,
            &self.deletion_attempt,
            &self.deletion_success,
            &self.deletion_failure,
            &self.backup_warning,
            &self.restore.attempt,
            &self.restore.success,
            &self.restore.partial_failure,
            &self.restore.failed,
            &self.restore.validation_failed,
        ] {
            c.with_label_values(&[schedule]).inc_by(0);
        }
        for g in [
            &self.backup_items,
            &self.backup_items_errors,
            &self.backup_last_status,
        ] {
            g.with_label_values(&[schedule]).add(0);
        }
    }
}

impl VeleroMetrics {
    /// What the overdue alert reads of a schedule: its longest interval and when it was
    /// created (both removed with `None`: paused, failing validation or gone); and the
    /// completion of its newest successful backup in the cluster, so that
    /// `velero_backup_last_successful_timestamp` is there after a restart before the
    /// next success (never moved back).
    pub fn record_schedule(
        &self,
        schedule: &str,
        active: Option<(Duration, i64)>,
        last_success: Option<i64>,
    ) {
        match active {
            Some((interval, created)) => {
                self.schedule_interval
                    .with_label_values(&[schedule])
                    .set(i64::try_from(interval.as_secs()).unwrap_or(i64::MAX));
                self.schedule_created
                    .with_label_values(&[schedule])
                    .set(created);
            }
            None => {
                let _ = self.schedule_interval.remove_label_values(&[schedule]);
                let _ = self.schedule_created.remove_label_values(&[schedule]);
            }
        }
        if let Some(t) = last_success {
            let g = self.backup_last_successful.with_label_values(&[schedule]);
            if g.get() < t {
                g.set(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_schedule_creates_velero_s_series_at_zero() {
        let registry = granary_runtime::metrics::Metrics::new();
        let m = VeleroMetrics::new(&registry);
        m.init_schedule("nightly");
        m.backup_attempt.with_label_values(&["nightly"]).inc();
        m.init_schedule("nightly");
        let text = registry.render();
        for series in [
            "velero_backup_attempt_total{schedule=\"nightly\"} 1",
            "velero_backup_success_total{schedule=\"nightly\"} 0",
            "velero_backup_partial_failure_total{schedule=\"nightly\"} 0",
            "velero_backup_failure_total{schedule=\"nightly\"} 0",
            "velero_backup_validation_failure_total{schedule=\"nightly\"} 0",
            "velero_backup_deletion_attempt_total{schedule=\"nightly\"} 0",
            "velero_backup_deletion_success_total{schedule=\"nightly\"} 0",
            "velero_backup_deletion_failure_total{schedule=\"nightly\"} 0",
            "velero_backup_warning_total{schedule=\"nightly\"} 0",
            "velero_backup_items_total{schedule=\"nightly\"} 0",
            "velero_backup_items_errors{schedule=\"nightly\"} 0",
            "velero_backup_last_status{schedule=\"nightly\"} 0",
            "velero_restore_attempt_total{schedule=\"nightly\"} 0",
            "velero_restore_success_total{schedule=\"nightly\"} 0",
            "velero_restore_partial_failure_total{schedule=\"nightly\"} 0",
            "velero_restore_failed_total{schedule=\"nightly\"} 0",
            "velero_restore_validation_failed_total{schedule=\"nightly\"} 0",
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
    }
}
