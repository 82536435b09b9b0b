//! The Velero-compatible controllers against an API server: locations validated
//! into Available/Unavailable with Velero's messages; Velero's queue scenario with
//! `concurrentBackups: 2`; positions kept across a restart; a backup left InProgress
//! marked Failed at start-up; `granary server` as a process.

use granary_api::velero::{Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationPhase};
use granary_providers::BucketOptions;
use granary_test_support::builders::backup_spec;
use granary_test_support::poll_until;
use granary_velero_server::queue_controller::{
    ANNOTATION_WAITING_FOR, in_progress_at_start_reason,
};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use granary_test_support::worlds::velero_server::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locations_are_available_or_say_why() {
    let w = World::start().await;
    let store = w.store().await;
    store
        .ensure_bucket("good", &BucketOptions::default())
        .await
        .expect("bucket");
    store
        .ensure_bucket("crowded", &BucketOptions::default())
        .await
        .expect("bucket");
    store
        .put(
            "crowded",
            "velero/seed-a/junk/x",
            bytes::Bytes::from_static(b"x"),
        )
        .await
        .expect("put");
    store
        .put(
            "good",
            "velero/seed-a/backups/b1/velero-backup.json",
            bytes::Bytes::from_static(b"{}"),
        )
        .await
        .expect("put");
    let controllers = w.controllers(w.settings(1));
    w.location("good", "local", "good").await;
    w.location("crowded", "local", "crowded").await;
    w.location("missing", "local", "no-such-bucket").await;
    w.location("no-credential", "velero.io/aws", "b").await;
    w.location("unknown", "minio", "b").await;

    w.wait_phase("good", BackupStorageLocationPhase::Available)
        .await;
    for (name, says) in [
        (
            "crowded",
            "Backup store contains invalid top-level directories: [junk]",
        ),
        ("missing", "no-such-bucket"),
        ("no-credential", "spec.credential: required"),
        ("unknown", "spec.provider: unknown provider \"minio\""),
    ] {
        let l = w
            .wait_phase(name, BackupStorageLocationPhase::Unavailable)
            .await;
        let message = l.status.and_then(|s| s.message).unwrap_or_default();
        assert!(
            message.starts_with(&format!("BackupStorageLocation {name:?} is unavailable: ")),
            "{message}"
        );
        assert!(message.contains(says), "{name}: {message}");
    }
    let metrics = w.metrics.render();
    assert!(
        metrics.contains("velero_backup_location_status_gauge{backup_location_name=\"good\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("velero_backup_location_status_gauge{backup_location_name=\"crowded\"} 0"),
        "{metrics}"
    );

    // The junk goes: the next validation (the location's own frequency) says Available.
    store
        .delete_many("crowded", &["velero/seed-a/junk/x".to_string()])
        .await
        .expect("delete");
    let patch = json!({"spec": {"validationFrequency": "1s"}});
    w.locations()
        .patch("crowded", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
    w.wait_phase("crowded", BackupStorageLocationPhase::Available)
        .await;
    controllers.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_survives_a_restart_and_interrupted_backups_fail() {
    use BackupPhase::{Completed, Failed, InProgress, Queued, ReadyToStart};
    let w = World::start().await;
    // No backup controller runs here: ReadyToStart backups hold their slot.
    let queue_only = |w: &World| w.controllers_but(w.settings(2), &["backup"]);
    let controllers = queue_only(&w);
    w.backup("backup1", &["ns1", "ns2"]).await;
    w.wait_queue(&[("backup1", ReadyToStart, None)]).await;
    for (name, ns) in [
        ("backup2", &["ns2", "ns3", "ns5"][..]),
        ("backup3", &["ns4", "ns3"][..]),
        ("backup4", &["ns5", "ns6"][..]),
        ("backup5", &["ns8", "ns9"][..]),
    ] {
        w.backup(name, ns).await;
        // One at a time, so creation order is queue order.
        poll_until(&format!("{name} taken by the queue"), || async {
            w.backups()
                .get(name)
                .await
                .ok()
                .and_then(|b| b.status)
                .and_then(|s| s.phase)
                .is_some()
        })
        .await;
    }
    // backup5 runs before backup3 and backup4, which wait behind the queued backup2.
    w.wait_queue(&[
        ("backup1", ReadyToStart, None),
        ("backup2", Queued, Some(1)),
        ("backup3", Queued, Some(2)),
        ("backup4", Queued, Some(3)),
        ("backup5", ReadyToStart, None),
    ])
    .await;
    poll_until("backup3 says what it waits for", || async {
        w.backups().get("backup3").await.ok().is_some_and(|b3| {
            b3.annotations()
                .get(ANNOTATION_WAITING_FOR)
                .map(String::as_str)
                == Some("it shares namespace ns3 with backup backup2")
        })
    })
    .await;

    // A restart keeps the positions.
    controllers.abort();
    let _ = controllers.await;
    let controllers = queue_only(&w);
    w.backup("backup6", &["ns1"]).await;
    w.wait_queue(&[
        ("backup2", Queued, Some(1)),
        ("backup3", Queued, Some(2)),
        ("backup4", Queued, Some(3)),
        ("backup6", Queued, Some(4)),
    ])
    .await;

    // backup1 finishes: backup2 runs, backup3 and backup4 move up and still wait for it;
    // backup6 (ns1) is free now but both slots are taken.
    w.set_phase("backup1", Completed).await;
    w.wait_queue(&[
        ("backup2", ReadyToStart, None),
        ("backup3", Queued, Some(1)),
        ("backup4", Queued, Some(2)),
        ("backup6", Queued, Some(3)),
    ])
    .await;

    // A backup left InProgress by a process that died is Failed at the next start.
    controllers.abort();
    let _ = controllers.await;
    w.set_phase("backup5", InProgress).await;
    let controllers = queue_only(&w);
    w.wait_queue(&[("backup5", Failed, None)]).await;
    let b5 = w.backups().get("backup5").await.expect("backup5");
    assert_eq!(
        b5.status.and_then(|s| s.failure_reason),
        Some(in_progress_at_start_reason())
    );
    // Its slot is free: backup6 (ns1, no overlap with backup2) starts.
    w.wait_queue(&[("backup6", ReadyToStart, None)]).await;
    controllers.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granary_server_runs_the_controllers_alone() {
    let w = World::start().await;
    let store = w.store().await;
    store
        .ensure_bucket("srv", &BucketOptions::default())
        .await
        .expect("bucket");
    let kubeconfig = &w.cluster.garden.kubeconfig_path;
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(["server", "--disable-controllers", "bakcup", "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .expect("run granary server");
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("--disable-controllers: unknown controller(s) bakcup"),
        "{stderr}"
    );

    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_granary"))
        .args([
            "server",
            "--namespace",
            &w.namespace,
            "--metrics-bind-address",
            "127.0.0.1:0",
        ])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--data-dir")
        .arg(w.data.path())
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start granary server");
    w.location("default", "local", "srv").await;
    w.wait_phase("default", BackupStorageLocationPhase::Available)
        .await;
    let app = w.cluster.namespace("app").await;
    w.backup("first", &[app.as_str()]).await;
    w.wait_queue(&[("first", BackupPhase::Completed, None)])
        .await;
    store
        .head("srv", "velero/seed-a/backups/first/velero-backup.json")
        .await
        .expect("the server stored the backup");
    let _ = server.kill().await;
}

/// The default location of a seed in a garden+seed landscape: Unavailable (and why)
/// until the seed holds a bucket, then in that bucket under `velero/<seed>`, Available.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_keeps_its_default_location_in_its_pool() {
    use granary_test_support::seed::{Backend, Landscape};
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let config = l.config("seed-a");
    let namespace = config.velero.namespace.clone();
    let agent = l.start_agent(None, config).await;
    let locations: Api<BackupStorageLocation> = Api::namespaced(l.seed.clone(), &namespace);
    poll_until("default location Unavailable with the reason", || async {
        locations
            .get_opt("default")
            .await
            .ok()
            .flatten()
            .is_some_and(|d| {
                d.status.is_some_and(|s| {
                    s.phase == Some(BackupStorageLocationPhase::Unavailable)
                        && s.message.unwrap_or_default().contains(
                            "seed seed-a has no ready shared bucket of its backup pool yet",
                        )
                })
            })
    })
    .await;

    let bucket = l.bucket_name("velero");
    l.create_bucket(&bucket, "seed-a").await;
    l.wait_bucket_ready(&bucket).await;
    poll_until(
        "default location Available in the seed's bucket",
        || async {
            locations
                .get_opt("default")
                .await
                .ok()
                .flatten()
                .is_some_and(|d| {
                    d.spec.object_storage.bucket == bucket
                        && d.status
                            .is_some_and(|s| s.phase == Some(BackupStorageLocationPhase::Available))
                })
        },
    )
    .await;
    let d = locations.get("default").await.expect("default location");
    assert_eq!(d.spec.provider, "local");
    assert_eq!(d.spec.default, Some(true));
    assert_eq!(
        d.spec.object_storage.prefix.as_deref(),
        Some("velero/seed-a")
    );
    agent.shutdown().await;
}

/// Backups through the controllers: queued, prepared as Velero prepares them, run,
/// stored in Velero's layout, and ended Completed; unusable locations are
/// FailedValidation with Velero's messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_run_through_the_controllers() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let w = World::start().await;
    let store = w.store().await;
    store
        .ensure_bucket("bk", &BucketOptions::default())
        .await
        .expect("bucket");
    let controllers = w.controllers(w.settings(2));
    w.location("default", "local", "bk").await;
    w.location("readonly", "local", "bk").await;
    let patch = json!({"spec": {"accessMode": "ReadOnly"}});
    w.locations()
        .patch("readonly", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("read-only");
    w.wait_phase("default", BackupStorageLocationPhase::Available)
        .await;
    w.wait_phase("readonly", BackupStorageLocationPhase::Available)
        .await;

    let app = w.cluster.namespace("app").await;
    let other = w.cluster.namespace("other").await;
    for (ns, n) in [(&app, 12), (&other, 3)] {
        let api: Api<ConfigMap> = Api::namespaced(w.client.clone(), ns);
        for i in 0..n {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(format!("cm-{i}"));
            cm.data = Some([("k".to_string(), format!("v{i}"))].into());
            api.create(&PostParams::default(), &cm)
                .await
                .expect("configmap");
        }
    }

    w.backup("b1", &[app.as_str()]).await;
    let api = w.backups();
    poll_until("b1 Completed", || async {
        api.get("b1")
            .await
            .ok()
            .and_then(|b| b.status)
            .and_then(|s| s.phase)
            == Some(BackupPhase::Completed)
    })
    .await;
    let b1 = api.get("b1").await.expect("b1");
    let status = b1.status.clone().expect("status");
    assert_eq!(status.format_version.as_deref(), Some("1.2.0"));
    let start = status.start_timestamp.expect("started");
    assert_eq!(
        status.expiration.expect("expiration") - start,
        chrono::TimeDelta::hours(720)
    );
    assert!(status.completion_timestamp.is_some());
    let progress = status.progress.expect("progress");
    assert!(progress.items_backed_up.unwrap_or(0) >= 12, "{progress:?}");
    assert_eq!(progress.items_backed_up, progress.total_items);
    assert_eq!(
        b1.labels()
            .get("velero.io/storage-location")
            .map(String::as_str),
        Some("default")
    );
    assert_eq!(b1.spec.storage_location.as_deref(), Some("default"));
    for file in [
        "velero-backup.json",
        "b1.tar.gz",
        "manifest.json.gz",
        "b1-logs.gz",
    ] {
        store
            .head("bk", &format!("velero/seed-a/backups/b1/{file}"))
            .await
            .unwrap_or_else(|e| panic!("{file} stored: {e}"));
    }
    // What was stored holds app's ConfigMaps and nothing of `other`.
    let manifest = granary_providers::get_bytes(
        store.as_ref(),
        "bk",
        "velero/seed-a/backups/b1/manifest.json.gz",
    )
    .await
    .expect("manifest");
    let manifest = granary_velero::manifest::Manifest::read_gz(&manifest[..], 1 << 30)
        .expect("manifest reads");
    let names: Vec<String> = manifest
        .keys()
        .filter(|k| k.resource == "configmaps")
        .map(|k| format!("{}/{}", k.namespace, k.name))
        .collect();
    assert!(names.contains(&format!("{app}/cm-11")), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with(&format!("{other}/"))),
        "{names:?}"
    );

    // Unusable locations: FailedValidation with Velero's messages.
    for (name, location, says) in [
        (
            "ro",
            "readonly",
            "backup can't be created because backup storage location readonly is currently in read-only mode",
        ),
        (
            "nowhere",
            "missing",
            "an existing backup storage location was not specified at backup creation time and the default missing was not found",
        ),
    ] {
        let mut b = Backup::new(
            name,
            backup_spec()
                .location(location)
                .namespaces([other.clone()])
                .build(),
        );
        b.metadata.namespace = Some(w.namespace.clone());
        api.create(&PostParams::default(), &b)
            .await
            .expect("create");
        poll_until(&format!("{name} FailedValidation"), || async {
            api.get(name)
                .await
                .ok()
                .and_then(|b| b.status)
                .is_some_and(|s| {
                    s.phase == Some(BackupPhase::FailedValidation)
                        && s.validation_errors
                            .unwrap_or_default()
                            .iter()
                            .any(|e| e.starts_with(says))
                })
        })
        .await;
    }
    // The counters follow the status writes.
    poll_until(
        "the backup metrics count one success and two validation failures",
        || async {
            let metrics = w.metrics.render();
            metrics.contains("velero_backup_success_total{schedule=\"\"} 1")
                && metrics.contains("velero_backup_validation_failure_total{schedule=\"\"} 2")
                && metrics.contains("velero_backup_last_status{schedule=\"\"} 1")
                && metrics.contains("velero_backup_duration_seconds_count{schedule=\"\"} 1")
                && metrics.contains("velero_backup_tarball_size_bytes{schedule=\"\"}")
        },
    )
    .await;
    controllers.abort();
}
