//! What a session measures ([`TraceTypes`]), and which sessions measure what, as global masks
//! of session bits: those that count, measure, measure time or memory, record histograms, build
//! call trees, keep event logs or sample, and those derived from them that choose a poll's path
//! (lean, plain, not lean); set when a session opens, cleared when it closes, and changed by
//! pause and resume (which also wait for the polls measuring then, see the parent module).
//!
//! Uses the session's state ([`SessionState`]) and [`crate::trace::inflight`] for pause.

use std::fmt;
use std::ops::BitOr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::lock;
use crate::trace::session::SessionState;

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
/// [`crate::trace::stack::begin_plain_poll`], which has nothing to decide.
pub(super) static PLAIN: AtomicU64 = AtomicU64::new(0);
/// `MEASURING` less [`PLAIN`] and the sessions that record histograms, build call trees or keep
/// event logs, and, where the clock is not the time-stamp counter, those that measure time;
/// derived with [`NOT_LEAN`]. A poll measured for one of these alone is lean and flat and
/// begins with [`crate::trace::stack::begin_lean_poll`], which decides only what it measures.
pub(super) static LEAN: AtomicU64 = AtomicU64::new(0);
/// Sample sessions that count calls and measure nothing else (a [`TraceTypes::SAMPLE`] session
/// as [`NodeHandle::sample_session`](crate::NodeHandle::sample_session) opens it): a process
/// poll that one of them alone measures is a *sample poll*
/// ([`begin_sample_poll`](super::begin::begin_sample_poll)), which keeps the traced stack,
/// counts each call in this thread's counters for the session (as call_count does) and flushes
/// nothing into the process's table when it ends.
pub(super) static SAMPLING: AtomicU64 = AtomicU64::new(0);
/// Serializes the derivations of [`NOT_LEAN`], so that the last one sees every change.
static DERIVE: Mutex<()> = Mutex::new(());
/// Sessions that measure time.
pub(super) static TIMING: AtomicU64 = AtomicU64::new(0);
/// Sessions that measure memory.
pub(super) static MEMORY: AtomicU64 = AtomicU64::new(0);
/// Measuring sessions that are paused.
pub(super) static PAUSED: AtomicU64 = AtomicU64::new(0);
/// Sessions that record call-duration histograms.
pub(super) static HISTOGRAMS: AtomicU64 = AtomicU64::new(0);
/// Sessions in call-tree mode.
pub(super) static TREES: AtomicU64 = AtomicU64::new(0);
/// Sessions that keep an event log.
pub(super) static EVENTS: AtomicU64 = AtomicU64::new(0);

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
    if !crate::trace::stack::clock_is_tsc() {
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
    /// [call-time outliers](crate::trace#call-time-outliers)).
    pub const CALL_TIME: TraceTypes = TraceTypes(2);
    /// Calls, words, bytes and blocks allocated per process per function.
    pub const CALL_MEMORY: TraceTypes = TraceTypes(4);
    /// All three.
    pub const ALL: TraceTypes = TraceTypes(7);
    /// call_time, and per process and function the distribution of its calls' own time — polled
    /// time from entry to return, exclusive of traced callees, as the time figure is — in an
    /// hdrhistogram: opt-in, since recording each call costs a few nanoseconds more, and a
    /// histogram per process and function called (a few KiB each at the default precision,
    /// [`SessionOptions::histogram_precision`](crate::trace::SessionOptions)). Read with
    /// [`TraceSession::call_time_percentiles`](crate::trace::TraceSession::call_time_percentiles).
    pub const CALL_TIME_HISTOGRAMS: TraceTypes = TraceTypes(2 | 8);
    /// Call-tree mode: per process, the figures of each traced call path (the functions called,
    /// outermost first) rather than of each function; combine it with
    /// [`CALL_TIME`](Self::CALL_TIME) or [`CALL_MEMORY`](Self::CALL_MEMORY) (alone it counts
    /// calls per path).
    /// [`TraceSession::measurements`](crate::trace::TraceSession::measurements) still gives the
    /// flat figures — the sum over the paths that end in each function — and
    /// [`TraceSession::call_tree`](crate::trace::TraceSession::call_tree) gives the paths.
    /// Costs a hash lookup per traced call more than the flat mode.
    pub const CALL_TREE: TraceTypes = TraceTypes(16);
    /// An event log per process: each traced frame entered and left, with a timestamp, for
    /// timelines ([`TraceSession::event_logs`](crate::trace::TraceSession::event_logs)). A
    /// frame is one poll of an async call, or a whole synchronous call. Bounded: a process
    /// keeps its first [`EVENT_LOG_CAPACITY`](crate::trace::EVENT_LOG_CAPACITY) events and
    /// counts the rest as dropped. Combine it with [`CALL_TIME`](Self::CALL_TIME) or
    /// [`CALL_MEMORY`](Self::CALL_MEMORY).
    pub const CALL_EVENTS: TraceTypes = TraceTypes(32);
    /// Traced calls made outside any process are measured for the session on every thread, not
    /// only on its node's (see [`outside`](crate::trace#outside-processes)): `main`, and the
    /// threads of a runtime the node does not own, count for it too.
    pub const ANY_THREAD: TraceTypes = TraceTypes(64);
    /// Sample mode: the traced stack of each process the session traces is kept (and its calls
    /// counted per function), for a sampler to read; time and memory are not measured. Opened
    /// with a sampler by [`NodeHandle::sample_session`](crate::NodeHandle::sample_session). A
    /// poll the session alone measures counts its calls per thread, apart from any process
    /// ([`call_counts`](crate::trace::TraceSession::call_counts)); the others (shared with
    /// another session, or a helper task's) count them in the process's figures, and the
    /// processes that have ended are folded into one sum of calls rather than each keep its
    /// figures (see [processes that end](crate::sample::SampleSession#processes-that-end)):
    /// [`measurements`](crate::trace::TraceSession::measurements) lists the others. A
    /// [`snapshot`](crate::trace::TraceSession::snapshot) gives every call, in its call counts
    /// and its processes' rows together.
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
        crate::trace::stack::clock();
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

/// Whether a session of `sessions` measures memory.
pub(in crate::trace) fn measures_memory(sessions: u64) -> bool {
    sessions & MEMORY.load(Ordering::Relaxed) != 0
}

/// Told that the session of slot `bit` measures again (after pause or restart): the samplers
/// above this layer (a paused wall sampler sleeps until then), filled at link time.
// The `link_section` statics linkme makes are flagged by `unsafe_code` in the crate that
// defines the slice; nothing here is unsafe.
#[allow(unsafe_code)]
#[linkme::distributed_slice]
pub(crate) static MEASURING_RESUMED: [fn(u32)];

impl SessionState {
    /// Stops measuring, keeping the figures, those of the polls running now included (it
    /// waits for them, up to `limit`); once it returns they are stable.
    pub(crate) fn pause_measuring(&self, limit: std::time::Duration) {
        let m = 1u64 << self.bit();
        // No poll begins measuring for the session from here (but one that read the mask
        // just before may yet)...
        MEASURING.fetch_and(!m, Ordering::SeqCst);
        derive();
        // ... those running now keep what they gather, even after the mark below ...
        let running = crate::trace::inflight::keep_running(m);
        {
            let _measured = lock(&self.measured);
            PAUSED.fetch_or(m, Ordering::SeqCst);
        }
        // ... which every poll not kept finds when it flushes, and drops its figures. Those
        // kept end and hand theirs over; one still running at the limit is let go.
        let late = crate::trace::inflight::wait(running, limit);
        crate::trace::inflight::let_go(&late, m);
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
}
