//! `granary dev`: the whole landscape on one machine in one command. An
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

use clap::builder::TypedValueParser as _;
use tokio_util::sync::CancellationToken;

use compose::{Plan, Running};
use granary_runtime::clock::Clock;
use granary_runtime::duration::format_go_duration;
use granary_runtime::logging::{self, LogFormat};
use provider::{BackupStore, StoreArgs};

/// Seeds and shoots of the sample landscape when `--seeds`/`--shoots` are not given.
pub const DEFAULT_SEEDS: usize = 3;
pub const DEFAULT_SHOOTS: usize = 7;

/// Flags of `granary dev`; the `///` lines on the fields are their help.
#[derive(Clone, Debug, clap::Args)]
pub struct DevOptions {
    /// Where the API servers' state, the local buckets, kubeconfigs and logs live.
    #[arg(long, value_name = "DIR", default_value = ".granary")]
    pub data_dir: PathBuf,
    /// How long a deleted shoot's backups are kept (e.g. 30s, 2m, 1h).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    pub grace_period: Duration,
    /// Start from a clean landscape (removes what `granary dev` keeps in the data dir).
    #[arg(long)]
    pub reset: bool,
    // `None`: the sample's count. Only a fresh landscape is sized.
    /// Seeds of a new landscape (default 3: two in one region, one in another).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..).map(usize::from))]
    pub seeds: Option<usize>,
    /// Shoots of a new landscape (default 7).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).map(usize::from))]
    pub shoots: Option<usize>,
    /// BackupEntries per bucket before a pool gets another shard.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub quota: u32,
    #[command(flatten)]
    pub store: StoreArgs,
    // `None`: 127.0.0.1:8085, or any free port when that is taken.
    /// Where /healthz, /readyz and /metrics are served (default 127.0.0.1:8085, or a
    /// free port when that is taken).
    #[arg(long, value_name = "ADDR")]
    pub metrics_bind_address: Option<String>,
    // Not flags of `granary dev` but the global `--log-format`/`--log-level`, which
    // `granary dev` applies itself (to a file while its view owns the terminal):
    // `#[arg(skip)]`, filled in by `main.rs` from the top-level flags.
    #[arg(skip)]
    pub log_format: LogFormat,
    #[arg(skip)]
    pub log_level: String,
}

/// `--grace-period`: a duration such as `30s`, `2m` or `1h`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    granary_runtime::duration::parse_duration(text).map_err(|e| e.to_string())
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
    // Events from before this start were an earlier run's news (the view shows none).
    let started = Clock::system().now();
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
        started,
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
