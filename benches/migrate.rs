//! Benchmark of `granary migrate entry` (issue 10), S3 → S3 on the endpoint in
//! `GRANARY_TEST_S3_ENDPOINT` (moto from `scripts/emulators.sh`), garden and seed on one
//! embedded API server. N objects (default 10,000; `GRANARY_BENCH_OBJECTS`) of 1 KiB up
//! to `GRANARY_BENCH_MAX_BYTES` (default 1 MiB) are copied with etcd running; then
//! `GRANARY_BENCH_CHANGED` (default 100) of them change and the cut-over runs. Prints
//! one JSON object: objects/s of the bulk copy, bytes that passed through the process
//! (0 for server-side copy) and the etcd downtime of the cut-over.
//! Not a test: run with `cargo bench --bench migrate`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use granary::api::common::ObjectReference;
use granary::api::core::{
    BackupBucket, BackupBucketProvider, BackupBucketSpec, BackupEntry, BackupEntrySpec,
    LABEL_POOL_KIND, LABEL_POOL_OWNER, LABEL_REGION, LABEL_SHARD, Shoot, ShootSpec,
};
use granary::api::crds::{self, Side};
use granary::embedded::{EmbeddedOptions, EmbeddedServer};
use granary::garden::GardenController;
use granary::migrate::{EntryMigration, MigrateContext, Output, migrate_entry};
use granary::runtime::clock::Clock;
use granary::runtime::config::GardenConfiguration;
use granary::runtime::failpoints;
use granary_providers::{ObjectStore, SecretData, StoreOptions};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn create<K>(api: &Api<K>, obj: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.create(&PostParams::default(), obj).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => return,
            // CRDs become served asynchronously.
            Err(e) if Instant::now() < deadline && e.to_string().contains("404") => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("create failed: {e}"),
        }
    }
}

/// BENCHMARK SIMULATOR, not production code: plays the StatefulSet controller for
/// etcd-main (every desired replica exists and is ready, 50 ms after a change).
async fn simulate_statefulset(api: Api<StatefulSet>) {
    loop {
        if let Ok(s) = api.get("etcd-main").await {
            let desired = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let status = s.status.clone().unwrap_or_default();
            if status.replicas != desired || status.ready_replicas.unwrap_or(0) != desired {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let patch = json!({"status": {"replicas": desired, "readyReplicas": desired}});
                let _ = api
                    .patch_status("etcd-main", &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn size_of(i: usize, max: usize) -> usize {
    // Spread deterministically over [1 KiB, max].
    let span = max.saturating_sub(1024).max(1);
    1024 + (i.wrapping_mul(2_654_435_761) % span)
}

async fn fill(
    store: &dyn ObjectStore,
    bucket: &str,
    prefix: &str,
    keys: &[usize],
    max: usize,
    tag: u8,
) {
    futures::stream::iter(keys)
        .map(|i| {
            let body = Bytes::from(vec![tag.wrapping_add(*i as u8); size_of(*i, max)]);
            let key = format!("{prefix}etcd-main/obj-{i:06}");
            async move { store.put(bucket, &key, body).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .expect("objects written");
}

/// Collects the JSON lines of a run, to sum the copy passes' counters.
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    /// Sum of `counters.<field>` over every `pass` event.
    fn sum(&self, field: &str) -> u64 {
        let text =
            String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == "pass")
            .filter_map(|v| v["counters"][field].as_u64())
            .sum()
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Ok(endpoint) = std::env::var("GRANARY_TEST_S3_ENDPOINT") else {
        eprintln!("set GRANARY_TEST_S3_ENDPOINT (source scripts/emulators.sh; emulators_start)");
        return;
    };
    // SAFETY: set before any AWS client exists.
    unsafe { std::env::set_var("AWS_EC2_METADATA_DISABLED", "true") };
    let n = env_or("GRANARY_BENCH_OBJECTS", 10_000);
    let max = env_or("GRANARY_BENCH_MAX_BYTES", 1024 * 1024).max(1024);
    let changed = env_or("GRANARY_BENCH_CHANGED", 100).min(n);
    let parallelism = env_or("GRANARY_BENCH_PARALLELISM", 32);

    let server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("embedded server starts");
    let client = server.client().await.expect("client");
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::crds(Some(Side::Garden)) {
        create(&crd_api, &crd).await;
    }
    let technical = "shoot--bench--a";
    for name in ["garden", "garden-bench", technical] {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.into());
        create(&Api::<Namespace>::all(client.clone()), &ns).await;
    }
    let creds: BTreeMap<String, String> = [
        ("accessKeyID", "test"),
        ("secretAccessKey", "test"),
        ("endpoint", endpoint.as_str()),
        ("s3ForcePathStyle", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut secret = Secret {
        data: Some(
            creds
                .iter()
                .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    secret.metadata.name = Some("backup".into());
    create(
        &Api::<Secret>::namespaced(client.clone(), "garden"),
        &secret,
    )
    .await;
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let (from, to) = (format!("bench-src-{suffix}"), format!("bench-dst-{suffix}"));
    for name in [&from, &to] {
        let mut b = BackupBucket::new(
            name,
            BackupBucketSpec {
                provider: BackupBucketProvider {
                    type_: "aws".into(),
                    region: "us-east-1".into(),
                },
                credentials_ref: Some(ObjectReference {
                    api_version: "v1".into(),
                    kind: "Secret".into(),
                    name: "backup".into(),
                    namespace: "garden".into(),
                    ..ObjectReference::default()
                }),
                seed_name: Some("seed-1".into()),
                ..BackupBucketSpec::default()
            },
        );
        // Shard 0 of a pool of its own: the garden gives the migration its place.
        b.metadata.labels = Some(
            [
                (LABEL_POOL_KIND, "cloudprofile"),
                (LABEL_POOL_OWNER, name.as_str()),
                (LABEL_REGION, "us-east-1"),
                (LABEL_SHARD, "0"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        create(&Api::<BackupBucket>::all(client.clone()), &b).await;
    }
    let mut shoot = Shoot::new(
        "a",
        ShootSpec {
            seed_name: Some("seed-1".into()),
            ..ShootSpec::default()
        },
    );
    shoot.metadata.namespace = Some("garden-bench".into());
    create(
        &Api::<Shoot>::namespaced(client.clone(), "garden-bench"),
        &shoot,
    )
    .await;
    let shoot = Api::<Shoot>::namespaced(client.clone(), "garden-bench")
        .get("a")
        .await
        .expect("shoot");
    let entry_name = shoot.backup_entry_name().expect("uid");
    let mut entry = BackupEntry::new(
        &entry_name,
        BackupEntrySpec {
            bucket_name: from.clone(),
            seed_name: Some("seed-1".into()),
            shoot_ref: None,
        },
    );
    entry.metadata.namespace = Some("garden-bench".into());
    create(
        &Api::<BackupEntry>::namespaced(client.clone(), "garden-bench"),
        &entry,
    )
    .await;
    let sts: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "etcd-main", "namespace": technical},
        "spec": {"replicas": 3, "serviceName": "etcd-main",
            "selector": {"matchLabels": {"app": "etcd-main"}},
            "template": {"metadata": {"labels": {"app": "etcd-main"}},
                "spec": {"containers": [{"name": "etcd", "image": "etcd"}]}}},
    }))
    .expect("statefulset");
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), technical);
    create(&sts_api, &sts).await;
    let sim = tokio::spawn(simulate_statefulset(sts_api));

    let mut garden_config = GardenConfiguration::default();
    garden_config.leader_election.enabled = false;
    let _garden = GardenController::new(client.clone(), garden_config)
        .start()
        .expect("garden metrics register");

    let options = StoreOptions::default();
    let data: SecretData = creds
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()))
        .collect();
    let store = granary_providers::open("aws", Some("us-east-1"), &data, &options)
        .await
        .expect("store");
    for b in [&from, &to] {
        store
            .ensure_bucket(b, &Default::default())
            .await
            .expect("bucket");
    }
    let prefix = format!("{entry_name}/");
    let all: Vec<usize> = (0..n).collect();
    let t = Instant::now();
    fill(store.as_ref(), &from, &prefix, &all, max, 0).await;
    eprintln!("filled {n} objects in {:?}", t.elapsed());

    let lines = Lines::default();
    let ctx = MigrateContext {
        garden: client.clone(),
        seed: client.clone(),
        store_options: options,
        clock: Clock::system(),
        garden_config: Default::default(),
        parallelism,
        etcd_timeout: Duration::from_secs(120),
        garden_timeout: Duration::from_secs(60),
        output: Output::JsonLines(std::sync::Mutex::new(Box::new(lines.clone()))),
    };
    let req = EntryMigration {
        namespace: "garden-bench".into(),
        name: entry_name.clone(),
        to_bucket: to.clone(),
        dry_run: false,
        delete_source_now: false,
        // The bench's two buckets are set up as separate pools.
        allow_other_pool: true,
    };
    // Bulk copy with etcd running; stop when etcd is down (it is scaled back up).
    failpoints::configure("migrate.cutover.scaled-down=1:error").expect("valid spec");
    let t = Instant::now();
    let bulk = migrate_entry(&ctx, &req).await;
    let bulk_secs = t.elapsed().as_secs_f64();
    assert!(bulk.is_err(), "the failpoint stops the first run");
    failpoints::configure("").expect("clear");

    // Change some objects, then the cut-over.
    let some: Vec<usize> = (0..changed)
        .map(|i| i * (n / changed.max(1)).max(1))
        .collect();
    fill(store.as_ref(), &from, &prefix, &some, max, 7).await;
    let report = migrate_entry(&ctx, &req).await.expect("cut-over succeeds");
    sim.abort();
    let total_bytes: u64 = (0..n).map(|i| size_of(i, max) as u64).sum();
    println!(
        "{}",
        json!({
            "benchmark": "migrate",
            "objects": n,
            "bytes": total_bytes,
            "parallelism": parallelism,
            "bulkCopySeconds": bulk_secs,
            "objectsPerSecond": n as f64 / bulk_secs,
            "copyMode": report.copy_mode,
            "copyRequests": lines.sum("serverSideCopies") + lines.sum("streamedCopies"),
            "bytesThroughProcess": lines.sum("bytesThroughProcess"),
            "changedAtCutOver": changed,
            "cutOverCopies": report.counters.copy_requests(),
            "etcdDowntimeSeconds": report.downtime_seconds,
        })
    );
}
