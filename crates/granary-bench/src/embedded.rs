//! Benchmark of the embedded API server: creates per second and list latency at N objects
//! (`--size`, default 10,000; `GRANARY_BENCH_SIZES=10000,100000` for several), watch
//! fan-out to 50 watchers, and memory per stored object. No peer yet: recorded, to be
//! compared with a real kube-apiserver later.
//!
//! Memory per object: with a [`HeapProbe`](super::HeapProbe) (the `cargo bench --bench embedded` binary
//! installs a counting global allocator; `granary bench` has none) the growth of live
//! heap bytes since before the first create, minus the JSON bytes of the objects as
//! stored, divided by the object count, is the server's overhead per object: its
//! records, keys, map nodes, allocation slack and the bounded watch history. Buffers the
//! client keeps (its connection pool) are included, which overstates the overhead
//! slightly. The counter sees requested sizes; the live blocks per object times malloc's
//! ~16 bytes per block is added for the figure compared with the target. RSS growth is
//! recorded too: right after the creates, and after the lists and a `malloc_trim` (what
//! is live plus fragmentation).

use std::time::Instant;

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

use super::table::{Row, Unit};
use super::{BenchOptions, Outcome};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};

/// Without a counting allocator the heap reads 0.
fn no_heap() -> i64 {
    0
}

/// What glibc's malloc adds to each block beyond the requested size, on average (an
/// 8-byte header and rounding to 16 bytes); the counter sees requested sizes only.
const MALLOC_BLOCK_OVERHEAD: f64 = 16.0;

/// Returns the memory glibc's malloc keeps but no longer uses to the system, so RSS shows
/// what is live (plus fragmentation) rather than the high-water mark of request garbage.
/// The one foreign call of the workspace, hence the lint's exception.
#[allow(unsafe_code)]
fn trim_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: glibc's malloc_trim only releases free memory; it is thread-safe.
        unsafe {
            malloc_trim(0);
        }
    }
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

fn configmap(i: usize) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(format!("cm-{i:07}"));
    c.metadata.labels = Some(
        [
            ("bench", "yes".to_string()),
            ("shard", (i % 10).to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    );
    c.data = Some([("key".to_string(), format!("value-{i}"))].into());
    c
}

async fn create_many(api: &Api<ConfigMap>, from: usize, to: usize) -> anyhow::Result<u64> {
    let lens: Vec<u64> = futures::stream::iter(from..to)
        .map(|i| {
            let api = api.clone();
            async move {
                let created = api.create(&PostParams::default(), &configmap(i)).await?;
                anyhow::Ok(serde_json::to_vec(&created).map(|v| v.len()).unwrap_or(0) as u64)
            }
        })
        .buffer_unordered(32)
        .try_collect()
        .await
        .context("creating ConfigMaps")?;
    Ok(lens.iter().sum())
}

pub(crate) async fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let sizes: Vec<usize> = match opts.size {
        Some(n) => vec![n],
        None => std::env::var("GRANARY_BENCH_SIZES")
            .ok()
            .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_else(|| vec![10_000]),
    };
    let (live_heap_bytes, live_heap_blocks) = match opts.heap {
        Some(h) => (h.live_bytes, h.live_blocks),
        None => (no_heap as fn() -> i64, no_heap as fn() -> i64),
    };
    let mut measures: Vec<Value> = Vec::new();
    let mut rows = Vec::new();
    let server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .context("server starts")?;
    let client = server.client().await.context("client")?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // One request first, so that the client's connection and TLS state exist before the
    // baseline.
    api.list(&ListParams::default().limit(1))
        .await
        .context("first list")?;
    let mut have = 0;
    trim_malloc();
    let rss_start = rss_bytes();
    let heap_start = live_heap_bytes();
    let blocks_start = live_heap_blocks();
    let mut json_bytes = 0;
    // (objects, heap growth, JSON bytes) at the previous size.
    let mut previous: Option<(usize, i64, u64)> = None;
    for &size in &sizes {
        let start = Instant::now();
        json_bytes += create_many(&api, have, size).await?;
        let heap = live_heap_bytes() - heap_start;
        // RSS after the creates, before the lists below (whose client side decodes every
        // object) raise the process's high-water mark.
        let rss = rss_bytes().saturating_sub(rss_start);
        let blocks = live_heap_blocks() - blocks_start;
        let secs = start.elapsed().as_secs_f64();
        rows.push(Row::alone(
            format!("{} creates (32 in flight), to {size} objects", size - have),
            Unit::PerSecond,
            (size - have) as f64 / secs,
        ));
        measures.push(json!({"bench": "embedded.create", "objects": size, "created": size - have, "seconds": secs,
                   "creates_per_second": (size - have) as f64 / secs}));
        have = size;
        let start = Instant::now();
        let list = api.list(&ListParams::default()).await.context("list")?;
        let full = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let page = api
            .list(&ListParams::default().limit(500))
            .await
            .context("list page")?;
        let paged = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let selected = api
            .list(&ListParams::default().labels("shard=3"))
            .await
            .context("list selected")?;
        let selector = start.elapsed().as_secs_f64();
        rows.push(Row::alone(
            format!("full list of {size} objects"),
            Unit::Seconds,
            full,
        ));
        rows.push(Row::alone(
            format!("label-selected list of {size} objects"),
            Unit::Seconds,
            selector,
        ));
        measures.push(
            json!({"bench": "embedded.list", "objects": list.items.len(), "full_list_seconds": full,
                   "page_500_seconds": paged, "page_items": page.items.len(),
                   "label_selector_seconds": selector, "selected": selected.items.len()}),
        );
        drop((list, page, selected));
        // The JSON size is counted as the client re-serializes each created object; the
        // stored bytes of one object, read raw, show how close that is.
        let sample = configmap(0).metadata.name.context("named")?;
        let raw = client
            .request_text(
                http::Request::get(format!("/api/v1/namespaces/default/configmaps/{sample}"))
                    .body(Vec::new())
                    .context("valid request")?,
            )
            .await
            .context("raw get")?
            .len();
        let typed = serde_json::to_vec(&api.get(&sample).await.context("get")?)
            .context("serializable")?
            .len();
        trim_malloc();
        let rss_trimmed = rss_bytes().saturating_sub(rss_start);
        let overhead = (heap - json_bytes as i64) as f64 / size as f64;
        let blocks_per_object = blocks as f64 / size as f64;
        let with_malloc = overhead + blocks_per_object * MALLOC_BLOCK_OVERHEAD;
        // Between two sizes, costs that do not grow with the objects (connections, their
        // buffers, maps' first allocations) cancel out.
        let marginal = previous
            .map(|(n, h, j)| ((heap - h) - (json_bytes - j) as i64) as f64 / (size - n) as f64);
        previous = Some((size, heap, json_bytes));
        let heap_measured = opts.heap.is_some();
        if heap_measured {
            rows.push(Row::alone(
                format!("server overhead per object at {size} (heap)"),
                Unit::Bytes,
                with_malloc,
            ));
        }
        measures.push(json!({"bench": "embedded.memory", "heap_measured": heap_measured, "objects": size,
                   "live_heap_growth_bytes": heap, "json_bytes": json_bytes,
                   "json_bytes_per_object": json_bytes as f64 / size as f64,
                   "overhead_bytes_per_object": overhead,
                   "heap_blocks_per_object": blocks_per_object,
                   "marginal_overhead_bytes_per_object_since_previous_size": marginal,
                   "overhead_with_malloc_headers_bytes_per_object": with_malloc,
                   "target_bytes_per_object": 2048, "within_target": with_malloc < 2048.0,
                   "sample_stored_json_bytes": raw, "sample_counted_json_bytes": typed,
                   "rss_growth_after_creates_bytes": rss, "rss_growth_after_malloc_trim_bytes": rss_trimmed,
                   "rss_after_trim_minus_json_bytes_per_object": (rss_trimmed as f64 - json_bytes as f64) / size as f64,
                   "method": if heap_measured { "live heap bytes (counting global allocator) after the creates minus before, minus the stored JSON, per object; server in-process, client responses dropped" } else { "no counting allocator in this binary (cargo bench --bench embedded has one): heap fields are 0, RSS fields hold" }}));
    }
    // Watch fan-out: 50 watchers each receive every one of the new objects.
    let watchers = 50;
    // 1,000 events at the default size; fewer for a tiny run (CI's smoke test).
    let events = sizes.iter().copied().max().unwrap_or(1).clamp(1, 1000);
    let rv = api
        .list(&ListParams::default().limit(1))
        .await
        .context("list")?
        .metadata
        .resource_version
        .context("rv")?;
    let mut handles = Vec::new();
    for _ in 0..watchers {
        let stream = api
            .watch(
                &WatchParams::default().labels("fanout=yes").timeout(120),
                &rv,
            )
            .await
            .context("watch")?;
        handles.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            let mut seen = 0;
            while seen < events {
                match stream.try_next().await {
                    Ok(Some(WatchEvent::Added(_))) => seen += 1,
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
            seen
        }));
    }
    let start = Instant::now();
    futures::stream::iter(0..events)
        .map(|i| {
            let api = api.clone();
            async move {
                let mut c = configmap(10_000_000 + i);
                c.metadata
                    .labels
                    .get_or_insert_default()
                    .insert("fanout".into(), "yes".into());
                api.create(&PostParams::default(), &c).await
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .context("creating the watched ConfigMaps")?;
    let mut delivered = 0;
    for h in handles {
        delivered += h.await.unwrap_or(0);
    }
    let secs = start.elapsed().as_secs_f64();
    rows.push(Row::alone(
        format!("watch fan-out: {events} events to {watchers} watchers, delivered"),
        Unit::PerSecond,
        delivered as f64 / secs,
    ));
    measures.push(json!({"bench": "embedded.watch_fanout", "watchers": watchers, "events": events,
               "delivered": delivered, "seconds": secs, "events_per_second": delivered as f64 / secs}));
    server.shutdown().await;
    if delivered != watchers * events {
        bail!(
            "watch fan-out delivered {delivered} of {} events",
            watchers * events
        );
    }
    Ok(Outcome {
        title: format!(
            "embedded API server: creates, lists and {watchers} watchers at {sizes:?} objects (no peer yet: recorded)"
        ),
        sizes: json!({"objects": sizes, "watchers": watchers, "watch_events": events}),
        rows,
        details: json!({"measures": measures}),
    })
}
