//! What Velero's backup controller decides before a backup runs
//! (`backup_controller.go` `prepareBackupRequest`), as one pure function: the defaulted
//! spec (TTL, timeouts, the storage location — the one marked `spec.default`, else the
//! server's default), `status.expiration`, the `velero.io/storage-location` label, and
//! the location's validation errors with Velero's messages. The spec checks that need no
//! cluster are the backup runner's ([`super::backup::validate`]).

use chrono::{DateTime, Utc};
use granary_api::velero::{
    Backup, BackupSpec, BackupStorageLocation, BackupStorageLocationAccessMode,
    BackupStorageLocationPhase, Duration, ServerDefaults,
};
use granary_velero::label::valid_label_value;
use kube::ResourceExt;
use std::collections::BTreeMap;

/// `velero.io/storage-location`.
pub const LABEL_STORAGE_LOCATION: &str = "velero.io/storage-location";

/// A backup made ready to run (or to fail validation).
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    pub spec: BackupSpec,
    pub labels: BTreeMap<String, String>,
    pub expiration: DateTime<Utc>,
    /// The location the backup goes to, when it exists.
    pub location: Option<BackupStorageLocation>,
    /// Velero's messages; non-empty means `FailedValidation`.
    pub validation_errors: Vec<String>,
}

/// Prepares `backup` against the namespace's `locations`.
pub fn prepare(
    backup: &Backup,
    locations: &[BackupStorageLocation],
    default_ttl: std::time::Duration,
    server_default_location: &str,
    now: DateTime<Utc>,
) -> Prepared {
    let mut spec = backup.spec.clone();
    spec.apply_defaults(&ServerDefaults {
        backup_ttl: Duration::from_delta(
            chrono::TimeDelta::from_std(default_ttl).unwrap_or(chrono::TimeDelta::hours(720)),
        ),
        ..ServerDefaults::default()
    });
    let ttl = spec
        .ttl
        .as_ref()
        .and_then(|t| t.to_delta().ok())
        .unwrap_or_else(|| chrono::TimeDelta::hours(720));
    let mut errors = Vec::new();
    let server_specified = spec.storage_location.as_deref().unwrap_or("").is_empty();
    if server_specified {
        let name = locations
            .iter()
            .find(|l| l.spec.default == Some(true))
            .map(|l| l.name_any())
            .unwrap_or_else(|| server_default_location.to_string());
        spec.storage_location = Some(name);
    }
    let name = spec.storage_location.clone().unwrap_or_default();
    let location = locations.iter().find(|l| l.name_any() == name).cloned();
    match &location {
        None => {
            let not_found = format!("backupstoragelocations.velero.io \"{name}\" not found");
            errors.push(if server_specified {
                format!(
                    "an existing backup storage location was not specified at backup creation \
                     time and the server default {name} does not exist. Please address this \
                     issue (see `velero backup-location -h` for options) and create a new \
                     backup. Error: {not_found}"
                )
            } else {
                format!(
                    "an existing backup storage location was not specified at backup creation \
                     time and the default {name} was not found. Please address this issue (see \
                     `velero backup-location -h` for options) and create a new backup. Error: \
                     {not_found}"
                )
            });
        }
        Some(l) => {
            if l.spec.access_mode == Some(BackupStorageLocationAccessMode::ReadOnly) {
                errors.push(format!(
                    "backup can't be created because backup storage location {name} is currently in read-only mode"
                ));
            }
            if l.status.as_ref().and_then(|s| s.phase)
                != Some(BackupStorageLocationPhase::Available)
            {
                errors.push(format!(
                    "backup can't be created because BackupStorageLocation {name} is in Unavailable status."
                ));
            }
        }
    }
    let mut labels = backup.labels().clone();
    labels.insert(
        LABEL_STORAGE_LOCATION.to_string(),
        valid_label_value(&name).into_owned(),
    );
    Prepared {
        spec,
        labels,
        expiration: now + ttl,
        location,
        validation_errors: errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use granary_api::velero::{
        BackupStorageLocationSpec, BackupStorageLocationStatus, ObjectStorageLocation,
    };

    fn location(
        name: &str,
        default: bool,
        available: bool,
        read_only: bool,
    ) -> BackupStorageLocation {
        let mut l = BackupStorageLocation::new(
            name,
            BackupStorageLocationSpec {
                provider: "local".into(),
                object_storage: ObjectStorageLocation {
                    bucket: "b".into(),
                    ..Default::default()
                },
                default: default.then_some(true),
                access_mode: read_only.then_some(BackupStorageLocationAccessMode::ReadOnly),
                ..Default::default()
            },
        );
        l.status = Some(BackupStorageLocationStatus {
            phase: Some(if available {
                BackupStorageLocationPhase::Available
            } else {
                BackupStorageLocationPhase::Unavailable
            }),
            ..Default::default()
        });
        l
    }

    fn backup(location: Option<&str>) -> Backup {
        Backup::new(
            "b1",
            BackupSpec {
                storage_location: location.map(String::from),
                ..Default::default()
            },
        )
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 24, 1, 0, 0)
            .single()
            .expect("valid")
    }

    const TTL: std::time::Duration = std::time::Duration::from_secs(720 * 3600);

    #[test]
    fn the_location_marked_default_wins_over_the_server_default() {
        let locs = [
            location("server", false, true, false),
            location("marked", true, true, false),
        ];
        let p = prepare(&backup(None), &locs, TTL, "server", now());
        assert_eq!(p.spec.storage_location.as_deref(), Some("marked"));
        assert_eq!(p.labels[LABEL_STORAGE_LOCATION], "marked");
        assert!(p.validation_errors.is_empty(), "{:?}", p.validation_errors);
        assert_eq!(p.expiration, now() + chrono::TimeDelta::hours(720));
        assert_eq!(p.spec.ttl.as_ref().map(|t| t.as_str()), Some("720h0m0s"));
    }

    #[test]
    fn velero_s_messages_for_unusable_locations() {
        let p = prepare(&backup(None), &[], TTL, "default", now());
        assert!(p.validation_errors[0].starts_with(
            "an existing backup storage location was not specified at backup creation time and the server default default does not exist."
        ));
        let p = prepare(&backup(Some("gone")), &[], TTL, "default", now());
        assert!(
            p.validation_errors[0].contains("the default gone was not found"),
            "{:?}",
            p.validation_errors
        );
        let p = prepare(
            &backup(Some("ro")),
            &[location("ro", false, false, true)],
            TTL,
            "default",
            now(),
        );
        assert_eq!(
            p.validation_errors,
            vec![
                "backup can't be created because backup storage location ro is currently in read-only mode".to_string(),
                "backup can't be created because BackupStorageLocation ro is in Unavailable status.".to_string(),
            ]
        );
    }

    #[test]
    fn a_backup_s_own_ttl_is_kept() {
        let mut b = backup(Some("l"));
        b.spec.ttl = Some(Duration::parse("24h").expect("valid"));
        let p = prepare(
            &b,
            &[location("l", false, true, false)],
            TTL,
            "default",
            now(),
        );
        assert_eq!(p.expiration, now() + chrono::TimeDelta::hours(24));
    }
}
