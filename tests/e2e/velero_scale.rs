//! What the Velero side asks of the API server, counted by the embedded server's
//! recording (the `velero_scale` benchmark measures the same at 10,000 Backups): a sync,
//! an idle sync, a queue pass and a scrubbing round each make a constant number of reads
//! plus the writes their work needs (a create per imported backup, a verdict per checked
//! one), never a read per Backup, and write nothing that did not change.
//!
//! Each test has an API server of its own (the recording sees every client).

use std::collections::BTreeMap;
use std::time::Duration;

use granary_api::velero::{Backup, BackupSpec};
use granary_apiserver::EmbeddedServer;
use granary_bench::velero_scale::{
    LOCATION, NS, available, context, location, server, tally, write_backup,
};
use granary_providers::StoreOptions;
use granary_runtime::config::ConfigDuration;
use granary_velero::layout::StorageLayout;
use granary_velero_server::settings::VeleroSettings;
use granary_velero_server::{backup_sync, backup_verification, integrity, queue_controller};
use kube::api::{Api, ListParams, PostParams};

/// Backups in the bucket: enough that one request per backup stands out.
const M: usize = 5;

type Requests = BTreeMap<String, usize>;

fn count(r: &Requests, key: &str) -> usize {
    r.get(key).copied().unwrap_or_default()
}

/// The requests `step` makes.
async fn requests<F: Future>(server: &EmbeddedServer, step: F) -> (F::Output, Requests) {
    server.record_requests();
    drop(server.take_recorded_requests());
    let out = step.await;
    (out, tally(server.take_recorded_requests()))
}

struct Setup {
    server: EmbeddedServer,
    client: kube::Client,
    store_options: StoreOptions,
    keyring: granary_velero::integrity::Keyring,
    _dir: tempfile::TempDir,
}

/// A server with the location and a bucket of `M` signed backups, none in the cluster.
async fn setup() -> Setup {
    let (server, client) = server().await.expect("server");
    let keyring = integrity::ensure(&client, NS).await.expect("keys");
    location(&client).await.expect("location");
    let dir = tempfile::tempdir().expect("tempdir");
    let store_options = StoreOptions {
        local_root: Some(dir.path().to_path_buf()),
        ..StoreOptions::default()
    };
    let store = granary_providers::open("local", None, &Default::default(), &store_options)
        .await
        .expect("store");
    store
        .ensure_bucket("bench", &Default::default())
        .await
        .expect("bucket");
    let layout = StorageLayout::new("bench", Some("velero/bench")).expect("layout");
    for i in 0..M {
        write_backup(store.as_ref(), &layout, &format!("b-{i}"), &keyring)
            .await
            .expect("backup written");
    }
    Setup {
        server,
        client,
        store_options,
        keyring,
        _dir: dir,
    }
}

fn settings() -> VeleroSettings {
    VeleroSettings {
        namespace: NS.into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_creates_each_missing_backup_and_an_idle_sync_writes_none() {
    let s = setup().await;
    let ctx = context(&s.client, &s.store_options, settings());
    ctx.keys.set(s.keyring.clone());
    let (done, sync) = requests(&s.server, backup_sync::round(&ctx)).await;
    done.expect("sync round");
    assert_eq!(count(&sync, "create backups"), M, "{sync:?}");
    let reads: usize = sync
        .iter()
        .filter(|(k, _)| !k.starts_with("create backups"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        reads <= 4,
        "a sync reads a constant number of times: {sync:?}"
    );

    available(&s.client).await.expect("due again");
    let (done, idle) = requests(&s.server, backup_sync::round(&ctx)).await;
    done.expect("idle round");
    for (k, n) in &idle {
        assert!(
            !k.ends_with(" backups") || k.starts_with("list "),
            "{k} ×{n}: {idle:?}"
        );
    }
    assert!(idle.values().sum::<usize>() <= 4, "{idle:?}");
    s.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_pass_with_nothing_to_change_writes_nothing() {
    let s = setup().await;
    let ctx = context(&s.client, &s.store_options, settings());
    ctx.keys.set(s.keyring.clone());
    backup_sync::round(&ctx).await.expect("sync");
    let api: Api<Backup> = Api::namespaced(s.client.clone(), NS);
    for i in 0..3 {
        let mut b = Backup::new(&format!("new-{i}"), BackupSpec::default());
        b.spec.included_namespaces = Some(vec![format!("app-{i}")]);
        b.spec.storage_location = Some(LOCATION.into());
        api.create(&PostParams::default(), &b)
            .await
            .expect("backup");
    }
    let (done, first) = requests(&s.server, queue_controller::pass(&ctx)).await;
    done.expect("first pass");
    // One starts, two are queued: a write each, none for the M synced ones.
    assert_eq!(count(&first, "patch backups"), 3, "{first:?}");
    assert_eq!(count(&first, "list backups"), 1, "{first:?}");
    let (done, steady) = requests(&s.server, queue_controller::pass(&ctx)).await;
    done.expect("steady pass");
    assert_eq!(
        steady,
        BTreeMap::from([("list backups".to_string(), 1)]),
        "a pass with nothing to change only lists"
    );
    s.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrubbing_round_reads_each_location_once_not_once_per_backup() {
    let s = setup().await;
    let ctx = context(&s.client, &s.store_options, settings());
    ctx.keys.set(s.keyring.clone());
    backup_sync::round(&ctx).await.expect("sync");
    // Every backup due: checked (by the sync) longer ago than the frequency.
    let scrub = std::sync::Arc::new(context(
        &s.client,
        &s.store_options,
        VeleroSettings {
            verify_frequency: ConfigDuration(Duration::from_millis(1)),
            ..settings()
        },
    ));
    scrub.keys.set(s.keyring.clone());
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (done, round) = requests(&s.server, backup_verification::pass(&scrub, true)).await;
    done.expect("round");
    // The verdict of each backup is written, once.
    assert_eq!(count(&round, "patch backups"), M, "{round:?}");
    assert!(
        count(&round, "get backupstoragelocations") + count(&round, "list backupstoragelocations")
            <= 1,
        "the location is read once a round: {round:?}"
    );
    let others: usize = round
        .iter()
        .filter(|(k, _)| *k != "patch backups")
        .map(|(_, n)| n)
        .sum();
    assert!(
        others <= 4,
        "a round reads a constant number of times: {round:?}"
    );
    // Every backup was checked and found whole.
    let checked = Api::<Backup>::namespaced(s.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter(|b| {
            b.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(granary_api::velero::INTEGRITY_ANNOTATION))
                .is_some_and(|v| v == "verified")
        })
        .count();
    assert_eq!(checked, M);
    s.server.shutdown().await;
}
