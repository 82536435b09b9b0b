//! The structure server-side apply needs to know about an object: which objects are
//! structs (fields) and which are maps (keys are elements), which maps are atomic, and
//! whether a list is atomic, a set or a map keyed by some of its items' fields.
//!
//! Custom resources take this from their CRD's `openAPIV3Schema`
//! (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`,
//! `additionalProperties`). Built-in kinds have no schema here, so a small table gives
//! the parts whose behaviour matters and everything else is *deduced*: objects are
//! structs and lists are atomic. What the table says (as kube-apiserver's types do):
//! - every object's `metadata`: `labels` and `annotations` are maps, `finalizers` is a
//!   set, `ownerReferences` a list-map keyed by `uid`;
//! - ConfigMap `data`/`binaryData` and Secret `data`/`stringData` are maps;
//! - Deployment/StatefulSet: `spec.selector` is atomic, the pod template's metadata is as
//!   above, `containers`/`initContainers` are list-maps by `name` and within them `env`
//!   by `name` and `ports` by `containerPort`+`protocol`; `volumes` by `name`;
//! - Service `spec.ports` by `port`+`protocol`, `spec.selector` an atomic map;
//! - `status.conditions` of those kinds is a list-map by `type`.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Value, json};

/// How a list's items are identified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// Replaced as a whole.
    Atomic,
    /// Items are scalars, identified by value.
    Set,
    /// Items are objects, identified by these key fields.
    Map(Vec<String>),
}

/// Whether a child of an object is one of its declared fields or an element of a map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildKind {
    Field,
    Element,
}

/// The structure of one node of an object (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape<'a> {
    /// A node of an OpenAPI v3 schema.
    Schema(&'a Value),
    /// No schema: objects are structs, lists are atomic.
    Deduced,
    /// An object's root: `metadata` from the common table, the rest from the schema.
    Root(Option<&'a Value>),
}

fn metadata_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "ownerReferences": {
                "type": "array", "items": {"type": "object"},
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]
            }
        }
    })
}

fn list_map(keys: &[&str], items: Value) -> Value {
    json!({"type": "array", "items": items, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": keys})
}

fn string_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}})
}

/// Ports default their protocol to TCP, so a port without one still has its key.
fn port_item() -> Value {
    json!({"type": "object", "properties": {"protocol": {"type": "string", "default": "TCP"}}})
}

fn conditions_status() -> Value {
    json!({"type": "object", "properties": {"conditions": list_map(&["type"], json!({"type": "object"}))}})
}

fn workload_schema() -> Value {
    let container = json!({"type": "object", "properties": {
        "env": list_map(&["name"], json!({"type": "object"})),
        "ports": list_map(&["containerPort", "protocol"], port_item()),
    }});
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic"},
            "template": {"type": "object", "properties": {
                "metadata": metadata_schema(),
                "spec": {"type": "object", "properties": {
                    "containers": list_map(&["name"], container.clone()),
                    "initContainers": list_map(&["name"], container),
                    "volumes": list_map(&["name"], json!({"type": "object"})),
                }},
            }},
        }},
        "status": conditions_status(),
    }})
}

/// Root schemas of the built-in kinds the table describes, by kind.
fn builtin_schemas() -> &'static HashMap<&'static str, Value> {
    static SCHEMAS: OnceLock<HashMap<&'static str, Value>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let mut m = HashMap::new();
        m.insert(
            "ConfigMap",
            json!({"type": "object", "properties": {"data": string_map(), "binaryData": string_map()}}),
        );
        m.insert(
            "Secret",
            json!({"type": "object", "properties": {"data": string_map(), "stringData": string_map()}}),
        );
        m.insert("Deployment", workload_schema());
        m.insert("StatefulSet", workload_schema());
        m.insert(
            "Service",
            json!({"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "ports": list_map(&["port", "protocol"], port_item()),
                    "selector": {"type": "object", "additionalProperties": {"type": "string"},
                                 "x-kubernetes-map-type": "atomic"},
                }},
                "status": conditions_status(),
            }}),
        );
        m.insert(
            "CustomResourceDefinition",
            json!({"type": "object", "properties": {"status": conditions_status()}}),
        );
        m
    })
}

fn common_metadata() -> &'static Value {
    static META: OnceLock<Value> = OnceLock::new();
    META.get_or_init(metadata_schema)
}

impl<'a> Shape<'a> {
    /// The root shape of an object of `kind` whose CRD schema (if any) is `schema`.
    pub(crate) fn root(kind: &str, schema: Option<&'a Value>) -> Shape<'a> {
        match schema {
            Some(s) => Shape::Root(Some(s)),
            None => Shape::Root(builtin_schemas().get(kind)),
        }
    }

    /// The shape of the child `key` of an object node, and whether it is a field or a
    /// map element.
    pub(crate) fn child(&self, key: &str) -> (Shape<'a>, ChildKind) {
        match *self {
            Shape::Deduced => (Shape::Deduced, ChildKind::Field),
            Shape::Root(schema) => {
                if key == "metadata" {
                    (Shape::Schema(common_metadata()), ChildKind::Field)
                } else {
                    match schema {
                        Some(s) => Shape::Schema(s).child(key),
                        None => (Shape::Deduced, ChildKind::Field),
                    }
                }
            }
            Shape::Schema(s) => {
                if let Some(p) = s.get("properties").and_then(|p| p.get(key)) {
                    return (Shape::Schema(p), ChildKind::Field);
                }
                match s.get("additionalProperties") {
                    Some(ap @ Value::Object(_)) => (Shape::Schema(ap), ChildKind::Element),
                    Some(Value::Bool(true)) => (Shape::Deduced, ChildKind::Element),
                    _ => (Shape::Deduced, ChildKind::Field),
                }
            }
        }
    }

    /// Whether this object node is a map (its keys are elements) rather than a struct.
    pub(crate) fn is_map(&self) -> bool {
        match self {
            Shape::Schema(s) => {
                s.get("properties").is_none()
                    && matches!(
                        s.get("additionalProperties"),
                        Some(Value::Object(_) | Value::Bool(true))
                    )
            }
            _ => false,
        }
    }

    /// Whether this object node is replaced as a whole (`x-kubernetes-map-type: atomic`).
    pub(crate) fn is_atomic_map(&self) -> bool {
        matches!(self, Shape::Schema(s)
            if s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"))
    }

    /// How this list node's items are identified.
    pub(crate) fn list_kind(&self) -> ListKind {
        let Shape::Schema(s) = self else {
            return ListKind::Atomic;
        };
        match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys: Vec<String> = s
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|k| k.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::Map(keys)
                }
            }
            _ => ListKind::Atomic,
        }
    }

    /// The shape of this list node's items.
    pub(crate) fn items(&self) -> Shape<'a> {
        match self {
            Shape::Schema(s) => s.get("items").map_or(Shape::Deduced, Shape::Schema),
            _ => Shape::Deduced,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_and_crd_schema() {
        let cm = Shape::root("ConfigMap", None);
        let (data, kind) = cm.child("data");
        assert_eq!(kind, ChildKind::Field);
        assert!(data.is_map());
        assert_eq!(data.child("x").1, ChildKind::Element);
        let (meta, _) = cm.child("metadata");
        assert_eq!(meta.child("finalizers").0.list_kind(), ListKind::Set);
        assert_eq!(
            meta.child("ownerReferences").0.list_kind(),
            ListKind::Map(vec!["uid".into()])
        );
        let unknown = Shape::root("Lease", None).child("spec").0;
        assert_eq!(unknown.child("holderIdentity").1, ChildKind::Field);
        assert_eq!(unknown.list_kind(), ListKind::Atomic);

        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "cfg": {"type": "object", "x-kubernetes-map-type": "atomic"}
        }}}});
        let root = Shape::root("Widget", Some(&schema));
        let spec = root.child("spec").0;
        assert_eq!(spec.child("tags").0.list_kind(), ListKind::Atomic);
        assert!(spec.child("cfg").0.is_atomic_map());
        assert!(!spec.is_map());
        assert_eq!(
            root.child("metadata").0.child("labels").0.child("app").1,
            ChildKind::Element
        );
    }
}
