//! Object metadata as kube-apiserver takes it.
//!
//! kube-apiserver decodes every body into Go's `ObjectMeta` before anything else, so a
//! wrongly typed field (`labels: {"a": 1}`, `finalizers: {}`, `ownerReferences: "x"`)
//! never reaches storage, and a typed client's list never meets one. Then
//! `ValidateObjectMeta` checks the values: qualified label, annotation and finalizer
//! names, label values, the annotations' total size, owner references. This server
//! keeps objects as JSON, so both steps are explicit here:
//!
//! - [`type_error`] finds the first field Go's decoder refuses; each verb answers it as
//!   kube-apiserver does for that verb: [`TypeError::undecodable`] (400) for create and
//!   update bodies, [`TypeError::unpatchable`] (422 on the field `patch`) for merge,
//!   JSON and strategic patches, [`TypeError::unappliable`] (500) for apply.
//! - [`normalize`] makes metadata what a decode/encode round trip leaves: no null or
//!   unknown fields, null label/annotation values and finalizers as `""`.
//! - [`validate`] is `ValidateObjectMeta`'s value checks: 422 with field paths and
//!   kube-apiserver's messages.
//! - [`repair`] drops malformed fields from objects kept by an older server that did
//!   not check, as kube-apiserver drops them when it reads such an object from etcd.

use serde_json::{Map, Value, json};

use super::errors::{ApiError, FieldCause};
use super::registry::ResourceInfo;
use granary_api::names::{label_value_errors, qualified_name_errors};

/// kube-apiserver's limit on the summed length of annotation keys and values.
pub(crate) const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// The JSON shape a metadata field must have.
#[derive(Clone, Copy)]
enum Shape {
    Str,
    Int,
    Bool,
    StrMap,
    StrList,
    /// A list of objects whose fields follow the given table.
    Objects(&'static [Field]),
}

/// (JSON name, shape, Go type named in decode errors)
type Field = (&'static str, Shape, &'static str);

const OWNER_REFERENCE: &[Field] = &[
    ("apiVersion", Shape::Str, "string"),
    ("kind", Shape::Str, "string"),
    ("name", Shape::Str, "string"),
    ("uid", Shape::Str, "types.UID"),
    ("controller", Shape::Bool, "bool"),
    ("blockOwnerDeletion", Shape::Bool, "bool"),
];

const MANAGED_FIELDS_ENTRY: &[Field] = &[
    ("manager", Shape::Str, "string"),
    ("operation", Shape::Str, "v1.ManagedFieldsOperationType"),
    ("apiVersion", Shape::Str, "string"),
    ("time", Shape::Str, "string"),
    ("fieldsType", Shape::Str, "string"),
    ("subresource", Shape::Str, "string"),
];

/// Every field of `ObjectMeta`; anything else is dropped, as Go's decoder drops it.
const OBJECT_META: &[Field] = &[
    ("name", Shape::Str, "string"),
    ("generateName", Shape::Str, "string"),
    ("namespace", Shape::Str, "string"),
    ("selfLink", Shape::Str, "string"),
    ("uid", Shape::Str, "types.UID"),
    ("resourceVersion", Shape::Str, "string"),
    ("generation", Shape::Int, "int64"),
    ("creationTimestamp", Shape::Str, "string"),
    ("deletionTimestamp", Shape::Str, "string"),
    ("deletionGracePeriodSeconds", Shape::Int, "int64"),
    ("labels", Shape::StrMap, "map[string]string"),
    ("annotations", Shape::StrMap, "map[string]string"),
    (
        "ownerReferences",
        Shape::Objects(OWNER_REFERENCE),
        "[]v1.OwnerReference",
    ),
    ("finalizers", Shape::StrList, "[]string"),
    (
        "managedFields",
        Shape::Objects(MANAGED_FIELDS_ENTRY),
        "[]v1.ManagedFieldsEntry",
    ),
];

/// A metadata field Go's JSON decoder refuses.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TypeError {
    /// Dotted path from the object root (`metadata.labels`,
    /// `metadata.ownerReferences.uid`), as Go names it.
    pub field: String,
    /// The map key or list index below `field`, when the bad value is an element.
    pub element: Option<String>,
    /// The Go struct holding the field (`ObjectMeta`, `OwnerReference`, ...).
    pub owner: String,
    /// What the JSON holds: `number`, `string`, `object`, `array`, `bool`.
    pub found: &'static str,
    /// The Go type it must decode into.
    pub go_type: std::borrow::Cow<'static, str>,
    /// The decoder's message when it is not a type mismatch (bad base64).
    pub detail: Option<String>,
}

/// Go's name for what a JSON value holds, in its decode errors.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `v` decodes into a Go value of this scalar shape (null decodes into all).
fn scalar_fits(shape: Shape, v: &Value) -> bool {
    match shape {
        Shape::Str => v.is_string() || v.is_null(),
        Shape::Int => v.is_i64() || v.is_null(),
        Shape::Bool => v.is_boolean() || v.is_null(),
        _ => false,
    }
}

/// The first part of field `field` (value `v`) Go refuses, if any.
fn check_field(field: &Field, v: &Value, path: &str, owner: &'static str) -> Option<TypeError> {
    let (name, shape, go_type) = *field;
    let path = format!("{path}.{name}");
    let err = |element: Option<String>, found: &Value, go_type: &'static str| TypeError {
        field: path.clone(),
        element,
        owner: owner.to_string(),
        found: json_kind(found),
        go_type: go_type.into(),
        detail: None,
    };
    match (shape, v) {
        (_, Value::Null) => None,
        (Shape::Str | Shape::Int | Shape::Bool, v) => {
            (!scalar_fits(shape, v)).then(|| err(None, v, go_type))
        }
        (Shape::StrMap, Value::Object(m)) => m
            .iter()
            .find(|(_, x)| !scalar_fits(Shape::Str, x))
            .map(|(k, x)| err(Some(k.clone()), x, "string")),
        (Shape::StrList, Value::Array(a)) => a
            .iter()
            .enumerate()
            .find(|(_, x)| !scalar_fits(Shape::Str, x))
            .map(|(i, x)| err(Some(i.to_string()), x, "string")),
        (Shape::Objects(fields), Value::Array(a)) => {
            let item_owner = match name {
                "ownerReferences" => "OwnerReference",
                _ => "ManagedFieldsEntry",
            };
            for (i, item) in a.iter().enumerate() {
                let Some(m) = item.as_object() else {
                    if item.is_null() {
                        continue;
                    }
                    return Some(err(Some(i.to_string()), item, &go_type[2..]));
                };
                for f in fields {
                    if let Some(e) = m
                        .get(f.0)
                        .and_then(|x| check_field(f, x, &path, item_owner))
                    {
                        return Some(e);
                    }
                }
            }
            None
        }
        (_, v) => Some(err(None, v, go_type)),
    }
}

/// The first metadata field of `obj` that Go's decoder refuses, if any.
pub(crate) fn type_error(obj: &Value) -> Option<TypeError> {
    let meta = obj.get("metadata")?;
    let Some(meta) = meta.as_object() else {
        return (!meta.is_null()).then(|| TypeError {
            field: "metadata".into(),
            element: None,
            owner: obj
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("Object")
                .to_string(),
            found: json_kind(meta),
            go_type: "v1.ObjectMeta".into(),
            detail: None,
        });
    };
    OBJECT_META.iter().find_map(|f| {
        meta.get(f.0)
            .and_then(|v| check_field(f, v, "metadata", "ObjectMeta"))
    })
}

impl TypeError {
    fn go_message(&self) -> String {
        if let Some(d) = &self.detail {
            return d.clone();
        }
        format!(
            "json: cannot unmarshal {} into Go struct field {}.{} of type {}",
            self.found, self.owner, self.field, self.go_type
        )
    }

    /// A create or update body that does not decode: 400, as kube-apiserver answers a
    /// body its decoder refuses.
    pub(crate) fn undecodable(&self, info: &ResourceInfo) -> ApiError {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {}",
            self.go_message(),
            kind = info.kind,
            version = info.version,
        ))
    }

    /// A merge, JSON or strategic patch whose result does not decode: 422 Invalid on
    /// the field `patch`. (kube-apiserver shows the whole patched object as the value;
    /// it may hold Secret data, so this server does not echo it.)
    pub(crate) fn unpatchable(&self) -> ApiError {
        ApiError::invalid(
            "",
            "",
            "",
            vec![FieldCause::invalid("patch", &json!({}), &self.go_message())],
        )
    }

    /// A server-side apply configuration that does not convert to the kind's type:
    /// kube-apiserver's field manager returns a plain error, answered as 500.
    pub(crate) fn unappliable(&self, info: &ResourceInfo, ns: &str, name: &str) -> ApiError {
        let mut path = format!(".{}", self.field);
        if let Some(e) = &self.element {
            path.push('.');
            path.push_str(e);
        }
        let want = match self.go_type.as_ref() {
            "string" | "types.UID" | "v1.ManagedFieldsOperationType" => "string",
            "int64" => "numeric (int or float)",
            "bool" => "boolean",
            t if t.starts_with("map[") || t.starts_with("v1.") => "map",
            _ => "list",
        };
        ApiError::internal_unknown(format!(
            "failed to create typed patch object ({ns}/{name}; {}/{}, Kind={}): {path}: expected {want}, got {}",
            info.group, info.version, info.kind, self.found
        ))
    }
}

/// Everything in `obj` Go's decoder refuses: its metadata, then the payload of the
/// built-in kinds [`super::payload`] knows.
pub(crate) fn decode_error(info: &ResourceInfo, obj: &Value) -> Option<TypeError> {
    type_error(obj)
        .or_else(|| super::payload::type_error(info, obj))
        .or_else(|| super::typed::type_error(info, obj))
}

/// [`normalize`] and the payload's nulls ([`super::payload::normalize`]).
pub(crate) fn normalize_body(info: &ResourceInfo, obj: &mut Value) {
    normalize(obj);
    super::payload::normalize(info, obj);
    super::typed::normalize(info, obj);
}

/// Makes `obj`'s metadata what decoding into `ObjectMeta` and encoding again leaves
/// (call after [`type_error`] found nothing): null and unknown fields dropped, null
/// label and annotation values and null finalizers as `""`.
pub(crate) fn normalize(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.retain(|k, v| !v.is_null() && OBJECT_META.iter().any(|f| f.0 == k));
    for key in ["labels", "annotations"] {
        if let Some(m) = meta.get_mut(key).and_then(Value::as_object_mut) {
            for v in m.values_mut().filter(|v| v.is_null()) {
                *v = json!("");
            }
        }
    }
    if let Some(a) = meta.get_mut("finalizers").and_then(Value::as_array_mut) {
        for v in a.iter_mut().filter(|v| v.is_null()) {
            *v = json!("");
        }
    }
    if let Some(a) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        a.retain(|r| !r.is_null());
        for r in a.iter_mut().filter_map(Value::as_object_mut) {
            r.retain(|k, v| !v.is_null() && OWNER_REFERENCE.iter().any(|f| f.0 == k));
        }
    }
}

/// Drops every metadata field Go's decoder refuses (kube-apiserver's best-effort read
/// of a stored object with malformed metadata); true when something was dropped.
pub(crate) fn repair(obj: &mut Value) -> bool {
    let mut changed = false;
    while let Some(e) = type_error(obj) {
        changed = true;
        if e.field == "metadata" {
            if let Some(m) = obj.as_object_mut() {
                m.insert("metadata".into(), json!({}));
            }
            break;
        }
        let top = e.field["metadata.".len()..]
            .split('.')
            .next()
            .unwrap_or_default()
            .to_string();
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove(&top);
        }
    }
    changed
}

fn str_map(meta: &Map<String, Value>, key: &str) -> Vec<(String, String)> {
    meta.get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// The version part of an owner reference's apiVersion (Go's `FromAPIVersionAndKind`:
/// empty when the apiVersion does not parse).
fn api_version_version(api_version: &str) -> &str {
    match api_version.split_once('/') {
        None => api_version,
        Some((_, v)) if !v.contains('/') => v,
        Some(_) => "",
    }
}

fn validate_owner_references(refs: &[Value], causes: &mut Vec<FieldCause>) {
    let field = "metadata.ownerReferences";
    let mut controller: Option<String> = None;
    for r in refs {
        let get = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind, name, uid) =
            (get("apiVersion"), get("kind"), get("name"), get("uid"));
        let checks = [
            (
                "apiVersion",
                api_version,
                api_version_version(api_version).is_empty(),
                "version must not be empty",
            ),
            ("kind", kind, kind.is_empty(), "kind must not be empty"),
            ("name", name, name.is_empty(), "name must not be empty"),
            ("uid", uid, uid.is_empty(), "uid must not be empty"),
        ];
        for (sub, value, bad, msg) in checks {
            if bad {
                causes.push(FieldCause::invalid(
                    format!("{field}.{sub}"),
                    &json!(value),
                    msg,
                ));
            }
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{kind}/{name}");
            match &controller {
                Some(first) => causes.push(FieldCause::invalid(
                    field,
                    &Value::Array(refs.to_vec()),
                    &format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"),
                )),
                None => controller = Some(this),
            }
        }
    }
}

/// kube-apiserver's `ValidateObjectMeta` value checks on a well-typed object: label
/// keys and values, annotation keys and total size, finalizer names, owner references.
pub(crate) fn validate(obj: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let Some(meta) = obj.get("metadata").and_then(Value::as_object) else {
        return causes;
    };
    let mut labels = str_map(meta, "labels");
    labels.sort();
    for (k, v) in &labels {
        for msg in qualified_name_errors(k) {
            causes.push(FieldCause::invalid("metadata.labels", &json!(k), &msg));
        }
        for msg in label_value_errors(v) {
            causes.push(FieldCause::invalid("metadata.labels", &json!(v), &msg));
        }
    }
    let mut annotations = str_map(meta, "annotations");
    annotations.sort();
    let mut total = 0;
    for (k, v) in &annotations {
        // Annotation keys are qualified names in any case.
        for msg in qualified_name_errors(&k.to_ascii_lowercase()) {
            causes.push(FieldCause::invalid("metadata.annotations", &json!(k), &msg));
        }
        total += k.len() + v.len();
    }
    if total > MAX_ANNOTATIONS_BYTES {
        causes.push(FieldCause::too_long(
            "metadata.annotations",
            MAX_ANNOTATIONS_BYTES,
        ));
    }
    let finalizers: Vec<&str> = meta
        .get("finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for f in &finalizers {
        for msg in qualified_name_errors(f) {
            causes.push(FieldCause::invalid("metadata.finalizers", &json!(f), &msg));
        }
    }
    if finalizers.contains(&super::objects::ORPHAN_FINALIZER)
        && finalizers.contains(&super::objects::FOREGROUND_FINALIZER)
    {
        causes.push(FieldCause::invalid(
            "metadata.finalizers",
            &json!(finalizers),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    if let Some(refs) = meta.get("ownerReferences").and_then(Value::as_array) {
        validate_owner_references(refs, &mut causes);
    }
    causes
}

/// [`validate`] as the 422 kube-apiserver answers.
pub(crate) fn check(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let causes = validate(obj);
    if causes.is_empty() {
        return Ok(());
    }
    let name = super::objects::meta_str(obj, "name").unwrap_or_default();
    Err(ApiError::invalid(&info.group, &info.kind, name, causes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use std::sync::Arc;

    fn cm() -> Arc<ResourceInfo> {
        Registry::new().lookup("", "v1", "configmaps").unwrap()
    }

    fn with_meta(meta: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    }

    #[test]
    fn wrong_types_name_the_field_and_go_type() {
        let cases = [
            (
                json!({"labels": {"a": 1}}),
                "metadata.labels",
                "string",
                "number",
            ),
            (
                json!({"labels": []}),
                "metadata.labels",
                "map[string]string",
                "array",
            ),
            (
                json!({"annotations": "x"}),
                "metadata.annotations",
                "map[string]string",
                "string",
            ),
            (
                json!({"finalizers": {}}),
                "metadata.finalizers",
                "[]string",
                "object",
            ),
            (
                json!({"finalizers": [true]}),
                "metadata.finalizers",
                "string",
                "bool",
            ),
            (
                json!({"ownerReferences": "x"}),
                "metadata.ownerReferences",
                "[]v1.OwnerReference",
                "string",
            ),
            (
                json!({"ownerReferences": [1]}),
                "metadata.ownerReferences",
                "v1.OwnerReference",
                "number",
            ),
            (
                json!({"ownerReferences": [{"uid": 7}]}),
                "metadata.ownerReferences.uid",
                "types.UID",
                "number",
            ),
            (
                json!({"ownerReferences": [{"controller": "yes"}]}),
                "metadata.ownerReferences.controller",
                "bool",
                "string",
            ),
            (json!({"name": 5}), "metadata.name", "string", "number"),
            (
                json!({"generateName": []}),
                "metadata.generateName",
                "string",
                "array",
            ),
            (
                json!({"namespace": {}}),
                "metadata.namespace",
                "string",
                "object",
            ),
            (
                json!({"resourceVersion": 5}),
                "metadata.resourceVersion",
                "string",
                "number",
            ),
            (
                json!({"generation": 1.5}),
                "metadata.generation",
                "int64",
                "number",
            ),
            (
                json!({"managedFields": {}}),
                "metadata.managedFields",
                "[]v1.ManagedFieldsEntry",
                "object",
            ),
        ];
        for (meta, field, go_type, found) in cases {
            let e = type_error(&with_meta(meta.clone())).unwrap_or_else(|| panic!("{meta}"));
            assert_eq!(
                (e.field.as_str(), e.go_type.as_ref(), e.found),
                (field, go_type, found),
                "{meta}"
            );
        }
        let e = type_error(&json!({"kind": "ConfigMap", "metadata": "x"})).unwrap();
        assert_eq!(
            (e.field.as_str(), e.owner.as_str()),
            ("metadata", "ConfigMap")
        );
        let ok = with_meta(
            json!({"name": "a", "labels": {"a": "b", "n": null}, "finalizers": null,
            "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u", "controller": true}]}),
        );
        assert_eq!(type_error(&ok), None);
    }

    #[test]
    fn each_verb_answers_as_kube_apiserver() {
        let e = type_error(&with_meta(json!({"labels": {"a": 1}}))).unwrap();
        let create = e.undecodable(&cm());
        assert_eq!((create.code, create.reason), (400, "BadRequest"));
        assert_eq!(
            create.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
        );
        let patch = e.unpatchable();
        assert_eq!((patch.code, patch.reason), (422, "Invalid"));
        assert_eq!(patch.details.unwrap()["causes"][0]["field"], "patch");
        let apply = e.unappliable(&cm(), "ns", "c");
        assert_eq!(apply.code, 500);
        assert!(apply.message.starts_with("failed to create typed patch object (ns/c; /v1, Kind=ConfigMap): .metadata.labels.a: expected string"));
    }

    #[test]
    fn normalize_drops_nulls_and_unknown_fields() {
        let mut obj = with_meta(
            json!({"name": "a", "labels": {"x": null}, "finalizers": [null, "f"],
            "annotations": null, "bogus": 1, "ownerReferences": [null, {"uid": "u", "x": 1, "controller": null}]}),
        );
        normalize(&mut obj);
        assert_eq!(
            obj["metadata"],
            json!({"name": "a", "labels": {"x": ""}, "finalizers": ["", "f"], "ownerReferences": [{"uid": "u"}]})
        );
    }

    #[test]
    fn repair_drops_only_malformed_fields() {
        let mut obj = with_meta(
            json!({"name": "a", "labels": {"a": 1}, "finalizers": {}, "annotations": {"k": "v"}}),
        );
        assert!(repair(&mut obj));
        assert_eq!(
            obj["metadata"],
            json!({"name": "a", "annotations": {"k": "v"}})
        );
        assert!(!repair(&mut obj));
    }

    #[test]
    fn values_are_validated_with_field_paths() {
        let obj = with_meta(json!({
            "name": "a",
            "labels": {"bad key!": "v", "k": "x".repeat(64)},
            "annotations": {"Example.com/Key": "fine", "big": "x".repeat(MAX_ANNOTATIONS_BYTES)},
            "finalizers": ["ok.example.com/f", "no spaces", "orphan", "foregroundDeletion"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u", "controller": true},
                {"apiVersion": "apps/", "kind": "", "name": "", "controller": true},
            ],
        }));
        let fields: Vec<(String, &str)> = validate(&obj)
            .into_iter()
            .map(|c| (c.field, c.reason))
            .collect();
        let expect = [
            ("metadata.labels", "FieldValueInvalid"),
            ("metadata.labels", "FieldValueInvalid"),
            ("metadata.annotations", "FieldValueTooLong"),
            ("metadata.finalizers", "FieldValueInvalid"),
            ("metadata.finalizers", "FieldValueInvalid"),
            ("metadata.ownerReferences.apiVersion", "FieldValueInvalid"),
            ("metadata.ownerReferences.kind", "FieldValueInvalid"),
            ("metadata.ownerReferences.name", "FieldValueInvalid"),
            ("metadata.ownerReferences.uid", "FieldValueInvalid"),
            ("metadata.ownerReferences", "FieldValueInvalid"),
        ];
        let expect: Vec<(String, &str)> = expect.iter().map(|(f, r)| (f.to_string(), *r)).collect();
        assert_eq!(fields, expect);
        let e = check(&cm(), &obj).unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert!(
            e.message.starts_with("ConfigMap \"a\" is invalid: ["),
            "{}",
            e.message
        );
        let good = with_meta(
            json!({"name": "a", "labels": {"example.com/k": "", "k": "V_1.x"},
            "annotations": {"Anything.Goes/X": "any value at all"}, "finalizers": ["kubernetes", "example.com/f"]}),
        );
        assert!(validate(&good).is_empty());
    }
}
