use std::collections::BTreeSet;

use super::*;
use crate::nonadmin::plan::{nabs_to_sync, velero_backup};
use granary_api::oadp::{NonAdminBackup, NonAdminBackupSpec};
use granary_api::velero::{Backup, BackupPhase, BackupSpec, BackupStatus};

fn finished(origin_ns: &str, uuid: &str, location: &str) -> Backup {
    let mut n = NonAdminBackup::new(
        "b1",
        NonAdminBackupSpec {
            backup_spec: BackupSpec::default(),
            delete_backup: None,
        },
    );
    n.metadata.namespace = Some(origin_ns.into());
    let mut b = velero_backup(
        &n,
        &BackupSpec::default(),
        "velero",
        uuid,
        Some(location.into()),
    );
    b.status = Some(BackupStatus {
        phase: Some(BackupPhase::Completed),
        completion_timestamp: Some("2026-01-01T00:00:00Z".parse().unwrap()),
        ..Default::default()
    });
    b
}

#[test]
fn a_backup_on_a_user_location_comes_back_to_that_location_s_namespace_only() {
    let watched: WatchedLocations = [
        ("default".to_string(), None),
        (
            "loc-a".to_string(),
            Some(("ns-a".to_string(), "mine".to_string())),
        ),
    ]
    .into();
    let namespaces: BTreeSet<String> = ["ns-a".to_string(), "ns-b".to_string()].into();
    let backups = vec![
        finished("ns-a", "ns-a-b1-u1", "loc-a"),
        // Claims ns-b on ns-a's location (its metadata comes from ns-a's bucket).
        finished("ns-b", "ns-b-b1-u2", "loc-a"),
    ];
    let out = nabs_to_sync(&backups, &watched, &namespaces, &[]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].namespace().as_deref(), Some("ns-a"));
    assert_eq!(
        out[0].spec.backup_spec.storage_location.as_deref(),
        Some("mine"),
        "mapped back to the NonAdminBackupStorageLocation"
    );
    assert_eq!(
        out[0].labels()["openshift.io/oadp-nab-synced-from-nacuuid"],
        "ns-a-b1-u1"
    );
    // Its location no longer watched (the NABSL is gone): nothing.
    let only_default: WatchedLocations = [("default".to_string(), None)].into();
    assert!(nabs_to_sync(&backups, &only_default, &namespaces, &[]).is_empty());
}
