//! `granary backup-location create|get|set|delete`, and the commands that read a
//! backup's files from its location (`backup describe --details`, `backup logs`) against
//! the `local` provider, with files the test writes through the format library.

use bytes::Bytes;
use granary_api::velero::BackupStorageLocation;
use granary_providers::{BucketOptions, LocalStore, ObjectStore};
use granary_velero::files::{Results, encode_logs};
use granary_velero::layout::StorageLayout;
use granary_velero::manifest::{Manifest, item_from_object};
use granary_velero::resource::GroupResource;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use granary_test_support::cli::{VeleroCli, stderr};

#[tokio::test]
async fn locations_are_created_listed_changed_and_deleted() {
    let cli = VeleroCli::start().await;
    let api: Api<BackupStorageLocation> = Api::namespaced(cli.tc.client(), &cli.namespace);

    cli.ok(&[
        "backup-location",
        "create",
        "first",
        "--provider",
        "aws",
        "--bucket",
        "b1",
        "--prefix",
        "velero/seed-a",
        "--config",
        "region=eu-1,s3ForcePathStyle=true",
        "--credential",
        "cloud-credentials=cloud",
        "--default",
        "--validation-frequency",
        "2m",
    ])
    .await;
    let first = serde_json::to_value(api.get("first").await.unwrap()).unwrap();
    assert_eq!(
        first["spec"],
        json!({
            "provider": "aws", "objectStorage": {"bucket": "b1", "prefix": "velero/seed-a"},
            "config": {"region": "eu-1", "s3ForcePathStyle": "true"},
            "credential": {"name": "cloud-credentials", "key": "cloud"},
            "default": true, "accessMode": "ReadWrite", "validationFrequency": "2m0s"
        })
    );
    // A second default takes over: only one location is the default.
    cli.ok(&[
        "backup-location",
        "create",
        "second",
        "--provider",
        "local",
        "--bucket",
        "b2",
        "--default",
        "--access-mode",
        "ReadOnly",
    ])
    .await;
    assert_eq!(api.get("first").await.unwrap().spec.default, Some(false));
    assert_eq!(api.get("second").await.unwrap().spec.default, Some(true));

    // Velero's kinds have no status subresource: status is patched on the object.
    api.patch(
        "second",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Available",
                                        "lastValidationTime": "2026-02-03T04:05:06Z"}})),
    )
    .await
    .expect("status written");
    let table = cli.ok(&["backup-location", "get"]).await;
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "NAME",
            "PROVIDER",
            "BUCKET/PREFIX",
            "PHASE",
            "LAST",
            "VALIDATED",
            "ACCESS",
            "MODE",
            "DEFAULT"
        ]
    );
    assert_eq!(
        lines[1],
        ["first", "aws", "b1/velero/seed-a", "Unknown", "ReadWrite"]
    );
    assert_eq!(
        lines[2],
        [
            "second",
            "local",
            "b2",
            "Available",
            "2026-02-03",
            "04:05:06",
            "+0000",
            "UTC",
            "ReadOnly",
            "true"
        ]
    );
    let yaml = cli
        .ok(&["backup-location", "get", "first", "-o", "yaml"])
        .await;
    assert!(
        yaml.contains("kind: BackupStorageLocation") && yaml.contains("bucket: b1"),
        "{yaml}"
    );

    // set: only what is given changes; --default moves the default back.
    cli.ok(&[
        "backup-location",
        "set",
        "first",
        "--default",
        "--access-mode",
        "ReadOnly",
    ])
    .await;
    let f = api.get("first").await.unwrap().spec;
    assert_eq!(f.default, Some(true));
    assert_eq!(serde_json::to_value(f.access_mode).unwrap(), "ReadOnly");
    assert_eq!(f.object_storage.bucket, "b1");
    assert_eq!(api.get("second").await.unwrap().spec.default, Some(false));

    // Bad flags: named, nothing changed.
    cli.fails(
        &["backup-location", "create", "x", "--bucket", "b"],
        "--provider",
    )
    .await;
    cli.fails(
        &[
            "backup-location",
            "create",
            "x",
            "--provider",
            "aws",
            "--bucket",
            "a/b",
        ],
        "--bucket",
    )
    .await;
    cli.fails(
        &[
            "backup-location",
            "create",
            "x",
            "--provider",
            "aws",
            "--bucket",
            "b",
            "--credential",
            "a=b,c=d",
        ],
        "--credential",
    )
    .await;
    cli.fails(
        &[
            "backup-location",
            "create",
            "x",
            "--provider",
            "aws",
            "--bucket",
            "b",
            "--access-mode",
            "rw",
        ],
        "--access-mode",
    )
    .await;
    cli.fails(
        &[
            "backup-location",
            "set",
            "first",
            "--validation-frequency",
            "often",
        ],
        "--validation-frequency",
    )
    .await;
    cli.fails(&["backup-location", "set", "first"], "nothing to set")
        .await;
    cli.fails(
        &["backup-location", "set", "nowhere", "--default"],
        "not found",
    )
    .await;
    cli.fails(
        &[
            "backup-location",
            "create",
            "first",
            "--provider",
            "aws",
            "--bucket",
            "b",
        ],
        "already exists",
    )
    .await;
    assert!(api.get_opt("x").await.unwrap().is_none());

    // delete: the location and the Backup objects that point at it (as velero does).
    // (ReadOnly takes no backups: back to ReadWrite first.)
    cli.ok(&[
        "backup-location",
        "set",
        "first",
        "--access-mode",
        "ReadWrite",
    ])
    .await;
    cli.ok(&[
        "backup",
        "create",
        "on-first",
        "--storage-location",
        "first",
        "--labels",
        "velero.io/storage-location=first",
    ])
    .await;
    cli.ok(&["backup", "create", "elsewhere"]).await;
    cli.fails(
        &["backup-location", "delete", "first", "nowhere", "--confirm"],
        "nowhere",
    )
    .await;
    assert!(api.get_opt("first").await.unwrap().is_some());
    cli.ok(&["backup-location", "delete", "first", "--confirm"])
        .await;
    assert!(api.get_opt("first").await.unwrap().is_none());
    let left: Vec<String> = cli
        .backups()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|b| b.metadata.name)
        .collect();
    assert_eq!(left, ["elsewhere"]);
}

#[tokio::test]
async fn details_and_logs_are_read_from_the_location() {
    let cli = VeleroCli::start().await;
    let data = tempfile::tempdir().expect("data dir");
    let data_dir = data.path().to_str().expect("utf-8").to_string();
    let store = LocalStore::new(data.path()).expect("local store");
    store
        .ensure_bucket("bkt", &BucketOptions::default())
        .await
        .expect("bucket");
    let layout = StorageLayout::new("bkt", Some("velero/seed-a")).expect("layout");
    let keys = layout.backup("nightly").expect("keys");

    let mut manifest = Manifest::new();
    for (gr, obj) in [
        (
            GroupResource::new("", "configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "settings", "namespace": "team-a", "uid": "u1"}}),
        ),
        (
            GroupResource::new("apps", "deployments"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "team-a", "uid": "u2"}}),
        ),
        (
            GroupResource::new("", "namespaces"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "u3"}}),
        ),
    ] {
        manifest
            .add(item_from_object(&gr, &obj).expect("item"))
            .expect("added");
    }
    let mut results = Results::default();
    results
        .warnings
        .add("team-a", "configmap settings is large");
    for (key, body) in [
        (keys.manifest(), manifest.to_gz_bytes()),
        (
            keys.logs(),
            encode_logs([
                "level=info msg=\"backup started\"",
                "level=info msg=\"backup done\"",
            ]),
        ),
        (keys.results(), results.to_gz_bytes()),
    ] {
        store
            .put("bkt", &key, Bytes::from(body))
            .await
            .expect("put");
    }

    cli.ok(&[
        "backup-location",
        "create",
        "local-loc",
        "--provider",
        "local",
        "--bucket",
        "bkt",
        "--prefix",
        "velero/seed-a",
    ])
    .await;
    cli.ok(&[
        "backup",
        "create",
        "nightly",
        "--storage-location",
        "local-loc",
    ])
    .await;

    // Not finished: no logs yet, and describe --details says so without failing.
    cli.set_status("nightly", json!({"phase": "InProgress"}))
        .await;
    cli.fails(
        &["backup", "logs", "nightly", "--data-dir", &data_dir],
        "not available",
    )
    .await;
    let running = cli
        .ok(&[
            "backup",
            "describe",
            "nightly",
            "--details",
            "--data-dir",
            &data_dir,
        ])
        .await;
    assert!(running.contains("Resource List:  <could not read the backup's manifest: none yet: the backup is InProgress>"), "{running}");

    cli.set_status("nightly", json!({"phase": "Completed", "warnings": 1}))
        .await;
    let details = cli
        .ok(&[
            "backup",
            "describe",
            "nightly",
            "--details",
            "--data-dir",
            &data_dir,
        ])
        .await;
    assert!(
        details.contains(
            "Resource List:\n  apps/v1/Deployment:\n    - team-a/web\n  v1/ConfigMap:\n    - team-a/settings\n  v1/Namespace:\n    - team-a\n"
        ),
        "{details}"
    );
    assert!(details.contains("Warning messages:"), "{details}");
    assert!(
        details.contains("team-a:  configmap settings is large"),
        "{details}"
    );

    let logs = cli
        .ok(&["backup", "logs", "nightly", "--data-dir", &data_dir])
        .await;
    assert_eq!(
        logs,
        "level=info msg=\"backup started\"\nlevel=info msg=\"backup done\"\n"
    );

    // --data-dir is taken only by the commands that read a location; elsewhere it is
    // an unknown argument, not silently ignored.
    cli.fails(&["backup", "get", "--data-dir", &data_dir], "--data-dir")
        .await;
    cli.fails(&["schedule", "get", "--data-dir", &data_dir], "--data-dir")
        .await;
    // A restore dry run reads the backup itself: on the local provider it needs the
    // directory, and says so (not "would fail validation").
    let err = cli
        .fails(
            &["restore", "create", "--from-backup", "nightly", "--dry-run"],
            "--data-dir",
        )
        .await;
    assert!(
        err.contains("local provider") && !err.contains("validation"),
        "{err}"
    );

    // Without --data-dir the CLI asks a server through a DownloadRequest (none runs
    // here): it gives up at --timeout and says how to read the location directly.
    cli.fails(
        &["backup", "logs", "nightly", "--timeout", "1s"],
        "--data-dir",
    )
    .await;
    let empty = tempfile::tempdir().expect("empty dir");
    let empty = empty.path().to_str().expect("utf-8");
    let out = cli
        .run(&[
            "backup",
            "describe",
            "nightly",
            "--details",
            "--data-dir",
            empty,
        ])
        .await;
    assert!(!out.status.success());
    let text = granary_test_support::cli::stdout(&out);
    assert!(
        text.contains("Resource List:  <could not read the backup's manifest:"),
        "{text}"
    );
    assert!(
        stderr(&out).contains("could not read the files of backup nightly"),
        "{}",
        stderr(&out)
    );
    cli.fails(
        &["backup", "logs", "nightly", "--data-dir", empty],
        "location local-loc",
    )
    .await;

    // An aws location without its credentials Secret says which Secret is missing.
    cli.ok(&[
        "backup-location",
        "create",
        "s3",
        "--provider",
        "aws",
        "--bucket",
        "bkt",
        "--credential",
        "s3-creds=cloud",
        "--config",
        "s3Url=http://127.0.0.1:9",
    ])
    .await;
    cli.ok(&["backup", "create", "on-s3", "--storage-location", "s3"])
        .await;
    cli.set_status("on-s3", json!({"phase": "Completed"})).await;
    cli.fails(
        &["backup", "logs", "on-s3", "--data-dir", &data_dir],
        "s3-creds",
    )
    .await;
}

/// An empty list reads the same for every kind: nothing on stdout, kubectl's "No …
/// found in namespace …" on stderr, exit 0; `-o json` an empty List.
#[tokio::test]
async fn empty_lists_read_alike_for_every_kind() {
    let cli = VeleroCli::start().await;
    let ns = cli.namespace.clone();
    for (command, plural) in [
        ("backup", "backups"),
        ("restore", "restores"),
        ("schedule", "schedules"),
        ("backup-location", "backup storage locations"),
    ] {
        let out = cli.run(&[command, "get"]).await;
        assert!(out.status.success(), "{command}: {out:?}");
        assert_eq!(granary_test_support::cli::stdout(&out), "", "{command}");
        assert_eq!(
            stderr(&out).trim(),
            format!("No {plural} found in namespace {ns}."),
            "{command}"
        );
        let json = cli.ok(&[command, "get", "-o", "json"]).await;
        let list: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(list["kind"], "List", "{command}");
        assert_eq!(list["items"], serde_json::json!([]), "{command}");
    }
}
