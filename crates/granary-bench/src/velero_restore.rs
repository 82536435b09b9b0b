//! Benchmark of the restore runner: a backup of N objects (`--size`, default 10,000),
//! half ConfigMaps and half Secrets, across N/500 namespaces (1 to 1,000, as the
//! backup benchmark's), written with the real [`ArchiveWriter`] to the `local` provider, restored through
//! `velero_server::restore::run::run` into an embedded API server running in a child
//! process ([`super::apiserver`]), so that this process' RSS growth is the restore's
//! own, not the server's objects'.
//!
//! Side by side in the same run, each against a fresh server prepared the same way:
//! - **bare creates**: a `kube::Client` creating the same objects (namespaces first), as
//!   many at a time as the restore creates ([`WAVE`]): the floor a restore's time is
//!   measured against (goal: at most 1.5 times it);
//! - `kubectl apply --server-side -f` of the same objects as a v1 List (namespaces
//!   first), when kubectl is installed (`$GRANARY_KUBECTL`, else `kubectl` on PATH) and
//!   the size is at most [`KUBECTL_MAX_ITEMS`] (kubectl holds the whole List and is
//!   slow; above, its column says so and the details say why).
//!
//! Rows: the restore's time against bare creates (goal ≤ 1.5) and against kubectl, and
//! the restore's peak RSS growth (goal ≤ 256 MiB), measured as
//! [`support::reset_peak_rss`] / [`status_kib`] do.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use granary_api::velero::{Backup, BackupSpec, Restore, RestoreSpec};
use granary_providers::ObjectStore;
use granary_velero::archive::{ArchiveLimits, ArchiveWriter};
use granary_velero::resource::GroupResource;
use granary_velero_server::restore::builtin_actions::builtin;
use granary_velero_server::restore::order::Priorities;
use granary_velero_server::restore::run::{RestoreRequest, WAVE, run as restore_run};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::apiserver::ApiServerProcess;
use super::peers;
use super::support::{self, Scratch, mib, reset_peak_rss, status_kib};
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};

/// Goal: a restore takes at most this many times the bare creates of its objects.
const GOAL_RATIO: f64 = 1.5;
/// Goal: the restoring process grows by at most this much (MiB) at 1,000,000 items.
const GOAL_RSS_MIB: f64 = 256.0;
/// Above this many items kubectl is not run (it holds the whole List, and takes long).
const KUBECTL_MAX_ITEMS: usize = 100_000;
/// Bytes of data per object.
const PAYLOAD: usize = 512;

fn ns_name(n: usize) -> String {
    format!("bench-{n:04}")
}

/// Object `i` of the backup (even: a ConfigMap, odd: a Secret), in namespace `ns`, with
/// the metadata a backed-up object has (`uid`, `resourceVersion`) when `backed_up`.
fn object(i: usize, ns: &str, backed_up: bool) -> Value {
    let (kind, field, data) = if i.is_multiple_of(2) {
        ("ConfigMap", "data", json!({"payload": "x".repeat(PAYLOAD)}))
    } else {
        // base64 of PAYLOAD bytes of 'x' (`eHh4` is "xxx").
        let b64 = "eHh4".repeat(PAYLOAD.div_ceil(3));
        ("Secret", "data", json!({"payload": b64}))
    };
    let mut meta = json!({"name": format!("obj-{i:07}"), "namespace": ns,
        "labels": {"app": "bench", "shard": (i % 7).to_string()}});
    if backed_up {
        meta["uid"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
        meta["resourceVersion"] = json!("1");
    }
    let mut o = json!({"apiVersion": "v1", "kind": kind, "metadata": meta, field: data});
    if kind == "Secret" {
        o["type"] = json!("Opaque");
    }
    o
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// Writes the backup's tarball into `path` with the real archive writer.
fn write_backup(path: &std::path::Path, size: usize, namespaces: usize) -> anyhow::Result<u64> {
    let file = std::fs::File::create(path).context("tarball file")?;
    let mut writer =
        ArchiveWriter::new(std::io::BufWriter::new(file), chrono::Utc::now()).context("archive")?;
    for n in 0..namespaces {
        writer
            .add_item(
                &GroupResource::new("", "namespaces"),
                "v1",
                &namespace(&ns_name(n)),
            )
            .context("namespace item")?;
    }
    let (cms, secrets) = (
        GroupResource::new("", "configmaps"),
        GroupResource::new("", "secrets"),
    );
    for i in 0..size {
        let gr = if i % 2 == 0 { &cms } else { &secrets };
        writer
            .add_item(gr, "v1", &object(i, &ns_name(i % namespaces), true))
            .context("item")?;
    }
    let (out, manifest) = writer.finish().context("archive written")?;
    drop(manifest);
    let file = out.into_inner().context("tarball flushed")?;
    Ok(file.metadata().context("tarball size")?.len())
}

/// The bare creates: namespaces, then every object, WAVE at a time; (seconds, failures).
async fn bare_creates(
    client: kube::Client,
    size: usize,
    namespaces: usize,
) -> anyhow::Result<(f64, usize)> {
    let ar = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", kind), plural)
    };
    let (ns_ar, cm_ar, secret_ar) = (
        ar("Namespace", "namespaces"),
        ar("ConfigMap", "configmaps"),
        ar("Secret", "secrets"),
    );
    let start = Instant::now();
    let ns_api: Api<DynamicObject> = Api::all_with(client.clone(), &ns_ar);
    let made: Vec<bool> = futures::stream::iter(0..namespaces)
        .map(|n| {
            let api = ns_api.clone();
            async move {
                let o: DynamicObject =
                    serde_json::from_value(namespace(&ns_name(n))).expect("a namespace decodes");
                api.create(&PostParams::default(), &o).await.is_ok()
            }
        })
        .buffer_unordered(WAVE)
        .collect()
        .await;
    let mut failed = made.iter().filter(|ok| !**ok).count();
    let made: Vec<bool> = futures::stream::iter(0..size)
        .map(|i| {
            let ns = ns_name(i % namespaces);
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                &ns,
                if i % 2 == 0 { &cm_ar } else { &secret_ar },
            );
            async move {
                let o: DynamicObject =
                    serde_json::from_value(object(i, &ns, false)).expect("an object decodes");
                api.create(&PostParams::default(), &o).await.is_ok()
            }
        })
        .buffer_unordered(WAVE)
        .collect()
        .await;
    failed += made.iter().filter(|ok| !**ok).count();
    Ok((start.elapsed().as_secs_f64(), failed))
}

/// Runs `kubectl apply --server-side -f list`; seconds and sampled peak RSS.
fn kubectl_apply(
    kubectl: &str,
    kubeconfig: &std::path::Path,
    list: &std::path::Path,
) -> Result<Value, String> {
    let start = Instant::now();
    let mut k = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "--server-side", "--field-manager", "bench", "-f"])
        .arg(list)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{kubectl} does not run: {e}"))?;
    let (status, peak_kib) = support::wait_sampling_peak(&mut k)?;
    let secs = start.elapsed().as_secs_f64();
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = k.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        return Err(format!("kubectl apply failed ({status}): {err}"));
    }
    Ok(json!({"seconds": secs, "peak_rss_mib_sampled": mib(peak_kib)}))
}

/// The kubectl peer on a fresh server: (details, row's peer).
async fn kubectl_peer(
    opts: &BenchOptions,
    dir: &std::path::Path,
    size: usize,
    namespaces: usize,
) -> anyhow::Result<(Value, Peer)> {
    let Some(kubectl) = peers::kubectl() else {
        return Ok((
            json!({"skipped": "no kubectl: set GRANARY_KUBECTL or put kubectl on PATH"}),
            Peer::NotInstalled,
        ));
    };
    if size > KUBECTL_MAX_ITEMS {
        return Ok((
            json!({"skipped": format!(
                "not run above {KUBECTL_MAX_ITEMS} items: kubectl holds the whole List in memory and takes too long"
            )}),
            Peer::None,
        ));
    }
    let mut items: Vec<Value> = (0..namespaces).map(|n| namespace(&ns_name(n))).collect();
    items.extend((0..size).map(|i| object(i, &ns_name(i % namespaces), false)));
    let list_path = dir.join("objects.json");
    std::fs::write(
        &list_path,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
            .context("json")?,
    )
    .context("objects written")?;
    drop(items);
    let server = ApiServerProcess::start(opts.granary_exe.as_deref(), "velero_restore").await?;
    let kubeconfig = server.kubeconfig_path();
    let out = tokio::task::spawn_blocking(move || kubectl_apply(&kubectl, &kubeconfig, &list_path))
        .await
        .context("kubectl thread")?;
    server.stop().await?;
    Ok(match out {
        Ok(v) => {
            let secs = v["seconds"].as_f64().unwrap_or_default();
            (v, Peer::Measured(secs))
        }
        Err(e) => (json!({"failed": e}), Peer::Failed(e)),
    })
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub(crate) async fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let size = opts.size.unwrap_or(10_000);
    let namespaces = (size / 500).clamp(1, 1000);
    let dir = Scratch::new("velero-restore").context("scratch directory")?;

    // The backup, written as the backup runner writes it, stored in the local provider.
    let tarball_path = dir.path().join("backup.tar.gz");
    let tarball_bytes = {
        let path = tarball_path.clone();
        tokio::task::spawn_blocking(move || write_backup(&path, size, namespaces))
            .await
            .context("writer thread")??
    };
    let (store, layout) = support::local_bench_store(&dir.path().join("store")).await?;
    let keys = layout.backup("bench").context("keys")?;
    let file = tokio::fs::File::open(&tarball_path)
        .await
        .context("tarball")?;
    store
        .put_reader("bench", &keys.contents(), Box::pin(file))
        .await
        .context("tarball stored")?;
    std::fs::remove_file(&tarball_path).context("tarball removed")?;

    let mut backup = Backup::new("bench", BackupSpec::default());
    backup.metadata.namespace = Some("velero".into());
    let mut restore = Restore::new(
        "bench",
        RestoreSpec {
            backup_name: Some("bench".into()),
            ..Default::default()
        },
    );
    restore.metadata.namespace = Some("velero".into());
    let actions = builtin();
    let priorities = Priorities::default();
    let limits = ArchiveLimits::default();

    // Granary's restore, into a server of its own.
    let server = ApiServerProcess::start(opts.granary_exe.as_deref(), "velero_restore").await?;
    let client = server.fresh_client().await?;
    let load_restore = load();
    let peak_reset = reset_peak_rss();
    let baseline_kib = status_kib("self", "VmRSS:").unwrap_or(0);
    let start = Instant::now();
    let outcome = restore_run(RestoreRequest {
        client,
        restore: &restore,
        backup: &backup,
        store: store.as_ref() as &dyn ObjectStore,
        layout: &layout,
        actions: &actions,
        priorities: &priorities,
        resource_timeout: Duration::from_secs(600),
        limits: &limits,
        now: chrono::Utc::now(),
        progress: &|_| {},
        dry_run: false,
        stop: None,
        integrity: None,
    })
    .await;
    let restore_secs = start.elapsed().as_secs_f64();
    let peak_kib = status_kib("self", "VmHWM:").unwrap_or(0);
    let growth_mib = mib(peak_kib.saturating_sub(baseline_kib));
    let restore_json = json!({
        "seconds": restore_secs,
        "items_restored": outcome.items_restored,
        "total_items": outcome.total_items,
        "items_per_second": outcome.items_restored as f64 / restore_secs,
        "phase": format!("{:?}", outcome.phase),
        "failure_reason": outcome.failure_reason,
        "errors": outcome.errors,
        "warnings": outcome.warnings,
        "tarball_bytes": tarball_bytes,
        "process_peak_rss_mib": mib(peak_kib),
        "baseline_rss_mib": mib(baseline_kib),
        "peak_rss_growth_mib": growth_mib,
        "peak_rss_reset_before_restore": peak_reset,
        "load_average_before": load_restore,
    });
    drop(outcome);
    server.stop().await?;

    // Bare creates of the same objects, on a fresh server.
    let server = ApiServerProcess::start(opts.granary_exe.as_deref(), "velero_restore").await?;
    let client = server.fresh_client().await?;
    let load_bare = load();
    let (bare_secs, bare_failed) = bare_creates(client, size, namespaces).await?;
    server.stop().await?;
    let bare_json = json!({
        "seconds": bare_secs,
        "failed_creates": bare_failed,
        "concurrency": WAVE,
        "load_average_before": load_bare,
    });

    let (kubectl_json, kubectl_row) = kubectl_peer(opts, dir.path(), size, namespaces).await?;

    let ratio = restore_secs / bare_secs;
    let kubectl_ratio = kubectl_json["seconds"].as_f64().map(|p| restore_secs / p);
    let result = json!({
        "workload": {"objects": size, "configmaps": size.div_ceil(2), "secrets": size / 2,
                     "namespaces": namespaces, "payload_bytes": PAYLOAD,
                     "provider": "local", "api_server": "child process",
                     "profile": if cfg!(debug_assertions) { "debug" } else { "release" }},
        "restore": restore_json,
        "bare_creates": bare_json,
        "kubectl_apply_server_side": kubectl_json,
        "time_ratio_restore_over_bare_creates": ratio,
        "time_ratio_restore_over_kubectl": kubectl_ratio,
        "goal": {"time_ratio_max": GOAL_RATIO, "time_met": ratio <= GOAL_RATIO,
                 "peak_rss_growth_mib_max": GOAL_RSS_MIB,
                 "rss_met": growth_mib <= GOAL_RSS_MIB},
        "load_average_after": load(),
    });
    let kubectl_measure = match kubectl_row {
        Peer::None => {
            format!("restore {size} objects: time (kubectl skipped above {KUBECTL_MAX_ITEMS})")
        }
        _ => format!("restore {size} objects: time"),
    };
    let rows = vec![
        Row::versus(
            format!("restore {size} objects: time"),
            Unit::Seconds,
            restore_secs,
            format!("bare creates ({WAVE} at a time)"),
            Peer::Measured(bare_secs),
        )
        .goal(GOAL_RATIO),
        Row::versus(
            kubectl_measure,
            Unit::Seconds,
            restore_secs,
            "kubectl apply --server-side",
            kubectl_row,
        ),
        Row::versus(
            "restore: peak RSS growth of the restoring process",
            Unit::MiB,
            growth_mib,
            "goal",
            Peer::Reference(GOAL_RSS_MIB),
        )
        .goal(1.0),
    ];
    Ok(Outcome {
        title: format!(
            "restore of {size} ConfigMaps and Secrets in {namespaces} namespaces from the local store into an API server in a child process"
        ),
        sizes: json!({"objects": size, "namespaces": namespaces}),
        rows,
        details: result,
    })
}
