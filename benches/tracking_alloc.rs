//! A global allocator for benches that measure memory: the runtime's counting allocator
//! (processes get their heap figures), with the bytes live and their peak since the last
//! [`Tracking::reset_peak`]. Shared by `heap_snapshot` and `scale`, and by tprof's
//! `tests/export_memory.rs`.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

use runtime::CountingAlloc;

/// The counting allocator (processes get their heap figures), with the bytes live and their
/// peak since the last [`Tracking::reset_peak`].
pub(crate) struct Tracking {
    inner: CountingAlloc,
    live: AtomicUsize,
    peak: AtomicUsize,
}

impl Tracking {
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    pub(crate) fn reset_peak(&self) -> usize {
        let live = self.live();
        self.peak.store(live, Ordering::Relaxed);
        live
    }

    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// The bytes `value` holds: what a clone of it allocates (not every bench reads it).
    #[allow(dead_code)]
    pub(crate) fn bytes_of<T: Clone>(&self, value: &T) -> usize {
        let before = self.live();
        let clone = std::hint::black_box(value.clone());
        let bytes = self.live().saturating_sub(before);
        drop(clone);
        bytes
    }

    fn grew(&self, size: usize) {
        let live = self.live.fetch_add(size, Ordering::Relaxed) + size;
        self.peak.fetch_max(live, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to the counting allocator with the caller's arguments
// unchanged, and returns its result unchanged, so each upholds `GlobalAlloc`'s contract exactly
// as `CountingAlloc` does; the bookkeeping beside it is two relaxed atomics, which neither
// allocate nor unwind. The bench exercises every path (allocations, frees, reallocations).
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { self.inner.alloc(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.dealloc(ptr, layout) };
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
            self.grew(new_size);
        }
        p
    }
}

#[global_allocator]
pub(crate) static ALLOC: Tracking = Tracking {
    inner: CountingAlloc::system(),
    live: AtomicUsize::new(0),
    peak: AtomicUsize::new(0),
};
