//! The traced stack: per worker thread, the traced calls of the process being polled.
//!
//! Frames never outlive a poll: each poll of a traced future pushes its frame and pops it when
//! the poll returns (or unwinds), and a synchronous traced call pushes on entry and pops on
//! return; `join!` and `select!` nest within one poll. So one fixed-capacity stack per thread
//! serves every process, costs nothing per process and never allocates. Calls nested deeper
//! than [`CAPACITY`] are counted, and their time and memory go to the deepest frame kept.
//!
//! Each thread has, per session slot it has measured for, a scratch table with one accumulator
//! per callsite. For each session measuring the poll, the thread keeps a pointer to the
//! accumulator of the innermost frame that session measures. Between two events (a push, a
//! pop, the start or end of a poll) the time that passed and the memory the process allocated
//! are added there: to the innermost traced call, exclusive of its traced callees and
//! inclusive of untraced ones. A push points it at the callee's accumulator (and counts the
//! call); a pop points it back. The end of the poll moves what the poll touched into the
//! process's own table ([`super::measure`]).
//!
//! A session recording call durations (histograms) gets each call's **own** time: the ticks
//! charged to its frame over the whole call, across its polls — exclusive of its traced
//! callees, as the time figure beside it. While such a poll runs, each event adds what
//! passed to the innermost frame those sessions measure as well ([`Stack::own`]); an async
//! call carries what its earlier polls charged it (`polled`) into the next. Polls without
//! such a session (the lean ones among them) keep nothing of this. When two sessions
//! recording durations measure one process with different patterns, a frame's own time is
//! what passed while it was the innermost frame either of them measures.
//!
//! Only processes that a session measures (call_time or call_memory, and a trace flag) touch
//! this stack; for every other poll the cost is two relaxed loads in the poll wrapper.
//!
//! Most measured polls are in the common case: one session measures the process, without an
//! event log or histograms, and time (if measured) is read from the time-stamp counter.
//! `begin_poll` decides it once per poll ("lean"), keeping that session's table and innermost
//! accumulator in the stack, and its frames then take [`push_lean`](lean::push_lean) and
//! [`pop_lean`](lean::pop_lean): no loop over sessions, no mask per frame. In flat mode, a sync
//! call's entry and return are one out-of-line call each, whose common case (nothing allocated
//! since the last event, time read from the TSC inline) makes no further call; in call-tree
//! mode, the entry also looks its path up ([`push_lean_tree`](lean::push_lean_tree)) and the
//! pop restores the caller's path. When the lean poll is flat, its session counts no calls
//! apart, and it measures time alone ([`Stack::timed`]) or memory alone ([`Stack::quick`]), a
//! sync call whose mask is that session's enters inline at its callsite
//! ([`FrameGuard::enter_lean`]): a push in the traced function's frame and a pop out of line
//! that charge the clock and nothing else, or check that nothing was allocated since the last
//! event and charge nothing; the guard's drop calls the pop with no argument (it reads the
//! depth back, so that nothing is saved around its lookup of the stack). A call that one
//! call_count session alone wants is counted inline before any of this
//! (`session::count_single`), and one that several call_count sessions alone want after it
//! (`session::count_several`), so that a measured call tests one count-only key. A poll of an async
//! call finds the stack once, in the call's out-of-line poll wrapper ([`poll_in_frame`]), where a lean poll's push and pop are
//! inline.
//!
//! The end of a poll flushes in the same look at the stack: the touched figures go straight
//! into the process's table under its lock ([`super::measure::Flush`]); only the rare steps of
//! a flush that allocate (a new table, session or function) run with allocation charging
//! suppressed.
//!
//! This file holds the stack's state ([`Stack`]) and what the CPU sampler's signal handler
//! reads of it; its parts: the clock ([`clock`](mod@clock)), a poll's begin and end ([`poll`]),
//! the general push and pop ([`general`]), the lean and sample polls' fast paths ([`lean`]),
//! and the calls' entries ([`guard`]).

mod clock;
mod general;
mod guard;
mod lean;
mod poll;

use std::cell::{Cell, RefCell};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::MAX_SESSIONS;
use super::measure::Acc;
use super::sigcell::SigCell;
use super::tree;
use crate::heap::Counts;

pub(crate) use clock::{clock, clock_if_set, clock_is_tsc};
pub(crate) use guard::{FrameGuard, poll_in_frame};
pub(crate) use poll::{
    begin_lean_poll, begin_plain_poll, begin_poll, begin_sample_poll, end_poll, forget_sessions,
};

/// Frames kept per thread; deeper calls are counted and charged to the deepest frame kept.
pub const CAPACITY: usize = 128;

/// `u32::MAX`: no function.
pub(crate) const NO_FUNCTION: u32 = u32::MAX;

/// No frame of the stack: [`Stack::hist_top`] when no frame recording durations is open.
const NO_FRAME: usize = usize::MAX;

/// How many (session, function) pairs a poll tracks before it falls back to scanning its
/// tables at the end of the poll.
const TOUCHED: usize = 128;

/// One function's figures on one thread during a poll. Written only by its thread (a plain
/// load and store); atomics so that the tables can be pooled between threads.
#[derive(Default)]
pub(crate) struct Accumulator {
    calls: AtomicU64,
    ticks: AtomicU64,
    words: AtomicU64,
    bytes: AtomicU64,
    blocks: AtomicU64,
    touched: AtomicBool,
}

#[inline(always)]
fn bump(field: &AtomicU64, n: u64) {
    field.store(
        field.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

impl Accumulator {
    /// Whether the current poll has touched it.
    pub(crate) fn is_touched(&self) -> bool {
        self.touched.load(Ordering::Relaxed)
    }

    /// Takes the figures, leaving zeros. Only its thread calls it (as only its thread writes
    /// it): a plain load and store each, not five atomic swaps (a locked instruction each).
    pub(crate) fn take(&self) -> Acc {
        #[inline(always)]
        fn take(field: &AtomicU64) -> u64 {
            let v = field.load(Ordering::Relaxed);
            field.store(0, Ordering::Relaxed);
            v
        }
        self.touched.store(false, Ordering::Relaxed);
        Acc {
            calls: take(&self.calls),
            ticks: take(&self.ticks),
            words: take(&self.words),
            bytes: take(&self.bytes),
            blocks: take(&self.blocks),
        }
    }
}

type Table = &'static [Accumulator];

/// Scratch tables of threads that exited, for the next thread that needs one (all zeros).
static POOL: Mutex<Vec<Table>> = Mutex::new(Vec::new());

struct Stack {
    /// Frames open, those deeper than `CAPACITY` (not kept) included.
    depth: SigCell<AtomicUsize>,
    /// The sessions measuring the process being polled; 0 between polls.
    active: SigCell<AtomicU64>,
    /// When the poll is a sample poll — one sample session alone measures it, which keeps its
    /// traced stack and counts its calls, and nothing else ([`begin_sample_poll`]) — that
    /// session's bit: its frames take [`push_sample`](lean::push_sample) and
    /// [`pop_sample`](lean::pop_sample), and its end flushes nothing. 0 otherwise (`lean` is
    /// then 0).
    sample: Cell<u64>,
    /// When the poll is in the common case — one session measures it, with no event log or
    /// histograms, and time (if measured) from the time-stamp counter — that session's bit: its
    /// frames then take the lean path ([`push_lean`](lean::push_lean),
    /// [`pop_lean`](lean::pop_lean)). 0 otherwise.
    lean: Cell<u64>,
    /// In a lean poll: the session's slot, ...
    lean_slot: Cell<u32>,
    /// ... this thread's table for it ...
    lean_table: Cell<Table>,
    /// ... and the accumulator of the innermost frame (`None` at the root).
    lean_current: Cell<Option<&'static Accumulator>>,
    /// `lean` when the lean poll is in flat mode and does not measure time (so it measures
    /// memory only), 0 otherwise: a synchronous call whose mask is this takes
    /// [`FrameGuard::enter_quick`], inline, whose frame has nothing to charge but memory.
    /// 0 too when the session counts calls apart or does not measure (decided as the poll
    /// begins, see [`poll::fast_kind`]).
    quick: Cell<u64>,
    /// `lean` when the lean poll is in flat mode, measures time from the time-stamp counter
    /// and no memory, and its session counts no calls apart (decided as the poll begins), 0
    /// otherwise: a synchronous call whose mask is this takes [`FrameGuard::enter_timed`],
    /// inline, whose push and pop charge the clock and nothing else.
    timed: Cell<u64>,
    /// The lean poll's session is in call-tree mode: its frames are measured into the
    /// accumulators of their paths ([`push_lean_tree`](lean::push_lean_tree)), `lean_table` is
    /// empty, and ...
    lean_tree: Cell<bool>,
    /// ... this is the path of the innermost frame ([`tree::ROOT`] at the root).
    lean_path: Cell<u32>,
    /// The poll measures time, whose clock reads the time-stamp counter: a lean poll then reads
    /// the counter inline (a poll that measures time with another clock is never lean).
    tsc: Cell<bool>,
    /// Those of them in call-tree mode.
    tree: Cell<u64>,
    /// Those of them that keep an event log.
    events: Cell<u64>,
    /// Those of them for which a frame needs more than the common case: call-tree mode, an
    /// event log or call-duration histograms (`tree | events | histograms`), so that the
    /// common case checks one mask.
    extra: Cell<u64>,
    /// Per call-tree session slot, the path of the innermost frame it measures.
    paths: [Cell<u32>; MAX_SESSIONS],
    /// Whether one of them measures time.
    timing: Cell<bool>,
    /// Those that record call-duration histograms.
    histograms: Cell<u64>,
    /// What the process allocates (its account's owner counts, or this thread's tally), when
    /// one of them measures memory.
    memory: Cell<Option<&'static Counts>>,
    /// Its blocks counter when one of them measures memory, [`NO_BLOCKS`] otherwise (and
    /// `last_mem` is then zero): a synchronous call's common case compares it with
    /// `last_mem` without testing `memory` first.
    blocks: Cell<&'static AtomicU64>,
    /// The process's account's record of its current function, which every push writes
    /// ([`NO_CELL`] between polls, when nothing is pushed).
    function: Cell<&'static AtomicU32>,
    /// Where a pop records the caller's function: the same cell, or this stack's `sink` once
    /// a pending poll has recorded where the process is suspended ([`NO_CELL`] between polls,
    /// when nothing is popped). Always one of those three (see [`record_restore`]).
    restore: Cell<*const AtomicU32>,
    /// What pops write after a pending poll has recorded where the process is suspended; read
    /// by no one.
    sink: AtomicU32,
    last_ticks: Cell<u64>,
    last_mem: Cell<[u64; 3]>,
    /// `ids[i + 1]`: the function of frame `i`; `ids[0]` is [`NO_FUNCTION`], the caller of
    /// the outermost frame.
    ids: [SigCell<AtomicU32>; CAPACITY + 1],
    masks: [Cell<u64>; CAPACITY],
    /// Per frame, in a poll recording call durations: the clock ticks charged to it so far over
    /// its whole call — its earlier polls' included —, exclusive of the traced calls it made:
    /// its call's duration when it returns. Only [`charge`](general::charge) adds to it, and
    /// only to the frame `hist_top` names.
    own: [Cell<u64>; CAPACITY],
    /// The innermost frame kept that a session recording call durations measures ([`NO_FRAME`]
    /// when none is open): what passes is its own time, for those sessions, until a frame
    /// they measure is pushed above it or it pops.
    hist_top: Cell<usize>,
    /// Per frame that such a session measures: `hist_top` before it was pushed, to go back to
    /// when it pops.
    hist_parents: [Cell<usize>; CAPACITY],
    /// For a frame measured for one session: that session's accumulator before the frame was
    /// pushed (the innermost frame below it), to point back to when it pops.
    parents: [Cell<Option<&'static Accumulator>>; CAPACITY],
    /// For a frame measured for one session in call-tree mode: that session's path before the
    /// frame was pushed (the path the frame's path extends), to point back to when it pops.
    parent_paths: [Cell<u32>; CAPACITY],
    /// This thread's scratch table per session slot.
    tables: [Cell<Option<Table>>; MAX_SESSIONS],
    /// The generation of the session in each active slot when the poll began: what the poll
    /// gathered goes to that session only, even if the slot changes hands meanwhile.
    generations: [Cell<u64>; MAX_SESSIONS],
    /// Per session slot, the accumulator of the innermost frame it measures.
    current: [Cell<Option<&'static Accumulator>>; MAX_SESSIONS],
    /// (slot, callsite) pairs touched during this poll.
    touched: [Cell<(u32, u32)>; TOUCHED],
    touched_len: Cell<usize>,
    /// More were touched than `touched` holds: scan the active tables at the end of the poll.
    touched_overflow: Cell<bool>,
}

thread_local! {
    // `const` and without a destructor: no registration, nothing to run at thread exit.
    static STACK: Stack = const {
        Stack {
            depth: SigCell::<AtomicUsize>::new(0),
            active: SigCell::<AtomicU64>::new(0),
            sample: Cell::new(0),
            lean: Cell::new(0),
            lean_slot: Cell::new(0),
            lean_table: Cell::new(&[]),
            lean_current: Cell::new(None),
            quick: Cell::new(0),
            timed: Cell::new(0),
            lean_tree: Cell::new(false),
            lean_path: Cell::new(tree::ROOT),
            tsc: Cell::new(false),
            tree: Cell::new(0),
            events: Cell::new(0),
            extra: Cell::new(0),
            paths: [const { Cell::new(tree::ROOT) }; MAX_SESSIONS],
            timing: Cell::new(false),
            histograms: Cell::new(0),
            memory: Cell::new(None),
            blocks: Cell::new(&NO_BLOCKS),
            function: Cell::new(&NO_CELL),
            restore: Cell::new(&NO_CELL),
            sink: AtomicU32::new(NO_FUNCTION),
            last_ticks: Cell::new(0),
            last_mem: Cell::new([0; 3]),
            ids: [const { SigCell::<AtomicU32>::new(NO_FUNCTION) }; CAPACITY + 1],
            masks: [const { Cell::new(0) }; CAPACITY],
            own: [const { Cell::new(0) }; CAPACITY],
            hist_top: Cell::new(NO_FRAME),
            hist_parents: [const { Cell::new(NO_FRAME) }; CAPACITY],
            parents: [const { Cell::new(None) }; CAPACITY],
            parent_paths: [const { Cell::new(tree::ROOT) }; CAPACITY],
            tables: [const { Cell::new(None) }; MAX_SESSIONS],
            generations: [const { Cell::new(0) }; MAX_SESSIONS],
            current: [const { Cell::new(None) }; MAX_SESSIONS],
            touched: [const { Cell::new((0, 0)) }; TOUCHED],
            touched_len: Cell::new(0),
            touched_overflow: Cell::new(false),
        }
    };
    /// Gives this thread's scratch tables back to the pool when it exits (registered when the
    /// thread takes its first table).
    static RETURN_TABLES: ReturnTables = const { ReturnTables };
    /// Call durations recorded during this poll: (session slot, its generation, callsite id,
    /// clock ticks).
    static SAMPLES: RefCell<Vec<(u32, u64, u32, u64)>> = const { RefCell::new(Vec::new()) };
    /// Frames entered and left during this poll, for the sessions keeping an event log:
    /// (clock ticks, callsite id, entered, sessions).
    static LOG: RefCell<Vec<(u64, u32, bool, u64)>> = const { RefCell::new(Vec::new()) };
    /// Per session slot, the events this poll could not log.
    static LOG_DROPPED: [Cell<u64>; MAX_SESSIONS] = const { [const { Cell::new(0) }; MAX_SESSIONS] };
}

/// What [`Stack::blocks`] points at when no session measures memory: never written.
static NO_BLOCKS: AtomicU64 = AtomicU64::new(0);

/// What [`Stack::function`] and [`Stack::restore`] point at between polls: written by no
/// push or pop, since frames never outlive a poll.
static NO_CELL: AtomicU32 = AtomicU32::new(NO_FUNCTION);

/// Records `id` as the function the process is back in after a pop (see [`Stack::restore`]).
#[inline(always)]
fn record_restore(s: &Stack, id: u32) {
    let cell = s.restore.get();
    // SAFETY: `restore` only ever holds `&NO_CELL` (a static), the `&'static AtomicU32` given
    // to `begin_poll` (a process's account's current-function cell, or a poll mark's sink), or
    // `&s.sink` (`record_pending`), where `s` is this
    // thread's `STACK`: the only `Stack` there is, a thread-local without a destructor, whose
    // fields stay in place until this thread ends, and which no other thread reads. So `cell`
    // points at a live `AtomicU32` here, on this thread. Every measured test's pops write
    // through it (the pending ones in `trace_measure`'s async tests write the sink).
    #[allow(unsafe_code)]
    unsafe { &*cell }.store(id, Ordering::Relaxed);
}

/// A pending pop: records `id` as where the process is suspended, unless a pending pop of this
/// poll already did, and sends the pops that follow in this poll to the sink.
#[inline(always)]
fn record_pending(s: &Stack, id: u32) {
    if s.active.get() & super::paths::wanted() != 0 && !std::ptr::eq(s.restore.get(), &s.sink) {
        capture_suspended(s);
    }
    record_restore(s, id);
    s.restore.set(&s.sink);
}

/// The first pending pop of a poll that a wall sample session measures: keeps the path of the
/// frame just popped (its callers and itself) as where the process suspends.
#[cold]
#[inline(never)]
fn capture_suspended(s: &Stack) {
    let depth = (s.depth.get() + 1).min(CAPACITY);
    super::paths::capture(depth, |k| s.ids[k + 1].get());
}

/// `STACK.with(f)`, with `f` inlined into its caller (see [`super::tls::with_local`]).
#[inline(always)]
fn with_stack<R>(f: impl FnOnce(&Stack) -> R) -> R {
    super::tls::with_local(&STACK, f)
}

struct ReturnTables;

impl Drop for ReturnTables {
    fn drop(&mut self) {
        let _ = STACK.try_with(|s| {
            let tables: Vec<Table> = s.tables.iter().filter_map(Cell::take).collect();
            for t in &tables {
                for acc in t.iter() {
                    acc.take();
                }
            }
            if let Ok(mut pool) = POOL.lock() {
                pool.extend(tables);
            }
        });
    }
}

/// The sessions measuring the process this thread polls (0 outside such a poll).
#[inline(always)]
pub(crate) fn active() -> u64 {
    STACK.with(|s| s.active.get())
}

/// For the CPU sampler's signal handler, on this thread: the sessions measuring the poll the
/// thread is in (0 outside one), and the callsite ids of the traced stack's frames, outermost
/// first, into `out` (the innermost `out.len()` of them when there are more). Returns
/// (sessions, frames written, frames open).
///
/// Async-signal-safe: `STACK` is a `const`-initialised thread-local without a destructor (an
/// address in the thread's static TLS block: no lazy initialisation, no registration, no
/// allocation), and its depth, frames and sessions are [`SigCell`]s: the depth is read first,
/// and every frame below it was written before it (see [`super::sigcell`]). A frame popped
/// while the handler reads is not a problem: the handler runs while its thread is stopped.
pub(crate) fn read_in_signal(out: &mut [u32]) -> (u64, usize, usize) {
    STACK.with(|s| {
        let active = s.active.get();
        let depth = s.depth.get();
        std::sync::atomic::compiler_fence(Ordering::Acquire);
        let kept = depth.min(CAPACITY);
        let n = kept.min(out.len());
        let first = kept - n;
        for (k, slot) in out[..n].iter_mut().enumerate() {
            *slot = s.ids[first + k + 1].get();
        }
        (active, n, depth)
    })
}

/// Runs `f` with measuring off on this thread (restored afterwards, on unwind too).
pub(crate) fn with_measuring_off<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(u64, u64, u64, u64, u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            STACK.with(|s| {
                s.active.set(self.0);
                s.lean.set(self.1);
                s.quick.set(self.2);
                s.sample.set(self.3);
                s.timed.set(self.4);
            });
        }
    }
    let _restore = STACK.with(|s| {
        Restore(
            s.active.replace(0),
            s.lean.replace(0),
            s.quick.replace(0),
            s.sample.replace(0),
            s.timed.replace(0),
        )
    });
    f()
}
