//! Kubernetes protobuf request bodies, decoded to JSON for the kinds kubectl's
//! imperative `create` subcommands send that way. Newer kubectl versions encode
//! built-in objects as `application/vnd.kubernetes.protobuf` (`kubectl create
//! namespace|configmap|secret|serviceaccount|role|rolebinding|clusterrole|
//! clusterrolebinding`, and `kubectl auth can-i`'s SelfSubjectAccessReview);
//! kube-apiserver accepts that, so the embedded server must too.
//!
//! The envelope is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message
//! (type meta, the raw object, its encoding and content type). The object is decoded with
//! the field tables below — a transcription of the upstream `generated.proto` field
//! numbers for exactly these kinds — into the JSON the same object has in the API
//! (`omitempty` strings and numbers left out, bytes as base64, times as RFC 3339). A
//! field this decoder does not know is an error naming it, never silently dropped.
//! Other kinds get 415 with what to do instead.

use base64::Engine;
use serde_json::{Map, Value};

use super::errors::ApiError;

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// How one field's value is written in JSON.
#[derive(Clone, Copy)]
enum Ty {
    /// A string; a singular empty one is omitted (all API strings are `omitempty`).
    Str,
    /// Bytes, as base64.
    Bytes,
    /// A varint integer; `keep_zero` for pointer fields, where 0 was set explicitly.
    Int {
        keep_zero: bool,
    },
    Bool,
    /// `meta/v1.Time`: `{seconds, nanos}`; Go's zero time is omitted.
    Time,
    Msg(&'static [Field]),
    /// `map<string, string>`.
    MapStr,
    /// `map<string, bytes>` (values as base64).
    MapBytes,
}

#[derive(Clone, Copy)]
struct Field {
    num: u32,
    name: &'static str,
    ty: Ty,
    repeated: bool,
}

const fn f(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        ty,
        repeated: false,
    }
}

const fn list(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        ty,
        repeated: true,
    }
}

const INT: Ty = Ty::Int { keep_zero: false };
const INT_PTR: Ty = Ty::Int { keep_zero: true };

const OWNER_REFERENCE: &[Field] = &[
    f(1, "kind", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "uid", Ty::Str),
    f(5, "apiVersion", Ty::Str),
    f(6, "controller", Ty::Bool),
    f(7, "blockOwnerDeletion", Ty::Bool),
];

const OBJECT_META: &[Field] = &[
    f(1, "name", Ty::Str),
    f(2, "generateName", Ty::Str),
    f(3, "namespace", Ty::Str),
    f(4, "selfLink", Ty::Str),
    f(5, "uid", Ty::Str),
    f(6, "resourceVersion", Ty::Str),
    f(7, "generation", INT),
    f(8, "creationTimestamp", Ty::Time),
    f(9, "deletionTimestamp", Ty::Time),
    f(10, "deletionGracePeriodSeconds", INT_PTR),
    f(11, "labels", Ty::MapStr),
    f(12, "annotations", Ty::MapStr),
    list(13, "ownerReferences", Ty::Msg(OWNER_REFERENCE)),
    list(14, "finalizers", Ty::Str),
];

const LABEL_SELECTOR_REQUIREMENT: &[Field] = &[
    f(1, "key", Ty::Str),
    f(2, "operator", Ty::Str),
    list(3, "values", Ty::Str),
];

const LABEL_SELECTOR: &[Field] = &[
    f(1, "matchLabels", Ty::MapStr),
    list(2, "matchExpressions", Ty::Msg(LABEL_SELECTOR_REQUIREMENT)),
];

const NAMESPACE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(&[list(1, "finalizers", Ty::Str)])),
    f(3, "status", Ty::Msg(&[f(1, "phase", Ty::Str)])),
];

const CONFIG_MAP: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", Ty::MapStr),
    f(3, "binaryData", Ty::MapBytes),
    f(4, "immutable", Ty::Bool),
];

const SECRET: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", Ty::MapBytes),
    f(3, "type", Ty::Str),
    f(4, "stringData", Ty::MapStr),
    f(5, "immutable", Ty::Bool),
];

const OBJECT_REFERENCE: &[Field] = &[
    f(1, "kind", Ty::Str),
    f(2, "namespace", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "uid", Ty::Str),
    f(5, "apiVersion", Ty::Str),
    f(6, "resourceVersion", Ty::Str),
    f(7, "fieldPath", Ty::Str),
];

const SERVICE_ACCOUNT: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "secrets", Ty::Msg(OBJECT_REFERENCE)),
    list(3, "imagePullSecrets", Ty::Msg(&[f(1, "name", Ty::Str)])),
    f(4, "automountServiceAccountToken", Ty::Bool),
];

const POLICY_RULE: &[Field] = &[
    list(1, "verbs", Ty::Str),
    list(2, "apiGroups", Ty::Str),
    list(3, "resources", Ty::Str),
    list(4, "resourceNames", Ty::Str),
    list(5, "nonResourceURLs", Ty::Str),
];

const ROLE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "rules", Ty::Msg(POLICY_RULE)),
];

const CLUSTER_ROLE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "rules", Ty::Msg(POLICY_RULE)),
    f(
        3,
        "aggregationRule",
        Ty::Msg(&[list(1, "clusterRoleSelectors", Ty::Msg(LABEL_SELECTOR))]),
    ),
];

const SUBJECT: &[Field] = &[
    f(1, "kind", Ty::Str),
    f(2, "apiGroup", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "namespace", Ty::Str),
];

const ROLE_REF: &[Field] = &[
    f(1, "apiGroup", Ty::Str),
    f(2, "kind", Ty::Str),
    f(3, "name", Ty::Str),
];

const ROLE_BINDING: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "subjects", Ty::Msg(SUBJECT)),
    f(3, "roleRef", Ty::Msg(ROLE_REF)),
];

const RESOURCE_ATTRIBUTES: &[Field] = &[
    f(1, "namespace", Ty::Str),
    f(2, "verb", Ty::Str),
    f(3, "group", Ty::Str),
    f(4, "version", Ty::Str),
    f(5, "resource", Ty::Str),
    f(6, "subresource", Ty::Str),
    f(7, "name", Ty::Str),
];

const NON_RESOURCE_ATTRIBUTES: &[Field] = &[f(1, "path", Ty::Str), f(2, "verb", Ty::Str)];

const SELF_SUBJECT_ACCESS_REVIEW_SPEC: &[Field] = &[
    f(1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)),
    f(2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES)),
];

const SUBJECT_ACCESS_REVIEW_STATUS: &[Field] = &[
    f(1, "allowed", Ty::Bool),
    f(2, "reason", Ty::Str),
    f(3, "evaluationError", Ty::Str),
    f(4, "denied", Ty::Bool),
];

/// What `kubectl auth can-i` sends (its status, empty, is the server's to fill).
const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
    f(3, "status", Ty::Msg(SUBJECT_ACCESS_REVIEW_STATUS)),
];

const RBAC: &str = "rbac.authorization.k8s.io/v1";

/// The kinds whose protobuf bodies are understood.
const KINDS: &[(&str, &str, &[Field])] = &[
    ("v1", "Namespace", NAMESPACE),
    ("v1", "ConfigMap", CONFIG_MAP),
    ("v1", "Secret", SECRET),
    ("v1", "ServiceAccount", SERVICE_ACCOUNT),
    (RBAC, "Role", ROLE),
    (RBAC, "ClusterRole", CLUSTER_ROLE),
    (RBAC, "RoleBinding", ROLE_BINDING),
    (RBAC, "ClusterRoleBinding", ROLE_BINDING),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        SELF_SUBJECT_ACCESS_REVIEW,
    ),
];

const UNKNOWN_TYPE_META: &[Field] = &[f(1, "apiVersion", Ty::Str), f(2, "kind", Ty::Str)];

const UNKNOWN: &[Field] = &[
    f(1, "typeMeta", Ty::Msg(UNKNOWN_TYPE_META)),
    f(2, "raw", Ty::Bytes),
    f(3, "contentEncoding", Ty::Str),
    f(4, "contentType", Ty::Str),
];

/// Decodes a protobuf request body to the object's JSON.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = |m: String| ApiError::bad_request(format!("error decoding protobuf body: {m}"));
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the Kubernetes protobuf prefix".into()))?;
    let unknown = fields(envelope, UNKNOWN, "runtime.Unknown", true).map_err(bad)?;
    let type_meta = unknown.get("typeMeta").cloned().unwrap_or_default();
    let api_version = type_meta["apiVersion"].as_str().unwrap_or_default();
    let kind = type_meta["kind"].as_str().unwrap_or_default();
    if unknown
        .get("contentEncoding")
        .and_then(Value::as_str)
        .is_some_and(|e| !e.is_empty())
    {
        return Err(bad(
            "encoded (compressed) raw objects are not supported".into()
        ));
    }
    let Some((_, _, table)) = KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
    else {
        let known: Vec<&str> = KINDS.iter().map(|(_, k, _)| *k).collect();
        return Err(ApiError::unsupported_media_type_because(format!(
            "this server decodes protobuf bodies only for {}; send {api_version} {kind} as JSON \
             or YAML (for example with `kubectl apply -f`)",
            known.join(", ")
        )));
    };
    // The raw object, re-read as bytes (the JSON form above is base64).
    let raw = raw_object(envelope).map_err(bad)?;
    let mut object = fields(&raw, table, kind, false).map_err(bad)?;
    object.insert("apiVersion".into(), Value::String(api_version.to_string()));
    object.insert("kind".into(), Value::String(kind.to_string()));
    Ok(Value::Object(object))
}

/// The `raw` bytes of the envelope.
fn raw_object(envelope: &[u8]) -> Result<Vec<u8>, String> {
    let mut r = Reader(envelope);
    let mut raw = Vec::new();
    while !r.0.is_empty() {
        let (num, wire) = r.key()?;
        if num == 2 && wire == 2 {
            raw = r.bytes()?.to_vec();
        } else {
            r.skip(wire)?;
        }
    }
    Ok(raw)
}

/// A cursor over protobuf wire data.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for (i, byte) in self.0.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.0 = &self.0[i + 1..];
                return Ok(value);
            }
        }
        Err("truncated or overlong varint".into())
    }

    fn key(&mut self) -> Result<(u32, u8), String> {
        let key = self.varint()?;
        let num = u32::try_from(key >> 3).map_err(|_| "field number out of range".to_string())?;
        // The wire type is the low three bits.
        Ok((num, (key & 7) as u8))
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = usize::try_from(self.varint()?).map_err(|_| "length out of range")?;
        if len > self.0.len() {
            return Err("truncated length-delimited field".into());
        }
        let (head, tail) = self.0.split_at(len);
        self.0 = tail;
        Ok(head)
    }

    fn skip(&mut self, wire: u8) -> Result<(), String> {
        let n = match wire {
            0 => return self.varint().map(|_| ()),
            1 => 8,
            2 => return self.bytes().map(|_| ()),
            5 => 4,
            w => return Err(format!("unsupported wire type {w}")),
        };
        if n > self.0.len() {
            return Err("truncated fixed-width field".into());
        }
        self.0 = &self.0[n..];
        Ok(())
    }
}

/// Decodes one message with `table`. `lenient` skips unknown fields (the envelope).
fn fields(
    data: &[u8],
    table: &[Field],
    message: &str,
    lenient: bool,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let mut r = Reader(data);
    while !r.0.is_empty() {
        let (num, wire) = r.key()?;
        let Some(field) = table.iter().find(|f| f.num == num) else {
            if lenient {
                r.skip(wire)?;
                continue;
            }
            return Err(format!(
                "field number {num} of {message} is not understood by this server"
            ));
        };
        let expected = match field.ty {
            Ty::Int { .. } | Ty::Bool => 0,
            _ => 2,
        };
        if wire != expected {
            return Err(format!(
                "{message}.{}: wire type {wire}, expected {expected}",
                field.name
            ));
        }
        let value = match field.ty {
            Ty::Str | Ty::Bytes | Ty::Time | Ty::Msg(_) => {
                let bytes = r.bytes()?;
                scalar(bytes, field, message)?
            }
            Ty::Int { keep_zero } => {
                // Two's complement for negative int64 values.
                let v = r.varint()? as i64;
                (keep_zero || v != 0).then(|| Value::from(v))
            }
            Ty::Bool => Some(Value::Bool(r.varint()? != 0)),
            Ty::MapStr | Ty::MapBytes => {
                let (k, v) = map_entry(r.bytes()?, field, message)?;
                let map = out
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(m) = map {
                    m.insert(k, v);
                }
                continue;
            }
        };
        if field.repeated {
            let items = out
                .entry(field.name)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(items) = items {
                // Repeated strings keep empty elements (`apiGroups: [""]` is the core group).
                items.push(value.unwrap_or_else(|| Value::String(String::new())));
            }
        } else if let Some(value) = value {
            out.insert(field.name.to_string(), value);
        } else {
            out.remove(field.name);
        }
    }
    Ok(out)
}

/// A length-delimited singular value; `None` when JSON leaves it out.
fn scalar(bytes: &[u8], field: &Field, message: &str) -> Result<Option<Value>, String> {
    let text = |b: &[u8]| {
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| format!("{message}.{}: not UTF-8", field.name))
    };
    Ok(match field.ty {
        Ty::Str => {
            let s = text(bytes)?;
            (field.repeated || !s.is_empty()).then_some(Value::String(s))
        }
        Ty::Bytes => Some(Value::String(
            base64::engine::general_purpose::STANDARD.encode(bytes),
        )),
        Ty::Time => time(bytes).map_err(|e| format!("{message}.{}: {e}", field.name))?,
        Ty::Msg(table) => Some(Value::Object(fields(
            bytes,
            table,
            &format!("{message}.{}", field.name),
            false,
        )?)),
        _ => None,
    })
}

/// `meta/v1.Time` as RFC 3339 (seconds precision, as the API writes it).
fn time(bytes: &[u8]) -> Result<Option<Value>, String> {
    /// Go's zero `time.Time` in Unix seconds (a null timestamp).
    const GO_ZERO: i64 = -62_135_596_800;
    let mut r = Reader(bytes);
    let (mut seconds, mut nanos) = (GO_ZERO, 0i64);
    while !r.0.is_empty() {
        match r.key()? {
            (1, 0) => seconds = r.varint()? as i64,
            (2, 0) => nanos = r.varint()? as i64,
            (n, w) => return Err(format!("unexpected field {n} (wire type {w}) in a Time")),
        }
    }
    if bytes.is_empty() || (seconds == GO_ZERO && nanos == 0) {
        return Ok(None);
    }
    let t = chrono::DateTime::from_timestamp(seconds, 0).ok_or("time out of range")?;
    Ok(Some(Value::String(
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )))
}

/// One `map<string, …>` entry: key 1, value 2.
fn map_entry(bytes: &[u8], field: &Field, message: &str) -> Result<(String, Value), String> {
    let mut r = Reader(bytes);
    let (mut key, mut value) = (String::new(), Vec::new());
    while !r.0.is_empty() {
        match r.key()? {
            (1, 2) => {
                key = std::str::from_utf8(r.bytes()?)
                    .map_err(|_| format!("{message}.{}: key not UTF-8", field.name))?
                    .to_string();
            }
            (2, 2) => value = r.bytes()?.to_vec(),
            (n, _) => {
                return Err(format!(
                    "{message}.{}: unexpected field {n} in a map entry",
                    field.name
                ));
            }
        }
    }
    let value = match field.ty {
        Ty::MapBytes => Value::String(base64::engine::general_purpose::STANDARD.encode(&value)),
        _ => Value::String(
            String::from_utf8(value)
                .map_err(|_| format!("{message}.{}[{key}]: not UTF-8", field.name))?,
        ),
    };
    Ok((key, value))
}

#[cfg(test)]
#[path = "protobuf_tests.rs"]
mod tests;
