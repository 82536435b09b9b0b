//! `granary backup create NAME --dry-run` against the embedded API server filled with
//! the backup-runner world: the items it prints are, in the same order, the items a
//! real backup of the same spec writes (the real one run through
//! `velero_server::backup::run` with one worker); nothing is created in the cluster or
//! the store; a queued backup sharing a namespace is reported; a spec the runner's
//! validation refuses exits non-zero with its message.

use std::io::Read;
use std::process::{Command, Output};

use futures::StreamExt;
use granary_api::velero::{Backup, BackupPhase};
use granary_providers::get_bytes;
use granary_velero::manifest::ManifestItem;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use granary_test_support::seed::{Backend, install_seed_crds};
use granary_test_support::worlds::backup_runner::World;

struct Cli {
    kubeconfig: std::path::PathBuf,
    namespace: String,
}

impl Cli {
    async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_granary"));
        cmd.args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-n", &self.namespace])
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("KUBECONFIG");
        tokio::task::spawn_blocking(move || cmd.output().expect("the granary binary runs"))
            .await
            .expect("the granary task")
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "granary {args:?} failed:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }
}

/// A Backup in `ns` with `status` written (Backups have no status subresource).
async fn backup_in(api: &Api<Backup>, name: &str, include: &[&str], status: Value) {
    let b: Backup = serde_json::from_value(json!({
        "apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": name},
        "spec": {"includedNamespaces": include},
    }))
    .expect("a Backup");
    api.create(&PostParams::default(), &b)
        .await
        .expect("created");
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .expect("status written");
}

/// The unversioned item paths of a tarball, in the order they were written.
fn written_order(tarball: &[u8]) -> Vec<String> {
    let mut archive = tar::Archive::new(flate2::read::MultiGzDecoder::new(tarball));
    let mut out = Vec::new();
    for entry in archive.entries().expect("a tarball") {
        let mut entry = entry.expect("an entry");
        let path = entry.path().expect("a path").display().to_string();
        let mut sink = Vec::new();
        entry.read_to_end(&mut sink).expect("entry body");
        let parts: Vec<&str> = path.split('/').collect();
        // resources/<gr>/{namespaces/<ns>,cluster}/<name>.json, without a version dir.
        let unversioned = parts.first() == Some(&"resources")
            && matches!(parts.get(2), Some(&"namespaces") | Some(&"cluster"));
        if unversioned {
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn dry_run_shows_exactly_what_the_backup_writes_and_creates_nothing() {
    let Some(world) = World::start(Backend::Local).await else {
        return;
    };
    let client = world.client.clone();
    install_seed_crds(&world.cluster, &client).await;
    let namespace = world.cluster.namespace("velero").await;
    let cli = Cli {
        kubeconfig: world.cluster.garden.kubeconfig_path.clone(),
        namespace: namespace.clone(),
    };
    let backups: Api<Backup> = Api::namespaced(client.clone(), &namespace);
    // Queued on br-01 (overlaps), running on br-05 (does not), finished on br-00 (over).
    backup_in(
        &backups,
        "waiting",
        &["br-01"],
        json!({"phase": "Queued", "queuePosition": 1}),
    )
    .await;
    backup_in(
        &backups,
        "elsewhere",
        &["br-05"],
        json!({"phase": "InProgress"}),
    )
    .await;
    backup_in(
        &backups,
        "finished",
        &["br-00"],
        json!({"phase": "Completed"}),
    )
    .await;
    let before = backups
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .len();

    let flags = [
        "--include-namespaces",
        "br-00,br-01",
        "--exclude-resources",
        "serviceaccounts",
    ];
    let mut args = vec!["backup", "create", "dry"];
    args.extend(flags);
    let report: Value = serde_json::from_str(
        &cli.ok(&[args.as_slice(), &["--dry-run", "-o", "json"]].concat())
            .await,
    )
    .expect("the dry run prints JSON");
    let text = cli.ok(&[args.as_slice(), &["--dry-run"]].concat()).await;

    // Nothing was created: no Backup, nothing in the bucket.
    assert!(backups.get_opt("dry").await.expect("get").is_none());
    assert_eq!(
        backups
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        before
    );
    let stored: Vec<_> = world
        .store
        .list(world.layout.bucket(), "", None)
        .collect()
        .await;
    assert!(
        stored.is_empty(),
        "the dry run wrote to the store: {stored:?}"
    );

    // Overlaps: the queued backup on br-01, nothing else.
    assert_eq!(
        report["overlaps"],
        json!([{"backup": "waiting", "phase": "Queued", "queuePosition": 1, "namespace": "br-01",
                "reason": "backup waiting (queued at position 1): both include namespace br-01"}])
    );
    assert!(
        text.contains("backup waiting (queued at position 1): both include namespace br-01"),
        "{text}"
    );

    // The real backup of the same spec (the Backup `-o json` prints), one worker.
    let spec_json: Value =
        serde_json::from_str(&cli.ok(&[args.as_slice(), &["-o", "json"]].concat()).await)
            .expect("the Backup as JSON");
    assert!(backups.get_opt("dry").await.expect("get").is_none());
    let spec = serde_json::from_value(spec_json["spec"].clone()).expect("a BackupSpec");
    let outcome = world
        .run_on(&*world.store, &World::backup("dry", spec), 1)
        .await
        .expect("backup runs");
    assert_eq!(
        outcome.phase.as_phase(),
        BackupPhase::Completed,
        "{outcome:?}"
    );
    let real = world.read("dry").await;

    let items: Vec<ManifestItem> =
        serde_json::from_value(report["items"].clone()).expect("manifest items");
    let mut sorted = items.clone();
    sorted.sort_by_key(ManifestItem::key);
    let manifest: Vec<ManifestItem> = real.manifest.iter().map(|i| i.to_owned_item()).collect();
    assert_eq!(
        sorted, manifest,
        "dry-run items vs the real backup's manifest"
    );
    assert_eq!(report["totalItems"], json!(manifest.len()));
    let order: Vec<String> = items.iter().map(|i| i.key().to_string()).collect();
    assert_eq!(order, written_order(&real.tarball), "write order");

    // Counts and owners as people read them.
    assert_eq!(report["counts"]["configmaps"], json!(78));
    assert_eq!(report["counts"]["secrets"], json!(80));
    assert!(report["counts"].get("serviceaccounts").is_none());
    let owned = text
        .lines()
        .find(|l| l.starts_with("replicasets.apps") && l.contains("br-00"))
        .unwrap_or_else(|| panic!("no ReplicaSet line in {text}"));
    assert!(owned.ends_with("deployments.apps/web"), "{owned}");
    assert!(text.contains("configmaps"), "{text}");

    // The log and tarball of the real backup were written; the dry run left none.
    let keys = world.layout.backup("dry").expect("keys");
    assert!(
        get_bytes(&*world.store, world.layout.bucket(), &keys.metadata())
            .await
            .is_ok()
    );

    // The runner's validation refuses the spec: non-zero, with its message, nothing made.
    let out = cli
        .run(&[
            "backup",
            "create",
            "bad",
            "--include-namespaces",
            "br-00,Bad_NS",
            "--include-resources",
            "*,configmaps",
            "--dry-run",
        ])
        .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad spec passed: {err}");
    assert!(
        err.contains("includes list must either contain '*' only")
            && err.contains("invalid namespace \"Bad_NS\""),
        "{err}"
    );
    assert!(backups.get_opt("bad").await.expect("get").is_none());
}
