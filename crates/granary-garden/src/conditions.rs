//! The conditions the garden keeps (docs/architecture.md#garden): `BackupBucketsReady` on
//! every Seed, and `BackupConfigurationValid` on every CloudProfile with a `spec.backup`.

use granary_api::common::{ConditionStatus, FieldError, describe_field_errors};
use granary_api::core::{
    REASON_BACKUP_BUCKETS_AVAILABLE, REASON_BACKUP_BUCKETS_ERROR, REASON_BACKUP_BUCKETS_GONE,
};

/// `BackupConfigurationValid` reason: `spec.backup` forms pools.
pub const REASON_BACKUP_CONFIGURATION_VALID: &str = "BackupConfigurationValid";
/// `BackupConfigurationValid` reason: `spec.backup` is rejected; no buckets.
pub const REASON_BACKUP_CONFIGURATION_INVALID: &str = "BackupConfigurationInvalid";
/// `BackupConfigurationValid` reason: no `spec.backup`, so no backups.
pub const REASON_NO_BACKUP_CONFIGURATION: &str = "NoBackupConfiguration";

/// A condition's (status, reason, message).
pub type ConditionValue = (ConditionStatus, &'static str, String);

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
