//! The `granary` command line: parses arguments, sets up logging, and calls into the
//! library. Nothing else lives here.

use anyhow::Context;
use clap::{Parser, Subcommand};
use granary_api::crds::{self, Side};
use granary_runtime::{failpoints, logging};
use std::path::PathBuf;
use std::process::ExitCode;
use velero_cli::{BackupCommand, LocationCommand, RestoreCommand, ScheduleCommand, VeleroTarget};

mod cli;
#[cfg(test)]
mod config_reference;
mod dev;
mod velero_cli;

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
    Seed(SeedArgs),
    /// Run the garden-side controllers: CloudProfile backup pools, BackupEntry placement
    /// with bucket quota sharding, bucket → seed assignment, deletion guards.
    Garden(GardenArgs),
    /// Move entries between buckets: legacy per-shoot buckets into shared ones, or
    /// rebalance; register legacy buckets; show migrations in flight or back out of one.
    Migrate(MigrateArgs),
    /// The whole landscape on this machine: embedded garden and seed API servers, the
    /// sample landscape, all controllers, buckets under the data directory, kubeconfigs
    /// for kubectl, and a live view. Ctrl-C stops it; the state is kept.
    Dev(DevArgs),
    /// Run the Velero-compatible controllers alone on any cluster, no garden (what
    /// `velero server` is to Velero): backup storage locations and the backup queue.
    Server(ServerArgs),
    /// Look into a Velero backup tarball (Velero's own or Granary's).
    Archive {
        #[command(subcommand)]
        command: ArchiveCommand,
    },
    /// Velero-style backups: create, get, describe, logs, delete (the controllers of
    /// `granary seed` or `granary server` take them).
    Backup {
        #[command(flatten)]
        target: VeleroTarget,
        #[command(subcommand)]
        command: BackupCommand,
    },
    /// Velero-style restores: create, get, describe, logs, delete (the controllers of
    /// `granary seed` or `granary server` run them).
    Restore {
        #[command(flatten)]
        target: VeleroTarget,
        #[command(subcommand)]
        command: RestoreCommand,
    },
    /// Velero-style schedules: create, get, describe, pause, unpause, delete.
    Schedule {
        #[command(flatten)]
        target: VeleroTarget,
        #[command(subcommand)]
        command: ScheduleCommand,
    },
    /// Velero-style backup storage locations: create, get, set, delete.
    BackupLocation {
        #[command(flatten)]
        target: VeleroTarget,
        #[command(subcommand)]
        command: LocationCommand,
    },
    /// Run a benchmark side by side with its peer (rclone, aws-cli, kubectl, a bare
    /// client) and write <target dir>/bench/<name>.json; scripts/bench.sh installs the
    /// peers and starts the S3 emulator.
    Bench {
        /// delete, copy, garden, embedded, velero_archive, velero_backup, velero_queue,
        /// velero_restore, or all.
        #[arg(required = true)]
        names: Vec<String>,
        /// The benchmark's main size (objects, shoots, items); its default otherwise.
        #[arg(long)]
        size: Option<usize>,
        /// How many rounds the garden benchmark runs, each on a fresh API server; it
        /// reports each measure's median round (default 3). The others run once.
        #[arg(long)]
        rounds: Option<usize>,
        /// Print the results as JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
}

/// Flags of `granary seed`; each overrides the configuration file.
#[derive(clap::Args, Debug)]
struct SeedArgs {
    /// This seed's name (overrides `seedName` in the configuration file).
    #[arg(long)]
    seed_name: Option<String>,
    /// Kubeconfig of the garden cluster (overrides `gardenKubeconfig`).
    #[arg(long, value_name = "PATH")]
    garden_kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the seed cluster; default: in-cluster or KUBECONFIG.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// SeedConfiguration file (YAML).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Root directory of the `local` object store.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Only act on objects labelled granary.gardener.cloud/instance=VALUE.
    #[arg(long, value_name = "VALUE")]
    object_selector: Option<String>,
    /// Address of /metrics, /healthz and /readyz (overrides server.metricsBindAddress).
    #[arg(long, value_name = "ADDR")]
    metrics_bind_address: Option<String>,
    /// Controllers to switch off: mirror, backupbucket, backupentry, liveness, and
    /// Velero's (backup-storage-location, backup-queue, backup, …).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    disable_controllers: Vec<String>,
    /// Keys per batched object delete (S3 allows at most 1000).
    #[arg(long, value_name = "N")]
    delete_batch_size: Option<usize>,
    /// The Velero-compatible controllers' settings (the `velero:` section).
    #[command(flatten)]
    velero: VeleroArgs,
}

/// The `velero:` settings as flags, Velero's names (`granary seed` and `granary server`).
#[derive(clap::Args, Debug)]
struct VeleroArgs {
    /// The namespace of the Velero objects (default `velero`).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// Backups that may run at once (default 1).
    #[arg(long, value_name = "N")]
    concurrent_backups: Option<u32>,
    /// Item workers per running backup (default 1).
    #[arg(long, value_name = "N")]
    item_block_worker_count: Option<u32>,
    /// TTL of a backup that sets none (default 720h).
    #[arg(long, value_name = "DURATION")]
    default_backup_ttl: Option<String>,
    /// How often locations are validated (default 1m).
    #[arg(long, value_name = "DURATION")]
    store_validation_frequency: Option<String>,
    /// How often expired backups are looked for (default 1h).
    #[arg(long, value_name = "DURATION")]
    garbage_collection_frequency: Option<String>,
    /// How often backups are synced from each location (default 1m; 0 disables).
    #[arg(long, value_name = "DURATION")]
    backup_sync_period: Option<String>,
    /// Page size of the lists that collect a backup's items (default 500).
    #[arg(long, value_name = "N")]
    client_page_size: Option<u32>,
    /// Location of backups that name none (default `default`).
    #[arg(long, value_name = "NAME")]
    default_backup_storage_location: Option<String>,
    /// Restores that may run at once when they do not overlap (default 1).
    #[arg(long, value_name = "N")]
    concurrent_restores: Option<u32>,
    /// The longest a restore waits for a CRD, a terminating namespace or an action's
    /// additional items (default 10m).
    #[arg(long, value_name = "DURATION")]
    resource_timeout: Option<String>,
    /// Restore order: high list, `-`, low list (replaces Velero's default).
    #[arg(long, value_name = "LIST")]
    restore_resource_priorities: Option<String>,
}

impl VeleroArgs {
    fn flags(self) -> granary_velero_server::settings::VeleroFlags {
        granary_velero_server::settings::VeleroFlags {
            namespace: self.namespace,
            concurrent_backups: self.concurrent_backups,
            item_block_worker_count: self.item_block_worker_count,
            default_backup_ttl: self.default_backup_ttl,
            store_validation_frequency: self.store_validation_frequency,
            garbage_collection_frequency: self.garbage_collection_frequency,
            backup_sync_period: self.backup_sync_period,
            client_page_size: self.client_page_size,
            default_backup_storage_location: self.default_backup_storage_location,
            concurrent_restores: self.concurrent_restores,
            resource_timeout: self.resource_timeout,
            restore_resource_priorities: self.restore_resource_priorities,
        }
    }
}

/// Flags of `granary server`; each overrides the configuration file (Velero's flag names).
#[derive(clap::Args, Debug)]
struct ServerArgs {
    /// The cluster's kubeconfig (default: in-cluster, else KUBECONFIG / ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// ServerConfiguration file (YAML; its `velero:` section as in SeedConfiguration).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Root directory of the `local` object store (for locations with provider `local`).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Address of /metrics, /healthz and /readyz (default `:8085`).
    #[arg(long, alias = "metrics-address", value_name = "ADDR")]
    metrics_bind_address: Option<String>,
    /// Controllers to switch off: backup-storage-location, backup-queue, backup.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    disable_controllers: Vec<String>,
    #[command(flatten)]
    velero: VeleroArgs,
    /// Run only while holding the leader Lease `granary-server`.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    leader_elect: Option<bool>,
}

/// Flags of `granary garden`; each overrides the configuration file.
#[derive(clap::Args, Debug)]
struct GardenArgs {
    /// The garden kubeconfig (default: in-cluster, else KUBECONFIG / ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// The GardenConfiguration file (YAML).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Only see (and label) objects with granary.gardener.cloud/instance=VALUE.
    #[arg(long, value_name = "VALUE")]
    object_selector: Option<String>,
    /// Where /healthz, /readyz and /metrics are served (e.g. `:8085`).
    #[arg(long, value_name = "ADDR")]
    metrics_bind_address: Option<String>,
    /// Run only while holding the leader Lease.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    leader_elect: Option<bool>,
    /// Where the seed authorization webhook listens over HTTPS (e.g. `:9443`); needs
    /// seedAuthorization.tlsCertFile and tlsKeyFile in the configuration file.
    #[arg(long, value_name = "ADDR")]
    seed_authorization_bind_address: Option<String>,
}

/// Flags of `granary migrate`.
#[derive(clap::Args, Debug)]
struct MigrateArgs {
    /// The garden kubeconfig (default: in-cluster, else KUBECONFIG / ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    garden_kubeconfig: Option<PathBuf>,
    /// The kubeconfig of the shoot's seed (etcd-main, etcd-backup secret); default: the
    /// garden's.
    #[arg(long, global = true, value_name = "PATH")]
    seed_kubeconfig: Option<PathBuf>,
    /// The GardenConfiguration file (bucket quota for the advance check of --to-bucket).
    #[arg(long, global = true, value_name = "FILE")]
    garden_config: Option<PathBuf>,
    /// Root directory of the `local` object store.
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Copy requests in flight at most.
    #[arg(long, global = true, default_value_t = 16)]
    parallelism: usize,
    /// How long etcd-main may take for each step, in seconds: etcd-druid taking a request
    /// (its Etcd resource), scaling down, becoming ready again.
    #[arg(long, global = true, default_value_t = 600)]
    etcd_timeout_seconds: u64,
    /// How long the garden may take to give a place in the destination bucket, in
    /// seconds (`granary garden` answers the request; it must be running).
    #[arg(long, global = true, default_value_t = 60)]
    garden_timeout_seconds: u64,
    /// JSON lines instead of a progress bar, also on a terminal.
    #[arg(long, global = true)]
    json: bool,
    /// Label imported objects granary.gardener.cloud/instance=VALUE.
    #[arg(long, global = true, value_name = "VALUE")]
    object_selector: Option<String>,
    #[command(subcommand)]
    command: MigrateCommand,
}

#[derive(Subcommand, Debug)]
enum MigrateCommand {
    /// Legacy per-shoot buckets.
    Legacy {
        #[command(subcommand)]
        command: LegacyCommand,
    },
    /// Move entry NAMESPACE/NAME into another bucket (resumes an interrupted run).
    Entry {
        /// `<namespace>/<name>` of the garden BackupEntry.
        entry: String,
        /// The destination BackupBucket.
        #[arg(long)]
        to_bucket: String,
        /// Print the plan (objects, bytes, estimated time) and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Force-delete the source at once instead of after the grace period.
        #[arg(long)]
        delete_source_now: bool,
        /// Move the entry into a bucket of another backup pool (another region or
        /// provider) on purpose; refused otherwise.
        #[arg(long)]
        allow_other_pool: bool,
    },
    /// Every migration in flight and its phase.
    Status,
    /// Back out of the migration of NAMESPACE/NAME before it switched the entry: etcd-main
    /// back up on its old configuration if a cut-over left it down, the destination's
    /// copies removed, the garden's place in the destination released.
    Abandon {
        /// `<namespace>/<name>` of the garden BackupEntry.
        entry: String,
    },
}

#[derive(Subcommand, Debug)]
enum LegacyCommand {
    /// Register legacy buckets from a YAML list of {shootNamespace, shootName, bucket,
    /// provider, region, secretRef}, or discovered from the seed's `backup--*` namespaces.
    Import {
        /// The YAML list.
        #[arg(long, value_name = "FILE", conflicts_with = "discover")]
        file: Option<PathBuf>,
        /// Discover `backup--<bucket>` namespaces in the seed instead.
        #[arg(long, requires_all = ["provider", "region", "secret_ref"])]
        discover: bool,
        /// Provider of the discovered buckets.
        #[arg(long)]
        provider: Option<String>,
        /// Region of the discovered buckets.
        #[arg(long)]
        region: Option<String>,
        /// Garden credentials Secret of the discovered buckets, `<namespace>/<name>`.
        #[arg(long, value_name = "NS/NAME")]
        secret_ref: Option<String>,
    },
}

/// Flags of `granary dev`.
#[derive(clap::Args, Debug)]
struct DevArgs {
    /// Where the API servers' state, the local buckets, kubeconfigs and logs live.
    #[arg(long, value_name = "DIR", default_value = ".granary")]
    data_dir: PathBuf,
    /// How long a deleted shoot's backups are kept (e.g. 30s, 2m, 1h).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    grace_period: std::time::Duration,
    /// Start from a clean landscape (removes what `granary dev` keeps in the data dir).
    #[arg(long)]
    reset: bool,
    /// Seeds of a new landscape (default 3: two in one region, one in another).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    seeds: Option<u16>,
    /// Shoots of a new landscape (default 7).
    #[arg(long, value_name = "N")]
    shoots: Option<u16>,
    /// BackupEntries per bucket before a pool gets another shard.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    quota: u32,
    /// Keep buckets at a real provider instead of local directories: aws, azure or gcp.
    #[arg(long, value_name = "TYPE")]
    provider: Option<String>,
    /// The provider's endpoint URL (S3-compatible stores, emulators).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// The region of the shared buckets (required with --provider).
    #[arg(long, value_name = "REGION")]
    region: Option<String>,
    /// Credentials for --provider: a YAML map of Gardener's Secret keys, an AWS
    /// credentials file, or a GCP service-account key; default: the provider's usual
    /// environment variables (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
    /// AZURE_STORAGE_ACCOUNT/AZURE_STORAGE_KEY, GOOGLE_APPLICATION_CREDENTIALS).
    #[arg(long, value_name = "FILE")]
    credentials_file: Option<PathBuf>,
    /// Where /healthz, /readyz and /metrics are served (default 127.0.0.1:8085, or a
    /// free port when that is taken).
    #[arg(long, value_name = "ADDR")]
    metrics_bind_address: Option<String>,
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    granary_runtime::duration::parse_duration(text).map_err(|e| e.to_string())
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
        memory: MemoryArgs,
    },
    /// Check format and safety (path escapes, links, sizes, compression bombs, memory);
    /// exits non-zero with the reason when the archive is refused or invalid.
    Verify {
        /// The backup tarball (`<name>.tar.gz`).
        file: PathBuf,
        #[command(flatten)]
        memory: MemoryArgs,
    },
}

#[derive(clap::Args, Debug)]
struct MemoryArgs {
    /// Most bytes to keep in memory while reading (paths, collected items, the stored
    /// manifest); an archive that needs more is refused.
    #[arg(long, value_name = "BYTES", default_value_t = granary_velero::archive::ArchiveLimits::default().max_retained_bytes)]
    max_memory: u64,
}

impl MemoryArgs {
    fn limits(&self) -> granary_velero::archive::ArchiveLimits {
        granary_velero::archive::ArchiveLimits {
            max_retained_bytes: self.max_memory,
            ..Default::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OutputFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", said_once(&err));
            ExitCode::FAILURE
        }
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
    if let Command::Dev(args) = cli.command {
        // `granary dev` sets up its own logging: to a file while its view owns the terminal.
        failpoints::init_from_env()?;
        return dev(args, cli.log_format, cli.log_level);
    }
    // The Velero-style CLI reports its own errors to people; library logs at the default
    // level (kube's connection retries above all) would only draw over its output.
    let quiet = matches!(
        cli.command,
        Command::Backup { .. }
            | Command::BackupLocation { .. }
            | Command::Restore { .. }
            | Command::Schedule { .. }
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
        Command::Backup { target, command } => velero_cli::backup(target, command),
        Command::BackupLocation { target, command } => velero_cli::location(target, command),
        Command::Restore { target, command } => velero_cli::restore(target, command),
        Command::Schedule { target, command } => velero_cli::schedule(target, command),
        Command::Seed(args) => {
            let opts = granary_seed::SeedOptions {
                seed_name: args.seed_name,
                garden_kubeconfig: args.garden_kubeconfig,
                kubeconfig: args.kubeconfig,
                config: args.config,
                data_dir: args.data_dir,
                object_selector: args.object_selector,
                metrics_bind_address: args.metrics_bind_address,
                disable_controllers: args.disable_controllers,
                delete_batch_size: args.delete_batch_size,
                velero: args.velero.flags(),
            };
            tokio::runtime::Runtime::new()
                .context("starting the async runtime")?
                .block_on(granary_seed::run(opts))
                .context("granary seed")
        }
        Command::Migrate(args) => migrate(args),
        Command::Bench {
            names,
            size,
            rounds,
            json,
        } => granary_bench::main_blocking(
            &names,
            &granary_bench::BenchOptions {
                size,
                rounds,
                ..Default::default()
            },
            json,
        ),
        Command::Server(args) => {
            let opts = granary_velero_server::server::ServerOptions {
                kubeconfig: args.kubeconfig,
                config: args.config,
                data_dir: args.data_dir,
                metrics_bind_address: args.metrics_bind_address,
                disable_controllers: args.disable_controllers,
                velero: args.velero.flags(),
                leader_elect: args.leader_elect,
            };
            tokio::runtime::Runtime::new()
                .context("starting the async runtime")?
                .block_on(granary_velero_server::server::run(opts))
                .context("granary server")
        }
        Command::Dev(_) => unreachable!("handled above"),
        Command::Garden(args) => Ok(granary_garden::run(granary_garden::GardenOptions {
            kubeconfig: args.kubeconfig,
            config: args.config,
            object_selector: args.object_selector,
            metrics_bind_address: args.metrics_bind_address,
            leader_elect: args.leader_elect,
            seed_authorization_bind_address: args.seed_authorization_bind_address,
        })?),
    }
}

fn migrate(args: MigrateArgs) -> anyhow::Result<()> {
    use granary_migrate::cli::{MigrateCommand as Cmd, MigrateOptions};
    fn split(value: &str, what: &str) -> anyhow::Result<(String, String)> {
        let (ns, name) = value
            .split_once('/')
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
            .with_context(|| format!("{what} must be <namespace>/<name>, not {value:?}"))?;
        Ok((ns.to_string(), name.to_string()))
    }
    let command = match args.command {
        MigrateCommand::Status => Cmd::Status,
        MigrateCommand::Abandon { entry } => {
            let (namespace, name) = split(&entry, "the entry")?;
            Cmd::Abandon { namespace, name }
        }
        MigrateCommand::Entry {
            entry,
            to_bucket,
            dry_run,
            delete_source_now,
            allow_other_pool,
        } => {
            let (namespace, name) = split(&entry, "the entry")?;
            Cmd::Entry(granary_migrate::EntryMigration {
                namespace,
                name,
                to_bucket,
                dry_run,
                delete_source_now,
                allow_other_pool,
            })
        }
        MigrateCommand::Legacy {
            command:
                LegacyCommand::Import {
                    file,
                    discover,
                    provider,
                    region,
                    secret_ref,
                },
        } => match (file, discover) {
            (Some(file), false) => Cmd::ImportFile(file),
            (None, true) => {
                let (namespace, name) =
                    split(secret_ref.as_deref().unwrap_or_default(), "--secret-ref")?;
                Cmd::ImportDiscover {
                    provider: provider.unwrap_or_default(),
                    region: region.unwrap_or_default(),
                    secret_ref: granary_api::common::SecretReference { name, namespace },
                }
            }
            _ => anyhow::bail!("give either --file FILE or --discover"),
        },
    };
    let opts = MigrateOptions {
        garden_kubeconfig: args.garden_kubeconfig,
        seed_kubeconfig: args.seed_kubeconfig,
        garden_config: args.garden_config,
        data_dir: args.data_dir,
        parallelism: args.parallelism,
        etcd_timeout: std::time::Duration::from_secs(args.etcd_timeout_seconds),
        garden_timeout: std::time::Duration::from_secs(args.garden_timeout_seconds),
        json: args.json,
        object_selector: args.object_selector,
    };
    tokio::runtime::Runtime::new()
        .context("starting the async runtime")?
        .block_on(granary_migrate::cli::run(opts, command))
        .context("granary migrate")
}

fn dev(args: DevArgs, log_format: logging::LogFormat, log_level: String) -> anyhow::Result<()> {
    let opts = crate::dev::DevOptions {
        data_dir: args.data_dir,
        grace_period: args.grace_period,
        reset: args.reset,
        seeds: args.seeds.map(usize::from),
        shoots: args.shoots.map(usize::from),
        quota: args.quota,
        store: crate::dev::provider::StoreArgs {
            provider: args.provider,
            endpoint: args.endpoint,
            region: args.region,
            credentials_file: args.credentials_file,
        },
        metrics_bind_address: args.metrics_bind_address,
        log_format,
        log_level,
    };
    crate::dev::run(opts).context("granary dev")
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
            memory,
        } => {
            let found = inspect::inspect_with(&file, &memory.limits())
                .map_err(over_budget_hint)
                .with_context(|| format!("{}", file.display()))?;
            match output {
                OutputFormat::Text => print_out(&with_newline(found.to_string())),
                OutputFormat::Json => {
                    print_out(&format!("{}\n", serde_json::to_string_pretty(&found)?))
                }
            }
        }
        ArchiveCommand::Verify { file, memory } => {
            let report = inspect::verify_with(&file, &memory.limits())
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
