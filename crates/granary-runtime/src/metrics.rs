//! The Prometheus registry of one process and the metrics every controller shares
//! (`granary_reconcile_*`). Parts of Granary register their own metrics into the same
//! registry (Velero's names for the Velero part, `granary_*` for the rest; see
//! docs/operations.md#health-and-metrics).

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// Registry plus the shared controller metrics. Cheap to clone (the metrics are handles).
#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    /// `granary_reconcile_total{controller}`: reconciles run.
    pub reconciles: IntCounterVec,
    /// `granary_reconcile_errors_total{controller, kind}`: failed reconciles by failure kind.
    pub reconcile_errors: IntCounterVec,
    /// `granary_reconcile_duration_seconds{controller}`.
    pub reconcile_duration: HistogramVec,
}

impl Metrics {
    /// A fresh registry with the shared metrics registered.
    pub fn new() -> Self {
        let registry = Registry::new();
        let reconciles = IntCounterVec::new(
            Opts::new("granary_reconcile_total", "Reconciles run, per controller."),
            &["controller"],
        )
        .expect("static metric options are valid");
        let reconcile_errors = IntCounterVec::new(
            Opts::new(
                "granary_reconcile_errors_total",
                "Failed reconciles, per controller and failure kind.",
            ),
            &["controller", "kind"],
        )
        .expect("static metric options are valid");
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new(
                "granary_reconcile_duration_seconds",
                "Time spent in one reconcile, per controller.",
            )
            .buckets(vec![
                0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ]),
            &["controller"],
        )
        .expect("static metric options are valid");
        for collector in [
            Box::new(reconciles.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(reconcile_errors.clone()),
            Box::new(reconcile_duration.clone()),
        ] {
            registry
                .register(collector)
                .expect("each metric is registered once into a new registry");
        }
        Metrics {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_duration,
        }
    }

    /// Registers another collector (a part's own metrics).
    pub fn register(
        &self,
        collector: Box<dyn prometheus::core::Collector>,
    ) -> Result<(), prometheus::Error> {
        self.registry.register(collector)
    }

    /// The registry in Prometheus' text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus::TextEncoder::new()
            .encode_utf8(&self.registry.gather(), &mut out)
            .expect("text encoding into a String does not fail");
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_shared_metrics() {
        let m = Metrics::new();
        m.reconciles.with_label_values(&["backupentry"]).inc();
        m.reconcile_errors
            .with_label_values(&["backupentry", "Unauthorized"])
            .inc();
        m.reconcile_duration
            .with_label_values(&["backupentry"])
            .observe(0.2);
        let text = m.render();
        assert!(
            text.contains("granary_reconcile_total{controller=\"backupentry\"} 1"),
            "{text}"
        );
        assert!(text.contains(
            "granary_reconcile_errors_total{controller=\"backupentry\",kind=\"Unauthorized\"} 1"
        ));
        assert!(
            text.contains("granary_reconcile_duration_seconds_count{controller=\"backupentry\"} 1")
        );
    }
}
