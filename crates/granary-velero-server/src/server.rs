//! Running the Velero-compatible controllers: [`run_controllers`] (what `granary seed`
//! and `granary server` both start) and [`run`], `granary server` itself — the
//! controllers alone on any cluster, no garden, as `velero server` is to Velero.

use super::context::VeleroContext;
use super::metrics::VeleroMetrics;
use super::settings::{
    CONTROLLER_BACKUP, CONTROLLER_BACKUP_DELETION, CONTROLLER_BACKUP_QUEUE,
    CONTROLLER_BACKUP_STORAGE_LOCATION, CONTROLLER_BACKUP_SYNC, CONTROLLER_BACKUP_VERIFICATION,
    CONTROLLER_DOWNLOAD_REQUEST, CONTROLLER_GC, CONTROLLER_NON_ADMIN, CONTROLLER_RESTORE,
    CONTROLLER_SCHEDULE, ServerConfiguration, VeleroFlags, unknown_controllers,
};
use super::{
    backup_controller, backup_deletion, backup_sync, backup_verification, download_controller, gc,
    integrity, locations, nonadmin, queue_controller, restore_controller, schedules,
};

/// How long the controllers wait for the integrity keys before starting anyway (a backup
/// that finishes before they arrive fails and says why; sync waits for them).
const KEYS_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
use granary_providers::StoreOptions;
use granary_runtime::clock::Clock;
use granary_runtime::config::{ConfigError, Override, load};
use granary_runtime::health::{HealthError, HealthServer, ReadinessFlag};
use granary_runtime::leader::{ElectionSettings, run_as_leader};
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_runtime::shutdown::ShutdownSignals;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Runs every enabled Velero-compatible controller until the future is dropped (the
/// non-admin ones only when `nonAdmin.enable` is on).
pub async fn run_controllers(ctx: Arc<VeleroContext>, disabled: Vec<String>) {
    let enabled = |name: &str| !disabled.iter().any(|d| d == name);
    let mut tasks = tokio::task::JoinSet::new();
    // The keys first, so the first backup to finish finds one to sign with.
    tasks.spawn(integrity::run(ctx.clone()));
    integrity::wait_for_keys(&ctx.keys, KEYS_WAIT).await;
    if enabled(CONTROLLER_BACKUP_STORAGE_LOCATION) {
        tasks.spawn(locations::run(ctx.clone()));
    }
    if enabled(CONTROLLER_BACKUP_QUEUE) {
        tasks.spawn(queue_controller::run(ctx.clone()));
    }
    if enabled(CONTROLLER_BACKUP) {
        tasks.spawn(backup_controller::run(ctx.clone()));
    }
    if enabled(CONTROLLER_BACKUP_DELETION) {
        tasks.spawn(backup_deletion::run(ctx.clone()));
    }
    if enabled(CONTROLLER_BACKUP_SYNC) {
        tasks.spawn(backup_sync::run(ctx.clone()));
    }
    if enabled(CONTROLLER_SCHEDULE) {
        tasks.spawn(schedules::run(ctx.clone()));
    }
    if enabled(CONTROLLER_RESTORE) {
        tasks.spawn(restore_controller::run(ctx.clone()));
    }
    if enabled(CONTROLLER_GC) {
        tasks.spawn(gc::run(ctx.clone()));
    }
    if enabled(CONTROLLER_DOWNLOAD_REQUEST) {
        tasks.spawn(download_controller::run(ctx.clone()));
    }
    if enabled(CONTROLLER_BACKUP_VERIFICATION) {
        tasks.spawn(backup_verification::run(ctx.clone()));
    }
    if ctx.settings.non_admin.enable && enabled(CONTROLLER_NON_ADMIN) {
        tasks.spawn(nonadmin::run(ctx.clone()));
    }
    while let Some(result) = tasks.join_next().await {
        if let Err(e) = result {
            tracing::error!(error = %e, "velero controller task stopped");
        }
    }
}

/// Flags of `granary server`; each overrides the configuration file (Velero's flag names).
/// The `///` lines on the fields are their help.
#[derive(Debug, Default, clap::Args)]
pub struct ServerOptions {
    /// The cluster's kubeconfig (default: in-cluster, else KUBECONFIG / ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// ServerConfiguration file (YAML; its `velero:` section as in SeedConfiguration).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Root directory of the `local` object store (for locations with provider `local`).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address of /metrics, /healthz and /readyz (default `:8085`).
    #[arg(long, alias = "metrics-address", value_name = "ADDR")]
    pub metrics_bind_address: Option<String>,
    /// Controllers to switch off: backup-storage-location, backup-queue, backup.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub disable_controllers: Vec<String>,
    #[command(flatten)]
    pub velero: VeleroFlags,
    /// Run only while holding the leader Lease `granary-server`.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: Option<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Health(#[from] HealthError),
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
}

fn overrides(opts: &ServerOptions) -> Vec<Override> {
    let mut o = opts.velero.overrides();
    if let Some(a) = &opts.metrics_bind_address {
        o.push(Override::new("server.metricsBindAddress", a.clone()));
    }
    if let Some(l) = opts.leader_elect {
        o.push(Override::new("leaderElection.enabled", l));
    }
    o
}

async fn client(path: Option<&PathBuf>) -> Result<Client, ServerError> {
    let err = |path: String, message: String| ServerError::Kubeconfig { path, message };
    match path {
        None => Client::try_default()
            .await
            .map_err(|e| err("(in-cluster or KUBECONFIG)".into(), e.to_string())),
        Some(p) => {
            let shown = p.display().to_string();
            let kc = Kubeconfig::read_from(p).map_err(|e| err(shown.clone(), e.to_string()))?;
            let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| err(shown.clone(), e.to_string()))?;
            Client::try_from(config).map_err(|e| err(shown, e.to_string()))
        }
    }
}

/// `granary server`: loads the configuration, then runs the controllers (under the
/// leader Lease `granary-server` in the Velero namespace when leader election is on)
/// until SIGINT/SIGTERM.
pub async fn run(opts: ServerOptions) -> Result<(), ServerError> {
    let signals = ShutdownSignals::install();
    let config: ServerConfiguration = load(opts.config.as_deref(), &overrides(&opts))?;
    let disabled: Vec<String> = opts
        .disable_controllers
        .iter()
        .flat_map(|s| s.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let unknown = unknown_controllers(&disabled, &[]);
    if !unknown.is_empty() {
        return Err(ServerError::Usage(format!(
            "--disable-controllers: unknown controller(s) {} (known: {})",
            unknown.join(", "),
            super::settings::CONTROLLERS.join(", ")
        )));
    }
    let client = client(opts.kubeconfig.as_ref()).await?;
    let namespace = config.velero.namespace.clone();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(&namespace).await?.is_none() {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(namespace.clone());
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    let metrics = Metrics::new();
    let ready = ReadinessFlag::default();
    let health = HealthServer::start(
        &config.server.metrics_bind_address,
        metrics.clone(),
        ready.clone(),
    )
    .await?;
    tracing::info!(address = %health.local_addr, namespace = %namespace, "granary server: serving /metrics, /healthz, /readyz");
    let ctx = Arc::new(VeleroContext::new(
        client.clone(),
        config.velero.clone(),
        StoreOptions {
            local_root: opts.data_dir.clone(),
            ..StoreOptions::default()
        },
        Clock::system(),
        VeleroMetrics::new(&metrics),
        ObjectSelector::new(None),
    ));
    let work = {
        let ready = ready.clone();
        move || {
            let ctx = ctx.clone();
            let disabled = disabled.clone();
            let ready = ready.clone();
            async move {
                ready.set(true);
                run_controllers(ctx, disabled).await;
            }
        }
    };
    let election = &config.leader_election;
    if election.enabled {
        let settings = ElectionSettings {
            lease_name: "granary-server".into(),
            identity: format!("granary-server-{}", uuid::Uuid::new_v4().simple()),
            lease_duration: election.lease_duration.0,
            renew_deadline: election.renew_deadline.0,
            retry_period: election.retry_period.0,
            labels: BTreeMap::new(),
        };
        let api: Api<Lease> = Api::namespaced(client, &namespace);
        run_as_leader(api, settings, Clock::system(), work, async {
            let s = signals.wait().await;
            tracing::info!(signal = s, "granary server: shutting down");
        })
        .await?;
    } else {
        let work = work;
        tokio::select! {
            _ = work() => {}
            s = signals.wait() => tracing::info!(signal = s, "granary server: shutting down"),
        }
    }
    health.shutdown().await;
    Ok(())
}
