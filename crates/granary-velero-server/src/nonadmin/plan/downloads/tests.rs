use super::*;
use granary_api::oadp::{
    NonAdminBackupSpec, NonAdminBackupStatus, NonAdminDownloadRequestSpec, NonAdminRestoreSpec,
    NonAdminRestoreStatus, VeleroBackup, VeleroRestore,
};
use granary_api::velero::{BackupSpec, DownloadTargetKind, RestoreSpec};

fn nadr(ns: &str, kind: DownloadTargetKind, name: &str) -> NonAdminDownloadRequest {
    let mut r = NonAdminDownloadRequest::new(
        "dl",
        NonAdminDownloadRequestSpec {
            target: DownloadTarget {
                kind,
                name: name.into(),
            },
        },
    );
    r.metadata.namespace = Some(ns.into());
    r.metadata.uid = Some("1234".into());
    r
}

fn nab(ns: &str, location: Option<&str>, velero: &str) -> NonAdminBackup {
    let mut n = NonAdminBackup::new(
        "b1",
        NonAdminBackupSpec {
            backup_spec: BackupSpec {
                storage_location: location.map(String::from),
                ..Default::default()
            },
            delete_backup: None,
        },
    );
    n.metadata.namespace = Some(ns.into());
    n.status = Some(NonAdminBackupStatus {
        velero_backup: Some(VeleroBackup {
            name: Some(velero.into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    n
}

fn backup(name: &str, origin_ns: &str) -> Backup {
    let mut b = Backup::new(name, BackupSpec::default());
    b.metadata.annotations = Some(
        [(
            NAB_ORIGIN_NAMESPACE_ANNOTATION.to_string(),
            origin_ns.to_string(),
        )]
        .into(),
    );
    b
}

#[test]
fn a_backup_of_the_namespace_on_its_own_location_is_served() {
    let r = nadr("ns-a", DownloadTargetKind::BackupLog, "b1");
    let n = nab("ns-a", Some("mine"), "ns-a-b1-x");
    let dr = velero_download_request(
        &r,
        "velero",
        Some(&n),
        None,
        &[backup("ns-a-b1-x", "ns-a")],
        &[],
    )
    .expect("served");
    assert_eq!(dr.metadata.name.as_deref(), Some("nadr-1234"));
    assert_eq!(dr.metadata.namespace.as_deref(), Some("velero"));
    assert_eq!(dr.spec.target.name, "ns-a-b1-x");
    assert_eq!(dr.spec.target.kind, DownloadTargetKind::BackupLog);
    assert_eq!(nadr_origin(&dr), Some(("ns-a".into(), "dl".into())));
}

#[test]
fn anything_else_is_refused_naming_the_field() {
    let r = nadr("ns-a", DownloadTargetKind::BackupLog, "b1");
    let refused = |n: Option<&NonAdminBackup>, backups: &[Backup]| {
        velero_download_request(&r, "velero", n, None, backups, &[]).expect_err("refused")
    };
    let missing = refused(None, &[]);
    assert_eq!(missing.condition, CONDITION_NAB_NOT_AVAILABLE);
    assert_eq!(missing.error.path, "spec.target.name");
    let default_location = refused(Some(&nab("ns-a", None, "v")), &[backup("v", "ns-a")]);
    assert_eq!(default_location.condition, CONDITION_NABSL_NOT_USED);
    // A Velero backup of that name that came from another namespace is not this one's.
    let foreign = refused(Some(&nab("ns-a", Some("l"), "v")), &[backup("v", "ns-b")]);
    assert_eq!(foreign.condition, CONDITION_NAB_NOT_AVAILABLE);
    let in_velero = velero_download_request(
        &nadr("velero", DownloadTargetKind::BackupLog, "b1"),
        "velero",
        None,
        None,
        &[],
        &[],
    )
    .expect_err("refused");
    assert_eq!(in_velero.error.path, "metadata.namespace");
    let empty = velero_download_request(
        &nadr("ns-a", DownloadTargetKind::BackupLog, ""),
        "velero",
        None,
        None,
        &[],
        &[],
    )
    .expect_err("refused");
    assert_eq!(empty.error.path, "spec.target.name");
}

#[test]
fn restore_kinds_name_a_restore_of_the_namespace() {
    let r = nadr("ns-a", DownloadTargetKind::RestoreLog, "r1");
    let mut nar = NonAdminRestore::new(
        "r1",
        NonAdminRestoreSpec {
            restore_spec: RestoreSpec {
                backup_name: Some("b1".into()),
                ..Default::default()
            },
        },
    );
    nar.metadata.namespace = Some("ns-a".into());
    let n = nab("ns-a", Some("l"), "vb");
    let no_restore = velero_download_request(&r, "velero", Some(&n), Some(&nar), &[], &[])
        .expect_err("no Velero restore yet");
    assert_eq!(no_restore.condition, CONDITION_NAR_NOT_AVAILABLE);
    nar.status = Some(NonAdminRestoreStatus {
        velero_restore: Some(VeleroRestore {
            name: Some("vr".into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    let mut vr = Restore::new("vr", RestoreSpec::default());
    vr.metadata.annotations = Some(
        [(
            NAR_ORIGIN_NAMESPACE_ANNOTATION.to_string(),
            "ns-a".to_string(),
        )]
        .into(),
    );
    let dr = velero_download_request(
        &r,
        "velero",
        Some(&n),
        Some(&nar),
        &[backup("vb", "ns-a")],
        &[vr],
    )
    .expect("served");
    assert_eq!(dr.spec.target.name, "vr");
    let none = velero_download_request(&r, "velero", Some(&n), None, &[], &[]).expect_err("no NAR");
    assert_eq!(none.condition, CONDITION_NAR_NOT_AVAILABLE);
}

#[test]
fn expiry_and_origins() {
    let now = Utc::now();
    assert!(!expired(None, now));
    let mut s = DownloadRequestStatus::default();
    assert!(!expired(Some(&s), now));
    s.expiration = Some(now + chrono::TimeDelta::minutes(1));
    assert!(!expired(Some(&s), now));
    assert!(expired(Some(&s), now + chrono::TimeDelta::minutes(2)));
    let plain = DownloadRequest::new(
        "x",
        DownloadRequestSpec {
            target: DownloadTarget::default(),
        },
    );
    assert_eq!(nadr_origin(&plain), None);
}
