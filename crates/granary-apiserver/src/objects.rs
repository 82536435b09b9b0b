//! The rules kube-apiserver applies to an object on create, update and delete: metadata
//! the server owns, names, optimistic concurrency, status-subresource splitting,
//! generation, finalizers and deletionTimestamp. Pure functions over JSON values.

use serde_json::{Map, Value, json};

use super::errors::{ApiError, FieldCause};
use super::metadata;
use super::registry::ResourceInfo;

/// Which endpoint a write came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Main,
    Status,
}

/// `propagationPolicy` of a delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// What a delete request does to the stored object.
#[derive(Debug, PartialEq)]
pub(crate) enum DeleteDecision {
    /// Remove it now.
    Remove(Value),
    /// Keep it, marked as deleting (finalizers pending).
    Mark(Value),
    /// Already marked; nothing changes.
    Unchanged(Value),
}

pub(crate) const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
pub(crate) const ORPHAN_FINALIZER: &str = "orphan";
pub(crate) const NAMESPACE_FINALIZER: &str = "kubernetes";

pub(crate) fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata was just made an object")
}

pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)?.get(field)?.as_str().filter(|s| !s.is_empty())
}

pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    let mut out: Vec<String> = meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    // A namespace's own finalizers live in spec.finalizers.
    if obj.get("kind").and_then(Value::as_str) == Some("Namespace")
        && let Some(a) = obj.pointer("/spec/finalizers").and_then(Value::as_array)
    {
        out.extend(a.iter().filter_map(|v| v.as_str().map(String::from)));
    }
    out
}

pub(crate) fn is_deleting(obj: &Value) -> bool {
    meta(obj).is_some_and(|m| m.get("deletionTimestamp").is_some_and(|v| !v.is_null()))
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !p.starts_with('-')
                && !p.ends_with('-')
        })
}

fn validate_name(info: &ResourceInfo, name: &str) -> Option<FieldCause> {
    let v = Value::String(name.to_string());
    if info.plural == "namespaces" {
        (!is_dns_label(name)).then(|| {
            FieldCause::invalid(
                "metadata.name",
                &v,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            )
        })
    } else if info.group == "rbac.authorization.k8s.io" {
        (name == "." || name == ".." || name.contains('/') || name.contains('%')).then(|| {
            FieldCause::invalid(
                "metadata.name",
                &v,
                "may not contain '/' or '%' and may not be '.' or '..'",
            )
        })
    } else {
        (!is_dns_subdomain(name)).then(|| {
            FieldCause::invalid(
                "metadata.name",
                &v,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        })
    }
}

/// Random suffix of `generateName` (kube's alphabet avoids vowels and look-alikes).
pub(crate) fn name_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Checks apiVersion/kind of a request body against the endpoint.
pub(crate) fn check_type(info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let want_av = info.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), Value::String(want_av));
        }
        Some(av) if av != want_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
        _ => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), Value::String(info.kind.clone()));
        }
        Some(k) if k != info.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                info.kind
            )));
        }
        _ => {}
    }
    Ok(())
}

/// Prepares a new object: server-owned metadata, name, namespace, status reset.
pub(crate) fn prepare_create(
    info: &ResourceInfo,
    mut obj: Value,
    namespace: Option<&str>,
    now: &str,
    uid: &str,
) -> Result<Value, ApiError> {
    check_type(info, &mut obj)?;
    if let Some(e) = metadata::decode_error(info, &obj) {
        return Err(e.undecodable(info));
    }
    metadata::normalize_body(info, &mut obj);
    let meta = meta_mut(&mut obj);
    if info.namespaced {
        let url_ns = namespace.unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != url_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), Value::String(url_ns.to_string()));
            }
        }
    } else {
        meta.remove("namespace");
    }
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let name = if name.is_empty() {
        match meta.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => format!("{prefix}{}", name_suffix()),
            _ => {
                return Err(ApiError::invalid(
                    &info.group,
                    &info.kind,
                    "",
                    vec![FieldCause {
                        reason: "FieldValueRequired",
                        field: "metadata.name".into(),
                        message: "Required value: name or generateName is required".into(),
                    }],
                ));
            }
        }
    } else {
        name
    };
    if let Some(cause) = validate_name(info, &name) {
        return Err(ApiError::invalid(
            &info.group,
            &info.kind,
            &name,
            vec![cause],
        ));
    }
    meta.insert("name".into(), Value::String(name));
    meta.insert("uid".into(), Value::String(uid.to_string()));
    meta.insert("creationTimestamp".into(), Value::String(now.to_string()));
    for f in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(f);
    }
    if info.generation || info.crd.is_some() {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    if info.status
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    if info.plural == "namespaces" {
        obj["spec"] = json!({"finalizers": [NAMESPACE_FINALIZER]});
        obj["status"] = json!({"phase": "Active"});
    }
    if info.plural == "customresourcedefinitions" {
        let meta = meta_mut(&mut obj);
        let fins = meta.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(a) = fins.as_array_mut()
            && !a.iter().any(|f| f == super::crd::CLEANUP_FINALIZER)
        {
            a.push(json!(super::crd::CLEANUP_FINALIZER));
        }
    }
    metadata::check(info, &obj)?;
    Ok(obj)
}

/// The object without the parts that do not count for `metadata.generation`.
fn spec_part(info: &ResourceInfo, obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        if info.status {
            m.remove("status");
        }
    }
    v
}

/// Copies server-owned metadata from the stored object into `new`.
fn keep_server_metadata(old: &Value, new: &mut Value) {
    let old_meta = meta(old).cloned().unwrap_or_default();
    let meta = meta_mut(new);
    for f in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "name",
        "resourceVersion",
    ] {
        match old_meta.get(f) {
            Some(v) => {
                meta.insert(f.into(), v.clone());
            }
            None => {
                meta.remove(f);
            }
        }
    }
    if !meta.contains_key("managedFields")
        && let Some(mf) = old_meta.get("managedFields")
    {
        meta.insert("managedFields".into(), mf.clone());
    }
}

/// Result of [`prepare_update`].
#[derive(Debug, PartialEq)]
pub(crate) enum UpdateDecision {
    Store(Value),
    /// The last finalizer of a deleting object is gone: remove it.
    Remove(Value),
    Unchanged(Value),
}

/// Applies update semantics: `old` is stored, `new` is what the client sent (already
/// type-checked, name checked). `check_rv` is false for internal writes and patches
/// without a resourceVersion.
pub(crate) fn prepare_update(
    info: &ResourceInfo,
    old: &Value,
    mut new: Value,
    endpoint: Endpoint,
    require_rv: bool,
) -> Result<UpdateDecision, ApiError> {
    let name = meta_str(old, "name").unwrap_or_default().to_string();
    let old_rv = meta_str(old, "resourceVersion").unwrap_or_default();
    match meta_str(&new, "resourceVersion") {
        Some(rv) if rv != old_rv => {
            return Err(ApiError::stale(&info.group, &info.plural, &name));
        }
        Some(_) => {}
        None if require_rv && info.crd.is_some() => {
            return Err(ApiError::invalid(
                &info.group,
                &info.kind,
                &name,
                vec![FieldCause::invalid(
                    "metadata.resourceVersion",
                    &json!(0),
                    "must be specified for an update",
                )],
            ));
        }
        None => {}
    }
    // kube-apiserver turns the body's uid into a precondition of the update.
    if let Some(uid) = meta_str(&new, "uid") {
        let actual = meta_str(old, "uid").unwrap_or_default();
        if uid != actual {
            return Err(ApiError::conflict(
                &info.group,
                &info.plural,
                &name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    let mut result = match endpoint {
        Endpoint::Main => {
            if info.status
                && let Some(m) = new.as_object_mut()
            {
                match old.get("status") {
                    Some(s) => m.insert("status".into(), s.clone()),
                    None => m.remove("status"),
                };
            }
            keep_server_metadata(old, &mut new);
            new
        }
        Endpoint::Status => {
            let mut r = old.clone();
            if let Some(m) = r.as_object_mut() {
                match new.get("status") {
                    Some(s) => m.insert("status".into(), s.clone()),
                    None => m.remove("status"),
                };
            }
            // An apply to /status sends the managedFields it computed.
            if let Some(mf) = meta(&new).and_then(|m| m.get("managedFields")) {
                meta_mut(&mut r).insert("managedFields".into(), mf.clone());
            }
            r
        }
    };
    if info.plural == "namespaces" && endpoint == Endpoint::Main {
        // spec.finalizers only change through /finalize; phase is server-owned.
        if let Some(spec) = old.get("spec") {
            result["spec"] = spec.clone();
        }
    }
    if is_deleting(old) {
        let before = finalizers(old);
        let added: Vec<String> = finalizers(&result)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                &info.group,
                &info.kind,
                &name,
                vec![FieldCause::forbidden(
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted",
                )],
            ));
        }
    }
    if result == *old {
        return Ok(UpdateDecision::Unchanged(result));
    }
    if endpoint == Endpoint::Main {
        // A status write keeps the stored metadata, so only the main endpoint checks.
        metadata::check(info, &result)?;
    }
    if (info.generation || info.crd.is_some()) && spec_part(info, old) != spec_part(info, &result) {
        let g = meta(old)
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(&mut result).insert("generation".into(), json!(g + 1));
    }
    if is_deleting(&result) && finalizers(&result).is_empty() {
        return Ok(UpdateDecision::Remove(result));
    }
    Ok(UpdateDecision::Store(result))
}

/// Checks `preconditions` of a delete against the stored object.
pub(crate) fn check_preconditions(
    info: &ResourceInfo,
    obj: &Value,
    preconditions: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(p) = preconditions else {
        return Ok(());
    };
    let name = meta_str(obj, "name").unwrap_or_default();
    if let Some(uid) = p.get("uid").and_then(Value::as_str) {
        let actual = meta_str(obj, "uid").unwrap_or_default();
        if uid != actual {
            return Err(ApiError::conflict(
                &info.group,
                &info.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = p.get("resourceVersion").and_then(Value::as_str) {
        let actual = meta_str(obj, "resourceVersion").unwrap_or_default();
        if rv != actual {
            return Err(ApiError::conflict(
                &info.group,
                &info.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                ),
            ));
        }
    }
    Ok(())
}

/// Decides what a delete does: remove now, or mark with deletionTimestamp while
/// finalizers (including the propagation finalizer) remain.
pub(crate) fn decide_delete(
    info: &ResourceInfo,
    mut obj: Value,
    propagation: Propagation,
    now: &str,
) -> DeleteDecision {
    let propagation_finalizer = match propagation {
        Propagation::Foreground => Some(FOREGROUND_FINALIZER),
        Propagation::Orphan => Some(ORPHAN_FINALIZER),
        Propagation::Background => None,
    };
    let mut changed = false;
    if let Some(f) = propagation_finalizer
        && !finalizers(&obj).iter().any(|x| x == f)
    {
        let meta = meta_mut(&mut obj);
        let fins = meta.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(a) = fins.as_array_mut() {
            a.push(json!(f));
            changed = true;
        }
    }
    if finalizers(&obj).is_empty() {
        return DeleteDecision::Remove(obj);
    }
    if !is_deleting(&obj) {
        let generation = meta(&obj)
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64);
        let meta = meta_mut(&mut obj);
        meta.insert("deletionTimestamp".into(), json!(now));
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        if let Some(g) = generation
            && (info.generation || info.crd.is_some())
        {
            meta.insert("generation".into(), json!(g + 1));
        }
        if info.plural == "namespaces" {
            obj["status"] = json!({"phase": "Terminating"});
        }
        changed = true;
    }
    if changed {
        DeleteDecision::Mark(obj)
    } else {
        DeleteDecision::Unchanged(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use std::sync::Arc;

    fn cm() -> Arc<ResourceInfo> {
        Registry::new().lookup("", "v1", "configmaps").unwrap()
    }
    fn deploy() -> Arc<ResourceInfo> {
        Registry::new().lookup("apps", "v1", "deployments").unwrap()
    }

    #[test]
    fn create_fills_server_metadata_and_generate_name() {
        let obj = prepare_create(
            &cm(),
            json!({"metadata": {"generateName": "x-", "resourceVersion": "5"}}),
            Some("ns"),
            "2024-01-01T00:00:00Z",
            "u1",
        )
        .unwrap();
        let name = obj["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("x-") && name.len() == 7);
        assert_eq!(obj["metadata"]["namespace"], "ns");
        assert_eq!(obj["metadata"]["uid"], "u1");
        assert_eq!(obj["kind"], "ConfigMap");
        assert!(obj["metadata"].get("resourceVersion").is_none());
        assert!(obj["metadata"].get("generation").is_none());
    }

    #[test]
    fn create_rejects_bad_names_and_namespace_mismatch() {
        let e = prepare_create(
            &cm(),
            json!({"metadata": {"name": "Bad_Name"}}),
            Some("ns"),
            "t",
            "u",
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
        let e = prepare_create(&cm(), json!({"metadata": {}}), Some("ns"), "t", "u").unwrap_err();
        assert_eq!(e.code, 422);
        let e = prepare_create(
            &cm(),
            json!({"metadata": {"name": "a", "namespace": "other"}}),
            Some("ns"),
            "t",
            "u",
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
    }

    fn stored_deploy() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "d", "namespace": "ns", "uid": "u", "resourceVersion": "7", "generation": 1},
               "spec": {"replicas": 1}, "status": {"replicas": 0}})
    }

    #[test]
    fn generation_bumps_only_on_spec_changes() {
        let old = stored_deploy();
        let mut new = old.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        let UpdateDecision::Store(r) =
            prepare_update(&deploy(), &old, new, Endpoint::Main, true).unwrap()
        else {
            panic!()
        };
        assert_eq!(r["metadata"]["generation"], 1);
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(3);
        new["status"]["replicas"] = json!(9);
        let UpdateDecision::Store(r) =
            prepare_update(&deploy(), &old, new, Endpoint::Main, true).unwrap()
        else {
            panic!()
        };
        assert_eq!(r["metadata"]["generation"], 2);
        assert_eq!(r["status"]["replicas"], 0, "main endpoint ignores status");
    }

    #[test]
    fn status_endpoint_ignores_everything_else() {
        let old = stored_deploy();
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(3);
        new["status"]["replicas"] = json!(2);
        new["metadata"]["labels"] = json!({"a": "b"});
        let UpdateDecision::Store(r) =
            prepare_update(&deploy(), &old, new, Endpoint::Status, true).unwrap()
        else {
            panic!()
        };
        assert_eq!(r["spec"]["replicas"], 1);
        assert_eq!(r["status"]["replicas"], 2);
        assert!(r["metadata"].get("labels").is_none());
        assert_eq!(r["metadata"]["generation"], 1);
    }

    #[test]
    fn stale_resource_version_conflicts_and_noop_is_unchanged() {
        let old = stored_deploy();
        let mut new = old.clone();
        new["metadata"]["resourceVersion"] = json!("6");
        assert_eq!(
            prepare_update(&deploy(), &old, new, Endpoint::Main, true)
                .unwrap_err()
                .code,
            409
        );
        assert!(matches!(
            prepare_update(&deploy(), &old, old.clone(), Endpoint::Main, true).unwrap(),
            UpdateDecision::Unchanged(_)
        ));
    }

    #[test]
    fn finalizers_hold_deletion_and_cannot_be_added_while_deleting() {
        let mut obj = stored_deploy();
        obj["metadata"]["finalizers"] = json!(["a"]);
        let DeleteDecision::Mark(marked) =
            decide_delete(&deploy(), obj, Propagation::Background, "t")
        else {
            panic!()
        };
        assert_eq!(marked["metadata"]["deletionTimestamp"], "t");
        assert_eq!(marked["metadata"]["generation"], 2);
        let mut add = marked.clone();
        add["metadata"]["finalizers"] = json!(["a", "b"]);
        assert_eq!(
            prepare_update(&deploy(), &marked, add, Endpoint::Main, true)
                .unwrap_err()
                .code,
            422
        );
        let mut clear = marked.clone();
        clear["metadata"]["finalizers"] = json!([]);
        assert!(matches!(
            prepare_update(&deploy(), &marked, clear, Endpoint::Main, true).unwrap(),
            UpdateDecision::Remove(_)
        ));
    }

    #[test]
    fn foreground_delete_adds_its_finalizer() {
        let d = decide_delete(&deploy(), stored_deploy(), Propagation::Foreground, "t");
        let DeleteDecision::Mark(v) = d else { panic!() };
        assert_eq!(v["metadata"]["finalizers"], json!([FOREGROUND_FINALIZER]));
        assert!(matches!(
            decide_delete(&deploy(), stored_deploy(), Propagation::Background, "t"),
            DeleteDecision::Remove(_)
        ));
    }
}
