//! What a restore keeps in memory while it reads a backup: the heads of its items, not
//! their bodies (docs/architecture.md#restores), measured in heap bytes actually held
//! (a counting allocator for this thread), not RSS.

use serde_json::json;

use super::contents::read_backup;
use granary_api::velero::RestoreSpec;
use granary_velero::archive::{ArchiveLimits, ArchiveWriter};
use granary_velero::heap_counter::{HeapCounter, peak_heap};
use granary_velero::resource::GroupResource;

#[global_allocator]
static ALLOC: HeapCounter = HeapCounter;

const ITEMS: usize = 3_000;
const PAYLOAD: usize = 4 << 10;

/// A tarball of ITEMS ConfigMaps of PAYLOAD bytes of poorly compressible data each.
fn tarball() -> Vec<u8> {
    let mut w = ArchiveWriter::new(Vec::new(), chrono::Utc::now()).expect("writer");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..ITEMS {
        let payload: String = (0..PAYLOAD / 16)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("{x:016x}")
            })
            .collect();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i:05}"), "namespace": format!("ns-{}", i % 10),
                "uid": format!("00000000-0000-4000-8000-{i:012}"),
                "labels": {"app": "memory", "shard": (i % 7).to_string()}},
            "data": {"payload": payload}});
        w.add_item(&GroupResource::new("", "configmaps"), "v1", &cm)
            .expect("add");
    }
    w.finish().expect("finish").0
}

#[test]
fn reading_a_backup_keeps_the_heads_in_memory_and_the_bodies_on_disk() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("backup.tar.gz");
    let gz = tarball();
    std::fs::write(&path, &gz).expect("tarball written");
    let bodies = ITEMS * PAYLOAD;
    // A memory cap below the bodies (and below the tarball) but above the heads: the
    // whole backup is read within it.
    let limits = ArchiveLimits {
        max_retained_bytes: (bodies / 8) as u64,
        ..ArchiveLimits::default()
    };
    assert!(
        gz.len() as u64 > limits.max_retained_bytes,
        "{} bytes",
        gz.len()
    );
    let (read, peak) = peak_heap(|| {
        let file = std::fs::File::open(&path).expect("open");
        read_backup(
            std::io::BufReader::new(file),
            &limits,
            &RestoreSpec::default(),
            Some(&dir.path().join("spill")),
        )
    });
    let read = read.expect("read within the cap");
    assert!(read.problems.is_empty(), "{:?}", read.problems);
    assert_eq!(read.len(), ITEMS);
    // Heads (about a hundred bytes an item) and the reader's buffers, not the bodies.
    assert!(
        peak < bodies / 4,
        "reading held {peak} bytes at once for {bodies} bytes of item bodies"
    );
    // Each body reads back whole, one at a time.
    let (objects, peak) = peak_heap(|| {
        (0..ITEMS)
            .map(|i| read.object(i).expect("body"))
            .filter(|o| o["data"]["payload"].as_str().map(str::len) == Some(PAYLOAD))
            .count()
    });
    assert_eq!(objects, ITEMS);
    assert!(peak < 64 << 10, "reading bodies back held {peak} bytes");
}
