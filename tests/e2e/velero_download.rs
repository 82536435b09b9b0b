//! Download requests (#16) against the embedded API server: the `download-request`
//! controller's URLs (one-time URLs of its own endpoint for the local provider, SigV4
//! URLs on moto), `granary backup logs|download` through DownloadRequests as velero's
//! CLI does, refusals that say why, and expired requests removed.

use granary_api::velero::{
    DownloadRequest, DownloadRequestPhase, DownloadRequestSpec, DownloadTarget, DownloadTargetKind,
};
use granary_test_support::poll_until;
use granary_test_support::seed::Backend;
use granary_test_support::worlds::velero::World;
use granary_velero::files::gunzip_limited;
use granary_velero::layout::StorageLayout;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use std::process::Output;

const PREFIX: &str = "velero/seed-a";

/// Runs `granary ARGS --kubeconfig … -n …` off the async workers (the controllers of
/// this test run on them meanwhile).
async fn granary(w: &World, args: &[&str], cwd: &std::path::Path) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_granary"));
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(&w.cluster.garden.kubeconfig_path)
        .args(["-n", &w.namespace])
        .current_dir(cwd)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("KUBECONFIG");
    tokio::task::spawn_blocking(move || cmd.output().expect("granary runs"))
        .await
        .expect("the granary task")
}

fn ok(out: &Output) -> Vec<u8> {
    assert!(
        out.status.success(),
        "granary failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout.clone()
}

fn failed(out: &Output, want: &str) -> String {
    assert!(!out.status.success(), "granary succeeded");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains(want), "{want:?} not in {err}");
    err
}

async fn object(w: &World, key: &str) -> Vec<u8> {
    granary_providers::get_bytes(w.store.as_ref(), &w.bucket, key)
        .await
        .expect("object")
        .to_vec()
}

async fn request(w: &World, name: &str, kind: DownloadTargetKind, target: &str) {
    let r = DownloadRequest::new(
        name,
        DownloadRequestSpec {
            target: DownloadTarget {
                kind,
                name: target.into(),
            },
        },
    );
    w.api::<DownloadRequest>()
        .create(&PostParams::default(), &r)
        .await
        .expect("create request");
}

async fn processed_url(w: &World, name: &str) -> DownloadRequest {
    let api = w.api::<DownloadRequest>();
    poll_until(&format!("download request {name} Processed"), || async {
        api.get(name)
            .await
            .ok()
            .and_then(|r| r.status)
            .is_some_and(|s| s.phase == Some(DownloadRequestPhase::Processed))
    })
    .await;
    api.get(name).await.expect("request")
}

/// No DownloadRequest for `target` is left (the CLI deletes its own).
async fn no_requests_left(w: &World, target: &str) {
    let left: Vec<_> = w
        .api::<DownloadRequest>()
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter(|r| r.spec.target.name == target)
        .collect();
    assert!(left.is_empty(), "the CLI deletes its requests: {left:?}");
}

/// `granary backup logs` and `download` on a location of `w`'s backend.
async fn logs_and_download_work(w: &World) {
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    w.take_backup("nightly", None).await;
    let keys = StorageLayout::new(&w.bucket, Some(PREFIX))
        .expect("layout")
        .backup("nightly")
        .expect("keys");
    let dir = tempfile::tempdir().expect("cwd");

    let logs = ok(&granary(w, &["backup", "logs", "nightly"], dir.path()).await);
    let stored = gunzip_limited(&object(w, &keys.logs()).await[..], 1 << 30).expect("gzip");
    assert!(!logs.is_empty());
    assert_eq!(logs, stored, "the log, gunzipped");
    no_requests_left(w, "nightly").await;

    let said = ok(&granary(w, &["backup", "download", "nightly"], dir.path()).await);
    let file = dir.path().join("nightly-data.tar.gz");
    assert_eq!(
        String::from_utf8_lossy(&said).trim(),
        format!("Backup nightly has been successfully downloaded to nightly-data.tar.gz")
    );
    let tarball = object(w, &keys.contents()).await;
    assert_eq!(std::fs::read(&file).expect("downloaded"), tarball);
    no_requests_left(w, "nightly").await;

    // An existing file is kept unless --force; -o names another.
    std::fs::write(&file, b"mine").expect("write");
    failed(
        &granary(w, &["backup", "download", "nightly"], dir.path()).await,
        "--force",
    );
    assert_eq!(std::fs::read(&file).expect("kept"), b"mine");
    ok(&granary(w, &["backup", "download", "nightly", "--force"], dir.path()).await);
    assert_eq!(std::fs::read(&file).expect("overwritten"), tarball);
    ok(&granary(
        w,
        &["backup", "download", "nightly", "-o", "other.tgz"],
        dir.path(),
    )
    .await);
    assert_eq!(
        std::fs::read(dir.path().join("other.tgz")).expect("other"),
        tarball
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names.len(), 2, "no partial files left: {names:?}");

    // A bad --cacert is named before any request is made.
    failed(
        &granary(
            w,
            &["backup", "logs", "nightly", "--cacert", "no-such.pem"],
            dir.path(),
        )
        .await,
        "--cacert: reading no-such.pem",
    );
    std::fs::write(dir.path().join("empty.pem"), b"not a certificate").expect("write");
    failed(
        &granary(
            w,
            &["backup", "logs", "nightly", "--cacert", "empty.pem"],
            dir.path(),
        )
        .await,
        "--cacert empty.pem",
    );
    std::fs::remove_file(dir.path().join("empty.pem")).expect("remove");
    no_requests_left(w, "nightly").await;
    // --insecure-skip-tls-verify is accepted (the URLs here are plain http).
    assert_eq!(
        ok(&granary(
            w,
            &["backup", "logs", "nightly", "--insecure-skip-tls-verify"],
            dir.path()
        )
        .await),
        logs
    );

    // A backup that does not exist is named before any request is made.
    failed(
        &granary(w, &["backup", "logs", "nope"], dir.path()).await,
        "backup \"nope\" not found",
    );
    no_requests_left(w, "nope").await;
    controllers.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_download_on_the_local_provider() {
    logs_and_download_work(&World::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_download_on_s3() {
    let Some(w) = World::start_on(Backend::S3).await else {
        eprintln!("moto not available; skipped");
        return;
    };
    logs_and_download_work(&w).await;
    // The URL in the status is a SigV4 one, 10 minutes long.
    let controllers = w.controllers(w.settings());
    request(
        &w,
        "signed",
        DownloadTargetKind::BackupResourceList,
        "nightly",
    )
    .await;
    let r = processed_url(&w, "signed").await;
    let url = r.status.and_then(|s| s.download_url).expect("url");
    assert!(
        url.contains("X-Amz-Signature=") && url.contains("X-Amz-Expires="),
        "{url}"
    );
    controllers.abort();
}

/// A local URL is the controller's own endpoint with a one-time token: it serves the
/// object once, then 403; the request expires 10 minutes out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_download_url_works_once() {
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    w.take_backup("b1", None).await;
    let before = chrono::Utc::now();
    request(&w, "once", DownloadTargetKind::BackupResults, "b1").await;
    let r = processed_url(&w, "once").await;
    let status = r.status.expect("status");
    let url = status.download_url.expect("url");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let expiration = status.expiration.expect("expiration");
    let ttl = expiration - before;
    assert!(
        ttl > chrono::Duration::minutes(9) && ttl <= chrono::Duration::minutes(11),
        "{ttl}"
    );
    let first = reqwest::get(&url).await.expect("get");
    assert_eq!(first.status(), 200);
    let key = StorageLayout::new(&w.bucket, Some(PREFIX))
        .expect("layout")
        .backup("b1")
        .expect("keys")
        .results();
    assert_eq!(
        first.bytes().await.expect("body").to_vec(),
        object(&w, &key).await
    );
    let again = reqwest::get(&url).await.expect("get");
    assert_eq!(again.status(), 403, "one time");
    // A guessed token is no better.
    request(&w, "twice", DownloadTargetKind::BackupResults, "b1").await;
    let url = processed_url(&w, "twice")
        .await
        .status
        .and_then(|s| s.download_url)
        .expect("url");
    let guessed = format!("{}{}", &url[..url.len() - 4], "0000");
    assert_ne!(guessed, url);
    assert_eq!(reqwest::get(&guessed).await.expect("get").status(), 403);
    // A request for a file the backup does not have: the URL is made (as Velero's
    // signed URLs are), the fetch says the object is missing.
    request(&w, "absent", DownloadTargetKind::RestoreLog, "b1").await;
    w.api::<granary_api::velero::Restore>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "velero.io/v1", "kind": "Restore",
                "metadata": {"name": "b1"},
                "spec": {"backupName": "b1"},
                "status": {"phase": "Completed"},
            }))
            .expect("restore"),
        )
        .await
        .expect("create restore");
    let url = processed_url(&w, "absent")
        .await
        .status
        .and_then(|s| s.download_url)
        .expect("url");
    assert_eq!(reqwest::get(&url).await.expect("get").status(), 404);
    controllers.abort();
}

/// Expired requests are deleted, whatever their phase; requests for what does not
/// exist say why in an event and are left to expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_requests_go_and_refusals_say_why() {
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    for (name, phase) in [("old-processed", "Processed"), ("old-new", "New")] {
        // Created with their status in one go (Velero's kinds have no status
        // subresource).
        let r: DownloadRequest = serde_json::from_value(json!({
            "apiVersion": "velero.io/v1",
            "kind": "DownloadRequest",
            "metadata": {"name": name},
            "spec": {"target": {"kind": "BackupLog", "name": "whatever"}},
            "status": {"phase": phase, "downloadURL": "http://127.0.0.1:9/x",
                       "expiration": "2020-01-01T00:00:00Z"},
        }))
        .expect("request");
        w.api::<DownloadRequest>()
            .create(&PostParams::default(), &r)
            .await
            .expect("create");
    }
    w.wait_gone::<DownloadRequest>("request", "old-processed")
        .await;
    w.wait_gone::<DownloadRequest>("request", "old-new").await;

    request(&w, "missing", DownloadTargetKind::BackupLog, "nope").await;
    request(
        &w,
        "missing-restore",
        DownloadTargetKind::RestoreLog,
        "r-nope",
    )
    .await;
    let events: kube::Api<Event> = w.api();
    for (name, want) in [
        ("missing", "backup \"nope\" not found"),
        ("missing-restore", "restore \"r-nope\" not found"),
    ] {
        poll_until(&format!("a DownloadFailed event on {name}"), || async {
            events
                .list(&ListParams::default())
                .await
                .expect("events")
                .items
                .iter()
                .any(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                        && e.reason.as_deref() == Some("DownloadFailed")
                        && e.note.as_deref().is_some_and(|m| m.contains(want))
                })
        })
        .await;
        let r = w.api::<DownloadRequest>().get(name).await.expect("kept");
        let status = r.status.expect("status");
        assert_eq!(status.phase, None, "not processed");
        assert!(status.download_url.is_none());
        assert!(status.expiration.is_some(), "it expires like any other");
    }
    // The CLI stops waiting at the server's word rather than at its timeout.
    w.backup_cr("ghost", "nowhere", json!({"phase": "Completed"}))
        .await;
    let dir = tempfile::tempdir().expect("cwd");
    failed(
        &granary(&w, &["backup", "logs", "ghost"], dir.path()).await,
        "\"nowhere\"",
    );
    no_requests_left(&w, "ghost").await;
    controllers.abort();
}

/// With the controller disabled nobody answers: the CLI times out and says who should.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_controller_the_cli_times_out_and_says_why() {
    let w = World::start().await;
    let controllers = w.controllers_but(w.settings(), &["download-request"]);
    w.location("default", false).await;
    w.take_backup("b1", None).await;
    let dir = tempfile::tempdir().expect("cwd");
    failed(
        &granary(&w, &["backup", "logs", "b1", "--timeout", "1s"], dir.path()).await,
        "download-request controller",
    );
    no_requests_left(&w, "b1").await;
    controllers.abort();
}
