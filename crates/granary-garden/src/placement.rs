//! Where a new BackupEntry goes: first fit over the shards of its pool, in shard order;
//! a full pool gets a new shard. Entries waiting out their deletion grace period still
//! count (their data is still in the bucket). An entry that already has a bucket never
//! moves, so this is only asked for entries without one.

/// What placement needs to know about one shard (one BackupBucket of the pool).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardFill {
    /// The shard number (`…-<shard>` in the bucket name).
    pub shard: u32,
    /// Entries that reference this bucket, including those in their grace period.
    pub entries: u32,
    /// False while the bucket is being deleted: nothing new may go there.
    pub accepting: bool,
}

/// The placement decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Put the entry into this existing shard.
    Existing(u32),
    /// Every shard is full (or none exists): create this shard and put the entry there.
    NewShard(u32),
}

impl Placement {
    pub fn shard(self) -> u32 {
        match self {
            Placement::Existing(s) | Placement::NewShard(s) => s,
        }
    }
}

/// First fit in shard order. `limit` is the per-bucket entry quota of the pool's provider;
/// `None` means unlimited (everything goes to the first accepting shard). A lowered limit
/// never moves entries: a shard above it is simply full. A new shard gets the number after
/// the highest existing one, so it never reuses the name of a bucket being deleted.
pub fn place_entry(shards: &[ShardFill], limit: Option<u32>) -> Placement {
    let mut ordered: Vec<&ShardFill> = shards.iter().collect();
    ordered.sort_by_key(|s| s.shard);
    first_fit(ordered.into_iter().cloned(), limit)
}

/// [`place_entry`] over shards already in shard order, reading them only up to the first
/// with room (the ledger reads them from its index in that order).
pub fn first_fit(shards: impl Iterator<Item = ShardFill>, limit: Option<u32>) -> Placement {
    let mut last = None;
    for s in shards {
        if s.accepting && limit.is_none_or(|l| s.entries < l) {
            return Placement::Existing(s.shard);
        }
        last = Some(s.shard);
    }
    Placement::NewShard(last.map_or(0, |s| s + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shard(shard: u32, entries: u32) -> ShardFill {
        ShardFill {
            shard,
            entries,
            accepting: true,
        }
    }

    #[test]
    fn first_fit_in_shard_order() {
        assert_eq!(place_entry(&[], Some(100)), Placement::NewShard(0));
        assert_eq!(place_entry(&[], None), Placement::NewShard(0));
        let shards = [shard(2, 10), shard(0, 100), shard(1, 99)];
        assert_eq!(place_entry(&shards, Some(100)), Placement::Existing(1));
        assert_eq!(
            place_entry(&[shard(0, 100), shard(1, 100)], Some(100)),
            Placement::NewShard(2)
        );
        assert_eq!(place_entry(&[shard(0, 5000)], None), Placement::Existing(0));
    }

    #[test]
    fn a_lowered_limit_leaves_overfull_shards_alone_and_a_raised_one_is_used_at_once() {
        let shards = [shard(0, 120), shard(1, 30)];
        assert_eq!(place_entry(&shards, Some(50)), Placement::Existing(1));
        assert_eq!(place_entry(&shards, Some(20)), Placement::NewShard(2));
        assert_eq!(place_entry(&shards, Some(200)), Placement::Existing(0));
    }

    #[test]
    fn shards_being_deleted_take_nothing_and_their_numbers_are_not_reused() {
        let shards = [
            shard(0, 10),
            ShardFill {
                shard: 1,
                entries: 0,
                accepting: false,
            },
        ];
        assert_eq!(place_entry(&shards, Some(10)), Placement::NewShard(2));
        assert_eq!(place_entry(&shards, None), Placement::Existing(0));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Placing n entries one by one, starting from any state, never pushes a shard
        /// over the limit, always picks the first shard with room, and ends with
        /// exactly ⌈total/limit⌉ shards when starting empty.
        #[test]
        fn sequential_placement_respects_the_limit(limit in 1u32..20, n in 0u32..200) {
            let mut shards: Vec<ShardFill> = Vec::new();
            for _ in 0..n {
                let p = place_entry(&shards, Some(limit));
                match p {
                    Placement::Existing(s) => {
                        let i = shards.iter().position(|x| x.shard == s).expect("existing shard");
                        prop_assert!(shards[..i].iter().all(|x| x.entries >= limit), "first fit");
                        shards[i].entries += 1;
                    }
                    Placement::NewShard(s) => {
                        prop_assert!(shards.iter().all(|x| x.entries >= limit), "new shard only when full");
                        shards.push(ShardFill { shard: s, entries: 1, accepting: true });
                    }
                }
                prop_assert!(shards.iter().all(|x| x.entries <= limit));
            }
            prop_assert_eq!(shards.len() as u32, n.div_ceil(limit));
        }

        /// From any existing fill (e.g. after deletions freed room in the middle), the
        /// choice is the lowest accepting shard below the limit.
        #[test]
        fn choice_is_the_lowest_shard_with_room(
            fills in proptest::collection::vec((0u32..30, any::<bool>()), 0..12),
            limit in 1u32..25,
        ) {
            let shards: Vec<ShardFill> = fills
                .iter()
                .enumerate()
                .map(|(i, (entries, accepting))| ShardFill { shard: i as u32, entries: *entries, accepting: *accepting })
                .collect();
            let expected = shards.iter().find(|s| s.accepting && s.entries < limit).map(|s| s.shard);
            match place_entry(&shards, Some(limit)) {
                Placement::Existing(s) => prop_assert_eq!(Some(s), expected),
                Placement::NewShard(s) => {
                    prop_assert_eq!(expected, None);
                    prop_assert_eq!(s, shards.len() as u32);
                }
            }
        }
    }
}
