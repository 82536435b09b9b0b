//! Running one restore against a cluster: the backup's tarball downloaded into the
//! restore's temporary directory while its integrity digest is computed (checked against
//! the backup's integrity record before the file is read, so a swapped tarball is
//! refused before anything is written, and the bytes read are the bytes checked), then
//! read with the archive reader's limits and verified as `granary archive verify` does,
//! in the same pass, into [`super::contents`]: a compact head per item in memory, its
//! body in a spill file read back when the item is restored (a
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
//!
//! Memory per item, besides its head: a bit each for "planned" and "done", its place
//! in the plan (a [`Selected`]: index, shared target namespace and resource), its entry
//! in the resource list ([`HandledList`]: two small integers and its name), and its log
//! line only until it is compressed into the restore's log (every few thousand lines).
//! The new UID of a created item is kept only when some item names it as an owner. The
//! temporary directory is removed when the run ends, however it ends.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::future::LocalBoxFuture;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::actions::{
    ResourceIdentifier, RestoreActionContext, RestoreActionInput, RestoreItemAction,
};
pub use super::contents::{BackupContents, RefusedItem, read_backup};
use super::order::Priorities;
use super::plan::{Pass, Plan, Refused, Selected, kind_contradiction, plan};
use super::transform::{self, OwnerUids};
use crate::backup::catalog::{Catalog, DiscoveredResource};
use crate::backup::cluster;
use crate::backup::logbook::{Logbook, Subject};
use granary_api::velero::{Backup, PolicyType, Restore, RestoreProgress};
use granary_providers::ObjectStore;
use granary_velero::archive::ArchiveLimits;
use granary_velero::files::Results;
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
    pub handled: HandledList,
    /// The restore's log, gzip'd (`restore-<name>-logs.gz`).
    pub logs_gz: Vec<u8>,
    pub results: Results,
}

/// The items a restore handled, in order, kept compactly (a million of them in a few
/// tens of MiB): each its resource key and namespace as indices into tables of the
/// distinct ones, its name in one text arena, and its action. Iterating yields
/// [`Handled`] values.
#[derive(Clone, Debug, Default)]
pub struct HandledList {
    keys: Vec<String>,
    key_ids: HashMap<String, u32>,
    namespaces: Vec<String>,
    namespace_ids: HashMap<String, u32>,
    names: String,
    entries: Vec<HandledEntry>,
}

#[derive(Clone, Copy, Debug)]
struct HandledEntry {
    name_start: usize,
    name_len: u32,
    key: u32,
    namespace: u32,
    action: ItemAction,
}

fn intern(ids: &mut HashMap<String, u32>, table: &mut Vec<String>, s: &str) -> u32 {
    if let Some(&id) = ids.get(s) {
        return id;
    }
    let id = table.len() as u32;
    ids.insert(s.to_owned(), id);
    table.push(s.to_owned());
    id
}

impl HandledList {
    pub fn push(&mut self, resource_key: &str, namespace: &str, name: &str, action: ItemAction) {
        let key = intern(&mut self.key_ids, &mut self.keys, resource_key);
        let namespace = intern(&mut self.namespace_ids, &mut self.namespaces, namespace);
        let name_start = self.names.len();
        self.names.push_str(name);
        self.entries.push(HandledEntry {
            name_start,
            name_len: name.len() as u32,
            key,
            namespace,
            action,
        });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&self, e: &HandledEntry) -> Handled {
        Handled {
            resource_key: self.keys[e.key as usize].clone(),
            namespace: self.namespaces[e.namespace as usize].clone(),
            name: self.names[e.name_start..e.name_start + e.name_len as usize].to_owned(),
            action: e.action,
        }
    }

    /// The items in the order they were handled.
    pub fn iter(&self) -> impl Iterator<Item = Handled> + '_ {
        self.entries.iter().map(|e| self.entry(e))
    }
}

impl<'a> IntoIterator for &'a HandledList {
    type Item = Handled;
    type IntoIter = Box<dyn Iterator<Item = Handled> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
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
        logs: LogSink::default(),
        req,
        items: BackupContents::default(),
        scratch: None,
        planned: Vec::new(),
        uid_map: HashMap::new(),
        done: Vec::new(),
        handled: HandledList::default(),
        since_drain: 0,
        total: 0,
        restored: 0,
        catalog: Catalog::default(),
        action_ctx: std::sync::Arc::new(RestoreActionContext {
            client: req_client,
            catalog: Catalog::default(),
            restore: req_restore,
        }),
        wave: Default::default(),
        posts: Default::default(),
        batching: false,
    };
    let failure = run.run_all().await.err();
    if let Some(f) = &failure {
        run.log.error(Subject::Backup, f);
    }
    run.drain_log();
    let LogSink { gz, results } = std::mem::take(&mut run.logs);
    let errors = results.errors.count() as u32;
    let warnings = results.warnings.count() as u32;
    let logs_gz = gz
        .finish()
        .expect("finishing a gzip stream into a Vec cannot fail");
    // The scratch directory (tarball and spill file) goes now, not when `run` does.
    run.items = BackupContents::default();
    run.scratch = None;
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
        handled: std::mem::take(&mut run.handled),
        logs_gz,
        results,
    }
}

/// The gzip'd files of a finished restore: (logs, results, resource list).
pub fn encode_files(outcome: &RestoreOutcome) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let logs = outcome.logs_gz.clone();
    let results = outcome.results.to_gz_bytes();
    let list = granary_velero::files::encode_json_gz(&outcome.resource_list());
    (logs, results, list)
}

/// The restore's log as it is written: its lines gzip'd, its warnings and errors.
struct LogSink {
    gz: flate2::write::GzEncoder<Vec<u8>>,
    results: Results,
}

impl Default for LogSink {
    fn default() -> Self {
        LogSink {
            gz: flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()),
            results: Results::default(),
        }
    }
}

/// Log lines kept uncompressed at most (then compressed into the restore's log).
const LOG_LINES_HELD: usize = 4096;

struct Run<'a> {
    req: RestoreRequest<'a>,
    log: Logbook,
    /// What was taken out of `log` so far.
    logs: LogSink,
    /// Items recorded since the log was last drained.
    since_drain: usize,
    items: BackupContents,
    /// The restore's temporary directory (the tarball and the items' bodies), removed
    /// when it is dropped: at the end of the run, or when a panic unwinds it.
    scratch: Option<tempfile::TempDir>,
    /// Items the current pass's plan counts in `total`.
    planned: Vec<bool>,
    /// Backed-up UID → the UID in the cluster (restored or found), for UIDs some item
    /// names as an owner.
    uid_map: HashMap<String, Option<String>>,
    /// Items handled (or being handled: additional items never loop).
    done: Vec<bool>,
    handled: HandledList,
    total: u64,
    restored: u64,
    catalog: Catalog,
    /// What actions see; rebuilt when discovery is read again.
    action_ctx: std::sync::Arc<RestoreActionContext>,
    /// Items being created, oldest first, at most [`WAVE`] (see [`Run::flush`]); only
    /// used while `batching`.
    wave: std::collections::VecDeque<Prepared>,
    /// Their creates, in the same order, each running on a task of its own.
    posts: futures::stream::FuturesOrdered<tokio::task::JoinHandle<Result<Created, PostError>>>,
    batching: bool,
}

/// An item ready to be created.
struct Prepared {
    selected: Selected,
    obj: Value,
    resource_key: String,
}

/// How many independent items are created at once.
pub const WAVE: usize = 16;

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
        let scratch = tempfile::Builder::new()
            .prefix("granary-restore-")
            .tempdir()
            .map_err(|e| format!("creating the restore's temporary directory: {e}"))?;
        let tarball_path = scratch.path().join("backup.tar.gz");
        let spill_path = scratch.path().join("items.json");
        self.scratch = Some(scratch);
        let digest = download(
            self.req.store,
            &bucket,
            &keys.contents(),
            &tarball_path,
            self.req.limits.max_total_bytes,
        )
        .await?;
        if let Some(record) = self.req.integrity {
            let name = crate::integrity::name_in(keys.dir(), &keys.contents()).to_owned();
            record.check_object(&name, &digest).map_err(|v| {
                format!("the backup failed its integrity check, nothing was restored: {v}")
            })?;
        }
        let limits = self.req.limits.clone();
        let spec = self.req.restore.spec.clone();
        let contents = tokio::task::spawn_blocking(move || {
            let file = std::fs::File::open(&tarball_path)
                .map_err(|e| format!("opening the downloaded tarball: {e}"))?;
            let read = read_backup(
                std::io::BufReader::with_capacity(1 << 20, file),
                &limits,
                &spec,
                Some(&spill_path),
            );
            // Its bytes are in the spill file now (or refused).
            let _ = std::fs::remove_file(&tarball_path);
            read
        })
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
        self.items = contents;
        self.done = vec![false; self.items.len()];
        self.planned = vec![false; self.items.len()];
        if self.items.is_empty() {
            self.log.warn(Subject::Backup, "zero items to be restored");
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
        self.set_planned(&crds);
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
                    match self.items.object(s.index) {
                        Ok(crd) => all.extend(super::plan::resources_of_crd(&crd)),
                        Err(e) => self.log.error(
                            Subject::Item(super::plan::CRDS, "", self.items.name(s.index)),
                            &e,
                        ),
                    }
                }
                self.set_catalog(Catalog::new(all));
            } else {
                self.wait_established(&restored_crds).await;
                let catalog = self.discover().await?;
                self.set_catalog(catalog);
            }
        }

        // Pass 2: namespaces, then everything else.
        let mut rest = plan(
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
        self.set_planned(&rest);
        self.report();
        for r in &rest.refused {
            self.refuse(r);
        }
        self.ensure_namespaces(&rest).await;
        // Independent items are created WAVE at a time (a dry run writes nothing and
        // reads one at a time).
        self.batching = !self.req.dry_run;
        for s in std::mem::take(&mut rest.items) {
            if self.done[s.index] {
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

    /// Marks the items of `plan` as the ones `total` counts.
    fn set_planned(&mut self, plan: &Plan) {
        self.planned.iter_mut().for_each(|p| *p = false);
        for s in &plan.items {
            self.planned[s.index] = true;
        }
    }

    /// Moves the log's lines so far into the compressed log, and its warnings and
    /// errors into the results.
    fn drain_log(&mut self) {
        let (lines, results) = self.log.take();
        for line in lines {
            // Writes into a Vec cannot fail.
            let _ = self.logs.gz.write_all(line.as_bytes());
            if !line.ends_with('\n') {
                let _ = self.logs.gz.write_all(b"\n");
            }
        }
        self.logs.results.errors.merge(results.errors);
        self.logs.results.warnings.merge(results.warnings);
        self.since_drain = 0;
    }

    /// Records the new UID of the item at `index` when some item names it as an owner.
    fn note_uid(&mut self, index: usize, new_uid: Option<String>) {
        let old = self.items.uid(index);
        if self.items.is_owner(old) {
            self.uid_map.insert(old.to_string(), new_uid);
        }
    }

    fn set_catalog(&mut self, catalog: Catalog) {
        self.catalog = catalog.clone();
        self.action_ctx = std::sync::Arc::new(RestoreActionContext {
            client: self.req.client.clone(),
            catalog,
            restore: self.req.restore.clone(),
        });
    }

    /// Settles every item being created, in order: the point past which an item may
    /// depend on what came before it (an owner, an additional item).
    async fn flush(&mut self) {
        while !self.wave.is_empty() {
            self.settle_oldest().await;
        }
    }

    /// Starts creating an independent item; with [`WAVE`] creates running, waits for
    /// the oldest and settles it first. A window, not waves of [`WAVE`]: a wave waited
    /// for its slowest create before starting the next.
    async fn start_create(&mut self, p: Prepared) {
        // The body is made here, from the item kept for settling: no copy of the item.
        let request = create_request(&p.selected, &p.obj);
        let client = self.req.client.clone();
        self.posts
            .push_back(tokio::spawn(async move { post(client, request).await }));
        self.wave.push_back(p);
        while self.wave.len() >= WAVE {
            self.settle_oldest().await;
        }
    }

    /// Waits for the oldest create and settles its item.
    async fn settle_oldest(&mut self) {
        let (Some(p), Some(joined)) = (self.wave.pop_front(), self.posts.next().await) else {
            return;
        };
        let result =
            joined.unwrap_or_else(|e| Err(PostError::NotSent(format!("the create stopped: {e}"))));
        let action = self.settle(&p.selected, p.obj, result).await;
        let name = self.items.name(p.selected.index).to_owned();
        self.record(&p.resource_key, &p.selected.target_namespace, &name, action);
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
        // WAVE namespaces at a time (a restore of many small namespaces waited on each
        // one's read and create in turn); logged and recorded in the plan's order.
        let this = &*self;
        let results: Vec<(ItemAction, Option<String>)> = futures::stream::iter(&p.namespaces)
            .map(|ns| this.ensure_namespace(&api, ns))
            .buffered(WAVE)
            .collect()
            .await;
        for (ns, (action, error)) in p.namespaces.iter().zip(results) {
            if let Some(e) = error {
                self.log
                    .error(Subject::Item("namespaces", "", &ns.target), &e);
            }
            if let Some(i) = ns.from_backup {
                self.done[i] = true;
            }
            self.record("v1/Namespace", "", &ns.target, action);
        }
    }

    /// Makes sure the target namespace of `ns` exists (waiting out one that is
    /// terminating, up to the resource timeout): what was done, and the error to log.
    async fn ensure_namespace(
        &self,
        api: &Api<DynamicObject>,
        ns: &super::plan::NamespacePlan,
    ) -> (ItemAction, Option<String>) {
        let backup = self.req.backup.metadata.name.clone().unwrap_or_default();
        let restore = self.req.restore.metadata.name.clone().unwrap_or_default();
        let deadline = Instant::now() + self.req.resource_timeout;
        loop {
            match api.get_opt(&ns.target).await {
                Ok(Some(live)) if live.metadata.deletion_timestamp.is_some() => {
                    if self.req.dry_run || Instant::now() >= deadline {
                        return (
                            ItemAction::Failed,
                            Some("the namespace is terminating".into()),
                        );
                    }
                    tokio::time::sleep(POLL).await;
                }
                Ok(Some(_)) => return (ItemAction::Skipped, None),
                Ok(None) => {
                    let source = match ns.from_backup.map(|i| self.items.object(i)) {
                        None => json!({"apiVersion": "v1", "kind": "Namespace"}),
                        Some(Ok(o)) => o,
                        Some(Err(e)) => return (ItemAction::Failed, Some(e)),
                    };
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
                    if self.req.dry_run {
                        return (ItemAction::Created, None);
                    }
                    return match serde_json::from_value::<DynamicObject>(obj) {
                        Ok(o) => match api.create(&PostParams::default(), &o).await {
                            Err(e) if !is_already_exists(&e) => (
                                ItemAction::Failed,
                                Some(format!(
                                    "error creating the namespace: {}",
                                    kube_message(&e)
                                )),
                            ),
                            _ => (ItemAction::Created, None),
                        },
                        Err(e) => (
                            ItemAction::Failed,
                            Some(format!("the backed-up namespace cannot be decoded: {e}")),
                        ),
                    };
                }
                Err(e) => {
                    return (
                        ItemAction::Failed,
                        Some(format!("error reading the namespace: {}", kube_message(&e))),
                    );
                }
            }
        }
    }

    /// An item the plan refuses: an error naming it, never created.
    fn refuse(&mut self, r: &Refused) {
        let s = &r.selected;
        self.done[s.index] = true;
        let (gr_name, name) = (
            self.items.group_resource(s.index).to_string(),
            self.items.name(s.index).to_owned(),
        );
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
        self.handled.push(resource_key, namespace, name, action);
        self.report();
        self.since_drain += 1;
        if self.since_drain >= LOG_LINES_HELD {
            self.drain_log();
        }
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
            if self.stopped() || self.done[s.index] {
                return None;
            }
            self.done[s.index] = true;
            let index = s.index;
            // Its owners must exist (with their new UIDs) before it is prepared.
            let owners_pending = self.items.owners(index).iter().any(|o| {
                self.wave
                    .iter()
                    .any(|p| self.items.uid(p.selected.index) == o)
            });
            if owners_pending {
                self.flush().await;
            }
            let group_resource = self.items.group_resource(index).clone();
            let gr_name = group_resource.to_string();
            let ns = s.target_namespace.clone();
            let item_name = self.items.name(index).to_owned();
            let resource_key = format!("{}/{}", s.resource.api_version(), s.resource.kind);
            let object = match self.items.object(index) {
                Ok(o) => o,
                Err(e) => {
                    self.log.error(Subject::Item(&gr_name, &ns, &item_name), &e);
                    self.record(&resource_key, &ns, &item_name, ItemAction::Failed);
                    return None;
                }
            };
            let backup = self.req.backup.metadata.name.clone().unwrap_or_default();
            let restore = self.req.restore.metadata.name.clone().unwrap_or_default();
            let owners = self.owner_uids(&object, &ns).await;
            let (mut obj, warnings) =
                transform::prepare(&object, &ns, &backup, &restore, s.restore_status, &owners);
            for w in warnings {
                self.log.warn(Subject::Item(&gr_name, &ns, &item_name), &w);
            }
            obj["apiVersion"] = json!(s.resource.api_version());
            obj["kind"] = json!(s.resource.kind);

            // Restore item actions.
            let ctx = self.action_ctx.clone();
            for action in self.req.actions {
                if !action.applies_to(&group_resource) {
                    continue;
                }
                let out = match action
                    .execute(
                        &ctx,
                        RestoreActionInput {
                            group_resource: &group_resource,
                            item: &obj,
                            item_from_backup: &object,
                        },
                    )
                    .await
                {
                    Ok(o) => o,
                    Err(e) => {
                        self.log.error(
                            Subject::Item(&gr_name, &ns, &item_name),
                            &format!("restore item action {} failed: {e}", action.name()),
                        );
                        self.record(&resource_key, &ns, &item_name, ItemAction::Failed);
                        return None;
                    }
                };
                if out.skip {
                    self.log.info(
                        Subject::Item(&gr_name, &ns, &item_name),
                        &format!("skipped by restore item action {}", action.name()),
                    );
                    self.record(&resource_key, &ns, &item_name, ItemAction::Skipped);
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
                                    Subject::Item(&gr_name, &ns, &item_name),
                                    &format!(
                                        "restore item action {}: checking additional items: {e}",
                                        action.name()
                                    ),
                                ),
                            }
                            if Instant::now() >= deadline {
                                self.log.warn(
                                    Subject::Item(&gr_name, &ns, &item_name),
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
                drop(object);
                self.start_create(Prepared {
                    selected: s.clone(),
                    obj,
                    resource_key,
                })
                .await;
                return None;
            }
            let action = self.create(s, obj).await;
            self.record(&resource_key, &ns, &item_name, action);
            (action != ItemAction::Failed).then_some(item_name)
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
            let Some(index) = self.items.find(&id.group_resource, &id.namespace, &id.name) else {
                continue;
            };
            if self.done[index] {
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
            let target_namespace: Arc<str> = if resource.namespaced {
                Arc::from(super::actions::map_namespace(
                    self.req.restore,
                    &id.namespace,
                ))
            } else {
                Arc::from("")
            };
            let s = Selected {
                index,
                target_namespace,
                resource: Arc::new(resource),
                restore_status: false,
            };
            // Counted once: an additional item the plan holds anyway is in `total`.
            if !self.planned[index] {
                self.total += 1;
            }
            if let Some(reason) = kind_contradiction(self.items.kind(index), &s.resource) {
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
    async fn create(&mut self, s: &Selected, obj: Value) -> ItemAction {
        let gr_name = self.items.group_resource(s.index).to_string();
        let item_name = self.items.name(s.index).to_owned();
        let ns = &s.target_namespace;
        let subject = Subject::Item(&gr_name, ns, &item_name);
        let api = self.api(&s.resource, ns);
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&item_name)
            .to_owned();
        if self.req.dry_run {
            return match api.get_opt(&name).await {
                Ok(None) => ItemAction::Created,
                Ok(Some(live)) => {
                    self.note_uid(s.index, live.metadata.uid.clone());
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
        let result = post(self.req.client.clone(), create_request(s, &obj)).await;
        self.settle(s, obj, result).await
    }

    /// What a create's answer means: the new UID recorded (status restored on
    /// request), or an existing object kept or updated, or the failure logged.
    async fn settle(
        &mut self,
        s: &Selected,
        obj: Value,
        result: Result<Created, PostError>,
    ) -> ItemAction {
        let gr_name = self.items.group_resource(s.index).to_string();
        let item_name = self.items.name(s.index).to_owned();
        let ns = &s.target_namespace;
        let subject = Subject::Item(&gr_name, ns, &item_name);
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&item_name)
            .to_owned();
        let status = obj.get("status").cloned();
        let result = match result {
            Ok(created) => Ok(created),
            Err(PostError::NotSent(e)) => {
                self.log
                    .error(subject, &format!("the create was not sent: {e}"));
                return ItemAction::Failed;
            }
            Err(PostError::Kube(e)) => Err(e),
        };
        match result {
            Ok(created) => {
                self.note_uid(s.index, created.metadata.uid);
                if let (true, Some(status)) = (s.restore_status, status) {
                    let body = json!({"status": status});
                    if let Err(e) = self
                        .api(&s.resource, ns)
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
            Err(e) if is_already_exists(&e) => {
                let api = self.api(&s.resource, ns);
                match api.get_opt(&name).await {
                    Ok(Some(live)) => {
                        self.note_uid(s.index, live.metadata.uid.clone());
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
                }
            }
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

/// Downloads object `key` into a new file at `path` as it streams in, computing its
/// integrity digest over exactly the bytes written (the file is read afterwards, never
/// downloaded again). An object larger than `max_bytes` (the archive's limit on its
/// uncompressed size, which no valid tarball's compressed size reaches) is refused.
async fn download(
    store: &dyn ObjectStore,
    bucket: &str,
    key: &str,
    path: &std::path::Path,
    max_bytes: u64,
) -> Result<granary_velero::integrity::ObjectDigest, String> {
    use futures::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let failed = |e: &dyn std::fmt::Display| format!("error downloading the backup's tarball: {e}");
    let mut stream = store.get(bucket, key).await.map_err(|e| failed(&e))?;
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .await
        .map_err(|e| failed(&format!("creating {}: {e}", path.display())))?;
    let mut file = tokio::io::BufWriter::with_capacity(1 << 20, file);
    let mut digester = granary_velero::integrity::Digester::default();
    let mut size = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| failed(&e))?;
        size += chunk.len() as u64;
        if size > max_bytes {
            return Err(format!(
                "the backup's tarball is refused: it is larger than {max_bytes} bytes (the limit on a tarball's uncompressed size)"
            ));
        }
        digester.update(&chunk);
        file.write_all(&chunk)
            .await
            .map_err(|e| failed(&format!("writing {}: {e}", path.display())))?;
    }
    file.flush()
        .await
        .map_err(|e| failed(&format!("writing {}: {e}", path.display())))?;
    Ok(digester.finish())
}

/// Why a create did not happen.
enum PostError {
    /// The create was never sent: its request could not be made (the body is the
    /// item's own JSON, so this is not expected) or its task stopped.
    NotSent(String),
    Kube(kube::Error),
}

/// What a create's answer is read for: the new object's UID. The rest of the answer
/// is skipped, not decoded.
#[derive(serde::Deserialize)]
struct Created {
    #[serde(default)]
    metadata: CreatedMeta,
}

#[derive(serde::Deserialize, Default)]
struct CreatedMeta {
    #[serde(default)]
    uid: Option<String>,
}

/// A create's URL and body: what `Api::create` sends, serialized from the item as it
/// is (kube's typed call needs an owned `DynamicObject`, a copy of the item). Whether
/// its metadata is valid is the API server's to say.
struct CreateRequest {
    url: String,
    body: Vec<u8>,
}

fn create_request(s: &Selected, obj: &Value) -> Result<CreateRequest, PostError> {
    let url = crate::backup::cluster::url(
        &s.resource,
        s.resource.namespaced.then_some(&*s.target_namespace),
    );
    let body = serde_json::to_vec(obj).map_err(|e| PostError::NotSent(e.to_string()))?;
    Ok(CreateRequest { url, body })
}

/// Sends a create (the HTTP request only).
async fn post(
    client: kube::Client,
    request: Result<CreateRequest, PostError>,
) -> Result<Created, PostError> {
    let CreateRequest { url, body } = request?;
    let request = kube::core::Request::new(url)
        .create(&PostParams::default(), body)
        .map_err(|e| PostError::NotSent(e.to_string()))?;
    client.request(request).await.map_err(PostError::Kube)
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

    /// The heads of a tarball's items, bodies spilled into a temporary directory.
    fn read_items(tarball: &[u8], limits: &ArchiveLimits) -> Result<BackupContents, String> {
        let dir = tempfile::tempdir().expect("temp dir");
        read_backup(
            tarball,
            limits,
            &granary_api::velero::RestoreSpec::default(),
            Some(&dir.path().join("spill")),
        )
    }

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
        assert_eq!(read.len(), 1);
        assert_eq!(read.namespace(0), "n");
        assert_eq!(read.uid(0).to_string(), "u");
        assert_eq!(read.object(0).expect("body"), cm);
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
            (0..read.len()).map(|i| read.name(i)).collect::<Vec<_>>(),
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
        assert_eq!(read.len(), 5);
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
