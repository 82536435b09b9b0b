//! `meta.k8s.io/v1` Table responses (what `kubectl get` asks for with
//! `Accept: application/json;as=Table`): Name and Age, or a CRD's printer columns.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::list::ListPage;
use super::registry::ResourceInfo;

/// kube's short human durations: `45s`, `3m20s`, `5h`, `2d3h`.
pub(crate) fn human_age(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else {
        format!("{d}d")
    }
}

/// Evaluates the simple JSONPath forms printer columns use: `.a.b`, `.a[0]`,
/// `.a[?(@.type=="Ready")].status`.
pub(crate) fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('.');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inner = &after[..end];
            rest = after[end + 1..].trim_start_matches('.');
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (field, want) = filter.split_once("==")?;
                let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                cur = cur.as_array()?.iter().find(|e| {
                    e.get(field.trim()).is_some_and(|v| {
                        let text = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        text == want
                    })
                })?;
            } else {
                cur = cur.get(inner.parse::<usize>().ok()?)?;
            }
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        cur = cur.get(&rest[..end])?;
        rest = rest[end..].trim_start_matches('.');
    }
    Some(cur)
}

/// Events print as kube-apiserver prints them (its Event printer, all columns; kubectl
/// shows those of priority 0 unless asked for `-o wide`).
fn is_event(info: &ResourceInfo) -> bool {
    info.kind == "Event" && matches!(info.group.as_str(), "" | "events.k8s.io")
}

fn event_columns() -> Vec<Value> {
    [
        ("Last Seen", 0, ""),
        ("Type", 0, ""),
        ("Reason", 0, ""),
        ("Object", 0, ""),
        ("Subobject", 1, ""),
        ("Source", 1, ""),
        ("Message", 0, ""),
        ("First Seen", 1, ""),
        ("Count", 1, ""),
        ("Name", 1, "name"),
    ]
    .iter()
    .map(|(name, priority, format)| {
        json!({"name": name, "type": "string", "format": format, "description": "", "priority": priority})
    })
    .collect()
}

/// `<age>` of an RFC 3339 time, `<unknown>` when unset.
fn since(t: Option<&Value>, now: &DateTime<Utc>) -> String {
    t.and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| human_age((*now - t.with_timezone(&Utc)).num_seconds()))
        .unwrap_or_else(|| "<unknown>".into())
}

/// The cells of a (core form) Event.
fn event_cells(e: &Value, now: &DateTime<Utc>) -> Vec<Value> {
    let s = |p: &str| e.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let first = match e.get("firstTimestamp").filter(|v| !v.is_null()) {
        Some(t) => since(Some(t), now),
        None => since(e.get("eventTime"), now),
    };
    let mut last = match e.get("lastTimestamp").filter(|v| !v.is_null()) {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = e.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = e.get("series").filter(|v| v.is_object()) {
        last = since(series.get("lastObservedTime"), now);
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = s("/involvedObject/kind").to_lowercase();
    let target = match s("/involvedObject/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let or = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = or(s("/source/component"), s("/reportingComponent"));
    let instance = or(s("/source/host"), s("/reportingInstance"));
    let source = match (component.is_empty(), instance.is_empty()) {
        (true, _) => String::new(),
        (false, true) => component,
        (false, false) => format!("{component}, {instance}"),
    };
    vec![
        json!(last),
        json!(s("/type")),
        json!(s("/reason")),
        json!(target),
        json!(s("/involvedObject/fieldPath")),
        json!(source),
        json!(s("/message").trim()),
        json!(first),
        json!(count),
        json!(s("/metadata/name")),
    ]
}

fn columns(info: &ResourceInfo) -> Vec<Value> {
    if is_event(info) {
        return event_columns();
    }
    if info.crd.is_none()
        && let Some(cols) = super::builtin_columns::column_definitions(&info.group, &info.kind)
    {
        return cols;
    }
    let mut cols = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
    ];
    if info.printer_columns.is_empty() {
        cols.push(json!({"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp", "priority": 0}));
    }
    for c in &info.printer_columns {
        cols.push(json!({
            "name": c.get("name").cloned().unwrap_or(json!("")),
            "type": c.get("type").cloned().unwrap_or(json!("string")),
            "format": c.get("format").cloned().unwrap_or(json!("")),
            "description": c.get("description").cloned().unwrap_or(json!("")),
            "priority": c.get("priority").cloned().unwrap_or(json!(0)),
        }));
    }
    cols
}

fn age_of(obj: &Value, now: &DateTime<Utc>) -> String {
    obj.pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| human_age((*now - t.with_timezone(&Utc)).num_seconds()))
        .unwrap_or_else(|| "<unknown>".into())
}

fn row(info: &ResourceInfo, obj: &Value, now: &DateTime<Utc>) -> Value {
    let mut cells = Vec::new();
    if is_event(info) {
        let core = if info.group.is_empty() {
            obj.clone()
        } else {
            super::events::events_v1_to_core(obj)
        };
        cells = event_cells(&core, now);
    } else {
        cells.push(obj.pointer("/metadata/name").cloned().unwrap_or(json!("")));
    }
    let own = info.crd.is_none()
        && super::builtin_columns::column_definitions(&info.group, &info.kind).is_some();
    if own {
        cells.extend(super::builtin_columns::cells(
            &info.group,
            &info.kind,
            obj,
            &age_of(obj, now),
            now,
        ));
    } else if info.printer_columns.is_empty() && !is_event(info) {
        cells.push(json!(age_of(obj, now)));
    }
    for c in &info.printer_columns {
        let path = c
            .get("jsonPath")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let cell = if path == ".metadata.creationTimestamp" && c.get("type") == Some(&json!("date"))
        {
            json!(age_of(obj, now))
        } else {
            json_path(obj, path).cloned().unwrap_or(Value::Null)
        };
        cells.push(cell);
    }
    json!({
        "cells": cells,
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
        }
    })
}

fn table(info: &ResourceInfo, rows: Vec<Value>, meta: Value) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns(info),
        "rows": rows,
    })
}

pub(crate) fn list_table(info: &ResourceInfo, page: &ListPage, now: &DateTime<Utc>) -> Value {
    let rows = page
        .items
        .iter()
        .filter_map(|i| serde_json::from_slice::<Value>(i).ok())
        .map(|o| row(info, &o, now))
        .collect();
    let mut meta = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
    }
    table(info, rows, meta)
}

pub(crate) fn object_table(info: &ResourceInfo, obj: &Value, now: &DateTime<Utc>) -> Value {
    let rv = obj
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or(json!(""));
    table(
        info,
        vec![row(info, obj, now)],
        json!({"resourceVersion": rv}),
    )
}

/// Rewrites one watch line so its object is a one-row Table.
pub(crate) fn watch_line(info: &ResourceInfo, chunk: Bytes, now: &DateTime<Utc>) -> Bytes {
    let Ok(mut ev) = serde_json::from_slice::<Value>(&chunk) else {
        return chunk;
    };
    if !matches!(ev["type"].as_str(), Some("ADDED" | "MODIFIED" | "DELETED")) {
        return chunk;
    }
    ev["object"] = object_table(info, &ev["object"], now);
    let mut out = ev.to_string().into_bytes();
    out.push(b'\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(200), "3m20s");
        assert_eq!(human_age(3600 * 5), "5h");
        assert_eq!(human_age(86400 * 3 + 3600), "3d1h");
    }

    #[test]
    fn events_print_like_kube_apiserver_prints_them() {
        let now: DateTime<Utc> = "2026-01-02T03:10:00Z".parse().unwrap();
        let e = json!({
            "metadata": {"name": "p.1"},
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
            "reason": "Pulled", "type": "Normal", "message": " pulled \n",
            "firstTimestamp": "2026-01-02T03:00:00Z", "lastTimestamp": "2026-01-02T03:09:00Z",
            "count": 3, "source": {"component": "kubelet", "host": "n1"},
        });
        assert_eq!(
            event_cells(&e, &now),
            vec![
                json!("60s"),
                json!("Normal"),
                json!("Pulled"),
                json!("pod/p"),
                json!("spec.containers{c}"),
                json!("kubelet, n1"),
                json!("pulled"),
                json!("10m"),
                json!(3),
                json!("p.1"),
            ]
        );
        // The new API's shape: eventTime, a series, the reporting controller.
        let e = json!({
            "metadata": {"name": "x"}, "involvedObject": {"kind": "ConfigMap"},
            "eventTime": "2026-01-02T03:05:00.000000Z", "reportingComponent": "ctl",
            "series": {"count": 7, "lastObservedTime": "2026-01-02T03:09:30.000000Z"},
        });
        let cells = event_cells(&e, &now);
        assert_eq!(cells[0], json!("30s"));
        assert_eq!(cells[3], json!("configmap"));
        assert_eq!(cells[5], json!("ctl"));
        assert_eq!(cells[7], json!("5m"));
        assert_eq!(cells[8], json!(7));
        let single = json!({"metadata": {"name": "y"}, "involvedObject": {}});
        assert_eq!(event_cells(&single, &now)[8], json!(1));
        assert_eq!(event_cells(&single, &now)[0], json!("<unknown>"));
    }

    #[test]
    fn json_paths() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]},
                       "spec": {"list": [1, 2]}});
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(&json!("True"))
        );
        assert_eq!(json_path(&o, ".spec.list[1]"), Some(&json!(2)));
        assert_eq!(json_path(&o, ".spec.none"), None);
    }
}
