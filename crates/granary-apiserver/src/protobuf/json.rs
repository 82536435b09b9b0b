//! A parsed Kubernetes protobuf message, walked through rust-protobuf's reflection into
//! the JSON kube-apiserver writes for the same Go object.
//!
//! - Field names: a proto field's name is its JSON name (go-to-protobuf takes it from
//!   the `json` tag), except the `JSONSchemaProps` keys `$ref`, `$schema` and
//!   `x-kubernetes-*`, and the embedded Go structs (`json:",inline"`) in [`INLINE`],
//!   whose fields are lifted into the enclosing object.
//! - Presence (the protos are proto2): an unset field is left out. A set number or bool
//!   is kept even when zero or false, because Go's pointer fields (`replicas: 0`,
//!   `automountServiceAccountToken: false`) are set-to-zero on purpose and the protos
//!   do not say which fields are pointers. The cost: Go's client writes every
//!   non-pointer field, so its zeros show up (`paused: false`, `stdin: false`) where
//!   kube-apiserver's `omitempty` would leave them out; they mean the same to every
//!   reader. A set empty string is left out, as `omitempty` does for nearly every
//!   string field (a pointer string set to `""` is lost). `metadata.generation: 0` is left out too (the server
//!   assigns it). Elements of lists and values of maps are always kept.
//! - Bytes are base64; maps are JSON objects.
//! - The apimachinery types with their own JSON form, by message name: `Time` and
//!   `MicroTime` (RFC 3339, microseconds for the latter; Go's zero time is left out),
//!   `Duration` (Go's `1h0m0s` form), `IntOrString`, `Quantity`, `RawExtension`,
//!   `runtime.Unknown`, `FieldsV1` and apiextensions' `JSON` (the raw JSON they carry),
//!   `Verbs` (a list), and apiextensions' `JSONSchemaPropsOr{Array,Bool,StringArray}`.
//! - A field number the descriptor does not know (kept in the message's unknown fields)
//!   is an error naming it and its path; a known one with the wrong wire type fails the
//!   parse.

use base64::Engine;
use protobuf::MessageDyn;
use protobuf::reflect::{FieldDescriptor, ReflectFieldRef, ReflectValueRef};
use serde_json::{Map, Value};

/// Embedded Go structs (`json:",inline"`): the proto has them as a field, JSON lifts
/// their fields into the parent. Full field names as in `k8s.fds`.
pub(super) const INLINE: &[&str] = &[
    "api.core.v1.ConfigMapEnvSource.localObjectReference",
    "api.core.v1.ConfigMapKeySelector.localObjectReference",
    "api.core.v1.ConfigMapProjection.localObjectReference",
    "api.core.v1.ConfigMapVolumeSource.localObjectReference",
    "api.core.v1.SecretEnvSource.localObjectReference",
    "api.core.v1.SecretKeySelector.localObjectReference",
    "api.core.v1.SecretProjection.localObjectReference",
    "api.core.v1.EphemeralContainer.ephemeralContainerCommon",
    "api.core.v1.PersistentVolumeSpec.persistentVolumeSource",
    "api.core.v1.Probe.handler",
    "api.core.v1.Volume.volumeSource",
    "api.networking.v1.IngressRule.ingressRuleValue",
    "api.admissionregistration.v1.NamedRuleWithOperations.ruleWithOperations",
    "api.admissionregistration.v1.RuleWithOperations.rule",
];

const META: &str = "apimachinery.pkg.apis.meta.v1.";
const APIEXTENSIONS: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1.";

/// Go's zero `time.Time` in Unix seconds (a null timestamp).
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// One message as JSON; `path` names it in errors (`Deployment.spec.template`).
pub(super) fn message(m: &dyn MessageDyn, path: &str) -> Result<Value, String> {
    check_unknown_fields(m, path)?;
    let descriptor = m.descriptor_dyn();
    let name = descriptor.full_name();
    if let Some(special) = special(m, name, path)? {
        return Ok(special);
    }
    let schema_props = name == format!("{APIEXTENSIONS}JSONSchemaProps");
    let mut out = Map::new();
    for field in descriptor.fields() {
        let Some(value) = field_value(m, &field, path)? else {
            continue;
        };
        if INLINE.contains(&field.full_name().as_str()) {
            if let Value::Object(inner) = value {
                out.extend(inner);
            }
            continue;
        }
        let key = if schema_props {
            schema_props_key(field.name())
        } else {
            field.name().to_string()
        };
        out.insert(key, value);
    }
    if name == format!("{META}ObjectMeta") && out.get("generation") == Some(&Value::from(0)) {
        out.remove("generation");
    }
    Ok(Value::Object(out))
}

/// The JSON of one field, `None` when it is left out.
fn field_value(
    m: &dyn MessageDyn,
    field: &FieldDescriptor,
    path: &str,
) -> Result<Option<Value>, String> {
    let here = format!("{path}.{}", field.name());
    Ok(match field.get_reflect(m) {
        ReflectFieldRef::Optional(v) => match v.value() {
            None => None,
            Some(ReflectValueRef::String("")) => None,
            Some(v) => value(v, &here)?,
        },
        ReflectFieldRef::Repeated(items) => {
            if items.is_empty() {
                return Ok(None);
            }
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                out.push(value(item, &format!("{here}[{i}]"))?.unwrap_or(Value::Null));
            }
            Some(Value::Array(out))
        }
        ReflectFieldRef::Map(entries) => {
            if entries.is_empty() {
                return Ok(None);
            }
            let mut out = Map::new();
            for (k, v) in &entries {
                let key = match k {
                    ReflectValueRef::String(s) => s.to_string(),
                    other => other.to_string(),
                };
                let v = value(v, &format!("{here}[{key}]"))?.unwrap_or(Value::Null);
                out.insert(key, v);
            }
            Some(Value::Object(out))
        }
    })
}

/// One value; `None` for a special message whose JSON is absent (a zero time).
fn value(v: ReflectValueRef, path: &str) -> Result<Option<Value>, String> {
    Ok(Some(match v {
        ReflectValueRef::U32(n) => n.into(),
        ReflectValueRef::U64(n) => n.into(),
        ReflectValueRef::I32(n) => n.into(),
        ReflectValueRef::I64(n) => n.into(),
        ReflectValueRef::F32(f) => number(f64::from(f), path)?,
        ReflectValueRef::F64(f) => number(f, path)?,
        ReflectValueRef::Bool(b) => b.into(),
        ReflectValueRef::String(s) => s.into(),
        ReflectValueRef::Bytes(b) => base64::engine::general_purpose::STANDARD.encode(b).into(),
        ReflectValueRef::Enum(e, n) => match e.value_by_number(n) {
            Some(v) => v.name().into(),
            None => n.into(),
        },
        ReflectValueRef::Message(m) => {
            let v = message(&*m, path)?;
            if v.is_null() {
                return Ok(None);
            }
            v
        }
    }))
}

fn number(f: f64, path: &str) -> Result<Value, String> {
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| format!("{path}: {f} is not a JSON number"))
}

/// Fields this message's descriptor does not know (or got with another wire type).
fn check_unknown_fields(m: &dyn MessageDyn, path: &str) -> Result<(), String> {
    match m.special_fields_dyn().unknown_fields().iter().next() {
        None => Ok(()),
        Some((number, value)) => Err(format!(
            "field number {number} (wire type {:?}) of {path} ({}) is not understood by this \
             server",
            value.wire_type(),
            m.descriptor_dyn().full_name()
        )),
    }
}

/// `JSONSchemaProps` field names that are not JSON names.
pub(crate) fn schema_props_key(name: &str) -> String {
    match name {
        "ref" => "$ref".into(),
        "schema" => "$schema".into(),
        _ => match name.strip_prefix("xKubernetes") {
            Some(rest) => {
                let mut key = "x-kubernetes".to_string();
                for c in rest.chars() {
                    if c.is_ascii_uppercase() {
                        key.push('-');
                    }
                    key.push(c.to_ascii_lowercase());
                }
                key
            }
            None => name.into(),
        },
    }
}

/// The singular field `name` of `m`, if set.
pub(super) fn get<'a>(m: &'a dyn MessageDyn, name: &str) -> Option<ReflectValueRef<'a>> {
    m.descriptor_dyn()
        .field_by_name(name)
        .and_then(|f| f.get_singular(m))
}

fn get_i64(m: &dyn MessageDyn, name: &str) -> i64 {
    match get(m, name) {
        Some(ReflectValueRef::I64(n)) => n,
        Some(ReflectValueRef::I32(n)) => n.into(),
        _ => 0,
    }
}

pub(super) fn get_str<'a>(m: &'a dyn MessageDyn, name: &str) -> &'a str {
    match get(m, name) {
        Some(ReflectValueRef::String(s)) => s,
        _ => "",
    }
}

pub(super) fn get_bytes<'a>(m: &'a dyn MessageDyn, name: &str) -> Option<&'a [u8]> {
    match get(m, name) {
        Some(ReflectValueRef::Bytes(b)) => Some(b),
        _ => None,
    }
}

/// Raw JSON carried in bytes; `None` (left out) when empty.
fn raw_json(bytes: Option<&[u8]>, path: &str) -> Result<Option<Value>, String> {
    match bytes {
        None | Some([]) => Ok(None),
        Some(b) => serde_json::from_slice(b)
            .map(Some)
            .map_err(|e| format!("{path}: the embedded raw value is not JSON ({e})")),
    }
}

/// The JSON of the apimachinery (and apiextensions) types with their own JSON form;
/// `Some(Value::Null)` when it is left out, `None` for an ordinary message.
fn special(m: &dyn MessageDyn, name: &str, path: &str) -> Result<Option<Value>, String> {
    let local = if let Some(local) = name.strip_prefix(META) {
        local
    } else if let Some(local) = name.strip_prefix(APIEXTENSIONS) {
        return apiextensions(m, local, path);
    } else {
        match name {
            "apimachinery.pkg.util.intstr.IntOrString" => {
                return Ok(Some(if get_i64(m, "type") == 1 {
                    get_str(m, "strVal").into()
                } else {
                    get_i64(m, "intVal").into()
                }));
            }
            "apimachinery.pkg.api.resource.Quantity"
            | "apimachinery.pkg.api.resource.QuantityValue" => {
                return Ok(Some(get_str(m, "string").into()));
            }
            "apimachinery.pkg.runtime.RawExtension" => {
                return Ok(Some(
                    raw_json(get_bytes(m, "raw"), path)?.unwrap_or(Value::Null),
                ));
            }
            "apimachinery.pkg.runtime.Unknown" => {
                let content_type = get_str(m, "contentType");
                if !content_type.is_empty() && !content_type.contains("json") {
                    return Err(format!(
                        "{path}: an embedded {content_type} object is not supported (JSON is)"
                    ));
                }
                return Ok(Some(
                    raw_json(get_bytes(m, "raw"), path)?.unwrap_or(Value::Null),
                ));
            }
            _ => return Ok(None),
        }
    };
    Ok(Some(match local {
        "Time" | "MicroTime" => time(m, local == "MicroTime", path)?,
        "Duration" => {
            let nanos = get_i64(m, "duration");
            let text = granary_runtime::duration::format_go_duration(
                std::time::Duration::from_nanos(nanos.unsigned_abs()),
            );
            if nanos < 0 {
                format!("-{text}").into()
            } else {
                text.into()
            }
        }
        "FieldsV1" => raw_json(get_bytes(m, "Raw"), path)?.unwrap_or(Value::Null),
        "Verbs" => {
            let items = m
                .descriptor_dyn()
                .field_by_name("items")
                .map(|f| f.get_repeated(m));
            Value::Array(
                items
                    .into_iter()
                    .flat_map(|r| r.into_iter().map(|v| Value::String(v.to_string())))
                    .collect(),
            )
        }
        _ => return Ok(None),
    }))
}

/// `meta/v1.Time` (seconds precision) or `MicroTime` (microseconds), in UTC.
fn time(m: &dyn MessageDyn, micro: bool, path: &str) -> Result<Value, String> {
    let seconds = get(m, "seconds").map_or(GO_ZERO_TIME, |_| get_i64(m, "seconds"));
    let nanos = get_i64(m, "nanos");
    if seconds == GO_ZERO_TIME && nanos == 0 {
        return Ok(Value::Null);
    }
    let nanos = u32::try_from(nanos).map_err(|_| format!("{path}: nanos {nanos} out of range"))?;
    let t = chrono::DateTime::from_timestamp(seconds, if micro { nanos } else { 0 })
        .ok_or_else(|| format!("{path}: time out of range"))?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(t.format(format).to_string().into())
}

/// apiextensions' types that are JSON values or "schema or something else".
fn apiextensions(m: &dyn MessageDyn, local: &str, path: &str) -> Result<Option<Value>, String> {
    let schema = |name: &str| -> Result<Option<Value>, String> {
        match get(m, name) {
            Some(ReflectValueRef::Message(s)) => message(&*s, &format!("{path}.{name}")).map(Some),
            _ => Ok(None),
        }
    };
    let list = |name: &str| -> Result<Option<Value>, String> {
        let field = m
            .descriptor_dyn()
            .field_by_name(name)
            .ok_or_else(|| format!("{path}: no field {name}"))?;
        field_value(m, &field, path)
    };
    Ok(Some(match local {
        "JSON" => raw_json(get_bytes(m, "raw"), path)?.unwrap_or(Value::Null),
        // A schema, or a list of schemas.
        "JSONSchemaPropsOrArray" => match schema("schema")? {
            Some(s) => s,
            None => list("jSONSchemas")?.unwrap_or(Value::Null),
        },
        // A schema, or a bool.
        "JSONSchemaPropsOrBool" => match schema("schema")? {
            Some(s) => s,
            None => Value::Bool(matches!(
                get(m, "allows"),
                Some(ReflectValueRef::Bool(true))
            )),
        },
        // A list of property names, or a schema.
        "JSONSchemaPropsOrStringArray" => match list("property")? {
            Some(names) => names,
            None => schema("schema")?.unwrap_or(Value::Null),
        },
        _ => return Ok(None),
    }))
}
