//! Holds every generated CRD against the table of upstream facts in
//! `tests/fixtures/upstream/` (format in its README): scope, short names, categories,
//! status subresource, labels, and per field path the type, format, enum, required,
//! nullable, map/list type and value checks. Any difference fails with the CRD and the
//! field path, so wire drift from Velero, OADP or Gardener is a failing test.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use super::crds;

const FACT_FILES: [(&str, &str); 4] = [
    (
        "velero.facts",
        include_str!("../../../../tests/fixtures/upstream/velero.facts"),
    ),
    (
        "oadp.facts",
        include_str!("../../../../tests/fixtures/upstream/oadp.facts"),
    ),
    (
        "extensions.facts",
        include_str!("../../../../tests/fixtures/upstream/extensions.facts"),
    ),
    (
        "core.facts",
        include_str!("../../../../tests/fixtures/upstream/core.facts"),
    ),
];

/// The checked attributes of one schema node, as `key=value` strings, sorted.
type Attrs = BTreeSet<String>;
/// One unexpanded row: a path and the words after it.
type Row = (String, Vec<String>);

/// One CRD's facts: its header attributes and its nodes by path.
#[derive(Debug, Default)]
struct CrdFacts {
    header: BTreeMap<String, String>,
    nodes: BTreeMap<String, Attrs>,
    /// Paths that are Granary's own (rows starting with `+`).
    granary: BTreeSet<String>,
}

/// Every CRD's facts by name, from the fact files (templates are shared across files).
fn load_facts() -> BTreeMap<String, CrdFacts> {
    let mut templates: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    let mut crds: BTreeMap<String, CrdFacts> = BTreeMap::new();
    for (file, text) in FACT_FILES {
        let mut current_template: Option<(String, Vec<Row>)> = None;
        let mut current_crd: Option<String> = None;
        for (n, raw) in text.lines().enumerate() {
            let at = format!("{file}:{}", n + 1);
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[0] {
                "template" => {
                    current_template = Some((words[1].to_string(), Vec::new()));
                }
                "end" => {
                    let (name, rows) = current_template
                        .take()
                        .unwrap_or_else(|| panic!("{at}: `end` outside a template"));
                    templates.insert(name, rows);
                }
                "crd" => {
                    let name = words[1].to_string();
                    let mut facts = CrdFacts::default();
                    for word in &words[2..] {
                        let (key, value) = word
                            .split_once('=')
                            .unwrap_or_else(|| panic!("{at}: {word:?} is not key=value"));
                        facts.header.insert(key.to_string(), value.to_string());
                    }
                    crds.insert(name.clone(), facts);
                    current_crd = Some(name);
                }
                _ => {
                    let (granary, words) = if words[0] == "+" {
                        (true, &words[1..])
                    } else {
                        (false, &words[..])
                    };
                    let row = (
                        words[0].to_string(),
                        words[1..].iter().map(|w| w.to_string()).collect(),
                    );
                    if let Some((_, rows)) = current_template.as_mut() {
                        rows.push(row);
                        continue;
                    }
                    let crd = current_crd
                        .as_ref()
                        .and_then(|name| crds.get_mut(name))
                        .unwrap_or_else(|| panic!("{at}: a field row outside any crd"));
                    let mut out = BTreeMap::new();
                    expand(&templates, &row.0, &row.1, &mut out, &at);
                    for (path, attrs) in out {
                        if granary {
                            crd.granary.insert(path.clone());
                        }
                        if crd.nodes.insert(path.clone(), attrs).is_some() {
                            panic!("{at}: {path} is listed twice");
                        }
                    }
                }
            }
        }
    }
    crds
}

/// Joins a template-relative path onto `base`.
fn join(base: &str, rel: &str) -> String {
    match rel {
        "." => base.to_string(),
        _ if base.is_empty() => rel.to_string(),
        _ if rel.starts_with('[') || rel.starts_with('{') => format!("{base}{rel}"),
        _ => format!("{base}.{rel}"),
    }
}

/// Expands one row (`path type attrs` or `path @Template attrs`) into nodes.
fn expand(
    templates: &BTreeMap<String, Vec<Row>>,
    path: &str,
    words: &[String],
    out: &mut BTreeMap<String, Attrs>,
    at: &str,
) {
    let (first, extra) = words
        .split_first()
        .unwrap_or_else(|| panic!("{at}: {path} has no type"));
    if let Some(name) = first.strip_prefix('@') {
        let rows = templates
            .get(name)
            .unwrap_or_else(|| panic!("{at}: unknown template {name}"));
        for (rel, rel_words) in rows {
            let mut words = rel_words.clone();
            if rel == "." {
                words.extend(extra.iter().cloned());
            }
            expand(templates, &join(path, rel), &words, out, at);
        }
        return;
    }
    let mut attrs = Attrs::new();
    attrs.insert(format!("type={first}"));
    for word in extra {
        let word = match word.as_str() {
            "nullable" => "nullable=true".to_string(),
            "preserve" => "preserve=true".to_string(),
            other => other.to_string(),
        };
        let word = if let Some(values) = word.strip_prefix("enum=") {
            format!("enum={}", sorted(values.split('|')))
        } else if let Some(fields) = word.strip_prefix("required=") {
            format!("required={}", sorted(fields.split(',')))
        } else {
            word
        };
        attrs.insert(word);
    }
    out.insert(path.to_string(), attrs);
}

fn sorted<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut items: Vec<&str> = items.collect();
    items.sort_unstable();
    items.join("|")
}

/// Every node of a generated schema by path, with the same attribute vocabulary.
fn flatten(node: &Value, path: &str, out: &mut BTreeMap<String, Attrs>) {
    let Some(map) = node.as_object() else {
        return;
    };
    let mut attrs = Attrs::new();
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0)
            .map(|f| format!("{}", f as i64))
            .unwrap_or_else(|| n.to_string()),
        other => other.to_string(),
    };
    for (key, value) in map {
        let name = match key.as_str() {
            "type" => "type",
            "format" => "format",
            "nullable" => "nullable",
            "x-kubernetes-map-type" => "map",
            "x-kubernetes-list-type" => "list",
            "x-kubernetes-preserve-unknown-fields" => "preserve",
            "x-kubernetes-int-or-string" => "intOrString",
            "minItems" | "maxLength" | "minLength" | "pattern" | "minimum" => key.as_str(),
            "enum" | "required" => {
                let items = value
                    .as_array()
                    .map(|a| a.iter().map(text).collect::<Vec<_>>());
                let mut items = items.unwrap_or_default();
                items.sort();
                attrs.insert(format!("{key}={}", items.join("|")));
                continue;
            }
            _ => continue,
        };
        if value == &Value::Bool(false) {
            continue;
        }
        attrs.insert(format!("{name}={}", text(value)));
    }
    if !path.is_empty() {
        out.insert(path.to_string(), attrs);
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            if path.is_empty() && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            flatten(child, &join(path, name), out);
        }
    }
    if let Some(items) = map.get("items") {
        flatten(items, &format!("{path}[]"), out);
    }
    if let Some(extra @ Value::Object(_)) = map.get("additionalProperties") {
        flatten(extra, &format!("{path}{{}}"), out);
    }
}

fn list(values: Option<&Vec<String>>) -> String {
    match values {
        Some(values) if !values.is_empty() => values.join(","),
        _ => "-".to_string(),
    }
}

/// Every difference between one generated CRD and its facts, each naming the field path.
fn differences(crd: &CustomResourceDefinition, facts: &CrdFacts) -> Vec<String> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let mut out = Vec::new();
    let mut header = BTreeMap::new();
    header.insert("scope", crd.spec.scope.clone());
    header.insert("short", list(crd.spec.names.short_names.as_ref()));
    header.insert("categories", list(crd.spec.names.categories.as_ref()));
    let [version] = crd.spec.versions.as_slice() else {
        return vec![format!("{name}: expected exactly one version")];
    };
    let status = version
        .subresources
        .as_ref()
        .is_some_and(|s| s.status.is_some());
    header.insert("status", if status { "yes" } else { "no" }.to_string());
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .map(|s| serde_json::to_value(s).expect("a schema serializes"))
        .unwrap_or(Value::Null);
    let root_required = schema.get("required").and_then(Value::as_array).map(|r| {
        r.iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect::<Vec<_>>()
    });
    header.insert("required", list(root_required.as_ref()));
    for (key, actual) in &header {
        let expected = facts.header.get(*key).map(String::as_str).unwrap_or("-");
        if expected != actual {
            out.push(format!(
                "{name}: {key}: upstream has {expected}, Granary has {actual}"
            ));
        }
    }
    let labels = crd.metadata.labels.clone().unwrap_or_default();
    let expected_label = facts.header.get("label");
    let actual_label = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    if expected_label.map(String::as_str).unwrap_or("") != actual_label {
        out.push(format!(
            "{name}: labels: upstream has {expected_label:?}, Granary has {actual_label:?}"
        ));
    }

    let mut nodes = BTreeMap::new();
    flatten(&schema, "", &mut nodes);
    for (path, expected) in &facts.nodes {
        match nodes.get(path) {
            None => out.push(format!(
                "{name}: {path}: upstream has this field, Granary's schema does not (the API server would prune it)"
            )),
            Some(actual) if actual != expected => {
                let missing: Vec<_> = expected.difference(actual).collect();
                let extra: Vec<_> = actual.difference(expected).collect();
                out.push(format!(
                    "{name}: {path}: upstream has {missing:?} that Granary lacks, Granary has {extra:?} that upstream lacks"
                ));
            }
            Some(_) => {}
        }
    }
    for path in nodes.keys() {
        if !facts.nodes.contains_key(path) {
            out.push(format!(
                "{name}: {path}: Granary's schema has this field, upstream does not (mark it `+` if it is Granary's own)"
            ));
        }
    }
    out
}

#[test]
fn every_crd_has_upstreams_wire_shape() {
    let facts = load_facts();
    let generated = crds(None);
    let mut problems = Vec::new();
    for crd in &generated {
        let name = crd.metadata.name.clone().unwrap_or_default();
        match facts.get(&name) {
            None => problems.push(format!("{name}: no facts in tests/fixtures/upstream/")),
            Some(f) => problems.extend(differences(crd, f)),
        }
    }
    let names: BTreeSet<_> = generated
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    for name in facts.keys() {
        if !names.contains(name) {
            problems.push(format!("{name}: has facts but Granary serves no such CRD"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} difference(s) from upstream:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_drift_names_the_crd_and_the_field_path() {
    let facts = load_facts();
    let mut crd = crds(None)
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some("restores.velero.io"))
        .expect("Granary serves Restores");
    let mut value = serde_json::to_value(&crd).expect("a CRD serializes");
    let spec = value
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties")
        .and_then(Value::as_object_mut)
        .expect("the Restore schema has spec properties");
    spec["backupName"]["nullable"] = Value::Bool(true);
    spec.insert("backupType".into(), serde_json::json!({"type": "string"}));
    spec.remove("scheduleName");
    crd = serde_json::from_value(value).expect("still a CRD");
    let problems = differences(&crd, &facts["restores.velero.io"]).join("\n");
    for expected in [
        "restores.velero.io: spec.backupName: upstream has [] that Granary lacks, Granary has [\"nullable=true\"]",
        "restores.velero.io: spec.backupType: Granary's schema has this field, upstream does not",
        "restores.velero.io: spec.scheduleName: upstream has this field, Granary's schema does not",
    ] {
        assert!(
            problems.contains(expected),
            "{problems}\nshould contain {expected}"
        );
    }
}
