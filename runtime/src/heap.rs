//! Per-process heaps: what each process allocated, what it still holds, and its peak.
//!
//! Install [`CountingAlloc`] as the global allocator and every allocation made while a process
//! is polled is charged to that process (and, for `tprof`'s call_memory, to the innermost
//! traced function it is in): words (8 bytes, rounded up per allocation, as tprof counts),
//! bytes and blocks. Each block is tagged with its owner, so a free credits the owner's live
//! bytes even when another process or thread frees it, and a free after the owner is gone is
//! harmless.
//!
//! - The runtime's bookkeeping for a new process (its task, table entry and mailbox) is charged
//!   to the new process, not to its parent.
//! - A message's envelope (the box [`send`](fn@crate::send) puts it in) moves to the receiver's
//!   account when it is queued; what the message owns stays with whoever allocated it.
//! - Growing a mailbox's queue is charged to the receiver.
//! - Work of [`spawn_task`](crate::spawn_task) and [`spawn_blocking`](crate::spawn_blocking)
//!   helpers is charged to the process they belong to.
//! - Allocations outside any process, and the profiler's own, are charged to no one.
//!
//! ```
//! use runtime::{Node, heap};
//!
//! #[global_allocator]
//! static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
//!
//! # fn main() {
//! let node = Node::new().unwrap();
//! let stats = node
//!     .run(async {
//!         let kept = vec![0u8; 1000];
//!         let stats = heap::process_heap(runtime::self_pid()).unwrap();
//!         drop(kept);
//!         stats
//!     })
//!     .unwrap();
//! assert!(stats.bytes >= 1000 && stats.live_bytes >= 1000);
//! # }
//! ```
//!
//! # Limits
//!
//! [`SpawnOptions::max_heap_size`](crate::SpawnOptions::max_heap_size) and
//! [`SpawnOptions::max_message_queue_len`](crate::SpawnOptions::max_message_queue_len) are soft
//! limits: an allocator may not fail or unwind for accounting's sake, so going over sets a flag
//! that the process acts on at its next checkpoint (the end of its current poll, or a runtime
//! call such as `receive`), ending with [`ExitReason::MaxHeapSize`](crate::ExitReason) or
//! [`ExitReason::MaxMessageQueueLen`](crate::ExitReason) — as Erlang checks its limit at the
//! next garbage collection.
//!
//! # Without the allocator
//!
//! Heap figures need [`CountingAlloc`]; without it, [`process_heap`] fails with
//! [`HeapError::NotInstalled`], which says how to install it, instead of reporting zeros.
//! Processes then get no heap account at spawn (128 bytes and some work less per process); one
//! that a trace session measures gets one at its first measured poll, where the traced stack
//! records the function it is in (for `process_info`).

mod account;
mod alloc;
mod counts;
mod sampling;

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

pub(crate) use account::{Account, AccountCell, Charging, current_owner_account};
pub use alloc::CountingAlloc;
pub(crate) use counts::{Counts, Tally, Tallying};
pub(crate) use sampling::AllocModel;

/// Allocation sampling's switches, for `runtime::sample`.
pub(crate) mod alloc_sampling {
    pub(crate) use super::sampling::{model, start, stop};
}

use crate::Pid;

/// The process layer's answers to this layer, which never names it: filled at link time by
/// [`crate::world`]. `(pid)`: process `pid`'s heap figures, `None` when it is not alive (or
/// keeps no account).
// The `link_section` statics linkme makes are flagged by `unsafe_code` in the crate that
// defines the slice; nothing here is unsafe (the same for the slice below).
#[allow(unsafe_code)]
#[linkme::distributed_slice]
pub(crate) static PROCESS_HEAP: [fn(Pid) -> Option<HeapStats>];

/// Ends the current process with `ExitReason::MaxHeapSize` if it runs (is not already
/// exiting): the process layer's, filled at link time.
#[allow(unsafe_code)]
#[linkme::distributed_slice]
pub(crate) static OVER_LIMIT: [fn()];

/// One process's heap figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeapStats {
    /// Words allocated (8 bytes each, rounded up per allocation), freed or not.
    pub words: u64,
    /// Bytes allocated, freed or not.
    pub bytes: u64,
    /// Allocations made.
    pub blocks: u64,
    /// Bytes it owns that are not freed yet.
    pub live_bytes: u64,
    /// The most live bytes it has held at once.
    pub peak_live_bytes: u64,
}

/// What to say when the counting allocator is missing, after what needs it ("heap figures
/// ...", "call_memory ...").
pub(crate) const NEEDS_THE_ALLOCATOR: &str = "need the counting allocator, which this program \
     does not use; add `#[global_allocator] static ALLOC: runtime::CountingAlloc = \
     runtime::CountingAlloc::system();` to the binary (main.rs, or each integration-test file)";

/// Why heap figures could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeapError {
    /// [`CountingAlloc`] is not the global allocator of this program.
    NotInstalled,
    /// No such process is alive.
    NoProc(Pid),
}

impl fmt::Display for HeapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeapError::NotInstalled => write!(f, "heap figures {NEEDS_THE_ALLOCATOR}"),
            HeapError::NoProc(pid) => write!(f, "no process {pid} is alive"),
        }
    }
}

impl std::error::Error for HeapError {}

/// Whether [`CountingAlloc`] is this program's global allocator.
#[inline]
pub fn installed() -> bool {
    match INSTALLED.load(Ordering::Relaxed) {
        YES => true,
        NO => false,
        _ => probe(),
    }
}

const YES: u8 = 2;
const NO: u8 = 1;
/// Unknown (0), [`NO`] or [`YES`].
static INSTALLED: AtomicU8 = AtomicU8::new(0);

/// [`probe_now`], once per program.
#[cold]
fn probe() -> bool {
    static PROBE: OnceLock<bool> = OnceLock::new();
    let installed = *PROBE.get_or_init(probe_now);
    INSTALLED.store(if installed { YES } else { NO }, Ordering::Relaxed);
    installed
}

/// Allocates a block of [`alloc::PROBE`]'s layout through the global allocator and looks
/// whether a [`CountingAlloc`] handed it out: the allocator records the address of each such
/// block (it recognises the layout on its out-of-line path). Nothing is set around the
/// allocation for the allocator to read, so the answer does not lean on the order of a
/// thread-local's writes and an allocator call, which the compiler does not promise to keep.
///
/// The record is cleared first: a `CountingAlloc` used as a plain value (not the global
/// allocator) records the blocks of that layout it hands out too, and one it handed out and
/// freed before may be where the global allocator puts the probe's block. Taken for the
/// probe's, it would make [`installed`] true without the counting allocator, and
/// [`move_box`] would then write a tag outside a box's block.
fn probe_now() -> bool {
    let layout = alloc::PROBE;
    // The same atomic, written then read on this thread: in this order, whatever the
    // allocator call between does.
    alloc::PROBED.store(0, Ordering::Relaxed);
    // SAFETY: the layout's size is not zero.
    #[allow(unsafe_code)]
    let block = unsafe { std::alloc::alloc(layout) };
    if block.is_null() {
        return false;
    }
    // The block's address escapes: the allocation is made, and made here.
    let block = std::hint::black_box(block);
    let seen = alloc::PROBED.load(Ordering::Relaxed) == block.addr();
    // SAFETY: `block` came from `std::alloc::alloc` with this layout, and is freed once.
    #[allow(unsafe_code)]
    unsafe {
        std::alloc::dealloc(block, layout)
    };
    seen
}

/// [`HeapError::NotInstalled`] unless [`CountingAlloc`] is the global allocator.
///
/// # Errors
/// [`HeapError::NotInstalled`], whose message says how to install it.
pub fn require_installed() -> Result<(), HeapError> {
    if installed() {
        Ok(())
    } else {
        Err(HeapError::NotInstalled)
    }
}

/// The heap figures of process `pid` (on any node of this OS process).
///
/// # Errors
/// [`HeapError::NotInstalled`] without [`CountingAlloc`]; [`HeapError::NoProc`] when `pid` is
/// not alive.
pub fn process_heap(pid: Pid) -> Result<HeapStats, HeapError> {
    require_installed()?;
    PROCESS_HEAP
        .iter()
        .find_map(|heap_of| heap_of(pid))
        .ok_or(HeapError::NoProc(pid))
}

/// Makes the allocations that the standard library makes lazily, on first use, outside any
/// process (stdout's and stderr's buffers), so that the first process to print is not charged
/// for them; and checks once whether the allocator is installed.
pub(crate) fn warm_up() {
    suppressed(|| {
        let _ = std::io::stdout();
        let _ = std::io::stderr();
        installed();
    });
    warm_thread();
}

/// Makes, outside any process, what this thread allocates on its first use of the runtime's
/// lock-free lookups: arc-swap's per-thread debt node (a 128-byte block that arc-swap leaks and
/// hands to the next thread once this one exits), claimed by the first `ArcSwap` load or
/// store on a thread. Run on every thread of a node's own runtime as it starts, so that a
/// process resumed on a worker new to it is not charged for it.
pub(crate) fn warm_thread() {
    static WARM: arc_swap::ArcSwapOption<()> = arc_swap::ArcSwapOption::const_empty();
    suppressed(|| drop(WARM.load()));
}

/// The checkpoint of a runtime call: a process over its `max_heap_size` ends here, unless it is
/// already ending or unwinding.
#[inline]
pub(crate) fn checkpoint() {
    if let Some(account) = current_owner_account()
        && account.over_limit()
    {
        over_limit_exit();
    }
}

#[cold]
#[inline(never)]
fn over_limit_exit() {
    if std::thread::panicking() {
        return;
    }
    for end in OVER_LIMIT {
        end();
    }
}

/// Runs `f` with this thread's allocations charged to no one: the runtime's and the profiler's
/// own work. Without [`CountingAlloc`], which alone reads the charge (and without which
/// nothing ever sets it: it stays `None`), just runs `f`.
#[inline]
pub(crate) fn suppressed<R>(f: impl FnOnce() -> R) -> R {
    if !installed() {
        return f();
    }
    struct Restore(account::Charge);
    impl Drop for Restore {
        fn drop(&mut self) {
            account::set_charge(self.0);
        }
    }
    let _restore = Restore(account::set_charge(account::Charge::None));
    f()
}

/// Moves the block of a box into `to`'s account: its bytes leave its owner's live bytes and
/// join `to`'s. Nothing happens without [`CountingAlloc`], or for a zero-sized value.
pub(crate) fn move_box<T: ?Sized>(value: &mut Box<T>, to: &'static Account) {
    let layout = std::alloc::Layout::for_value::<T>(value);
    if layout.size() == 0 || !installed() {
        return;
    }
    let Some(plan) = alloc::Plan::of(layout) else {
        return;
    };
    // The allocator's own pointer to the tag: the box's pointer has the provenance of the
    // value's bytes only, and the tag is outside them (see `alloc`'s "Whose pointer reaches the
    // tag").
    let (tag_ptr, _) = plan.reclaim((&raw mut **value).addr());
    // SAFETY: `installed()` proved the global allocator is a `CountingAlloc` (its probe's
    // block came back with the address a `CountingAlloc` handed out; a global allocator that
    // sent only some layouts through one would defeat this, which no allocator wrapper does),
    // which made the box's block with `plan` for this layout (a `Box` allocates
    // `Layout::for_value` of its value through the global allocator) and exposed its inner
    // block's provenance, which `tag_ptr` takes: so the tag's 8 aligned bytes lie inside that
    // inner block, outside the value, and `tag_ptr` may reach them. The `&mut Box` makes this
    // the only access to the block: no one can free or reallocate it meanwhile.
    #[allow(unsafe_code)]
    unsafe {
        let word = tag_ptr.read();
        let moved = alloc::move_charge(account::Tag::unpack(word), layout.size(), to);
        // A sampled block stays marked: its free still leaves the live set.
        tag_ptr.write(moved.pack() | (word & account::SAMPLED));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::GlobalAlloc;

    /// This test binary's global allocator is not a `CountingAlloc`; a `CountingAlloc` used
    /// as a plain value hands out blocks of the probe's layout, and frees them, where the
    /// global allocator will likely put the probe's own block next: the probe still says no.
    #[test]
    fn the_probe_is_not_fooled_by_a_block_a_counting_alloc_freed() {
        // The program's answer first, before this test records any address.
        assert!(!installed());
        let counting = CountingAlloc::system();
        for _ in 0..8 {
            // SAFETY: the layout's size is not zero; the block is freed once, with it.
            #[allow(unsafe_code)]
            unsafe {
                let block = counting.alloc(alloc::PROBE);
                assert!(!block.is_null());
                counting.dealloc(block, alloc::PROBE);
            }
            assert!(
                !probe_now(),
                "a freed block's address was taken for the probe's"
            );
        }
    }
}
