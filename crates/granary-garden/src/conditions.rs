//! The conditions the garden keeps (docs/architecture.md#garden): `BackupBucketsReady` and
//! `Lost` on every Seed, and `BackupConfigurationValid` on every CloudProfile with a
//! `spec.backup`.

use chrono::{DateTime, Utc};
use granary_api::common::{ConditionStatus, FieldError, describe_field_errors};
use granary_api::core::{
    REASON_BACKUP_BUCKETS_AVAILABLE, REASON_BACKUP_BUCKETS_ERROR, REASON_BACKUP_BUCKETS_GONE,
    REASON_SEED_DELETED, REASON_SEED_REACHABLE, REASON_SEED_UNREADY,
};

/// `BackupConfigurationValid` reason: `spec.backup` forms pools.
pub const REASON_BACKUP_CONFIGURATION_VALID: &str = "BackupConfigurationValid";
/// `BackupConfigurationValid` reason: `spec.backup` is rejected; no buckets.
pub const REASON_BACKUP_CONFIGURATION_INVALID: &str = "BackupConfigurationInvalid";
/// `BackupConfigurationValid` reason: no `spec.backup`, so no backups.
pub const REASON_NO_BACKUP_CONFIGURATION: &str = "NoBackupConfiguration";

/// A condition's (status, reason, message).
pub type ConditionValue = (ConditionStatus, &'static str, String);

/// `Lost` of seed `name`: True once it is being deleted or has been unready for
/// `lost_after`, naming the seeds of its pool that read its Velero backups (`readers`)
/// and how to restore one; else False. With it, when to look again (the moment an
/// unready seed becomes lost).
pub fn seed_lost(
    name: &str,
    deleting: bool,
    unready_since: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    lost_after: chrono::Duration,
    readers: &[String],
) -> (ConditionValue, Option<DateTime<Utc>>) {
    let readable = if readers.is_empty() {
        "no other seed of its pool can read its Velero backups".to_string()
    } else {
        format!(
            "its Velero backups stay readable on the other seeds of its pool ({}) through \
             location seed-{name}: `granary restore create --from-seed {name} --from-backup \
             <backup>`",
            readers.join(", ")
        )
    };
    if deleting {
        return (
            (
                ConditionStatus::True,
                REASON_SEED_DELETED,
                format!("Seed {name} is being deleted; {readable}."),
            ),
            None,
        );
    }
    match unready_since {
        Some(since) if now >= since + lost_after => (
            (
                ConditionStatus::True,
                REASON_SEED_UNREADY,
                format!(
                    "Seed {name} has not renewed its Lease since {}; {readable}.",
                    since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ),
            ),
            None,
        ),
        since => (
            (
                ConditionStatus::False,
                REASON_SEED_REACHABLE,
                format!("Seed {name} renews its Lease."),
            ),
            since.map(|s| s + lost_after),
        ),
    }
}

/// `BackupBucketsReady` of a seed from its buckets' (name, lastError description):
/// False naming every bucket with an error, Unknown without buckets, else True, with
/// Gardener's messages (`backupbucketscheck`). The message names no count: a seed whose
/// buckets are all fine keeps one condition however many shards its pools grow, so a
/// burst of new shards writes the seed once, not once per shard (each write wakes every
/// bucket's reconcile).
pub fn backup_buckets_ready(buckets: &[(String, Option<String>)]) -> ConditionValue {
    if buckets.is_empty() {
        return (
            ConditionStatus::Unknown,
            REASON_BACKUP_BUCKETS_GONE,
            "Backup Buckets are gone.".to_string(),
        );
    }
    let mut failing: Vec<(&str, &str)> = buckets
        .iter()
        .filter_map(|(name, error)| Some((name.as_str(), error.as_deref()?)))
        .collect();
    if failing.is_empty() {
        return (
            ConditionStatus::True,
            REASON_BACKUP_BUCKETS_AVAILABLE,
            "Backup Buckets are available.".to_string(),
        );
    }
    failing.sort();
    let mut message = "The following BackupBuckets have issues:".to_string();
    for (name, error) in failing {
        message.push_str(&format!("\n* Name: {name}, Error: {error}"));
    }
    (ConditionStatus::False, REASON_BACKUP_BUCKETS_ERROR, message)
}

/// `BackupConfigurationValid` of a CloudProfile from its validation errors; `None` for a
/// profile without `spec.backup` whose profile is otherwise valid.
pub fn backup_configuration_valid(has_backup: bool, errors: &[FieldError]) -> ConditionValue {
    if !errors.is_empty() {
        return (
            ConditionStatus::False,
            REASON_BACKUP_CONFIGURATION_INVALID,
            format!(
                "no backup buckets are created: {}",
                describe_field_errors(errors)
            ),
        );
    }
    if !has_backup {
        return (
            ConditionStatus::True,
            REASON_NO_BACKUP_CONFIGURATION,
            "no spec.backup: shoots of this profile get no backups unless their seed has its own"
                .to_string(),
        );
    }
    (
        ConditionStatus::True,
        REASON_BACKUP_CONFIGURATION_VALID,
        "spec.backup is valid".to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_ready_names_the_failing_buckets() {
        assert_eq!(backup_buckets_ready(&[]).0, ConditionStatus::Unknown);
        let ok = [("a".to_string(), None), ("b".to_string(), None)];
        assert_eq!(backup_buckets_ready(&ok).1, REASON_BACKUP_BUCKETS_AVAILABLE);
        let bad = [
            ("b".to_string(), Some("denied".to_string())),
            ("a".to_string(), None),
            ("c".to_string(), Some("quota".to_string())),
        ];
        let (status, reason, message) = backup_buckets_ready(&bad);
        assert_eq!(
            (status, reason),
            (ConditionStatus::False, REASON_BACKUP_BUCKETS_ERROR)
        );
        assert_eq!(
            message,
            "The following BackupBuckets have issues:\n* Name: b, Error: denied\n* Name: c, Error: quota"
        );
    }

    #[test]
    fn buckets_ready_does_not_change_as_a_pool_grows() {
        let healthy = |n: usize| -> Vec<(String, Option<String>)> {
            (0..n).map(|i| (format!("bucket-{i}"), None)).collect()
        };
        let one = backup_buckets_ready(&healthy(1));
        assert_eq!(
            one,
            (
                ConditionStatus::True,
                REASON_BACKUP_BUCKETS_AVAILABLE,
                "Backup Buckets are available.".to_string()
            )
        );
        assert_eq!(backup_buckets_ready(&healthy(100)), one);
        assert_eq!(backup_buckets_ready(&[]).2, "Backup Buckets are gone.");
    }

    #[test]
    fn configuration_condition_names_the_field_path() {
        let errors = [FieldError::new("spec.backup.region", "required")];
        let (status, reason, message) = backup_configuration_valid(true, &errors);
        assert_eq!(status, ConditionStatus::False);
        assert_eq!(reason, REASON_BACKUP_CONFIGURATION_INVALID);
        assert!(
            message.contains("spec.backup.region: required"),
            "{message}"
        );
        assert_eq!(
            backup_configuration_valid(false, &[]).1,
            REASON_NO_BACKUP_CONFIGURATION
        );
        assert_eq!(
            backup_configuration_valid(true, &[]).0,
            ConditionStatus::True
        );
    }
}

#[cfg(test)]
mod lost_tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_seed_is_lost_when_deleted_or_unready_past_the_hand_over_time() {
        let t = |s: i64| Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap();
        let after = chrono::Duration::seconds(300);
        let readers = vec!["b".to_string(), "c".to_string()];
        let ((status, reason, message), next) = seed_lost("a", true, None, t(0), after, &readers);
        assert_eq!(
            (status, reason, next),
            (ConditionStatus::True, REASON_SEED_DELETED, None)
        );
        assert!(
            message.contains("(b, c)") && message.contains("--from-seed a"),
            "{message}"
        );
        let ((status, reason, _), next) = seed_lost("a", false, None, t(0), after, &readers);
        assert_eq!(
            (status, reason, next),
            (ConditionStatus::False, REASON_SEED_REACHABLE, None)
        );
        // Unready: not lost yet, looked at again when it would be.
        let ((status, _, _), next) = seed_lost("a", false, Some(t(0)), t(299), after, &readers);
        assert_eq!((status, next), (ConditionStatus::False, Some(t(300))));
        let ((status, reason, message), next) =
            seed_lost("a", false, Some(t(0)), t(300), after, &[]);
        assert_eq!(
            (status, reason, next),
            (ConditionStatus::True, REASON_SEED_UNREADY, None)
        );
        assert!(message.contains("no other seed of its pool"), "{message}");
    }
}
