//! The process layer's hooks, both ways. Upward: slots the observers above it (the samplers,
//! the profiling the environment asks for) fill at link time, which this layer calls without
//! naming them; a poll pays one relaxed load ([`on_poll`]) while no sampler runs, as it did
//! when it called the samplers directly. Downward: this layer's entries in the slots of the
//! layers below (a process's heap figures, the end of a process over its heap limit, a live
//! process's name for trace snapshots).
//!
//! The slots are [`linkme`] distributed slices: each observer adds its function to the slice
//! where it is written, and the linker gathers them; nothing is registered at run time, so no
//! order of start-up can miss one.

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

use super::node::NodeHandle;

/// The samplers that want each polling thread registered, as bits (`sample`'s `CPU` and
/// `ALLOC`), set and cleared by their starts and stops: a poll asks whether any runs with one
/// load.
pub(crate) static SAMPLERS_RUNNING: AtomicU8 = AtomicU8::new(0);

/// The bit of [`SAMPLERS_RUNNING`] of a sampler that wants to hear of every poll (the
/// allocation sampler, which relieves its thread's ring), not only of the polls that find their
/// thread unknown to the samplers ([`set_thread_known`]).
pub(crate) const EVERY_POLL: u8 = 2;

/// [`thread_known`] of a thread the samplers know for every node (it polls processes of
/// several).
pub(crate) const EVERY_NODE: u32 = u32::MAX;

thread_local! {
    /// The node whose polls on this thread the samplers know of ([`set_thread_known`]): 0 for
    /// none, [`EVERY_NODE`] for all. `const` without a destructor: one load of the thread's
    /// static block, readable while its destructors run.
    static KNOWN: Cell<u32> = const { Cell::new(0) };
}

/// Called at each poll of a process of node `node` while a sampler runs
/// ([`SAMPLERS_RUNNING`] not 0): the samplers' `on_poll`.
// The `link_section` statics linkme makes are flagged by `unsafe_code` in the crate that
// defines the slice; nothing here is unsafe (the same holds for each slice below).
#[allow(unsafe_code)]
#[linkme::distributed_slice]
pub(crate) static POLL_SAMPLED: [fn(u32)];

/// Called on each thread of a node's runtime as it starts, with the node: the samplers
/// register it, so that one started later can time it.
#[allow(unsafe_code)]
#[linkme::distributed_slice]
pub(crate) static THREAD_STARTED: [fn(u32)];

/// Called as a node starts when the environment asks it to be profiled
/// ([`ENV_TYPE`](crate::trace::env_run::ENV_TYPE) set): the profiling it starts, if any.
#[allow(unsafe_code)]
#[linkme::distributed_slice]
pub(crate) static NODE_STARTED: [fn(&NodeHandle) -> Option<Box<dyn NodeObserver>>];

/// An observer a node keeps from its start ([`NODE_STARTED`]) until it stops.
pub(crate) trait NodeObserver: Send {
    /// The node starts to stop, its processes still alive.
    fn stopping(&self);
    /// The node has stopped.
    fn finish(self: Box<Self>);
}

/// At each poll of a process of node `node`: while a sampler that wants it runs, tells it
/// (it makes sure the polling thread has a timer and rings) unless the samplers know this
/// thread for `node` already and none wants every poll. One relaxed load while no sampler
/// runs; one more, of a thread-local, while one does and the thread is known.
#[inline(always)]
pub(crate) fn on_poll(node: u32) {
    let running = SAMPLERS_RUNNING.load(Ordering::Relaxed);
    if running != 0 && (running & EVERY_POLL != 0 || !thread_known(node)) {
        poll_sampled(node);
    }
}

/// Whether the samplers know this thread for the polls of `node` ([`set_thread_known`]).
#[inline(always)]
fn thread_known(node: u32) -> bool {
    let known = KNOWN.with(Cell::get);
    known == node || known == EVERY_NODE
}

/// Tells the polls on this thread that the samplers know it for the polls of `node` (0: for
/// none, as when it unregisters; [`EVERY_NODE`]: for every node), so that such a poll calls
/// them no more while no sampler wants every poll ([`EVERY_POLL`]). Set by the samplers'
/// registration of the thread, which the hooks of [`POLL_SAMPLED`] do when it is not known.
pub(crate) fn set_thread_known(node: u32) {
    KNOWN.with(|k| k.set(node));
}

#[cold]
#[inline(never)]
fn poll_sampled(node: u32) {
    for f in POLL_SAMPLED {
        f(node);
    }
}

/// Tells the observers that a thread of node `node`'s runtime starts.
pub(crate) fn thread_started(node: u32) {
    for f in THREAD_STARTED {
        f(node);
    }
}

/// Process `pid`'s heap figures, for [`crate::heap::process_heap`].
#[allow(unsafe_code)]
#[linkme::distributed_slice(crate::heap::PROCESS_HEAP)]
static PROCESS_HEAP: fn(crate::Pid) -> Option<crate::heap::HeapStats> = |pid| {
    super::node::NodeInner::with_process(pid, |p| p.heap_account().map(|a| a.stats())).flatten()
};

/// Ends the current process, over its `max_heap_size`, unless it is already exiting: for the
/// heap's checkpoint.
#[allow(unsafe_code)]
#[linkme::distributed_slice(crate::heap::OVER_LIMIT)]
static OVER_LIMIT: fn() = || {
    let running = super::process::with_current_owner(|p| p.is_some_and(|p| !p.is_exiting()));
    if running {
        super::signal::exit_self(crate::ExitReason::MaxHeapSize);
    }
};

/// The name live process `pid` is registered under, for trace snapshots. The untraced lookup:
/// a snapshot taken in a traced process does not show up as its `process_info` calls.
#[allow(unsafe_code)]
#[linkme::distributed_slice(crate::trace::LIVE_NAME)]
static LIVE_NAME: fn(crate::Pid) -> Option<crate::Name> = |pid| {
    super::node::NodeInner::with_process(pid, super::process::Process::registered_name).flatten()
};
