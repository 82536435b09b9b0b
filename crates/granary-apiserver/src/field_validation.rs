//! Server-side field validation (`?fieldValidation=Ignore|Warn|Strict`, kube-apiserver's
//! default `Warn`): the fields of a create, update, or merge or strategic-merge patch body
//! that the kind does not declare are dropped, and reported: with `Strict` the write is
//! refused (400 for a create or update, 422 for a patch, kube-apiserver's messages), with
//! `Warn` each is a `Warning: 299` header, with `Ignore` nothing is said.
//!
//! What a kind declares: for a built-in kind, the fields of its message in the compiled
//! Kubernetes descriptors (`k8s.fds`, the same the protobuf decoder reads), fields that
//! Go inlines looked up in the inlined message, and the values kube encodes as scalars or
//! free-form JSON (times, quantities, int-or-strings, raw extensions, managed fields,
//! JSON schemas) left alone; for a custom resource, its version's structural schema
//! (`properties`, `additionalProperties`, `items`, `x-kubernetes-preserve-unknown-fields`).
//! Server-side apply bodies and JSON patches are not checked here.

use protobuf::reflect::{MessageDescriptor, RuntimeFieldType, RuntimeType};
use serde_json::Value;

use super::errors::ApiError;
use super::registry::ResourceInfo;

/// What `fieldValidation` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Directive {
    Ignore,
    Warn,
    Strict,
}

impl Directive {
    /// The query parameter's value (absent or empty: `Warn`, kube-apiserver's default).
    pub(crate) fn parse(value: Option<&str>) -> Result<Directive, ApiError> {
        match value.unwrap_or_default() {
            "" | "Warn" => Ok(Directive::Warn),
            "Ignore" => Ok(Directive::Ignore),
            "Strict" => Ok(Directive::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation parameter {other:?} is not valid, must be one of \
                 [Ignore Warn Strict]"
            ))),
        }
    }
}

/// The message types whose JSON is a scalar or free-form: never walked.
const OPAQUE: &[&str] = &[
    "apimachinery.pkg.apis.meta.v1.Time",
    "apimachinery.pkg.apis.meta.v1.MicroTime",
    "apimachinery.pkg.apis.meta.v1.Duration",
    "apimachinery.pkg.apis.meta.v1.FieldsV1",
    "apimachinery.pkg.apis.meta.v1.Verbs",
    "apimachinery.pkg.util.intstr.IntOrString",
    "apimachinery.pkg.api.resource.Quantity",
    "apimachinery.pkg.api.resource.QuantityValue",
    "apimachinery.pkg.runtime.RawExtension",
    "apimachinery.pkg.runtime.Unknown",
];

/// Whether message `m` has a JSON form of its own (a scalar or free-form value), not a
/// struct of fields (shared with the typed decoding, [`super::typed`]).
pub(crate) fn opaque(m: &MessageDescriptor) -> bool {
    let name = m.full_name();
    OPAQUE.contains(&name)
        || name.starts_with("apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON")
}

/// Removes from `obj` (a whole object of `info`'s kind, or a patch body) the fields the
/// kind does not declare; their paths (`spec.template.spec.containers[0].foo`), in
/// document order.
pub(crate) fn take_unknown(info: &ResourceInfo, obj: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(schema) = &info.schema {
        schema_walk(schema, obj, "", &mut out);
    } else if info.crd.is_none()
        && let Some(m) = super::protobuf::descriptor_of(&info.api_version(), &info.kind)
    {
        message_walk(&m, obj, "", &mut out);
    }
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The type of JSON key `key` of message `m`: `Some(None)` a declared field of scalar
/// type, `Some(Some(t))` one of message type (how it repeats), `None` undeclared.
fn field_type(m: &MessageDescriptor, key: &str) -> Option<Option<(MessageDescriptor, Shape)>> {
    let (_, f) = super::protobuf::json_field(m, key)?;
    Some(match f.runtime_field_type() {
        RuntimeFieldType::Singular(RuntimeType::Message(t)) => Some((t, Shape::One)),
        RuntimeFieldType::Repeated(RuntimeType::Message(t)) => Some((t, Shape::List)),
        RuntimeFieldType::Map(_, RuntimeType::Message(t)) => Some((t, Shape::Map)),
        _ => None,
    })
}

#[derive(Clone, Copy)]
enum Shape {
    One,
    List,
    Map,
}

fn message_walk(m: &MessageDescriptor, v: &mut Value, path: &str, out: &mut Vec<String>) {
    if opaque(m) {
        return;
    }
    let Value::Object(map) = v else {
        return;
    };
    let root = path.is_empty();
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        // Patch directives, and the type meta of the object itself.
        if key.starts_with('$') || (root && (key == "apiVersion" || key == "kind")) {
            continue;
        }
        let here = join(path, &key);
        match field_type(m, &key) {
            None => {
                if !map.get(&key).is_some_and(Value::is_null) {
                    out.push(here);
                }
                map.remove(&key);
            }
            Some(None) => {}
            Some(Some((t, shape))) => {
                let Some(value) = map.get_mut(&key) else {
                    continue;
                };
                match (shape, value) {
                    (Shape::One, v) => message_walk(&t, v, &here, out),
                    (Shape::List, Value::Array(items)) => {
                        for (i, item) in items.iter_mut().enumerate() {
                            message_walk(&t, item, &format!("{here}[{i}]"), out);
                        }
                    }
                    (Shape::Map, Value::Object(entries)) => {
                        for (k, item) in entries.iter_mut() {
                            message_walk(&t, item, &format!("{here}[{k}]"), out);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

fn schema_walk(schema: &Value, v: &mut Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            // The object itself, or an object embedded whole: type and object meta.
            let root = path.is_empty() || flag(schema, "x-kubernetes-embedded-resource");
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if key.starts_with('$')
                    || (root && matches!(key.as_str(), "apiVersion" | "kind" | "metadata"))
                {
                    continue;
                }
                let here = join(path, &key);
                let child = props.and_then(|p| p.get(&key)).or(match additional {
                    Some(Value::Object(_)) => additional,
                    _ => None,
                });
                match child {
                    Some(child) => {
                        if let Some(value) = map.get_mut(&key) {
                            schema_walk(child, value, &here, out);
                        }
                    }
                    None if preserve || additional == Some(&Value::Bool(true)) => {}
                    None => {
                        if !map.get(&key).is_some_and(Value::is_null) {
                            out.push(here);
                        }
                        map.remove(&key);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    schema_walk(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// What the unknown fields `unknown` of a write mean under `directive`: the warnings to
/// send, or the refusal (`patch`: the write is a patch, refused as kube-apiserver
/// refuses a patch that does not decode strictly).
pub(crate) fn outcome(
    directive: Directive,
    unknown: &[String],
    patch: bool,
) -> Result<Vec<String>, ApiError> {
    if unknown.is_empty() || directive == Directive::Ignore {
        return Ok(Vec::new());
    }
    let each: Vec<String> = unknown
        .iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect();
    match directive {
        Directive::Strict => {
            let message = format!("strict decoding error: {}", each.join(", "));
            Err(if patch {
                ApiError::unprocessable(format!("patch: Invalid value: {message}"))
            } else {
                ApiError::bad_request(message)
            })
        }
        _ => Ok(each),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(api_version: &str, kind: &str) -> ResourceInfo {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        ResourceInfo {
            group: group.into(),
            version: version.into(),
            storage_version: version.into(),
            kind: kind.into(),
            plural: String::new(),
            singular: String::new(),
            namespaced: true,
            short_names: Vec::new(),
            categories: Vec::new(),
            status: false,
            scale: None,
            generation: false,
            field_selectors: Vec::new(),
            schema: None,
            crd: None,
            printer_columns: Vec::new(),
            openapi_name: String::new(),
            stored_as: None,
        }
    }

    #[test]
    fn undeclared_fields_of_built_in_kinds_are_found_and_dropped() {
        // A key that is no field, whatever its bytes (never a panic).
        let mut odd = json!({"apiVersion": "v1", "kind": "ConfigMap", "é": 1, "dä": 2});
        assert_eq!(
            take_unknown(&info("v1", "ConfigMap"), &mut odd),
            ["dä", "é"]
        );
        let mut d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"any": "thing"}, "bogus": 1},
            "spec": {
                "replicas": 1, "replicaz": 2,
                "template": {"spec": {"containers": [
                    {"name": "c", "image": "i", "imagePullPolicy": "Always", "colour": "red",
                     "resources": {"limits": {"cpu": "1"}},
                     "livenessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 5},
                     "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
                ],
                "volumes": [{"name": "v", "configMap": {"name": "cm"}, "wat": true}]}},
                "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
            },
            "status": {"conditions": [{"type": "Available", "lastUpdateTime": "2026-01-01T00:00:00Z"}]},
        });
        let unknown = take_unknown(&info("apps/v1", "Deployment"), &mut d);
        assert_eq!(
            unknown,
            [
                "metadata.bogus",
                "spec.replicaz",
                "spec.template.spec.containers[0].colour",
                "spec.template.spec.volumes[0].wat",
            ]
        );
        assert!(d["spec"].get("replicaz").is_none());
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], "i");
        assert!(
            d["spec"]["strategy"].get("$retainKeys").is_some(),
            "directives stay"
        );
    }

    #[test]
    fn a_custom_resource_is_checked_against_its_schema() {
        let mut i = info("x.io/v1", "Thing");
        i.crd = Some("things.x.io".into());
        i.schema = Some(std::sync::Arc::new(json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
            }}},
        })));
        let mut t = json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"size": 1, "colour": "red", "labels": {"a": "b"}, "free": {"any": 1},
                     "items": [{"n": "a", "m": 1}]}});
        assert_eq!(take_unknown(&i, &mut t), ["spec.colour", "spec.items[0].m"]);
    }

    #[test]
    fn strict_refuses_warn_warns_ignore_says_nothing() {
        let unknown = vec!["spec.foo".to_string()];
        assert_eq!(
            outcome(Directive::Warn, &unknown, false).unwrap(),
            ["unknown field \"spec.foo\""]
        );
        assert!(
            outcome(Directive::Ignore, &unknown, false)
                .unwrap()
                .is_empty()
        );
        let e = outcome(Directive::Strict, &unknown, false).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "strict decoding error: unknown field \"spec.foo\"")
        );
        assert_eq!(
            outcome(Directive::Strict, &unknown, true).unwrap_err().code,
            422
        );
        assert_eq!(Directive::parse(None).unwrap(), Directive::Warn);
        assert_eq!(Directive::parse(Some("Foo")).unwrap_err().code, 400);
    }
}
