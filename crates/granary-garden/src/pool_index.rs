//! The buckets of every pool in shard order, kept up to date from the bucket watch.
//! Placement reads one pool's shards for every entry it places without a spare place,
//! and the owners' reconciles read their pools after every bucket change. Both used to
//! scan every bucket in the cache and parse each one's pool record: at 100,000 shoots
//! (1,000 buckets) that was a tenth of the garden's CPU in a cold start.
//!
//! The index follows the watcher's events as the reflector store does ([`Following`]).
//! A bucket's place is read once per event with [`place_of`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::buckets::place_of;
use crate::informers::{Following, Follows};
use crate::pools::PoolKey;
use granary_api::core::BackupBucket;

/// A bucket's position in its pool: shard number (unnumbered last), then name.
type Slot = (u32, String);

/// One pool's buckets with their shard numbers, by position.
type Pool = BTreeMap<Slot, (Option<u32>, Arc<BackupBucket>)>;

/// One consistent view of every pool.
#[derive(Default, Debug)]
pub struct Pools {
    by_pool: HashMap<PoolKey, Pool>,
    /// Where each bucket is, to move or drop it on its next event.
    where_is: HashMap<String, (PoolKey, Slot)>,
}

impl Pools {
    /// Records the bucket's current version (in its pool, if it has one).
    pub fn apply(&mut self, bucket: &BackupBucket) {
        let Some(name) = bucket.metadata.name.clone() else {
            return;
        };
        self.remove(&name);
        let Some((key, shard)) = place_of(bucket) else {
            return;
        };
        let slot = (shard.unwrap_or(u32::MAX), name.clone());
        self.by_pool
            .entry(key.clone())
            .or_default()
            .insert(slot.clone(), (shard, Arc::new(bucket.clone())));
        self.where_is.insert(name, (key, slot));
    }

    /// Forgets bucket `name`.
    pub fn remove(&mut self, name: &str) {
        let Some((key, slot)) = self.where_is.remove(name) else {
            return;
        };
        if let Some(pool) = self.by_pool.get_mut(&key) {
            pool.remove(&slot);
            if pool.is_empty() {
                self.by_pool.remove(&key);
            }
        }
    }

    /// Bucket `name`, if it is in a pool.
    pub fn get(&self, name: &str) -> Option<&Arc<BackupBucket>> {
        let (key, slot) = self.where_is.get(name)?;
        self.by_pool.get(key)?.get(slot).map(|(_, b)| b)
    }

    /// The buckets of pool `key` with their shard numbers, in shard order (then name).
    pub fn shards(&self, key: &PoolKey) -> impl Iterator<Item = &(Option<u32>, Arc<BackupBucket>)> {
        self.by_pool.get(key).into_iter().flat_map(BTreeMap::values)
    }

    /// Every pool of `kind` owned by `owner`, with its buckets.
    pub fn of_owner<'a>(
        &'a self,
        kind: crate::pools::PoolKind,
        owner: &'a str,
    ) -> impl Iterator<Item = (&'a PoolKey, impl Iterator<Item = &'a Arc<BackupBucket>>)> {
        self.by_pool
            .iter()
            .filter(move |(key, _)| key.kind == kind && key.owner == owner)
            .map(|(key, pool)| (key, pool.values().map(|(_, b)| b)))
    }

    /// Every pool with its number of buckets.
    pub fn sizes(&self) -> impl Iterator<Item = (&PoolKey, usize)> {
        self.by_pool.iter().map(|(key, pool)| (key, pool.len()))
    }
}

/// Every pool's buckets, following the bucket watch.
pub type PoolIndex = Following<Pools>;

impl Follows<BackupBucket> for Pools {
    fn follow_apply(&mut self, bucket: &BackupBucket) {
        self.apply(bucket);
    }

    fn follow_delete(&mut self, bucket: &BackupBucket) {
        if let Some(name) = &bucket.metadata.name {
            self.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buckets::{PoolSource, new_shard_bucket};
    use crate::pools::PoolKind;
    use kube::runtime::watcher::Event;

    fn key(owner: &str) -> PoolKey {
        PoolKey {
            kind: PoolKind::CloudProfile,
            owner: owner.into(),
            region: "eu-1".into(),
        }
    }

    fn bucket(owner: &str, shard: u32) -> BackupBucket {
        let source = PoolSource {
            key: key(owner),
            owner_uid: format!("{owner}-uid"),
            provider: "aws".into(),
            credentials: None,
            provider_config: None,
        };
        new_shard_bucket(&source, shard, None, &Default::default())
    }

    fn names(index: &PoolIndex, owner: &str) -> Vec<(Option<u32>, String)> {
        index.read(|p| {
            p.shards(&key(owner))
                .map(|(shard, b)| (*shard, b.metadata.name.clone().unwrap_or_default()))
                .collect()
        })
    }

    #[test]
    fn shards_come_in_shard_order_per_pool_and_follow_changes() {
        let index = PoolIndex::default();
        let (a10, a2, b0) = (bucket("a", 10), bucket("a", 2), bucket("b", 0));
        for b in [&a10, &a2, &b0] {
            index.observe(&Event::Apply(b.clone()));
        }
        let name = |b: &BackupBucket| b.metadata.name.clone().unwrap();
        assert_eq!(
            names(&index, "a"),
            [(Some(2), name(&a2)), (Some(10), name(&a10))],
            "by number, not by name"
        );
        assert_eq!(names(&index, "b"), [(Some(0), name(&b0))]);
        // A newer version replaces the older one; a deleted bucket leaves its pool.
        let mut counted = a2.clone();
        counted.status = Some(Default::default());
        index.observe(&Event::Apply(counted));
        index.observe(&Event::Delete(b0.clone()));
        assert!(index.read(|p| p.shards(&key("a")).next().unwrap().1.status.is_some()));
        assert!(names(&index, "b").is_empty());
        assert!(index.read(|p| p.get(&name(&b0)).is_none()));
        assert!(index.read(|p| p.get(&name(&a10)).is_some()));
        assert_eq!(
            index.read(|p| p
                .sizes()
                .map(|(k, n)| (k.owner.clone(), n))
                .collect::<Vec<_>>()),
            [("a".to_string(), 2)]
        );
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_is_complete() {
        let index = PoolIndex::default();
        let (a0, a1) = (bucket("a", 0), bucket("a", 1));
        index.observe(&Event::Apply(a0.clone()));
        index.observe(&Event::Init);
        index.observe(&Event::InitApply(a1.clone()));
        assert_eq!(names(&index, "a").len(), 1, "the old view until InitDone");
        assert_eq!(names(&index, "a")[0].0, Some(0));
        index.observe(&Event::InitDone);
        assert_eq!(
            names(&index, "a"),
            [(Some(1), a1.metadata.name.clone().unwrap())]
        );
    }
}
