//! One `/metrics` for the whole `granary dev` process. The garden and every seed keep
//! their own registry (as they do as separate processes, so their metrics never collide),
//! and [`Components`] serves them all from one registry, each series labelled with
//! `component="garden"` or `component="seed-<name>"`, the way a scraper's target labels
//! would tell the processes apart.

use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{LabelPair, MetricFamily};

use granary_runtime::metrics::Metrics;

/// The label that names where a series comes from.
pub const COMPONENT_LABEL: &str = "component";

/// The registries of the components, gathered as one collector.
#[derive(Clone, Default)]
pub struct Components {
    parts: Arc<Mutex<Vec<(String, Metrics)>>>,
}

impl Components {
    /// Adds a component's registry under `name`.
    pub fn add(&self, name: impl Into<String>, metrics: Metrics) {
        self.parts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((name.into(), metrics));
    }

    /// A registry serving every component, for the health server.
    pub fn registry(&self) -> Metrics {
        let served = Metrics::new();
        served
            .register(Box::new(self.clone()))
            .expect("a collector without descriptors registers into a fresh registry");
        served
    }
}

impl Collector for Components {
    fn desc(&self) -> Vec<&Desc> {
        // The components' own registries check their descriptors; this collector only
        // relabels what they gather.
        Vec::new()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for (name, metrics) in parts.iter() {
            for mut family in metrics.registry.gather() {
                for metric in family.mut_metric().iter_mut() {
                    let mut labels = metric.take_label();
                    let mut pair = LabelPair::default();
                    pair.set_name(COMPONENT_LABEL.to_string());
                    pair.set_value(name.clone());
                    labels.push(pair);
                    labels.sort_by(|a, b| a.name().cmp(b.name()));
                    metric.set_label(labels);
                }
                out.push(family);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_of_each_component_carry_its_name() {
        let garden = Metrics::new();
        let seed = Metrics::new();
        garden.reconciles.with_label_values(&["bucket"]).inc();
        seed.reconciles.with_label_values(&["bucket"]).inc_by(2);
        let components = Components::default();
        components.add("garden", garden);
        components.add("seed-a", seed);
        let text = components.registry().render();
        assert!(
            text.contains("granary_reconcile_total{component=\"garden\",controller=\"bucket\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("granary_reconcile_total{component=\"seed-a\",controller=\"bucket\"} 2"),
            "{text}"
        );
        assert_eq!(
            text.matches("# TYPE granary_reconcile_total").count(),
            1,
            "{text}"
        );
    }
}
