//! Item collection and backing up one item: the listing side of Velero's
//! `itemCollector` (resources in catalog order, namespaces to list, one list per
//! or-selector, `orderedResources` first) and `itemBackupper.backupItem` (item checks,
//! de-duplication, actions, additional items), ending in a job for the tarball writer.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::actions::{ActionContext, BackupItemAction};
use super::catalog::{DiscoveredResource, is_backed_up};
use super::cluster;
use super::filters::{IncludesExcludes, ResourceFilter, check_item, namespaces_to_list};
use super::logbook::{Logbook, Subject};
use super::order::{OrderedItem, ordered_items};
use super::selectors;
use granary_api::velero::BackupSpec;
use granary_velero::manifest::KeySet;
use granary_velero::resource::GroupResource;

/// Items handed to the tarball writer at once: one wake-up of its thread per batch, not
/// per item (at a wake-up per item, the two threads spent their time waking each other).
pub(super) const WRITE_BATCH: usize = 64;

/// One item for the tarball writer.
pub(super) struct WriteJob {
    pub group_resource: GroupResource,
    pub preferred_version: String,
    pub object: Value,
}

/// Everything the collector and the workers share during one backup.
pub(super) struct Collection<'a> {
    pub spec: &'a BackupSpec,
    pub ctx: ActionContext,
    pub actions: Vec<Box<dyn BackupItemAction>>,
    pub namespaces: IncludesExcludes,
    pub resources: ResourceFilter,
    /// Names of the live namespaces (for namespace lists with wildcards).
    pub live_namespaces: Vec<String>,
    /// The Namespace objects, written at the end for the tracked namespaces.
    pub namespace_objects: Vec<Value>,
    pub tracked: Mutex<BTreeSet<String>>,
    /// The items backed up so far (Velero's `backedUpItems`), compact for backups of a
    /// million items.
    pub seen: Mutex<KeySet>,
    pub log: &'a Logbook,
    pub jobs: mpsc::Sender<Vec<WriteJob>>,
    /// Items waiting to be sent to `jobs` as one batch.
    pub batch: Mutex<Vec<WriteJob>>,
    pub total: &'a AtomicU64,
    /// Set when the writer is gone (the upload failed): collection stops.
    pub stopped: AtomicBool,
    pub page_size: u32,
    pub workers: usize,
}

/// An item listed, waiting for a worker.
struct Candidate {
    /// Shared by every item of the resource: cloning it per item cost a dozen
    /// allocations.
    res: Arc<DiscoveredResource>,
    object: Value,
}

fn meta_str<'v>(object: &'v Value, field: &str) -> &'v str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Collection<'_> {
    /// Collects everything: listed items through `workers` workers, then the Namespace
    /// objects of the namespaces the backup touched.
    pub async fn run(&self) {
        let (tx, rx) = mpsc::channel::<Candidate>(self.workers.max(1) * 4);
        let lister = async move {
            self.list_all(&tx).await;
            drop(tx);
        };
        let pool =
            ReceiverStream::new(rx).for_each_concurrent(self.workers.max(1), |c| async move {
                self.back_up(&c.res, c.object, false).await;
            });
        tokio::join!(lister, pool);
        self.namespaces_last().await;
        let rest = std::mem::take(&mut *self.batch.lock().unwrap_or_else(|p| p.into_inner()));
        self.send_batch(rest).await;
    }

    /// Adds an item to the batch for the writer, sending the batch once it is full.
    async fn emit(&self, job: WriteJob) {
        let full = {
            let mut batch = self.batch.lock().unwrap_or_else(|p| p.into_inner());
            batch.push(job);
            (batch.len() >= WRITE_BATCH)
                .then(|| std::mem::replace(&mut *batch, Vec::with_capacity(WRITE_BATCH)))
        };
        if let Some(full) = full {
            self.send_batch(full).await;
        }
    }

    async fn send_batch(&self, batch: Vec<WriteJob>) {
        if !batch.is_empty() && self.jobs.send(batch).await.is_err() {
            // The writer is gone (the upload failed): collection stops.
            self.stopped.store(true, Ordering::SeqCst);
        }
    }

    fn selectors(&self) -> Vec<String> {
        match &self.spec.or_label_selectors {
            Some(or) if !or.is_empty() => or.iter().map(selectors::format).collect(),
            _ => vec![
                self.spec
                    .label_selector
                    .as_ref()
                    .map(selectors::format)
                    .unwrap_or_default(),
            ],
        }
    }

    fn selected(&self, object: &Value) -> bool {
        let labels = selectors::labels_of(object);
        match (&self.spec.or_label_selectors, &self.spec.label_selector) {
            (Some(or), _) if !or.is_empty() => or.iter().any(|s| selectors::matches(s, &labels)),
            (_, Some(s)) => selectors::matches(s, &labels),
            _ => true,
        }
    }

    async fn list_all(&self, tx: &mpsc::Sender<Candidate>) {
        let resources: Vec<Arc<DiscoveredResource>> = self
            .ctx
            .catalog
            .collectable()
            .map(|r| Arc::new(r.clone()))
            .collect();
        for res in resources {
            if self.stopped.load(Ordering::SeqCst) {
                return;
            }
            let name = res.name();
            if name == "namespaces" {
                continue;
            }
            if !self.resources.should_include(&name, res.namespaced) {
                self.log.info(
                    Subject::Resource(&name, ""),
                    "Skipping resource because it's excluded",
                );
                continue;
            }
            self.log
                .info(Subject::Resource(&name, ""), "Getting items for resource");
            let lists: Vec<Option<String>> = if res.namespaced {
                match namespaces_to_list(&self.namespaces, &self.live_namespaces) {
                    None => vec![None],
                    Some(list) => list.into_iter().map(Some).collect(),
                }
            } else {
                vec![None]
            };
            let done = self.ordered_first(&res, &lists, tx).await;
            for ns in &lists {
                for selector in self.selectors() {
                    if !self
                        .list_one(&res, ns.as_deref(), &selector, &done, tx)
                        .await
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Lists one resource in one namespace (or all) with one selector, page by page,
    /// asking for the next page while the items of this one are handed on (the list
    /// and the backup's own work overlap, as they do in a bare client that reads the
    /// next page while it writes). `false` when collection must stop.
    async fn list_one(
        &self,
        res: &Arc<DiscoveredResource>,
        ns: Option<&str>,
        selector: &str,
        done: &HashSet<String>,
        tx: &mpsc::Sender<Candidate>,
    ) -> bool {
        let fetch = |token: Option<String>| {
            cluster::list_page(&self.ctx.client, res, ns, selector, self.page_size, token)
        };
        let mut page = fetch(None).await;
        loop {
            let (items, next) = match page {
                Ok(p) => p,
                Err(e) => {
                    self.log.error(
                        Subject::Resource(&res.name(), ns.unwrap_or("")),
                        &format!("Error listing items: {e}"),
                    );
                    return true;
                }
            };
            let following = async {
                match next {
                    Some(token) => Some(fetch(Some(token)).await),
                    None => None,
                }
            };
            let (following, go_on) = tokio::join!(following, self.hand_on(res, items, done, tx));
            if !go_on {
                return false;
            }
            match following {
                Some(p) => page = p,
                None => return true,
            }
        }
    }

    /// Hands the listed items on to the workers; `false` when collection must stop.
    async fn hand_on(
        &self,
        res: &Arc<DiscoveredResource>,
        items: Vec<Value>,
        done: &HashSet<String>,
        tx: &mpsc::Sender<Candidate>,
    ) -> bool {
        for object in items {
            let item_ns = meta_str(&object, "namespace");
            if !done.is_empty() {
                let name = meta_str(&object, "name");
                let id = if item_ns.is_empty() {
                    name.to_owned()
                } else {
                    format!("{item_ns}/{name}")
                };
                if done.contains(&id) {
                    continue;
                }
            }
            if res.namespaced && !self.namespaces.should_include(item_ns) {
                continue;
            }
            self.track(item_ns);
            self.total.fetch_add(1, Ordering::Relaxed);
            let candidate = Candidate {
                res: Arc::clone(res),
                object,
            };
            if tx.send(candidate).await.is_err() || self.stopped.load(Ordering::SeqCst) {
                return false;
            }
        }
        true
    }

    /// Backs up the items `orderedResources` names for this resource first, in that
    /// order; returns their `ns/name` (or `name`) so the lists skip them. A name that is
    /// not found or not selected is a warning, as in Velero ("Cannot find resource").
    async fn ordered_first(
        &self,
        res: &Arc<DiscoveredResource>,
        lists: &[Option<String>],
        tx: &mpsc::Sender<Candidate>,
    ) -> HashSet<String> {
        let mut done = HashSet::new();
        let order = ordered_items(
            self.spec.ordered_resources.as_ref(),
            &res.resource,
            res.namespaced,
        );
        for OrderedItem {
            namespace,
            name,
            id,
        } in order
        {
            let ns = namespace.as_str();
            let listed_ns = lists.iter().any(|l| l.as_deref().is_none_or(|l| l == ns));
            let in_scope = if res.namespaced {
                !ns.is_empty() && self.namespaces.should_include(ns)
            } else {
                true
            };
            let found = if listed_ns && in_scope {
                cluster::get(&self.ctx.client, res, ns, &name)
                    .await
                    .ok()
                    .flatten()
            } else {
                None
            };
            match found.filter(|o| self.selected(o)) {
                Some(object) => {
                    done.insert(id);
                    self.track(ns);
                    self.total.fetch_add(1, Ordering::Relaxed);
                    if tx
                        .send(Candidate {
                            res: Arc::clone(res),
                            object,
                        })
                        .await
                        .is_err()
                    {
                        return done;
                    }
                }
                None => self.log.warn(
                    Subject::Resource(&res.name(), ""),
                    &format!("Cannot find resource '{id}'."),
                ),
            }
        }
        done
    }

    fn track(&self, ns: &str) {
        if !ns.is_empty() {
            let mut tracked = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
            if !tracked.contains(ns) {
                tracked.insert(ns.to_owned());
            }
        }
    }

    /// The Namespace objects of every tracked namespace (Velero's `nsTracker`).
    async fn namespaces_last(&self) {
        let Some(res) = self
            .ctx
            .catalog
            .collectable()
            .find(|r| r.name() == "namespaces")
            .cloned()
        else {
            return;
        };
        if !self.resources.should_include("namespaces", false) {
            return;
        }
        let tracked = self
            .tracked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for object in &self.namespace_objects {
            if self.stopped.load(Ordering::SeqCst) {
                return;
            }
            let name = meta_str(object, "name");
            if tracked.contains(name) && self.namespaces.should_include(name) {
                self.total.fetch_add(1, Ordering::Relaxed);
                self.back_up(&res, object.clone(), false).await;
            }
        }
    }

    /// Backs up one item and the additional items its actions name.
    fn back_up<'s>(
        &'s self,
        res: &'s DiscoveredResource,
        object: Value,
        must_include: bool,
    ) -> BoxFuture<'s, ()> {
        Box::pin(async move {
            let gr = res.group_resource();
            let name = res.name();
            let (ns, item) = (
                meta_str(&object, "namespace").to_owned(),
                meta_str(&object, "name").to_owned(),
            );
            let subject = Subject::Item(&name, &ns, &item);
            if let Err(skip) = check_item(
                &object,
                &name,
                res.namespaced,
                &self.namespaces,
                &self.resources,
                must_include,
            ) {
                self.log.info(subject, &format!("Skipping item: {skip:?}"));
                return;
            }
            let first = self.seen.lock().unwrap_or_else(|p| p.into_inner()).insert((
                &res.group,
                &res.resource,
                &ns,
                &item,
            ));
            match first {
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(e) => {
                    self.log
                        .error(subject, &format!("Error backing up item: {e}"));
                    return;
                }
            }
            let mut object = object;
            let mut additional = Vec::new();
            for action in self.actions.iter().filter(|a| a.applies_to(&gr, &self.ctx)) {
                match action.execute(&self.ctx, &object).await {
                    Ok(out) => {
                        if let Some(updated) = out.updated {
                            object = updated;
                        }
                        additional.extend(out.additional);
                    }
                    Err(e) => {
                        self.log.error(
                            subject,
                            &format!(
                                "error executing custom action (groupResource={gr}, namespace={ns}, name={item}): {e}"
                            ),
                        );
                        return;
                    }
                }
            }
            let job = WriteJob {
                group_resource: gr,
                preferred_version: res.version.clone(),
                object,
            };
            self.emit(job).await;
            if self.stopped.load(Ordering::SeqCst) {
                return;
            }
            for id in additional {
                let Some(extra) = self
                    .ctx
                    .catalog
                    .get(&id.group_resource)
                    .filter(|r| is_backed_up(r))
                else {
                    continue;
                };
                let extra_name = extra.name();
                let subject = Subject::Item(&extra_name, &id.namespace, &id.name);
                match cluster::get(&self.ctx.client, extra, &id.namespace, &id.name).await {
                    Ok(Some(obj)) => {
                        self.total.fetch_add(1, Ordering::Relaxed);
                        self.back_up(extra, obj, false).await;
                    }
                    Ok(None) => self.log.warn(
                        subject,
                        "Additional item was not found in Kubernetes API, can't back it up",
                    ),
                    Err(e) => self
                        .log
                        .error(subject, &format!("Error getting additional item: {e}")),
                }
            }
        })
    }
}
