//! `granary restore create|get|describe|logs|delete`: the requests velero's restore
//! commands make, against the same Restore objects; the restore controller of `granary
//! seed`/`granary server` does the work. What flags become ([`build_restore`]) and what
//! is printed ([`restores_table`], [`describe_restore`]) are pure and tested below.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Api, Client, ResourceExt};

use super::backup_spec::{describe_errors, list};
use super::flags::{self, FlagError, format_label_selector, take};
use super::output::{self, OutputFormat, go_time};
use super::{Target, confirmed, is_conflict, is_not_found};
use crate::api::velero::{
    Backup, DownloadRequest, DownloadRequestSpec, DownloadTarget, DownloadTargetKind, PolicyType,
    Restore, RestorePhase, RestoreSpec, RestoreStatusSpec, SCHEDULE_NAME_LABEL,
    UploaderConfigForRestore,
};
use crate::runtime::clock::from_k8s;

/// Set by the restore controller on a Restore waiting in the concurrent-restore queue:
/// what it waits for.
pub const ANNOTATION_WAITING_FOR: &str = "granary.gardener.cloud/restore-waiting-for";
/// Set by the restore controller on a waiting Restore: its place in the queue (1 next).
pub const ANNOTATION_QUEUE_POSITION: &str = "granary.gardener.cloud/restore-queue-position";

/// How long `logs` waits for the server to answer its DownloadRequest (velero's
/// `--timeout` default).
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// The flags of `granary restore create` as given (unparsed strings).
#[derive(Clone, Debug, Default)]
pub struct RestoreFlags {
    pub from_backup: Option<String>,
    pub from_schedule: Option<String>,
    /// `--include-namespaces`; `None` means velero's default `*`.
    pub include_namespaces: Option<Vec<String>>,
    pub exclude_namespaces: Vec<String>,
    pub include_resources: Vec<String>,
    pub exclude_resources: Vec<String>,
    pub include_cluster_resources: Option<bool>,
    /// `--namespace-mappings src1:dst1,src2:dst2` (repeatable).
    pub namespace_mappings: Vec<String>,
    pub existing_resource_policy: Option<String>,
    pub restore_volumes: Option<bool>,
    pub preserve_nodeports: Option<bool>,
    pub status_include_resources: Vec<String>,
    pub status_exclude_resources: Vec<String>,
    pub selector: Option<String>,
    pub or_selector: Option<String>,
    /// `--labels k=v,…` (repeatable), for the Restore itself.
    pub labels: Vec<String>,
}

/// A `granary restore` subcommand with its flags.
#[derive(Clone, Debug)]
pub enum RestoreCommand {
    Create {
        /// `None`: velero's `<backup or schedule>-<yyyyMMddHHmmss>`.
        name: Option<String>,
        flags: Box<RestoreFlags>,
        wait: bool,
        /// `-o json|yaml`: print the Restore and create nothing.
        output: Option<OutputFormat>,
    },
    Get {
        names: Vec<String>,
        selector: Option<String>,
        output: OutputFormat,
    },
    Describe {
        names: Vec<String>,
    },
    Logs {
        name: String,
        timeout: Duration,
    },
    Delete {
        names: Vec<String>,
        confirm: bool,
        all: bool,
    },
}

/// `--namespace-mappings`: `src:dst` pairs separated by commas, both namespace names.
fn parse_namespace_mappings(values: &[String]) -> Result<BTreeMap<String, String>, FlagError> {
    let flag = "--namespace-mappings";
    let namespace = |n: &str| n.len() <= 63 && !n.contains('.') && flags::valid_object_name(n);
    let mut out = BTreeMap::new();
    for value in values {
        for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
            let (from, to) = pair
                .split_once(':')
                .map(|(f, t)| (f.trim(), t.trim()))
                .ok_or_else(|| FlagError::new(flag, value, format!("{pair:?} is not src:dst")))?;
            if let Some(bad) = [from, to].into_iter().find(|n| !namespace(n)) {
                return Err(FlagError::new(
                    flag,
                    value,
                    format!("{bad:?} is not a valid namespace name"),
                ));
            }
            out.insert(from.to_string(), to.to_string());
        }
    }
    Ok(out)
}

/// The flag that sets a field of the spec, for the spec's own validation messages.
fn flag_of(path: &str) -> &str {
    let field = path.trim_start_matches("spec.");
    let field = field.split('[').next().unwrap_or(field);
    match field {
        "backupName" => "--from-backup",
        "scheduleName" => "--from-schedule",
        "includedNamespaces" => "--include-namespaces",
        "excludedNamespaces" => "--exclude-namespaces",
        "includedResources" => "--include-resources",
        "excludedResources" => "--exclude-resources",
        "namespaceMapping" => "--namespace-mappings",
        "labelSelector" => "--selector",
        "orLabelSelectors" => "--or-selector",
        "existingResourcePolicy" => "--existing-resource-policy",
        "restoreStatus.includedResources" => "--status-include-resources",
        "restoreStatus.excludedResources" => "--status-exclude-resources",
        _ => path,
    }
}

/// The Restore velero's `restore create` would create (`pkg/cmd/cli/restore/create.go`),
/// or every problem with the flags. `now` names it when `name` is not given, in the
/// user's local time as velero does.
pub fn build_restore<Tz: chrono::TimeZone>(
    name: Option<&str>,
    namespace: &str,
    f: &RestoreFlags,
    now: DateTime<Tz>,
) -> Result<Restore, Vec<FlagError>>
where
    Tz::Offset: std::fmt::Display,
{
    let mut errs = Vec::new();
    let (backup, schedule) = (nonempty(&f.from_backup), nonempty(&f.from_schedule));
    match (backup, schedule) {
        (Some(_), Some(s)) => errs.push(FlagError::new(
            "--from-schedule",
            s,
            "either a backup or schedule must be specified, but not both",
        )),
        (None, None) => errs.push(FlagError::new(
            "--from-backup",
            "",
            "either a backup (--from-backup) or a schedule (--from-schedule) must be specified",
        )),
        _ => {}
    }
    let name = match name {
        Some(n) => n.to_string(),
        None => format!(
            "{}-{}",
            schedule.or(backup).unwrap_or_default(),
            now.format("%Y%m%d%H%M%S")
        ),
    };
    if !flags::valid_object_name(&name) {
        errs.push(FlagError::new(
            "NAME",
            &name,
            "a restore name must be lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters",
        ));
    }
    let (label_selector, or_label_selectors) =
        flags::selectors(&mut errs, f.selector.as_deref(), f.or_selector.as_deref());
    let labels = take(&mut errs, flags::parse_labels("--labels", &f.labels)).unwrap_or_default();
    let mapping =
        take(&mut errs, parse_namespace_mappings(&f.namespace_mappings)).unwrap_or_default();
    let policy = nonempty(&f.existing_resource_policy);
    if let Some(p) = policy
        && PolicyType::parse(p).is_none()
    {
        errs.push(FlagError::new(
            "--existing-resource-policy",
            p,
            "existing-resource-policy has invalid value, it accepts only none, update as value",
        ));
    }
    if f.restore_volumes == Some(true) {
        errs.push(FlagError::new(
            "--restore-volumes",
            "true",
            "Granary does not restore volume data (no snapshots, no file-system backups); leave the flag out or give --restore-volumes=false",
        ));
    }
    let status_included = list(&f.status_include_resources);
    let status_excluded = list(&f.status_exclude_resources);
    if status_included.is_none() && status_excluded.is_some() {
        // velero's CLI drops it silently; a flag that does nothing is refused instead.
        errs.push(FlagError::new(
            "--status-exclude-resources",
            &f.status_exclude_resources.join(","),
            "only narrows --status-include-resources; give that flag too",
        ));
    }
    let spec = RestoreSpec {
        backup_name: backup.map(String::from),
        schedule_name: schedule.map(String::from),
        included_namespaces: match &f.include_namespaces {
            None => Some(vec!["*".to_string()]),
            Some(v) => list(v),
        },
        excluded_namespaces: list(&f.exclude_namespaces),
        included_resources: list(&f.include_resources),
        excluded_resources: list(&f.exclude_resources),
        namespace_mapping: (!mapping.is_empty()).then_some(mapping),
        label_selector,
        or_label_selectors,
        restore_pvs: f.restore_volumes,
        restore_status: status_included.map(|included| RestoreStatusSpec {
            included_resources: Some(included),
            excluded_resources: status_excluded,
        }),
        preserve_node_ports: f.preserve_nodeports,
        include_cluster_resources: f.include_cluster_resources,
        hooks: Some(Default::default()),
        existing_resource_policy: policy.map(String::from),
        item_operation_timeout: Some(crate::api::velero::Duration::from_delta(
            chrono::TimeDelta::zero(),
        )),
        uploader_config: Some(UploaderConfigForRestore::default()),
        ..RestoreSpec::default()
    };
    // The server's own checks, each told back as the flag that set the field (once per
    // flag: the checks above already said what is wrong with it).
    for e in spec.validate_at("spec") {
        let flag = flag_of(&e.path);
        if !errs.iter().any(|have| have.flag == flag) {
            errs.push(FlagError::new(flag, "", e.message));
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut restore = Restore::new(&name, spec);
    restore.metadata = ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_string()),
        labels: (!labels.is_empty()).then_some(labels),
        ..ObjectMeta::default()
    };
    Ok(restore)
}

/// A flag's value, trimmed; `None` when unset or blank.
fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

fn phase(r: &Restore) -> RestorePhase {
    r.status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(RestorePhase::New)
}

/// A timestamp as a Go `*metav1.Time` prints in a table: `<nil>` when unset.
fn table_time(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| go_time(&t)).unwrap_or_else(|| "<nil>".into())
}

/// `granary restore get`: velero's NAME BACKUP STATUS STARTED COMPLETED ERRORS WARNINGS
/// CREATED SELECTOR.
pub fn restores_table(restores: &[Restore]) -> String {
    let rows: Vec<Vec<String>> = restores
        .iter()
        .map(|r| {
            let status = r.status.clone().unwrap_or_default();
            vec![
                r.name_any(),
                r.spec.backup_name.clone().unwrap_or_default(),
                phase(r).to_string(),
                table_time(status.start_timestamp),
                table_time(status.completion_timestamp),
                status.errors.unwrap_or(0).to_string(),
                status.warnings.unwrap_or(0).to_string(),
                table_time(
                    r.metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| from_k8s(t.0)),
                ),
                format_label_selector(r.spec.label_selector.as_ref()),
            ]
        })
        .collect();
    output::table(
        &[
            "NAME",
            "BACKUP",
            "STATUS",
            "STARTED",
            "COMPLETED",
            "ERRORS",
            "WARNINGS",
            "CREATED",
            "SELECTOR",
        ],
        &rows,
    )
}

/// Why a restore that has not started is not running: the restore controller's word
/// (its annotations), else that nothing has taken it in yet. Empty once it runs.
pub fn restore_waiting_for(r: &Restore) -> Option<String> {
    if phase(r) != RestorePhase::New {
        return None;
    }
    let annotations = r.annotations();
    let position = annotations
        .get(ANNOTATION_QUEUE_POSITION)
        .map(|p| format!(" (position {p} in the restore queue)"))
        .unwrap_or_default();
    Some(match annotations.get(ANNOTATION_WAITING_FOR) {
        Some(why) => format!("{why}{position}"),
        None if !position.is_empty() => format!("a free restore slot{position}"),
        None => "the restore controller to take it in (is `granary seed` or `granary server` running for this namespace?)".into(),
    })
}

fn joined_or(v: Option<&Vec<String>>, empty: &str) -> String {
    match v.filter(|v| !v.is_empty()) {
        Some(v) => v.join(", "),
        None => empty.into(),
    }
}

fn bool_or(b: Option<bool>, unset: &str) -> String {
    b.map_or_else(|| unset.into(), |b| b.to_string())
}

fn map_or_none(map: &BTreeMap<String, String>, indent: usize) -> String {
    if map.is_empty() {
        return "<none>".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(&format!("\n{}", " ".repeat(indent)))
}

/// `granary restore describe NAME`: velero's layout, plus what a restore that has not
/// started waits for.
pub fn describe_restore(r: &Restore) -> String {
    let mut o = String::new();
    let name = r.name_any();
    let status = r.status.clone().unwrap_or_default();
    let spec = &r.spec;
    let _ = writeln!(o, "Name:         {name}");
    let _ = writeln!(o, "Namespace:    {}", r.namespace().unwrap_or_default());
    let _ = writeln!(o, "Labels:       {}", map_or_none(r.labels(), 14));
    let _ = writeln!(o, "Annotations:  {}", map_or_none(r.annotations(), 14));
    o.push('\n');
    let ph = phase(r);
    let deleting = if r.metadata.deletion_timestamp.is_some() {
        " (Deleting)"
    } else {
        ""
    };
    let hint = if matches!(ph, RestorePhase::Failed | RestorePhase::PartiallyFailed) {
        format!(" (run `granary restore logs {name}` for more information)")
    } else {
        String::new()
    };
    let _ = writeln!(o, "Phase:  {ph}{deleting}{hint}");
    if let Some(reason) = status.failure_reason.as_deref().filter(|r| !r.is_empty()) {
        let _ = writeln!(o, "Failure reason:  {reason}");
    }
    if let Some(waiting) = restore_waiting_for(r) {
        let _ = writeln!(o, "Waiting for:  {waiting}");
    }
    if let Some(p) = &status.progress {
        let (total, done) = (p.total_items.unwrap_or(0), p.items_restored.unwrap_or(0));
        if ph == RestorePhase::InProgress {
            let _ = writeln!(o, "Estimated total items to be restored:  {total}");
            let _ = writeln!(o, "Items restored so far:                 {done}");
        } else {
            let _ = writeln!(o, "Total items to be restored:  {total}");
            let _ = writeln!(o, "Items restored:              {done}");
        }
    }
    o.push('\n');
    let na = |t: Option<DateTime<Utc>>| t.map(|t| go_time(&t)).unwrap_or_else(|| "<n/a>".into());
    let _ = writeln!(o, "Started:    {}", na(status.start_timestamp));
    let _ = writeln!(o, "Completed:  {}", na(status.completion_timestamp));
    if let Some(errs) = status.validation_errors.as_ref().filter(|e| !e.is_empty()) {
        let _ = writeln!(
            o,
            "\nValidation errors:  {}",
            errs.join("\n                    ")
        );
    }
    o.push('\n');
    let _ = writeln!(o, "Warnings:  {}", status.warnings.unwrap_or(0));
    let _ = writeln!(o, "Errors:    {}", status.errors.unwrap_or(0));
    o.push('\n');
    let _ = writeln!(
        o,
        "Backup:  {}",
        spec.backup_name.as_deref().unwrap_or_default()
    );
    if let Some(s) = spec.schedule_name.as_deref().filter(|s| !s.is_empty()) {
        let _ = writeln!(o, "Schedule:  {s}");
    }
    o.push('\n');
    let all = "all namespaces found in the backup";
    let included = match spec.included_namespaces.as_deref() {
        Some([only]) if only == "*" => all.to_string(),
        other => joined_or(other.map(<[String]>::to_vec).as_ref(), all),
    };
    let _ = writeln!(o, "Namespaces:\n  Included:  {included}");
    let _ = writeln!(
        o,
        "  Excluded:  {}",
        joined_or(spec.excluded_namespaces.as_ref(), "<none>")
    );
    o.push('\n');
    let _ = writeln!(
        o,
        "Resources:\n  Included:        {}",
        joined_or(spec.included_resources.as_ref(), "*")
    );
    let _ = writeln!(
        o,
        "  Excluded:        {}",
        joined_or(spec.excluded_resources.as_ref(), "<none>")
    );
    let cluster = match spec.include_cluster_resources {
        None => "auto",
        Some(true) => "included",
        Some(false) => "excluded",
    };
    let _ = writeln!(o, "  Cluster-scoped:  {cluster}");
    o.push('\n');
    let mapping = spec.namespace_mapping.clone().unwrap_or_default();
    let _ = writeln!(o, "Namespace mappings:  {}", map_or_none(&mapping, 21));
    o.push('\n');
    let _ = writeln!(
        o,
        "Label selector:  {}",
        format_label_selector(spec.label_selector.as_ref())
    );
    o.push('\n');
    let or = spec
        .or_label_selectors
        .as_ref()
        .filter(|v| !v.is_empty())
        .map_or_else(
            || "<none>".to_string(),
            |v| {
                v.iter()
                    .map(|s| format_label_selector(Some(s)))
                    .collect::<Vec<_>>()
                    .join(" or ")
            },
        );
    let _ = writeln!(o, "Or label selector:  {or}");
    o.push('\n');
    let _ = writeln!(o, "Restore PVs:  {}", bool_or(spec.restore_pvs, "auto"));
    o.push('\n');
    let _ = writeln!(
        o,
        "Existing Resource Policy:   {}",
        spec.existing_resource_policy
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("<none>")
    );
    let _ = writeln!(
        o,
        "ItemOperationTimeout:       {}",
        spec.item_operation_timeout
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_else(|| "0s".into())
    );
    o.push('\n');
    let _ = writeln!(
        o,
        "Preserve Service NodePorts:  {}",
        bool_or(spec.preserve_node_ports, "auto")
    );
    if let Some(rs) = &spec.restore_status {
        let _ = writeln!(
            o,
            "\nRestore status of:\n  Included:  {}\n  Excluded:  {}",
            joined_or(rs.included_resources.as_ref(), "<none>"),
            joined_or(rs.excluded_resources.as_ref(), "<none>")
        );
    }
    if let Some(h) = &status.hook_status {
        let _ = writeln!(
            o,
            "\nHooksAttempted:  {}\nHooksFailed:     {}",
            h.hooks_attempted.unwrap_or(0),
            h.hooks_failed.unwrap_or(0)
        );
    }
    o
}

/// Runs one `granary restore` subcommand.
pub async fn run(target: &Target, command: RestoreCommand) -> anyhow::Result<()> {
    let ns = target.namespace.as_str();
    if let RestoreCommand::Create {
        name,
        flags,
        wait,
        output: format,
    } = command
    {
        let restore = build_restore(name.as_deref(), ns, &flags, chrono::Local::now())
            .map_err(|errs| anyhow::anyhow!("{}", describe_errors(&errs)))?;
        if let Some(format) = format {
            print!("{}", output::objects(format, &[restore], true)?);
            return Ok(());
        }
        let client = target.client().await?;
        return create(&client, ns, restore, wait).await;
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
            match format {
                OutputFormat::Table if found.is_empty() && missing.is_empty() => {
                    eprintln!("No restores found in namespace {ns}.");
                }
                OutputFormat::Table if found.is_empty() => {}
                OutputFormat::Table => print!("{}", restores_table(&found)),
                other => print!("{}", output::objects(other, &found, names.len() == 1)?),
            }
            all_found(ns, &missing)
        }
        RestoreCommand::Describe { names } => {
            let (found, missing) = fetch(&api, &names, None).await?;
            all_found(ns, &missing)?;
            let texts: Vec<String> = found.iter().map(describe_restore).collect();
            print!("{}", texts.join("\n"));
            Ok(())
        }
        RestoreCommand::Logs { name, timeout } => logs(&client, ns, &name, timeout).await,
        RestoreCommand::Delete {
            names,
            confirm,
            all,
        } => delete(&api, ns, &names, confirm, all).await,
    }
}

/// Checks what velero's CLI checks on the server, then creates the Restore.
async fn create(client: &Client, ns: &str, restore: Restore, wait: bool) -> anyhow::Result<()> {
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
    match api.create(&PostParams::default(), &restore).await {
        Ok(_) => {}
        Err(e) if is_conflict(&e) => bail!("restore {name:?} already exists in namespace {ns}"),
        Err(e) if is_not_found(&e) => {
            bail!("namespace {ns} does not exist: give the Velero namespace with -n")
        }
        Err(e) => return Err(e).with_context(|| format!("creating restore {name}")),
    }
    println!("Restore request {name:?} submitted successfully.");
    if !wait {
        println!(
            "Run `granary restore describe {name}` or `granary restore logs {name}` for more details."
        );
        return Ok(());
    }
    println!(
        "Waiting for restore to complete. You may safely press ctrl-c to stop waiting - your restore will continue in the background."
    );
    let done = wait_until_done(&api, &name).await?;
    let ph = phase(&done);
    println!(
        "Restore completed with status: {ph}. You may check for more information using the commands `granary restore describe {name}` and `granary restore logs {name}`."
    );
    if matches!(ph, RestorePhase::Failed | RestorePhase::FailedValidation) {
        let s = done.status.unwrap_or_default();
        let mut why: Vec<String> = s.failure_reason.into_iter().collect();
        why.extend(s.validation_errors.unwrap_or_default());
        bail!("restore {name} {ph}: {}", why.join("; "));
    }
    Ok(())
}

/// Polls the restore until its phase is terminal, telling each new phase, wait reason or
/// progress on stderr.
async fn wait_until_done(api: &Api<Restore>, name: &str) -> anyhow::Result<Restore> {
    let mut told = String::new();
    let mut unreachable_since: Option<std::time::Instant> = None;
    loop {
        match api.get_opt(name).await {
            Ok(Some(r)) => {
                unreachable_since = None;
                let progress = r.status.as_ref().and_then(|s| s.progress.clone());
                let line = match (restore_waiting_for(&r), progress) {
                    (Some(why), _) => format!("{}: waiting for {why}", phase(&r)),
                    (None, Some(p)) => format!(
                        "{}: {}/{} items restored",
                        phase(&r),
                        p.items_restored.unwrap_or(0),
                        p.total_items.unwrap_or(0)
                    ),
                    (None, None) => phase(&r).to_string(),
                };
                if line != told {
                    eprintln!("{name}: {line}");
                    told = line;
                }
                if phase(&r).is_terminal() {
                    return Ok(r);
                }
            }
            Ok(None) => bail!("restore {name} was deleted while waiting for it"),
            Err(e) => {
                let since = *unreachable_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > Duration::from_secs(60) {
                    bail!("watching restore {name}: {e}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
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
        bail!("not deleted: the answer was not Y (use --confirm to skip the question)");
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

/// The DownloadRequest velero's `downloadrequest.Stream` creates for one file of a
/// Restore: named `<restore>-<random UUID>`.
pub fn download_request(ns: &str, restore: &str, kind: DownloadTargetKind) -> DownloadRequest {
    let mut req = DownloadRequest::new(
        &format!("{restore}-{}", uuid::Uuid::new_v4()),
        DownloadRequestSpec {
            target: DownloadTarget {
                kind,
                name: restore.to_string(),
            },
        },
    );
    req.metadata.namespace = Some(ns.to_string());
    req
}

/// `restore logs`: a DownloadRequest of kind RestoreLog, its URL once the server has
/// signed it, the log gunzipped to stdout. The URL is a credential: it is never printed.
async fn logs(client: &Client, ns: &str, name: &str, timeout: Duration) -> anyhow::Result<()> {
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
    let requests: Api<DownloadRequest> = Api::namespaced(client.clone(), ns);
    let req = requests
        .create(
            &PostParams::default(),
            &download_request(ns, name, DownloadTargetKind::RestoreLog),
        )
        .await
        .with_context(|| format!("creating a DownloadRequest for the log of restore {name}"))?;
    let req_name = req.name_any();
    let deadline = tokio::time::Instant::now() + timeout;
    let url = loop {
        let current = requests.get_opt(&req_name).await.ok().flatten();
        if let Some(url) = current
            .and_then(|r| r.status)
            .and_then(|s| s.download_url)
            .filter(|u| !u.is_empty())
        {
            break url;
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "download request download url timeout, check the server's logs for errors (is `granary seed` or `granary server` running for namespace {ns}?); the backup storage location may not be available"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let body = fetch_url(&url, timeout).await?;
    // Stores that set Content-Encoding have the body decompressed on the way already.
    let text = if body.starts_with(&[0x1f, 0x8b]) {
        crate::velero::files::gunzip_limited(&body[..], super::store::MAX_FILE_BYTES)
            .context("the restore log is not a valid gzip file")?
    } else {
        body
    };
    use std::io::Write;
    std::io::stdout().write_all(&text)?;
    Ok(())
}

/// GETs a signed download URL; errors never carry the URL (its signature is a secret).
async fn fetch_url(url: &str, timeout: Duration) -> anyhow::Result<Vec<u8>> {
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| anyhow::anyhow!("HTTP client: {}", e.without_url()))?;
    let resp = http
        .get(url)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("downloading the restore log: {}", e.without_url()))?;
    let status = resp.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        bail!("downloading the restore log: file not found in the backup storage location");
    }
    if !status.is_success() {
        bail!("downloading the restore log: the storage answered {status}");
    }
    Ok(resp
        .bytes()
        .await
        .map_err(|e| anyhow::anyhow!("downloading the restore log: {}", e.without_url()))?
        .to_vec())
}

#[cfg(test)]
#[path = "restore_tests.rs"]
mod tests;
