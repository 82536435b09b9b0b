//! Throughput benchmark (not a test; `cargo bench -p granary-providers --bench
//! throughput`): delete-prefix and copy of many small objects on every reachable
//! backend (objects/s and store requests per object), and streaming upload/download of
//! one large object on `local` and S3 with the process's peak RSS. Prints one JSON
//! object per measurement. Sizes: GRANARY_BENCH_OBJECTS (default 10000) and
//! GRANARY_BENCH_MIB (default 1024).

#[path = "../tests/support/mod.rs"]
mod support;

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::TryStreamExt;
use futures::stream::{self, StreamExt};
use granary_providers::{BucketOptions, ObjectStore, StoreOptions};
use support::Backend;
use tokio::io::{AsyncRead, ReadBuf};

/// Produces `remaining` bytes of a pattern without holding them in memory.
struct Generated {
    remaining: u64,
}

impl AsyncRead for Generated {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = (buf.remaining() as u64).min(self.remaining) as usize;
        let fill: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        buf.put_slice(&fill);
        self.remaining -= n as u64;
        Poll::Ready(Ok(()))
    }
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn many_objects(name: &str, store: &dyn ObjectStore, n: u64) {
    let b = support::bucket("bench");
    store
        .ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("bucket");
    let keys: Vec<String> = (0..n).map(|i| format!("src/{i:06}")).collect();
    support::put_many(store, &b, &keys).await;

    let t = Instant::now();
    stream::iter(keys.iter())
        .map(|k| {
            let b = b.clone();
            async move { store.copy(&b, k, &b, &k.replace("src/", "dst/")).await }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .expect("copy");
    let secs = t.elapsed().as_secs_f64();
    println!(
        r#"{{"bench":"copy","backend":"{name}","objects":{n},"seconds":{secs:.3},"objects_per_s":{:.0},"requests_per_object":1}}"#,
        n as f64 / secs
    );

    let t = Instant::now();
    let report = store.delete_prefix(&b, "").await.expect("delete prefix");
    let secs = t.elapsed().as_secs_f64();
    println!(
        r#"{{"bench":"delete_prefix","backend":"{name}","objects":{},"seconds":{secs:.3},"objects_per_s":{:.0},"delete_requests_per_object":{:.5}}}"#,
        report.deleted,
        report.deleted as f64 / secs,
        report.requests as f64 / report.deleted.max(1) as f64
    );
    store.delete_bucket(&b, true).await.expect("cleanup");
}

async fn large_object(name: &str, store: &dyn ObjectStore, mib: u64) {
    let b = support::bucket("bench-big");
    store
        .ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("bucket");
    let len = mib * 1024 * 1024;
    let t = Instant::now();
    store
        .put_reader(&b, "big", Box::pin(Generated { remaining: len }))
        .await
        .expect("upload");
    let up = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut s = store.get(&b, "big").await.expect("download");
    let mut got = 0u64;
    while let Some(chunk) = s.try_next().await.expect("chunk") {
        got += chunk.len() as u64;
    }
    let down = t.elapsed().as_secs_f64();
    assert_eq!(got, len);
    println!(
        r#"{{"bench":"large_object","backend":"{name}","mib":{mib},"upload_mib_per_s":{:.1},"download_mib_per_s":{:.1},"peak_rss_mib":{:.1}}}"#,
        mib as f64 / up,
        mib as f64 / down,
        peak_rss_mib()
    );
    store.delete_bucket(&b, true).await.expect("cleanup");
}

#[tokio::main]
async fn main() {
    let n = env_num("GRANARY_BENCH_OBJECTS", 10_000);
    let mib = env_num("GRANARY_BENCH_MIB", 1024);
    let opts = StoreOptions {
        concurrency: 16,
        ..support::options()
    };
    for (name, backend) in [
        ("local", Backend::Local),
        ("s3", Backend::S3),
        ("azure", Backend::Azure),
        ("gcs", Backend::Gcs),
    ] {
        let Some((store, _guard)) = support::open(backend, opts.clone()).await else {
            continue;
        };
        many_objects(name, store.as_ref(), n).await;
        if matches!(backend, Backend::Local | Backend::S3) {
            large_object(name, store.as_ref(), mib).await;
        }
    }
}
