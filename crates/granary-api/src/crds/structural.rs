//! The structural-schema rules kube-apiserver enforces on `apiextensions.k8s.io/v1` CRDs
//! ("Specifying a structural schema" in the Kubernetes docs), checked on our generated
//! CRDs so a schema the API server would refuse never reaches `deploy/`.
//!
//! The rules checked, per schema node:
//! - every node has a non-empty `type`, unless it is `x-kubernetes-int-or-string` or
//!   `x-kubernetes-preserve-unknown-fields` (the root must be `type: object`);
//! - inside `allOf`/`anyOf`/`oneOf`/`not` no `type`, `description`, `default`,
//!   `additionalProperties` or `nullable`, and every property or item named there is
//!   also specified outside the junctor;
//! - no `$ref`, no `additionalProperties: false`, no `uniqueItems: true`, and
//!   `properties` and `additionalProperties` are not used together;
//! - `items` is one schema, not a list;
//! - `metadata` at the root only restricts `name` and `generateName`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Map, Value};

const JUNCTORS: [&str; 4] = ["allOf", "anyOf", "oneOf", "not"];

/// Every structural-schema violation of every version of `crd`, with its schema path.
pub fn problems(crd: &CustomResourceDefinition) -> Vec<String> {
    let value = serde_json::to_value(crd).expect("a CRD always serializes to JSON");
    let mut out = Vec::new();
    let Some(versions) = value.pointer("/spec/versions").and_then(Value::as_array) else {
        return vec!["spec.versions: missing".to_string()];
    };
    for version in versions {
        let name = version.get("name").and_then(Value::as_str).unwrap_or("?");
        match version.pointer("/schema/openAPIV3Schema") {
            None => out.push(format!("{name}: no openAPIV3Schema")),
            Some(schema) => check_schema(schema, &format!("{name}:openAPIV3Schema"), &mut out),
        }
    }
    out
}

/// Checks one root schema (as JSON).
pub fn check_schema(schema: &Value, path: &str, out: &mut Vec<String>) {
    match schema.as_object() {
        Some(map) if map.get("type").and_then(Value::as_str) == Some("object") => {}
        _ => out.push(format!("{path}: the root must be type: object")),
    }
    check_node(schema, path, out);
    if let Some(metadata) = schema
        .pointer("/properties/metadata")
        .and_then(Value::as_object)
    {
        for (key, value) in metadata {
            match key.as_str() {
                "type" | "description" => {}
                "properties" => {
                    if let Some(fields) = value.as_object() {
                        for field in fields.keys() {
                            if field != "name" && field != "generateName" {
                                out.push(format!("{path}.properties.metadata.properties.{field}: only name and generateName may be restricted"));
                            }
                        }
                    }
                }
                other => out.push(format!("{path}.properties.metadata.{other}: only name and generateName may be restricted")),
            }
        }
    }
}

fn check_node(node: &Value, path: &str, out: &mut Vec<String>) {
    let Some(map) = node.as_object() else {
        out.push(format!("{path}: a schema must be an object"));
        return;
    };
    let flag = |key: &str| map.get(key).and_then(Value::as_bool) == Some(true);
    let has_type = map
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    if !has_type
        && !flag("x-kubernetes-int-or-string")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        out.push(format!("{path}: type is required"));
    }
    if map.contains_key("$ref") {
        out.push(format!("{path}: $ref is not allowed"));
    }
    if map.get("additionalProperties") == Some(&Value::Bool(false)) {
        out.push(format!(
            "{path}: additionalProperties: false is not allowed"
        ));
    }
    if map.contains_key("properties") && map.contains_key("additionalProperties") {
        out.push(format!(
            "{path}: properties and additionalProperties are mutually exclusive"
        ));
    }
    if flag("uniqueItems") {
        out.push(format!("{path}: uniqueItems: true is not allowed"));
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            check_node(child, &format!("{path}.properties.{name}"), out);
        }
    }
    match map.get("additionalProperties") {
        Some(child @ Value::Object(_)) => {
            check_node(child, &format!("{path}.additionalProperties"), out)
        }
        Some(Value::Bool(_)) | None => {}
        Some(_) => out.push(format!(
            "{path}.additionalProperties: must be a schema or a boolean"
        )),
    }
    match map.get("items") {
        Some(child @ Value::Object(_)) => check_node(child, &format!("{path}.items"), out),
        Some(Value::Array(_)) => {
            out.push(format!("{path}.items: must be a single schema, not a list"))
        }
        Some(_) => out.push(format!("{path}.items: must be a schema")),
        None => {}
    }
    for junctor in JUNCTORS {
        let Some(value) = map.get(junctor) else {
            continue;
        };
        let branches: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for (i, branch) in branches.into_iter().enumerate() {
            check_junctor_branch(branch, map, &format!("{path}.{junctor}[{i}]"), out);
        }
    }
}

/// A branch of a logical junctor may only add value validations to fields the
/// surrounding schema already specifies.
fn check_junctor_branch(
    branch: &Value,
    outer: &Map<String, Value>,
    path: &str,
    out: &mut Vec<String>,
) {
    let Some(map) = branch.as_object() else {
        out.push(format!("{path}: must be a schema"));
        return;
    };
    let int_or_string = outer
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true);
    for key in [
        "type",
        "description",
        "default",
        "additionalProperties",
        "nullable",
    ] {
        if map.contains_key(key) && !(key == "type" && int_or_string) {
            out.push(format!(
                "{path}: {key} is not allowed inside allOf/anyOf/oneOf/not"
            ));
        }
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        let outer_props = outer.get("properties").and_then(Value::as_object);
        for (name, child) in props {
            match outer_props.and_then(|p| p.get(name)) {
                None => out.push(format!(
                    "{path}.properties.{name}: not specified outside the junctor"
                )),
                Some(outer_child) => {
                    if let Some(outer_child) = outer_child.as_object() {
                        check_junctor_branch(
                            child,
                            outer_child,
                            &format!("{path}.properties.{name}"),
                            out,
                        );
                    }
                }
            }
        }
    }
    if let Some(items) = map.get("items") {
        match outer.get("items").and_then(Value::as_object) {
            None => out.push(format!("{path}.items: not specified outside the junctor")),
            Some(outer_items) => {
                check_junctor_branch(items, outer_items, &format!("{path}.items"), out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Value) -> Vec<String> {
        let mut out = Vec::new();
        check_schema(&schema, "v1", &mut out);
        out
    }

    #[test]
    fn accepts_a_structural_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
                "spec": {
                    "type": "object",
                    "properties": {
                        "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "config": {"type": "object", "additionalProperties": {"type": "string"}},
                        "raw": {"x-kubernetes-preserve-unknown-fields": true},
                        "mode": {"type": "string", "enum": ["a", "b"]},
                        "list": {"type": "array", "items": {"type": "string"}}
                    },
                    "oneOf": [{"required": ["mode"]}, {"properties": {"mode": {"enum": ["a"]}}}]
                }
            }
        });
        assert_eq!(check(schema), Vec::<String>::new());
    }

    #[test]
    fn reports_each_rule_with_its_path() {
        let cases = [
            (
                json!({"type": "object", "properties": {"x": {}}}),
                "v1.properties.x: type is required",
            ),
            (json!({"type": "string"}), "the root must be type: object"),
            (
                json!({"type": "object", "properties": {"x": {"$ref": "#/d", "type": "object"}}}),
                "$ref is not allowed",
            ),
            (
                json!({"type": "object", "additionalProperties": false}),
                "additionalProperties: false",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
                "mutually exclusive",
            ),
            (
                json!({"type": "object", "properties": {"l": {"type": "array", "items": [{"type": "string"}]}}}),
                "single schema",
            ),
            (
                json!({"type": "object", "oneOf": [{"type": "object"}]}),
                "v1.oneOf[0]: type is not allowed",
            ),
            (
                json!({"type": "object", "anyOf": [{"properties": {"y": {"minLength": 1}}}]}),
                "v1.anyOf[0].properties.y: not specified outside",
            ),
            (
                json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
                "only name and generateName",
            ),
            (
                json!({"type": "object", "properties": {"l": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}),
                "uniqueItems",
            ),
        ];
        for (schema, expected) in cases {
            let problems = check(schema.clone());
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "{schema}: {problems:?} should mention {expected:?}"
            );
        }
    }
}
