//! Benchmark of a whole `granary migrate entry`, S3 → S3 on moto
//! (`GRANARY_TEST_S3_ENDPOINT`), with the garden and the seed on one embedded API server
//! in this process. N objects (`--size N`, default 10,000) of 1 KiB to 64 KiB are copied
//! with etcd running; then 1% of them (at least one) change and the cut-over runs.
//!
//! - bulk copy: the migration's first run until etcd would be scaled down, against
//!   `rclone copy` (server-side, the migration's parallelism of 16) of the same prefix
//!   into the same destination bucket, in the same run;
//! - object bytes through the migration (0 for a server-side copy);
//! - etcd downtime of the cut-over (recorded; no peer does a cut-over).
//!
//! The etcd StatefulSet is played by a simulator (every desired replica ready 50 ms after
//! a change): no kubelet runs here.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use granary_providers::{ObjectStore, SecretData, StoreOptions};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::objects::{credentials, endpoint};
use super::peers;
use super::support::{create, garden_secret};
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};
use granary_api::core::{
    BackupBucket, BackupBucketProvider, BackupBucketSpec, BackupEntry, BackupEntrySpec,
    LABEL_POOL_KIND, LABEL_POOL_OWNER, LABEL_REGION, LABEL_SHARD, Shoot, ShootSpec,
};
use granary_api::crds::{self, Side};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_garden::GardenController;
use granary_garden::config::GardenConfiguration;
use granary_migrate::{EntryMigration, MigrateContext, Output, migrate_entry};
use granary_runtime::clock::Clock;
use granary_runtime::failpoints;

/// The migration's default `--parallelism`, and rclone's transfers.
const PARALLELISM: usize = 16;
const MAX_BYTES: usize = 64 * 1024;
const TECHNICAL: &str = "shoot--bench--a";

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

/// Object `i`'s size, spread deterministically over [1 KiB, [`MAX_BYTES`]].
fn size_of(i: usize) -> usize {
    1024 + (i.wrapping_mul(2_654_435_761) % (MAX_BYTES - 1024))
}

async fn fill(
    store: &dyn ObjectStore,
    bucket: &str,
    prefix: &str,
    keys: &[usize],
    tag: u8,
) -> anyhow::Result<()> {
    futures::stream::iter(keys)
        .map(|i| {
            let body = Bytes::from(vec![tag.wrapping_add(*i as u8); size_of(*i)]);
            let key = format!("{prefix}etcd-main/obj-{i:06}");
            async move { store.put(bucket, &key, body).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .context("seeding the source")?;
    Ok(())
}

/// The JSON lines of a migration run, to sum the copy passes' counters.
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

fn bucket(name: &str) -> BackupBucket {
    let mut b = BackupBucket::new(
        name,
        BackupBucketSpec {
            provider: BackupBucketProvider {
                type_: "aws".into(),
                region: "us-east-1".into(),
            },
            credentials_ref: Some(garden_secret("backup")),
            seed_name: Some("seed-1".into()),
            ..BackupBucketSpec::default()
        },
    );
    // Shard 0 of a pool of its own: the garden gives the migration its place.
    b.metadata.labels = Some(
        [
            (LABEL_POOL_KIND, "cloudprofile"),
            (LABEL_POOL_OWNER, name),
            (LABEL_REGION, "us-east-1"),
            (LABEL_SHARD, "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    b
}

pub(crate) async fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let endpoint = endpoint("migrate", opts)?;
    let n = opts.size.unwrap_or(10_000);
    let changed = (n / 100).max(1);

    let server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .context("embedded API server")?;
    let client = server.client().await.context("client")?;
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::crds(Some(Side::Garden)) {
        create(&crd_api, &crd).await?;
    }
    for name in ["garden", "garden-bench", TECHNICAL] {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.into());
        create(&Api::<Namespace>::all(client.clone()), &ns).await?;
    }
    let data: SecretData = credentials(&endpoint);
    let mut secret = Secret {
        data: Some(
            data.iter()
                .map(|(k, v)| (k.clone(), ByteString(v.clone())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    };
    secret.metadata.name = Some("backup".into());
    create(
        &Api::<Secret>::namespaced(client.clone(), "garden"),
        &secret,
    )
    .await?;
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let (from, to) = (format!("bench-src-{suffix}"), format!("bench-dst-{suffix}"));
    for name in [&from, &to] {
        create(&Api::<BackupBucket>::all(client.clone()), &bucket(name)).await?;
    }
    let shoots = Api::<Shoot>::namespaced(client.clone(), "garden-bench");
    let mut shoot = Shoot::new(
        "a",
        ShootSpec {
            seed_name: Some("seed-1".into()),
            ..ShootSpec::default()
        },
    );
    shoot.metadata.namespace = Some("garden-bench".into());
    create(&shoots, &shoot).await?;
    let shoot = shoots.get("a").await.context("the shoot")?;
    let entry_name = shoot.backup_entry_name().context("a shoot without uid")?;
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
    .await?;
    let sts: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "etcd-main", "namespace": TECHNICAL},
        "spec": {"replicas": 3, "serviceName": "etcd-main",
            "selector": {"matchLabels": {"app": "etcd-main"}},
            "template": {"metadata": {"labels": {"app": "etcd-main"}},
                "spec": {"containers": [{"name": "etcd", "image": "etcd"}]}}},
    }))?;
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), TECHNICAL);
    create(&sts_api, &sts).await?;
    let simulator = tokio::spawn(simulate_statefulset(sts_api));

    let mut garden_config = GardenConfiguration::default();
    garden_config.leader_election.enabled = false;
    let garden = GardenController::new(client.clone(), garden_config)
        .start()
        .context("garden metrics")?;

    let options = StoreOptions::default();
    let store = granary_providers::open("aws", Some("us-east-1"), &data, &options)
        .await
        .context("S3 store for the emulator")?;
    for b in [&from, &to] {
        store
            .ensure_bucket(b, &Default::default())
            .await
            .with_context(|| format!("bucket {b}"))?;
    }
    let prefix = format!("{entry_name}/");
    let all: Vec<usize> = (0..n).collect();
    fill(store.as_ref(), &from, &prefix, &all, 0).await?;

    let lines = Lines::default();
    let ctx = MigrateContext {
        garden: client.clone(),
        seed: client.clone(),
        store_options: options,
        clock: Clock::system(),
        garden_config: Default::default(),
        parallelism: PARALLELISM,
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
        // The two buckets are set up as pools of their own.
        allow_other_pool: true,
    };
    // Bulk copy with etcd running; the run stops where etcd would be scaled down.
    failpoints::configure("migrate.cutover.scaled-down=1:error")
        .map_err(|e| anyhow::anyhow!("failpoint: {e}"))?;
    let start = Instant::now();
    let bulk = migrate_entry(&ctx, &req).await;
    let bulk_seconds = start.elapsed().as_secs_f64();
    failpoints::configure("").map_err(|e| anyhow::anyhow!("failpoint: {e}"))?;
    if bulk.is_ok() {
        bail!("the bulk copy ran through the cut-over: the failpoint did not stop it");
    }
    let copy_requests = lines.sum("serverSideCopies") + lines.sum("streamedCopies");
    let bytes_through = lines.sum("bytesThroughProcess");

    // The peer: the same prefix copied server-side into the destination bucket.
    let rclone = match peers::rclone() {
        None => Peer::NotInstalled,
        Some(bin) => {
            let src = format!("bench:{from}/{}", prefix.trim_end_matches('/'));
            let dst = format!("bench:{to}/rclone");
            let cmd = peers::rclone_copy(&bin, &endpoint, &src, &dst, PARALLELISM);
            tokio::task::spawn_blocking(move || peers::timed(cmd))
                .await
                .context("rclone")?
        }
    };

    // Some objects change; then the cut-over.
    let some: Vec<usize> = (0..changed).map(|i| i * (n / changed).max(1)).collect();
    fill(store.as_ref(), &from, &prefix, &some, 7).await?;
    let report = migrate_entry(&ctx, &req)
        .await
        .map_err(|e| anyhow::anyhow!("the cut-over failed: {e}"))?;
    let downtime = report
        .downtime_seconds
        .context("the cut-over reported no etcd downtime")?;
    simulator.abort();
    garden.stop().await;
    server.shutdown().await;

    let total_bytes: u64 = (0..n).map(|i| size_of(i) as u64).sum();
    let rows = vec![
        Row::versus(
            format!("bulk copy of {n} objects with etcd running"),
            Unit::Seconds,
            bulk_seconds,
            "rclone copy (server-side)",
            rclone.clone(),
        ),
        Row::alone(
            "object bytes through the migration",
            Unit::Bytes,
            bytes_through as f64,
        ),
        Row::alone(
            format!("etcd downtime of the cut-over ({changed} changed)"),
            Unit::Seconds,
            downtime,
        ),
    ];
    Ok(Outcome {
        title: format!(
            "granary migrate entry, {n} objects S3 → S3 on moto, cut-over with {changed} changed"
        ),
        sizes: json!({"objects": n, "changed": changed, "bytes": total_bytes}),
        rows,
        details: json!({
            "parallelism": PARALLELISM,
            "bulk_copy": {"seconds": bulk_seconds, "objects_per_second": n as f64 / bulk_seconds,
                          "copy_requests": copy_requests, "bytes_through_process": bytes_through},
            "rclone_copy_seconds": rclone.figure(),
            "cut_over": {"copy_mode": report.copy_mode, "copies": report.counters.copy_requests(),
                         "etcd_downtime_seconds": downtime},
        }),
    })
}
