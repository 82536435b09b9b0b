//! Which entries take a place in which bucket, kept up to date from the entry watch, so a
//! recount costs the size of one bucket, not a scan of every entry (with a scan, the
//! per-entry cost of placement grew with the number of entries). The counting rule is
//! [`crate::moves::counts_in`]: the bucket an entry names, and the one holding a place
//! for its move.
//!
//! The index follows the watcher's events as the reflector store does ([`Following`]).

use std::collections::{HashMap, HashSet};

use crate::informers::{Following, Follows};
use crate::ledger::EntryKey;
use crate::moves::reserved_bucket;
use granary_api::core::BackupEntry;

/// Where one entry takes places.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Places {
    /// `spec.bucketName`.
    pub bucket: String,
    /// The bucket holding a place for its move (never the same as `bucket`).
    pub reserved: Option<String>,
}

impl Places {
    pub fn of(entry: &BackupEntry) -> Places {
        Places {
            bucket: entry.spec.bucket_name.clone(),
            reserved: reserved_bucket(entry).map(str::to_string),
        }
    }

    /// [`crate::moves::counts_in`] on the indexed fields.
    pub fn counts_in(&self, bucket: &str) -> bool {
        self.bucket == bucket || self.reserved.as_deref() == Some(bucket)
    }

    fn buckets(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.bucket.as_str())
            .chain(self.reserved.as_deref())
            .filter(|b| !b.is_empty())
    }
}

/// One consistent view: every entry's places, and the entries counting in each bucket.
#[derive(Default, Debug)]
pub struct Index {
    places: HashMap<EntryKey, Places>,
    by_bucket: HashMap<String, HashSet<EntryKey>>,
}

impl Index {
    /// Records `key` at `places` (replacing where it was).
    pub fn apply(&mut self, key: EntryKey, places: Places) {
        if self.places.get(&key) == Some(&places) {
            return;
        }
        self.remove(&key);
        for bucket in places.buckets() {
            self.by_bucket
                .entry(bucket.to_string())
                .or_default()
                .insert(key.clone());
        }
        self.places.insert(key, places);
    }

    /// Forgets `key`.
    pub fn remove(&mut self, key: &EntryKey) {
        let Some(old) = self.places.remove(key) else {
            return;
        };
        for bucket in old.buckets() {
            if let Some(set) = self.by_bucket.get_mut(bucket) {
                set.remove(key);
                if set.is_empty() {
                    self.by_bucket.remove(bucket);
                }
            }
        }
    }

    /// Where `key` takes places, if the index has it.
    pub fn places(&self, key: &EntryKey) -> Option<&Places> {
        self.places.get(key)
    }

    /// The entries counting in `bucket`.
    pub fn in_bucket(&self, bucket: &str) -> impl Iterator<Item = &EntryKey> {
        self.by_bucket.get(bucket).into_iter().flatten()
    }

    /// How many entries count in `bucket`.
    pub fn count_in(&self, bucket: &str) -> usize {
        self.by_bucket.get(bucket).map_or(0, HashSet::len)
    }

    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }
}

/// Every entry's places, following the entry watch.
pub type EntryIndex = Following<Index>;

fn key_of(entry: &BackupEntry) -> EntryKey {
    (
        entry.metadata.namespace.clone().unwrap_or_default(),
        entry.metadata.name.clone().unwrap_or_default(),
    )
}

impl Follows<BackupEntry> for Index {
    fn follow_apply(&mut self, entry: &BackupEntry) {
        self.apply(key_of(entry), Places::of(entry));
    }

    fn follow_delete(&mut self, entry: &BackupEntry) {
        self.remove(&key_of(entry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::core::{ANNOTATION_MIGRATION_RESERVED, BackupEntrySpec};
    use kube::runtime::watcher::Event;

    fn entry(name: &str, bucket: &str, reserved: Option<&str>) -> BackupEntry {
        let mut e = BackupEntry::new(
            name,
            BackupEntrySpec {
                bucket_name: bucket.into(),
                ..BackupEntrySpec::default()
            },
        );
        e.metadata.namespace = Some("ns".into());
        if let Some(r) = reserved {
            e.metadata.annotations = Some(
                [(ANNOTATION_MIGRATION_RESERVED.to_string(), r.to_string())]
                    .into_iter()
                    .collect(),
            );
        }
        e
    }

    fn counts(index: &EntryIndex, bucket: &str) -> usize {
        index.read(|i| i.count_in(bucket))
    }

    #[test]
    fn applies_moves_and_deletes_keep_per_bucket_counts() {
        let index = EntryIndex::default();
        index.observe(&Event::Apply(entry("a", "b-0", None)));
        index.observe(&Event::Apply(entry("b", "b-0", None)));
        index.observe(&Event::Apply(entry("a", "b-0", None)));
        assert_eq!(counts(&index, "b-0"), 2);
        // A place held for a move counts in both buckets; the mark naming its own
        // bucket counts once.
        index.observe(&Event::Apply(entry("a", "b-0", Some("b-1"))));
        index.observe(&Event::Apply(entry("b", "b-0", Some("b-0"))));
        assert_eq!((counts(&index, "b-0"), counts(&index, "b-1")), (2, 1));
        // Moved: only the new bucket.
        index.observe(&Event::Apply(entry("a", "b-1", None)));
        assert_eq!((counts(&index, "b-0"), counts(&index, "b-1")), (1, 1));
        index.observe(&Event::Delete(entry("b", "b-0", None)));
        assert_eq!(counts(&index, "b-0"), 0);
        index.read(|i| {
            assert_eq!(i.len(), 1);
            assert_eq!(
                i.places(&("ns".into(), "a".into())),
                Some(&Places {
                    bucket: "b-1".into(),
                    reserved: None
                })
            );
            assert_eq!(i.in_bucket("b-1").count(), 1);
        });
    }

    #[test]
    fn a_relist_replaces_the_index_at_init_done_only() {
        let index = EntryIndex::default();
        index.observe(&Event::Apply(entry("gone", "b-0", None)));
        index.observe(&Event::Init);
        index.observe(&Event::InitApply(entry("x", "b-1", None)));
        // Until the relist is complete the old view stays.
        assert_eq!((counts(&index, "b-0"), counts(&index, "b-1")), (1, 0));
        index.observe(&Event::InitDone);
        assert_eq!((counts(&index, "b-0"), counts(&index, "b-1")), (0, 1));
    }

    /// The index agrees with a full scan using the counting rule after any sequence of
    /// changes.
    #[test]
    fn agrees_with_a_scan() {
        use proptest::prelude::*;
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(64));
        let op = (0u8..6, 0u8..3, proptest::option::of(0u8..3), any::<bool>());
        runner
            .run(&proptest::collection::vec(op, 0..60), |ops| {
                let index = EntryIndex::default();
                let mut truth: HashMap<String, BackupEntry> = HashMap::new();
                for (name, bucket, reserved, delete) in ops {
                    let name = format!("e{name}");
                    let reserved = reserved.map(|r| format!("b-{r}"));
                    let e = entry(&name, &format!("b-{bucket}"), reserved.as_deref());
                    if delete {
                        truth.remove(&name);
                        index.observe(&Event::Delete(e));
                    } else {
                        truth.insert(name, e.clone());
                        index.observe(&Event::Apply(e));
                    }
                }
                for b in ["b-0", "b-1", "b-2"] {
                    let scanned = truth
                        .values()
                        .filter(|e| crate::moves::counts_in(e, b))
                        .count();
                    prop_assert_eq!(counts(&index, b), scanned);
                }
                Ok(())
            })
            .expect("index agrees with a scan");
    }
}
