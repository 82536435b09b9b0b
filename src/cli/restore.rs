//! `granary restore create|get|describe|logs|delete`: the requests velero's restore
//! commands make, against the same Restore objects; the restore controller of `granary
//! seed`/`granary server` does the work. What flags become is [`super::restore_spec`],
//! what is printed [`super::restore_describe`], both pure and tested there.

use std::time::Duration;

use anyhow::{Context, bail};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client, ResourceExt};

use super::backup_spec::describe_errors;
use super::flags;
use super::output::{self, OutputFormat};
use super::restore_describe::{describe_restore, phase, restores_table};
use super::restore_spec::{RestoreFlags, build_restore};
use super::{Target, confirmed, create_in_velero_namespace, is_not_found};
use granary_api::velero::{Backup, DownloadTargetKind, Restore, RestorePhase, SCHEDULE_NAME_LABEL};

/// A `granary restore` subcommand with its flags; the `///` lines are the subcommands'
/// and flags' help.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum RestoreCommand {
    /// Create a restore from a backup or a schedule's latest backup (`-o json|yaml`
    /// prints it without creating it).
    Create {
        // `None`: velero's `<backup or schedule>-<yyyyMMddHHmmss>`.
        /// The restore's name (default: `<backup or schedule>-<yyyyMMddHHmmss>`).
        name: Option<String>,
        #[command(flatten)]
        flags: Box<RestoreFlags>,
        /// Wait for the restore to finish, telling its progress (on stderr; with -o json,
        /// one JSON object per state change on stdout).
        #[arg(short = 'w', long, conflicts_with = "dry_run")]
        wait: bool,
        /// Create nothing: print what the restore would create, update or skip, in the
        /// order it would, against the live cluster (reads the backup from its location;
        /// `--data-dir` for the local provider).
        #[arg(long, conflicts_with = "output")]
        dry_run: bool,
        /// Create nothing: check the backup deeply (every object against its integrity
        /// record, the tarball against its manifest), run the restore against the live
        /// cluster with nothing written, and record the outcome on the Backup
        /// (`granary.gardener.cloud/rehearsed`).
        #[arg(long, conflicts_with_all = ["output", "dry_run", "wait"])]
        rehearse: bool,
        // `json|yaml`: print the Restore and create nothing ([`output::print_only`]).
        /// Print the Restore as json or yaml instead of creating it (with --wait, json:
        /// the progress as JSON lines).
        #[arg(short = 'o', long, value_enum)]
        output: Option<OutputFormat>,
        // Used with `--dry-run` and `--rehearse`, which read the backup themselves.
        #[command(flatten)]
        local: super::LocalStore,
    },
    /// List restores, or the named ones.
    Get {
        /// The restores to list (default: every restore of the namespace).
        names: Vec<String>,
        /// Only restores with these labels.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Output format: a table, or the objects as json or yaml.
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Phase, what it waits for, progress, warnings and errors.
    Describe {
        /// The restores to describe.
        #[arg(required = true)]
        names: Vec<String>,
        /// Also list the restored items with what happened to each, and the warning and
        /// error messages (through DownloadRequests the server answers).
        #[arg(long)]
        details: bool,
        // Used with `--details` only.
        #[command(flatten)]
        fetch: super::download::FetchOptions,
    },
    /// Print the restore's log (through a DownloadRequest, as velero does).
    Logs {
        /// The restore whose log to print.
        name: String,
        #[command(flatten)]
        fetch: super::download::FetchOptions,
    },
    /// Delete restores; the server then removes their data in object storage.
    Delete {
        /// The restores to delete (or --all).
        names: Vec<String>,
        /// Every restore of the namespace.
        #[arg(long)]
        all: bool,
        /// Do not ask for confirmation.
        #[arg(long)]
        confirm: bool,
    },
}

/// Runs one `granary restore` subcommand.
pub async fn run(target: &Target, command: RestoreCommand) -> anyhow::Result<()> {
    let ns = target.namespace.as_str();
    if let RestoreCommand::Create {
        name,
        flags,
        wait,
        dry_run,
        rehearse,
        output: format,
        local,
    } = command
    {
        let target = &target.reading(&local);
        let mut restore = build_restore(name.as_deref(), ns, &flags, chrono::Local::now())
            .map_err(|errs| anyhow::anyhow!("{}", describe_errors(&errs)))?;
        if nonempty(&flags.from_seed).is_some() || nonempty(&flags.for_shoot).is_some() {
            let client = target.client().await?;
            resolve_source(&client, ns, &mut restore, &flags).await?;
        }
        if dry_run {
            let client = target.client().await?;
            local_dir_given(&client, target, &restore).await?;
            return preview(target, client, restore).await;
        }
        if rehearse {
            let client = target.client().await?;
            local_dir_given(&client, target, &restore).await?;
            return rehearse_restore(target, client, restore).await;
        }
        if !wait && let Some(format) = output::print_only(format) {
            print!("{}", output::objects(format, &[restore], true)?);
            return Ok(());
        }
        let waiting = if wait {
            Some(super::wait::WaitOutput::of(format)?)
        } else {
            None
        };
        let client = target.client().await?;
        return create(&client, ns, restore, waiting).await;
    }
    let client = target.client().await?;
    let api: Api<Restore> = Api::namespaced(client.clone(), ns);
    match command {
        RestoreCommand::Create { .. } => Ok(()),
        RestoreCommand::Get {
            names,
            selector,
            output: format,
        } => {
            if let Some(sel) = &selector {
                flags::parse_label_selector("--selector", sel)?;
            }
            let (found, missing) = fetch(&api, &names, selector.as_deref()).await?;
            print!(
                "{}",
                output::list(format, &found, names.len(), "restores", ns, restores_table)?
            );
            all_found(ns, &missing)
        }
        RestoreCommand::Describe {
            names,
            details,
            fetch: options,
        } => {
            let details = details.then_some(options);
            let (found, missing) = fetch(&api, &names, None).await?;
            all_found(ns, &missing)?;
            let mut texts = Vec::new();
            for r in &found {
                let mut text = describe_restore(r);
                if let Some(options) = &details {
                    text.push_str(&describe_details(&client, ns, r, options).await);
                }
                texts.push(text);
            }
            print!("{}", texts.join("\n"));
            Ok(())
        }
        RestoreCommand::Logs { name, fetch } => logs(&client, ns, &name, &fetch).await,
        RestoreCommand::Delete {
            names,
            all,
            confirm,
        } => delete(&api, ns, &names, confirm, all).await,
    }
}

/// A dry run or rehearsal reads the backup itself: a backup on a location of the `local`
/// provider needs `--data-dir` (its files are in the directory of the server that wrote
/// them), said before anything else instead of as a failed validation.
async fn local_dir_given(
    client: &Client,
    target: &Target,
    restore: &Restore,
) -> anyhow::Result<()> {
    let Some(name) = &restore.spec.backup_name else {
        return Ok(());
    };
    let ns = target.namespace.as_str();
    let Some(backup) = Api::<Backup>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?
    else {
        return Ok(());
    };
    let location = super::backup::location_of(client, ns, &backup).await?;
    let local =
        granary_velero_server::location::provider_kind(&location.spec.provider) == Some("local");
    if local && target.data_dir.is_none() {
        bail!(
            "--data-dir: backup {name:?} is at location {:?} of the local provider, whose files are in the data directory of the server that wrote them; pass --data-dir DIR (for granary dev: DATA-DIR/buckets)",
            location.metadata.name.as_deref().unwrap_or_default()
        );
    }
    Ok(())
}

/// `restore create --dry-run`: the restore run against the live cluster with every
/// write left out ([`granary_velero_server::restore_controller::dry_run`]).
async fn preview(target: &Target, client: Client, restore: Restore) -> anyhow::Result<()> {
    use granary_velero_server::restore::run::ItemAction;
    let ctx = super::integrity::velero_context_with_keys(target, client).await?;
    let outcome = granary_velero_server::restore_controller::dry_run(&ctx, &restore)
        .await
        .map_err(|errors| {
            anyhow::anyhow!(
                "the restore would fail validation:\n  {}",
                errors.join("\n  ")
            )
        })?;
    let name = restore.name_any();
    let backup = restore.spec.backup_name.as_deref().unwrap_or_default();
    println!("Restore {name:?} of backup {backup:?} would, in this order:");
    let width = outcome
        .handled
        .iter()
        .map(|h| h.resource_key.len())
        .max()
        .unwrap_or(0);
    let mut counts = [0usize; 4];
    for h in &outcome.handled {
        let verb = match h.action {
            ItemAction::Created => "create",
            ItemAction::Updated => "update",
            ItemAction::Skipped => "skip",
            ItemAction::Failed => "fail",
        };
        counts[h.action as usize] += 1;
        let id = if h.namespace.is_empty() {
            h.name.clone()
        } else {
            format!("{}/{}", h.namespace, h.name)
        };
        println!("  {verb:<6}  {:<width$}  {id}", h.resource_key);
    }
    println!(
        "{} to create, {} to update, {} to skip (already there), {} failing.",
        counts[ItemAction::Created as usize],
        counts[ItemAction::Updated as usize],
        counts[ItemAction::Skipped as usize],
        counts[ItemAction::Failed as usize]
    );
    let r = &outcome.results;
    let messages = |set: &granary_velero::files::MessageSet| -> Vec<String> {
        set.velero
            .iter()
            .chain(set.cluster.iter())
            .chain(set.namespaces.values().flatten())
            .cloned()
            .collect()
    };
    for (title, list) in [
        ("Warnings", messages(&r.warnings)),
        ("Errors", messages(&r.errors)),
    ] {
        if !list.is_empty() {
            println!("{title}:");
            for m in list {
                println!("  - {m}");
            }
        }
    }
    Ok(())
}

/// `restore create --rehearse`: the backup checked deeply, the restore run against the
/// live cluster with nothing written, the outcome recorded on the Backup
/// ([`granary_velero_server::backup_verification::rehearse_restore`]).
async fn rehearse_restore(target: &Target, client: Client, restore: Restore) -> anyhow::Result<()> {
    use granary_velero_server::backup_verification::{
        Rehearsal, record_rehearsal, rehearse_restore,
    };
    let ns = target.namespace.as_str();
    let backups: Api<Backup> = Api::namespaced(client.clone(), ns);
    let backup = match (&restore.spec.backup_name, &restore.spec.schedule_name) {
        (Some(b), _) => backups
            .get_opt(b)
            .await?
            .with_context(|| format!("--from-backup: backup {b:?} not found in namespace {ns}"))?,
        (None, Some(s)) => {
            let lp = ListParams::default().labels(&format!("{SCHEDULE_NAME_LABEL}={s}"));
            let all = backups.list(&lp).await?.items;
            let locations: Api<granary_api::velero::BackupStorageLocation> =
                Api::namespaced(client.clone(), ns);
            let locations = locations.list(&ListParams::default()).await?.items;
            granary_velero_server::restore::validate::latest_of_schedule(s, &all, &locations)
                .cloned()
                .with_context(|| {
                    format!(
                        "--from-schedule: no completed backup of schedule {s:?} in namespace {ns}"
                    )
                })?
        }
        (None, None) => bail!("--from-backup or --from-schedule is required"),
    };
    let mut restore = restore;
    restore.spec.backup_name = Some(backup.name_any());
    restore.spec.schedule_name = None;
    let ctx = super::integrity::velero_context_with_keys(target, client).await?;
    let outcome = rehearse_restore(&ctx, &backup, &restore).await;
    record_rehearsal(&ctx, &backup, &outcome)
        .await
        .context("recording the rehearsal on the Backup")?;
    println!(
        "Backup {:?}: rehearsed: {}",
        backup.name_any(),
        outcome.annotation()
    );
    match outcome {
        Rehearsal::Ok { .. } => Ok(()),
        Rehearsal::Failed(_) => bail!("the rehearsal failed"),
    }
}

fn nonempty(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

/// `--from-seed` and `--for-shoot`: the backup another seed wrote, listed here through
/// its read-only location `seed-<name>` (docs/architecture.md#sibling-locations).
async fn resolve_source(
    client: &Client,
    ns: &str,
    restore: &mut Restore,
    flags: &RestoreFlags,
) -> anyhow::Result<()> {
    let backups: Api<Backup> = Api::namespaced(client.clone(), ns);
    if let Some(seed) = nonempty(&flags.from_seed) {
        let name = restore.spec.backup_name.clone().unwrap_or_default();
        let location = format!("seed-{seed}");
        let all = backups.list(&ListParams::default()).await?.items;
        let found = granary_velero_server::restore::validate::stored_in(&all, &location, &name)
            .map_err(|e| anyhow::anyhow!("--from-backup: {e} (namespace {ns})"))?;
        restore.spec.backup_name = Some(found.name_any());
    }
    if let Some(shoot) = nonempty(&flags.for_shoot) {
        let namespace = super::restore_spec::shoot_control_plane_namespace(shoot)
            .map_err(|e| anyhow::anyhow!("{}", describe_errors(&[e])))?;
        let all = backups.list(&ListParams::default()).await?.items;
        let locations: Api<granary_api::velero::BackupStorageLocation> =
            Api::namespaced(client.clone(), ns);
        let locations = locations.list(&ListParams::default()).await?.items;
        let newest = granary_velero_server::restore::validate::newest_of_namespace(
            &namespace, &all, &locations,
        )
        .with_context(|| {
            format!(
                "--for-shoot: no completed backup holds namespace {namespace} in namespace {ns}"
            )
        })?;
        println!(
            "Backup {:?} (location {}) is the newest completed backup of {namespace}.",
            newest.name_any(),
            newest.spec.storage_location.as_deref().unwrap_or("?")
        );
        restore.spec.backup_name = Some(newest.name_any());
    }
    Ok(())
}

/// Checks what velero's CLI checks on the server, then creates the Restore.
/// Creates the restore; with `waiting`, follows it to its end
/// ([`super::wait::wait`], as `backup create --wait`).
async fn create(
    client: &Client,
    ns: &str,
    restore: Restore,
    waiting: Option<super::wait::WaitOutput>,
) -> anyhow::Result<()> {
    let backups: Api<Backup> = Api::namespaced(client.clone(), ns);
    if let Some(b) = &restore.spec.backup_name {
        if backups.get_opt(b).await?.is_none() {
            bail!("--from-backup: backup {b:?} not found in namespace {ns}");
        }
    } else if let Some(s) = &restore.spec.schedule_name {
        let lp = ListParams::default().labels(&format!("{SCHEDULE_NAME_LABEL}={s}"));
        if backups.list(&lp).await?.items.is_empty() {
            bail!("--from-schedule: no backups found for the schedule {s:?} in namespace {ns}");
        }
    }
    let name = restore.name_any();
    let api: Api<Restore> = Api::namespaced(client.clone(), ns);
    create_in_velero_namespace(&api, &restore, "restore", &name, ns).await?;
    let say = |text: String| waiting.unwrap_or(super::wait::WaitOutput::Text).say(&text);
    say(format!("Restore request {name:?} submitted successfully."));
    let Some(output) = waiting else {
        say(format!(
            "Run `granary restore describe {name}` or `granary restore logs {name}` for more details."
        ));
        return Ok(());
    };
    say("Waiting for restore to complete. You may safely press ctrl-c to stop waiting - your restore will continue in the background.".into());
    let done = super::wait::wait(&api, &name, Duration::from_millis(500), output).await?;
    let ph = phase(&done);
    say(format!(
        "Restore completed with status: {ph}. You may check for more information using the commands `granary restore describe {name}` and `granary restore logs {name}`."
    ));
    if matches!(ph, RestorePhase::Failed | RestorePhase::FailedValidation) {
        let s = done.status.unwrap_or_default();
        let mut why: Vec<String> = s.failure_reason.into_iter().collect();
        why.extend(s.validation_errors.unwrap_or_default());
        bail!("restore {name} {ph}: {}", why.join("; "));
    }
    Ok(())
}

/// The named restores and the names not found, or all restores (optionally by
/// selector).
async fn fetch(
    api: &Api<Restore>,
    names: &[String],
    selector: Option<&str>,
) -> anyhow::Result<(Vec<Restore>, Vec<String>)> {
    if names.is_empty() {
        let lp = selector.map_or_else(ListParams::default, |s| ListParams::default().labels(s));
        let mut v = api.list(&lp).await.context("listing restores")?.items;
        v.sort_by_key(ResourceExt::name_any);
        return Ok((v, Vec::new()));
    }
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        match api
            .get_opt(name)
            .await
            .with_context(|| format!("getting restore {name}"))?
        {
            Some(r) => found.push(r),
            None => missing.push(name.clone()),
        }
    }
    Ok((found, missing))
}

/// An error naming the restores not found, if any.
fn all_found(ns: &str, missing: &[String]) -> anyhow::Result<()> {
    if !missing.is_empty() {
        bail!(
            "restore(s) not found in namespace {ns}: {}",
            missing.join(", ")
        );
    }
    Ok(())
}

async fn delete(
    api: &Api<Restore>,
    ns: &str,
    names: &[String],
    confirm: bool,
    all: bool,
) -> anyhow::Result<()> {
    match (names.is_empty(), all) {
        (true, false) => bail!("give the names of the restores to delete, or --all"),
        (false, true) => bail!("give either restore names or --all, not both"),
        _ => {}
    }
    // Nothing is deleted when one of the names is wrong.
    let (found, missing) = fetch(api, names, None).await?;
    all_found(ns, &missing)?;
    if found.is_empty() {
        println!("No restores found in namespace {ns}.");
        return Ok(());
    }
    let listed: Vec<String> = found.iter().map(ResourceExt::name_any).collect();
    if !confirm
        && !confirmed(&format!(
            "You are about to delete restore(s) {} and their data in object storage.",
            listed.join(", ")
        ))
    {
        // As velero: a "no" is an answer, not an error.
        println!("Cancelled.");
        return Ok(());
    }
    let mut errors = Vec::new();
    for name in &listed {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => println!(
                "Request to delete restore {name:?} submitted successfully.\nThe restore will be fully deleted after all associated data (restore files in object storage) are removed."
            ),
            Err(e) if is_not_found(&e) => {}
            Err(e) => errors.push(format!("deleting restore {name}: {e}")),
        }
    }
    if !errors.is_empty() {
        bail!("{}", errors.join("\n"));
    }
    Ok(())
}

/// Whether the restore has written its log (velero's rule for `logs`).
fn log_written(phase: RestorePhase) -> bool {
    matches!(
        phase,
        RestorePhase::Completed
            | RestorePhase::PartiallyFailed
            | RestorePhase::Failed
            | RestorePhase::WaitingForPluginOperations
            | RestorePhase::WaitingForPluginOperationsPartiallyFailed
            | RestorePhase::Finalizing
            | RestorePhase::FinalizingPartiallyFailed
    )
}

/// `describe --details`: the restore's results (every warning and error, by where it
/// belongs) and its resource list (each item with what happened to it), fetched through
/// DownloadRequests as velero's `describe --details` does. A file that cannot be had is
/// said, not fatal.
async fn describe_details(
    client: &Client,
    ns: &str,
    r: &Restore,
    options: &super::download::FetchOptions,
) -> String {
    use std::fmt::Write as _;
    let name = r.name_any();
    let mut o = String::new();
    if !log_written(phase(r)) {
        let _ = writeln!(
            o,
            "\nDetails: not available until the restore has finished."
        );
        return o;
    }
    let fetch = async |kind| -> anyhow::Result<Vec<u8>> {
        let mut buf = Vec::new();
        super::download::through_server(client, ns, kind, &name, options, &mut buf).await?;
        Ok(buf)
    };
    match fetch(DownloadTargetKind::RestoreResults)
        .await
        .and_then(|b| {
            serde_json::from_slice::<granary_velero::files::Results>(&b).map_err(Into::into)
        }) {
        Ok(results) => {
            for (title, set) in [("Warnings", &results.warnings), ("Errors", &results.errors)] {
                let _ = writeln!(o, "\n{title}:");
                if set.is_empty() {
                    let _ = writeln!(o, "  <none>");
                }
                for (scope, list) in [("Velero", &set.velero), ("Cluster", &set.cluster)] {
                    if !list.is_empty() {
                        let _ = writeln!(o, "  {scope}:");
                        for m in list {
                            let _ = writeln!(o, "    {m}");
                        }
                    }
                }
                if !set.namespaces.is_empty() {
                    let _ = writeln!(o, "  Namespaces:");
                    for (n, list) in &set.namespaces {
                        let _ = writeln!(o, "    {n}:");
                        for m in list {
                            let _ = writeln!(o, "      {m}");
                        }
                    }
                }
            }
        }
        Err(e) => {
            let _ = writeln!(o, "\nWarnings and errors: not available ({e:#})");
        }
    }
    match fetch(DownloadTargetKind::RestoreResourceList)
        .await
        .and_then(|b| {
            serde_json::from_slice::<std::collections::BTreeMap<String, Vec<String>>>(&b)
                .map_err(Into::into)
        }) {
        Ok(list) => {
            let _ = writeln!(o, "\nResource List:");
            if list.is_empty() {
                let _ = writeln!(o, "  <none>");
            }
            for (kind, items) in list {
                let _ = writeln!(o, "  {kind}:");
                for i in items {
                    let _ = writeln!(o, "    - {i}");
                }
            }
        }
        Err(e) => {
            let _ = writeln!(o, "\nResource List: not available ({e:#})");
        }
    }
    o
}

/// `restore logs`: a DownloadRequest of kind RestoreLog answered by the server, the
/// log gunzipped to stdout ([`super::download::through_server`], as `backup logs`).
/// The URL is a credential: it is never printed.
async fn logs(
    client: &Client,
    ns: &str,
    name: &str,
    fetch: &super::download::FetchOptions,
) -> anyhow::Result<()> {
    let api: Api<Restore> = Api::namespaced(client.clone(), ns);
    let r = api
        .get_opt(name)
        .await?
        .with_context(|| format!("restore {name:?} does not exist in namespace {ns}"))?;
    let ph = phase(&r);
    if !log_written(ph) {
        bail!(
            "logs for restore {name:?} are not available until it has finished processing (it is {ph}); try again when it is Completed, PartiallyFailed or Failed"
        );
    }
    let mut out = std::io::stdout();
    super::download::through_server(
        client,
        ns,
        DownloadTargetKind::RestoreLog,
        name,
        fetch,
        &mut out,
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_are_there_once_the_restore_has_finished() {
        assert!(log_written(RestorePhase::Completed));
        assert!(log_written(RestorePhase::PartiallyFailed));
        assert!(!log_written(RestorePhase::New));
        assert!(!log_written(RestorePhase::InProgress));
        assert!(!log_written(RestorePhase::FailedValidation));
    }
}
