//! Arbitrary bytes into the readers of the small gzip-compressed JSON files beside a
//! tarball: `Manifest::read_gz` (`manifest.json.gz`), `ResourceList::read_gz` and
//! `Results::read_gz`. Any panic is a bug; so is memory use past the size limit's worth,
//! or an `Io` error (it cannot come from bytes in memory: bad data is a data error).

#![no_main]

use granary_velero::files::{FilesError, ResourceList, Results};
use granary_velero::manifest::{Manifest, ManifestError};
use granary_fuzz::{frame, measure};
use libfuzzer_sys::fuzz_target;

/// Most bytes of JSON a reader may decompress.
const MAX_JSON: u64 = 256 << 10;
/// Peak memory a read within `MAX_JSON` may use (the parsed tree plus buffers).
const MEMORY_BUDGET: usize = 48 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((_, gz)) = frame(data) else { return };

    let (manifest, used) = measure(|| Manifest::read_gz(&gz[..], MAX_JSON));
    assert!(
        used.peak <= MEMORY_BUDGET,
        "Manifest::read_gz used {used:?}"
    );
    match manifest {
        Ok(m) => {
            // Whatever was accepted is stored and read back unchanged.
            let back = Manifest::read_gz(&m.to_gz_bytes()[..], u64::MAX).expect("reads back");
            assert!(back == m, "manifest changed through manifest.json.gz");
        }
        Err(e) => {
            let _ = e.to_string();
            assert!(
                !matches!(e, ManifestError::Io(_)),
                "I/O error from in-memory input: {e:?}"
            );
        }
    }

    let check = |e: FilesError| {
        let _ = e.to_string();
        assert!(
            !matches!(e, FilesError::Io(_)),
            "I/O error from in-memory input: {e:?}"
        );
    };
    let (list, used) = measure(|| ResourceList::read_gz(&gz[..], MAX_JSON));
    assert!(
        used.peak <= MEMORY_BUDGET,
        "ResourceList::read_gz used {used:?}"
    );
    match list {
        Ok(l) => assert_eq!(
            ResourceList::read_gz(&l.to_gz_bytes()[..], u64::MAX).expect("reads back"),
            l
        ),
        Err(e) => check(e),
    }
    let (results, used) = measure(|| Results::read_gz(&gz[..], MAX_JSON));
    assert!(used.peak <= MEMORY_BUDGET, "Results::read_gz used {used:?}");
    match results {
        Ok(r) => assert_eq!(
            Results::read_gz(&r.to_gz_bytes()[..], u64::MAX).expect("reads back"),
            r
        ),
        Err(e) => check(e),
    }
});
