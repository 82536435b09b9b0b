//! What `granary restore get` and `describe` print, as pure functions of the Restore:
//! velero's columns and describe layout, plus Granary's "Waiting for" line from the
//! restore controller's queue annotations.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use kube::ResourceExt;

use super::flags::format_label_selector;
use super::output::{self, go_time};
use granary_api::velero::{Restore, RestorePhase};
use granary_runtime::clock::from_k8s;

/// Set by the restore controller on a Restore waiting in the concurrent-restore queue:
/// what it waits for.
pub const ANNOTATION_WAITING_FOR: &str = "granary.gardener.cloud/restore-waiting-for";
/// Set by the restore controller on a waiting Restore: its place in the queue (1 next).
pub const ANNOTATION_QUEUE_POSITION: &str = "granary.gardener.cloud/restore-queue-position";

pub(crate) fn phase(r: &Restore) -> RestorePhase {
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use granary_api::velero::RestoreSpec;
    use granary_api::velero::{RestoreProgress, RestoreStatus};

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7).unwrap()
    }

    fn restore_with(status: RestoreStatus) -> Restore {
        let mut r = Restore::new(
            "r1",
            RestoreSpec {
                backup_name: Some("b1".into()),
                ..RestoreSpec::default()
            },
        );
        r.metadata.namespace = Some("velero".into());
        r.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-03-04T05:00:00Z".parse().unwrap(),
        ));
        r.status = Some(status);
        r
    }

    #[test]
    fn table_has_velero_s_columns() {
        let done = restore_with(RestoreStatus {
            phase: Some(RestorePhase::PartiallyFailed),
            start_timestamp: Some(now()),
            completion_timestamp: Some(now()),
            errors: Some(2),
            warnings: Some(5),
            ..RestoreStatus::default()
        });
        let fresh = restore_with(RestoreStatus::default());
        let t = restores_table(&[done, fresh]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>().join(" "),
            "NAME BACKUP STATUS STARTED COMPLETED ERRORS WARNINGS CREATED SELECTOR"
        );
        assert!(lines[1].starts_with("r1 "), "{t}");
        assert!(
            lines[1].contains("PartiallyFailed   2026-03-04 05:06:07 +0000 UTC"),
            "{t}"
        );
        assert!(lines[1].contains("   2        5  "), "{t}");
        assert!(lines[1].ends_with("<none>"), "{t}");
        let cells: Vec<&str> = lines[2]
            .split("   ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells[2..5], ["New", "<nil>", "<nil>"], "{t}");
    }

    #[test]
    fn describe_shows_phase_progress_counts_and_reasons() {
        let mut r = restore_with(RestoreStatus {
            phase: Some(RestorePhase::Failed),
            failure_reason: Some("backup storage location default is unavailable".into()),
            warnings: Some(3),
            errors: Some(1),
            progress: Some(RestoreProgress {
                total_items: Some(10),
                items_restored: Some(4),
            }),
            ..RestoreStatus::default()
        });
        r.spec.namespace_mapping = Some(BTreeMap::from([("a".into(), "b".into())]));
        let text = describe_restore(&r);
        for want in [
            "Name:         r1\n",
            "Phase:  Failed (run `granary restore logs r1` for more information)\n",
            "Failure reason:  backup storage location default is unavailable\n",
            "Total items to be restored:  10\n",
            "Items restored:              4\n",
            "Warnings:  3\n",
            "Errors:    1\n",
            "Backup:  b1\n",
            "Included:  all namespaces found in the backup\n",
            "Cluster-scoped:  auto\n",
            "Namespace mappings:  a=b\n",
            "Restore PVs:  auto\n",
            "ItemOperationTimeout:       0s\n",
            "Preserve Service NodePorts:  auto\n",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        assert!(!text.contains("Waiting for"), "{text}");

        let invalid = restore_with(RestoreStatus {
            phase: Some(RestorePhase::FailedValidation),
            validation_errors: Some(vec!["backup b1 not found".into(), "second".into()]),
            ..RestoreStatus::default()
        });
        let text = describe_restore(&invalid);
        assert!(
            text.contains("Validation errors:  backup b1 not found\n                    second\n"),
            "{text}"
        );
        let running = restore_with(RestoreStatus {
            phase: Some(RestorePhase::InProgress),
            progress: Some(RestoreProgress {
                total_items: Some(7),
                items_restored: Some(2),
            }),
            ..RestoreStatus::default()
        });
        let text = describe_restore(&running);
        assert!(
            text.contains("Items restored so far:                 2\n"),
            "{text}"
        );
    }

    #[test]
    fn describe_tells_what_a_waiting_restore_waits_for() {
        let mut r = restore_with(RestoreStatus::default());
        let text = describe_restore(&r);
        assert!(
            text.contains("Waiting for:  the restore controller to take it in"),
            "{text}"
        );
        r.annotations_mut().insert(
            ANNOTATION_WAITING_FOR.into(),
            "restore r0 (InProgress): both restore into namespace shop".into(),
        );
        r.annotations_mut()
            .insert(ANNOTATION_QUEUE_POSITION.into(), "2".into());
        let text = describe_restore(&r);
        assert!(
            text.contains("Waiting for:  restore r0 (InProgress): both restore into namespace shop (position 2 in the restore queue)\n"),
            "{text}"
        );
        r.annotations_mut().remove(ANNOTATION_WAITING_FOR);
        assert_eq!(
            restore_waiting_for(&r).as_deref(),
            Some("a free restore slot (position 2 in the restore queue)")
        );
        // Once it runs, stale annotations are not shown.
        r.status = Some(RestoreStatus {
            phase: Some(RestorePhase::InProgress),
            ..RestoreStatus::default()
        });
        assert_eq!(restore_waiting_for(&r), None);
    }
}
