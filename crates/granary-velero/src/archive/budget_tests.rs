//! The total memory budget: archives whose per-entry sizes are all within limits but
//! whose sum is not (many long paths, many items with large metadata) are read within
//! [`ArchiveLimits::max_retained_bytes`] or refused, measured in heap bytes actually
//! held (a counting allocator for this thread), not RSS.

use chrono::{TimeZone, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::json;

use super::*;
use crate::heap_counter::{HeapCounter, peak_heap};
use crate::inspect::{MAX_LISTED, verify_reader};
use crate::manifest::{ItemDigests, Manifest};
use crate::resource::GroupResource;

#[global_allocator]
static ALLOC: HeapCounter = HeapCounter;

/// What one read needs besides what it keeps: the gzip window and tar buffers, one
/// entry's body and parsed JSON, one report line being formatted.
const TRANSIENT: usize = 1 << 20;

/// `count` files that are neither items nor the version file, each at a distinct path
/// of about 3 KiB (GNU long names): every entry within every per-entry limit.
fn long_paths(count: usize) -> Vec<u8> {
    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    let tail = "p".repeat(3000);
    for i in 0..count {
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o755);
        b.append_data(&mut h, format!("junk/{i:06}/{tail}"), &b"x"[..])
            .expect("append");
    }
    b.into_inner().expect("tar").finish().expect("gzip")
}

fn limits(retained: u64) -> ArchiveLimits {
    ArchiveLimits {
        max_retained_bytes: retained,
        ..ArchiveLimits::default()
    }
}

#[test]
fn many_long_paths_are_verified_within_the_budget() {
    let gz = long_paths(2_000);
    assert!(gz.len() < 256 << 10, "{} bytes on disk", gz.len());
    let budget = 1 << 20;
    let (report, peak) = peak_heap(|| verify_reader(&gz[..], None, &limits(budget)));
    let report = report.expect("every entry is within the limits and the total fits");
    assert_eq!(report.entries, 2_000);
    // Every junk file is a note, but only the first ones are listed.
    assert_eq!(
        report.notes.len(),
        MAX_LISTED + 2,
        "{:?}",
        report.notes.last()
    );
    assert!(
        report.notes.iter().any(|n| n.contains("1900 more notes")),
        "{:?}",
        &report.notes[MAX_LISTED..]
    );
    assert!(
        peak < budget as usize + TRANSIENT,
        "verify held {peak} bytes for a {budget}-byte budget"
    );
}

#[test]
fn the_duplicate_check_alone_is_refused_past_the_budget() {
    let gz = long_paths(2_000);
    let (err, peak) = peak_heap(|| read_archive(&gz[..], &limits(64 << 10), |_| Ok(())));
    assert!(
        matches!(
            err,
            Err(ArchiveError::RetainedBudgetExceeded { limit }) if limit == 64 << 10
        ),
        "{err:?}"
    );
    assert!(peak < (64 << 10) + TRANSIENT, "held {peak} bytes");
}

/// `count` pods, each with an 8 KiB annotation: small compressed, large held. Returns
/// the tarball and its manifest.
fn heavy_items(count: usize) -> (Vec<u8>, Manifest) {
    let mut w = ArchiveWriter::new(Vec::new(), Utc.timestamp_opt(0, 0).unwrap()).expect("starts");
    let pods = GroupResource::new("", "pods");
    let note = "n".repeat(8 << 10);
    for i in 0..count {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": format!("p{i}"), "namespace": "a", "uid": format!("u{i}"),
            "annotations": {"note": note},
        }});
        w.add_item(&pods, "v1", &pod).expect("adds");
    }
    w.finish_with_manifest().expect("finishes")
}

#[test]
fn collected_items_past_the_budget_are_refused_by_every_reader_that_keeps_them() {
    let (gz, _) = heavy_items(500);
    let tight = limits(1 << 20);
    // Verifying keeps a fingerprint per item, not the items (4 MiB of annotations).
    let (verified, peak) = peak_heap(|| verify_reader(&gz[..], None, &tight));
    let verified = verified.expect("fingerprints fit");
    assert!(verified.is_ok(), "{verified}");
    assert!(peak < (1 << 20) + TRANSIENT, "verify held {peak} bytes");
    let (parsed, peak) = peak_heap(|| parse_archive(&gz[..], &tight));
    assert!(matches!(
        parsed,
        Err(ArchiveError::RetainedBudgetExceeded { .. })
    ));
    assert!(peak < (1 << 20) + TRANSIENT, "parse held {peak} bytes");
    let (rebuilt, peak) = peak_heap(|| Manifest::from_archive(&gz[..], &tight));
    assert!(matches!(
        rebuilt,
        Err(ArchiveError::RetainedBudgetExceeded { .. })
    ));
    assert!(
        peak < (1 << 20) + TRANSIENT,
        "from_archive held {peak} bytes"
    );
    // With room for them, the same archive is fine.
    let report = verify_reader(&gz[..], None, &limits(64 << 20)).expect("fits");
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.items, 500);
}

#[test]
fn a_stored_manifest_counts_against_the_same_budget() {
    let (gz, manifest) = heavy_items(500);
    let fits = limits(1 << 20);
    let stored = Some(ItemDigests::of_manifest(&manifest));
    let report = verify_reader(&gz[..], stored, &fits).expect("fits");
    assert!(report.is_ok(), "{report}");
    // A stored manifest far larger than the tarball's (here 40,000 fingerprints,
    // 1.25 MiB) does not fit beside it.
    let huge: ItemDigests = (0..40_000u32)
        .map(|i| {
            let mut d = [0u8; 32];
            d[..4].copy_from_slice(&i.to_be_bytes());
            d
        })
        .collect();
    let (both, peak) = peak_heap(|| verify_reader(&gz[..], Some(huge), &fits));
    assert!(
        matches!(both, Err(ArchiveError::RetainedBudgetExceeded { .. })),
        "{both:?}"
    );
    // The stored fingerprints were allocated before the measurement started.
    assert!(
        peak < fits.max_retained_bytes as usize + TRANSIENT,
        "held {peak} bytes"
    );
}

/// Writing a backup keeps a compact head per item, not its manifest record: items with
/// labels, an owner and a 1 KiB annotation, written to a sink, cost less than 160 bytes
/// of heap each at the peak (measured between 2,000 and 20,000 items, so the writer's
/// buffers cancel out; the spare capacity of its vectors is included). A whole
/// [`Manifest`] held more than 1.5 KiB per item. The spool's output is then the
/// manifest the items make.
#[test]
fn writing_keeps_a_compact_head_per_item_not_its_manifest_record() {
    let cms = GroupResource::new("", "configmaps");
    let note = "n".repeat(1 << 10);
    let item = |i: usize| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": format!("config-{i:06}"), "namespace": format!("team-{}", i % 50),
            "uid": format!("00000000-0000-4000-8000-{i:012}"),
            "labels": {"app": "shop", "tier": format!("t{}", i % 7)},
            "annotations": {"note": note},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "root",
                "uid": "00000000-0000-4000-8000-ffffffffffff"}],
        }, "data": {"k": "v"}})
    };
    let write = |items: usize| {
        peak_heap(|| {
            let mut w = ArchiveWriter::new(std::io::sink(), Utc.timestamp_opt(0, 0).unwrap())
                .expect("starts");
            for i in 0..items {
                w.add_item(&cms, "v1", &item(i)).expect("adds");
            }
            w.finish().expect("finishes").1
        })
    };
    let (_, small) = write(2_000);
    let (mut spool, large) = write(20_000);
    let per_item = large.saturating_sub(small) / 18_000;
    assert!(
        per_item < 160,
        "held {small} bytes at 2,000 items and {large} at 20,000: {per_item} per item"
    );
    let manifest = spool.to_manifest().expect("read back");
    assert_eq!(manifest.len(), 20_000);
    let first = manifest.iter().next().expect("an item");
    assert_eq!(first.meta.annotations["note"], note);
    assert_eq!(first.meta.owners.len(), 1);
}
