//! Which resources, namespaces and items a backup takes: Velero 1.18's
//! `collections.IncludesExcludes`, `GlobalIncludesExcludes` (old-style filters:
//! `includedResources`, `excludedResources`, `includeClusterResources`) and
//! `ScopeIncludesExcludes` (new-style `*ScopedResources` filters), and the per-item
//! checks of `itemBackupper.backupItemInternal`. Pure; names are resolved through the
//! [`Catalog`].

use std::collections::BTreeMap;

use serde_json::Value;

use super::catalog::Catalog;
use crate::namespaces::matches as glob;
use granary_api::velero::BackupSpec;

/// Velero's label that keeps an item (or, on a namespace, all of it) out of backups.
pub const EXCLUDE_FROM_BACKUP_LABEL: &str = "velero.io/exclude-from-backup";

/// An include list and an exclude list with Velero's glob matching: excludes win; an
/// empty include list or `*` includes everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IncludesExcludes {
    includes: Vec<String>,
    excludes: Vec<String>,
}

impl IncludesExcludes {
    pub fn new(includes: Vec<String>, excludes: Vec<String>) -> Self {
        Self { includes, excludes }
    }

    pub fn includes(&self) -> &[String] {
        &self.includes
    }

    pub fn excludes(&self) -> &[String] {
        &self.excludes
    }

    fn excluded(&self, s: &str) -> bool {
        self.excludes.iter().any(|e| glob(e, s))
    }

    fn included(&self, s: &str) -> bool {
        self.includes.is_empty() || self.includes.iter().any(|i| i == "*" || glob(i, s))
    }

    pub fn should_include(&self, s: &str) -> bool {
        !self.excluded(s) && self.included(s)
    }

    /// No excludes, and no includes or only `*`.
    pub fn include_everything(&self) -> bool {
        self.excludes.is_empty()
            && (self.includes.is_empty() || (self.includes.len() == 1 && self.includes[0] == "*"))
    }
}

/// Maps user-written resource names to `resource.group` (names discovery does not know,
/// globs among them, stay as written; `*` stays `*`).
fn resolve_all(catalog: &Catalog, names: &[String], namespaced: Option<bool>) -> Vec<String> {
    names
        .iter()
        .filter_map(|n| {
            if n == "*" {
                return Some(n.clone());
            }
            match catalog.resolve(n) {
                // A scoped list ignores names of the other scope (Velero maps them to "").
                Some(r) if namespaced.is_some() && catalog.namespaced(&r) != namespaced => None,
                Some(r) => Some(r),
                None => Some(n.clone()),
            }
        })
        .collect()
}

fn list(v: &Option<Vec<String>>) -> Vec<String> {
    v.clone().unwrap_or_default()
}

/// The resource filter of one backup.
#[derive(Clone, Debug)]
pub enum ResourceFilter {
    /// Old-style filters (also when no resource filter is set at all).
    Global {
        resources: IncludesExcludes,
        include_cluster_resources: Option<bool>,
        all_namespaces: bool,
    },
    /// New-style filters.
    Scoped {
        namespaced: IncludesExcludes,
        cluster: IncludesExcludes,
        all_namespaces: bool,
    },
}

impl ResourceFilter {
    /// The filter of `spec`, with `namespaces` the backup's namespace filter. New-style
    /// filters are used when any of them is set and no old-style one is
    /// (`collections.UseOldResourceFilters`).
    pub fn new(spec: &BackupSpec, catalog: &Catalog, namespaces: &IncludesExcludes) -> Self {
        let all_namespaces = namespaces.include_everything();
        if spec.uses_old_resource_filters() || spec.new_resource_filters_set().is_empty() {
            ResourceFilter::Global {
                resources: IncludesExcludes::new(
                    resolve_all(catalog, &list(&spec.included_resources), None),
                    resolve_all(catalog, &list(&spec.excluded_resources), None),
                ),
                include_cluster_resources: spec.include_cluster_resources,
                all_namespaces,
            }
        } else {
            ResourceFilter::Scoped {
                namespaced: IncludesExcludes::new(
                    resolve_all(
                        catalog,
                        &list(&spec.included_namespace_scoped_resources),
                        Some(true),
                    ),
                    resolve_all(
                        catalog,
                        &list(&spec.excluded_namespace_scoped_resources),
                        Some(true),
                    ),
                ),
                cluster: IncludesExcludes::new(
                    resolve_all(
                        catalog,
                        &list(&spec.included_cluster_scoped_resources),
                        Some(false),
                    ),
                    resolve_all(
                        catalog,
                        &list(&spec.excluded_cluster_scoped_resources),
                        Some(false),
                    ),
                ),
                all_namespaces,
            }
        }
    }

    /// Whether the resource `name` (`resource.group`, namespaced or not) is collected.
    pub fn should_include(&self, name: &str, namespaced: bool) -> bool {
        match self {
            ResourceFilter::Global {
                resources,
                include_cluster_resources,
                all_namespaces,
            } => {
                if !namespaced && *include_cluster_resources == Some(false) {
                    return false;
                }
                // Unset: cluster-scoped resources are collected directly only by a backup
                // of every namespace (namespaces themselves are filtered later).
                if name != "namespaces"
                    && !namespaced
                    && include_cluster_resources.is_none()
                    && !all_namespaces
                {
                    return false;
                }
                resources.should_include(name)
            }
            ResourceFilter::Scoped {
                namespaced: ns_filter,
                cluster,
                all_namespaces,
            } => {
                if namespaced {
                    return !ns_filter.excludes.iter().any(|e| e == "*")
                        && ns_filter.should_include(name);
                }
                if cluster.excludes.iter().any(|e| e == "*") || cluster.excluded(name) {
                    return false;
                }
                if cluster.includes.is_empty()
                    && cluster.excludes.is_empty()
                    && *all_namespaces
                    && ns_filter.include_everything()
                {
                    return true;
                }
                cluster.includes.iter().any(|i| i == "*" || glob(i, name)) || name == "namespaces"
            }
        }
    }

    /// Whether a cluster-scoped item pulled in by an item action is refused: only when
    /// its resource is excluded outright (Velero's `ShouldExclude`).
    pub fn should_exclude(&self, name: &str, namespaced: bool) -> bool {
        match self {
            ResourceFilter::Global {
                resources,
                include_cluster_resources,
                ..
            } => {
                if resources.excluded(name) {
                    return true;
                }
                !namespaced
                    && match include_cluster_resources {
                        Some(false) => true,
                        None => !resources.should_include(name),
                        Some(true) => false,
                    }
            }
            ResourceFilter::Scoped {
                namespaced: ns_filter,
                cluster,
                ..
            } => {
                if namespaced {
                    ns_filter.excluded(name)
                } else {
                    cluster.excluded(name)
                }
            }
        }
    }
}

/// Why an item is not written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// `velero.io/exclude-from-backup=true`.
    ExcludeLabel,
    NamespaceExcluded,
    ResourceExcluded,
    BeingDeleted,
}

/// Velero's per-item checks (`backupItemInternal`): the exclude label, the namespace
/// filter, the resource filter (permissive for cluster-scoped items, which item actions
/// may pull in), and objects being deleted. `must_include` skips the filter checks.
pub fn check_item(
    object: &Value,
    resource: &str,
    namespaced: bool,
    namespaces: &IncludesExcludes,
    resources: &ResourceFilter,
    must_include: bool,
) -> Result<(), Skip> {
    let meta = object.get("metadata");
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if !must_include {
        let excluded_by_label = meta
            .and_then(|m| m.get("labels"))
            .and_then(|l| l.get(EXCLUDE_FROM_BACKUP_LABEL))
            .and_then(Value::as_str)
            == Some("true");
        if excluded_by_label {
            return Err(Skip::ExcludeLabel);
        }
        if !namespace.is_empty() && !namespaces.should_include(namespace) {
            return Err(Skip::NamespaceExcluded);
        }
        if namespace.is_empty()
            && resource != "namespaces"
            && resources.should_exclude(resource, namespaced)
        {
            return Err(Skip::ResourceExcluded);
        }
        if !namespace.is_empty() && !resources.should_include(resource, namespaced) {
            return Err(Skip::ResourceExcluded);
        }
    }
    if meta
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|d| !d.is_null())
    {
        return Err(Skip::BeingDeleted);
    }
    Ok(())
}

/// The namespaces to list a namespaced resource in: `None` for one cluster-wide list
/// (the filter includes every namespace, or `*`), else the included namespaces that
/// exist (`live`), wildcards expanded, minus the excluded ones.
pub fn namespaces_to_list(filter: &IncludesExcludes, live: &[String]) -> Option<Vec<String>> {
    if filter.includes.is_empty() || filter.includes.iter().any(|i| i == "*") {
        return None;
    }
    let mut out: Vec<String> = live
        .iter()
        .filter(|ns| filter.should_include(ns))
        .cloned()
        .collect();
    out.sort();
    Some(out)
}

/// One live namespace as the namespace tracker needs it.
#[derive(Clone, Debug)]
pub struct LiveNamespace {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub active: bool,
}

/// The namespaces whose Namespace objects a backup takes before any item is seen
/// (Velero's `nsTracker.init`): active namespaces whose labels match the label
/// selector or one of the or-selectors, and, unless the namespace filter includes
/// everything while a selector is set, those the namespace filter includes. Namespaces
/// holding a backed-up item are added as items are collected.
pub fn initially_tracked(
    live: &[LiveNamespace],
    namespaces: &IncludesExcludes,
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    or_selectors: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector],
) -> Vec<String> {
    use super::selectors::matches;
    let any_selector = selector.is_some() || !or_selectors.is_empty();
    live.iter()
        .filter(|ns| ns.active)
        .filter(|ns| {
            selector.is_some_and(|s| matches(s, &ns.labels))
                || or_selectors.iter().any(|s| matches(s, &ns.labels))
                || (!(namespaces.include_everything() && any_selector)
                    && namespaces.should_include(&ns.name))
        })
        .map(|ns| ns.name.clone())
        .collect()
}

#[cfg(test)]
mod tests;
