//! A built-in kind's body as kube-apiserver's decoder takes it, beyond metadata
//! ([`super::metadata`]) and the ConfigMap and Secret payloads ([`super::payload`]):
//! every field the kind's Go type declares must hold what Go's `encoding/json` decodes
//! into that type, or the write is refused (`replicas: "two"` is a 400 naming
//! `DeploymentSpec.spec.replicas` and `int32`); and what a decode/encode round trip
//! drops is dropped (a `null` field).
//!
//! The types come from the compiled Kubernetes descriptors (`k8s.fds`, the ones the
//! protobuf decoder reads): a proto `int32` is Go's `int32`, a message is a struct, a
//! repeated field a slice, a map a map. The apimachinery types with their own JSON
//! form (times, quantities, int-or-strings, raw extensions) are checked as what their
//! `UnmarshalJSON` accepts. Fields the kind does not declare are left to field
//! validation ([`super::field_validation`]).

use std::borrow::Cow;

use protobuf::reflect::{MessageDescriptor, RuntimeFieldType, RuntimeType};
use serde_json::{Map, Value};

use super::metadata::TypeError;
use super::registry::ResourceInfo;

const META: &str = "apimachinery.pkg.apis.meta.v1.";

fn descriptor(info: &ResourceInfo) -> Option<MessageDescriptor> {
    if info.crd.is_some() {
        return None;
    }
    super::protobuf::descriptor_of(&info.api_version(), &info.kind)
}

/// Go's name of a message type: its package's last element and its name
/// (`v1.PodSpec`, `resource.Quantity`).
fn go_message(m: &MessageDescriptor) -> String {
    let full = m.full_name();
    let (package, name) = full.rsplit_once('.').unwrap_or(("", full));
    let short = package.rsplit('.').next().unwrap_or(package);
    format!("{short}.{name}")
}

fn go_type(t: &RuntimeType) -> Cow<'static, str> {
    match t {
        RuntimeType::I32 => "int32".into(),
        RuntimeType::I64 => "int64".into(),
        RuntimeType::U32 => "uint32".into(),
        RuntimeType::U64 => "uint64".into(),
        RuntimeType::F32 => "float32".into(),
        RuntimeType::F64 => "float64".into(),
        RuntimeType::Bool => "bool".into(),
        RuntimeType::String => "string".into(),
        RuntimeType::VecU8 => "[]uint8".into(),
        RuntimeType::Enum(e) => e.name().to_string().into(),
        RuntimeType::Message(m) => go_message(m).into(),
    }
}

/// What JSON a message type with its own `UnmarshalJSON` accepts; `None` for a plain
/// struct (an object).
fn special(m: &MessageDescriptor, v: &Value) -> Option<Result<(), Option<String>>> {
    let full = m.full_name();
    let ok = |fits: bool| Some(if fits { Ok(()) } else { Err(None) });
    match full {
        "apimachinery.pkg.util.intstr.IntOrString" => {
            ok(v.is_string() || v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()))
        }
        "apimachinery.pkg.api.resource.Quantity" => match v {
            Value::String(s) => Some(
                if quantity_parses(s) {
                    Ok(())
                } else {
                    Err(Some(QUANTITY_ERROR.to_string()))
                },
            ),
            Value::Number(_) => ok(true),
            _ => ok(false),
        },
        _ if full == format!("{META}Time") || full == format!("{META}MicroTime") => match v {
            Value::String(s) => Some(
                chrono::DateTime::parse_from_rfc3339(s)
                    .map(|_| ())
                    .map_err(|_| {
                        Some(format!(
                            "parsing time {s:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {s:?} as \"2006\""
                        ))
                    }),
            ),
            _ => ok(false),
        },
        _ if full == format!("{META}Duration") => ok(v.is_string()),
        _ if full == format!("{META}Verbs") => {
            ok(v.as_array().is_some_and(|a| a.iter().all(Value::is_string)))
        }
        _ if full == format!("{META}FieldsV1") => ok(v.is_object()),
        "apimachinery.pkg.runtime.RawExtension" | "apimachinery.pkg.runtime.Unknown" => {
            ok(true)
        }
        _ if full.starts_with("apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON") => {
            ok(true)
        }
        _ => None,
    }
}

/// Go's error for a quantity that does not parse (`resource.ErrFormatWrong`).
const QUANTITY_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Whether `s` is a Kubernetes quantity: a signed decimal number and one suffix, binary
/// (`Ki` … `Ei`), decimal (`m`, `k`, `M` … `E`) or an exponent (`e3`, `E-2`). (The
/// grammar of apimachinery's `ParseQuantity`; the value itself is not needed here.)
fn quantity_parses(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let digits = number.chars().filter(char::is_ascii_digit).count();
    if digits == 0 || number.matches('.').count() > 1 {
        return false;
    }
    match suffix {
        "" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => true,
        _ => suffix
            .strip_prefix(['e', 'E'])
            .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
            .is_some_and(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())),
    }
}

struct Walk {
    /// Dotted JSON path from the root, without indexes (as Go names the field).
    path: String,
    /// The innermost struct (`DeploymentSpec`).
    owner: String,
}

impl Walk {
    fn error(&self, v: &Value, go_type: Cow<'static, str>, detail: Option<String>) -> TypeError {
        TypeError {
            field: self.path.clone(),
            element: None,
            owner: self.owner.clone(),
            found: super::metadata::json_kind(v),
            go_type,
            detail,
        }
    }
}

fn check_scalar(t: &RuntimeType, v: &Value, at: &Walk) -> Option<TypeError> {
    let fits = match t {
        RuntimeType::I32 => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        RuntimeType::I64 => v.is_i64(),
        RuntimeType::U32 => v.as_u64().is_some_and(|n| u32::try_from(n).is_ok()),
        RuntimeType::U64 => v.is_u64(),
        RuntimeType::F32 | RuntimeType::F64 => v.is_number(),
        RuntimeType::Bool => v.is_boolean(),
        RuntimeType::String | RuntimeType::Enum(_) => v.is_string(),
        RuntimeType::VecU8 => {
            let Some(s) = v.as_str() else {
                return Some(at.error(v, go_type(t), None));
            };
            return super::payload::base64_error(s).map(|d| at.error(v, go_type(t), Some(d)));
        }
        RuntimeType::Message(m) => {
            return match special(m, v) {
                Some(Ok(())) => None,
                Some(Err(detail)) => Some(at.error(v, go_type(t), detail)),
                None => match v {
                    Value::Object(map) => check_message(m, map, at),
                    _ => Some(at.error(v, go_type(t), None)),
                },
            };
        }
    };
    (!fits).then(|| at.error(v, go_type(t), None))
}

fn check_message(m: &MessageDescriptor, map: &Map<String, Value>, at: &Walk) -> Option<TypeError> {
    for (key, v) in map {
        if v.is_null() || key.starts_with('$') {
            continue;
        }
        let Some((owner, field)) = super::protobuf::json_field(m, key) else {
            continue;
        };
        let here = Walk {
            path: if at.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", at.path)
            },
            owner: owner.name().to_string(),
        };
        let err = match field.runtime_field_type() {
            RuntimeFieldType::Singular(t) => check_scalar(&t, v, &here),
            RuntimeFieldType::Repeated(t) => match v {
                Value::Array(items) => items
                    .iter()
                    .filter(|x| !x.is_null())
                    .find_map(|x| check_scalar(&t, x, &here)),
                _ => Some(here.error(v, format!("[]{}", go_type(&t)).into(), None)),
            },
            RuntimeFieldType::Map(k, t) => match v {
                Value::Object(entries) => entries
                    .values()
                    .filter(|x| !x.is_null())
                    .find_map(|x| check_scalar(&t, x, &here)),
                _ => Some(here.error(
                    v,
                    format!("map[{}]{}", go_type(&k), go_type(&t)).into(),
                    None,
                )),
            },
        };
        if err.is_some() {
            return err;
        }
    }
    None
}

/// The first field of a built-in kind's body (outside `metadata`, which
/// [`super::metadata::type_error`] checks) that Go's decoder refuses.
pub(crate) fn type_error(info: &ResourceInfo, obj: &Value) -> Option<TypeError> {
    let m = descriptor(info)?;
    let mut body = obj.as_object()?.clone();
    for key in ["apiVersion", "kind", "metadata"] {
        body.remove(key);
    }
    check_message(
        &m,
        &body,
        &Walk {
            path: String::new(),
            owner: info.kind.clone(),
        },
    )
}

fn normalize_value(t: &RuntimeType, v: &mut Value) {
    if let (RuntimeType::Message(m), Value::Object(map)) = (t, v)
        && !super::field_validation::opaque(m)
    {
        normalize_message(m, map);
    }
}

fn normalize_message(m: &MessageDescriptor, map: &mut Map<String, Value>) {
    map.retain(|_, v| !v.is_null());
    for (key, v) in map.iter_mut() {
        let Some((_, field)) = super::protobuf::json_field(m, key) else {
            continue;
        };
        match (field.runtime_field_type(), v) {
            (RuntimeFieldType::Singular(t), v) => normalize_value(&t, v),
            (RuntimeFieldType::Repeated(t), Value::Array(items)) => {
                for item in items {
                    if item.is_null() {
                        *item = zero(&t);
                    } else {
                        normalize_value(&t, item);
                    }
                }
            }
            (RuntimeFieldType::Map(_, t), Value::Object(entries)) => {
                for item in entries.values_mut() {
                    if item.is_null() {
                        *item = zero(&t);
                    } else {
                        normalize_value(&t, item);
                    }
                }
            }
            _ => {}
        }
    }
}

/// What a `null` element of a slice or map becomes: Go's zero value, as encoded.
fn zero(t: &RuntimeType) -> Value {
    match t {
        RuntimeType::String | RuntimeType::Enum(_) => Value::String(String::new()),
        RuntimeType::Bool => Value::Bool(false),
        RuntimeType::VecU8 => Value::Null,
        RuntimeType::Message(m) if super::field_validation::opaque(m) => Value::Null,
        RuntimeType::Message(_) => Value::Object(Map::new()),
        _ => Value::from(0),
    }
}

/// Drops what a decode/encode round trip drops from a built-in kind's body (call after
/// [`type_error`] found nothing): `null` fields; `null` elements become zero values.
pub(crate) fn normalize(info: &ResourceInfo, obj: &mut Value) {
    let Some(m) = descriptor(info) else {
        return;
    };
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let metadata = map.remove("metadata");
    normalize_message(&m, map);
    if let Some(meta) = metadata {
        map.insert("metadata".into(), meta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn info(group: &str, plural: &str) -> std::sync::Arc<ResourceInfo> {
        Registry::new().lookup(group, "v1", plural).unwrap()
    }

    #[test]
    fn mistyped_fields_name_the_go_struct_field_and_type() {
        let deploy = info("apps", "deployments");
        let undecodable = |body: Value| {
            type_error(&deploy, &body)
                .map(|e| e.undecodable(&deploy).message)
                .unwrap_or_default()
        };
        assert_eq!(
            undecodable(json!({"spec": {"replicas": "two"}})),
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        assert_eq!(
            undecodable(
                json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": 5}]}}}})
            ),
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.image of type string"
        );
        assert!(
            undecodable(json!({"spec": {"template": {"spec": {"containers": {}}}}}))
                .contains("of type []v1.Container")
        );
        assert!(
            undecodable(json!({"spec": "x"}))
                .contains("Go struct field Deployment.spec of type v1.DeploymentSpec")
        );
        assert!(undecodable(json!({"spec": {"replicas": 1.5}})).contains("int32"));
        assert!(undecodable(json!({"spec": {"replicas": 3_000_000_000u64}})).contains("int32"));
        assert!(
            undecodable(json!({"spec": {"selector": {"matchLabels": {"a": 1}}}}))
                .contains("LabelSelector.spec.selector.matchLabels of type string")
        );
        assert!(
            undecodable(json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": true}}}}))
                .contains("intstr.IntOrString")
        );
        assert!(undecodable(json!({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "lots"}}}]}}}})).contains("quantities must match"));
        // What Go takes.
        for fine in [
            json!({"spec": {"replicas": null, "paused": false, "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}}}),
            json!({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "100m", "memory": 64}}}]}}}}),
            json!({"spec": {"unknownField": "left to field validation"}, "status": {"conditions": [{"lastUpdateTime": "2024-01-01T00:00:00Z"}]}}),
        ] {
            assert_eq!(undecodable(fine.clone()), "", "{fine}");
        }
        for (q, ok) in [
            ("1", true),
            ("-1.5Gi", true),
            (".5", true),
            ("5.", true),
            ("1e3", true),
            ("1E-2", true),
            ("100m", true),
            ("1.2.3", false),
            ("Gi", false),
            ("1x", false),
            ("1e", false),
            ("", false),
        ] {
            assert_eq!(quantity_parses(q), ok, "{q}");
        }
        let pod = info("", "pods");
        assert!(type_error(&pod, &json!({"status": {"startTime": "yesterday"}})).is_some());
    }

    #[test]
    fn nulls_are_dropped_as_a_round_trip_drops_them() {
        let deploy = info("apps", "deployments");
        let mut obj = json!({"metadata": {"name": "d"}, "spec": {"replicas": null, "selector": {"matchLabels": {"a": null}},
            "template": {"spec": {"containers": [null, {"name": "x", "args": [null, "b"]}]}}}});
        normalize(&deploy, &mut obj);
        assert_eq!(
            obj,
            json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": ""}},
                "template": {"spec": {"containers": [{}, {"name": "x", "args": ["", "b"]}]}}}})
        );
    }
}
