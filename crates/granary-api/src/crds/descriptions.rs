//! Every field a user sees through `kubectl explain` in every CRD Granary serves has a
//! description written for that user: none is missing, and none carries the project's
//! internal jargon (generator boilerplate, design-document or seed-proposal references).
//! Item and map-value schemas are not walked for their own description (kubectl shows the
//! field's), but their fields are.

use serde_json::Value;

use super::{crds, file_name};

/// Words that mean something only inside the project.
const JARGON: [&str; 5] = [
    "Auto-generated",
    "seed 0",
    "DESIGN",
    "§",
    "via `CustomResource`",
];

/// Problems of one schema node at `path` and everything under it.
fn check(path: &str, node: &Value, described: bool, out: &mut Vec<String>) {
    let Some(map) = node.as_object() else {
        return;
    };
    let description = map.get("description").and_then(Value::as_str);
    match description {
        Some(d) => {
            if let Some(word) = JARGON.iter().find(|w| d.contains(*w)) {
                out.push(format!("{path}: jargon {word:?} in {d:?}"));
            }
            if described && d.trim().is_empty() {
                out.push(format!("{path}: empty description"));
            }
        }
        None if described => out.push(format!("{path}: no description")),
        None => {}
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, child) in props {
            check(&format!("{path}.{name}"), child, true, out);
        }
    }
    for (key, suffix) in [("items", "[]"), ("additionalProperties", "{}")] {
        if let Some(child) = map.get(key) {
            check(&format!("{path}{suffix}"), child, false, out);
        }
    }
}

#[test]
fn every_field_a_user_sees_is_described_without_jargon() {
    let mut problems = Vec::new();
    for crd in crds(None) {
        let json = serde_json::to_value(&crd).expect("a CRD serializes");
        for version in json["spec"]["versions"].as_array().expect("versions") {
            let schema = &version["schema"]["openAPIV3Schema"];
            let mut found = Vec::new();
            check("", schema, true, &mut found);
            problems.extend(found.into_iter().map(|p| {
                format!(
                    "{} {} {p}",
                    file_name(&crd),
                    version["name"].as_str().unwrap_or("")
                )
            }));
        }
    }
    assert!(
        problems.is_empty(),
        "{} fields lack a user's description:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
