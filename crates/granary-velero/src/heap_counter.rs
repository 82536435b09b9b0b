//! A counting global allocator for memory tests: the system allocator, counting the live
//! heap bytes and their peak of the thread that asked for it ([`peak_heap`]); other
//! threads (parallel tests) are not counted. A test binary installs it with
//! `#[global_allocator] static ALLOC: HeapCounter = HeapCounter;`.
//!
//! Compiled for this crate's tests and, through the `heap-counter` feature, for the
//! tests of crates above it (the restore's memory test): one copy of the workspace's
//! only unsafe code besides the benchmarks'.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The allocator (see the module docs).
pub struct HeapCounter;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let _ = TRACKING.try_with(|on| {
        if on.get() {
            let _ = LIVE.try_with(|live| {
                let now = live.get() + delta;
                live.set(now);
                let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
            });
        }
    });
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are added, and
// counting allocates nothing.
unsafe impl GlobalAlloc for HeapCounter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            track(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Runs `f` and returns the most heap bytes this thread held at once above the start
/// (0 unless [`HeapCounter`] is the binary's global allocator).
pub fn peak_heap<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    TRACKING.with(|t| t.set(true));
    let out = f();
    TRACKING.with(|t| t.set(false));
    (out, PEAK.with(|p| p.get()).max(0) as usize)
}
