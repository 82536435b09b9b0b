//! `granary migrate` end to end: a garden and a seed embedded API server, object stores
//! on the emulators (or the `local` store), etcd-main played by the StatefulSet status
//! simulator of `tests/support/etcd_sim.rs`. Scenarios: a legacy per-shoot bucket of
//! 3,000 objects on moto into a shared bucket; objects added and deleted between plan
//! and cut-over; a failpoint in every phase with the copy requests counted over the
//! re-runs; a cross-provider (streamed) move; `--dry-run` changing nothing.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use granary::api::common::SecretReference;
use granary::api::core::{
    BackupBucketProvider, BackupBucketSpec, BackupEntry, GARDEN_NAMESPACE, LABEL_POOL_KIND,
    LABEL_POOL_OWNER, LABEL_REGION, LABEL_SEED, LABEL_SHARD, Shoot, ShootSpec,
};
use granary::garden::RunningGarden;
use granary::migrate::manifest::{Manifest, ObjectState, manifest_key};
use granary::migrate::phase::{ANNOTATION_ETCD_REPLICAS, ANNOTATION_PHASE};
use granary::migrate::{
    EntryMigration, LegacyBucket, MigrateContext, Output, discover_legacy, import_legacy,
    migrate_entry, migration_status,
};
use granary::runtime::clock::Clock;
use granary::runtime::config::ProviderQuota;
use granary::runtime::selector::ObjectSelector;
use granary_providers::{ListEntry, ObjectMeta, ObjectStore, SecretData};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::etcd_sim::EtcdSim;
use crate::seed_support::{Backend, CREDENTIALS, Landscape, ensure_namespace};

pub(crate) const SEED: &str = "seed-a";

/// One shoot with an entry on a seed whose etcd-main is simulated, and a garden
/// controller (which gives the migration its place in the destination).
pub(crate) struct World {
    pub(crate) land: Landscape,
    pub(crate) namespace: String,
    pub(crate) entry: String,
    pub(crate) sim: EtcdSim,
    _garden: Option<RunningGarden>,
}

/// The garden a world runs: none, or one allowing `quota` entries per bucket of the
/// backend's provider (`None`: no limit).
pub(crate) enum GardenMode {
    None,
    Quota(Option<u32>),
}

pub(crate) async fn world(backend: Backend) -> Option<World> {
    world_with(backend, GardenMode::Quota(None)).await
}

pub(crate) async fn world_with(backend: Backend, mode: GardenMode) -> Option<World> {
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
pub(crate) async fn shoot_with_etcd(
    land: &Landscape,
    namespace: &str,
    name: &str,
) -> (String, EtcdSim) {
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
    pub(crate) fn ctx(&self, parallelism: usize) -> MigrateContext {
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

    pub(crate) fn request(&self, to_bucket: &str) -> EntryMigration {
        EntryMigration {
            namespace: self.namespace.clone(),
            name: self.entry.clone(),
            to_bucket: to_bucket.to_string(),
            dry_run: false,
            delete_source_now: false,
        }
    }

    pub(crate) fn entries(&self) -> Api<BackupEntry> {
        self.land.entries(&self.namespace)
    }

    /// A legacy bucket holding the entry, registered through `legacy import`.
    async fn legacy_source(&self) -> String {
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
    pub(crate) async fn shared_bucket(&self, tag: &str) -> String {
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
    pub(crate) async fn src_and_dst(&self) -> (std::sync::Arc<dyn ObjectStore>, String, String) {
        let store = self.land.store().await;
        let src = self.shared_bucket("src").await;
        let dst = self.shared_bucket("dst").await;
        self.entry_in(&src).await;
        (store, src, dst)
    }

    /// Shared entry: the entry placed in `bucket` (as the garden would have).
    pub(crate) async fn entry_in(&self, bucket: &str) {
        self.land
            .create_entry(&self.namespace, &self.entry, bucket, SEED, &[])
            .await;
    }

    pub(crate) async fn entry_obj(&self) -> BackupEntry {
        self.entries().get(&self.entry).await.expect("get entry")
    }

    async fn manifest(&self, store: &dyn ObjectStore, dst: &str, src: &str) -> Manifest {
        let key = manifest_key(&format!("{}/", self.entry), src);
        let bytes = granary_providers::get_bytes(store, dst, &key)
            .await
            .expect("manifest in the destination");
        Manifest::decode(&bytes).expect("valid manifest")
    }
}

/// Writes `n` objects of varying size under `prefix`.
pub(crate) async fn fill(store: &dyn ObjectStore, bucket: &str, prefix: &str, n: usize, tag: &str) {
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
pub(crate) async fn listing(
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

async fn same_bytes(
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

pub(crate) async fn etcd_secret_bucket(w: &World) -> Option<String> {
    let secret = Api::<Secret>::namespaced(w.land.seed.clone(), &w.sim.namespace)
        .get_opt("etcd-backup")
        .await
        .expect("get secret")?;
    let data = secret.data.unwrap_or_default();
    data.get("bucketName")
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_bucket_of_3000_objects_on_moto_moves_into_a_shared_bucket() {
    let Some(w) = world(Backend::S3).await else {
        return;
    };
    let store = w.land.store().await;
    let legacy = w.legacy_source().await;
    let shared = w.shared_bucket("dst").await;
    fill(store.as_ref(), &legacy, "", 3000, "obj").await;
    // The legacy entry's prefix is the bucket root: the import's entry points there.
    assert_eq!(w.entry_obj().await.spec.bucket_name, legacy);

    let started = std::time::Instant::now();
    let report = migrate_entry(&w.ctx(16), &w.request(&shared))
        .await
        .expect("migration succeeds");
    eprintln!("3000 objects migrated in {:?}: {report}", started.elapsed());
    assert_eq!(report.phase, "Done");
    assert_eq!(report.counters.server_side_copies, 3000);
    assert_eq!(report.counters.bytes_through_process, 0);
    assert!(report.downtime_seconds.is_some());

    let src = listing(store.as_ref(), &legacy, "").await;
    let dst_prefix = format!("{}/", w.entry);
    let dst = listing(store.as_ref(), &shared, &dst_prefix).await;
    assert_eq!(src.len(), 3000);
    assert_eq!(
        src.iter()
            .map(|(k, m)| (k, m.size, &m.etag))
            .collect::<Vec<_>>(),
        dst.iter()
            .map(|(k, m)| (k, m.size, &m.etag))
            .collect::<Vec<_>>(),
        "same keys, sizes and etags"
    );
    let sample: Vec<String> = src.keys().step_by(60).cloned().collect();
    same_bytes(
        store.as_ref(),
        &legacy,
        "",
        store.as_ref(),
        &shared,
        &dst_prefix,
        &sample,
    )
    .await;
    let manifest = w.manifest(store.as_ref(), &shared, &legacy).await;
    assert_eq!(manifest.objects.len(), 3000);
    assert!(
        manifest
            .objects
            .iter()
            .all(|o| o.state == ObjectState::Copied)
    );

    // etcd back, entry switched, secret switched, source handed over for deletion.
    w.sim.wait_ready(3).await;
    let entry = w.entry_obj().await;
    assert_eq!(entry.spec.bucket_name, shared);
    assert!(!entry.annotations().contains_key(ANNOTATION_PHASE));
    assert!(!entry.annotations().contains_key(ANNOTATION_ETCD_REPLICAS));
    assert_eq!(
        etcd_secret_bucket(&w).await.as_deref(),
        Some(shared.as_str())
    );
    let source = w
        .entries()
        .get_opt(&format!("source-{}", w.entry))
        .await
        .expect("get source entry");
    assert!(source.is_none_or(|s| s.metadata.deletion_timestamp.is_some()));
    let legacy_bucket = w.land.buckets().get_opt(&legacy).await.expect("get bucket");
    assert!(legacy_bucket.is_none_or(|b| b.metadata.deletion_timestamp.is_some()));
    let dst_bucket = w.land.buckets().get(&shared).await.expect("get bucket");
    assert_eq!(dst_bucket.status.and_then(|s| s.entry_count), Some(1));

    // Running it again is a no-op.
    let again = migrate_entry(&w.ctx(16), &w.request(&shared))
        .await
        .expect("no-op");
    assert!(again.already_there);
}

/// `granary migrate --json …` for the world's garden, seed and local store.
pub(crate) fn migrate_command(w: &World) -> tokio::process::Command {
    let seed = w.land.cluster.seed.as_ref().expect("separate seed");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_granary"));
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
pub(crate) async fn run_binary(
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failpoint_in_every_phase_then_a_rerun_copies_nothing_twice() {
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    let (store, from, to) = w.src_and_dst().await;
    let prefix = format!("{}/", w.entry);
    fill(store.as_ref(), &from, &prefix, 40, "o").await;

    let mut copies = 0;
    for (point, phase_after) in [
        ("migrate.plan.written=1:error", None),
        ("migrate.copy.object=5:error", Some("Copy")),
        ("migrate.cutover.scaled-down=1:error", Some("CutOver")),
        ("migrate.cutover.before-switch=1:error", Some("CutOver")),
        ("migrate.scale-up=1:error", Some("ScaleUp")),
        ("migrate.cleanup=1:error", Some("Cleanup")),
    ] {
        let (ok, n, out) = run_binary(&w, &to, Some(point)).await;
        assert!(!ok, "{point} stops the run: {out}");
        copies += n;
        let entry = w.entry_obj().await;
        assert_eq!(
            entry
                .annotations()
                .get(ANNOTATION_PHASE)
                .map(String::as_str),
            phase_after,
            "phase recorded after {point}"
        );
        if phase_after != Some("ScaleUp") {
            // A cut-over failure brings etcd back on the old configuration.
            w.sim.wait_ready(3).await;
            assert!(!entry.annotations().contains_key(ANNOTATION_ETCD_REPLICAS));
        }
        if phase_after == Some("CutOver") {
            assert_eq!(
                entry.spec.bucket_name, from,
                "not switched before the switch"
            );
        }
        let status = migration_status(&w.land.garden).await.expect("status");
        let ours = status
            .iter()
            .find(|s| s.entry == format!("{}/{}", w.namespace, w.entry));
        assert_eq!(ours.map(|s| s.phase.as_str()), phase_after, "{status:?}");
    }
    let (_, n, _) = run_binary(&w, &to, None).await;
    copies += n;
    assert_eq!(copies, 40, "every object copied exactly once over all runs");
    w.sim.wait_ready(3).await;
    assert_eq!(w.entry_obj().await.spec.bucket_name, to);
    let src = listing(store.as_ref(), &from, &prefix).await;
    let dst = listing(store.as_ref(), &to, &prefix).await;
    assert_eq!(
        src.keys().collect::<Vec<_>>(),
        dst.keys().collect::<Vec<_>>()
    );
    let keys: Vec<String> = src.keys().cloned().collect();
    same_bytes(
        store.as_ref(),
        &from,
        &prefix,
        store.as_ref(),
        &to,
        &prefix,
        &keys,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_added_and_deleted_between_plan_and_cut_over() {
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    let (store, from, to) = w.src_and_dst().await;
    let prefix = format!("{}/", w.entry);
    fill(store.as_ref(), &from, &prefix, 30, "o").await;

    // Stop at the first copy: the plan (30 objects) is committed, nothing copied.
    let (ok, n, _) = run_binary(&w, &to, Some("migrate.copy.object=1:error")).await;
    assert!(!ok);
    assert_eq!(n, 0);
    // Gone before being copied (etcd's garbage collection) → NotFound in the copy.
    let gone_early = format!("{prefix}etcd-main/o-00003");
    store
        .delete_many(&from, &[gone_early])
        .await
        .expect("delete");
    // Copy everything, stop when etcd is down (before the final copy).
    let (ok, _, _) = run_binary(&w, &to, Some("migrate.cutover.scaled-down=1:error")).await;
    assert!(!ok);
    // Between the bulk copy and the cut-over: one object is deleted after it was
    // copied, one changes, two are new.
    let gone_late = format!("{prefix}etcd-main/o-00007");
    store
        .delete_many(&from, &[gone_late])
        .await
        .expect("delete");
    store
        .put(
            &from,
            &format!("{prefix}etcd-main/o-00010"),
            Bytes::from_static(b"changed!"),
        )
        .await
        .expect("change");
    for k in ["new-1", "new-2"] {
        store
            .put(
                &from,
                &format!("{prefix}etcd-main/{k}"),
                Bytes::from(k.to_string()),
            )
            .await
            .expect("add");
    }
    let (ok, n, out) = run_binary(&w, &to, None).await;
    assert!(ok, "{out}");
    assert_eq!(
        n, 3,
        "the final copy takes the changed and the new objects only"
    );

    let m = w.manifest(store.as_ref(), &to, &from).await;
    let state = |k: &str| {
        m.objects
            .iter()
            .find(|o| o.key == format!("etcd-main/{k}"))
            .map(|o| o.state)
    };
    assert_eq!(state("o-00003"), Some(ObjectState::NotFound));
    assert_eq!(state("o-00007"), Some(ObjectState::NotFound));
    assert_eq!(state("o-00010"), Some(ObjectState::Copied));
    assert_eq!(state("new-1"), Some(ObjectState::Copied));
    assert_eq!(state("new-2"), Some(ObjectState::Copied));
    assert_eq!(m.objects.len(), 32);
    let src = listing(store.as_ref(), &from, &prefix).await;
    let dst = listing(store.as_ref(), &to, &prefix).await;
    assert_eq!(
        src.keys().collect::<Vec<_>>(),
        dst.keys().collect::<Vec<_>>(),
        "the destination mirrors the source at cut-over"
    );
    let keys: Vec<String> = src.keys().cloned().collect();
    same_bytes(
        store.as_ref(),
        &from,
        &prefix,
        store.as_ref(),
        &to,
        &prefix,
        &keys,
    )
    .await;
    w.sim.wait_ready(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_left_copy_is_found_by_head_and_not_copied_again() {
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    let (store, from, to) = w.src_and_dst().await;
    let prefix = format!("{}/", w.entry);
    fill(store.as_ref(), &from, &prefix, 12, "o").await;
    // First copy pass fails on its first object: the manifest is written, the pass
    // counted, nothing copied.
    let (ok, n, _) = run_binary(&w, &to, Some("migrate.copy.object=1:error")).await;
    assert!(!ok);
    assert_eq!(n, 0);
    // What a crash after four copies (before the manifest was saved) would leave.
    for i in 0..4 {
        let key = format!("{prefix}etcd-main/o-{i:05}");
        store.copy(&from, &key, &to, &key).await.expect("copy");
    }
    let (ok, n, out) = run_binary(&w, &to, None).await;
    assert!(ok);
    assert_eq!(n, 8, "the four present objects are skipped: {out}");
    let skipped: u64 = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "pass")
        .map(|v| v["counters"]["skippedPresent"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(skipped, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_provider_move_streams_identical_bytes_from_local_to_s3() {
    let Some(w) = world(Backend::S3).await else {
        return;
    };
    // Source: a `local` bucket with its own credentials secret.
    let local_secret = "local-credentials";
    let mut secret = Secret {
        data: Some(BTreeMap::from([(
            "note".to_string(),
            ByteString(b"the local store needs none".to_vec()),
        )])),
        ..Default::default()
    };
    secret.metadata.name = Some(local_secret.into());
    Api::<Secret>::namespaced(w.land.garden.clone(), GARDEN_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    let from = w.land.bucket_name("loc");
    let mut b = granary::api::core::BackupBucket::new(
        &from,
        BackupBucketSpec {
            provider: BackupBucketProvider {
                type_: "local".into(),
                region: "local".into(),
            },
            credentials_ref: Some(granary::api::common::ObjectReference {
                api_version: "v1".into(),
                kind: "Secret".into(),
                name: local_secret.into(),
                namespace: GARDEN_NAMESPACE.into(),
                ..Default::default()
            }),
            seed_name: Some(SEED.into()),
            ..Default::default()
        },
    );
    b.metadata.labels = Some(BTreeMap::from([(LABEL_SEED.to_string(), SEED.to_string())]));
    w.land
        .buckets()
        .create(&PostParams::default(), &b)
        .await
        .expect("create local bucket");
    let local = granary_providers::open("local", None, &SecretData::new(), &w.land.store_options())
        .await
        .expect("local store");
    local
        .ensure_bucket(&from, &Default::default())
        .await
        .expect("local bucket");
    let to = w.shared_bucket("s3").await;
    w.entry_in(&from).await;
    let prefix = format!("{}/", w.entry);
    fill(local.as_ref(), &from, &prefix, 20, "x").await;
    // One object larger than a single read buffer.
    let big: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    local
        .put(
            &from,
            &format!("{prefix}etcd-main/full-snapshot"),
            Bytes::from(big.clone()),
        )
        .await
        .expect("big object");

    let report = migrate_entry(&w.ctx(4), &w.request(&to))
        .await
        .expect("migration succeeds");
    assert_eq!(report.counters.streamed_copies, 21);
    assert_eq!(report.counters.server_side_copies, 0);
    let s3 = w.land.store().await;
    let src = listing(local.as_ref(), &from, &prefix).await;
    let dst = listing(s3.as_ref(), &to, &prefix).await;
    assert_eq!(
        src.keys().collect::<Vec<_>>(),
        dst.keys().collect::<Vec<_>>()
    );
    let total: u64 = src.values().map(|m| m.size).sum();
    assert_eq!(report.counters.bytes_through_process, total);
    let keys: Vec<String> = src.keys().cloned().collect();
    same_bytes(
        local.as_ref(),
        &from,
        &prefix,
        s3.as_ref(),
        &to,
        &prefix,
        &keys,
    )
    .await;
    assert_eq!(etcd_secret_bucket(&w).await.as_deref(), Some(to.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_changes_nothing() {
    // No garden: a dry run does not need one (and nothing may change the objects the
    // test compares).
    let Some(w) = world_with(Backend::Local, GardenMode::None).await else {
        return;
    };
    let store = w.land.store().await;
    let legacy = w.legacy_source().await;
    let to = w.shared_bucket("dst").await;
    fill(store.as_ref(), &legacy, "", 25, "d").await;
    // Discovery from the seed's `backup--<bucket>` namespace finds the same bucket.
    ensure_namespace(&w.land.seed, &format!("backup--{legacy}")).await;
    let secret_ref = SecretReference {
        name: CREDENTIALS.into(),
        namespace: GARDEN_NAMESPACE.into(),
    };
    let found = discover_legacy(
        &w.land.garden,
        &w.land.seed,
        "local",
        "us-east-1",
        &secret_ref,
    )
    .await
    .expect("discover");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].bucket, legacy);
    let selector = ObjectSelector::new(Some(w.land.cluster.object_selector.clone()));
    let imported = import_legacy(&w.land.garden, &found, &selector)
        .await
        .expect("import");
    assert_eq!(imported[0].result, "unchanged");
    let before = (
        listing(store.as_ref(), &legacy, "").await,
        listing(store.as_ref(), &to, "").await,
        w.entry_obj().await,
        w.land.buckets().get(&to).await.expect("bucket"),
        w.sim.state().await,
    );
    let mut req = w.request(&to);
    req.dry_run = true;
    let report = migrate_entry(&w.ctx(8), &req).await.expect("plan");
    assert!(report.dry_run);
    assert_eq!(report.objects, 25);
    assert_eq!(report.pending, 25);
    assert!(report.bytes > 0);
    assert!(report.estimated_seconds.is_some_and(|s| s > 0.0));
    assert_eq!(report.counters.copy_requests(), 0);
    let after = (
        listing(store.as_ref(), &legacy, "").await,
        listing(store.as_ref(), &to, "").await,
        w.entry_obj().await,
        w.land.buckets().get(&to).await.expect("bucket"),
        w.sim.state().await,
    );
    assert_eq!(before.0, after.0, "source untouched");
    assert!(after.1.is_empty(), "nothing written to the destination");
    assert_eq!(
        before.2.resource_version(),
        after.2.resource_version(),
        "entry untouched"
    );
    assert_eq!(
        before.3.resource_version(),
        after.3.resource_version(),
        "bucket untouched"
    );
    assert_eq!(before.4, after.4, "etcd untouched");
    assert!(
        w.entries()
            .get_opt(&format!("source-{}", w.entry))
            .await
            .expect("get")
            .is_none()
    );

    // A legacy bucket is never a target, even for a dry run.
    let mut back = w.request(&legacy);
    back.dry_run = true;
    w.entries()
        .patch(
            &w.entry,
            &Default::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"bucketName": to}})),
        )
        .await
        .expect("patch");
    let err = migrate_entry(&w.ctx(8), &back).await.expect_err("refused");
    assert!(err.to_string().contains("legacy"), "{err}");
}
