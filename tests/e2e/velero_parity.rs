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
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
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

fn server_status_requests(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("velero.io", "v1", "ServerStatusRequest");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "serverstatusrequests");
    Api::namespaced_with(client.clone(), namespace, &ar)
}

/// Item 4: a ServerStatusRequest made with any client (Velero's CLI sends `spec: {}`,
/// others send no spec) is Processed with the server's version and its plugins, as
/// `velero version` and `velero plugin get` read them; a processed request is deleted
/// once its time-to-live (Velero's minute, shortened here) has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_status_request_is_answered_then_deleted() {
    use granary_runtime::clock::Clock;
    use granary_runtime::selector::ObjectSelector;
    use granary_test_support::worlds::velero::World;
    use granary_velero_server::context::VeleroContext;
    use granary_velero_server::metrics::VeleroMetrics;
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    let api = server_status_requests(&w.client, &w.namespace);
    let mut names = Vec::new();
    for request in [
        json!({"apiVersion": "velero.io/v1", "kind": "ServerStatusRequest",
               "metadata": {"generateName": "velero-cli-"}, "spec": {}}),
        json!({"apiVersion": "velero.io/v1", "kind": "ServerStatusRequest",
               "metadata": {"generateName": "no-spec-"}}),
    ] {
        let request: DynamicObject = serde_json::from_value(request).expect("request");
        let made = api
            .create(&PostParams::default(), &request)
            .await
            .expect("create a ServerStatusRequest");
        names.push(made.name_any());
    }
    for name in &names {
        poll_until(&format!("{name} Processed"), || async {
            api.get(name)
                .await
                .ok()
                .is_some_and(|r| r.data["status"]["phase"] == "Processed")
        })
        .await;
        let status = api.get(name).await.expect("request").data["status"].clone();
        assert_eq!(
            status["serverVersion"],
            env!("CARGO_PKG_VERSION"),
            "{status:#}"
        );
        assert!(status["processedTimestamp"].is_string(), "{status:#}");
        let plugins = status["plugins"].as_array().cloned().unwrap_or_default();
        for (name, kind) in [
            ("velero.io/pod", "BackupItemAction"),
            ("velero.io/pod", "RestoreItemAction"),
            ("velero.io/service-account", "RestoreItemAction"),
            ("velero.io/aws", "ObjectStore"),
        ] {
            assert!(
                plugins.contains(&json!({"name": name, "kind": kind})),
                "{name} ({kind}) missing from {plugins:#?}"
            );
        }
    }
    // Velero keeps a processed request for a minute; here the controller runs with a
    // two-second time-to-live, and both requests go.
    controllers.abort();
    let ctx = std::sync::Arc::new(VeleroContext::new(
        w.client.clone(),
        w.settings(),
        Default::default(),
        Clock::system(),
        VeleroMetrics::new(&w.metrics),
        ObjectSelector::new(None),
    ));
    let short = tokio::spawn(granary_velero_server::server_status::run_with_ttl(
        ctx,
        std::time::Duration::from_secs(2),
    ));
    for name in &names {
        poll_until(
            &format!("{name} deleted after its time-to-live"),
            || async { api.get_opt(name).await.expect("get").is_none() },
        )
        .await;
    }
    short.abort();
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

/// Item 5: `granary server --help` names and describes every controller the server
/// starts (the list comes from the code that starts them).
#[test]
fn granary_server_help_names_every_controller_it_runs() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(["server", "--help"])
        .output()
        .expect("granary server --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let started = granary_velero_server::server::SERVER_CONTROLLERS;
    assert!(started.len() >= 12, "{} controllers", started.len());
    for name in started.iter().map(|c| c.name) {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{name}:"))),
            "`granary server --help` does not describe {name}:\n{help}"
        );
    }
}

/// Item 8: `granary server` beside `granary seed` on the seed's Velero namespace stands
/// by, naming the seed that holds the namespace's Lease, and takes over once the seed
/// lets go: one active set of Velero controllers per namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granary_server_beside_a_seed_stands_by() {
    use granary_test_support::seed::{Backend, Landscape};
    use k8s_openapi::api::coordination::v1::Lease;
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let config = l.config("seed-a");
    let namespace = config.velero.namespace.clone();
    let agent = l.start_agent(None, config).await;
    let leases: Api<Lease> = Api::namespaced(l.seed.clone(), &namespace);
    let holder = || async {
        leases
            .get_opt("granary-velero")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .unwrap_or_default()
    };
    poll_until("the seed holds the Velero namespace's Lease", || async {
        holder().await.starts_with("granary-seed/seed-a")
    })
    .await;
    let seed_side = l.cluster.seed.as_ref().unwrap_or(&l.cluster.garden);
    let log = tempfile::NamedTempFile::new().expect("log file");
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_granary"))
        .args([
            "server",
            "--namespace",
            &namespace,
            "--metrics-bind-address",
            "127.0.0.1:0",
        ])
        .arg("--kubeconfig")
        .arg(&seed_side.kubeconfig_path)
        .arg("--data-dir")
        .arg(l.data_dir.path())
        .env("RUST_LOG", "info")
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().expect("log"))
        .spawn()
        .expect("start granary server");
    poll_until("the server says who serves the namespace", || async {
        let text = std::fs::read_to_string(log.path()).unwrap_or_default();
        text.contains("granary-seed/seed-a") && text.contains("granary-velero")
    })
    .await;
    assert!(
        holder().await.starts_with("granary-seed/seed-a"),
        "the seed keeps the namespace while the server stands by"
    );
    // The seed stops (and releases the Lease): the server takes over.
    agent.shutdown().await;
    poll_until("the server takes the namespace over", || async {
        holder().await.starts_with("granary-server/")
    })
    .await;
    let _ = server.kill().await;
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
