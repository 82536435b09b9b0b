//! The backup lifecycle (#16) against the embedded API server and the local provider:
//! real backups taken by the controllers, then deleted through DeleteBackupRequests
//! (`backup-deletion`), interrupted deletions resumed after a restart, refused requests,
//! and TTL expiry through the `gc` controller.

use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, DeleteBackupRequest, DeleteBackupRequestPhase,
    DeleteBackupRequestSpec, Restore, RestoreSpec,
};
use granary_test_support::poll_until;
use granary_test_support::seed::Backend;
use granary_test_support::worlds::velero::{PREFIX, World};
use granary_velero_server::backup_deletion::ANNOTATION_STORAGE_LOCATION;
use granary_velero_server::settings::VeleroSettings;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_request_removes_data_restores_and_the_backup() {
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    w.take_backup("b1", None).await;
    let keys = w.keys("backups/b1/").await;
    for file in [
        "velero-backup.json",
        "b1.tar.gz",
        "b1-logs.gz",
        "b1-resource-list.json.gz",
        "b1-integrity.json",
    ] {
        assert!(
            keys.contains(&format!("{PREFIX}/backups/b1/{file}")),
            "{file} in {keys:?}"
        );
    }
    // A restore of it (with its files), a restore of another backup, and an old request
    // for b1 that was refused earlier.
    w.put("restores/r1/restore-r1-logs.gz").await;
    w.put("restores/r2/restore-r2-logs.gz").await;
    for (restore, backup) in [("r1", "b1"), ("r2", "other")] {
        let r = Restore::new(
            restore,
            RestoreSpec {
                backup_name: Some(backup.into()),
                ..Default::default()
            },
        );
        w.api::<Restore>()
            .create(&PostParams::default(), &r)
            .await
            .expect("restore");
    }
    let mut old = DeleteBackupRequest::new(
        "b1-old",
        DeleteBackupRequestSpec {
            backup_name: "b1".into(),
        },
    );
    old.metadata.labels = Some([("velero.io/backup-name".to_string(), "b1".to_string())].into());
    // With its status from the start, so the controller never sees it New.
    old.status = Some(granary_api::velero::DeleteBackupRequestStatus {
        phase: Some(DeleteBackupRequestPhase::Processed),
        errors: Some(vec!["earlier".into()]),
    });
    w.api::<DeleteBackupRequest>()
        .create(&PostParams::default(), &old)
        .await
        .expect("old request");

    w.request("b1-now", "b1").await;
    let errors = w.wait_processed("b1-now").await;
    assert!(errors.is_empty(), "{errors:?}");
    assert!(w.keys("backups/b1/").await.is_empty());
    assert!(w.keys("restores/r1/").await.is_empty());
    assert_eq!(
        w.keys("restores/r2/").await.len(),
        1,
        "another backup's restore stays"
    );
    assert!(
        w.api::<Backup>()
            .get_opt("b1")
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        w.api::<Restore>()
            .get_opt("r1")
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        w.api::<Restore>()
            .get_opt("r2")
            .await
            .expect("get")
            .is_some()
    );
    w.wait_gone::<DeleteBackupRequest>("request", "b1-old")
        .await;
    let done = w
        .api::<DeleteBackupRequest>()
        .get("b1-now")
        .await
        .expect("request");
    assert_eq!(
        done.labels()
            .get("velero.io/backup-name")
            .map(String::as_str),
        Some("b1")
    );
    assert_eq!(
        done.annotations()
            .get(ANNOTATION_STORAGE_LOCATION)
            .map(String::as_str),
        Some("default")
    );
    let metrics = w.metrics.render();
    assert!(
        metrics.contains("velero_backup_deletion_success_total{schedule=\"\"} 1"),
        "{metrics}"
    );
    controllers.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_say_why_and_touch_nothing() {
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    w.location("ro", true).await;
    w.backup_cr("kept", "ro", json!({"phase": "Completed"}))
        .await;
    w.put("backups/kept/velero-backup.json").await;
    w.backup_cr("running", "default", json!({"phase": "InProgress"}))
        .await;
    w.backup_cr("nowhere", "gone", json!({"phase": "Completed"}))
        .await;

    for (request, backup, want) in [
        ("r-missing", "missing", "backup not found".to_string()),
        (
            "r-kept",
            "kept",
            "cannot delete backup because backup storage location ro is currently in read-only mode"
                .to_string(),
        ),
        ("r-running", "running", "backup is still in progress".to_string()),
        (
            "r-nowhere",
            "nowhere",
            "backup storage location gone not found".to_string(),
        ),
    ] {
        w.request(request, backup).await;
        assert_eq!(w.wait_processed(request).await, vec![want]);
    }
    assert_eq!(w.keys("backups/kept/").await.len(), 1);
    for b in ["kept", "running", "nowhere"] {
        assert!(w.api::<Backup>().get_opt(b).await.expect("get").is_some());
    }
    controllers.abort();
}

/// A crash after each step of a deletion: the next start finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_deletion_finishes_after_a_restart() {
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    controllers.abort();
    let _ = controllers.await;

    let files = |name: &str| {
        [
            "velero-backup.json".to_string(),
            format!("{name}.tar.gz"),
            format!("{name}-logs.gz"),
            format!("{name}-results.gz"),
        ]
    };
    // After InProgress; after velero-backup.json went; after all data went; after the CR
    // went (a stray object left behind by a delete the store had not finished).
    let cases: [(&str, usize, bool); 4] = [
        ("marked", 4, true),
        ("metadata-gone", 3, true),
        ("data-gone", 0, true),
        ("cr-gone", 1, false),
    ];
    for (name, files_left, cr) in cases {
        for f in files(name).iter().skip(4 - files_left) {
            w.put(&format!("backups/{name}/{f}")).await;
        }
        if cr {
            w.backup_cr(name, "default", json!({"phase": "Deleting"}))
                .await;
        }
        let mut r = DeleteBackupRequest::new(
            &format!("{name}-req"),
            DeleteBackupRequestSpec {
                backup_name: name.into(),
            },
        );
        r.annotations_mut()
            .insert(ANNOTATION_STORAGE_LOCATION.into(), "default".into());
        w.api::<DeleteBackupRequest>()
            .create(&PostParams::default(), &r)
            .await
            .expect("request");
        w.api::<DeleteBackupRequest>()
            .patch(
                &format!("{name}-req"),
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {"phase": "InProgress"}})),
            )
            .await
            .expect("request status");
    }
    let controllers = w.controllers(w.settings());
    for (name, _, _) in cases {
        let errors = w.wait_processed(&format!("{name}-req")).await;
        assert!(errors.is_empty(), "{name}: {errors:?}");
        assert!(
            w.keys(&format!("backups/{name}/")).await.is_empty(),
            "{name}"
        );
        assert!(
            w.api::<Backup>()
                .get_opt(name)
                .await
                .expect("get")
                .is_none(),
            "{name}"
        );
    }
    controllers.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_backups_are_collected_unless_their_location_forbids() {
    let w = World::start().await;
    let settings = VeleroSettings {
        garbage_collection_frequency: granary_runtime::config::ConfigDuration(
            Duration::from_millis(500),
        ),
        ..w.settings()
    };
    let controllers = w.controllers(settings);
    w.location("default", false).await;
    w.location("ro", true).await;
    let past = "2020-01-01T00:00:00Z";
    w.backup_cr(
        "on-ro",
        "ro",
        json!({"phase": "Completed", "expiration": past}),
    )
    .await;
    w.put("backups/on-ro/velero-backup.json").await;
    w.backup_cr(
        "lost",
        "gone",
        json!({"phase": "Completed", "expiration": past}),
    )
    .await;
    // A real backup with a short TTL: completes, expires, gets a request, goes with its
    // data. Its TTL counts from its start, so on a slow machine it can complete, expire
    // and go between two polls: its phases are followed on a watch opened before it is
    // created, which sees every write up to its deletion.
    let phases = w.phases_until_deleted("short", Some("1s")).await;
    assert!(
        phases.ends_with(&[Some(BackupPhase::Completed), Some(BackupPhase::Deleting)]),
        "the backup is collected once Completed: {phases:?}"
    );
    assert!(w.keys("backups/short/").await.is_empty());
    let requests = w
        .api::<DeleteBackupRequest>()
        .list(&Default::default())
        .await
        .expect("list")
        .items;
    let request = requests
        .iter()
        .find(|r| r.spec.backup_name == "short")
        .expect("gc's request");
    assert!(request.name_any().starts_with("short-"));

    let api = w.api::<Backup>();
    for (name, value) in [("on-ro", "BSLReadOnly"), ("lost", "BSLNotFound")] {
        poll_until(&format!("{name} labelled {value}"), || async {
            api.get(name).await.ok().is_some_and(|b| {
                b.labels().get("velero.io/gc-failure").map(String::as_str) == Some(value)
            })
        })
        .await;
    }
    assert!(!requests.iter().any(|r| r.spec.backup_name == "on-ro"));
    assert_eq!(w.keys("backups/on-ro/").await.len(), 1);
    controllers.abort();
}

/// What Velero 1.18 writes as `velero-backup.json` (pretty, Go's field order), for a
/// backup taken by a Schedule that this cluster does not have.
fn velero_written(name: &str, phase: &str, expiration: &str) -> String {
    format!(
        r#"{{
  "kind": "Backup",
  "apiVersion": "velero.io/v1",
  "metadata": {{
    "name": "{name}",
    "namespace": "velero",
    "uid": "4f8a1c2e-0000-4000-8000-000000000001",
    "resourceVersion": "12345",
    "generation": 7,
    "creationTimestamp": "2026-01-01T00:00:00Z",
    "labels": {{
      "velero.io/schedule-name": "daily",
      "velero.io/storage-location": "default"
    }},
    "ownerReferences": [
      {{
        "apiVersion": "velero.io/v1",
        "kind": "Schedule",
        "name": "daily",
        "uid": "4f8a1c2e-0000-4000-8000-0000000000ff",
        "controller": true
      }}
    ]
  }},
  "spec": {{
    "metadata": {{}},
    "includedNamespaces": [
      "shop"
    ],
    "ttl": "720h0m0s",
    "hooks": {{}},
    "storageLocation": "default",
    "defaultVolumesToFsBackup": false,
    "csiSnapshotTimeout": "10m0s",
    "itemOperationTimeout": "4h0m0s",
    "snapshotMoveData": false
  }},
  "status": {{
    "version": 1,
    "formatVersion": "1.1.0",
    "expiration": "{expiration}",
    "phase": "{phase}",
    "startTimestamp": "2026-01-01T00:00:05Z",
    "completionTimestamp": "2026-01-01T00:01:10Z",
    "progress": {{
      "totalItems": 120,
      "itemsBackedUp": 120
    }}
  }}
}}"#
    )
}

/// A second seed pointed at the same location sees the first seed's backups and
/// Velero's, leaves in-flight ones alone until they expire, drops orphans, and follows
/// a deletion made by the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_seed_syncs_the_backups_of_a_shared_location() {
    let w = World::start().await;
    let fast = |namespace: &str| VeleroSettings {
        namespace: namespace.to_string(),
        backup_sync_period: granary_runtime::config::ConfigDuration(Duration::from_millis(500)),
        ..VeleroSettings::default()
    };
    let seed_a = w.controllers(fast(&w.namespace));
    w.location("default", false).await;
    w.take_backup("b1", None).await;

    for (name, phase, expiration) in [
        ("velero-made", "Completed", "2099-01-01T00:00:00Z"),
        ("finalizing-new", "Finalizing", "2099-01-01T00:00:00Z"),
        ("finalizing-old", "Finalizing", "2020-01-01T00:00:00Z"),
    ] {
        w.store
            .put(
                &w.bucket,
                &format!("{PREFIX}/backups/{name}/velero-backup.json"),
                bytes::Bytes::from(velero_written(name, phase, expiration)),
            )
            .await
            .expect("put");
    }
    w.put("backups/half/half.tar.gz").await;

    // Seed B: its own Velero namespace, its own location (another name) on the same
    // bucket and prefix, an orphan of that location and one being deleted.
    let ns_b = w.cluster.namespace("velero-b").await;
    let b = World {
        namespace: ns_b.clone(),
        ..w.clone()
    };
    let seed_b = b.controllers(fast(&ns_b));
    for (name, phase) in [("orphan", "Completed"), ("orphan-deleting", "Deleting")] {
        let o: Backup = serde_json::from_value(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": name, "labels": {"velero.io/storage-location": "primary"}},
            "spec": {"storageLocation": "primary"},
            "status": {"phase": phase},
        }))
        .expect("backup");
        b.api::<Backup>()
            .create(&PostParams::default(), &o)
            .await
            .expect("orphan");
    }
    b.location("primary", true).await;

    let synced = b.wait_backup_phase("b1", BackupPhase::Completed).await;
    assert_eq!(synced.spec.storage_location.as_deref(), Some("primary"));
    assert_eq!(synced.labels()["velero.io/storage-location"], "primary");
    let original = w.api::<Backup>().get("b1").await.expect("b1");
    assert_eq!(
        synced.spec.included_namespaces,
        original.spec.included_namespaces
    );
    assert_ne!(synced.uid(), original.uid());

    let velero = b
        .wait_backup_phase("velero-made", BackupPhase::Completed)
        .await;
    assert_eq!(
        velero.metadata.owner_references, None,
        "its Schedule is not here"
    );
    assert_eq!(velero.labels()["velero.io/schedule-name"], "daily");
    assert_eq!(
        velero.spec.included_namespaces,
        Some(vec!["shop".to_string()])
    );
    b.wait_backup_phase("finalizing-old", BackupPhase::PartiallyFailed)
        .await;
    b.wait_gone::<Backup>("orphan", "orphan").await;
    let location = b
        .api::<BackupStorageLocation>()
        .get("primary")
        .await
        .expect("location");
    assert!(location.status.and_then(|s| s.last_synced_time).is_some());
    for name in ["finalizing-new", "half"] {
        assert!(
            b.api::<Backup>()
                .get_opt(name)
                .await
                .expect("get")
                .is_none(),
            "{name}"
        );
    }
    assert!(
        b.api::<Backup>()
            .get_opt("orphan-deleting")
            .await
            .expect("get")
            .is_some()
    );

    // Seed A deletes b1 for real: seed B's copy goes with the next sync, and nobody
    // brings it back.
    w.request("b1-del", "b1").await;
    assert!(w.wait_processed("b1-del").await.is_empty());
    b.wait_gone::<Backup>("backup", "b1").await;
    assert!(
        w.api::<Backup>()
            .get_opt("b1")
            .await
            .expect("get")
            .is_none()
    );
    seed_a.abort();
    seed_b.abort();
}

/// `granary server` crashing (a failpoint's abort) after each step of a deletion, then
/// started again: the deletion finishes, nothing is left in the bucket, the CR is gone,
/// the request Processed without errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_crashing_after_each_deletion_step_finishes_on_restart() {
    use granary_velero_server::backup_deletion::FAILPOINTS;
    let w = World::start().await;
    let server = |failpoint: Option<&str>| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_granary"));
        cmd.args([
            "server",
            "--namespace",
            &w.namespace,
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--leader-elect",
            "false",
            "--disable-controllers",
            "backup",
        ])
        .arg("--kubeconfig")
        .arg(&w.cluster.garden.kubeconfig_path)
        .arg("--data-dir")
        .arg(w.data.path())
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        match failpoint {
            Some(f) => cmd.env("GRANARY_FAILPOINTS", format!("{f}=1:abort")),
            None => cmd.env_remove("GRANARY_FAILPOINTS"),
        };
        cmd.spawn().expect("start granary server")
    };
    let mut first = server(None);
    w.location("default", false).await;
    let _ = first.kill().await;

    for (i, failpoint) in FAILPOINTS.iter().enumerate() {
        let name = format!("crash-{i}");
        for f in ["velero-backup.json", "x.tar.gz", "x-logs.gz"] {
            w.put(&format!("backups/{name}/{f}")).await;
        }
        w.backup_cr(&name, "default", json!({"phase": "Completed"}))
            .await;
        let mut crashing = server(Some(failpoint));
        w.request(&format!("{name}-req"), &name).await;
        let status = tokio::time::timeout(Duration::from_secs(60), crashing.wait())
            .await
            .unwrap_or_else(|_| panic!("{failpoint} never fired"))
            .expect("wait");
        assert!(!status.success(), "{failpoint}: the server crashed");
        let left = w
            .api::<DeleteBackupRequest>()
            .get(&format!("{name}-req"))
            .await
            .expect("request");
        assert_eq!(
            left.status.and_then(|s| s.phase),
            Some(DeleteBackupRequestPhase::InProgress),
            "{failpoint}"
        );
        let keys = w.keys(&format!("backups/{name}/")).await;
        assert!(
            !keys.iter().any(|k| k.ends_with("velero-backup.json")) || i == 0,
            "{failpoint}: the metadata goes first, {keys:?}"
        );

        let mut again = server(None);
        let errors = w.wait_processed(&format!("{name}-req")).await;
        assert!(errors.is_empty(), "{failpoint}: {errors:?}");
        assert!(
            w.keys(&format!("backups/{name}/")).await.is_empty(),
            "{failpoint}"
        );
        assert!(
            w.api::<Backup>()
                .get_opt(&name)
                .await
                .expect("get")
                .is_none(),
            "{failpoint}"
        );
        let _ = again.kill().await;
    }
}

/// `granary backup delete` (velero's way: a DeleteBackupRequest) deletes for real —
/// what `kubectl delete backup` never did (velero #7509).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granary_backup_delete_removes_the_data_too() {
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    w.take_backup("doomed", None).await;
    assert!(!w.keys("backups/doomed/").await.is_empty());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_granary"))
        .args([
            "backup",
            "delete",
            "doomed",
            "--confirm",
            "-n",
            &w.namespace,
        ])
        .arg("--kubeconfig")
        .arg(&w.cluster.garden.kubeconfig_path)
        .output()
        .expect("run granary backup delete");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    w.wait_gone::<Backup>("backup", "doomed").await;
    assert!(w.keys("backups/doomed/").await.is_empty());
    controllers.abort();
}

/// The same deletion on S3 (moto): the providers' batched deletes, metadata first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_request_on_s3_removes_everything() {
    let Some(w) = World::start_on(Backend::S3).await else {
        eprintln!("moto not available; skipped");
        return;
    };
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    w.take_backup("on-s3", None).await;
    assert!(w.keys("backups/on-s3/").await.len() >= 4);
    w.request("on-s3-del", "on-s3").await;
    assert!(w.wait_processed("on-s3-del").await.is_empty());
    assert!(w.keys("backups/on-s3/").await.is_empty());
    assert!(
        w.api::<Backup>()
            .get_opt("on-s3")
            .await
            .expect("get")
            .is_none()
    );
    controllers.abort();
}
