//! Benchmark of recovery across seeds (docs/architecture.md#sibling-locations): how long
//! after a seed is lost its backups are listed on a seed of its pool, ready to restore.
//!
//! One garden API server and one seed API server (seed `b`), a `local` store, the
//! landscape's integrity key in the garden. The pool's bucket carries `b`'s reader label,
//! as the garden's bucket controller sets it. `granary seed` for `b` runs in-process with
//! `velero.backupSyncPeriod` P; seed `a` never runs: its backups are written into
//! `velero/a/` of the bucket as its backup runner writes them (tarball, manifest,
//! resource list, results, `velero-backup.json`, the signed record), and nothing of it is
//! needed for `b` to list them.
//!
//! The peer is what a Velero admin does by hand, minus the human: a read-only
//! BackupStorageLocation of the lost seed's prefix, with the same credentials and the
//! same sync period, in another Velero namespace of the same seed, served by Granary's
//! own location and sync controllers (`granary server`'s). Two measures, each from the
//! moment the lost seed's last backups are in the bucket until all of them are listed
//! and verified (side by side with the peer), and until the first is (the wait, against
//! its bound):
//! - a seed `b` already read (its location made before): the wait is at most P;
//! - a seed never read before (`velero/c/`, no location yet; the peer's location is made
//!   at that moment): the seed finds the prefix, then syncs it, at most 2P.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use chrono::Utc;
use granary_api::core::{BackupBucket, BackupBucketSpec, velero_reader_label};
use granary_api::crds::{self, Side};
use granary_api::velero::{
    Backup, BackupPhase, BackupSpec, BackupStatus, BackupStorageLocation,
    BackupStorageLocationAccessMode, BackupStorageLocationSpec, INTEGRITY_ANNOTATION,
    ObjectStorageLocation,
};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_providers::{ObjectStore, StoreOptions};
use granary_runtime::clock::Clock;
use granary_runtime::config::ConfigDuration;
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_velero::archive::ArchiveWriter;
use granary_velero::files::{Results, encode_backup_json};
use granary_velero::integrity::{Keyring, ObjectDigest, RecordKind};
use granary_velero::layout::StorageLayout;
use granary_velero::resource::GroupResource;
use granary_velero_server::context::VeleroContext;
use granary_velero_server::integrity::{self, KeySource};
use granary_velero_server::metrics::VeleroMetrics;
use granary_velero_server::settings::{
    CONTROLLER_BACKUP_STORAGE_LOCATION, CONTROLLER_BACKUP_SYNC, CONTROLLERS, VeleroSettings,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::support::{Scratch, create};
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};

/// The sync period of both sides.
const PERIOD: Duration = Duration::from_secs(2);
const BUCKET: &str = "pool-eu-1";
const SEED: &str = "b";
/// Seed `b`'s Velero namespace, and the peer's.
const VELERO: &str = "velero";
const PEER: &str = "velero-peer";
/// Items in each backup.
const ITEMS: usize = 20;

/// Writes backup `name` of seed `seed` as the backup runner does, signed with `keyring`.
async fn write_backup(
    store: &dyn ObjectStore,
    seed: &str,
    name: &str,
    keyring: &Keyring,
) -> anyhow::Result<()> {
    let layout = StorageLayout::new(BUCKET, Some(&format!("velero/{seed}")))?;
    let keys = layout.backup(name)?;
    let mut tarball = Vec::new();
    let mut w = ArchiveWriter::new(&mut tarball, Utc::now())?;
    let cms = GroupResource::new("", "configmaps");
    for i in 0..ITEMS {
        let item = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": "app", "uid": format!("u-{i}")},
            "data": {"value": format!("{seed}/{name}/{i}")},
        });
        w.add_item(&cms, "v1", &item)?;
    }
    let (_, mut manifest) = w.finish()?;
    let mut backup = Backup::new(name, BackupSpec::default());
    backup.metadata.namespace = Some(VELERO.into());
    backup.spec.included_namespaces = Some(vec!["app".into()]);
    backup.status = Some(BackupStatus {
        phase: Some(BackupPhase::Completed),
        start_timestamp: Some(Utc::now()),
        completion_timestamp: Some(Utc::now()),
        ..Default::default()
    });
    let files: Vec<(String, Vec<u8>)> = vec![
        (format!("{name}.tar.gz"), tarball),
        ("manifest.json.gz".into(), manifest.write_gz(Vec::new())?),
        (
            format!("{name}-resource-list.json.gz"),
            manifest.write_resource_list_gz(Vec::new())?,
        ),
        (
            format!("{name}-results.gz"),
            Results::default().to_gz_bytes(),
        ),
        ("velero-backup.json".into(), encode_backup_json(&backup)),
    ];
    let digests: BTreeMap<String, ObjectDigest> = files
        .iter()
        .map(|(n, d)| (n.clone(), ObjectDigest::of(d)))
        .collect();
    let record = integrity::sign(RecordKind::Backup, name, None, digests, keyring)
        .map_err(anyhow::Error::msg)?;
    // The record last, as the runner writes it: a listed backup is a whole one.
    for (n, d) in files {
        store
            .put(BUCKET, &format!("{}{n}", keys.dir()), Bytes::from(d))
            .await?;
    }
    integrity::put_record(store, BUCKET, &keys.integrity(), &record)
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(())
}

/// When `names` were listed as verified Backups of `location` in `namespace`: seconds
/// from `start` until the first was, and until all were; polled every 20 ms, for at
/// most `limit`.
async fn listed(
    client: &Client,
    namespace: &str,
    location: &str,
    names: &[String],
    start: Instant,
    limit: Duration,
) -> anyhow::Result<(f64, f64)> {
    let api: Api<Backup> = Api::namespaced(client.clone(), namespace);
    let mut first = None;
    loop {
        let backups = api.list(&ListParams::default()).await?.items;
        let verified = names
            .iter()
            .filter(|n| {
                backups.iter().any(|b| {
                    b.stored_name() == **n
                        && b.spec.storage_location.as_deref() == Some(location)
                        && b.annotations()
                            .get(INTEGRITY_ANNOTATION)
                            .map(String::as_str)
                            == Some("verified")
                })
            })
            .count();
        let now = start.elapsed().as_secs_f64();
        if verified > 0 {
            first.get_or_insert(now);
        }
        if verified == names.len() {
            return Ok((first.unwrap_or(now), now));
        }
        anyhow::ensure!(
            start.elapsed() < limit,
            "{verified} of {} backups listed in {namespace}/{location} after {limit:?}",
            names.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The peer's read-only location of seed `seed`'s prefix.
async fn peer_location(client: &Client, seed: &str) -> anyhow::Result<()> {
    let mut l = BackupStorageLocation::new(
        &format!("by-hand-{seed}"),
        BackupStorageLocationSpec {
            provider: "local".into(),
            object_storage: ObjectStorageLocation {
                bucket: BUCKET.into(),
                prefix: Some(format!("velero/{seed}")),
                ..Default::default()
            },
            access_mode: Some(BackupStorageLocationAccessMode::ReadOnly),
            ..Default::default()
        },
    );
    l.metadata.namespace = Some(PEER.into());
    Api::<BackupStorageLocation>::namespaced(client.clone(), PEER)
        .create(&PostParams::default(), &l)
        .await?;
    Ok(())
}

async fn install(client: &Client, side: Side) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::crds(Some(side)) {
        create(&api, &crd).await?;
    }
    Ok(())
}

async fn namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    create(&Api::<Namespace>::all(client.clone()), &ns).await
}

pub(crate) async fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let count = opts.size.unwrap_or(50).max(1);
    let dir = Scratch::new("seed-failover").context("scratch directory")?;
    let store_options = StoreOptions {
        local_root: Some(dir.path().to_path_buf()),
        ..StoreOptions::default()
    };
    let store = granary_providers::open("local", None, &Default::default(), &store_options)
        .await
        .context("local store")?;
    store
        .ensure_bucket(BUCKET, &Default::default())
        .await
        .context("bucket")?;

    let garden_server = EmbeddedServer::start(EmbeddedOptions::default()).await?;
    let seed_server = EmbeddedServer::start(EmbeddedOptions::default()).await?;
    let garden = garden_server.client().await?;
    let seed = seed_server.client().await?;
    install(&garden, Side::Garden).await?;
    install(&seed, Side::Seed).await?;
    namespace(&garden, "garden").await?;
    namespace(&seed, PEER).await?;
    let keyring = integrity::ensure(&garden, "garden")
        .await
        .map_err(|e| anyhow::anyhow!("integrity keys: {e}"))?;

    // The pool's bucket, ready, read by seed b (as the garden labels it).
    let mut bucket = BackupBucket::new(BUCKET, BackupBucketSpec::default());
    bucket.spec.provider.type_ = "local".into();
    bucket.spec.provider.region = "eu-1".into();
    bucket.metadata.labels = Some(BTreeMap::from([(
        velero_reader_label(SEED),
        "true".to_string(),
    )]));
    let buckets: Api<BackupBucket> = Api::all(garden.clone());
    create(&buckets, &bucket).await?;
    buckets
        .patch_status(
            BUCKET,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"lastOperation": {
                "type": "Create", "state": "Succeeded", "progress": 100,
                "description": "ready", "lastUpdateTime": Utc::now(),
            }}})),
        )
        .await?;

    // Seed b, and the peer beside it, once the seed serves the Velero kinds (a CRD is
    // served a moment after its create; the agent looks once, at start).
    let served: Api<BackupStorageLocation> = Api::namespaced(seed.clone(), VELERO);
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = served.list(&ListParams::default().limit(1)).await {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the Velero kinds are not served: {e}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut config = granary_seed::config::SeedConfiguration {
        seed_name: SEED.into(),
        ..Default::default()
    };
    config.leader_election.enabled = false;
    config.velero.namespace = VELERO.into();
    config.velero.backup_sync_period = ConfigDuration(PERIOD);
    config.velero.default_location.enabled = false;
    let agent = granary_seed::SeedAgent::new(garden.clone(), seed.clone(), config)
        .store_options(store_options.clone())
        .start()
        .await
        .map_err(|e| anyhow::anyhow!("seed agent: {e}"))?;
    let settings = VeleroSettings {
        namespace: PEER.into(),
        backup_sync_period: ConfigDuration(PERIOD),
        ..Default::default()
    };
    let peer_ctx = Arc::new(
        VeleroContext::new(
            seed.clone(),
            settings,
            store_options,
            Clock::system(),
            VeleroMetrics::new(&Metrics::new()),
            ObjectSelector::new(None),
        )
        .with_key_source(KeySource::Landscape {
            garden: garden.clone(),
            namespace: "garden".into(),
        }),
    );
    let off: Vec<String> = CONTROLLERS
        .iter()
        .filter(|c| ![CONTROLLER_BACKUP_STORAGE_LOCATION, CONTROLLER_BACKUP_SYNC].contains(c))
        .map(|c| c.to_string())
        .collect();
    let peer = tokio::spawn(granary_velero_server::server::run_controllers(
        peer_ctx, off,
    ));
    let limit = PERIOD * 10 + Duration::from_secs(count as u64);

    // Seed a, read all along: one backup listed on both sides first.
    write_backup(store.as_ref(), "a", "a-0", &keyring).await?;
    peer_location(&seed, "a").await?;
    let first = vec!["a-0".to_string()];
    let t = Instant::now();
    listed(&seed, VELERO, "seed-a", &first, t, limit).await?;
    listed(&seed, PEER, "by-hand-a", &first, t, limit).await?;
    // Its last backups land, and it is lost.
    let names: Vec<String> = (1..=count).map(|i| format!("a-{i}")).collect();
    for n in &names {
        write_backup(store.as_ref(), "a", n, &keyring).await?;
    }
    let t = Instant::now();
    let (known, known_peer) = tokio::join!(
        listed(&seed, VELERO, "seed-a", &names, t, limit),
        listed(&seed, PEER, "by-hand-a", &names, t, limit),
    );
    let ((known_first, known), (_, known_peer)) = (known?, known_peer?);

    // Seed c, never read before: its backups land and it is lost; the peer's admin makes
    // a location for it at that moment.
    let names_c: Vec<String> = (1..=count).map(|i| format!("c-{i}")).collect();
    for n in &names_c {
        write_backup(store.as_ref(), "c", n, &keyring).await?;
    }
    let t = Instant::now();
    peer_location(&seed, "c").await?;
    let (new, new_peer) = tokio::join!(
        listed(&seed, VELERO, "seed-c", &names_c, t, limit),
        listed(&seed, PEER, "by-hand-c", &names_c, t, limit),
    );
    let ((new_first, new), (_, new_peer)) = (new?, new_peer?);

    peer.abort();
    agent.shutdown().await;
    garden_server.shutdown().await;
    seed_server.shutdown().await;

    let p = PERIOD.as_secs_f64();
    let rows = vec![
        Row::versus(
            format!("a lost seed's last {count} backups listed on a seed of its pool: time"),
            Unit::Seconds,
            known,
            "read-only location by hand",
            Peer::Measured(known_peer),
        ),
        Row::versus(
            "  until the first is listed, against the sync period",
            Unit::Seconds,
            known_first,
            "backupSyncPeriod",
            Peer::Reference(p),
        )
        .goal(1.0),
        Row::versus(
            format!("a seed never read before: its {count} backups listed: time"),
            Unit::Seconds,
            new,
            "read-only location made then",
            Peer::Measured(new_peer),
        ),
        Row::versus(
            "  until the first is listed, against two sync periods (find, then sync)",
            Unit::Seconds,
            new_first,
            "2 × backupSyncPeriod",
            Peer::Reference(2.0 * p),
        )
        .goal(1.0),
    ];
    Ok(Outcome {
        title: format!(
            "a lost seed's backups listed on another seed of its pool ({count} backups of \
             {ITEMS} items, backupSyncPeriod {p:.0}s), side by side with a read-only \
             location made by hand"
        ),
        sizes: json!({"backups": count, "items_per_backup": ITEMS, "sync_period_seconds": p}),
        rows,
        details: json!({
            "read_before_seconds": known,
            "read_before_first_seconds": known_first,
            "read_before_peer_seconds": known_peer,
            "never_read_seconds": new,
            "never_read_first_seconds": new_first,
            "never_read_peer_seconds": new_peer,
            "goal": {"first_listed_read_before_max_seconds": p,
                     "first_listed_never_read_max_seconds": 2.0 * p,
                     "read_before_met": known_first <= p,
                     "never_read_met": new_first <= 2.0 * p},
        }),
    })
}
