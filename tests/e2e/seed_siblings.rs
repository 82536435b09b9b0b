//! Recovery across seeds (docs/architecture.md#sibling-locations), on the local provider
//! and on moto: three seeds, each with its own API server and agent, the garden's
//! controllers running; A and B share a pool (eu-1), C is in another (eu-2).
//!
//! A backs up its namespaces; B lists them through a read-only location `seed-<A>`, as
//! `<A>.<name>` beside its own backup of the same name; C sees nothing of A. B can
//! neither back up into A's location nor delete A's backup. A shoot moves from A to B,
//! A is lost and deleted; B restores A's backup with a namespace mapping (data, labels
//! and the owner graph remapped) and, with `--for-shoot`, the moved shoot's
//! control-plane namespace; A's prefix is unchanged, byte for byte, throughout. A
//! backup changed in the bucket afterwards is refused on B.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use futures::TryStreamExt;
use granary_api::core::{Seed, Shoot};
use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationAccessMode,
    BackupStorageLocationPhase, DeleteBackupRequest, DeleteBackupRequestPhase,
    DeleteBackupRequestSpec, INTEGRITY_ANNOTATION, RESTORE_FILES_LOCATION_ANNOTATION, Restore,
    RestorePhase, SOURCE_SEED_LABEL,
};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_providers::{ListEntry, ObjectStore};
use granary_runtime::config::ConfigDuration;
use granary_test_support::builders::{backup_spec, restore_spec};
use granary_test_support::garden::{
    backup, config, create_profile, create_seed, create_shoot, entries, events_about, start,
};
use granary_test_support::poll_until;
use granary_test_support::seed::{
    Backend, CREDENTIALS, Landscape, ensure_namespace, install_seed_crds,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

/// Every object under `prefix` of `bucket`, with its bytes.
async fn snapshot(
    store: &dyn ObjectStore,
    bucket: &str,
    prefix: &str,
) -> BTreeMap<String, bytes::Bytes> {
    let keys: Vec<String> = store
        .list(bucket, prefix, None)
        .try_filter_map(|e| async move {
            Ok(match e {
                ListEntry::Object(m) => Some(m.key),
                ListEntry::Prefix(_) => None,
            })
        })
        .try_collect()
        .await
        .expect("list the prefix");
    let mut out = BTreeMap::new();
    for key in keys {
        let bytes = granary_providers::get_bytes(store, bucket, &key)
            .await
            .expect("read an object");
        out.insert(key, bytes);
    }
    out
}

async fn create<K>(client: &Client, ns: &str, object: serde_json::Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).expect("object");
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &object)
        .await
        .expect("create")
}

async fn configmap(client: &Client, ns: &str, name: &str, data: &str) -> ConfigMap {
    create(
        client,
        ns,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
            "data": {"value": data},
        }),
    )
    .await
}

async fn location_available(locations: &Api<BackupStorageLocation>, what: &str) {
    poll_until(what, || async {
        locations
            .get_opt("default")
            .await
            .ok()
            .flatten()
            .is_some_and(|d| {
                d.status
                    .is_some_and(|s| s.phase == Some(BackupStorageLocationPhase::Available))
            })
    })
    .await;
}

async fn backup_completed(backups: &Api<Backup>, name: &str) {
    poll_until(&format!("backup {name} Completed"), || async {
        backups
            .get(name)
            .await
            .is_ok_and(|b| b.status.and_then(|s| s.phase) == Some(BackupPhase::Completed))
    })
    .await;
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

async fn a_lost_seeds_backups_restore_on_another_seed_of_its_pool(backend: Backend) {
    let Some(l) = Landscape::start(backend).await else {
        return;
    };
    let provider = backend.provider();
    let server_b = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("second seed API server");
    let server_c = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("third seed API server");
    let seed_b = server_b.client().await.expect("client");
    let seed_c = server_c.client().await.expect("client");
    install_seed_crds(&l.cluster, &seed_b).await;
    install_seed_crds(&l.cluster, &seed_c).await;
    let tc = &l.cluster;
    let (a, b, c) = (tc.name("sa"), tc.name("sb"), tc.name("sc"));
    let profile = tc.name("profile");
    let velero_config = |name: &str| {
        let mut config = l.config(name);
        config.velero.backup_sync_period = ConfigDuration(Duration::from_secs(1));
        config
    };
    let namespace = velero_config(&a).velero.namespace;
    let agent_a = l.start_agent(None, velero_config(&a)).await;
    let agent_b = l.start_agent(Some(seed_b.clone()), velero_config(&b)).await;
    let agent_c = l.start_agent(Some(seed_c.clone()), velero_config(&c)).await;
    create_seed(tc, &a, provider, "eu-west-1", None).await;
    create_seed(tc, &b, provider, "eu-west-1", None).await;
    create_seed(tc, &c, provider, "eu-central-1", None).await;
    create_profile(
        tc,
        &profile,
        provider,
        Some(backup(provider, None, CREDENTIALS)),
    )
    .await;
    let garden = start(tc, config(None, Some((5000, 2000))));
    // A shoot on each seed: each seed's default location lives in its pool's bucket.
    let project = tc.namespace("garden-x").await;
    create_shoot(tc, &project, "web", &profile, &a).await;
    create_shoot(tc, &project, "api", &profile, &b).await;
    create_shoot(tc, &project, "db", &profile, &c).await;

    let locations =
        |client: &Client| Api::<BackupStorageLocation>::namespaced(client.clone(), &namespace);
    let backups = |client: &Client| Api::<Backup>::namespaced(client.clone(), &namespace);
    let (locations_a, locations_b, locations_c) =
        (locations(&l.seed), locations(&seed_b), locations(&seed_c));
    let (backups_a, backups_b, backups_c) = (backups(&l.seed), backups(&seed_b), backups(&seed_c));
    for (seed, api) in [(&a, &locations_a), (&b, &locations_b), (&c, &locations_c)] {
        location_available(api, &format!("seed {seed}'s default location Available")).await;
    }

    // The shoot's control-plane namespace, from its entry's name.
    poll_until("the shoot web's entry is placed", || async {
        entries(tc)
            .await
            .iter()
            .any(|e| e.spec.seed_name.as_deref() == Some(a.as_str()))
    })
    .await;
    let entry = entries(tc)
        .await
        .into_iter()
        .find(|e| e.spec.seed_name.as_deref() == Some(a.as_str()))
        .expect("polled")
        .name_any();
    let control_plane = entry.rsplit_once("--").expect("technical id").0.to_string();
    let shoot_ref = format!(
        "{}/web",
        control_plane
            .strip_prefix("shoot--")
            .and_then(|p| p.strip_suffix("--web"))
            .expect("shoot--<project>--web")
    );

    // A backup on A: an application namespace with an owner graph, and the shoot's
    // control-plane namespace. B has a backup of its own of the same name.
    let app = "app";
    for ns in [app, control_plane.as_str()] {
        ensure_namespace(&l.seed, ns).await;
    }
    ensure_namespace(&seed_b, "local-app").await;
    let parent = configmap(&l.seed, app, "settings", "one").await;
    configmap(&l.seed, app, "flags", "two").await;
    let _: Secret = create(
        &l.seed,
        app,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "token", "namespace": app, "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "settings",
                "uid": parent.uid().expect("uid"),
            }]},
            "type": "Opaque",
            "data": {"token": "c2VjcmV0"},
        }),
    )
    .await;
    configmap(&l.seed, &control_plane, "etcd-config", "three").await;
    configmap(&seed_b, "local-app", "mine", "b's own").await;
    backups_a
        .create(
            &PostParams::default(),
            &backup_spec()
                .namespaces([app, control_plane.as_str()])
                .location("default")
                .named("app-1"),
        )
        .await
        .expect("backup on A");
    backups_b
        .create(
            &PostParams::default(),
            &backup_spec()
                .namespaces(["local-app"])
                .location("default")
                .named("app-1"),
        )
        .await
        .expect("B's own backup of the same name");
    backup_completed(&backups_a, "app-1").await;
    backup_completed(&backups_b, "app-1").await;

    // B lists A's backup as <A>.app-1 through a read-only location of A's prefix.
    let sibling = format!("seed-{a}");
    let listed = format!("{a}.app-1");
    poll_until("A's backup listed on B, verified", || async {
        backups_b
            .get_opt(&listed)
            .await
            .ok()
            .flatten()
            .is_some_and(|b| {
                b.spec.storage_location.as_deref() == Some(sibling.as_str())
                    && b.labels().get(SOURCE_SEED_LABEL) == Some(&a)
                    && b.stored_name() == "app-1"
                    && b.annotations()
                        .get(INTEGRITY_ANNOTATION)
                        .map(String::as_str)
                        == Some("verified")
            })
    })
    .await;
    let own = backups_b.get("app-1").await.expect("B's own backup");
    assert_eq!(own.spec.storage_location.as_deref(), Some("default"));
    let location = locations_b.get(&sibling).await.expect("sibling location");
    assert_eq!(
        location.spec.access_mode,
        Some(BackupStorageLocationAccessMode::ReadOnly)
    );
    let prefix = format!("velero/{a}");
    assert_eq!(
        location.spec.object_storage.prefix.as_deref(),
        Some(prefix.as_str())
    );
    let bucket = location.spec.object_storage.bucket.clone();
    let store = l.store().await;
    let before = snapshot(store.as_ref(), &bucket, &format!("{prefix}/")).await;
    assert!(
        before.keys().any(|k| k.ends_with("app-1.tar.gz")),
        "{:?}",
        before.keys()
    );
    // C, in another pool, sees nothing of A (nor of B).
    poll_until("C's own prefix synced", || async {
        locations_c
            .get("default")
            .await
            .is_ok_and(|l| l.status.and_then(|s| s.last_synced_time).is_some())
    })
    .await;
    let c_locations: Vec<String> = locations_c
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|l| l.name_any())
        .collect();
    assert_eq!(c_locations, ["default"], "C reads no other seed's prefix");
    assert!(
        backups_c
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty(),
        "C lists no backup of A"
    );

    // B can neither write into A's prefix nor delete from it: its location is read-only.
    backups_b
        .create(
            &PostParams::default(),
            &backup_spec()
                .namespaces(["local-app"])
                .location(&sibling)
                .named("into-a"),
        )
        .await
        .expect("backup into A's location asked");
    poll_until("a backup into A's location is refused", || async {
        backups_b.get("into-a").await.is_ok_and(|b| {
            let s = b.status.unwrap_or_default();
            s.phase == Some(BackupPhase::FailedValidation)
                && s.validation_errors
                    .unwrap_or_default()
                    .iter()
                    .any(|e| e.contains("read-only mode"))
        })
    })
    .await;
    let deletions: Api<DeleteBackupRequest> = Api::namespaced(seed_b.clone(), &namespace);
    let mut request = DeleteBackupRequest::new(
        "delete-a",
        DeleteBackupRequestSpec {
            backup_name: listed.clone(),
        },
    );
    request.metadata.namespace = Some(namespace.clone());
    deletions
        .create(&PostParams::default(), &request)
        .await
        .expect("deletion asked");
    poll_until("the deletion of A's backup refused", || async {
        deletions
            .get_opt("delete-a")
            .await
            .ok()
            .flatten()
            .is_none_or(|r| {
                let s = r.status.unwrap_or_default();
                s.phase == Some(DeleteBackupRequestPhase::Processed)
                    && s.errors
                        .unwrap_or_default()
                        .iter()
                        .any(|e| e.contains("read-only mode"))
            })
    })
    .await;
    assert!(backups_b.get_opt(&listed).await.expect("get").is_some());

    // The shoot moves from A to B; its entry follows.
    Api::<Shoot>::namespaced(l.garden.clone(), &project)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"seedName": b}})),
        )
        .await
        .expect("shoot moved");
    poll_until("the shoot's entry Succeeded on B", || async {
        entries(tc).await.iter().any(|e| {
            e.name_any() == entry
                && e.spec.seed_name.as_deref() == Some(b.as_str())
                && e.status.as_ref().is_some_and(|s| {
                    s.seed_name.as_deref() == Some(b.as_str())
                        && s.observed_generation == e.metadata.generation
                        && s.last_operation.as_ref().is_some_and(|o| {
                            o.state == granary_api::common::LastOperationState::Succeeded
                        })
                })
        })
    })
    .await;

    // A is lost: its agent stops, the Seed is deleted; the garden says where its backups
    // are read.
    agent_a.shutdown().await;
    Api::<Seed>::all(l.garden.clone())
        .delete(&a, &DeleteParams::default())
        .await
        .expect("seed deletion asked");
    poll_until("the garden marks A lost", || async {
        events_about(&l.garden, &a)
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
    assert!(backups_b.get_opt(&listed).await.expect("get").is_some());

    // Restored on B into another namespace: every object as it was, the owner graph
    // remapped to the restored owner.
    let restores_b: Api<Restore> = Api::namespaced(seed_b.clone(), &namespace);
    restores_b
        .create(
            &PostParams::default(),
            &restore_spec(&listed)
                .namespaces([app])
                .map_namespace(app, "app-restored")
                .named("from-a"),
        )
        .await
        .expect("restore");
    poll_until("the restore Completed on B", || async {
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
    let new_parent = restored.get("settings").await.expect("restored owner");
    let token: Secret = Api::namespaced(seed_b.clone(), "app-restored")
        .get("token")
        .await
        .expect("restored dependent");
    assert_eq!(token.data.as_ref().expect("data")["token"].0, b"secret");
    let owners = token.metadata.owner_references.expect("owner kept");
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].name, "settings");
    assert_eq!(Some(&owners[0].uid), new_parent.metadata.uid.as_ref());
    assert_ne!(owners[0].uid, parent.uid().expect("uid"), "remapped");
    // Its files went to B's own location.
    let r = restores_b.get("from-a").await.expect("restore");
    assert_eq!(
        r.annotations()
            .get(RESTORE_FILES_LOCATION_ANNOTATION)
            .map(String::as_str),
        Some("default")
    );

    // The same through the CLI: --from-seed names the lost seed and the backup's name
    // there; --for-shoot finds the newest backup of the moved shoot's control-plane
    // namespace and restores it in place.
    let kubeconfig = l.data_dir.path().join("seed-b.kubeconfig");
    server_b.write_kubeconfig(&kubeconfig).expect("kubeconfig");
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
        said(&wrong).contains(&format!("{listed:?} is in location {sibling:?}")),
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
    let r = restores_b.get("from-seed").await.expect("restore");
    assert_eq!(r.spec.backup_name.as_deref(), Some(listed.as_str()));
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
        &shoot_ref,
        "--wait",
    ]);
    assert!(for_shoot.status.success(), "{}", said(&for_shoot));
    assert!(
        said(&for_shoot).contains(&format!("Backup {listed:?}")),
        "{}",
        said(&for_shoot)
    );
    let cp: Api<ConfigMap> = Api::namespaced(seed_b.clone(), &control_plane);
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
    // A's backup reads as it was written, downloaded through B.
    let logs = cli(&["backup", "logs", &listed]);
    assert!(logs.status.success(), "{}", said(&logs));
    assert!(said(&logs).contains("Starting backup"), "{}", said(&logs));

    // Nothing of it wrote to A's prefix: unchanged, byte for byte.
    let after = snapshot(store.as_ref(), &bucket, &format!("{prefix}/")).await;
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "no object added to or removed from A's prefix"
    );
    assert!(after == before, "an object of A's prefix changed");

    // Whoever changes A's backup in the bucket gets it refused on B: it verifies with
    // the landscape's key, under its stored name.
    let tarball = before
        .keys()
        .find(|k| k.ends_with("/app-1.tar.gz"))
        .expect("the tarball")
        .clone();
    let mut forged = before[&tarball].to_vec();
    let last = forged.len() - 1;
    forged[last] ^= 0xff;
    store
        .put(&bucket, &tarball, bytes::Bytes::from(forged))
        .await
        .expect("tamper");
    restores_b
        .create(
            &PostParams::default(),
            &restore_spec(&listed)
                .namespaces([app])
                .map_namespace(app, "app-forged")
                .named("forged"),
        )
        .await
        .expect("restore asked");
    poll_until("the changed backup refused on B", || async {
        restores_b.get("forged").await.is_ok_and(|r| {
            let s = r.status.unwrap_or_default();
            s.phase == Some(RestorePhase::FailedValidation)
                && s.validation_errors
                    .unwrap_or_default()
                    .iter()
                    .any(|e| e.contains("failed its integrity check") && e.contains("app-1.tar.gz"))
        })
    })
    .await;
    assert!(
        Api::<ConfigMap>::namespaced(seed_b.clone(), "app-forged")
            .list(&Default::default())
            .await
            .map(|l| l.items.is_empty())
            .unwrap_or(true),
        "nothing restored from it"
    );

    garden.stop().await;
    agent_b.shutdown().await;
    agent_c.shutdown().await;
    server_b.shutdown().await;
    server_c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_seeds_backups_restore_on_another_seed_local() {
    a_lost_seeds_backups_restore_on_another_seed_of_its_pool(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_seeds_backups_restore_on_another_seed_s3() {
    a_lost_seeds_backups_restore_on_another_seed_of_its_pool(Backend::S3).await;
}
