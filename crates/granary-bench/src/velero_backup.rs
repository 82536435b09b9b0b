//! Benchmark of the backup runner (method: docs/benchmarks.md#method): N ConfigMaps and
//! Secrets (half each, `--size`, default 50,000) across 100 namespaces on the embedded
//! API server, backed up through `velero_server::backup::run` to the `local` provider
//! (items/s, peak RSS), side by side in the same run with its peer,
//! `kubectl get configmaps,secrets -A -o json | gzip` of the same objects from the same
//! server. Goal: backup time ≤ 1.5× the peer's, peak RSS ≤ 200 MiB.
//!
//! The embedded server runs in this process, so the process' peak RSS holds the server
//! (and its objects) as well as the runner: the JSON gives that peak, the baseline
//! before the backup (server and objects), and the growth over it, which is the
//! runner's share. kubectl's peak RSS is sampled from /proc while it runs.
//! kubectl: `$GRANARY_KUBECTL`, else `kubectl` on PATH; without one the peer's column
//! says "not installed".

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use futures::StreamExt;
use granary_api::velero::{Backup, BackupPhase, BackupSpec, BackupStatus};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_velero_server::backup::{BackupRequest, run as backup_run};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use anyhow::Context;
use futures::TryStreamExt;

use super::peers;
use super::support::{self, Scratch, mib, reset_peak_rss, status_kib};
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};

const GOAL_RATIO: f64 = 1.5;
const GOAL_RSS_MIB: f64 = 200.0;

fn object_name(kind: &str, i: usize) -> String {
    format!("{kind}-{i:06}")
}

/// Creates `size` objects (even: ConfigMap, odd: Secret) over `namespaces` namespaces.
async fn populate(client: &kube::Client, size: usize, namespaces: usize) -> anyhow::Result<()> {
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for n in 0..namespaces {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(format!("bench-{n:03}"));
        ns_api
            .create(&PostParams::default(), &ns)
            .await
            .context("namespace is created")?;
    }
    let payload = "x".repeat(512);
    futures::stream::iter(0..size)
        .map(|i| {
            let client = client.clone();
            let payload = payload.clone();
            async move {
                let ns = format!("bench-{:03}", i % namespaces);
                let meta = json!({"name": object_name(if i % 2 == 0 { "cm" } else { "s" }, i),
                    "labels": {"app": "bench", "shard": (i % 7).to_string()}});
                if i % 2 == 0 {
                    let cm: ConfigMap = serde_json::from_value(
                        json!({"metadata": meta, "data": {"payload": payload}}),
                    )?;
                    Api::<ConfigMap>::namespaced(client, &ns)
                        .create(&PostParams::default(), &cm)
                        .await
                        .context("ConfigMap is created")?;
                } else {
                    let s: Secret = serde_json::from_value(
                        json!({"metadata": meta, "data": {"payload": "eHh4".repeat(128)}}),
                    )?;
                    Api::<Secret>::namespaced(client, &ns)
                        .create(&PostParams::default(), &s)
                        .await
                        .context("Secret is created")?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Runs kubectl | gzip into `out`; (seconds, gzip bytes, kubectl's sampled peak RSS KiB).
fn kubectl_peer(kubectl: &str, kubeconfig: &Path, out: &Path) -> Result<Value, String> {
    let start = Instant::now();
    let mut k = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "configmaps,secrets", "-A", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{kubectl} does not run: {e}"))?;
    let file = std::fs::File::create(out).map_err(|e| e.to_string())?;
    let mut gz = Command::new("gzip")
        .stdin(k.stdout.take().ok_or("kubectl's stdout")?)
        .stdout(file)
        .spawn()
        .map_err(|e| format!("gzip does not run: {e}"))?;
    let (status, peak_kib) = support::wait_sampling_peak(&mut k)?;
    let gz_status = gz.wait().map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    if !status.success() || !gz_status.success() {
        let mut err = String::new();
        if let Some(mut e) = k.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        return Err(format!(
            "kubectl | gzip failed ({status}, gzip {gz_status}): {err}"
        ));
    }
    let bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    Ok(json!({"seconds": secs, "gzip_bytes": bytes, "peak_rss_mib_sampled": mib(peak_kib)}))
}

pub(crate) async fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let size = opts.size.unwrap_or(50_000);
    let namespaces = 100.min(size).max(1);
    let workers = 1;
    let page_size = 500u32;
    let server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .context("embedded server starts")?;
    let client = server.client().await.context("client")?;
    let dir = Scratch::new("velero-backup").context("scratch directory")?;
    let kubeconfig = dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .context("kubeconfig written")?;

    let start = Instant::now();
    populate(&client, size, namespaces).await?;
    eprintln!(
        "velero_backup: {size} objects in {namespaces} namespaces created in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    let listed = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default().limit(1))
        .await
        .context("list")?;
    drop(listed);

    let store_root = dir.path().join("store");
    let (store, layout) = support::local_bench_store(&store_root).await?;
    let mut backup = Backup::new(
        "bench",
        BackupSpec {
            included_resources: Some(vec!["configmaps".into(), "secrets".into()]),
            ..BackupSpec::default()
        },
    );
    backup.metadata.namespace = Some("velero".into());
    backup.status = Some(BackupStatus {
        phase: Some(BackupPhase::InProgress),
        ..BackupStatus::default()
    });

    let peak_reset = reset_peak_rss();
    let baseline_kib = status_kib("self", "VmRSS:").unwrap_or(0);
    let start = Instant::now();
    let progress = |_| {};
    let (keyring, _) = granary_velero::integrity::Keyring::default()
        .with_new_key(granary_velero_server::integrity::fresh_key())
        .context("a signing key")?;
    let outcome = backup_run(BackupRequest {
        client: client.clone(),
        backup: &backup,
        store: &*store,
        layout: &layout,
        page_size,
        workers,
        now: chrono::Utc::now(),
        progress: &progress,
        keyring: &keyring,
        tenant: None,
    })
    .await
    .context("backup runs")?;
    let backup_secs = start.elapsed().as_secs_f64();
    let peak_kib = status_kib("self", "VmHWM:").unwrap_or(0);
    let items = outcome.items_backed_up;
    let backup_json = json!({
        "seconds": backup_secs,
        "items": items,
        "items_per_second": items as f64 / backup_secs,
        "phase": format!("{:?}", outcome.phase),
        "tarball_bytes": outcome.tarball_bytes,
        "process_peak_rss_mib": mib(peak_kib),
        "baseline_rss_mib": mib(baseline_kib),
        "peak_rss_growth_mib": mib(peak_kib.saturating_sub(baseline_kib)),
        "peak_rss_reset_before_backup": peak_reset,
    });
    let (peer, peer_row) = match peers::kubectl() {
        None => (
            json!({"skipped": "no kubectl: set GRANARY_KUBECTL or put kubectl on PATH"}),
            Peer::NotInstalled,
        ),
        Some(k) => match kubectl_peer(&k, &kubeconfig, &dir.path().join("peer.json.gz")) {
            Ok(v) => {
                let secs = v["seconds"].as_f64().unwrap_or_default();
                (v, Peer::Measured(secs))
            }
            Err(e) => (json!({"failed": e}), Peer::Failed(e)),
        },
    };
    let ratio = peer["seconds"].as_f64().map(|p| backup_secs / p);
    let result = json!({
        "workload": {"objects": size, "configmaps": size.div_ceil(2), "secrets": size / 2,
                     "namespaces": namespaces, "payload_bytes": 512, "page_size": page_size,
                     "workers": workers, "provider": "local",
                     "profile": if cfg!(debug_assertions) { "debug" } else { "release" }},
        "backup": backup_json,
        "kubectl_gzip": peer,
        "time_ratio_backup_over_kubectl": ratio,
        "goal": {"time_ratio_max": GOAL_RATIO, "peak_rss_mib_max": GOAL_RSS_MIB,
                 "time_met": ratio.map(|r| r <= GOAL_RATIO),
                 "process_peak_rss_met": mib(peak_kib) <= GOAL_RSS_MIB,
                 "runner_growth_rss_met": mib(peak_kib.saturating_sub(baseline_kib)) <= GOAL_RSS_MIB},
    });
    server.shutdown().await;
    let rows = vec![
        Row::versus(
            format!("backup {size} objects: time"),
            Unit::Seconds,
            backup_secs,
            "kubectl get -o json | gzip",
            peer_row,
        )
        .goal(GOAL_RATIO),
        Row::alone(
            "backup: peak RSS growth over the server's",
            Unit::MiB,
            mib(peak_kib.saturating_sub(baseline_kib)),
        ),
    ];
    Ok(Outcome {
        title: format!(
            "backup of {size} ConfigMaps and Secrets in {namespaces} namespaces from the embedded API server to the local store"
        ),
        sizes: json!({"objects": size, "namespaces": namespaces}),
        rows,
        details: result,
    })
}
