//! Benchmark of the restore runner: a backup of N ConfigMaps (`--size`, default 10,000)
//! across 50 namespaces, restored through `velero_server::restore::run::run` from the
//! `local` provider into the embedded API server (items/s, peak RSS growth), side by side
//! in the same run with its peer, `kubectl apply --server-side -f` of the same objects
//! (as a v1 List, namespaces first) against the same server. kubectl: `$GRANARY_KUBECTL`,
//! else `kubectl` on PATH; without one the peer's column says "not installed".

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use granary_api::velero::{Backup, BackupSpec, Restore, RestoreSpec};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_providers::ObjectStore;
use granary_velero::archive::{ArchiveLimits, ArchiveWriter};
use granary_velero::resource::GroupResource;
use granary_velero_server::restore::builtin_actions::builtin;
use granary_velero_server::restore::order::Priorities;
use granary_velero_server::restore::run::{RestoreRequest, run as restore_run};
use serde_json::{Value, json};

use anyhow::Context;

use super::peers;
use super::support::{self, Scratch, mib, reset_peak_rss, status_kib};
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};

const GOAL_RATIO: f64 = 1.5;

fn configmap(ns: &str, i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i:06}"), "namespace": ns,
            "uid": format!("00000000-0000-4000-8000-{i:012}"), "resourceVersion": "1",
            "labels": {"app": "bench", "shard": (i % 7).to_string()}},
        "data": {"payload": "x".repeat(512)}})
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
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

pub(crate) async fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let size = opts.size.unwrap_or(10_000);
    let namespaces = 50.min(size).max(1);
    let server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .context("embedded server starts")?;
    let client = server.client().await.context("client")?;
    let dir = Scratch::new("velero-restore").context("scratch directory")?;
    let kubeconfig = dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .context("kubeconfig written")?;

    // The backup: namespaces and ConfigMaps, written as the backup runner writes them.
    let mut writer = ArchiveWriter::new(Vec::new(), chrono::Utc::now()).context("archive")?;
    let ns_name = |n: usize| format!("bench-{n:03}");
    for n in 0..namespaces {
        writer
            .add_item(
                &GroupResource::new("", "namespaces"),
                "v1",
                &namespace(&ns_name(n)),
            )
            .context("namespace item")?;
    }
    for i in 0..size {
        writer
            .add_item(
                &GroupResource::new("", "configmaps"),
                "v1",
                &configmap(&ns_name(i % namespaces), i),
            )
            .context("configmap item")?;
    }
    let (tarball, _) = writer.finish().context("archive written")?;
    let (store, layout) = support::local_bench_store(&dir.path().join("store")).await?;
    let keys = layout.backup("bench").context("keys")?;
    let tarball_bytes = tarball.len();
    store
        .put("bench", &keys.contents(), Bytes::from(tarball))
        .await
        .context("tarball stored")?;

    let mut backup = Backup::new("bench", BackupSpec::default());
    backup.metadata.namespace = Some("velero".into());
    let mapping = (0..namespaces)
        .map(|n| (ns_name(n), format!("restored-{n:03}")))
        .collect();
    let mut restore = Restore::new(
        "bench",
        RestoreSpec {
            backup_name: Some("bench".into()),
            namespace_mapping: Some(mapping),
            ..Default::default()
        },
    );
    restore.metadata.namespace = Some("velero".into());
    let actions = builtin();
    let priorities = Priorities::default();
    let limits = ArchiveLimits::default();

    let peak_reset = reset_peak_rss();
    let baseline_kib = status_kib("self", "VmRSS:").unwrap_or(0);
    let start = Instant::now();
    let outcome = restore_run(RestoreRequest {
        client: client.clone(),
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
    let restore_json = json!({
        "seconds": restore_secs,
        "items_restored": outcome.items_restored,
        "items_per_second": outcome.items_restored as f64 / restore_secs,
        "phase": format!("{:?}", outcome.phase),
        "errors": outcome.errors,
        "warnings": outcome.warnings,
        "tarball_bytes": tarball_bytes,
        "process_peak_rss_mib": mib(peak_kib),
        "baseline_rss_mib": mib(baseline_kib),
        "peak_rss_growth_mib": mib(peak_kib.saturating_sub(baseline_kib)),
        "peak_rss_reset_before_restore": peak_reset,
    });

    // The peer: the same objects, as kubectl users would apply them, into other names.
    let mut items: Vec<Value> = (0..namespaces)
        .map(|n| namespace(&format!("applied-{n:03}")))
        .collect();
    for i in 0..size {
        let mut cm = configmap(&format!("applied-{:03}", i % namespaces), i);
        let meta = cm["metadata"].as_object_mut().context("metadata")?;
        meta.remove("uid");
        meta.remove("resourceVersion");
        items.push(cm);
    }
    let list_path = dir.path().join("objects.json");
    std::fs::write(
        &list_path,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
            .context("json")?,
    )
    .context("objects written")?;
    let (peer, peer_row) = match peers::kubectl() {
        None => (
            json!({"skipped": "no kubectl: set GRANARY_KUBECTL or put kubectl on PATH"}),
            Peer::NotInstalled,
        ),
        Some(k) => match kubectl_apply(&k, &kubeconfig, &list_path) {
            Ok(v) => {
                let secs = v["seconds"].as_f64().unwrap_or_default();
                (v, Peer::Measured(secs))
            }
            Err(e) => (json!({"failed": e}), Peer::Failed(e)),
        },
    };
    let ratio = peer["seconds"].as_f64().map(|p| restore_secs / p);
    let result = json!({
        "workload": {"objects": size, "namespaces": namespaces, "payload_bytes": 512,
                     "provider": "local",
                     "profile": if cfg!(debug_assertions) { "debug" } else { "release" }},
        "restore": restore_json,
        "kubectl_apply_server_side": peer,
        "time_ratio_restore_over_kubectl": ratio,
        "goal": {"time_ratio_max": GOAL_RATIO, "time_met": ratio.map(|r| r <= GOAL_RATIO)},
    });
    server.shutdown().await;
    let rows = vec![
        Row::versus(
            format!("restore {size} objects: time"),
            Unit::Seconds,
            restore_secs,
            "kubectl apply --server-side",
            peer_row,
        )
        .goal(GOAL_RATIO),
        Row::alone(
            "restore: peak RSS growth over the server's",
            Unit::MiB,
            mib(peak_kib.saturating_sub(baseline_kib)),
        ),
    ];
    Ok(Outcome {
        title: format!(
            "restore of {size} ConfigMaps in {namespaces} namespaces from the local store into the embedded API server"
        ),
        sizes: json!({"objects": size, "namespaces": namespaces}),
        rows,
        details: result,
    })
}
