//! The object store: every object of every resource, kept as its JSON bytes, with one
//! global, monotonically increasing resourceVersion and each resource's recent changes
//! ([`History`]) that watches replay from.
//!
//! All writes go through [`Store::mutate`], which runs a caller's decision on the current
//! object under the write lock, so read-modify-write is atomic (optimistic concurrency is
//! checked inside the decision). Watchers get events through a bounded broadcast channel:
//! a watcher that falls too far behind is dropped and must re-watch or re-list.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{Notify, broadcast};

use super::errors::ApiError;
use super::gc_index::{GcIndex, Place};
use super::history::{History, Limits};

/// A resource across its versions, e.g. `("apps", "deployments")`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub(crate) fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

/// (namespace, name); the namespace is empty for cluster-scoped objects.
pub(crate) type ObjectKey = (String, String);

/// A page of a list: the objects (key and JSON), how many more there are, and the
/// store's resourceVersion when it was read.
pub(crate) type Page = (Vec<(ObjectKey, Bytes)>, usize, u64);

/// What a write does to the object (ADDED/MODIFIED/DELETED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as replayed to watchers.
#[derive(Debug)]
pub(crate) struct StoreEvent {
    pub rv: u64,
    pub gr: GroupResource,
    pub namespace: String,
    /// The object's name (its key is `(namespace, name)`).
    pub name: String,
    pub kind: EventType,
    /// The object after the change (for DELETED: the last state, with the deletion's rv).
    pub object: Bytes,
    /// The object before the change, so selector-filtered watches can turn a MODIFIED
    /// that leaves the selection into DELETED.
    pub old: Option<Bytes>,
}

/// A stored object: its JSON plus the few facts background controllers scan for, taken
/// from the object once at write time so that their passes parse no JSON.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub uid: u128,
    pub flags: u8,
    pub data: Bytes,
    /// Present when `flags` is not 0.
    pub gc: Option<Arc<GcFacts>>,
}

/// What the garbage collector needs of an object that has owners or is being deleted.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct GcFacts {
    /// (owner uid, blockOwnerDeletion) per ownerReference.
    pub owners: Vec<(u128, bool)>,
    /// The object's finalizers while it is being deleted (else empty).
    pub finalizers: Vec<String>,
}

impl Record {
    /// The record of `obj`, stored as `data` (its JSON).
    pub(crate) fn of(obj: &Value, data: Bytes) -> Record {
        let flags = flags_of(obj);
        let gc = (flags != 0).then(|| {
            let owners = obj
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .map(|refs| {
                    refs.iter()
                        .map(|r| {
                            (
                                parse_uid(r.get("uid").and_then(Value::as_str).unwrap_or("")),
                                r.get("blockOwnerDeletion")
                                    .and_then(Value::as_bool)
                                    .unwrap_or(false),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let finalizers = if flags & DELETING != 0 {
                super::objects::finalizers(obj)
            } else {
                Vec::new()
            };
            Arc::new(GcFacts { owners, finalizers })
        });
        Record {
            uid: uid_of(obj),
            flags,
            data,
            gc,
        }
    }
}

/// A uid as a number (0 when it is no UUID).
pub(crate) fn parse_uid(s: &str) -> u128 {
    uuid::Uuid::parse_str(s).map(|u| u.as_u128()).unwrap_or(0)
}

/// The object carries `metadata.ownerReferences`.
pub(crate) const HAS_OWNERS: u8 = 1;
/// The object carries `metadata.deletionTimestamp`.
pub(crate) const DELETING: u8 = 2;

/// The result of a caller's decision inside [`Store::mutate`].
pub(crate) enum Mutation {
    /// Store this object (the store sets `metadata.resourceVersion`).
    Put(Value),
    /// Remove the object; the value is its final state for the DELETED event.
    Remove(Value),
    /// Nothing changes (e.g. an update that is a no-op); the value is answered as is.
    Unchanged(Value),
}

/// What [`Store::mutate`] did.
pub(crate) struct Outcome {
    pub object: Value,
}

/// Receives every write, in order, for durability (see `persist.rs`).
pub(crate) trait Journal: Send + Sync {
    fn put(&self, gr: &GroupResource, key: &ObjectKey, data: &[u8]);
    fn remove(&self, gr: &GroupResource, key: &ObjectKey, rv: u64);
    /// Called after each write with the live objects, to rewrite the log when it grew.
    fn maybe_compact(&self, rv: u64, objects: &HashMap<GroupResource, BTreeMap<ObjectKey, Record>>);
    /// Makes everything written so far durable.
    fn flush(&self);
}

pub(crate) struct Inner {
    pub rv: u64,
    pub objects: HashMap<GroupResource, BTreeMap<ObjectKey, Record>>,
    /// Kept with `objects` on every write.
    pub gc: GcIndex,
    /// The resourceVersion of the last write to each resource, so the built-in
    /// controllers can tell whether what they read changed since their last pass.
    last_write: HashMap<GroupResource, u64>,
    history: History,
}

impl Inner {
    fn wrote(&mut self, gr: &GroupResource, rv: u64) {
        match self.last_write.get_mut(gr) {
            Some(last) => *last = rv,
            None => {
                self.last_write.insert(gr.clone(), rv);
            }
        }
    }
}

/// Where a watch starts.
pub(crate) enum WatchFrom {
    /// Synthetic ADDED events for the current state, then changes.
    Snapshot,
    /// Changes with a resourceVersion greater than this one.
    After(u64),
}

/// What a watch starts with.
pub(crate) struct WatchStart {
    pub initial: Vec<Bytes>,
    pub replay: Vec<Arc<StoreEvent>>,
    pub receiver: broadcast::Receiver<Arc<StoreEvent>>,
    pub rv: u64,
}

pub(crate) struct Store {
    inner: RwLock<Inner>,
    /// One bounded broadcast channel per resource, made by its first watch: a write
    /// wakes the watchers of its own resource only (a garden with six watches woke all
    /// six for every entry it created). Each holds `channel_cap` slots (8,192 in the
    /// server: about 0.3 MiB per watched resource).
    watchers: std::sync::Mutex<HashMap<GroupResource, broadcast::Sender<Arc<StoreEvent>>>>,
    channel_cap: usize,
    journal: Option<Box<dyn Journal>>,
    /// Woken after writes that background controllers care about.
    pub kick: Notify,
}

pub(crate) fn flags_of(obj: &Value) -> u8 {
    let mut f = 0;
    if obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        f |= HAS_OWNERS;
    }
    if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        f |= DELETING;
    }
    f
}

pub(crate) fn uid_of(obj: &Value) -> u128 {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map_or(0, parse_uid)
}

/// The largest write etcd takes (its default `--max-request-bytes`, 1.5 MiB); counted
/// here as the object's JSON plus the key kube-apiserver would store it under.
pub(crate) const MAX_OBJECT_BYTES: usize = 3 * 1024 * 1024 / 2;

/// Whether an object of `len` bytes under this key fits in one etcd request.
fn fits_etcd(gr: &GroupResource, key: &ObjectKey, len: usize) -> bool {
    // "/registry/<group>/<resource>/<namespace>/<name>"
    let key_len = 14 + gr.group.len() + gr.resource.len() + key.0.len() + key.1.len();
    len + key_len <= MAX_OBJECT_BYTES
}

/// The JSON of `obj` as kept: exactly as long as it is (serializing grows a buffer by
/// doubling, and a `Bytes` made from a `Vec` keeps all its capacity plus a shared header).
pub(crate) fn stored_json(obj: &Value) -> Result<Bytes, ApiError> {
    let data = serde_json::to_vec(obj).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Bytes::from(data.into_boxed_slice()))
}

thread_local! {
    /// Set while a dry-run request runs (see [`dry_run`]).
    static DRY_RUN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `write` as kube-apiserver's `dryRun=All`: every [`Store::mutate`] inside it
/// decides as usual (validation, conflicts and errors all happen) and answers what it
/// would have stored, but nothing is stored, journalled or sent to watchers, and the
/// resourceVersion does not move. `write` is synchronous, so the flag cannot leak into
/// another request sharing the thread.
pub(crate) fn dry_run<R>(write: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            DRY_RUN.with(|d| d.set(self.0));
        }
    }
    let _reset = Reset(DRY_RUN.with(|d| d.replace(true)));
    write()
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// What a dry-run write answers: the object as the write would have left it, with the
/// stored resourceVersion (none for a create, as kube-apiserver's dry-run storage
/// answers), after the same size check a real write makes.
fn dry_outcome(
    gr: &GroupResource,
    key: &ObjectKey,
    decision: Mutation,
    current_rv: Option<Value>,
) -> Result<Outcome, ApiError> {
    let mut object = match decision {
        Mutation::Unchanged(v) => return Ok(Outcome { object: v }),
        Mutation::Put(v) => {
            let data = stored_json(&v)?;
            if !fits_etcd(gr, key, data.len()) {
                return Err(ApiError::etcd_request_too_large());
            }
            v
        }
        Mutation::Remove(v) => v,
    };
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        match current_rv {
            Some(rv) => meta.insert("resourceVersion".into(), rv),
            None => meta.remove("resourceVersion"),
        };
    }
    Ok(Outcome { object })
}

/// The entries of `map` in namespace `ns` (all when `None`) strictly after `after`, in
/// key order: a range of the map, never a scan from its start.
fn in_range<'a, V>(
    map: &'a BTreeMap<ObjectKey, V>,
    ns: Option<&'a str>,
    after: Option<&ObjectKey>,
) -> impl Iterator<Item = (&'a ObjectKey, &'a V)> {
    let start = match (after, ns) {
        (Some(a), _) => Bound::Excluded(a.clone()),
        (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
        (None, None) => Bound::Unbounded,
    };
    map.range((start, Bound::Unbounded))
        .skip_while(move |(k, _)| ns.is_some_and(|ns| k.0.as_str() < ns))
        .take_while(move |(k, _)| ns.is_none_or(|ns| k.0 == ns))
}

impl Store {
    pub(crate) fn new(history: Limits, channel_cap: usize) -> Self {
        Store {
            inner: RwLock::new(Inner {
                rv: 1,
                objects: HashMap::new(),
                gc: GcIndex::default(),
                last_write: HashMap::new(),
                history: History::new(history),
            }),
            watchers: std::sync::Mutex::new(HashMap::new()),
            channel_cap,
            journal: None,
            kick: Notify::new(),
        }
    }

    /// Forgets the change history (after bootstrap, so that resourceVersions from before
    /// are "too old" for watches, as after an etcd compaction).
    pub(crate) fn compact_history(&self) {
        let mut inner = self.write();
        let rv = inner.rv;
        inner.history.compact(rv);
    }

    pub(crate) fn set_journal(&mut self, journal: Box<dyn Journal>) {
        self.journal = Some(journal);
    }

    /// Loads objects restored from disk (before serving).
    pub(crate) fn restore(&self, rv: u64, objects: Vec<(GroupResource, ObjectKey, Bytes)>) {
        let mut inner = self.write();
        for (gr, key, mut data) in objects {
            let Ok(mut v) = serde_json::from_slice::<Value>(&data) else {
                continue;
            };
            // A server before metadata validation may have kept malformed fields; they
            // would break every typed list of the kind, so they are dropped as
            // kube-apiserver drops them when reading such an object.
            if super::metadata::repair(&mut v) {
                tracing::warn!(
                    group = %gr.group, resource = %gr.resource, namespace = %key.0, name = %key.1,
                    "dropped malformed metadata fields of a stored object"
                );
                if let Ok(d) = stored_json(&v) {
                    data = d;
                }
            }
            let record = Record::of(&v, data);
            let old = inner.objects.get(&gr).and_then(|m| m.get(&key)).cloned();
            inner.gc.changed(&gr, &key, old.as_ref(), Some(&record));
            inner.wrote(&gr, rv);
            inner.objects.entry(gr).or_default().insert(key, record);
        }
        inner.rv = inner.rv.max(rv);
    }

    /// Makes every write so far durable (no-op without a data directory).
    pub(crate) fn flush(&self) {
        if let Some(j) = &self.journal {
            j.flush();
        }
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // A poisoned lock means a panic while holding it; the data is still consistent
        // because every write completes before any observable side effect.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn watchers(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<GroupResource, broadcast::Sender<Arc<StoreEvent>>>> {
        self.watchers.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn current_rv(&self) -> u64 {
        self.read().rv
    }

    /// The resourceVersion of the last write to `gr` (0: none since the start).
    pub(crate) fn last_write(&self, gr: &GroupResource) -> u64 {
        self.read().last_write.get(gr).copied().unwrap_or(0)
    }

    /// `read` applied to the record of the object, if it exists.
    fn with_record<R>(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        read: impl FnOnce(&Record) -> R,
    ) -> Option<R> {
        let inner = self.read();
        inner
            .objects
            .get(gr)?
            .get(&(ns.to_string(), name.to_string()))
            .map(read)
    }

    pub(crate) fn get(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<Value> {
        self.with_record(gr, ns, name, |rec| serde_json::from_slice(&rec.data).ok())?
    }

    /// The objects the garbage collector is to look at: those a write marked since the
    /// last call, or with `everything` every one with owners or being deleted.
    pub(crate) fn take_gc_dirty(&self, everything: bool) -> HashSet<Place> {
        let mut guard = self.write();
        let inner = &mut *guard;
        if everything {
            inner.gc.mark_all(&inner.objects);
        }
        inner.gc.take_dirty()
    }

    /// Whether the object is being deleted (`None`: it does not exist), from the facts
    /// its record keeps: no JSON is parsed, so per-request checks stay cheap.
    pub(crate) fn deleting(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<bool> {
        self.with_record(gr, ns, name, |rec| rec.flags & DELETING != 0)
    }

    /// Objects of `gr` (in `ns` when given), in key order, strictly after `after`.
    pub(crate) fn list(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        after: Option<&ObjectKey>,
    ) -> (Vec<(ObjectKey, Bytes)>, u64) {
        let (items, _, rv) = self.list_page(gr, ns, after, usize::MAX);
        (items, rv)
    }

    /// Like [`Store::list`], but copies out at most `take` objects and only counts the
    /// ones after them (the second value), so a page of a large collection costs the
    /// page, not the collection.
    pub(crate) fn list_page(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        after: Option<&ObjectKey>,
        take: usize,
    ) -> Page {
        let inner = self.read();
        let mut out = Vec::new();
        let mut rest = 0;
        if let Some(map) = inner.objects.get(gr) {
            let mut keys = in_range(map, ns, after);
            for (k, rec) in keys.by_ref().take(take) {
                out.push((k.clone(), rec.data.clone()));
            }
            // The first page of a whole collection knows the rest from the map's length;
            // otherwise the rest is counted, never copied.
            rest = if after.is_none() && ns.is_none() {
                map.len() - out.len()
            } else {
                keys.count()
            };
        }
        (out, rest, inner.rv)
    }

    /// [`Store::list_page`] as the collection was at resourceVersion `at` (a continued
    /// list's first page): the current objects with the changes made since undone from
    /// the history (an object created since left out, one changed or deleted since as
    /// it was). `Err(oldest)` when the history no longer reaches back to `at`.
    ///
    /// A page costs the changes since `at` and the page itself: the objects before
    /// `after` are skipped by the map's order, and those after the page only counted.
    pub(crate) fn list_page_at(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        after: Option<&ObjectKey>,
        take: usize,
        at: u64,
    ) -> Result<Page, u64> {
        let inner = self.read();
        if at >= inner.rv {
            drop(inner);
            return Ok(self.list_page(gr, ns, after, take));
        }
        // Each key's state at `at`: before the first change after it (`None`: absent).
        let mut then: BTreeMap<ObjectKey, Option<Bytes>> = BTreeMap::new();
        for e in inner
            .history
            .since(gr, at)?
            .filter(|e| ns.is_none_or(|ns| ns == e.namespace))
        {
            let key = (e.namespace.clone(), e.name.clone());
            then.entry(key).or_insert_with(|| match e.kind {
                EventType::Added => None,
                EventType::Modified => e.old.clone(),
                EventType::Deleted => Some(e.old.clone().unwrap_or_else(|| e.object.clone())),
            });
        }
        let empty = BTreeMap::new();
        let map = inner.objects.get(gr).unwrap_or(&empty);
        // Two runs in key order with no key in both: the objects untouched since `at`,
        // and the touched ones as they were then.
        let mut untouched = in_range(map, ns, after)
            .filter(|(k, _)| !then.contains_key(*k))
            .map(|(k, rec)| (k, &rec.data))
            .peekable();
        let mut touched = in_range(&then, ns, after)
            .filter_map(|(k, data)| Some((k, data.as_ref()?)))
            .peekable();
        let mut merged = std::iter::from_fn(|| match (untouched.peek(), touched.peek()) {
            (Some((a, _)), Some((b, _))) if b < a => touched.next(),
            (Some(_), _) => untouched.next(),
            (None, _) => touched.next(),
        });
        let out: Vec<(ObjectKey, Bytes)> = merged
            .by_ref()
            .take(take)
            .map(|(k, data)| (k.clone(), data.clone()))
            .collect();
        let rest = merged.count();
        Ok((out, rest, inner.rv))
    }

    /// Runs `decide` on the current object (if any) with the resourceVersion the write
    /// will get, and applies its decision atomically.
    pub(crate) fn mutate(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        decide: impl FnOnce(Option<Value>, u64) -> Result<Mutation, ApiError>,
    ) -> Result<Outcome, ApiError> {
        let key: ObjectKey = (ns.to_string(), name.to_string());
        let mut inner = self.write();
        let old = inner.objects.get(gr).and_then(|m| m.get(&key)).cloned();
        let current = match &old {
            Some(rec) => Some(
                serde_json::from_slice::<Value>(&rec.data)
                    .map_err(|e| ApiError::internal(format!("corrupt stored object: {e}")))?,
            ),
            None => None,
        };
        let next_rv = inner.rv + 1;
        let current_rv = current
            .as_ref()
            .and_then(|c| c.pointer("/metadata/resourceVersion"))
            .cloned();
        let decision = decide(current, next_rv)?;
        if DRY_RUN.with(std::cell::Cell::get) {
            return dry_outcome(gr, &key, decision, current_rv);
        }
        let (object, kind, data) = match decision {
            Mutation::Unchanged(v) => {
                return Ok(Outcome { object: v });
            }
            Mutation::Put(mut v) => {
                set_rv(&mut v, next_rv);
                let data = stored_json(&v)?;
                if !fits_etcd(gr, &key, data.len()) {
                    return Err(ApiError::etcd_request_too_large());
                }
                let record = Record::of(&v, data.clone());
                if let Some(j) = &self.journal {
                    j.put(gr, &key, &data);
                }
                inner.gc.changed(gr, &key, old.as_ref(), Some(&record));
                inner
                    .objects
                    .entry(gr.clone())
                    .or_default()
                    .insert(key.clone(), record);
                let kind = if old.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (v, kind, data)
            }
            Mutation::Remove(mut v) => {
                set_rv(&mut v, next_rv);
                let data = stored_json(&v)?;
                if let Some(j) = &self.journal {
                    j.remove(gr, &key, next_rv);
                }
                inner.gc.changed(gr, &key, old.as_ref(), None);
                if let Some(m) = inner.objects.get_mut(gr) {
                    m.remove(&key);
                    if m.is_empty() {
                        inner.objects.remove(gr);
                    }
                }
                (v, EventType::Deleted, data)
            }
        };
        inner.rv = next_rv;
        inner.wrote(gr, next_rv);
        if let Some(j) = &self.journal {
            j.maybe_compact(next_rv, &inner.objects);
        }
        let interesting = kind == EventType::Deleted
            || flags_of(&object) != 0
            || old.as_ref().is_some_and(|r| r.flags != 0)
            || gr.resource == "namespaces"
            || gr.resource == "customresourcedefinitions"
            || gr.resource == "clusterroles";
        let event = Arc::new(StoreEvent {
            rv: next_rv,
            gr: gr.clone(),
            namespace: ns.to_string(),
            name: name.to_string(),
            kind,
            object: data,
            old: old.map(|r| r.data),
        });
        inner.history.push(std::time::Instant::now(), event.clone());
        // Sent under the write lock, so a watch started under the read lock sees each
        // event either in its start or on its channel. No receivers is fine.
        if let Some(tx) = self.watchers().get(gr) {
            let _ = tx.send(event);
        }
        drop(inner);
        if interesting {
            self.kick.notify_one();
        }
        Ok(Outcome { object })
    }

    /// Starts a watch on `gr` (in `ns` when given) atomically with respect to writes.
    pub(crate) fn watch(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        from: WatchFrom,
    ) -> Result<WatchStart, ApiError> {
        let inner = self.read();
        let receiver = self
            .watchers()
            .entry(gr.clone())
            .or_insert_with(|| broadcast::channel(self.channel_cap).0)
            .subscribe();
        match from {
            WatchFrom::Snapshot => {
                let mut initial = Vec::new();
                if let Some(map) = inner.objects.get(gr) {
                    for (k, rec) in map {
                        if ns.is_none_or(|ns| ns == k.0) {
                            initial.push(rec.data.clone());
                        }
                    }
                }
                Ok(WatchStart {
                    initial,
                    replay: Vec::new(),
                    receiver,
                    rv: inner.rv,
                })
            }
            WatchFrom::After(rv) => {
                if rv > inner.rv {
                    return Err(ApiError::too_large_resource_version(rv, inner.rv));
                }
                let replay = inner
                    .history
                    .since(gr, rv)
                    .map_err(|oldest| {
                        ApiError::expired(format!("too old resource version: {rv} ({oldest})"))
                    })?
                    .filter(|e| ns.is_none_or(|ns| ns == e.namespace))
                    .cloned()
                    .collect();
                Ok(WatchStart {
                    initial: Vec::new(),
                    replay,
                    receiver,
                    rv: inner.rv.max(rv),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_keep_the_facts_the_garbage_collector_needs() {
        let owner = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9";
        let obj = json!({"metadata": {
            "name": "x",
            "uid": "11111111-2222-4333-8444-555555555555",
            "ownerReferences": [{"uid": owner, "blockOwnerDeletion": true}, {"uid": "junk"}],
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["orphan"],
        }});
        let rec = Record::of(&obj, Bytes::new());
        assert_eq!(rec.flags, HAS_OWNERS | DELETING);
        assert_eq!(rec.uid, parse_uid("11111111-2222-4333-8444-555555555555"));
        let facts = rec.gc.expect("facts for an object with owners");
        assert_eq!(facts.owners, vec![(parse_uid(owner), true), (0, false)]);
        assert_eq!(facts.finalizers, vec!["orphan".to_string()]);
        let plain = Record::of(&json!({"metadata": {"name": "y"}}), Bytes::new());
        assert_eq!((plain.flags, plain.uid), (0, 0));
        assert!(plain.gc.is_none());
    }

    fn put(store: &Store, name: &str) -> u64 {
        let gr = GroupResource::new("", "configmaps");
        let out = store
            .mutate(&gr, "ns", name, |_, _| {
                Ok(Mutation::Put(json!({"metadata": {"name": name}})))
            })
            .unwrap();
        out.object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn restore_drops_malformed_metadata_written_by_older_servers() {
        let store = Store::new(Limits::count(10), 10);
        let gr = GroupResource::new("", "configmaps");
        let data = Bytes::from_static(
            br#"{"metadata":{"name":"a","namespace":"ns","labels":{"x":1},"finalizers":{},"annotations":{"k":"v"}}}"#,
        );
        store.restore(5, vec![(gr.clone(), ("ns".into(), "a".into()), data)]);
        let v = store.get(&gr, "ns", "a").unwrap();
        assert_eq!(
            v["metadata"],
            json!({"name": "a", "namespace": "ns", "annotations": {"k": "v"}})
        );
    }

    #[test]
    fn writes_over_etcds_request_limit_fail_and_change_nothing() {
        let store = Store::new(Limits::count(10), 10);
        let gr = GroupResource::new("", "configmaps");
        let write = |n: usize| {
            store.mutate(&gr, "ns", "big", |_, _| {
                Ok(Mutation::Put(
                    json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(n)}}),
                ))
            })
        };
        assert!(write(MAX_OBJECT_BYTES - 200).is_ok());
        let rv = store.current_rv();
        let Err(e) = write(MAX_OBJECT_BYTES) else {
            panic!("an object over the limit was written")
        };
        assert_eq!((e.code, e.reason), (500, ""));
        assert_eq!(e.message, "etcdserver: request is too large");
        assert_eq!(store.current_rv(), rv, "nothing was written");
        let kept = store.get(&gr, "ns", "big").unwrap();
        assert_eq!(
            kept["data"]["k"].as_str().unwrap().len(),
            MAX_OBJECT_BYTES - 200
        );
    }

    #[test]
    fn resource_versions_increase_globally() {
        let store = Store::new(Limits::count(10), 10);
        let a = put(&store, "a");
        let b = put(&store, "b");
        assert!(b > a);
        assert_eq!(store.current_rv(), b);
    }

    #[test]
    fn a_page_at_an_older_version_undoes_what_changed_since() {
        let store = Store::new(Limits::count(100), 10);
        let gr = GroupResource::new("", "configmaps");
        let set = |name: &str, v: &str| {
            store
                .mutate(&gr, "ns", name, |_, _| {
                    Ok(Mutation::Put(
                        json!({"metadata": {"name": name}, "data": {"v": v}}),
                    ))
                })
                .unwrap();
        };
        let names =
            |page: &Page| -> Vec<String> { page.0.iter().map(|(k, _)| k.1.clone()).collect() };
        set("a", "1");
        set("b", "1");
        set("c", "1");
        let at = store.current_rv();
        set("b", "2");
        set("d", "1");
        store
            .mutate(&gr, "ns", "c", |cur, _| Ok(Mutation::Remove(cur.unwrap())))
            .unwrap();
        let then = store.list_page_at(&gr, None, None, usize::MAX, at).unwrap();
        assert_eq!(names(&then), ["a", "b", "c"]);
        let b: Value = serde_json::from_slice(&then.0[1].1).unwrap();
        assert_eq!(b["data"]["v"], "1", "b as it was");
        let after_a = ("ns".to_string(), "a".to_string());
        let rest = store
            .list_page_at(&gr, None, Some(&after_a), 1, at)
            .unwrap();
        assert_eq!((names(&rest), rest.1), (vec!["b".to_string()], 1));
        // The present, and a version the history no longer reaches.
        let now = store
            .list_page_at(&gr, None, None, usize::MAX, store.current_rv())
            .unwrap();
        assert_eq!(names(&now), ["a", "b", "d"]);
        let small = Store::new(Limits::count(1), 10);
        let first = put(&small, "x");
        put(&small, "y");
        put(&small, "z");
        assert!(small.list_page_at(&gr, None, None, 10, first).is_err());
    }

    proptest::proptest! {
        /// Paging through the collection as it was at `at`, however it changed since
        /// (creates, updates, deletes, in two namespaces and in another resource), gives
        /// exactly what a list at `at` gave, with the right count of the rest.
        #[test]
        fn pages_of_a_past_version_are_that_version(
            before in proptest::collection::vec((0u8..3, 0u8..2, 0u8..12, 0u8..3), 0..40),
            after in proptest::collection::vec((0u8..3, 0u8..2, 0u8..12, 0u8..3), 0..40),
            take in 1usize..5,
            only_ns in proptest::option::of(0u8..2),
        ) {
            let store = Store::new(Limits::count(1000), 10);
            let apply = |ops: &[(u8, u8, u8, u8)]| {
                for &(op, ns, name, resource) in ops {
                    let gr = GroupResource::new("", if resource == 0 { "secrets" } else { "configmaps" });
                    let (ns, name) = (format!("ns{ns}"), format!("o{name:02}"));
                    let _ = store.mutate(&gr, &ns, &name, |cur, rv| match (op, cur) {
                        (0, Some(cur)) => Ok(Mutation::Remove(cur)),
                        (0, None) => Ok(Mutation::Unchanged(Value::Null)),
                        (_, _) => Ok(Mutation::Put(json!({"metadata": {"name": name}, "v": rv}))),
                    });
                }
            };
            apply(&before);
            let gr = GroupResource::new("", "configmaps");
            let ns = only_ns.map(|n| format!("ns{n}"));
            let at = store.current_rv();
            let (expected, _) = store.list(&gr, ns.as_deref(), None);
            apply(&after);
            let mut seen = Vec::new();
            let mut last: Option<ObjectKey> = None;
            loop {
                let (page, rest, _) = store
                    .list_page_at(&gr, ns.as_deref(), last.as_ref(), take, at)
                    .expect("the history reaches back");
                proptest::prop_assert!(page.len() <= take);
                seen.extend(page.iter().cloned());
                proptest::prop_assert_eq!(rest, expected.len() - seen.len());
                match page.last() {
                    Some((k, _)) if rest > 0 => last = Some(k.clone()),
                    _ => break,
                }
            }
            proptest::prop_assert_eq!(seen, expected);
        }
    }

    #[test]
    fn watch_from_compacted_version_is_gone() {
        let store = Store::new(Limits::count(2), 10);
        let first = put(&store, "a");
        put(&store, "b");
        put(&store, "c");
        let gr = GroupResource::new("", "configmaps");
        let err = store
            .watch(&gr, None, WatchFrom::After(first - 1))
            .err()
            .unwrap();
        assert_eq!(err.code, 410);
        let ok = store.watch(&gr, None, WatchFrom::After(first + 1)).unwrap();
        assert_eq!(ok.replay.len(), 1);
    }

    #[test]
    fn a_write_reaches_the_watchers_of_its_resource_only() {
        let store = Store::new(Limits::count(10), 10);
        let configmaps = GroupResource::new("", "configmaps");
        let secrets = GroupResource::new("", "secrets");
        let mut on_configmaps = store
            .watch(&configmaps, None, WatchFrom::Snapshot)
            .unwrap()
            .receiver;
        let mut on_secrets = store
            .watch(&secrets, None, WatchFrom::Snapshot)
            .unwrap()
            .receiver;
        let rv = put(&store, "a");
        let event = on_configmaps
            .try_recv()
            .expect("the configmap's watcher has it");
        assert_eq!((event.rv, &event.gr), (rv, &configmaps));
        assert!(on_configmaps.try_recv().is_err());
        assert!(
            on_secrets.try_recv().is_err(),
            "nothing for the secrets' watcher"
        );
    }

    #[test]
    fn last_write_is_kept_per_resource() {
        let store = Store::new(Limits::count(10), 10);
        let configmaps = GroupResource::new("", "configmaps");
        let secrets = GroupResource::new("", "secrets");
        assert_eq!(store.last_write(&configmaps), 0);
        let first = put(&store, "a");
        assert_eq!(store.last_write(&configmaps), first);
        let second = put(&store, "b");
        assert_eq!(store.last_write(&configmaps), second);
        assert_eq!(store.last_write(&secrets), 0);
    }

    #[test]
    fn list_in_namespace_after_key() {
        let store = Store::new(Limits::count(10), 10);
        put(&store, "a");
        put(&store, "b");
        let gr = GroupResource::new("", "configmaps");
        let (items, _) = store.list(&gr, Some("ns"), Some(&("ns".into(), "a".into())));
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].0.1, "b");
        let (items, rest, _) = store.list_page(&gr, Some("ns"), None, 1);
        assert_eq!((items.len(), rest), (1, 1));
        assert_eq!(items[0].0.1, "a");
        let (items, rest, _) = store.list_page(&gr, None, None, 1);
        assert_eq!((items.len(), rest), (1, 1));
        let (items, rest, _) = store.list_page(&gr, None, None, 5);
        assert_eq!((items.len(), rest), (2, 0));
        let (items, _) = store.list(&gr, Some("other"), None);
        assert!(items.is_empty());
    }
}
