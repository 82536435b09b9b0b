//! Placing the entries of shoots that have none (docs/architecture.md#entry-placement).
//!
//! [`plan`] finds each shoot's pool and takes its place in the
//! [`Ledger`](crate::ledger::Ledger), a batch of shoots of one pool under one hold of the
//! pool's lock; [`carry_out`] creates the entry in the place taken, or gives the place back.
//! Both paths that place use them: the shoot controller for one shoot
//! ([`crate::entry_controllers::reconcile_shoot`]), and [`run`] for the shoots the caches
//! show without an entry, in batches as they come.
//!
//! Why a placer beside the controller: a cold start of 100,000 shoots went through
//! kube-runtime's controller one shoot at a time, and its scheduling (a queue entry, a
//! pending set scanned from the start whenever a slot freed, a future per reconcile, a
//! resync timer per shoot) cost the garden about a fifth of its CPU, more than its own
//! placement logic. The placer takes each shoot once, in the order the list and the
//! watch bring them, and keeps as many creates in flight as the controller would
//! (`controllers.backupEntry.concurrentSyncs`). What it cannot place (a missing seed or
//! profile, an invalid configuration, a failed write) it hands to the shoot controller,
//! which says why in an event and retries with its backoff: one place for waiting and
//! errors.

use std::collections::{HashMap, HashSet};
use std::future::ready;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::api::PostParams;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tokio::sync::mpsc::UnboundedSender;

use crate::buckets::PoolSource;
use crate::context::{Context, GardenError};
use crate::entries::new_entry;
use crate::ledger::EntryKey;
use crate::pools::{PoolKey, PoolKind, ProfileView, SeedView, pool_for_shoot};
use granary_api::core::{BackupEntry, Shoot, validate_cloud_profile, validate_seed};
use granary_runtime::failpoints;

/// Failpoint between committing a placement (count raised) and creating the entry.
pub const FAILPOINT_PLACED: &str = "garden.placement.committed";

/// The most shoots [`run`] plans at once: the ledger reserves at most 64 places per
/// count write, so a batch of this size costs a handful of writes, and its creates keep
/// the in-flight slots busy while the next batch is planned ([`run`]).
const BATCH: usize = 256;

/// What came of placing one shoot's entry.
#[derive(Debug)]
pub enum Outcome {
    /// Its entry was created.
    Created,
    /// Nothing to place: it has an entry, is being deleted, has no seed, or neither its
    /// profile nor its seed configures backups.
    Nothing,
    /// Placed a moment ago by the other path (the controller or the placer), whose
    /// create is under way.
    InFlight,
    /// The entry existed after all (made by an earlier run); the place taken for it was
    /// given back.
    Exists,
    /// It waits for what the note names (a seed, a profile, a valid configuration).
    Waits(String),
    /// Placing or creating failed.
    Failed(GardenError),
    /// Not tried: an earlier placement of its batch failed.
    NotTried,
}

impl Outcome {
    /// Whether the shoot controller should look at the shoot: to say why it waits, or
    /// to retry.
    pub fn for_controller(&self) -> bool {
        matches!(
            self,
            Outcome::Waits(_) | Outcome::Failed(_) | Outcome::NotTried
        )
    }
}

/// A shoot's next step after [`plan`].
pub enum Step {
    /// Create its entry in `bucket`, where a place of pool `pool` is held for it.
    Create {
        shoot: Arc<Shoot>,
        pool: PoolKey,
        entry: EntryKey,
        bucket: String,
    },
    /// Nothing more to do here.
    Done(Arc<Shoot>, Outcome),
}

/// The shoots of one pool in a batch, with where the pool's shards come from.
struct Group {
    source: PoolSource,
    shoots: Vec<(Arc<Shoot>, EntryKey)>,
}

/// The pool of the shoots of one seed and one profile (its [`Group`] in the batch), or
/// why there is none: the same for every shoot of the pair, so a batch judges (and
/// validates) each pair once.
type PairTarget = Result<Option<usize>, String>;

/// The pool of the shoots of seed `seed_name` and a profile, or why there is none.
fn pair_source(
    ctx: &Context,
    seed_name: &str,
    profile_name: Option<&str>,
    kind: &str,
) -> Result<Option<PoolSource>, String> {
    let Some(seed) = ctx.stores.seed(seed_name) else {
        return Err(format!("seed {seed_name} is not registered"));
    };
    let Some(profile_name) = profile_name else {
        return Err("the shoot names no cloud profile (spec.cloudProfile.name)".to_string());
    };
    if kind != "CloudProfile" {
        return Err(format!(
            "cloud profiles of kind {kind} are not supported for backups"
        ));
    }
    let Some(profile) = ctx.stores.profile(profile_name) else {
        return Err(format!("cloud profile {profile_name} does not exist"));
    };
    let Some(key) = pool_for_shoot(&ProfileView::of(&profile), &SeedView::of(&seed)) else {
        if profile.spec.backup.is_some() {
            return Err(format!(
                "cloud profile {profile_name} has an unusable spec.backup"
            ));
        }
        // Neither the profile nor the seed configures backups.
        return Ok(None);
    };
    let (source, problems, owner) = match key.kind {
        PoolKind::Seed => (
            PoolSource::from_seed(&seed, key.clone()),
            validate_seed(&seed),
            format!("seed {seed_name}"),
        ),
        _ => (
            PoolSource::from_profile(&profile, key.clone()),
            validate_cloud_profile(&profile),
            format!("cloud profile {profile_name}"),
        ),
    };
    match source.filter(|_| problems.is_empty()) {
        Some(source) => Ok(Some(source)),
        None => Err(format!(
            "the backup configuration of {owner} is invalid: {}",
            granary_api::common::describe_field_errors(&problems)
        )),
    }
}

/// Puts `shoot` into its pool's group, or says what came of it instead. `pairs` keeps
/// what the batch judged per seed and profile.
fn sort_in(
    ctx: &Context,
    shoot: Arc<Shoot>,
    pairs: &mut HashMap<(String, Option<String>, String), PairTarget>,
    groups: &mut Vec<Group>,
) -> Option<Step> {
    if shoot.meta().deletion_timestamp.is_some() {
        // Garbage collection removes the entry through its owner reference.
        return Some(Step::Done(shoot, Outcome::Nothing));
    }
    let Some(seed_name) = shoot.spec.seed_name.as_deref().filter(|s| !s.is_empty()) else {
        return Some(Step::Done(shoot, Outcome::Nothing));
    };
    let (Some(entry_name), Some(namespace)) = (shoot.backup_entry_name(), shoot.namespace()) else {
        let note = "the shoot has no uid yet".to_string();
        return Some(Step::Done(shoot, Outcome::Waits(note)));
    };
    if ctx
        .stores
        .entries
        .get(&ObjectRef::new(&entry_name).within(&namespace))
        .is_some()
    {
        return Some(Step::Done(shoot, Outcome::Nothing));
    }
    let pair = (
        seed_name.to_string(),
        shoot.cloud_profile_name().map(str::to_string),
        shoot.cloud_profile_kind().to_string(),
    );
    let judged = pairs
        .entry(pair)
        .or_insert_with_key(|(seed, profile, kind)| {
            let source = pair_source(ctx, seed, profile.as_deref(), kind)?;
            Ok(source.map(|source| {
                // Another pair of the batch may share the pool.
                groups
                    .iter()
                    .position(|g| g.source.key == source.key)
                    .unwrap_or_else(|| {
                        groups.push(Group {
                            source,
                            shoots: Vec::new(),
                        });
                        groups.len() - 1
                    })
            }))
        });
    match judged {
        Ok(Some(group)) => {
            groups[*group].shoots.push((shoot, (namespace, entry_name)));
            None
        }
        Ok(None) => Some(Step::Done(shoot, Outcome::Nothing)),
        Err(note) => {
            let note = note.clone();
            Some(Step::Done(shoot, Outcome::Waits(note)))
        }
    }
}

/// Takes the places of the shoots' entries: each shoot as the cache shows it now, the
/// shoots of one pool in one [`crate::ledger::Ledger::place_all`]. Waits until the
/// caches are filled and the counts re-derived.
pub async fn plan(ctx: &Context, shoots: Vec<Arc<Shoot>>) -> Result<Vec<Step>, GardenError> {
    ctx.stores.wait_ready_but_shoots().await?;
    ctx.wait_counts_ready().await?;
    let mut pairs = HashMap::new();
    let mut groups = Vec::new();
    let mut steps = Vec::with_capacity(shoots.len());
    let mut seen = HashSet::with_capacity(shoots.len());
    for shoot in shoots {
        // The latest the cache has (it waited in the placer's queue); gone is done.
        let key = ObjectRef::from_obj(shoot.as_ref());
        let Some(shoot) = ctx.stores.shoots.get(&key) else {
            continue;
        };
        // A shoot heard of twice (its creation and a change) is placed once, and its
        // second mention takes no place ahead in the count write.
        if !seen.insert(key) {
            continue;
        }
        steps.extend(sort_in(ctx, shoot, &mut pairs, &mut groups));
    }
    for Group { source, shoots } in groups {
        let keys: Vec<EntryKey> = shoots.iter().map(|(_, entry)| entry.clone()).collect();
        let (placed, mut error) = ctx.ledger.place_all(ctx, &source, &keys).await;
        let mut shoots = shoots.into_iter();
        for (bucket, (shoot, entry)) in placed.into_iter().zip(shoots.by_ref()) {
            steps.push(match bucket {
                Some(bucket) => Step::Create {
                    shoot,
                    pool: source.key.clone(),
                    entry,
                    bucket,
                },
                None => Step::Done(shoot, Outcome::InFlight),
            });
        }
        for (shoot, _) in shoots {
            let outcome = match error.take() {
                Some(e) => Outcome::Failed(e),
                None => Outcome::NotTried,
            };
            steps.push(Step::Done(shoot, outcome));
        }
    }
    Ok(steps)
}

/// Creates the entry of a [`Step::Create`] (giving its place back when that fails).
pub async fn carry_out(ctx: &Context, step: Step) -> (Arc<Shoot>, Outcome) {
    let (shoot, pool, entry, bucket) = match step {
        Step::Done(shoot, outcome) => return (shoot, outcome),
        Step::Create {
            shoot,
            pool,
            entry,
            bucket,
        } => (shoot, pool, entry, bucket),
    };
    let created = match failpoints::hit(FAILPOINT_PLACED) {
        Err(e) => Err(GardenError::from(e)),
        Ok(()) => match new_entry(&shoot, &bucket, &ctx.selector) {
            Ok(made) => create_entry(&ctx.client, &entry.0, &made)
                .await
                .map_err(GardenError::from),
            Err(e) => Err(GardenError::from(e)),
        },
    };
    let outcome = match created {
        Ok(()) => {
            tracing::debug!(entry = %entry.1, %bucket, "BackupEntry placed");
            Outcome::Created
        }
        Err(e) => match ctx.ledger.release(ctx, &pool, &entry, &bucket).await {
            Err(release) => Outcome::Failed(release),
            Ok(()) if matches!(&e, GardenError::Kube(kube::Error::Api(s)) if s.code == 409) => {
                Outcome::Exists
            }
            Ok(()) => Outcome::Failed(e),
        },
    };
    (shoot, outcome)
}

/// Creates `entry`, reading the server's answer for its status only: the new entry
/// reaches the garden through its entry cache anyway, so decoding the answer would be
/// work done twice per placement.
async fn create_entry(
    client: &kube::Client,
    namespace: &str,
    entry: &BackupEntry,
) -> Result<(), kube::Error> {
    let body = serde_json::to_vec(entry).map_err(kube::Error::SerdeError)?;
    let mut request = kube::core::Request::new(BackupEntry::url_path(&(), Some(namespace)))
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("create");
    client.request_text(request).await.map(drop)
}

/// Places the entries of the shoots that come on `shoots` until it ends: batches of
/// what has come ([`plan`]), `concurrency` creates in flight ([`carry_out`]). A shoot
/// it cannot place goes to the shoot controller through `controller`.
///
/// The next batch is planned while the creates of the last one run. A plan waits on
/// the server (count writes, new shards: a few round trips per batch); planned only
/// once the last batch's creates had all started, the in-flight slots drained while it
/// waited, and at 100,000 shoots the garden sat idle for part of each batch.
pub async fn run(
    ctx: Arc<Context>,
    shoots: impl Stream<Item = Arc<Shoot>>,
    controller: UnboundedSender<ObjectRef<Shoot>>,
    concurrency: usize,
) {
    // One planned batch waits while the next is planned: the places taken ahead of their
    // creates stay within two batches.
    let (planned, steps) = tokio::sync::mpsc::channel::<Vec<Step>>(1);
    let planner = {
        let ctx = ctx.clone();
        async move {
            let mut batches = std::pin::pin!(shoots.ready_chunks(BATCH));
            while let Some(batch) = batches.next().await {
                // Stopped caches: the term is ending.
                let steps = plan(&ctx, batch).await.unwrap_or_default();
                if planned.send(steps).await.is_err() {
                    break;
                }
            }
            // Dropping `planned` here ends the creates once the last batch is carried out.
        }
    };
    let creates = tokio_stream::wrappers::ReceiverStream::new(steps)
        .flat_map(futures::stream::iter)
        .map(|step| {
            let ctx = ctx.clone();
            async move { carry_out(&ctx, step).await }
        })
        .buffer_unordered(concurrency.max(1))
        .for_each(|(shoot, outcome)| {
            if outcome.for_controller() {
                if let Outcome::Failed(e) = &outcome {
                    tracing::debug!(shoot = %shoot.name_any(), error = %e, "placement handed to the shoot controller");
                }
                let _ = controller.send(ObjectRef::from_obj(shoot.as_ref()));
            }
            ready(())
        });
    tokio::join!(planner, creates);
}
