//! The conditions the garden keeps (reference §6): `BackupBucketsReady` on every Seed,
//! and `BackupConfigurationValid` on every CloudProfile with a `spec.backup`.

use crate::api::common::{ConditionStatus, FieldError, describe_field_errors};
use crate::api::core::{
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
/// False naming every bucket with an error, Unknown without buckets, else True.
pub fn backup_buckets_ready(buckets: &[(String, Option<String>)]) -> ConditionValue {
    if buckets.is_empty() {
        return (
            ConditionStatus::Unknown,
            REASON_BACKUP_BUCKETS_GONE,
            "no BackupBucket is assigned to this seed".to_string(),
        );
    }
    let mut failing: Vec<String> = buckets
        .iter()
        .filter_map(|(name, error)| error.as_ref().map(|e| format!("{name}: {e}")))
        .collect();
    if failing.is_empty() {
        return (
            ConditionStatus::True,
            REASON_BACKUP_BUCKETS_AVAILABLE,
            format!("all {} BackupBuckets are available", buckets.len()),
        );
    }
    failing.sort();
    (
        ConditionStatus::False,
        REASON_BACKUP_BUCKETS_ERROR,
        format!(
            "{} of {} BackupBuckets have errors: {}",
            failing.len(),
            buckets.len(),
            failing.join("; ")
        ),
    )
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
        assert!(message.contains("2 of 3") && message.contains("b: denied; c: quota"));
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
