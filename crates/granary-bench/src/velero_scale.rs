//! Benchmark of the Velero side at scale: N Backups in one namespace (`--size`, default
//! 10,000), each measure timed and its API requests counted by the embedded API server's
//! recording (by `verb resource`), side by side with a peer doing the same work in the
//! same run:
//! - **sync** of a location (`local` provider) whose bucket holds N small backups written
//!   as the backup runner writes them (tarball, manifest, resource list, results, the
//!   signed integrity record, `velero-backup.json` last), into an empty namespace: one
//!   `backup_sync::round`, until all N Backups exist. Peer: a bare client on a server
//!   prepared the same way that lists the bucket's backup prefixes with the same store
//!   API, reads each `velero-backup.json` and creates the same Backups, as many at a time as
//!   the sync does (what Velero's own sync does; Granary's also checks every object of
//!   each backup against its integrity record);
//! - **idle sync**: the same round again when all N exist. Goal: no Backup written, the
//!   requests a constant number of lists, never one per Backup;
//! - **queue pass**: N/100 New backups beside the N Completed ones; the queue
//!   controller's pass (the one that queues them, then one with nothing to change).
//!   Peer: one bare paginated list (500 a page) of the same Backups;
//! - **`granary backup get`**: the `granary` binary's table of every Backup. Peers:
//!   `kubectl get backups.velero.io` (when installed) and a bare kube client's list;
//! - **scrubbing round** (`backup_verification`'s round with every backup due): every
//!   object of every stored backup read and hashed against its record, the verdict
//!   written onto each Backup. Peer: a bare reader listing each backup's directory and
//!   reading every object with the same store API, as many backups at a time.
//!
//! The API server runs in this process: it serves Granary and its peers alike.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use chrono::Utc;
use futures::{StreamExt, TryStreamExt};
use granary_api::crds::{self, Side};
use granary_api::velero::{
    Backup, BackupPhase, BackupSpec, BackupStatus, BackupStorageLocation,
    BackupStorageLocationSpec, INTEGRITY_ANNOTATION, ObjectStorageLocation,
};
use granary_apiserver::{ApiCall, EmbeddedOptions, EmbeddedServer};
use granary_providers::{ListEntry, ObjectStore, StoreOptions};
use granary_runtime::clock::Clock;
use granary_runtime::config::ConfigDuration;
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_velero::archive::ArchiveWriter;
use granary_velero::files::{Results, decode_backup_json, encode_backup_json};
use granary_velero::integrity::{Keyring, ObjectDigest, RecordKind};
use granary_velero::layout::StorageLayout;
use granary_velero::resource::GroupResource;
use granary_velero_server::backup_sync::{self, Import, Origin};
use granary_velero_server::context::VeleroContext;
use granary_velero_server::integrity;
use granary_velero_server::metrics::VeleroMetrics;
use granary_velero_server::settings::VeleroSettings;
use granary_velero_server::{backup_verification, queue_controller};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::peers;
use super::support::{Scratch, create, local_bench_store};
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};

/// The Velero namespace of every server here.
pub const NS: &str = "velero";
/// The location, on the `local` store of [`local_bench_store`].
pub const LOCATION: &str = "default";
/// The goal on every time ratio.
const GOAL_RATIO: f64 = 1.5;
/// Concurrent writes while preparing (never measured).
const SETUP_CONCURRENCY: usize = 32;
/// The peer's page size (kubectl's `--chunk-size` default).
const PAGE: u32 = 500;

/// Requests by `verb resource[/subresource]` (`verb /path` for non-resource URLs).
type Requests = BTreeMap<String, usize>;

/// The recorded requests by `verb resource[/subresource]`.
pub fn tally(calls: Vec<ApiCall>) -> Requests {
    let mut by_kind = Requests::new();
    for c in calls {
        let key = if !c.non_resource_path.is_empty() {
            format!("{} {}", c.verb, c.non_resource_path)
        } else if c.subresource.is_empty() {
            format!("{} {}", c.verb, c.resource)
        } else {
            format!("{} {}/{}", c.verb, c.resource, c.subresource)
        };
        *by_kind.entry(key).or_default() += 1;
    }
    by_kind
}

fn total(r: &Requests) -> usize {
    r.values().sum()
}

/// Writes among `r` (of `resource` when given).
fn writes(r: &Requests, resource: Option<&str>) -> usize {
    r.iter()
        .filter(|(k, _)| {
            let (verb, res) = k.split_once(' ').unwrap_or((k, ""));
            ["create", "update", "patch", "delete", "deletecollection"].contains(&verb)
                && resource.is_none_or(|want| res == want)
        })
        .map(|(_, n)| n)
        .sum()
}

/// What one measured step took: seconds and the requests the server saw meanwhile.
struct Measured<T> {
    seconds: f64,
    requests: Requests,
    value: T,
}

impl<T> Measured<T> {
    fn json(&self) -> Value {
        json!({"seconds": self.seconds, "requests": self.requests,
               "requests_total": total(&self.requests),
               "writes": writes(&self.requests, None)})
    }
}

async fn measured<T>(
    server: &EmbeddedServer,
    step: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<Measured<T>> {
    server.record_requests();
    drop(server.take_recorded_requests());
    let start = Instant::now();
    let value = step.await?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(Measured {
        seconds,
        requests: tally(server.take_recorded_requests()),
        value,
    })
}

/// An API server (in this process) with the seed's kinds served and the Velero namespace.
pub async fn server() -> anyhow::Result<(EmbeddedServer, Client)> {
    let server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .context("embedded server starts")?;
    let client = server.client().await?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::crds(Some(Side::Seed)) {
        create(&api, &crd).await?;
    }
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    create(&Api::<Namespace>::all(client.clone()), &ns).await?;
    // Served a moment after the CRD's create.
    let backups: Api<Backup> = Api::namespaced(client.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = backups.list(&ListParams::default().limit(1)).await {
        anyhow::ensure!(Instant::now() < deadline, "Backups are not served: {e}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((server, client))
}

/// The `local` location of the bench store, Available (as its controller would say).
pub async fn location(client: &Client) -> anyhow::Result<()> {
    let mut l = BackupStorageLocation::new(
        LOCATION,
        BackupStorageLocationSpec {
            provider: "local".into(),
            object_storage: ObjectStorageLocation {
                bucket: "bench".into(),
                prefix: Some("velero/bench".into()),
                ..Default::default()
            },
            default: Some(true),
            ..Default::default()
        },
    );
    l.metadata.namespace = Some(NS.into());
    let api: Api<BackupStorageLocation> = Api::namespaced(client.clone(), NS);
    create(&api, &l).await?;
    available(client).await
}

/// Marks the location Available and never synced (so a sync round is due at once).
pub async fn available(client: &Client) -> anyhow::Result<()> {
    let api: Api<BackupStorageLocation> = Api::namespaced(client.clone(), NS);
    api.patch(
        LOCATION,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Available", "lastSyncedTime": null}})),
    )
    .await?;
    Ok(())
}

/// Writes backup `name` (one ConfigMap) as the backup runner does: the tarball, the
/// manifest, the resource list and the results, the signed record, `velero-backup.json`.
pub async fn write_backup(
    store: &dyn ObjectStore,
    layout: &StorageLayout,
    name: &str,
    keyring: &Keyring,
) -> anyhow::Result<()> {
    let keys = layout.backup(name)?;
    let now = Utc::now();
    let mut tarball = Vec::new();
    let mut w = ArchiveWriter::new(&mut tarball, now)?;
    let item = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{name}"), "namespace": "app", "uid": format!("u-{name}")},
        "data": {"value": name},
    });
    w.add_item(&GroupResource::new("", "configmaps"), "v1", &item)?;
    let (_, mut manifest) = w.finish()?;
    let mut backup = Backup::new(name, BackupSpec::default());
    backup.metadata.namespace = Some(NS.into());
    backup.spec.included_namespaces = Some(vec!["app".into()]);
    backup.spec.storage_location = Some(LOCATION.into());
    backup.status = Some(BackupStatus {
        phase: Some(BackupPhase::Completed),
        start_timestamp: Some(now),
        completion_timestamp: Some(now),
        ..Default::default()
    });
    let dir = keys.dir().to_string();
    let files = [
        (keys.contents(), tarball),
        (keys.manifest(), manifest.write_gz(Vec::new())?),
        (
            keys.resource_list(),
            manifest.write_resource_list_gz(Vec::new())?,
        ),
        (keys.results(), Results::default().to_gz_bytes()),
    ];
    let backup_json = encode_backup_json(&backup);
    let mut digests: BTreeMap<String, ObjectDigest> = files
        .iter()
        .map(|(k, d)| (integrity::name_in(&dir, k).to_string(), ObjectDigest::of(d)))
        .collect();
    digests.insert(
        integrity::name_in(&dir, &keys.metadata()).to_string(),
        ObjectDigest::of(&backup_json),
    );
    let bucket = layout.bucket();
    for (k, d) in files {
        store.put(bucket, &k, Bytes::from(d)).await?;
    }
    let record = integrity::sign(RecordKind::Backup, name, None, digests, keyring)
        .map_err(anyhow::Error::msg)?;
    integrity::put_record(store, bucket, &keys.integrity(), &record)
        .await
        .map_err(anyhow::Error::msg)?;
    store
        .put(bucket, &keys.metadata(), Bytes::from(backup_json))
        .await?;
    Ok(())
}

/// The sync's peer: the bucket's backups listed, the namespace's Backups listed, each
/// missing one's `velero-backup.json` read and the same Backup created, as many at a time as the sync.
/// Returns how many it created.
async fn bare_sync(
    client: &Client,
    store: &dyn ObjectStore,
    layout: &StorageLayout,
) -> anyhow::Result<usize> {
    let names = granary_velero_server::backup_sync::backup_names(store, layout).await?;
    let api: Api<Backup> = Api::namespaced(client.clone(), NS);
    let present: BTreeSet<String> = api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let schedules = BTreeMap::new();
    let api = &api;
    let schedules = &schedules;
    let made: Vec<bool> = futures::stream::iter(names.iter().filter(|n| !present.contains(*n)))
        .map(|name| async move {
            let key = layout.backup(name)?.metadata();
            let bytes = granary_providers::get_bytes(store, layout.bucket(), &key).await?;
            let stored = decode_backup_json(&bytes)?;
            let origin = Origin::Admin { schedules };
            match backup_sync::imported(stored, NS, LOCATION, origin, Utc::now()) {
                Import::Create { backup, .. } => {
                    api.create(&PostParams::default(), &backup).await?;
                    Ok::<_, anyhow::Error>(true)
                }
                _ => Ok(false),
            }
        })
        .buffer_unordered(backup_sync::IMPORT_CONCURRENCY)
        .try_collect()
        .await?;
    let made = made.into_iter().filter(|m| *m).count();
    Ok(made)
}

/// The Backups of the namespace, `PAGE` a page; how many.
async fn paginated_list(client: &Client) -> anyhow::Result<usize> {
    let api: Api<Backup> = Api::namespaced(client.clone(), NS);
    let mut lp = ListParams::default().limit(PAGE);
    let mut n = 0;
    loop {
        let page = api.list(&lp).await?;
        n += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => return Ok(n),
        }
    }
}

/// The scrub's peer: every backup's directory listed and each of its objects read
/// whole, with the same store API; (objects, bytes, store requests).
async fn bare_read(
    store: &dyn ObjectStore,
    layout: &StorageLayout,
    names: &[String],
) -> anyhow::Result<(usize, u64, usize)> {
    let read: Vec<(usize, u64)> = futures::stream::iter(names)
        .map(|name| async move {
            let dir = layout.backup(name)?.dir().to_string();
            let keys: Vec<String> = store
                .list(layout.bucket(), &dir, None)
                .try_filter_map(|e| async move {
                    Ok(match e {
                        ListEntry::Object(o) => Some(o.key),
                        ListEntry::Prefix(_) => None,
                    })
                })
                .try_collect()
                .await?;
            let mut bytes = 0;
            for k in &keys {
                bytes += granary_providers::get_bytes(store, layout.bucket(), k)
                    .await?
                    .len() as u64;
            }
            Ok::<_, anyhow::Error>((keys.len(), bytes))
        })
        .buffer_unordered(backup_verification::SCRUB_CONCURRENCY)
        .try_collect()
        .await?;
    let objects: usize = read.iter().map(|r| r.0).sum();
    let bytes: u64 = read.iter().map(|r| r.1).sum();
    // A listing and a read per object.
    let requests = names.len() + objects;
    Ok((objects, bytes, requests))
}

/// Runs `cmd` to its end, its output dropped: seconds, or why it failed.
async fn run_command(mut cmd: tokio::process::Command) -> Result<f64, String> {
    let start = Instant::now();
    let out = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("does not run: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!("{} ({})", out.status, tail.join(" | ")));
    }
    Ok(start.elapsed().as_secs_f64())
}

/// A Velero context of `client` on the store.
pub fn context(
    client: &Client,
    store_options: &StoreOptions,
    settings: VeleroSettings,
) -> VeleroContext {
    VeleroContext::new(
        client.clone(),
        settings,
        store_options.clone(),
        Clock::system(),
        VeleroMetrics::new(&Metrics::new()),
        ObjectSelector::new(None),
    )
}

/// How many Backups of the namespace carry the integrity verdict `verified`.
async fn verified(client: &Client) -> anyhow::Result<usize> {
    let api: Api<Backup> = Api::namespaced(client.clone(), NS);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|b| {
            b.annotations()
                .get(INTEGRITY_ANNOTATION)
                .map(String::as_str)
                == Some("verified")
        })
        .count())
}

fn requests_row(measure: String, m: &Requests, peer_name: &str, peer: Peer) -> Row {
    Row::versus(measure, Unit::Requests, total(m) as f64, peer_name, peer)
}

pub(crate) async fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let n = opts.size.unwrap_or(10_000);
    let fresh = (n / 100).max(1);
    let exe = match &opts.granary_exe {
        Some(exe) => exe.clone(),
        None => std::env::current_exe().context("the benchmark's own executable")?,
    };
    let dir = Scratch::new("velero-scale").context("scratch directory")?;
    let (store, layout) = local_bench_store(dir.path()).await?;
    let store_options = StoreOptions {
        local_root: Some(dir.path().to_path_buf()),
        ..StoreOptions::default()
    };

    // Granary's server: the keys, the location, N backups in its bucket.
    let (server_g, client) = server().await?;
    let keyring = integrity::ensure(&client, NS)
        .await
        .map_err(|e| anyhow::anyhow!("integrity keys: {e}"))?;
    location(&client).await?;
    let names: Vec<String> = (0..n).map(|i| format!("backup-{i:05}")).collect();
    let prepare = Instant::now();
    futures::stream::iter(names.iter())
        .map(|name| write_backup(store.as_ref(), &layout, name, &keyring))
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<()>()
        .await
        .context("writing the backups")?;
    let prepare_seconds = prepare.elapsed().as_secs_f64();

    // 1. Sync, the peer first on a server of its own prepared the same way.
    let (server_p, client_p) = server().await?;
    let peer_sync = measured(&server_p, bare_sync(&client_p, store.as_ref(), &layout)).await?;
    anyhow::ensure!(
        peer_sync.value == n,
        "the peer created {} of {n}",
        peer_sync.value
    );
    let peer_idle = measured(&server_p, bare_sync(&client_p, store.as_ref(), &layout)).await?;
    server_p.shutdown().await;

    let ctx = context(
        &client,
        &store_options,
        VeleroSettings {
            namespace: NS.into(),
            ..Default::default()
        },
    );
    ctx.keys.set(keyring.clone());
    let sync = measured(&server_g, async {
        backup_sync::round(&ctx).await?;
        Ok(())
    })
    .await?;
    let synced = verified(&client).await?;
    anyhow::ensure!(
        synced == n,
        "the sync listed {synced} of {n} backups verified"
    );
    available(&client).await?;
    let idle = measured(&server_g, async {
        backup_sync::round(&ctx).await?;
        Ok(())
    })
    .await?;

    // 2. The queue: `fresh` New backups beside the N Completed ones.
    let backups: Api<Backup> = Api::namespaced(client.clone(), NS);
    futures::stream::iter(0..fresh)
        .map(|i| {
            let backups = backups.clone();
            async move {
                let mut b = Backup::new(&format!("new-{i:05}"), BackupSpec::default());
                b.metadata.namespace = Some(NS.into());
                b.spec.included_namespaces = Some(vec![format!("app-{i}")]);
                b.spec.storage_location = Some(LOCATION.into());
                create(&backups, &b).await
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<()>()
        .await
        .context("creating the New backups")?;
    let all = n + fresh;
    let queue = measured(&server_g, async {
        queue_controller::pass(&ctx).await?;
        Ok(())
    })
    .await?;
    let queue_steady = measured(&server_g, async {
        queue_controller::pass(&ctx).await?;
        Ok(())
    })
    .await?;
    let peer_list = measured(&server_g, paginated_list(&client)).await?;
    anyhow::ensure!(
        peer_list.value == all,
        "listed {} of {all}",
        peer_list.value
    );

    // 3. `granary backup get`, kubectl's and a bare client's list.
    let kubeconfig = dir.path().join("kubeconfig");
    server_g.write_kubeconfig(&kubeconfig)?;
    let mut cli = tokio::process::Command::new(&exe);
    cli.args(["backup", "get", "-n", NS, "--kubeconfig"])
        .arg(&kubeconfig);
    let get = measured(&server_g, async {
        run_command(cli).await.map_err(anyhow::Error::msg)
    })
    .await
    .context("granary backup get")?;
    let kubectl = match peers::kubectl() {
        None => None,
        Some(k) => {
            let mut cmd = tokio::process::Command::new(k);
            cmd.args(["get", "backups.velero.io", "-n", NS, "--kubeconfig"])
                .arg(&kubeconfig);
            Some(measured(&server_g, async { Ok(run_command(cmd).await) }).await?)
        }
    };
    let bare_get = measured(&server_g, async {
        let fresh_client = server_g.client().await?;
        let api: Api<Backup> = Api::namespaced(fresh_client, NS);
        Ok(api.list(&ListParams::default()).await?.items.len())
    })
    .await?;

    // 4. A scrubbing round with every stored backup due (a frequency of 1 ms: each was
    // checked by the sync, longer ago than that).
    let scrub_ctx = Arc::new(context(
        &client,
        &store_options,
        VeleroSettings {
            namespace: NS.into(),
            verify_frequency: ConfigDuration(Duration::from_millis(1)),
            verify_sample: 1.0,
            ..Default::default()
        },
    ));
    scrub_ctx.keys.set(keyring.clone());
    tokio::time::sleep(Duration::from_millis(5)).await;
    let before = Utc::now();
    let scrub = measured(&server_g, async {
        backup_verification::pass(&scrub_ctx, true).await?;
        Ok(())
    })
    .await?;
    let scrubbed = backups
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|b| {
            b.annotations()
                .get(granary_api::velero::INTEGRITY_CHECKED_AT_ANNOTATION)
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| t.timestamp() >= before.timestamp())
        })
        .count();
    anyhow::ensure!(scrubbed == n, "the round checked {scrubbed} of {n} backups");
    let peer_scrub = measured(&server_g, async {
        let listed: Vec<String> = backups
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|b| b.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed))
            .map(|b| b.stored_name())
            .collect();
        bare_read(store.as_ref(), &layout, &listed).await
    })
    .await?;
    let (objects, bytes, store_requests) = peer_scrub.value;
    server_g.shutdown().await;

    let synced_writes = writes(&sync.requests, Some("backups"));
    let idle_writes = writes(&idle.requests, Some("backups"));
    let rows = vec![
        Row::versus(
            format!("sync of a location with {n} backups into an empty namespace: time"),
            Unit::Seconds,
            sync.seconds,
            "bare list, read, create",
            Peer::Measured(peer_sync.seconds),
        )
        .goal(GOAL_RATIO),
        requests_row(
            "  sync: API requests".into(),
            &sync.requests,
            "bare list, read, create",
            Peer::Measured(total(&peer_sync.requests) as f64),
        ),
        Row::versus(
            "idle sync (all exist): time",
            Unit::Seconds,
            idle.seconds,
            "bare lists",
            Peer::Measured(peer_idle.seconds),
        )
        .goal(GOAL_RATIO),
        requests_row(
            "  idle sync: API requests (goal: O(1), none per Backup)".into(),
            &idle.requests,
            "bare lists",
            Peer::Measured(total(&peer_idle.requests) as f64),
        ),
        Row::alone(
            "  idle sync: Backup writes (goal 0)",
            Unit::Requests,
            idle_writes as f64,
        ),
        Row::versus(
            format!("queue pass over {all} Backups, {fresh} New: time"),
            Unit::Seconds,
            queue.seconds,
            "bare paginated list",
            Peer::Measured(peer_list.seconds),
        ),
        requests_row(
            format!(
                "  queue pass: API requests ({} writes)",
                writes(&queue.requests, None)
            ),
            &queue.requests,
            "bare paginated list",
            Peer::Measured(total(&peer_list.requests) as f64),
        ),
        Row::versus(
            "queue pass with nothing to change: time",
            Unit::Seconds,
            queue_steady.seconds,
            "bare paginated list",
            Peer::Measured(peer_list.seconds),
        )
        .goal(GOAL_RATIO),
        requests_row(
            format!(
                "  queue pass, nothing to change: API requests ({} writes)",
                writes(&queue_steady.requests, None)
            ),
            &queue_steady.requests,
            "bare paginated list",
            Peer::Measured(total(&peer_list.requests) as f64),
        ),
        Row::versus(
            format!("granary backup get ({all} Backups): time"),
            Unit::Seconds,
            get.seconds,
            "kubectl get backups",
            match &kubectl {
                None => Peer::NotInstalled,
                Some(m) => match &m.value {
                    Ok(s) => Peer::Measured(*s),
                    Err(e) => Peer::Failed(e.clone()),
                },
            },
        )
        .goal(GOAL_RATIO),
        requests_row(
            "  granary backup get: API requests".into(),
            &get.requests,
            "kubectl get backups",
            match &kubectl {
                None => Peer::NotInstalled,
                Some(m) if m.value.is_ok() => Peer::Measured(total(&m.requests) as f64),
                Some(_) => Peer::Failed("kubectl failed".into()),
            },
        ),
        Row::versus(
            "  granary backup get, against a bare client's list: time",
            Unit::Seconds,
            get.seconds,
            "bare kube client list",
            Peer::Measured(bare_get.seconds),
        ),
        Row::versus(
            format!("scrubbing round over {n} stored backups: time"),
            Unit::Seconds,
            scrub.seconds,
            "bare read of every object",
            Peer::Measured(peer_scrub.seconds),
        )
        .goal(GOAL_RATIO),
        Row::versus(
            "  scrubbing round: bytes hashed (all: each backup verified)",
            Unit::Bytes,
            bytes as f64,
            "bare read of every object",
            Peer::Measured(bytes as f64),
        ),
        requests_row(
            format!(
                "  scrubbing round: API requests ({} writes: the verdicts)",
                writes(&scrub.requests, None)
            ),
            &scrub.requests,
            "bare read of every object",
            Peer::Measured(total(&peer_scrub.requests) as f64),
        ),
    ];
    let details = json!({
        "workload": {"backups": n, "new_backups": fresh, "items_per_backup": 1,
                     "provider": "local", "prepare_seconds": prepare_seconds,
                     "sync_concurrency": backup_sync::IMPORT_CONCURRENCY,
                     "scrub_concurrency": backup_verification::SCRUB_CONCURRENCY},
        "sync": sync.json(),
        "sync_peer": peer_sync.json(),
        "idle_sync": idle.json(),
        "idle_sync_peer": peer_idle.json(),
        "queue_pass": queue.json(),
        "queue_pass_steady": queue_steady.json(),
        "queue_peer_paginated_list": peer_list.json(),
        "backup_get": get.json(),
        "backup_get_kubectl": match &kubectl {
            None => json!({"skipped": "no kubectl: set GRANARY_KUBECTL or put kubectl on PATH"}),
            Some(m) => match &m.value {
                Ok(_) => m.json(),
                Err(e) => json!({"failed": e}),
            },
        },
        "backup_get_bare_client": bare_get.json(),
        "scrub": scrub.json(),
        "scrub_peer": peer_scrub.json(),
        "scrub_objects": {"objects": objects, "bytes": bytes, "store_requests": store_requests,
                          "note": "measured on the bare reader; Granary's round hashes every \
                                   one of these objects (a verified verdict needs them all), \
                                   its store requests are not counted with the local provider"},
        "goal": {"time_ratio_max": GOAL_RATIO,
                 "sync_backup_creates": synced_writes,
                 "idle_sync_backup_writes": idle_writes,
                 "idle_sync_no_backup_writes_met": idle_writes == 0},
    });
    Ok(Outcome {
        title: format!(
            "the Velero side at scale: {n} Backups in one namespace (local store, 1 item each), \
             each side by side with a bare client"
        ),
        sizes: json!({"backups": n, "new_backups": fresh}),
        rows,
        details,
    })
}
