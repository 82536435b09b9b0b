//! How a backed-up object becomes the object the restore creates, and how an object
//! that already exists is compared with it. Pure.
//!
//! - Metadata the cluster assigns is dropped (uid, resourceVersion, generation,
//!   creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds, managedFields,
//!   selfLink); `status` too unless the restore asks for it (`restoreStatus`).
//! - The namespace becomes the target namespace (`namespaceMapping`).
//! - `velero.io/backup-name` and `velero.io/restore-name` labels are added, shortened as
//!   Velero does (`label.GetValidName`).
//! - Owner references are rewritten to the new UIDs of the restored owners. Velero keeps
//!   the backed-up UIDs, which no object has any more, so the garbage collector deletes
//!   the restored dependents; here an owner that is neither restored nor found in the
//!   cluster has its reference removed, with a warning, and the dependent survives.

use std::collections::HashMap;

use serde_json::{Map, Value};

use granary_velero::label::valid_label_value;

pub const LABEL_BACKUP_NAME: &str = "velero.io/backup-name";
pub const LABEL_RESTORE_NAME: &str = "velero.io/restore-name";

/// Metadata fields the cluster assigns, dropped before creating.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// The new UID of each backed-up owner UID: `Some` when the owner was restored (or
/// found in the cluster), `None` when it is gone.
pub type OwnerUids = HashMap<String, Option<String>>;

/// The object to create from `backed_up`, and warnings about what was changed.
pub fn prepare(
    backed_up: &Value,
    target_namespace: &str,
    backup_name: &str,
    restore_name: &str,
    keep_status: bool,
    owners: &OwnerUids,
) -> (Value, Vec<String>) {
    let mut obj = backed_up.clone();
    let mut warnings = Vec::new();
    let Some(root) = obj.as_object_mut() else {
        return (obj, warnings);
    };
    if !keep_status {
        root.remove("status");
    }
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let meta = meta.as_object_mut().expect("an object");
    for f in SERVER_METADATA {
        meta.remove(*f);
    }
    if target_namespace.is_empty() {
        meta.remove("namespace");
    } else {
        meta.insert("namespace".into(), Value::String(target_namespace.into()));
    }
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    let labels = labels.as_object_mut().expect("an object");
    labels.insert(
        LABEL_BACKUP_NAME.into(),
        Value::String(valid_label_value(backup_name).into_owned()),
    );
    labels.insert(
        LABEL_RESTORE_NAME.into(),
        Value::String(valid_label_value(restore_name).into_owned()),
    );
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        refs.retain_mut(|r| {
            let uid = r.get("uid").and_then(Value::as_str).unwrap_or("").to_owned();
            match owners.get(&uid) {
                Some(Some(new)) => {
                    r["uid"] = Value::String(new.clone());
                    true
                }
                _ => {
                    warnings.push(format!(
                        "owner {} {} (uid {uid}) is neither restored nor in the cluster: its ownerReference is removed",
                        r.get("kind").and_then(Value::as_str).unwrap_or("?"),
                        r.get("name").and_then(Value::as_str).unwrap_or("?"),
                    ));
                    false
                }
            }
        });
        if refs.is_empty() {
            meta.remove("ownerReferences");
        }
    }
    (obj, warnings)
}

/// The parts of an object the existing-resource policy compares: everything but
/// metadata and status, plus labels (without the restore's own) and annotations.
fn comparable(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(root) = out.as_object_mut() {
        root.remove("status");
        let meta = root.remove("metadata").unwrap_or(Value::Null);
        let mut labels = meta.get("labels").cloned().unwrap_or(Value::Null);
        if let Some(l) = labels.as_object_mut() {
            l.remove(LABEL_BACKUP_NAME);
            l.remove(LABEL_RESTORE_NAME);
            if l.is_empty() {
                labels = Value::Null;
            }
        }
        let annotations = meta
            .get("annotations")
            .cloned()
            .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
            .unwrap_or(Value::Null);
        root.insert("labels".into(), labels);
        root.insert("annotations".into(), annotations);
        root.remove("apiVersion");
        root.remove("kind");
    }
    out
}

/// Whether the live object differs from the one the restore would create (labels,
/// annotations and content; cluster-assigned metadata and status ignored).
pub fn differs(live: &Value, desired: &Value) -> bool {
    comparable(live) != comparable(desired)
}

/// The merge patch that brings a live object to the restored one under the `update`
/// policy: the desired content, labels and annotations (fields absent from the backup
/// are left as they are).
pub fn update_patch(desired: &Value) -> Value {
    let mut patch = Map::new();
    if let Some(root) = desired.as_object() {
        for (k, v) in root {
            match k.as_str() {
                "metadata" => {
                    let mut m = Map::new();
                    for f in ["labels", "annotations"] {
                        if let Some(v) = v.get(f) {
                            m.insert(f.into(), v.clone());
                        }
                    }
                    patch.insert("metadata".into(), Value::Object(m));
                }
                "status" | "apiVersion" | "kind" => {}
                _ => {
                    patch.insert(k.clone(), v.clone());
                }
            }
        }
    }
    Value::Object(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn backed_up() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": "rs", "namespace": "ns1", "uid": "u-rs", "resourceVersion": "7",
                "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "x"}], "labels": {"app": "a"},
                "annotations": {"keep": "me"},
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep", "uid": "u-dep", "controller": true},
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "u-gone"}
                ]
            },
            "spec": {"replicas": 1},
            "status": {"replicas": 1}
        })
    }

    #[test]
    fn prepare_resets_metadata_maps_namespace_and_rewrites_owners() {
        let owners: OwnerUids = [("u-dep".to_string(), Some("new-dep".to_string()))].into();
        let (obj, warnings) = prepare(&backed_up(), "new1", "b1", "r1", false, &owners);
        assert_eq!(
            obj,
            json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {
                    "name": "rs", "namespace": "new1",
                    "labels": {"app": "a", "velero.io/backup-name": "b1", "velero.io/restore-name": "r1"},
                    "annotations": {"keep": "me"},
                    "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep", "uid": "new-dep", "controller": true}
                    ]
                },
                "spec": {"replicas": 1}
            })
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("ConfigMap gone"), "{warnings:?}");
    }

    #[test]
    fn prepare_keeps_status_on_request_and_shortens_labels() {
        let long = "b".repeat(70);
        let (obj, _) = prepare(&backed_up(), "ns1", &long, "r", true, &OwnerUids::new());
        assert_eq!(obj["status"], json!({"replicas": 1}));
        let label = obj["metadata"]["labels"]["velero.io/backup-name"]
            .as_str()
            .unwrap();
        assert_eq!(label.len(), 63);
        assert!(label.starts_with(&"b".repeat(57)));
        // Both owners gone: the list is removed.
        assert!(obj["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn prepare_cluster_scoped_and_odd_shapes() {
        let (obj, _) = prepare(
            &json!({"metadata": {"name": "pv", "namespace": "x"}}),
            "",
            "b",
            "r",
            false,
            &OwnerUids::new(),
        );
        assert!(obj["metadata"].get("namespace").is_none());
        let (obj, _) = prepare(
            &json!({"metadata": 5, "spec": {}}),
            "ns",
            "b",
            "r",
            false,
            &OwnerUids::new(),
        );
        assert_eq!(obj["metadata"]["namespace"], "ns");
        let (obj, _) = prepare(&json!("x"), "ns", "b", "r", false, &OwnerUids::new());
        assert_eq!(obj, json!("x"));
    }

    #[test]
    fn differs_ignores_cluster_metadata_and_restore_labels() {
        let (desired, _) = prepare(&backed_up(), "ns1", "b", "r", false, &OwnerUids::new());
        let mut live = desired.clone();
        live["metadata"]["uid"] = json!("live");
        live["metadata"]["resourceVersion"] = json!("99");
        live["metadata"]["labels"]["velero.io/restore-name"] = json!("older");
        live["status"] = json!({"replicas": 3});
        assert!(!differs(&live, &desired));
        live["spec"]["replicas"] = json!(2);
        assert!(differs(&live, &desired));
        let mut live2 = desired.clone();
        live2["metadata"]["annotations"]["keep"] = json!("changed");
        assert!(differs(&live2, &desired));
    }

    #[test]
    fn update_patch_carries_content_labels_and_annotations() {
        let (desired, _) = prepare(&backed_up(), "ns1", "b", "r", false, &OwnerUids::new());
        let p = update_patch(&desired);
        assert_eq!(p["spec"], json!({"replicas": 1}));
        assert_eq!(p["metadata"]["annotations"], json!({"keep": "me"}));
        assert_eq!(p["metadata"]["labels"]["velero.io/restore-name"], "r");
        assert!(p.get("status").is_none() && p["metadata"].get("name").is_none());
    }
}
