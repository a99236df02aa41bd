//! Cells of a thread's own state that a signal handler on the same thread may read.
//!
//! The traced stack's depth, frames and active sessions, and the current process, are plain
//! per-thread values written only by their thread. The CPU sampler's signal handler
//! ([`crate::sample`]) interrupts that thread at any instruction and reads them. A `Cell`
//! would make that a data race in Rust's memory model (and let the compiler keep a value in a
//! register, or reorder two stores, past the point where the handler looks), so these are
//! relaxed atomics: on every target a plain load or store, as a `Cell`'s, and never torn.
//!
//! Order between two of them, as the handler sees it, comes from [`SigCell::set`]: a compiler
//! fence before the store keeps every earlier write of the thread before it. So a push that
//! writes a frame and then the depth is seen by the handler with the frame written whenever it
//! sees the new depth (the handler reads the depth first, then a compiler fence, then the
//! frames). No fence instruction is emitted: a handler runs on the same thread, which sees its
//! own writes in program order; only the compiler could reorder them.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering, compiler_fence};

/// A value a signal handler on its thread may read (see the module documentation).
pub(crate) struct SigCell<A>(A);

macro_rules! sig_cell {
    ($atomic:ty, $t:ty) => {
        impl SigCell<$atomic> {
            pub(crate) const fn new(v: $t) -> Self {
                SigCell(<$atomic>::new(v))
            }

            #[inline(always)]
            pub(crate) fn get(&self) -> $t {
                self.0.load(Ordering::Relaxed)
            }

            /// Stores `v` after every earlier write of this thread, as a handler sees them.
            #[inline(always)]
            pub(crate) fn set(&self, v: $t) {
                compiler_fence(Ordering::Release);
                self.0.store(v, Ordering::Relaxed);
            }

            #[inline(always)]
            #[allow(dead_code)]
            pub(crate) fn replace(&self, v: $t) -> $t {
                let old = self.get();
                self.set(v);
                old
            }
        }
    };
}

sig_cell!(AtomicU32, u32);
sig_cell!(AtomicU64, u64);
sig_cell!(AtomicUsize, usize);
