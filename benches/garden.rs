//! Benchmark of `granary garden` placement (issue 6): N shoots (default 10,000; set
//! `GRANARY_BENCH_SHOOTS`) with quota 100 against the embedded garden → entries placed
//! and created per second, write requests per entry (from the garden's own metrics:
//! count compare-and-swaps, conflicts, bucket and entry creates), and the process' peak
//! RSS (embedded API server and controllers together, as they share the process).
//! Prints one JSON object. Not a test: run with `cargo bench --bench garden`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use granary::api::common::ObjectReference;
use granary::api::core::{
    BackupEntry, BackupSpec, CloudProfile, CloudProfileReference, CloudProfileSpec, Seed,
    SeedProvider, SeedSpec, Shoot, ShootSpec,
};
use granary::api::crds::{self, Side};
use granary::embedded::{EmbeddedOptions, EmbeddedServer};
use granary::garden::GardenController;
use granary::runtime::config::{GardenConfiguration, ProviderQuota};
use granary::runtime::metrics::Metrics;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, PostParams};

fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn create<K>(api: &Api<K>, obj: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create failed: {e}"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("GRANARY_BENCH_SHOOTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let limit = 100;
    let server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("embedded server starts");
    let client = server.client().await.expect("client");
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::crds(Some(Side::Garden)) {
        create(&crd_api, &crd).await;
    }
    for name in ["garden", "garden-bench"] {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.into());
        create(&Api::<Namespace>::all(client.clone()), &ns).await;
    }
    // CRDs become served asynchronously: retry the first object until it is accepted.
    let profile = CloudProfile::new(
        "aws",
        CloudProfileSpec {
            type_: "aws".into(),
            backup: Some(BackupSpec {
                provider: "aws".into(),
                credentials_ref: Some(ObjectReference {
                    api_version: "v1".into(),
                    kind: "Secret".into(),
                    name: "backup".into(),
                    namespace: "garden".into(),
                    ..ObjectReference::default()
                }),
                ..BackupSpec::default()
            }),
            ..CloudProfileSpec::default()
        },
    );
    let profiles: Api<CloudProfile> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    while profiles
        .create(&PostParams::default(), &profile)
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "CRDs never became served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seed = Seed::new(
        "seed-1",
        SeedSpec {
            provider: SeedProvider {
                type_: "aws".into(),
                region: "eu-1".into(),
                ..SeedProvider::default()
            },
            ..SeedSpec::default()
        },
    );
    create(&Api::<Seed>::all(client.clone()), &seed).await;
    let mut lease = Lease::default();
    lease.metadata.name = Some("seed-seed-1".into());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some("seed-1".into()),
        renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        lease_duration_seconds: Some(40),
        ..LeaseSpec::default()
    });
    create(&Api::<Lease>::namespaced(client.clone(), "garden"), &lease).await;

    let mut config = GardenConfiguration::default();
    config.leader_election.enabled = false;
    config.seed_liveness.ready_within =
        granary::runtime::config::ConfigDuration(Duration::from_secs(3600));
    config.controllers.backup_bucket.quota = vec![ProviderQuota {
        provider: "aws".into(),
        limit,
    }];
    let metrics = Metrics::new();
    let garden = GardenController::new(client.clone(), config)
        .metrics(metrics.clone())
        .start()
        .expect("garden starts");

    let start = Instant::now();
    let shoots: Api<Shoot> = Api::namespaced(client.clone(), "garden-bench");
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let shoots = shoots.clone();
            async move {
                let mut s = Shoot::new(
                    &format!("s{i:06}"),
                    ShootSpec {
                        cloud_profile: Some(CloudProfileReference {
                            kind: "CloudProfile".into(),
                            name: "aws".into(),
                            ..CloudProfileReference::default()
                        }),
                        seed_name: Some("seed-1".into()),
                        ..ShootSpec::default()
                    },
                );
                s.metadata.namespace = Some("garden-bench".into());
                create(&shoots, &s).await;
            }
        })
        .await;
    let created_shoots = start.elapsed();
    loop {
        let text = metrics.render();
        if metric(
            &text,
            "granary_garden_placements_total{outcome=\"existing\"}",
        ) as usize
            >= n
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(1800),
            "placement did not finish"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let entries: Api<BackupEntry> = Api::all(client.clone());
    loop {
        let listed = entries
            .list_metadata(&ListParams::default())
            .await
            .expect("entries listed")
            .items
            .len();
        if listed >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = start.elapsed();
    let text = metrics.render();
    let placed = metric(
        &text,
        "granary_garden_placements_total{outcome=\"existing\"}",
    );
    let new_shards = metric(
        &text,
        "granary_garden_placements_total{outcome=\"new_shard\"}",
    );
    let conflicts = metric(&text, "granary_garden_placement_conflicts_total").max(0.0);
    let writes = placed + new_shards + conflicts + n as f64;
    println!(
        "{}",
        serde_json::json!({
            "benchmark": "garden_placement",
            "shoots": n,
            "quota": limit,
            "shards": new_shards,
            "seconds_to_create_shoots": created_shoots.as_secs_f64(),
            "seconds_until_all_entries_exist": elapsed.as_secs_f64(),
            "entries_per_second": n as f64 / elapsed.as_secs_f64(),
            "placement_conflicts": conflicts,
            "write_requests_per_entry": writes / n as f64,
            "peak_rss_bytes": peak_rss_bytes(),
        })
    );
    garden.stop().await;
    server.shutdown().await;
}
