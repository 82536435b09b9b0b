//! Running the Velero-compatible controllers: [`run_controllers`] (what `granary seed`
//! and `granary server` both start) and [`run`], `granary server` itself — the
//! controllers alone on any cluster, no garden, as `velero server` is to Velero.

use super::context::VeleroContext;
use super::metrics::VeleroMetrics;
use super::settings::{
    CONTROLLER_BACKUP, CONTROLLER_BACKUP_DELETION, CONTROLLER_BACKUP_QUEUE,
    CONTROLLER_BACKUP_STORAGE_LOCATION, CONTROLLER_BACKUP_SYNC, CONTROLLER_BACKUP_VERIFICATION,
    CONTROLLER_DOWNLOAD_REQUEST, CONTROLLER_GC, CONTROLLER_NON_ADMIN, CONTROLLER_RESTORE,
    CONTROLLER_SCHEDULE, CONTROLLER_SERVER_STATUS_REQUEST, ServerConfiguration, VeleroFlags,
    unknown_controllers,
};
use super::{
    backup_controller, backup_deletion, backup_sync, backup_verification, download_controller, gc,
    integrity, locations, nonadmin, queue_controller, restore_controller, schedules, server_status,
};
use futures::future::BoxFuture;

/// How long the controllers wait for the integrity keys before starting anyway (a backup
/// that finishes before they arrive fails and says why; sync waits for them).
const KEYS_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
use granary_providers::StoreOptions;
use granary_runtime::clock::Clock;
use granary_runtime::config::{ConfigError, LeaderElection, Override, load};
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

/// One controller [`run_controllers`] starts: its name (as `--disable-controllers`
/// takes it), what it does (`granary server --help` prints it), and how it starts.
pub struct Controller {
    pub name: &'static str,
    pub help: &'static str,
    start: fn(Arc<VeleroContext>) -> BoxFuture<'static, ()>,
}

/// Every controller [`run_controllers`] starts, in start order: the one list the
/// controllers are started from and `granary server --help` describes, so neither can
/// name a controller the other does not.
pub static SERVER_CONTROLLERS: &[Controller] = &[
    Controller {
        name: CONTROLLER_BACKUP_STORAGE_LOCATION,
        help: "validates BackupStorageLocations (Available, or Unavailable and why) every \
               storeValidationFrequency",
        start: |c| Box::pin(locations::run(c)),
    },
    Controller {
        name: CONTROLLER_BACKUP_QUEUE,
        help: "queues new Backups (Queued, queuePosition) and starts them, up to \
               concurrentBackups at once",
        start: |c| Box::pin(queue_controller::run(c)),
    },
    Controller {
        name: CONTROLLER_BACKUP,
        help: "prepares and validates a started Backup as Velero does, and runs it into \
               its location",
        start: |c| Box::pin(backup_controller::run(c)),
    },
    Controller {
        name: CONTROLLER_BACKUP_DELETION,
        help: "processes DeleteBackupRequests: a backup's data, its restores and the Backup",
        start: |c| Box::pin(backup_deletion::run(c)),
    },
    Controller {
        name: CONTROLLER_BACKUP_SYNC,
        help: "brings backups found in object storage into the cluster, and removes those \
               gone from it",
        start: |c| Box::pin(backup_sync::run(c)),
    },
    Controller {
        name: CONTROLLER_SCHEDULE,
        help: "creates Backups from Schedules when they are due",
        start: |c| Box::pin(schedules::run(c)),
    },
    Controller {
        name: CONTROLLER_RESTORE,
        help: "validates, queues (concurrentRestores) and runs Restores",
        start: |c| Box::pin(restore_controller::run(c)),
    },
    Controller {
        name: CONTROLLER_GC,
        help: "asks for the deletion of expired backups every garbageCollectionFrequency",
        start: |c| Box::pin(gc::run(c)),
    },
    Controller {
        name: CONTROLLER_DOWNLOAD_REQUEST,
        help: "answers DownloadRequests with download URLs, and deletes them when expired",
        start: |c| Box::pin(download_controller::run(c)),
    },
    Controller {
        name: CONTROLLER_SERVER_STATUS_REQUEST,
        help: "answers ServerStatusRequests with the server's version and plugins \
               (velero version, velero plugin get)",
        start: |c| Box::pin(server_status::run(c)),
    },
    Controller {
        name: CONTROLLER_BACKUP_VERIFICATION,
        help: "re-checks stored backups against their integrity records, and rehearses \
               restores a Schedule asks for",
        start: |c| Box::pin(backup_verification::run(c)),
    },
    Controller {
        name: CONTROLLER_NON_ADMIN,
        help: "OADP's non-admin backups, restores, locations and download requests (only \
               with velero.nonAdmin.enable)",
        start: |c| Box::pin(nonadmin::run(c)),
    },
];

/// The help of `--disable-controllers`: every controller the server runs, one a line.
pub fn controllers_help() -> String {
    let mut out = String::from(
        "Controllers to switch off (comma-separated). The server runs these, and always \
         keeps the integrity signing keys:",
    );
    for c in SERVER_CONTROLLERS {
        out.push_str(&format!("\n  {}: {}", c.name, c.help));
    }
    out
}

/// Runs every enabled Velero-compatible controller until the future is dropped (the
/// non-admin ones only when `nonAdmin.enable` is on).
pub async fn run_controllers(ctx: Arc<VeleroContext>, disabled: Vec<String>) {
    let enabled = |name: &str| !disabled.iter().any(|d| d == name);
    let mut tasks = tokio::task::JoinSet::new();
    // The keys first, so the first backup to finish finds one to sign with.
    tasks.spawn(integrity::run(ctx.clone()));
    integrity::wait_for_keys(&ctx.keys, KEYS_WAIT).await;
    for c in SERVER_CONTROLLERS {
        if c.name == CONTROLLER_NON_ADMIN && !ctx.settings.non_admin.enable {
            continue;
        }
        if enabled(c.name) {
            tasks.spawn((c.start)(ctx.clone()));
        }
    }
    while let Some(result) = tasks.join_next().await {
        if let Err(e) = result {
            tracing::error!(error = %e, "velero controller task stopped");
        }
    }
}

/// The Lease in the Velero namespace that the Velero controllers of that namespace run
/// under, in `granary seed` and `granary server` alike: one namespace, one active set.
pub const VELERO_LEASE: &str = "granary-velero";

/// Who holds [`VELERO_LEASE`]: `<kind>/<name>` (`granary-seed/<seed>`,
/// `granary-server/<host>`), and a unique suffix when replicas compete for it (leader
/// election on). Without one, a restarted process takes its own Lease back at once.
pub fn lease_identity(kind: &str, name: &str, unique: bool) -> String {
    if unique {
        format!("{kind}/{name}-{}", uuid::Uuid::new_v4().simple())
    } else {
        format!("{kind}/{name}")
    }
}

/// The election for [`VELERO_LEASE`] in the Velero namespace with the timings of
/// `election`: run it with [`run_as_leader`] on `Api::<Lease>::namespaced(client,
/// velero_namespace)`. While another process holds the Lease the candidate stands by and
/// logs who holds it.
pub fn namespace_election(
    identity: String,
    election: &LeaderElection,
    labels: BTreeMap<String, String>,
) -> ElectionSettings {
    ElectionSettings {
        lease_name: VELERO_LEASE.into(),
        identity,
        lease_duration: election.lease_duration.0,
        renew_deadline: election.renew_deadline.0,
        retry_period: election.retry_period.0,
        labels,
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
    // The help names every controller the server runs ([`controllers_help`]).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...", help = controllers_help())]
    pub disable_controllers: Vec<String>,
    #[command(flatten)]
    pub velero: VeleroFlags,
    /// Compete for the Velero namespace's Lease `granary-velero` with a unique identity, so
    /// one of several replicas runs (default). Off: an identity fixed per host. Either way
    /// the controllers run only while holding that Lease, which `granary seed` takes for
    /// its Velero namespace too: beside a seed (or another server) on the same
    /// namespace, the server stands by and says who holds it.
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

/// `granary server`: loads the configuration, then runs the controllers under the
/// Velero namespace's Lease [`VELERO_LEASE`] (shared with `granary seed`) until
/// SIGINT/SIGTERM.
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
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "granary-server".to_string());
    let identity = lease_identity("granary-server", &host, election.enabled);
    tracing::info!(lease = VELERO_LEASE, namespace = %namespace, identity = %identity, "granary server: running the Velero controllers while holding the namespace's Lease");
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let settings = namespace_election(identity, election, BTreeMap::new());
    run_as_leader(api, settings, Clock::system(), work, async {
        let s = signals.wait().await;
        tracing::info!(signal = s, "granary server: shutting down");
    })
    .await?;
    health.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{CONTROLLER_DEFAULT_LOCATION, CONTROLLER_SIBLING_LOCATIONS, CONTROLLERS};

    #[test]
    fn the_server_starts_every_controller_but_the_seed_s_own_and_describes_each() {
        let started: Vec<&str> = SERVER_CONTROLLERS.iter().map(|c| c.name).collect();
        let expected: Vec<&str> = CONTROLLERS
            .iter()
            .copied()
            .filter(|c| ![CONTROLLER_DEFAULT_LOCATION, CONTROLLER_SIBLING_LOCATIONS].contains(c))
            .collect();
        let mut sorted = started.clone();
        sorted.sort();
        let mut want = expected.clone();
        want.sort();
        assert_eq!(sorted, want);
        let help = controllers_help();
        for name in started {
            assert!(help.contains(&format!("\n  {name}: ")), "{help}");
        }
    }

    #[test]
    fn lease_identities() {
        assert_eq!(lease_identity("granary-seed", "a", false), "granary-seed/a");
        let unique = lease_identity("granary-server", "h", true);
        assert!(unique.starts_with("granary-server/h-"), "{unique}");
        assert_ne!(unique, lease_identity("granary-server", "h", true));
    }
}
