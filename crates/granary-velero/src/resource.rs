//! Identity of a Kubernetes resource as the archive format spells it: a group resource
//! (`deployments.apps`, `pods`) and an `apiVersion` split into group and version.

use std::fmt;

/// A resource (plural, lower case) within an API group; the core group is `""`.
///
/// Its string form is Velero's `schema.GroupResource.String()`: `resource.group`, or just
/// `resource` for the core group. Resource names are DNS labels and never contain a dot,
/// so the form parses back unambiguously at the first dot.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }

    /// Parses `resource.group` (or `resource`), the directory name under `resources/`.
    pub fn parse(s: &str) -> Option<Self> {
        let (resource, group) = match s.split_once('.') {
            Some((r, g)) => (r, g),
            None => (s, ""),
        };
        if resource.is_empty() || (s.contains('.') && group.is_empty()) {
            return None;
        }
        Some(Self::new(group, resource))
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// Splits an `apiVersion` into (group, version): `v1` → (`""`, `v1`),
/// `apps/v1` → (`apps`, `v1`). `None` for an empty or malformed value.
pub fn split_api_version(api_version: &str) -> Option<(&str, &str)> {
    match api_version.split_once('/') {
        None if !api_version.is_empty() => Some(("", api_version)),
        Some((g, v)) if !g.is_empty() && !v.is_empty() && !v.contains('/') => Some((g, v)),
        _ => None,
    }
}

/// Joins group and version into an `apiVersion` (the group version string).
pub fn join_api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_resource_round_trips() {
        for (s, g, r) in [
            ("pods", "", "pods"),
            ("deployments.apps", "apps", "deployments"),
            (
                "customresourcedefinitions.apiextensions.k8s.io",
                "apiextensions.k8s.io",
                "customresourcedefinitions",
            ),
        ] {
            let gr = GroupResource::parse(s).expect("valid");
            assert_eq!(gr, GroupResource::new(g, r));
            assert_eq!(gr.to_string(), s);
        }
        assert_eq!(GroupResource::parse(""), None);
        assert_eq!(GroupResource::parse("pods."), None);
        assert_eq!(GroupResource::parse(".apps"), None);
    }

    #[test]
    fn api_versions_split_and_join() {
        assert_eq!(split_api_version("v1"), Some(("", "v1")));
        assert_eq!(split_api_version("apps/v1"), Some(("apps", "v1")));
        assert_eq!(split_api_version(""), None);
        assert_eq!(split_api_version("a/b/c"), None);
        assert_eq!(split_api_version("/v1"), None);
        assert_eq!(join_api_version("", "v1"), "v1");
        assert_eq!(join_api_version("apps", "v1"), "apps/v1");
    }
}
