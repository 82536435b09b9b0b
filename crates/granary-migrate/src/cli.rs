//! The library side of the `granary migrate` command line: builds the clients, the
//! stores' options and the output from the parsed flags, runs one subcommand and prints
//! its result (text on a terminal, JSON otherwise).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::builder::TypedValueParser as _;
use kube::Client;
use kube::config::KubeConfigOptions;

use super::MigrateError;
use super::legacy::{LegacyBucket, discover_legacy, import_legacy};
use super::progress::Output;
use super::run::{EntryMigration, MigrateContext, migrate_entry, migration_status};
use granary_api::common::SecretReference;
use granary_garden::config::GardenConfiguration;
use granary_runtime::clock::Clock;
use granary_runtime::config;
use granary_runtime::selector::ObjectSelector;

/// Flags of `granary migrate`, shared by every subcommand. The `///` lines on the fields
/// are their help.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct MigrateOptions {
    /// The garden kubeconfig (default: in-cluster, else KUBECONFIG / ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub garden_kubeconfig: Option<PathBuf>,
    /// The kubeconfig of the shoot's seed (etcd-main, etcd-backup secret); default: the
    /// garden's.
    #[arg(long, global = true, value_name = "PATH")]
    pub seed_kubeconfig: Option<PathBuf>,
    /// The GardenConfiguration file (bucket quota for the advance check of --to-bucket).
    #[arg(long, global = true, value_name = "FILE")]
    pub garden_config: Option<PathBuf>,
    /// Root directory of the `local` object store.
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Copy requests in flight at most.
    #[arg(long, global = true, default_value_t = 16)]
    pub parallelism: usize,
    /// How long etcd-main may take for each step, in seconds: etcd-druid taking a request
    /// (its Etcd resource), scaling down, becoming ready again.
    #[arg(
        long = "etcd-timeout-seconds",
        global = true,
        value_name = "ETCD_TIMEOUT_SECONDS",
        default_value = "600",
        value_parser = clap::value_parser!(u64).map(Duration::from_secs)
    )]
    pub etcd_timeout: Duration,
    /// How long the garden may take to give a place in the destination bucket, in
    /// seconds (`granary garden` answers the request; it must be running).
    #[arg(
        long = "garden-timeout-seconds",
        global = true,
        value_name = "GARDEN_TIMEOUT_SECONDS",
        default_value = "60",
        value_parser = clap::value_parser!(u64).map(Duration::from_secs)
    )]
    pub garden_timeout: Duration,
    /// JSON lines instead of a progress bar, also on a terminal.
    #[arg(long, global = true)]
    pub json: bool,
    /// Label imported objects granary.gardener.cloud/instance=VALUE.
    #[arg(long, global = true, value_name = "VALUE")]
    pub object_selector: Option<String>,
}

/// One subcommand of `granary migrate`; the `///` lines are the subcommands' and
/// arguments' help.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum MigrateCommand {
    /// Legacy per-shoot buckets.
    Legacy {
        #[command(subcommand)]
        command: LegacyCommand,
    },
    /// Move entry NAMESPACE/NAME into another bucket (resumes an interrupted run).
    Entry(EntryMigration),
    /// Every migration in flight and its phase.
    Status,
    /// Back out of the migration of NAMESPACE/NAME before it switched the entry: etcd-main
    /// back up on its old configuration if a cut-over left it down, the destination's
    /// copies removed, the garden's place in the destination released.
    Abandon {
        /// `<namespace>/<name>` of the garden BackupEntry.
        #[arg(value_parser = entry_name)]
        entry: EntryName,
    },
}

/// `granary migrate legacy …`.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum LegacyCommand {
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
        #[arg(long, value_name = "NS/NAME", value_parser = secret_ref)]
        secret_ref: Option<SecretReference>,
    },
}

impl MigrateCommand {
    /// The mistake clap does not catch: `legacy import` with neither `--file` nor
    /// `--discover` (clap refuses both together). [`run`] checks it first too; `granary
    /// migrate` checks it before anything else, to say it as a usage error on its own.
    pub fn check(&self) -> Result<(), MigrateError> {
        match self {
            MigrateCommand::Legacy {
                command:
                    LegacyCommand::Import {
                        file: None,
                        discover: false,
                        ..
                    },
            } => Err(MigrateError::Invalid(
                "give either --file FILE or --discover".into(),
            )),
            _ => Ok(()),
        }
    }
}

/// `<namespace>/<name>` of a garden BackupEntry, as `granary migrate entry|abandon` take it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryName {
    pub namespace: String,
    pub name: String,
}

/// A command-line value that is not `<namespace>/<name>`. `granary` reports it as it
/// reports a failed command (`error: …`, exit code 1), not as clap's usage error.
#[derive(Debug, thiserror::Error)]
#[error("{what} must be <namespace>/<name>, not {value:?}")]
pub struct NotNamespacedName {
    pub what: &'static str,
    pub value: String,
}

fn split_name(value: &str, what: &'static str) -> Result<(String, String), NotNamespacedName> {
    let (ns, name) = value
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
        .ok_or_else(|| NotNamespacedName {
            what,
            value: value.to_string(),
        })?;
    Ok((ns.to_string(), name.to_string()))
}

/// The value parser of `entry` (`granary migrate entry|abandon`).
fn entry_name(value: &str) -> Result<EntryName, NotNamespacedName> {
    let (namespace, name) = split_name(value, "the entry")?;
    Ok(EntryName { namespace, name })
}

/// The value parser of `--secret-ref`.
fn secret_ref(value: &str) -> Result<SecretReference, NotNamespacedName> {
    let (namespace, name) = split_name(value, "--secret-ref")?;
    Ok(SecretReference { name, namespace })
}

/// `granary migrate entry`'s arguments are [`EntryMigration`]'s fields. Declared by hand,
/// not derived: one positional, `<namespace>/<name>`, fills two fields (`namespace`,
/// `name`), and the migration code and its tests build the struct with both. The help
/// texts are what the derive makes of doc comments (a one-sentence help loses its
/// final period).
impl clap::Args for EntryMigration {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        use clap::{Arg, ArgAction};
        cmd.arg(
            Arg::new("entry")
                .value_name("ENTRY")
                .required(true)
                .value_parser(entry_name)
                .action(ArgAction::Set)
                .help("`<namespace>/<name>` of the garden BackupEntry"),
        )
        .arg(
            Arg::new("to_bucket")
                .long("to-bucket")
                .value_name("TO_BUCKET")
                .required(true)
                .value_parser(clap::value_parser!(String))
                .action(ArgAction::Set)
                .help("The destination BackupBucket"),
        )
        .arg(
            Arg::new("dry_run")
                .long("dry-run")
                .action(ArgAction::SetTrue)
                .help("Print the plan (objects, bytes, estimated time) and change nothing"),
        )
        .arg(
            Arg::new("delete_source_now")
                .long("delete-source-now")
                .action(ArgAction::SetTrue)
                .help("Force-delete the source at once instead of after the grace period"),
        )
        .arg(
            Arg::new("allow_other_pool")
                .long("allow-other-pool")
                .action(ArgAction::SetTrue)
                .help(
                    "Move the entry into a bucket of another backup pool (another region or \
                     provider) on purpose; refused otherwise",
                ),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for EntryMigration {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let missing = |id: &str| {
            clap::Error::raw(
                clap::error::ErrorKind::MissingRequiredArgument,
                format!("missing {id}"),
            )
        };
        let EntryName { namespace, name } = m
            .get_one::<EntryName>("entry")
            .cloned()
            .ok_or_else(|| missing("ENTRY"))?;
        Ok(EntryMigration {
            namespace,
            name,
            to_bucket: m
                .get_one::<String>("to_bucket")
                .cloned()
                .ok_or_else(|| missing("--to-bucket"))?,
            dry_run: m.get_flag("dry_run"),
            delete_source_now: m.get_flag("delete_source_now"),
            allow_other_pool: m.get_flag("allow_other_pool"),
        })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

async fn client(path: Option<&Path>) -> Result<Client, MigrateError> {
    let invalid = |p: &Path, e: String| MigrateError::Invalid(format!("{}: {e}", p.display()));
    match path {
        // kube parses KUBECONFIG itself; its error would show the file around the fault.
        None => Client::try_default().await.map_err(|e| {
            MigrateError::Invalid(format!(
                "kubernetes: {}",
                granary_runtime::redact::without_snippets(&e.to_string())
            ))
        }),
        Some(p) => {
            let kc = granary_runtime::redact::read_kubeconfig(p).map_err(|e| invalid(p, e))?;
            let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| invalid(p, e.to_string()))?;
            Client::try_from(config).map_err(|e| invalid(p, e.to_string()))
        }
    }
}

/// Runs one `granary migrate` subcommand. Errors after a partial run leave the phase
/// recorded on the entry; running the same command again resumes.
pub async fn run(opts: MigrateOptions, command: MigrateCommand) -> Result<(), MigrateError> {
    command.check()?;
    let garden = client(opts.garden_kubeconfig.as_deref()).await?;
    let seed = match &opts.seed_kubeconfig {
        Some(p) => client(Some(p)).await?,
        None => garden.clone(),
    };
    let output = if opts.json {
        Output::JsonLines(std::sync::Mutex::new(Box::new(std::io::stdout())))
    } else {
        Output::detect()
    };
    let text = matches!(output, Output::Terminal);
    let selector = ObjectSelector::new(opts.object_selector.clone());
    match command {
        MigrateCommand::Legacy {
            command: LegacyCommand::Import {
                file: Some(path), ..
            },
        } => {
            let body = std::fs::read_to_string(&path)
                .map_err(|e| MigrateError::Invalid(format!("{}: {e}", path.display())))?;
            let items: Vec<LegacyBucket> = serde_saphyr::from_str(&body)
                .map_err(|e| MigrateError::Invalid(format!("{}: {e}", path.display())))?;
            print_import(&import_legacy(&garden, &items, &selector).await?, text)
        }
        MigrateCommand::Legacy {
            command:
                LegacyCommand::Import {
                    file: None,
                    provider,
                    region,
                    secret_ref,
                    ..
                },
        } => {
            // `--discover` (check() refused neither) requires the three (clap checks).
            let provider = provider.unwrap_or_default();
            let region = region.unwrap_or_default();
            let secret_ref = secret_ref.unwrap_or_default();
            let items = discover_legacy(&garden, &seed, &provider, &region, &secret_ref).await?;
            print_import(&import_legacy(&garden, &items, &selector).await?, text)
        }
        MigrateCommand::Status => {
            let rows = migration_status(&garden).await?;
            if text && rows.is_empty() {
                println!("no migration in flight");
            } else if text {
                println!(
                    "{:<60} {:<9} {:<30} {:<30} {:<5} PLACE",
                    "ENTRY", "PHASE", "SOURCE", "TARGET", "ETCD"
                );
                for r in &rows {
                    println!(
                        "{:<60} {:<9} {:<30} {:<30} {:<5} {}",
                        r.entry,
                        r.phase,
                        r.source_bucket.as_deref().unwrap_or("-"),
                        r.target_bucket.as_deref().unwrap_or("-"),
                        r.etcd_replicas.as_deref().unwrap_or("-"),
                        r.place.as_deref().unwrap_or("-")
                    );
                }
            } else {
                if rows.is_empty() {
                    // No JSON line to print: people reading a pipe are told on stderr.
                    eprintln!("no migration in flight");
                }
                for r in &rows {
                    println!("{}", serde_json::to_string(r).unwrap_or_default());
                }
            }
            Ok(())
        }
        MigrateCommand::Abandon { entry } => {
            let ctx = context(&opts, garden, seed, output, GardenConfiguration::default());
            let report = super::abandon::abandon(&ctx, &entry.namespace, &entry.name).await?;
            if text {
                print!("{report}");
            } else {
                println!("{}", serde_json::to_string(&report).unwrap_or_default());
            }
            Ok(())
        }
        MigrateCommand::Entry(req) => {
            let garden_config: GardenConfiguration =
                config::load(opts.garden_config.as_deref(), &[])
                    .map_err(|e| MigrateError::Invalid(e.to_string()))?;
            let ctx = context(&opts, garden, seed, output, garden_config);
            let report = migrate_entry(&ctx, &req).await?;
            if text {
                print!("{report}");
            } else {
                ctx.output.event(
                    serde_json::json!({"event": "report", "report": report}),
                    String::new,
                );
            }
            Ok(())
        }
    }
}

/// The migration context from the command line's options.
fn context(
    opts: &MigrateOptions,
    garden: Client,
    seed: Client,
    output: Output,
    garden_config: GardenConfiguration,
) -> MigrateContext {
    MigrateContext {
        garden,
        seed,
        store_options: granary_providers::StoreOptions {
            local_root: opts.data_dir.clone(),
            ..granary_providers::StoreOptions::default()
        },
        clock: Clock::system(),
        garden_config,
        parallelism: opts.parallelism.max(1),
        etcd_timeout: opts.etcd_timeout,
        garden_timeout: opts.garden_timeout,
        output,
    }
}

fn print_import(outcomes: &[super::ImportOutcome], text: bool) -> Result<(), MigrateError> {
    for o in outcomes {
        if text {
            println!(
                "{:<10} {} -> {}: {}",
                o.result, o.bucket, o.entry, o.message
            );
        } else {
            println!("{}", serde_json::to_string(o).unwrap_or_default());
        }
    }
    let conflicts = outcomes.iter().filter(|o| o.result == "conflict").count();
    if conflicts > 0 {
        return Err(MigrateError::Invalid(format!(
            "{conflicts} of {} legacy buckets could not be imported",
            outcomes.len()
        )));
    }
    Ok(())
}
