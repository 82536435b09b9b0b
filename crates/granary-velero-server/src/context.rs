//! What every Velero-compatible controller of one process shares: the cluster client,
//! the settings, the store options (the `local` provider's root), the clock, metrics and
//! an event recorder, and the one way to turn a BackupStorageLocation into a store.

use super::integrity::{KeySource, Keys};
use super::location::{LocationAccess, LocationError, location_access};
use super::metrics::VeleroMetrics;
use super::settings::VeleroSettings;
use granary_api::velero::BackupStorageLocation;
use granary_providers::{ObjectStore, StoreOptions};
use granary_runtime::clock::Clock;
use granary_runtime::selector::ObjectSelector;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use std::sync::Arc;

/// Why a location cannot be used now.
#[derive(Debug, thiserror::Error)]
pub enum LocationProblem {
    #[error("BackupStorageLocation {0:?} does not exist")]
    NotFound(String),
    #[error("{0}")]
    Invalid(#[from] LocationError),
    #[error("{0}")]
    Store(#[from] granary_providers::Error),
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

/// A location opened for use.
pub struct OpenLocation {
    pub location: BackupStorageLocation,
    pub access: LocationAccess,
    pub store: Arc<dyn ObjectStore>,
}

/// The shared state of the Velero-compatible controllers of one process.
pub struct VeleroContext {
    pub client: Client,
    pub settings: VeleroSettings,
    pub store_options: StoreOptions,
    pub clock: Clock,
    pub metrics: VeleroMetrics,
    pub selector: ObjectSelector,
    /// The integrity keys, kept current from [`VeleroContext::key_source`].
    pub keys: Keys,
    /// Where the keys come from: the server's own Secret, or the landscape's.
    pub key_source: KeySource,
    recorder: Recorder,
}

impl VeleroContext {
    pub fn new(
        client: Client,
        settings: VeleroSettings,
        store_options: StoreOptions,
        clock: Clock,
        metrics: VeleroMetrics,
        selector: ObjectSelector,
    ) -> Self {
        let reporter = Reporter {
            controller: "granary-velero".into(),
            instance: None,
        };
        VeleroContext {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            settings,
            store_options,
            clock,
            metrics,
            selector,
            keys: Keys::default(),
            key_source: KeySource::Own,
        }
    }

    /// The same context signing and verifying with the landscape's keys (a seed's).
    pub fn with_key_source(mut self, source: KeySource) -> Self {
        self.key_source = source;
        self
    }

    pub fn namespace(&self) -> &str {
        &self.settings.namespace
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.settings.namespace)
    }

    /// Store access for `location`: its credential Secret (in the Velero namespace)
    /// read and mapped, the store opened. Nothing here logs a credential.
    pub async fn open(
        &self,
        location: BackupStorageLocation,
    ) -> Result<OpenLocation, LocationProblem> {
        let spec = &location.spec;
        let credential = read_credential(&self.client, self.namespace(), &location).await?;
        let config = spec.config.clone().unwrap_or_default();
        let access = location_access(
            &spec.provider,
            &spec.object_storage.bucket,
            spec.object_storage.prefix.as_deref(),
            &config,
            credential.as_deref(),
        )?;
        let store = granary_providers::open(
            access.provider,
            access.region.as_deref(),
            &access.secret,
            &self.store_options,
        )
        .await?;
        Ok(OpenLocation {
            location,
            access,
            store,
        })
    }

    /// Looks up location `name` and opens it.
    pub async fn open_named(&self, name: &str) -> Result<OpenLocation, LocationProblem> {
        let location = self
            .api::<BackupStorageLocation>()
            .get_opt(name)
            .await?
            .ok_or_else(|| LocationProblem::NotFound(name.to_string()))?;
        self.open(location).await
    }

    /// Publishes an event on `obj` (failures to publish are logged, never fatal).
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let reference = obj.object_ref(&());
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "event not published");
        }
    }
}

/// The credentials file of `location`: the Secret key `spec.credential` names (in the
/// Velero namespace), else Velero's default Secret when it exists, else none.
pub async fn read_credential(
    client: &Client,
    namespace: &str,
    location: &BackupStorageLocation,
) -> Result<Option<Vec<u8>>, LocationProblem> {
    use super::location::{DEFAULT_CREDENTIALS, provider_kind};
    let spec = &location.spec;
    let (name, key, field) = match &spec.credential {
        Some(c) => (c.name.clone(), c.key.clone(), "spec.credential"),
        None if provider_kind(&spec.provider) == Some("local") => return Ok(None),
        None => (
            DEFAULT_CREDENTIALS.0.to_string(),
            DEFAULT_CREDENTIALS.1.to_string(),
            "",
        ),
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let Some(secret) = secrets.get_opt(&name).await? else {
        if field.is_empty() {
            return Ok(None);
        }
        return Err(LocationError {
            field: format!("{field}.name"),
            message: format!("Secret {name:?} not found in namespace {namespace}"),
        }
        .into());
    };
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&key))
        .map(|b| b.0.clone())
        .ok_or_else(|| LocationError {
            field: if field.is_empty() {
                "spec.credential".to_string()
            } else {
                format!("{field}.key")
            },
            message: format!("Secret {name:?} has no key {key:?}"),
        })?;
    Ok(Some(value))
}

/// A time as Kubernetes writes it in status fields (RFC 3339, seconds, `Z`).
pub fn k8s_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Writes the latest value of `rx` into `status.progress` of object `name` until the
/// sender is dropped (intermediate values are skipped, as the channel keeps only the
/// newest), at most once per `every` (zero: as fast as the values come). Failures are
/// logged at debug: the final status write carries the final progress anyway.
pub fn spawn_progress_writer<K, P>(
    api: Api<K>,
    name: String,
    rx: tokio::sync::watch::Receiver<P>,
    every: std::time::Duration,
) -> tokio::task::JoinHandle<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    P: serde::Serialize + Clone + Send + Sync + 'static,
{
    tokio::spawn(progress_loop(rx, every, move |p: P| {
        let (api, name) = (api.clone(), name.clone());
        async move {
            let body = serde_json::json!({"status": {"progress": p}});
            if let Err(e) = api
                .patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&body),
                )
                .await
            {
                tracing::debug!(object = %name, error = %e, "progress not written");
            }
        }
    }))
}

/// The loop of [`spawn_progress_writer`]: `write` gets the newest value of `rx`, at most
/// once per `every`, until the sender is dropped. It ends as soon as the sender is
/// dropped, even within `every` of its last write: whoever waits for it (a restore's
/// final status write, and with it the next queued restore) must not wait out a
/// throttle for a progress value the final status carries anyway.
pub async fn progress_loop<P, W, F>(
    mut rx: tokio::sync::watch::Receiver<P>,
    every: std::time::Duration,
    mut write: W,
) where
    P: Clone,
    W: FnMut(P) -> F,
    F: std::future::Future<Output = ()>,
{
    // Whether a value not yet written is waiting.
    let mut pending = rx.changed().await.is_ok();
    while pending {
        let p = rx.borrow_and_update().clone();
        write(p).await;
        pending = false;
        if !every.is_zero() {
            // The throttle: a value that comes meanwhile waits for its end (only the
            // newest is kept); the sender's end ends the loop at once.
            let throttle = tokio::time::sleep(every);
            tokio::pin!(throttle);
            loop {
                tokio::select! {
                    _ = &mut throttle => break,
                    changed = rx.changed() => match changed {
                        Ok(()) => pending = true,
                        Err(_) => return,
                    },
                }
            }
        }
        if !pending {
            pending = rx.changed().await.is_ok();
        }
    }
}

#[cfg(test)]
mod progress_tests {
    use super::progress_loop;
    use std::time::Duration;

    /// The runner's end (the sender dropped) ends the writer at once, even inside its
    /// throttle: what comes after it (a restore's final status, the next queued
    /// restore) never waits for a progress write that the final status makes moot.
    #[tokio::test]
    async fn the_writer_ends_with_its_runner_not_after_its_throttle() {
        let (tx, rx) = tokio::sync::watch::channel(0u32);
        let written = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let w = written.clone();
        // A throttle no test outlives: a writer that waits it out never ends in time.
        let every = Duration::from_secs(3600);
        let writer = tokio::spawn(progress_loop(rx, every, move |p| {
            let w = w.clone();
            async move { w.lock().expect("lock").push(p) }
        }));
        tx.send(1).expect("send");
        // The writer writes 1 and starts its throttle.
        while written.lock().expect("lock").is_empty() {
            tokio::task::yield_now().await;
        }
        tx.send(2).expect("send");
        drop(tx);
        tokio::time::timeout(Duration::from_secs(20), writer)
            .await
            .expect("the writer outlived its runner: it waited out its throttle")
            .expect("writer");
        assert_eq!(written.lock().expect("lock").first(), Some(&1));
    }
}
