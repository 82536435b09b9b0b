//! Deletion guards of the pools' owners (docs/architecture.md#deletion-guards; Gardener's
//! admission has the same rules): a Seed is not deleted while BackupEntries or
//! BackupBuckets are on it (as their seed now or as the seed they are going to), nor a
//! CloudProfile while Shoots use it. The garden keeps its finalizer on both kinds and
//! removes it only when nothing depends on the object any more; while it waits, the
//! object's `DeletionRefused` condition and an event say what it waits for. BackupBuckets
//! have their own guard ([`crate::buckets::deletion_guard`]).
//!
//! Pure decisions here; [`crate::owner_controllers`] applies them.

use granary_api::core::{BackupBucket, BackupEntry, Shoot};
use kube::ResourceExt;

/// The garden's finalizer on Seeds and CloudProfiles (the same name as on buckets).
pub const FINALIZER_GARDEN_GUARD: &str = granary_api::core::FINALIZER_GARDEN_BUCKET_GUARD;
/// Condition set on a Seed or CloudProfile whose deletion waits for its dependents.
pub const CONDITION_DELETION_REFUSED: &str = "DeletionRefused";
/// Its reason, and the reason of the Warning event.
pub const REASON_STILL_IN_USE: &str = "StillInUse";

/// How many dependents a message names.
const EXAMPLES: usize = 3;

/// What the guard does about an object being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnerGuard {
    /// Dependents remain: keep the finalizer; the message says which.
    Refuse(String),
    /// Nothing depends on it: remove the finalizer.
    Release,
    /// The finalizer is gone already.
    Done,
}

/// The objects that keep seed `seed` from going: entries and buckets whose current
/// (`status.seedName`) or wanted (`spec.seedName`) seed it is, as `Kind name` strings.
pub fn seed_dependents<'a>(
    seed: &str,
    entries: impl IntoIterator<Item = &'a BackupEntry>,
    buckets: impl IntoIterator<Item = &'a BackupBucket>,
) -> Vec<String> {
    let on = |spec: Option<&str>, status: Option<&str>| spec == Some(seed) || status == Some(seed);
    let mut out: Vec<String> = buckets
        .into_iter()
        .filter(|b| {
            on(
                b.spec.seed_name.as_deref(),
                b.status.as_ref().and_then(|s| s.seed_name.as_deref()),
            )
        })
        .map(|b| format!("BackupBucket {}", b.name_any()))
        .collect();
    let mut entries: Vec<String> = entries
        .into_iter()
        .filter(|e| {
            on(
                e.spec.seed_name.as_deref(),
                e.status.as_ref().and_then(|s| s.seed_name.as_deref()),
            )
        })
        .map(|e| {
            format!(
                "BackupEntry {}/{}",
                e.namespace().unwrap_or_default(),
                e.name_any()
            )
        })
        .collect();
    out.sort();
    entries.sort();
    out.extend(entries);
    out
}

/// The shoots that keep cloud profile `profile` from going (`namespace/name`).
pub fn profile_dependents<'a>(
    profile: &str,
    shoots: impl IntoIterator<Item = &'a Shoot>,
) -> Vec<String> {
    let mut out: Vec<String> = shoots
        .into_iter()
        .filter(|s| {
            s.cloud_profile_kind() == "CloudProfile" && s.cloud_profile_name() == Some(profile)
        })
        .map(|s| {
            format!(
                "Shoot {}/{}",
                s.namespace().unwrap_or_default(),
                s.name_any()
            )
        })
        .collect();
    out.sort();
    out
}

/// The guard's decision for a `what` (e.g. "seed") being deleted.
pub fn owner_guard(has_finalizer: bool, what: &str, dependents: &[String]) -> OwnerGuard {
    if !has_finalizer {
        return OwnerGuard::Done;
    }
    if dependents.is_empty() {
        return OwnerGuard::Release;
    }
    let n = dependents.len();
    let named = dependents
        .iter()
        .take(EXAMPLES)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = n.saturating_sub(EXAMPLES);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let (objects, verb) = if n == 1 {
        ("object", "uses")
    } else {
        ("objects", "use")
    };
    OwnerGuard::Refuse(format!(
        "deletion waits: {n} {objects} still {verb} this {what} ({named}{tail}); \
         it is deleted once they are gone"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::core::{
        BackupBucketStatus, BackupEntrySpec, BackupEntryStatus, CloudProfileReference, ShootSpec,
    };

    fn entry(name: &str, spec: Option<&str>, status: Option<&str>) -> BackupEntry {
        let mut e = BackupEntry::new(
            name,
            BackupEntrySpec {
                seed_name: spec.map(Into::into),
                ..BackupEntrySpec::default()
            },
        );
        e.metadata.namespace = Some("garden-p".into());
        e.status = Some(BackupEntryStatus {
            seed_name: status.map(Into::into),
            ..BackupEntryStatus::default()
        });
        e
    }

    fn bucket(name: &str, spec: Option<&str>, status: Option<&str>) -> BackupBucket {
        let mut b = BackupBucket::new(name, Default::default());
        b.spec.seed_name = spec.map(Into::into);
        b.status = Some(BackupBucketStatus {
            seed_name: status.map(Into::into),
            ..BackupBucketStatus::default()
        });
        b
    }

    #[test]
    fn a_seed_is_kept_by_what_is_on_it_or_going_to_it() {
        let entries = [
            entry("here", Some("s1"), Some("s1")),
            entry("leaving", Some("s2"), Some("s1")),
            entry("arriving", Some("s1"), None),
            entry("elsewhere", Some("s2"), Some("s2")),
        ];
        let buckets = [
            bucket("b-1", Some("s1"), None),
            bucket("b-2", Some("s2"), None),
        ];
        assert_eq!(
            seed_dependents("s1", &entries, &buckets),
            vec![
                "BackupBucket b-1",
                "BackupEntry garden-p/arriving",
                "BackupEntry garden-p/here",
                "BackupEntry garden-p/leaving",
            ]
        );
        assert!(seed_dependents("s3", &entries, &buckets).is_empty());
    }

    #[test]
    fn a_profile_is_kept_by_its_shoots_only() {
        let shoot = |name: &str, profile: &str, kind: &str| {
            let mut s = Shoot::new(
                name,
                ShootSpec {
                    cloud_profile: Some(CloudProfileReference {
                        kind: kind.into(),
                        name: profile.into(),
                        ..CloudProfileReference::default()
                    }),
                    ..ShootSpec::default()
                },
            );
            s.metadata.namespace = Some("garden-p".into());
            s
        };
        let shoots = [
            shoot("a", "aws", "CloudProfile"),
            shoot("b", "gcp", "CloudProfile"),
            shoot("c", "aws", "NamespacedCloudProfile"),
        ];
        assert_eq!(profile_dependents("aws", &shoots), vec!["Shoot garden-p/a"]);
    }

    #[test]
    fn the_guard_holds_while_anything_depends_and_says_what() {
        assert_eq!(owner_guard(false, "seed", &["x".into()]), OwnerGuard::Done);
        assert_eq!(owner_guard(true, "seed", &[]), OwnerGuard::Release);
        let OwnerGuard::Refuse(one) = owner_guard(true, "cloud profile", &["Shoot p/a".into()])
        else {
            panic!("refused")
        };
        assert_eq!(
            one,
            "deletion waits: 1 object still uses this cloud profile (Shoot p/a); \
             it is deleted once they are gone"
        );
        let many: Vec<String> = (0..5).map(|i| format!("BackupEntry p/e{i}")).collect();
        let OwnerGuard::Refuse(msg) = owner_guard(true, "seed", &many) else {
            panic!("refused")
        };
        assert!(
            msg.contains("5 objects still use this seed")
                && msg.contains("p/e0, BackupEntry p/e1, BackupEntry p/e2 and 2 more"),
            "{msg}"
        );
    }
}
