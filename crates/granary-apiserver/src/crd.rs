//! CustomResourceDefinitions: validating them, turning them into served resources, and
//! the controller pass that establishes them (conditions `NamesAccepted` and
//! `Established`) and, when one is deleted, deletes its objects before letting it go.

use std::sync::Arc;

use serde_json::{Value, json};

use super::errors::{ApiError, FieldCause};
use super::objects::{self, Propagation, is_deleting, meta_str};
use super::registry::{ResourceInfo, ScalePaths};
use super::state::{DeleteOptions, State};
use super::store::{GroupResource, Mutation};

/// The finalizer kube-apiserver puts on every CRD so its objects are cleaned up first.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub(crate) fn crd_gr() -> GroupResource {
    GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions")
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// The structural checks kube-apiserver makes on a CRD that matter for serving it.
pub(crate) fn validate_crd(crd: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    let name = meta_str(crd, "name").unwrap_or_default();
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    if group.is_empty() {
        causes.push(FieldCause::required("spec.group"));
    }
    if plural.is_empty() {
        causes.push(FieldCause::required("spec.names.plural"));
    }
    if s(crd, "/spec/names/kind").is_empty() {
        causes.push(FieldCause::required("spec.names.kind"));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(FieldCause::invalid(
            "metadata.name",
            &json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let scope = crd.pointer("/spec/scope").cloned().unwrap_or(Value::Null);
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push(FieldCause::not_supported(
            "spec.scope",
            &scope,
            &[json!("Cluster"), json!("Namespaced")],
        ));
    }
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    match versions {
        None => causes.push(FieldCause::required("spec.versions")),
        Some(vs) => {
            let storage = vs
                .iter()
                .filter(|v| v.get("storage") == Some(&json!(true)))
                .count();
            if storage != 1 {
                causes.push(FieldCause::invalid(
                    "spec.versions",
                    &json!(vs),
                    "must have exactly one version marked as storage version",
                ));
            }
            for (i, v) in vs.iter().enumerate() {
                if s(v, "/name").is_empty() {
                    causes.push(FieldCause::required(format!("spec.versions[{i}].name")));
                }
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            causes,
        ))
    }
}

/// `velero.io` -> `io.velero` (the OpenAPI definition prefix of a group).
fn reverse_group(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

/// The resources a (valid) CRD serves, one per served version.
pub(crate) fn resource_infos(crd: &Value) -> Vec<ResourceInfo> {
    let name = meta_str(crd, "name").unwrap_or_default().to_string();
    let group = s(crd, "/spec/group").to_string();
    let kind = s(crd, "/spec/names/kind").to_string();
    let plural = s(crd, "/spec/names/plural").to_string();
    let singular = match s(crd, "/spec/names/singular") {
        "" => kind.to_lowercase(),
        other => other.to_string(),
    };
    let strings = |ptr: &str| -> Vec<String> {
        crd.pointer(ptr)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage") == Some(&json!(true)))
        .map(|v| s(v, "/name").to_string())
        .unwrap_or_default();
    versions
        .iter()
        .filter(|v| v.get("served") == Some(&json!(true)))
        .map(|v| {
            let version = s(v, "/name").to_string();
            let scale = v.pointer("/subresources/scale").map(|sc| ScalePaths {
                spec_replicas: s(sc, "/specReplicasPath").to_string(),
                status_replicas: s(sc, "/statusReplicasPath").to_string(),
                label_selector: sc
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(String::from),
            });
            ResourceInfo {
                group: group.clone(),
                version: version.clone(),
                storage_version: storage_version.clone(),
                kind: kind.clone(),
                plural: plural.clone(),
                singular: singular.clone(),
                namespaced: s(crd, "/spec/scope") == "Namespaced",
                short_names: strings("/spec/names/shortNames"),
                categories: strings("/spec/names/categories"),
                status: v.pointer("/subresources/status").is_some(),
                scale,
                generation: true,
                field_selectors: Vec::new(),
                schema: v.pointer("/schema/openAPIV3Schema").cloned().map(Arc::new),
                crd: Some(name.clone()),
                printer_columns: v
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                openapi_name: format!("{}.{version}.{kind}", reverse_group(&group)),
                stored_as: None,
            }
        })
        .collect()
}

fn condition(kind: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now})
}

/// Replaces conditions, keeping `lastTransitionTime` of ones whose status is unchanged.
fn merge_conditions(old: Option<&Value>, new: Vec<Value>) -> Value {
    let old = old.and_then(Value::as_array).cloned().unwrap_or_default();
    let merged: Vec<Value> = new
        .into_iter()
        .map(|mut c| {
            if let Some(prev) = old
                .iter()
                .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
            {
                c["lastTransitionTime"] = prev["lastTransitionTime"].clone();
            }
            c
        })
        .collect();
    json!(merged)
}

impl State {
    /// Writes an object as the server itself (no client rules); `change` returns whether
    /// it changed anything. A deleting object left without finalizers is removed.
    pub(crate) fn internal_update(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        change: impl FnOnce(&mut Value) -> bool,
    ) {
        let _ = self.store.mutate(gr, ns, name, |cur, _| {
            let Some(mut obj) = cur else {
                return Err(ApiError::not_found(&gr.group, &gr.resource, name));
            };
            if !change(&mut obj) {
                return Ok(Mutation::Unchanged(obj));
            }
            if is_deleting(&obj) && objects::finalizers(&obj).is_empty() {
                Ok(Mutation::Remove(obj))
            } else {
                Ok(Mutation::Put(obj))
            }
        });
    }

    /// One pass of the CRD controller; true while a CRD being deleted waits for its
    /// objects to go.
    pub(crate) fn reconcile_crds(&self) -> bool {
        let gr = crd_gr();
        let (crds, _) = self.store.list(&gr, None, None);
        let mut present = Vec::new();
        let mut deleting = false;
        for (key, data) in crds {
            let Ok(crd) = serde_json::from_slice::<Value>(&data) else {
                continue;
            };
            let name = key.1.clone();
            present.push(name.clone());
            if is_deleting(&crd) {
                deleting = true;
                self.clean_up_crd(&crd, &name);
                continue;
            }
            self.registry.set_crd(&name, resource_infos(&crd));
            let now = self.now();
            let mut names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
            if names.get("singular").is_none() {
                names["singular"] = json!(s(&crd, "/spec/names/kind").to_lowercase());
            }
            let storage = crd
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .and_then(|vs| vs.iter().find(|v| v.get("storage") == Some(&json!(true))))
                .map(|v| s(v, "/name").to_string())
                .unwrap_or_default();
            self.internal_update(&gr, "", &name, |obj| {
                let mut stored: Vec<Value> = obj
                    .pointer("/status/storedVersions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if !stored.contains(&json!(storage)) {
                    stored.push(json!(storage));
                }
                let conditions = merge_conditions(
                    obj.pointer("/status/conditions"),
                    vec![
                        condition("NamesAccepted", "NoConflicts", "no conflicts found", &now),
                        condition("Established", "InitialNamesAccepted", "the initial names have been accepted", &now),
                    ],
                );
                let status = json!({"conditions": conditions, "acceptedNames": names, "storedVersions": stored});
                if obj.get("status") == Some(&status) {
                    return false;
                }
                obj["status"] = status;
                true
            });
        }
        for served in self.registry.crd_names() {
            if !present.contains(&served) {
                self.registry.remove_crd(&served);
            }
        }
        deleting
    }

    /// Deletes a terminating CRD's objects; drops its finalizer when none are left.
    fn clean_up_crd(&self, crd: &Value, name: &str) {
        let gr = GroupResource::new(s(crd, "/spec/group"), s(crd, "/spec/names/plural"));
        let now = self.now();
        self.internal_update(&crd_gr(), "", name, |obj| {
            let conditions = merge_conditions(
                obj.pointer("/status/conditions"),
                vec![condition(
                    "Terminating",
                    "InstanceDeletionInProgress",
                    "CustomResource deletion is in progress",
                    &now,
                )],
            );
            if obj.pointer("/status/conditions") == Some(&conditions) {
                return false;
            }
            obj["status"]["conditions"] = conditions;
            true
        });
        let (objects, _) = self.store.list(&gr, None, None);
        if objects.is_empty() {
            self.internal_update(&crd_gr(), "", name, |obj| {
                let Some(f) = obj
                    .pointer_mut("/metadata/finalizers")
                    .and_then(Value::as_array_mut)
                else {
                    return false;
                };
                let before = f.len();
                f.retain(|x| x != CLEANUP_FINALIZER);
                before != f.len()
            });
            return;
        }
        let Some(info) = self.registry.lookup_gr(&gr) else {
            return;
        };
        let opts = DeleteOptions {
            propagation: Some(Propagation::Background),
            preconditions: None,
        };
        for (key, data) in objects {
            let deleting = serde_json::from_slice::<Value>(&data).is_ok_and(|o| is_deleting(&o));
            if !deleting {
                let _ = self.delete(&info, &key.0, &key.1, &opts);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1alpha1", "served": false, "storage": false}
                ]
            }
        })
    }

    #[test]
    fn served_versions_become_resources() {
        let infos = resource_infos(&crd());
        assert_eq!(infos.len(), 2);
        assert!(
            infos
                .iter()
                .all(|i| i.storage_version == "v1" && i.singular == "widget")
        );
        assert!(infos[0].status && infos[0].scale.is_some() && infos[0].schema.is_some());
        assert_eq!(infos[0].openapi_name, "com.example.v1.Widget");
        assert!(validate_crd(&crd()).is_ok());
    }

    #[test]
    fn invalid_crds_are_refused() {
        let mut c = crd();
        c["metadata"]["name"] = json!("wrong");
        c["spec"]["versions"][1]["storage"] = json!(true);
        let e = validate_crd(&c).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(e.details.unwrap()["causes"].as_array().unwrap().len(), 2);
    }
}
