//! Benchmark of the Velero archive and manifest (DESIGN §9), not run in CI:
//! write and read 50k items of ~1 KiB (items/s, peak RSS), and manifest build plus
//! dependency order at 1M items (seconds, bytes per item). Prints one JSON line per
//! measurement. `cargo bench --bench velero_archive [-- --items N --manifest-items M]`.

use std::io::{BufReader, BufWriter};
use std::time::Instant;

use chrono::{TimeZone, Utc};
use granary::velero::archive::{ArchiveEntry, ArchiveLimits, ArchiveWriter, read_archive};
use granary::velero::manifest::{Manifest, ManifestItem};
use granary::velero::resource::GroupResource;
use serde_json::{Value, json};

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn object(i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": format!("cm-{i:07}"),
            "namespace": format!("ns-{:03}", i % 100),
            "uid": format!("00000000-0000-0000-0000-{i:012}"),
            "labels": {"app": "bench", "shard": (i % 7).to_string()},
            "ownerReferences": if i.is_multiple_of(10) { json!([]) } else { json!([{"uid": format!("00000000-0000-0000-0000-{:012}", i - i % 10)}]) },
        },
        "data": {"payload": "x".repeat(700)},
    })
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let items = arg("--items", 50_000);
    let manifest_items = arg("--manifest-items", 1_000_000);
    let dir = tempfile::tempdir().expect("temp dir for the bench tarball");
    let path = dir.path().join("bench.tar.gz");
    let cms = GroupResource::new("", "configmaps");

    let start = Instant::now();
    let file = BufWriter::new(std::fs::File::create(&path).expect("create tarball"));
    let mut w = ArchiveWriter::new(file, Utc.timestamp_opt(0, 0).single().expect("epoch"))
        .expect("start archive");
    for i in 0..items {
        w.add_item(&cms, "v1", &object(i)).expect("add item");
    }
    let (_, manifest) = w.finish().expect("finish archive");
    let secs = start.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "{}",
        json!({"bench": "archive_write", "items": items, "seconds": secs, "items_per_second": items as f64 / secs,
               "tarball_bytes": size, "peak_rss_kib": rss_kib("VmHWM:"), "manifest_items": manifest.len()})
    );

    let start = Instant::now();
    let mut read = 0usize;
    let input = BufReader::new(std::fs::File::open(&path).expect("open tarball"));
    read_archive(input, &ArchiveLimits::default(), |e| {
        if let ArchiveEntry::Item(_) = e {
            read += 1;
        }
        Ok(())
    })
    .expect("read archive");
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({"bench": "archive_read", "items": items, "item_files": read, "seconds": secs,
               "items_per_second": items as f64 / secs, "peak_rss_kib": rss_kib("VmHWM:")})
    );
    drop(manifest);

    let before = rss_kib("VmRSS:");
    let start = Instant::now();
    let mut m = Manifest::new();
    for i in 0..manifest_items {
        let owners = if i.is_multiple_of(10) {
            vec![]
        } else {
            vec![format!("uid-{}", i - i % 10)]
        };
        m.add(ManifestItem {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            resource: "configmaps".into(),
            namespace: format!("ns-{:03}", i % 100),
            name: format!("cm-{i:07}"),
            uid: format!("uid-{i}"),
            labels: [("app".to_owned(), "bench".to_owned())].into(),
            annotations: Default::default(),
            owners,
        })
        .expect("unique item");
    }
    let build = start.elapsed().as_secs_f64();
    let after = rss_kib("VmRSS:");
    let start = Instant::now();
    let order = m.dependency_order();
    let order_secs = start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({"bench": "manifest_build_and_order", "items": manifest_items, "build_seconds": build,
               "order_seconds": order_secs, "ordered": order.order.len(),
               "bytes_per_item": (after.saturating_sub(before) * 1024) as f64 / manifest_items.max(1) as f64,
               "peak_rss_kib": rss_kib("VmHWM:")})
    );
}
