//! The benchmarks (method and results: docs/benchmarks.md): one library entry, [`run`],
//! behind both `granary bench <name>` and the thin `cargo bench --bench <name>` targets.
//! Each benchmark measures Granary side by side with a peer doing the same work in the
//! same run (this machine is shared and noisy: ratios move much less than absolute
//! figures), returns its rows ([`table::Row`]: Granary's figure, the peer's, the ratio,
//! the goal) and its details, and the results go to `<target dir>/bench/<name>.json`.
//!
//! Benchmarks are not tests: CI runs each once at a tiny size so it cannot rot, and never
//! checks a time.

mod apiserver;
mod embedded;
mod garden;
mod migrate;
mod objects;
pub mod peers;
pub mod proxy;
pub mod s3ops;
mod seed_failover;
mod support;
pub mod table;
mod velero_archive;
mod velero_backup;
mod velero_queue;
mod velero_restore;
pub mod velero_scale;
mod velero_verify;

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Value, json};

use table::Row;

/// Every benchmark, by name.
pub const NAMES: &[&str] = &[
    "delete",
    "copy",
    "migrate",
    "garden",
    "embedded",
    "velero_archive",
    "velero_backup",
    "velero_queue",
    "velero_restore",
    "velero_verify",
    "seed_failover",
    "velero_scale",
];

/// Live heap readings from a counting global allocator (only a benchmark binary that
/// installs one can give them; `granary` itself does not).
#[derive(Clone, Copy, Debug)]
pub struct HeapProbe {
    pub live_bytes: fn() -> i64,
    pub live_blocks: fn() -> i64,
}

/// How to run a benchmark: the flags of `granary bench` (the `///` lines on them are
/// their help) and what the `cargo bench` targets and tests set besides.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct BenchOptions {
    /// The benchmark's main size (objects, shoots, items); its default otherwise.
    #[arg(long)]
    pub size: Option<usize>,
    /// How many rounds the garden benchmark runs, each on a fresh API server; it
    /// reports each measure's median round (default 3). The others run once.
    #[arg(long)]
    pub rounds: Option<usize>,
    // Not flags (`#[arg(skip)]`, left at their defaults by `granary bench`): set by the
    // `cargo bench` targets and the tests.
    /// Where `<name>.json` goes; default `<CARGO_TARGET_DIR or target>/bench`.
    #[arg(skip)]
    pub results_dir: Option<PathBuf>,
    /// The S3 emulator for `delete` and `copy`; default `$GRANARY_TEST_S3_ENDPOINT`.
    #[arg(skip)]
    pub s3_endpoint: Option<String>,
    #[arg(skip)]
    pub heap: Option<HeapProbe>,
    /// The `granary` executable the garden benchmark runs its processes with (`granary
    /// garden`, and its API server as `granary bench garden`); default: this process'
    /// own executable (`granary bench`), its API server re-run with this process'
    /// arguments.
    #[arg(skip)]
    pub granary_exe: Option<PathBuf>,
}

/// What one benchmark measured.
pub(crate) struct Outcome {
    pub title: String,
    /// The sizes used (objects, shoots, …).
    pub sizes: Value,
    pub rows: Vec<Row>,
    /// The benchmark's own JSON fields (kept as they were before the move).
    pub details: Value,
}

/// A finished benchmark: the JSON written and the table to print.
#[derive(Debug)]
pub struct Report {
    pub name: String,
    pub json: Value,
    pub table: String,
    pub path: PathBuf,
}

fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// `model name` of the first CPU in /proc/cpuinfo.
fn cpu_model() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()?
        .lines()
        .find(|l| l.starts_with("model name"))?
        .split_once(':')
        .map(|(_, m)| m.trim().to_string())
}

/// `<CARGO_TARGET_DIR or target>/bench`.
pub fn default_results_dir() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    PathBuf::from(target).join("bench")
}

/// Runs the benchmark `name`, writes `<results dir>/<name>.json` and returns it.
pub async fn run(name: &str, opts: &BenchOptions) -> anyhow::Result<Report> {
    if opts.size == Some(0) {
        anyhow::bail!("--size: must be at least 1");
    }
    if opts.rounds == Some(0) {
        anyhow::bail!("--rounds: must be at least 1");
    }
    let outcome = match name {
        "delete" => objects::delete(opts).await?,
        "copy" => objects::copy(opts).await?,
        "migrate" => migrate::run(opts).await?,
        "garden" => garden::run(opts, name).await?,
        "embedded" => embedded::run(opts).await?,
        "velero_archive" => velero_archive::run(opts)?,
        "velero_backup" => velero_backup::run(opts).await?,
        "velero_queue" => velero_queue::run(opts)?,
        "velero_restore" => velero_restore::run(opts).await?,
        "velero_verify" => velero_verify::run(opts).await?,
        "seed_failover" => seed_failover::run(opts).await?,
        "velero_scale" => velero_scale::run(opts).await?,
        other => anyhow::bail!(
            "no benchmark named {other:?}; the benchmarks are: {}",
            NAMES.join(", ")
        ),
    };
    let mut result = match outcome.details {
        Value::Object(m) => Value::Object(m),
        other => json!({ "details": other }),
    };
    result["bench"] = json!(name);
    result["title"] = json!(outcome.title);
    result["sizes"] = outcome.sizes;
    result["rows"] = Value::Array(outcome.rows.iter().map(Row::to_json).collect());
    result["machine"] = json!({
        "nproc": std::thread::available_parallelism().map(|p| p.get()).unwrap_or(0),
        "cpu": cpu_model(),
        "profile": profile(),
    });
    let dir = opts.results_dir.clone().unwrap_or_else(default_results_dir);
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating the results directory {}", dir.display()))?;
    let path = dir.join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(&result).context("results as JSON")? + "\n";
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    let table = table::render(
        &format!("{name}: {} ({} build)", outcome.title, profile()),
        &outcome.rows,
    );
    Ok(Report {
        name: name.to_string(),
        json: result,
        table,
        path,
    })
}

/// `granary bench <name|all> [--size N] [--json]` and the `cargo bench` targets: runs
/// each named benchmark on its own runtime (two workers, as this machine has) and prints
/// its table, or its JSON with `json`, then where the results went (stderr).
pub fn main_blocking(names: &[String], opts: &BenchOptions, json: bool) -> anyhow::Result<()> {
    // A benchmark's API server process (re-executed with the same arguments).
    if let Some(dir) = std::env::var_os(apiserver::CHILD_ENV) {
        return apiserver::serve(std::path::Path::new(&dir));
    }
    // The garden benchmark's restart peer (a list made by a new process).
    if let Some(kubeconfig) = std::env::var_os(garden::BARE_LIST_ENV) {
        return garden::bare_list_process(std::path::Path::new(&kubeconfig));
    }
    let names: Vec<&str> = if names.iter().any(|n| n == "all") {
        NAMES.to_vec()
    } else {
        names.iter().map(String::as_str).collect()
    };
    if names.is_empty() {
        anyhow::bail!("name a benchmark: {} or all", NAMES.join(", "));
    }
    if let Some(bad) = names.iter().find(|n| !NAMES.contains(n)) {
        anyhow::bail!(
            "no benchmark named {bad:?}; the benchmarks are: {}",
            NAMES.join(", ")
        );
    }
    for name in names {
        let runtime = support::runtime()?;
        let report = runtime
            .block_on(run(name, opts))
            .with_context(|| format!("benchmark {name}"))?;
        // The benchmark's servers and tasks end with its runtime.
        runtime.shutdown_timeout(std::time::Duration::from_secs(5));
        if json {
            println!("{}", report.json);
        } else {
            println!("{}", report.table);
        }
        eprintln!("{name}: results in {}", report.path.display());
    }
    Ok(())
}
