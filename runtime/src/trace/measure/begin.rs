//! The beginning of a measured poll: which sessions measure a process's poll, and the begin
//! that hands the traced stack what it is to measure (a sample poll, a plain or lean one, or
//! the general case), for a process's own poll or a helper task's.
//!
//! Uses the masks ([`super::masks`]), the process's table ([`super::ProcTable`]) and the
//! traced stack's begins ([`crate::trace::stack`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::flush::{RECORDING, Target, session_data, table_of};
use super::masks::{
    EVENTS, HISTOGRAMS, LEAN, MEMORY, PLAIN, SAMPLING, TIMING, TREES, measures_memory, measuring,
};
use super::{ProcTraceRef, TracedProcess, lock};

/// The sessions that measure the polls of `process` now: those measuring (not paused) with a
/// flag on it and open on its node. 0, after one load, whenever no session measures.
#[inline(always)]
pub(crate) fn sessions_measuring<P: TracedProcess>(process: &P) -> u64 {
    // The global mask first: it is 0 whenever no session measures anything.
    let mut measured = measuring();
    if measured != 0 {
        measured &= process.trace_flags().traced();
    }
    if measured != 0 {
        // Only sessions open on this process's node (a flag may outlive its session).
        measured &= process.node_trace_sessions().load(Ordering::Relaxed);
    }
    measured
}

/// Begins measuring a poll of `process` for `sessions` (those measuring it, non-zero);
/// false, having begun nothing, when the poll is one sample session's alone and that
/// session's flag on the process is stale (see [`begin_sample_poll`]).
#[inline]
pub(crate) fn begin_poll<P: TracedProcess>(process: &P, sessions: u64) -> bool {
    if sessions.is_power_of_two() && sessions & SAMPLING.load(Ordering::Relaxed) != 0 {
        return begin_sample_poll(process, sessions);
    }
    let account = process.trace_account();
    begin_for(
        sessions,
        account.owner_counts(),
        account.current_function_cell(),
        || (Arc::clone(table_of(process)), Some(process.node_id())),
    );
    forget_stale(process, sessions);
    true
}

/// Begins a sample poll of `process` for `session` (one sample session's bit, in [`SAMPLING`]):
/// the poll only keeps its traced stack, for the samplers to read, and counts its calls per
/// thread ([`crate::trace::stack::begin_sample_poll`]), so nothing is gathered that its end
/// would flush. The process's table is made and joins the session's list at its first sample
/// poll (it names the process's samples: its pid, initial call and name), after which one load
/// tells that it has. False, having begun nothing, when the session's flag on the process is
/// stale (the session was dropped and another opened in its slot), or the session no longer
/// takes tables (paused, or gone).
#[inline]
pub(super) fn begin_sample_poll<P: TracedProcess>(process: &P, session: u64) -> bool {
    let bit = session.trailing_zeros();
    // As `forget_stale` does after a measured poll has begun: the session's generation
    // first, then the node's open sessions and the process's flags, which say whether the
    // poll really is for it.
    let generation = crate::trace::session::generation_acquire(bit);
    let open = process.node_trace_sessions().load(Ordering::SeqCst);
    if generation == 0 || session & open & process.trace_flags().traced() == 0 {
        return false;
    }
    let data = table_of(process);
    if data.sampled.load(Ordering::Relaxed) != generation
        && !join_sample_session(process, data, bit, generation)
    {
        return false;
    }
    crate::trace::stack::begin_sample_poll(
        session,
        process.trace_account().current_function_cell(),
        generation,
    );
    true
}

/// Adds `process`'s table `data` to the list of the sample session in slot `bit` of
/// `generation` (unless it is there already), and marks it so; false when that session no
/// longer takes tables.
#[cold]
#[inline(never)]
pub(super) fn join_sample_session<P: TracedProcess>(
    process: &P,
    data: &ProcTraceRef,
    bit: u32,
    generation: u64,
) -> bool {
    let mut table = lock(data);
    let joined = crate::heap::suppressed(|| {
        session_data(&mut table, bit, generation, data, Some(process.node_id()))
    })
    .is_some();
    if joined {
        data.sampled.store(generation, Ordering::Relaxed);
    }
    joined
}

/// Begins measuring a poll for `sessions` whose allocations `counts` counts and whose current
/// function goes to `function`; `recording` gives the table its call durations go to (and the
/// node whose sessions it may join, if only one's), asked only when the poll records them.
#[inline]
pub(in crate::trace) fn begin_for(
    sessions: u64,
    counts: &'static crate::heap::Counts,
    function: &'static std::sync::atomic::AtomicU32,
    recording: impl FnOnce() -> (ProcTraceRef, Option<u32>),
) {
    if crate::trace::stack::active() != 0 {
        // A poll begins inside a call outside processes being measured (a current-thread
        // node run from a traced function): that call's measure ends here.
        crate::trace::outside::end();
    }
    if sessions.is_power_of_two() && sessions & PLAIN.load(Ordering::Relaxed) != 0 {
        // One session that wants only the poll's traced stack (a sample session's poll).
        crate::trace::stack::begin_plain_poll(sessions, function);
        return;
    }
    let timing = sessions & TIMING.load(Ordering::Relaxed) != 0;
    let memory = (sessions & MEMORY.load(Ordering::Relaxed) != 0).then_some(counts);
    if sessions.is_power_of_two() && sessions & LEAN.load(Ordering::Relaxed) != 0 {
        // One flat session without histograms or an event log, its time (if measured) from
        // the time-stamp counter: the lean poll, nothing else to decide.
        crate::trace::stack::begin_lean_poll(sessions, timing, memory, function);
        return;
    }
    let histograms = sessions & HISTOGRAMS.load(Ordering::Relaxed);
    let trees = TREES.load(Ordering::Relaxed);
    let events = EVENTS.load(Ordering::Relaxed);
    if timing && histograms != 0 {
        let target = recording();
        RECORDING.with(|r| *r.borrow_mut() = Some(target));
    }
    crate::trace::stack::begin_poll(
        sessions, trees, events, timing, memory, histograms, function,
    );
}

/// Gives up measuring the poll of `process` that just began for the sessions of `sessions`
/// whose flag on it is stale.
#[inline]
fn forget_stale<P: TracedProcess>(process: &P, sessions: u64) {
    // The flags were read before the sessions' generations: a session may have been dropped
    // and another opened in its slot in between, with the flag left from the first. Read
    // after the generations, the node's open sessions (whose opening swept stale flags first)
    // and then the flags themselves say which of the sessions the poll really is for.
    let open = process.node_trace_sessions().load(Ordering::SeqCst);
    let stale = sessions & !(open & process.trace_flags().traced());
    if stale != 0 {
        crate::trace::stack::forget_sessions(stale);
    }
}

/// Begins measuring a poll of a helper task of `process` ([`spawn_task`](crate::spawn_task))
/// or its blocking closure ([`spawn_blocking`](crate::spawn_blocking)) for `sessions` (those
/// measuring `process`, non-zero): its work is the process's, so its figures go to the
/// process's table. Its allocations are counted in this thread's tally (the process may be
/// polled on another thread meanwhile, counting its own), and its current function is not
/// recorded as the process's. The poll ends when the guard drops (on unwind too).
#[cold]
#[inline(never)]
pub(crate) fn begin_helper_poll<P: TracedProcess>(
    process: &P,
    sessions: u64,
) -> Option<HelperPoll<'_, P>> {
    let mark = crate::trace::inflight::this_thread()?; // `None` while this thread's destructors run
    let tallying = measures_memory(sessions)
        .then(|| crate::heap::Tallying::new(mark.tally(), Some(process.trace_account())));
    begin_for(sessions, mark.tally().counts(), mark.sink(), || {
        (Arc::clone(table_of(process)), Some(process.node_id()))
    });
    forget_stale(process, sessions);
    Some(HelperPoll {
        process,
        _tallying: tallying,
    })
}

/// A measured poll of a helper task, ended when dropped ([`begin_helper_poll`]).
pub(crate) struct HelperPoll<'a, P: TracedProcess> {
    process: &'a P,
    /// Dropped after the poll's end, which `drop` runs.
    _tallying: Option<crate::heap::Tallying>,
}

impl<P: TracedProcess> Drop for HelperPoll<'_, P> {
    fn drop(&mut self) {
        crate::trace::stack::end_poll(&Target::Process(self.process));
    }
}
