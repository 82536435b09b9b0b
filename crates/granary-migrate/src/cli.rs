//! The library side of the `granary migrate` command line: builds the clients, the
//! stores' options and the output from the parsed flags, runs one subcommand and prints
//! its result (text on a terminal, JSON otherwise).

use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// Flags shared by every `granary migrate` subcommand.
#[derive(Clone, Debug, Default)]
pub struct MigrateOptions {
    /// Garden kubeconfig (default: in-cluster or KUBECONFIG).
    pub garden_kubeconfig: Option<PathBuf>,
    /// Seed kubeconfig (default: the garden's).
    pub seed_kubeconfig: Option<PathBuf>,
    /// GardenConfiguration file, for the advance quota check.
    pub garden_config: Option<PathBuf>,
    /// Root directory of the `local` object store.
    pub data_dir: Option<PathBuf>,
    pub parallelism: usize,
    pub etcd_timeout: Duration,
    /// How long to wait for the garden to give a place in the destination.
    pub garden_timeout: Duration,
    /// JSON output even on a terminal.
    pub json: bool,
    /// Label objects created by `legacy import` with this instance value.
    pub object_selector: Option<String>,
}

/// One subcommand.
#[derive(Clone, Debug)]
pub enum MigrateCommand {
    /// Register legacy buckets from a YAML list file.
    ImportFile(PathBuf),
    /// Register legacy buckets found as `backup--*` namespaces in the seed.
    ImportDiscover {
        provider: String,
        region: String,
        secret_ref: SecretReference,
    },
    Entry(EntryMigration),
    Status,
    Abandon {
        namespace: String,
        name: String,
    },
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
        MigrateCommand::ImportFile(path) => {
            let body = std::fs::read_to_string(&path)
                .map_err(|e| MigrateError::Invalid(format!("{}: {e}", path.display())))?;
            let items: Vec<LegacyBucket> = serde_saphyr::from_str(&body)
                .map_err(|e| MigrateError::Invalid(format!("{}: {e}", path.display())))?;
            print_import(&import_legacy(&garden, &items, &selector).await?, text)
        }
        MigrateCommand::ImportDiscover {
            provider,
            region,
            secret_ref,
        } => {
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
                for r in &rows {
                    println!("{}", serde_json::to_string(r).unwrap_or_default());
                }
            }
            Ok(())
        }
        MigrateCommand::Abandon { namespace, name } => {
            let ctx = context(&opts, garden, seed, output, GardenConfiguration::default());
            let report = super::abandon::abandon(&ctx, &namespace, &name).await?;
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
