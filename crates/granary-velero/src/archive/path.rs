//! Entry paths: the item path scheme of Velero's `GetVersionedItemFilePath`, and the
//! normalisation that turns an untrusted tar path into a safe relative one.

use std::fmt;

use super::error::ArchiveError;
use super::{PREFERRED_VERSION_SUFFIX, RESOURCES_DIR};
use crate::resource::GroupResource;

/// Where an item lives: cluster-scoped or in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Cluster,
    Namespaced(String),
}

impl Scope {
    /// The namespace, `""` for cluster-scoped items (Kubernetes' convention).
    pub fn namespace(&self) -> &str {
        match self {
            Self::Cluster => "",
            Self::Namespaced(ns) => ns,
        }
    }

    pub fn from_namespace(ns: &str) -> Self {
        if ns.is_empty() {
            Self::Cluster
        } else {
            Self::Namespaced(ns.to_owned())
        }
    }
}

/// Which copy of an item a path holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VersionDir {
    /// `resources/<gr>/…`: the copy Velero's restore reads by default (preferred version).
    Unversioned,
    /// `resources/<gr>/<v>-preferredversion/…`: the preferred version, named.
    Preferred(String),
    /// `resources/<gr>/<v>/…`: a non-preferred version (`EnableAPIGroupVersions`).
    Version(String),
}

impl VersionDir {
    /// The version this copy holds, if the path names one.
    pub fn version(&self) -> Option<&str> {
        match self {
            Self::Unversioned => None,
            Self::Preferred(v) | Self::Version(v) => Some(v),
        }
    }

    fn parse(dir: &str) -> Option<Self> {
        match dir.strip_suffix(PREFERRED_VERSION_SUFFIX) {
            Some("") => None,
            Some(v) => Some(Self::Preferred(v.to_owned())),
            None => Some(Self::Version(dir.to_owned())),
        }
    }
}

/// The parsed path of one item file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemPath {
    pub group_resource: GroupResource,
    pub version_dir: VersionDir,
    pub scope: Scope,
    pub name: String,
}

impl ItemPath {
    /// Parses a normalised entry path; `None` when it is not an item path.
    pub fn parse(path: &str) -> Option<Self> {
        let mut parts = path.split('/');
        if parts.next()? != RESOURCES_DIR {
            return None;
        }
        let group_resource = GroupResource::parse(parts.next()?)?;
        let rest: Vec<&str> = parts.collect();
        // Velero's parser treats `cluster` and `namespaces` as scope directories and
        // every other child of a resource directory as a version directory.
        let (version_dir, scoped) = match rest.first().copied()? {
            "cluster" | "namespaces" => (VersionDir::Unversioned, &rest[..]),
            dir => (VersionDir::parse(dir)?, &rest[1..]),
        };
        let (scope, file) = match scoped {
            ["cluster", file] => (Scope::Cluster, *file),
            ["namespaces", ns, file] if !ns.is_empty() => {
                (Scope::Namespaced((*ns).to_owned()), *file)
            }
            _ => return None,
        };
        let name = file.strip_suffix(".json").filter(|n| !n.is_empty())?;
        Some(Self {
            group_resource,
            version_dir,
            scope,
            name: name.to_owned(),
        })
    }
}

impl fmt::Display for ItemPath {
    /// `resources/<gr>/[<version dir>/]{cluster|namespaces/<ns>}/<name>.json`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{RESOURCES_DIR}/{}/", self.group_resource)?;
        match &self.version_dir {
            VersionDir::Unversioned => {}
            VersionDir::Preferred(v) => write!(f, "{v}{PREFERRED_VERSION_SUFFIX}/")?,
            VersionDir::Version(v) => write!(f, "{v}/")?,
        }
        match &self.scope {
            Scope::Cluster => f.write_str("cluster/")?,
            Scope::Namespaced(ns) => write!(f, "namespaces/{ns}/")?,
        }
        write!(f, "{}.json", self.name)
    }
}

/// Checks that a string can be one segment of an entry path.
pub(crate) fn check_segment(what: &str, s: &str) -> Result<(), ArchiveError> {
    if s.is_empty() || s == "." || s == ".." || s.contains(['/', '\\', '\0']) {
        return Err(ArchiveError::InvalidObject(format!(
            "{what} {s:?} cannot be used as a path segment"
        )));
    }
    Ok(())
}

/// Turns an untrusted tar path into a safe relative path: UTF-8, no NUL or backslash,
/// not absolute, no `..`; empty and `.` segments are dropped (`./a//b` → `a/b`).
pub(crate) fn normalize_entry_path(raw: &[u8]) -> Result<String, ArchiveError> {
    let lossy = || String::from_utf8_lossy(raw).into_owned();
    let s = std::str::from_utf8(raw).map_err(|_| ArchiveError::InvalidPath {
        path: lossy(),
        reason: "not valid UTF-8",
    })?;
    if s.contains('\0') {
        return Err(ArchiveError::InvalidPath {
            path: lossy(),
            reason: "contains NUL",
        });
    }
    if s.contains('\\') {
        return Err(ArchiveError::InvalidPath {
            path: lossy(),
            reason: "contains a backslash",
        });
    }
    let bytes = s.as_bytes();
    if s.starts_with('/')
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
    {
        return Err(ArchiveError::AbsolutePath { path: lossy() });
    }
    let mut out: Vec<&str> = Vec::new();
    for seg in s.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(ArchiveError::PathTraversal { path: lossy() }),
            seg => out.push(seg),
        }
    }
    if out.is_empty() {
        return Err(ArchiveError::InvalidPath {
            path: lossy(),
            reason: "empty",
        });
    }
    Ok(out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(gr: &str, vd: VersionDir, scope: Scope, name: &str) -> ItemPath {
        ItemPath {
            group_resource: GroupResource::parse(gr).expect("valid"),
            version_dir: vd,
            scope,
            name: name.to_owned(),
        }
    }

    #[test]
    fn item_paths_round_trip() {
        let cases = [
            (
                "resources/pods/namespaces/ns1/p.json",
                p(
                    "pods",
                    VersionDir::Unversioned,
                    Scope::Namespaced("ns1".into()),
                    "p",
                ),
            ),
            (
                "resources/persistentvolumes/cluster/pv1.json",
                p(
                    "persistentvolumes",
                    VersionDir::Unversioned,
                    Scope::Cluster,
                    "pv1",
                ),
            ),
            (
                "resources/namespaces/cluster/ns1.json",
                p("namespaces", VersionDir::Unversioned, Scope::Cluster, "ns1"),
            ),
            (
                "resources/deployments.apps/v1-preferredversion/namespaces/ns/d.json",
                p(
                    "deployments.apps",
                    VersionDir::Preferred("v1".into()),
                    Scope::Namespaced("ns".into()),
                    "d",
                ),
            ),
            (
                "resources/crontabs.stable.example.com/v1beta1/cluster/c.x.json",
                p(
                    "crontabs.stable.example.com",
                    VersionDir::Version("v1beta1".into()),
                    Scope::Cluster,
                    "c.x",
                ),
            ),
            (
                "resources/pods/namespaces/cluster/p.json",
                p(
                    "pods",
                    VersionDir::Unversioned,
                    Scope::Namespaced("cluster".into()),
                    "p",
                ),
            ),
        ];
        for (s, want) in cases {
            assert_eq!(ItemPath::parse(s).as_ref(), Some(&want), "{s}");
            assert_eq!(want.to_string(), s);
        }
    }

    #[test]
    fn non_item_paths_are_not_items() {
        for s in [
            "metadata/version",
            "resources/pods",
            "resources/pods/cluster",
            "resources/pods/cluster/.json",
            "resources/pods/cluster/p.yaml",
            "resources/pods/namespaces/p.json",
            "resources/pods/v1/v2/cluster/p.json",
            "resources/pods/-preferredversion/cluster/p.json",
            "resources/.x/cluster/p.json",
        ] {
            assert_eq!(ItemPath::parse(s), None, "{s}");
        }
    }

    #[test]
    fn normalization_refuses_escapes() {
        assert_eq!(normalize_entry_path(b"./a//b/").expect("ok"), "a/b");
        assert!(matches!(
            normalize_entry_path(b"/etc/passwd"),
            Err(ArchiveError::AbsolutePath { .. })
        ));
        assert!(matches!(
            normalize_entry_path(b"C:/x"),
            Err(ArchiveError::AbsolutePath { .. })
        ));
        assert!(matches!(
            normalize_entry_path(b"a/../../x"),
            Err(ArchiveError::PathTraversal { .. })
        ));
        assert!(matches!(
            normalize_entry_path(b"a\\..\\x"),
            Err(ArchiveError::InvalidPath { .. })
        ));
        assert!(matches!(
            normalize_entry_path(b"./"),
            Err(ArchiveError::InvalidPath { .. })
        ));
        assert!(matches!(
            normalize_entry_path(b"a\xff"),
            Err(ArchiveError::InvalidPath { .. })
        ));
    }
}
