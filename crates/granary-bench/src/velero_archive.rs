//! Benchmark of the Velero archive and manifest: write and read N items of ~1 KiB
//! (`--size`, default 50,000; items/s, peak RSS), and manifest build plus dependency
//! order at 20 × N items (default 1M; seconds, bytes per item). No peer.

use std::io::{BufReader, BufWriter};
use std::time::Instant;

use chrono::{TimeZone, Utc};
use granary_velero::archive::{ArchiveEntry, ArchiveLimits, ArchiveWriter, read_archive};
use granary_velero::manifest::{Manifest, ManifestItem};
use granary_velero::resource::GroupResource;
use serde_json::{Value, json};

use anyhow::Context;

use super::support::Scratch;
use super::table::{Row, Unit};
use super::{BenchOptions, Outcome};

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

pub(crate) fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let items = opts.size.unwrap_or(50_000);
    let manifest_items = items.saturating_mul(20);
    let dir = Scratch::new("velero-archive").context("scratch directory")?;
    let path = dir.path().join("bench.tar.gz");
    let cms = GroupResource::new("", "configmaps");

    let start = Instant::now();
    let file = BufWriter::new(std::fs::File::create(&path).context("create tarball")?);
    let mut w = ArchiveWriter::new(file, Utc.timestamp_opt(0, 0).single().context("epoch")?)
        .context("start archive")?;
    for i in 0..items {
        w.add_item(&cms, "v1", &object(i)).context("add item")?;
    }
    let (_, manifest) = w.finish().context("finish archive")?;
    let secs = start.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let write = json!({ "items": items, "seconds": secs, "items_per_second": items as f64 / secs,
               "tarball_bytes": size, "peak_rss_kib": rss_kib("VmHWM:"), "manifest_items": manifest.len()});

    let start = Instant::now();
    let mut read = 0usize;
    let input = BufReader::new(std::fs::File::open(&path).context("open tarball")?);
    read_archive(input, &ArchiveLimits::default(), |e| {
        if let ArchiveEntry::Item(_) = e {
            read += 1;
        }
        Ok(())
    })
    .context("read archive")?;
    let secs = start.elapsed().as_secs_f64();
    let read_json = json!({ "items": items, "item_files": read, "seconds": secs,
               "items_per_second": items as f64 / secs, "peak_rss_kib": rss_kib("VmHWM:")});
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
        .context("unique item")?;
    }
    let build = start.elapsed().as_secs_f64();
    let after = rss_kib("VmRSS:");
    let start = Instant::now();
    let order = m.dependency_order();
    let order_secs = start.elapsed().as_secs_f64();
    let manifest_json = json!({ "items": manifest_items, "build_seconds": build,
               "order_seconds": order_secs, "ordered": order.order.len(),
               "bytes_per_item": (after.saturating_sub(before) * 1024) as f64 / manifest_items.max(1) as f64,
               "peak_rss_kib": rss_kib("VmHWM:")});
    let rows = vec![
        Row::alone(
            format!("archive write, {items} items"),
            Unit::PerSecond,
            items as f64 / write["seconds"].as_f64().unwrap_or(f64::NAN),
        ),
        Row::alone(
            format!("archive read, {items} items"),
            Unit::PerSecond,
            items as f64 / read_json["seconds"].as_f64().unwrap_or(f64::NAN),
        ),
        Row::alone(
            format!("manifest build, {manifest_items} items"),
            Unit::Seconds,
            build,
        ),
        Row::alone(
            format!("dependency order, {manifest_items} items"),
            Unit::Seconds,
            order_secs,
        ),
    ];
    Ok(Outcome {
        title: format!(
            "Velero archive write/read of {items} items and manifest of {manifest_items} items (no peer)"
        ),
        sizes: json!({"items": items, "manifest_items": manifest_items}),
        rows,
        details: json!({"archive_write": write, "archive_read": read_json, "manifest_build_and_order": manifest_json}),
    })
}
