use super::*;
use granary_api::oadp::{NonAdminBackupSpec, NonAdminBackupStatus, NonAdminRestoreSpec};
use granary_api::velero::BackupStatus;

fn nab(ns: &str, spec: BackupSpec) -> NonAdminBackup {
    let mut n = NonAdminBackup::new(
        "b1",
        NonAdminBackupSpec {
            backup_spec: spec,
            delete_backup: None,
        },
    );
    n.metadata.namespace = Some(ns.into());
    n
}

fn nar(ns: &str, spec: RestoreSpec) -> NonAdminRestore {
    let mut n = NonAdminRestore::new("r1", NonAdminRestoreSpec { restore_spec: spec });
    n.metadata.namespace = Some(ns.into());
    n
}

fn paths(errs: &FieldErrors) -> Vec<&str> {
    errs.iter().map(|e| e.path.as_str()).collect()
}

#[test]
fn only_the_own_namespace_may_be_included() {
    let ok = nab(
        "ns-a",
        BackupSpec {
            included_namespaces: Some(vec!["ns-a".into()]),
            ..Default::default()
        },
    );
    assert!(backup_problems(&ok, &BackupSpec::default(), "velero").is_empty());
    for bad in [vec!["*"], vec!["ns-b"], vec!["ns-a", "velero"]] {
        let n = nab(
            "ns-a",
            BackupSpec {
                included_namespaces: Some(bad.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            },
        );
        let errs = backup_problems(&n, &BackupSpec::default(), "velero");
        assert!(
            paths(&errs)
                .iter()
                .any(|p| p.starts_with("spec.backupSpec.includedNamespaces")),
            "{bad:?}: {errs:?}"
        );
    }
    let n = nab(
        "ns-a",
        BackupSpec {
            include_cluster_resources: Some(true),
            excluded_namespaces: Some(vec!["x".into()]),
            ..Default::default()
        },
    );
    let errs = backup_problems(&n, &BackupSpec::default(), "velero");
    assert!(paths(&errs).contains(&"spec.backupSpec.includeClusterResources"));
    assert!(paths(&errs).contains(&"spec.backupSpec.excludedNamespaces"));
}

#[test]
fn enforced_backup_spec_fills_and_refuses() {
    let enforced = BackupSpec {
        ttl: Some("24h".parse().unwrap()),
        snapshot_volumes: Some(false),
        ..Default::default()
    };
    let n = nab(
        "ns-a",
        BackupSpec {
            ttl: Some("48h".parse().unwrap()),
            ..Default::default()
        },
    );
    let errs = backup_problems(&n, &enforced, "velero");
    assert_eq!(paths(&errs), vec!["spec.backupSpec.ttl"]);
    assert_eq!(
        errs[0].message,
        "the administrator has restricted spec.backupSpec.ttl field value to 24h"
    );
    let n = nab("ns-a", BackupSpec::default());
    assert!(backup_problems(&n, &enforced, "velero").is_empty());
    let b = velero_backup(&n, &enforced, "velero", "ns-a-b1-u", None);
    assert_eq!(b.spec.ttl, enforced.ttl);
    assert_eq!(b.spec.snapshot_volumes, Some(false));
}

#[test]
fn the_velero_backup_is_named_labelled_and_scoped_as_nac_does() {
    let n = nab(
        "ns-a",
        BackupSpec {
            storage_location: Some("mine".into()),
            excluded_resources: Some(vec!["secrets".into()]),
            ..Default::default()
        },
    );
    let b = velero_backup(&n, &BackupSpec::default(), "velero", "ns-a-b1-u", None);
    assert_eq!(b.metadata.name.as_deref(), Some("ns-a-b1-u"));
    assert_eq!(b.metadata.namespace.as_deref(), Some("velero"));
    assert_eq!(b.spec.included_namespaces, Some(vec!["ns-a".to_string()]));
    assert_eq!(b.spec.storage_location, None);
    let labels = b.metadata.labels.unwrap();
    assert_eq!(labels["openshift.io/oadp"], "True");
    assert_eq!(
        labels["app.kubernetes.io/managed-by"],
        "oadp-nac-controller"
    );
    assert_eq!(labels["openshift.io/oadp-nab-origin-nacuuid"], "ns-a-b1-u");
    let ann = b.metadata.annotations.unwrap();
    assert_eq!(ann["openshift.io/oadp-nab-origin-name"], "b1");
    assert_eq!(ann["openshift.io/oadp-nab-origin-namespace"], "ns-a");
    let excluded = b.spec.excluded_resources.unwrap();
    assert_eq!(excluded[0], "secrets");
    for r in [
        "nonadminbackups",
        "clusterroles",
        "customresourcedefinitions",
    ] {
        assert!(excluded.iter().any(|e| e == r), "{r}");
    }

    let n = nab(
        "ns-a",
        BackupSpec {
            included_namespace_scoped_resources: Some(vec!["configmaps".into()]),
            ..Default::default()
        },
    );
    let b = velero_backup(&n, &BackupSpec::default(), "velero", "u", None);
    assert_eq!(b.spec.excluded_resources, None);
    assert!(
        b.spec
            .excluded_namespace_scoped_resources
            .unwrap()
            .contains(&"nonadminrestores".to_string())
    );
    assert_eq!(b.spec.excluded_cluster_scoped_resources.unwrap().len(), 7);
}

fn t(s: &str) -> Time {
    Time(granary_runtime::clock::to_k8s(s.parse().unwrap()))
}

#[test]
fn queue_position_counts_unfinished_earlier_operations() {
    let me = t("2026-01-01T00:00:10Z");
    let others = vec![
        (Some(t("2026-01-01T00:00:01Z")), false),
        (Some(t("2026-01-01T00:00:02Z")), true),
        (Some(t("2026-01-01T00:00:05Z")), false),
        (Some(t("2026-01-01T00:00:20Z")), false),
    ];
    assert_eq!(queue_position(Some(&me), false, others.clone()), 3);
    assert_eq!(queue_position(Some(&me), true, others), 0);
}

#[test]
fn restore_fields_that_reach_elsewhere_are_refused() {
    let r = nar(
        "ns-a",
        RestoreSpec {
            backup_name: Some("b1".into()),
            namespace_mapping: Some([("ns-a".to_string(), "ns-b".to_string())].into()),
            included_namespaces: Some(vec!["ns-b".into()]),
            ..Default::default()
        },
    );
    let errs = restore_problems(&r, &RestoreSpec::default(), "velero");
    assert!(paths(&errs).contains(&"spec.restoreSpec.namespaceMapping"));
    assert!(paths(&errs).contains(&"spec.restoreSpec.includedNamespaces"));
    let r = nar(
        "ns-a",
        RestoreSpec {
            backup_name: Some("b1".into()),
            include_cluster_resources: Some(true),
            ..Default::default()
        },
    );
    assert_eq!(
        paths(&restore_problems(&r, &RestoreSpec::default(), "velero")),
        vec!["spec.restoreSpec.includeClusterResources"]
    );
    let r = nar("ns-a", RestoreSpec::default());
    assert_eq!(
        paths(&restore_problems(&r, &RestoreSpec::default(), "velero")),
        vec!["spec.restoreSpec.backupName"]
    );
}

fn created_nab(ns: &str) -> NonAdminBackup {
    let mut n = nab(ns, BackupSpec::default());
    n.status = Some(NonAdminBackupStatus {
        phase: Some(NonAdminPhase::Created),
        ..Default::default()
    });
    n
}

fn velero(origin_ns: &str, phase: Option<BackupPhase>) -> Backup {
    let n = nab(origin_ns, BackupSpec::default());
    let mut b = velero_backup(&n, &BackupSpec::default(), "velero", "vb", None);
    b.status = Some(BackupStatus {
        phase,
        ..Default::default()
    });
    b
}

#[test]
fn a_restore_needs_a_finished_backup_of_its_own_namespace() {
    let nab = created_nab("ns-a");
    let ok = velero("ns-a", Some(BackupPhase::Completed));
    assert_eq!(
        restorable_backup("ns-a", "b1", Some(&nab), Some(&ok)),
        Ok("vb".to_string())
    );
    let partial = velero("ns-a", Some(BackupPhase::PartiallyFailed));
    assert!(restorable_backup("ns-a", "b1", Some(&nab), Some(&partial)).is_ok());
    for (nab, vb, want) in [
        (None, None, "not found"),
        (Some(nab.clone()), None, "does not exist"),
        (
            Some(nab.clone()),
            Some(velero("ns-a", Some(BackupPhase::Failed))),
            "is Failed",
        ),
        (
            Some(nab.clone()),
            Some(velero("ns-a", Some(BackupPhase::InProgress))),
            "not Completed",
        ),
        (
            Some(nab.clone()),
            Some(velero("ns-b", Some(BackupPhase::Completed))),
            "does not belong",
        ),
        (
            Some(crate::nonadmin::plan::tests::nab(
                "ns-a",
                BackupSpec::default(),
            )),
            None,
            "not ready",
        ),
    ] {
        let e = restorable_backup("ns-a", "b1", nab.as_ref(), vb.as_ref()).unwrap_err();
        assert_eq!(e.path, "spec.restoreSpec.backupName");
        assert!(e.message.contains(want), "{want}: {}", e.message);
    }
}

#[test]
fn the_velero_restore_goes_back_into_the_own_namespace_only() {
    let r = nar(
        "ns-a",
        RestoreSpec {
            backup_name: Some("b1".into()),
            ..Default::default()
        },
    );
    // Whatever the administrator's enforced spec says, no cluster-scoped object.
    let enforced = RestoreSpec {
        include_cluster_resources: Some(true),
        ..Default::default()
    };
    let v = velero_restore(&r, &enforced, "velero", "ns-a-r1-u", "vb");
    assert_eq!(v.spec.include_cluster_resources, Some(false));
    let v = velero_restore(&r, &RestoreSpec::default(), "velero", "ns-a-r1-u", "vb");
    assert_eq!(v.spec.include_cluster_resources, Some(false));
    assert_eq!(v.metadata.name.as_deref(), Some("ns-a-r1-u"));
    assert_eq!(v.spec.backup_name.as_deref(), Some("vb"));
    assert_eq!(v.spec.included_namespaces, Some(vec!["ns-a".to_string()]));
    assert_eq!(v.spec.namespace_mapping, None);
    assert_eq!(
        v.spec.excluded_resources,
        Some(vec!["volumesnapshotclasses".to_string()])
    );
    let labels = v.metadata.labels.unwrap();
    assert_eq!(labels["openshift.io/oadp-nar-origin-nacuuid"], "ns-a-r1-u");
    let ann = v.metadata.annotations.unwrap();
    assert_eq!(ann["openshift.io/oadp-nar-origin-namespace"], "ns-a");
}

#[test]
fn conditions_keep_their_transition_time_until_status_changes() {
    let mut c = Vec::new();
    set_condition(
        &mut c,
        "Accepted",
        true,
        ("A", "a"),
        Some(1),
        t("2026-01-01T00:00:00Z"),
    );
    set_condition(
        &mut c,
        "Accepted",
        true,
        ("B", "b"),
        Some(1),
        t("2026-01-01T00:01:00Z"),
    );
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].reason, "B");
    assert_eq!(c[0].last_transition_time, t("2026-01-01T00:00:00Z"));
    assert!(!refused_at(Some(&c), Some(1)));
    set_condition(
        &mut c,
        "Accepted",
        false,
        ("C", "c"),
        Some(2),
        t("2026-01-01T00:02:00Z"),
    );
    assert_eq!(c[0].last_transition_time, t("2026-01-01T00:02:00Z"));
    assert!(refused_at(Some(&c), Some(2)));
    assert!(
        !refused_at(Some(&c), Some(3)),
        "a changed spec is looked at again"
    );
    set_condition(
        &mut c,
        "Accepted",
        false,
        (granary_api::oadp::REASON_LOCATION_NOT_READY, "waiting"),
        Some(2),
        t("2026-01-01T00:03:00Z"),
    );
    assert!(
        !refused_at(Some(&c), Some(2)),
        "a backup waiting for its location is looked at again"
    );
    assert!(!was_queued(Some(&c)));
    set_condition(
        &mut c,
        "Queued",
        true,
        ("Q", "q"),
        Some(2),
        t("2026-01-01T00:02:00Z"),
    );
    assert!(was_queued(Some(&c)));
}

fn finished(origin_ns: &str, uuid: &str, location: &str) -> Backup {
    let n = nab(origin_ns, BackupSpec::default());
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
fn sync_recreates_only_missing_nabs_of_existing_namespaces() {
    let watched: WatchedLocations = [("default".to_string(), None)].into();
    let namespaces: std::collections::BTreeSet<String> = ["ns-a".to_string()].into();
    let backups = vec![
        finished("ns-a", "ns-a-b1-u1", "default"),
        // Its namespace is gone.
        finished("ns-gone", "ns-gone-b1-u2", "default"),
        // Not on a watched location.
        finished("ns-a", "ns-a-b1-u3", "elsewhere"),
    ];
    let mut unfinished = finished("ns-a", "ns-a-b1-u4", "default");
    unfinished.status.as_mut().unwrap().completion_timestamp = None;
    let mut foreign = finished("ns-a", "ns-a-b1-u5", "default");
    foreign.labels_mut().remove("openshift.io/oadp");
    let all: Vec<Backup> = backups.into_iter().chain([unfinished, foreign]).collect();
    let out = nabs_to_sync(&all, &watched, &namespaces, &[]);
    assert_eq!(out.len(), 1, "{out:?}");
    let n = &out[0];
    assert_eq!(n.name_any(), "b1");
    assert_eq!(n.namespace().as_deref(), Some("ns-a"));
    assert_eq!(
        n.labels()["openshift.io/oadp-nab-synced-from-nacuuid"],
        "ns-a-b1-u1"
    );
    assert_eq!(n.spec.backup_spec.storage_location, None);
    assert!(backup_problems(n, &BackupSpec::default(), "velero").is_empty());
    // An existing NAB of that name is left alone.
    assert!(
        nabs_to_sync(
            &all,
            &watched,
            &namespaces,
            &[nab("ns-a", BackupSpec::default())]
        )
        .is_empty()
    );
    // The recreated NAB takes the Velero Backup over, and only that one.
    assert_eq!(adopted_nacuuid(n, &all), Some("ns-a-b1-u1".to_string()));
    let mut elsewhere = n.clone();
    elsewhere.metadata.namespace = Some("ns-b".into());
    assert_eq!(adopted_nacuuid(&elsewhere, &all), None);
    assert_eq!(
        adopted_nacuuid(&nab("ns-a", BackupSpec::default()), &all),
        None
    );
}

#[test]
fn garbage_collection_looks_only_at_nac_objects() {
    let b = finished("ns-a", "ns-a-b1-u1", "default");
    assert_eq!(
        nac_origin(Origin::Backup, b.labels(), b.annotations()),
        Some(("ns-a".to_string(), "b1".to_string()))
    );
    assert_eq!(
        nac_origin(Origin::Restore, b.labels(), b.annotations()),
        None
    );
    let mut plain = b.clone();
    plain.labels_mut().remove("app.kubernetes.io/managed-by");
    assert_eq!(
        nac_origin(Origin::Backup, plain.labels(), plain.annotations()),
        None
    );
    let r = velero_restore(
        &nar(
            "ns-a",
            RestoreSpec {
                backup_name: Some("b1".into()),
                ..Default::default()
            },
        ),
        &RestoreSpec::default(),
        "velero",
        "ns-a-r1-u",
        "vb",
    );
    assert_eq!(
        nac_origin(Origin::Restore, r.labels(), r.annotations()),
        Some(("ns-a".to_string(), "r1".to_string()))
    );
}

#[test]
fn nothing_non_admin_in_the_velero_namespace() {
    let n = nab("velero", BackupSpec::default());
    let errs = backup_problems(&n, &BackupSpec::default(), "velero");
    assert_eq!(paths(&errs), vec!["metadata.namespace"]);
    let r = nar(
        "velero",
        RestoreSpec {
            backup_name: Some("b1".into()),
            ..Default::default()
        },
    );
    let errs = restore_problems(&r, &RestoreSpec::default(), "velero");
    assert_eq!(paths(&errs), vec!["metadata.namespace"]);
}
