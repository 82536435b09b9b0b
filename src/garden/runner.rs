//! Starting and stopping the garden controllers: [`GardenController`] (a builder tests
//! start in-process against any `kube::Client` and stop cleanly) and [`run`]/[`serve`]
//! behind `granary garden` (configuration file and flags, kubeconfig, health/metrics
//! server, leader election, signals).

use std::collections::BTreeMap;
use std::future::ready;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::config::KubeConfigOptions;
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::api::core::{BackupBucket, BackupEntry, CloudProfile, GARDEN_NAMESPACE, Seed, Shoot};
use crate::garden::bucket_controller::{self, reconcile as reconcile_bucket};
use crate::garden::buckets::pool_of;
use crate::garden::context::{Context, GardenError, Stores};
use crate::garden::entry_controllers::{
    ENTRY_CONTROLLER, SHOOT_CONTROLLER, reconcile_entry, reconcile_shoot,
};
use crate::garden::ledger::Ledger;
use crate::garden::metrics::GardenMetrics;
use crate::garden::owner_controllers::{
    PROFILE_CONTROLLER, SEED_CONTROLLER, reconcile_profile, reconcile_seed,
};
use crate::garden::pools::PoolKind;
use crate::garden::seed_authz::{RunningWebhook, WebhookError};
use crate::runtime::backoff::WatchBackoff;
use crate::runtime::clock::Clock;
use crate::runtime::config::{self, ConfigError, GardenConfiguration, Override};
use crate::runtime::health::{HealthError, HealthServer, ReadinessFlag};
use crate::runtime::leader::{ElectionSettings, run_as_leader};
use crate::runtime::metrics::Metrics;
use crate::runtime::selector::ObjectSelector;
use crate::runtime::shutdown::ShutdownSignals;

/// The name of the garden's leader-election Lease (suffixed with the object selector's
/// value when one is set, so instances never share it).
pub const LEADER_LEASE: &str = "granary-garden";

/// What `granary garden` is started with. `None` leaves the file's (or default) value.
#[derive(Clone, Debug, Default)]
pub struct GardenOptions {
    /// The garden kubeconfig; in-cluster or `KUBECONFIG` when absent.
    pub kubeconfig: Option<PathBuf>,
    /// The `GardenConfiguration` file.
    pub config: Option<PathBuf>,
    pub object_selector: Option<String>,
    pub metrics_bind_address: Option<String>,
    pub leader_elect: Option<bool>,
    /// `seedAuthorization.bindAddress`: where the seed authorization webhook listens.
    pub seed_authorization_bind_address: Option<String>,
}

impl GardenOptions {
    /// The flags as overrides of the configuration file.
    pub fn overrides(&self) -> Vec<Override> {
        let mut out = Vec::new();
        if let Some(address) = &self.metrics_bind_address {
            out.push(Override::new("server.metricsBindAddress", address.clone()));
        }
        if let Some(enabled) = self.leader_elect {
            out.push(Override::new("leaderElection.enabled", enabled));
        }
        if let Some(address) = &self.seed_authorization_bind_address {
            out.push(Override::new(
                "seedAuthorization.bindAddress",
                address.clone(),
            ));
        }
        out
    }
}

/// Why `granary garden` could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("no usable Kubernetes configuration (in-cluster or KUBECONFIG): {0}")]
    Infer(String),
    #[error(transparent)]
    Health(#[from] HealthError),
    #[error("registering metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("Kubernetes client: {0}")]
    Client(#[from] kube::Error),
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Webhook(#[from] WebhookError),
}

/// `granary garden`: runs until SIGINT/SIGTERM.
pub fn run(options: GardenOptions) -> Result<(), RunError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?
        .block_on(serve(options))
}

/// The async body of [`run`], for callers that have a runtime.
pub async fn serve(options: GardenOptions) -> Result<(), RunError> {
    let signals = ShutdownSignals::install();
    let config: GardenConfiguration =
        config::load(options.config.as_deref(), &options.overrides())?;
    let client = client(options.kubeconfig.as_ref()).await?;
    let metrics = Metrics::new();
    let selector = ObjectSelector::new(options.object_selector.clone());
    let webhook = if config.seed_authorization.enabled() {
        let webhook = RunningWebhook::start(
            client.clone(),
            &config.seed_authorization,
            &selector,
            &metrics,
        )
        .await?;
        tracing::info!(
            address = %webhook.local_addr,
            "granary garden: serving the seed authorization webhook (/authorize, /validate)"
        );
        Some(webhook)
    } else {
        None
    };
    let running = GardenController::new(client, config.clone())
        .object_selector(selector)
        .metrics(metrics.clone())
        .start()?;
    // A replica takes webhook traffic only with the webhook's caches filled.
    let readiness = match &webhook {
        Some(w) => running.readiness().and(w.readiness()),
        None => running.readiness(),
    };
    let health =
        HealthServer::start(&config.server.metrics_bind_address, metrics, readiness).await?;
    tracing::info!(address = %health.local_addr, "granary garden: serving /healthz, /readyz, /metrics");
    let signal = signals.wait().await;
    tracing::info!(
        signal,
        "granary garden: shutting down (stopping controllers, releasing the lease)"
    );
    running.stop().await;
    if let Some(webhook) = webhook {
        webhook.stop().await;
    }
    health.shutdown().await;
    Ok(())
}

async fn client(kubeconfig: Option<&PathBuf>) -> Result<Client, RunError> {
    let config = match kubeconfig {
        Some(path) => {
            let err = |message: String| RunError::Kubeconfig {
                path: path.display().to_string(),
                message,
            };
            let kc = crate::runtime::redact::read_kubeconfig(path).map_err(err)?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| err(e.to_string()))?
        }
        None => kube::Config::infer().await.map_err(|e| {
            RunError::Infer(crate::runtime::redact::without_snippets(&e.to_string()))
        })?,
    };
    Ok(Client::try_from(config)?)
}

/// Builds and starts the garden controllers in-process.
pub struct GardenController {
    client: Client,
    config: GardenConfiguration,
    selector: ObjectSelector,
    clock: Clock,
    metrics: Metrics,
    identity: String,
}

impl GardenController {
    pub fn new(client: Client, config: GardenConfiguration) -> Self {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "granary-garden".to_string());
        GardenController {
            client,
            config,
            selector: ObjectSelector::default(),
            clock: Clock::system(),
            metrics: Metrics::new(),
            identity: format!("{host}-{}", &suffix[..8]),
        }
    }

    /// `--object-selector`: see and label only this instance's objects.
    pub fn object_selector(mut self, selector: ObjectSelector) -> Self {
        self.selector = selector;
        self
    }

    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The registry to put the garden metrics into.
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The leader-election identity (a unique default is generated).
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// Starts the controllers (behind leader election when the configuration enables
    /// it) on the current tokio runtime.
    pub fn start(self) -> Result<RunningGarden, prometheus::Error> {
        let garden_metrics = GardenMetrics::register(&self.metrics)?;
        let token = CancellationToken::new();
        let ready = ReadinessFlag::default();
        let shared = Arc::new(Shared {
            client: self.client,
            config: self.config,
            selector: self.selector,
            clock: self.clock,
            metrics: self.metrics.clone(),
            garden_metrics,
            identity: self.identity,
            ready: ready.clone(),
        });
        let task = tokio::spawn(supervise(shared, token.clone()));
        Ok(RunningGarden {
            token,
            task,
            ready,
            metrics: self.metrics,
        })
    }
}

/// Garden controllers running in this process.
pub struct RunningGarden {
    token: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    ready: ReadinessFlag,
    metrics: Metrics,
}

impl RunningGarden {
    /// Set once the caches are filled and the counts re-derived (or while standing by).
    pub fn readiness(&self) -> ReadinessFlag {
        self.ready.clone()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Stops the controllers (letting running reconciles finish) and releases the
    /// leader lease if held.
    pub async fn stop(self) {
        self.token.cancel();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "garden controllers ended abnormally");
        }
    }
}

/// Everything that outlives one leadership term.
struct Shared {
    client: Client,
    config: GardenConfiguration,
    selector: ObjectSelector,
    clock: Clock,
    metrics: Metrics,
    garden_metrics: GardenMetrics,
    identity: String,
    ready: ReadinessFlag,
}

async fn supervise(shared: Arc<Shared>, token: CancellationToken) {
    let election = shared.config.leader_election.clone();
    if !election.enabled {
        term(shared, token).await;
        return;
    }
    let lease_name = match shared.selector.value() {
        Some(v) => format!("{LEADER_LEASE}-{v}"),
        None => LEADER_LEASE.to_string(),
    };
    let mut labels = BTreeMap::new();
    shared.selector.label(&mut labels);
    let settings = ElectionSettings {
        lease_name,
        identity: shared.identity.clone(),
        lease_duration: election.lease_duration.0,
        renew_deadline: election.renew_deadline.0,
        retry_period: election.retry_period.0,
        labels,
    };
    let api: Api<Lease> = Api::namespaced(shared.client.clone(), &election.namespace);
    // A standby is healthy and ready; a leader becomes ready again once its caches are.
    shared.ready.set(true);
    let result = run_as_leader(
        api,
        settings,
        shared.clock.clone(),
        || term(shared.clone(), token.child_token()),
        token.clone().cancelled_owned(),
    )
    .await;
    if let Err(e) = result {
        tracing::error!(error = %e, "leader election failed");
    }
}

fn watch_config(selector: &ObjectSelector) -> watcher::Config {
    let config = watcher::Config::default();
    match selector.label_selector() {
        Some(s) => config.labels(&s),
        None => config,
    }
}

/// Logs a failed reconcile, counts it, publishes a Warning event (conflicts aside) and
/// picks the requeue.
fn error_policy<K>(
    controller: &'static str,
) -> impl Fn(Arc<K>, &GardenError, Arc<Context>) -> Action + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    move |obj, error, ctx| {
        let kind = error.kind();
        ctx.metrics
            .reconcile_errors
            .with_label_values(&[controller, kind])
            .inc();
        let transient = matches!(kind, "Conflict" | "PlacementContention");
        if transient {
            // Retried at once and expected under contention: not a warning.
            tracing::debug!(controller, object = %obj.name_any(), %error, "reconcile retried");
        } else {
            tracing::warn!(controller, object = %obj.name_any(), %error, "reconcile failed");
        }
        if !transient {
            let note = error.to_string();
            tokio::spawn(async move {
                ctx.event(
                    obj.as_ref(),
                    EventType::Warning,
                    "ReconcileError",
                    "Reconcile",
                    note,
                )
                .await;
            });
        }
        Action::requeue(if transient {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
        })
    }
}

/// One leadership term: builds the caches and controllers and runs them until `token`
/// is cancelled (or the future is dropped on lost leadership).
async fn term(shared: Arc<Shared>, token: CancellationToken) {
    let client = shared.client.clone();
    let wc = || watch_config(&shared.selector);
    let profiles = Controller::new(Api::<CloudProfile>::all(client.clone()), wc())
        .trigger_backoff(WatchBackoff::default());
    let seeds = Controller::new(Api::<Seed>::all(client.clone()), wc())
        .trigger_backoff(WatchBackoff::default());
    let buckets = Controller::new(Api::<BackupBucket>::all(client.clone()), wc())
        .trigger_backoff(WatchBackoff::default());
    let shoots = Controller::new(Api::<Shoot>::all(client.clone()), wc())
        .trigger_backoff(WatchBackoff::default());
    let entries = Controller::new(Api::<BackupEntry>::all(client.clone()), wc())
        .trigger_backoff(WatchBackoff::default());
    let entry_index = Arc::new(crate::garden::entry_index::EntryIndex::default());
    // The caches the reconciles read, and the triggers between kinds, come from the same
    // watches: a trigger is sent only after its cache has the change, so a reconcile
    // never reads an older state than the event that woke it.
    let (profile_store, profile_cache, profiles_ready, []) =
        cache::<CloudProfile, 0>(Api::all(client.clone()), wc(), |_| {});
    let (
        seed_store,
        seed_cache,
        seeds_ready,
        [seeds_for_profiles, seeds_for_buckets, seeds_for_entries],
    ) = cache::<Seed, 3>(Api::all(client.clone()), wc(), |_| {});
    let (shoot_store, shoot_cache, shoots_ready, [shoots_for_profiles]) =
        cache::<Shoot, 1>(Api::all(client.clone()), wc(), |_| {});
    let (bucket_store, bucket_cache, buckets_ready, [buckets_for_profiles, buckets_for_seeds]) =
        cache::<BackupBucket, 2>(Api::all(client.clone()), wc(), |_| {});
    let (
        entry_store,
        entry_cache,
        entries_ready,
        [entries_for_buckets, entries_for_shoots, entries_for_seeds],
    ) = {
        let index = entry_index.clone();
        cache::<BackupEntry, 3>(Api::all(client.clone()), wc(), move |e| index.observe(e))
    };
    let (lease_store, lease_cache, leases_ready, [lease_events]) = cache::<Lease, 1>(
        Api::namespaced(client.clone(), GARDEN_NAMESPACE),
        wc(),
        |_| {},
    );
    let stores = Stores {
        profiles: profile_store,
        seeds: seed_store,
        shoots: shoot_store,
        buckets: bucket_store,
        entries: entry_store,
        entry_index,
        leases: lease_store,
        ready: vec![
            profiles_ready,
            seeds_ready,
            shoots_ready,
            buckets_ready,
            entries_ready,
            leases_ready,
        ],
    };
    let (counts_tx, counts_rx) = tokio::sync::watch::channel(false);
    let ctx = Arc::new(Context {
        client: client.clone(),
        config: shared.config.clone(),
        selector: shared.selector.clone(),
        clock: shared.clock.clone(),
        metrics: shared.metrics.clone(),
        garden_metrics: shared.garden_metrics.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "granary-garden".to_string(),
                instance: Some(shared.identity.clone()),
            },
        ),
        stores: stores.clone(),
        ledger: Ledger::default(),
        counts_ready: counts_rx,
    });

    let profile_store = stores.profiles.clone();
    let profiles = profiles
        .reconcile_on(seeds_for_profiles.flat_map(move |seed| {
            let refs: Vec<ObjectRef<CloudProfile>> = profile_store
                .state()
                .iter()
                .filter(|p| p.spec.type_ == seed.spec.provider.type_)
                .map(|p| ObjectRef::from_obj(p.as_ref()))
                .collect();
            futures::stream::iter(refs)
        }))
        .reconcile_on(buckets_for_profiles.filter_map(|bucket| {
            ready(
                pool_of(&bucket)
                    .filter(|k| k.kind == PoolKind::CloudProfile)
                    .map(|k| ObjectRef::new(&k.owner)),
            )
        }))
        // A shoot that stops using a profile may release the profile's deletion guard.
        // (A shoot's event shows its new profile only: every profile being deleted looks.)
        .reconcile_on(shoots_for_profiles.flat_map({
            let profile_store = stores.profiles.clone();
            move |shoot| {
                let mut refs: Vec<ObjectRef<CloudProfile>> = deleting(&profile_store);
                if shoot.cloud_profile_kind() == "CloudProfile"
                    && let Some(name) = shoot.cloud_profile_name()
                {
                    refs.push(ObjectRef::new(name));
                }
                futures::stream::iter(refs)
            }
        }))
        .with_config(ControllerConfig::default().concurrency(2));
    let seeds = seeds
        .reconcile_all_on(buckets_for_seeds.map(|_| ()))
        // An entry leaving a seed may release the seed's deletion guard.
        // (An entry's event shows its new seeds only: every seed being deleted looks.)
        .reconcile_on(entries_for_seeds.flat_map({
            let seed_store = stores.seeds.clone();
            move |entry| {
                let mut refs: Vec<ObjectRef<Seed>> = deleting(&seed_store);
                refs.extend(
                    [
                        entry.spec.seed_name.as_deref(),
                        entry.status.as_ref().and_then(|s| s.seed_name.as_deref()),
                    ]
                    .into_iter()
                    .flatten()
                    .filter(|s| !s.is_empty())
                    .map(ObjectRef::new),
                );
                futures::stream::iter(refs)
            }
        }))
        .with_config(ControllerConfig::default().concurrency(2));
    let buckets = buckets
        .reconcile_on(entries_for_buckets.flat_map(|entry| {
            // The bucket it names and the one holding a place for its move.
            let refs: Vec<ObjectRef<BackupBucket>> =
                std::iter::once(entry.spec.bucket_name.as_str())
                    .chain(crate::garden::moves::reserved_bucket(&entry))
                    .filter(|b| !b.is_empty())
                    .map(ObjectRef::new)
                    .collect();
            futures::stream::iter(refs)
        }))
        .reconcile_all_on(seeds_for_buckets.map(|_| ()))
        .reconcile_all_on(
            lease_events
                .filter(|lease| ready(lease.name_any().starts_with("seed-")))
                .map(|_| ()),
        )
        .with_config(ControllerConfig::default().concurrency(5));
    let syncs =
        u16::try_from(shared.config.controllers.backup_entry.concurrent_syncs).unwrap_or(u16::MAX);
    let shoots = shoots
        .reconcile_on(entries_for_shoots.flat_map(|entry| {
            let namespace = entry.namespace().unwrap_or_default();
            let refs: Vec<ObjectRef<Shoot>> = entry
                .owner_references()
                .iter()
                .filter(|o| o.kind == "Shoot")
                .map(|o| ObjectRef::new(&o.name).within(&namespace))
                .collect();
            futures::stream::iter(refs)
        }))
        .with_config(ControllerConfig::default().concurrency(syncs));
    let entry_store = stores.entries.clone();
    let entries = entries
        // A seed being deleted or gone lets the entries leaving it be handed over.
        .reconcile_on(seeds_for_entries.flat_map(move |seed| {
            let name = seed.name_any();
            let refs: Vec<ObjectRef<BackupEntry>> = entry_store
                .state()
                .iter()
                .filter(|e| {
                    e.status.as_ref().and_then(|s| s.seed_name.as_deref()) == Some(name.as_str())
                        && e.spec.seed_name.as_deref() != Some(name.as_str())
                })
                .map(|e| ObjectRef::from_obj(e.as_ref()))
                .collect();
            futures::stream::iter(refs)
        }))
        .with_config(ControllerConfig::default().concurrency(5));

    let stop = || token.clone().cancelled_owned();
    let profiles = profiles
        .graceful_shutdown_on(stop())
        .run(
            reconcile_profile,
            error_policy(PROFILE_CONTROLLER),
            ctx.clone(),
        )
        .for_each(drain(PROFILE_CONTROLLER));
    let seeds = seeds
        .graceful_shutdown_on(stop())
        .run(reconcile_seed, error_policy(SEED_CONTROLLER), ctx.clone())
        .for_each(drain(SEED_CONTROLLER));
    let buckets = buckets
        .graceful_shutdown_on(stop())
        .run(
            reconcile_bucket,
            error_policy(bucket_controller::CONTROLLER),
            ctx.clone(),
        )
        .for_each(drain(bucket_controller::CONTROLLER));
    let shoots = shoots
        .graceful_shutdown_on(stop())
        .run(reconcile_shoot, error_policy(SHOOT_CONTROLLER), ctx.clone())
        .for_each(drain(SHOOT_CONTROLLER));
    let entries = entries
        .graceful_shutdown_on(stop())
        .run(reconcile_entry, error_policy(ENTRY_CONTROLLER), ctx.clone())
        .for_each(drain(ENTRY_CONTROLLER));
    let recount = initial_recount(ctx.clone(), counts_tx, shared.ready.clone(), token.clone());
    let caches = async {
        tokio::join!(
            profile_cache,
            seed_cache,
            shoot_cache,
            bucket_cache,
            entry_cache,
            lease_cache
        );
    };
    let caches = async {
        tokio::select! {
            _ = caches => {}
            _ = token.cancelled() => {}
        }
    };
    tokio::join!(profiles, seeds, buckets, shoots, entries, recount, caches);
    tracing::info!("garden controllers stopped");
}

/// The objects of `store` being deleted (their deletion guards wait for other kinds).
fn deleting<K>(store: &reflector::Store<K>) -> Vec<ObjectRef<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .state()
        .iter()
        .filter(|o| o.meta().deletion_timestamp.is_some())
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

/// A reflector store of `K` for the controllers to read, the future that fills it, a flag
/// set once its initial list is complete, and `N` streams of the objects it changed
/// (applied or deleted), each item sent after the store has it.
fn cache<K, const N: usize>(
    api: Api<K>,
    config: watcher::Config,
    observe: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> (
    reflector::Store<K>,
    impl std::future::Future<Output = ()>,
    tokio::sync::watch::Receiver<bool>,
    [tokio_stream::wrappers::UnboundedReceiverStream<K>; N],
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut senders = Vec::with_capacity(N);
    let receivers: [tokio_stream::wrappers::UnboundedReceiverStream<K>; N] =
        std::array::from_fn(|_| {
            let (s, r) = tokio::sync::mpsc::unbounded_channel();
            senders.push(s);
            tokio_stream::wrappers::UnboundedReceiverStream::new(r)
        });
    let fill = reflector::reflector(writer, watcher(api, config))
        .backoff(WatchBackoff::default())
        .for_each(move |event| {
            if let Ok(event) = &event {
                observe(event);
            }
            let touched: Vec<K> = match event {
                Ok(watcher::Event::InitDone) => {
                    tx.send_replace(true);
                    Vec::new()
                }
                Ok(watcher::Event::Apply(o))
                | Ok(watcher::Event::Delete(o))
                | Ok(watcher::Event::InitApply(o)) => vec![o],
                Ok(watcher::Event::Init) => Vec::new(),
                Err(e) => {
                    tracing::debug!(error = %e, "cache watch error; retrying");
                    Vec::new()
                }
            };
            for o in touched {
                for s in &senders {
                    let _ = s.send(o.clone());
                }
            }
            ready(())
        });
    (store, fill, rx, receivers)
}

/// Consumes a controller's output stream item, logging errors of the machinery itself.
fn drain<T, E: std::fmt::Display>(
    controller: &'static str,
) -> impl FnMut(Result<T, E>) -> std::future::Ready<()> {
    move |result| {
        if let Err(e) = result {
            tracing::debug!(controller, error = %e, "controller event");
        }
        ready(())
    }
}

/// Re-derives every bucket's count from the entries once the caches are filled, then
/// lets placement start.
async fn initial_recount(
    ctx: Arc<Context>,
    done: tokio::sync::watch::Sender<bool>,
    ready_flag: ReadinessFlag,
    token: CancellationToken,
) {
    let work = async {
        if ctx.stores.wait_ready().await.is_err() {
            return;
        }
        for bucket in ctx.stores.buckets.state() {
            let Some(key) = pool_of(&bucket) else {
                continue;
            };
            let name = bucket.name_any();
            let mut delay = Duration::from_millis(100);
            while let Err(e) = ctx.ledger.recount(&ctx, &key, &name).await {
                tracing::warn!(bucket = %name, error = %e, "start-up recount failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
        tracing::info!("entry counts re-derived from the BackupEntries; placement starts");
        let _ = done.send(true);
        ready_flag.set(true);
    };
    tokio::select! {
        _ = work => {}
        _ = token.cancelled() => {}
    }
}
