//! call_time and call_memory: per process, per function, per session.
//!
//! A poll of a process that some session measures gathers, on its worker thread, what each
//! traced function took ([`super::stack`]) in a scratch table indexed by callsite; the end of
//! the poll flushes it into the process's own table under the process's own lock, which only
//! that flush and the readers below ever take. A process's table outlives it: the session keeps
//! it until it is restarted or dropped, so the functions of processes that have ended still
//! show, as in tprof.
//!
//! `pause` stops new polls from measuring for the session, marks the polls measuring for it
//! now as kept ([`super::inflight`]), marks the session paused (under the lock of its list of
//! tables), waits for the kept polls to end, and then takes every table's lock once: a flush
//! that began before has finished by then, and one that begins after sees the mark and keeps
//! its figures only if its poll was kept. So what was gathered before `pause` returns is kept
//! (a call made before `pause` whose poll ends after it included), and once `pause` returns,
//! what [`measurements`](super::TraceSession::measurements) reads is stable.
//!
//! This file holds the process's tables ([`ProcTrace`], [`ProcTable`]) and what tracing reads
//! of a process ([`TracedProcess`]); its parts: what sessions measure ([`masks`]), a poll's
//! beginning ([`begin`]), its flush into the tables ([`flush`](mod@flush)), the reads
//! ([`read`]) and what they give ([`results`]), and a sample session's ended processes
//! ([`ended`]).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

mod begin;
mod ended;
mod flush;
mod masks;
mod read;
mod results;

pub(super) use begin::begin_for;
pub(crate) use begin::{begin_helper_poll, begin_poll, sessions_measuring};
pub(crate) use ended::{Folded, fold_ended};
pub(crate) use flush::{Flush, Target, finish_durations, flush, flush_events, record_durations};
pub use masks::TraceTypes;
pub(super) use masks::measures_memory;
pub(crate) use masks::{MEASURING_RESUMED, close, counting, measuring, not_lean, open};
pub(crate) use read::Gathered;
pub use results::{
    CallEvent, CallEventKind, CallPath, CallPercentiles, CallTreeMeasurement, EVENT_LOG_CAPACITY,
    FunctionMeasurement, PathMeasurement, ProcessCallTree, ProcessEvents, ProcessMeasurement,
};

use crate::Pid;

/// What tracing reads of a process record. The process layer's `Process` implements it; the
/// poll functions here are generic over it, so each call is resolved at compile time and
/// inlined as a field read, as when they took the record itself.
pub(crate) trait TracedProcess {
    /// Its pid.
    fn pid(&self) -> Pid;
    /// What it was spawned to run.
    fn initial_call(&self) -> std::borrow::Cow<'static, str>;
    /// Its node's id.
    fn node_id(&self) -> u32;
    /// The trace sessions open on its node, as bits.
    fn node_trace_sessions(&self) -> &AtomicU64;
    /// Its trace flags.
    fn trace_flags(&self) -> &super::TraceFlags;
    /// Its table of figures, made at its first measured poll.
    fn trace_data(&self) -> &std::sync::OnceLock<ProcTraceRef>;
    /// The account its traced stack records its current function in.
    fn trace_account(&self) -> &'static crate::heap::Account;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One function's figures, as gathered: calls, clock ticks, words, bytes, blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Acc {
    pub(crate) calls: u64,
    pub(crate) ticks: u64,
    pub(crate) words: u64,
    pub(crate) bytes: u64,
    pub(crate) blocks: u64,
}

impl Acc {
    #[inline(always)]
    pub(crate) fn plus(&self, o: &Acc) -> Acc {
        Acc {
            calls: self.calls + o.calls,
            ticks: self.ticks + o.ticks,
            words: self.words.wrapping_add(o.words),
            bytes: self.bytes.wrapping_add(o.bytes),
            blocks: self.blocks.wrapping_add(o.blocks),
        }
    }

    #[inline(always)]
    pub(crate) fn is_zero(&self) -> bool {
        (self.calls | self.ticks | self.words | self.bytes | self.blocks) == 0
    }
}

/// One process's measured figures, per session.
pub(crate) struct ProcTrace {
    pid: Pid,
    /// What the process was spawned to run.
    initial_call: std::borrow::Cow<'static, str>,
    /// The name it was registered under when it ended.
    name: Option<crate::Name>,
    sessions: Vec<SessionData>,
    /// Where the last flush put its last figure: (session slot, generation, index in
    /// `sessions`, index in its `functions`). A process's polls mostly touch the same
    /// functions, one or two per poll: the next flush tries there before it searches.
    hint: Option<(u32, u64, usize, usize)>,
    /// Its process is gone (its record dropped, so no poll of it or of its helpers flushes
    /// here again): a sample session may fold its figures ([`ended`]).
    ended: bool,
}

impl ProcTrace {
    /// An empty table of `pid`, spawned to run `initial_call`.
    pub(super) fn new(pid: Pid, initial_call: std::borrow::Cow<'static, str>) -> ProcTrace {
        ProcTrace {
            pid,
            initial_call,
            name: None,
            sessions: Vec::new(),
            hint: None,
            ended: false,
        }
    }

    /// Its pid as session of `node` reports it: a table of calls outside processes serves
    /// sessions of any node, each of which shows it under its own.
    fn pid_for(&self, node: u32) -> Pid {
        if self.pid.is_outside() {
            Pid::outside(node, self.pid.index())
        } else {
            self.pid
        }
    }
}

/// Marks the table `data` of a process whose record is being dropped as ended: nothing flushes
/// into it any more (a flush needs the process), so a sample session may fold it
/// ([`ended`]).
pub(crate) fn process_dropped(data: &ProcTraceRef) {
    lock(data).ended = true;
}

/// Keeps the name `process` was registered under as it ends, so that reports of its figures
/// can still name it.
pub(crate) fn remember_name<P: TracedProcess>(process: &P, name: &crate::Name) {
    if let Some(data) = process.trace_data().get() {
        lock(data).name = Some(name.clone());
    }
}

struct SessionData {
    bit: u32,
    generation: u64,
    /// Sorted by callsite id.
    functions: Vec<(u32, Acc)>,
    /// Per function (callsite id, sorted), the distribution of its calls' own time, in
    /// nanoseconds (with call-duration histograms).
    histograms: Vec<(u32, hdrhistogram::Histogram<u64>)>,
    /// The event log: (clock ticks, callsite id, entered).
    events: Vec<(u64, u32, bool)>,
    /// Events not kept.
    dropped: u64,
}

/// A process's tables, shared with the sessions that measure it.
pub(crate) type ProcTraceRef = Arc<ProcTable>;

/// A process's tables (behind their lock), and which sample session's list holds them.
pub(crate) struct ProcTable {
    /// The generation of the sample session whose list a sample poll found holding this table
    /// ([`join_sample_session`](begin::join_sample_session); 0: none yet), so that the next
    /// sample polls of that session know it with one load. Generations are never reused, so a
    /// stale one names no session.
    sampled: AtomicU64,
    table: Mutex<ProcTrace>,
}

impl ProcTable {
    /// `table`, in no sample session's list yet.
    pub(super) fn new(table: ProcTrace) -> ProcTable {
        ProcTable {
            sampled: AtomicU64::new(0),
            table: Mutex::new(table),
        }
    }
}

impl std::ops::Deref for ProcTable {
    type Target = Mutex<ProcTrace>;

    fn deref(&self) -> &Mutex<ProcTrace> {
        &self.table
    }
}
