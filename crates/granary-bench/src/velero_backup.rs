//! Benchmark of the backup runner (method: docs/benchmarks.md#method): N ConfigMaps and
//! Secrets (half each, `--size`, default 50,000) across N/500 namespaces (1 to 1,000) on
//! the embedded API server, backed up through `velero_server::backup::run` to the
//! `local` provider, side by side in the same run with its peers on the same server:
//!
//! - **bare work** (the goal's peer): a client that lists the same resources with the
//!   same page size, writes every object as JSON through one gzip stream (flate2, the
//!   default level, as the tarball's) into a file while the next page is fetched, and
//!   puts the file into the same store. Goal: backup time ≤ 1.5× its.
//! - `kubectl get configmaps,secrets -A -o json | gzip`, up to 100,000 objects (above,
//!   kubectl holds the whole list in memory for minutes; the JSON says it was skipped).
//!
//! The API server runs in a process of its own ([`super::apiserver`]), so this process'
//! peak RSS growth over its baseline is the runner's alone. Goal: ≤ 256 MiB at any size.
//! The API requests of the backup and of the bare peer are recorded by the server.
//! kubectl: `$GRANARY_KUBECTL`, else `kubectl` on PATH; without one its column says "not
//! installed".

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use futures::StreamExt;
use granary_api::velero::{Backup, BackupPhase, BackupSpec, BackupStatus};
use granary_velero_server::backup::{BackupRequest, run as backup_run};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use anyhow::Context;
use futures::TryStreamExt;

use super::apiserver::ApiServerProcess;
use super::peers;
use super::support::{self, Scratch, mib, reset_peak_rss, status_kib};
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};

const GOAL_RATIO: f64 = 1.5;
const GOAL_RSS_MIB: f64 = 256.0;
/// Above this many objects kubectl is not run.
const KUBECTL_MAX_OBJECTS: usize = 100_000;

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

/// The bare peer: pages of `resources` (`page_size` each) listed while the previous page
/// is written through one gzip stream into `file`, then the file put into `store`.
/// (seconds, objects, gzip bytes).
async fn bare_backup(
    client: &kube::Client,
    page_size: u32,
    file: &Path,
    store: &dyn granary_providers::ObjectStore,
    bucket: &str,
    key: &str,
) -> anyhow::Result<(f64, u64, u64)> {
    use std::io::Write;
    let start = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Value>>(2);
    let out = std::fs::File::create(file).context("the bare peer's file")?;
    let writer = tokio::task::spawn_blocking(move || -> anyhow::Result<u64> {
        let mut gz = flate2::write::GzEncoder::new(
            std::io::BufWriter::new(out),
            flate2::Compression::default(),
        );
        let mut n = 0u64;
        while let Some(items) = rx.blocking_recv() {
            for item in items {
                serde_json::to_writer(&mut gz, &item)?;
                gz.write_all(b"\n")?;
                n += 1;
            }
        }
        gz.finish()?.flush()?;
        Ok(n)
    });
    for resource in ["configmaps", "secrets"] {
        let mut token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().limit(page_size);
            if let Some(t) = &token {
                lp = lp.continue_token(t);
            }
            let req = kube::core::Request::new(format!("/api/v1/{resource}"))
                .list(&lp)
                .context("a list request")?;
            let mut page: Value = client.request(req).await.context("a list page")?;
            token = page
                .pointer("/metadata/continue")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_owned);
            if let Some(Value::Array(items)) = page.get_mut("items").map(Value::take) {
                tx.send(items)
                    .await
                    .context("the bare peer's writer stopped")?;
            }
            if token.is_none() {
                break;
            }
        }
    }
    drop(tx);
    let objects = writer.await.context("the bare peer's writer")??;
    let reader = tokio::fs::File::open(file).await.context("the bare file")?;
    let bytes = store
        .put_reader(bucket, key, Box::pin(reader))
        .await
        .context("the bare peer's put")?;
    Ok((start.elapsed().as_secs_f64(), objects, bytes))
}

pub(crate) async fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let size = opts.size.unwrap_or(50_000);
    let namespaces = (size / 500).clamp(1, 1000);
    let workers = 1;
    let page_size = 500u32;
    let mut server = ApiServerProcess::start(opts.granary_exe.as_deref(), "velero_backup")
        .await
        .context("the API server process")?;
    let client = server.client.clone();
    let dir = Scratch::new("velero-backup").context("scratch directory")?;
    let kubeconfig = server.kubeconfig_path();

    let start = Instant::now();
    populate(&client, size, namespaces).await?;
    eprintln!(
        "velero_backup: {size} objects in {namespaces} namespaces created in {:.1}s",
        start.elapsed().as_secs_f64()
    );

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
    let (keyring, _) = granary_velero::integrity::Keyring::default()
        .with_new_key(granary_velero_server::integrity::fresh_key())
        .context("a signing key")?;
    // The runner's own client, made before the clock starts (as the peer's is).
    let backup_client = server.fresh_client().await?;

    let peak_reset = reset_peak_rss();
    let baseline_kib = status_kib("self", "VmRSS:").unwrap_or(0);
    server.record().await?;
    let start = Instant::now();
    let progress = |_| {};
    let outcome = backup_run(BackupRequest {
        client: backup_client,
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
    let backup_requests = server.requests().await?;
    let items = outcome.items_backed_up;
    let growth_mib = mib(peak_kib.saturating_sub(baseline_kib));
    let backup_json = json!({
        "seconds": backup_secs,
        "items": items,
        "items_per_second": items as f64 / backup_secs,
        "phase": format!("{:?}", outcome.phase),
        "tarball_bytes": outcome.tarball_bytes,
        "process_peak_rss_mib": mib(peak_kib),
        "baseline_rss_mib": mib(baseline_kib),
        "peak_rss_growth_mib": growth_mib,
        "peak_rss_reset_before_backup": peak_reset,
        "api_requests": backup_requests,
    });

    let bare_client = server.fresh_client().await?;
    server.record().await?;
    let (bare, bare_peer) = match bare_backup(
        &bare_client,
        page_size,
        &dir.path().join("bare.json.gz"),
        &*store,
        layout.bucket(),
        "bare/objects.json.gz",
    )
    .await
    {
        Ok((secs, objects, bytes)) => (
            json!({"seconds": secs, "objects": objects, "gzip_bytes": bytes,
                   "api_requests": server.requests().await?}),
            Peer::Measured(secs),
        ),
        Err(e) => (
            json!({"failed": format!("{e:#}")}),
            Peer::Failed(format!("{e:#}")),
        ),
    };

    let (kubectl, kubectl_peer_row) = match peers::kubectl() {
        None => (
            json!({"skipped": "no kubectl: set GRANARY_KUBECTL or put kubectl on PATH"}),
            Peer::NotInstalled,
        ),
        Some(_) if size > KUBECTL_MAX_OBJECTS => (
            json!({"skipped": format!("more than {KUBECTL_MAX_OBJECTS} objects: kubectl holds the whole list in memory")}),
            Peer::None,
        ),
        Some(k) => match kubectl_peer(&k, &kubeconfig, &dir.path().join("peer.json.gz")) {
            Ok(v) => {
                let secs = v["seconds"].as_f64().unwrap_or_default();
                (v, Peer::Measured(secs))
            }
            Err(e) => (json!({"failed": e}), Peer::Failed(e)),
        },
    };
    let ratio = bare["seconds"].as_f64().map(|p| backup_secs / p);
    let result = json!({
        "workload": {"objects": size, "configmaps": size.div_ceil(2), "secrets": size / 2,
                     "namespaces": namespaces, "payload_bytes": 512, "page_size": page_size,
                     "workers": workers, "provider": "local", "api_server": "a process of its own",
                     "profile": if cfg!(debug_assertions) { "debug" } else { "release" }},
        "backup": backup_json,
        "bare": bare,
        "kubectl_gzip": kubectl,
        "time_ratio_backup_over_bare": ratio,
        "time_ratio_backup_over_kubectl": kubectl["seconds"].as_f64().map(|p| backup_secs / p),
        "goal": {"time_ratio_max": GOAL_RATIO, "peak_rss_growth_mib_max": GOAL_RSS_MIB,
                 "time_met": ratio.map(|r| r <= GOAL_RATIO),
                 "runner_growth_rss_met": growth_mib <= GOAL_RSS_MIB},
    });
    server.stop().await?;
    let rows = vec![
        Row::versus(
            format!("backup {size} objects: time"),
            Unit::Seconds,
            backup_secs,
            "bare list + gzip + put",
            bare_peer,
        )
        .goal(GOAL_RATIO),
        Row::versus(
            "same: against kubectl",
            Unit::Seconds,
            backup_secs,
            "kubectl get -o json | gzip",
            kubectl_peer_row,
        ),
        Row::versus(
            "backup: peak RSS growth of the process",
            Unit::MiB,
            growth_mib,
            "goal",
            Peer::Reference(GOAL_RSS_MIB),
        )
        .goal(1.0),
    ];
    Ok(Outcome {
        title: format!(
            "backup of {size} ConfigMaps and Secrets in {namespaces} namespaces from the embedded API server (its own process) to the local store"
        ),
        sizes: json!({"objects": size, "namespaces": namespaces}),
        rows,
        details: result,
    })
}
