//! An exact set of item keys (group, resource, namespace, name) for backups of any size:
//! what a `HashSet<ItemKey>` answers, in about 16 bytes and the name per key.
//!
//! Resources and namespaces are few, so each is kept once in a table and a key holds
//! their indices; names go into one text arena. The hash table holds key indices and
//! compares through the tables. The std `HashSet` cannot look a key up by something
//! other than the stored value, so this is a hashbrown `HashTable`: a set of the keys
//! themselves is what this type exists to avoid.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use hashbrown::HashTable;

/// One key's place in the tables.
#[derive(Debug, Clone, Copy)]
struct Packed {
    group_resource: u32,
    namespace: u32,
    name_at: u32,
    name_len: u32,
}

/// The set of keys.
#[derive(Default)]
pub struct KeySet {
    /// Few (a backup's resources), and items come in runs of one resource: found by
    /// trying the last one, then a scan.
    group_resources: Vec<(Box<str>, Box<str>)>,
    last_group_resource: u32,
    namespaces: Vec<Box<str>>,
    namespace_index: HashMap<Box<str>, u32>,
    arena: Vec<u8>,
    keys: Vec<Packed>,
    table: HashTable<u32>,
    hasher: RandomState,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet")
            .field("keys", &self.keys.len())
            .finish()
    }
}

/// The set's names passed 4 GiB, or its keys 2³² (no backup comes near).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("more item names than one backup can index (4 GiB)")]
pub struct KeySetFull;

type Key<'a> = (&'a str, &'a str, &'a str, &'a str);

impl KeySet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key with index `i` (indices count insertions from 0).
    pub fn get(&self, i: u32) -> Key<'_> {
        key_of(
            &self.group_resources,
            &self.namespaces,
            &self.arena,
            self.keys[i as usize],
        )
    }

    /// Whether the key is in the set.
    pub fn contains(&self, key: Key<'_>) -> bool {
        self.find(self.hasher.hash_one(key), key).is_some()
    }

    fn find(&self, hash: u64, key: Key<'_>) -> Option<u32> {
        self.table.find(hash, |&i| self.get(i) == key).copied()
    }

    /// Adds a key: its new index, or `None` when it was already there.
    pub fn insert(&mut self, key: Key<'_>) -> Result<Option<u32>, KeySetFull> {
        let hash = self.hasher.hash_one(key);
        if self.find(hash, key).is_some() {
            return Ok(None);
        }
        let (group, resource, namespace, name) = key;
        let index = u32::try_from(self.keys.len()).map_err(|_| KeySetFull)?;
        let name_at = u32::try_from(self.arena.len()).map_err(|_| KeySetFull)?;
        let name_len = u32::try_from(name.len()).map_err(|_| KeySetFull)?;
        name_at.checked_add(name_len).ok_or(KeySetFull)?;
        let is = |gr: &(Box<str>, Box<str>)| &*gr.0 == group && &*gr.1 == resource;
        let group_resource = match self.group_resources.get(self.last_group_resource as usize) {
            Some(gr) if is(gr) => self.last_group_resource,
            _ => match self.group_resources.iter().position(is) {
                Some(i) => i as u32,
                None => {
                    self.group_resources.push((group.into(), resource.into()));
                    (self.group_resources.len() - 1) as u32
                }
            },
        };
        self.last_group_resource = group_resource;
        let namespace = match self.namespace_index.get(namespace) {
            Some(&i) => i,
            None => {
                let i = self.namespaces.len() as u32;
                self.namespaces.push(namespace.into());
                self.namespace_index.insert(namespace.into(), i);
                i
            }
        };
        self.arena.extend_from_slice(name.as_bytes());
        self.keys.push(Packed {
            group_resource,
            namespace,
            name_at,
            name_len,
        });
        let Self {
            group_resources,
            namespaces,
            arena,
            keys,
            table,
            hasher,
            ..
        } = self;
        table.insert_unique(hash, index, |&i| {
            hasher.hash_one(key_of(group_resources, namespaces, arena, keys[i as usize]))
        });
        Ok(Some(index))
    }
}

fn key_of<'a>(
    group_resources: &'a [(Box<str>, Box<str>)],
    namespaces: &'a [Box<str>],
    arena: &'a [u8],
    k: Packed,
) -> Key<'a> {
    let (group, resource) = &group_resources[k.group_resource as usize];
    let name = &arena[k.name_at as usize..(k.name_at + k.name_len) as usize];
    (
        group,
        resource,
        &namespaces[k.namespace as usize],
        // Only whole `&str`s are pushed into the arena.
        std::str::from_utf8(name).expect("the arena holds whole names"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    proptest::proptest! {
        /// The set answers as a `HashSet` of the same keys does, and gives each key back.
        #[test]
        fn answers_as_a_hash_set_of_the_keys(
            keys in proptest::collection::vec(
                (0..3usize, 0..3usize, "[a-c]{0,2}", "[a-c/]{0,3}"), 0..200)
        ) {
            let groups = ["", "apps", "a"];
            let resources = ["pods", "configmaps", "s"];
            let mut set = KeySet::new();
            let mut model = HashSet::new();
            for (g, r, ns, name) in &keys {
                let key = (groups[*g], resources[*r], ns.as_str(), name.as_str());
                let added = set.insert(key).expect("room");
                proptest::prop_assert_eq!(added.is_some(), model.insert(key));
                if let Some(i) = added {
                    proptest::prop_assert_eq!(set.get(i), key);
                }
                proptest::prop_assert!(set.contains(key));
            }
            proptest::prop_assert_eq!(set.len(), model.len());
        }
    }
}
