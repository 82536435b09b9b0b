//! The compact view of `granary dev`, as pure functions: a [`Snapshot`] of the garden's
//! BackupBuckets (fill per shard) and BackupEntries (state, seed, bucket), the
//! [`changes`] between two snapshots as one-line events, and [`render`] of the whole
//! screen. `live` feeds them from watches and decides where the output goes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use kube::ResourceExt;

use crate::cli::status::event_time;
use crate::dev::backups_view::{self, SeedBackups};
use granary_api::common::{LastOperation, LastOperationState};
use granary_api::core::{BackupBucket, BackupEntry, LABEL_REGION, LABEL_SHARD};

/// What one bucket looks like in the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketRow {
    pub name: String,
    pub region: String,
    pub shard: Option<u32>,
    pub seed: Option<String>,
    pub entries: u32,
    pub state: String,
}

/// What one entry looks like in the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryRow {
    /// `<namespace>/<name>`.
    pub key: String,
    /// The shoot it belongs to (`<project>/<shoot>`), else the entry name.
    pub shoot: String,
    pub bucket: String,
    pub seed: Option<String>,
    pub state: String,
    /// Why it is in that state, when that says more than the state (errors, the
    /// scheduled deletion).
    pub detail: Option<String>,
}

/// Buckets and entries, sorted by name, and every seed's Velero backups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub buckets: Vec<BucketRow>,
    pub entries: Vec<EntryRow>,
    /// Per seed, by seed name.
    pub backups: Vec<SeedBackups>,
}

/// `Waiting` before any operation, else the state of the last one, with `Deleting`
/// while a deletion is under way.
fn state_of(op: Option<&LastOperation>, error: bool, deleting: bool) -> String {
    let state = match op.map(|o| o.state) {
        None => "Waiting".to_string(),
        Some(LastOperationState::Succeeded) if error => "Error".to_string(),
        Some(s) => s.to_string(),
    };
    if deleting {
        format!("Deleting/{state}")
    } else {
        state
    }
}

impl Snapshot {
    pub fn from_objects(buckets: &[BackupBucket], entries: &[BackupEntry]) -> Snapshot {
        let mut bucket_rows: Vec<BucketRow> = buckets
            .iter()
            .map(|b| {
                let status = b.status.as_ref();
                BucketRow {
                    name: b.name_any(),
                    region: b
                        .labels()
                        .get(LABEL_REGION)
                        .cloned()
                        .unwrap_or_else(|| b.spec.provider.region.clone()),
                    shard: b.labels().get(LABEL_SHARD).and_then(|s| s.parse().ok()),
                    seed: b.responsible_seed().map(String::from),
                    // The entries there, as the list shows them (the garden's count also
                    // holds places reserved ahead for entries not created yet).
                    entries: entries
                        .iter()
                        .filter(|e| e.spec.bucket_name == b.name_any())
                        .count() as u32,
                    state: state_of(
                        status.and_then(|s| s.last_operation.as_ref()),
                        status.and_then(|s| s.last_error.as_ref()).is_some(),
                        b.metadata.deletion_timestamp.is_some(),
                    ),
                }
            })
            .collect();
        bucket_rows
            .sort_by(|a, b| (&a.region, a.shard, &a.name).cmp(&(&b.region, b.shard, &b.name)));
        let mut entry_rows: Vec<EntryRow> = entries
            .iter()
            .map(|e| {
                let status = e.status.as_ref();
                let op = status.and_then(|s| s.last_operation.as_ref());
                let error = status.and_then(|s| s.last_error.as_ref());
                let namespace = e.namespace().unwrap_or_default();
                let project = namespace.strip_prefix("garden-").unwrap_or(&namespace);
                let mut shoot = e
                    .owner_references()
                    .iter()
                    .find(|o| o.kind == "Shoot")
                    .map(|o| format!("{project}/{}", o.name))
                    .unwrap_or_else(|| format!("{project}/{}", e.name_any()));
                // A migration's copy of the entry it moves is not the shoot's entry.
                if e.is_source() {
                    shoot.push_str(" (migration source)");
                }
                let detail = match (error, op) {
                    (Some(err), _) => Some(err.description.clone()),
                    (None, Some(o))
                        if o.state != LastOperationState::Succeeded
                            && !o.description.is_empty() =>
                    {
                        Some(o.description.clone())
                    }
                    _ => None,
                };
                EntryRow {
                    key: format!("{namespace}/{}", e.name_any()),
                    shoot,
                    bucket: e.spec.bucket_name.clone(),
                    seed: e.responsible_seed().map(String::from),
                    state: state_of(op, error.is_some(), e.metadata.deletion_timestamp.is_some()),
                    detail,
                }
            })
            .collect();
        entry_rows.sort_by(|a, b| a.shoot.cmp(&b.shoot).then(a.key.cmp(&b.key)));
        Snapshot {
            buckets: bucket_rows,
            entries: entry_rows,
            backups: Vec::new(),
        }
    }
}

/// One line per bucket or entry that appeared, changed state, seed or bucket, or went
/// away between `before` and `after`, stamped `at`.
pub fn changes(before: &Snapshot, after: &Snapshot, at: DateTime<Utc>) -> Vec<String> {
    let time = at.format("%H:%M:%S");
    let mut out = Vec::new();
    let old: BTreeMap<&str, &BucketRow> = before
        .buckets
        .iter()
        .map(|b| (b.name.as_str(), b))
        .collect();
    let new: BTreeMap<&str, &BucketRow> =
        after.buckets.iter().map(|b| (b.name.as_str(), b)).collect();
    for (name, b) in &new {
        let seed = b.seed.as_deref().unwrap_or("-");
        match old.get(name) {
            None => out.push(format!(
                "{time} bucket {name}: {} (region {}, seed {seed})",
                b.state, b.region
            )),
            Some(o) if o.state != b.state || o.seed != b.seed => {
                out.push(format!("{time} bucket {name}: {} (seed {seed})", b.state))
            }
            Some(_) => {}
        }
    }
    for name in old.keys().filter(|n| !new.contains_key(*n)) {
        out.push(format!("{time} bucket {name}: gone"));
    }
    let old: BTreeMap<&str, &EntryRow> =
        before.entries.iter().map(|e| (e.key.as_str(), e)).collect();
    let new: BTreeMap<&str, &EntryRow> =
        after.entries.iter().map(|e| (e.key.as_str(), e)).collect();
    for (key, e) in &new {
        let changed = old.get(key).is_none_or(|o| {
            o.state != e.state || o.seed != e.seed || o.bucket != e.bucket || o.detail != e.detail
        });
        if changed {
            let mut line = format!(
                "{time} entry {}: {} (seed {}, bucket {})",
                e.shoot,
                e.state,
                e.seed.as_deref().unwrap_or("-"),
                if e.bucket.is_empty() { "-" } else { &e.bucket }
            );
            if let Some(detail) = &e.detail {
                let _ = write!(line, ": {detail}");
            }
            out.push(line);
        }
    }
    for (key, e) in &old {
        if !new.contains_key(key) {
            out.push(format!("{time} entry {}: gone", e.shoot));
        }
    }
    out.extend(backups_view::changes(&before.backups, &after.backups, at));
    out
}

/// What `seen` remembers of an event: its identity and how often it happened.
fn event_key(e: &k8s_openapi::api::events::v1::Event) -> String {
    let count = e
        .series
        .as_ref()
        .map(|s| s.count)
        .or(e.deprecated_count)
        .unwrap_or(1);
    format!(
        "{}/{count}",
        e.metadata.uid.clone().unwrap_or_else(|| e.name_any())
    )
}

/// Marks as seen (so never shown) the events about objects that are gone: those whose
/// `regarding` is of a kind in `live` (kind → UIDs of the objects that exist) but not
/// among them. A restart finds the events of objects deleted since; they are history,
/// not news.
pub fn forget_events_of_gone_objects(
    events: &[k8s_openapi::api::events::v1::Event],
    live: &std::collections::HashMap<&str, std::collections::HashSet<String>>,
    seen: &mut std::collections::HashSet<String>,
) {
    for e in events {
        let Some(regarding) = e.regarding.as_ref() else {
            continue;
        };
        let (Some(kind), Some(uid)) = (regarding.kind.as_deref(), regarding.uid.as_deref()) else {
            continue;
        };
        if live.get(kind).is_some_and(|uids| !uids.contains(uid)) {
            seen.insert(event_key(e));
        }
    }
}

/// Marks as seen (so never shown) the events that last happened before `start`: what a
/// restart finds was the earlier run's news, and a problem still there is reported
/// again by its controller.
pub fn forget_events_before(
    events: &[k8s_openapi::api::events::v1::Event],
    start: DateTime<Utc>,
    seen: &mut std::collections::HashSet<String>,
) {
    for e in events {
        if event_time(e, start) < start {
            seen.insert(event_key(e));
        }
    }
}

/// One line per Warning event not seen before (a repeated event counts as new each time
/// its count grows), stamped with when it happened (`at` when it says nothing); `seen`
/// remembers what was shown.
pub fn new_warnings(
    events: &[k8s_openapi::api::events::v1::Event],
    seen: &mut std::collections::HashSet<String>,
    at: DateTime<Utc>,
) -> Vec<String> {
    let mut fresh: Vec<&k8s_openapi::api::events::v1::Event> = events
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| seen.insert(event_key(e)))
        .collect();
    fresh.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    fresh
        .into_iter()
        .map(|e| {
            let about = e
                .regarding
                .as_ref()
                .map(|r| {
                    format!(
                        "{}/{}",
                        r.kind.as_deref().unwrap_or("object"),
                        r.name.as_deref().unwrap_or("-")
                    )
                })
                .unwrap_or_else(|| "-".into());
            format!(
                "{} warning {about}: {}: {}",
                event_time(e, at).format("%H:%M:%S"),
                e.reason.as_deref().unwrap_or("-"),
                e.note.as_deref().unwrap_or("")
            )
        })
        .collect()
}

/// `[##-] 2/3` with a limit, `2 entries` without.
pub fn fill(entries: u32, limit: Option<u32>) -> String {
    match limit {
        Some(limit) if limit > 0 && limit <= 20 => {
            let full = entries.min(limit) as usize;
            format!(
                "[{}{}] {entries}/{limit}",
                "#".repeat(full),
                "-".repeat(limit as usize - full)
            )
        }
        Some(limit) if limit > 0 => format!("{entries}/{limit}"),
        _ => format!("{entries} entries"),
    }
}

/// How much of an entry's detail fits on its line of the screen.
const DETAIL_WIDTH: usize = 60;

/// How much of an event fits on its line of the screen.
const EVENT_WIDTH: usize = 150;

/// `text` cut to `width` characters, with `…` when cut.
fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The whole screen: `header`, the buckets with their fill against `limit`, the entries,
/// every seed's Velero backups and the most recent `events` (oldest first).
pub fn render(header: &str, snapshot: &Snapshot, limit: Option<u32>, events: &[String]) -> String {
    let mut out = String::from(header);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&body(snapshot, limit));
    out.push_str(&events_section(events));
    out
}

/// The screen for a terminal of `width` columns and `height` rows: [`render`] when it
/// fits. Else a compact screen that keeps the whole header (where the kubeconfigs, the
/// metrics address and the commands to try are) and shrinks the lists below it, without
/// blank lines: each of the buckets, the entries, the backups and the recent events
/// first gets a line or two, then the room left goes to them in that order. A list cut
/// short says how many lines it leaves out (the entries are summarised by state, those
/// not Succeeded first). Only a header taller than the terminal is cut. Every line is
/// cut to `width` (with `…`), so nothing wraps.
pub fn render_fitted(
    header: &str,
    snapshot: &Snapshot,
    limit: Option<u32>,
    events: &[String],
    width: usize,
    height: usize,
) -> String {
    let full = render(header, snapshot, limit, events);
    if full.lines().count() <= height {
        return fit_width(full.lines(), width);
    }
    let mut screen: Vec<String> = header.lines().map(String::from).collect();
    if screen.len() >= height {
        screen.truncate(height);
        return fit_width(screen.iter().map(String::as_str), width);
    }
    let room = height - screen.len();
    let buckets = non_empty_lines(&buckets_section(snapshot, limit));
    let mut entries = vec![format!("ENTRIES ({})", snapshot.entries.len())];
    entries.extend(entry_lines(snapshot));
    let mut backups = String::new();
    backups_view::render(&snapshot.backups, &mut backups);
    let backups = non_empty_lines(&backups);
    let mut recent = vec!["RECENT EVENTS".to_string()];
    recent.extend(events.iter().map(|e| format!("  {e}")));
    let wanted = [
        buckets.len(),
        entries.len(),
        backups.len(),
        if events.is_empty() { 0 } else { recent.len() },
    ];
    let budgets = share(room, &wanted, &[2, 2, 1, 2]);
    screen.extend(cut(&buckets, budgets[0], "buckets"));
    if budgets[1] >= entries.len() {
        screen.extend(entries);
    } else if budgets[1] > 0 {
        screen.push(entries.swap_remove(0));
        screen.extend(summarised_entries(snapshot, budgets[1] - 1));
    }
    screen.extend(cut(&backups, budgets[2], "backup lines"));
    if budgets[3] > 1 {
        // The newest events, under the title.
        let keep = budgets[3] - 1;
        screen.push(recent[0].clone());
        screen.extend(
            recent[recent.len().saturating_sub(keep).max(1)..]
                .iter()
                .cloned(),
        );
    }
    fit_width(screen.iter().map(String::as_str), width)
}

/// Splits `room` lines between sections that want `wanted` lines: each first gets its
/// minimum (as far as the room goes, in order), then what is left goes to them in order.
fn share(room: usize, wanted: &[usize], minimum: &[usize]) -> Vec<usize> {
    let mut left = room;
    let mut got: Vec<usize> = wanted
        .iter()
        .zip(minimum)
        .map(|(w, m)| {
            let g = (*w).min(*m).min(left);
            left -= g;
            g
        })
        .collect();
    for (g, w) in got.iter_mut().zip(wanted) {
        let more = w.saturating_sub(*g).min(left);
        *g += more;
        left -= more;
    }
    got
}

/// At most `budget` of `lines`; when some are left out, the last line says how many.
fn cut(lines: &[String], budget: usize, what: &str) -> Vec<String> {
    if lines.len() <= budget {
        return lines.to_vec();
    }
    if budget == 0 {
        return Vec::new();
    }
    let keep = budget - 1;
    let mut out = lines[..keep].to_vec();
    out.push(format!(
        "  … {} more {what} (a taller terminal shows them)",
        lines.len() - keep
    ));
    out
}

fn non_empty_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// At most `room` lines about the entries: how many are in each state, then those not
/// Succeeded (the ones to look at) as far as they fit, then how many more there are.
fn summarised_entries(snapshot: &Snapshot, room: usize) -> Vec<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &snapshot.entries {
        *counts.entry(e.state.as_str()).or_default() += 1;
    }
    let mut by_count: Vec<(&str, usize)> = counts.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let summary = by_count
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = vec![format!("  {summary}")];
    if room <= 1 {
        return out;
    }
    let all = entry_lines(snapshot);
    let notable: Vec<String> = snapshot
        .entries
        .iter()
        .zip(all)
        .filter(|(e, _)| e.state != "Succeeded")
        .map(|(_, line)| line)
        .collect();
    let shown = if notable.len() < room {
        notable.len()
    } else {
        room.saturating_sub(2)
    };
    out.extend(notable.iter().take(shown).cloned());
    let hidden = snapshot.entries.len() - shown;
    if hidden > 0 && out.len() < room {
        out.push(format!(
            "  … {hidden} more not shown (kubectl get backupentries -A lists every entry)"
        ));
    }
    out
}

fn fit_width<'a>(lines: impl Iterator<Item = &'a str>, width: usize) -> String {
    let mut out = String::new();
    for line in lines {
        out.push_str(&shorten(line, width));
        out.push('\n');
    }
    out
}

/// The buckets section, after a blank line.
fn buckets_section(snapshot: &Snapshot, limit: Option<u32>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\nBUCKETS ({})", snapshot.buckets.len());
    if snapshot.buckets.is_empty() {
        out.push_str("  (none yet)\n");
    }
    let width = snapshot
        .buckets
        .iter()
        .map(|b| b.name.len())
        .max()
        .unwrap_or(0);
    for b in &snapshot.buckets {
        let _ = writeln!(
            out,
            "  {:<width$}  {:<8} shard {:<2} {:<12} {:<10} seed {}",
            b.name,
            b.region,
            b.shard.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            fill(b.entries, limit),
            b.state,
            b.seed.as_deref().unwrap_or("-"),
        );
    }
    out
}

/// One line per entry, in the snapshot's order.
fn entry_lines(snapshot: &Snapshot) -> Vec<String> {
    let width = snapshot
        .entries
        .iter()
        .map(|e| e.shoot.len())
        .max()
        .unwrap_or(0);
    let state_width = snapshot
        .entries
        .iter()
        .map(|e| e.state.len())
        .max()
        .unwrap_or(0);
    snapshot
        .entries
        .iter()
        .map(|e| {
            let mut line = format!(
                "  {:<width$}  {:<state_width$}  seed {:<10} bucket {}",
                e.shoot,
                e.state,
                e.seed.as_deref().unwrap_or("-"),
                if e.bucket.is_empty() { "-" } else { &e.bucket },
            );
            if let Some(detail) = &e.detail {
                let _ = write!(line, "  ({})", shorten(detail, DETAIL_WIDTH));
            }
            line
        })
        .collect()
}

/// Buckets, entries and backups, each section after a blank line.
fn body(snapshot: &Snapshot, limit: Option<u32>) -> String {
    let mut out = buckets_section(snapshot, limit);
    let _ = writeln!(out, "\nENTRIES ({})", snapshot.entries.len());
    if snapshot.entries.is_empty() {
        out.push_str("  (none yet)\n");
    }
    for line in entry_lines(snapshot) {
        out.push_str(&line);
        out.push('\n');
    }
    backups_view::render(&snapshot.backups, &mut out);
    out
}

fn events_section(events: &[String]) -> String {
    let mut out = String::from("\nRECENT EVENTS\n");
    if events.is_empty() {
        out.push_str("  (none yet)\n");
    }
    for e in events {
        let _ = writeln!(out, "  {}", shorten(e, EVENT_WIDTH));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::common::{LastError, LastOperationType};
    use granary_api::core::{
        BackupBucketSpec, BackupBucketStatus, BackupEntrySpec, BackupEntryStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn op(state: LastOperationState, description: &str) -> LastOperation {
        LastOperation {
            description: description.into(),
            last_update_time: DateTime::<Utc>::UNIX_EPOCH,
            progress: 100,
            state,
            type_: LastOperationType::Reconcile,
        }
    }

    fn bucket(
        name: &str,
        shard: u32,
        count: u32,
        state: Option<LastOperationState>,
    ) -> BackupBucket {
        let mut b = BackupBucket::new(
            name,
            BackupBucketSpec {
                seed_name: Some("europe-1".into()),
                ..Default::default()
            },
        );
        b.metadata.labels = Some(
            [
                (LABEL_REGION.to_string(), "europe".to_string()),
                (LABEL_SHARD.to_string(), shard.to_string()),
            ]
            .into(),
        );
        b.status = Some(BackupBucketStatus {
            entry_count: Some(count),
            last_operation: state.map(|s| op(s, "")),
            ..Default::default()
        });
        b
    }

    fn entry(
        shoot: &str,
        state: Option<(LastOperationState, &str)>,
        error: Option<&str>,
    ) -> BackupEntry {
        let mut e = BackupEntry::new(
            &format!("shoot--dev--{shoot}--uid"),
            BackupEntrySpec {
                bucket_name: "b-0".into(),
                seed_name: Some("europe-1".into()),
                shoot_ref: None,
            },
        );
        e.metadata.namespace = Some("garden-dev".into());
        e.metadata.owner_references = Some(vec![OwnerReference {
            kind: "Shoot".into(),
            name: shoot.into(),
            api_version: "core.gardener.cloud/v1beta1".into(),
            uid: "uid".into(),
            ..Default::default()
        }]);
        e.status = Some(BackupEntryStatus {
            last_operation: state.map(|(s, d)| op(s, d)),
            last_error: error.map(|d| LastError {
                description: d.into(),
                codes: vec![],
                task_id: None,
                last_update_time: None,
            }),
            ..Default::default()
        });
        e
    }

    #[test]
    fn snapshot_sorts_by_shard_and_names_entries_by_shoot() {
        let s = Snapshot::from_objects(
            &[
                bucket("b-1", 1, 2, None),
                bucket("b-0", 0, 3, Some(LastOperationState::Succeeded)),
            ],
            &[entry(
                "web",
                Some((LastOperationState::Succeeded, "ok")),
                None,
            )],
        );
        assert_eq!(s.buckets[0].name, "b-0");
        assert_eq!(s.buckets[0].state, "Succeeded");
        assert_eq!(s.buckets[1].state, "Waiting");
        assert_eq!(s.entries[0].shoot, "dev/web");
        assert_eq!(s.entries[0].detail, None);
    }

    #[test]
    fn changes_report_new_changed_and_gone_objects_once() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let empty = Snapshot::default();
        let one = Snapshot::from_objects(&[bucket("b-0", 0, 1, None)], &[entry("web", None, None)]);
        assert_eq!(
            changes(&empty, &one, at),
            [
                "00:00:00 bucket b-0: Waiting (region europe, seed europe-1)",
                "00:00:00 entry dev/web: Waiting (seed europe-1, bucket b-0)",
            ]
        );
        assert!(changes(&one, &one, at).is_empty());
        let mut deleting = entry(
            "web",
            Some((LastOperationState::Pending, "deletion scheduled for 12:00")),
            None,
        );
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        let two = Snapshot::from_objects(&[bucket("b-0", 0, 1, None)], &[deleting]);
        assert_eq!(
            changes(&one, &two, at),
            [
                "00:00:00 entry dev/web: Deleting/Pending (seed europe-1, bucket b-0): deletion scheduled for 12:00"
            ]
        );
        assert_eq!(
            changes(&two, &empty, at),
            ["00:00:00 bucket b-0: gone", "00:00:00 entry dev/web: gone"]
        );
    }

    #[test]
    fn an_error_shows_its_description() {
        let s = Snapshot::from_objects(
            &[],
            &[entry(
                "web",
                Some((LastOperationState::Error, "x")),
                Some("access denied"),
            )],
        );
        assert_eq!(s.entries[0].state, "Error");
        assert_eq!(s.entries[0].detail.as_deref(), Some("access denied"));
    }

    #[test]
    fn long_details_are_cut_on_the_screen() {
        assert_eq!(shorten("abc", 3), "abc");
        assert_eq!(shorten("abcd", 3), "ab…");
        let s = Snapshot::from_objects(
            &[],
            &[entry(
                "web",
                Some((LastOperationState::Error, "x")),
                Some(&"y".repeat(200)),
            )],
        );
        let screen = render("", &s, None, &[]);
        assert!(
            screen.contains(&format!("({}…)", "y".repeat(DETAIL_WIDTH - 1))),
            "{screen}"
        );
    }

    #[test]
    fn warnings_show_once_per_occurrence() {
        use k8s_openapi::api::core::v1::ObjectReference;
        use k8s_openapi::api::events::v1::{Event, EventSeries};
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let mut warning = Event {
            type_: Some("Warning".into()),
            reason: Some("ReconcileError".into()),
            note: Some("no credentials".into()),
            regarding: Some(ObjectReference {
                kind: Some("BackupBucket".into()),
                name: Some("b-0".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        warning.metadata.uid = Some("u1".into());
        let normal = Event {
            type_: Some("Normal".into()),
            ..Default::default()
        };
        let mut seen = Default::default();
        let events = vec![warning.clone(), normal];
        assert_eq!(
            new_warnings(&events, &mut seen, at),
            ["00:00:00 warning BackupBucket/b-0: ReconcileError: no credentials"]
        );
        assert!(new_warnings(&events, &mut seen, at).is_empty());
        warning.series = Some(EventSeries {
            count: 2,
            last_observed_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        });
        assert_eq!(new_warnings(&[warning], &mut seen, at).len(), 1);
    }

    /// A restart shows no warning of the earlier run; a later one is stamped with its
    /// own time, not the screen's.
    #[test]
    fn warnings_of_before_the_start_are_not_replayed_and_each_has_its_time() {
        use k8s_openapi::api::events::v1::Event;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        let at = |secs: i64| DateTime::<Utc>::from_timestamp(secs, 0).unwrap();
        let event = |uid: &str, secs: i64| {
            let mut e = Event {
                type_: Some("Warning".into()),
                reason: Some("ReconcileError".into()),
                event_time: Some(MicroTime(
                    k8s_openapi::jiff::Timestamp::from_second(secs).unwrap(),
                )),
                ..Default::default()
            };
            e.metadata.uid = Some(uid.into());
            e
        };
        let events = vec![event("old", 3600), event("new", 7300)];
        let mut seen = Default::default();
        forget_events_before(&events, at(7200), &mut seen);
        let shown = new_warnings(&events, &mut seen, at(7400));
        assert_eq!(shown.len(), 1, "{shown:?}");
        assert!(shown[0].starts_with("02:01:40 warning"), "{shown:?}");
    }

    /// A restart does not replay the events of objects deleted since.
    #[test]
    fn events_of_objects_gone_are_not_replayed() {
        use k8s_openapi::api::core::v1::ObjectReference;
        use k8s_openapi::api::events::v1::Event;
        use std::collections::{HashMap, HashSet};
        let about = |kind: &str, uid: &str, event_uid: &str| {
            let mut e = Event {
                type_: Some("Warning".into()),
                reason: Some("ReconcileError".into()),
                note: Some(format!("about {uid}")),
                regarding: Some(ObjectReference {
                    kind: Some(kind.into()),
                    name: Some(uid.into()),
                    uid: Some(uid.into()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            e.metadata.uid = Some(event_uid.into());
            e
        };
        let events = [
            about("BackupEntry", "alive", "e1"),
            about("BackupEntry", "deleted", "e2"),
            about("Shoot", "deleted-shoot", "e3"),
            about("Seed", "untracked", "e4"),
        ];
        let live: HashMap<&str, HashSet<String>> = HashMap::from([
            ("BackupEntry", HashSet::from(["alive".to_string()])),
            ("Shoot", HashSet::new()),
        ]);
        let mut seen = HashSet::new();
        forget_events_of_gone_objects(&events, &live, &mut seen);
        let shown = new_warnings(&events, &mut seen, DateTime::<Utc>::UNIX_EPOCH);
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert!(shown[0].contains("about alive") || shown[1].contains("about alive"));
        assert!(
            shown.iter().any(|l| l.contains("about untracked")),
            "{shown:?}"
        );
    }

    #[test]
    fn a_small_terminal_keeps_the_header_and_shrinks_the_lists() {
        let entries: Vec<BackupEntry> = (0..8)
            .map(|i| entry(&format!("shoot-{i}"), None, None))
            .collect();
        let s = Snapshot::from_objects(&[bucket("b-0", 0, 2, None)], &entries);
        let header = format!(
            "granary dev: {}\n  garden kubeconfig\n  health and metrics: http://127.0.0.1:8085\ntry:\n  try this\nCtrl-C stops\n",
            "x".repeat(100)
        );
        let events: Vec<String> = (0..20).map(|i| format!("event {i}")).collect();
        let screen = render_fitted(&header, &s, Some(3), &events, 80, 23);
        let lines: Vec<&str> = screen.lines().collect();
        assert!(lines.len() <= 23, "{screen}");
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{screen}");
        assert!(lines[0].ends_with('…'), "{screen}");
        for kept in [
            "health and metrics",
            "try this",
            "Ctrl-C stops",
            "BUCKETS (1)",
            "ENTRIES (8)",
            "RECENT EVENTS",
        ] {
            assert!(screen.contains(kept), "{kept}: {screen}");
        }
        assert_eq!(
            lines.last().copied(),
            Some("  event 19"),
            "the newest event is kept: {screen}"
        );
        assert!(!screen.contains("event 0\n"), "{screen}");
        // Hardly room for more than the header: the header stays whole.
        let tiny = render_fitted(&header, &s, Some(3), &events, 80, 8);
        assert!(tiny.lines().count() <= 8, "{tiny}");
        assert!(
            tiny.contains("try this") && tiny.contains("Ctrl-C stops"),
            "{tiny}"
        );
        // Room enough: the whole screen.
        let roomy = render_fitted(&header, &s, Some(3), &events, 200, 100);
        assert_eq!(roomy, render(&header, &s, Some(3), &events));
    }

    #[test]
    fn room_goes_to_minimums_first_then_in_order() {
        assert_eq!(share(10, &[5, 5, 5, 5], &[2, 2, 1, 2]), [5, 2, 1, 2]);
        assert_eq!(share(4, &[5, 5, 5, 5], &[2, 2, 1, 2]), [2, 2, 0, 0]);
        assert_eq!(share(30, &[1, 3, 2, 0], &[2, 2, 1, 2]), [1, 3, 2, 0]);
        assert_eq!(
            cut(&["a".into(), "b".into(), "c".into()], 2, "things"),
            ["a", "  … 2 more things (a taller terminal shows them)"]
        );
    }

    /// `--shoots 50` on a 200×50 terminal: the buckets stay on the screen, the entries
    /// are summarised by state with the ones not Succeeded shown, and the screen says how
    /// many it leaves out.
    #[test]
    fn fifty_shoots_fit_a_200_by_50_terminal_with_every_bucket() {
        let buckets: Vec<BackupBucket> = (0..17)
            .map(|i| {
                bucket(
                    &format!("europe-{i}"),
                    i,
                    3,
                    Some(LastOperationState::Succeeded),
                )
            })
            .collect();
        let mut entries: Vec<BackupEntry> = (0..47)
            .map(|i| {
                entry(
                    &format!("shoot-{i:02}"),
                    Some((LastOperationState::Succeeded, "")),
                    None,
                )
            })
            .collect();
        entries.push(entry(
            "broken",
            Some((LastOperationState::Succeeded, "")),
            Some("access denied"),
        ));
        entries.push(entry(
            "slow-a",
            Some((LastOperationState::Processing, "creating")),
            None,
        ));
        entries.push(entry(
            "slow-b",
            Some((LastOperationState::Processing, "creating")),
            None,
        ));
        let s = Snapshot::from_objects(&buckets, &entries);
        let header = "granary dev: 3 seeds, 50 shoots\nkubeconfig\n";
        let events: Vec<String> = (0..12).map(|i| format!("event {i}")).collect();
        let screen = render_fitted(header, &s, Some(3), &events, 200, 50);
        let lines: Vec<&str> = screen.lines().collect();
        assert!(lines.len() <= 50, "{} lines:\n{screen}", lines.len());
        for i in 0..17 {
            assert!(
                screen.contains(&format!("europe-{i} ")),
                "bucket {i}:\n{screen}"
            );
        }
        assert!(screen.contains("ENTRIES (50)"), "{screen}");
        assert!(
            screen.contains("47 Succeeded, 2 Processing, 1 Error"),
            "{screen}"
        );
        for shoot in ["dev/broken", "dev/slow-a", "dev/slow-b"] {
            assert!(screen.contains(shoot), "{shoot}:\n{screen}");
        }
        assert!(!screen.contains("dev/shoot-00"), "{screen}");
        assert!(screen.contains("47 more not shown"), "{screen}");
        assert!(screen.contains("event 11"), "the newest event:\n{screen}");
    }

    /// The source entry a migration makes is not shown as the shoot's entry.
    #[test]
    fn a_migration_source_is_labelled_as_such() {
        let real = entry("web", Some((LastOperationState::Succeeded, "")), None);
        let mut source = real.clone();
        source.metadata.name = Some(format!("source-{}", real.name_any()));
        let s = Snapshot::from_objects(&[], &[real, source]);
        let shoots: Vec<&str> = s.entries.iter().map(|e| e.shoot.as_str()).collect();
        assert_eq!(shoots, ["dev/web", "dev/web (migration source)"]);
        let lines = changes(&Snapshot::default(), &s, DateTime::<Utc>::UNIX_EPOCH);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("entry dev/web (migration source): Succeeded")),
            "{lines:?}"
        );
    }

    #[test]
    fn fill_bars() {
        assert_eq!(fill(2, Some(3)), "[##-] 2/3");
        assert_eq!(fill(4, Some(3)), "[###] 4/3");
        assert_eq!(fill(5, Some(100)), "5/100");
        assert_eq!(fill(5, None), "5 entries");
    }

    #[test]
    fn render_shows_every_part() {
        let s = Snapshot::from_objects(
            &[bucket("b-0", 0, 2, Some(LastOperationState::Succeeded))],
            &[entry(
                "web",
                Some((LastOperationState::Succeeded, "")),
                None,
            )],
        );
        let screen = render("granary dev", &s, Some(3), &["00:00:00 something".into()]);
        assert!(screen.starts_with("granary dev\n"), "{screen}");
        assert!(screen.contains("BUCKETS (1)"), "{screen}");
        // The fill counts the entries there (the bucket's count of 2 includes a place
        // reserved ahead).
        assert!(
            screen.contains("b-0  europe   shard 0  [#--] 1/3"),
            "{screen}"
        );
        assert!(
            screen.contains("dev/web  Succeeded  seed europe-1"),
            "{screen}"
        );
        assert!(
            screen.contains("RECENT EVENTS\n  00:00:00 something"),
            "{screen}"
        );
        let empty = render("h", &Snapshot::default(), None, &[]);
        assert_eq!(empty.matches("(none yet)").count(), 3, "{empty}");
    }
}
