//! The `granary` command line: parses arguments, sets up logging, and calls into the
//! library. Nothing else lives here: each command's flags are defined once, on the
//! options type the library takes (`#[derive(clap::Args)]` there); this file only
//! gathers them into [`Command`] and dispatches.

use anyhow::Context;
use clap::{Parser, Subcommand};
use granary_api::crds::{self, Side};
use granary_runtime::{failpoints, logging};
use std::path::PathBuf;
use std::process::ExitCode;

mod cli;
#[cfg(test)]
mod config_reference;
mod dev;

/// Backup infrastructure for Gardener-style Kubernetes landscapes.
#[derive(Parser, Debug)]
#[command(name = "granary", version, about, long_about = None)]
struct Cli {
    /// Log format: text for people, json for log collectors.
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
    /// Log level or tracing filter (e.g. `info`, `granary=debug,kube=warn`); RUST_LOG wins.
    #[arg(long, global = true, default_value = "info")]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the CustomResourceDefinitions of every kind Granary serves, as YAML.
    Crds {
        /// Only the CRDs installed on this side (garden: core.gardener.cloud; seed:
        /// extensions.gardener.cloud, velero.io, oadp.openshift.io).
        #[arg(long, value_enum)]
        side: Option<Side>,
        /// Instead of printing, write one file per CRD into DIR/<side>/crds/ (e.g.
        /// `--write deploy`), removing CRD files that no longer exist.
        #[arg(long, value_name = "DIR")]
        write: Option<PathBuf>,
    },
    /// Run the seed agent: mirror the garden's BackupBuckets/BackupEntries assigned to
    /// this seed and run the extension controllers against the object stores.
    Seed(granary_seed::SeedOptions),
    /// Run the garden-side controllers: CloudProfile backup pools, BackupEntry placement
    /// with bucket quota sharding, bucket → seed assignment, deletion guards.
    Garden(granary_garden::GardenOptions),
    /// Move entries between buckets: legacy per-shoot buckets into shared ones, or
    /// rebalance; register legacy buckets; show migrations in flight or back out of one.
    Migrate {
        #[command(flatten)]
        options: granary_migrate::cli::MigrateOptions,
        #[command(subcommand)]
        command: granary_migrate::cli::MigrateCommand,
    },
    /// The whole landscape on this machine: embedded garden and seed API servers, the
    /// sample landscape, all controllers, buckets under the data directory, kubeconfigs
    /// for kubectl, and a live view. Ctrl-C stops it; the state is kept.
    Dev(dev::DevOptions),
    /// Run the Velero-compatible controllers alone on any cluster, no garden (what
    /// `velero server` is to Velero): every one `--disable-controllers` lists.
    Server(granary_velero_server::server::ServerOptions),
    /// Look into a Velero backup tarball (Velero's own or Granary's).
    Archive {
        #[command(subcommand)]
        command: ArchiveCommand,
    },
    /// Velero-style backups: create, get, describe, logs, download, verify, delete (the
    /// controllers of `granary seed` or `granary server` take them).
    Backup {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        command: cli::backup::BackupCommand,
    },
    /// Velero-style restores: create, get, describe, logs, delete (the controllers of
    /// `granary seed` or `granary server` run them).
    Restore {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        command: cli::restore::RestoreCommand,
    },
    /// Integrity signing keys: list, rotate, remove (`-n garden` against the garden for
    /// the landscape's).
    Integrity {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        command: cli::integrity::IntegrityCommand,
    },
    /// Velero-style schedules: create, get, describe, pause, unpause, delete.
    Schedule {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        command: cli::schedule::ScheduleCommand,
    },
    /// The landscape's backup health: shoots without a Succeeded entry and why, failing
    /// buckets and pools near quota, Unavailable backup locations, overdue schedules,
    /// recent failures; exit code 1 when something needs attention.
    Status(cli::status::StatusOptions),
    /// Velero-style backup storage locations: create, get, set, delete.
    BackupLocation {
        #[command(flatten)]
        target: cli::Target,
        #[command(subcommand)]
        command: cli::location::LocationCommand,
    },
    /// Run a benchmark side by side with its peer (rclone, aws-cli, kubectl, a bare
    /// client) and write <target dir>/bench/<name>.json; scripts/bench.sh installs the
    /// peers and starts the S3 emulator.
    Bench {
        /// delete, copy, garden, embedded, velero_archive, velero_backup, velero_queue,
        /// velero_restore, velero_verify, or all.
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        options: granary_bench::BenchOptions,
        /// Print the results as JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ArchiveCommand {
    /// Items per resource and namespace, versions, the manifest and the format version.
    /// A `manifest.json.gz` next to FILE is read and compared too.
    Inspect {
        /// The backup tarball (`<name>.tar.gz`).
        file: PathBuf,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
        output: OutputFormat,
        #[command(flatten)]
        limits: granary_velero::archive::ArchiveLimits,
    },
    /// Check format and safety (path escapes, links, sizes, compression bombs, memory);
    /// exits non-zero with the reason when the archive is refused or invalid.
    Verify {
        /// The backup tarball (`<name>.tar.gz`).
        file: PathBuf,
        #[command(flatten)]
        limits: granary_velero::archive::ArchiveLimits,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OutputFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_error(e),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", said_once(&err));
            ExitCode::FAILURE
        }
    }
}

/// Exits as clap does for its usage errors, except for a `<namespace>/<name>` value that
/// is not one (`granary migrate entry|abandon`, `--secret-ref`): that is said as a failed
/// command is, `error: …` and exit code 1, as before those values were split by clap.
fn parse_error(e: clap::Error) -> ExitCode {
    use std::error::Error as _;
    match e
        .source()
        .and_then(|s| s.downcast_ref::<granary_migrate::cli::NotNamespacedName>())
    {
        Some(bad) => {
            eprintln!("error: {bad}");
            ExitCode::FAILURE
        }
        None => e.exit(),
    }
}

/// The error and its causes on one line, each said once: a cause whose text its
/// wrapper already quotes (`{path}: {source}` with `source` also the cause) is not
/// repeated.
fn said_once(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// `text` ending in exactly one newline (a terminal prompt must not follow the output on
/// its last line).
fn with_newline(mut text: String) -> String {
    while text.ends_with('\n') {
        text.pop();
    }
    text.push('\n');
    text
}

/// Writes `text` to stdout; a reader that went away (`granary crds | head -1`) ends the
/// output quietly, as for any Unix tool, instead of a panic.
fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).context("writing to stdout"),
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Command::Dev(mut opts) = cli.command {
        // `granary dev` sets up its own logging: to a file while its view owns the terminal.
        failpoints::init_from_env()?;
        opts.log_format = cli.log_format;
        opts.log_level = cli.log_level;
        return dev::run(opts).context("granary dev");
    }
    // The Velero-style CLI reports its own errors to people; library logs at the default
    // level (kube's connection retries above all) would only draw over its output.
    let quiet = matches!(
        cli.command,
        Command::Backup { .. }
            | Command::BackupLocation { .. }
            | Command::Restore { .. }
            | Command::Integrity { .. }
            | Command::Schedule { .. }
            | Command::Status(_)
            | Command::Bench { .. }
    ) && cli.log_level == "info";
    let level = if quiet {
        "warn,kube_client=off"
    } else {
        &cli.log_level
    };
    logging::init(cli.log_format, level)?;
    failpoints::init_from_env()?;
    match cli.command {
        Command::Crds { side, write: None } => {
            let docs: Vec<String> = crds::crds(side).iter().map(crds::to_yaml).collect();
            print_out(&docs.join("---\n"))
        }
        Command::Crds {
            side,
            write: Some(dir),
        } => write_crds(side, &dir),
        Command::Archive { command } => archive(command),
        Command::Backup { target, command } => cli::block_on(cli::backup::run(&target, command)),
        Command::Status(options) => cli::block_on(cli::status::run(options)),
        Command::BackupLocation { target, command } => {
            cli::block_on(cli::location::run(&target, command))
        }
        Command::Restore { target, command } => cli::block_on(cli::restore::run(&target, command)),
        Command::Integrity { target, command } => {
            cli::block_on(cli::integrity::run(&target, command))
        }
        Command::Schedule { target, command } => {
            cli::block_on(cli::schedule::run(&target, command))
        }
        Command::Seed(opts) => tokio::runtime::Runtime::new()
            .context("starting the async runtime")?
            .block_on(granary_seed::run(opts))
            .context("granary seed"),
        Command::Migrate { options, command } => {
            // A usage mistake clap does not catch is said on its own, not as a failure
            // of `granary migrate`.
            command.check()?;
            tokio::runtime::Runtime::new()
                .context("starting the async runtime")?
                .block_on(granary_migrate::cli::run(options, command))
                .context("granary migrate")
        }
        Command::Bench {
            names,
            options,
            json,
        } => granary_bench::main_blocking(&names, &options, json),
        Command::Server(opts) => tokio::runtime::Runtime::new()
            .context("starting the async runtime")?
            .block_on(granary_velero_server::server::run(opts))
            .context("granary server"),
        Command::Dev(_) => unreachable!("handled above"),
        Command::Garden(opts) => Ok(granary_garden::run(opts)?),
    }
}

/// Names the flag that raises the memory budget when an archive needs more.
fn over_budget_hint(e: granary_velero::archive::ArchiveError) -> anyhow::Error {
    match e {
        granary_velero::archive::ArchiveError::RetainedBudgetExceeded { .. } => {
            anyhow::anyhow!("{e}; --max-memory raises the limit")
        }
        other => other.into(),
    }
}

fn archive(command: ArchiveCommand) -> anyhow::Result<()> {
    use granary_velero::inspect;
    match command {
        ArchiveCommand::Inspect {
            file,
            output,
            limits,
        } => {
            let found = inspect::inspect_with(&file, &limits)
                .map_err(over_budget_hint)
                .with_context(|| format!("{}", file.display()))?;
            match output {
                OutputFormat::Text => print_out(&with_newline(found.to_string())),
                OutputFormat::Json => {
                    print_out(&format!("{}\n", serde_json::to_string_pretty(&found)?))
                }
            }
        }
        ArchiveCommand::Verify { file, limits } => {
            let report = inspect::verify_with(&file, &limits)
                .map_err(over_budget_hint)
                .with_context(|| format!("{} refused", file.display()))?;
            print_out(&with_newline(report.to_string()))?;
            anyhow::ensure!(
                report.is_ok(),
                "{} is not a valid backup archive",
                file.display()
            );
            Ok(())
        }
    }
}

fn write_crds(side: Option<Side>, dir: &std::path::Path) -> anyhow::Result<()> {
    let sides = match side {
        Some(s) => vec![s],
        None => vec![Side::Garden, Side::Seed],
    };
    for side in sides {
        let target = dir.join(side.deploy_dir()).join("crds");
        std::fs::create_dir_all(&target)
            .with_context(|| format!("creating {}", target.display()))?;
        let generated = crds::crds(Some(side));
        let names: Vec<String> = generated.iter().map(crds::file_name).collect();
        for entry in
            std::fs::read_dir(&target).with_context(|| format!("reading {}", target.display()))?
        {
            let path = entry?.path();
            let stale = path.extension().is_some_and(|e| e == "yaml")
                && !names
                    .iter()
                    .any(|n| path.file_name().is_some_and(|f| f == n.as_str()));
            if stale {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
        for (crd, name) in generated.iter().zip(&names) {
            let path = target.join(name);
            std::fs::write(&path, crds::to_yaml(crd))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        eprintln!("wrote {} CRDs to {}", names.len(), target.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The user-facing commands whose every argument and flag has a description.
    const DESCRIBED: &[&str] = &["backup", "restore", "schedule", "backup-location"];

    /// `granary <command> --help` describes every argument and flag of the commands in
    /// [`DESCRIBED`] (a flag without a line is a question a user has to ask elsewhere).
    #[test]
    fn every_argument_of_the_user_commands_is_described() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_hide_set() {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let cli = super::Cli::command();
        let mut missing = Vec::new();
        for name in DESCRIBED {
            let cmd = cli.find_subcommand(name).expect("a command");
            walk(cmd, name, &mut missing);
        }
        assert!(missing.is_empty(), "without a description: {missing:?}");
    }

    /// clap's own checks of the whole command line (ids named in `conflicts_with` and
    /// `requires_all` exist, no flag is defined twice, …), now that the flags live on the
    /// library's types.
    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    /// Every container of the shipped Deployments starts with arguments the binary
    /// accepts (the seed's `--leader-elect=true` once was not, and no test noticed).
    #[test]
    fn the_deployments_arguments_parse() {
        use clap::Parser;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
        let mut checked = 0;
        for side in ["garden", "seed"] {
            let path = root.join(side).join("deployment.yaml");
            let text = std::fs::read_to_string(&path).expect("the Deployment is there");
            let doc: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
            for container in doc["spec"]["template"]["spec"]["containers"]
                .as_array()
                .expect("containers")
            {
                let args = container["args"].as_array().expect("args");
                let argv = std::iter::once("granary")
                    .chain(args.iter().map(|a| a.as_str().expect("string argument")));
                if let Err(e) = super::Cli::try_parse_from(argv) {
                    panic!("{}: {e}", path.display());
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 2, "one container per Deployment");
    }
}
