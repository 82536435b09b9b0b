//! Tenancy of OADP's non-admin API (#18) with real identities: two namespace owners,
//! each bound in their namespace to the `admin` ClusterRole and to
//! deploy/seed/nonadmin-rbac.yaml's ClusterRole. Acting as the owner of ns-a through
//! its own credentials: a NonAdminBackup backs up ns-a only; every attempt to reach ns-b
//! or the Velero namespace — through a spec field, a name (253 characters, unicode,
//! names that collide after OADP's 63-character cut), a label, or the Velero kinds
//! directly — is refused, naming the field (or with kube-apiserver's 403 Status), and
//! nothing is created half-way; the administrator's enforced specs fill empty fields and
//! refuse other values; restores go back into ns-a only and need a finished backup of
//! ns-a; deleteBackup removes the data, a plain delete keeps it. The Velero-compatible
//! and non-admin controllers run in the test process on the `local` provider, with the
//! test's own object selector.
//!
//! By default the cluster is the embedded API server, the owners users of its static
//! token file. With `GRANARY_TEST_KUBECONFIG` (a cluster admin's kubeconfig, as for the
//! rest of the suite) the same tests run on that real cluster, and the owners must be
//! real identities there too, given as
//!
//! ```text
//! GRANARY_TEST_OWNER_A_KUBECONFIG  a kubeconfig that acts as the first owner
//! GRANARY_TEST_OWNER_A_USER        that owner's user name as RBAC sees it (a RoleBinding
//!                                  subject of kind User; a service account is
//!                                  system:serviceaccount:<namespace>:<name>)
//! GRANARY_TEST_OWNER_B_KUBECONFIG  the same for a second owner
//! GRANARY_TEST_OWNER_B_USER
//! ```
//!
//! Neither owner may hold any cluster-wide permission beyond the defaults every
//! authenticated user has. As the admin the tests apply deploy/seed/crds and
//! deploy/seed/nonadmin-rbac.yaml, make their own namespaces (`ns-a-<id>`, `ns-b-<id>`,
//! `velero-<id>`, deleted at the end) and bind each owner in their namespace to `admin`
//! and `nonadmin-editor-role`. The cluster must serve the aggregated `admin` ClusterRole
//! (every conformant one does) and run no other controller of `oadp.openshift.io` or
//! `velero.io` (no OADP operator, whose CRDs would also clash with ours). Without the
//! four variables the tests print `SKIPPED` with the reason and pass, as the suite's
//! other tests do when the cluster lacks what they need.

use granary_api::oadp::{
    NonAdminBackup, NonAdminBackupStorageLocation, NonAdminBackupStorageLocationSpec,
    NonAdminPhase, NonAdminRestore,
};
use granary_api::velero::{
    Backup, BackupSpec, BackupStorageLocationSpec, DeleteBackupRequest, DownloadRequest,
    DownloadRequestSpec, DownloadTarget, DownloadTargetKind, ObjectStorageLocation, Restore,
    RestorePhase, RestoreSpec,
};
use granary_runtime::config::ConfigDuration;
use granary_test_support::builders::backup_spec;
use granary_test_support::poll_until;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;

use granary_test_support::worlds::nonadmin::*;

#[tokio::test]
async fn a_namespace_owner_backs_up_and_restores_only_their_own_namespace() {
    let Some(t) = start().await else { return };
    let (ns_a, ns_b, velero) = (t.ns_a.as_str(), t.ns_b.as_str(), t.velero_ns.as_str());
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), ns_a);
    let nars_a: Api<NonAdminRestore> = Api::namespaced(t.owner_a.clone(), ns_a);
    let pp = PostParams::default();

    // A backup of ns-a, as NAC makes it.
    nabs_a
        .create(&pp, &t.nab("b1", BackupSpec::default()))
        .await
        .expect("create nab");
    let b1 = wait_backed_up(&nabs_a, "b1").await;
    let status = b1.status.clone().expect("status");
    let vb = status.velero_backup.clone().expect("veleroBackup");
    let vb_name = vb.name.clone().expect("name");
    assert!(
        vb_name.starts_with(&format!("{ns_a}-b1-")) && vb_name.len() <= 63,
        "{vb_name}"
    );
    assert_eq!(vb.nacuuid.as_deref(), Some(vb_name.as_str()));
    assert_eq!(vb.namespace.as_deref(), Some(velero));
    assert_eq!(status.phase, Some(NonAdminPhase::Created));
    assert_eq!(
        status
            .queue_info
            .expect("queueInfo")
            .estimated_queue_position,
        0
    );
    assert!(
        b1.finalizers()
            .iter()
            .any(|f| f == "nonadminbackup.oadp.openshift.io/finalizer")
    );
    let velero_b1 = t
        .velero::<Backup>()
        .get(&vb_name)
        .await
        .expect("velero backup");
    assert_eq!(
        velero_b1.spec.included_namespaces,
        Some(vec![ns_a.to_string()])
    );
    // The administrator's enforced TTL filled the empty field.
    assert_eq!(velero_b1.spec.ttl, Some("24h".parse().expect("ttl")));
    assert_eq!(velero_b1.labels()["openshift.io/oadp"], "True");
    assert_eq!(
        velero_b1.labels()["openshift.io/oadp-nab-origin-nacuuid"],
        vb_name
    );
    assert_eq!(
        velero_b1.annotations()["openshift.io/oadp-nab-origin-namespace"],
        ns_a
    );
    let excluded = velero_b1
        .spec
        .excluded_resources
        .clone()
        .unwrap_or_default();
    assert!(excluded.iter().any(|r| r == "nonadminbackups"));
    assert!(excluded.iter().any(|r| r == "clusterroles"));
    // What was backed up is ns-a's only.
    let resources = t.keys(&format!("backups/{vb_name}/")).await;
    assert!(!resources.is_empty());
    let progress = velero_b1.status.clone().and_then(|s| s.progress);
    assert!(progress.is_some_and(|p| p.items_backed_up.unwrap_or(0) >= 1));

    // ns-b's owner has a backup and a location of their own.
    let nabs_b: Api<NonAdminBackup> = Api::namespaced(t.owner_b.clone(), ns_b);
    nabs_b
        .create(&pp, &t.nab("bb", BackupSpec::default()))
        .await
        .expect("nab in ns-b");
    let bb = wait_backed_up(&nabs_b, "bb").await;
    let bb_velero = bb.velero_backup_name().expect("name").to_string();
    Api::<NonAdminBackupStorageLocation>::namespaced(t.owner_b.clone(), ns_b)
        .create(
            &pp,
            &NonAdminBackupStorageLocation::new(
                "b-location",
                NonAdminBackupStorageLocationSpec {
                    backup_storage_location_spec: BackupStorageLocationSpec {
                        provider: "local".into(),
                        object_storage: ObjectStorageLocation {
                            bucket: BUCKET.into(),
                            ..Default::default()
                        },
                        ..Default::default()
                    },
                },
            ),
        )
        .await
        .expect("ns-b's location");

    // Field, name and label tricks: refused, naming the field, nothing created.
    let before = t.velero_backups().await.len();
    let with_labels = |pairs: &[(&str, &str)]| {
        Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
        )
    };
    let tricks: Vec<(&str, BackupSpec, String)> = vec![
        (
            "star",
            backup_spec().namespaces(["*"]).build(),
            "spec.backupSpec.includedNamespaces[0]".into(),
        ),
        (
            "other",
            backup_spec().namespaces([ns_a, ns_b]).build(),
            "spec.backupSpec.includedNamespaces[1]".into(),
        ),
        (
            "velero-ns",
            backup_spec().namespaces([velero]).build(),
            "spec.backupSpec.includedNamespaces[0]".into(),
        ),
        (
            "excluded",
            backup_spec().exclude_namespaces([ns_a]).build(),
            "spec.backupSpec.excludedNamespaces".into(),
        ),
        (
            "cluster",
            backup_spec().cluster_resources(true).build(),
            "spec.backupSpec.includeClusterResources".into(),
        ),
        (
            "admins-location",
            backup_spec().location("default").build(),
            "spec.backupSpec.storageLocation".into(),
        ),
        (
            "others-location",
            backup_spec().location("b-location").build(),
            format!(
                "spec.backupSpec.storageLocation: NonAdminBackupStorageLocation \"b-location\" not found in namespace {ns_a}"
            ),
        ),
        (
            "others-backup-as-location",
            backup_spec().location(bb_velero.clone()).build(),
            "spec.backupSpec.storageLocation".into(),
        ),
        (
            "own-ttl",
            backup_spec().ttl("48h").build(),
            "spec.backupSpec.ttl: the administrator has restricted spec.backupSpec.ttl field value to 24h".into(),
        ),
        // A label value Velero's selector parsing refuses (unicode).
        (
            "unicode-selector",
            backup_spec().label_selector(with_labels(&[("team", "b\u{e9}")])).build(),
            "spec.backupSpec.labelSelector.matchLabels[\"team\"]".into(),
        ),
    ];
    for (name, spec, _) in &tricks {
        nabs_a
            .create(&pp, &t.nab(name, spec.clone()))
            .await
            .expect("create");
    }
    for (name, _, field) in &tricks {
        let m = wait_refused(&nabs_a, name, "InvalidBackupSpec").await;
        assert!(m.contains(field.as_str()), "{name}: {m}");
        let n = nabs_a.get(name).await.expect("nab");
        assert!(
            n.finalizers().is_empty(),
            "{name}: no finalizer on a refused NAB"
        );
        assert!(n.status.and_then(|s| s.velero_backup).is_none());
    }
    // Names and labels that are no valid object names or labels never get in at all.
    for bad in [
        t.nab("b\u{e9}b\u{e9}", BackupSpec::default()),
        t.nab(&"x".repeat(254), BackupSpec::default()),
        {
            let mut n = t.nab("unicode-labelled", BackupSpec::default());
            n.labels_mut().insert("team".into(), "\u{1f600}".into());
            n
        },
    ] {
        assert_eq!(
            granary_test_support::api::api_error(nabs_a.create(&pp, &bad).await).code,
            422
        );
    }
    // Even one who may write in the Velero namespace gets no non-admin backup of it.
    let nabs_velero: Api<NonAdminBackup> = Api::namespaced(t.admin.clone(), velero);
    nabs_velero
        .create(&pp, &t.nab("of-velero", BackupSpec::default()))
        .await
        .expect("create");
    let m = wait_refused(&nabs_velero, "of-velero", "InvalidBackupSpec").await;
    assert!(m.contains("metadata.namespace"), "{m}");
    assert_eq!(t.velero_backups().await.len(), before, "nothing created");

    // 253-character names that are the same after OADP's cut to 63 get distinct Velero
    // backups of ns-a; the second also selects by a label ns-b's objects could carry,
    // and a third claims to be synced from ns-b's backup: each still ns-a only, and
    // ns-b's backup is left as it was.
    let long1 = format!("{}-one", "x".repeat(249));
    let long2 = format!("{}-two", "x".repeat(249));
    assert_eq!(long1.len(), 253);
    for (n, label_selector) in [(&long1, None), (&long2, with_labels(&[("team", "b")]))] {
        let spec = BackupSpec {
            label_selector,
            ..Default::default()
        };
        nabs_a.create(&pp, &t.nab(n, spec)).await.expect("long");
    }
    let mut adopter = t.nab("adopter", BackupSpec::default());
    adopter.labels_mut().insert(
        "openshift.io/oadp-nab-synced-from-nacuuid".into(),
        bb_velero.clone(),
    );
    nabs_a.create(&pp, &adopter).await.expect("adopter");
    let l1 = wait_backed_up(&nabs_a, &long1)
        .await
        .velero_backup_name()
        .map(String::from);
    let l2 = wait_backed_up(&nabs_a, &long2)
        .await
        .velero_backup_name()
        .map(String::from);
    let adopted = wait_backed_up(&nabs_a, "adopter")
        .await
        .velero_backup_name()
        .map(String::from);
    let (l1, l2, adopted) = (l1.expect("name"), l2.expect("name"), adopted.expect("name"));
    assert_ne!(l1, l2);
    for l in [&l1, &l2, &adopted] {
        assert_ne!(*l, bb_velero);
        assert!(l.len() <= 63 && l.starts_with(&format!("{ns_a}-")), "{l}");
        let v = t.velero::<Backup>().get(l).await.expect("backup");
        assert_eq!(v.spec.included_namespaces, Some(vec![ns_a.to_string()]));
        // What a controller creates carries its object selector, so tests sharing a cluster
        // never act on each other's objects.
        assert_eq!(
            v.labels().get("granary.gardener.cloud/instance"),
            Some(&t.selector),
            "{l}"
        );
        assert_eq!(
            v.annotations()["openshift.io/oadp-nab-origin-namespace"],
            ns_a
        );
    }
    let bb_now = t.velero::<Backup>().get(&bb_velero).await.expect("bb");
    assert_eq!(
        bb_now.annotations()["openshift.io/oadp-nab-origin-name"],
        "bb"
    );
    assert_eq!(
        bb_now.annotations()["openshift.io/oadp-nab-origin-namespace"],
        ns_b
    );

    // Directly, the owner of ns-a reaches nothing of ns-b or of the Velero namespace:
    // kube-apiserver's 403.
    let backups_v: Api<Backup> = Api::namespaced(t.owner_a.clone(), velero);
    let restores_v: Api<Restore> = Api::namespaced(t.owner_a.clone(), velero);
    let downloads_v: Api<DownloadRequest> = Api::namespaced(t.owner_a.clone(), velero);
    let dbrs_v: Api<DeleteBackupRequest> = Api::namespaced(t.owner_a.clone(), velero);
    let nabs_b_as_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), ns_b);
    let v = "velero.io";
    let o = "oadp.openshift.io";
    t.assert_forbidden(
        backups_v.get(&bb_velero).await,
        ("get", "backups", v, Some(&bb_velero), velero),
    );
    t.assert_forbidden(
        backups_v.list(&ListParams::default()).await,
        ("list", "backups", v, None, velero),
    );
    t.assert_forbidden(
        backups_v.delete(&bb_velero, &DeleteParams::default()).await,
        ("delete", "backups", v, Some(&bb_velero), velero),
    );
    t.assert_forbidden(
        restores_v.list(&ListParams::default()).await,
        ("list", "restores", v, None, velero),
    );
    t.assert_forbidden(
        restores_v
            .delete("anything", &DeleteParams::default())
            .await,
        ("delete", "restores", v, Some("anything"), velero),
    );
    let download = DownloadRequest::new(
        "steal",
        DownloadRequestSpec {
            target: DownloadTarget {
                kind: DownloadTargetKind::BackupContents,
                name: bb_velero.clone(),
            },
        },
    );
    t.assert_forbidden(
        downloads_v.create(&pp, &download).await,
        ("create", "downloadrequests", v, None, velero),
    );
    t.assert_forbidden(
        downloads_v.get("steal").await,
        ("get", "downloadrequests", v, Some("steal"), velero),
    );
    t.assert_forbidden(
        downloads_v.delete("steal", &DeleteParams::default()).await,
        ("delete", "downloadrequests", v, Some("steal"), velero),
    );
    t.assert_forbidden(
        dbrs_v.list(&ListParams::default()).await,
        ("list", "deletebackuprequests", v, None, velero),
    );
    t.assert_forbidden(
        dbrs_v
            .create(
                &pp,
                &DeleteBackupRequest::new(
                    "drop-b",
                    granary_api::velero::DeleteBackupRequestSpec {
                        backup_name: bb_velero.clone(),
                    },
                ),
            )
            .await,
        ("create", "deletebackuprequests", v, None, velero),
    );
    t.assert_forbidden(
        nabs_b_as_a.get("bb").await,
        ("get", "nonadminbackups", o, Some("bb"), ns_b),
    );
    t.assert_forbidden(
        nabs_b_as_a.delete("bb", &DeleteParams::default()).await,
        ("delete", "nonadminbackups", o, Some("bb"), ns_b),
    );
    t.assert_forbidden(
        nabs_b_as_a
            .patch(
                "bb",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"deleteBackup": true}})),
            )
            .await,
        ("patch", "nonadminbackups", o, Some("bb"), ns_b),
    );
    t.assert_forbidden(
        nabs_b_as_a
            .create(&pp, &t.nab("into-b", BackupSpec::default()))
            .await,
        ("create", "nonadminbackups", o, None, ns_b),
    );
    t.assert_forbidden(
        Api::<ConfigMap>::namespaced(t.owner_a.clone(), ns_b)
            .get(CONFIG)
            .await,
        ("get", "configmaps", "", Some(CONFIG), ns_b),
    );
    // Nor through the status of their own NAB, which only the controllers write.
    t.assert_forbidden(
        nabs_a
            .patch_status(
                "b1",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"status": {"veleroBackup": {"nacuuid": bb_velero, "name": bb_velero}}}),
                ),
            )
            .await,
        ("patch", "nonadminbackups/status", o, Some("b1"), ns_a),
    );

    // Restores: a NAR names a NAB of its own namespace whose backup finished.
    let restores_before = t.count::<Restore>().await;
    let from = |b: &str| RestoreSpec {
        backup_name: Some(b.into()),
        ..Default::default()
    };
    let not_found = format!("not found in namespace {ns_a}");
    let nar_tricks: Vec<(&str, RestoreSpec, String)> = vec![
        ("from-b", from("bb"), not_found.clone()),
        ("from-velero-name", from(&bb_velero), not_found.clone()),
        ("missing", from("no-such-backup"), not_found.clone()),
        ("unicode", from("b\u{e9}"), not_found.clone()),
        (
            "mapped",
            RestoreSpec {
                namespace_mapping: Some([(ns_a.to_string(), ns_b.to_string())].into()),
                ..from("b1")
            },
            "spec.restoreSpec.namespaceMapping".into(),
        ),
        (
            "mapped-velero",
            RestoreSpec {
                namespace_mapping: Some([(ns_a.to_string(), velero.to_string())].into()),
                ..from("b1")
            },
            "spec.restoreSpec.namespaceMapping".into(),
        ),
        (
            "into-b",
            RestoreSpec {
                included_namespaces: Some(vec![ns_b.into()]),
                ..from("b1")
            },
            "spec.restoreSpec.includedNamespaces".into(),
        ),
        (
            "star",
            RestoreSpec {
                included_namespaces: Some(vec!["*".into()]),
                ..from("b1")
            },
            "spec.restoreSpec.includedNamespaces".into(),
        ),
        (
            "excluded",
            RestoreSpec {
                excluded_namespaces: Some(vec![ns_b.into()]),
                ..from("b1")
            },
            "spec.restoreSpec.excludedNamespaces".into(),
        ),
        (
            "own-pvs",
            RestoreSpec {
                restore_pvs: Some(true),
                ..from("b1")
            },
            "spec.restoreSpec.restorePVs: the administrator has restricted spec.restoreSpec.restorePVs field value to false".into(),
        ),
        ("refused-nab", from("star"), "not ready to restore from".into()),
    ];
    for (name, spec, _) in &nar_tricks {
        nars_a
            .create(&pp, &t.nar(name, spec.clone()))
            .await
            .expect("nar");
    }
    for (name, _, want) in &nar_tricks {
        let m = wait_refused(&nars_a, name, "InvalidRestoreSpec").await;
        assert!(m.contains(want.as_str()), "{name}: {m}");
        assert!(m.contains("spec.restoreSpec."), "{name}: {m}");
        let n = nars_a.get(name).await.expect("nar");
        assert!(n.finalizers().is_empty(), "{name}: no finalizer");
        assert!(n.status.and_then(|s| s.velero_restore).is_none());
    }

    // A NAR against a backup that failed is refused with the reason.
    let long2_nab = nabs_a.get(&long2).await.expect("nab");
    let failed = long2_nab
        .velero_backup_name()
        .expect("velero name")
        .to_string();
    t.velero::<Backup>()
        .patch(
            &failed,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .expect("mark failed");
    nars_a
        .create(&pp, &t.nar("from-failed", from(&long2)))
        .await
        .expect("nar");
    let m = wait_refused(&nars_a, "from-failed", "InvalidRestoreSpec").await;
    assert!(m.contains("is Failed"), "{m}");
    assert_eq!(
        t.count::<Restore>().await,
        restores_before,
        "no Velero Restore for a refused NAR"
    );

    // A restore of b1 goes back into ns-a only, with the enforced spec filled in.
    let cms_a: Api<ConfigMap> = Api::namespaced(t.owner_a.clone(), ns_a);
    cms_a
        .delete(CONFIG, &DeleteParams::default())
        .await
        .expect("delete configmap");
    nars_a
        .create(&pp, &t.nar("r1", from("b1")))
        .await
        .expect("nar");
    poll_until("r1 restored", || async {
        nars_a
            .get("r1")
            .await
            .ok()
            .and_then(|r| r.status)
            .and_then(|s| s.velero_restore)
            .and_then(|v| v.status)
            .and_then(|s| s.phase)
            == Some(RestorePhase::Completed)
    })
    .await;
    let restored = cms_a.get(CONFIG).await.expect("restored configmap");
    assert_eq!(restored.data.expect("data")["k"], ns_a);
    let r1 = nars_a.get("r1").await.expect("r1");
    let vr = r1
        .velero_restore_name()
        .expect("velero restore")
        .to_string();
    assert!(vr.starts_with(&format!("{ns_a}-r1-")), "{vr}");
    let velero_r1 = t.velero::<Restore>().get(&vr).await.expect("restore");
    assert_eq!(
        velero_r1.spec.backup_name.as_deref(),
        Some(vb_name.as_str())
    );
    assert_eq!(
        velero_r1.spec.included_namespaces,
        Some(vec![ns_a.to_string()])
    );
    assert_eq!(velero_r1.spec.namespace_mapping, None);
    assert_eq!(velero_r1.spec.restore_pvs, Some(false));
    // ns-b was not touched.
    let cm_b = Api::<ConfigMap>::namespaced(t.admin.clone(), ns_b)
        .get(CONFIG)
        .await
        .expect("ns-b's configmap");
    assert_eq!(cm_b.data.expect("data")["k"], ns_b);
    // Deleting the NAR deletes its Velero Restore.
    nars_a
        .delete("r1", &DeleteParams::default())
        .await
        .expect("delete nar");
    poll_until("r1 and its Velero Restore gone", || async {
        matches!(nars_a.get_opt("r1").await, Ok(None))
            && matches!(t.velero::<Restore>().get_opt(&vr).await, Ok(None))
    })
    .await;

    // A plain delete removes the Velero Backup CR only; the data stays.
    let l1_keys = t.keys(&format!("backups/{l1}/")).await;
    assert!(!l1_keys.is_empty());
    nabs_a
        .delete(&long1, &DeleteParams::default())
        .await
        .expect("delete");
    poll_until("long1 and its Velero Backup gone", || async {
        matches!(nabs_a.get_opt(&long1).await, Ok(None))
            && matches!(t.velero::<Backup>().get_opt(&l1).await, Ok(None))
    })
    .await;
    assert_eq!(
        t.keys(&format!("backups/{l1}/")).await,
        l1_keys,
        "data kept"
    );

    // deleteBackup: a DeleteBackupRequest removes the data, the NAB's restores go, then
    // the NAB goes.
    nars_a
        .create(&pp, &t.nar("r2", from("b1")))
        .await
        .expect("nar");
    poll_until("r2 created", || async {
        nars_a
            .get("r2")
            .await
            .ok()
            .and_then(|r| r.status)
            .and_then(|s| s.phase)
            == Some(NonAdminPhase::Created)
    })
    .await;
    nabs_a
        .patch(
            "b1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"deleteBackup": true}})),
        )
        .await
        .expect("deleteBackup");
    poll_until("b1 deleted with its data", || async {
        matches!(nabs_a.get_opt("b1").await, Ok(None))
            && matches!(t.velero::<Backup>().get_opt(&vb_name).await, Ok(None))
            && matches!(nars_a.get_opt("r2").await, Ok(None))
    })
    .await;
    assert!(
        t.keys(&format!("backups/{vb_name}/")).await.is_empty(),
        "data gone"
    );
    // ns-b's backup was never touched.
    let bb = nabs_b.get("bb").await.expect("bb");
    assert_eq!(
        bb.status.and_then(|s| s.phase),
        Some(NonAdminPhase::Created)
    );
    assert!(!t.keys(&format!("backups/{bb_velero}/")).await.is_empty());
}

#[tokio::test]
async fn a_plain_delete_keeps_the_data_and_the_sync_brings_the_backup_back() {
    let Some(t) = start_with(|s| {
        s.backup_sync_period = ConfigDuration(Duration::from_secs(1));
        s.non_admin.backup_sync_period = ConfigDuration(Duration::from_secs(1));
    })
    .await
    else {
        return;
    };
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), &t.ns_a);
    nabs_a
        .create(
            &PostParams::default(),
            &t.nab("keep", BackupSpec::default()),
        )
        .await
        .expect("create nab");
    let first = wait_backed_up(&nabs_a, "keep").await;
    let vb = first.velero_backup_name().expect("velero name").to_string();
    let keys = t.keys(&format!("backups/{vb}/")).await;
    assert!(!keys.is_empty());
    nabs_a
        .delete("keep", &DeleteParams::default())
        .await
        .expect("plain delete");
    // Velero's sync brings the Backup back from object storage, NAC's sync the NAB,
    // which takes over the same Velero Backup.
    let old_uid = first.uid();
    poll_until("keep recreated by the sync", || async {
        nabs_a
            .get_opt("keep")
            .await
            .ok()
            .flatten()
            .is_some_and(|n| {
                n.uid() != old_uid
                    && n.status.as_ref().and_then(|s| s.phase) == Some(NonAdminPhase::Created)
            })
    })
    .await;
    let synced = nabs_a.get("keep").await.expect("nab");
    assert_eq!(
        synced.labels()["openshift.io/oadp-nab-synced-from-nacuuid"],
        vb
    );
    assert_eq!(synced.velero_backup_name(), Some(vb.as_str()));
    assert!(
        synced
            .finalizers()
            .iter()
            .any(|f| f == "nonadminbackup.oadp.openshift.io/finalizer")
    );
    assert_eq!(t.keys(&format!("backups/{vb}/")).await, keys, "data kept");
    assert_eq!(
        t.velero_backups().await.len(),
        1,
        "no second Velero Backup was made"
    );
}

#[tokio::test]
async fn velero_objects_of_gone_non_admin_objects_are_garbage_collected() {
    let Some(t) = start_with(|s| {
        s.non_admin.garbage_collection_period = ConfigDuration(Duration::from_secs(1));
    })
    .await
    else {
        return;
    };
    let pp = PostParams::default();
    // The administrator's own backup, not NAC's: never touched.
    t.velero::<Backup>()
        .create(
            &pp,
            &Backup::new(
                "admins-own",
                backup_spec().namespaces([t.ns_b.clone()]).build(),
            ),
        )
        .await
        .expect("admin backup");
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), &t.ns_a);
    nabs_a
        .create(&pp, &t.nab("live", BackupSpec::default()))
        .await
        .expect("nab");
    let live = wait_backed_up(&nabs_a, "live").await;
    let live_vb = live.velero_backup_name().expect("name").to_string();
    let nac = |origin: &str, uuid: &str, ns: &str, name: &str| {
        let mut m = kube::api::ObjectMeta {
            name: Some(uuid.into()),
            ..Default::default()
        };
        m.labels = Some(
            [
                ("openshift.io/oadp", "True"),
                ("app.kubernetes.io/managed-by", "oadp-nac-controller"),
                (&*format!("openshift.io/oadp-{origin}-origin-nacuuid"), uuid),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        m.annotations = Some(
            [
                (format!("openshift.io/oadp-{origin}-origin-name"), name),
                (format!("openshift.io/oadp-{origin}-origin-namespace"), ns),
            ]
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect(),
        );
        m
    };
    let mut orphan_backup = Backup::new("", backup_spec().namespaces(["ns-gone"]).build());
    orphan_backup.metadata = nac("nab", "ns-gone-x-1", "ns-gone", "x");
    t.velero::<Backup>()
        .create(&pp, &orphan_backup)
        .await
        .expect("orphan backup");
    let mut orphan_restore = Restore::new(
        "",
        RestoreSpec {
            backup_name: Some(live_vb.clone()),
            ..Default::default()
        },
    );
    orphan_restore.metadata = nac("nar", "ns-a-gone-1", &t.ns_a, "gone");
    t.velero::<Restore>()
        .create(&pp, &orphan_restore)
        .await
        .expect("orphan restore");
    poll_until("orphans collected", || async {
        matches!(t.velero::<Backup>().get_opt("ns-gone-x-1").await, Ok(None))
            && matches!(t.velero::<Restore>().get_opt("ns-a-gone-1").await, Ok(None))
    })
    .await;
    for name in ["admins-own", live_vb.as_str()] {
        assert!(
            t.velero::<Backup>()
                .get_opt(name)
                .await
                .expect("get")
                .is_some(),
            "{name} kept"
        );
    }
}
