//! The world of the `granary migrate` end-to-end tests: a garden and a seed embedded API
//! server, a garden controller (which gives a migration its place), one shoot whose
//! etcd-main the StatefulSet status simulator of `tests/support/etcd_sim.rs` plays,
//! buckets on the emulators (or the `local` store), and the helpers the scenarios of
//! [`crate::migrate`] and [`crate::migrate_garden`] share.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use granary_api::common::SecretReference;
use granary_api::core::{
    BackupEntry, GARDEN_NAMESPACE, LABEL_POOL_KIND, LABEL_POOL_OWNER, LABEL_REGION, LABEL_SHARD,
    Shoot, ShootSpec,
};
use granary_garden::RunningGarden;
use granary_garden::config::ProviderQuota;
use granary_migrate::manifest::{Manifest, manifest_key};
use granary_migrate::{EntryMigration, LegacyBucket, MigrateContext, Output, import_legacy};
use granary_providers::{ListEntry, ObjectMeta, ObjectStore};
use granary_runtime::clock::Clock;
use granary_runtime::selector::ObjectSelector;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::etcd_sim::EtcdSim;
use crate::seed::{Backend, CREDENTIALS, Landscape, ensure_namespace};

pub const SEED: &str = "seed-a";

/// One shoot with an entry on a seed whose etcd-main is simulated, and a garden
/// controller (which gives the migration its place in the destination).
pub struct World {
    pub land: Landscape,
    pub namespace: String,
    pub entry: String,
    pub sim: EtcdSim,
    _garden: Option<RunningGarden>,
}

/// The garden a world runs: none, or one allowing `quota` entries per bucket of the
/// backend's provider (`None`: no limit).
pub enum GardenMode {
    None,
    Quota(Option<u32>),
}

pub async fn world(backend: Backend) -> Option<World> {
    world_with(backend, GardenMode::Quota(None)).await
}

pub async fn world_with(backend: Backend, mode: GardenMode) -> Option<World> {
    let land = Landscape::start(backend).await?;
    let garden = match mode {
        GardenMode::None => None,
        GardenMode::Quota(quota) => {
            let mut config = crate::garden::config(None, None);
            config.controllers.backup_bucket.quota = quota
                .map(|limit| ProviderQuota {
                    provider: backend.provider().into(),
                    limit,
                })
                .into_iter()
                .collect();
            Some(crate::garden::start(&land.cluster, config))
        }
    };
    let namespace = land.cluster.name("garden-p");
    ensure_namespace(&land.garden, &namespace).await;
    let (entry, sim) = shoot_with_etcd(&land, &namespace, "a").await;
    Some(World {
        land,
        namespace,
        entry,
        sim,
        _garden: garden,
    })
}

/// A shoot on [`SEED`] and its simulated etcd-main; returns its entry's name.
pub async fn shoot_with_etcd(land: &Landscape, namespace: &str, name: &str) -> (String, EtcdSim) {
    let mut shoot = Shoot::new(
        name,
        ShootSpec {
            seed_name: Some(SEED.into()),
            region: "us-east-1".into(),
            ..ShootSpec::default()
        },
    );
    shoot.metadata.namespace = Some(namespace.to_string());
    let shoot = Api::<Shoot>::namespaced(land.garden.clone(), namespace)
        .create(&PostParams::default(), &shoot)
        .await
        .expect("create shoot");
    let entry = shoot.backup_entry_name().expect("the shoot has a uid");
    let sim = EtcdSim::start(
        land.seed.clone(),
        &shoot.technical_id(),
        3,
        Duration::from_millis(30),
    )
    .await;
    (entry, sim)
}

impl World {
    pub fn ctx(&self, parallelism: usize) -> MigrateContext {
        MigrateContext {
            garden: self.land.garden.clone(),
            seed: self.land.seed.clone(),
            store_options: self.land.store_options(),
            clock: Clock::system(),
            garden_config: Default::default(),
            parallelism,
            etcd_timeout: Duration::from_secs(60),
            garden_timeout: Duration::from_secs(60),
            output: Output::Silent,
        }
    }

    pub fn request(&self, to_bucket: &str) -> EntryMigration {
        EntryMigration {
            namespace: self.namespace.clone(),
            name: self.entry.clone(),
            to_bucket: to_bucket.to_string(),
            dry_run: false,
            delete_source_now: false,
            // The world's two buckets belong to two CloudProfiles (two pools), so that
            // their quotas can be told apart; moving between them is on purpose here.
            allow_other_pool: true,
        }
    }

    pub fn entries(&self) -> Api<BackupEntry> {
        self.land.entries(&self.namespace)
    }

    /// A legacy bucket holding the entry, registered through `legacy import`.
    pub async fn legacy_source(&self) -> String {
        let bucket = format!("{}--legacy", self.sim.namespace);
        self.land
            .store()
            .await
            .ensure_bucket(&bucket, &Default::default())
            .await
            .expect("legacy bucket at the provider");
        let item = LegacyBucket {
            shoot_namespace: self.namespace.clone(),
            shoot_name: "a".into(),
            bucket: bucket.clone(),
            provider: self.land.backend.provider().into(),
            region: "us-east-1".into(),
            secret_ref: SecretReference {
                name: CREDENTIALS.into(),
                namespace: GARDEN_NAMESPACE.into(),
            },
        };
        let selector = ObjectSelector::new(Some(self.land.cluster.object_selector.clone()));
        let out = import_legacy(&self.land.garden, std::slice::from_ref(&item), &selector)
            .await
            .expect("import");
        assert_eq!(out[0].result, "created", "{out:?}");
        // Importing again changes nothing.
        let again = import_legacy(&self.land.garden, &[item], &selector)
            .await
            .expect("import again");
        assert_eq!(again[0].result, "unchanged");
        bucket
    }

    /// A shared bucket (garden object and provider bucket): shard 0 of a pool of its own.
    pub async fn shared_bucket(&self, tag: &str) -> String {
        let name = self.land.bucket_name(tag);
        self.land.create_bucket(&name, SEED).await;
        let pool = json!({ "metadata": { "labels": {
            LABEL_POOL_KIND: "cloudprofile",
            LABEL_POOL_OWNER: format!("profile-{tag}"),
            LABEL_REGION: "us-east-1",
            LABEL_SHARD: "0",
        }}});
        self.land
            .buckets()
            .patch(&name, &PatchParams::default(), &Patch::Merge(&pool))
            .await
            .expect("label the bucket a pool shard");
        self.land
            .store()
            .await
            .ensure_bucket(&name, &Default::default())
            .await
            .expect("bucket at the provider");
        name
    }

    /// The store and two shared buckets, `src` holding the entry and an empty `dst`.
    pub async fn src_and_dst(&self) -> (std::sync::Arc<dyn ObjectStore>, String, String) {
        let store = self.land.store().await;
        let src = self.shared_bucket("src").await;
        let dst = self.shared_bucket("dst").await;
        self.entry_in(&src).await;
        (store, src, dst)
    }

    /// Shared entry: the entry placed in `bucket` (as the garden would have).
    pub async fn entry_in(&self, bucket: &str) {
        self.land
            .create_entry(&self.namespace, &self.entry, bucket, SEED, &[])
            .await;
    }

    pub async fn entry_obj(&self) -> BackupEntry {
        self.entries().get(&self.entry).await.expect("get entry")
    }

    pub async fn manifest(&self, store: &dyn ObjectStore, dst: &str, src: &str) -> Manifest {
        let key = manifest_key(&format!("{}/", self.entry), src);
        let bytes = granary_providers::get_bytes(store, dst, &key)
            .await
            .expect("manifest in the destination");
        Manifest::decode(&bytes).expect("valid manifest")
    }
}

/// Writes `n` objects of varying size under `prefix`.
pub async fn fill(store: &dyn ObjectStore, bucket: &str, prefix: &str, n: usize, tag: &str) {
    futures::stream::iter(0..n)
        .map(|i| {
            let key = format!("{prefix}etcd-main/{tag}-{i:05}");
            let body = Bytes::from(format!("{tag}-{i}-").repeat(1 + i % 7));
            async move { store.put(bucket, &key, body).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .expect("objects written");
}

/// `relative key -> meta` under `prefix`, without Granary's `.granary/` objects.
pub async fn listing(
    store: &dyn ObjectStore,
    bucket: &str,
    prefix: &str,
) -> BTreeMap<String, ObjectMeta> {
    granary_providers::list_all(store, bucket, prefix, None)
        .await
        .expect("list")
        .into_iter()
        .filter_map(|e| match e {
            ListEntry::Object(m) => Some(m),
            ListEntry::Prefix(_) => None,
        })
        .filter_map(|m| {
            let rel = m.key.strip_prefix(prefix)?.to_string();
            (!rel.starts_with(".granary/")).then_some((rel, m))
        })
        .collect()
}

pub async fn same_bytes(
    src: &dyn ObjectStore,
    src_bucket: &str,
    src_prefix: &str,
    dst: &dyn ObjectStore,
    dst_bucket: &str,
    dst_prefix: &str,
    keys: &[String],
) {
    futures::stream::iter(keys)
        .map(|k| async move {
            let a = granary_providers::get_bytes(src, src_bucket, &format!("{src_prefix}{k}"))
                .await
                .expect("source object");
            let b = granary_providers::get_bytes(dst, dst_bucket, &format!("{dst_prefix}{k}"))
                .await
                .expect("destination object");
            assert_eq!(a, b, "{k} differs");
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
}

pub async fn etcd_secret_bucket(w: &World) -> Option<String> {
    let secret = Api::<Secret>::namespaced(w.land.seed.clone(), &w.sim.namespace)
        .get_opt("etcd-backup")
        .await
        .expect("get secret")?;
    let data = secret.data.unwrap_or_default();
    data.get("bucketName")
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
}

/// `granary migrate --json …` for the world's garden, seed and local store.
pub fn migrate_command(w: &World) -> tokio::process::Command {
    let seed = w.land.cluster.seed.as_ref().expect("separate seed");
    let mut cmd = tokio::process::Command::new(crate::granary_bin());
    cmd.args([
        "migrate",
        "--json",
        "--parallelism",
        "4",
        "--etcd-timeout-seconds",
        "60",
    ])
    .arg("--garden-kubeconfig")
    .arg(&w.land.cluster.garden.kubeconfig_path)
    .arg("--seed-kubeconfig")
    .arg(&seed.kubeconfig_path)
    .arg("--data-dir")
    .arg(w.land.data_dir.path())
    .env("AWS_EC2_METADATA_DISABLED", "true")
    .stdin(Stdio::null())
    .kill_on_drop(true);
    cmd
}

/// Runs the `granary migrate entry` binary once; returns (success, copy requests, stdout).
pub async fn run_binary(
    w: &World,
    to_bucket: &str,
    failpoints: Option<&str>,
) -> (bool, u64, String) {
    let mut cmd = migrate_command(w);
    cmd.args([
        "entry",
        &format!("{}/{}", w.namespace, w.entry),
        "--to-bucket",
        to_bucket,
        "--allow-other-pool",
    ]);
    match failpoints {
        Some(spec) => cmd.env("GRANARY_FAILPOINTS", spec),
        None => cmd.env_remove("GRANARY_FAILPOINTS"),
    };
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("granary migrate finishes")
        .expect("granary migrate runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut copies = 0;
    for line in stdout.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        if v["event"] == "pass" {
            copies += v["counters"]["serverSideCopies"].as_u64().unwrap_or(0)
                + v["counters"]["streamedCopies"].as_u64().unwrap_or(0);
        }
    }
    if failpoints.is_none() {
        assert!(out.status.success(), "migrate failed: {stderr}\n{stdout}");
    }
    (out.status.success(), copies, stdout)
}
