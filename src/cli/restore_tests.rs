use super::*;
use crate::api::velero::{RestoreProgress, RestoreStatus};
use chrono::TimeZone;
use serde_json::json;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7).unwrap()
}

fn from_backup(b: &str) -> RestoreFlags {
    RestoreFlags {
        from_backup: Some(b.into()),
        ..RestoreFlags::default()
    }
}

fn wire(r: &Restore) -> serde_json::Value {
    serde_json::to_value(r).unwrap()
}

#[test]
fn no_flags_is_velero_s_default_restore() {
    let r = build_restore(Some("r1"), "velero", &from_backup("b1"), now()).unwrap();
    assert_eq!(
        wire(&r),
        json!({
            "apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": "r1", "namespace": "velero"},
            "spec": {"backupName": "b1", "hooks": {}, "includedNamespaces": ["*"],
                     "itemOperationTimeout": "0s", "uploaderConfig": {}}
        })
    );
}

#[test]
fn the_name_defaults_to_source_and_timestamp() {
    let r = build_restore(None, "velero", &from_backup("nightly"), now()).unwrap();
    assert_eq!(r.name_any(), "nightly-20260304050607");
    let f = RestoreFlags {
        from_schedule: Some("daily".into()),
        ..RestoreFlags::default()
    };
    let r = build_restore(None, "velero", &f, now()).unwrap();
    assert_eq!(r.name_any(), "daily-20260304050607");
    assert_eq!(r.spec.schedule_name.as_deref(), Some("daily"));
    assert_eq!(r.spec.backup_name, None);
}

#[test]
fn every_flag_lands_in_its_field() {
    let f = RestoreFlags {
        from_backup: Some("b1".into()),
        include_namespaces: Some(vec!["a".into(), "b".into()]),
        exclude_namespaces: vec!["c".into()],
        include_resources: vec!["configmaps".into(), "deployments.apps".into()],
        exclude_resources: vec!["secrets".into()],
        include_cluster_resources: Some(false),
        namespace_mappings: vec!["a:a-copy,b:b-copy".into(), "x:y".into()],
        existing_resource_policy: Some("update".into()),
        restore_volumes: Some(false),
        preserve_nodeports: Some(true),
        status_include_resources: vec!["widgets.example.com".into()],
        status_exclude_resources: vec!["pods".into()],
        selector: Some("app=web".into()),
        labels: vec!["team=x".into()],
        ..RestoreFlags::default()
    };
    let w = wire(&build_restore(Some("r"), "ns", &f, now()).unwrap());
    assert_eq!(w["metadata"]["labels"], json!({"team": "x"}));
    assert_eq!(
        w["spec"],
        json!({
            "backupName": "b1", "hooks": {}, "itemOperationTimeout": "0s", "uploaderConfig": {},
            "includedNamespaces": ["a", "b"], "excludedNamespaces": ["c"],
            "includedResources": ["configmaps", "deployments.apps"],
            "excludedResources": ["secrets"], "includeClusterResources": false,
            "namespaceMapping": {"a": "a-copy", "b": "b-copy", "x": "y"},
            "existingResourcePolicy": "update", "restorePVs": false, "preserveNodePorts": true,
            "restoreStatus": {"includedResources": ["widgets.example.com"], "excludedResources": ["pods"]},
            "labelSelector": {"matchLabels": {"app": "web"}}
        })
    );
    let f = RestoreFlags {
        or_selector: Some("a=1 or b=2".into()),
        ..from_backup("b1")
    };
    let r = build_restore(Some("r"), "ns", &f, now()).unwrap();
    assert_eq!(r.spec.or_label_selectors.map(|v| v.len()), Some(2));
}

fn refused(f: &RestoreFlags, name: Option<&str>) -> String {
    describe_errors(&build_restore(name, "velero", f, now()).expect_err("refused"))
}

#[test]
fn bad_flags_are_all_named() {
    let f = RestoreFlags {
        from_backup: Some("b".into()),
        from_schedule: Some("s".into()),
        existing_resource_policy: Some("replace".into()),
        restore_volumes: Some(true),
        namespace_mappings: vec!["a-b".into()],
        selector: Some("a=1".into()),
        or_selector: Some("b=2".into()),
        labels: vec!["bad key=1".into()],
        status_exclude_resources: vec!["pods".into()],
        include_namespaces: Some(vec!["x".into()]),
        exclude_namespaces: vec!["x".into()],
        ..RestoreFlags::default()
    };
    let errs = refused(&f, Some("Bad_Name"));
    for flag in [
        "NAME",
        "--from-schedule",
        "--existing-resource-policy",
        "--restore-volumes",
        "--namespace-mappings",
        "--or-selector",
        "--labels",
        "--status-exclude-resources",
        "--exclude-namespaces",
    ] {
        assert!(errs.contains(flag), "{flag} missing from {errs}");
    }
    assert!(errs.contains("does not restore volume data"), "{errs}");
    let none = refused(&RestoreFlags::default(), Some("r"));
    assert!(none.contains("--from-backup"), "{none}");
    let non_restorable = RestoreFlags {
        include_resources: vec!["nodes".into()],
        ..from_backup("b")
    };
    assert!(refused(&non_restorable, Some("r")).contains("--include-resources"));
}

#[test]
fn namespace_mappings_parse_as_velero_s_map() {
    let m = parse_namespace_mappings(&["a:b, c:d".into(), "a:e".into()]).unwrap();
    assert_eq!(
        m,
        BTreeMap::from([("a".into(), "e".into()), ("c".into(), "d".into())])
    );
    for bad in ["a", "a:", ":b", "a:B", "a:b.c", "a:b:c"] {
        let e = parse_namespace_mappings(&[bad.into()]).expect_err(bad);
        assert_eq!(e.flag, "--namespace-mappings", "{bad}");
    }
    assert!(parse_namespace_mappings(&[]).unwrap().is_empty());
}

fn restore_with(status: RestoreStatus) -> Restore {
    let mut r = build_restore(Some("r1"), "velero", &from_backup("b1"), now()).unwrap();
    r.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-03-04T05:00:00Z".parse().unwrap(),
    ));
    r.status = Some(status);
    r
}

#[test]
fn table_has_velero_s_columns() {
    let done = restore_with(RestoreStatus {
        phase: Some(RestorePhase::PartiallyFailed),
        start_timestamp: Some(now()),
        completion_timestamp: Some(now()),
        errors: Some(2),
        warnings: Some(5),
        ..RestoreStatus::default()
    });
    let fresh = restore_with(RestoreStatus::default());
    let t = restores_table(&[done, fresh]);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "NAME",
            "BACKUP",
            "STATUS",
            "STARTED",
            "COMPLETED",
            "ERRORS",
            "WARNINGS",
            "CREATED",
            "SELECTOR"
        ]
    );
    assert!(lines[1].starts_with("r1 "), "{t}");
    assert!(
        lines[1].contains("PartiallyFailed   2026-03-04 05:06:07 +0000 UTC"),
        "{t}"
    );
    assert!(lines[1].contains("   2        5  "), "{t}");
    assert!(lines[1].ends_with("<none>"), "{t}");
    let cells: Vec<&str> = lines[2]
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(cells[2..5], ["New", "<nil>", "<nil>"], "{t}");
}

#[test]
fn describe_shows_phase_progress_counts_and_reasons() {
    let mut r = restore_with(RestoreStatus {
        phase: Some(RestorePhase::Failed),
        failure_reason: Some("backup storage location default is unavailable".into()),
        warnings: Some(3),
        errors: Some(1),
        progress: Some(RestoreProgress {
            total_items: Some(10),
            items_restored: Some(4),
        }),
        ..RestoreStatus::default()
    });
    r.spec.namespace_mapping = Some(BTreeMap::from([("a".into(), "b".into())]));
    let text = describe_restore(&r);
    for want in [
        "Name:         r1\n",
        "Phase:  Failed (run `granary restore logs r1` for more information)\n",
        "Failure reason:  backup storage location default is unavailable\n",
        "Total items to be restored:  10\n",
        "Items restored:              4\n",
        "Warnings:  3\n",
        "Errors:    1\n",
        "Backup:  b1\n",
        "Included:  all namespaces found in the backup\n",
        "Cluster-scoped:  auto\n",
        "Namespace mappings:  a=b\n",
        "Restore PVs:  auto\n",
        "ItemOperationTimeout:       0s\n",
        "Preserve Service NodePorts:  auto\n",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    assert!(!text.contains("Waiting for"), "{text}");

    let invalid = restore_with(RestoreStatus {
        phase: Some(RestorePhase::FailedValidation),
        validation_errors: Some(vec!["backup b1 not found".into(), "second".into()]),
        ..RestoreStatus::default()
    });
    let text = describe_restore(&invalid);
    assert!(
        text.contains("Validation errors:  backup b1 not found\n                    second\n"),
        "{text}"
    );
    let running = restore_with(RestoreStatus {
        phase: Some(RestorePhase::InProgress),
        progress: Some(RestoreProgress {
            total_items: Some(7),
            items_restored: Some(2),
        }),
        ..RestoreStatus::default()
    });
    let text = describe_restore(&running);
    assert!(
        text.contains("Items restored so far:                 2\n"),
        "{text}"
    );
}

#[test]
fn describe_tells_what_a_waiting_restore_waits_for() {
    let mut r = restore_with(RestoreStatus::default());
    let text = describe_restore(&r);
    assert!(
        text.contains("Waiting for:  the restore controller to take it in"),
        "{text}"
    );
    r.annotations_mut().insert(
        ANNOTATION_WAITING_FOR.into(),
        "restore r0 (InProgress): both restore into namespace shop".into(),
    );
    r.annotations_mut()
        .insert(ANNOTATION_QUEUE_POSITION.into(), "2".into());
    let text = describe_restore(&r);
    assert!(
        text.contains("Waiting for:  restore r0 (InProgress): both restore into namespace shop (position 2 in the restore queue)\n"),
        "{text}"
    );
    r.annotations_mut().remove(ANNOTATION_WAITING_FOR);
    assert_eq!(
        restore_waiting_for(&r).as_deref(),
        Some("a free restore slot (position 2 in the restore queue)")
    );
    // Once it runs, stale annotations are not shown.
    r.status = Some(RestoreStatus {
        phase: Some(RestorePhase::InProgress),
        ..RestoreStatus::default()
    });
    assert_eq!(restore_waiting_for(&r), None);
}

#[test]
fn download_requests_as_velero_names_them() {
    let req = download_request("velero", "r1", DownloadTargetKind::RestoreLog);
    let w = serde_json::to_value(&req).unwrap();
    assert_eq!(
        w["spec"],
        json!({"target": {"kind": "RestoreLog", "name": "r1"}})
    );
    assert_eq!(w["metadata"]["namespace"], "velero");
    let name = req.name_any();
    let uuid = name.strip_prefix("r1-").expect("restore name first");
    assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{name}");
}

#[test]
fn logs_are_there_once_the_restore_has_finished() {
    assert!(log_written(RestorePhase::Completed));
    assert!(log_written(RestorePhase::PartiallyFailed));
    assert!(!log_written(RestorePhase::New));
    assert!(!log_written(RestorePhase::InProgress));
    assert!(!log_written(RestorePhase::FailedValidation));
}
