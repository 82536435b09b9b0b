//! Round-trip, CRD and validation tests of the oadp.openshift.io kinds.

use chrono::TimeDelta;

use super::*;
use crate::velero::tests::{assert_error, assert_structural_friendly, round_trip};
use crate::velero::{
    BackupPhase, BackupSpec, BackupStorageLocationPhase, BackupStorageLocationSpec, Duration,
    RestorePhase, RestoreSpec,
};

const NAB: &str = include_str!("../../../../tests/fixtures/oadp/nonadminbackup.yaml");
const NAR: &str = include_str!("../../../../tests/fixtures/oadp/nonadminrestore.yaml");
const NABSL: &str =
    include_str!("../../../../tests/fixtures/oadp/nonadminbackupstoragelocation.yaml");

#[test]
fn non_admin_backup_round_trips_with_velero_status() {
    let nab: NonAdminBackup = round_trip(NAB);
    let status = nab.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(NonAdminPhase::Created));
    assert_eq!(
        status.queue_info,
        Some(QueueInfo {
            estimated_queue_position: 0
        })
    );
    let velero = status.velero_backup.as_ref().unwrap();
    assert_eq!(
        velero.status.as_ref().unwrap().phase,
        Some(BackupPhase::Completed)
    );
    assert_eq!(nab.velero_backup_name(), velero.name.as_deref());
    assert_eq!(
        status.conditions.as_ref().unwrap()[1].reason,
        REASON_BACKUP_SCHEDULED
    );
    assert!(nab.uses_nabsl());
    assert!(!nab.delete_requested());
    // "0s" durations are what NAC writes for unset ones; they are valid.
    assert_eq!(nab.validate(), vec![]);
    // estimatedQueuePosition is written even when 0 (not omitempty upstream).
    let json = serde_json::to_value(status).unwrap();
    assert_eq!(
        json["queueInfo"],
        serde_json::json!({"estimatedQueuePosition": 0})
    );
}

#[test]
fn non_admin_restore_and_bsl_round_trip() {
    let nar: NonAdminRestore = round_trip(NAR);
    let status = nar.status.as_ref().unwrap();
    assert_eq!(
        status.queue_info.as_ref().unwrap().estimated_queue_position,
        2
    );
    assert_eq!(
        status
            .velero_restore
            .as_ref()
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .phase,
        Some(RestorePhase::InProgress)
    );
    assert_eq!(nar.non_admin_backup_name(), Some("test-nab"));
    assert_eq!(nar.validate(), vec![]);

    let nabsl: NonAdminBackupStorageLocation = round_trip(NABSL);
    let velero = nabsl
        .status
        .as_ref()
        .unwrap()
        .velero_backup_storage_location
        .as_ref();
    assert_eq!(
        velero.unwrap().status.as_ref().unwrap().phase,
        Some(BackupStorageLocationPhase::Available)
    );
    assert_eq!(nabsl.validate(Some(TimeDelta::minutes(2))), vec![]);
}

fn strings(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| s.to_string()).collect())
}

#[test]
fn non_admin_backup_rules() {
    let spec = BackupSpec {
        included_namespaces: strings(&["team-a", "team-b"]),
        excluded_namespaces: strings(&["kube-system"]),
        include_cluster_resources: Some(true),
        included_cluster_scoped_resources: strings(&["storageclasses"]),
        volume_snapshot_locations: strings(&["vsl"]),
        ..Default::default()
    };
    let errs = validate_non_admin_backup_spec(&spec, "team-a", "spec.backupSpec");
    assert_error(
        &errs,
        "spec.backupSpec.includedNamespaces[1]",
        "own namespace \"team-a\"",
    );
    assert_error(
        &errs,
        "spec.backupSpec.excludedNamespaces",
        "must not be set",
    );
    assert_error(
        &errs,
        "spec.backupSpec.includeClusterResources",
        "false or unset",
    );
    assert_error(
        &errs,
        "spec.backupSpec.includedClusterScopedResources",
        "must be empty",
    );
    assert_error(
        &errs,
        "spec.backupSpec.volumeSnapshotLocations",
        "must not be set",
    );
    assert_eq!(errs.len(), 5, "{errs:#?}");

    let ok = BackupSpec {
        included_namespaces: strings(&["team-a"]),
        include_cluster_resources: Some(false),
        ..Default::default()
    };
    assert_eq!(
        validate_non_admin_backup_spec(&ok, "team-a", "spec.backupSpec"),
        vec![]
    );

    // The object-level check adds Velero's own rules under the same prefix.
    let mut nab = NonAdminBackup::new(
        "b",
        NonAdminBackupSpec {
            backup_spec: spec,
            delete_backup: None,
        },
    );
    nab.metadata.namespace = Some("team-a".into());
    nab.spec.backup_spec.ttl = Some(Duration::parse("0s").unwrap());
    nab.spec.backup_spec.csi_snapshot_timeout =
        serde_json::from_value(serde_json::json!("ten")).unwrap();
    let errs = nab.validate();
    assert_error(
        &errs,
        "spec.backupSpec.csiSnapshotTimeout",
        "invalid duration",
    );
    assert_eq!(errs.len(), 6, "{errs:#?}");
}

#[test]
fn non_admin_restore_rules() {
    let spec: RestoreSpec = serde_saphyr::from_str(
        "{scheduleName: s, includedNamespaces: [a], excludedNamespaces: [b], namespaceMapping: {a: b}}",
    )
    .unwrap();
    let errs = validate_non_admin_restore_spec(&spec, "spec.restoreSpec");
    assert_error(&errs, "spec.restoreSpec.backupName", "required");
    for field in [
        "scheduleName",
        "includedNamespaces",
        "excludedNamespaces",
        "namespaceMapping",
    ] {
        assert_error(
            &errs,
            &format!("spec.restoreSpec.{field}"),
            "must not be set",
        );
    }
    assert_eq!(errs.len(), 5, "{errs:#?}");
    let nar = NonAdminRestore::new("r", NonAdminRestoreSpec { restore_spec: spec });
    // Velero's "exactly one of backupName/scheduleName" is not repeated.
    assert_eq!(nar.validate().len(), 5, "{:#?}", nar.validate());
}

#[test]
fn non_admin_bsl_rules() {
    let spec: BackupStorageLocationSpec = serde_saphyr::from_str(
        "{provider: aws, default: true, objectStorage: {bucket: b}, backupSyncPeriod: 5m}",
    )
    .unwrap();
    let prefix = "spec.backupStorageLocationSpec";
    let errs = validate_non_admin_bsl_spec(&spec, prefix, Some(TimeDelta::minutes(2)));
    assert_error(
        &errs,
        "spec.backupStorageLocationSpec.default",
        "must be false",
    );
    assert_error(
        &errs,
        "spec.backupStorageLocationSpec.credential",
        "required",
    );
    assert_error(
        &errs,
        "spec.backupStorageLocationSpec.backupSyncPeriod",
        "lower than the non-admin backup sync period 2m0s",
    );
    assert_eq!(errs.len(), 3, "{errs:#?}");

    let mut spec = spec;
    spec.default = Some(false);
    spec.backup_sync_period = None;
    spec.credential = Some(k8s_openapi::api::core::v1::SecretKeySelector {
        name: "creds".into(),
        key: String::new(),
        optional: None,
    });
    // Velero's default (1m) is below 2m; a disabled NAC sync skips the check.
    let errs = validate_non_admin_bsl_spec(&spec, prefix, Some(TimeDelta::minutes(2)));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_error(
        &errs,
        "spec.backupStorageLocationSpec.credential.key",
        "required",
    );
    let errs = validate_non_admin_bsl_spec(&spec, prefix, Some(TimeDelta::seconds(30)));
    assert_error(
        &errs,
        "spec.backupStorageLocationSpec.backupSyncPeriod",
        "Velero's default",
    );
    assert_eq!(
        validate_non_admin_bsl_spec(&spec, prefix, Some(TimeDelta::zero())).len(),
        1
    );

    // The object-level check does not report credential.key twice.
    let nabsl = NonAdminBackupStorageLocation::new(
        "l",
        NonAdminBackupStorageLocationSpec {
            backup_storage_location_spec: spec,
        },
    );
    assert_eq!(nabsl.validate(None).len(), 1, "{:#?}", nabsl.validate(None));
}

#[test]
fn enforced_specs_restrict_and_fill() {
    let enforced = BackupSpec {
        ttl: Some(Duration::parse("48h").unwrap()),
        snapshot_move_data: Some(true),
        storage_location: Some(String::new()),
        ..Default::default()
    };
    let user = BackupSpec {
        ttl: Some(Duration::parse("24h").unwrap()),
        snapshot_move_data: Some(false),
        storage_location: Some("mine".into()),
        ..Default::default()
    };
    let errs = enforced_spec_errors(&user, &enforced, "spec.backupSpec");
    assert_error(
        &errs,
        "spec.backupSpec.ttl",
        "the administrator has restricted spec.backupSpec.ttl field value to 48h",
    );
    // Velero's spec booleans are pointers: a set false is a choice, and it conflicts.
    assert_error(
        &errs,
        "spec.backupSpec.snapshotMoveData",
        "the administrator has restricted spec.backupSpec.snapshotMoveData field value to true",
    );
    assert_eq!(errs.len(), 2, "{errs:#?}");

    let zero_ttl = BackupSpec {
        ttl: Some(Duration::parse("0s").unwrap()),
        ..Default::default()
    };
    assert_eq!(
        enforced_spec_errors(&zero_ttl, &enforced, "spec.backupSpec"),
        vec![]
    );
    let filled = fill_from_enforced(&zero_ttl, &enforced);
    assert_eq!(filled.ttl.unwrap().as_str(), "48h");
    assert_eq!(filled.snapshot_move_data, Some(true));
    assert_eq!(filled.storage_location, None);

    let bsl = |bucket: &str, prefix: Option<&str>| BackupStorageLocationSpec {
        provider: "aws".into(),
        object_storage: crate::velero::ObjectStorageLocation {
            bucket: bucket.into(),
            prefix: prefix.map(Into::into),
            ..Default::default()
        },
        ..Default::default()
    };
    let errs = enforced_spec_errors(
        &bsl("mine", Some("p")),
        &bsl("admins", None),
        "spec.backupStorageLocationSpec",
    );
    assert_error(
        &errs,
        "spec.backupStorageLocationSpec.objectStorage.bucket",
        "restricted",
    );
    assert_eq!(errs.len(), 1, "{errs:#?}");
}

#[test]
fn user_prefixes_stay_under_the_namespace() {
    for bad in ["..", "../b", "a/..", "/abs", "a//b", ".", "a\\b", "a\nb"] {
        assert!(user_prefix_problem(Some(bad)).is_some(), "{bad:?}");
    }
    for good in [
        None,
        Some(""),
        Some("a"),
        Some("a/b/"),
        Some("..a"),
        Some("a.."),
    ] {
        assert_eq!(user_prefix_problem(good), None, "{good:?}");
    }
}

#[test]
fn new_kinds_round_trip_with_upstream_field_names() {
    let nadr: NonAdminDownloadRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "oadp.openshift.io/v1alpha1", "kind": "NonAdminDownloadRequest",
        "metadata": {"name": "d", "namespace": "ns-a", "uid": "u-1"},
        "spec": {"target": {"kind": "BackupLog", "name": "b1"}},
        "status": {"phase": "Created", "velero": {"status": {
            "phase": "Processed", "downloadURL": "http://x", "expiration": "2030-01-01T00:00:00Z"}}}
    }))
    .unwrap();
    assert_eq!(
        nadr.velero_download_request_name().as_deref(),
        Some("nadr-u-1")
    );
    let url = nadr
        .status
        .as_ref()
        .unwrap()
        .velero
        .as_ref()
        .unwrap()
        .status
        .as_ref()
        .unwrap();
    assert_eq!(url.download_url.as_deref(), Some("http://x"));
    let req: NonAdminBackupStorageLocationRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "oadp.openshift.io/v1alpha1", "kind": "NonAdminBackupStorageLocationRequest",
        "metadata": {"name": "r", "namespace": "velero"},
        "spec": {"approvalDecision": "approve"},
        "status": {"phase": "Approved", "nonAdminBackupStorageLocation": {
            "nacuuid": "u", "name": "n", "namespace": "ns-a",
            "requestedSpec": {"provider": "aws", "objectStorage": {"bucket": "b"}}}}
    }))
    .unwrap();
    assert_eq!(
        req.spec.approval_decision,
        Some(NonAdminBslRequestDecision::Approve)
    );
    assert_eq!(req.requested_spec().unwrap().object_storage.bucket, "b");
    let back = serde_json::to_value(&req).unwrap();
    assert_eq!(back["spec"]["approvalDecision"], "approve");
    assert_eq!(back["status"]["phase"], "Approved");
}

#[test]
fn helpers() {
    assert_eq!(
        prefix_for_object_storage("team-a", Some("velero")),
        "team-a/velero"
    );
    assert_eq!(prefix_for_object_storage("team-a", None), "team-a");
    assert!(is_valid_label_or_annotation_value("x"));
    assert!(!is_valid_label_or_annotation_value(""));
    assert!(!is_valid_label_or_annotation_value(&"x".repeat(253)));
}

#[test]
fn crds_have_upstream_names_and_columns() {
    let crds = crds();
    let mut short = vec![];
    for crd in &crds {
        let json = assert_structural_friendly(crd);
        short.push(
            json["spec"]["names"]["shortNames"][0]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        let columns: Vec<_> = json["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_owned(),
                    c["jsonPath"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert!(columns.contains(&("Request-Phase".into(), ".status.phase".into())));
        // The kinds that mirror a Velero object with a phase show it.
        let mirrors = ["nab", "nar", "nabsl"].contains(&short.last().unwrap().as_str());
        assert_eq!(
            columns
                .iter()
                .any(|(n, p)| n == "Velero-Phase" && p.ends_with(".status.phase")),
            mirrors
        );
    }
    assert_eq!(short, ["nab", "nar", "nabsl", "nabslrequest", "nadr"]);
    let names: Vec<_> = crds
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "nonadminbackups.oadp.openshift.io",
            "nonadminrestores.oadp.openshift.io",
            "nonadminbackupstoragelocations.oadp.openshift.io",
            "nonadminbackupstoragelocationrequests.oadp.openshift.io",
            "nonadmindownloadrequests.oadp.openshift.io",
        ]
    );
    let nab = serde_json::to_value(&crds[0]).unwrap();
    let queue = &nab["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        ["queueInfo"];
    assert_eq!(
        queue["required"],
        serde_json::json!(["estimatedQueuePosition"])
    );
}
