//! What a backup learns from the cluster before it collects anything, and the
//! [`Collection`] built from it: discovery, the Namespace objects and CRDs, the
//! namespace and resource filters (with the namespaces labelled
//! `velero.io/exclude-from-backup` added to the excludes) and the namespaces tracked from
//! the start. Shared by the real run ([`super::runner`]) and the dry run
//! ([`super::preview`]), so a dry run collects exactly what a backup would.

use std::collections::{BTreeSet, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};

use tokio::sync::mpsc;

use super::actions::{self, ActionContext};
use super::catalog::Catalog;
use super::cluster;
use super::collect::{Collection, WriteJob};
use super::filters::{
    EXCLUDE_FROM_BACKUP_LABEL, IncludesExcludes, LiveNamespace, ResourceFilter, initially_tracked,
};
use super::logbook::{Logbook, Subject};
use super::selectors::labels_of;
use granary_api::velero::BackupSpec;
use granary_velero::manifest::KeySet;
use granary_velero::resource::GroupResource;

/// The cluster as one backup sees it, with its filters resolved.
pub(super) struct Setup {
    client: kube::Client,
    catalog: Catalog,
    crds: HashSet<String>,
    namespaces: IncludesExcludes,
    resources: ResourceFilter,
    live_namespaces: Vec<String>,
    namespace_objects: Vec<serde_json::Value>,
    tracked: BTreeSet<String>,
}

/// Reads discovery, the Namespace objects and the CRD names; logs what discovery could
/// not read and the included namespaces that do not exist, as Velero does.
pub(super) async fn setup(
    client: &kube::Client,
    spec: &BackupSpec,
    log: &Logbook,
) -> Result<Setup, kube::Error> {
    let (catalog, undiscovered) = cluster::discover(client).await?;
    for warning in &undiscovered {
        log.warn(Subject::Backup, warning);
    }
    let namespace_objects = match catalog.get(&GroupResource::new("", "namespaces")) {
        Some(res) => cluster::list_all(client, res).await?,
        None => Vec::new(),
    };
    let crds = match catalog.get(&GroupResource::new(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    )) {
        Some(res) => cluster::list_all(client, res)
            .await?
            .iter()
            .filter_map(|c| {
                c.pointer("/metadata/name")
                    .and_then(|n| n.as_str())
                    .map(str::to_owned)
            })
            .collect(),
        None => HashSet::new(),
    };

    // Namespaces labelled velero.io/exclude-from-backup=true are excluded (Velero adds
    // them to the excludes when it prepares the request). As in Velero, a non-empty
    // exclude list means the backup no longer covers "every namespace", so with
    // includeClusterResources unset it no longer collects cluster-scoped resources.
    let live: Vec<LiveNamespace> = namespace_objects
        .iter()
        .map(|o| LiveNamespace {
            name: o
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .unwrap_or("")
                .to_owned(),
            labels: labels_of(o),
            active: o.pointer("/status/phase").and_then(|p| p.as_str()) == Some("Active"),
        })
        .collect();
    let mut excludes = spec.excluded_namespaces.clone().unwrap_or_default();
    excludes.extend(
        live.iter()
            .filter(|n| n.labels.get(EXCLUDE_FROM_BACKUP_LABEL).map(String::as_str) == Some("true"))
            .map(|n| n.name.clone()),
    );
    let includes = spec.included_namespaces.clone().unwrap_or_default();
    let namespaces = IncludesExcludes::new(includes.clone(), excludes);
    let resources = ResourceFilter::new(spec, &catalog, &namespaces);
    // Velero checks the included namespaces exist when it collects Namespace objects.
    let check_included = resources.should_include("namespaces", false);
    for ns in includes
        .iter()
        .filter(|n| check_included && !n.contains('*'))
    {
        if !live.iter().any(|l| &l.name == ns) {
            log.error(
                Subject::Backup,
                &format!(
                    "fail to get the namespace {ns} specified in backup.Spec.IncludedNamespaces"
                ),
            );
        }
    }
    let or_selectors = spec.or_label_selectors.clone().unwrap_or_default();
    let tracked = initially_tracked(
        &live,
        &namespaces,
        spec.label_selector.as_ref(),
        &or_selectors,
    )
    .into_iter()
    .collect();
    Ok(Setup {
        client: client.clone(),
        catalog,
        crds,
        namespaces,
        resources,
        live_namespaces: live.into_iter().map(|n| n.name).collect(),
        namespace_objects,
        tracked,
    })
}

impl Setup {
    /// The collection that sends every item of the backup, in order, to `jobs`.
    pub(super) fn collection<'a>(
        self,
        spec: &'a BackupSpec,
        log: &'a Logbook,
        jobs: mpsc::Sender<Vec<WriteJob>>,
        total: &'a AtomicU64,
        page_size: u32,
        workers: usize,
    ) -> Collection<'a> {
        Collection {
            spec,
            ctx: ActionContext {
                client: self.client,
                catalog: self.catalog,
                crds: self.crds,
            },
            actions: actions::builtin(),
            namespaces: self.namespaces,
            resources: self.resources,
            live_namespaces: self.live_namespaces,
            namespace_objects: self.namespace_objects,
            tracked: Mutex::new(self.tracked),
            seen: Mutex::new(KeySet::new()),
            log,
            jobs,
            batch: Mutex::new(Vec::with_capacity(super::collect::WRITE_BATCH)),
            total,
            stopped: AtomicBool::new(false),
            page_size,
            workers: workers.max(1),
        }
    }
}
