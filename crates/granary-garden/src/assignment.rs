//! Which seed provisions a bucket (docs/architecture.md#bucket-assignment). Candidates
//! are the ready seeds serving the bucket's pool, ranked same region first, then oldest,
//! then by name. A bucket keeps its seed while that seed is ready or has been unready for
//! less than the hand-over time; after that (or when the seed is gone) it is handed to
//! the best other ready candidate. Seed readiness comes from the seed's liveness Lease
//! (docs/architecture.md#seed-liveness), never from Gardener's Seed conditions.

use chrono::{DateTime, Duration, Utc};

/// A seed that serves the bucket's pool, with its liveness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedCandidate {
    pub name: String,
    pub region: String,
    pub created: DateTime<Utc>,
    /// `spec.renewTime` of the seed's Lease `seed-<name>`; `None` if it never renewed.
    pub last_renewal: Option<DateTime<Utc>>,
    /// The Seed object has a deletionTimestamp.
    pub deleting: bool,
}

impl SeedCandidate {
    /// Ready: renewed within `ready_within` and not being deleted.
    pub fn is_ready(&self, now: DateTime<Utc>, ready_within: Duration) -> bool {
        !self.deleting && self.last_renewal.is_some_and(|t| now - t <= ready_within)
    }

    /// Since when the seed counts as unready (`None` while ready). A seed that never
    /// renewed counts as unready since it was created.
    pub fn unready_since(
        &self,
        now: DateTime<Utc>,
        ready_within: Duration,
    ) -> Option<DateTime<Utc>> {
        if self.is_ready(now, ready_within) {
            return None;
        }
        Some(self.last_renewal.map_or(self.created, |t| t + ready_within))
    }
}

/// The timing rules of assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssignmentTimings {
    /// A seed is ready when its Lease was renewed this recently (`seedLiveness.readyWithin`).
    pub ready_within: Duration,
    /// A bucket's seed unready this long loses the bucket
    /// (`controllers.backupBucket.seedHandOverAfter`).
    pub hand_over_after: Duration,
}

/// The assignment decision for one bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assignment {
    /// The bucket stays where it is.
    Keep,
    /// The bucket has no seed yet: give it this one.
    Assign(String),
    /// The bucket's seed is gone or unready for too long: hand it over.
    HandOver { from: String, to: String },
    /// Nothing can be done now; the bucket keeps its seed (if any) and its status says why.
    Stuck(String),
}

/// Candidates in preference order: same region as the pool first, then the oldest seed,
/// then by name.
pub fn rank<'a>(pool_region: &str, candidates: &'a [SeedCandidate]) -> Vec<&'a SeedCandidate> {
    let mut ranked: Vec<&SeedCandidate> = candidates.iter().collect();
    ranked.sort_by(|a, b| {
        (a.region != pool_region, a.created, &a.name).cmp(&(
            b.region != pool_region,
            b.created,
            &b.name,
        ))
    });
    ranked
}

/// Decides where a bucket of a pool in `pool_region` belongs, given its current seed.
pub fn assign_bucket(
    current: Option<&str>,
    pool_region: &str,
    candidates: &[SeedCandidate],
    now: DateTime<Utc>,
    timings: AssignmentTimings,
) -> Assignment {
    let best_other = |exclude: Option<&str>| {
        rank(pool_region, candidates)
            .into_iter()
            .find(|c| Some(c.name.as_str()) != exclude && c.is_ready(now, timings.ready_within))
            .map(|c| c.name.clone())
    };
    let Some(current) = current else {
        return match best_other(None) {
            Some(seed) => Assignment::Assign(seed),
            None => Assignment::Stuck(format!(
                "no ready seed serves this pool (region {pool_region})"
            )),
        };
    };
    let Some(why) = why_leave(current, candidates, now, timings) else {
        return Assignment::Keep;
    };
    match best_other(Some(current)) {
        Some(to) => Assignment::HandOver {
            from: current.to_string(),
            to,
        },
        None => Assignment::Stuck(format!("{why}, and no other ready seed serves this pool")),
    }
}

/// Why `current` can no longer serve: gone (or not serving), being deleted, or unready
/// for the hand-over time. `None` while it may keep what it holds.
fn why_leave(
    current: &str,
    candidates: &[SeedCandidate],
    now: DateTime<Utc>,
    timings: AssignmentTimings,
) -> Option<String> {
    match candidates.iter().find(|c| c.name == current) {
        None => Some(format!(
            "seed {current} no longer exists or no longer serves this pool"
        )),
        Some(c) if c.deleting => Some(format!("seed {current} is being deleted")),
        Some(c) => match c.unready_since(now, timings.ready_within) {
            Some(since) if now - since >= timings.hand_over_after => Some(format!(
                "seed {current} has been unready since {}",
                since.to_rfc3339()
            )),
            _ => None,
        },
    }
}

/// The cleanup hand-over of an entry being deleted (see
/// docs/architecture.md#hand-over-between-seeds): when the entry's seed can no longer
/// serve (see [`assign_bucket`] for the rule) and its bucket's seed is another, ready
/// seed, the entry goes to the bucket's seed, which then deletes its objects after the
/// grace period. Returns that seed and why.
pub fn cleanup_hand_over(
    entry_seed: Option<&str>,
    bucket_seed: Option<&str>,
    candidates: &[SeedCandidate],
    now: DateTime<Utc>,
    timings: AssignmentTimings,
) -> Option<(String, String)> {
    let to = bucket_seed?;
    if entry_seed == Some(to) {
        return None;
    }
    let ready = candidates
        .iter()
        .any(|c| c.name == to && c.is_ready(now, timings.ready_within));
    if !ready {
        return None;
    }
    let why = match entry_seed {
        None => "the entry has no seed".to_string(),
        Some(from) => why_leave(from, candidates, now, timings)?,
    };
    Some((to.to_string(), why))
}

/// The hand-over of a live entry whose shoot moved to another seed: `spec.seedName` names
/// the new seed while `status.seedName` still names the old one, which normally releases
/// the entry itself (docs/architecture.md#hand-over-between-seeds). What the garden does
/// about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryHandOver {
    /// No move under way.
    None,
    /// The old seed can still release the entry: the garden waits, and says so.
    Wait { message: String },
    /// The old seed is gone, being deleted or unready past the hand-over time: the garden
    /// releases the entry on its behalf, as it hands over buckets.
    Release {
        from: String,
        to: String,
        why: String,
    },
}

/// Decides [`EntryHandOver`] for an entry with these seeds.
pub fn entry_hand_over(
    spec_seed: Option<&str>,
    status_seed: Option<&str>,
    candidates: &[SeedCandidate],
    now: DateTime<Utc>,
    timings: AssignmentTimings,
) -> EntryHandOver {
    let (Some(to), Some(from)) = (
        spec_seed.filter(|s| !s.is_empty()),
        status_seed.filter(|s| !s.is_empty()),
    ) else {
        return EntryHandOver::None;
    };
    if to == from {
        return EntryHandOver::None;
    }
    if let Some(why) = why_leave(from, candidates, now, timings) {
        return EntryHandOver::Release {
            from: from.to_string(),
            to: to.to_string(),
            why,
        };
    }
    let holder = candidates.iter().find(|c| c.name == from);
    let message = match holder.and_then(|c| c.unready_since(now, timings.ready_within)) {
        Some(since) => format!(
            "waiting for seed {from} to hand the entry over to seed {to}; seed {from} has been \
             unready since {}, the garden hands the entry over at {} if it stays so",
            since.to_rfc3339(),
            (since + timings.hand_over_after).to_rfc3339()
        ),
        None => format!("waiting for seed {from} to hand the entry over to seed {to}"),
    };
    EntryHandOver::Wait { message }
}

/// An entry that no seed is responsible for, whose spec names a seed the garden does
/// not have (a shoot moved to, or created on, a seed name without a Seed: possible
/// without gardener-apiserver's checks): what its status says while it waits for that
/// seed to exist or for its shoot to move. `None` when a seed holds it or exists.
pub fn missing_seed(
    spec_seed: Option<&str>,
    status_seed: Option<&str>,
    candidates: &[SeedCandidate],
) -> Option<String> {
    let seed = spec_seed.filter(|s| !s.is_empty())?;
    if status_seed.is_some_and(|s| !s.is_empty()) || candidates.iter().any(|c| c.name == seed) {
        return None;
    }
    Some(format!(
        "seed {seed} does not exist: the entry waits for a Seed named {seed}, or for its \
         shoot to move to a seed that exists"
    ))
}

/// When the decision for a bucket held by `current` can change without any watch event:
/// the moment the seed will have been unready for the hand-over time if it renews no
/// more. `None` when there is no such moment (no seed, or it is leaving already).
pub fn next_check(
    current: Option<&SeedCandidate>,
    now: DateTime<Utc>,
    timings: AssignmentTimings,
) -> Option<DateTime<Utc>> {
    let seed = current?;
    if seed.deleting {
        return None;
    }
    let unready_from = match seed.unready_since(now, timings.ready_within) {
        Some(since) => since,
        None => seed.last_renewal? + timings.ready_within,
    };
    Some(unready_from + timings.hand_over_after).filter(|t| *t > now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn an_entry_on_a_seed_that_does_not_exist_says_so_until_it_does() {
        let seeds = [SeedCandidate {
            name: "europe-1".into(),
            region: "europe".into(),
            created: Utc.timestamp_opt(0, 0).unwrap(),
            last_renewal: None,
            deleting: false,
        }];
        let said = missing_seed(Some("nowhere-1"), None, &seeds).expect("missing");
        assert!(said.starts_with("seed nowhere-1 does not exist"), "{said}");
        assert_eq!(missing_seed(Some("europe-1"), None, &seeds), None);
        assert_eq!(
            missing_seed(Some("nowhere-1"), Some("europe-1"), &seeds),
            None,
            "a seed holds it"
        );
        assert_eq!(missing_seed(None, None, &seeds), None);
    }

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
            .single()
            .expect("valid date")
            + Duration::seconds(secs)
    }

    fn seed(name: &str, region: &str, created: i64, renewed: Option<i64>) -> SeedCandidate {
        SeedCandidate {
            name: name.into(),
            region: region.into(),
            created: t(created),
            last_renewal: renewed.map(t),
            deleting: false,
        }
    }

    const TIMINGS: AssignmentTimings = AssignmentTimings {
        ready_within: Duration::seconds(40),
        hand_over_after: Duration::seconds(300),
    };

    #[test]
    fn ranks_same_region_then_oldest_then_name() {
        let seeds = [
            seed("z", "eu", 5, None),
            seed("b", "us", 1, None),
            seed("a", "eu", 5, None),
            seed("c", "eu", 2, None),
        ];
        let names: Vec<_> = rank("eu", &seeds).iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["c", "a", "z", "b"]);
    }

    #[test]
    fn a_new_bucket_gets_the_best_ready_seed() {
        let now = t(1000);
        let seeds = [
            seed("old-unready", "eu", 0, Some(900)),
            seed("far", "us", 1, Some(990)),
            seed("near", "eu", 10, Some(995)),
        ];
        assert_eq!(
            assign_bucket(None, "eu", &seeds, now, TIMINGS),
            Assignment::Assign("near".into())
        );
        let none_ready = [seed("a", "eu", 0, Some(100))];
        assert!(
            matches!(assign_bucket(None, "eu", &none_ready, now, TIMINGS), Assignment::Stuck(m) if m.contains("no ready seed"))
        );
    }

    #[test]
    fn keeps_its_seed_until_unready_longer_than_the_hand_over_time() {
        let seeds = [seed("a", "eu", 0, Some(1000)), seed("b", "eu", 1, None)];
        let mut alive = seeds.clone();
        alive[1].last_renewal = Some(t(2000));
        // a stops renewing at 1000: unready from 1040; hand-over at 1340.
        assert_eq!(
            assign_bucket(Some("a"), "eu", &alive, t(1030), TIMINGS),
            Assignment::Keep
        );
        assert_eq!(
            assign_bucket(Some("a"), "eu", &alive, t(1339), TIMINGS),
            Assignment::Keep
        );
        let mut later = alive.clone();
        later[1].last_renewal = Some(t(1340));
        assert_eq!(
            assign_bucket(Some("a"), "eu", &later, t(1340), TIMINGS),
            Assignment::HandOver {
                from: "a".into(),
                to: "b".into()
            }
        );
        // No other ready seed: stuck, keeping a, saying why.
        match assign_bucket(Some("a"), "eu", &seeds, t(5000), TIMINGS) {
            Assignment::Stuck(m) => assert!(
                m.contains("seed a has been unready") && m.contains("no other ready seed"),
                "{m}"
            ),
            other => panic!("expected Stuck, got {other:?}"),
        }
    }

    #[test]
    fn a_deleted_or_vanished_seed_is_left_at_once() {
        let mut seeds = [
            seed("a", "eu", 0, Some(1000)),
            seed("b", "eu", 1, Some(1000)),
        ];
        seeds[0].deleting = true;
        assert_eq!(
            assign_bucket(Some("a"), "eu", &seeds, t(1001), TIMINGS),
            Assignment::HandOver {
                from: "a".into(),
                to: "b".into()
            }
        );
        assert_eq!(
            assign_bucket(Some("gone"), "eu", &seeds, t(1001), TIMINGS),
            Assignment::HandOver {
                from: "gone".into(),
                to: "b".into()
            }
        );
    }

    #[test]
    fn a_deleted_entry_goes_to_its_buckets_seed_only_when_its_own_cannot_clean_up() {
        // a stops renewing at 1000: unready from 1040, may be left from 1340.
        let seeds = [
            seed("a", "eu", 0, Some(1000)),
            seed("b", "eu", 1, Some(1330)),
        ];
        let hand = |now, entry: Option<&str>, bucket: Option<&str>| {
            cleanup_hand_over(entry, bucket, &seeds, t(now), TIMINGS).map(|(to, _)| to)
        };
        assert_eq!(hand(1339, Some("a"), Some("b")), None);
        assert_eq!(hand(1340, Some("a"), Some("b")), Some("b".to_string()));
        // Same seed, no bucket seed, or a bucket seed that is not ready: nothing to do.
        assert_eq!(hand(1340, Some("b"), Some("b")), None);
        assert_eq!(hand(1340, Some("a"), None), None);
        assert_eq!(hand(1400, Some("a"), Some("b")), None, "b unready by now");
        // A vanished seed is left at once, with the reason.
        let (to, why) = cleanup_hand_over(Some("gone"), Some("b"), &seeds, t(1340), TIMINGS)
            .expect("handed over");
        assert_eq!(to, "b");
        assert!(why.contains("gone no longer exists"), "{why}");
    }

    #[test]
    fn a_moved_entry_waits_for_its_old_seed_unless_that_seed_is_gone() {
        let timings = AssignmentTimings {
            ready_within: Duration::seconds(40),
            hand_over_after: Duration::seconds(300),
        };
        let old = seed("old", "eu", 0, Some(100));
        let new = seed("new", "eu", 0, Some(100));
        let both = [old.clone(), new.clone()];
        assert_eq!(
            entry_hand_over(Some("new"), Some("new"), &both, t(110), timings),
            EntryHandOver::None
        );
        assert_eq!(
            entry_hand_over(Some("new"), None, &both, t(110), timings),
            EntryHandOver::None
        );
        // The old seed is live: it hands over itself.
        let EntryHandOver::Wait { message } =
            entry_hand_over(Some("new"), Some("old"), &both, t(110), timings)
        else {
            panic!("waits")
        };
        assert_eq!(
            message,
            "waiting for seed old to hand the entry over to seed new"
        );
        // Unready, not long enough: still waits, and says until when.
        let EntryHandOver::Wait { message } =
            entry_hand_over(Some("new"), Some("old"), &both, t(200), timings)
        else {
            panic!("waits")
        };
        assert!(
            message.contains("unready since") && message.contains("hands the entry over at"),
            "{message}"
        );
        // Unready past the hand-over time, being deleted, or gone: the garden releases it.
        for (candidates, now, why) in [
            (both.to_vec(), t(100 + 40 + 300), "unready since"),
            (
                vec![
                    SeedCandidate {
                        deleting: true,
                        ..old.clone()
                    },
                    new.clone(),
                ],
                t(110),
                "being deleted",
            ),
            (vec![new.clone()], t(110), "no longer exists"),
        ] {
            match entry_hand_over(Some("new"), Some("old"), &candidates, now, timings) {
                EntryHandOver::Release { from, to, why: w } => {
                    assert_eq!((from.as_str(), to.as_str()), ("old", "new"));
                    assert!(w.contains(why), "{w}");
                }
                other => panic!("released, got {other:?}"),
            }
        }
    }

    #[test]
    fn the_next_check_is_when_a_silent_seed_would_lose_its_bucket() {
        let live = seed("a", "eu", 0, Some(1000));
        // Renewed at 1000: unready from 1040, handed over at 1340.
        assert_eq!(next_check(Some(&live), t(1010), TIMINGS), Some(t(1340)));
        assert_eq!(next_check(Some(&live), t(1340), TIMINGS), None);
        let never = seed("b", "eu", 100, None);
        assert_eq!(next_check(Some(&never), t(200), TIMINGS), Some(t(400)));
        assert_eq!(next_check(None, t(0), TIMINGS), None);
    }
}
