//! What a restore brings back, one pure function: the backup's items through the
//! restore's filters (Velero's `restore.go`: namespaces, resources with discovery's
//! names, the resources Velero never restores, cluster-scoped items only when
//! `includeClusterResources` says so, label selectors; an item whose kind is not the kind
//! discovery gives its resource is refused), with each item's target
//! namespace (`namespaceMapping`), the namespaces to create first, and the order of the
//! rest ([`super::order`]: Velero's priorities, owners before dependents).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::contents::BackupContents;
use super::order::{Priorities, RestoreItem, restore_order_of};
use crate::backup::catalog::{Catalog, DiscoveredResource};
use crate::backup::filters::IncludesExcludes;
use granary_api::velero::{NON_RESTORABLE_RESOURCES, RestoreSpec};
use granary_velero::resource::GroupResource;

/// `customresourcedefinitions.apiextensions.k8s.io`, restored in a pass of their own.
pub const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// An item the restore creates.
#[derive(Clone, Debug, PartialEq)]
pub struct Selected {
    /// Index into the backup's items.
    pub index: usize,
    /// Where it goes (`""` for cluster-scoped items); shared by the items of a
    /// namespace.
    pub target_namespace: Arc<str>,
    /// The cluster's resource it is created as (shared by the items of a resource).
    pub resource: Arc<DiscoveredResource>,
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
    /// Items the filters select that are refused: each an error of the restore.
    pub refused: Vec<Refused>,
    /// Warnings about the plan (resources the cluster does not serve).
    pub warnings: Vec<String>,
}

/// An item the restore would create but refuses, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    pub selected: Selected,
    pub reason: String,
}

/// Why an item filed under the cluster's `resource` is not created as one: its `kind`
/// is not the kind discovery gives that resource (a ClusterRoleBinding filed under
/// `configmaps`). A resource has one kind at every version, so an item written at
/// another version than the cluster's is not refused.
pub fn kind_contradiction(kind: &str, resource: &DiscoveredResource) -> Option<String> {
    (kind != resource.kind).then(|| {
        format!(
            "not restored: the object's kind {kind:?} is not {:?}, the kind of {}",
            resource.kind,
            resource.name()
        )
    })
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

    /// Why an additional item an action names (a Pod's PriorityClass, …) is not
    /// restored, as Velero decides for one: never a resource Velero never restores,
    /// never outside the restore's namespaces, and never cluster-scoped when
    /// `includeClusterResources` is false (unset, it is restored: it is what the item
    /// needs). The filters on resources and labels do not apply to it.
    pub fn additional_refusal(
        &self,
        gr_name: &str,
        namespaced: bool,
        ns: &str,
    ) -> Option<&'static str> {
        if NON_RESTORABLE_RESOURCES.contains(&gr_name) {
            return Some("non-restorable resource");
        }
        if namespaced {
            (!self.namespaces.should_include(ns)).then_some("namespace excluded")
        } else {
            (self.spec.include_cluster_resources == Some(false))
                .then_some("cluster-scoped resources excluded")
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
        labels_match: bool,
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
        if !labels_match {
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
    items: &BackupContents,
    spec: &RestoreSpec,
    catalog: &Catalog,
    priorities: &Priorities,
    pass: Pass,
) -> Plan {
    let filters = Filters::new(spec, catalog);
    let mut warnings = BTreeSet::new();
    let mut selected: Vec<Selected> = Vec::new();
    let mut refused: Vec<Refused> = Vec::new();
    // Target namespace → the backup's Namespace item for it.
    let mut namespaces: BTreeMap<String, Option<usize>> = BTreeMap::new();
    let namespace_resource = catalog
        .get(&GroupResource::new("", "namespaces"))
        .cloned()
        .map(Arc::new);
    // The backup's Namespace items whose kind is Namespace; the others are refused.
    let namespace_contradiction = |i: usize| {
        namespace_resource
            .as_ref()
            .and_then(|r| kind_contradiction(items.kind(i), r).map(|why| (r, why)))
    };
    let is_namespace = |gr: &GroupResource| gr.group.is_empty() && gr.resource == "namespaces";
    let mut namespace_items: BTreeMap<&str, usize> = BTreeMap::new();
    for i in 0..items.len() {
        if is_namespace(items.group_resource(i)) && namespace_contradiction(i).is_none() {
            namespace_items.insert(items.name(i), i);
        }
    }
    // Shared per resource and per target namespace, not per item.
    let mut resources: BTreeMap<&GroupResource, Arc<DiscoveredResource>> = BTreeMap::new();
    let mut targets: BTreeMap<&str, Arc<str>> = BTreeMap::new();
    let no_namespace: Arc<str> = Arc::from("");
    let mut last: Option<(&GroupResource, String)> = None;
    for i in 0..items.len() {
        let gr = items.group_resource(i);
        let gr_name = match &last {
            Some((g, name)) if *g == gr => name.as_str(),
            _ => {
                last = Some((gr, gr.to_string()));
                last.as_ref().map(|(_, n)| n.as_str()).unwrap_or_default()
            }
        };
        let is_crd = gr_name == CRDS;
        if (pass == Pass::Crds) != is_crd {
            continue;
        }
        let (ns, name) = (items.namespace(i), items.name(i));
        if gr_name == "namespaces" {
            // A Namespace of the backup is restored when its namespace is.
            if pass == Pass::Rest
                && filters.namespaces.should_include(name)
                && filters.resources.should_include("namespaces")
                && items.labels_match(i)
            {
                let target = filters.target_namespace(name).to_owned();
                match namespace_contradiction(i) {
                    Some((resource, reason)) => refused.push(Refused {
                        selected: Selected {
                            index: i,
                            target_namespace: no_namespace.clone(),
                            resource: resource.clone(),
                            restore_status: false,
                        },
                        reason,
                    }),
                    None => {
                        namespaces.insert(target, Some(i));
                    }
                }
            }
            continue;
        }
        let namespaced = !ns.is_empty();
        if filters
            .refusal(gr_name, namespaced, ns, items.labels_match(i))
            .is_some()
        {
            continue;
        }
        let resource = match resources.get(gr) {
            Some(r) => r.clone(),
            None => {
                let Some(r) = catalog.get(gr) else {
                    warnings.insert(format!(
                        "Skipping restore of resource {gr_name}: the cluster does not serve it"
                    ));
                    continue;
                };
                let r = Arc::new(r.clone());
                resources.insert(gr, r.clone());
                r
            }
        };
        if resource.namespaced != namespaced {
            warnings.insert(format!(
                "Skipping restore of resource {gr_name}: its scope in the backup differs from the cluster's"
            ));
            continue;
        }
        let target_namespace = if namespaced {
            targets
                .entry(ns)
                .or_insert_with(|| Arc::from(filters.target_namespace(ns)))
                .clone()
        } else {
            no_namespace.clone()
        };
        let restore_status = filters.status_set && filters.status.should_include(gr_name);
        let s = Selected {
            index: i,
            target_namespace,
            resource,
            restore_status,
        };
        if let Some(reason) = kind_contradiction(items.kind(i), &s.resource) {
            // Refused items make no namespace.
            refused.push(Refused {
                selected: s,
                reason,
            });
            continue;
        }
        if namespaced && !namespaces.contains_key(&*s.target_namespace) {
            namespaces.insert(
                s.target_namespace.to_string(),
                namespace_items.get(ns).copied(),
            );
        }
        selected.push(s);
    }
    let priorities = priorities.resolved(|e| catalog.resolve(e));
    let mut names: BTreeMap<&GroupResource, String> = BTreeMap::new();
    for s in &selected {
        let gr = items.group_resource(s.index);
        if !names.contains_key(gr) {
            names.insert(gr, gr.to_string());
        }
    }
    let order = restore_order_of(
        selected.len(),
        |k| {
            let i = selected[k].index;
            RestoreItem {
                group_resource: names[items.group_resource(i)].as_str(),
                namespace: items.namespace(i),
                name: items.name(i),
                uid: items.uid(i),
                owners: items.owners(i),
            }
        },
        &priorities,
    );
    let mut slots: Vec<Option<Selected>> = selected.into_iter().map(Some).collect();
    let items_in_order = order.into_iter().filter_map(|i| slots[i].take()).collect();
    Plan {
        namespaces: namespaces
            .into_iter()
            .map(|(target, from_backup)| NamespacePlan {
                target,
                from_backup,
            })
            .collect(),
        items: items_in_order,
        refused,
        warnings: warnings.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::catalog::tests::res;
    use granary_velero::archive::RetainedBudget;
    use serde_json::json;

    /// An item as the tests write it: the whole object (a restore keeps its head).
    #[derive(Clone)]
    struct BackupItem {
        group_resource: GroupResource,
        namespace: String,
        name: String,
        object: Value,
    }

    /// The plan of the items' heads, as a restore reads them with `spec`.
    fn plan(
        items: &[BackupItem],
        spec: &RestoreSpec,
        catalog: &Catalog,
        priorities: &Priorities,
        pass: Pass,
    ) -> Plan {
        let budget = RetainedBudget::new(u64::MAX);
        let mut b =
            super::super::contents::ContentsBuilder::new(spec, &budget, None).expect("builder");
        for it in items {
            b.push(&it.group_resource, &it.namespace, &it.name, &it.object, b"")
                .expect("head");
        }
        super::plan(
            &b.finish().expect("contents"),
            spec,
            catalog,
            priorities,
            pass,
        )
    }

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
        let gr = GroupResource::new(group, resource);
        // The kind discovery gives the resource (events and widgets are not served).
        let kind = match catalog().get(&gr) {
            Some(r) => r.kind.clone(),
            None if resource == "events" => "Event".into(),
            None => "Widget".into(),
        };
        BackupItem {
            group_resource: gr,
            namespace: ns.into(),
            name: name.into(),
            object: json!({"kind": kind, "metadata": meta}),
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
    fn additional_items_stay_inside_the_restore_s_scope() {
        let cat = catalog();
        let spec = RestoreSpec {
            included_namespaces: Some(vec!["ns1".into()]),
            include_cluster_resources: Some(false),
            ..Default::default()
        };
        let f = Filters::new(&spec, &cat);
        assert_eq!(f.additional_refusal("configmaps", true, "ns1"), None);
        assert_eq!(
            f.additional_refusal("configmaps", true, "ns2"),
            Some("namespace excluded")
        );
        assert_eq!(
            f.additional_refusal("priorityclasses.scheduling.k8s.io", false, ""),
            Some("cluster-scoped resources excluded")
        );
        assert_eq!(
            f.additional_refusal("nodes", false, ""),
            Some("non-restorable resource")
        );
        // Unset: what the item needs comes along, as in Velero.
        let unset = RestoreSpec {
            included_namespaces: Some(vec!["ns1".into()]),
            ..Default::default()
        };
        let f = Filters::new(&unset, &cat);
        assert_eq!(
            f.additional_refusal("priorityclasses.scheduling.k8s.io", false, ""),
            None
        );
    }

    #[test]
    fn an_item_whose_kind_is_not_its_resources_is_refused() {
        let mut items = backup();
        // A ClusterRoleBinding filed under configmaps, alone in its namespace.
        let mut crb = item("", "configmaps", "ns3", "escalate", "u-crb", &[]);
        crb.object["kind"] = json!("ClusterRoleBinding");
        crb.object["apiVersion"] = json!("v1");
        items.push(crb);
        // An item written at another version than the cluster serves is not refused.
        let mut old = item("apps", "deployments", "ns2", "old", "u-old", &[]);
        old.object["kind"] = json!("Deployment");
        old.object["apiVersion"] = json!("apps/v1beta2");
        items.push(old);
        // A Namespace item that is something else is refused; its namespace is still
        // made for the items in it, without its labels.
        items[1].object["kind"] = json!("ClusterRole");
        let p = plan(
            &items,
            &RestoreSpec::default(),
            &catalog(),
            &Priorities::default(),
            Pass::Rest,
        );
        let refused: Vec<(String, String)> = p
            .refused
            .iter()
            .map(|r| (items[r.selected.index].name.clone(), r.reason.clone()))
            .collect();
        assert_eq!(
            refused,
            vec![
                (
                    "ns2".to_string(),
                    "not restored: the object's kind \"ClusterRole\" is not \"Namespace\", the kind of namespaces".to_string()
                ),
                (
                    "escalate".to_string(),
                    "not restored: the object's kind \"ClusterRoleBinding\" is not \"ConfigMap\", the kind of configmaps".to_string()
                ),
            ]
        );
        assert_eq!(&*p.refused[1].selected.target_namespace, "ns3");
        assert!(
            !names(&items, &p).iter().any(|n| n.contains("escalate")),
            "{:?}",
            names(&items, &p)
        );
        assert!(names(&items, &p).contains(&"deployments.apps:ns2/old".to_string()));
        assert_eq!(
            p.namespaces,
            vec![
                NamespacePlan {
                    target: "ns1".into(),
                    from_backup: Some(0)
                },
                NamespacePlan {
                    target: "ns2".into(),
                    from_backup: None
                },
            ],
            "no namespace for a refused item, no labels from a refused Namespace"
        );
    }

    #[test]
    fn restore_status_selection() {
        let items = backup();
        let spec = RestoreSpec {
            restore_status: Some(granary_api::velero::RestoreStatusSpec {
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
