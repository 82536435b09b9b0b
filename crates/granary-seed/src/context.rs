//! What every seed reconciler shares: the garden and seed clients, the seed's name and
//! configuration, how to open object stores, metrics, the clock, `--object-selector`,
//! event recorders and the per-key retry back-off. Nothing global.

use crate::config::SeedConfiguration;
use crate::failures::Failures;
use crate::metrics::SeedMetrics;
use granary_providers::{ObjectStore, SecretData, StoreOptions};
use granary_runtime::clock::Clock;
use granary_runtime::error_codes::FailureKind;
use granary_runtime::selector::ObjectSelector;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// Why a reconcile did not finish. The variant names read well as metric labels.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReconcileError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("object store: {0}")]
    Store(#[from] granary_providers::Error),
    /// Bad input in an object or its secret; the text names the field.
    #[error("{0}")]
    Invalid(String),
    /// Something this object needs is not there or not ready.
    #[error("{0}")]
    Dependency(String),
    #[error(transparent)]
    Failpoint(#[from] granary_runtime::failpoints::FailpointError),
}

impl ReconcileError {
    /// The failure kind, for codes and metric labels.
    pub(crate) fn kind(&self) -> FailureKind {
        match self {
            ReconcileError::Kube(kube::Error::Api(s)) if s.code == 409 => FailureKind::Conflict,
            ReconcileError::Kube(_) | ReconcileError::Failpoint(_) => FailureKind::Transient,
            ReconcileError::Store(e) => e.kind().into(),
            ReconcileError::Invalid(_) => FailureKind::Invalid,
            ReconcileError::Dependency(_) => FailureKind::Dependency,
        }
    }
}

/// The shared state of one `granary seed` process.
pub(crate) struct Context {
    pub garden: Client,
    pub seed: Client,
    pub seed_name: String,
    pub config: SeedConfiguration,
    pub store_options: StoreOptions,
    pub metrics: SeedMetrics,
    pub clock: Clock,
    pub selector: ObjectSelector,
    /// How often every object is looked at again without a trigger.
    pub resync: Duration,
    garden_events: Recorder,
    seed_events: Recorder,
    failures: Failures,
}

impl Context {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        garden: Client,
        seed: Client,
        config: SeedConfiguration,
        store_options: StoreOptions,
        metrics: SeedMetrics,
        clock: Clock,
        selector: ObjectSelector,
        resync: Duration,
    ) -> Arc<Self> {
        let reporter = Reporter {
            controller: "granary-seed".to_string(),
            instance: Some(config.seed_name.clone()),
        };
        Arc::new(Context {
            garden_events: Recorder::new(garden.clone(), reporter.clone()),
            seed_events: Recorder::new(seed.clone(), reporter),
            garden,
            seed,
            seed_name: config.seed_name.clone(),
            config,
            store_options,
            metrics,
            clock,
            selector,
            resync,
            failures: Failures::default(),
        })
    }

    /// Opens the object store an extension object names. The reconcilers only ever see
    /// the `ObjectStore` trait.
    pub(crate) async fn open_store(
        &self,
        provider_type: &str,
        region: &str,
        secret: &SecretData,
    ) -> Result<Arc<dyn ObjectStore>, ReconcileError> {
        let region = (!region.is_empty()).then_some(region);
        Ok(granary_providers::open(provider_type, region, secret, &self.store_options).await?)
    }

    /// Records a failure of `key` and returns how long to wait before the next attempt:
    /// 1 s doubling up to 60 s.
    pub(crate) fn back_off(&self, key: &str) -> Duration {
        self.failures.record(key)
    }

    /// How long the current back-off of `key` is, without recording a failure.
    pub(crate) fn current_back_off(&self, key: &str) -> Duration {
        self.failures.current(key)
    }

    /// The keys with recorded failures that start with `prefix`, without it.
    pub(crate) fn failing(&self, prefix: &str) -> Vec<String> {
        self.failures.failing(prefix)
    }

    /// Forgets the failures of `key` after a success.
    pub(crate) fn succeeded(&self, key: &str) {
        self.failures.forget(key);
    }

    /// Forgets the failures of `<controller>/<name>`: the object is gone.
    pub(crate) fn object_gone(&self, controller: &str, name: &str) {
        self.failures.forget(&format!("{controller}/{name}"));
    }

    /// Forgets the failures of every object of `controller` that a complete listing
    /// (`live`) no longer shows.
    pub(crate) fn objects_listed(&self, controller: &str, live: &HashSet<String>) {
        self.failures
            .forget_missing(&format!("{controller}/"), live);
    }

    /// Publishes a Warning event on a garden object (best effort: an event that cannot
    /// be written is logged, never fails the reconcile).
    pub(crate) async fn garden_warning(
        &self,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
        reason: &str,
        note: String,
    ) {
        publish(
            &self.garden_events,
            reference,
            EventType::Warning,
            reason,
            note,
        )
        .await;
    }

    /// Publishes an event on a seed object (best effort).
    pub(crate) async fn seed_event(
        &self,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        publish(&self.seed_events, reference, type_, reason, note).await;
    }
}

async fn publish(
    recorder: &Recorder,
    reference: &k8s_openapi::api::core::v1::ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let mut reference = reference.clone();
    // Events of cluster-scoped objects live in `default`, as kube-apiserver expects.
    if reference.namespace.is_none() {
        reference.namespace = Some("default".to_string());
    }
    let mut note = note;
    note.truncate(1000);
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: reason.to_string(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &reference).await {
        tracing::debug!(error = %e, reason, "could not publish event");
    }
}
