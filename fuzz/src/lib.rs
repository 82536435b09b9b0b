//! Shared pieces of Granary's fuzz targets: a counting global allocator, so a target can
//! assert that a reader's memory stays within what its limits allow, and the input
//! framing (first byte picks how the rest is fed).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use flate2::Compression;
use flate2::write::GzEncoder;

/// The system allocator, counting live bytes, their peak and the largest single request.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

#[global_allocator]
static ALLOC: Counting = Counting;

fn grew(by: usize, request: usize) {
    let live = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(live, Ordering::Relaxed);
    LARGEST.fetch_max(request, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size(), layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size(), layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= layout.size() {
            grew(new_size - layout.size(), new_size);
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Memory used while running one closure.
#[derive(Debug, Clone, Copy)]
pub struct MemoryUse {
    /// Most bytes live at once above what was live at the start.
    pub peak: usize,
    /// Largest single allocation request.
    pub largest: usize,
}

/// Runs `f`, measuring its memory use. Targets are single-threaded, so nothing else
/// allocates meanwhile.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, MemoryUse) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    LARGEST.store(0, Ordering::Relaxed);
    let out = f();
    let used = MemoryUse {
        peak: PEAK.load(Ordering::Relaxed).saturating_sub(base),
        largest: LARGEST.load(Ordering::Relaxed),
    };
    (out, used)
}

/// How the bytes after the first are fed to a reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// As given: a gzip stream (mutations mostly exercise the decompressor).
    Gzip,
    /// Raw contents, gzip-compressed by the target first (mutations reach the tar, PAX
    /// and JSON parsing behind the decompressor).
    Plain,
}

/// Splits a fuzz input into its framing and the compressed stream to feed.
pub fn frame(data: &[u8]) -> Option<(Framing, Vec<u8>)> {
    let (&mode, rest) = data.split_first()?;
    if mode % 2 == 0 {
        Some((Framing::Gzip, rest.to_vec()))
    } else {
        Some((Framing::Plain, gzip(rest)))
    }
}

/// gzip-compresses `data` (fast level).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(data).expect("writing into a Vec cannot fail");
    gz.finish().expect("finishing into a Vec cannot fail")
}
