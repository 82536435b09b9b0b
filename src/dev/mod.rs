//! `granary dev`: the whole landscape on one machine in one command (DESIGN §1). An
//! embedded API server for the garden and one per seed, the CRDs, the sample landscape
//! of `deploy/examples/landscape/`, the garden controllers and a seed agent per seed
//! in-process, the `local` object store under the data directory (or a real provider),
//! one health/metrics server, kubeconfigs for kubectl, and a live view.
//!
//! The parts: [`landscape`] (the sample, sized and pointed at the store), [`provider`]
//! (the store flags), [`compose`] (bringing it all up and down), [`metrics`] (one
//! `/metrics` for every component), [`view`] (the screen, pure) and [`live`] (feeding
//! the view from watches). [`run`] ties them together for the command line.

pub mod backups_view;
pub mod compose;
pub mod control_planes;
pub mod landscape;
pub mod live;
pub mod metrics;
pub mod owner;
pub mod provider;
pub mod view;

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use compose::{Plan, Running};
use granary_runtime::clock::Clock;
use granary_runtime::duration::format_go_duration;
use granary_runtime::logging::{self, LogFormat};
use provider::{BackupStore, StoreArgs};

/// Seeds and shoots of the sample landscape when `--seeds`/`--shoots` are not given.
pub const DEFAULT_SEEDS: usize = 3;
pub const DEFAULT_SHOOTS: usize = 7;

/// The command line of `granary dev`, as parsed by `main.rs`.
#[derive(Clone, Debug)]
pub struct DevOptions {
    pub data_dir: PathBuf,
    pub grace_period: Duration,
    pub reset: bool,
    /// `None`: the sample's count. Only a fresh landscape is sized.
    pub seeds: Option<usize>,
    pub shoots: Option<usize>,
    /// Entries per bucket before a pool gets another shard.
    pub quota: u32,
    pub store: StoreArgs,
    /// `None`: 127.0.0.1:8085, or any free port when that is taken.
    pub metrics_bind_address: Option<String>,
    pub log_format: LogFormat,
    pub log_level: String,
}

/// Why `granary dev` could not run.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error(transparent)]
    Store(#[from] provider::StoreArgsError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("embedded API server: {0}")]
    Embedded(#[from] granary_apiserver::EmbeddedError),
    #[error(transparent)]
    Landscape(#[from] landscape::LandscapeError),
    #[error("{what}: {source}")]
    Kube { what: String, source: kube::Error },
    #[error("{0}")]
    Start(String),
    #[error(transparent)]
    Health(#[from] granary_runtime::health::HealthError),
    #[error(transparent)]
    Logging(#[from] logging::LoggingError),
}

/// Runs `granary dev` until SIGINT/SIGTERM.
pub fn run(opts: DevOptions) -> Result<(), DevError> {
    let store = BackupStore::from_args(&opts.store, |k| std::env::var(k).ok())?;
    let terminal = std::io::stdout().is_terminal();
    compose::private_dir(&opts.data_dir)?;
    // Held until the process ends: a second `granary dev` on these files would start a
    // second landscape on them and rewrite the first one's kubeconfigs.
    let _lock = compose::lock_data_dir(&opts.data_dir)?;
    if opts.reset {
        compose::reset(&opts.data_dir)?;
        compose::private_dir(&opts.data_dir)?;
    }
    let log_file = opts.data_dir.join("granary.log");
    if terminal {
        init_file_logging(&log_file, opts.log_format, &opts.log_level)?;
    } else {
        logging::init(opts.log_format, &opts.log_level)?;
    }
    let plan = Plan {
        data_dir: opts.data_dir.clone(),
        grace_period: opts.grace_period,
        seeds: opts.seeds.unwrap_or(DEFAULT_SEEDS),
        shoots: opts.shoots.unwrap_or(DEFAULT_SHOOTS),
        quota: opts.quota,
        store,
        metrics_address: opts
            .metrics_bind_address
            .clone()
            .unwrap_or_else(|| "127.0.0.1:8085".into()),
        metrics_fallback: opts.metrics_bind_address.is_none(),
    };
    let sized = opts.seeds.is_some() || opts.shoots.is_some() || opts.store.provider.is_some();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| DevError::Io {
            what: "starting the async runtime".into(),
            source,
        })?
        .block_on(serve(plan, terminal, sized, terminal.then_some(log_file)))
}

/// Logs to a file while the live view owns the terminal.
fn init_file_logging(
    path: &std::path::Path,
    format: LogFormat,
    level: &str,
) -> Result<(), DevError> {
    let file = compose::private_file(path, true)?;
    logging::init_with(format, level, false, std::sync::Mutex::new(file))?;
    Ok(())
}

async fn serve(
    plan: Plan,
    terminal: bool,
    sized: bool,
    log_file: Option<PathBuf>,
) -> Result<(), DevError> {
    let running = compose::start(&plan).await?;
    let mut header = banner(&plan, &running, log_file.as_deref());
    if !running.created && sized {
        let _ = writeln!(
            header,
            "note: {} already holds a landscape; --seeds, --shoots and --provider shape a new one (add --reset)",
            plan.data_dir.display()
        );
    }
    if !terminal {
        print!("{header}");
    }
    let stop = CancellationToken::new();
    let view = live::LiveView {
        terminal,
        header,
        limit: Some(plan.quota),
        clock: Clock::system(),
        seeds: running
            .seeds
            .iter()
            .map(|s| (s.name.clone(), s.client.clone()))
            .collect(),
        velero_namespace: running.velero.namespace.clone(),
        default_location: running.velero.default_location.name.clone(),
    };
    let view_task = tokio::spawn(view.run(running.garden_client.clone(), stop.clone()));
    shutdown_signal().await;
    stop.cancel();
    let _ = view_task.await;
    println!("\ngranary dev: shutting down");
    running.shutdown().await;
    println!(
        "granary dev: stopped; the landscape is kept in {} (--reset starts clean)",
        plan.data_dir.display()
    );
    Ok(())
}

/// What runs where, how to reach it with kubectl, and what to try.
fn banner(plan: &Plan, running: &Running, log_file: Option<&std::path::Path>) -> String {
    let garden_kc = plan.garden_kubeconfig();
    let kc = garden_kc.display();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "granary dev: garden at {} with {} seed(s); buckets in {}; deletion grace period {}",
        running.garden.url(),
        running.seeds.len(),
        plan.store.describe(&plan.buckets_dir()),
        format_go_duration(plan.grace_period),
    );
    let _ = writeln!(out, "  garden kubeconfig: {kc}");
    for seed in &running.seeds {
        let _ = writeln!(
            out,
            "  seed {} at {}: {}",
            seed.name,
            seed.server.url(),
            plan.seed_kubeconfig(&seed.name).display()
        );
    }
    let owner_kc = plan.owner_kubeconfig();
    if let Some(seed) = &running.owner_seed {
        let _ = writeln!(
            out,
            "  namespace owner {} of {} on seed {seed} (self-service backups): {}",
            owner::OWNER_USER,
            owner::OWNER_NAMESPACE,
            owner_kc.display()
        );
    }
    let addr = running.health.local_addr;
    let _ = writeln!(
        out,
        "  health and metrics: http://{addr}/healthz /readyz /metrics"
    );
    if let Some(log) = log_file {
        let _ = writeln!(out, "  logs: {}", log.display());
    }
    let _ = writeln!(out, "try:");
    let _ = writeln!(
        out,
        "  kubectl --kubeconfig {kc} get backupbuckets,backupentries -A"
    );
    let _ = writeln!(
        out,
        "  kubectl --kubeconfig {kc} apply -f deploy/examples/landscape/try/shoot.yaml"
    );
    let _ = writeln!(
        out,
        "  kubectl --kubeconfig {kc} -n garden-dev delete shoot try-me"
    );
    if running.owner_seed.is_some() {
        let _ = writeln!(
            out,
            "  kubectl --kubeconfig {} get nonadminbackups,nonadminrestores   (README: Self-service backups)",
            owner_kc.display()
        );
    }
    let _ = writeln!(
        out,
        "Ctrl-C stops; the state stays in {}.",
        plan.data_dir.display()
    );
    out
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
