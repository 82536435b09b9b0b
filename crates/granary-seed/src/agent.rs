//! `granary seed`: builds the clients and the [`Context`], starts the watches that feed
//! the work queues of the mirror and the extension controllers, renews the seed's
//! liveness Lease in the garden, serves `/healthz`, `/readyz` and `/metrics`, and runs
//! all of it under leader election when the configuration asks for it.
//!
//! [`SeedAgent`] is the in-process builder (tests, `granary dev`); [`run`] is the
//! command-line entry point.

use crate::ANNOTATION_GARDEN_NAMESPACE;
use crate::config::SeedConfiguration;
use crate::context::{Context, ReconcileError};
use crate::extension::{self, bucket::BucketActuator, entry::EntryActuator};
use crate::feed::{feed_listing, forget_vanished, index_entry, track_secret_user};
use crate::garden_watch::{SecretUsers, liveness, watch_credentials};
use crate::kube_ops::ensure_namespace;
use crate::metrics::SeedMetrics;
use crate::mirror;
use crate::reconnect::{GardenProbe, retry_when_garden_is_back, unanswered};
use granary_api::core::LABEL_SEED;
use granary_api::{core, extensions};
use granary_providers::StoreOptions;
use granary_runtime::clock::Clock;
use granary_runtime::config::{ConfigError, Override, load};
use granary_runtime::health::{HealthError, HealthServer, ReadinessFlag};
use granary_runtime::leader::{ElectionSettings, run_as_leader};
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_runtime::shutdown::ShutdownSignals;
use granary_runtime::work_queue::{Next, WorkQueue};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::config::KubeConfigOptions;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The controller groups `--disable-controllers` can switch off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeedController {
    /// The garden → seed mirror of buckets and entries.
    Mirror,
    /// The extension BackupBucket controller.
    BackupBucket,
    /// The extension BackupEntry controller.
    BackupEntry,
    /// The seed's liveness Lease in the garden.
    Liveness,
    /// One of the Velero-compatible controllers (Velero's name, e.g. `backup-queue`).
    Velero(&'static str),
}

impl SeedController {
    pub const ALL: [SeedController; 4] = [
        SeedController::Mirror,
        SeedController::BackupBucket,
        SeedController::BackupEntry,
        SeedController::Liveness,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SeedController::Mirror => "mirror",
            SeedController::BackupBucket => "backupbucket",
            SeedController::BackupEntry => "backupentry",
            SeedController::Liveness => "liveness",
            SeedController::Velero(name) => name,
        }
    }
}

impl std::str::FromStr for SeedController {
    type Err = SeedError;

    fn from_str(s: &str) -> Result<Self, SeedError> {
        let s = s.trim();
        SeedController::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .or_else(|| {
                granary_velero_server::settings::CONTROLLERS
                    .iter()
                    .find(|c| **c == s)
                    .map(|c| SeedController::Velero(c))
            })
            .ok_or_else(|| {
                SeedError::Usage(format!(
                    "--disable-controllers: unknown controller {s:?} (known: mirror, backupbucket, backupentry, liveness, {})",
                    granary_velero_server::settings::CONTROLLERS.join(", ")
                ))
            })
    }
}

/// Why `granary seed` could not start.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error(transparent)]
    Health(#[from] HealthError),
}

/// Flags of `granary seed`; each overrides the configuration file. The `///` lines on
/// the fields are their help.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct SeedOptions {
    /// This seed's name (overrides `seedName` in the configuration file).
    #[arg(long)]
    pub seed_name: Option<String>,
    /// Kubeconfig of the garden cluster (overrides `gardenKubeconfig`).
    #[arg(long, value_name = "PATH")]
    pub garden_kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the seed cluster; default: in-cluster or KUBECONFIG.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// SeedConfiguration file (YAML).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Root directory of the `local` object store.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Only act on objects labelled granary.gardener.cloud/instance=VALUE.
    #[arg(long, value_name = "VALUE")]
    pub object_selector: Option<String>,
    /// Address of /metrics, /healthz and /readyz (overrides server.metricsBindAddress).
    #[arg(long, value_name = "ADDR")]
    pub metrics_bind_address: Option<String>,
    /// Run only while holding the leader Lease (overrides leaderElection.enabled).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: Option<bool>,
    /// Controllers to switch off: mirror, backupbucket, backupentry, liveness, and
    /// Velero's (backup-storage-location, backup-queue, backup, …).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub disable_controllers: Vec<String>,
    /// Keys per batched object delete (S3 allows at most 1000).
    #[arg(long, value_name = "N")]
    pub delete_batch_size: Option<usize>,
    /// The Velero-compatible controllers' settings (the `velero:` section).
    #[command(flatten)]
    pub velero: granary_velero_server::settings::VeleroFlags,
}

async fn client_from(path: &std::path::Path) -> Result<Client, SeedError> {
    let err = |message: String| SeedError::Kubeconfig {
        path: path.display().to_string(),
        message,
    };
    let kc = granary_runtime::redact::read_kubeconfig(path).map_err(err)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| err(e.to_string()))?;
    Client::try_from(config).map_err(|e| err(e.to_string()))
}

/// Runs `granary seed` until SIGINT/SIGTERM.
pub async fn run(opts: SeedOptions) -> Result<(), SeedError> {
    let signals = ShutdownSignals::install();
    let mut overrides = Vec::new();
    if let Some(name) = &opts.seed_name {
        overrides.push(Override::new("seedName", name.clone()));
    }
    if let Some(path) = &opts.garden_kubeconfig {
        overrides.push(Override::new(
            "gardenKubeconfig",
            path.display().to_string(),
        ));
    }
    if let Some(addr) = &opts.metrics_bind_address {
        overrides.push(Override::new("server.metricsBindAddress", addr.clone()));
    }
    if let Some(enabled) = opts.leader_elect {
        overrides.push(Override::new("leaderElection.enabled", enabled));
    }
    overrides.extend(opts.velero.overrides());
    let config: SeedConfiguration = load(opts.config.as_deref(), &overrides)?;
    let garden_path = config.garden_kubeconfig.clone().ok_or_else(|| {
        SeedError::Usage(
            "--garden-kubeconfig (or gardenKubeconfig in the configuration) is required".into(),
        )
    })?;
    let garden = client_from(std::path::Path::new(&garden_path)).await?;
    let seed = match &opts.kubeconfig {
        Some(path) => client_from(path).await?,
        None => Client::try_default()
            .await
            .map_err(|e| SeedError::Kubeconfig {
                path: "(in-cluster or KUBECONFIG)".into(),
                message: granary_runtime::redact::without_snippets(&e.to_string()),
            })?,
    };
    let mut disabled = Vec::new();
    for name in opts
        .disable_controllers
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.trim().is_empty())
    {
        disabled.push(name.parse()?);
    }
    let mut store_options = StoreOptions {
        local_root: opts.data_dir.clone(),
        ..StoreOptions::default()
    };
    if let Some(n) = opts.delete_batch_size {
        store_options.delete_batch_size = n.max(1);
    }
    let metrics_address = config.server.metrics_bind_address.clone();
    let running = SeedAgent::new(garden, seed, config)
        .store_options(store_options)
        .object_selector(opts.object_selector.clone())
        .disable(disabled)
        .metrics_bind_address(Some(metrics_address))
        .start()
        .await?;
    let signal = signals.wait().await;
    tracing::info!(
        signal,
        "granary seed: shutting down (stopping controllers, releasing the lease)"
    );
    running.shutdown().await;
    Ok(())
}

/// Builds a seed agent in-process.
pub struct SeedAgent {
    garden: Client,
    seed: Client,
    config: SeedConfiguration,
    store_options: StoreOptions,
    selector: ObjectSelector,
    disabled: HashSet<SeedController>,
    clock: Clock,
    metrics: Metrics,
    metrics_bind_address: Option<String>,
    resync: Duration,
}

/// A running seed agent; stop it with [`RunningSeed::shutdown`].
pub struct RunningSeed {
    /// Where `/metrics`, `/healthz` and `/readyz` are served, when a server was asked for.
    pub metrics_address: Option<SocketAddr>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    health: Option<HealthServer>,
    ready: ReadinessFlag,
}

impl RunningSeed {
    /// Set once the controllers run (the leader's, or a healthy standby's).
    pub fn readiness(&self) -> ReadinessFlag {
        self.ready.clone()
    }

    /// Stops every controller (releasing the leader lease) and the health server.
    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
        if let Some(h) = self.health {
            h.shutdown().await;
        }
    }
}

impl SeedAgent {
    pub fn new(garden: Client, seed: Client, config: SeedConfiguration) -> Self {
        SeedAgent {
            garden,
            seed,
            config,
            store_options: StoreOptions::default(),
            selector: ObjectSelector::default(),
            disabled: HashSet::new(),
            clock: Clock::system(),
            metrics: Metrics::new(),
            metrics_bind_address: None,
            resync: Duration::from_secs(300),
        }
    }

    /// Object-store options (the `local` root, batch sizes, retries).
    pub fn store_options(mut self, options: StoreOptions) -> Self {
        self.store_options = options;
        self
    }

    /// `--object-selector`.
    pub fn object_selector(mut self, value: Option<String>) -> Self {
        self.selector = ObjectSelector::new(value);
        self
    }

    /// `--disable-controllers`.
    pub fn disable(mut self, controllers: impl IntoIterator<Item = SeedController>) -> Self {
        self.disabled.extend(controllers);
        self
    }

    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The registry to put the seed metrics into (a fresh one by default).
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Serve `/metrics`, `/healthz`, `/readyz` on this address (`127.0.0.1:0` in tests).
    pub fn metrics_bind_address(mut self, address: Option<String>) -> Self {
        self.metrics_bind_address = address;
        self
    }

    /// How often every object is looked at again without a trigger (default 5 min).
    pub fn resync(mut self, every: Duration) -> Self {
        self.resync = every;
        self
    }

    /// Starts the agent.
    pub async fn start(self) -> Result<RunningSeed, SeedError> {
        let ready = ReadinessFlag::default();
        let metrics = SeedMetrics::new(self.metrics.clone());
        let health = match &self.metrics_bind_address {
            Some(addr) => {
                Some(HealthServer::start(addr, self.metrics.clone(), ready.clone()).await?)
            }
            None => None,
        };
        let election = self.config.leader_election.clone();
        let ctx = Context::new(
            self.garden,
            self.seed.clone(),
            self.config,
            self.store_options,
            metrics,
            self.clock.clone(),
            self.selector,
            self.resync,
        );
        let disabled = Arc::new(self.disabled);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let clock = self.clock;
        let seed = self.seed;
        let running_ready = ready.clone();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            let work = {
                let ctx = ctx.clone();
                let ready = ready.clone();
                move || {
                    let ctx = ctx.clone();
                    let ready = ready.clone();
                    let disabled = disabled.clone();
                    async move {
                        tracing::info!(seed = %ctx.seed_name, "seed controllers started");
                        ready.set(true);
                        run_controllers(ctx, &disabled).await;
                    }
                }
            };
            if election.enabled {
                if let Err(e) = ensure_namespace(&seed, &election.namespace).await {
                    tracing::warn!(error = %e, "leader election namespace");
                }
                let mut labels = BTreeMap::new();
                ctx.selector.label(&mut labels);
                let settings = ElectionSettings {
                    lease_name: format!("granary-seed-{}", ctx.seed_name),
                    identity: format!("{}-{}", ctx.seed_name, uuid::Uuid::new_v4().simple()),
                    lease_duration: election.lease_duration.0,
                    renew_deadline: election.renew_deadline.0,
                    retry_period: election.retry_period.0,
                    labels,
                };
                let api: Api<Lease> = Api::namespaced(seed, &election.namespace);
                if let Err(e) = run_as_leader(api, settings, clock, work, shutdown).await {
                    tracing::error!(error = %e, "leader election stopped");
                }
            } else {
                let work = work;
                tokio::select! {
                    _ = work() => {}
                    _ = shutdown => {}
                }
            }
        });
        Ok(RunningSeed {
            metrics_address: health.as_ref().map(|h| h.local_addr),
            stop,
            task,
            health,
            ready: running_ready,
        })
    }
}

/// The Velero-compatible controllers in this seed's Velero namespace, and the seed's
/// default location.
async fn velero(ctx: Arc<Context>, disabled: HashSet<SeedController>) {
    use granary_velero_server::settings::{
        CONTROLLER_DEFAULT_LOCATION, CONTROLLER_SIBLING_LOCATIONS,
    };
    let settings = ctx.config.velero.clone();
    // A seed cluster without Velero's CRDs (deploy/seed/crds) cannot run this part: say so
    // once instead of retrying every watch forever.
    let probe: Api<granary_api::velero::BackupStorageLocation> =
        Api::namespaced(ctx.seed.clone(), &settings.namespace);
    if let Err(kube::Error::Api(s)) = probe.list(&kube::api::ListParams::default().limit(1)).await
        && s.code == 404
    {
        tracing::warn!(
            "the seed cluster serves no velero.io/v1 kinds (install deploy/seed/crds): the \
             Velero-compatible controllers are off until the next start"
        );
        return;
    }
    if let Err(e) = ensure_namespace(&ctx.seed, &settings.namespace).await {
        tracing::warn!(namespace = %settings.namespace, error = %e, "Velero namespace");
    }
    let off: Vec<String> = disabled
        .iter()
        .filter_map(|c| match c {
            SeedController::Velero(name) => Some(name.to_string()),
            _ => None,
        })
        .collect();
    let default_location =
        settings.default_location.enabled && !off.iter().any(|c| c == CONTROLLER_DEFAULT_LOCATION);
    let vctx = Arc::new(
        granary_velero_server::context::VeleroContext::new(
            ctx.seed.clone(),
            settings,
            ctx.store_options.clone(),
            ctx.clock.clone(),
            granary_velero_server::metrics::VeleroMetrics::new(&ctx.metrics.shared),
            ctx.selector.clone(),
        )
        // The landscape's keys, read from the garden: any seed verifies any seed's backups.
        .with_key_source(granary_velero_server::integrity::KeySource::Landscape {
            garden: ctx.garden.clone(),
            namespace: granary_api::core::GARDEN_NAMESPACE.to_owned(),
        }),
    );
    let siblings = !off.iter().any(|c| c == CONTROLLER_SIBLING_LOCATIONS);
    let work = || {
        let (ctx, vctx, off) = (ctx.clone(), vctx.clone(), off.clone());
        async move {
            let controllers = granary_velero_server::server::run_controllers(vctx, off);
            let default_location = async {
                if default_location {
                    crate::velero_location::run(ctx.clone()).await;
                }
            };
            let sibling_locations = async {
                if siblings {
                    crate::sibling_locations::run(ctx.clone()).await;
                }
            };
            tokio::join!(controllers, default_location, sibling_locations);
        }
    };
    // One Velero namespace, one active set of controllers: they run only while this
    // seed holds the namespace's Lease, which `granary server` takes for its namespace
    // too (a unique identity when replicas compete, else one fixed per seed).
    use granary_velero_server::server::{lease_identity, namespace_election};
    let election = &ctx.config.leader_election;
    let identity = lease_identity("granary-seed", &ctx.seed_name, election.enabled);
    let mut labels = BTreeMap::new();
    ctx.selector.label(&mut labels);
    let settings = namespace_election(identity, election, labels);
    let leases: Api<Lease> = Api::namespaced(ctx.seed.clone(), &ctx.config.velero.namespace);
    // This part is dropped when the seed stops or loses its own Lease: give the
    // namespace's Lease up then, so whoever stands by need not wait for it to expire.
    let _release = ReleaseOnDrop {
        api: leases.clone(),
        identity: settings.identity.clone(),
    };
    if let Err(e) = run_as_leader(
        leases,
        settings,
        ctx.clock.clone(),
        work,
        std::future::pending::<()>(),
    )
    .await
    {
        tracing::error!(error = %e, "the Velero namespace's Lease");
    }
}

/// Releases the Velero namespace's Lease (best effort, in a task of its own) when the
/// Velero part of the seed is dropped.
struct ReleaseOnDrop {
    api: Api<Lease>,
    identity: String,
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let (api, identity) = (self.api.clone(), std::mem::take(&mut self.identity));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                granary_runtime::leader::release(
                    &api,
                    granary_velero_server::server::VELERO_LEASE,
                    &identity,
                )
                .await
            });
        }
    }
}

/// Feeds queue `queue` with the keys `keys` picks from every watch event of `api`.
async fn feed<K, F>(api: Api<K>, config: watcher::Config, keys: F)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
    F: Fn(&K, bool),
{
    feed_listing(api, config, keys, |_| {}).await
}

fn selected(selector: Option<String>) -> watcher::Config {
    match selector {
        Some(s) => watcher::Config::default().labels(&s),
        None => watcher::Config::default(),
    }
}

/// Runs one mirror pass with metrics and the retry policy; a pass that got no answer
/// from an API server makes `probe` check the garden.
async fn mirrored<Fut>(
    ctx: &Context,
    probe: &GardenProbe,
    controller: &'static str,
    key: &str,
    pass: Fut,
) -> Next
where
    Fut: std::future::Future<Output = Result<Next, ReconcileError>>,
{
    let started = Instant::now();
    let m = &ctx.metrics.shared;
    m.reconciles.with_label_values(&[controller]).inc();
    let result = pass.await;
    m.reconcile_duration
        .with_label_values(&[controller])
        .observe(started.elapsed().as_secs_f64());
    let retry_key = format!("{controller}/{key}");
    match result {
        Ok(next) => {
            ctx.succeeded(&retry_key);
            next
        }
        Err(e) => {
            m.reconcile_errors
                .with_label_values(&[controller, e.kind().as_str()])
                .inc();
            tracing::warn!(controller, key, error = %e, "mirror pass failed");
            if unanswered(&e) {
                probe.suspect();
            }
            Next::After(ctx.back_off(&retry_key))
        }
    }
}

/// Runs one mirror queue with `workers` workers, each pass through [`mirrored`].
fn spawn_mirror_queue<F, Fut>(
    tasks: &mut tokio::task::JoinSet<()>,
    ctx: &Arc<Context>,
    probe: &Arc<GardenProbe>,
    controller: &'static str,
    queue: WorkQueue<String>,
    workers: usize,
    pass: F,
) where
    F: Fn(Arc<Context>, String) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Next, ReconcileError>> + Send + 'static,
{
    let (c, p) = (ctx.clone(), probe.clone());
    tasks.spawn(async move {
        queue
            .run(workers, move |key: String| {
                let (c, p, pass) = (c.clone(), p.clone(), pass.clone());
                async move {
                    let work = pass(c.clone(), key.clone());
                    mirrored(&c, &p, controller, &key, work).await
                }
            })
            .await
    });
}

async fn run_controllers(ctx: Arc<Context>, disabled: &HashSet<SeedController>) {
    let mut tasks = tokio::task::JoinSet::new();
    let own = ctx.selector.label_selector();
    let enabled = |c: SeedController| !disabled.contains(&c);

    if enabled(SeedController::BackupBucket) {
        let queue: WorkQueue<String> = WorkQueue::new();
        let q = queue.clone();
        let (gone, listed) = forget_vanished::<extensions::BackupBucket>(&ctx);
        tasks.spawn(feed_listing(
            Api::<extensions::BackupBucket>::all(ctx.seed.clone()),
            selected(own.clone()),
            move |o, deleted| {
                if deleted {
                    gone(&o.name_any());
                }
                q.trigger(o.name_any())
            },
            listed,
        ));
        let c = ctx.clone();
        let actuator = Arc::new(BucketActuator);
        let workers = ctx.config.controllers.backup_bucket.concurrent_syncs as usize;
        tasks.spawn(async move {
            queue
                .run(workers, move |name| {
                    let c = c.clone();
                    let a = actuator.clone();
                    async move { extension::reconcile(&c, a.as_ref(), name).await }
                })
                .await
        });
    }
    if enabled(SeedController::BackupEntry) {
        let queue: WorkQueue<String> = WorkQueue::new();
        let q = queue.clone();
        let (gone, listed) = forget_vanished::<extensions::BackupEntry>(&ctx);
        tasks.spawn(feed_listing(
            Api::<extensions::BackupEntry>::all(ctx.seed.clone()),
            selected(own.clone()),
            move |o, deleted| {
                if deleted {
                    gone(&o.name_any());
                }
                q.trigger(o.name_any())
            },
            listed,
        ));
        let c = ctx.clone();
        let actuator = Arc::new(EntryActuator::default());
        let workers = ctx.config.controllers.backup_entry.concurrent_syncs as usize;
        tasks.spawn(async move {
            queue
                .run(workers, move |name| {
                    let c = c.clone();
                    let a = actuator.clone();
                    async move { extension::reconcile(&c, a.as_ref(), name).await }
                })
                .await
        });
    }
    if enabled(SeedController::Mirror) {
        spawn_mirror(&ctx, &mut tasks, own.clone());
    }
    if enabled(SeedController::Liveness) {
        tasks.spawn(liveness(ctx.clone()));
    }
    if ctx.config.velero.enabled {
        tasks.spawn(velero(ctx.clone(), disabled.clone()));
    }
    // Every task runs until this future is dropped (shutdown or lost leadership), which
    // aborts them all with the JoinSet.
    while let Some(result) = tasks.join_next().await {
        if let Err(e) = result {
            tracing::error!(error = %e, "seed controller task stopped");
        }
    }
}

/// The mirror's controller names (metric labels, retry keys).
const MIRROR_BUCKETS: &str = "mirror-backupbucket";
const MIRROR_ENTRIES: &str = "mirror-backupentry";

fn spawn_mirror(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>, own: Option<String>) {
    let buckets: WorkQueue<String> = WorkQueue::new();
    let entries: WorkQueue<String> = WorkQueue::new();
    // Garden entries by bucket, so a bucket's status change wakes its entries.
    let by_bucket: Arc<Mutex<HashMap<String, HashSet<String>>>> = Arc::default();
    let assigned = ctx.selector.and(&format!("{LABEL_SEED}={}", ctx.seed_name));

    // Garden buckets by the credentials Secret they use, so a rotated Secret is copied
    // and used at once; each of those Secrets is watched by name as it appears (the
    // garden's seed authorizer lets a seed see its own credentials only).
    let by_secret: SecretUsers = Arc::default();
    let (namespaces_tx, namespaces_rx) = tokio::sync::mpsc::unbounded_channel();

    let q = buckets.clone();
    let eq = entries.clone();
    let index = by_bucket.clone();
    let secrets = by_secret.clone();
    tasks.spawn(feed(
        Api::<core::BackupBucket>::all(ctx.garden.clone()),
        selected(assigned.clone()),
        move |o, deleted| {
            let name = o.name_any();
            if let Some(keys) = index.lock().unwrap_or_else(|p| p.into_inner()).get(&name) {
                for k in keys {
                    eq.trigger(k.clone());
                }
            }
            let mut secrets = secrets.lock().unwrap_or_else(|p| p.into_inner());
            let secret = o
                .credentials()
                .filter(|_| !deleted)
                .map(|r| (r.namespace, r.name));
            if track_secret_user(&mut secrets, &name, secret.clone())
                && let Some(secret) = secret
            {
                // The receiver lives as long as the mirror's tasks (a Secret already
                // watched is skipped there).
                let _ = namespaces_tx.send(secret);
            }
            q.trigger(name);
        },
    ));
    tasks.spawn(watch_credentials(
        ctx.garden.clone(),
        namespaces_rx,
        by_secret,
        buckets.clone(),
    ));
    let q = buckets.clone();
    tasks.spawn(feed(
        Api::<extensions::BackupBucket>::all(ctx.seed.clone()),
        selected(own.clone()),
        move |o, _| q.trigger(o.name_any()),
    ));
    let q = entries.clone();
    let index = by_bucket.clone();
    tasks.spawn(feed(
        Api::<core::BackupEntry>::all(ctx.garden.clone()),
        selected(assigned),
        move |o, deleted| {
            let key = mirror::entry::key(&o.namespace().unwrap_or_default(), &o.name_any());
            let mut index = index.lock().unwrap_or_else(|p| p.into_inner());
            index_entry(&mut index, &o.spec.bucket_name, &key, deleted);
            q.trigger(key);
        },
    ));
    let q = entries.clone();
    tasks.spawn(feed(
        Api::<extensions::BackupEntry>::all(ctx.seed.clone()),
        selected(own),
        move |o, _| {
            if let Some(ns) = o.annotations().get(ANNOTATION_GARDEN_NAMESPACE) {
                q.trigger(mirror::entry::key(ns, &o.name_any()));
            }
        },
    ));
    // When the garden answers again after an outage, the passes that failed meanwhile
    // run at once rather than after their back-off.
    let probe = Arc::new(GardenProbe::default());
    tasks.spawn(retry_when_garden_is_back(
        ctx.clone(),
        probe.clone(),
        vec![
            (MIRROR_BUCKETS, buckets.clone()),
            (MIRROR_ENTRIES, entries.clone()),
        ],
    ));
    let config = &ctx.config.controllers;
    spawn_mirror_queue(
        tasks,
        ctx,
        &probe,
        MIRROR_BUCKETS,
        buckets,
        config.backup_bucket.concurrent_syncs as usize,
        |c, name| async move { mirror::bucket::reconcile(&c, &name).await },
    );
    spawn_mirror_queue(
        tasks,
        ctx,
        &probe,
        MIRROR_ENTRIES,
        entries,
        config.backup_entry.concurrent_syncs as usize,
        |c, key| async move { mirror::entry::reconcile(&c, &key).await },
    );
}
