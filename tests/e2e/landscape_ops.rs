//! Landscape operations that must end where an admin expects, through the real seed
//! agents and garden controllers on the embedded API servers and the `local` provider.
//!
//! A seed whose last shoot leaves keeps its Velero backups reachable: its `default`
//! location turns read-only on the bucket that holds them (it no longer holds a bucket
//! of its own to write to), and a backup taken before restores there.

use std::time::Duration;

use granary_api::core::Shoot;
use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationAccessMode,
    BackupStorageLocationPhase, Restore, RestorePhase,
};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_runtime::config::ConfigDuration;
use granary_test_support::builders::{backup_spec, restore_spec};
use granary_test_support::garden::{
    backup, config, create_profile, create_seed, create_shoot, entries, start,
};
use granary_test_support::poll_until;
use granary_test_support::seed::{
    Backend, CREDENTIALS, Landscape, ensure_namespace, install_seed_crds,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_seed_whose_last_shoot_leaves_keeps_its_backups_read_only() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let provider = Backend::Local.provider();
    let other_server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("the other seed's API server");
    let other_seed = other_server.client().await.expect("client");
    install_seed_crds(&l.cluster, &other_seed).await;
    let tc = &l.cluster;
    // The holder is created first (and sorts first): the garden gives it the pool's
    // bucket; the leaver's backups live in that bucket through its shoot's entry.
    let (holder, leaver) = (tc.name("sa"), tc.name("sb"));
    let profile = tc.name("profile");
    let velero_config = |name: &str| {
        let mut config = l.config(name);
        config.velero.backup_sync_period = ConfigDuration(Duration::from_secs(1));
        config
    };
    let namespace = velero_config(&leaver).velero.namespace;
    let agent_holder = l
        .start_agent(Some(other_seed.clone()), velero_config(&holder))
        .await;
    let agent_leaver = l.start_agent(None, velero_config(&leaver)).await;
    create_seed(tc, &holder, provider, "eu-west-1", None).await;
    create_seed(tc, &leaver, provider, "eu-west-1", None).await;
    create_profile(
        tc,
        &profile,
        provider,
        Some(backup(provider, None, CREDENTIALS)),
    )
    .await;
    let garden = start(tc, config(None, Some((5000, 2000))));
    let project = tc.namespace("garden-ops").await;
    create_shoot(tc, &project, "web", &profile, &leaver).await;
    poll_until("the shoot's entry is placed on the leaver", || async {
        entries(tc)
            .await
            .iter()
            .any(|e| e.spec.seed_name.as_deref() == Some(leaver.as_str()))
    })
    .await;

    let locations = Api::<BackupStorageLocation>::namespaced(l.seed.clone(), &namespace);
    let backups = Api::<Backup>::namespaced(l.seed.clone(), &namespace);
    poll_until("the leaver's default location Available", || async {
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
    ensure_namespace(&l.seed, "app").await;
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "app"}, "data": {"value": "kept"},
    }))
    .expect("object");
    Api::<ConfigMap>::namespaced(l.seed.clone(), "app")
        .create(&PostParams::default(), &cm)
        .await
        .expect("configmap");
    backups
        .create(
            &PostParams::default(),
            &backup_spec()
                .namespaces(["app"])
                .location("default")
                .named("before"),
        )
        .await
        .expect("backup");
    poll_until("the backup Completed", || async {
        backups
            .get("before")
            .await
            .is_ok_and(|b| b.status.and_then(|s| s.phase) == Some(BackupPhase::Completed))
    })
    .await;
    let bucket = locations
        .get("default")
        .await
        .expect("location")
        .spec
        .object_storage
        .bucket;

    // The leaver's last shoot moves to the holder.
    Api::<Shoot>::namespaced(tc.client(), &project)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"seedName": holder}})),
        )
        .await
        .expect("shoot moved");
    poll_until(
        "the leaver's default location turns read-only on the same bucket",
        || async {
            locations
                .get_opt("default")
                .await
                .ok()
                .flatten()
                .is_some_and(|d| {
                    d.spec.access_mode == Some(BackupStorageLocationAccessMode::ReadOnly)
                        && d.spec.object_storage.bucket == bucket
                        && d.spec.provider == provider
                        && d.annotations()
                            .get("granary.gardener.cloud/read-only-reason")
                            .is_some_and(|r| r.contains("holds no bucket"))
                        && d.status.is_some_and(|s| {
                            s.phase == Some(BackupStorageLocationPhase::Available)
                                && s.last_validation_time.is_some()
                        })
                })
        },
    )
    .await;
    // The backup stays, and restores (its files are not written: no writable location).
    assert!(backups.get_opt("before").await.expect("get").is_some());
    Api::<ConfigMap>::namespaced(l.seed.clone(), "app")
        .delete("settings", &Default::default())
        .await
        .expect("the configmap is lost");
    let restores = Api::<Restore>::namespaced(l.seed.clone(), &namespace);
    restores
        .create(
            &PostParams::default(),
            &restore_spec("before").named("back"),
        )
        .await
        .expect("restore");
    poll_until("the restore Completed", || async {
        restores
            .get("back")
            .await
            .is_ok_and(|r| r.status.and_then(|s| s.phase) == Some(RestorePhase::Completed))
    })
    .await;
    let back = Api::<ConfigMap>::namespaced(l.seed.clone(), "app")
        .get("settings")
        .await
        .expect("restored");
    assert_eq!(
        back.data.and_then(|d| d.get("value").cloned()).as_deref(),
        Some("kept")
    );

    garden.stop().await;
    agent_leaver.shutdown().await;
    agent_holder.shutdown().await;
    other_server.shutdown().await;
}
