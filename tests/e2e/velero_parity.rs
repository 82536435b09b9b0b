//! What a Velero user expects of the server (issue 38): backups annotated and defaulted
//! as Velero's backup controller does, Velero's metrics present before anything
//! happens, ServerStatusRequests answered (`velero version`, `velero plugin get`), a
//! location with an unusable prefix Unavailable, `granary server --help` naming every
//! controller it runs, and one active set of Velero controllers per namespace when a
//! seed and a `granary server` share it.

use granary_api::velero::{
    Backup, BackupStorageLocation, BackupStorageLocationPhase, BackupStorageLocationSpec,
    ObjectStorageLocation,
};
use granary_test_support::poll_until;
use kube::ResourceExt;
use kube::api::PostParams;
use serde_json::json;

/// Items 1 and 2: the source cluster's version and the resource timeout as annotations,
/// and every default Velero's `prepareBackupRequest` writes back, in the Backup itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_carries_velero_s_annotations_and_defaulted_spec() {
    use granary_test_support::worlds::velero::World;
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    let b: Backup = w.take_backup("annotated", None).await;
    let version = w.client.apiserver_version().await.expect("/version");
    let a = b.annotations();
    let annotation = |k: &str| a.get(k).cloned().unwrap_or_default();
    assert_eq!(
        annotation("velero.io/source-cluster-k8s-gitversion"),
        version.git_version
    );
    assert_eq!(
        annotation("velero.io/source-cluster-k8s-major-version"),
        version.major
    );
    assert_eq!(
        annotation("velero.io/source-cluster-k8s-minor-version"),
        version.minor
    );
    assert_eq!(annotation("velero.io/resource-timeout"), "10m0s");
    let spec = serde_json::to_value(&b.spec).expect("spec");
    for (field, want) in [
        ("ttl", json!("720h0m0s")),
        ("csiSnapshotTimeout", json!("10m0s")),
        ("itemOperationTimeout", json!("4h0m0s")),
        (
            "volumeGroupSnapshotLabelKey",
            json!("velero.io/volume-group"),
        ),
        ("defaultVolumesToFsBackup", json!(false)),
        ("snapshotMoveData", json!(false)),
        ("storageLocation", json!("default")),
    ] {
        assert_eq!(spec[field], want, "spec.{field} in {spec:#}");
    }
    controllers.abort();
}

/// Item 3: `velero_backup_total` counts the Backups that exist; the restore counters
/// exist at 0 for every schedule (and for backups of none) before the first restore.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn velero_s_counters_exist_before_anything_happens() {
    use granary_test_support::worlds::velero::World;
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    w.schedule(
        "nightly",
        json!({"schedule": "0 3 * * *", "skipImmediately": true,
               "template": {"includedNamespaces": [w.app]}}),
    )
    .await;
    let expected: Vec<String> = ["", "nightly"]
        .iter()
        .flat_map(|s| {
            [
                "velero_restore_attempt_total",
                "velero_restore_success_total",
                "velero_restore_partial_failure_total",
                "velero_restore_failed_total",
                "velero_restore_validation_failed_total",
                "velero_backup_attempt_total",
                "velero_backup_failure_total",
                "velero_backup_last_status",
            ]
            .map(|m| format!("{m}{{schedule=\"{s}\"}} 0"))
        })
        .collect();
    poll_until("the per-schedule series at 0", || async {
        let text = w.metrics.render();
        expected.iter().all(|series| text.contains(series.as_str()))
    })
    .await;
    w.take_backup("counted", None).await;
    poll_until("velero_backup_total counts the backup", || async {
        w.metrics.render().contains("velero_backup_total 1")
    })
    .await;
    let text = w.metrics.render();
    assert!(
        text.contains("# TYPE velero_backup_total gauge"),
        "velero_backup_total is Velero's gauge:\n{text}"
    );
    controllers.abort();
}

/// Item 6: a prefix that climbs out of the bucket (or is otherwise no object-store
/// prefix) makes the location Unavailable and names the field, before any backup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_location_with_an_unusable_prefix_is_unavailable() {
    use granary_test_support::worlds::velero_server::World;
    let w = World::start().await;
    let store = w.store().await;
    store
        .ensure_bucket("pfx", &Default::default())
        .await
        .expect("bucket");
    let controllers = w.controllers(w.settings(1));
    let cases = [
        ("climbs", "../../x"),
        ("inner-dots", "velero/../other"),
        ("dot", "./velero"),
        ("empty-segment", "velero//seed"),
        ("backslash", "velero\\seed"),
    ];
    for (name, prefix) in cases {
        let bsl = BackupStorageLocation::new(
            name,
            BackupStorageLocationSpec {
                provider: "local".into(),
                object_storage: ObjectStorageLocation {
                    bucket: "pfx".into(),
                    prefix: Some(prefix.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        w.locations()
            .create(&PostParams::default(), &bsl)
            .await
            .expect("create location");
    }
    for (name, prefix) in cases {
        let l = w
            .wait_phase(name, BackupStorageLocationPhase::Unavailable)
            .await;
        let message = l.status.and_then(|s| s.message).unwrap_or_default();
        assert!(
            message.contains("spec.objectStorage.prefix"),
            "{name} ({prefix}): {message}"
        );
    }
    controllers.abort();
}

/// Item 7: two restores queued one behind the other (one slot) both complete, the
/// second starting only once the first is Completed (its final status written at its
/// end, not after a progress throttle; the throttle's end is unit-tested in
/// `context::progress_tests`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_restores_complete_one_after_the_other() {
    use granary_api::velero::RestorePhase;
    use granary_test_support::worlds::velero::{World, from_backup, restore, wait_restore};
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    w.take_backup("source", None).await;
    for (name, target) in [("first", "copy-1"), ("second", "copy-2")] {
        let mut spec = from_backup("source");
        spec.namespace_mapping = Some([(w.app.clone(), w.cluster.name(target))].into());
        restore(&w, name, spec).await;
    }
    let first = wait_restore(&w, "first", &[RestorePhase::Completed]).await;
    let second = wait_restore(&w, "second", &[RestorePhase::Completed]).await;
    let (first, second) = (
        first.status.expect("first's status"),
        second.status.expect("second's status"),
    );
    let (Some(done), Some(started)) = (first.completion_timestamp, second.start_timestamp) else {
        panic!("timestamps missing: {first:?} {second:?}");
    };
    assert!(
        started >= done,
        "the second restore started ({started}) before the first completed ({done})"
    );
    controllers.abort();
}
