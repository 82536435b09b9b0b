//! The garden unreachable for a while (a cut TCP path between the seed agent and the
//! garden API server, which keeps running): the seed's objects keep their state, an
//! entry's grace-period cleanup still happens in the seed, and the garden's status
//! catches up (the entry's finalizer goes) once the garden is reachable again — within
//! seconds, not after the back-off its failed passes built up during the outage.

use granary_api::extensions;
use granary_runtime::config::ConfigDuration;
use granary_seed::SeedAgent;
use granary_test_support::proxy::Proxy;
use granary_test_support::seed::{Backend, Landscape, ensure_namespace};
use granary_test_support::{http_get, poll_until};
use kube::api::{Api, DeleteParams};
use std::time::{Duration, Instant};

/// Failed mirror passes of the doomed entry before the garden comes back: its back-off
/// is then 16 s (1 s doubling), longer than [`CATCH_UP`].
const FAILURES: u64 = 5;
/// How soon after the garden is back its status must have caught up.
const CATCH_UP: Duration = Duration::from_secs(8);

/// The sum of `granary_reconcile_errors_total` of the mirror's entry controller.
fn entry_mirror_errors(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("granary_reconcile_errors_total{")
                && l.contains("controller=\"mirror-backupentry\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_cleans_up_while_the_garden_is_unreachable_and_catches_up() {
    outage(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_s3_cleans_up_while_the_garden_is_unreachable_and_catches_up() {
    outage(Backend::S3).await;
}

async fn outage(backend: Backend) {
    let Some(l) = Landscape::start(backend).await else {
        return;
    };
    let Some(server) = l.cluster.garden.server.as_ref() else {
        eprintln!("SKIP: needs the embedded garden (a proxy in front of it)");
        return;
    };
    let target = server
        .url()
        .trim_start_matches("https://")
        .parse()
        .expect("server address");
    let proxy = Proxy::start(target).await;
    let mut kubeconfig = server.kubeconfig().expect("garden kubeconfig");
    for named in &mut kubeconfig.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            cluster.server = Some(format!("https://{}", proxy.addr));
        }
    }
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    let garden_via_proxy = kube::Client::try_from(config).expect("client");

    let mut config = l.config("seed-o");
    config.controllers.backup_entry.deletion_grace_period =
        Some(ConfigDuration(Duration::from_secs(3)));
    let agent = SeedAgent::new(garden_via_proxy, l.seed.clone(), config)
        .store_options(l.store_options())
        .object_selector(Some(l.cluster.object_selector.clone()))
        .metrics_bind_address(Some("127.0.0.1:0".to_string()))
        .start()
        .await
        .expect("seed agent starts");

    let bucket = l.bucket_name("out");
    let project = l.cluster.name("garden-o");
    ensure_namespace(&l.garden, &project).await;
    let (doomed, _) = l.entry_name("doomed");
    let (kept, _) = l.entry_name("kept");
    l.create_bucket(&bucket, "seed-o").await;
    l.create_entry(&project, &doomed, &bucket, "seed-o", &[])
        .await;
    l.create_entry(&project, &kept, &bucket, "seed-o", &[])
        .await;
    l.wait_bucket_ready(&bucket).await;
    l.wait_entry_ready(&project, &doomed).await;
    l.wait_entry_ready(&project, &kept).await;
    l.fill(&bucket, &doomed, 20).await;
    l.fill(&bucket, &kept, 5).await;

    // Deletion requested in the garden and propagated to the seed; then the garden
    // becomes unreachable for the seed.
    l.entries(&project)
        .delete(&doomed, &DeleteParams::default())
        .await
        .expect("entry deletion requested");
    let seed_entries: Api<extensions::BackupEntry> = Api::all(l.seed.clone());
    poll_until("deletion propagated to the seed", || async {
        seed_entries
            .get_opt(&doomed)
            .await
            .expect("get seed entry")
            .is_none_or(|e| e.metadata.deletion_timestamp.is_some())
    })
    .await;
    proxy.cut();

    // The seed cleans up after the grace period on its own.
    poll_until("prefix emptied while the garden is unreachable", || async {
        l.count(&bucket, &format!("{doomed}/")).await == 0
    })
    .await;
    assert_eq!(
        l.count(&bucket, &format!("{kept}/")).await,
        5 + 1,
        "other entry untouched (objects and marker)"
    );
    let seed_buckets: Api<extensions::BackupBucket> = Api::all(l.seed.clone());
    assert!(
        seed_buckets
            .get_opt(&bucket)
            .await
            .expect("get")
            .is_some_and(|b| b.metadata.deletion_timestamp.is_none()),
        "the seed's bucket keeps its state"
    );
    assert!(
        seed_entries
            .get_opt(&kept)
            .await
            .expect("get")
            .is_some_and(|e| e.metadata.deletion_timestamp.is_none()),
        "the seed's other entry keeps its state"
    );
    // The garden has not heard of it yet: its entry waits on the seed's finalizer.
    assert!(
        l.entries(&project)
            .get_opt(&doomed)
            .await
            .expect("get")
            .is_some()
    );

    // The seed keeps failing to tell the garden, backing off longer each time.
    let metrics = agent.metrics_address.expect("metrics served");
    poll_until("the mirror's passes fail and back off", || async {
        entry_mirror_errors(&http_get(metrics, "/metrics").await) >= FAILURES
    })
    .await;

    // Back online: the garden catches up at once, not after that back-off.
    let restored = Instant::now();
    proxy.restore();
    l.wait_entry_gone(&project, &doomed).await;
    assert!(
        restored.elapsed() < CATCH_UP,
        "caught up {:?} after the garden came back",
        restored.elapsed()
    );
    assert_eq!(
        l.count(&bucket, &format!("{doomed}/")).await,
        0,
        "nothing re-created"
    );
    l.wait_entry_ready(&project, &kept).await;
    agent.shutdown().await;
}
