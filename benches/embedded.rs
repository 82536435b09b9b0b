//! Benchmark of the embedded API server (issue 3): creates per second and list latency
//! at 10k and 100k objects, watch fan-out to 50 watchers, and memory per stored object.
//! Prints one JSON object per measurement. `GRANARY_BENCH_SIZES=1000,5000` overrides the
//! sizes (the default is 10000,100000).
//!
//! Memory per object: this binary's global allocator counts the bytes live on the heap.
//! The server runs in this process and is driven over HTTPS by a `kube::Client`; after
//! each size is reached (and every client-side response has been dropped), the growth of
//! live heap bytes since before the first create, minus the JSON bytes of the objects as
//! stored, divided by the object count, is the server's overhead per object: its records,
//! keys, map nodes, allocation slack and the bounded watch history. Buffers the client
//! keeps (its connection pool) are included, which overstates the overhead slightly.
//! The counter sees requested sizes; the live blocks per object times malloc's ~16 bytes
//! per block is added for the figure compared with the target. RSS growth is printed
//! too: right after the creates (it also holds memory freed after requests that glibc's
//! per-thread arenas keep), and after the lists and a `malloc_trim` (what is live plus
//! fragmentation).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use granary::embedded::{EmbeddedOptions, EmbeddedServer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

/// The system allocator, counting live heap bytes.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);
static BLOCKS: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only a counter is updated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
            BLOCKS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
            BLOCKS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (i.e. `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; `ptr` came from `System` with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_heap_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

fn live_heap_blocks() -> i64 {
    BLOCKS.load(Ordering::Relaxed)
}

/// What glibc's malloc adds to each block beyond the requested size, on average (an
/// 8-byte header and rounding to 16 bytes); the counter sees requested sizes only.
const MALLOC_BLOCK_OVERHEAD: f64 = 16.0;

/// Returns the memory glibc's malloc keeps but no longer uses to the system, so RSS shows
/// what is live (plus fragmentation) rather than the high-water mark of request garbage.
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
    serde_json::from_value(json!({
        "metadata": {"name": format!("cm-{i:07}"), "labels": {"bench": "yes", "shard": (i % 10).to_string()}},
        "data": {"key": format!("value-{i}")}
    }))
    .expect("valid configmap")
}

async fn create_many(api: &Api<ConfigMap>, from: usize, to: usize) -> u64 {
    let bytes = std::sync::atomic::AtomicU64::new(0);
    futures::stream::iter(from..to)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            let bytes = &bytes;
            async move {
                let created = api
                    .create(&PostParams::default(), &configmap(i))
                    .await
                    .expect("create");
                let len = serde_json::to_vec(&created).map(|v| v.len()).unwrap_or(0) as u64;
                bytes.fetch_add(len, std::sync::atomic::Ordering::Relaxed);
            }
        })
        .await;
    bytes.into_inner()
}

#[tokio::main]
async fn main() {
    let sizes: Vec<usize> = std::env::var("GRANARY_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000]);
    let server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("server starts");
    let client = server.client().await.expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // One request first, so that the client's connection and TLS state exist before the
    // baseline.
    api.list(&ListParams::default().limit(1))
        .await
        .expect("first list");
    let mut have = 0;
    trim_malloc();
    let rss_start = rss_bytes();
    let heap_start = live_heap_bytes();
    let blocks_start = live_heap_blocks();
    let mut json_bytes = 0;
    // (objects, heap growth, JSON bytes) at the previous size.
    let mut previous: Option<(usize, i64, u64)> = None;
    for size in sizes {
        let start = Instant::now();
        json_bytes += create_many(&api, have, size).await;
        let heap = live_heap_bytes() - heap_start;
        // RSS after the creates, before the lists below (whose client side decodes every
        // object) raise the process's high-water mark.
        let rss = rss_bytes().saturating_sub(rss_start);
        let blocks = live_heap_blocks() - blocks_start;
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{}",
            json!({"bench": "embedded.create", "objects": size, "created": size - have, "seconds": secs,
                   "creates_per_second": (size - have) as f64 / secs})
        );
        have = size;
        let start = Instant::now();
        let list = api.list(&ListParams::default()).await.expect("list");
        let full = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let page = api
            .list(&ListParams::default().limit(500))
            .await
            .expect("list page");
        let paged = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let selected = api
            .list(&ListParams::default().labels("shard=3"))
            .await
            .expect("list selected");
        let selector = start.elapsed().as_secs_f64();
        println!(
            "{}",
            json!({"bench": "embedded.list", "objects": list.items.len(), "full_list_seconds": full,
                   "page_500_seconds": paged, "page_items": page.items.len(),
                   "label_selector_seconds": selector, "selected": selected.items.len()})
        );
        drop((list, page, selected));
        // The JSON size is counted as the client re-serializes each created object; the
        // stored bytes of one object, read raw, show how close that is.
        let sample = configmap(0).metadata.name.expect("named");
        let raw = client
            .request_text(
                http::Request::get(format!("/api/v1/namespaces/default/configmaps/{sample}"))
                    .body(Vec::new())
                    .expect("valid request"),
            )
            .await
            .expect("raw get")
            .len();
        let typed = serde_json::to_vec(&api.get(&sample).await.expect("get"))
            .expect("serializable")
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
        println!(
            "{}",
            json!({"bench": "embedded.memory", "objects": size,
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
                   "method": "live heap bytes (counting global allocator) after the creates minus before, minus the stored JSON, per object; server in-process, client responses dropped"})
        );
    }
    // Watch fan-out: 50 watchers each receive every one of 1000 new objects.
    let watchers = 50;
    let events = 1000;
    let rv = api
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut handles = Vec::new();
    for _ in 0..watchers {
        let stream = api
            .watch(
                &WatchParams::default().labels("fanout=yes").timeout(120),
                &rv,
            )
            .await
            .expect("watch");
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
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let mut c = configmap(10_000_000 + i);
                c.metadata
                    .labels
                    .get_or_insert_default()
                    .insert("fanout".into(), "yes".into());
                api.create(&PostParams::default(), &c)
                    .await
                    .expect("create");
            }
        })
        .await;
    let mut delivered = 0;
    for h in handles {
        delivered += h.await.unwrap_or(0);
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({"bench": "embedded.watch_fanout", "watchers": watchers, "events": events,
               "delivered": delivered, "seconds": secs, "events_per_second": delivered as f64 / secs})
    );
    server.shutdown().await;
}
