//! The manifest of a backup while its tarball is written, at any size: each item's
//! stored record goes to a spill file as the item is added, and memory keeps only what
//! refusing duplicates and writing the records back in key order need.
//!
//! Per item that is its key in a [`KeySet`] (16 bytes and the name), a head of 32 bytes
//! (where the record is, its `<apiVersion>/<Kind>` as an index, its UID in 16 bytes when
//! it is a UUID) and a slot in a hash table of UIDs holding head indices. Labels,
//! annotations and owners are only in the spill file. A backup of a million items keeps
//! about 100 MiB, where a [`Manifest`] would hold more than a kilobyte per item.
//!
//! [`ManifestSpool::write_gz`] writes the same bytes [`Manifest::write_gz`] writes for
//! the same items, and [`ManifestSpool::write_resource_list_gz`] the same JSON as
//! [`crate::files::ResourceList`] (checked by `archive::tests::write_then_read_round_trips`).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use flate2::Compression;
use flate2::write::GzEncoder;
use hashbrown::HashTable;

use super::keys::KeySet;
use super::store::{ItemRecord, MANIFEST_SCHEMA_VERSION};
use super::uid::Uid;
use super::{ItemKey, Manifest, ManifestError, ManifestItem};
use crate::archive::json::write_compact_typed;

/// Where one item is (see the module docs); its key is the same index in the
/// [`KeySet`].
#[derive(Debug)]
struct Head {
    /// Where its record starts; it ends where the next item's starts (the records are
    /// written one after the other).
    record_at: u64,
    /// Its `<apiVersion>/<Kind>`, the resource list's key, as an index.
    list_key: u32,
    uid: Slot,
}

/// An item's UID as a head keeps it.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Empty,
    Uuid([u8; 16]),
    /// Any other text, in the arena.
    Text {
        at: u32,
        len: u32,
    },
}

/// A backup's manifest, spilled to a file as items are added.
///
/// The UID index is a hashbrown `HashTable` of head indices, compared through the heads,
/// for the reason [`KeySet`] gives.
pub struct ManifestSpool {
    keys: KeySet,
    list_keys: Vec<Box<str>>,
    list_key_index: HashMap<Box<str>, u32>,
    /// Non-UUID UIDs.
    arena: Vec<u8>,
    heads: Vec<Head>,
    by_uid: HashTable<u32>,
    hasher: RandomState,
    records: BufWriter<File>,
    spilled: u64,
    /// Set when a write to the spill file failed: its offsets can no longer be trusted.
    broken: bool,
    scratch: String,
    record: Vec<u8>,
}

impl std::fmt::Debug for ManifestSpool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManifestSpool")
            .field("items", &self.heads.len())
            .field("spilled", &self.spilled)
            .finish()
    }
}

fn too_large() -> ManifestError {
    ManifestError::Io(std::io::Error::other(
        "the manifest's names exceed 4 GiB: the backup is too large",
    ))
}

impl ManifestSpool {
    /// A spool whose records go to a new anonymous temporary file (removed when the
    /// spool is dropped).
    pub fn new() -> Result<Self, ManifestError> {
        Ok(Self::in_file(tempfile::tempfile()?))
    }

    /// A spool writing its records to `file` (empty, readable and writable).
    pub fn in_file(file: File) -> Self {
        Self {
            keys: KeySet::new(),
            list_keys: Vec::new(),
            list_key_index: HashMap::new(),
            arena: Vec::new(),
            heads: Vec::new(),
            by_uid: HashTable::new(),
            hasher: RandomState::new(),
            records: BufWriter::with_capacity(64 * 1024, file),
            spilled: 0,
            broken: false,
            scratch: String::new(),
            record: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    fn text(&self, at: u32, len: u32) -> &str {
        let bytes = &self.arena[at as usize..at as usize + len as usize];
        // Only whole `&str`s are pushed into the arena.
        std::str::from_utf8(bytes).expect("the arena holds whole strings")
    }

    fn item_key(&self, i: u32) -> ItemKey {
        let (group, resource, namespace, name) = self.keys.get(i);
        ItemKey {
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn uid_text(&self, slot: Slot) -> String {
        match slot {
            Slot::Empty => String::new(),
            Slot::Uuid(b) => Uid::Uuid(b).to_string(),
            Slot::Text { at, len } => self.text(at, len).to_owned(),
        }
    }

    fn list_key_of(&mut self, item: &ManifestItem) -> u32 {
        // `join_api_version`, without a string per item.
        self.scratch.clear();
        if !item.group.is_empty() {
            self.scratch.push_str(&item.group);
            self.scratch.push('/');
        }
        self.scratch.push_str(&item.version);
        self.scratch.push('/');
        self.scratch.push_str(&item.kind);
        if let Some(&i) = self.list_key_index.get(self.scratch.as_str()) {
            return i;
        }
        let i = self.list_keys.len() as u32;
        self.list_keys.push(self.scratch.as_str().into());
        self.list_key_index.insert(self.scratch.as_str().into(), i);
        i
    }

    /// Adds an item, refusing a key already present and a non-empty UID another item
    /// has, as [`Manifest::add`] does; on refusal nothing is kept or written.
    ///
    /// An I/O error writing the spill file ([`ManifestError::Io`]) breaks the spool:
    /// every later call fails with it.
    pub fn add(&mut self, item: &ManifestItem) -> Result<(), ManifestError> {
        self.check()?;
        let key = (
            item.group.as_str(),
            item.resource.as_str(),
            item.namespace.as_str(),
            item.name.as_str(),
        );
        if self.keys.contains(key) {
            return Err(ManifestError::ItemAlreadyExists(Box::new(item.key())));
        }
        let uid = Uid::parse(&item.uid);
        let uid_hash = self.hasher.hash_one(&uid);
        if !item.uid.is_empty()
            && let Some(&existing) = self.by_uid.find(uid_hash, |&i| {
                self.uid_text(self.heads[i as usize].uid) == item.uid
            })
        {
            return Err(ManifestError::DuplicateUid {
                uid: item.uid.clone(),
                existing: Box::new(self.item_key(existing)),
                new: Box::new(item.key()),
            });
        }

        // Everything that can refuse comes before anything is kept: a head's record
        // ends where the next one's starts, so no record may be written without its
        // head, nor a key kept without both.
        self.record.clear();
        serde_json::to_writer(&mut self.record, &ItemRecord::of_owned(item))?;
        let text_uid = match &uid {
            Uid::Text(t) if !t.is_empty() => {
                let at = u32::try_from(self.arena.len()).map_err(|_| too_large())?;
                let len = u32::try_from(t.len()).map_err(|_| too_large())?;
                at.checked_add(len).ok_or_else(too_large)?;
                Some(Slot::Text { at, len })
            }
            _ => None,
        };
        let index = self
            .keys
            .insert(key)
            .map_err(|e| ManifestError::Io(std::io::Error::other(e)))?
            .expect("checked absent above");
        let record_at = self.spilled;
        if let Err(e) = self.records.write_all(&self.record) {
            // The key is kept without a head: nothing may use the spool any more.
            self.broken = true;
            return Err(e.into());
        }
        self.spilled += self.record.len() as u64;
        let list_key = self.list_key_of(item);
        let uid = match uid {
            Uid::Uuid(b) => Slot::Uuid(b),
            Uid::Text(t) => match text_uid {
                Some(slot) => {
                    self.arena.extend_from_slice(t.as_bytes());
                    slot
                }
                None => Slot::Empty,
            },
        };
        self.heads.push(Head {
            record_at,
            list_key,
            uid,
        });
        if !matches!(uid, Slot::Empty) {
            let Self {
                heads,
                arena,
                hasher,
                by_uid,
                ..
            } = self;
            by_uid.insert_unique(uid_hash, index, |&i| {
                let uid = match heads[i as usize].uid {
                    Slot::Uuid(b) => Uid::Uuid(b),
                    Slot::Text { at, len } => Uid::Text(
                        std::str::from_utf8(&arena[at as usize..(at + len) as usize])
                            .expect("the arena holds whole strings")
                            .into(),
                    ),
                    Slot::Empty => Uid::Text("".into()),
                };
                hasher.hash_one(&uid)
            });
        }
        Ok(())
    }

    fn check(&self) -> Result<(), ManifestError> {
        if self.broken {
            return Err(ManifestError::Io(std::io::Error::other(
                "an earlier write to the manifest's spill file failed",
            )));
        }
        Ok(())
    }

    /// Makes every record written readable from the spill file.
    fn flush(&mut self) -> Result<(), ManifestError> {
        self.check()?;
        if let Err(e) = self.records.flush() {
            self.broken = true;
            return Err(e.into());
        }
        Ok(())
    }

    /// Head indices in the manifest's item order (group, resource, namespace, name).
    fn key_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.heads.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.keys.get(a).cmp(&self.keys.get(b)));
        order
    }

    /// Reads the record of the `i`th item into `buf`.
    fn record(&self, i: usize, buf: &mut Vec<u8>) -> Result<(), ManifestError> {
        let at = self.heads[i].record_at;
        let end = self
            .heads
            .get(i + 1)
            .map_or(self.spilled, |next| next.record_at);
        buf.resize((end - at) as usize, 0);
        self.records.get_ref().read_exact_at(buf, at)?;
        Ok(())
    }

    /// Writes the stored manifest (`manifest.json.gz`): the bytes [`Manifest::write_gz`]
    /// writes for the same items, once decompressed. Compressed at gzip's fastest level,
    /// as is the resource list: both are written after the tarball, so compressing them
    /// is time the backup waits for, and they are a small part of what it stores.
    pub fn write_gz<W: Write>(&mut self, out: W) -> Result<W, ManifestError> {
        self.flush()?;
        let mut gz = GzEncoder::new(out, Compression::fast());
        write!(gz, "{{\"version\":{MANIFEST_SCHEMA_VERSION},\"items\":[")?;
        let mut buf = Vec::new();
        for (n, i) in self.key_order().into_iter().enumerate() {
            if n > 0 {
                gz.write_all(b",")?;
            }
            self.record(i as usize, &mut buf)?;
            gz.write_all(&buf)?;
        }
        gz.write_all(b"]}")?;
        Ok(gz.finish()?)
    }

    /// The resource list (`<name>-resource-list.json.gz`) of the items: the bytes
    /// [`crate::files::ResourceList::to_gz_bytes`] makes of this manifest (decompressed),
    /// written
    /// without building its sets of strings.
    pub fn write_resource_list_gz<W: Write>(&mut self, out: W) -> Result<W, ManifestError> {
        let entry = |i: u32| {
            let (_, _, ns, name) = self.keys.get(i);
            let sep: &[u8] = if ns.is_empty() { b"" } else { b"/" };
            ns.as_bytes()
                .iter()
                .chain(sep)
                .chain(name.as_bytes())
                .copied()
        };
        let list_key = |i: u32| &self.list_keys[self.heads[i as usize].list_key as usize];
        let mut order: Vec<u32> = (0..self.heads.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            list_key(a)
                .cmp(list_key(b))
                .then_with(|| entry(a).cmp(entry(b)))
        });
        let mut gz = GzEncoder::new(out, Compression::fast());
        gz.write_all(b"{")?;
        let mut previous: Option<u32> = None;
        for i in order {
            let key = list_key(i);
            let same_key = previous.is_some_and(|p| list_key(p) == key);
            if same_key && previous.is_some_and(|p| entry(p).cmp(entry(i)) == Ordering::Equal) {
                continue;
            }
            if !same_key {
                if previous.is_some() {
                    gz.write_all(b"],")?;
                }
                write_compact_typed(&mut gz, &**key)?;
                gz.write_all(b":[")?;
            } else {
                gz.write_all(b",")?;
            }
            let (_, _, ns, name) = self.keys.get(i);
            let entry_text = if ns.is_empty() {
                name.to_owned()
            } else {
                format!("{ns}/{name}")
            };
            write_compact_typed(&mut gz, entry_text.as_str())?;
            previous = Some(i);
        }
        if previous.is_some() {
            gz.write_all(b"]")?;
        }
        gz.write_all(b"}\n")?;
        Ok(gz.finish()?)
    }

    /// The whole manifest in memory, read back from the spill file (for tools and
    /// tests; a backup never needs it).
    pub fn to_manifest(&mut self) -> Result<Manifest, ManifestError> {
        self.flush()?;
        let mut manifest = Manifest::new();
        let mut buf = Vec::new();
        for i in 0..self.heads.len() {
            self.record(i, &mut buf)?;
            manifest.add(serde_json::from_slice::<ManifestItem>(&buf)?)?;
        }
        Ok(manifest)
    }
}
