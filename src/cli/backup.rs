//! `granary backup create|get|describe|logs|download|delete`: the requests velero's CLI
//! makes, against the same objects.

use std::time::Duration;

use anyhow::{Context, bail};
use chrono::Utc;
use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, Client};

use super::backup_spec::{BackupFlags, build_backup, describe_errors};
use super::describe::{
    DescribeContext, Details, EventLine, backups_table, describe_backup, waiting_for,
};
use super::output::{self, OutputFormat};
use super::{Target, confirmed, download, is_conflict, is_not_found, store, wait};
use granary_api::velero::{
    BACKUP_NAME_LABEL, BACKUP_UID_LABEL, Backup, BackupPhase, BackupStorageLocation,
    BackupStorageLocationAccessMode, BackupStorageLocationPhase, DeleteBackupRequest,
    DeleteBackupRequestSpec, DownloadTargetKind, STORAGE_LOCATION_LABEL, Schedule,
};
use granary_runtime::clock::from_k8s;
use granary_velero::files::{ResourceList, Results};
use granary_velero::label::valid_label_value;
use granary_velero::manifest::Manifest;

/// A `granary backup` subcommand with its flags; the `///` lines are the subcommands' and
/// flags' help.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum BackupCommand {
    /// Create a backup (`-o json|yaml` prints it without creating it).
    Create {
        /// The backup's name (with --from-schedule, default `<schedule>-<yyyyMMddHHmmss>`).
        #[arg(required_unless_present = "from_schedule")]
        name: Option<String>,
        /// Take the backup from the template of this schedule, now; every other filter
        /// is ignored (velero's `--from-schedule`).
        #[arg(long, value_name = "SCHEDULE", conflicts_with = "dry_run")]
        from_schedule: Option<String>,
        /// What the backup holds and where it goes.
        #[command(flatten)]
        flags: Box<BackupFlags>,
        /// Wait for the backup to finish, telling its progress (on stderr; with -o json,
        /// one JSON object per state change on stdout).
        #[arg(short = 'w', long, conflicts_with = "dry_run")]
        wait: bool,
        /// Create nothing: print the items the backup would hold, in the order it would
        /// write them, with counts per resource, and the running or queued backups it
        /// would wait for (`-o json|yaml` for programs).
        #[arg(long)]
        dry_run: bool,
        // Without `--dry-run`, `json|yaml` print the Backup that would be created and
        // create nothing (velero's behaviour, [`output::print_only`]); with it, the
        // format of that report ([`super::dry_run`]).
        /// Print the Backup as json or yaml instead of creating it (with --dry-run: the
        /// format of the report; with --wait, json: the progress as JSON lines).
        #[arg(short = 'o', long, value_enum)]
        output: Option<OutputFormat>,
    },
    /// List backups, or the named ones.
    Get {
        /// The backups to list (default: every backup of the namespace).
        names: Vec<String>,
        /// Only backups with these labels.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Output format: a table, or the Backups as json or yaml.
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Phase, queue position and what it waits for, progress, errors and warnings.
    Describe {
        /// The backups to describe.
        #[arg(required = true)]
        names: Vec<String>,
        /// Also list the backed-up items and the error/warning messages (through
        /// DownloadRequests the server answers, as velero does).
        #[arg(long)]
        details: bool,
        // Used with `--details` only.
        #[command(flatten)]
        fetch: download::FetchOptions,
        #[command(flatten)]
        local: super::LocalStore,
    },
    /// Print the backup's log (through a DownloadRequest the server answers; with
    /// --data-dir, read from the storage location directly).
    Logs {
        /// The backup whose log to print.
        name: String,
        #[command(flatten)]
        fetch: download::FetchOptions,
        #[command(flatten)]
        local: super::LocalStore,
    },
    /// Download the backup tarball (through a DownloadRequest the server answers; with
    /// --data-dir, read from the storage location directly).
    Download {
        /// The backup whose tarball to download.
        name: String,
        /// The file to write (default `<name>-data.tar.gz`).
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
        /// Overwrite the file if it exists.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        fetch: download::FetchOptions,
        #[command(flatten)]
        local: super::LocalStore,
    },
    /// Prove backups against their integrity records: sizes and SHA-256 of every object
    /// at the location (any provider), one line per backup, a non-zero exit when any is
    /// not verified. Without a cluster, describe the location with flags.
    Verify(Box<super::integrity::VerifyFlags>),
    /// Ask the server to delete backups and their data (a DeleteBackupRequest each).
    Delete {
        /// The backups to delete.
        #[arg(required = true)]
        names: Vec<String>,
        /// Do not ask for confirmation.
        #[arg(long)]
        confirm: bool,
    },
}

/// Runs one `granary backup` subcommand.
pub async fn run(target: &Target, command: BackupCommand) -> anyhow::Result<()> {
    if let BackupCommand::Create {
        name: Some(name),
        flags,
        output,
        dry_run: true,
        ..
    } = &command
    {
        let client = target.client().await?;
        let format = output.unwrap_or(OutputFormat::Table);
        return super::dry_run::run(&client, &target.namespace, name, flags, format).await;
    }
    if let BackupCommand::Create {
        name: Some(name),
        flags,
        output,
        from_schedule: None,
        wait: false,
        ..
    } = &command
        && let Some(format) = output::print_only(*output)
    {
        // Offline: print what would be created.
        let backup = build_backup(name, &target.namespace, flags)
            .map_err(|errs| anyhow::anyhow!("{}", describe_errors(&errs)))?;
        print!("{}", output::objects(format, &[backup], true)?);
        return Ok(());
    }
    if let BackupCommand::Verify(flags) = command {
        return super::integrity::verify(target, *flags).await;
    }
    let client = target.client().await?;
    let ns = target.namespace.as_str();
    match command {
        BackupCommand::Verify(_) => Ok(()),
        BackupCommand::Create {
            name,
            flags,
            wait,
            from_schedule,
            output,
            ..
        } => {
            let waiting = if wait {
                Some(wait::WaitOutput::of(output)?)
            } else {
                None
            };
            let backup = match from_schedule {
                Some(schedule) => {
                    let b = from_schedule_now(&client, ns, &schedule, name.as_deref()).await?;
                    if !wait && let Some(format) = output::print_only(output) {
                        print!("{}", output::objects(format, &[b], true)?);
                        return Ok(());
                    }
                    waiting
                        .unwrap_or(wait::WaitOutput::Text)
                        .say("Creating backup from schedule, all other filters are ignored.");
                    b
                }
                None => build_backup(name.as_deref().unwrap_or_default(), ns, &flags)
                    .map_err(|errs| anyhow::anyhow!("{}", describe_errors(&errs)))?,
            };
            create(&client, ns, backup, waiting).await
        }
        BackupCommand::Get {
            names,
            selector,
            output,
        } => get(&client, ns, &names, selector.as_deref(), output).await,
        BackupCommand::Describe {
            names,
            details,
            fetch,
            local,
        } if names.len() == 1 => {
            let details = details.then_some(&fetch);
            describe(&client, &target.reading(&local), &names[0], details).await
        }
        BackupCommand::Describe {
            names,
            details,
            fetch,
            local,
        } => {
            let details = details.then_some(&fetch);
            let target = target.reading(&local);
            let mut failed = Vec::new();
            for (i, name) in names.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                if let Err(e) = describe(&client, &target, name, details).await {
                    eprintln!("error: {e:#}");
                    failed.push(name.clone());
                }
            }
            if !failed.is_empty() {
                bail!("describe failed for {}", failed.join(", "));
            }
            Ok(())
        }
        BackupCommand::Logs { name, fetch, local } => {
            logs(&client, &target.reading(&local), &name, &fetch).await
        }
        BackupCommand::Download {
            name,
            output,
            force,
            fetch,
            local,
        } => {
            download(
                &client,
                &target.reading(&local),
                &name,
                output,
                force,
                &fetch,
            )
            .await
        }
        BackupCommand::Delete { names, confirm } => delete(&client, ns, &names, confirm).await,
    }
}

/// velero's `backup create --from-schedule`: the backup the schedule would take now
/// (its template, its labels and owner reference), named `name` or
/// `<schedule>-<yyyyMMddHHmmss>`.
async fn from_schedule_now(
    client: &Client,
    ns: &str,
    schedule: &str,
    name: Option<&str>,
) -> anyhow::Result<Backup> {
    let schedules: Api<Schedule> = Api::namespaced(client.clone(), ns);
    let Some(s) = schedules.get_opt(schedule).await? else {
        bail!("--from-schedule: schedule {schedule:?} not found in namespace {ns}");
    };
    let mut backup = granary_velero_server::schedules::backup_for(&s, Utc::now());
    if let Some(name) = name {
        if !granary_api::names::is_dns1123_subdomain(name) {
            bail!(
                "NAME {name:?}: a backup name must be lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"
            );
        }
        backup.metadata.name = Some(name.to_string());
    }
    Ok(backup)
}

/// Creates the backup; with `waiting`, follows it to its end ([`wait::wait`]).
async fn create(
    client: &Client,
    ns: &str,
    backup: Backup,
    waiting: Option<wait::WaitOutput>,
) -> anyhow::Result<()> {
    let name = backup.metadata.name.clone().unwrap_or_default();
    let name = name.as_str();
    if let Some(loc) = &backup.spec.storage_location {
        let bsls: Api<BackupStorageLocation> = Api::namespaced(client.clone(), ns);
        let Some(bsl) = bsls.get_opt(loc).await? else {
            bail!(
                "--storage-location: backup storage location {loc:?} not found in namespace {ns}"
            );
        };
        // The server would fail the backup's validation for this; say it before creating.
        if bsl.spec.effective_access_mode() == BackupStorageLocationAccessMode::ReadOnly {
            bail!(
                "--storage-location: backup storage location {loc:?} is ReadOnly; backups cannot be written to it"
            );
        }
        if bsl.status.as_ref().and_then(|s| s.phase)
            == Some(BackupStorageLocationPhase::Unavailable)
        {
            let why = bsl
                .status
                .as_ref()
                .and_then(|s| s.message.clone())
                .unwrap_or_default();
            eprintln!("warning: backup storage location {loc:?} is Unavailable: {why}");
        }
    }
    let api: Api<Backup> = Api::namespaced(client.clone(), ns);
    match api.create(&PostParams::default(), &backup).await {
        Ok(_) => {}
        Err(e) if is_conflict(&e) => bail!("backup {name:?} already exists in namespace {ns}"),
        Err(e) if is_not_found(&e) => {
            bail!("namespace {ns} does not exist: give the Velero namespace with -n")
        }
        Err(e) => return Err(e).with_context(|| format!("creating backup {name}")),
    }
    let say = |text: String| waiting.unwrap_or(wait::WaitOutput::Text).say(&text);
    say(format!("Backup request {name:?} submitted successfully."));
    let Some(output) = waiting else {
        say(format!(
            "Run `granary backup describe {name}` or `granary backup logs {name}` for more details."
        ));
        return Ok(());
    };
    say("Waiting for backup to complete. You may safely press ctrl-c to stop waiting - your backup will continue in the background.".into());
    let done = wait::wait(&api, name, Duration::from_millis(500), output).await?;
    let phase = done
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(BackupPhase::New);
    say(format!(
        "Backup completed with status: {phase}. You may check for more information using the commands `granary backup describe {name}` and `granary backup logs {name}`."
    ));
    if matches!(phase, BackupPhase::Failed | BackupPhase::FailedValidation) {
        let status = done.status.unwrap_or_default();
        let why = status
            .failure_reason
            .or_else(|| status.validation_errors.map(|v| v.join("; ")))
            .unwrap_or_default();
        bail!("backup {name} {phase}: {why}");
    }
    Ok(())
}

fn by_name(mut v: Vec<Backup>) -> Vec<Backup> {
    v.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    v
}

async fn get(
    client: &Client,
    ns: &str,
    names: &[String],
    selector: Option<&str>,
    format: OutputFormat,
) -> anyhow::Result<()> {
    let api: Api<Backup> = Api::namespaced(client.clone(), ns);
    let mut found = Vec::new();
    let mut missing = Vec::new();
    if names.is_empty() {
        if let Some(sel) = selector {
            super::flags::parse_label_selector("--selector", sel)?;
        }
        let lp = selector.map_or_else(ListParams::default, |s| ListParams::default().labels(s));
        found = by_name(api.list(&lp).await.context("listing backups")?.items);
    } else {
        for name in names {
            match api
                .get_opt(name)
                .await
                .with_context(|| format!("getting backup {name}"))?
            {
                Some(b) => found.push(b),
                None => missing.push(name.clone()),
            }
        }
    }
    print!(
        "{}",
        output::list(format, &found, names.len(), "backups", ns, |f| {
            backups_table(f, Utc::now())
        })?
    );
    if !missing.is_empty() {
        bail!(
            "backup(s) not found in namespace {ns}: {}",
            missing.join(", ")
        );
    }
    Ok(())
}

async fn events(client: &Client, ns: &str, name: &str) -> Result<Vec<EventLine>, String> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!(
        "involvedObject.kind=Backup,involvedObject.name={name}"
    ));
    let mut list = api.list(&lp).await.map_err(|e| e.to_string())?.items;
    list.retain(|e| e.involved_object.name.as_deref() == Some(name));
    let seen = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or(e.event_time.as_ref().map(|t| t.0))
            .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .map(from_k8s)
    };
    list.sort_by_key(seen);
    Ok(list
        .iter()
        .map(|e| EventLine {
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            last_seen: seen(e),
            message: e.message.clone().unwrap_or_default(),
        })
        .collect())
}

/// The location a backup was written to: its `spec.storageLocation`, its
/// `velero.io/storage-location` label, else the default location.
pub(crate) async fn location_of(
    client: &Client,
    ns: &str,
    b: &Backup,
) -> anyhow::Result<BackupStorageLocation> {
    let api: Api<BackupStorageLocation> = Api::namespaced(client.clone(), ns);
    let named = b
        .spec
        .storage_location
        .clone()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            b.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(STORAGE_LOCATION_LABEL).cloned())
        });
    match named {
        Some(n) => api
            .get_opt(&n)
            .await?
            .with_context(|| format!("backup storage location {n:?} not found in namespace {ns}")),
        None => api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|l| l.spec.default == Some(true))
            .with_context(|| {
                format!(
                    "the backup names no storage location and namespace {ns} has no default one"
                )
            }),
    }
}

/// Whether the backup has written its files (velero's rule for `logs`).
fn files_written(phase: BackupPhase) -> bool {
    matches!(
        phase,
        BackupPhase::Completed
            | BackupPhase::PartiallyFailed
            | BackupPhase::Failed
            | BackupPhase::WaitingForPluginOperations
            | BackupPhase::WaitingForPluginOperationsPartiallyFailed
            | BackupPhase::Finalizing
            | BackupPhase::FinalizingPartiallyFailed
    )
}

/// `describe --details`: the backup's resource list and, when it counted any, its
/// errors and warnings; through DownloadRequests the server answers (velero's way), or
/// read from the location itself with `--data-dir`. A file that cannot be had is said
/// in its section, and returned as the failure.
async fn read_details(
    client: &Client,
    target: &Target,
    b: &Backup,
    fetch: &download::FetchOptions,
) -> (Details, Option<String>) {
    let status = b.status.clone().unwrap_or_default();
    let phase = status.phase.unwrap_or(BackupPhase::New);
    if !files_written(phase) {
        let why = format!("none yet: the backup is {phase}");
        return (
            Details {
                resources: Some(Err(why)),
                results: None,
            },
            None,
        );
    }
    let counted = status.errors.unwrap_or(0) + status.warnings.unwrap_or(0) > 0;
    if target.data_dir.is_some() {
        return read_details_directly(client, target, b, counted).await;
    }
    let name = b.metadata.name.clone().unwrap_or_default();
    let get = async |kind| -> Result<Vec<u8>, String> {
        let mut buf = Vec::new();
        download::through_server(client, &target.namespace, kind, &name, fetch, &mut buf)
            .await
            .map_err(|e| format!("{e:#}"))?;
        Ok(buf)
    };
    let resources = get(DownloadTargetKind::BackupResourceList)
        .await
        .and_then(|bytes| {
            serde_json::from_slice::<ResourceList>(&bytes)
                .map_err(|e| format!("the resource list is not valid: {e}"))
        });
    let mut failure = resources.as_ref().err().cloned();
    let results = if counted {
        let r = get(DownloadTargetKind::BackupResults)
            .await
            .and_then(|bytes| {
                serde_json::from_slice::<Results>(&bytes)
                    .map(|r| (r.errors, r.warnings))
                    .map_err(|e| format!("the results are not valid: {e}"))
            });
        if let Err(e) = &r {
            failure.get_or_insert(e.clone());
        }
        Some(r)
    } else {
        None
    };
    (
        Details {
            resources: Some(resources),
            results,
        },
        failure,
    )
}

/// [`read_details`] from the location itself (`--data-dir`).
async fn read_details_directly(
    client: &Client,
    target: &Target,
    b: &Backup,
    counted: bool,
) -> (Details, Option<String>) {
    let opened = async {
        let bsl = location_of(client, &target.namespace, b).await?;
        store::open(client, &target.namespace, &bsl, target.data_dir.as_deref()).await
    }
    .await;
    let loc = match opened {
        Ok(loc) => loc,
        Err(e) => {
            let msg = format!("{e:#}");
            let details = Details {
                resources: Some(Err(msg.clone())),
                results: None,
            };
            return (details, Some(msg));
        }
    };
    let keys = match loc.layout.backup(&b.stored_name()) {
        Ok(k) => k,
        Err(e) => return (Details::default(), Some(e.to_string())),
    };
    let mut failure = None;
    let resources = match loc.get(&keys.manifest()).await {
        Ok(bytes) => Manifest::read_gz(&bytes[..], store::MAX_FILE_BYTES)
            .map(|m| ResourceList::from_manifest(&m))
            .map_err(|e| format!("{} is not a valid manifest: {e}", keys.manifest())),
        // A backup Velero wrote has no manifest: its resource list says the same.
        Err(manifest_err) => match loc.get(&keys.resource_list()).await {
            Ok(bytes) => ResourceList::read_gz(&bytes[..], store::MAX_FILE_BYTES)
                .map_err(|e| format!("{}: {e}", keys.resource_list())),
            Err(_) => Err(format!("{manifest_err:#}")),
        },
    };
    if let Err(e) = &resources {
        failure = Some(e.clone());
    }
    let results = if counted {
        let r = match loc.get(&keys.results()).await {
            Ok(bytes) => Results::read_gz(&bytes[..], store::MAX_FILE_BYTES)
                .map(|r| (r.errors, r.warnings))
                .map_err(|e| format!("{}: {e}", keys.results())),
            Err(e) => Err(format!("{e:#}")),
        };
        if let Err(e) = &r {
            failure.get_or_insert(e.clone());
        }
        Some(r)
    } else {
        None
    };
    (
        Details {
            resources: Some(resources),
            results,
        },
        failure,
    )
}

async fn describe(
    client: &Client,
    target: &Target,
    name: &str,
    details: Option<&download::FetchOptions>,
) -> anyhow::Result<()> {
    let ns = target.namespace.as_str();
    let api: Api<Backup> = Api::namespaced(client.clone(), ns);
    let b = api
        .get_opt(name)
        .await
        .with_context(|| format!("getting backup {name}"))?
        .with_context(|| format!("backup {name:?} not found in namespace {ns}"))?;
    let phase = b
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(BackupPhase::New);
    let waits = if matches!(phase, BackupPhase::Queued) {
        let others = api.list(&ListParams::default()).await?.items;
        let live: Vec<String> = Api::<Namespace>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .filter_map(|n| n.metadata.name)
                    .collect()
            })
            .unwrap_or_default();
        waiting_for(&b, &others, &live)
    } else {
        waiting_for(&b, &[], &[])
    };
    let (details, failure) = if let Some(fetch) = details {
        let (d, f) = read_details(client, target, &b, fetch).await;
        (Some(d), f)
    } else {
        (None, None)
    };
    let ctx = DescribeContext {
        now: Utc::now(),
        waiting_for: waits,
        events: Some(events(client, ns, name).await),
        details,
    };
    print!("{}", describe_backup(&b, &ctx));
    if let Some(f) = failure {
        bail!("could not read the files of backup {name} from its storage location: {f}");
    }
    Ok(())
}

async fn logs(
    client: &Client,
    target: &Target,
    name: &str,
    fetch: &download::FetchOptions,
) -> anyhow::Result<()> {
    let ns = target.namespace.as_str();
    let api: Api<Backup> = Api::namespaced(client.clone(), ns);
    let b = api
        .get_opt(name)
        .await?
        .with_context(|| format!("backup {name:?} not found in namespace {ns}"))?;
    let phase = b
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(BackupPhase::New);
    if !files_written(phase) {
        bail!(
            "logs for backup {name:?} are not available until it has finished processing (it is {phase}); wait until it is Completed, PartiallyFailed or Failed and try again"
        );
    }
    let mut out = std::io::stdout();
    let kind = DownloadTargetKind::BackupLog;
    if target.data_dir.is_some() {
        let bsl = location_of(client, ns, &b).await?;
        let loc = store::open(client, ns, &bsl, target.data_dir.as_deref()).await?;
        let key = loc.layout.backup(&b.stored_name())?.logs();
        download::direct(&loc, kind, &key, &mut out).await?;
    } else {
        download::through_server(client, ns, kind, name, fetch, &mut out).await?;
    }
    Ok(())
}

/// velero's `backup download`: the tarball into a file, never over an existing one
/// without `--force`, and never left half-written (a temporary file beside it is
/// renamed into place once complete).
async fn download(
    client: &Client,
    target: &Target,
    name: &str,
    output: Option<std::path::PathBuf>,
    force: bool,
    fetch: &download::FetchOptions,
) -> anyhow::Result<()> {
    let ns = target.namespace.as_str();
    let path = output.unwrap_or_else(|| format!("{name}-data.tar.gz").into());
    if !force && path.exists() {
        bail!(
            "{} already exists: remove it, choose another file with -o, or pass --force to overwrite it",
            path.display()
        );
    }
    let api: Api<Backup> = Api::namespaced(client.clone(), ns);
    let b = api
        .get_opt(name)
        .await?
        .with_context(|| format!("backup {name:?} not found in namespace {ns}"))?;
    let partial = partial_path(&path);
    let mut file = std::fs::File::create(&partial)
        .with_context(|| format!("creating {}", partial.display()))?;
    let kind = DownloadTargetKind::BackupContents;
    let fetched = if target.data_dir.is_some() {
        async {
            let bsl = location_of(client, ns, &b).await?;
            let loc = store::open(client, ns, &bsl, target.data_dir.as_deref()).await?;
            let key = loc.layout.backup(&b.stored_name())?.contents();
            download::direct(&loc, kind, &key, &mut file).await
        }
        .await
    } else {
        download::through_server(client, ns, kind, name, fetch, &mut file).await
    };
    let done = fetched.and_then(|_| {
        file.sync_all()
            .with_context(|| format!("writing {}", partial.display()))?;
        drop(file);
        std::fs::rename(&partial, &path)
            .with_context(|| format!("moving the download to {}", path.display()))
    });
    if let Err(e) = done {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    println!(
        "Backup {name} has been successfully downloaded to {}",
        path.display()
    );
    Ok(())
}

/// `<file>.partial-<pid>` beside `path`.
fn partial_path(path: &std::path::Path) -> std::path::PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    path.with_file_name(name)
}

/// The DeleteBackupRequest velero's `NewDeleteBackupRequest` builds.
pub fn delete_request(backup: &Backup) -> DeleteBackupRequest {
    let name = backup.metadata.name.clone().unwrap_or_default();
    let uid = backup.metadata.uid.clone().unwrap_or_default();
    let mut req = DeleteBackupRequest::new(
        "",
        DeleteBackupRequestSpec {
            backup_name: name.clone(),
        },
    );
    req.metadata = ObjectMeta {
        generate_name: Some(format!("{name}-")),
        namespace: backup.metadata.namespace.clone(),
        labels: Some(
            [
                (
                    BACKUP_NAME_LABEL.to_string(),
                    valid_label_value(&name).into_owned(),
                ),
                (BACKUP_UID_LABEL.to_string(), uid),
            ]
            .into(),
        ),
        ..ObjectMeta::default()
    };
    req
}

async fn delete(client: &Client, ns: &str, names: &[String], confirm: bool) -> anyhow::Result<()> {
    if names.is_empty() {
        bail!("give the name of at least one backup to delete");
    }
    let api: Api<Backup> = Api::namespaced(client.clone(), ns);
    let mut backups = Vec::new();
    let mut errors = Vec::new();
    for name in names {
        match api.get_opt(name).await {
            Ok(Some(b)) => backups.push(b),
            Ok(None) => errors.push(format!("backup {name:?} not found in namespace {ns}")),
            Err(e) => errors.push(format!("getting backup {name}: {e}")),
        }
    }
    if !errors.is_empty() {
        // Nothing is deleted when one of the names is wrong.
        bail!("{}", errors.join("\n"));
    }
    if !confirm
        && !confirmed(&format!(
            "You are about to request the deletion of backup(s) {} and all their data.",
            names.join(", ")
        ))
    {
        // As velero: a "no" is an answer, not an error.
        println!("Cancelled.");
        return Ok(());
    }
    let requests: Api<DeleteBackupRequest> = Api::namespaced(client.clone(), ns);
    for b in &backups {
        let name = b.metadata.name.as_deref().unwrap_or_default();
        match requests
            .create(&PostParams::default(), &delete_request(b))
            .await
        {
            Ok(_) => println!(
                "Request to delete backup {name:?} submitted successfully.\nThe backup will be fully deleted after all associated data (backup files, restores) are removed."
            ),
            Err(e) => errors.push(format!("requesting the deletion of backup {name}: {e}")),
        }
    }
    if !errors.is_empty() {
        bail!("{}", errors.join("\n"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::BackupSpec;

    #[test]
    fn delete_request_as_velero_builds_it() {
        let mut b = Backup::new("nightly", BackupSpec::default());
        b.metadata.namespace = Some("velero".into());
        b.metadata.uid = Some("u-1".into());
        let req = serde_json::to_value(delete_request(&b)).unwrap();
        assert_eq!(
            req,
            serde_json::json!({
                "apiVersion": "velero.io/v1", "kind": "DeleteBackupRequest",
                "metadata": {"generateName": "nightly-", "namespace": "velero",
                             "labels": {"velero.io/backup-name": "nightly", "velero.io/backup-uid": "u-1"}},
                "spec": {"backupName": "nightly"}
            })
        );
    }
}
