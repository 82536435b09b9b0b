//! `granary dev` as a user runs it: the debug binary as a child process with a temp data
//! directory and a short grace period. The sample landscape's buckets and entries reach
//! Succeeded, kubectl lists them through the written kubeconfig, a new shoot gets its
//! entry and its directory under `<data-dir>/buckets/`, deleting it waits out the grace
//! period and then removes the directory, SIGINT stops everything promptly with exit
//! code 0, and a restart keeps the state. A backup of a shoot's control-plane namespace
//! taken with `granary backup create --wait` against a seed completes and the view shows
//! it, after the restart too. A second scenario points the same command at an S3 emulator (moto).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use granary_api::core::{BackupEntry, CloudProfileReference, Shoot, ShootSpec};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};

use granary_test_support::seed::{Backend, endpoint};
use granary_test_support::{http_get, poll_until};

use granary_test_support::dev::{Dev, GRACE, all_succeeded, log_path, succeeded};
use granary_test_support::kubectl::{self, Kubectl};

fn shoot(name: &str) -> Shoot {
    let mut s = Shoot::new(
        name,
        ShootSpec {
            cloud_profile: Some(CloudProfileReference {
                kind: "CloudProfile".into(),
                name: "local-dev".into(),
                ..Default::default()
            }),
            region: "europe".into(),
            seed_name: Some("europe-2".into()),
            ..Default::default()
        },
    );
    s.spec.provider.type_ = "local".into();
    s.metadata.namespace = Some("garden-dev".into());
    s
}

/// The entry of shoot `name` in `garden-dev`, once it exists.
async fn entry_of(garden: &Client, name: &str) -> Option<BackupEntry> {
    let api: Api<BackupEntry> = Api::namespaced(garden.clone(), "garden-dev");
    api.list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find(|e| e.name_any().starts_with(&format!("shoot--dev--{name}--")))
}

/// Runs `granary` with `args`; its stdout and stderr, or a panic with them unless it
/// succeeds.
async fn granary(args: Vec<String>) -> String {
    let what = args.join(" ");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_granary"))
            .args(&args)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .stdin(Stdio::null())
            .output()
            .expect("granary runs")
    })
    .await
    .expect("granary task");
    let both = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "granary {what}:\n{both}");
    both
}

/// The README's backup of a seed namespace: every seed's default location on the local
/// provider (Available where the seed holds a bucket), a backup of the web shoot's
/// control plane on europe-1 through `granary backup create --wait`, its items listed
/// by `describe --details` from the bucket directory, and the view showing it.
async fn backup_of_a_control_plane(dev: &Dev, data: &Path) {
    for seed in ["europe-1", "america-1"] {
        poll_until(
            &format!("the view shows {seed}'s default location Available"),
            || async {
                dev.output()
                    .contains(&format!("location {seed}/default: Available"))
            },
        )
        .await;
    }
    let kubeconfig = data.join("seed-europe-1.kubeconfig").display().to_string();
    let args = |a: &[&str]| {
        a.iter()
            .map(|s| s.to_string())
            .chain(["--kubeconfig".to_string(), kubeconfig.clone()])
            .collect::<Vec<_>>()
    };
    let created = granary(args(&[
        "backup",
        "create",
        "web-cp",
        "--include-namespaces",
        "shoot--dev--web",
        "--wait",
    ]))
    .await;
    assert!(
        created.contains("Backup completed with status: Completed"),
        "{created}"
    );
    let buckets = data.join("buckets").display().to_string();
    // Through DownloadRequests europe-1's server answers, as velero's describe does.
    let described = granary(args(&["backup", "describe", "web-cp", "--details"])).await;
    for item in [
        "shoot--dev--web/etcd-backup",
        "shoot--dev--web/etcd-main",
        "Items backed up:              3",
    ] {
        assert!(described.contains(item), "{item} in:\n{described}");
    }
    poll_until("the view shows the backup completed", || async {
        dev.output()
            .contains("backup europe-1/web-cp: Completed 3/3")
    })
    .await;
    // europe-2, of the same pool, reads it through its sibling location; america-1, of
    // another region's pool, does not.
    poll_until(
        "the view shows europe-2 reading europe-1's backups",
        || async {
            let out = dev.output();
            out.contains("location europe-2/seed-europe-1: Available (reads europe-1's backups)")
                && out.contains("backup europe-2/europe-1.web-cp: Completed 3/3 (from europe-1)")
        },
    )
    .await;
    assert!(!dev.output().contains("location america-1/seed-europe-1"));

    // Signed with the landscape's key: verified with europe-1's copy of it, and with
    // america-1's (any seed verifies any seed's backups), without a cluster.
    let verified = granary(args(&[
        "backup",
        "verify",
        "web-cp",
        "--deep",
        "--data-dir",
        &buckets,
    ]))
    .await;
    assert!(verified.contains("web-cp: verified (key k1)"), "{verified}");
    let client = |name: &str| {
        let path = data.join(format!("{name}.kubeconfig"));
        async move {
            let kc = Kubeconfig::read_from(&path).expect("kubeconfig");
            Client::try_from(
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .expect("config"),
            )
            .expect("client")
        }
    };
    let secret = |c: Client, ns: &'static str| async move {
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(c, ns)
            .get("granary-integrity-keys")
            .await
            .expect("the keys")
    };
    let landscape = secret(client("garden").await, "garden").await;
    let america = secret(client("seed-america-1").await, "velero").await;
    assert_eq!(
        landscape.data, america.data,
        "america-1 keeps the landscape's keys"
    );
    let location = Api::<granary_api::velero::BackupStorageLocation>::namespaced(
        client("seed-europe-1").await,
        "velero",
    )
    .get("default")
    .await
    .expect("europe-1's default location");
    let keyring = data.join("america-keys.json");
    std::fs::write(&keyring, serde_json::to_vec(&america).expect("json")).expect("write");
    let storage = &location.spec.object_storage;
    let offline = granary(
        [
            "backup",
            "verify",
            "web-cp",
            "--provider",
            "local",
            "--bucket",
            &storage.bucket,
            "--prefix",
            storage.prefix.as_deref().unwrap_or_default(),
            "--data-dir",
            &buckets,
            "--keyring",
            &keyring.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    )
    .await;
    assert!(offline.contains("web-cp: verified (key k1)"), "{offline}");
}

#[tokio::test]
async fn granary_dev_runs_the_landscape_and_keeps_it_across_restarts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("state");
    let buckets_dir = data.join("buckets");
    let mut dev = Dev::start(&data, &[], &[]);
    let (garden, health) = dev.ready().await;

    // A second `granary dev` on the same data directory refuses at once, naming the
    // first one (#20); the first keeps running.
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_granary"))
        .arg("dev")
        .arg("--data-dir")
        .arg(&data)
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .output()
        .expect("a second granary dev runs");
    assert!(
        !second.status.success(),
        "the second instance must not start"
    );
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(
        said.contains("is in use by another granary dev")
            && said.contains(&format!("pid {}", dev.pid())),
        "{said}"
    );

    // The sample: 7 shoots, Europe's 5 over two shards of 3.
    let placed = all_succeeded(&garden, 7).await;
    assert_eq!(placed.len(), 3, "three buckets: {placed:?}");
    assert!(
        placed.values().all(|e| e.len() <= 3),
        "quota 3 holds: {placed:?}"
    );
    for (bucket, entries) in &placed {
        for entry in entries {
            assert!(
                buckets_dir.join(bucket).join(entry).is_dir(),
                "{bucket}/{entry} exists"
            );
        }
    }
    poll_until("the view reports the entries", || async {
        dev.output().contains("entry dev/web: Succeeded")
    })
    .await;
    backup_of_a_control_plane(&dev, &data).await;
    assert!(
        http_get(health, "/readyz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let metrics = http_get(health, "/metrics").await;
    for component in ["garden", "seed-europe-1", "seed-europe-2", "seed-america-1"] {
        assert!(
            metrics.contains(&format!("component=\"{component}\"")),
            "{component} in /metrics"
        );
    }

    if kubectl::runs() {
        let out = Kubectl::new(&data.join("garden.kubeconfig"))
            .run(&["get", "backupbuckets,backupentries", "-A"])
            .await;
        let listed = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (bucket, entries) in &placed {
            assert!(listed.contains(bucket.as_str()), "{bucket} in:\n{listed}");
            for entry in entries {
                assert!(listed.contains(entry.as_str()), "{entry} in:\n{listed}");
            }
        }
    } else {
        eprintln!(
            "SKIPPED kubectl listing: kubectl is not installed (apt-get install kubernetes-client)"
        );
    }

    // A new shoot gets an entry and a directory.
    let shoots: Api<Shoot> = Api::namespaced(garden.clone(), "garden-dev");
    shoots
        .create(&PostParams::default(), &shoot("probe"))
        .await
        .expect("shoot is created");
    poll_until("the probe's entry Succeeded with its directory", || async {
        entry_of(&garden, "probe").await.is_some_and(|e| {
            succeeded(e.status.as_ref().and_then(|s| s.last_operation.as_ref()))
                && buckets_dir
                    .join(&e.spec.bucket_name)
                    .join(e.name_any())
                    .is_dir()
        })
    })
    .await;
    let entry = entry_of(&garden, "probe").await.expect("probe entry");
    let probe_dir = buckets_dir
        .join(&entry.spec.bucket_name)
        .join(entry.name_any());

    // Deleting it waits out the grace period, then the directory goes.
    let deleted_at = Instant::now();
    shoots
        .delete("probe", &DeleteParams::default())
        .await
        .expect("shoot is deleted");
    poll_until("the view shows the scheduled deletion", || async {
        dev.output().lines().any(|l| {
            l.contains("entry dev/probe: Deleting/Pending") && l.contains("deletion scheduled for")
        })
    })
    .await;
    poll_until("the probe's entry and directory gone", || async {
        entry_of(&garden, "probe").await.is_none() && !probe_dir.exists()
    })
    .await;
    // deletionTimestamp has whole seconds, so the grace period may end up to 1s early.
    assert!(
        deleted_at.elapsed() >= GRACE - Duration::from_secs(1),
        "the data stayed for the grace period (gone after {:?})",
        deleted_at.elapsed()
    );
    poll_until("the view reports the probe gone", || async {
        dev.output().contains("entry dev/probe: gone")
    })
    .await;

    // A warning about a bucket is news once: the view shows it now, and a restart does
    // not replay it (stamped with the restart's time, as if it had just happened).
    let bucket = placed.keys().next().expect("a bucket").clone();
    let warning: k8s_openapi::api::events::v1::Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "earlier-warning", "namespace": "default"},
        "eventTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "reportingController": "test", "reportingInstance": "test",
        "action": "Test", "reason": "EarlierWarning", "type": "Warning",
        "note": "from the first run",
        "regarding": {"kind": "BackupBucket", "name": bucket,
            "uid": Api::<granary_api::core::BackupBucket>::all(garden.clone())
                .get(&bucket).await.expect("bucket").uid()},
    }))
    .expect("an event");
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(garden.clone(), "default")
        .create(&PostParams::default(), &warning)
        .await
        .expect("event created");
    poll_until("the view shows the warning", || async {
        dev.output().contains("EarlierWarning")
    })
    .await;

    // Ctrl-C stops everything promptly and cleanly.
    let stopping = Instant::now();
    assert!(dev.interrupt(), "exit code 0 after SIGINT");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "stopped in {:?}",
        stopping.elapsed()
    );
    assert!(dev.output().contains("granary dev: stopped"));
    drop(dev);

    // A restart keeps the landscape: the same entries, Succeeded, no probe, no new
    // landscape objects.
    let mut dev = Dev::start(&data, &[], &[]);
    let (garden, _) = dev.ready().await;
    let again = all_succeeded(&garden, 7).await;
    assert_eq!(again, placed, "the same entries in the same buckets");
    assert!(entry_of(&garden, "probe").await.is_none());
    poll_until("the view shows the backup of the first run", || async {
        dev.output()
            .contains("backup europe-1/web-cp: Completed 3/3")
    })
    .await;
    assert!(
        !dev.output().contains("EarlierWarning"),
        "the first run's warning is not replayed:\n{}",
        dev.output()
    );

    // `granary migrate` works against the landscape: an entry of Europe's full shard
    // moves to the shard with room (the garden gives the place, the stand-in etcd-main
    // is scaled down and up); the old directory goes after the grace period.
    let shard = |b: &str| b.rsplit_once('-').map(|(pool, _)| pool.to_string());
    let (full, room) = again
        .iter()
        .filter(|(_, e)| e.len() == 3)
        .find_map(|(full, _)| {
            again
                .iter()
                .find(|(b, e)| *b != full && e.len() < 3 && shard(b) == shard(full))
                .map(|(room, _)| (full.clone(), room.clone()))
        })
        .expect("a full shard and one with room in the same pool");
    let moved = Api::<BackupEntry>::all(garden.clone())
        .list(&ListParams::default())
        .await
        .expect("entries")
        .items
        .into_iter()
        .find(|e| e.spec.bucket_name == full)
        .expect("an entry in the full shard");
    let seed = moved.spec.seed_name.clone().expect("the entry's seed");
    let migrate = Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(["migrate", "--json"])
        .arg("--garden-kubeconfig")
        .arg(data.join("garden.kubeconfig"))
        .arg("--seed-kubeconfig")
        .arg(data.join(format!("seed-{seed}.kubeconfig")))
        .arg("--data-dir")
        .arg(&buckets_dir)
        .args([
            "entry",
            &format!(
                "{}/{}",
                moved.namespace().unwrap_or_default(),
                moved.name_any()
            ),
            "--to-bucket",
            &room,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("granary migrate runs");
    assert!(
        migrate.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&migrate.stdout),
        String::from_utf8_lossy(&migrate.stderr)
    );
    let entries: Api<BackupEntry> =
        Api::namespaced(garden.clone(), &moved.namespace().unwrap_or_default());
    assert_eq!(
        entries
            .get(&moved.name_any())
            .await
            .expect("entry")
            .spec
            .bucket_name,
        room
    );
    poll_until(
        "the moved entry Succeeded in its new shard, the old directory gone",
        || async {
            let e = entries.get(&moved.name_any()).await.expect("entry");
            succeeded(e.status.as_ref().and_then(|s| s.last_operation.as_ref()))
                && buckets_dir.join(&room).join(moved.name_any()).is_dir()
                && !buckets_dir.join(&full).join(moved.name_any()).exists()
        },
    )
    .await;
    assert!(dev.interrupt(), "exit code 0 after SIGINT");
}

#[tokio::test]
async fn granary_dev_keeps_buckets_at_an_s3_endpoint() {
    let Some(s3) = endpoint(Backend::S3) else {
        eprintln!(
            "SKIPPED: no S3 emulator (moto); set GRANARY_TEST_S3_ENDPOINT or run scripts/test.sh"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("state");
    let mut dev = Dev::start(
        &data,
        &[
            "--provider",
            "aws",
            "--endpoint",
            &s3,
            "--region",
            "us-east-1",
            "--seeds",
            "1",
            "--shoots",
            "2",
        ],
        &[
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
        ],
    );
    let (garden, _) = dev.ready().await;
    let placed = all_succeeded(&garden, 2).await;
    assert!(
        dev.output().contains(&format!("aws at {s3}")),
        "{}",
        dev.output()
    );
    let store = granary_providers::open(
        "aws",
        Some("us-east-1"),
        &[
            ("accessKeyID".to_string(), b"test".to_vec()),
            ("secretAccessKey".to_string(), b"test".to_vec()),
            ("endpoint".to_string(), s3.as_bytes().to_vec()),
            ("s3ForcePathStyle".to_string(), b"true".to_vec()),
        ]
        .into_iter()
        .collect(),
        &granary_providers::StoreOptions::default(),
    )
    .await
    .expect("S3 store");
    for (bucket, entries) in &placed {
        for entry in entries {
            let found =
                granary_providers::list_all(store.as_ref(), bucket, &format!("{entry}/"), None)
                    .await
                    .expect("list the entry's prefix");
            assert!(
                !found.is_empty(),
                "{bucket}/{entry}/ holds the prefix marker"
            );
        }
    }
    assert!(
        !data.join("buckets").exists()
            || std::fs::read_dir(data.join("buckets"))
                .map(|d| d.flatten().all(|e| e.file_name() == ".tmp"))
                .unwrap_or(true),
        "nothing went to the local store"
    );
    assert!(dev.interrupt(), "exit code 0 after SIGINT");
}

/// #18: `granary dev` writes a kubeconfig for the sample namespace owner of `team-a`
/// (printed in the banner, its token random and never logged); with it, a
/// NonAdminBackup of team-a completes, and the owner is refused in other namespaces and
/// in the Velero namespace.
#[tokio::test]
async fn granary_dev_gives_a_namespace_owner_self_service_backups() {
    use granary_api::oadp::{NonAdminBackup, NonAdminBackupSpec, NonAdminPhase};
    use granary_api::velero::{Backup, BackupPhase};
    use k8s_openapi::api::core::v1::ConfigMap;

    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("state");
    let dev = Dev::start(&data, &["--seeds", "1", "--shoots", "1"], &[]);
    dev.ready().await;
    let kubeconfig = data.join("team-a.kubeconfig");
    let out = dev.output();
    assert!(
        out.contains(&format!(
            "namespace owner team-a-owner of team-a on seed europe-1 (self-service backups): {}",
            kubeconfig.display()
        )),
        "{out}"
    );
    let tokens = std::fs::read_to_string(data.join("owner-tokens.csv")).expect("token file");
    let token = tokens.split(',').next().expect("token").to_string();
    assert!(token.len() >= 32, "a random token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in [&kubeconfig, &data.join("owner-tokens.csv")] {
            let mode = std::fs::metadata(f).expect("file").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", f.display());
        }
    }
    let kc = Kubeconfig::read_from(&kubeconfig).expect("owner kubeconfig is written");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("usable kubeconfig");
    assert_eq!(config.default_namespace, "team-a");
    let owner = Client::try_from(config).expect("client");

    poll_until("europe-1's default location Available", || async {
        dev.output()
            .contains("location europe-1/default: Available")
    })
    .await;
    let nabs: Api<NonAdminBackup> = Api::default_namespaced(owner.clone());
    nabs.create(
        &PostParams::default(),
        &NonAdminBackup::new(
            "first",
            NonAdminBackupSpec {
                backup_spec: Default::default(),
                delete_backup: None,
            },
        ),
    )
    .await
    .expect("the owner creates a NonAdminBackup in team-a");
    poll_until("the NonAdminBackup Completed", || async {
        let s = nabs
            .get("first")
            .await
            .expect("the owner reads it")
            .status
            .unwrap_or_default();
        assert_ne!(
            s.phase,
            Some(NonAdminPhase::BackingOff),
            "refused: {:?}",
            s.conditions
        );
        s.velero_backup.and_then(|v| v.status).and_then(|s| s.phase) == Some(BackupPhase::Completed)
    })
    .await;

    // Refused everywhere else, with kube-apiserver's 403.
    let forbidden = |r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden")),
        other => panic!("expected 403, got {other:?}"),
    };
    let other: Api<NonAdminBackup> = Api::namespaced(owner.clone(), "default");
    forbidden(
        other
            .create(
                &PostParams::default(),
                &NonAdminBackup::new(
                    "elsewhere",
                    NonAdminBackupSpec {
                        backup_spec: Default::default(),
                        delete_backup: None,
                    },
                ),
            )
            .await
            .map(|_| ()),
    );
    forbidden(
        Api::<Backup>::namespaced(owner.clone(), "velero")
            .list(&ListParams::default())
            .await
            .map(|_| ()),
    );
    forbidden(
        Api::<ConfigMap>::namespaced(owner.clone(), "kube-system")
            .list(&ListParams::default())
            .await
            .map(|_| ()),
    );

    let log = std::fs::read_to_string(log_path(&data)).unwrap_or_default();
    assert!(
        !dev.output().contains(&token) && !log.contains(&token),
        "the owner's token is never printed or logged"
    );
}

/// `granary status` on a dev landscape: healthy, it says nothing needs attention and
/// exits 0; with a full pool, a broken CloudProfile (a new shoot waits for it) and a
/// schedule whose backups fail, it names each problem and exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granary_status_names_each_problem_and_exits_by_them() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("state");
    let dev = Dev::start(&data, &[], &[]);
    let (garden, _) = dev.ready().await;
    all_succeeded(&garden, 7).await;
    // The dev view says the same summary as it goes.
    poll_until("the view shows the health summary", || async {
        dev.output()
            .contains("health: 7 of 7 shoot(s) have a Succeeded BackupEntry; 3 seed(s) looked at; nothing needs attention")
    })
    .await;
    let status = || {
        let data = data.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                Command::new(env!("CARGO_BIN_EXE_granary"))
                    .args(["status", "--data-dir"])
                    .arg(&data)
                    .stdin(Stdio::null())
                    .output()
                    .expect("granary runs")
            })
            .await
            .expect("task")
        }
    };
    let healthy = status().await;
    let said = String::from_utf8_lossy(&healthy.stdout).to_string();
    assert!(
        healthy.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&healthy.stderr)
    );
    assert!(
        said.contains("7 of 7 shoot(s)") && said.contains("nothing needs attention"),
        "{said}"
    );
    let json = Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(["status", "-o", "json", "--data-dir"])
        .arg(&data)
        .output()
        .expect("granary runs");
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(report["problems"], serde_json::json!([]));
    assert_eq!(report["protectedShoots"], 7);

    // Europe's pool fills up: its 6th shoot takes the last place of its two shards.
    let shoots: Api<Shoot> = Api::namespaced(garden.clone(), "garden-dev");
    shoots
        .create(&PostParams::default(), &shoot("sixth"))
        .await
        .expect("shoot is created");
    all_succeeded(&garden, 8).await;
    // The CloudProfile breaks; a shoot created now waits for it.
    Api::<granary_api::core::CloudProfile>::all(garden.clone())
        .patch(
            "local-dev",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"backup": {"provider": "gcp"}}})),
        )
        .await
        .expect("profile broken");
    shoots
        .create(&PostParams::default(), &shoot("waits"))
        .await
        .expect("shoot is created");
    // A schedule whose backups fail validation (its location does not exist).
    let seed = data.join("seed-europe-1.kubeconfig").display().to_string();
    granary(
        [
            "schedule",
            "create",
            "broken",
            "--schedule",
            "@every 1m",
            "--storage-location",
            "nowhere",
            "--kubeconfig",
            &seed,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    )
    .await;
    poll_until(
        "status names the waiting shoot and the failed backup",
        || async {
            let out = status().await;
            let said = String::from_utf8_lossy(&out.stdout);
            !out.status.success()
                && said.contains("garden-dev/waits: no BackupEntry")
                && said.contains("RECENT FAILED BACKUPS\n  europe-1/broken-")
        },
    )
    .await;
    let out = status().await;
    assert_eq!(out.status.code(), Some(1));
    // The pool is near its quota exactly when every shard of Europe's pool holds as many
    // entries as its limit (the garden may have opened another shard by now).
    let buckets = Api::<granary_api::core::BackupBucket>::all(garden.clone())
        .list(&ListParams::default())
        .await
        .expect("buckets")
        .items;
    let entries = Api::<BackupEntry>::all(garden.clone())
        .list(&ListParams::default())
        .await
        .expect("entries")
        .items;
    let europe: Vec<_> = buckets
        .iter()
        .filter(|b| b.spec.provider.region == "europe" && b.metadata.deletion_timestamp.is_none())
        .collect();
    let (held, limit) = europe.iter().fold((0u32, 0u32), |(h, l), b| {
        let name = b.name_any();
        let n = entries
            .iter()
            .filter(|e| e.spec.bucket_name == name)
            .count() as u32;
        (
            h + n,
            l + b.status.as_ref().and_then(|s| s.entry_limit).unwrap_or(0),
        )
    });
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        said.contains("cloudprofile local-dev in europe: near its quota"),
        limit > 0 && f64::from(held) >= 0.9 * f64::from(limit),
        "{held} of {limit} places in Europe's pool:\n{said}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("need attention"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
