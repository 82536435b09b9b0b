//! What the cluster serves, as the backup sees it: the resources discovery reports at
//! their group's preferred version (Velero's `discovery.Helper`), in Velero's
//! collection order, without the resources a backup never holds; and the resolution of
//! the names users write in filters (`cm`, `deployments`, `deployments.apps`) to
//! `resource.group`. Pure: the discovery documents are fetched in [`super::cluster`].

use granary_velero::resource::GroupResource;

/// One resource at its group's preferred version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredResource {
    pub group: String,
    /// The group's preferred version.
    pub version: String,
    pub kind: String,
    /// Plural name (`deployments`).
    pub resource: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    pub verbs: Vec<String>,
}

impl DiscoveredResource {
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(self.group.clone(), self.resource.clone())
    }

    /// `resource.group` (`resource` in the core group), the form filters compare.
    pub fn name(&self) -> String {
        self.group_resource().to_string()
    }

    /// `group/version` or `version`.
    pub fn api_version(&self) -> String {
        granary_velero::resource::join_api_version(&self.group, &self.version)
    }
}

/// Resources a backup never holds, whatever the filters say (by `resource.group`).
///
/// - `volumesnapshots.snapshot.storage.k8s.io` and
///   `volumesnapshotcontents.snapshot.storage.k8s.io`: Velero 1.18 adds them to every
///   backup's excludes (`autoExclude*Resources` in `backup_controller.go`): they are
///   intermediate objects of CSI snapshots.
/// - The resources Velero's restore never restores (`nonRestorableResources`: events of
///   both groups, nodes, Velero's own backups/restores/repositories, csinodes,
///   volumeattachments): Velero still writes them into a full-cluster tarball, Granary
///   leaves them out because nothing can ever restore them (a restore from either tool
///   reads the same tarball minus these files). Velero's other bookkeeping kinds
///   (`deletebackuprequests`, `downloadrequests`, `podvolumebackups`,
///   `podvolumerestores`, `datauploads`, `datadownloads`, `serverstatusrequests`) are
///   left out for the same reason: they describe a server's work, not the cluster.
/// - Download requests of both APIs (`downloadrequests.velero.io`,
///   `nonadmindownloadrequests.oadp.openshift.io`): their status holds a signed URL to
///   the object store, a credential that must not be copied into a backup (whose
///   bucket a namespace owner may read) nor brought back by a restore.
pub const NEVER_BACKED_UP: &[&str] = &[
    "events",
    "events.events.k8s.io",
    "nodes",
    "csinodes.storage.k8s.io",
    "volumeattachments.storage.k8s.io",
    "volumesnapshots.snapshot.storage.k8s.io",
    "volumesnapshotcontents.snapshot.storage.k8s.io",
    "backups.velero.io",
    "restores.velero.io",
    "resticrepositories.velero.io",
    "backuprepositories.velero.io",
    "deletebackuprequests.velero.io",
    "downloadrequests.velero.io",
    "podvolumebackups.velero.io",
    "podvolumerestores.velero.io",
    "datauploads.velero.io",
    "datadownloads.velero.io",
    "serverstatusrequests.velero.io",
    "nonadmindownloadrequests.oadp.openshift.io",
];

/// The verbs a resource must support to be backed up (Velero's discovery helper keeps
/// only resources that can be listed, read, created and deleted).
pub const REQUIRED_VERBS: [&str; 4] = ["list", "create", "get", "delete"];

/// Whether a resource is ever backed up.
pub fn is_backed_up(resource: &DiscoveredResource) -> bool {
    !resource.resource.contains('/')
        && REQUIRED_VERBS
            .iter()
            .all(|v| resource.verbs.iter().any(|have| have == v))
        && !NEVER_BACKED_UP.contains(&resource.name().as_str())
}

/// Resources served by two groups over the same objects (Velero's
/// `cohabitatingResources`): only the first one collected is backed up, since the
/// objects (and their UIDs) are the same. `extensions` sorts last, so the newer group
/// wins. (Velero's fifth pair, core and `events.k8s.io` events, is never backed up.)
const COHABITANTS: &[(&str, &str, &str)] = &[
    ("deployments", "extensions", "apps"),
    ("daemonsets", "extensions", "apps"),
    ("replicasets", "extensions", "apps"),
    ("networkpolicies", "extensions", "networking.k8s.io"),
];

/// Whether `a` and `b` are the same resource served by both groups of a cohabiting pair.
pub fn cohabitants(a: &DiscoveredResource, b: &DiscoveredResource) -> bool {
    a.resource == b.resource
        && a.group != b.group
        && COHABITANTS.iter().any(|(r, g1, g2)| {
            *r == a.resource
                && [g1, g2].contains(&&a.group.as_str())
                && [g1, g2].contains(&&b.group.as_str())
        })
}

/// Discovered resources in Velero's collection order.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    resources: Vec<DiscoveredResource>,
}

impl Catalog {
    /// Builds the catalog from discovery's answer, in the server's group order: groups
    /// keep their order except `extensions`, which goes last (Velero's `sortResources`),
    /// and within the core group pods come first, then persistentvolumeclaims, then
    /// persistentvolumes, then the rest in discovery order (Velero's `sortCoreGroup`, so
    /// a pod's claims and volumes follow it). Resources that are never backed up are
    /// kept for name resolution but skipped by [`Catalog::collectable`].
    pub fn new(mut resources: Vec<DiscoveredResource>) -> Self {
        // Stable sorts keep discovery order within equal keys.
        resources.sort_by_key(|r| {
            let core_rank = match (r.group.as_str(), r.resource.as_str()) {
                ("", "pods") => 0,
                ("", "persistentvolumeclaims") => 1,
                ("", "persistentvolumes") => 2,
                _ => 3,
            };
            // Discovery serves the core group first, so ranking its three resources
            // ahead of everything else is ranking them first within it.
            (r.group == "extensions", core_rank)
        });
        Self { resources }
    }

    /// Every discovered resource (for tests and diagnostics).
    pub fn all(&self) -> &[DiscoveredResource] {
        &self.resources
    }

    /// The resources to collect, in order: those ever backed up, without a
    /// cohabitant already collected under its other group.
    pub fn collectable(&self) -> impl Iterator<Item = &DiscoveredResource> + '_ {
        self.resources
            .iter()
            .enumerate()
            .filter(|(i, r)| {
                is_backed_up(r)
                    && !self.resources[..*i]
                        .iter()
                        .any(|earlier| is_backed_up(earlier) && cohabitants(earlier, r))
            })
            .map(|(_, r)| r)
    }

    pub fn get(&self, gr: &GroupResource) -> Option<&DiscoveredResource> {
        self.resources
            .iter()
            .find(|r| r.group == gr.group && r.resource == gr.resource)
    }

    /// The resource of a kind in a group (for owner references and CRD lookups).
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<&DiscoveredResource> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.kind == kind)
    }

    /// Resolves a name as users write it in a filter (`configmaps`, `cm`, `configmap`,
    /// `ConfigMap`, `deployments.apps`) to `resource.group`, as Velero's
    /// `helper.ResourceFor` does: the text before the first dot is the resource (plural,
    /// singular, short name or kind, case-insensitive), the rest the group; without a
    /// group the first match in discovery order wins. `None` when nothing matches
    /// (Velero then keeps the name as written, so a glob like `*.apps` still works).
    pub fn resolve(&self, name: &str) -> Option<String> {
        let lower = name.to_ascii_lowercase();
        let (resource, group) = match lower.split_once('.') {
            Some((r, g)) => (r.to_owned(), Some(g.to_owned())),
            None => (lower.clone(), None),
        };
        self.resources
            .iter()
            .filter(|r| group.as_deref().is_none_or(|g| r.group == g))
            .find(|r| {
                r.resource == resource
                    || r.singular == resource
                    || r.kind.to_ascii_lowercase() == resource
                    || r.short_names.contains(&resource)
            })
            .map(DiscoveredResource::name)
    }

    /// Whether `resource.group` is namespaced; `None` when discovery does not know it.
    pub fn namespaced(&self, name: &str) -> Option<bool> {
        let gr = GroupResource::parse(name)?;
        self.get(&gr).map(|r| r.namespaced)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn res(
        group: &str,
        resource: &str,
        kind: &str,
        namespaced: bool,
    ) -> DiscoveredResource {
        DiscoveredResource {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            resource: resource.into(),
            singular: kind.to_ascii_lowercase(),
            short_names: match resource {
                "configmaps" => vec!["cm".into()],
                "deployments" => vec!["deploy".into()],
                _ => vec![],
            },
            namespaced,
            verbs: REQUIRED_VERBS.iter().map(|v| v.to_string()).collect(),
        }
    }

    pub(crate) fn sample() -> Catalog {
        Catalog::new(vec![
            res("", "namespaces", "Namespace", false),
            res("", "configmaps", "ConfigMap", true),
            res("", "events", "Event", true),
            res("", "persistentvolumes", "PersistentVolume", false),
            res("", "secrets", "Secret", true),
            res("", "pods", "Pod", true),
            res("", "persistentvolumeclaims", "PersistentVolumeClaim", true),
            res("extensions", "ingresses", "Ingress", true),
            res("apps", "deployments", "Deployment", true),
            res("apps", "replicasets", "ReplicaSet", true),
            res("events.k8s.io", "events", "Event", true),
            res(
                "rbac.authorization.k8s.io",
                "clusterroles",
                "ClusterRole",
                false,
            ),
            res("stable.example.com", "crontabs", "CronTab", true),
        ])
    }

    #[test]
    fn velero_collection_order() {
        let order: Vec<String> = sample().collectable().map(|r| r.name()).collect();
        assert_eq!(
            order,
            [
                "pods",
                "persistentvolumeclaims",
                "persistentvolumes",
                "namespaces",
                "configmaps",
                "secrets",
                "deployments.apps",
                "replicasets.apps",
                "clusterroles.rbac.authorization.k8s.io",
                "crontabs.stable.example.com",
                "ingresses.extensions",
            ]
        );
    }

    #[test]
    fn never_backed_up_and_verbless_resources_are_skipped() {
        let mut no_create = res("authorization.k8s.io", "selfsubjectreviews", "X", false);
        no_create.verbs = vec!["create".into()];
        let mut sub = res("", "pods/log", "Pod", true);
        sub.verbs = vec![
            "get".into(),
            "list".into(),
            "create".into(),
            "delete".into(),
        ];
        for r in [
            no_create,
            sub,
            res("", "events", "Event", true),
            res("events.k8s.io", "events", "Event", true),
            res("velero.io", "backups", "Backup", true),
            res("velero.io", "downloadrequests", "DownloadRequest", true),
            res(
                "velero.io",
                "deletebackuprequests",
                "DeleteBackupRequest",
                true,
            ),
            res(
                "oadp.openshift.io",
                "nonadmindownloadrequests",
                "NonAdminDownloadRequest",
                true,
            ),
        ] {
            assert!(!is_backed_up(&r), "{}", r.name());
        }
        assert!(is_backed_up(&res(
            "velero.io",
            "schedules",
            "Schedule",
            true
        )));
    }

    #[test]
    fn cohabiting_resources_are_collected_once() {
        let c = Catalog::new(vec![
            res("extensions", "deployments", "Deployment", true),
            res("extensions", "ingresses", "Ingress", true),
            res("apps", "deployments", "Deployment", true),
            res("networking.k8s.io", "ingresses", "Ingress", true),
        ]);
        let order: Vec<String> = c.collectable().map(|r| r.name()).collect();
        assert_eq!(
            order,
            [
                "deployments.apps",
                "ingresses.networking.k8s.io",
                "ingresses.extensions"
            ],
            "ingresses are not one of Velero's cohabiting pairs"
        );
    }

    #[test]
    fn names_resolve_like_velero() {
        let c = sample();
        assert_eq!(c.resolve("cm").as_deref(), Some("configmaps"));
        assert_eq!(c.resolve("ConfigMap").as_deref(), Some("configmaps"));
        assert_eq!(c.resolve("configmap").as_deref(), Some("configmaps"));
        assert_eq!(
            c.resolve("deployments").as_deref(),
            Some("deployments.apps")
        );
        assert_eq!(c.resolve("deploy").as_deref(), Some("deployments.apps"));
        assert_eq!(
            c.resolve("deployments.apps").as_deref(),
            Some("deployments.apps")
        );
        assert_eq!(c.resolve("events").as_deref(), Some("events"));
        assert_eq!(
            c.resolve("events.events.k8s.io").as_deref(),
            Some("events.events.k8s.io")
        );
        assert_eq!(c.resolve("deployments.extensions"), None);
        assert_eq!(c.resolve("*.apps"), None);
        assert_eq!(c.namespaced("persistentvolumes"), Some(false));
        assert_eq!(c.namespaced("crontabs.stable.example.com"), Some(true));
        assert_eq!(c.namespaced("nothing"), None);
    }
}
