//! Which changes wake which garden reconciles (see
//! docs/controllers.md#garden-controllers). Every BackupEntry written during a burst of
//! placements used to wake its shoot again, itself, and the seed's reconcile; every
//! bucket count written woke the profile's and the seed's, which walk all buckets of the
//! landscape: work per entry that grew with the number of entries. These decisions keep
//! only the wake-ups whose reconcile would do something:
//!
//! - a Shoot or BackupEntry is reconciled only when its reconcile would not be a no-op
//!   ([`shoot_work`], [`entry_needs_reconcile`]); this also spares a restart one
//!   reconcile per shoot and per entry before the first new placement. A shoot without
//!   an entry goes to the placer ([`crate::placer`]), not to its controller;
//! - a BackupBucket change wakes its profile or its seeds only when what they read of it
//!   changed ([`BucketView`]: the spec they pass on, its pool, its seeds, its error,
//!   its deletion), not on every `status.entryCount` write; it wakes a profile only
//!   when the bucket drifted or went ([`profile_has_work`]), and only the seeds it was
//!   and is on whose reconcile it gives something to do ([`BucketViews::seeds_to_wake`],
//!   [`seed_has_work`]), not every seed;
//! - a seed's Lease wakes the buckets only when the seed comes (back) to life
//!   ([`SeedLeases`]), not on every renewal of a live seed: with S seeds renewing every
//!   few seconds, each renewal woke all B buckets, S × B reconciles per renewal period.
//!
//! Guards of owners being deleted (profiles, seeds) are still woken by every shoot and
//! entry change; those wake-ups take the owners being deleted only.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use kube::{Resource, ResourceExt};

use crate::buckets::{PoolSource, pool_of, seed_label_patch, spec_drift};
use crate::entries::entry_update;
use crate::moves::{MoveStep, move_step};
use crate::pools::{PoolKey, PoolKind};
use granary_api::common::ConditionStatus;
use granary_api::common::ObjectReference;
use granary_api::core::{
    BackupBucket, BackupEntry, CONDITION_BACKUP_BUCKETS_READY, CloudProfile, Seed, Shoot,
};

/// What a shoot needs, given its entry as the cache shows it (`None`: no entry cached).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShootWork {
    /// Nothing: it is being deleted or has no seed, its entry is being deleted (no
    /// longer steered by its shoot), or its entry is in line with it.
    None,
    /// An entry: the placer's work ([`crate::placer`]).
    Place,
    /// Its entry brought in line with it: the shoot controller's work.
    Update,
}

/// What `shoot` needs. Mirrors [`crate::entry_controllers::reconcile_shoot`], which does
/// both kinds of work (the placer hands it the shoots it cannot place).
pub fn shoot_work(shoot: &Shoot, entry: Option<&BackupEntry>) -> ShootWork {
    if shoot.meta().deletion_timestamp.is_some()
        || shoot.spec.seed_name.as_deref().is_none_or(str::is_empty)
    {
        return ShootWork::None;
    }
    match entry {
        None => ShootWork::Place,
        Some(e) if e.meta().deletion_timestamp.is_some() => ShootWork::None,
        Some(e) if entry_update(e, shoot).is_some() => ShootWork::Update,
        Some(_) => ShootWork::None,
    }
}

/// Hands a shoot to who does its `work`: the placer (through `to_placer`) for an entry to
/// place; the shoot returned for the shoot controller when its entry is out of line, or
/// when the placer is gone (the controller places too).
pub fn route(
    work: ShootWork,
    shoot: std::sync::Arc<Shoot>,
    to_placer: &tokio::sync::mpsc::UnboundedSender<std::sync::Arc<Shoot>>,
) -> Option<std::sync::Arc<Shoot>> {
    match work {
        ShootWork::None => None,
        ShootWork::Update => Some(shoot),
        ShootWork::Place => to_placer.send(shoot).err().map(|e| e.0),
    }
}

/// The shoots a change of CloudProfile `profile` may unblock, with what each needs:
/// those using it that have no entry yet or whose entry is not what they need
/// ([`shoot_work`]), e.g. shoots waiting for a broken profile to be fixed. `entry_of`
/// finds a shoot's entry.
pub fn shoots_waiting_on_profile<'a>(
    profile: &str,
    shoots: &'a [std::sync::Arc<Shoot>],
    entry_of: impl Fn(&Shoot) -> Option<std::sync::Arc<BackupEntry>>,
) -> Vec<(&'a std::sync::Arc<Shoot>, ShootWork)> {
    shoots
        .iter()
        .filter(|s| s.cloud_profile_name() == Some(profile))
        .map(|s| (s, shoot_work(s, entry_of(s).as_deref())))
        .filter(|(_, work)| *work != ShootWork::None)
        .collect()
}

/// Whether reconciling `entry` would do anything. Mirrors
/// [`crate::entry_controllers::reconcile_entry`]: an entry being deleted or being
/// handed to another seed is always looked at; otherwise only a migration step or a seed
/// label out of line is work.
pub fn entry_needs_reconcile(entry: &BackupEntry) -> bool {
    entry.meta().deletion_timestamp.is_some()
        || entry.responsible_seed() != entry.spec.seed_name.as_deref()
        || move_step(entry.annotations(), &entry.spec.bucket_name, false) != MoveStep::None
        || seed_label_patch(entry.labels(), entry.responsible_seed()).is_some()
}

/// Whether a change of a bucket of a CloudProfile's pool gives the profile's reconcile
/// something to do: the bucket is gone (the pool may need its first shard again), or it
/// does not carry the credentials and providerConfig the profile passes on
/// ([`spec_drift`]). A new shard the garden made from the profile, its error, its seed
/// or its deletion starting are nothing to the profile (mirrors
/// [`crate::owner_controllers::reconcile_profile`]): at 100,000 shoots each of the
/// 1,000 new shards woke it, and each reconcile compared every bucket of the pool.
pub fn profile_has_work(
    bucket: &BackupBucket,
    deleted: bool,
    key: &PoolKey,
    profile: Option<&CloudProfile>,
) -> bool {
    if deleted {
        return true;
    }
    if bucket.meta().deletion_timestamp.is_some() {
        return false;
    }
    profile
        .and_then(|p| PoolSource::from_profile(p, key.clone()))
        .is_some_and(|source| spec_drift(bucket, &source).is_some())
}

/// What the owner controllers read of a bucket.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketView {
    /// For its CloudProfile: the pool, and the spec the profile passes on.
    pool: Option<PoolKey>,
    credentials: Option<ObjectReference>,
    has_secret_ref: bool,
    provider_config: Option<serde_json::Value>,
    /// For its seeds: the seeds it is on and its error (`BackupBucketsReady`, guards).
    spec_seed: Option<String>,
    status_seed: Option<String>,
    error: Option<String>,
    deleting: bool,
}

impl BucketView {
    pub fn of(bucket: &BackupBucket) -> Self {
        let status = bucket.status.as_ref();
        BucketView {
            pool: pool_of(bucket),
            credentials: bucket.spec.credentials_ref.clone(),
            has_secret_ref: bucket.spec.secret_ref.is_some(),
            provider_config: bucket.spec.provider_config.clone(),
            spec_seed: bucket.spec.seed_name.clone(),
            status_seed: status.and_then(|s| s.seed_name.clone()),
            error: status
                .and_then(|s| s.last_error.as_ref())
                .map(|e| e.description.clone()),
            deleting: bucket.meta().deletion_timestamp.is_some(),
        }
    }

    /// The seed responsible for the bucket: its status' seed, else its spec's (as
    /// [`BackupBucket::responsible_seed`]).
    fn responsible(&self) -> Option<&str> {
        [&self.status_seed, &self.spec_seed]
            .into_iter()
            .find_map(|s| s.as_deref().filter(|s| !s.is_empty()))
    }
}

/// Whether a change of `bucket` (what the owners read of it before and after: `None`
/// when unseen before, or gone after) gives the reconcile of `seed` something to do.
/// Mirrors [`crate::owner_controllers::reconcile_seed`], which reads of the buckets:
/// - while the seed is being deleted, those on it (its deletion guard);
/// - its own pool's: one is kept, and each carries the spec the seed passes on;
/// - the names and errors of those it is responsible for (`BackupBucketsReady`).
///
/// A new shard without an error joining a seed whose buckets are ready changes none of
/// these; at 100,000 shoots each of the 1,000 new shards woke the seed, and each of its
/// reconciles read every bucket. (Had the seed's condition just been written from an
/// older view of its buckets, that write wakes the seed again, and it reads them anew.)
pub fn seed_has_work(
    bucket: &BackupBucket,
    old: Option<&BucketView>,
    new: Option<&BucketView>,
    seed: &Seed,
) -> bool {
    let Some(new) = new else {
        // Gone: the seed's pool may need its first shard again, its condition its list.
        return true;
    };
    if seed.meta().deletion_timestamp.is_some() {
        return true;
    }
    let name = seed.name_any();
    let own_pool = new
        .pool
        .as_ref()
        .filter(|p| p.kind == PoolKind::Seed && p.owner == name);
    if let Some(key) = own_pool
        && !new.deleting
        && PoolSource::from_seed(seed, key.clone())
            .is_some_and(|source| spec_drift(bucket, &source).is_some())
    {
        return true;
    }
    let on_seed = |v: &BucketView| v.responsible() == Some(name.as_str());
    match (old.filter(|o| on_seed(o)), on_seed(new)) {
        (None, false) => false,
        // It left: its error goes from the list, or the seed has no bucket left.
        (Some(_), false) => true,
        (Some(old), true) => old.error != new.error,
        (None, true) => {
            let ready = seed
                .condition(CONDITION_BACKUP_BUCKETS_READY)
                .is_some_and(|c| c.status == ConditionStatus::True);
            new.error.is_some() || !ready
        }
    }
}

/// The last [`BucketView`] of every bucket seen, to tell a change the owners care about
/// from a count written. Its size is the number of buckets.
#[derive(Default)]
pub struct BucketViews {
    seen: HashMap<String, BucketView>,
}

impl BucketViews {
    /// Records a bucket change; true when the owners should look (a new bucket, a bucket
    /// gone, or a change in what they read).
    pub fn changed(&mut self, bucket: &BackupBucket, deleted: bool) -> bool {
        self.change(bucket, deleted).is_some()
    }

    /// Records a bucket change; the seeds whose reconcile it gives something to do
    /// ([`seed_has_work`]), of those the bucket was and is on (spec and status) and the
    /// seed owning its pool; `seed` looks a seed up by name. (A seed reads the buckets on
    /// it and those of its own pool only, so waking every seed made each change cost
    /// seeds × buckets.)
    pub fn seeds_to_wake(
        &mut self,
        bucket: &BackupBucket,
        deleted: bool,
        seed: impl Fn(&str) -> Option<Arc<Seed>>,
    ) -> Vec<String> {
        let Some((old, new)) = self.change(bucket, deleted) else {
            return Vec::new();
        };
        let mut seeds: Vec<String> = old
            .iter()
            .chain(new.iter())
            .flat_map(|v| {
                let pool_owner = v
                    .pool
                    .as_ref()
                    .filter(|p| p.kind == PoolKind::Seed)
                    .map(|p| &p.owner);
                [v.spec_seed.as_ref(), v.status_seed.as_ref(), pool_owner]
            })
            .flatten()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect();
        seeds.sort();
        seeds.dedup();
        seeds.retain(|name| {
            seed(name).is_some_and(|seed| seed_has_work(bucket, old.as_ref(), new.as_ref(), &seed))
        });
        seeds
    }

    /// The view before and after a change (`None` when gone), or `None` when nothing the
    /// owners read changed.
    fn change(
        &mut self,
        bucket: &BackupBucket,
        deleted: bool,
    ) -> Option<(Option<BucketView>, Option<BucketView>)> {
        let name = bucket.name_any();
        if deleted {
            let old = self
                .seen
                .remove(&name)
                .unwrap_or_else(|| BucketView::of(bucket));
            return Some((Some(old), None));
        }
        let view = BucketView::of(bucket);
        match self.seen.get(&name) {
            Some(old) if *old == view => None,
            _ => {
                let old = self.seen.insert(name, view.clone());
                Some((old, Some(view)))
            }
        }
    }
}

/// The last renew time seen of every seed Lease, to tell a seed coming (back) to life
/// from a renewal of a live one. Its size is the number of seeds.
#[derive(Default)]
pub struct SeedLeases {
    renewed: HashMap<String, Option<DateTime<Utc>>>,
}

impl SeedLeases {
    /// Records a change of the seed Lease `name` seen at `now`; true when the buckets
    /// should look: a Lease new or gone, one without a renew time, or the renewal of a
    /// seed that was not ready (its last renewal older than `ready_within`). A renewal of
    /// a ready seed changes no assignment: a bucket looks again by itself when its seed,
    /// falling silent, would lose it ([`crate::assignment::next_check`]).
    pub fn wakes_buckets(
        &mut self,
        name: &str,
        renewed: Option<DateTime<Utc>>,
        deleted: bool,
        now: DateTime<Utc>,
        ready_within: Duration,
    ) -> bool {
        if deleted {
            self.renewed.remove(name);
            return true;
        }
        let before = self.renewed.insert(name.to_string(), renewed);
        match (before, renewed) {
            (Some(Some(before)), Some(_)) => now - before > ready_within,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::common::ObjectReference;
    use granary_api::core::{
        ANNOTATION_MIGRATION_RESERVED, ANNOTATION_MIGRATION_TARGET, BackupBucketSpec,
        BackupBucketStatus, BackupEntrySpec, BackupEntryStatus, CloudProfileReference, LABEL_SEED,
        ShootSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn shoot(seed: Option<&str>) -> Shoot {
        let mut s = Shoot::new(
            "s",
            ShootSpec {
                cloud_profile: Some(CloudProfileReference {
                    kind: "CloudProfile".into(),
                    name: "aws".into(),
                    ..CloudProfileReference::default()
                }),
                seed_name: seed.map(str::to_string),
                ..ShootSpec::default()
            },
        );
        s.metadata.namespace = Some("garden-p".into());
        s.metadata.uid = Some("uid-1".into());
        s
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::now())
    }

    #[test]
    fn a_shoot_is_placed_when_its_entry_is_missing_and_reconciled_when_out_of_line() {
        let s = shoot(Some("seed-1"));
        assert_eq!(
            shoot_work(&s, None),
            ShootWork::Place,
            "no entry: place one"
        );
        let entry = crate::entries::new_entry(
            &s,
            "b-0",
            &granary_runtime::selector::ObjectSelector::default(),
        )
        .expect("entry");
        assert_eq!(shoot_work(&s, Some(&entry)), ShootWork::None, "in line");
        let moved = shoot(Some("seed-2"));
        assert_eq!(
            shoot_work(&moved, Some(&entry)),
            ShootWork::Update,
            "seed changed"
        );
        let mut leaving = entry.clone();
        leaving.metadata.deletion_timestamp = Some(now());
        assert_eq!(shoot_work(&moved, Some(&leaving)), ShootWork::None);
        assert_eq!(shoot_work(&shoot(None), None), ShootWork::None, "no seed");
        let mut deleted = shoot(Some("seed-1"));
        deleted.metadata.deletion_timestamp = Some(now());
        assert_eq!(shoot_work(&deleted, None), ShootWork::None);
        // The decision agrees with the patch the reconcile would write.
        for (shoot, entry) in [(&s, &entry), (&moved, &entry)] {
            assert_eq!(
                shoot_work(shoot, Some(entry)) == ShootWork::Update,
                entry_update(entry, shoot).is_some()
            );
        }
    }

    fn entry() -> BackupEntry {
        let mut e = BackupEntry::new(
            "e",
            BackupEntrySpec {
                bucket_name: "b-0".into(),
                seed_name: Some("seed-1".into()),
                ..BackupEntrySpec::default()
            },
        );
        e.metadata.labels = Some([(LABEL_SEED.to_string(), "seed-1".to_string())].into());
        e
    }

    #[test]
    fn an_entry_is_reconciled_only_when_there_is_something_to_do() {
        let settled = entry();
        assert!(!entry_needs_reconcile(&settled));

        let mut unlabelled = entry();
        unlabelled.metadata.labels = None;
        assert!(entry_needs_reconcile(&unlabelled), "seed label missing");

        let mut deleting = entry();
        deleting.metadata.deletion_timestamp = Some(now());
        assert!(
            entry_needs_reconcile(&deleting),
            "grace and cleanup hand-over"
        );

        let mut handing_over = entry();
        handing_over.spec.seed_name = Some("seed-2".into());
        handing_over.status = Some(BackupEntryStatus {
            seed_name: Some("seed-1".into()),
            ..BackupEntryStatus::default()
        });
        assert!(entry_needs_reconcile(&handing_over), "seed hand-over");

        let mut asking = entry();
        asking.metadata.annotations =
            Some([(ANNOTATION_MIGRATION_TARGET.to_string(), "b-1".to_string())].into());
        assert!(entry_needs_reconcile(&asking), "a move asks for a place");

        let mut holding = entry();
        holding.metadata.annotations =
            Some([(ANNOTATION_MIGRATION_RESERVED.to_string(), "b-1".to_string())].into());
        assert!(
            entry_needs_reconcile(&holding),
            "a held place no longer asked for"
        );
    }

    fn bucket() -> BackupBucket {
        let mut b = BackupBucket::new(
            "aws-eu-1-0123abcd-0",
            BackupBucketSpec {
                seed_name: Some("seed-1".into()),
                ..BackupBucketSpec::default()
            },
        );
        b.status = Some(BackupBucketStatus {
            entry_count: Some(3),
            ..BackupBucketStatus::default()
        });
        b
    }

    #[test]
    fn a_profile_looks_at_a_bucket_only_when_it_drifted_or_went() {
        let mut profile = CloudProfile::new(
            "aws",
            granary_api::core::CloudProfileSpec {
                type_: "aws".into(),
                backup: Some(granary_api::core::BackupSpec {
                    provider: "aws".into(),
                    credentials_ref: Some(ObjectReference {
                        api_version: "v1".into(),
                        kind: "Secret".into(),
                        name: "backup".into(),
                        namespace: "garden".into(),
                        ..ObjectReference::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        let key = PoolKey {
            kind: PoolKind::CloudProfile,
            owner: "aws".into(),
            region: "eu-1".into(),
        };
        let source = PoolSource::from_profile(&profile, key.clone()).expect("a source");
        let shard = crate::buckets::new_shard_bucket(
            &source,
            0,
            Some("seed-1"),
            &granary_runtime::selector::ObjectSelector::default(),
        );
        assert!(
            !profile_has_work(&shard, false, &key, Some(&profile)),
            "a shard made from the profile"
        );
        assert!(profile_has_work(&shard, true, &key, Some(&profile)), "gone");
        let mut deleting = shard.clone();
        deleting.metadata.deletion_timestamp = Some(now());
        assert!(!profile_has_work(&deleting, false, &key, Some(&profile)));
        // The profile's credentials change: its shards drifted.
        if let Some(b) = profile.spec.backup.as_mut() {
            b.credentials_ref.as_mut().expect("set above").name = "rotated".into();
        }
        assert!(profile_has_work(&shard, false, &key, Some(&profile)));
        assert!(!profile_has_work(&shard, false, &key, None), "no profile");
    }

    #[test]
    fn count_writes_wake_no_owner_but_what_owners_read_does() {
        let mut views = BucketViews::default();
        let b = bucket();
        assert!(views.changed(&b, false), "a new bucket");
        assert!(!views.changed(&b, false), "the same again");
        let mut counted = b.clone();
        if let Some(s) = counted.status.as_mut() {
            s.entry_count = Some(35);
        }
        assert!(!views.changed(&counted, false), "only the count moved");

        let mut credentials = counted.clone();
        credentials.spec.credentials_ref = Some(ObjectReference {
            name: "other".into(),
            ..ObjectReference::default()
        });
        assert!(views.changed(&credentials, false));

        let mut failed = credentials.clone();
        if let Some(s) = failed.status.as_mut() {
            s.last_error = Some(granary_runtime::status::last_error(
                "denied",
                [],
                chrono::Utc::now(),
            ));
        }
        assert!(
            views.changed(&failed, false),
            "an error for BackupBucketsReady"
        );

        let mut handed = failed.clone();
        handed.spec.seed_name = Some("seed-2".into());
        assert!(views.changed(&handed, false), "another seed");

        let mut deleting = handed.clone();
        deleting.metadata.deletion_timestamp = Some(now());
        assert!(views.changed(&deleting, false));
        assert!(views.changed(&deleting, true), "gone");
        assert!(
            views.changed(&deleting, false),
            "seen anew after it was gone"
        );
    }

    /// A seed named `name`, its `BackupBucketsReady` condition at `ready`, if any.
    fn seed(name: &str, ready: Option<ConditionStatus>) -> Arc<Seed> {
        let mut seed = Seed::new(name, granary_api::core::SeedSpec::default());
        if let Some(status) = ready {
            seed.status = Some(granary_api::core::SeedStatus {
                conditions: vec![granary_api::common::Condition {
                    type_: CONDITION_BACKUP_BUCKETS_READY.to_string(),
                    status,
                    last_transition_time: chrono::Utc::now(),
                    last_update_time: chrono::Utc::now(),
                    reason: "Test".into(),
                    message: String::new(),
                    codes: Vec::new(),
                }],
                ..Default::default()
            });
        }
        Arc::new(seed)
    }

    #[test]
    fn a_bucket_change_wakes_the_seeds_it_was_and_is_on_only() {
        let mut views = BucketViews::default();
        // Seeds without a BackupBucketsReady condition yet: any bucket joining is news.
        let fresh = |name: &str| Some(seed(name, None));
        let b = bucket();
        assert_eq!(
            views.seeds_to_wake(&b, false, fresh),
            ["seed-1"],
            "a new bucket"
        );
        let mut counted = b.clone();
        if let Some(s) = counted.status.as_mut() {
            s.entry_count = Some(35);
        }
        assert!(
            views.seeds_to_wake(&counted, false, fresh).is_empty(),
            "a count"
        );
        let mut handed = counted.clone();
        handed.spec.seed_name = Some("seed-2".into());
        if let Some(s) = handed.status.as_mut() {
            s.seed_name = Some("seed-3".into());
        }
        assert_eq!(
            views.seeds_to_wake(&handed, false, fresh),
            ["seed-1", "seed-3"],
            "the old seed loses it, the seed now responsible gets it (seed-2 is only named)"
        );
        assert_eq!(
            views.seeds_to_wake(&handed, true, fresh),
            ["seed-2", "seed-3"],
            "gone"
        );
        // A shard of a seed's own pool wakes that seed too (it keeps its first shard).
        let mut own = bucket();
        own.metadata.labels = Some(
            [
                (
                    granary_api::core::LABEL_POOL_KIND.to_string(),
                    "seed".to_string(),
                ),
                (
                    granary_api::core::LABEL_POOL_OWNER.to_string(),
                    "seed-9".to_string(),
                ),
                (
                    granary_api::core::LABEL_REGION.to_string(),
                    "eu-1".to_string(),
                ),
            ]
            .into(),
        );
        assert_eq!(pool_of(&own).map(|p| p.owner), Some("seed-9".to_string()));
        assert_eq!(views.seeds_to_wake(&own, false, fresh), ["seed-1"]);
        assert_eq!(views.seeds_to_wake(&own, true, fresh), ["seed-1", "seed-9"]);
        // A seed not (or no longer) in the cache has nothing to reconcile.
        assert!(views.seeds_to_wake(&b, false, |_| None).is_empty());
    }

    #[test]
    fn a_new_shard_wakes_its_seed_only_when_the_seed_condition_would_change() {
        let ready = |name: &str| Some(seed(name, Some(ConditionStatus::True)));
        let mut views = BucketViews::default();
        // The thousandth shard of a seed whose buckets are ready, without an error.
        assert!(views.seeds_to_wake(&bucket(), false, ready).is_empty());
        // Its error, and the error going away, change the seed's condition.
        let mut failing = bucket();
        if let Some(s) = failing.status.as_mut() {
            s.last_error = Some(granary_api::common::LastError {
                description: "access denied".into(),
                task_id: None,
                codes: Vec::new(),
                last_update_time: None,
            });
        }
        assert_eq!(views.seeds_to_wake(&failing, false, ready), ["seed-1"]);
        assert_eq!(views.seeds_to_wake(&bucket(), false, ready), ["seed-1"]);
        // A new shard with an error, or one joining a seed whose condition is not True
        // (no bucket yet, or one failing): news for the seed.
        let mut other = failing.clone();
        other.metadata.name = Some("aws-eu-1-0123abcd-1".into());
        assert_eq!(views.seeds_to_wake(&other, false, ready), ["seed-1"]);
        for status in [ConditionStatus::Unknown, ConditionStatus::False] {
            let mut third = bucket();
            third.metadata.name = Some(format!("aws-eu-1-0123abcd-{status:?}"));
            let seeds = views.seeds_to_wake(&third, false, |n| Some(seed(n, Some(status))));
            assert_eq!(seeds, ["seed-1"], "{status:?}");
        }
        // A seed being deleted looks at every change of a bucket on it (its guard).
        let mut deleting = seed("seed-1", Some(ConditionStatus::True));
        Arc::make_mut(&mut deleting).metadata.deletion_timestamp = Some(now());
        let mut fourth = bucket();
        fourth.metadata.name = Some("aws-eu-1-0123abcd-4".into());
        assert_eq!(
            views.seeds_to_wake(&fourth, false, |_| Some(deleting.clone())),
            ["seed-1"]
        );
    }

    #[test]
    fn only_a_seed_coming_to_life_wakes_the_buckets() {
        let t0 = chrono::DateTime::from_timestamp(1_000_000, 0).expect("a time");
        let s = |n: i64| Duration::seconds(n);
        let within = s(40);
        let mut leases = SeedLeases::default();
        // First sight of a Lease, renewed: the seed may be new to every bucket.
        assert!(leases.wakes_buckets("seed-a", Some(t0), false, t0, within));
        // Renewals of a live seed: nothing changes for any bucket.
        for n in [10, 20, 45, 80] {
            assert!(
                !leases.wakes_buckets("seed-a", Some(t0 + s(n)), false, t0 + s(n), within),
                "renewal at +{n}s"
            );
        }
        // Silent for longer than ready_within, then renewed: it comes back to life.
        assert!(leases.wakes_buckets("seed-a", Some(t0 + s(200)), false, t0 + s(200), within));
        // A Lease without a renew time, and one deleted, always wake.
        assert!(leases.wakes_buckets("seed-b", None, false, t0, within));
        assert!(leases.wakes_buckets("seed-b", Some(t0), false, t0, within));
        assert!(leases.wakes_buckets("seed-a", Some(t0 + s(200)), true, t0 + s(201), within));
        // Seen again after its deletion: new.
        assert!(leases.wakes_buckets("seed-a", Some(t0 + s(210)), false, t0 + s(210), within));
    }
}
