//! Rewrites that give generated schemas the wire shape the upstream API servers enforce,
//! where the schema generator cannot express it from the Rust types alone.
//!
//! - `nullable`: the generator marks every `Option` field `nullable: true`, but upstream
//!   CRDs accept an explicit `null` only where the Go type says `+nullable`. Every
//!   `nullable` is removed, and put back only on fields whose Rust definition carries
//!   `#[schemars(extend("id" = "granary:nullable"))]` (Granary's `+nullable`).
//! - Kubernetes' own structs that are `+structType=atomic` upstream (`LabelSelector`,
//!   `ObjectReference`, `SecretReference`, `SecretKeySelector`,
//!   `TypedLocalObjectReference`, `CrossVersionObjectReference`) get
//!   `x-kubernetes-map-type: atomic` (and a `LabelSelector` its atomic lists), so
//!   server-side apply replaces them whole; a `SecretKeySelector` requires only `key`,
//!   as upstream does (its `name` defaults to empty). k8s-openapi's schemas leave these
//!   markers out, so they are recognised by their exact set of fields.
//! - `metav1.Condition` gets the validation upstream CRDs carry for it.

use serde_json::{Map, Value, json};

/// The `id` a field's schema carries when upstream declares it `nullable: true`.
pub const NULLABLE_MARKER: &str = "granary:nullable";

/// Applies every rewrite to one root schema.
pub fn apply(schema: &mut Value) {
    walk(schema, &mut |node| {
        nullable(node);
        atomic_structs(node);
        condition(node);
    });
}

/// Calls `f` on every schema node under `schema` (itself included), parents first.
pub fn walk(schema: &mut Value, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    let Value::Object(map) = schema else {
        return;
    };
    f(map);
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.values_mut().for_each(|child| walk(child, f));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child @ Value::Object(_)) = map.get_mut(key) {
            walk(child, f);
        }
    }
}

/// The names of a node's `properties`, sorted.
pub fn field_names(node: &Map<String, Value>) -> Vec<&str> {
    let mut names: Vec<&str> = node
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    names.sort_unstable();
    names
}

fn nullable(node: &mut Map<String, Value>) {
    let marked = node.get("id").and_then(Value::as_str) == Some(NULLABLE_MARKER);
    if marked {
        node.remove("id");
    }
    node.remove("nullable");
    if marked {
        node.insert("nullable".into(), Value::Bool(true));
    }
}

const LABEL_SELECTOR: &[&str] = &["matchExpressions", "matchLabels"];
const ATOMIC_STRUCTS: &[&[&str]] = &[
    LABEL_SELECTOR,
    // corev1.ObjectReference
    &[
        "apiVersion",
        "fieldPath",
        "kind",
        "name",
        "namespace",
        "resourceVersion",
        "uid",
    ],
    // corev1.SecretReference
    &["name", "namespace"],
    // corev1.SecretKeySelector
    SECRET_KEY_SELECTOR,
    // corev1.TypedLocalObjectReference
    &["apiGroup", "kind", "name"],
    // autoscalingv1.CrossVersionObjectReference
    &["apiVersion", "kind", "name"],
];
const SECRET_KEY_SELECTOR: &[&str] = &["key", "name", "optional"];

fn is_object(node: &Map<String, Value>) -> bool {
    node.get("type").and_then(Value::as_str) == Some("object")
}

fn atomic_structs(node: &mut Map<String, Value>) {
    if !is_object(node) {
        return;
    }
    let names = field_names(node);
    if !ATOMIC_STRUCTS.contains(&names.as_slice()) {
        return;
    }
    let selector = names == LABEL_SELECTOR;
    let key_selector = names == SECRET_KEY_SELECTOR;
    node.insert("x-kubernetes-map-type".into(), json!("atomic"));
    if key_selector {
        node.insert("required".into(), json!(["key"]));
    }
    if selector {
        let expressions = node
            .get_mut("properties")
            .and_then(|p| p.get_mut("matchExpressions"));
        if let Some(Value::Object(expressions)) = expressions {
            expressions.insert("x-kubernetes-list-type".into(), json!("atomic"));
            let values = expressions
                .get_mut("items")
                .and_then(|items| items.pointer_mut("/properties/values"));
            if let Some(Value::Object(values)) = values {
                values.insert("x-kubernetes-list-type".into(), json!("atomic"));
            }
        }
    }
}

const CONDITION: &[&str] = &[
    "lastTransitionTime",
    "message",
    "observedGeneration",
    "reason",
    "status",
    "type",
];

/// `metav1.Condition`'s validation markers, as controller-gen writes them.
fn condition(node: &mut Map<String, Value>) {
    if !is_object(node) || field_names(node) != CONDITION {
        return;
    }
    let Some(Value::Object(props)) = node.get_mut("properties") else {
        return;
    };
    let extra = [
        ("message", json!({"maxLength": 32768})),
        ("observedGeneration", json!({"minimum": 0})),
        (
            "reason",
            json!({
                "maxLength": 1024,
                "minLength": 1,
                "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
            }),
        ),
        ("status", json!({"enum": ["True", "False", "Unknown"]})),
        (
            "type",
            json!({
                "maxLength": 316,
                "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
            }),
        ),
    ];
    for (field, checks) in extra {
        if let (Some(Value::Object(target)), Value::Object(checks)) = (props.get_mut(field), checks)
        {
            target.extend(checks);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_only_where_marked() {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "nullable": true},
                "b": {"type": "array", "nullable": true, "id": "granary:nullable", "items": {"type": "string"}}
            }
        });
        apply(&mut schema);
        assert_eq!(schema["properties"]["a"], json!({"type": "string"}));
        assert_eq!(
            schema["properties"]["b"],
            json!({"type": "array", "nullable": true, "items": {"type": "string"}})
        );
    }

    #[test]
    fn kubernetes_structs_become_atomic() {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "selector": {"type": "object", "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "matchExpressions": {"type": "array", "items": {"type": "object", "properties": {
                        "key": {"type": "string"}, "operator": {"type": "string"},
                        "values": {"type": "array", "items": {"type": "string"}}}}}
                }},
                "credential": {"type": "object", "required": ["key", "name"], "properties": {
                    "key": {"type": "string"}, "name": {"type": "string"}, "optional": {"type": "boolean"}
                }}
            }
        });
        apply(&mut schema);
        let selector = &schema["properties"]["selector"];
        assert_eq!(selector["x-kubernetes-map-type"], "atomic");
        assert_eq!(
            selector["properties"]["matchExpressions"]["x-kubernetes-list-type"],
            "atomic"
        );
        assert_eq!(
            selector["properties"]["matchExpressions"]["items"]["properties"]["values"]["x-kubernetes-list-type"],
            "atomic"
        );
        let credential = &schema["properties"]["credential"];
        assert_eq!(credential["x-kubernetes-map-type"], "atomic");
        assert_eq!(credential["required"], json!(["key"]));
    }
}
