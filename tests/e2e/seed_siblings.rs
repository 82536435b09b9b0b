//! Recovery across seeds (docs/architecture.md#sibling-locations): two seeds of one pool,
//! each with its own API server and agent, the garden's controllers running. A backup
//! taken on the first seed appears on the second through a read-only location
//! `seed-<first>`; the first seed is lost and deleted; the second restores the backup
//! into another namespace, and the first seed's prefix is unchanged, byte for byte.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use granary_api::core::Seed;
use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationAccessMode,
    BackupStorageLocationPhase, INTEGRITY_ANNOTATION, RESTORE_FILES_LOCATION_ANNOTATION, Restore,
    RestorePhase,
};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_runtime::config::ConfigDuration;
use granary_test_support::builders::{backup_spec, restore_spec};
use granary_test_support::garden::{
    backup, config, create_profile, create_seed, create_shoot, start,
};
use granary_test_support::poll_until;
use granary_test_support::seed::{
    Backend, CREDENTIALS, Landscape, ensure_namespace, install_seed_crds,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};

/// Every file under `dir`, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                out.insert(p.display().to_string(), bytes);
            }
        }
    }
    out
}

async fn configmap(client: &Client, ns: &str, name: &str, data: &str) {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
        "data": {"value": data},
    }))
    .expect("configmap");
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .expect("create configmap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_seeds_backup_restores_on_another_seed_of_its_pool() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let other = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("second seed API server");
    let seed_b = other.client().await.expect("client");
    install_seed_crds(&l.cluster, &seed_b).await;
    let tc = &l.cluster;
    let (a, b, profile) = (tc.name("sa"), tc.name("sb"), tc.name("local"));
    let velero_config = |name: &str| {
        let mut c = l.config(name);
        c.velero.backup_sync_period = ConfigDuration(Duration::from_secs(1));
        c
    };
    let namespace = velero_config(&a).velero.namespace;
    let agent_a = l.start_agent(None, velero_config(&a)).await;
    let agent_b = l.start_agent(Some(seed_b.clone()), velero_config(&b)).await;
    create_seed(tc, &a, "local", "eu-1", None).await;
    create_seed(tc, &b, "local", "eu-1", None).await;
    create_profile(
        tc,
        &profile,
        "local",
        Some(backup("local", None, CREDENTIALS)),
    )
    .await;
    let garden = start(tc, config(None, Some((5000, 2000))));
    // A shoot on each seed: both hold an entry in the pool's bucket.
    let project = tc.namespace("garden-x").await;
    create_shoot(tc, &project, "web", &profile, &a).await;
    create_shoot(tc, &project, "api", &profile, &b).await;

    let locations_a: Api<BackupStorageLocation> = Api::namespaced(l.seed.clone(), &namespace);
    let locations_b: Api<BackupStorageLocation> = Api::namespaced(seed_b.clone(), &namespace);
    for (seed, locations) in [(&a, &locations_a), (&b, &locations_b)] {
        poll_until(
            &format!("seed {seed}'s default location Available"),
            || async {
                locations
                    .get_opt("default")
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|d| {
                        d.status
                            .is_some_and(|s| s.phase == Some(BackupStorageLocationPhase::Available))
                    })
            },
        )
        .await;
    }

    // A backup on the first seed.
    let app = "app";
    let control_plane = "shoot--dev--web";
    ensure_namespace(&l.seed, app).await;
    ensure_namespace(&l.seed, control_plane).await;
    configmap(&l.seed, app, "settings", "one").await;
    configmap(&l.seed, app, "flags", "two").await;
    configmap(&l.seed, control_plane, "etcd-config", "three").await;
    let backups_a: Api<Backup> = Api::namespaced(l.seed.clone(), &namespace);
    backups_a
        .create(
            &PostParams::default(),
            &backup_spec()
                .namespaces([app, control_plane])
                .location("default")
                .named("app-1"),
        )
        .await
        .expect("backup");
    poll_until("the backup Completed on the first seed", || async {
        backups_a
            .get("app-1")
            .await
            .is_ok_and(|b| b.status.and_then(|s| s.phase) == Some(BackupPhase::Completed))
    })
    .await;

    // The second seed lists it, through a read-only location of the first seed's prefix.
    let sibling = format!("seed-{a}");
    let backups_b: Api<Backup> = Api::namespaced(seed_b.clone(), &namespace);
    poll_until("the backup listed on the second seed, verified", || async {
        backups_b
            .get_opt("app-1")
            .await
            .ok()
            .flatten()
            .is_some_and(|b| {
                b.spec.storage_location.as_deref() == Some(sibling.as_str())
                    && b.annotations()
                        .get(INTEGRITY_ANNOTATION)
                        .map(String::as_str)
                        == Some("verified")
            })
    })
    .await;
    let l_b = locations_b.get(&sibling).await.expect("sibling location");
    assert_eq!(
        l_b.spec.access_mode,
        Some(BackupStorageLocationAccessMode::ReadOnly)
    );
    let expected_prefix = format!("velero/{a}");
    assert_eq!(
        l_b.spec.object_storage.prefix.as_deref(),
        Some(expected_prefix.as_str())
    );
    // The first seed sees the second's prefix only once the second has one.
    assert!(
        locations_a
            .get_opt(&format!("seed-{a}"))
            .await
            .expect("get")
            .is_none()
    );

    // The first seed is lost: its agent stops, the Seed is deleted.
    let bucket = l_b.spec.object_storage.bucket.clone();
    let prefix_dir = l.data_dir.path().join(&bucket).join(&expected_prefix);
    let before = files(&prefix_dir);
    assert!(!before.is_empty(), "{}", prefix_dir.display());
    agent_a.shutdown().await;
    Api::<Seed>::all(l.garden.clone())
        .delete(&a, &DeleteParams::default())
        .await
        .expect("seed deletion asked");
    // The garden says it is lost, and where its backups are read.
    poll_until("the garden marks the first seed lost", || async {
        granary_test_support::garden::events_about(&l.garden, &a)
            .await
            .iter()
            .any(|(t, reason, note)| {
                t == "Warning"
                    && reason == "SeedLost"
                    && note.contains(&format!("({b})"))
                    && note.contains(&format!("--from-seed {a}"))
            })
    })
    .await;

    // Restored on the second seed into another namespace, every object as it was.
    let restores_b: Api<Restore> = Api::namespaced(seed_b.clone(), &namespace);
    restores_b
        .create(
            &PostParams::default(),
            &restore_spec("app-1")
                .namespaces([app])
                .map_namespace(app, "app-restored")
                .named("from-a"),
        )
        .await
        .expect("restore");
    poll_until("the restore Completed on the second seed", || async {
        restores_b
            .get("from-a")
            .await
            .is_ok_and(|r| r.status.and_then(|s| s.phase) == Some(RestorePhase::Completed))
    })
    .await;
    let restored: Api<ConfigMap> = Api::namespaced(seed_b.clone(), "app-restored");
    for (name, value) in [("settings", "one"), ("flags", "two")] {
        let cm = restored.get(name).await.expect("restored configmap");
        assert_eq!(
            cm.data
                .as_ref()
                .and_then(|d| d.get("value"))
                .map(String::as_str),
            Some(value)
        );
        assert_eq!(cm.labels().get("app").map(String::as_str), Some("web"));
    }
    // Its files went to the second seed's own location; the first seed's prefix is
    // unchanged, byte for byte.
    let after = files(&prefix_dir);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "no file added to or removed from the first seed's prefix"
    );
    assert!(after == before, "a file of the first seed's prefix changed");
    let r = restores_b.get("from-a").await.expect("restore");
    assert_eq!(
        r.annotations()
            .get(RESTORE_FILES_LOCATION_ANNOTATION)
            .map(String::as_str),
        Some("default")
    );

    // The same through the CLI: --from-seed names the lost seed; --for-shoot finds the
    // newest backup of a shoot's control-plane namespace and restores it in place.
    let kubeconfig = l.data_dir.path().join("seed-b.kubeconfig");
    other.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let cli = |args: &[&str]| {
        std::process::Command::new(granary_test_support::granary_bin())
            .args(args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["-n", &namespace])
            .env_remove("KUBECONFIG")
            .output()
            .expect("granary runs")
    };
    let said = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let wrong = cli(&[
        "restore",
        "create",
        "--from-seed",
        &b,
        "--from-backup",
        "app-1",
    ]);
    assert!(!wrong.status.success(), "{}", said(&wrong));
    assert!(
        said(&wrong).contains(&format!("is in location \"{sibling}\"")),
        "{}",
        said(&wrong)
    );
    let from_seed = cli(&[
        "restore",
        "create",
        "from-seed",
        "--from-seed",
        &a,
        "--from-backup",
        "app-1",
        "--include-namespaces",
        app,
        "--namespace-mappings",
        "app:app-cli",
        "--wait",
    ]);
    assert!(from_seed.status.success(), "{}", said(&from_seed));
    let cli_restored: Api<ConfigMap> = Api::namespaced(seed_b.clone(), "app-cli");
    cli_restored
        .get("settings")
        .await
        .expect("restored by the CLI");
    let for_shoot = cli(&[
        "restore",
        "create",
        "for-shoot",
        "--for-shoot",
        "dev/web",
        "--wait",
    ]);
    assert!(for_shoot.status.success(), "{}", said(&for_shoot));
    assert!(
        said(&for_shoot).contains("Backup \"app-1\""),
        "{}",
        said(&for_shoot)
    );
    let cp: Api<ConfigMap> = Api::namespaced(seed_b.clone(), control_plane);
    let cm = cp
        .get("etcd-config")
        .await
        .expect("control plane restored in place");
    assert_eq!(
        cm.data
            .as_ref()
            .and_then(|d| d.get("value"))
            .map(String::as_str),
        Some("three")
    );
    assert!(
        files(&prefix_dir) == before,
        "the CLI's restores wrote nothing there either"
    );

    garden.stop().await;
    agent_b.shutdown().await;
    other.shutdown().await;
}
