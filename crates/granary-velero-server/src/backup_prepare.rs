//! What Velero's backup controller decides before a backup runs
//! (`backup_controller.go` `prepareBackupRequest`), as one pure function: the defaulted
//! spec (TTL, CSI snapshot and item operation timeouts, the volume group snapshot label
//! key, `defaultVolumesToFsBackup`, `snapshotMoveData`, the storage location — the one
//! marked `spec.default`, else the server's default), all written back into the Backup
//! as Velero does; `status.expiration`, the `velero.io/storage-location` label, the
//! annotations naming the source cluster's Kubernetes version and the server's resource
//! timeout, and the location's validation errors with Velero's messages. The spec checks
//! that need no cluster are the backup runner's ([`super::backup::validate`]).

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
/// The backed-up cluster's `gitVersion` (its API server's `/version`), e.g. `v1.31.2`.
pub const ANNOTATION_SOURCE_GIT_VERSION: &str = "velero.io/source-cluster-k8s-gitversion";
/// The backed-up cluster's major version, e.g. `1`.
pub const ANNOTATION_SOURCE_MAJOR_VERSION: &str = "velero.io/source-cluster-k8s-major-version";
/// The backed-up cluster's minor version, e.g. `31`.
pub const ANNOTATION_SOURCE_MINOR_VERSION: &str = "velero.io/source-cluster-k8s-minor-version";
/// The server's `--resource-timeout` in Go's duration format (`10m0s`).
pub const ANNOTATION_RESOURCE_TIMEOUT: &str = "velero.io/resource-timeout";
/// Velero's `--volume-group-snapshot-label-key` default.
pub const DEFAULT_VOLUME_GROUP_SNAPSHOT_LABEL_KEY: &str = "velero.io/volume-group";

/// What the server knows of itself and of its cluster when it prepares a backup.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerFacts {
    /// `--default-backup-ttl`.
    pub default_ttl: std::time::Duration,
    /// `--default-backup-storage-location`.
    pub default_location: String,
    /// `--resource-timeout`.
    pub resource_timeout: std::time::Duration,
    /// The cluster's `/version`: `gitVersion`, `major`, `minor`.
    pub git_version: String,
    pub major: String,
    pub minor: String,
}

/// A backup made ready to run (or to fail validation).
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    pub spec: BackupSpec,
    pub labels: BTreeMap<String, String>,
    /// The backup's annotations with Velero's source-cluster and resource-timeout ones.
    pub annotations: BTreeMap<String, String>,
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
    facts: &ServerFacts,
    now: DateTime<Utc>,
) -> Prepared {
    let default_ttl = facts.default_ttl;
    let server_default_location = facts.default_location.as_str();
    let mut spec = backup.spec.clone();
    spec.apply_defaults(&ServerDefaults {
        backup_ttl: Duration::from_delta(
            chrono::TimeDelta::from_std(default_ttl).unwrap_or(chrono::TimeDelta::hours(720)),
        ),
        ..ServerDefaults::default()
    });
    if spec
        .volume_group_snapshot_label_key
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        spec.volume_group_snapshot_label_key =
            Some(DEFAULT_VOLUME_GROUP_SNAPSHOT_LABEL_KEY.to_string());
    }
    // Velero's legacy `defaultVolumesToRestic: true` becomes `defaultVolumesToFsBackup`.
    if spec.default_volumes_to_restic == Some(true) {
        spec.default_volumes_to_fs_backup = Some(true);
    }
    // The server defaults of `--default-volumes-to-fs-backup` and
    // `--snapshot-move-data` (both false: Granary backs up no volume data).
    spec.default_volumes_to_fs_backup.get_or_insert(false);
    spec.snapshot_move_data.get_or_insert(false);
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
    let mut annotations = backup.annotations().clone();
    for (key, value) in [
        (ANNOTATION_SOURCE_GIT_VERSION, &facts.git_version),
        (ANNOTATION_SOURCE_MAJOR_VERSION, &facts.major),
        (ANNOTATION_SOURCE_MINOR_VERSION, &facts.minor),
    ] {
        annotations.insert(key.to_string(), value.clone());
    }
    annotations.insert(
        ANNOTATION_RESOURCE_TIMEOUT.to_string(),
        go_duration(facts.resource_timeout),
    );
    Prepared {
        spec,
        labels,
        annotations,
        expiration: now + ttl,
        location,
        validation_errors: errors,
    }
}

/// `d` as Go's `time.Duration.String()` writes it (`10m0s`, `1h0m0s`, `1.5s`, `0s`).
pub fn go_duration(d: std::time::Duration) -> String {
    Duration::from_delta(chrono::TimeDelta::from_std(d).unwrap_or(chrono::TimeDelta::MAX))
        .as_str()
        .to_string()
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

    fn facts(default_location: &str) -> ServerFacts {
        ServerFacts {
            default_ttl: TTL,
            default_location: default_location.to_string(),
            resource_timeout: std::time::Duration::from_secs(600),
            git_version: "v1.33.0".into(),
            major: "1".into(),
            minor: "33".into(),
        }
    }

    #[test]
    fn the_location_marked_default_wins_over_the_server_default() {
        let locs = [
            location("server", false, true, false),
            location("marked", true, true, false),
        ];
        let p = prepare(&backup(None), &locs, &facts("server"), now());
        assert_eq!(p.spec.storage_location.as_deref(), Some("marked"));
        assert_eq!(p.labels[LABEL_STORAGE_LOCATION], "marked");
        assert!(p.validation_errors.is_empty(), "{:?}", p.validation_errors);
        assert_eq!(p.expiration, now() + chrono::TimeDelta::hours(720));
        assert_eq!(p.spec.ttl.as_ref().map(|t| t.as_str()), Some("720h0m0s"));
    }

    #[test]
    fn velero_s_messages_for_unusable_locations() {
        let p = prepare(&backup(None), &[], &facts("default"), now());
        assert!(p.validation_errors[0].starts_with(
            "an existing backup storage location was not specified at backup creation time and the server default default does not exist."
        ));
        let p = prepare(&backup(Some("gone")), &[], &facts("default"), now());
        assert!(
            p.validation_errors[0].contains("the default gone was not found"),
            "{:?}",
            p.validation_errors
        );
        let p = prepare(
            &backup(Some("ro")),
            &[location("ro", false, false, true)],
            &facts("default"),
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
            &facts("default"),
            now(),
        );
        assert_eq!(p.expiration, now() + chrono::TimeDelta::hours(24));
    }

    #[test]
    fn velero_s_annotations_and_written_back_defaults() {
        let mut b = backup(Some("l"));
        b.metadata.annotations = Some([("mine".to_string(), "kept".to_string())].into());
        let p = prepare(
            &b,
            &[location("l", false, true, false)],
            &facts("default"),
            now(),
        );
        assert_eq!(p.annotations["mine"], "kept");
        assert_eq!(p.annotations[ANNOTATION_SOURCE_GIT_VERSION], "v1.33.0");
        assert_eq!(p.annotations[ANNOTATION_SOURCE_MAJOR_VERSION], "1");
        assert_eq!(p.annotations[ANNOTATION_SOURCE_MINOR_VERSION], "33");
        assert_eq!(p.annotations[ANNOTATION_RESOURCE_TIMEOUT], "10m0s");
        assert_eq!(
            p.spec.csi_snapshot_timeout.as_ref().map(|d| d.as_str()),
            Some("10m0s")
        );
        assert_eq!(
            p.spec.item_operation_timeout.as_ref().map(|d| d.as_str()),
            Some("4h0m0s")
        );
        assert_eq!(
            p.spec.volume_group_snapshot_label_key.as_deref(),
            Some(DEFAULT_VOLUME_GROUP_SNAPSHOT_LABEL_KEY)
        );
        assert_eq!(p.spec.default_volumes_to_fs_backup, Some(false));
        assert_eq!(p.spec.snapshot_move_data, Some(false));
        // What the user set is kept; the legacy restic flag maps onto fs backup.
        b.spec.csi_snapshot_timeout = Some(Duration::parse("1m").expect("valid"));
        b.spec.default_volumes_to_restic = Some(true);
        b.spec.volume_group_snapshot_label_key = Some("mine".into());
        let p = prepare(
            &b,
            &[location("l", false, true, false)],
            &facts("default"),
            now(),
        );
        assert_eq!(
            p.spec.csi_snapshot_timeout.as_ref().map(|d| d.as_str()),
            Some("1m")
        );
        assert_eq!(p.spec.default_volumes_to_fs_backup, Some(true));
        assert_eq!(
            p.spec.volume_group_snapshot_label_key.as_deref(),
            Some("mine")
        );
        assert_eq!(go_duration(std::time::Duration::from_secs(3600)), "1h0m0s");
    }
}
