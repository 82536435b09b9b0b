//! The placement ledger: the I/O side of quota sharding (see
//! docs/architecture.md#placement-stays-within-quota). Per pool, one lock serialises this
//! process' placements, recounts and shard removals; across processes (restarts, a leader
//! hand-over) the compare-and-swap on a bucket's `status.entryCount` (a status patch
//! carrying the resourceVersion; 409 → recompute) keeps every shard within its limit. A
//! placement raises the count *before* the entry is written, so a crash in between can
//! only leave a count too high, never too low; recounts (at start-up and whenever an
//! entry changes) re-derive the exact count from the entry cache plus the entries this
//! process has placed but the cache has not shown yet. A moving entry's place in its
//! migration target is held the same way ([`Ledger::reserve`], [`crate::moves`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::assignment::{Assignment, SeedCandidate, assign_bucket};
use crate::buckets::{PoolSource, new_shard_bucket, pool_of, recorded_count, shard_of};
use crate::context::{Context, GardenError};
use crate::placement::{Placement, ShardFill, first_fit};
use crate::pools::{PoolKey, PoolKind};
use granary_api::core::{BackupBucket, velero_reader_label};

/// An entry by namespace and name.
pub type EntryKey = (String, String);

/// How often placement recomputes after conflicts before giving up (and requeueing).
const MAX_ATTEMPTS: u32 = 64;
/// How long an entry this process placed may stay unseen by the cache before recounts
/// stop counting it (its create failed in a way this process did not see).
const PENDING_TTL: Duration = Duration::from_secs(120);
/// The most places one compare-and-swap reserves for a burst of new entries. With the
/// default quota of 100 a bucket fills in two writes (64 + 36; with 32 it took four).
/// Places reserved and not handed out are counted until they expire ([`SPARE_TTL`]) or
/// a recount gives them back, so a crash leaves a count too high, never too low.
const MAX_BATCH: u32 = 64;
/// How long places reserved ahead stay held for the entries waiting for them; once
/// expired they are no longer handed out nor counted, so the next recount gives them
/// back.
const SPARE_TTL: Duration = Duration::from_secs(10);

/// Places in one bucket reserved ahead (counted in its `status.entryCount`) and not
/// handed to an entry yet.
struct Spare {
    shard: u32,
    places: u32,
    /// The batch asked for when these places were reserved (before the bucket's room
    /// cut it), which the next batch doubles once these are all handed out.
    wanted: u32,
    since: Instant,
}

impl Spare {
    fn live(&self) -> bool {
        self.places > 0 && self.since.elapsed() < SPARE_TTL
    }
}

struct Pending {
    bucket: String,
    since: Instant,
}

/// What this process knows about one pool beyond the cache.
#[derive(Default)]
struct Book {
    /// The latest version of a shard this process wrote or fetched (the cache may lag).
    latest: HashMap<String, Arc<BackupBucket>>,
    /// Entries placed here whose creation the entry cache has not shown yet.
    pending: HashMap<EntryKey, Pending>,
    /// Moving entries whose held place was given back here while the cache may still
    /// show them marked as holding it.
    released: HashMap<EntryKey, Pending>,
    /// Places reserved ahead by one compare-and-swap for a burst of placements, by bucket
    /// name: one write per burst instead of one per entry.
    spare: HashMap<String, Spare>,
    /// The batch whose places were all handed out before they expired, if the last one
    /// was (the burst goes on: the next batch doubles it, see [`batch_size`]).
    used_up: Option<u32>,
}

impl Book {
    /// Forgets expired spare places (a recount gives them back) and returns the buckets
    /// that held them; a batch that expired unused ends the burst.
    fn drop_expired_spares(&mut self) -> Vec<String> {
        let expired: Vec<String> = self
            .spare
            .iter()
            .filter(|(_, s)| !s.live())
            .map(|(name, _)| name.clone())
            .collect();
        if !expired.is_empty() {
            self.spare.retain(|_, s| s.live());
            self.used_up = None;
        }
        expired
    }
}

/// The garden's answer to a moving entry's request for a place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// The place is held; the bucket is in this pool.
    Held(PoolKey),
    /// Why not.
    Refused(String),
}

/// Per-pool books behind per-pool locks.
#[derive(Default)]
pub struct Ledger {
    books: std::sync::Mutex<HashMap<PoolKey, Arc<tokio::sync::Mutex<Book>>>>,
    /// Per pool, how many placements wait for its book: a placement reserves places
    /// for them too.
    waiting: std::sync::Mutex<HashMap<PoolKey, Arc<AtomicU32>>>,
}

/// Leaves the waiting count when dropped (also when the placement is cancelled).
struct Waiting(Arc<AtomicU32>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

impl Ledger {
    fn book(&self, key: &PoolKey) -> Arc<tokio::sync::Mutex<Book>> {
        let mut books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        books.entry(key.clone()).or_default().clone()
    }

    fn waiting(&self, key: &PoolKey) -> Waiting {
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let counter = waiting.entry(key.clone()).or_default().clone();
        counter.fetch_add(1, Ordering::SeqCst);
        Waiting(counter)
    }

    /// Hands out a place reserved ahead, lowest shard first; forgets expired ones and
    /// those of buckets being deleted.
    fn take_spare(ctx: &Context, book: &mut Book) -> Option<String> {
        book.drop_expired_spares();
        book.spare.retain(|name, _| {
            book.latest
                .get(name)
                .cloned()
                .or_else(|| ctx.stores.buckets.get(&ObjectRef::new(name)))
                .is_some_and(|b| b.meta().deletion_timestamp.is_none())
        });
        let (name, spare) = book.spare.iter_mut().min_by_key(|(_, s)| s.shard)?;
        spare.places -= 1;
        let name = name.clone();
        if spare.places == 0 {
            book.used_up = Some(spare.wanted);
            book.spare.remove(&name);
        }
        Some(name)
    }

    fn api(ctx: &Context) -> Api<BackupBucket> {
        Api::all(ctx.client.clone())
    }

    /// Runs `read` over the pool's shards with their numbers: the cache's pool index
    /// overlaid with this process' newer copies, in shard order (then name), inside one
    /// view of the index. Placement reads them for every count write; `read` may stop
    /// early (first fit stops at the first shard with room), and nothing is copied:
    /// copying the pool's 1,000 shards and looking each up in the overlay by name cost a
    /// tenth of the garden's CPU in a cold start of 100,000 shoots.
    ///
    /// First forgets the newer copies the index has caught up with (it shows the same
    /// resourceVersion): the overlay holds only what the cache does not show yet, a few
    /// buckets, merged in by position.
    fn with_shards<R>(
        ctx: &Context,
        key: &PoolKey,
        book: &mut Book,
        read: impl FnOnce(&mut dyn Iterator<Item = (Option<u32>, &Arc<BackupBucket>)>) -> R,
    ) -> R {
        let latest = &mut book.latest;
        ctx.stores.pools.read(|pools| {
            latest.retain(|name, b| {
                pools
                    .get(name)
                    .is_none_or(|cached| cached.resource_version() != b.resource_version())
            });
            let position = |shard: Option<u32>, b: &BackupBucket| {
                (
                    shard.unwrap_or(u32::MAX),
                    b.metadata.name.clone().unwrap_or_default(),
                )
            };
            let mut newer: Vec<Positioned<'_>> = latest
                .values()
                .map(|b| {
                    let shard = shard_of(b);
                    (position(shard, b), shard, b)
                })
                .collect();
            newer.sort_by(|a, b| a.0.cmp(&b.0));
            let mut merged = MergeByPosition {
                cached: pools.shards(key).peekable(),
                newer: newer.into_iter().peekable(),
            };
            read(&mut merged)
        })
    }

    /// Fetches a fresh copy of `name` into the book (or forgets it when gone).
    async fn refresh(ctx: &Context, book: &mut Book, name: &str) -> Result<(), GardenError> {
        match Self::api(ctx).get_opt(name).await? {
            Some(b) => {
                book.latest.insert(name.to_string(), Arc::new(b));
            }
            None => {
                book.latest.remove(name);
            }
        }
        Ok(())
    }

    /// Compare-and-swap of `status.entryCount`: succeeds only on `bucket`'s version.
    /// A shard's `status.entryLimit` goes with it: written by the bucket's reconcile
    /// alone, it came right after a new shard's first count and made the next swap
    /// conflict (about one conflict per shard in a cold start).
    async fn swap_count(
        ctx: &Context,
        bucket: &BackupBucket,
        count: u32,
    ) -> Result<BackupBucket, kube::Error> {
        let mut status = json!({ "entryCount": count });
        if let Some(limit) = pool_of(bucket).and_then(|key| ctx.entry_limit(&key, bucket)) {
            status["entryLimit"] = json!(limit);
        }
        let patch = json!({
            "metadata": { "resourceVersion": bucket.resource_version() },
            "status": status,
        });
        Self::api(ctx)
            .patch_status(
                &bucket.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
    }

    /// Creates shard `shard` of the source's pool, assigned to the best ready seed.
    async fn create_shard(
        ctx: &Context,
        book: &mut Book,
        source: &PoolSource,
        shard: u32,
    ) -> Result<(), GardenError> {
        let seed = choose_seed(ctx, &source.key);
        let mut bucket = new_shard_bucket(source, shard, seed.as_deref(), &ctx.selector);
        // The seeds reading the pool's Velero prefixes are labelled now, not by the
        // bucket's first reconcile: that write made the next count swap conflict.
        for reader in ctx.stores.pool_readers(&source.key) {
            bucket
                .labels_mut()
                .insert(velero_reader_label(&reader), "true".to_string());
        }
        let name = bucket.name_any();
        match Self::api(ctx).create(&PostParams::default(), &bucket).await {
            Ok(created) => {
                tracing::info!(bucket = %name, pool = %source.key, shard, seed = seed.as_deref().unwrap_or("none yet"), "created bucket shard");
                book.latest.insert(name, Arc::new(created));
                Ok(())
            }
            Err(e) if is_status(&e, 409) => Self::refresh(ctx, book, &name).await,
            Err(e) => Err(e.into()),
        }
    }

    /// Places each of `entries` in the source's pool, in order and under one hold of the
    /// pool's lock: first fit, a new shard when the pool is full, committed by raising
    /// the chosen bucket's count (one write for a batch of places, see [`batch_size`]).
    /// Returns, per entry placed, its bucket, or `None` for an entry placed here a moment
    /// ago and not yet shown by the cache (whoever placed it creates it). Stops at the
    /// first error and returns it with what was placed before it. The caller must then
    /// create each entry placed, or call [`Ledger::release`].
    pub async fn place_all(
        &self,
        ctx: &Context,
        source: &PoolSource,
        entries: &[EntryKey],
    ) -> (Vec<Option<String>>, Option<GardenError>) {
        let book = self.book(&source.key);
        let waiting = self.waiting(&source.key);
        let mut book = book.lock().await;
        drop(waiting);
        let mut placed = Vec::with_capacity(entries.len());
        // Expired places still raise their buckets' counts: give them back first, so
        // first fit sees the room they leave.
        for name in book.drop_expired_spares() {
            if let Err(e) = Self::recount_locked(ctx, &mut book, &name).await {
                return (placed, Some(e));
            }
        }
        // Two callers may be asked for the same entry (the placer and a retry): the
        // second finds it placed and leaves it to the first. Those left take no place
        // ahead either.
        let placed_here = |book: &Book, entry: &EntryKey| {
            book.pending
                .get(entry)
                .is_some_and(|p| p.since.elapsed() < PENDING_TTL)
        };
        let mut to_place = entries.iter().filter(|e| !placed_here(&book, e)).count();
        for entry in entries {
            if placed_here(&book, entry) {
                placed.push(None);
                continue;
            }
            to_place = to_place.saturating_sub(1);
            let behind = u32::try_from(to_place).unwrap_or(u32::MAX);
            match self.place_one(ctx, &mut book, source, entry, behind).await {
                Ok(bucket) => placed.push(Some(bucket)),
                Err(e) => return (placed, Some(e)),
            }
        }
        (placed, None)
    }

    /// Places one entry with the pool's book held; `behind` more entries of the same
    /// batch follow it (a count write reserves places for them too).
    async fn place_one(
        &self,
        ctx: &Context,
        book: &mut Book,
        source: &PoolSource,
        entry: &EntryKey,
        behind: u32,
    ) -> Result<String, GardenError> {
        let limit = ctx.config.quota_for(&source.provider);
        let pending = |name: &str| Pending {
            bucket: name.to_string(),
            since: Instant::now(),
        };
        if let Some(name) = Self::take_spare(ctx, book) {
            book.pending.insert(entry.clone(), pending(&name));
            ctx.garden_metrics
                .placements
                .with_label_values(&["existing"])
                .inc();
            return Ok(name);
        }
        for _ in 0..MAX_ATTEMPTS {
            let (placement, chosen) = Self::with_shards(ctx, &source.key, book, |shards| {
                let mut last = None;
                let fills = shards.filter_map(|(shard, b)| {
                    let fill = ShardFill {
                        shard: shard?,
                        entries: recorded_count(b),
                        accepting: b.meta().deletion_timestamp.is_none(),
                    };
                    last = Some(b);
                    Some(fill)
                });
                let placement = first_fit(fills, limit);
                (placement, last.cloned())
            });
            match placement {
                Placement::NewShard(shard) => {
                    Self::create_shard(ctx, book, source, shard).await?;
                    ctx.garden_metrics
                        .placements
                        .with_label_values(&["new_shard"])
                        .inc();
                }
                Placement::Existing(shard) => {
                    // First fit stopped at the shard it chose: the last one read.
                    let Some(bucket) = chosen.filter(|b| shard_of(b) == Some(shard)) else {
                        continue;
                    };
                    let bucket = &bucket;
                    let name = bucket.name_any();
                    let count = recorded_count(bucket);
                    // Room for this entry and for those waiting behind it, in one write.
                    let waiters = self
                        .waiting
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get(&source.key)
                        .map_or(0, |w| w.load(Ordering::SeqCst));
                    let wanted = batch_wanted(waiters.saturating_add(behind), book.used_up);
                    let places = batch_size(count, limit, wanted);
                    match Self::swap_count(ctx, bucket, count + places).await {
                        Ok(updated) => {
                            book.latest.insert(name.clone(), Arc::new(updated));
                            book.pending.insert(entry.clone(), pending(&name));
                            book.used_up = None;
                            if places > 1 {
                                book.spare.insert(
                                    name.clone(),
                                    Spare {
                                        shard,
                                        places: places - 1,
                                        wanted,
                                        since: Instant::now(),
                                    },
                                );
                            } else {
                                book.used_up = Some(wanted);
                            }
                            ctx.garden_metrics
                                .placements
                                .with_label_values(&["existing"])
                                .inc();
                            return Ok(name);
                        }
                        Err(e) if is_status(&e, 409) || is_status(&e, 404) => {
                            ctx.garden_metrics
                                .placement_conflicts
                                .with_label_values(&[source.key.kind.as_str()])
                                .inc();
                            Self::refresh(ctx, book, &name).await?;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        Err(GardenError::PlacementContention {
            entry: format!("{}/{}", entry.0, entry.1),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// Holds a place for a moving entry in `bucket` ([`crate::moves`]): within the quota,
    /// committed by raising the bucket's count as a placement does. The caller must then
    /// mark the entry, or call [`Ledger::release`].
    pub async fn reserve(
        &self,
        ctx: &Context,
        bucket: &str,
        entry: &EntryKey,
    ) -> Result<Reservation, GardenError> {
        // The cache may not show a bucket created a moment ago: ask before refusing.
        let cached = match ctx.stores.buckets.get(&ObjectRef::new(bucket)) {
            Some(b) => b,
            None => match Self::api(ctx).get_opt(bucket).await? {
                Some(b) => Arc::new(b),
                None => {
                    return Ok(Reservation::Refused(format!(
                        "bucket {bucket} does not exist"
                    )));
                }
            },
        };
        let key = match pool_of(&cached) {
            Some(key) if key.kind != PoolKind::Legacy => key,
            Some(_) => {
                return Ok(Reservation::Refused(format!(
                    "bucket {bucket} is a legacy per-shoot bucket, never a target"
                )));
            }
            None => {
                return Ok(Reservation::Refused(format!(
                    "bucket {bucket} is not a shard of a backup pool (no {} labels), so the \
                     garden keeps no count for it",
                    granary_api::core::LABEL_POOL_KIND
                )));
            }
        };
        let limit = ctx.config.quota_for(&cached.spec.provider.type_);
        let book = self.book(&key);
        let mut book = book.lock().await;
        // Held a moment ago, and a reconcile of an older copy of the entry asks again.
        if book
            .pending
            .get(entry)
            .is_some_and(|p| p.bucket == bucket && p.since.elapsed() < PENDING_TTL)
        {
            return Ok(Reservation::Held(key));
        }
        for _ in 0..MAX_ATTEMPTS {
            let current = match book.latest.get(bucket) {
                Some(b) => b.clone(),
                None => cached.clone(),
            };
            if current.meta().deletion_timestamp.is_some() {
                return Ok(Reservation::Refused(format!(
                    "bucket {bucket} is being deleted"
                )));
            }
            let count = recorded_count(&current);
            if limit.is_some_and(|l| count >= l) {
                return Ok(Reservation::Refused(format!(
                    "bucket {bucket} is full ({count} entries, limit {})",
                    limit.unwrap_or_default()
                )));
            }
            match Self::swap_count(ctx, &current, count + 1).await {
                Ok(updated) => {
                    book.latest.insert(bucket.to_string(), Arc::new(updated));
                    book.pending.insert(
                        entry.clone(),
                        Pending {
                            bucket: bucket.to_string(),
                            since: Instant::now(),
                        },
                    );
                    return Ok(Reservation::Held(key));
                }
                Err(e) if is_status(&e, 409) => {
                    ctx.garden_metrics
                        .placement_conflicts
                        .with_label_values(&[key.kind.as_str()])
                        .inc();
                    Self::refresh(ctx, &mut book, bucket).await?;
                }
                Err(e) if is_status(&e, 404) => {
                    return Ok(Reservation::Refused(format!(
                        "bucket {bucket} does not exist"
                    )));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(GardenError::PlacementContention {
            entry: format!("{}/{} (move into {bucket})", entry.0, entry.1),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// Gives a placement back when the entry could not be created: forgets it and
    /// recounts its bucket.
    pub async fn release(
        &self,
        ctx: &Context,
        key: &PoolKey,
        entry: &EntryKey,
        bucket: &str,
    ) -> Result<(), GardenError> {
        self.give_back(ctx, key, entry, bucket, false).await
    }

    /// Gives back the place held for a moving entry in `bucket` (its mark is being
    /// removed): recounts without it, also while the cache still shows the mark.
    pub async fn release_move(
        &self,
        ctx: &Context,
        key: &PoolKey,
        entry: &EntryKey,
        bucket: &str,
    ) -> Result<(), GardenError> {
        self.give_back(ctx, key, entry, bucket, true).await
    }

    async fn give_back(
        &self,
        ctx: &Context,
        key: &PoolKey,
        entry: &EntryKey,
        bucket: &str,
        marked: bool,
    ) -> Result<(), GardenError> {
        {
            let book = self.book(key);
            let mut book = book.lock().await;
            book.pending.remove(entry);
            if marked {
                book.released.insert(
                    entry.clone(),
                    Pending {
                        bucket: bucket.to_string(),
                        since: Instant::now(),
                    },
                );
            }
        }
        self.recount(ctx, key, bucket).await.map(|_| ())
    }

    /// Creates shard 0 of the source's pool unless the pool has a bucket already.
    pub async fn ensure_first_shard(
        &self,
        ctx: &Context,
        source: &PoolSource,
    ) -> Result<(), GardenError> {
        let book = self.book(&source.key);
        let mut book = book.lock().await;
        if Self::with_shards(ctx, &source.key, &mut book, |shards| {
            shards.next().is_none()
        }) {
            Self::create_shard(ctx, &mut book, source, 0).await?;
        }
        Ok(())
    }

    /// How long until the places reserved ahead in `bucket` expire, if it holds any:
    /// its count is then given back by a recount, which the bucket's reconcile asks for
    /// then (no entry change may come to wake it).
    pub async fn spare_expires_in(&self, key: &PoolKey, bucket: &str) -> Option<Duration> {
        let book = self.book(key);
        let book = book.lock().await;
        let spare = book.spare.get(bucket).filter(|s| s.live())?;
        Some(SPARE_TTL.saturating_sub(spare.since.elapsed()))
    }

    /// Forgets a bucket that is gone (its deletion was released), so the pool can get
    /// a new shard of that number.
    pub async fn forget(&self, key: &PoolKey, bucket: &str) {
        let book = self.book(key);
        book.lock().await.latest.remove(bucket);
    }

    /// The number of shards the pool has now.
    pub async fn shard_count(&self, ctx: &Context, key: &PoolKey) -> usize {
        let book = self.book(key);
        let mut book = book.lock().await;
        Self::with_shards(ctx, key, &mut book, |shards| shards.count())
    }

    /// Re-derives `bucket`'s entry count (cached entries plus this process' pending
    /// ones) and writes it when it differs. Returns the count.
    pub async fn recount(
        &self,
        ctx: &Context,
        key: &PoolKey,
        bucket: &str,
    ) -> Result<u32, GardenError> {
        let book = self.book(key);
        let mut book = book.lock().await;
        Self::recount_locked(ctx, &mut book, bucket).await
    }

    /// [`Ledger::recount`] with the pool's book held.
    async fn recount_locked(
        ctx: &Context,
        book: &mut Book,
        bucket: &str,
    ) -> Result<u32, GardenError> {
        let count = Self::derive_count(ctx, book, bucket);
        for _ in 0..MAX_ATTEMPTS {
            let current = match book.latest.get(bucket) {
                Some(b) => b.clone(),
                None => match ctx.stores.buckets.get(&ObjectRef::new(bucket)) {
                    Some(b) => b,
                    None => return Ok(count),
                },
            };
            if recorded_count(&current) == count && current.status.is_some() {
                return Ok(count);
            }
            match Self::swap_count(ctx, &current, count).await {
                Ok(updated) => {
                    book.latest.insert(bucket.to_string(), Arc::new(updated));
                    return Ok(count);
                }
                Err(e) if is_status(&e, 409) || is_status(&e, 404) => {
                    Self::refresh(ctx, book, bucket).await?;
                    if !book.latest.contains_key(bucket) {
                        return Ok(count);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(GardenError::PlacementContention {
            entry: format!("recount of {bucket}"),
            attempts: MAX_ATTEMPTS,
        })
    }

    fn derive_count(ctx: &Context, book: &mut Book, bucket: &str) -> u32 {
        // One view of the entry index for every step: an entry appearing between them
        // would otherwise be counted twice (as pending and as cached). The cost is the
        // bucket's own entries plus the few released ones, never a scan of every entry.
        // A pending entry is shown once the index has it counting in the bucket it was
        // given a place in (a new entry naming it, or a moving entry marked as holding a
        // place there); a released one once the index has its mark gone. Only this
        // bucket's pending entries are looked up: during a burst the pool has hundreds
        // pending, and looking each up on every recount of every bucket was most of a
        // recount's cost; the others are forgotten at their own bucket's recount.
        let Book {
            pending, released, ..
        } = book;
        // This bucket's pending entries not shown yet, counted as they are pruned.
        let mut pending_here = 0;
        let in_bucket = ctx.stores.entry_index.read(|index| {
            let still_marked: HashSet<EntryKey> = released
                .iter()
                .filter(|(key, p)| {
                    index
                        .places(key)
                        .is_some_and(|e| e.reserved.as_deref() == Some(p.bucket.as_str()))
                })
                .map(|(key, _)| key.clone())
                .collect();
            // A moving entry whose place here was given back no longer counts here while
            // the index still shows its mark (unless it names this bucket).
            let given_back = still_marked
                .iter()
                .filter(|key| released.get(*key).is_some_and(|p| p.bucket == bucket))
                .filter(|key| index.places(key).is_some_and(|e| e.bucket != bucket))
                .count();
            released.retain(|key, p| still_marked.contains(key) && p.since.elapsed() < PENDING_TTL);
            pending.retain(|key, p| {
                let here = p.bucket == bucket;
                let shown = here && index.places(key).is_some_and(|e| e.counts_in(&p.bucket));
                let keep = !shown && p.since.elapsed() < PENDING_TTL;
                pending_here += usize::from(keep && here);
                keep
            });
            index.count_in(bucket) - given_back
        });
        book.drop_expired_spares();
        let spare = book.spare.get(bucket).map_or(0, |s| s.places as usize);
        u32::try_from(in_bucket + pending_here + spare).unwrap_or(u32::MAX)
    }

    /// Deletes `bucket` if it still holds no entry, in the version that was counted
    /// (a placement in between changes the version and makes the delete fail).
    pub async fn remove_if_empty(
        &self,
        ctx: &Context,
        key: &PoolKey,
        bucket: &str,
    ) -> Result<bool, GardenError> {
        let book = self.book(key);
        let mut book = book.lock().await;
        if Self::derive_count(ctx, &mut book, bucket) > 0 {
            return Ok(false);
        }
        Self::refresh(ctx, &mut book, bucket).await?;
        let Some(current) = book.latest.get(bucket) else {
            return Ok(false);
        };
        if recorded_count(current) > 0 {
            return Ok(false);
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: current.resource_version(),
                uid: current.uid(),
            }),
            ..DeleteParams::default()
        };
        match Self::api(ctx).delete(bucket, &params).await {
            Ok(_) => {
                book.latest.remove(bucket);
                Ok(true)
            }
            Err(e) if is_status(&e, 409) || is_status(&e, 404) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// A bucket with its position in its pool (shard number, unnumbered last, then name) and
/// its shard number.
type Positioned<'a> = ((u32, String), Option<u32>, &'a Arc<BackupBucket>);

/// The index's shards of a pool with the overlay's newer copies merged in, both in
/// position order (shard number, unnumbered last, then name): a newer copy replaces the
/// index's bucket at its position.
struct MergeByPosition<'a, C, N>
where
    C: Iterator<Item = &'a (Option<u32>, Arc<BackupBucket>)>,
    N: Iterator<Item = Positioned<'a>>,
{
    cached: std::iter::Peekable<C>,
    newer: std::iter::Peekable<N>,
}

impl<'a, C, N> Iterator for MergeByPosition<'a, C, N>
where
    C: Iterator<Item = &'a (Option<u32>, Arc<BackupBucket>)>,
    N: Iterator<Item = Positioned<'a>>,
{
    type Item = (Option<u32>, &'a Arc<BackupBucket>);

    fn next(&mut self) -> Option<Self::Item> {
        let Some((position, _, _)) = self.newer.peek() else {
            return self.cached.next().map(|(shard, b)| (*shard, b));
        };
        let Some((shard, cached)) = self.cached.peek() else {
            return self.newer.next().map(|(_, shard, b)| (shard, b));
        };
        let cached_position = (
            shard.unwrap_or(u32::MAX),
            cached.metadata.name.as_deref().unwrap_or_default(),
        );
        match cached_position.cmp(&(position.0, position.1.as_str())) {
            std::cmp::Ordering::Less => self.cached.next().map(|(shard, b)| (*shard, b)),
            std::cmp::Ordering::Equal => {
                self.cached.next();
                self.newer.next().map(|(_, shard, b)| (shard, b))
            }
            std::cmp::Ordering::Greater => self.newer.next().map(|(_, shard, b)| (shard, b)),
        }
    }
}

/// The seeds that may provision a pool's buckets: for a CloudProfile pool every seed of
/// the profile's provider type (every seed when the profile is gone), for a seed's own
/// pool that seed alone.
pub fn pool_candidates(ctx: &Context, key: &PoolKey) -> Vec<SeedCandidate> {
    let seeds = ctx.stores.seeds.state();
    let serving: Vec<_> = match key.kind {
        PoolKind::CloudProfile => {
            let profile = ctx.stores.profile(&key.owner);
            seeds
                .iter()
                .filter(|s| {
                    profile
                        .as_ref()
                        .is_none_or(|p| s.spec.provider.type_ == p.spec.type_)
                })
                .cloned()
                .collect()
        }
        PoolKind::Seed => seeds
            .iter()
            .filter(|s| s.name_any() == key.owner)
            .cloned()
            .collect(),
        PoolKind::Legacy => Vec::new(),
    };
    serving.iter().map(|s| ctx.stores.candidate(s)).collect()
}

/// The seed a new bucket of the pool goes to, if any is ready.
pub fn choose_seed(ctx: &Context, key: &PoolKey) -> Option<String> {
    match assign_bucket(
        None,
        &key.region,
        &pool_candidates(ctx, key),
        ctx.clock.now(),
        ctx.timings(),
    ) {
        Assignment::Assign(seed) => Some(seed),
        _ => None,
    }
}

/// How many places the next compare-and-swap of a pool asks for: one for the entry being
/// placed and one for each placement waiting behind it; during a burst (the previous
/// batch, `used_up`, was all handed out before it expired) at least twice the previous
/// batch, as TCP's slow start grows its window: placements that arrive one after another
/// rather than all waiting at once still share one write per batch. At most
/// [`MAX_BATCH`].
pub fn batch_wanted(waiting: u32, used_up: Option<u32>) -> u32 {
    let burst = used_up.map_or(1, |b| b.saturating_mul(2));
    waiting.saturating_add(1).max(burst).min(MAX_BATCH)
}

/// How many of the `wanted` places one compare-and-swap takes on a bucket holding `count`
/// entries: never past the limit, and at least one (the caller only asks for a bucket
/// with room).
pub fn batch_size(count: u32, limit: Option<u32>, wanted: u32) -> u32 {
    let room = limit.map_or(u32::MAX, |l| l.saturating_sub(count)).max(1);
    wanted.clamp(1, MAX_BATCH).min(room)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(name: &str, rv: &str) -> Arc<BackupBucket> {
        let mut b = BackupBucket::new(name, Default::default());
        b.metadata.resource_version = Some(rv.to_string());
        Arc::new(b)
    }

    #[test]
    fn newer_copies_replace_the_index_at_their_position_and_new_ones_slot_in() {
        let cached = [
            (Some(0), bucket("p-0", "1")),
            (Some(1), bucket("p-1", "1")),
            (Some(3), bucket("p-3", "1")),
            (None, bucket("p-x", "1")),
        ];
        // A newer copy of shard 1, a shard the index does not show yet (2), and one
        // after the last (4).
        let (n1, n2, n4) = (bucket("p-1", "2"), bucket("p-2", "2"), bucket("p-4", "2"));
        let mut newer = vec![
            ((4, "p-4".to_string()), Some(4), &n4),
            ((1, "p-1".to_string()), Some(1), &n1),
            ((2, "p-2".to_string()), Some(2), &n2),
        ];
        newer.sort_by(|a, b| a.0.cmp(&b.0));
        let merged: Vec<(Option<u32>, String, String)> = MergeByPosition {
            cached: cached.iter().peekable(),
            newer: newer.into_iter().peekable(),
        }
        .map(|(shard, b)| {
            (
                shard,
                b.name_any(),
                b.resource_version().unwrap_or_default(),
            )
        })
        .collect();
        let expected: Vec<(Option<u32>, String, String)> = [
            (Some(0), "p-0", "1"),
            (Some(1), "p-1", "2"),
            (Some(2), "p-2", "2"),
            (Some(3), "p-3", "1"),
            (Some(4), "p-4", "2"),
            (None, "p-x", "1"),
        ]
        .into_iter()
        .map(|(s, n, rv)| (s, n.to_string(), rv.to_string()))
        .collect();
        assert_eq!(merged, expected);
    }

    #[test]
    fn a_batch_covers_the_waiters_within_the_room_and_the_cap() {
        let size = |count, limit, waiting| batch_size(count, limit, batch_wanted(waiting, None));
        assert_eq!(size(0, Some(100), 0), 1);
        assert_eq!(size(0, Some(100), 9), 10);
        assert_eq!(size(95, Some(100), 9), 5);
        assert_eq!(size(99, Some(100), 9), 1);
        assert_eq!(size(0, Some(100), 500), MAX_BATCH);
        assert_eq!(size(7, None, 500), MAX_BATCH);
        assert_eq!(size(7, None, 2), 3);
        assert_eq!(batch_size(3, Some(3), 5), 1, "at least one");
    }

    #[test]
    fn a_burst_doubles_the_batch_up_to_the_cap_and_a_quiet_pool_starts_again_at_one() {
        // Placements arriving one by one: 1, 2, 4, … places per write while each batch
        // is used up, whatever the waiters.
        let mut used_up = None;
        let mut sizes = Vec::new();
        for _ in 0..8 {
            let wanted = batch_wanted(0, used_up);
            sizes.push(wanted);
            used_up = Some(wanted);
        }
        assert_eq!(sizes, [1, 2, 4, 8, 16, 32, 64, 64]);
        // Waiters still count when they are more.
        assert_eq!(batch_wanted(20, Some(4)), 21);
        // A batch cut by the bucket's room does not end the burst in the next bucket.
        assert_eq!(batch_size(98, Some(100), batch_wanted(0, Some(16))), 2);
        assert_eq!(batch_wanted(0, Some(64)), 64);
        // A batch that expired unused ends it.
        assert_eq!(batch_wanted(0, None), 1);
    }
}
