//! Running one restore against a cluster: the backup's tarball read with the archive
//! reader's limits and verified as `granary archive verify` does, in the same pass (a
//! hostile archive, or one with format problems such as an item whose object is not
//! what its path says, fails the restore and nothing is written anywhere; the refused
//! items are named in its results), CustomResourceDefinitions first and waited on until
//! Established, then discovery read again and the rest in [`super::plan`]'s order
//! (items whose kind is not their resource's refused, each an error): namespaces, then each
//! item prepared ([`super::transform`]), passed through the restore item actions
//! (additional items restored first, waited on when asked), and created; an existing
//! object is kept or updated by `existingResourcePolicy`. The restore's log, results and
//! resource list are returned for the controller to upload.
//!
//! A dry run does every read and decision and no write: each item is reported as what
//! it would become (`create`, `update`, `skip`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::future::LocalBoxFuture;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::actions::{
    ResourceIdentifier, RestoreActionContext, RestoreActionInput, RestoreItemAction,
};
use super::order::Priorities;
use super::plan::{BackupItem, Pass, Plan, Refused, Selected, kind_contradiction, plan};
use super::transform::{self, OwnerUids};
use crate::backup::catalog::{Catalog, DiscoveredResource};
use crate::backup::cluster;
use crate::backup::logbook::{Logbook, Subject};
use granary_api::velero::{Backup, PolicyType, Restore, RestoreProgress};
use granary_providers::ObjectStore;
use granary_velero::archive::{ArchiveLimits, Scope, VersionDir};
use granary_velero::files::{Results, encode_logs};
use granary_velero::inspect::{check_item_path, verify_reader_with};
use granary_velero::layout::StorageLayout;
use granary_velero::resource::{GroupResource, split_api_version};

/// How often readiness (CRDs, additional items, terminating namespaces) is polled.
const POLL: Duration = Duration::from_secs(1);

/// What the runner needs.
pub struct RestoreRequest<'a> {
    pub client: kube::Client,
    pub restore: &'a Restore,
    pub backup: &'a Backup,
    pub store: &'a dyn ObjectStore,
    pub layout: &'a StorageLayout,
    pub actions: &'a [Box<dyn RestoreItemAction>],
    pub priorities: &'a Priorities,
    /// `--resource-timeout`: the longest wait for a CRD, a terminating namespace or
    /// additional items (when the action sets no timeout of its own).
    pub resource_timeout: Duration,
    pub limits: &'a ArchiveLimits,
    pub now: DateTime<Utc>,
    pub progress: &'a dyn Fn(RestoreProgress),
    pub dry_run: bool,
    /// Set when the restore must stop between two items (its controller was stopped,
    /// e.g. on a lost leadership): it then ends Failed.
    pub stop: Option<&'a std::sync::atomic::AtomicBool>,
    /// The verified integrity record of the backup, when it has one: the tarball read
    /// must be the one it records (checked before anything is read from it), so a
    /// tarball swapped after the check is refused too. `None`: an unsigned backup an
    /// administrator allowed, or a dry run.
    pub integrity: Option<&'a granary_velero::integrity::IntegrityRecord>,
}

/// How a restore ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreResultPhase {
    Completed,
    PartiallyFailed,
    Failed,
}

/// What happened to one item (Velero's restored-resource-list actions, plus what a dry
/// run would do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemAction {
    Created,
    Updated,
    Failed,
    Skipped,
}

impl ItemAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemAction::Created => "created",
            ItemAction::Updated => "updated",
            ItemAction::Failed => "failed",
            ItemAction::Skipped => "skipped",
        }
    }
}

/// One item the restore handled, in the order it was handled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handled {
    /// `apiVersion/Kind` (`apps/v1/Deployment`, `v1/ConfigMap`).
    pub resource_key: String,
    pub namespace: String,
    pub name: String,
    pub action: ItemAction,
}

impl Handled {
    /// `ns/name(action)` or `name(action)`, as Velero's resource list writes it.
    pub fn entry(&self) -> String {
        if self.namespace.is_empty() {
            format!("{}({})", self.name, self.action.as_str())
        } else {
            format!("{}/{}({})", self.namespace, self.name, self.action.as_str())
        }
    }
}

/// The outcome of a run.
pub struct RestoreOutcome {
    pub phase: RestoreResultPhase,
    pub failure_reason: Option<String>,
    pub warnings: u32,
    pub errors: u32,
    pub total_items: u64,
    pub items_restored: u64,
    pub completion_timestamp: DateTime<Utc>,
    pub handled: Vec<Handled>,
    pub log_lines: Vec<String>,
    pub results: Results,
}

impl RestoreOutcome {
    /// Velero's `restore-<name>-resource-list.json.gz` content: `apiVersion/Kind` →
    /// `ns/name(action)`.
    pub fn resource_list(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for h in &self.handled {
            out.entry(h.resource_key.clone())
                .or_default()
                .push(h.entry());
        }
        out
    }
}

/// What a restore reads from a backup's tarball.
#[derive(Debug, Default)]
pub struct BackupContents {
    /// The items (their unversioned copies, which Velero's restore reads) that are what
    /// their path says.
    pub items: Vec<BackupItem>,
    /// Item files whose object contradicts their path: never restored.
    pub refused: Vec<RefusedItem>,
    /// What `granary archive verify` reports as the archive's format problems (the
    /// refused items among them); any of them fails the restore before it writes.
    pub problems: Vec<String>,
}

/// An item file refused because its object is not what its path says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedItem {
    /// Resource, namespace (`""` under `cluster/`) and name as the path gives them: the
    /// backup's own, before any namespace mapping.
    pub group_resource: GroupResource,
    pub namespace: String,
    pub name: String,
    /// The entry path and what contradicts it.
    pub reason: String,
}

/// Most format problems a failure reason quotes; the results hold the refused items.
const PROBLEMS_QUOTED: usize = 3;

impl BackupContents {
    /// The restore's failure reason when the archive has format problems.
    pub fn failure(&self) -> Option<String> {
        if self.problems.is_empty() {
            return None;
        }
        let quoted = self.problems[..self.problems.len().min(PROBLEMS_QUOTED)].join("; ");
        let more = match self.problems.len().saturating_sub(PROBLEMS_QUOTED) {
            0 => String::new(),
            n => format!(" (and {n} more)"),
        };
        Some(format!(
            "the backup's tarball is not a valid backup archive, nothing was restored: {quoted}{more}"
        ))
    }
}

/// Reads the items of a tarball, refusing what the archive reader refuses, and verifies
/// the archive in the same pass as `granary archive verify` does: an item file whose
/// object contradicts its path is refused (its path's namespace is the backup's, the
/// namespace mapping comes later), and every format problem is reported.
pub fn read_items(tarball: &[u8], limits: &ArchiveLimits) -> Result<BackupContents, String> {
    let mut out = BackupContents::default();
    let report = verify_reader_with(tarball, None, limits, |item| {
        if item.path.version_dir != VersionDir::Unversioned {
            return Ok(());
        }
        let namespace = match &item.path.scope {
            Scope::Cluster => String::new(),
            Scope::Namespaced(ns) => ns.clone(),
        };
        match check_item_path(item.path, item.object) {
            Ok(_) => out.items.push(BackupItem {
                group_resource: item.path.group_resource.clone(),
                namespace,
                name: item.path.name.clone(),
                object: item.object.clone(),
            }),
            Err(e) => out.refused.push(RefusedItem {
                group_resource: item.path.group_resource.clone(),
                namespace,
                name: item.path.name.clone(),
                reason: format!("{}: {e}", item.entry_path),
            }),
        }
        Ok(())
    })
    .map_err(|e| format!("the backup's tarball is refused: {e}"))?;
    out.problems = report.problems;
    Ok(out)
}

/// Runs the restore.
pub async fn run(req: RestoreRequest<'_>) -> RestoreOutcome {
    let name = format!(
        "{}/{}",
        req.restore
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default(),
        req.restore.metadata.name.as_deref().unwrap_or_default()
    );
    let log = Logbook::named("restore", name, req.now);
    let (req_client, req_restore) = (req.client.clone(), req.restore.clone());
    let mut run = Run {
        log,
        req,
        items: Vec::new(),
        by_key: HashMap::new(),
        planned: HashSet::new(),
        uid_map: HashMap::new(),
        done: HashSet::new(),
        handled: Vec::new(),
        total: 0,
        restored: 0,
        catalog: Catalog::default(),
        action_ctx: std::sync::Arc::new(RestoreActionContext {
            client: req_client,
            catalog: Catalog::default(),
            restore: req_restore,
        }),
        wave: Vec::new(),
        batching: false,
    };
    let failure = run.run_all().await.err();
    if let Some(f) = &failure {
        run.log.error(Subject::Backup, f);
    }
    let (errors, warnings) = run.log.counts();
    let (log_lines, results) = run.log.take();
    let phase = match (&failure, errors) {
        (Some(_), _) => RestoreResultPhase::Failed,
        (None, 0) => RestoreResultPhase::Completed,
        (None, _) => RestoreResultPhase::PartiallyFailed,
    };
    RestoreOutcome {
        phase,
        failure_reason: failure,
        warnings,
        errors,
        total_items: run.total,
        items_restored: run.restored,
        completion_timestamp: Utc::now(),
        handled: run.handled,
        log_lines,
        results,
    }
}

/// The gzip'd files of a finished restore: (logs, results, resource list).
pub fn encode_files(outcome: &RestoreOutcome) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let logs = encode_logs(outcome.log_lines.iter());
    let results = outcome.results.to_gz_bytes();
    let list = granary_velero::files::encode_json_gz(&outcome.resource_list());
    (logs, results, list)
}

struct Run<'a> {
    req: RestoreRequest<'a>,
    log: Logbook,
    items: Vec<BackupItem>,
    /// (resource.group, namespace, name) → index.
    by_key: HashMap<(String, String, String), usize>,
    /// Items the current pass's plan counts in `total`.
    planned: HashSet<usize>,
    /// Backed-up UID → the UID in the cluster (restored or found).
    uid_map: HashMap<String, Option<String>>,
    /// Items handled (or being handled: additional items never loop).
    done: HashSet<usize>,
    handled: Vec<Handled>,
    total: u64,
    restored: u64,
    catalog: Catalog,
    /// What actions see; rebuilt when discovery is read again.
    action_ctx: std::sync::Arc<RestoreActionContext>,
    /// Items prepared and waiting to be created together (see [`Run::flush`]); only
    /// used while `batching`.
    wave: Vec<Prepared>,
    batching: bool,
}

/// An item ready to be created.
struct Prepared {
    selected: Selected,
    item: BackupItem,
    obj: Value,
    resource_key: String,
}

/// How many independent items are created at once.
const WAVE: usize = 16;

fn api_resource(r: &DiscoveredResource) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&r.group, &r.version, &r.kind),
        &r.resource,
    )
}

fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn kube_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

impl<'a> Run<'a> {
    fn api(&self, r: &DiscoveredResource, ns: &str) -> Api<DynamicObject> {
        let ar = api_resource(r);
        if r.namespaced {
            Api::namespaced_with(self.req.client.clone(), ns, &ar)
        } else {
            Api::all_with(self.req.client.clone(), &ar)
        }
    }

    fn report(&self) {
        (self.req.progress)(RestoreProgress {
            total_items: Some(self.total as i64),
            items_restored: Some(self.restored as i64),
        });
    }

    async fn run_all(&mut self) -> Result<(), String> {
        let backup_name = self.req.backup.metadata.name.clone().unwrap_or_default();
        self.log.info(
            Subject::Backup,
            &format!("Starting restore of backup {backup_name}"),
        );
        if self.req.restore.spec.restore_pvs == Some(true) {
            self.log.warn(
                Subject::Backup,
                "restorePVs: Granary backups hold no volume data; only the objects are restored",
            );
        }
        let keys = self
            .req
            .layout
            .backup(&self.req.backup.stored_name())
            .map_err(|e| format!("the backup's name cannot be stored: {e}"))?;
        let bucket = self.req.layout.bucket().to_owned();
        let tarball = granary_providers::get_bytes(self.req.store, &bucket, &keys.contents())
            .await
            .map_err(|e| format!("error downloading the backup's tarball: {e}"))?;
        if let Some(record) = self.req.integrity {
            let name = crate::integrity::name_in(keys.dir(), &keys.contents()).to_owned();
            record
                .check_object(
                    &name,
                    &granary_velero::integrity::ObjectDigest::of(&tarball),
                )
                .map_err(|v| {
                    format!("the backup failed its integrity check, nothing was restored: {v}")
                })?;
        }
        let limits = self.req.limits.clone();
        let contents = tokio::task::spawn_blocking(move || read_items(&tarball, &limits))
            .await
            .map_err(|e| format!("reading the backup's tarball stopped: {e}"))??;
        for r in &contents.refused {
            self.log.error(
                Subject::Item(&r.group_resource.to_string(), &r.namespace, &r.name),
                &format!("not restored: the object contradicts its path {}", r.reason),
            );
        }
        if let Some(failure) = contents.failure() {
            return Err(failure);
        }
        self.items = contents.items;
        if self.items.is_empty() {
            self.log.warn(Subject::Backup, "zero items to be restored");
        }
        for (i, it) in self.items.iter().enumerate() {
            self.by_key.insert(
                (
                    it.group_resource.to_string(),
                    it.namespace.clone(),
                    it.name.clone(),
                ),
                i,
            );
        }
        let catalog = self.discover().await?;
        self.set_catalog(catalog);

        // Pass 1: CustomResourceDefinitions, waited on until Established.
        let crds = plan(
            &self.items,
            &self.req.restore.spec,
            &self.catalog,
            self.req.priorities,
            Pass::Crds,
        );
        self.total = (crds.items.len() + crds.refused.len()) as u64;
        self.planned = crds.items.iter().map(|s| s.index).collect();
        self.report();
        for r in &crds.refused {
            self.refuse(r);
        }
        let mut restored_crds = Vec::new();
        for s in crds.items.clone() {
            if let Some(name) = self.restore_selected(&s).await {
                restored_crds.push(name);
            }
        }
        if !restored_crds.is_empty() {
            if self.req.dry_run {
                // Nothing was created: serve the backup's CRDs in the plan only.
                let mut all = self.catalog.all().to_vec();
                for s in &crds.items {
                    all.extend(super::plan::resources_of_crd(&self.items[s.index].object));
                }
                self.set_catalog(Catalog::new(all));
            } else {
                self.wait_established(&restored_crds).await;
                let catalog = self.discover().await?;
                self.set_catalog(catalog);
            }
        }

        // Pass 2: namespaces, then everything else.
        let rest = plan(
            &self.items,
            &self.req.restore.spec,
            &self.catalog,
            self.req.priorities,
            Pass::Rest,
        );
        for w in &rest.warnings {
            self.log.warn(Subject::Backup, w);
        }
        self.total += (rest.namespaces.len() + rest.items.len() + rest.refused.len()) as u64;
        self.planned = rest.items.iter().map(|s| s.index).collect();
        self.report();
        for r in &rest.refused {
            self.refuse(r);
        }
        self.ensure_namespaces(&rest).await;
        // Independent items are created WAVE at a time (a dry run writes nothing and
        // reads one at a time).
        self.batching = !self.req.dry_run;
        for s in rest.items.clone() {
            if self.done.contains(&s.index) {
                continue;
            }
            self.restore_selected(&s).await;
        }
        self.flush().await;
        self.batching = false;
        if self.stopped() {
            return Err("the restore was stopped before its end (its controller stopped)".into());
        }
        self.log.info(Subject::Backup, "restore completed");
        Ok(())
    }

    fn set_catalog(&mut self, catalog: Catalog) {
        self.catalog = catalog.clone();
        self.action_ctx = std::sync::Arc::new(RestoreActionContext {
            client: self.req.client.clone(),
            catalog,
            restore: self.req.restore.clone(),
        });
    }

    /// Creates the items of the wave together, then settles each in order.
    async fn flush(&mut self) {
        let wave = std::mem::take(&mut self.wave);
        if wave.is_empty() {
            return;
        }
        let posts = wave.iter().map(|p| {
            let api = self.api(&p.selected.resource, &p.selected.target_namespace);
            let obj = p.obj.clone();
            async move { post(&api, obj).await }
        });
        let results = futures::future::join_all(posts).await;
        for (p, result) in wave.into_iter().zip(results) {
            let action = self.settle(&p.selected, &p.item, p.obj, result).await;
            self.record(
                &p.resource_key,
                &p.selected.target_namespace,
                &p.item.name,
                action,
            );
        }
    }

    async fn discover(&self) -> Result<Catalog, String> {
        let (catalog, failed) = cluster::discover(&self.req.client)
            .await
            .map_err(|e| format!("error reading discovery: {e}"))?;
        for f in failed {
            self.log.warn(Subject::Backup, &f);
        }
        Ok(catalog)
    }

    /// Waits until each CRD named is Established (warning on timeout).
    async fn wait_established(&self, names: &[String]) {
        let Some(res) = self
            .catalog
            .get(&GroupResource::new(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
            ))
            .cloned()
        else {
            return;
        };
        let api = self.api(&res, "");
        let deadline = Instant::now() + self.req.resource_timeout;
        for name in names {
            loop {
                let established = match api.get_opt(name).await {
                    Ok(Some(crd)) => crd_established(&crd.data),
                    _ => false,
                };
                if established {
                    break;
                }
                if Instant::now() >= deadline {
                    self.log.warn(
                        Subject::Item(&res.name(), "", name),
                        "the CustomResourceDefinition is not Established within the resource timeout; its custom resources may fail",
                    );
                    break;
                }
                tokio::time::sleep(POLL).await;
            }
        }
    }

    /// Makes sure each planned namespace exists (waiting out one that is terminating),
    /// created from the backup's Namespace when there is one.
    async fn ensure_namespaces(&mut self, p: &Plan) {
        let Some(res) = self
            .catalog
            .get(&GroupResource::new("", "namespaces"))
            .cloned()
        else {
            return;
        };
        let api = self.api(&res, "");
        let backup = self.req.backup.metadata.name.clone().unwrap_or_default();
        let restore = self.req.restore.metadata.name.clone().unwrap_or_default();
        for ns in &p.namespaces {
            let subject_name = ns.target.clone();
            let mut action = ItemAction::Skipped;
            let deadline = Instant::now() + self.req.resource_timeout;
            loop {
                match api.get_opt(&ns.target).await {
                    Ok(Some(live)) if live.metadata.deletion_timestamp.is_some() => {
                        if self.req.dry_run || Instant::now() >= deadline {
                            self.log.error(
                                Subject::Item("namespaces", "", &subject_name),
                                "the namespace is terminating",
                            );
                            action = ItemAction::Failed;
                            break;
                        }
                        tokio::time::sleep(POLL).await;
                    }
                    Ok(Some(_)) => break,
                    Ok(None) => {
                        let source = ns
                            .from_backup
                            .map(|i| self.items[i].object.clone())
                            .unwrap_or_else(|| json!({"apiVersion": "v1", "kind": "Namespace"}));
                        let (mut obj, _) = transform::prepare(
                            &source,
                            "",
                            &backup,
                            &restore,
                            false,
                            &OwnerUids::new(),
                        );
                        obj["metadata"]["name"] = json!(ns.target);
                        obj["apiVersion"] = json!("v1");
                        obj["kind"] = json!("Namespace");
                        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                            spec.remove("finalizers");
                        }
                        action = ItemAction::Created;
                        if !self.req.dry_run {
                            match serde_json::from_value::<DynamicObject>(obj) {
                                Ok(o) => {
                                    if let Err(e) = api.create(&PostParams::default(), &o).await
                                        && !is_already_exists(&e)
                                    {
                                        self.log.error(
                                            Subject::Item("namespaces", "", &subject_name),
                                            &format!(
                                                "error creating the namespace: {}",
                                                kube_message(&e)
                                            ),
                                        );
                                        action = ItemAction::Failed;
                                    }
                                }
                                Err(e) => {
                                    self.log.error(
                                        Subject::Item("namespaces", "", &subject_name),
                                        &format!("the backed-up namespace cannot be decoded: {e}"),
                                    );
                                    action = ItemAction::Failed;
                                }
                            }
                        }
                        break;
                    }
                    Err(e) => {
                        self.log.error(
                            Subject::Item("namespaces", "", &subject_name),
                            &format!("error reading the namespace: {}", kube_message(&e)),
                        );
                        action = ItemAction::Failed;
                        break;
                    }
                }
            }
            if let Some(i) = ns.from_backup {
                self.done.insert(i);
            }
            self.record("v1/Namespace", "", &subject_name, action);
        }
    }

    /// An item the plan refuses: an error naming it, never created.
    fn refuse(&mut self, r: &Refused) {
        let s = &r.selected;
        self.done.insert(s.index);
        let item = &self.items[s.index];
        let (gr_name, name) = (item.group_resource.to_string(), item.name.clone());
        self.log.error(
            Subject::Item(&gr_name, &s.target_namespace, &name),
            &r.reason,
        );
        let resource_key = format!("{}/{}", s.resource.api_version(), s.resource.kind);
        self.record(
            &resource_key,
            &s.target_namespace,
            &name,
            ItemAction::Failed,
        );
    }

    fn record(&mut self, resource_key: &str, namespace: &str, name: &str, action: ItemAction) {
        if action != ItemAction::Failed {
            self.restored += 1;
        }
        self.handled.push(Handled {
            resource_key: resource_key.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            action,
        });
        self.report();
    }

    /// The new UIDs of the owners of `obj` (restored ones, else live ones found by
    /// name in the target namespace).
    async fn owner_uids(&mut self, obj: &Value, target_ns: &str) -> OwnerUids {
        let mut out = OwnerUids::new();
        let refs = obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for r in refs {
            let uid = r
                .get("uid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            if let Some(known) = self.uid_map.get(&uid) {
                out.insert(uid, known.clone());
                continue;
            }
            let api_version = r.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
            let name = r.get("name").and_then(Value::as_str).unwrap_or("");
            let group = split_api_version(api_version).map(|(g, _)| g).unwrap_or("");
            let live = match self.catalog.by_kind(group, kind).cloned() {
                Some(res) => match self.api(&res, target_ns).get_opt(name).await {
                    Ok(Some(o)) => o.metadata.uid,
                    _ => None,
                },
                None => None,
            };
            out.insert(uid, live);
        }
        out
    }

    /// Restores one planned item (and, first, the additional items its actions name).
    /// Returns the item's name when it exists in the cluster afterwards.
    fn stopped(&self) -> bool {
        self.req
            .stop
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn restore_selected<'s>(&'s mut self, s: &'s Selected) -> LocalBoxFuture<'s, Option<String>> {
        Box::pin(async move {
            if self.stopped() || !self.done.insert(s.index) {
                return None;
            }
            let item = self.items[s.index].clone();
            // Its owners must exist (with their new UIDs) before it is prepared.
            let owners_pending = item
                .owner_uids()
                .iter()
                .any(|o| self.wave.iter().any(|p| p.item.uid() == o));
            if owners_pending {
                self.flush().await;
            }
            let gr_name = item.group_resource.to_string();
            let ns = s.target_namespace.clone();
            let backup = self.req.backup.metadata.name.clone().unwrap_or_default();
            let restore = self.req.restore.metadata.name.clone().unwrap_or_default();
            let owners = self.owner_uids(&item.object, &ns).await;
            let (mut obj, warnings) = transform::prepare(
                &item.object,
                &ns,
                &backup,
                &restore,
                s.restore_status,
                &owners,
            );
            for w in warnings {
                self.log.warn(Subject::Item(&gr_name, &ns, &item.name), &w);
            }
            obj["apiVersion"] = json!(s.resource.api_version());
            obj["kind"] = json!(s.resource.kind);
            let resource_key = format!("{}/{}", s.resource.api_version(), s.resource.kind);

            // Restore item actions.
            let ctx = self.action_ctx.clone();
            for action in self.req.actions {
                if !action.applies_to(&item.group_resource) {
                    continue;
                }
                let out = match action
                    .execute(
                        &ctx,
                        RestoreActionInput {
                            group_resource: &item.group_resource,
                            item: &obj,
                            item_from_backup: &item.object,
                        },
                    )
                    .await
                {
                    Ok(o) => o,
                    Err(e) => {
                        self.log.error(
                            Subject::Item(&gr_name, &ns, &item.name),
                            &format!("restore item action {} failed: {e}", action.name()),
                        );
                        self.record(&resource_key, &ns, &item.name, ItemAction::Failed);
                        return None;
                    }
                };
                if out.skip {
                    self.log.info(
                        Subject::Item(&gr_name, &ns, &item.name),
                        &format!("skipped by restore item action {}", action.name()),
                    );
                    self.record(&resource_key, &ns, &item.name, ItemAction::Skipped);
                    return None;
                }
                if let Some(u) = out.updated {
                    obj = u;
                }
                if !out.additional_items.is_empty() {
                    self.restore_additional(&out.additional_items).await;
                    if out.wait_for_additional_items && !self.req.dry_run {
                        let mapped: Vec<ResourceIdentifier> = out
                            .additional_items
                            .iter()
                            .map(|a| ResourceIdentifier {
                                group_resource: a.group_resource.clone(),
                                namespace: ctx.target_namespace(&a.namespace).to_owned(),
                                name: a.name.clone(),
                            })
                            .collect();
                        let timeout = out
                            .additional_items_ready_timeout
                            .filter(|t| !t.is_zero())
                            .unwrap_or(self.req.resource_timeout);
                        let deadline = Instant::now() + timeout;
                        loop {
                            match action.are_additional_items_ready(&ctx, &mapped).await {
                                Ok(true) => break,
                                Ok(false) => {}
                                Err(e) => self.log.warn(
                                    Subject::Item(&gr_name, &ns, &item.name),
                                    &format!(
                                        "restore item action {}: checking additional items: {e}",
                                        action.name()
                                    ),
                                ),
                            }
                            if Instant::now() >= deadline {
                                self.log.warn(
                                    Subject::Item(&gr_name, &ns, &item.name),
                                    &format!(
                                        "additional items of restore item action {} were not ready within {}s; restoring the item anyway",
                                        action.name(),
                                        timeout.as_secs()
                                    ),
                                );
                                break;
                            }
                            tokio::time::sleep(POLL).await;
                        }
                    }
                }
            }
            if self.batching {
                self.wave.push(Prepared {
                    selected: s.clone(),
                    item: item.clone(),
                    obj,
                    resource_key,
                });
                if self.wave.len() >= WAVE {
                    self.flush().await;
                }
                return None;
            }
            let action = self.create(s, &item, obj).await;
            self.record(&resource_key, &ns, &item.name, action);
            (action != ItemAction::Failed).then(|| item.name.clone())
        })
    }

    /// Restores the additional items an action named (those in the backup, not yet
    /// handled, of a resource the cluster serves).
    async fn restore_additional(&mut self, ids: &[ResourceIdentifier]) {
        // Additional items exist before the item that named them is created (and
        // before its action checks them).
        self.flush().await;
        self.restore_each_additional(ids).await;
        self.flush().await;
    }

    async fn restore_each_additional(&mut self, ids: &[ResourceIdentifier]) {
        for id in ids {
            let key = (
                id.group_resource.to_string(),
                id.namespace.clone(),
                id.name.clone(),
            );
            let Some(&index) = self.by_key.get(&key) else {
                continue;
            };
            if self.done.contains(&index) {
                continue;
            }
            let Some(resource) = self.catalog.get(&id.group_resource).cloned() else {
                continue;
            };
            let filters = super::plan::Filters::new(&self.req.restore.spec, &self.catalog);
            if let Some(why) =
                filters.additional_refusal(&key.0, resource.namespaced, &id.namespace)
            {
                self.log.info(
                    Subject::Item(&key.0, &id.namespace, &id.name),
                    &format!("additional item not restored: {why}"),
                );
                continue;
            }
            let target_namespace = if resource.namespaced {
                super::actions::map_namespace(self.req.restore, &id.namespace).to_owned()
            } else {
                String::new()
            };
            let s = Selected {
                index,
                target_namespace,
                resource,
                restore_status: false,
            };
            // Counted once: an additional item the plan holds anyway is in `total`.
            if !self.planned.contains(&index) {
                self.total += 1;
            }
            if let Some(reason) = kind_contradiction(&self.items[index], &s.resource) {
                self.refuse(&Refused {
                    selected: s,
                    reason,
                });
                continue;
            }
            self.restore_selected(&s).await;
        }
    }

    /// Creates the object; an existing one is kept or updated.
    async fn create(&mut self, s: &Selected, item: &BackupItem, obj: Value) -> ItemAction {
        let gr_name = item.group_resource.to_string();
        let ns = &s.target_namespace;
        let subject = Subject::Item(&gr_name, ns, &item.name);
        let api = self.api(&s.resource, ns);
        let old_uid = item.uid().to_owned();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&item.name)
            .to_owned();
        if self.req.dry_run {
            return match api.get_opt(&name).await {
                Ok(None) => ItemAction::Created,
                Ok(Some(live)) => {
                    self.uid_map.insert(old_uid, live.metadata.uid.clone());
                    self.existing(
                        &api,
                        &name,
                        &serde_json::to_value(&live).unwrap_or_default(),
                        &obj,
                        subject,
                    )
                    .await
                }
                Err(e) => {
                    self.log.error(
                        subject,
                        &format!("error reading the live object: {}", kube_message(&e)),
                    );
                    ItemAction::Failed
                }
            };
        }
        let result = post(&api, obj.clone()).await;
        self.settle(s, item, obj, result).await
    }

    /// What a create's answer means: the new UID recorded (status restored on
    /// request), or an existing object kept or updated, or the failure logged.
    async fn settle(
        &mut self,
        s: &Selected,
        item: &BackupItem,
        obj: Value,
        result: Result<DynamicObject, PostError>,
    ) -> ItemAction {
        let gr_name = item.group_resource.to_string();
        let ns = &s.target_namespace;
        let subject = Subject::Item(&gr_name, ns, &item.name);
        let api = self.api(&s.resource, ns);
        let old_uid = item.uid().to_owned();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&item.name)
            .to_owned();
        let status = obj.get("status").cloned();
        let result = match result {
            Ok(created) => Ok(created),
            Err(PostError::Decode(e)) => {
                self.log.error(
                    subject,
                    &format!("the backed-up object cannot be decoded: {e}"),
                );
                return ItemAction::Failed;
            }
            Err(PostError::Kube(e)) => Err(e),
        };
        match result {
            Ok(created) => {
                self.uid_map.insert(old_uid, created.metadata.uid.clone());
                if let (true, Some(status)) = (s.restore_status, status) {
                    let body = json!({"status": status});
                    if let Err(e) = api
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                        .await
                        && !is_not_found(&e)
                    {
                        self.log.warn(
                            subject,
                            &format!("the status was not restored: {}", kube_message(&e)),
                        );
                    }
                }
                self.log.info(subject, "restored");
                ItemAction::Created
            }
            Err(e) if is_already_exists(&e) => match api.get_opt(&name).await {
                Ok(Some(live)) => {
                    self.uid_map.insert(old_uid, live.metadata.uid.clone());
                    let live = serde_json::to_value(&live).unwrap_or_default();
                    self.existing(&api, &name, &live, &obj, subject).await
                }
                Ok(None) => {
                    self.log.error(
                        subject,
                        "the object exists and vanished while being compared",
                    );
                    ItemAction::Failed
                }
                Err(e) => {
                    self.log.error(
                        subject,
                        &format!("error reading the existing object: {}", kube_message(&e)),
                    );
                    ItemAction::Failed
                }
            },
            Err(e) => {
                self.log
                    .error(subject, &format!("error restoring: {}", kube_message(&e)));
                ItemAction::Failed
            }
        }
    }

    /// An object that already exists: `update` patches it; otherwise it is kept, with
    /// a warning when it differs from the backed-up one (Velero's messages).
    async fn existing(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        live: &Value,
        desired: &Value,
        subject: Subject<'_>,
    ) -> ItemAction {
        let kind = desired
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("object");
        if !transform::differs(live, desired) {
            self.log.info(
                subject,
                "already exists in the cluster and is the same as the backed-up version",
            );
            return ItemAction::Skipped;
        }
        let policy = self.req.restore.spec.existing_resource_policy();
        if let Some(Ok(PolicyType::Update)) = policy {
            if self.req.dry_run {
                return ItemAction::Updated;
            }
            let patch = transform::update_patch(desired);
            return match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.log.info(
                        subject,
                        "updated the existing object (existingResourcePolicy: update)",
                    );
                    ItemAction::Updated
                }
                Err(e) => {
                    self.log.warn(
                        subject,
                        &format!(
                            "could not update existing {kind} {name:?}: {}",
                            kube_message(&e)
                        ),
                    );
                    ItemAction::Failed
                }
            };
        }
        self.log.warn(
            subject,
            &format!(
                "could not restore, {kind} {name:?} already exists. Warning: the in-cluster version is different than the backed-up version"
            ),
        );
        ItemAction::Skipped
    }
}

/// Why a create did not happen.
enum PostError {
    /// The object does not decode as a Kubernetes object.
    Decode(String),
    Kube(kube::Error),
}

/// Creates `obj` (the HTTP request only).
async fn post(api: &Api<DynamicObject>, obj: Value) -> Result<DynamicObject, PostError> {
    let dynamic: DynamicObject =
        serde_json::from_value(obj).map_err(|e| PostError::Decode(e.to_string()))?;
    api.create(&PostParams::default(), &dynamic)
        .await
        .map_err(PostError::Kube)
}

/// Whether a CustomResourceDefinition (as JSON data) has `Established=True`.
pub fn crd_established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Established")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_velero::archive::ArchiveWriter;

    #[test]
    fn reads_unversioned_items_only() {
        let mut w = ArchiveWriter::new(Vec::new(), Utc::now()).expect("writer");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n", "uid": "u"}});
        w.add_item(&GroupResource::new("", "configmaps"), "v1", &cm)
            .expect("add");
        let (bytes, _) = w.finish().expect("finish");
        let read = read_items(&bytes, &ArchiveLimits::default()).expect("read");
        assert!(read.problems.is_empty(), "{:?}", read.problems);
        assert!(read.failure().is_none());
        let items = read.items;
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].namespace, "n");
        assert_eq!(items[0].uid(), "u");
    }

    /// A gzip'd tar of `files`, `metadata/version` first.
    fn tarball(files: &[(&str, Value)]) -> Vec<u8> {
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::default(),
        ));
        let mut append = |path: &str, data: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o755);
            b.append_data(&mut h, path, data).expect("append");
        };
        append("metadata/version", b"1.1.0\n");
        for (path, v) in files {
            append(path, &serde_json::to_vec(v).expect("json"));
        }
        b.into_inner().expect("tar").finish().expect("gzip")
    }

    #[test]
    fn items_contradicting_their_path_are_refused_and_fail_the_archive() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "stolen", "namespace": "victim"}});
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ok", "namespace": "team-a"}});
        let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "crb"}});
        let bytes = tarball(&[
            (
                "resources/secrets/namespaces/team-a/stolen.json",
                secret.clone(),
            ),
            (
                "resources/secrets/v1-preferredversion/namespaces/team-a/stolen.json",
                secret,
            ),
            ("resources/configmaps/namespaces/team-a/ok.json", cm.clone()),
            (
                "resources/configmaps/v1-preferredversion/namespaces/team-a/ok.json",
                cm,
            ),
            ("resources/configmaps/namespaces/team-a/crb.json", crb),
        ]);
        let read = read_items(&bytes, &ArchiveLimits::default()).expect("read");
        assert_eq!(
            read.items
                .iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>(),
            vec!["ok"]
        );
        assert_eq!(
            read.refused,
            vec![
                RefusedItem {
                    group_resource: GroupResource::new("", "secrets"),
                    namespace: "team-a".into(),
                    name: "stolen".into(),
                    reason: "resources/secrets/namespaces/team-a/stolen.json: object is \"victim\"/\"stolen\", not what its path says".into(),
                },
                RefusedItem {
                    group_resource: GroupResource::new("", "configmaps"),
                    namespace: "team-a".into(),
                    name: "crb".into(),
                    reason: "resources/configmaps/namespaces/team-a/crb.json: object cannot be described in a manifest: apiVersion \"rbac.authorization.k8s.io/v1\" is not in the group of resource configmaps".into(),
                },
            ]
        );
        let failure = read.failure().expect("the archive is invalid");
        assert!(
            failure.starts_with("the backup's tarball is not a valid backup archive")
                && failure.contains("team-a/stolen.json: object is \"victim\"")
                && failure.contains("team-a/crb.json"),
            "{failure}"
        );
    }

    #[test]
    fn format_problems_fail_the_archive_and_are_quoted_first_few() {
        let cm = |name: &str, v: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "n"}, "data": {"k": v}})
        };
        let mut files = Vec::new();
        let paths: Vec<(String, String)> = (0..5)
            .map(|i| {
                (
                    format!("resources/configmaps/namespaces/n/c{i}.json"),
                    format!("resources/configmaps/v1-preferredversion/namespaces/n/c{i}.json"),
                )
            })
            .collect();
        for (i, (plain, preferred)) in paths.iter().enumerate() {
            files.push((plain.as_str(), cm(&format!("c{i}"), "a")));
            files.push((preferred.as_str(), cm(&format!("c{i}"), "b")));
        }
        let read = read_items(&tarball(&files), &ArchiveLimits::default()).expect("read");
        assert!(read.refused.is_empty());
        assert_eq!(read.items.len(), 5);
        assert_eq!(read.problems.len(), 5);
        let failure = read.failure().expect("invalid");
        assert!(
            failure.contains("c0.json differs from its preferred-version copy")
                && failure.ends_with("(and 2 more)"),
            "{failure}"
        );
    }

    #[test]
    fn hostile_archive_is_refused_with_a_reason() {
        let err = read_items(b"not a tarball", &ArchiveLimits::default()).unwrap_err();
        assert!(err.starts_with("the backup's tarball is refused"), "{err}");
    }

    #[test]
    fn crd_conditions() {
        assert!(crd_established(
            &json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}})
        ));
        assert!(!crd_established(
            &json!({"status": {"conditions": [{"type": "Established", "status": "False"}]}})
        ));
        assert!(!crd_established(&json!({})));
    }

    #[test]
    fn resource_list_entries() {
        let h = Handled {
            resource_key: "v1/ConfigMap".into(),
            namespace: "n".into(),
            name: "c".into(),
            action: ItemAction::Created,
        };
        assert_eq!(h.entry(), "n/c(created)");
    }
}
