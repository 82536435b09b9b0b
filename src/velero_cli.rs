//! The flags of `granary backup …` and `granary backup-location …` (velero's names and
//! shapes), part of `main.rs`: kept in a file of their own so main.rs stays short. They
//! are only parsed here and handed to `crate::cli`.

use std::path::PathBuf;

use crate::cli::backup::BackupCommand as Backup;
use crate::cli::backup_spec::BackupFlags;
use crate::cli::location::LocationCommand as Location;
use crate::cli::location_spec::{LocationFlags, LocationSetFlags};
use crate::cli::restore::RestoreCommand as Restore;
use crate::cli::restore_spec::RestoreFlags;
use crate::cli::schedule::ScheduleCommand as Schedule;
use crate::cli::{OutputFormat, Target};
use clap::Subcommand;

/// Where the Velero objects are (flags every `backup`/`backup-location` command takes).
#[derive(clap::Args, Debug)]
pub struct VeleroTarget {
    /// Kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long, global = true, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// The Velero namespace.
    #[arg(short = 'n', long, global = true, default_value = crate::cli::DEFAULT_NAMESPACE)]
    namespace: String,
    /// Root of the `local` object store, to read backups of a location on the local
    /// provider (describe --details, logs).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

impl From<Output> for OutputFormat {
    fn from(o: Output) -> Self {
        match o {
            Output::Table => OutputFormat::Table,
            Output::Json => OutputFormat::Json,
            Output::Yaml => OutputFormat::Yaml,
        }
    }
}

/// velero's flags of `backup logs|download` for fetching the download URL.
#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// How long to wait for the server to answer the DownloadRequest.
    #[arg(long, default_value = "1m", value_parser = go_duration)]
    timeout: std::time::Duration,
    /// Do not verify the object store's TLS certificate (insecure).
    #[arg(long)]
    insecure_skip_tls_verify: bool,
    /// A PEM file of CA certificates to trust for the object store.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
}

impl From<FetchArgs> for crate::cli::download::FetchOptions {
    fn from(a: FetchArgs) -> Self {
        crate::cli::download::FetchOptions {
            timeout: a.timeout,
            insecure_skip_tls_verify: a.insecure_skip_tls_verify,
            cacert: a.cacert,
        }
    }
}

/// A Go duration (`1m`, `30s`, `1h30m`), as velero's `--timeout` takes it.
fn go_duration(s: &str) -> Result<std::time::Duration, String> {
    granary_api::velero::Duration::parse(s)
        .and_then(|d| d.to_std())
        .map_err(|e| e.to_string())
}

/// Print the object instead of creating it (`-o json|yaml`), as velero does.
fn print_only(o: Option<Output>) -> Option<OutputFormat> {
    o.filter(|o| *o != Output::Table).map(Into::into)
}

#[derive(Subcommand, Debug)]
pub enum BackupCommand {
    /// Create a backup (`-o json|yaml` prints it without creating it).
    Create(Box<BackupCreate>),
    /// List backups, or the named ones.
    Get {
        names: Vec<String>,
        /// Only backups with these labels.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Phase, queue position and what it waits for, progress, errors and warnings.
    Describe {
        #[arg(required = true)]
        names: Vec<String>,
        /// Also list the backed-up items and the error/warning messages (read from the
        /// backup's storage location).
        #[arg(long)]
        details: bool,
    },
    /// Print the backup's log (through a DownloadRequest the server answers; with
    /// --data-dir, read from the storage location directly).
    Logs {
        name: String,
        #[command(flatten)]
        fetch: FetchArgs,
    },
    /// Download the backup tarball (through a DownloadRequest the server answers; with
    /// --data-dir, read from the storage location directly).
    Download {
        name: String,
        /// The file to write (default `<name>-data.tar.gz`).
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Overwrite the file if it exists.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        fetch: FetchArgs,
    },
    /// Ask the server to delete backups and their data (a DeleteBackupRequest each).
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
        /// Do not ask for confirmation.
        #[arg(long)]
        confirm: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum LocationCommand {
    /// Create a backup storage location (`-o json|yaml` prints it without creating it).
    Create(Box<LocationCreate>),
    /// List locations, or the named ones.
    Get {
        names: Vec<String>,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Change a location.
    Set {
        name: String,
        /// Make it the default location (`--default=false` to stop being it).
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
        default: Option<bool>,
        #[arg(long, value_name = "SECRET=KEY")]
        credential: Option<String>,
        #[arg(long)]
        access_mode: Option<String>,
        #[arg(long)]
        validation_frequency: Option<String>,
        #[arg(long)]
        backup_sync_period: Option<String>,
    },
    /// Delete locations and the Backup objects that point at them (not their files).
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
        #[arg(long)]
        confirm: bool,
    },
}

/// What a backup or restore takes: the namespace, resource and label filters velero's
/// `backup create`, `schedule create` and `restore create` share, and labels for the
/// object created.
#[derive(clap::Args, Debug)]
pub struct ScopeArgs {
    /// Namespaces to include (`*` for all; the default).
    #[arg(long, value_delimiter = ',', value_name = "NS,...")]
    include_namespaces: Option<Vec<String>>,
    /// Namespaces to exclude.
    #[arg(long, value_delimiter = ',', value_name = "NS,...")]
    exclude_namespaces: Vec<String>,
    /// Resources to include, as resource.group (`*` for all).
    #[arg(long, value_delimiter = ',', value_name = "RES,...")]
    include_resources: Vec<String>,
    /// Resources to exclude, as resource.group.
    #[arg(long, value_delimiter = ',', value_name = "RES,...")]
    exclude_resources: Vec<String>,
    /// Include cluster-scoped resources (unset: velero's `auto`, decided by the server
    /// from the namespace filters).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    include_cluster_resources: Option<bool>,
    /// Only resources matching this label selector.
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// Resources matching any of these selectors, separated by ` or `.
    #[arg(long)]
    or_selector: Option<String>,
    /// Labels for the object created (of a schedule: for the schedule and so its
    /// backups), k=v,...
    #[arg(long, value_name = "K=V,...")]
    labels: Vec<String>,
}

/// The backup spec flags `granary backup create` and `granary schedule create` share.
#[derive(clap::Args, Debug)]
pub struct BackupSpecArgs {
    #[command(flatten)]
    scope: ScopeArgs,
    /// How long before the backup can be garbage-collected (Go duration, e.g. 72h).
    #[arg(long)]
    ttl: Option<String>,
    /// Location in which to store the backup.
    #[arg(long)]
    storage_location: Option<String>,
    /// Per resource, the order of its items: `pods=ns1/p1,ns1/p2;persistentvolumes=pv1`.
    #[arg(long)]
    ordered_resources: Option<String>,
}

impl BackupSpecArgs {
    fn flags(self) -> Box<BackupFlags> {
        let scope = self.scope;
        Box::new(BackupFlags {
            include_namespaces: scope.include_namespaces,
            exclude_namespaces: scope.exclude_namespaces,
            include_resources: scope.include_resources,
            exclude_resources: scope.exclude_resources,
            include_cluster_resources: scope.include_cluster_resources,
            selector: scope.selector,
            or_selector: scope.or_selector,
            ttl: self.ttl,
            storage_location: self.storage_location,
            ordered_resources: self.ordered_resources,
            labels: scope.labels,
        })
    }
}

/// Flags of `granary backup create`.
#[derive(clap::Args, Debug)]
pub struct BackupCreate {
    /// The backup's name.
    name: String,
    /// What the backup holds and where it goes.
    #[command(flatten)]
    spec: BackupSpecArgs,
    /// Wait for the backup to finish: a live line on a terminal, JSON lines otherwise.
    #[arg(short = 'w', long, conflicts_with = "dry_run")]
    wait: bool,
    /// Create nothing: print the items the backup would hold, in the order it would
    /// write them, with counts per resource, and the running or queued backups it
    /// would wait for (`-o json|yaml` for programs).
    #[arg(long)]
    dry_run: bool,
    #[arg(short = 'o', long, value_enum)]
    output: Option<Output>,
}

/// Flags of `granary backup-location create`.
#[derive(clap::Args, Debug)]
pub struct LocationCreate {
    /// The location's name.
    name: String,
    /// Object-store provider: aws, azure, gcp, local (or velero.io/<name>).
    #[arg(long)]
    provider: Option<String>,
    /// Bucket holding the backups.
    #[arg(long)]
    bucket: Option<String>,
    /// Prefix inside the bucket.
    #[arg(long)]
    prefix: Option<String>,
    /// Provider settings, k=v,... (region, s3Url, s3ForcePathStyle, ...).
    #[arg(long, value_name = "K=V,...")]
    config: Vec<String>,
    /// The credentials Secret key, secret-name=key.
    #[arg(long, value_name = "SECRET=KEY")]
    credential: Option<String>,
    /// Make it the default location (clears the old default).
    #[arg(long)]
    default: bool,
    /// ReadWrite (default) or ReadOnly.
    #[arg(long)]
    access_mode: Option<String>,
    /// How often the location is validated (Go duration; 0 disables).
    #[arg(long)]
    validation_frequency: Option<String>,
    /// How often backups are synced from the store (Go duration; 0 disables).
    #[arg(long)]
    backup_sync_period: Option<String>,
    /// Labels for the location, k=v,...
    #[arg(long, value_name = "K=V,...")]
    labels: Vec<String>,
    #[arg(short = 'o', long, value_enum)]
    output: Option<Output>,
}

fn target(t: VeleroTarget) -> Target {
    Target {
        kubeconfig: t.kubeconfig,
        namespace: t.namespace,
        data_dir: t.data_dir,
    }
}

pub fn backup(t: VeleroTarget, command: BackupCommand) -> anyhow::Result<()> {
    let command = match command {
        BackupCommand::Create(args) => {
            let BackupCreate {
                name,
                spec,
                wait,
                dry_run,
                output,
            } = *args;
            Backup::Create {
                name,
                flags: spec.flags(),
                wait,
                output: if dry_run {
                    output.map(Into::into)
                } else {
                    print_only(output)
                },
                dry_run,
            }
        }
        BackupCommand::Get {
            names,
            selector,
            output,
        } => Backup::Get {
            names,
            selector,
            output: output.into(),
        },
        BackupCommand::Describe { names, details } => Backup::Describe { names, details },
        BackupCommand::Logs { name, fetch } => Backup::Logs {
            name,
            fetch: fetch.into(),
        },
        BackupCommand::Download {
            name,
            output,
            force,
            fetch,
        } => Backup::Download {
            name,
            output,
            force,
            fetch: fetch.into(),
        },
        BackupCommand::Delete { names, confirm } => Backup::Delete { names, confirm },
    };
    let t = target(t);
    crate::cli::block_on(crate::cli::backup::run(&t, command))
}

pub fn location(t: VeleroTarget, command: LocationCommand) -> anyhow::Result<()> {
    let command = match command {
        LocationCommand::Create(args) => {
            let LocationCreate {
                name,
                provider,
                bucket,
                prefix,
                config,
                credential,
                default,
                access_mode,
                validation_frequency,
                backup_sync_period,
                labels,
                output,
            } = *args;
            Location::Create {
                name,
                flags: LocationFlags {
                    provider,
                    bucket,
                    prefix,
                    config,
                    credential,
                    default,
                    access_mode,
                    validation_frequency,
                    backup_sync_period,
                    labels,
                },
                output: print_only(output),
            }
        }
        LocationCommand::Get { names, output } => Location::Get {
            names,
            output: output.into(),
        },
        LocationCommand::Set {
            name,
            default,
            credential,
            access_mode,
            validation_frequency,
            backup_sync_period,
        } => Location::Set {
            name,
            flags: LocationSetFlags {
                default,
                credential,
                access_mode,
                validation_frequency,
                backup_sync_period,
            },
        },
        LocationCommand::Delete { names, confirm } => Location::Delete { names, confirm },
    };
    let t = target(t);
    crate::cli::block_on(crate::cli::location::run(&t, command))
}

#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Create a schedule (`-o json|yaml` prints it without creating it).
    Create(Box<ScheduleCreate>),
    /// List schedules, or the named ones.
    Get {
        names: Vec<String>,
        /// Only schedules with these labels.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Show schedules in detail.
    Describe { names: Vec<String> },
    /// Pause schedules: they create no backups until unpaused.
    Pause {
        names: Vec<String>,
        /// Every schedule of the namespace.
        #[arg(long)]
        all: bool,
    },
    /// Unpause schedules.
    Unpause {
        names: Vec<String>,
        /// Every schedule of the namespace.
        #[arg(long)]
        all: bool,
        /// Skip the backup that is due right now.
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
        skip_immediately: Option<bool>,
    },
    /// Delete schedules (their backups stay).
    Delete {
        names: Vec<String>,
        /// Do not ask.
        #[arg(long)]
        confirm: bool,
    },
}

/// Flags of `granary schedule create`: velero's, the backup flags for the template.
#[derive(clap::Args, Debug)]
pub struct ScheduleCreate {
    /// The schedule's name.
    name: String,
    /// When to back up: a 5-field cron expression or `@every <duration>`.
    #[arg(long)]
    schedule: String,
    /// Create it paused.
    #[arg(long)]
    paused: bool,
    /// Skip the first backup, due at creation.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    skip_immediately: Option<bool>,
    /// Make the schedule the owner of its backups.
    #[arg(long)]
    use_owner_references_in_backup: bool,
    /// What each backup holds and where it goes (the template).
    #[command(flatten)]
    spec: BackupSpecArgs,
    #[arg(short = 'o', long, value_enum)]
    output: Option<Output>,
}

pub fn schedule(t: VeleroTarget, command: ScheduleCommand) -> anyhow::Result<()> {
    let command = match command {
        ScheduleCommand::Create(args) => {
            let ScheduleCreate {
                name,
                schedule,
                paused,
                skip_immediately,
                use_owner_references_in_backup,
                spec,
                output,
            } = *args;
            Schedule::Create {
                name,
                schedule,
                flags: spec.flags(),
                paused,
                skip_immediately,
                use_owner_references_in_backup,
                output: print_only(output),
            }
        }
        ScheduleCommand::Get {
            names,
            selector,
            output,
        } => Schedule::Get {
            names,
            selector,
            output: output.into(),
        },
        ScheduleCommand::Describe { names } => Schedule::Describe { names },
        ScheduleCommand::Pause { names, all } => Schedule::SetPaused {
            names,
            all,
            paused: true,
            skip_immediately: None,
        },
        ScheduleCommand::Unpause {
            names,
            all,
            skip_immediately,
        } => Schedule::SetPaused {
            names,
            all,
            paused: false,
            skip_immediately,
        },
        ScheduleCommand::Delete { names, confirm } => Schedule::Delete { names, confirm },
    };
    let t = target(t);
    crate::cli::block_on(crate::cli::schedule::run(&t, command))
}

#[derive(Subcommand, Debug)]
pub enum RestoreCommand {
    /// Create a restore from a backup or a schedule's latest backup (`-o json|yaml`
    /// prints it without creating it).
    Create(Box<RestoreCreate>),
    /// List restores, or the named ones.
    Get {
        names: Vec<String>,
        /// Only restores with these labels.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Phase, what it waits for, progress, warnings and errors.
    Describe {
        #[arg(required = true)]
        names: Vec<String>,
        /// Also list the restored items with what happened to each, and the warning and
        /// error messages (through DownloadRequests the server answers).
        #[arg(long)]
        details: bool,
        #[command(flatten)]
        fetch: FetchArgs,
    },
    /// Print the restore's log (through a DownloadRequest, as velero does).
    Logs {
        name: String,
        #[command(flatten)]
        fetch: FetchArgs,
    },
    /// Delete restores; the server then removes their data in object storage.
    Delete {
        names: Vec<String>,
        /// Every restore of the namespace.
        #[arg(long)]
        all: bool,
        /// Do not ask for confirmation.
        #[arg(long)]
        confirm: bool,
    },
}

/// Flags of `granary restore create` (velero's).
#[derive(clap::Args, Debug)]
pub struct RestoreCreate {
    /// The restore's name (default: `<backup or schedule>-<yyyyMMddHHmmss>`).
    name: Option<String>,
    /// Backup to restore from.
    #[arg(long, value_name = "BACKUP")]
    from_backup: Option<String>,
    /// Schedule whose latest completed backup to restore from.
    #[arg(long, value_name = "SCHEDULE")]
    from_schedule: Option<String>,
    /// What to restore, and labels for the restore.
    #[command(flatten)]
    scope: ScopeArgs,
    /// Restore namespaces under other names: src1:dst1,src2:dst2.
    #[arg(long, value_name = "SRC:DST,...")]
    namespace_mappings: Vec<String>,
    /// What to do with objects that already exist: none (keep them) or update.
    #[arg(long, value_name = "none|update")]
    existing_resource_policy: Option<String>,
    /// Restore volume data: only false is accepted (Granary restores no volume data).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    restore_volumes: Option<bool>,
    /// Keep the node ports of Services.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    preserve_nodeports: Option<bool>,
    /// Resources whose status is restored too, as resource.group.
    #[arg(long, value_delimiter = ',', value_name = "RES,...")]
    status_include_resources: Vec<String>,
    /// Resources left out of --status-include-resources.
    #[arg(long, value_delimiter = ',', value_name = "RES,...")]
    status_exclude_resources: Vec<String>,
    /// Wait for the restore to finish.
    #[arg(short = 'w', long, conflicts_with = "dry_run")]
    wait: bool,
    /// Create nothing: print what the restore would create, update or skip, in the
    /// order it would, against the live cluster (reads the backup from its location;
    /// `--data-dir` for the local provider).
    #[arg(long, conflicts_with = "output")]
    dry_run: bool,
    #[arg(short = 'o', long, value_enum)]
    output: Option<Output>,
}

pub fn restore(t: VeleroTarget, command: RestoreCommand) -> anyhow::Result<()> {
    let command = match command {
        RestoreCommand::Create(args) => {
            let a = *args;
            Restore::Create {
                name: a.name,
                flags: Box::new(RestoreFlags {
                    from_backup: a.from_backup,
                    from_schedule: a.from_schedule,
                    include_namespaces: a.scope.include_namespaces,
                    exclude_namespaces: a.scope.exclude_namespaces,
                    include_resources: a.scope.include_resources,
                    exclude_resources: a.scope.exclude_resources,
                    include_cluster_resources: a.scope.include_cluster_resources,
                    namespace_mappings: a.namespace_mappings,
                    existing_resource_policy: a.existing_resource_policy,
                    restore_volumes: a.restore_volumes,
                    preserve_nodeports: a.preserve_nodeports,
                    status_include_resources: a.status_include_resources,
                    status_exclude_resources: a.status_exclude_resources,
                    selector: a.scope.selector,
                    or_selector: a.scope.or_selector,
                    labels: a.scope.labels,
                }),
                wait: a.wait,
                dry_run: a.dry_run,
                output: print_only(a.output),
            }
        }
        RestoreCommand::Get {
            names,
            selector,
            output,
        } => Restore::Get {
            names,
            selector,
            output: output.into(),
        },
        RestoreCommand::Describe {
            names,
            details,
            fetch,
        } => Restore::Describe {
            names,
            details: details.then(|| fetch.into()),
        },
        RestoreCommand::Logs { name, fetch } => Restore::Logs {
            name,
            fetch: fetch.into(),
        },
        RestoreCommand::Delete {
            names,
            all,
            confirm,
        } => Restore::Delete {
            names,
            confirm,
            all,
        },
    };
    let t = target(t);
    crate::cli::block_on(crate::cli::restore::run(&t, command))
}
