//! Which resources are served right now: the built-in table plus whatever the
//! established CustomResourceDefinitions declare. Looked up on every request.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::builtin::BUILTIN_KINDS;
use super::store::GroupResource;

/// JSON paths (simple `.a.b` form) of a scale subresource.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// Everything the handlers need to know about one served group/version/resource.
#[derive(Debug, Clone)]
pub(crate) struct ResourceInfo {
    pub group: String,
    /// The version this entry is served at.
    pub version: String,
    /// The version objects are stored at (custom resources may serve several).
    pub storage_version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status: bool,
    pub scale: Option<ScalePaths>,
    pub generation: bool,
    pub field_selectors: Vec<String>,
    /// The openAPIV3Schema of a custom resource version.
    pub schema: Option<Arc<Value>>,
    /// Set for custom resources: the name of their CRD.
    pub crd: Option<String>,
    /// `additionalPrinterColumns` of a custom resource version.
    pub printer_columns: Vec<Value>,
    /// OpenAPI definition name.
    pub openapi_name: String,
    /// Set when objects are kept in another resource's store and converted on the way
    /// in and out.
    pub stored_as: Option<StoredAs>,
}

/// A resource served from another resource's store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoredAs {
    /// `events.k8s.io/v1` Events, stored as core `v1` Events (see `events.rs`).
    CoreEvent,
}

impl ResourceInfo {
    /// The resource whose store holds these objects.
    pub(crate) fn gr(&self) -> GroupResource {
        match self.stored_as {
            Some(StoredAs::CoreEvent) => GroupResource::new("", "events"),
            None => GroupResource::new(&self.group, &self.plural),
        }
    }

    /// Whether stored objects differ from what this entry serves.
    pub(crate) fn converts(&self) -> bool {
        self.version != self.storage_version || self.stored_as.is_some()
    }

    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub(crate) fn storage_api_version(&self) -> String {
        if self.group.is_empty() {
            self.storage_version.clone()
        } else {
            format!("{}/{}", self.group, self.storage_version)
        }
    }

    pub(crate) fn field_selector_fields(&self) -> Vec<&str> {
        self.field_selectors.iter().map(String::as_str).collect()
    }

    fn from_builtin(k: &super::builtin::BuiltinKind) -> Self {
        ResourceInfo {
            group: k.group.into(),
            version: k.version.into(),
            storage_version: k.version.into(),
            kind: k.kind.into(),
            plural: k.plural.into(),
            singular: k.singular.into(),
            namespaced: k.namespaced,
            short_names: k.short_names.iter().map(|s| s.to_string()).collect(),
            categories: k.categories.iter().map(|s| s.to_string()).collect(),
            status: k.status,
            scale: k.scale.then(|| ScalePaths {
                spec_replicas: ".spec.replicas".into(),
                status_replicas: ".status.replicas".into(),
                label_selector: None,
            }),
            generation: k.generation,
            field_selectors: k.field_selectors.iter().map(|s| s.to_string()).collect(),
            schema: None,
            crd: None,
            printer_columns: Vec::new(),
            openapi_name: k.openapi_name.into(),
            stored_as: (k.group == "events.k8s.io" && k.plural == "events")
                .then_some(StoredAs::CoreEvent),
        }
    }
}

type Gvr = (String, String, String);

#[derive(Default)]
struct Inner {
    by_gvr: HashMap<Gvr, Arc<ResourceInfo>>,
    /// Group -> versions in preference order.
    groups: BTreeMap<String, Vec<String>>,
    /// Group order for discovery: built-ins first, in table order.
    group_order: Vec<String>,
    crds: HashMap<String, Vec<Gvr>>,
}

/// The served resources.
pub(crate) struct Registry {
    inner: RwLock<Inner>,
}

impl Registry {
    pub(crate) fn new() -> Self {
        let mut inner = Inner::default();
        for k in BUILTIN_KINDS {
            let info = ResourceInfo::from_builtin(k);
            add(&mut inner, info);
        }
        Registry {
            inner: RwLock::new(inner),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn lookup(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceInfo>> {
        self.read()
            .by_gvr
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Any served version of a group/resource (the preferred one first).
    pub(crate) fn lookup_gr(&self, gr: &GroupResource) -> Option<Arc<ResourceInfo>> {
        let inner = self.read();
        let versions = inner.groups.get(&gr.group)?;
        versions.iter().find_map(|v| {
            inner
                .by_gvr
                .get(&(gr.group.clone(), v.clone(), gr.resource.clone()))
                .cloned()
        })
    }

    /// Groups with their versions, in discovery order.
    pub(crate) fn groups(&self) -> Vec<(String, Vec<String>)> {
        let inner = self.read();
        inner
            .group_order
            .iter()
            .filter_map(|g| inner.groups.get(g).map(|v| (g.clone(), v.clone())))
            .collect()
    }

    /// Resources of one group/version, sorted by plural.
    pub(crate) fn resources(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        let inner = self.read();
        let mut out: Vec<_> = inner
            .by_gvr
            .values()
            .filter(|i| i.group == group && i.version == version)
            .cloned()
            .collect();
        out.sort_by(|a, b| a.plural.cmp(&b.plural));
        out
    }

    pub(crate) fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.read().by_gvr.values().cloned().collect()
    }

    /// Serves exactly `infos` for the CRD `crd` (replacing what it served before).
    pub(crate) fn set_crd(&self, crd: &str, infos: Vec<ResourceInfo>) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        remove_crd_locked(&mut inner, crd);
        let mut keys = Vec::new();
        for info in infos {
            keys.push((
                info.group.clone(),
                info.version.clone(),
                info.plural.clone(),
            ));
            add(&mut inner, info);
        }
        inner.crds.insert(crd.to_string(), keys);
    }

    pub(crate) fn remove_crd(&self, crd: &str) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        remove_crd_locked(&mut inner, crd);
    }

    pub(crate) fn crd_names(&self) -> Vec<String> {
        self.read().crds.keys().cloned().collect()
    }
}

fn add(inner: &mut Inner, info: ResourceInfo) {
    let versions = inner.groups.entry(info.group.clone()).or_default();
    if !versions.contains(&info.version) {
        versions.push(info.version.clone());
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    if !inner.group_order.contains(&info.group) {
        inner.group_order.push(info.group.clone());
    }
    inner.by_gvr.insert(
        (
            info.group.clone(),
            info.version.clone(),
            info.plural.clone(),
        ),
        Arc::new(info),
    );
}

fn remove_crd_locked(inner: &mut Inner, crd: &str) {
    let Some(keys) = inner.crds.remove(crd) else {
        return;
    };
    for key in keys {
        inner.by_gvr.remove(&key);
        let still_served = inner
            .by_gvr
            .keys()
            .any(|(g, v, _)| *g == key.0 && *v == key.1);
        if !still_served && let Some(vs) = inner.groups.get_mut(&key.0) {
            vs.retain(|v| *v != key.1);
            if vs.is_empty() {
                inner.groups.remove(&key.0);
                inner.group_order.retain(|g| *g != key.0);
            }
        }
    }
}

/// Kubernetes version priority: GA > beta > alpha, higher numbers first; others last.
pub(crate) fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (stage, n) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    match n.parse::<u64>() {
        Ok(minor) => (stage, major, minor),
        Err(_) => (0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ordering_follows_kubernetes() {
        let mut vs = vec!["v1alpha1", "v2", "v1beta2", "v1", "v1beta1", "foo"];
        vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(vs, ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }

    #[test]
    fn builtins_are_served() {
        let r = Registry::new();
        assert!(r.lookup("", "v1", "configmaps").is_some());
        assert!(
            r.lookup("apps", "v1", "deployments")
                .unwrap()
                .scale
                .is_some()
        );
        assert!(r.groups().iter().any(|(g, _)| g == "coordination.k8s.io"));
    }
}
