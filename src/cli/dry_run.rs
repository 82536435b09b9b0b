//! `granary backup create NAME --dry-run` (beyond Velero): what the backup would hold,
//! collected by the backup runner itself ([`granary_velero_server::backup::collect`]: the
//! same discovery, filters, item actions and tarball writer, the tarball going nowhere),
//! and which running or queued backups it would wait for, by the queue's own overlap
//! test. Nothing is created in the cluster and the object store is never opened.

use std::collections::{BTreeMap, HashMap};

use anyhow::bail;
use chrono::Utc;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, Client};
use serde::Serialize;

use super::backup_spec::{BackupFlags, build_backup, describe_errors};
use super::output::{OutputFormat, table};
use granary_api::velero::{Backup, BackupPhase};
use granary_velero::files::MessageSet;
use granary_velero::manifest::ManifestItem;
use granary_velero_server::backup::{self, CollectRequest};
use granary_velero_server::namespaces::overlap;
use granary_velero_server::queue_controller::scope_of;

/// Items per list page: Velero's default `clientPageSize`.
const PAGE_SIZE: u32 = 500;

/// A backup the dry-run backup would share namespaces with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overlap {
    pub backup: String,
    /// Its phase (`New`, `Queued`, `ReadyToStart`, `InProgress`).
    pub phase: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<i64>,
    /// A namespace both include (`*`: both include every namespace).
    pub namespace: String,
    pub reason: String,
}

/// Everything `--dry-run` prints.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DryRun {
    pub backup: String,
    pub namespace: String,
    pub total_items: usize,
    /// Items per `resource.group`, in resource order.
    pub counts: BTreeMap<String, usize>,
    /// The manifest items in the order the backup would write them.
    pub items: Vec<ManifestItem>,
    pub overlaps: Vec<Overlap>,
    pub errors: MessageSet,
    pub warnings: MessageSet,
}

/// The unfinished backups among `others` that `mine` would share a namespace with, in
/// the order the queue sees them (running first, then by queue position, then new).
pub fn overlaps(mine: &Backup, others: &[Backup], live: &[String]) -> Vec<Overlap> {
    let own = scope_of(mine, live);
    let own_name = mine.metadata.name.as_deref().unwrap_or_default();
    let mut out: Vec<(u8, i64, Overlap)> = Vec::new();
    for o in others {
        let name = o.metadata.name.as_deref().unwrap_or_default();
        if name == own_name || o.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let status = o.status.clone().unwrap_or_default();
        let phase = status.phase.unwrap_or(BackupPhase::New);
        let position = status.queue_position;
        let (rank, state) = match phase {
            BackupPhase::ReadyToStart | BackupPhase::InProgress => (0, format!("running, {phase}")),
            BackupPhase::Queued => (
                1,
                format!("queued at position {}", position.unwrap_or_default()),
            ),
            BackupPhase::New => (2, "new, not yet queued".to_string()),
            _ => continue,
        };
        let Some(namespace) = overlap(&own, &scope_of(o, live)) else {
            continue;
        };
        let shared = if namespace == "*" {
            "both include all namespaces".to_string()
        } else {
            format!("both include namespace {namespace}")
        };
        out.push((
            rank,
            position.unwrap_or(i64::MAX),
            Overlap {
                backup: name.to_string(),
                phase: phase.to_string(),
                queue_position: (phase == BackupPhase::Queued).then_some(position).flatten(),
                namespace,
                reason: format!("backup {name} ({state}): {shared}"),
            },
        ));
    }
    out.sort_by(|a, b| (a.0, a.1, &a.2.backup).cmp(&(b.0, b.1, &b.2.backup)));
    out.into_iter().map(|(_, _, o)| o).collect()
}

fn resource_name(i: &ManifestItem) -> String {
    granary_velero::resource::GroupResource::new(i.group.clone(), i.resource.clone()).to_string()
}

/// The report as text for people: the items, the counts, the overlaps, the messages.
pub fn render_text(d: &DryRun) -> String {
    let by_uid: HashMap<&str, &ManifestItem> = d
        .items
        .iter()
        .filter(|i| !i.uid.is_empty())
        .map(|i| (i.uid.as_str(), i))
        .collect();
    let rows: Vec<Vec<String>> = d
        .items
        .iter()
        .map(|i| {
            let owners: Vec<String> = i
                .owners
                .iter()
                .map(|uid| match by_uid.get(uid.as_str()) {
                    Some(o) => format!("{}/{}", resource_name(o), o.name),
                    None => format!("{uid} (not in the backup)"),
                })
                .collect();
            vec![
                resource_name(i),
                i.namespace.clone(),
                i.name.clone(),
                owners.join(","),
            ]
        })
        .collect();
    let mut out = format!(
        "Dry run of backup {:?} in namespace {}: nothing was created or written.\n\n",
        d.backup, d.namespace
    );
    out.push_str(&format!(
        "Items, in the order the backup would write them ({}):\n",
        d.total_items
    ));
    out.push_str(&table(&["RESOURCE", "NAMESPACE", "NAME", "OWNERS"], &rows));
    out.push_str("\nItems per resource:\n");
    let counts: Vec<Vec<String>> = d
        .counts
        .iter()
        .map(|(r, n)| vec![r.clone(), n.to_string()])
        .collect();
    out.push_str(&table(&["RESOURCE", "ITEMS"], &counts));
    out.push('\n');
    if d.overlaps.is_empty() {
        out.push_str("Overlaps: none; no running or queued backup shares a namespace with it.\n");
    } else {
        out.push_str("Overlaps (the queue would hold it back until these finish):\n");
        for o in &d.overlaps {
            out.push_str(&format!("  {}\n", o.reason));
        }
    }
    for (title, set) in [("Errors", &d.errors), ("Warnings", &d.warnings)] {
        if set.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{title} the backup would report:\n"));
        for line in message_lines(set) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

/// The messages of a [`MessageSet`] as lines (`velero: …`, `cluster: …`, `ns: …`).
fn message_lines(set: &MessageSet) -> Vec<String> {
    let scoped = |scope: &str, msgs: &[String]| -> Vec<String> {
        msgs.iter().map(|m| format!("{scope}: {m}")).collect()
    };
    let mut out = scoped("velero", &set.velero);
    out.extend(scoped("cluster", &set.cluster));
    for (ns, msgs) in &set.namespaces {
        out.extend(scoped(ns, msgs));
    }
    out
}

/// Runs the dry run and prints it (`format`: table text, JSON or YAML).
pub async fn run(
    client: &Client,
    ns: &str,
    name: &str,
    flags: &BackupFlags,
    format: OutputFormat,
) -> anyhow::Result<()> {
    let backup = build_backup(name, ns, flags)
        .map_err(|errs| anyhow::anyhow!("{}", describe_errors(&errs)))?;
    let invalid = backup::validate(&backup).await;
    if !invalid.is_empty() {
        bail!(
            "the backup would fail validation:\n{}",
            invalid
                .iter()
                .map(|e| format!("  {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    let others = Api::<Backup>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items;
    let live: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let collected = backup::collect(CollectRequest {
        client: client.clone(),
        backup: &backup,
        page_size: PAGE_SIZE,
        // Velero's default itemBlockWorkerCount: the order shown is the order written.
        workers: 1,
        now: Utc::now(),
    })
    .await?;
    let mut counts = BTreeMap::new();
    for i in &collected.items {
        *counts.entry(resource_name(i)).or_default() += 1;
    }
    let report = DryRun {
        backup: name.to_string(),
        namespace: ns.to_string(),
        total_items: collected.items.len(),
        counts,
        overlaps: overlaps(&backup, &others, &live),
        items: collected.items,
        errors: collected.results.errors,
        warnings: collected.results.warnings,
    };
    match format {
        OutputFormat::Table => print!("{}", render_text(&report)),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        OutputFormat::Yaml => print!("{}", serde_saphyr::to_string(&report)?),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::{BackupSpec, BackupStatus};

    fn backup(name: &str, include: &[&str], phase: Option<BackupPhase>, pos: i64) -> Backup {
        let mut b = Backup::new(
            name,
            BackupSpec {
                included_namespaces: Some(include.iter().map(|s| s.to_string()).collect()),
                ..BackupSpec::default()
            },
        );
        b.status = Some(BackupStatus {
            phase,
            queue_position: (pos > 0).then_some(pos),
            ..BackupStatus::default()
        });
        b
    }

    #[test]
    fn overlaps_name_the_unfinished_backups_sharing_a_namespace() {
        let mine = backup("mine", &["a", "b"], None, 0);
        let others = [
            backup("queued", &["b"], Some(BackupPhase::Queued), 2),
            backup("done", &["a"], Some(BackupPhase::Completed), 0),
            backup("elsewhere", &["c"], Some(BackupPhase::InProgress), 0),
            backup("all", &["*"], Some(BackupPhase::InProgress), 0),
            backup("mine", &["a"], Some(BackupPhase::InProgress), 0),
        ];
        let got = overlaps(&mine, &others, &[]);
        let reasons: Vec<&str> = got.iter().map(|o| o.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "backup all (running, InProgress): both include namespace a",
                "backup queued (queued at position 2): both include namespace b",
            ]
        );
        assert_eq!(got[1].queue_position, Some(2));
        assert_eq!(got[0].queue_position, None);
    }

    #[test]
    fn text_names_owners_by_resource_and_name() {
        let item = |name: &str, uid: &str, owners: &[&str]| ManifestItem {
            group: "apps".into(),
            version: "v1".into(),
            kind: "K".into(),
            resource: "replicasets".into(),
            namespace: "n".into(),
            name: name.into(),
            uid: uid.into(),
            labels: Default::default(),
            annotations: Default::default(),
            owners: owners.iter().map(|s| s.to_string()).collect(),
        };
        let d = DryRun {
            backup: "b".into(),
            namespace: "velero".into(),
            total_items: 2,
            counts: [("replicasets.apps".to_string(), 2)].into(),
            items: vec![item("a", "u1", &[]), item("b", "u2", &["u1", "gone"])],
            overlaps: vec![],
            errors: MessageSet::default(),
            warnings: MessageSet::default(),
        };
        let text = render_text(&d);
        assert!(
            text.contains(
                "replicasets.apps   n           b      replicasets.apps/a,gone (not in the backup)"
            ),
            "{text}"
        );
        assert!(text.contains("Overlaps: none"), "{text}");
    }
}
