//! What a restore brings back, one pure function: the backup's items through the
//! restore's filters (Velero's `restore.go`: namespaces, resources with discovery's
//! names, the resources Velero never restores, cluster-scoped items only when
//! `includeClusterResources` says so, label selectors), with each item's target
//! namespace (`namespaceMapping`), the namespaces to create first, and the order of the
//! rest ([`super::order`]: Velero's priorities, owners before dependents).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::order::{Priorities, RestoreItem, restore_order};
use crate::api::velero::{NON_RESTORABLE_RESOURCES, RestoreSpec};
use crate::velero::resource::GroupResource;
use crate::velero_server::backup::catalog::{Catalog, DiscoveredResource};
use crate::velero_server::backup::filters::IncludesExcludes;
use crate::velero_server::backup::selectors;

/// `customresourcedefinitions.apiextensions.k8s.io`, restored in a pass of their own.
pub const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// One item of the backup, as read from its unversioned path.
#[derive(Clone, Debug, PartialEq)]
pub struct BackupItem {
    pub group_resource: GroupResource,
    /// `""` for cluster-scoped items.
    pub namespace: String,
    pub name: String,
    pub object: Value,
}

impl BackupItem {
    pub fn uid(&self) -> &str {
        self.object
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The UIDs of the item's owners (its ownerReferences).
    pub fn owner_uids(&self) -> Vec<String> {
        self.object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| r.get("uid").and_then(Value::as_str))
                    .filter(|u| !u.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// An item the restore creates.
#[derive(Clone, Debug, PartialEq)]
pub struct Selected {
    /// Index into the backup's items.
    pub index: usize,
    /// Where it goes (`""` for cluster-scoped items).
    pub target_namespace: String,
    /// The cluster's resource it is created as.
    pub resource: DiscoveredResource,
    /// Whether its status is restored too (`restoreStatus`).
    pub restore_status: bool,
}

/// A namespace the restore makes sure exists before the items in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespacePlan {
    pub target: String,
    /// The backup's Namespace item for it (its labels and annotations), if any.
    pub from_backup: Option<usize>,
}

/// The plan of one pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub namespaces: Vec<NamespacePlan>,
    /// The items to create, in order.
    pub items: Vec<Selected>,
    /// Warnings about the plan (resources the cluster does not serve).
    pub warnings: Vec<String>,
}

/// Which items a pass covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// CustomResourceDefinitions only (restored first, then waited on).
    Crds,
    /// Everything but CustomResourceDefinitions.
    Rest,
}

fn list(v: &Option<Vec<String>>) -> Vec<String> {
    v.clone().unwrap_or_default()
}

/// Names as users write them, resolved through discovery (`cm` → `configmaps`); names
/// discovery does not know (globs) stay as written.
fn resolved(catalog: &Catalog, names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            if n == "*" {
                n.clone()
            } else {
                catalog.resolve(n).unwrap_or_else(|| n.clone())
            }
        })
        .collect()
}

/// The restore's filters, resolved once.
pub struct Filters<'a> {
    pub namespaces: IncludesExcludes,
    pub resources: IncludesExcludes,
    pub status: IncludesExcludes,
    /// Whether `restoreStatus` is set at all (unset: no status restored).
    pub status_set: bool,
    spec: &'a RestoreSpec,
}

impl<'a> Filters<'a> {
    pub fn new(spec: &'a RestoreSpec, catalog: &Catalog) -> Self {
        let rs = spec.restore_status.clone().unwrap_or_default();
        Filters {
            namespaces: IncludesExcludes::new(
                list(&spec.included_namespaces),
                list(&spec.excluded_namespaces),
            ),
            resources: IncludesExcludes::new(
                resolved(catalog, &list(&spec.included_resources)),
                resolved(catalog, &list(&spec.excluded_resources)),
            ),
            status: IncludesExcludes::new(
                resolved(catalog, &list(&rs.included_resources)),
                resolved(catalog, &list(&rs.excluded_resources)),
            ),
            status_set: spec.restore_status.is_some() && !list(&rs.included_resources).is_empty(),
            spec,
        }
    }

    /// The namespace a backup namespace is restored into.
    pub fn target_namespace<'s>(&'s self, ns: &'s str) -> &'s str {
        self.spec
            .namespace_mapping
            .as_ref()
            .and_then(|m| m.get(ns))
            .map(String::as_str)
            .unwrap_or(ns)
    }

    fn labels_match(&self, object: &Value) -> bool {
        let labels = selectors::labels_of(object);
        if let Some(sel) = &self.spec.label_selector
            && !selectors::matches(sel, &labels)
        {
            return false;
        }
        match &self.spec.or_label_selectors {
            Some(any) if !any.is_empty() => any.iter().any(|s| selectors::matches(s, &labels)),
            _ => true,
        }
    }

    /// Whether a cluster-scoped item (other than a Namespace) is restored: never with
    /// `includeClusterResources: false`; unset, only when every namespace is restored.
    fn cluster_scoped_allowed(&self) -> bool {
        match self.spec.include_cluster_resources {
            Some(b) => b,
            None => self.namespaces.include_everything(),
        }
    }

    /// Why an item of resource `gr_name` in backup namespace `ns` is not restored.
    pub fn refusal(
        &self,
        gr_name: &str,
        namespaced: bool,
        ns: &str,
        object: &Value,
    ) -> Option<&'static str> {
        if NON_RESTORABLE_RESOURCES.contains(&gr_name) {
            return Some("non-restorable resource");
        }
        if !self.resources.should_include(gr_name) {
            return Some("resource excluded");
        }
        if namespaced {
            if !self.namespaces.should_include(ns) {
                return Some("namespace excluded");
            }
        } else if !self.cluster_scoped_allowed() {
            return Some("cluster-scoped resources excluded");
        }
        if !self.labels_match(object) {
            return Some("label selector");
        }
        None
    }
}

/// The resource a CustomResourceDefinition (as JSON) serves, at its storage version
/// (what discovery would show once it is Established).
pub fn resources_of_crd(crd: &Value) -> Option<DiscoveredResource> {
    let spec = crd.get("spec")?;
    let names = spec.get("names")?;
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    let versions = spec.get("versions").and_then(Value::as_array)?;
    let version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .or_else(|| versions.first())?;
    Some(DiscoveredResource {
        group: s(spec.get("group")),
        version: s(version.get("name")),
        kind: s(names.get("kind")),
        resource: s(names.get("plural")),
        singular: s(names.get("singular")),
        short_names: names
            .get("shortNames")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        namespaced: s(spec.get("scope")) == "Namespaced",
        verbs: [
            "create", "delete", "get", "list", "patch", "update", "watch",
        ]
        .map(String::from)
        .to_vec(),
    })
}

/// The plan of `pass` over `items` against what `catalog` serves.
pub fn plan(
    items: &[BackupItem],
    spec: &RestoreSpec,
    catalog: &Catalog,
    priorities: &Priorities,
    pass: Pass,
) -> Plan {
    let filters = Filters::new(spec, catalog);
    let mut warnings = BTreeSet::new();
    let mut selected: Vec<Selected> = Vec::new();
    // Target namespace → the backup's Namespace item for it.
    let mut namespaces: BTreeMap<String, Option<usize>> = BTreeMap::new();
    let mut namespace_items: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, it) in items.iter().enumerate() {
        if it.group_resource.group.is_empty() && it.group_resource.resource == "namespaces" {
            namespace_items.insert(it.name.as_str(), i);
        }
    }
    for (i, it) in items.iter().enumerate() {
        let gr_name = it.group_resource.to_string();
        let is_crd = gr_name == CRDS;
        if (pass == Pass::Crds) != is_crd {
            continue;
        }
        if gr_name == "namespaces" {
            // A Namespace of the backup is restored when its namespace is.
            if pass == Pass::Rest
                && filters.namespaces.should_include(&it.name)
                && filters.resources.should_include("namespaces")
                && filters.labels_match(&it.object)
            {
                namespaces.insert(filters.target_namespace(&it.name).to_owned(), Some(i));
            }
            continue;
        }
        let namespaced = !it.namespace.is_empty();
        if filters
            .refusal(&gr_name, namespaced, &it.namespace, &it.object)
            .is_some()
        {
            continue;
        }
        let Some(resource) = catalog.get(&it.group_resource) else {
            warnings.insert(format!(
                "Skipping restore of resource {gr_name}: the cluster does not serve it"
            ));
            continue;
        };
        if resource.namespaced != namespaced {
            warnings.insert(format!(
                "Skipping restore of resource {gr_name}: its scope in the backup differs from the cluster's"
            ));
            continue;
        }
        let target_namespace = if namespaced {
            let t = filters.target_namespace(&it.namespace).to_owned();
            namespaces
                .entry(t.clone())
                .or_insert_with(|| namespace_items.get(it.namespace.as_str()).copied());
            t
        } else {
            String::new()
        };
        let restore_status = filters.status_set && filters.status.should_include(&gr_name);
        selected.push(Selected {
            index: i,
            target_namespace,
            resource: resource.clone(),
            restore_status,
        });
    }
    let order_items: Vec<RestoreItem> = selected
        .iter()
        .map(|s| {
            let it = &items[s.index];
            RestoreItem {
                group_resource: it.group_resource.to_string(),
                namespace: it.namespace.clone(),
                name: it.name.clone(),
                uid: it.uid().to_owned(),
                owners: it.owner_uids(),
            }
        })
        .collect();
    let priorities = priorities.resolved(|e| catalog.resolve(e));
    let order = restore_order(&order_items, &priorities);
    let items_in_order = order.into_iter().map(|i| selected[i].clone()).collect();
    Plan {
        namespaces: namespaces
            .into_iter()
            .map(|(target, from_backup)| NamespacePlan {
                target,
                from_backup,
            })
            .collect(),
        items: items_in_order,
        warnings: warnings.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::velero_server::backup::catalog::tests::res;
    use serde_json::json;

    fn catalog() -> Catalog {
        Catalog::new(vec![
            res("", "namespaces", "Namespace", false),
            res("", "configmaps", "ConfigMap", true),
            res("", "secrets", "Secret", true),
            res("", "pods", "Pod", true),
            res("", "persistentvolumes", "PersistentVolume", false),
            res("apps", "deployments", "Deployment", true),
            res("apps", "replicasets", "ReplicaSet", true),
            res(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
            ),
            res(
                "rbac.authorization.k8s.io",
                "clusterroles",
                "ClusterRole",
                false,
            ),
        ])
    }

    fn item(
        group: &str,
        resource: &str,
        ns: &str,
        name: &str,
        uid: &str,
        owners: &[&str],
    ) -> BackupItem {
        let refs: Vec<Value> = owners
            .iter()
            .map(|o| json!({"uid": o, "name": "x", "kind": "X", "apiVersion": "v1"}))
            .collect();
        let mut meta = json!({"name": name, "uid": uid, "labels": {"app": name}});
        if !ns.is_empty() {
            meta["namespace"] = json!(ns);
        }
        if !refs.is_empty() {
            meta["ownerReferences"] = json!(refs);
        }
        BackupItem {
            group_resource: GroupResource::new(group, resource),
            namespace: ns.into(),
            name: name.into(),
            object: json!({"metadata": meta}),
        }
    }

    fn backup() -> Vec<BackupItem> {
        vec![
            item("", "namespaces", "", "ns1", "u-ns1", &[]),
            item("", "namespaces", "", "ns2", "u-ns2", &[]),
            item("apps", "replicasets", "ns1", "rs", "u-rs", &["u-dep"]),
            item("apps", "deployments", "ns1", "dep", "u-dep", &[]),
            item("", "configmaps", "ns1", "cm", "u-cm", &[]),
            item("", "configmaps", "ns2", "cm2", "u-cm2", &[]),
            item("", "events", "ns1", "ev", "u-ev", &[]),
            item("", "persistentvolumes", "", "pv", "u-pv", &[]),
            item(
                "rbac.authorization.k8s.io",
                "clusterroles",
                "",
                "cr",
                "u-cr",
                &[],
            ),
            item(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "",
                "widgets.example.com",
                "u-crd",
                &[],
            ),
            item("example.com", "widgets", "ns1", "w", "u-w", &[]),
        ]
    }

    fn names(items: &[BackupItem], p: &Plan) -> Vec<String> {
        p.items
            .iter()
            .map(|s| {
                let it = &items[s.index];
                format!("{}:{}/{}", it.group_resource, s.target_namespace, it.name)
            })
            .collect()
    }

    #[test]
    fn everything_in_velero_order_with_owners_first() {
        let items = backup();
        let p = plan(
            &items,
            &RestoreSpec::default(),
            &catalog(),
            &Priorities::default(),
            Pass::Rest,
        );
        assert_eq!(
            names(&items, &p),
            vec![
                "persistentvolumes:/pv",
                "clusterroles.rbac.authorization.k8s.io:/cr",
                "configmaps:ns1/cm",
                "configmaps:ns2/cm2",
                // The Deployment is pulled before the ReplicaSet it owns.
                "deployments.apps:ns1/dep",
                "replicasets.apps:ns1/rs",
            ]
        );
        assert_eq!(
            p.namespaces,
            vec![
                NamespacePlan {
                    target: "ns1".into(),
                    from_backup: Some(0)
                },
                NamespacePlan {
                    target: "ns2".into(),
                    from_backup: Some(1)
                },
            ]
        );
        // events are never restored; widgets are not served yet (before the CRD pass).
        assert_eq!(
            p.warnings,
            vec![
                "Skipping restore of resource widgets.example.com: the cluster does not serve it"
                    .to_string()
            ]
        );
    }

    #[test]
    fn a_crd_serves_its_storage_version() {
        let crd = json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1beta1", "storage": false}, {"name": "v1", "storage": true}]}});
        let r = resources_of_crd(&crd).expect("resource");
        assert_eq!(
            (
                r.group.as_str(),
                r.version.as_str(),
                r.resource.as_str(),
                r.namespaced
            ),
            ("example.com", "v1", "widgets", true)
        );
        assert_eq!(r.short_names, vec!["wd".to_string()]);
        assert!(resources_of_crd(&json!({"spec": {}})).is_none());
    }

    #[test]
    fn crd_pass_holds_only_crds() {
        let items = backup();
        let p = plan(
            &items,
            &RestoreSpec::default(),
            &catalog(),
            &Priorities::default(),
            Pass::Crds,
        );
        assert_eq!(
            names(&items, &p),
            vec!["customresourcedefinitions.apiextensions.k8s.io:/widgets.example.com"]
        );
        assert!(p.namespaces.is_empty());
    }

    #[test]
    fn namespace_filter_and_mapping_leave_cluster_resources_out() {
        let items = backup();
        let spec = RestoreSpec {
            included_namespaces: Some(vec!["ns1".into()]),
            namespace_mapping: Some([("ns1".to_string(), "new1".to_string())].into()),
            ..Default::default()
        };
        let p = plan(
            &items,
            &spec,
            &catalog(),
            &Priorities::default(),
            Pass::Rest,
        );
        assert_eq!(
            names(&items, &p),
            vec![
                "configmaps:new1/cm",
                "deployments.apps:new1/dep",
                "replicasets.apps:new1/rs"
            ]
        );
        assert_eq!(
            p.namespaces,
            vec![NamespacePlan {
                target: "new1".into(),
                from_backup: Some(0)
            }]
        );
    }

    #[test]
    fn include_cluster_resources_and_resource_filters() {
        let items = backup();
        let spec = RestoreSpec {
            included_namespaces: Some(vec!["ns2".into()]),
            include_cluster_resources: Some(true),
            excluded_resources: Some(vec!["pv".into(), "clusterroles".into()]),
            ..Default::default()
        };
        let mut cat = catalog().all().to_vec();
        for r in &mut cat {
            if r.resource == "persistentvolumes" {
                r.short_names = vec!["pv".into()];
            }
        }
        let p = plan(
            &items,
            &spec,
            &Catalog::new(cat),
            &Priorities::default(),
            Pass::Rest,
        );
        assert_eq!(names(&items, &p), vec!["configmaps:ns2/cm2"]);
        let spec = RestoreSpec {
            include_cluster_resources: Some(false),
            included_resources: Some(vec!["cm".into(), "persistentvolumes".into()]),
            ..Default::default()
        };
        let p = plan(
            &items,
            &spec,
            &catalog(),
            &Priorities::default(),
            Pass::Rest,
        );
        // `cm` is a short name the test catalog knows; PVs are cluster-scoped.
        assert_eq!(
            names(&items, &p),
            vec!["configmaps:ns1/cm", "configmaps:ns2/cm2"]
        );
    }

    #[test]
    fn label_selectors() {
        let items = backup();
        let sel = |v: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some([("app".to_string(), v.to_string())].into()),
            ..Default::default()
        };
        let spec = RestoreSpec {
            label_selector: Some(sel("cm")),
            ..Default::default()
        };
        let p = plan(
            &items,
            &spec,
            &catalog(),
            &Priorities::default(),
            Pass::Rest,
        );
        assert_eq!(names(&items, &p), vec!["configmaps:ns1/cm"]);
        // The namespace of a selected item is still created (from the backup's object).
        assert_eq!(
            p.namespaces,
            vec![NamespacePlan {
                target: "ns1".into(),
                from_backup: Some(0)
            }]
        );
        let spec = RestoreSpec {
            or_label_selectors: Some(vec![sel("cm2"), sel("pv")]),
            ..Default::default()
        };
        let p = plan(
            &items,
            &spec,
            &catalog(),
            &Priorities::default(),
            Pass::Rest,
        );
        assert_eq!(
            names(&items, &p),
            vec!["persistentvolumes:/pv", "configmaps:ns2/cm2"]
        );
    }

    #[test]
    fn restore_status_selection() {
        let items = backup();
        let spec = RestoreSpec {
            restore_status: Some(crate::api::velero::RestoreStatusSpec {
                included_resources: Some(vec!["deployments".into()]),
                excluded_resources: None,
            }),
            ..Default::default()
        };
        let p = plan(
            &items,
            &spec,
            &catalog(),
            &Priorities::default(),
            Pass::Rest,
        );
        let with_status: Vec<String> = p
            .items
            .iter()
            .filter(|s| s.restore_status)
            .map(|s| items[s.index].name.clone())
            .collect();
        assert_eq!(with_status, vec!["dep"]);
    }
}
