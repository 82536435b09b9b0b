//! Moves of an entry between buckets (`granary migrate`, see
//! docs/architecture.md#legacy-migration). The garden is the one writer of bucket counts,
//! so a migration does not raise the target's count itself: it asks for a place with the
//! entry annotation `granary.gardener.cloud/migration-target`, and the garden answers,
//! under the same per-pool lock and compare-and-swap as a placement, by holding a place
//! within the quota (`migration-reserved`) or refusing (`migration-refused`, with the
//! reason). From the moment the place is held, the entry counts in the target as well as
//! in the bucket it names, so no recount and no placement can give that place away while
//! the migration copies and switches.
//!
//! Pure decisions here; the ledger commits, the entry controller applies.

use std::collections::BTreeMap;

use granary_api::core::{
    ANNOTATION_MIGRATION_REFUSED, ANNOTATION_MIGRATION_RESERVED, ANNOTATION_MIGRATION_TARGET,
    BackupEntry,
};

/// What the garden does about an entry's move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveStep {
    /// Nothing.
    None,
    /// Hold a place in this bucket (raise its count within the quota), then mark the
    /// entry `migration-reserved`.
    Reserve(String),
    /// The place held in this bucket is no longer needed (the entry moved there, the
    /// migration was abandoned or retargeted, or the entry is being deleted): drop the
    /// mark and recount the bucket.
    Release(String),
}

/// Decides the step for an entry naming `bucket_name` with these annotations.
pub fn move_step(
    annotations: &BTreeMap<String, String>,
    bucket_name: &str,
    deleting: bool,
) -> MoveStep {
    let target = annotations
        .get(ANNOTATION_MIGRATION_TARGET)
        .filter(|t| !t.is_empty());
    let reserved = annotations
        .get(ANNOTATION_MIGRATION_RESERVED)
        .filter(|r| !r.is_empty());
    if let Some(reserved) = reserved {
        let still_wanted = !deleting && reserved != bucket_name && target == Some(reserved);
        return if still_wanted {
            MoveStep::None
        } else {
            MoveStep::Release(reserved.clone())
        };
    }
    match target {
        Some(t)
            if !deleting
                && t != bucket_name
                && !annotations.contains_key(ANNOTATION_MIGRATION_REFUSED) =>
        {
            MoveStep::Reserve(t.clone())
        }
        _ => MoveStep::None,
    }
}

/// The bucket in which a place is held for the entry, if any (and not the one it names).
pub fn reserved_bucket(entry: &BackupEntry) -> Option<&str> {
    entry
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_MIGRATION_RESERVED)
        .map(String::as_str)
        .filter(|r| !r.is_empty() && *r != entry.spec.bucket_name)
}

/// Whether the entry takes a place in `bucket`: the bucket it names, or the one holding a
/// place for its move. The one counting rule of the garden (recounts, deletion guard)
/// and of `granary migrate`'s advance check.
pub fn counts_in(entry: &BackupEntry, bucket: &str) -> bool {
    entry.spec.bucket_name == bucket || reserved_bucket(entry) == Some(bucket)
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::core::BackupEntrySpec;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const T: &str = ANNOTATION_MIGRATION_TARGET;
    const R: &str = ANNOTATION_MIGRATION_RESERVED;
    const X: &str = ANNOTATION_MIGRATION_REFUSED;

    #[test]
    fn a_target_other_than_the_bucket_asks_for_a_place() {
        assert_eq!(
            move_step(&ann(&[(T, "b-1")]), "legacy", false),
            MoveStep::Reserve("b-1".into())
        );
        assert_eq!(move_step(&ann(&[]), "b-0", false), MoveStep::None);
        // Already there: nothing to hold.
        assert_eq!(move_step(&ann(&[(T, "b-0")]), "b-0", false), MoveStep::None);
    }

    #[test]
    fn a_refusal_is_not_retried_until_the_migration_asks_again() {
        assert_eq!(
            move_step(&ann(&[(T, "b-1"), (X, "full")]), "b-0", false),
            MoveStep::None
        );
    }

    #[test]
    fn a_held_place_is_kept_while_the_move_is_wanted() {
        assert_eq!(
            move_step(&ann(&[(T, "b-1"), (R, "b-1")]), "b-0", false),
            MoveStep::None
        );
    }

    #[test]
    fn a_held_place_is_released_when_done_abandoned_retargeted_or_deleted() {
        // Moved: the entry counts there through its bucket name.
        assert_eq!(
            move_step(&ann(&[(T, "b-1"), (R, "b-1")]), "b-1", false),
            MoveStep::Release("b-1".into())
        );
        // Abandoned.
        assert_eq!(
            move_step(&ann(&[(R, "b-1")]), "b-0", false),
            MoveStep::Release("b-1".into())
        );
        // Retargeted: first let go, then ask for the new place.
        assert_eq!(
            move_step(&ann(&[(T, "b-2"), (R, "b-1")]), "b-0", false),
            MoveStep::Release("b-1".into())
        );
        assert_eq!(
            move_step(&ann(&[(T, "b-2")]), "b-0", false),
            MoveStep::Reserve("b-2".into())
        );
        // Being deleted: neither kept nor asked for.
        assert_eq!(
            move_step(&ann(&[(T, "b-1"), (R, "b-1")]), "b-0", true),
            MoveStep::Release("b-1".into())
        );
        assert_eq!(move_step(&ann(&[(T, "b-1")]), "b-0", true), MoveStep::None);
    }

    #[test]
    fn an_entry_counts_where_it_is_and_where_a_place_is_held() {
        let mut e = BackupEntry::new(
            "e",
            BackupEntrySpec {
                bucket_name: "b-0".into(),
                ..Default::default()
            },
        );
        assert!(counts_in(&e, "b-0"));
        assert!(!counts_in(&e, "b-1"));
        e.metadata.annotations = Some(ann(&[(T, "b-1")]));
        assert!(!counts_in(&e, "b-1"), "asking holds nothing");
        e.metadata.annotations = Some(ann(&[(T, "b-1"), (R, "b-1")]));
        assert!(counts_in(&e, "b-0") && counts_in(&e, "b-1"));
        e.spec.bucket_name = "b-1".into();
        assert!(counts_in(&e, "b-1") && !counts_in(&e, "b-0"));
        assert_eq!(reserved_bucket(&e), None, "counted once where it is");
    }
}
