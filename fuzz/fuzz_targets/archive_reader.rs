//! Arbitrary bytes into the backup tarball reader (`read_archive`, `parse_archive`,
//! `Manifest::from_archive`) with small limits. Any panic is a bug; so is memory use
//! beyond what the limits allow, an accepted entry past a limit, or an error that is
//! not one of the reader's own refusals (an `Io` error cannot come from bytes in memory).

#![no_main]

use granary_velero::archive::{
    ArchiveEntry, ArchiveError, ArchiveLimits, parse_archive, read_archive,
};
use granary_velero::manifest::Manifest;
use granary_fuzz::{frame, measure};
use libfuzzer_sys::fuzz_target;

const LIMITS: ArchiveLimits = ArchiveLimits {
    max_entries: 64,
    max_entry_bytes: 64 << 10,
    max_total_bytes: 512 << 10,
    max_path_bytes: 300,
    max_retained_bytes: 8 << 20,
};

/// Peak memory a read within `LIMITS` may use: every item held as a JSON tree (a few
/// tens of bytes per input byte at worst) plus buffers. A claimed size honoured without
/// a check would be far past it.
const MEMORY_BUDGET: usize = 64 << 20;

fn check_error(what: &str, e: &ArchiveError) {
    // Formatting must work for every error.
    let _ = e.to_string();
    match e {
        ArchiveError::Io(io) => panic!("{what}: I/O error from in-memory input: {io:?}"),
        ArchiveError::InvalidObject(_) => panic!("{what}: writer-side error from the reader: {e}"),
        ArchiveError::Manifest(_) if what != "from_archive" => {
            panic!("{what}: manifest error from the plain reader: {e}")
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((_, gz)) = frame(data) else { return };

    let (result, used) = measure(|| {
        let mut entries = 0u64;
        let result = read_archive(&gz[..], &LIMITS, |entry| {
            entries += 1;
            assert!(entries <= LIMITS.max_entries, "more entries than the limit");
            let (path, len) = match &entry {
                ArchiveEntry::Version { contents } => ("metadata/version", contents.len()),
                ArchiveEntry::Item(item) => {
                    assert!(item.object.is_object(), "item is not a JSON object");
                    (item.entry_path, item.bytes.len())
                }
                ArchiveEntry::Directory { path } => (*path, 0),
                ArchiveEntry::Other { path, bytes } => (*path, bytes.len()),
            };
            assert!(
                len as u64 <= LIMITS.max_entry_bytes,
                "entry over the size limit"
            );
            assert!(
                path.len() as u64 <= LIMITS.max_path_bytes,
                "path over the limit"
            );
            assert!(
                !path.is_empty()
                    && !path.starts_with('/')
                    && !path
                        .split('/')
                        .any(|s| s.is_empty() || s == "." || s == ".."),
                "unsafe path accepted: {path:?}"
            );
            Ok(())
        });
        if let Ok(stats) = &result {
            assert_eq!(
                stats.entries, entries,
                "stats disagree with the entries seen"
            );
            assert!(stats.uncompressed_bytes <= LIMITS.max_total_bytes);
        }
        result
    });
    assert!(used.peak <= MEMORY_BUDGET, "read_archive used {used:?}");
    if let Err(e) = &result {
        check_error("read_archive", e);
    }

    let (parsed, used) = measure(|| parse_archive(&gz[..], &LIMITS));
    assert!(used.peak <= MEMORY_BUDGET, "parse_archive used {used:?}");
    // The same bytes give the same verdict whichever way they are read.
    assert_eq!(
        parsed.is_ok(),
        result.is_ok(),
        "parse_archive and read_archive disagree"
    );
    match &parsed {
        Ok(p) => assert!(p.stats.uncompressed_bytes <= LIMITS.max_total_bytes),
        Err(e) => check_error("parse_archive", e),
    }

    let (manifest, used) = measure(|| Manifest::from_archive(&gz[..], &LIMITS));
    assert!(used.peak <= MEMORY_BUDGET, "from_archive used {used:?}");
    match manifest {
        // A manifest rebuilt from a tarball survives its own storage format.
        Ok(m) => {
            let back = Manifest::read_gz(&m.to_gz_bytes()[..], u64::MAX)
                .expect("stored manifest reads back");
            assert!(back == m, "manifest changed through manifest.json.gz");
        }
        Err(e) => check_error("from_archive", &e),
    }
});
