//! Traced calls made outside any process: in `main`, in a plain tokio task, in the future given
//! to [`Node::block_on`](crate::Node::block_on), on a thread of its own.
//!
//! No process made them, so they are no process's figures; but dropping them would make a
//! profile of a program that works outside processes say "Trace is empty". So they are measured
//! apart, under the node whose thread made them, as a pseudo-process per thread
//! ([`Pid::outside`](crate::Pid::outside): serial 0, which no process has).
//!
//! # Which node a thread belongs to
//!
//! - The threads of a node's own runtime (its workers and its blocking threads) belong to the
//!   node: the runtime's thread-start hook says so. So does the thread running
//!   [`Node::block_on`](crate::Node::block_on), while it runs it.
//! - Any other thread (`main`, a thread of a runtime the node does not own:
//!   [`Node::start_on`](crate::Node::start_on)) belongs to no node: its calls count for the
//!   sessions opened with [`TraceTypes::ANY_THREAD`](super::TraceTypes::ANY_THREAD), of
//!   whichever node.
//!
//! A thread's node lives in the same thread-local word as its current process's node: the
//! node with the `OUTSIDE` bit outside processes (see `process::current`). So call_count's
//! per-thread cache counts outside calls as fast as the processes' (into a shard of their own:
//! [`TraceSession::outside_call_counts`](super::TraceSession::outside_call_counts)).
//!
//! # What a measured call outside processes is
//!
//! call_time and call_memory measure a process only while it is polled; outside processes there
//! is no poll to measure. Instead each outermost traced call (a synchronous call, or one poll of
//! a traced future) is measured as if it were a poll: it begins when the call is entered and
//! ends when it returns, with every traced call inside it measured as in a process, its
//! allocations counted in the thread's tally ([`crate::heap`]'s `Tally`), and its figures
//! flushed into the thread's table when it ends. Time between two outermost calls is no one's,
//! as time between two traced calls at the top of a poll is no one's. If a process poll begins
//! on the thread inside such a call (a current-thread node run from a traced function), the
//! call's measure ends there, with what it gathered so far.

use std::borrow::Cow;
use std::cell::{Cell, OnceCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::MAX_SESSIONS;
use super::measure::{ProcTraceRef, Target};
use crate::context::{OUTSIDE, current_node_id};

/// Per session slot, whose calls outside processes its session measures: its node, with the
/// `OUTSIDE` bit when it measures them on every thread (`ANY_THREAD`); 0 when the slot is free.
static OWNERS: [AtomicU32; MAX_SESSIONS] = [const { AtomicU32::new(0) }; MAX_SESSIONS];

/// The next thread number of a table of calls outside processes (0 names a whole node's).
static THREADS: AtomicU32 = AtomicU32::new(1);

thread_local! {
    /// Whether a call outside processes is measured on this thread.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// Meanwhile, its tally's guard if it counts memory.
    static TALLYING: Cell<Option<crate::heap::Tallying>> = const { Cell::new(None) };
    /// This thread's table of calls outside processes, made at its first flush.
    static TABLE: OnceCell<ProcTraceRef> = const { OnceCell::new() };
}

/// Records the session opening in slot `bit`, of `node`, before its generation is published.
pub(super) fn open(bit: u32, node: u32, any_thread: bool) {
    let any = if any_thread { OUTSIDE } else { 0 };
    OWNERS[bit as usize].store(node | any, Ordering::SeqCst);
}

/// Forgets the session of slot `bit`, before its slot is freed.
pub(super) fn close(bit: u32) {
    OWNERS[bit as usize].store(0, Ordering::SeqCst);
}

/// The sessions of `mask` that take the calls outside processes of a thread whose node word
/// is `node`: that of a process (no `OUTSIDE` bit: none), that of a thread of a node (its
/// sessions), or that of a thread of no node (those measuring every thread).
pub(super) fn sessions(mask: u64, node: u32) -> u64 {
    if node & OUTSIDE == 0 {
        return 0;
    }
    let home = node & !OUTSIDE;
    let mut out = 0;
    let mut m = mask;
    while m != 0 {
        let bit = m.trailing_zeros() as usize;
        m &= m - 1;
        let owner = OWNERS[bit].load(Ordering::SeqCst);
        let takes = if home == 0 {
            owner & OUTSIDE != 0
        } else {
            owner & !OUTSIDE == home
        };
        if takes {
            out |= 1 << bit;
        }
    }
    out
}

/// The sessions of `mask` that measure a call made here now, if it is outside any process.
pub(super) fn wanted(mask: u64) -> u64 {
    sessions(mask, current_node_id())
}

/// Whether a call outside processes is being measured on this thread.
pub(super) fn active() -> bool {
    ACTIVE.with(Cell::get)
}

/// Begins measuring a call outside processes for the sessions of `mask` that measure it here;
/// returns them (0, having begun nothing, when none does, or one is measured already).
#[cold]
pub(super) fn begin(mask: u64) -> u64 {
    let node = current_node_id();
    let sessions = sessions(mask, node);
    if sessions == 0 || active() {
        return 0;
    }
    let Some(mark) = super::inflight::this_thread() else {
        return 0; // this thread's destructors run
    };
    let tallying = super::measure::measures_memory(sessions)
        .then(|| crate::heap::Tallying::new(mark.tally(), None));
    TALLYING.with(|t| t.set(tallying));
    ACTIVE.with(|a| a.set(true));
    super::measure::begin_for(sessions, mark.tally().counts(), mark.sink(), || {
        (
            TABLE.with(|table| Arc::clone(table.get_or_init(new_table))),
            None,
        )
    });
    // Read after the sessions' generations (as a process's flags are): a slot that changed
    // hands meanwhile measures nothing of this call.
    let stale = sessions & !self::sessions(sessions, node);
    if stale != 0 {
        super::stack::forget_sessions(stale);
    }
    sessions
}

/// Ends the call outside processes measured on this thread, if any: its figures go to the
/// thread's table.
#[cold]
pub(super) fn end() {
    if !ACTIVE.with(|a| a.replace(false)) {
        return;
    }
    TABLE.with(|table| super::stack::end_poll(&Target::Outside(table.get_or_init(new_table))));
    drop(TALLYING.with(Cell::take));
}

/// This thread's table: named after the thread, numbered apart from every other thread's.
fn new_table() -> ProcTraceRef {
    crate::heap::suppressed(|| {
        let thread = THREADS.fetch_add(1, Ordering::Relaxed);
        let name = std::thread::current().name().map_or_else(
            || format!("thread {thread}"),
            |name| format!("thread {name}"),
        );
        Arc::new(super::measure::ProcTable::new(
            super::measure::ProcTrace::new(crate::Pid::outside(0, thread), Cow::Owned(name)),
        ))
    })
}
