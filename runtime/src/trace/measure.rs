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

use std::cell::RefCell;
use std::fmt;
use std::ops::BitOr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

mod ended;

pub(crate) use ended::{Folded, fold_ended};

use super::session::{SessionState, generation_of, session_in_slot};
use super::snapshot::SnapshotFigures;
use super::stack::Accumulator;
use super::{Callsite, callsites};
use crate::Pid;

/// What tracing reads of a process record. The process layer's `Process` implements it; the
/// poll functions here are generic over it, so each call is resolved at compile time and
/// inlined as a field read, as when they took the record itself.
pub(crate) trait TracedProcess {
    /// Its pid.
    fn pid(&self) -> Pid;
    /// What it was spawned to run.
    fn initial_call(&self) -> &std::borrow::Cow<'static, str>;
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

/// Sessions that count calls (call_count).
static COUNTING: AtomicU64 = AtomicU64::new(0);
/// Sessions that measure time or memory and are not paused.
static MEASURING: AtomicU64 = AtomicU64::new(0);
/// `COUNTING | !MEASURING`, derived after each change of either (under [`DERIVE`]): a call
/// whose mask has no bit here is measured by every session that wants it and counted by none,
/// which a lean poll's synchronous entry checks with this one load.
static NOT_LEAN: AtomicU64 = AtomicU64::new(u64::MAX);
/// `MEASURING` less the sessions that measure time or memory, record histograms, build call
/// trees or keep event logs, derived with [`NOT_LEAN`]: a sample session's bit (it measures
/// polls only for their traced stacks). A poll measured for one of these alone begins with
/// [`super::stack::begin_plain_poll`], which has nothing to decide.
static PLAIN: AtomicU64 = AtomicU64::new(0);
/// `MEASURING` less [`PLAIN`] and the sessions that record histograms, build call trees or
/// keep event logs, and, where the clock is not the time-stamp counter, those that measure
/// time; derived with [`NOT_LEAN`]. A poll measured for one of these alone is lean and flat
/// and begins with [`super::stack::begin_lean_poll`], which decides only what it measures.
static LEAN: AtomicU64 = AtomicU64::new(0);
/// Sample sessions that count calls and measure nothing else (a [`TraceTypes::SAMPLE`] session
/// as [`NodeHandle::sample_session`](crate::NodeHandle::sample_session) opens it): a process
/// poll that one of them alone measures is a *sample poll* ([`begin_sample_poll`]), which
/// keeps the traced stack, counts each call in this thread's counters for the session (as
/// call_count does) and flushes nothing into the process's table when it ends.
static SAMPLING: AtomicU64 = AtomicU64::new(0);
/// Serializes the derivations of [`NOT_LEAN`], so that the last one sees every change.
static DERIVE: Mutex<()> = Mutex::new(());
/// Sessions that measure time.
static TIMING: AtomicU64 = AtomicU64::new(0);
/// Sessions that measure memory.
static MEMORY: AtomicU64 = AtomicU64::new(0);
/// Measuring sessions that are paused.
static PAUSED: AtomicU64 = AtomicU64::new(0);
/// Sessions that record call-duration histograms.
static HISTOGRAMS: AtomicU64 = AtomicU64::new(0);
/// Sessions in call-tree mode.
static TREES: AtomicU64 = AtomicU64::new(0);
/// Sessions that keep an event log.
static EVENTS: AtomicU64 = AtomicU64::new(0);

/// Events a process keeps per session in its event log; later ones are counted as dropped.
pub const EVENT_LOG_CAPACITY: usize = 1 << 16;

thread_local! {
    /// While a poll records call durations: the table they go to ([`record_durations`]),
    /// mid-poll too — its process's, for a poll of the process or of a helper task of it —
    /// and the node whose sessions it may join ([`session_data`]).
    static RECORDING: RefCell<Option<(ProcTraceRef, Option<u32>)>> = const { RefCell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The sessions that count calls.
#[inline(always)]
pub(crate) fn counting() -> u64 {
    COUNTING.load(Ordering::Relaxed)
}

/// The sessions that measure time or memory right now.
#[inline(always)]
pub(crate) fn measuring() -> u64 {
    MEASURING.load(Ordering::Relaxed)
}

/// The sessions that count calls or do not measure right now (see [`NOT_LEAN`]).
#[inline(always)]
pub(crate) fn not_lean() -> u64 {
    NOT_LEAN.load(Ordering::Relaxed)
}

/// Derives [`NOT_LEAN`], [`PLAIN`] and [`LEAN`] again, after a change of a mask.
fn derive() {
    let _serial = lock(&DERIVE);
    let measuring = MEASURING.load(Ordering::SeqCst);
    NOT_LEAN.store(
        COUNTING.load(Ordering::SeqCst) | !measuring,
        Ordering::SeqCst,
    );
    let more = TIMING.load(Ordering::SeqCst)
        | MEMORY.load(Ordering::SeqCst)
        | HISTOGRAMS.load(Ordering::SeqCst)
        | TREES.load(Ordering::SeqCst)
        | EVENTS.load(Ordering::SeqCst);
    let plain = measuring & !more;
    PLAIN.store(plain, Ordering::SeqCst);
    let mut lean = measuring
        & !plain
        & !(HISTOGRAMS.load(Ordering::SeqCst)
            | TREES.load(Ordering::SeqCst)
            | EVENTS.load(Ordering::SeqCst));
    if !super::stack::clock_is_tsc() {
        // Time from another clock: the general path reads it.
        lean &= !TIMING.load(Ordering::SeqCst);
    }
    LEAN.store(lean, Ordering::SeqCst);
}

/// What a trace session measures: tprof's types, any combination of them.
///
/// ```
/// use runtime::trace::TraceTypes;
///
/// let both = TraceTypes::CALL_TIME | TraceTypes::CALL_MEMORY;
/// assert!(both.contains(TraceTypes::CALL_TIME));
/// assert!(!both.contains(TraceTypes::CALL_COUNT));
/// assert_eq!(both.to_string(), "call_time+call_memory");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceTypes(u8);

impl TraceTypes {
    /// Calls per function, from every process of the node; no process flags needed.
    pub const CALL_COUNT: TraceTypes = TraceTypes(1);
    /// Calls and time per process per function, counted only while the process is polled
    /// (wall time within the poll: time the OS takes the thread away mid-poll counts too, see
    /// [call-time outliers](super#call-time-outliers)).
    pub const CALL_TIME: TraceTypes = TraceTypes(2);
    /// Calls, words, bytes and blocks allocated per process per function.
    pub const CALL_MEMORY: TraceTypes = TraceTypes(4);
    /// All three.
    pub const ALL: TraceTypes = TraceTypes(7);
    /// call_time, and per process and function the distribution of its calls' own time —
    /// polled time from entry to return, exclusive of traced callees, as the time figure is —
    /// in an hdrhistogram: opt-in, since recording each call costs a few nanoseconds more,
    /// and a histogram per process and function called (a few KiB each at the default
    /// precision, [`SessionOptions::histogram_precision`](super::SessionOptions)). Read with
    /// [`TraceSession::call_time_percentiles`](super::TraceSession::call_time_percentiles).
    pub const CALL_TIME_HISTOGRAMS: TraceTypes = TraceTypes(2 | 8);
    /// Call-tree mode: per process, the figures of each traced call path (the functions
    /// called, outermost first) rather than of each function; combine it with
    /// [`CALL_TIME`](Self::CALL_TIME) or [`CALL_MEMORY`](Self::CALL_MEMORY) (alone it counts
    /// calls per path). [`TraceSession::measurements`](super::TraceSession::measurements)
    /// still gives the flat figures — the sum over the paths that end in each function — and
    /// [`TraceSession::call_tree`](super::TraceSession::call_tree) gives the paths. Costs a
    /// hash lookup per traced call more than the flat mode.
    pub const CALL_TREE: TraceTypes = TraceTypes(16);
    /// An event log per process: each traced frame entered and left, with a timestamp, for
    /// timelines ([`TraceSession::event_logs`](super::TraceSession::event_logs)). A frame is
    /// one poll of an async call, or a whole synchronous call. Bounded: a process keeps its
    /// first [`EVENT_LOG_CAPACITY`] events and counts the rest as dropped. Combine it with
    /// [`CALL_TIME`](Self::CALL_TIME) or [`CALL_MEMORY`](Self::CALL_MEMORY).
    pub const CALL_EVENTS: TraceTypes = TraceTypes(32);
    /// Traced calls made outside any process are measured for the session on every thread,
    /// not only on its node's (see [`outside`](super#outside-processes)): `main`, and the
    /// threads of a runtime the node does not own, count for it too.
    pub const ANY_THREAD: TraceTypes = TraceTypes(64);
    /// Sample mode: the traced stack of each process the session traces is kept (and its
    /// calls counted per function), for a sampler to read; time and memory are not measured.
    /// Opened with a sampler by [`NodeHandle::sample_session`](crate::NodeHandle::sample_session).
    /// A poll the session alone measures counts its calls per thread, apart from any process
    /// ([`call_counts`](super::TraceSession::call_counts)); the others (shared with another
    /// session, or a helper task's) count them in the process's figures, and the processes
    /// that have ended are folded into one sum of calls rather than each keep its figures (see
    /// [processes that end](crate::sample::SampleSession#processes-that-end)):
    /// [`measurements`](super::TraceSession::measurements) lists the others. A
    /// [`snapshot`](super::TraceSession::snapshot) gives every call, in its call counts and
    /// its processes' rows together.
    pub const SAMPLE: TraceTypes = TraceTypes(128);

    /// Whether every type in `other` is in `self`.
    pub const fn contains(self, other: TraceTypes) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether a type measured per process (call_time or call_memory) is in `self`.
    pub const fn per_process(self) -> bool {
        self.0 & (2 | 4 | 16 | 32 | 128) != 0
    }
}

impl BitOr for TraceTypes {
    type Output = TraceTypes;
    fn bitor(self, rhs: TraceTypes) -> TraceTypes {
        TraceTypes(self.0 | rhs.0)
    }
}

impl fmt::Display for TraceTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (TraceTypes::CALL_COUNT, "call_count"),
            (TraceTypes::CALL_TIME, "call_time"),
            (TraceTypes::CALL_MEMORY, "call_memory"),
            (TraceTypes(8), "histograms"),
            (TraceTypes::CALL_TREE, "call_tree"),
            (TraceTypes::CALL_EVENTS, "events"),
            (TraceTypes::ANY_THREAD, "any_thread"),
            (TraceTypes::SAMPLE, "sample"),
        ];
        let mut first = true;
        for (t, name) in names {
            if self.contains(t) {
                if !first {
                    f.write_str("+")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

impl fmt::Debug for TraceTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceTypes({self})")
    }
}

/// Sets a new session's bits in the global masks.
pub(crate) fn open(bit: u32, types: TraceTypes) {
    let m = 1u64 << bit;
    PAUSED.fetch_and(!m, Ordering::SeqCst);
    if types.contains(TraceTypes::CALL_TIME) {
        TIMING.fetch_or(m, Ordering::Relaxed);
    }
    if types.contains(TraceTypes::CALL_MEMORY) {
        MEMORY.fetch_or(m, Ordering::Relaxed);
    }
    if types.per_process() {
        MEASURING.fetch_or(m, Ordering::Relaxed);
    }
    if types.contains(TraceTypes::CALL_COUNT) {
        COUNTING.fetch_or(m, Ordering::Relaxed);
    }
    if types.contains(TraceTypes::CALL_TIME_HISTOGRAMS) {
        HISTOGRAMS.fetch_or(m, Ordering::Relaxed);
    }
    if types.contains(TraceTypes::CALL_TREE) {
        TREES.fetch_or(m, Ordering::Relaxed);
    } else {
        TREES.fetch_and(!m, Ordering::Relaxed);
    }
    if types.contains(TraceTypes::CALL_EVENTS) {
        super::stack::clock();
        EVENTS.fetch_or(m, Ordering::Relaxed);
    } else {
        EVENTS.fetch_and(!m, Ordering::Relaxed);
    }
    let others = TraceTypes::CALL_COUNT
        | TraceTypes::CALL_TIME
        | TraceTypes::CALL_MEMORY
        | TraceTypes::CALL_TIME_HISTOGRAMS
        | TraceTypes::CALL_TREE
        | TraceTypes::CALL_EVENTS;
    if types.contains(TraceTypes::SAMPLE) && types.0 & others.0 == 0 {
        SAMPLING.fetch_or(m, Ordering::Relaxed);
    } else {
        SAMPLING.fetch_and(!m, Ordering::Relaxed);
    }
    derive();
}

/// Clears a stopped session's bits.
pub(crate) fn close(bit: u32) {
    let m = !(1u64 << bit);
    for mask in [
        &COUNTING,
        &MEASURING,
        &TIMING,
        &MEMORY,
        &PAUSED,
        &HISTOGRAMS,
        &TREES,
        &EVENTS,
        &SAMPLING,
    ] {
        mask.fetch_and(m, Ordering::SeqCst);
    }
    derive();
}

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

/// Begins a sample poll of `process` for `session` (one sample session's bit, in
/// [`SAMPLING`]): the poll only keeps its traced stack, for the samplers to read, and counts
/// its calls per thread ([`super::stack::begin_sample_poll`]), so nothing is gathered that
/// its end would flush. The process's table is made and joins the session's list at its
/// first sample poll (it names the process's samples: its pid, initial call and name), after
/// which one load tells that it has. False, having begun nothing, when the session's flag on
/// the process is stale (the session was dropped and another opened in its slot), or the
/// session no longer takes tables (paused, or gone).
#[inline]
fn begin_sample_poll<P: TracedProcess>(process: &P, session: u64) -> bool {
    let bit = session.trailing_zeros();
    // As `forget_stale` does after a measured poll has begun: the session's generation
    // first, then the node's open sessions and the process's flags, which say whether the
    // poll really is for it.
    let generation = super::session::generation_acquire(bit);
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
    super::stack::begin_sample_poll(
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
fn join_sample_session<P: TracedProcess>(
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
pub(super) fn begin_for(
    sessions: u64,
    counts: &'static crate::heap::Counts,
    function: &'static std::sync::atomic::AtomicU32,
    recording: impl FnOnce() -> (ProcTraceRef, Option<u32>),
) {
    if super::stack::active() != 0 {
        // A poll begins inside a call outside processes being measured (a current-thread
        // node run from a traced function): that call's measure ends here.
        super::outside::end();
    }
    if sessions.is_power_of_two() && sessions & PLAIN.load(Ordering::Relaxed) != 0 {
        // One session that wants only the poll's traced stack (a sample session's poll).
        super::stack::begin_plain_poll(sessions, function);
        return;
    }
    let timing = sessions & TIMING.load(Ordering::Relaxed) != 0;
    let memory = (sessions & MEMORY.load(Ordering::Relaxed) != 0).then_some(counts);
    if sessions.is_power_of_two() && sessions & LEAN.load(Ordering::Relaxed) != 0 {
        // One flat session without histograms or an event log, its time (if measured) from
        // the time-stamp counter: the lean poll, nothing else to decide.
        super::stack::begin_lean_poll(sessions, timing, memory, function);
        return;
    }
    let histograms = sessions & HISTOGRAMS.load(Ordering::Relaxed);
    let trees = TREES.load(Ordering::Relaxed);
    let events = EVENTS.load(Ordering::Relaxed);
    if timing && histograms != 0 {
        let target = recording();
        RECORDING.with(|r| *r.borrow_mut() = Some(target));
    }
    super::stack::begin_poll(
        sessions, trees, events, timing, memory, histograms, function,
    );
}

/// Whether a session of `sessions` measures memory.
pub(super) fn measures_memory(sessions: u64) -> bool {
    sessions & MEMORY.load(Ordering::Relaxed) != 0
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
        super::stack::forget_sessions(stale);
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
    let mark = super::inflight::this_thread()?; // `None` while this thread's destructors run
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
        super::stack::end_poll(&Target::Process(self.process));
    }
}

/// Figures in nanoseconds, as a [`PathMeasurement`] (`path` left 0).
fn measured(clock: Option<&quanta::Clock>, acc: &Acc) -> PathMeasurement {
    PathMeasurement {
        path: 0,
        calls: acc.calls,
        time_ns: match (clock, acc.ticks) {
            (_, 0) | (None, _) => 0,
            (Some(c), t) => c.delta_as_nanos(0, t),
        },
        words: acc.words,
        bytes: acc.bytes,
        blocks: acc.blocks,
    }
}

/// A process's figures per path summed by the path's last function (`path_callsites`: per
/// path, its callsite's id), in callsite order.
fn by_callsite(figures: &[(u32, Acc)], path_callsites: &[u32]) -> Vec<(u32, Acc)> {
    let mut by_callsite: Vec<(u32, Acc)> = figures
        .iter()
        .filter_map(|&(path, acc)| Some((*path_callsites.get(path as usize)?, acc)))
        .collect();
    by_callsite.sort_unstable_by_key(|f| f.0);
    by_callsite.dedup_by(|later, first| {
        if later.0 == first.0 {
            first.1 = first.1.plus(&later.1);
            true
        } else {
            false
        }
    });
    by_callsite
}

/// A session's figures read in one walk ([`SessionState::gathered`]).
pub(crate) struct Gathered {
    /// Per process measured, in pid order: the process (no functions), its figures per
    /// function (ids as `gathered` was told to give them) and per call path (the path's id).
    pub(crate) processes: Vec<(
        ProcessMeasurement,
        Vec<SnapshotFigures>,
        Vec<SnapshotFigures>,
    )>,
    /// The call paths: per path, its parent (or [`super::tree::ROOT`]) and callsite's id.
    pub(crate) paths: Vec<(u32, u32)>,
    /// A sample session's processes folded once they ended ([`ended`]): their calls per
    /// callsite (id, calls), which their rows no longer hold.
    pub(crate) ended_calls: Vec<(u32, u64)>,
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
    /// ([`join_sample_session`]; 0: none yet), so that the next sample polls of that session
    /// know it with one load. Generations are never reused, so a stale one names no session.
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

/// Told that the session of slot `bit` measures again (after pause or restart): the samplers
/// above this layer (a paused wall sampler sleeps until then), filled at link time.
// The `link_section` statics linkme makes are flagged by `unsafe_code` in the crate that
// defines the slice; nothing here is unsafe.
#[allow(unsafe_code)]
#[linkme::distributed_slice]
pub(crate) static MEASURING_RESUMED: [fn(u32)];

/// Where a measured poll's figures go: the table of a process (its own poll's, or a helper
/// task's), or a thread's table of the traced calls it made outside any process
/// ([`super::outside`]).
pub(crate) enum Target<'a> {
    /// The table of the process, made at its first flush.
    Process(&'a dyn TracedProcess),
    /// A table of traced calls outside any process.
    Outside(&'a ProcTraceRef),
}

impl Target<'_> {
    fn data(&self) -> &ProcTraceRef {
        match self {
            Target::Process(process) => table_of(*process),
            Target::Outside(data) => data,
        }
    }

    /// The node whose sessions the table may join; `None` for any (outside processes: the
    /// sessions measuring it were chosen when its poll began).
    fn node(&self) -> Option<u32> {
        match self {
            Target::Process(process) => Some(process.node_id()),
            Target::Outside(_) => None,
        }
    }
}

/// A process's table, locked while a poll's figures move into it ([`flush`]).
pub(crate) struct Flush<'a> {
    table: MutexGuard<'a, ProcTrace>,
    target: &'a Target<'a>,
    /// The paused sessions, read once the lock is held.
    paused: u64,
}

/// Moves the figures of a poll measured for `sessions` into its target's table: `drain` hands
/// over each (session slot, session generation, callsite id, figures) the poll gathered
/// through [`Flush::add`], under the table's lock. What it allocates (rarely: a new table,
/// session or function) is charged to no process.
#[inline]
pub(crate) fn flush(target: &Target<'_>, sessions: u64, drain: impl FnOnce(&mut Flush<'_>)) {
    let table = lock(target.data());
    let paused = paused_here(sessions);
    drain(&mut Flush {
        table,
        target,
        paused,
    });
}

impl Flush<'_> {
    /// Moves the figures of `acc` (zeroing it), gathered for the session in slot `bit` of
    /// `generation` in function (or path) `id`, into the process's figures; dropped when that
    /// session is paused or no longer measures.
    #[inline(always)]
    pub(crate) fn add(&mut self, bit: u32, generation: u64, id: u32, acc: &Accumulator) {
        // The common case: the function the last flush ended on, for a session still measuring
        // (as `session_data` checks), read and zeroed in place.
        if self.paused & (1 << bit) == 0
            && let Some((b, g, index, at)) = self.table.hint
            && b == bit
            && g == generation
            && g == generation_of(bit)
            && let Some(f) = self.table.sessions[index].functions.get_mut(at)
            && f.0 == id
        {
            f.1 = f.1.plus(&acc.take());
            return;
        }
        self.add_taken(bit, generation, id, acc.take());
    }

    /// [`add`](Self::add) in every case, with the figures already taken.
    #[inline(never)]
    fn add_taken(&mut self, bit: u32, generation: u64, id: u32, acc: Acc) {
        if self.paused & (1 << bit) != 0 || acc.is_zero() {
            return;
        }
        let table = &mut *self.table;
        let (index, hinted) = match table.hint {
            // Still measuring (as `session_data` checks)?
            Some((b, g, index, at)) if b == bit && g == generation && g == generation_of(bit) => {
                (index, at)
            }
            _ => {
                let target = self.target;
                let found = crate::heap::suppressed(|| {
                    session_data(table, bit, generation, target.data(), target.node())
                });
                let Some(index) = found else {
                    return;
                };
                (index, usize::MAX)
            }
        };
        let functions = &mut table.sessions[index].functions;
        let at = if functions.get(hinted).is_some_and(|f| f.0 == id) {
            functions[hinted].1 = functions[hinted].1.plus(&acc);
            hinted
        } else {
            match functions.binary_search_by_key(&id, |(i, _)| *i) {
                Ok(i) => {
                    functions[i].1 = functions[i].1.plus(&acc);
                    i
                }
                Err(i) => {
                    crate::heap::suppressed(|| functions.insert(i, (id, acc)));
                    i
                }
            }
        };
        table.hint = Some((bit, generation, index, at));
    }
}

/// The paused sessions among `sessions` whose figures this thread's poll drops: all of them,
/// but those that were measuring it when they paused (see [`super::inflight`]). Read under
/// the lock that the figures then go in under (a table's, a session's list or histograms).
#[inline(always)]
fn paused_here(sessions: u64) -> u64 {
    let paused = PAUSED.load(Ordering::SeqCst) & sessions;
    if paused == 0 {
        return 0;
    }
    paused & !super::inflight::kept()
}

/// `process`'s table, made at its first measured poll.
fn table_of<P: TracedProcess + ?Sized>(process: &P) -> &ProcTraceRef {
    process.trace_data().get_or_init(|| {
        crate::heap::suppressed(|| {
            Arc::new(ProcTable::new(ProcTrace::new(
                process.pid(),
                process.initial_call().clone(),
            )))
        })
    })
}

/// The index of the figures of the session in slot `bit` of `generation` in `table` (the table
/// `data` holds: of a process of node `node`, or with `None` one that any node's sessions may
/// join), made if need be; `None` when that session no longer measures (its figures are
/// dropped).
fn session_data(
    table: &mut ProcTrace,
    bit: u32,
    generation: u64,
    data: &ProcTraceRef,
    node: Option<u32>,
) -> Option<usize> {
    // Only the session that was measuring when the poll began, if it still is.
    if generation == 0 || generation != generation_of(bit) {
        return None;
    }
    if let Some(i) = table
        .sessions
        .iter()
        .position(|d| d.bit == bit && d.generation == generation)
    {
        return Some(i);
    }
    // A session that held this slot before is gone: its figures go with it (and the indices
    // of `sessions` change).
    table.hint = None;
    table.sessions.retain(|d| d.bit != bit);
    if !register(bit, generation, data, node) {
        return None;
    }
    table.sessions.push(SessionData {
        bit,
        generation,
        functions: Vec::new(),
        histograms: Vec::new(),
        events: Vec::new(),
        dropped: 0,
    });
    Some(table.sessions.len() - 1)
}

/// Moves a poll's event log into the process's table (run with allocation suppressed):
/// `log` holds (clock ticks, callsite id, entered, sessions), `dropped` per session slot the
/// events the poll could not log, `generations` each slot's session generation when the poll
/// began.
pub(crate) fn flush_events(
    target: &Target<'_>,
    log: &mut Vec<(u64, u32, bool, u64)>,
    dropped: &[u64; super::MAX_SESSIONS],
    generations: &[u64; super::MAX_SESSIONS],
) {
    let mut table = lock(target.data());
    let paused = paused_here(u64::MAX);
    let with_drops = dropped
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .fold(0u64, |m, (bit, _)| m | 1 << bit);
    let mut sessions = (log.iter().fold(0, |m, e| m | e.3) | with_drops) & !paused;
    while sessions != 0 {
        let bit = sessions.trailing_zeros();
        sessions &= sessions - 1;
        let Some(index) = session_data(
            &mut table,
            bit,
            generations[bit as usize],
            target.data(),
            target.node(),
        ) else {
            continue;
        };
        let d = &mut table.sessions[index];
        d.dropped += dropped[bit as usize];
        for &(ticks, id, entered, mask) in log.iter() {
            if mask & (1 << bit) == 0 {
                continue;
            }
            if d.events.len() < EVENT_LOG_CAPACITY {
                d.events.push((ticks, id, entered));
            } else {
                d.dropped += 1;
            }
        }
    }
    log.clear();
}

/// Records call durations (session slot, its generation, callsite id, clock ticks) into the
/// histograms of the table this thread's poll records into (its process's; run with
/// allocation suppressed), under its
/// table's lock: after `pause` has taken that lock, nothing more lands. Durations of a
/// session paused, or no longer the one in its slot, are dropped.
pub(crate) fn record_durations(samples: &mut Vec<(u32, u64, u32, u64)>) {
    RECORDING.with(|recording| {
        if let (Some(clock), Some((data, node))) =
            (super::stack::clock_if_set(), &*recording.borrow())
        {
            record_into(clock, data, *node, samples);
        }
    });
    samples.clear();
}

/// [`record_durations`], the last of the poll: the poll no longer records.
pub(crate) fn finish_durations(samples: &mut Vec<(u32, u64, u32, u64)>) {
    if !samples.is_empty() {
        record_durations(samples);
    }
    RECORDING.with(|recording| recording.borrow_mut().take());
}

fn record_into(
    clock: &quanta::Clock,
    data: &ProcTraceRef,
    node: Option<u32>,
    samples: &mut [(u32, u64, u32, u64)],
) {
    samples.sort_unstable_by_key(|s| (s.0, s.1, s.2));
    let mut table = lock(data);
    // Under the lock `pause` takes once: after it returns, nothing more lands (but for a poll
    // it kept, which it waited for: asked only when a session of these samples is paused).
    let paused = PAUSED.load(Ordering::SeqCst);
    let mut rest = &samples[..];
    while let Some(&(bit, generation, _, _)) = rest.first() {
        let n = rest
            .iter()
            .take_while(|s| (s.0, s.1) == (bit, generation))
            .count();
        let (these, next) = rest.split_at(n);
        rest = next;
        if paused & (1 << bit) != 0 && paused_here(1 << bit) != 0 {
            continue;
        }
        let Some(index) = session_data(&mut table, bit, generation, data, node) else {
            continue;
        };
        let histograms = &mut table.sessions[index].histograms;
        let mut at = 0;
        for &(_, _, id, ticks) in these {
            // The samples are sorted by callsite: each finds its histogram at or after the
            // last one's.
            at += histograms[at..].partition_point(|(i, _)| *i < id);
            if histograms.get(at).is_none_or(|(i, _)| *i != id) {
                let Some(h) = new_histogram(bit, generation) else {
                    continue;
                };
                histograms.insert(at, (id, h));
            }
            // `record` grows the histogram to the value (`saturating_record` would clamp it to
            // the range so far); it fails only past i64::MAX / 2 nanoseconds.
            let _ = histograms[at]
                .1
                .record(clock.delta_as_nanos(0, ticks).max(1));
        }
    }
}

/// An auto-resizing histogram with the precision of the session in slot `bit` of
/// `generation`; `None` when that session is gone.
fn new_histogram(bit: u32, generation: u64) -> Option<hdrhistogram::Histogram<u64>> {
    let session = session_in_slot(bit).filter(|s| s.generation() == generation)?;
    hdrhistogram::Histogram::new(session.histogram_precision()).ok()
}

/// The distribution of one function's call durations in one process, as
/// [`TraceSession::call_time_percentiles`](super::TraceSession::call_time_percentiles)
/// reports it: each call's own time — polled time from entry to return, exclusive of the
/// traced calls it made, as the time figure beside it is — in nanoseconds, to the session's
/// [precision](super::SessionOptions::histogram_precision).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallPercentiles {
    /// The process.
    pub pid: Pid,
    /// The function.
    pub callsite: &'static Callsite,
    /// Calls recorded (calls that returned while measured).
    pub calls: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// The longest.
    pub max_ns: u64,
}

/// Adds a table to the list of session `bit`, unless the session is gone or paused, or (for a
/// process's table) belongs to another node than `node`.
fn register(bit: u32, generation: u64, data: &ProcTraceRef, node: Option<u32>) -> bool {
    let Some(session) = session_in_slot(bit) else {
        return false;
    };
    if session.generation() != generation || node.is_some_and(|node| session.node() != node) {
        return false;
    }
    let mut measured = lock(&session.measured);
    if paused_here(1 << bit) != 0 {
        return false;
    }
    measured.push(Arc::clone(data));
    true
}

/// One function's figures in one process, as [`TraceSession::measurements`] reports them.
///
/// [`TraceSession::measurements`]: super::TraceSession::measurements
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FunctionMeasurement {
    /// The function.
    pub callsite: &'static Callsite,
    /// Calls entered while measured.
    pub calls: u64,
    /// Time spent in it while the process was polled, exclusive of traced callees, in
    /// nanoseconds (call_time; 0 otherwise).
    pub time_ns: u64,
    /// Words allocated in it (8 bytes, rounded up per allocation; call_memory).
    pub words: u64,
    /// Bytes allocated in it (call_memory).
    pub bytes: u64,
    /// Allocations made in it (call_memory).
    pub blocks: u64,
}

/// One process's figures, per function it called.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessMeasurement {
    /// The process (alive or not).
    pub pid: Pid,
    /// What it was spawned to run ([`SpawnOptions::initial_call`](crate::SpawnOptions::initial_call)).
    pub initial_call: std::borrow::Cow<'static, str>,
    /// The name it was registered under when it ended (`None` while it runs: ask
    /// [`process_info`](crate::process_info) then).
    pub registered_name: Option<crate::Name>,
    /// Its functions, in callsite order; a function called but allocating nothing is here
    /// with zero words.
    pub functions: Vec<FunctionMeasurement>,
}

/// Whether an [`CallEvent`] enters or leaves a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallEventKind {
    /// A frame was entered: a synchronous call began, or an async call was polled.
    Enter,
    /// The frame was left: the call returned, or its poll returned.
    Leave,
}

/// One entry of a process's event log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallEvent {
    /// When, in nanoseconds since the session was opened.
    pub ts_ns: u64,
    /// The function.
    pub callsite: &'static Callsite,
    /// Entered or left.
    pub kind: CallEventKind,
}

/// One process's event log ([`TraceTypes::CALL_EVENTS`]): its frames entered and left, in
/// order. Each poll's frames are balanced; a log cut short by its capacity may end inside
/// frames.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessEvents {
    /// The process.
    pub pid: Pid,
    /// Its events, oldest first.
    pub events: Vec<CallEvent>,
    /// Events not kept, past [`EVENT_LOG_CAPACITY`].
    pub dropped: u64,
}

/// One traced call path: the function called last, and the path it was called on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallPath {
    /// The path this one extends (an index into [`CallTreeMeasurement::paths`], always
    /// smaller than this path's own); `None` for an outermost call.
    pub parent: Option<u32>,
    /// The function called.
    pub callsite: &'static Callsite,
}

/// One call path's figures in one process, exclusive of the traced calls below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathMeasurement {
    /// The path: an index into [`CallTreeMeasurement::paths`].
    pub path: u32,
    /// Calls made on this path.
    pub calls: u64,
    /// Nanoseconds spent on it while polled (call_time).
    pub time_ns: u64,
    /// Words allocated on it (call_memory).
    pub words: u64,
    /// Bytes allocated on it (call_memory).
    pub bytes: u64,
    /// Allocations made on it (call_memory).
    pub blocks: u64,
}

/// One process's call tree: the figures of each path it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessCallTree {
    /// The process.
    pub pid: Pid,
    /// Its paths' figures, by path id.
    pub paths: Vec<PathMeasurement>,
}

/// What a session in call-tree mode gathered
/// ([`TraceSession::call_tree`](super::TraceSession::call_tree)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallTreeMeasurement {
    /// Every path the session saw; a path's parent comes before it.
    pub paths: Vec<CallPath>,
    /// Per process measured, in pid order, its paths' figures.
    pub processes: Vec<ProcessCallTree>,
}

impl CallTreeMeasurement {
    /// The functions on path `path`, outermost first.
    pub fn stack(&self, path: u32) -> Vec<&'static Callsite> {
        let mut out = Vec::new();
        let mut at = Some(path);
        while let Some(p) = at.and_then(|p| self.paths.get(p as usize).map(|n| (p, n))) {
            out.push(p.1.callsite);
            at = p.1.parent.filter(|&q| q < p.0);
        }
        out.reverse();
        out
    }
}

/// Per process, in pid order, what a read makes of its figures ([`SessionState::figures`]).
type Rows<T> = Vec<(ProcessMeasurement, T)>;

impl SessionState {
    /// Every table of this session, taken without holding the list's lock.
    fn tables(&self) -> Vec<ProcTraceRef> {
        lock(&self.measured).clone()
    }

    /// Per process, what `convert` makes of its (callsite or path id, figures) for this
    /// session, in pid order. `convert` runs under the process's table lock, so the figures
    /// are read in place rather than copied first (collect over 10,000 processes is bound by
    /// memory traffic).
    fn figures<T>(&self, convert: impl FnMut(&[(u32, Acc)]) -> T) -> Rows<T> {
        self.figures_and_ended(convert).0
    }

    /// [`figures`](Self::figures), with the processes a sample session has folded
    /// ([`ended`]): those that keep a row (they have samples) among the processes, with no
    /// figures, and the calls of them all per callsite (id, calls), read together — a fold
    /// moves a process's calls from its row to these as a whole, before or after this read.
    fn figures_and_ended<T>(
        &self,
        mut convert: impl FnMut(&[(u32, Acc)]) -> T,
    ) -> (Rows<T>, Vec<(u32, u64)>) {
        let folded = lock(&self.folded);
        let tables = self.tables();
        let mut out = Vec::with_capacity(tables.len() + folded.rows().len());
        for data in tables {
            let table = lock(&data);
            if let Some(d) = table
                .sessions
                .iter()
                .find(|d| d.bit == self.bit() && d.generation == self.generation())
            {
                let process = ProcessMeasurement {
                    pid: table.pid_for(self.node()),
                    initial_call: table.initial_call.clone(),
                    registered_name: table.name.clone(),
                    functions: Vec::new(),
                };
                out.push((process, convert(&d.functions)));
            }
        }
        for row in folded.rows() {
            out.push((row.clone(), convert(&[])));
        }
        let ended_calls = folded.calls();
        drop(folded);
        // By key then moved once each: an entry is large, and a million of them are sorted.
        out.sort_by_cached_key(|p| p.0.pid);
        (out, ended_calls)
    }

    pub(crate) fn measurements(&self) -> Vec<ProcessMeasurement> {
        let clock = super::stack::clock_if_set();
        let function = |&(id, ref acc): &(u32, Acc)| {
            let callsite = callsites().get(id as usize)?;
            let m = measured(clock, acc);
            Some(FunctionMeasurement {
                callsite,
                calls: m.calls,
                time_ns: m.time_ns,
                words: m.words,
                bytes: m.bytes,
                blocks: m.blocks,
            })
        };
        if !self.types().contains(TraceTypes::CALL_TREE) {
            return self
                .figures(|figures| {
                    // Sized up front: a `filter_map` collect would grow it step by step.
                    let mut functions = Vec::with_capacity(figures.len());
                    functions.extend(figures.iter().filter_map(function));
                    functions
                })
                .into_iter()
                .map(|(mut process, functions)| {
                    process.functions = functions;
                    process
                })
                .collect();
        }
        // In call-tree mode the ids are paths: sum them by their last function. The figures
        // first, then the paths: paths only grow, so every path a figure names is among them.
        let figures = self.figures(<[(u32, Acc)]>::to_vec);
        let path_callsites: Vec<u32> = self.paths().nodes.iter().map(|&(_, cs)| cs).collect();
        figures
            .into_iter()
            .map(|(mut process, figures)| {
                let by_callsite = by_callsite(&figures, &path_callsites);
                process.functions = by_callsite.iter().filter_map(function).collect();
                process
            })
            .collect()
    }

    /// What [`measurements`](Self::measurements) and [`call_tree`](Self::call_tree) give,
    /// read in one walk over the processes (a snapshot needs both; each walk visits every
    /// process measured): per process in pid order, its figures per function (each with
    /// the id `function_id` gives its callsite's id, those it gives none left out, in the
    /// order `measurements` gives them) and per call path (call-tree mode; empty
    /// otherwise), and the paths' parents and callsites ids.
    pub(crate) fn gathered(&self, mut function_id: impl FnMut(u32) -> Option<u32>) -> Gathered {
        let clock = super::stack::clock_if_set();
        // Each figure is written once, as the snapshot holds it: a million of them are read
        // and written once, not copied again.
        let figures = |id: u32, acc: &Acc| {
            let m = measured(clock, acc);
            SnapshotFigures {
                id,
                calls: m.calls,
                time_ns: m.time_ns,
                words: m.words,
                bytes: m.bytes,
                blocks: m.blocks,
            }
        };
        if !self.types().contains(TraceTypes::CALL_TREE) {
            let (processes, ended_calls) = self.figures_and_ended(|all| {
                let mut functions = Vec::with_capacity(all.len());
                for (id, acc) in all {
                    if let Some(id) = function_id(*id) {
                        functions.push(figures(id, acc));
                    }
                }
                functions
            });
            let processes = processes
                .into_iter()
                .map(|(process, functions)| (process, functions, Vec::new()))
                .collect();
            let paths = self.paths().nodes.clone();
            return Gathered {
                processes,
                paths,
                ended_calls,
            };
        }
        // The figures first, then the paths: paths only grow, so every path a figure names
        // is among them.
        let by_path = self.figures(<[(u32, Acc)]>::to_vec);
        let paths = self.paths().nodes.clone();
        let path_callsites: Vec<u32> = paths.iter().map(|&(_, cs)| cs).collect();
        let processes = by_path
            .into_iter()
            .map(|(process, by_path)| {
                let functions = by_callsite(&by_path, &path_callsites)
                    .iter()
                    .filter_map(|(id, acc)| Some(figures(function_id(*id)?, acc)))
                    .collect();
                let paths = by_path.iter().map(|(p, acc)| figures(*p, acc)).collect();
                (process, functions, paths)
            })
            .collect();
        Gathered {
            processes,
            paths,
            ended_calls: Vec::new(),
        }
    }

    /// Per process measured, its event log (empty without [`TraceTypes::CALL_EVENTS`]).
    pub(crate) fn event_logs(&self) -> Vec<ProcessEvents> {
        let Some(clock) = super::stack::clock_if_set() else {
            return Vec::new();
        };
        let start = self.opened_ticks();
        let mut out = Vec::new();
        for data in self.tables() {
            let table = lock(&data);
            let Some(d) = table
                .sessions
                .iter()
                .find(|d| d.bit == self.bit() && d.generation == self.generation())
            else {
                continue;
            };
            if d.events.is_empty() && d.dropped == 0 {
                continue;
            }
            out.push(ProcessEvents {
                pid: table.pid_for(self.node()),
                events: d
                    .events
                    .iter()
                    .filter_map(|&(ticks, id, entered)| {
                        Some(CallEvent {
                            ts_ns: clock.delta_as_nanos(start, ticks.max(start)),
                            callsite: callsites().get(id as usize)?,
                            kind: if entered {
                                CallEventKind::Enter
                            } else {
                                CallEventKind::Leave
                            },
                        })
                    })
                    .collect(),
                dropped: d.dropped,
            });
        }
        out.sort_by_key(|p| p.pid);
        out
    }

    /// Call-tree mode's paths, and per process the figures of each.
    pub(crate) fn call_tree(&self) -> CallTreeMeasurement {
        let clock = super::stack::clock_if_set();
        // The figures first, then the paths: paths only grow, so every path a figure names is
        // among them.
        let processes = if self.types().contains(TraceTypes::CALL_TREE) {
            self.figures(|figures| {
                figures
                    .iter()
                    .map(|(path, acc)| {
                        let mut m = measured(clock, acc);
                        m.path = *path;
                        m
                    })
                    .collect()
            })
            .into_iter()
            .map(|(process, paths)| ProcessCallTree {
                pid: process.pid,
                paths,
            })
            .collect()
        } else {
            Vec::new()
        };
        let paths = self
            .paths()
            .nodes
            .iter()
            .filter_map(|&(parent, cs)| {
                Some(CallPath {
                    parent: (parent != super::tree::ROOT).then_some(parent),
                    callsite: callsites().get(cs as usize)?,
                })
            })
            .collect();
        CallTreeMeasurement { paths, processes }
    }

    /// Stops measuring, keeping the figures, those of the polls running now included (it
    /// waits for them, up to `limit`); once it returns they are stable.
    pub(crate) fn pause_measuring(&self, limit: std::time::Duration) {
        let m = 1u64 << self.bit();
        // No poll begins measuring for the session from here (but one that read the mask
        // just before may yet)...
        MEASURING.fetch_and(!m, Ordering::SeqCst);
        derive();
        // ... those running now keep what they gather, even after the mark below ...
        let running = super::inflight::keep_running(m);
        {
            let _measured = lock(&self.measured);
            PAUSED.fetch_or(m, Ordering::SeqCst);
        }
        // ... which every poll not kept finds when it flushes, and drops its figures. Those
        // kept end and hand theirs over; one still running at the limit is let go.
        let late = super::inflight::wait(running, limit);
        super::inflight::let_go(&late, m);
        // A flush, or a batch of call durations being recorded, finishes before this returns;
        // so does a fold of a sample session's ended processes (one begun later sees the mark
        // and folds nothing).
        for data in self.tables() {
            drop(lock(&data));
        }
        drop(lock(&self.folded));
    }

    /// Measures again (after pause or restart) if the session measures anything per process.
    pub(crate) fn resume_measuring(&self) {
        let m = 1u64 << self.bit();
        let _measured = lock(&self.measured);
        PAUSED.fetch_and(!m, Ordering::SeqCst);
        if self.types().per_process() {
            MEASURING.fetch_or(m, Ordering::SeqCst);
        }
        derive();
        // A paused wall sampler sleeps until now.
        for wake in MEASURING_RESUMED {
            wake(self.bit());
        }
    }

    /// Per process and function, the distribution of call durations recorded so far, in pid
    /// order, then callsite order.
    pub(crate) fn percentiles(&self) -> Vec<CallPercentiles> {
        let mut out = Vec::new();
        for data in self.tables() {
            let table = lock(&data);
            let Some(d) = table
                .sessions
                .iter()
                .find(|d| d.bit == self.bit() && d.generation == self.generation())
            else {
                continue;
            };
            out.extend(d.histograms.iter().filter_map(|(id, h)| {
                Some(CallPercentiles {
                    pid: table.pid_for(self.node()),
                    callsite: callsites().get(*id as usize)?,
                    calls: h.len(),
                    p50_ns: h.value_at_quantile(0.5),
                    p90_ns: h.value_at_quantile(0.9),
                    p99_ns: h.value_at_quantile(0.99),
                    max_ns: h.max(),
                })
            }));
        }
        // Each table's are in callsite order already; the sort is stable.
        out.sort_by_key(|p| p.pid);
        out
    }

    /// Zeroes every process's figures for this session (the calls of the processes it has
    /// folded too).
    pub(crate) fn clear_measurements(&self) {
        let (bit, generation) = (self.bit(), self.generation());
        let mut folded = lock(&self.folded);
        folded.clear_calls();
        for data in self.tables() {
            let mut table = lock(&data);
            for d in table.sessions.iter_mut() {
                if d.bit == bit && d.generation == generation {
                    d.functions.clear();
                    d.histograms.clear();
                    d.events.clear();
                    d.dropped = 0;
                }
            }
        }
    }
}
