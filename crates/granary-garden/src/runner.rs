//! Starting and stopping the garden controllers: [`GardenController`] (a builder tests
//! start in-process against any `kube::Client` and stop cleanly) and [`run`]/[`serve`]
//! behind `granary garden` (configuration file and flags, kubeconfig, health/metrics
//! server, leader election, signals).

use std::collections::BTreeMap;
use std::future::ready;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::config::KubeConfigOptions;
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Controller, watcher};
use kube::{Client, Resource, ResourceExt};
use std::future::Future;
use tokio_util::sync::CancellationToken;

use crate::bucket_controller::{self, reconcile as reconcile_bucket};
use crate::buckets::pool_of;
use crate::config::GardenConfiguration;
use crate::context::{Context, GardenError, Stores, renewed};
use crate::entry_controllers::{
    ENTRY_CONTROLLER, SHOOT_CONTROLLER, reconcile_entry, reconcile_shoot,
};
use crate::entry_index::EntryIndex;
use crate::informers::FirstList::{AsItComes, Whole};
use crate::informers::informer;
use crate::ledger::Ledger;
use crate::metrics::GardenMetrics;
use crate::owner_controllers::{
    PROFILE_CONTROLLER, SEED_CONTROLLER, reconcile_profile, reconcile_seed,
};
use crate::pool_index::PoolIndex;
use crate::pools::PoolKind;
use crate::seed_authz::{RunningWebhook, WebhookError};
use crate::triggers::{
    BucketViews, SeedLeases, entry_needs_reconcile, profile_has_work, route, shoot_work,
};
use granary_api::core::{BackupBucket, BackupEntry, CloudProfile, GARDEN_NAMESPACE, Seed, Shoot};
use granary_runtime::clock::Clock;
use granary_runtime::config::{self, ConfigError, Override};
use granary_runtime::health::{HealthError, HealthServer, ReadinessFlag};
use granary_runtime::leader::{ElectionSettings, run_as_leader};
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_runtime::shutdown::ShutdownSignals;

/// The name of the garden's leader-election Lease (suffixed with the object selector's
/// value when one is set, so instances never share it).
pub const LEADER_LEASE: &str = "granary-garden";

/// Flags of `granary garden`; each overrides the configuration file (`None` leaves the
/// file's or the default value). The `///` lines on the fields are their help.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct GardenOptions {
    /// The garden kubeconfig (default: in-cluster, else KUBECONFIG / ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The GardenConfiguration file (YAML).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Only see (and label) objects with granary.gardener.cloud/instance=VALUE.
    #[arg(long, value_name = "VALUE")]
    pub object_selector: Option<String>,
    /// Where /healthz, /readyz and /metrics are served (e.g. `:8085`).
    #[arg(long, value_name = "ADDR")]
    pub metrics_bind_address: Option<String>,
    /// Run only while holding the leader Lease.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: Option<bool>,
    /// Where the seed authorization webhook listens over HTTPS (e.g. `:9443`); needs
    /// seedAuthorization.tlsCertFile and tlsKeyFile in the configuration file.
    #[arg(long, value_name = "ADDR")]
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
            let kc = granary_runtime::redact::read_kubeconfig(path).map_err(err)?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| err(e.to_string()))?
        }
        None => kube::Config::infer().await.map_err(|e| {
            RunError::Infer(granary_runtime::redact::without_snippets(&e.to_string()))
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
    // Paged lists (kube's default 500 a page) keep a restart's memory bounded; the
    // embedded server serves every page with the first page's resourceVersion, as
    // kube-apiserver does, so nothing created mid-list is missed by the watch.
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
    // Each part of the term is a task of its own. Joined in one task, every wake-up of
    // any part (a create's answer, a watch event) polled all of them, and the garden's
    // watches, placing and reconciles shared one thread: at 100,000 shoots that thread
    // was the garden's limit, with the other core half idle. The set aborts every part
    // when the term is dropped (lost leadership), as dropping the joined future did.
    let mut parts = tokio::task::JoinSet::new();
    parts.spawn(until_cancelled(
        &token,
        crate::integrity_key::run(client.clone()),
    ));
    let wc = || watch_config(&shared.selector);
    let entry_index = Arc::new(EntryIndex::default());
    let pool_index = Arc::new(PoolIndex::default());
    // One watch and one store per kind ([`informers`]): the reconciles read them, each
    // kind's controller is driven by its own informer, and the triggers between kinds
    // come from the same watches, sent only after the store has the change.
    let profiles = informer::<CloudProfile, 1>(Api::all(client.clone()), wc(), Whole, |_| {});
    let seeds = informer::<Seed, 3>(Api::all(client.clone()), wc(), Whole, |_| {});
    // A shoot is placed as soon as its page of the list is read: placement reads no other
    // shoot (a burst of shoots at a cold start need not wait for the whole list).
    let shoots = informer::<Shoot, 1>(Api::all(client.clone()), wc(), AsItComes, |_| {});
    let buckets = {
        let index = pool_index.clone();
        informer::<BackupBucket, 2>(Api::all(client.clone()), wc(), Whole, move |b| {
            index.observe(b)
        })
    };
    let entries = {
        let index = entry_index.clone();
        informer::<BackupEntry, 3>(Api::all(client.clone()), wc(), Whole, move |e| {
            index.observe(e)
        })
    };
    let leases = informer::<Lease, 2>(
        Api::namespaced(client.clone(), GARDEN_NAMESPACE),
        wc(),
        Whole,
        |_| {},
    );
    let [profiles_for_shoots] = profiles.changes;
    let [seeds_for_profiles, seeds_for_buckets, seeds_for_entries] = seeds.changes;
    let [shoots_for_profiles] = shoots.changes;
    let [buckets_for_profiles, buckets_for_seeds] = buckets.changes;
    let [entries_for_buckets, entries_for_shoots, entries_for_seeds] = entries.changes;
    let [lease_events, leases_for_seeds] = leases.changes;
    // No controller follows the leases' own stream.
    drop(leases.applied);
    let stores = Stores {
        profiles: profiles.store.clone(),
        seeds: seeds.store.clone(),
        shoots: shoots.store.clone(),
        buckets: buckets.store.clone(),
        entries: entries.store.clone(),
        entry_index,
        pools: pool_index,
        leases: leases.store.clone(),
        ready: vec![
            profiles.ready.clone(),
            seeds.ready.clone(),
            buckets.ready.clone(),
            entries.ready.clone(),
            leases.ready.clone(),
        ],
        shoots_ready: shoots.ready.clone(),
    };
    // The scrape-time gauges read this term's caches while it lasts.
    let _gauges = shared
        .garden_metrics
        .watch(stores.clone(), shared.config.clone());
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
    let profile_controller = Controller::for_shared_stream(profiles.applied, profiles.store)
        .reconcile_on(seeds_for_profiles.flat_map(move |seed| {
            let refs: Vec<ObjectRef<CloudProfile>> = profile_store
                .state()
                .iter()
                .filter(|p| p.spec.type_ == seed.object.spec.provider.type_)
                .map(|p| ObjectRef::from_obj(p.as_ref()))
                .collect();
            futures::stream::iter(refs)
        }))
        // Not on every count written: on what the profile reads of its buckets.
        .reconcile_on(buckets_for_profiles.filter_map({
            let mut views = BucketViews::default();
            let profile_store = stores.profiles.clone();
            move |change| {
                let wake = views.changed(&change.object, change.deleted);
                ready(
                    pool_of(&change.object)
                        .filter(|k| wake && k.kind == PoolKind::CloudProfile)
                        .filter(|k| {
                            let profile = profile_store.get(&ObjectRef::new(&k.owner));
                            profile_has_work(&change.object, change.deleted, k, profile.as_deref())
                        })
                        .map(|k| ObjectRef::new(&k.owner)),
                )
            }
        }))
        // A shoot that stops using a profile may release the deletion guard of a profile
        // being deleted. (A shoot's event shows its new profile only: every profile being
        // deleted looks; a live profile has nothing to do about shoots.)
        .reconcile_on(shoots_for_profiles.flat_map({
            let profile_store = stores.profiles.clone();
            move |_| futures::stream::iter(deleting(&profile_store))
        }))
        .with_config(ControllerConfig::default().concurrency(2));
    let seed_controller = Controller::for_shared_stream(seeds.applied, seeds.store)
        .reconcile_on(buckets_for_seeds.flat_map({
            let mut views = BucketViews::default();
            let seed_store = stores.seeds.clone();
            move |change| {
                let refs: Vec<ObjectRef<Seed>> = views
                    .seeds_to_wake(&change.object, change.deleted, |name| {
                        seed_store.get(&ObjectRef::new(name))
                    })
                    .iter()
                    .map(|s| ObjectRef::new(s))
                    .collect();
                futures::stream::iter(refs)
            }
        }))
        // An entry leaving a seed may release the deletion guard of a seed being deleted.
        // (An entry's event shows its new seeds only: every seed being deleted looks.)
        .reconcile_on(entries_for_seeds.flat_map({
            let seed_store = stores.seeds.clone();
            move |_| futures::stream::iter(deleting(&seed_store))
        }))
        // A seed coming (back) to life is no longer lost: its `Lost` condition clears at
        // its first renewal, not at the next resync.
        .reconcile_on(leases_for_seeds.filter_map({
            let mut leases = SeedLeases::default();
            let ctx = ctx.clone();
            move |change| ready(seed_woken(&mut leases, &change, &ctx).map(|s| ObjectRef::new(&s)))
        }))
        .with_config(ControllerConfig::default().concurrency(2));
    let bucket_controller = Controller::for_shared_stream(buckets.applied, buckets.store)
        .reconcile_on(entries_for_buckets.flat_map(|change| {
            // The bucket it names and the one holding a place for its move.
            let entry = change.object;
            let refs: Vec<ObjectRef<BackupBucket>> =
                std::iter::once(entry.spec.bucket_name.as_str())
                    .chain(crate::moves::reserved_bucket(&entry))
                    .filter(|b| !b.is_empty())
                    .map(ObjectRef::new)
                    .collect();
            futures::stream::iter(refs)
        }))
        .reconcile_all_on(seeds_for_buckets.map(|_| ()))
        .reconcile_all_on(lease_events.filter_map({
            let mut leases = SeedLeases::default();
            let ctx = ctx.clone();
            move |change| ready(seed_woken(&mut leases, &change, &ctx).map(|_| ()))
        }))
        .with_config(ControllerConfig::default().concurrency(5));
    let syncs =
        u16::try_from(shared.config.controllers.backup_entry.concurrent_syncs).unwrap_or(u16::MAX);
    // A shoot without an entry goes to the placer ([`crate::placer`]), which hands what
    // it cannot place to the shoot controller; a shoot whose entry is out of line goes
    // to the controller. Judged on the entry cache once it is filled (a restart has no
    // reconcile per shoot to go through before the first new placement).
    let (to_placer, for_placer) = tokio::sync::mpsc::unbounded_channel::<Arc<Shoot>>();
    let (placer_gives_up, given_up) = tokio::sync::mpsc::unbounded_channel::<ObjectRef<Shoot>>();
    let shoots_to_reconcile = shoots
        .applied
        .then({
            let stores = stores.clone();
            let entries_ready = entries.ready.clone();
            let to_placer = to_placer.clone();
            move |shoot| {
                let stores = stores.clone();
                let mut entries_ready = entries_ready.clone();
                let to_placer = to_placer.clone();
                async move {
                    // Stopped caches: let the reconcile see for itself.
                    let _ = entries_ready.wait_for(|r| *r).await;
                    let work = shoot_work(&shoot, stores.entry_of(&shoot).as_deref());
                    route(work, shoot, &to_placer)
                }
            }
        })
        .filter_map(ready);
    let shoot_controller = Controller::for_shared_stream(shoots_to_reconcile, shoots.store)
        // What the placer could not place: the controller says why and retries.
        .reconcile_on(tokio_stream::wrappers::UnboundedReceiverStream::new(
            given_up,
        ))
        // A shoot waiting on its CloudProfile (broken, or not there yet) is placed as
        // soon as the profile changes, not at its next retry.
        .reconcile_on(profiles_for_shoots.flat_map({
            let stores = stores.clone();
            let to_placer = to_placer.clone();
            move |change| {
                let profile = change.object.name_any();
                let shoots = stores.shoots.state();
                let refs: Vec<ObjectRef<Shoot>> =
                    crate::triggers::shoots_waiting_on_profile(&profile, &shoots, |shoot| {
                        stores.entry_of(shoot)
                    })
                    .into_iter()
                    .filter_map(|(shoot, work)| route(work, Arc::clone(shoot), &to_placer))
                    .map(|shoot| ObjectRef::from_obj(shoot.as_ref()))
                    .collect();
                futures::stream::iter(refs)
            }
        }))
        .reconcile_on(entries_for_shoots.flat_map({
            let shoot_store = stores.shoots.clone();
            let to_placer = to_placer.clone();
            move |change| {
                let entry = change.object;
                let namespace = entry.namespace().unwrap_or_default();
                let current = (!change.deleted).then_some(entry.as_ref());
                let refs: Vec<ObjectRef<Shoot>> = entry
                    .owner_references()
                    .iter()
                    .filter(|o| o.kind == "Shoot")
                    .filter_map(|o| shoot_store.get(&ObjectRef::new(&o.name).within(&namespace)))
                    .filter_map(|shoot| route(shoot_work(&shoot, current), shoot, &to_placer))
                    .map(|shoot| ObjectRef::from_obj(shoot.as_ref()))
                    .collect();
                futures::stream::iter(refs)
            }
        }))
        .with_config(ControllerConfig::default().concurrency(syncs));
    drop(to_placer);
    let entry_store = stores.entries.clone();
    let entry_controller = Controller::for_shared_stream(
        entries
            .applied
            .filter(|entry| ready(entry_needs_reconcile(entry))),
        entries.store,
    )
    // A seed being deleted or gone lets the entries leaving it be handed over.
    .reconcile_on(seeds_for_entries.flat_map(move |seed| {
        let name = seed.object.name_any();
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
    let profile_run = profile_controller
        .graceful_shutdown_on(stop())
        .run(
            reconcile_profile,
            error_policy(PROFILE_CONTROLLER),
            ctx.clone(),
        )
        .for_each(drain(PROFILE_CONTROLLER));
    let seed_run = seed_controller
        .graceful_shutdown_on(stop())
        .run(reconcile_seed, error_policy(SEED_CONTROLLER), ctx.clone())
        .for_each(drain(SEED_CONTROLLER));
    let bucket_run = bucket_controller
        .graceful_shutdown_on(stop())
        .run(
            reconcile_bucket,
            error_policy(bucket_controller::CONTROLLER),
            ctx.clone(),
        )
        .for_each(drain(bucket_controller::CONTROLLER));
    let shoot_run = shoot_controller
        .graceful_shutdown_on(stop())
        .run(reconcile_shoot, error_policy(SHOOT_CONTROLLER), ctx.clone())
        .for_each(drain(SHOOT_CONTROLLER));
    // The placer stops taking shoots on the token and lets the creates in flight end.
    let placer_run = crate::placer::run(
        ctx.clone(),
        tokio_stream::wrappers::UnboundedReceiverStream::new(for_placer).take_until(stop()),
        placer_gives_up,
        usize::from(syncs),
    );
    let entry_run = entry_controller
        .graceful_shutdown_on(stop())
        .run(reconcile_entry, error_policy(ENTRY_CONTROLLER), ctx.clone())
        .for_each(drain(ENTRY_CONTROLLER));
    let recount = initial_recount(ctx.clone(), counts_tx, shared.ready.clone(), token.clone());
    // The caches' watches run until the term ends.
    parts.spawn(until_cancelled(&token, profiles.fill));
    parts.spawn(until_cancelled(&token, seeds.fill));
    parts.spawn(until_cancelled(&token, shoots.fill));
    parts.spawn(until_cancelled(&token, buckets.fill));
    parts.spawn(until_cancelled(&token, entries.fill));
    parts.spawn(until_cancelled(&token, leases.fill));
    parts.spawn(profile_run);
    parts.spawn(seed_run);
    parts.spawn(bucket_run);
    parts.spawn(shoot_run);
    parts.spawn(placer_run);
    parts.spawn(entry_run);
    parts.spawn(recount);
    while let Some(part) = parts.join_next().await {
        if let Err(e) = part
            && e.is_panic()
        {
            std::panic::resume_unwind(e.into_panic());
        }
    }
    tracing::info!("garden controllers stopped");
}

/// The seed whose Lease changed in `change`, when the change matters
/// ([`SeedLeases::wakes_buckets`]: a Lease new or gone, or a seed renewing after it was
/// unready); `leases` is the caller's own record of the renewals seen.
fn seed_woken(
    leases: &mut SeedLeases,
    change: &crate::informers::Change<Lease>,
    ctx: &Context,
) -> Option<String> {
    let name = change.object.name_any();
    let seed = name.strip_prefix("seed-")?.to_string();
    leases
        .wakes_buckets(
            &name,
            renewed(&change.object),
            change.deleted,
            ctx.clock.now(),
            ctx.timings().ready_within,
        )
        .then_some(seed)
}

/// `part` until `token` is cancelled.
fn until_cancelled(
    token: &CancellationToken,
    part: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    token.clone().run_until_cancelled_owned(part).map(drop)
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
        // The counts come from the buckets and the entries: the shoots' list may still
        // be coming (placement starts with its first page).
        if ctx.stores.wait_ready_but_shoots().await.is_err() {
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
        // Ready once every cache is filled.
        if ctx.stores.wait_ready().await.is_ok() {
            ready_flag.set(true);
        }
    };
    tokio::select! {
        _ = work => {}
        _ = token.cancelled() => {}
    }
}
