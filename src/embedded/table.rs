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

fn columns(info: &ResourceInfo) -> Vec<Value> {
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
    let mut cells = vec![obj.pointer("/metadata/name").cloned().unwrap_or(json!(""))];
    if info.printer_columns.is_empty() {
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
