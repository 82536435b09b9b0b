//! The backup manifest (Granary's addition to Velero's files, see
//! docs/formats.md#backup-manifest): one entry per backed-up object with the fields
//! selection and ordering need (group, version, kind, resource, namespace, name, uid,
//! labels, annotations, owner UIDs), stored as `backups/<name>/manifest.json.gz` beside
//! the tarball.
//!
//! Items are keyed by (group, resource, namespace, name) — the resource is part of the
//! key so a ConfigMap and a Secret of the same name do not collide — and kept in that
//! order. The UID index and the owner→children map are derived, rebuilt on load and never
//! stored. [`Manifest::dependency_order`] lists owners before their dependents.

mod digest;
mod item;
mod keys;
mod order;
mod spool;
mod store;
mod uid;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use digest::ItemDigests;
pub use item::item_from_object;
pub use keys::{KeySet, KeySetFull};
pub use order::{BrokenCycle, DependencyOrder};
pub use spool::ManifestSpool;
pub use store::MANIFEST_SCHEMA_VERSION;
pub use uid::Uid;

use crate::resource::GroupResource;

/// Identity of an item within a backup; its `Ord` is the manifest's item order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ItemKey {
    pub group: String,
    pub resource: String,
    /// `""` for cluster-scoped items.
    pub namespace: String,
    pub name: String,
}

impl ItemKey {
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(self.group.clone(), self.resource.clone())
    }
}

impl fmt::Display for ItemKey {
    /// The item's unversioned path in the tarball, unique within a backup.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gr = self.group_resource();
        if self.namespace.is_empty() {
            write!(f, "resources/{gr}/cluster/{}.json", self.name)
        } else {
            write!(
                f,
                "resources/{gr}/namespaces/{}/{}.json",
                self.namespace, self.name
            )
        }
    }
}

/// One manifest item as stored (the schema in docs/formats.md#backup-manifest, fields in
/// that order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestItem {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub resource: String,
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// UIDs of the objects that own this one (`metadata.ownerReferences[].uid`).
    #[serde(default)]
    pub owners: Vec<String>,
}

impl ManifestItem {
    /// About how many bytes the item keeps on the heap once in a [`Manifest`] (its
    /// strings, plus a slot per string and for the item and its index entries), for
    /// memory budgets.
    pub fn heap_bytes(&self) -> u64 {
        const SLOT: u64 = 32;
        let strings = [
            &self.group,
            &self.version,
            &self.kind,
            &self.resource,
            &self.namespace,
            &self.name,
            &self.uid,
        ];
        let text: u64 = strings.iter().map(|s| s.len() as u64 + SLOT).sum::<u64>()
            + self
                .labels
                .iter()
                .chain(&self.annotations)
                .map(|(k, v)| (k.len() + v.len()) as u64 + 3 * SLOT)
                .sum::<u64>()
            + self
                .owners
                .iter()
                .map(|o| 2 * o.len() as u64 + 3 * SLOT)
                .sum::<u64>();
        // The key is held twice (map and uid index), the uid twice.
        text + (self.uid.len() as u64 + 4 * SLOT) + 8 * SLOT
    }

    pub fn key(&self) -> ItemKey {
        ItemKey {
            group: self.group.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    fn split(self) -> (ItemKey, ItemMeta) {
        (
            ItemKey {
                group: self.group,
                resource: self.resource,
                namespace: self.namespace,
                name: self.name,
            },
            ItemMeta {
                version: self.version,
                kind: self.kind,
                uid: self.uid,
                labels: self.labels,
                annotations: self.annotations,
                owners: self.owners,
            },
        )
    }
}

/// The non-key fields of an item as held in a [`Manifest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemMeta {
    pub version: String,
    pub kind: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub owners: Vec<String>,
}

/// A borrowed view of one item in a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item<'a> {
    pub key: &'a ItemKey,
    pub meta: &'a ItemMeta,
}

impl Item<'_> {
    /// `apiVersion` of the item (`v1`, `apps/v1`).
    pub fn api_version(&self) -> String {
        crate::resource::join_api_version(&self.key.group, &self.meta.version)
    }

    pub fn to_owned_item(&self) -> ManifestItem {
        ManifestItem {
            group: self.key.group.clone(),
            version: self.meta.version.clone(),
            kind: self.meta.kind.clone(),
            resource: self.key.resource.clone(),
            namespace: self.key.namespace.clone(),
            name: self.key.name.clone(),
            uid: self.meta.uid.clone(),
            labels: self.meta.labels.clone(),
            annotations: self.meta.annotations.clone(),
            owners: self.meta.owners.clone(),
        }
    }
}

/// Why a manifest operation failed.
#[derive(Debug, Error)]
pub enum ManifestError {
    /// The key is already in the manifest.
    #[error("item already exists in manifest: {0}")]
    ItemAlreadyExists(Box<ItemKey>),
    #[error("uid {uid:?} of {new} is already used by {existing}")]
    DuplicateUid {
        uid: String,
        existing: Box<ItemKey>,
        new: Box<ItemKey>,
    },
    #[error("object cannot be described in a manifest: {0}")]
    InvalidObject(String),
    #[error("manifest schema version {0} is not supported (expected {MANIFEST_SCHEMA_VERSION})")]
    UnsupportedVersion(u64),
    #[error("manifest is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("manifest is not a valid gzip stream: {0}")]
    Corrupt(String),
    #[error("manifest decompresses to more than {limit} bytes")]
    TooLarge { limit: u64 },
}

/// The set of objects in one backup (or planned restore), with its UID index and
/// owner→children map.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    items: BTreeMap<Arc<ItemKey>, ItemMeta>,
    by_uid: HashMap<Box<str>, Arc<ItemKey>>,
    children: HashMap<Box<str>, Vec<Arc<ItemKey>>>,
}

impl PartialEq for Manifest {
    /// Two manifests are equal when they hold the same items; the indexes follow.
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl Eq for Manifest {}

impl Manifest {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an item. Refuses a key already present ([`ManifestError::ItemAlreadyExists`])
    /// and a non-empty UID already used by another item; on refusal nothing changes.
    pub fn add(&mut self, item: ManifestItem) -> Result<(), ManifestError> {
        use std::collections::btree_map::Entry;
        let (key, meta) = item.split();
        // One search of the tree: its comparisons, not the inserts, are a large
        // manifest's cost.
        let slot = match self.items.entry(Arc::new(key)) {
            Entry::Occupied(e) => {
                return Err(ManifestError::ItemAlreadyExists(Box::new(
                    (**e.key()).clone(),
                )));
            }
            Entry::Vacant(v) => v,
        };
        if !meta.uid.is_empty()
            && let Some(existing) = self.by_uid.get(meta.uid.as_str())
        {
            return Err(ManifestError::DuplicateUid {
                uid: meta.uid.clone(),
                existing: Box::new((**existing).clone()),
                new: Box::new((**slot.key()).clone()),
            });
        }
        let key = Arc::clone(slot.key());
        if !meta.uid.is_empty() {
            self.by_uid
                .insert(meta.uid.as_str().into(), Arc::clone(&key));
        }
        let mut seen: Vec<&str> = Vec::with_capacity(meta.owners.len());
        for owner in &meta.owners {
            if !seen.contains(&owner.as_str()) {
                seen.push(owner);
                self.children
                    .entry(owner.as_str().into())
                    .or_default()
                    .push(Arc::clone(&key));
            }
        }
        slot.insert(meta);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn contains(&self, key: &ItemKey) -> bool {
        self.items.contains_key(key)
    }

    pub fn get(&self, key: &ItemKey) -> Option<Item<'_>> {
        self.items
            .get_key_value(key)
            .map(|(k, meta)| Item { key: k, meta })
    }

    /// The item with this UID.
    pub fn by_uid(&self, uid: &str) -> Option<Item<'_>> {
        self.by_uid.get(uid).and_then(|k| self.get(k))
    }

    /// All items in key order.
    /// About how many bytes the manifest keeps on the heap (see
    /// [`ManifestItem::heap_bytes`]), for memory budgets.
    pub fn heap_bytes(&self) -> u64 {
        self.iter().map(|i| i.to_owned_item().heap_bytes()).sum()
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Item<'_>> + '_ {
        self.items.iter().map(|(k, meta)| Item { key: k, meta })
    }

    /// All keys in order: the set compared between backups and restores.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &ItemKey> + '_ {
        self.items.keys().map(|k| &**k)
    }

    /// The owners of an item that are in this manifest, in `ownerReferences` order.
    pub fn owners(&self, key: &ItemKey) -> Vec<Item<'_>> {
        let Some(meta) = self.items.get(key) else {
            return Vec::new();
        };
        let mut out: Vec<Item<'_>> = Vec::new();
        for uid in &meta.owners {
            if let Some(owner) = self.by_uid(uid)
                && !out.iter().any(|o| o.key == owner.key)
            {
                out.push(owner);
            }
        }
        out
    }

    /// Owner UIDs of an item that no item in this manifest carries (owner not backed up).
    pub fn missing_owners<'a>(&'a self, key: &ItemKey) -> Vec<&'a str> {
        self.items.get(key).map_or_else(Vec::new, |meta| {
            meta.owners
                .iter()
                .filter(|uid| !self.by_uid.contains_key(uid.as_str()))
                .map(String::as_str)
                .collect()
        })
    }

    /// The items that name this item as an owner, in key order.
    pub fn children(&self, key: &ItemKey) -> Vec<Item<'_>> {
        let Some(meta) = self.items.get(key) else {
            return Vec::new();
        };
        if meta.uid.is_empty() {
            return Vec::new();
        }
        let mut out: Vec<Item<'_>> = self
            .children
            .get(meta.uid.as_str())
            .into_iter()
            .flatten()
            .filter_map(|k| self.get(k))
            .collect();
        out.sort_by(|a, b| a.key.cmp(b.key));
        out
    }

    /// Keys present in both manifests: the overlap of two backups or restores.
    pub fn intersection<'a>(&'a self, other: &'a Manifest) -> Vec<&'a ItemKey> {
        self.keys().filter(|k| other.contains(k)).collect()
    }

    /// Whether any key is in both manifests.
    pub fn overlaps(&self, other: &Manifest) -> bool {
        let (small, large) = if self.len() <= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        small.keys().any(|k| large.contains(k))
    }

    /// Keys in this manifest but not in `other`.
    pub fn difference<'a>(&'a self, other: &'a Manifest) -> Vec<&'a ItemKey> {
        self.keys().filter(|k| !other.contains(k)).collect()
    }

    /// Keys in either manifest, in order, each once.
    pub fn union<'a>(&'a self, other: &'a Manifest) -> Vec<&'a ItemKey> {
        let mut a = self.keys().peekable();
        let mut b = other.keys().peekable();
        let mut out = Vec::with_capacity(self.len().max(other.len()));
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => match x.cmp(y) {
                    std::cmp::Ordering::Less => a.next(),
                    std::cmp::Ordering::Greater => b.next(),
                    std::cmp::Ordering::Equal => {
                        b.next();
                        a.next()
                    }
                },
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            out.extend(next);
        }
        out
    }
}

#[cfg(test)]
mod tests;
