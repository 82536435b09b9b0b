//! What `granary backup get` and `describe` print, as pure functions of the Backup (and,
//! for describe, of the other backups, the events and what was read from the store):
//! velero's columns and describe layout, plus Granary's "Waiting for" line that says
//! why a backup is not running yet.

use std::collections::BTreeMap;
use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::flags::format_label_selector;
use super::output::{go_time, short_human_duration, table, time_from_now};
use granary_api::velero::{
    Backup, BackupPhase, INTEGRITY_ANNOTATION, INTEGRITY_CHECKED_AT_ANNOTATION,
    INTEGRITY_REASON_ANNOTATION, REHEARSAL_ANNOTATION, REHEARSED_AT_ANNOTATION,
};
use granary_runtime::clock::from_k8s;
use granary_velero::files::{MessageSet, ResourceList};
use granary_velero_server::namespaces::{self, NamespaceScope};
use kube::ResourceExt;

/// The phase velero shows: `New` when unset, `Deleting` once a deletion started.
pub fn shown_phase(b: &Backup) -> String {
    if b.metadata.deletion_timestamp.is_some() {
        return "Deleting".into();
    }
    b.status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(BackupPhase::New)
        .to_string()
}

fn phase(b: &Backup) -> BackupPhase {
    b.status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(BackupPhase::New)
}

/// `status.expiration`, else creation + ttl as velero's printer estimates it.
fn expiration(b: &Backup) -> Option<DateTime<Utc>> {
    if let Some(e) = b.status.as_ref().and_then(|s| s.expiration) {
        return Some(e);
    }
    let created = from_k8s(b.metadata.creation_timestamp.as_ref()?.0);
    let ttl = b.spec.ttl.as_ref()?.to_delta().ok()?;
    (ttl > chrono::TimeDelta::zero()).then(|| created + ttl)
}

/// `granary backup get`: NAME STATUS ERRORS WARNINGS CREATED EXPIRES STORAGE LOCATION
/// SELECTOR.
pub fn backups_table(backups: &[Backup], now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = backups
        .iter()
        .map(|b| {
            let status = b.status.clone().unwrap_or_default();
            vec![
                b.metadata.name.clone().unwrap_or_default(),
                shown_phase(b),
                status.errors.unwrap_or(0).to_string(),
                status.warnings.unwrap_or(0).to_string(),
                b.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| go_time(&from_k8s(t.0)))
                    .unwrap_or_default(),
                time_from_now(expiration(b), now),
                b.spec.storage_location.clone().unwrap_or_default(),
                format_label_selector(b.spec.label_selector.as_ref()),
                b.annotations()
                    .get(INTEGRITY_ANNOTATION)
                    .cloned()
                    .unwrap_or_else(|| "<unchecked>".to_owned()),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "STATUS",
            "ERRORS",
            "WARNINGS",
            "CREATED",
            "EXPIRES",
            "STORAGE LOCATION",
            "SELECTOR",
            "INTEGRITY",
        ],
        &rows,
    )
}

fn scope(b: &Backup, live: &[String]) -> NamespaceScope {
    namespaces::resolve(
        b.spec.included_namespaces.as_deref().unwrap_or_default(),
        b.spec.excluded_namespaces.as_deref().unwrap_or_default(),
        live,
    )
}

/// Why `b` is not running, from the phases and positions of the `others` in its
/// namespace (the queue's own rules: a slot, and no namespace shared with a running
/// backup or one ahead in the queue). Empty when it is not waiting.
pub fn waiting_for(b: &Backup, others: &[Backup], live: &[String]) -> Vec<String> {
    let name = b.metadata.name.as_deref().unwrap_or_default();
    let position = |o: &Backup| o.status.as_ref().and_then(|s| s.queue_position);
    match phase(b) {
        BackupPhase::New => vec![
            "the backup queue to take it in (is `granary seed` or `granary server` running for this namespace?)".into(),
        ],
        BackupPhase::ReadyToStart => vec!["the backup controller to start it".into()],
        BackupPhase::WaitingForPluginOperations
        | BackupPhase::WaitingForPluginOperationsPartiallyFailed => {
            vec!["asynchronous plugin operations to finish".into()]
        }
        BackupPhase::Finalizing | BackupPhase::FinalizingPartiallyFailed => {
            vec!["the final upload of its metadata".into()]
        }
        BackupPhase::Queued => {
            // The queue controller's own word, when it has given it.
            if let Some(reason) = b
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(granary_velero_server::queue_controller::ANNOTATION_WAITING_FOR))
            {
                return vec![reason.clone()];
            }
            let mine = scope(b, live);
            let own_pos = position(b).unwrap_or(i64::MAX);
            let mut running = Vec::new();
            let mut out = Vec::new();
            for o in others {
                let other = o.metadata.name.as_deref().unwrap_or_default();
                if other == name {
                    continue;
                }
                let ahead = match phase(o) {
                    BackupPhase::ReadyToStart | BackupPhase::InProgress => {
                        running.push(other.to_string());
                        format!("running, {}", phase(o))
                    }
                    BackupPhase::Queued if position(o).unwrap_or(i64::MAX) < own_pos => {
                        format!("queued at position {}", position(o).unwrap_or_default())
                    }
                    _ => continue,
                };
                if let Some(ns) = namespaces::overlap(&mine, &scope(o, live)) {
                    let shared = if ns == "*" {
                        "both include all namespaces".to_string()
                    } else {
                        format!("both include namespace {ns}")
                    };
                    out.push(format!("backup {other} ({ahead}): {shared}"));
                }
            }
            if out.is_empty() {
                out.push(if running.is_empty() {
                    "the queue's next pass (no running backup blocks it)".to_string()
                } else {
                    format!(
                        "a free slot: {} backup(s) running ({}), --concurrent-backups limits how many run at once",
                        running.len(),
                        running.join(", ")
                    )
                });
            }
            out
        }
        _ => Vec::new(),
    }
}

/// One Kubernetes event about the backup, as describe lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventLine {
    pub type_: String,
    pub reason: String,
    pub last_seen: Option<DateTime<Utc>>,
    pub message: String,
}

/// What `describe --details` read from the backup's location.
#[derive(Clone, Debug, Default)]
pub struct Details {
    /// The items of `manifest.json.gz`, or why they could not be read.
    pub resources: Option<Result<ResourceList, String>>,
    /// The messages of `<name>-results.gz` (errors, warnings), or why not.
    pub results: Option<Result<(MessageSet, MessageSet), String>>,
}

/// Everything `describe` shows beside the Backup itself.
#[derive(Clone, Debug, Default)]
pub struct DescribeContext {
    pub now: DateTime<Utc>,
    pub waiting_for: Vec<String>,
    pub events: Option<Result<Vec<EventLine>, String>>,
    pub details: Option<Details>,
}

fn map_lines(map: Option<&BTreeMap<String, String>>, indent: usize) -> String {
    match map.filter(|m| !m.is_empty()) {
        None => "<none>".into(),
        Some(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(&format!("\n{}", " ".repeat(indent))),
    }
}

fn list_or(v: Option<&Vec<String>>, empty: &str) -> String {
    match v.filter(|v| !v.is_empty()) {
        None => empty.into(),
        Some(v) => v.join(", "),
    }
}

fn time_or_na(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| go_time(&t)).unwrap_or_else(|| "<n/a>".into())
}

/// `granary backup describe NAME`, velero's layout.
pub fn describe_backup(b: &Backup, ctx: &DescribeContext) -> String {
    let mut o = String::new();
    let name = b.metadata.name.as_deref().unwrap_or_default();
    let status = b.status.clone().unwrap_or_default();
    let spec = &b.spec;
    let _ = writeln!(o, "Name:         {name}");
    let _ = writeln!(
        o,
        "Namespace:    {}",
        b.metadata.namespace.as_deref().unwrap_or_default()
    );
    let _ = writeln!(
        o,
        "Labels:       {}",
        map_lines(b.metadata.labels.as_ref(), 14)
    );
    let _ = writeln!(
        o,
        "Annotations:  {}",
        map_lines(b.metadata.annotations.as_ref(), 14)
    );
    o.push('\n');
    let shown = shown_phase(b);
    let ph = phase(b);
    let hint = match ph {
        BackupPhase::Queued => status
            .queue_position
            .map(|p| format!(" (position {p} in the queue)"))
            .unwrap_or_default(),
        BackupPhase::Failed | BackupPhase::PartiallyFailed => {
            format!(" (run `granary backup logs {name}` for more information)")
        }
        _ => String::new(),
    };
    let _ = writeln!(o, "Phase:  {shown}{hint}");
    if let Some(reason) = status.failure_reason.as_deref().filter(|r| !r.is_empty()) {
        let _ = writeln!(o, "Failure reason:  {reason}");
    }
    if !ctx.waiting_for.is_empty() {
        let _ = writeln!(
            o,
            "Waiting for:  {}",
            ctx.waiting_for.join("\n              ")
        );
    }
    o.push('\n');
    if let Some(errs) = status.validation_errors.as_ref().filter(|e| !e.is_empty()) {
        let _ = writeln!(
            o,
            "Validation errors:  {}\n",
            errs.join("\n                    ")
        );
    }
    let _ = writeln!(o, "Errors:    {}", status.errors.unwrap_or(0));
    let _ = writeln!(o, "Warnings:  {}", status.warnings.unwrap_or(0));
    o.push('\n');
    let a = b.annotations();
    match a.get(INTEGRITY_ANNOTATION) {
        None => {
            let _ = writeln!(o, "Integrity:  not checked yet");
        }
        Some(verdict) => {
            let when = a
                .get(INTEGRITY_CHECKED_AT_ANNOTATION)
                .map(|t| format!(" (checked {t})"))
                .unwrap_or_default();
            let _ = writeln!(o, "Integrity:  {verdict}{when}");
            if let Some(reason) = a.get(INTEGRITY_REASON_ANNOTATION) {
                let _ = writeln!(o, "            {reason}");
            }
        }
    }
    if let Some(r) = a.get(REHEARSAL_ANNOTATION) {
        let when = a
            .get(REHEARSED_AT_ANNOTATION)
            .map(|t| format!(" ({t})"))
            .unwrap_or_default();
        let _ = writeln!(o, "Rehearsed:  {r}{when}");
    }
    o.push('\n');
    o.push_str(&spec_section(spec));
    let _ = writeln!(
        o,
        "Backup Format Version:  {}\n",
        status.format_version.as_deref().unwrap_or("<n/a>")
    );
    let _ = writeln!(o, "Started:    {}", time_or_na(status.start_timestamp));
    let _ = writeln!(
        o,
        "Completed:  {}\n",
        time_or_na(status.completion_timestamp)
    );
    let exp = expiration(b);
    let _ = writeln!(
        o,
        "Expiration:  {}\n",
        match exp {
            Some(t) if status.expiration.is_some() => go_time(&t),
            Some(t) => format!(
                "{} (estimated: {})",
                go_time(&t),
                time_from_now(Some(t), ctx.now)
            ),
            None => "<n/a>".into(),
        }
    );
    if let Some(p) = &status.progress {
        let (total, done) = (p.total_items.unwrap_or(0), p.items_backed_up.unwrap_or(0));
        if ph == BackupPhase::InProgress {
            let _ = writeln!(o, "Estimated total items to be backed up:  {total}");
            let _ = writeln!(o, "Items backed up so far:                 {done}\n");
        } else {
            let _ = writeln!(o, "Total items to be backed up:  {total}");
            let _ = writeln!(o, "Items backed up:              {done}\n");
        }
    }
    if let Some(details) = &ctx.details {
        describe_details(&mut o, details);
    }
    match &ctx.events {
        None => {}
        Some(Err(e)) => {
            let _ = writeln!(o, "Events:  <could not list events: {e}>");
        }
        Some(Ok(events)) if events.is_empty() => {
            let _ = writeln!(o, "Events:  <none>");
        }
        Some(Ok(events)) => {
            let _ = writeln!(o, "Events:");
            let rows: Vec<Vec<String>> = events
                .iter()
                .map(|e| {
                    vec![
                        e.type_.clone(),
                        e.reason.clone(),
                        e.last_seen
                            .map(|t| short_human_duration(ctx.now - t))
                            .unwrap_or_else(|| "<unknown>".into()),
                        e.message.clone(),
                    ]
                })
                .collect();
            for line in table(&["TYPE", "REASON", "AGE", "MESSAGE"], &rows).lines() {
                let _ = writeln!(o, "  {line}");
            }
        }
    }
    o
}

/// What a backup (or a schedule's template) selects and keeps, as velero's describers
/// print it: namespaces, resources, selectors, location, TTL, timeouts, order, hooks.
pub fn spec_section(spec: &granary_api::velero::BackupSpec) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Namespaces:");
    let _ = writeln!(
        o,
        "  Included:  {}",
        list_or(spec.included_namespaces.as_ref(), "*")
    );
    let _ = writeln!(
        o,
        "  Excluded:  {}",
        list_or(spec.excluded_namespaces.as_ref(), "<none>")
    );
    o.push('\n');
    let _ = writeln!(o, "Resources:");
    if spec.new_resource_filters_set().is_empty() {
        let _ = writeln!(
            o,
            "  Included:        {}",
            list_or(spec.included_resources.as_ref(), "*")
        );
        let _ = writeln!(
            o,
            "  Excluded:        {}",
            list_or(spec.excluded_resources.as_ref(), "<none>")
        );
        let cluster = match spec.include_cluster_resources {
            None => "auto",
            Some(true) => "included",
            Some(false) => "excluded",
        };
        let _ = writeln!(o, "  Cluster-scoped:  {cluster}");
    } else {
        for (label, v, empty) in [
            (
                "Included cluster-scoped:    ",
                &spec.included_cluster_scoped_resources,
                "<none>",
            ),
            (
                "Excluded cluster-scoped:    ",
                &spec.excluded_cluster_scoped_resources,
                "<none>",
            ),
            (
                "Included namespace-scoped:  ",
                &spec.included_namespace_scoped_resources,
                "*",
            ),
            (
                "Excluded namespace-scoped:  ",
                &spec.excluded_namespace_scoped_resources,
                "<none>",
            ),
        ] {
            let _ = writeln!(o, "  {label}{}", list_or(v.as_ref(), empty));
        }
    }
    o.push('\n');
    let _ = writeln!(
        o,
        "Label selector:  {}\n",
        format_label_selector(spec.label_selector.as_ref())
    );
    let or = match spec.or_label_selectors.as_ref().filter(|v| !v.is_empty()) {
        None => "<none>".to_string(),
        Some(v) => v
            .iter()
            .map(|s| format_label_selector(Some(s)))
            .collect::<Vec<_>>()
            .join(" or "),
    };
    let _ = writeln!(o, "Or label selector:  {or}\n");
    let _ = writeln!(
        o,
        "Storage Location:  {}\n",
        spec.storage_location.as_deref().unwrap_or_default()
    );
    let duration = |d: &Option<granary_api::velero::Duration>| {
        d.as_ref().map(|d| d.to_string()).unwrap_or_default()
    };
    let _ = writeln!(o, "TTL:  {}\n", duration(&spec.ttl));
    let _ = writeln!(
        o,
        "CSISnapshotTimeout:    {}",
        duration(&spec.csi_snapshot_timeout)
    );
    let _ = writeln!(
        o,
        "ItemOperationTimeout:  {}\n",
        duration(&spec.item_operation_timeout)
    );
    if let Some(orders) = spec.ordered_resources.as_ref().filter(|m| !m.is_empty()) {
        let _ = writeln!(o, "Resource order:");
        for (kind, order) in orders {
            let _ = writeln!(o, "  {kind}: {order}");
        }
        o.push('\n');
    }
    let hooks = spec
        .hooks
        .as_ref()
        .and_then(|h| h.resources.as_ref())
        .map_or(0, Vec::len);
    let _ = writeln!(
        o,
        "Hooks:  {}\n",
        if hooks == 0 {
            "<none>".to_string()
        } else {
            format!("{hooks} resource hook(s)")
        }
    );
    o
}

fn messages(o: &mut String, title: &str, set: &MessageSet) {
    if set.is_empty() {
        let _ = writeln!(o, "{title}:  <none>");
        return;
    }
    let _ = writeln!(o, "{title}:");
    let _ = writeln!(o, "  Velero:   {}", lines_or_none(&set.velero, 12));
    let _ = writeln!(o, "  Cluster:  {}", lines_or_none(&set.cluster, 12));
    if set.namespaces.is_empty() {
        let _ = writeln!(o, "  Namespaces: <none>");
    } else {
        let _ = writeln!(o, "  Namespaces:");
        for (ns, msgs) in &set.namespaces {
            let _ = writeln!(o, "    {ns}:  {}", lines_or_none(msgs, ns.len() + 7));
        }
    }
}

fn lines_or_none(v: &[String], indent: usize) -> String {
    if v.is_empty() {
        "<none>".into()
    } else {
        v.join(&format!("\n{}", " ".repeat(indent)))
    }
}

fn describe_details(o: &mut String, d: &Details) {
    match &d.results {
        None => {}
        Some(Err(e)) => {
            let _ = writeln!(o, "Errors and warnings:  <could not read them: {e}>\n");
        }
        Some(Ok((errors, warnings))) => {
            messages(o, "Error messages", errors);
            messages(o, "Warning messages", warnings);
            o.push('\n');
        }
    }
    match &d.resources {
        None => {}
        Some(Err(e)) => {
            let _ = writeln!(
                o,
                "Resource List:  <could not read the backup's manifest: {e}>\n"
            );
        }
        Some(Ok(list)) if list.0.is_empty() => {
            let _ = writeln!(o, "Resource List:  <none>\n");
        }
        Some(Ok(list)) => {
            let _ = writeln!(o, "Resource List:");
            for (gvk, items) in &list.0 {
                let _ = writeln!(o, "  {gvk}:");
                for item in items {
                    let _ = writeln!(o, "    - {item}");
                }
            }
            o.push('\n');
        }
    }
}

#[cfg(test)]
mod tests;
