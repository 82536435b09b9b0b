//! Backups you can prove (docs/formats.md#integrity-record), attacked by whoever controls
//! the bucket but not the signing key: every Velero-compatible controller running
//! against the embedded API server, on the `local` provider and on moto.
//!
//! Five backups are tampered with in storage — one byte of a tarball, a replaced
//! `velero-backup.json`, a deleted results file, an extra item in a tarball — and one is
//! planted whole by someone without the key. Each is detected by sync (annotation and
//! Warning event), refused by restore (FailedValidation naming what differs; nothing
//! restored), reported by `granary backup verify` (non-zero exit) and by the scrubber.
//! Key rotation keeps older backups verifiable until their key is removed; Velero's own
//! unsigned backups restore only with an administrator's `--allow-unverified`.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use granary_api::velero::{
    ALLOW_UNVERIFIED_ANNOTATION, Backup, INTEGRITY_ANNOTATION, INTEGRITY_REASON_ANNOTATION,
    Restore, RestorePhase,
};
use granary_runtime::config::ConfigDuration;
use granary_test_support::poll_until;
use granary_test_support::seed::Backend;
use granary_test_support::worlds::velero::{World, from_backup, tarball, wait_restore};
use granary_velero::integrity::{IntegrityRecord, Keyring, RecordKind};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};

const PREFIX: &str = granary_test_support::worlds::velero::PREFIX;

/// The world with every controller running, sync every second, the scrubber every
/// second, and the `default` location Available.
async fn start(backend: Backend) -> Option<World> {
    let w = World::start_on(backend).await?;
    let mut settings = w.settings();
    settings.backup_sync_period = ConfigDuration(Duration::from_secs(1));
    settings.verify_frequency = ConfigDuration(Duration::from_secs(1));
    w.controllers(settings);
    w.location("default", false).await;
    Some(w)
}

fn key(name: &str, file: &str) -> String {
    format!("{PREFIX}/backups/{name}/{file}")
}

async fn get(w: &World, key: &str) -> Bytes {
    granary_providers::get_bytes(w.store.as_ref(), &w.bucket, key)
        .await
        .expect("get")
}

async fn put(w: &World, key: &str, data: Vec<u8>) {
    w.store
        .put(&w.bucket, key, Bytes::from(data))
        .await
        .expect("put");
}

/// The tarball's files (path → contents).
fn untar(gz: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut a = tar::Archive::new(flate2::read::MultiGzDecoder::new(gz));
    let mut out = Vec::new();
    for e in a.entries().expect("entries") {
        let mut e = e.expect("entry");
        let path = e.path().expect("path").to_string_lossy().into_owned();
        let mut data = Vec::new();
        e.read_to_end(&mut data).expect("read");
        out.push((path, data));
    }
    out
}

/// The ways the attacker changes a stored backup, each with what the verdict must name.
async fn tamper(w: &World, how: &str, name: &str) -> &'static str {
    match how {
        "byte" => {
            let k = key(name, &format!("{name}.tar.gz"));
            let mut t = get(w, &k).await.to_vec();
            let at = t.len() / 2;
            t[at] ^= 0x01;
            put(w, &k, t).await;
            "differs from what was written"
        }
        "json" => {
            let k = key(name, "velero-backup.json");
            let mut b: serde_json::Value = serde_json::from_slice(&get(w, &k).await).expect("json");
            b["spec"]["includedNamespaces"] = serde_json::json!(["*"]);
            b["spec"]["includeClusterResources"] = serde_json::json!(true);
            put(w, &k, serde_json::to_vec(&b).expect("json")).await;
            "velero-backup.json"
        }
        "results" => {
            w.store
                .delete_many(&w.bucket, &[key(name, &format!("{name}-results.gz"))])
                .await
                .expect("delete");
            "results.gz is missing"
        }
        "item" => {
            let k = key(name, &format!("{name}.tar.gz"));
            let mut files = untar(&get(w, &k).await);
            let evil = serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "evil", "namespace": w.app},
                "data": {"planted": "yes"},
            });
            files.push((
                format!("resources/configmaps/namespaces/{}/evil.json", w.app),
                serde_json::to_vec(&evil).expect("json"),
            ));
            let refs: Vec<(&str, Vec<u8>)> =
                files.iter().map(|(p, d)| (p.as_str(), d.clone())).collect();
            put(w, &k, tarball(&refs)).await;
            ".tar.gz"
        }
        other => panic!("no tampering {other}"),
    }
}

/// Plants a backup `name` by copying `from`'s objects, its `velero-backup.json` renamed,
/// and an integrity record signed with a key of the attacker's own.
async fn plant(w: &World, from: &str, name: &str) {
    let dir = format!("{PREFIX}/backups/{from}/");
    let mut objects = BTreeMap::new();
    for k in w.keys(&format!("backups/{from}/")).await {
        let file = k.strip_prefix(&dir).expect("under the dir").to_owned();
        if file.ends_with("-integrity.json") {
            continue;
        }
        let mut data = get(w, &k).await.to_vec();
        if file == "velero-backup.json" {
            let mut b: serde_json::Value = serde_json::from_slice(&data).expect("json");
            b["metadata"]["name"] = name.into();
            data = serde_json::to_vec(&b).expect("json");
        }
        let file = file.replace(from, name);
        objects.insert(
            file.clone(),
            granary_velero::integrity::ObjectDigest::of(&data),
        );
        put(w, &key(name, &file), data).await;
    }
    let theirs = Keyring::default()
        .with_new_key(vec![0x42; 32])
        .expect("key")
        .0;
    let record =
        IntegrityRecord::sign(RecordKind::Backup, name, None, objects, &theirs).expect("sign");
    put(
        w,
        &key(name, &format!("{name}-integrity.json")),
        record.to_bytes(),
    )
    .await;
}

async fn warning_on(w: &World, object: &str, reason: &str) -> Option<String> {
    Api::<Event>::namespaced(w.client.clone(), &w.namespace)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .find(|e| {
            e.reason.as_deref() == Some(reason) && e.involved_object.name.as_deref() == Some(object)
        })
        .and_then(|e| e.message)
}

/// Runs the granary binary against the world's cluster and Velero namespace.
fn granary(w: &World, args: &[&str]) -> std::process::Output {
    // Only the commands that read a location themselves take --data-dir.
    let reads_location = args.first() != Some(&"integrity");
    Command::new(granary_test_support::granary_bin())
        .args(args)
        .arg("--kubeconfig")
        .arg(&w.cluster.garden.kubeconfig_path)
        .args(["-n", &w.namespace])
        .args(reads_location.then_some("--data-dir"))
        .args(reads_location.then(|| w.data.path()))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("KUBECONFIG")
        .output()
        .expect("granary runs")
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

async fn tampered_backups_are_detected_refused_and_reported(backend: Backend) {
    let Some(w) = start(backend).await else {
        eprintln!("skipped: no emulator for {backend:?}");
        return;
    };
    let cases = ["byte", "json", "results", "item"];
    let good = w.take_backup("good", None).await;
    assert_eq!(good.annotations()[INTEGRITY_ANNOTATION], "verified");
    let mut expected: BTreeMap<String, &str> = BTreeMap::new();
    for how in cases {
        let name = format!("t-{how}");
        w.take_backup(&name, None).await;
        expected.insert(name.clone(), tamper(&w, how, &name).await);
    }
    plant(&w, "good", "planted").await;
    expected.insert("planted".into(), "signature does not match its contents");

    // The scrubber finds each tampered backup it knows.
    for (name, needle) in &expected {
        if name == "planted" {
            continue;
        }
        poll_until(&format!("the scrubber marks {name}"), || async {
            let b = w.api::<Backup>().get(name).await.expect("backup");
            b.annotations()
                .get(INTEGRITY_ANNOTATION)
                .map(String::as_str)
                == Some("mismatch")
        })
        .await;
        let b = w.api::<Backup>().get(name).await.expect("backup");
        let reason = &b.annotations()[INTEGRITY_REASON_ANNOTATION];
        assert!(reason.contains(needle), "{name}: {reason}");
        poll_until(&format!("a Warning event on {name}"), || async {
            warning_on(&w, name, "IntegrityCheckFailed").await.is_some()
        })
        .await;
    }
    // The good one stays verified through the scrubber's rounds.
    let b = w.api::<Backup>().get("good").await.expect("backup");
    assert_eq!(b.annotations()[INTEGRITY_ANNOTATION], "verified");

    // Sync: the records go, sync imports each again from the bucket, checked.
    for name in expected.keys().filter(|n| *n != "planted") {
        w.api::<Backup>()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete the record");
    }
    for (name, needle) in &expected {
        poll_until(&format!("sync imports {name}"), || async {
            w.api::<Backup>()
                .get_opt(name)
                .await
                .expect("get")
                .is_some()
        })
        .await;
        let b = w.api::<Backup>().get(name).await.expect("backup");
        assert_eq!(b.annotations()[INTEGRITY_ANNOTATION], "mismatch", "{name}");
        let reason = &b.annotations()[INTEGRITY_REASON_ANNOTATION];
        assert!(reason.contains(needle), "{name}: {reason}");
    }

    // Restore: refused before anything is written, the difference named.
    for (name, needle) in &expected {
        let restore = format!("r-{name}");
        let mut spec = from_backup(name);
        spec.namespace_mapping = Some([(w.app.clone(), format!("{}-{name}", w.app))].into());
        w.api::<Restore>()
            .create(&PostParams::default(), &Restore::new(&restore, spec))
            .await
            .expect("restore");
        let r = wait_restore(&w, &restore, &[RestorePhase::FailedValidation]).await;
        let errors = r
            .status
            .and_then(|s| s.validation_errors)
            .unwrap_or_default()
            .join("; ");
        assert!(
            errors.contains("failed its integrity check"),
            "{name}: {errors}"
        );
        assert!(errors.contains(needle), "{name}: {errors}");
        let restored: Api<ConfigMap> =
            Api::namespaced(w.client.clone(), &format!("{}-{name}", w.app));
        assert!(
            restored
                .list(&ListParams::default())
                .await
                .map(|l| l.items.is_empty())
                .unwrap_or(true),
            "{name}: nothing restored"
        );
    }
    // The good backup restores.
    let mut spec = from_backup("good");
    spec.namespace_mapping = Some([(w.app.clone(), format!("{}-good", w.app))].into());
    w.api::<Restore>()
        .create(&PostParams::default(), &Restore::new("r-good", spec))
        .await
        .expect("restore");
    wait_restore(&w, "r-good", &[RestorePhase::Completed]).await;

    // `granary backup verify`: one line each, non-zero exit.
    let out = granary(&w, &["backup", "verify", "--all"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("good: verified (key k1)"), "{said}");
    for (name, needle) in &expected {
        let line = said
            .lines()
            .find(|l| l.starts_with(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("{name} reported: {said}"));
        assert!(line.contains("mismatch") && line.contains(needle), "{line}");
    }
    let out = granary(&w, &["backup", "verify", "good", "--deep"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tampered_backups_on_the_local_provider() {
    tampered_backups_are_detected_refused_and_reported(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tampered_backups_on_s3() {
    tampered_backups_are_detected_refused_and_reported(Backend::S3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rotation_keeps_old_backups_verifiable_until_their_key_is_removed() {
    let w = start(Backend::Local).await.expect("local");
    w.take_backup("before", None).await;
    let out = granary(&w, &["integrity", "rotate"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Key k2 added"), "{}", text(&out));
    // The server follows the Secret: the next backup is signed with k2.
    poll_until("the server signs with k2", || async {
        let name = format!("after-{}", rand_suffix());
        w.take_backup(&name, None).await;
        let record = get(&w, &key(&name, &format!("{name}-integrity.json"))).await;
        let record = IntegrityRecord::from_bytes(&record).expect("record");
        record.key_id == "k2"
    })
    .await;
    let out = granary(&w, &["backup", "verify", "before"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("verified (key k1)"), "{}", text(&out));
    let out = granary(&w, &["integrity", "remove-key", "k2"]);
    assert!(
        !out.status.success(),
        "the newest key stays: {}",
        text(&out)
    );
    let out = granary(&w, &["integrity", "remove-key", "k1"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = granary(&w, &["backup", "verify", "before"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("before: unknown-key: signed with key \"k1\""),
        "{said}"
    );
    let keys = text(&granary(&w, &["integrity", "keys"]));
    assert_eq!(keys.trim(), "k2");
}

fn rand_suffix() -> String {
    format!("{:x}", rand::random::<u32>())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unsigned_backup_restores_only_when_an_administrator_allows_it() {
    let w = start(Backend::Local).await.expect("local");
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "from-velero", "namespace": "velero-made"},
    });
    let tar = tarball(&[
        ("metadata/version", b"1.1.0\n".to_vec()),
        (
            "resources/configmaps/namespaces/velero-made/from-velero.json",
            serde_json::to_vec(&cm).expect("json"),
        ),
    ]);
    granary_test_support::worlds::velero::foreign_backup(&w, "velero-own", tar).await;
    w.api::<Restore>()
        .create(
            &PostParams::default(),
            &Restore::new("plain", from_backup("velero-own")),
        )
        .await
        .expect("restore");
    let r = wait_restore(&w, "plain", &[RestorePhase::FailedValidation]).await;
    let errors = r
        .status
        .and_then(|s| s.validation_errors)
        .unwrap_or_default()
        .join("; ");
    assert!(
        errors.contains("unsigned") && errors.contains("--allow-unverified"),
        "{errors}"
    );
    let mut allowed = Restore::new("allowed", from_backup("velero-own"));
    allowed.metadata.annotations =
        Some([(ALLOW_UNVERIFIED_ANNOTATION.to_owned(), "true".to_owned())].into());
    w.api::<Restore>()
        .create(&PostParams::default(), &allowed)
        .await
        .expect("restore");
    wait_restore(&w, "allowed", &[RestorePhase::Completed]).await;
    // `backup verify` says unsigned; `--sign` adopts it after the deep check.
    let out = granary(&w, &["backup", "verify", "velero-own"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("velero-own: unsigned"),
        "{}",
        text(&out)
    );
    let out = granary(&w, &["backup", "verify", "velero-own", "--sign"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = granary(&w, &["backup", "verify", "velero-own", "--deep"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// The python of the emulators' venv (boto3 comes with moto), when it is there.
fn emulators_python() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("GRANARY_TOOLS_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache/granary-tools"))
        })?;
    let python = dir.join("venv/bin/python");
    python.exists().then_some(python)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_independent_velero_reader_accepts_granarys_signed_backups() {
    let (Some(w), Some(python)) = (start(Backend::S3).await, emulators_python()) else {
        eprintln!("skipped: moto or its venv is missing");
        return;
    };
    // Three ConfigMaps of 600 KB of noise: 3.6 MB of tar, so the tarball holds several
    // gzip members (docs/formats.md#gzip-members) for the reader to read as one stream.
    let cms: Api<ConfigMap> = Api::namespaced(w.client.clone(), &w.app);
    for i in 0..3u64 {
        let mut x = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i + 1);
        let noise: String = (0..600_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect();
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("large-{i}")},
            "data": {"noise": noise},
        }))
        .expect("configmap");
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    w.take_backup("signed", None).await;
    let gz = get(&w, &key("signed", "signed.tar.gz")).await;
    let mut members = 0;
    let mut at = 0;
    while at + 24 <= gz.len() && gz[at + 12..at + 14] == *b"GR" {
        members += 1;
        at += u64::from_le_bytes(gz[at + 16..at + 24].try_into().expect("8 bytes")) as usize;
    }
    assert!(
        members > 1 && at == gz.len(),
        "{members} members, {at} of {} bytes",
        gz.len()
    );
    assert!(
        w.keys("backups/signed/")
            .await
            .iter()
            .any(|k| k.ends_with("signed-integrity.json")),
        "the record is there for the reader to ignore"
    );
    let out = Command::new(python)
        .arg(granary_test_support::repo_root().join("tests/velero_reader.py"))
        .args([w.s3.as_deref().expect("moto"), &w.bucket, PREFIX])
        .output()
        .expect("python runs");
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("ok signed phase=Completed items="), "{said}");
    let items: usize = said
        .split("items=")
        .nth(1)
        .and_then(|n| n.trim().parse().ok())
        .expect("a count");
    assert!(items >= 3, "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rehearsals_record_their_outcome_on_the_backup() {
    use granary_api::velero::{REHEARSAL_ANNOTATION, Schedule};
    let w = start(Backend::Local).await.expect("local");
    // On demand: the deep check and the dry run, recorded on the Backup.
    w.take_backup("rehearse-me", None).await;
    let out = granary(
        &w,
        &[
            "restore",
            "create",
            "--from-backup",
            "rehearse-me",
            "--rehearse",
        ],
    );
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("rehearsed: ok: "), "{said}");
    let b = w.api::<Backup>().get("rehearse-me").await.expect("backup");
    let outcome = &b.annotations()[REHEARSAL_ANNOTATION];
    // The three ConfigMaps are there: a rehearsal against the live cluster skips them.
    assert!(
        outcome.starts_with("ok: ") && outcome.contains("to skip"),
        "{outcome}"
    );
    // A tampered one fails its rehearsal, and nothing is written.
    w.take_backup("broken", None).await;
    tamper(&w, "byte", "broken").await;
    let out = granary(
        &w,
        &["restore", "create", "--from-backup", "broken", "--rehearse"],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let b = w.api::<Backup>().get("broken").await.expect("backup");
    let outcome = &b.annotations()[REHEARSAL_ANNOTATION];
    assert!(
        outcome.starts_with("failed: ") && outcome.contains("differs"),
        "{outcome}"
    );
    assert!(
        w.api::<Restore>()
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );

    // A Schedule that asks: each of its backups is rehearsed by the controller.
    let s: Schedule = serde_json::from_value(serde_json::json!({
        "apiVersion": "velero.io/v1", "kind": "Schedule",
        "metadata": {"name": "nightly", "annotations": {
            granary_velero_server::backup_verification::REHEARSE_ANNOTATION: "true"}},
        "spec": {"schedule": "@every 1h", "template": {"includedNamespaces": [w.app]}},
    }))
    .expect("schedule");
    w.api::<Schedule>()
        .create(&PostParams::default(), &s)
        .await
        .expect("schedule");
    poll_until("the schedule's backup is rehearsed", || async {
        w.backups_of("nightly").await.iter().any(|b| {
            b.annotations()
                .get(REHEARSAL_ANNOTATION)
                .is_some_and(|o| o.starts_with("ok: "))
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_download_of_a_tampered_backup_gets_no_url_and_says_why() {
    use granary_api::velero::{DownloadRequest, DownloadTargetKind};
    let w = start(Backend::Local).await.expect("local");
    w.take_backup("fine", None).await;
    w.take_backup("bad", None).await;
    tamper(&w, "byte", "bad").await;
    for (name, backup) in [("get-fine", "fine"), ("get-bad", "bad")] {
        let r: DownloadRequest = serde_json::from_value(serde_json::json!({
            "apiVersion": "velero.io/v1", "kind": "DownloadRequest",
            "metadata": {"name": name},
            "spec": {"target": {"kind": DownloadTargetKind::BackupContents, "name": backup}},
        }))
        .expect("request");
        w.api::<DownloadRequest>()
            .create(&PostParams::default(), &r)
            .await
            .expect("create");
    }
    poll_until("the verified backup's URL", || async {
        w.api::<DownloadRequest>()
            .get("get-fine")
            .await
            .ok()
            .and_then(|r| r.status)
            .and_then(|s| s.download_url)
            .is_some()
    })
    .await;
    poll_until("the refusal said", || async {
        warning_on(&w, "get-bad", "DownloadFailed")
            .await
            .is_some_and(|m| m.contains("integrity check") && m.contains("bad.tar.gz differs"))
    })
    .await;
    let r = w
        .api::<DownloadRequest>()
        .get("get-bad")
        .await
        .expect("request");
    assert!(r.status.and_then(|s| s.download_url).is_none());
}
