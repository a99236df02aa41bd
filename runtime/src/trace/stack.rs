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
//! accumulator in the stack, and its frames then take [`push_lean`] and [`pop_lean`]: no loop
//! over sessions, no mask per frame. In flat mode, a sync call's entry and return are one
//! out-of-line call each, whose common case (nothing allocated since the last event, time read
//! from the TSC inline) makes no further call; in call-tree mode, the entry also looks its path
//! up ([`push_lean_tree`]) and the pop restores the caller's path. When the lean poll is flat
//! and measures memory only ([`Stack::quick`]), a sync call whose mask is that session's, with
//! nothing allocated since the last event, enters inline at its callsite
//! ([`FrameGuard::enter_quick`]), and its guard hands the frame's depth to the pop. A poll of
//! an async call finds the stack once, in the call's out-of-line poll wrapper
//! ([`poll_in_frame`]), where a lean poll's push and pop are inline.
//!
//! The end of a poll flushes in the same look at the stack: the touched figures go straight
//! into the process's table under its lock ([`super::measure::Flush`]); only the rare steps of
//! a flush that allocate (a new table, session or function) run with allocation charging
//! suppressed.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use super::measure::Acc;
use super::sigcell::SigCell;
use super::tree;
use super::{Callsite, MAX_SESSIONS};
use crate::heap::Counts;

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
    /// session's bit: its frames take [`push_sample`] and [`pop_sample`], and its end flushes
    /// nothing. 0 otherwise (`lean` is then 0).
    sample: Cell<u64>,
    /// When the poll is in the common case — one session measures it, with no event log or
    /// histograms, and time (if measured) from the time-stamp counter — that session's bit:
    /// its frames then take the lean path ([`push_lean`], [`pop_lean`]). 0 otherwise.
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
    quick: Cell<u64>,
    /// The lean poll's session is in call-tree mode: its frames are measured into the
    /// accumulators of their paths ([`push_lean_tree`]), `lean_table` is empty, and ...
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
    /// Per frame, in a poll recording call durations: the clock ticks charged to it so far
    /// over its whole call — its earlier polls' included —, exclusive of the traced calls it
    /// made: its call's duration when it returns. Only [`charge`] adds to it, and only to the
    /// frame `hist_top` names.
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
    super::paths::capture((1..=depth).map(|i| s.ids[i].get()));
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

/// The TSC clock call_time reads, set up (calibrated) by the first session that measures time.
static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();

/// Whether the clock's raw readings are the CPU's time-stamp counter (quanta's usual clock on
/// x86_64), which a lean poll then reads inline ([`rdtsc`]).
static RAW_IS_TSC: OnceLock<bool> = OnceLock::new();

/// Calibrates the clock, once; the first call takes a few milliseconds.
pub(crate) fn clock() -> &'static quanta::Clock {
    let clock = CLOCK.get_or_init(|| crate::heap::suppressed(quanta::Clock::new));
    RAW_IS_TSC.get_or_init(|| crate::heap::suppressed(|| raw_is_tsc(clock)));
    clock
}

/// Whether `clock`'s raw readings are the time-stamp counter: quanta says it counts with its
/// counter source, and in two of eight tries a TSC read falls between two of its raw readings
/// taken around it, at most a few milliseconds apart (a clock in nanoseconds lags the counter,
/// which counts cycles since boot, by the CPU's frequency in GHz).
fn raw_is_tsc(clock: &quanta::Clock) -> bool {
    if !cfg!(target_arch = "x86_64") || !format!("{clock:?}").contains("Counter(") {
        return false;
    }
    let within = (0..8)
        .filter(|_| {
            let before = clock.raw();
            let tsc = rdtsc();
            let after = clock.raw();
            before <= tsc && tsc <= after && after - before < 1 << 24
        })
        .count();
    within >= 2
}

/// The time-stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU and has no precondition: it reads the
    // time-stamp counter into registers and touches no memory (the intrinsic is `unsafe` as
    // all of `core::arch` is). Exercised by `tests::raw_readings_are_the_tsc_when_quanta_says_so`.
    #[allow(unsafe_code)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

/// No time-stamp counter read here: [`raw_is_tsc`] is false.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn rdtsc() -> u64 {
    0
}

/// Whether the clock's raw readings are the time-stamp counter (false until a session
/// measuring time has set the clock up).
pub(crate) fn clock_is_tsc() -> bool {
    RAW_IS_TSC.get() == Some(&true)
}

/// The clock, if a session measuring time ever set it up.
pub(crate) fn clock_if_set() -> Option<&'static quanta::Clock> {
    CLOCK.get()
}

#[inline(always)]
fn ticks() -> u64 {
    CLOCK.get().map_or(0, quanta::Clock::raw)
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
    struct Restore(u64, u64, u64, u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            STACK.with(|s| {
                s.active.set(self.0);
                s.lean.set(self.1);
                s.quick.set(self.2);
                s.sample.set(self.3);
            });
        }
    }
    let _restore = STACK.with(|s| {
        Restore(
            s.active.replace(0),
            s.lean.replace(0),
            s.quick.replace(0),
            s.sample.replace(0),
        )
    });
    f()
}

/// Starts measuring a poll of a process for the sessions in `active` (non-zero); `memory`:
/// what counts the poll's allocations, when one of them measures memory; `function`: where its
/// current function is recorded.
pub(crate) fn begin_poll(
    active: u64,
    trees: u64,
    events: u64,
    timing: bool,
    memory: Option<&'static Counts>,
    histograms: u64,
    function: &'static AtomicU32,
) {
    super::inflight::begin(active);
    if active & super::paths::wanted() != 0 {
        super::paths::begin();
    }
    with_stack(|s| {
        let trees_here = trees & active;
        let events = events & active;
        let histograms = if timing { histograms & active } else { 0 };
        s.active.set(active);
        s.tree.set(trees_here);
        s.events.set(events);
        s.timing.set(timing);
        s.histograms.set(histograms);
        s.extra.set(trees_here | events | histograms);
        s.memory.set(memory);
        s.blocks
            .set(memory.map_or(&NO_BLOCKS, Counts::blocks_counter));
        s.function.set(function);
        s.restore.set(function);
        let tsc = timing && RAW_IS_TSC.get() == Some(&true);
        s.tsc.set(tsc);
        // Frames never outlive a poll; start clean whatever happened before.
        s.depth.set(0);
        s.hist_top.set(NO_FRAME);
        // Lean: one session, no event log or histograms (call-tree mode allowed), and time (if
        // measured) from the time-stamp counter.
        if active.is_power_of_two() && events | histograms == 0 && (tsc || !timing) {
            let bit = active.trailing_zeros();
            let in_tree = trees_here != 0;
            s.lean.set(active);
            s.lean_slot.set(bit);
            s.lean_tree.set(in_tree);
            s.lean_path.set(tree::ROOT);
            s.lean_table.set(if in_tree {
                &[]
            } else {
                match s.tables[bit as usize].get() {
                    Some(t) => t,
                    None => new_table(s, bit as usize),
                }
            });
            s.lean_current.set(None);
            s.quick.set(if in_tree || timing { 0 } else { active });
        } else {
            s.lean.set(0);
            s.quick.set(0);
        }
        let mut m = active;
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            s.current[bit].set(None);
            // Before the caller checks the process's flags again (see measure::begin_poll).
            let generation = super::session::generation_acquire(bit as u32);
            s.generations[bit].set(generation);
            if trees & (1 << bit) != 0 {
                s.paths[bit].set(tree::ROOT);
                tree::begin_poll(bit, generation);
            }
        }
        // No clock read here: what passes before the poll's first frame is charged to no
        // frame (no accumulator is current at the root), so the first event's reading only
        // starts the count. That saves one clock read per measured poll.
        s.last_mem.set(memory.map_or([0; 3], Counts::totals));
    });
}

/// [`begin_poll`] for one session (`active`, a single bit) that measures neither time nor
/// memory, and records no histograms, call tree or event log: a sample session's poll, which
/// is measured only so that its traced stack is kept. Leaves the stack as [`begin_poll`] would
/// (the lean, quick case), without its decisions: about half its instructions, on every poll
/// of every sampled process.
#[inline]
pub(crate) fn begin_plain_poll(active: u64, function: &'static AtomicU32) {
    begin_lean_poll(active, false, None, function);
}

/// [`begin_poll`] for one session (`active`, a single bit) in flat mode, without an event log
/// or histograms, that measures time (`timing`, from the time-stamp counter) or memory
/// (counted by `memory`) or both: the lean case, left as [`begin_poll`] leaves it without its
/// decisions, on every poll of every process such a session measures.
#[inline]
pub(crate) fn begin_lean_poll(
    active: u64,
    timing: bool,
    memory: Option<&'static Counts>,
    function: &'static AtomicU32,
) {
    debug_assert!(active.is_power_of_two());
    debug_assert!(!timing || clock_is_tsc());
    super::inflight::begin(active);
    if active & super::paths::wanted() != 0 {
        super::paths::begin();
    }
    with_stack(|s| {
        let bit = active.trailing_zeros();
        let slot = bit as usize;
        s.active.set(active);
        s.tree.set(0);
        s.events.set(0);
        s.timing.set(timing);
        s.histograms.set(0);
        s.extra.set(0);
        s.memory.set(memory);
        s.blocks
            .set(memory.map_or(&NO_BLOCKS, Counts::blocks_counter));
        s.function.set(function);
        s.restore.set(function);
        s.tsc.set(timing);
        s.depth.set(0);
        s.hist_top.set(NO_FRAME);
        s.lean.set(active);
        s.lean_slot.set(bit);
        s.lean_tree.set(false);
        s.lean_path.set(tree::ROOT);
        s.lean_table.set(match s.tables[slot].get() {
            Some(t) => t,
            None => new_table(s, slot),
        });
        s.lean_current.set(None);
        s.quick.set(if timing { 0 } else { active });
        s.current[slot].set(None);
        // Before the caller checks the process's flags again (see measure::begin_poll).
        s.generations[slot].set(super::session::generation_acquire(bit));
        // No clock read, as in `begin_poll`.
        s.last_mem.set(memory.map_or([0; 3], Counts::totals));
    });
}

/// Starts a sample poll ([`Stack::sample`]) for `active`, one sample session's bit, of
/// `generation`: its frames are kept on the stack for the samplers to read (the CPU sampler's
/// signal handler, and for a wall session the path the process suspends in), its calls are
/// counted in this thread's counters for the session, and `function` records the function
/// the process is in. Nothing is accumulated per function, so nothing is flushed at its end,
/// and no reader waits for it ([`super::inflight`] does not know it): its counts are visible
/// as each call is made, as call_count's are.
#[inline]
pub(crate) fn begin_sample_poll(active: u64, function: &'static AtomicU32, generation: u64) {
    debug_assert!(active.is_power_of_two());
    with_stack(|s| {
        if s.active.get() != 0 {
            // A poll begins inside a call outside processes being measured (a current-thread
            // node run from a traced function): that call's measure ends here.
            super::outside::end();
        }
        if active & super::paths::wanted() != 0 {
            super::paths::begin();
        }
        s.lean.set(0);
        s.quick.set(0);
        s.function.set(function);
        s.restore.set(function);
        // Frames never outlive a poll; start clean whatever happened before.
        s.depth.set(0);
        s.generations[active.trailing_zeros() as usize].set(generation);
        s.sample.set(active);
        s.active.set(active);
    });
}

/// Gives up measuring the poll that just began for the sessions in `stale`: what it gathers
/// for them is dropped at its end (generation 0 is no session's).
#[cold]
pub(crate) fn forget_sessions(stale: u64) {
    STACK.with(|s| {
        let mut m = stale;
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            s.generations[bit].set(0);
        }
    });
}

/// Ends the measured poll: what it gathered goes to `target`'s table.
pub(crate) fn end_poll(target: &super::measure::Target<'_>) {
    let sampled = with_stack(|s| {
        if end_sample_poll(s, target) {
            return true;
        }
        // Only a leaked frame guard (mem::forget) leaves frames open: close them.
        while s.depth.get() > 0 {
            if s.lean.get() != 0 {
                pop_lean(s, false);
            } else {
                pop_checked(s, false);
            }
        }
        s.memory.set(None);
        s.blocks.set(&NO_BLOCKS);
        s.function.set(&NO_CELL);
        s.restore.set(&NO_CELL);
        s.tsc.set(false);
        if s.touched_len.get() > 0 || s.touched_overflow.get() {
            super::measure::flush(target, s.active.get(), |table| drain(s, table));
        }
        // Call durations are sampled only for histograms, events logged only for event logs.
        if s.histograms.get() | s.events.get() != 0 {
            end_poll_extra(s, target);
        }
        // Where a process (not a helper task of it) suspends, for the wall sampler.
        if s.active.get() & super::paths::wanted() != 0
            && let super::measure::Target::Process(process) = target
            && crate::context::current_is_helper() == Some(false)
        {
            super::paths::finish(process.trace_account());
        }
        s.active.set(0);
        s.lean.set(0);
        s.quick.set(0);
        s.tree.set(0);
        s.events.set(0);
        s.extra.set(0);
        false
    });
    if !sampled {
        super::inflight::end();
    }
}

/// Ends the poll if it is a sample poll (and says so): it has nothing to flush; for a wall
/// session, the path the process suspended in is published.
#[inline(always)]
fn end_sample_poll(s: &Stack, target: &super::measure::Target<'_>) -> bool {
    let sample = s.sample.get();
    if sample == 0 {
        return false;
    }
    s.active.set(0);
    s.sample.set(0);
    // Only a leaked frame guard (mem::forget) leaves frames open: gone with the poll.
    s.depth.set(0);
    s.function.set(&NO_CELL);
    s.restore.set(&NO_CELL);
    if sample & super::paths::wanted() != 0
        && let super::measure::Target::Process(process) = target
        && crate::context::current_is_helper() == Some(false)
    {
        super::paths::finish(process.trace_account());
    }
    true
}

/// What [`end_poll`] does for histograms and event logs.
#[cold]
#[inline(never)]
fn end_poll_extra(s: &Stack, target: &super::measure::Target<'_>) {
    if s.histograms.get() != 0 {
        SAMPLES.with(|samples| {
            let mut samples = samples.borrow_mut();
            crate::heap::suppressed(|| super::measure::finish_durations(&mut samples));
        });
    }
    if s.events.get() != 0 {
        LOG.with(|log| {
            let mut log = log.borrow_mut();
            if !log.is_empty() {
                let generations: [u64; MAX_SESSIONS] =
                    std::array::from_fn(|i| s.generations[i].get());
                let dropped: [u64; MAX_SESSIONS] =
                    LOG_DROPPED.with(|d| std::array::from_fn(|i| d[i].replace(0)));
                crate::heap::suppressed(|| {
                    super::measure::flush_events(target, &mut log, &dropped, &generations);
                });
            }
        });
    }
}

/// Moves every figure this poll gathered into the process's table, as (session slot, the
/// session's generation when the poll began, callsite id, figures), and zeroes them.
#[inline(always)]
fn drain(s: &Stack, table: &mut super::measure::Flush<'_>) {
    if s.touched_overflow.replace(false) {
        drain_all(s, table);
    } else {
        for i in 0..s.touched_len.get() {
            let (bit, id) = s.touched[i].get();
            let acc = if s.tree.get() & (1 << bit) != 0 {
                tree::accumulator(bit as usize, id)
            } else {
                s.tables[bit as usize]
                    .get()
                    .and_then(|t| t.get(id as usize))
            };
            if let Some(acc) = acc {
                table.add(bit, s.generations[bit as usize].get(), id, acc);
            }
        }
    }
    s.touched_len.set(0);
}

/// [`drain`] when the poll touched more than it kept track of: scans the active tables.
#[cold]
#[inline(never)]
fn drain_all(s: &Stack, table: &mut super::measure::Flush<'_>) {
    let mut m = s.active.get();
    while m != 0 {
        let bit = m.trailing_zeros();
        m &= m - 1;
        let generation = s.generations[bit as usize].get();
        if s.tree.get() & (1 << bit) != 0 {
            tree::for_each_touched(bit as usize, &mut |path, acc| {
                table.add(bit, generation, path, acc);
            });
        } else if let Some(t) = s.tables[bit as usize].get() {
            for (id, acc) in t.iter().enumerate() {
                if acc.touched.load(Ordering::Relaxed) {
                    table.add(bit, generation, id as u32, acc);
                }
            }
        }
    }
}

/// Adds what passed since the last event to the accumulators of the innermost frames;
/// returns the clock now (0 when no session measures time).
#[inline(always)]
fn charge(s: &Stack) -> u64 {
    let mut dt = 0;
    let mut now = 0;
    if s.timing.get() {
        now = ticks();
        dt = now.saturating_sub(s.last_ticks.replace(now));
        // The innermost frame recording durations: its own time, for its call's duration.
        if let Some(own) = s.own.get(s.hist_top.get()) {
            own.set(own.get().wrapping_add(dt));
        }
    }
    let mut dm = [0u64; 3];
    if let Some(counts) = s.memory.get() {
        // Most calls allocate nothing between two events: one load tells.
        let last = s.last_mem.get();
        if counts.blocks() != last[2] {
            let now = counts.totals();
            s.last_mem.set(now);
            dm = [
                now[0].wrapping_sub(last[0]),
                now[1].wrapping_sub(last[1]),
                now[2].wrapping_sub(last[2]),
            ];
        }
    }
    let mut m = s.active.get();
    while m != 0 {
        let bit = m.trailing_zeros() as usize;
        m &= m - 1;
        if let Some(acc) = s.current[bit].get() {
            if dt != 0 {
                bump(&acc.ticks, dt);
            }
            if dm[2] != 0 {
                bump(&acc.words, dm[0]);
                bump(&acc.bytes, dm[1]);
                bump(&acc.blocks, dm[2]);
            }
        }
    }
    now
}

/// The accumulator of function `id` in this thread's table for session slot `bit`, marked
/// touched.
#[inline(always)]
fn acc_of(s: &Stack, bit: usize, id: u32) -> &'static Accumulator {
    let table = match s.tables[bit].get() {
        Some(t) => t,
        None => new_table(s, bit),
    };
    let acc = &table[id as usize];
    if !acc.touched.load(Ordering::Relaxed) {
        touch(s, acc, bit as u32, id);
    }
    acc
}

#[cold]
fn touch(s: &Stack, acc: &Accumulator, bit: u32, id: u32) {
    acc.touched.store(true, Ordering::Relaxed);
    let n = s.touched_len.get();
    if n < TOUCHED {
        s.touched[n].set((bit, id));
        s.touched_len.set(n + 1);
    } else {
        s.touched_overflow.set(true);
    }
}

#[cold]
fn new_table(s: &Stack, bit: usize) -> Table {
    let table = crate::heap::suppressed(|| {
        let _ = RETURN_TABLES.try_with(|_| ());
        let len = super::callsites().len();
        let pooled = POOL.lock().ok().and_then(|mut pool| pool.pop());
        pooled.unwrap_or_else(|| {
            let fresh: Box<[Accumulator]> = (0..len).map(|_| Accumulator::default()).collect();
            Box::leak(fresh)
        })
    });
    s.tables[bit].set(Some(table));
    table
}

/// Enters a frame of function `id` for the sessions in `mask` (measuring this poll);
/// `call` when this is the call's entry (its first poll) rather than a later poll of it.
/// `prior`: the clock ticks charged to the call in its earlier polls (its own time so far,
/// for call durations).
#[inline(never)]
fn push_in(s: &Stack, id: u32, mask: u64, call: bool, prior: u64) {
    let now = charge(s);
    let depth = s.depth.get();
    let deep = depth >= CAPACITY;
    let trees = if mask & s.extra.get() != 0 {
        push_extra(s, id, mask, now, deep)
    } else {
        0
    };
    if trees != 0 {
        push_tree(s, id, mask, trees, call, depth);
    } else if mask.is_power_of_two() {
        // The common case: one session measures this frame.
        let bit = mask.trailing_zeros() as usize;
        let acc = acc_of(s, bit, id);
        if call {
            bump(&acc.calls, 1);
        }
        if !deep {
            s.parents[depth].set(s.current[bit].replace(Some(acc)));
        }
    } else {
        let mut m = mask;
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            let acc = acc_of(s, bit, id);
            if call {
                bump(&acc.calls, 1);
            }
            if !deep {
                s.current[bit].set(Some(acc));
            }
        }
    }
    // Its function before the depth that shows it to the signal handler (see `sigcell`).
    if !deep {
        s.ids[depth + 1].set(id);
    }
    s.depth.set(depth + 1);
    if deep {
        return;
    }
    s.masks[depth].set(mask);
    if mask & s.histograms.get() != 0 {
        // Its own time so far; what passes from now on is its own until a frame it calls
        // that these sessions measure is pushed.
        s.own[depth].set(prior);
        s.hist_parents[depth].set(s.hist_top.replace(depth));
    }
    s.function.get().store(id, Ordering::Relaxed);
}

/// What a push needs beyond the common case: logs the frame for the sessions keeping an event
/// log; returns the sessions in call-tree mode among `mask`.
#[inline(always)]
fn push_extra(s: &Stack, id: u32, mask: u64, now: u64, deep: bool) -> u64 {
    let logged = mask & s.events.get();
    if logged != 0 && !deep {
        log_event(logged, id, true, now);
    }
    mask & s.tree.get()
}

/// What a pop needs beyond the common case: logs the frame's end for the sessions keeping an
/// event log, and keeps the call's duration for those recording histograms (unless it is only
/// suspended); returns the sessions in call-tree mode among `mask`.
#[inline(always)]
fn pop_extra(s: &Stack, id: u32, mask: u64, now: u64, polled: u64, pending: bool) -> u64 {
    let logged = mask & s.events.get();
    if logged != 0 {
        log_event(logged, id, false, now);
    }
    let record = s.histograms.get() & mask;
    if record != 0 && !pending {
        record_duration(s, record, id, polled);
    }
    mask & s.tree.get()
}

/// Enters the path extending call-tree session `bit`'s current path with a call of `id`:
/// returns the path it extends and the accumulator of the new one, marked touched.
#[inline(always)]
fn enter_path(s: &Stack, bit: usize, id: u32, deep: bool) -> (u32, &'static Accumulator) {
    let parent = s.paths[bit].get();
    let (path, acc) = tree::enter(bit, parent, id);
    if !acc.touched.load(Ordering::Relaxed) {
        touch(s, acc, bit as u32, path);
    }
    if !deep {
        s.paths[bit].set(path);
    }
    (parent, acc)
}

/// [`push_in`] for a frame that a session in call-tree mode measures: each such session
/// measures it into the accumulator of its path.
#[cold]
fn push_tree(s: &Stack, id: u32, mask: u64, trees: u64, call: bool, depth: usize) {
    let deep = depth >= CAPACITY;
    if mask == trees && mask.is_power_of_two() {
        // One session measures this frame: its pop restores the path and the accumulator
        // that were current from the frame.
        let bit = mask.trailing_zeros() as usize;
        let (parent, acc) = enter_path(s, bit, id, deep);
        if call {
            bump(&acc.calls, 1);
        }
        if !deep {
            s.parent_paths[depth].set(parent);
            s.parents[depth].set(s.current[bit].replace(Some(acc)));
        }
        return;
    }
    let mut m = mask;
    while m != 0 {
        let bit = m.trailing_zeros() as usize;
        m &= m - 1;
        let acc = if trees & (1 << bit) != 0 {
            enter_path(s, bit, id, deep).1
        } else {
            acc_of(s, bit, id)
        };
        if call {
            bump(&acc.calls, 1);
        }
        if !deep {
            s.current[bit].set(Some(acc));
        }
    }
}

/// Leaves the top frame; `pending` when it is a future's poll that returned `Pending`.
/// Returns the clock ticks charged to the call so far, its own time (in a poll recording its
/// duration; else 0), or `None` when the frame was not kept (deeper than the stack) or the
/// poll is lean (it records no durations).
#[inline(never)]
fn pop_any(s: &Stack, pending: bool) -> Option<u64> {
    if s.lean.get() != 0 {
        pop_lean(s, pending);
        None
    } else if s.sample.get() != 0 {
        pop_sample(s, pending);
        None
    } else {
        pop_checked(s, pending)
    }
}

#[inline(always)]
fn pop_checked(s: &Stack, pending: bool) -> Option<u64> {
    let depth = s.depth.get();
    if depth > CAPACITY {
        s.depth.set(depth - 1);
        return None;
    }
    if depth == 0 {
        return None; // its poll has ended (only after a leaked guard)
    }
    Some(pop_in(s, pending))
}

#[inline(always)]
fn pop_in(s: &Stack, pending: bool) -> u64 {
    let now = charge(s);
    let depth = s.depth.get() - 1;
    s.depth.set(depth);
    let id = s.ids[depth + 1].get();
    let mask = s.masks[depth].get();
    // Its own time over the call so far (`charge` has just added the last of it).
    let polled = if mask & s.histograms.get() != 0 {
        s.hist_top.set(s.hist_parents[depth].get());
        s.own[depth].get()
    } else {
        0
    };
    let trees = if mask & s.extra.get() != 0 {
        pop_extra(s, id, mask, now, polled, pending)
    } else {
        0
    };
    if trees == 0 && mask.is_power_of_two() {
        // Back to the accumulator that was current when the frame was pushed.
        let bit = mask.trailing_zeros() as usize;
        s.current[bit].set(s.parents[depth].get());
    } else if mask.is_power_of_two() {
        // One call-tree session: back to the path this one extends and its accumulator (none
        // at the root), as they were when the frame was pushed.
        if trees & s.active.get() != 0 {
            let bit = mask.trailing_zeros() as usize;
            s.paths[bit].set(s.parent_paths[depth].get());
            s.current[bit].set(s.parents[depth].get());
        }
    } else {
        let mut m = mask & s.active.get();
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            if trees & (1 << bit) != 0 {
                // Back to the path this one extends.
                let (parent, acc) = tree::leave(bit, s.paths[bit].get());
                s.paths[bit].set(parent);
                s.current[bit].set(if parent == tree::ROOT { None } else { acc });
                continue;
            }
            // Back to the innermost frame below that this session measures.
            let below = (0..depth)
                .rev()
                .find(|&i| s.masks[i].get() & (1 << bit) != 0)
                .and_then(|i| s.tables[bit].get().map(|t| &t[s.ids[i + 1].get() as usize]));
            s.current[bit].set(below);
        }
    }
    if pending {
        record_pending(s, id);
    } else {
        record_restore(s, s.ids[depth].get());
    }
    polled
}

/// Keeps a finished call's duration for the sessions in `mask`, until the end of the poll.
#[cold]
fn record_duration(s: &Stack, mut mask: u64, id: u32, ticks: u64) {
    SAMPLES.with(|samples| {
        let mut samples = samples.borrow_mut();
        while mask != 0 {
            let bit = mask.trailing_zeros();
            mask &= mask - 1;
            if samples.len() == samples.capacity() {
                if samples.len() >= MAX_SAMPLES {
                    // A long poll: hand them over now rather than grow without bound.
                    crate::heap::suppressed(|| super::measure::record_durations(&mut samples));
                } else {
                    crate::heap::suppressed(|| samples.reserve(64));
                }
            }
            samples.push((bit, s.generations[bit as usize].get(), id, ticks));
        }
    });
}

/// Logs a frame of `id` entered or left, at `now` (0: read the clock), for the sessions in
/// `mask`.
#[cold]
fn log_event(mask: u64, id: u32, entered: bool, now: u64) {
    let now = if now == 0 { ticks() } else { now };
    LOG.with(|log| {
        let mut log = log.borrow_mut();
        if log.len() >= super::measure::EVENT_LOG_CAPACITY {
            // More than a process keeps in all: the rest of this poll is dropped (and counted
            // when the poll ends).
            LOG_DROPPED.with(|d| {
                let mut m = mask;
                while m != 0 {
                    let bit = m.trailing_zeros() as usize;
                    m &= m - 1;
                    d[bit].set(d[bit].get() + 1);
                }
            });
            return;
        }
        if log.len() == log.capacity() {
            crate::heap::suppressed(|| log.reserve(64));
        }
        log.push((now, id, entered, mask));
    });
}

/// Call durations kept per thread before they go to their histograms mid-poll.
const MAX_SAMPLES: usize = 4096;

/// Adds what passed since the last event to the innermost frame's accumulator, in a lean
/// poll.
#[inline(always)]
fn charge_lean(s: &Stack) {
    if s.tsc.get() {
        let now = rdtsc();
        let dt = now.saturating_sub(s.last_ticks.replace(now));
        if let Some(acc) = s.lean_current.get() {
            bump(&acc.ticks, dt);
        }
    }
    if let Some(counts) = s.memory.get() {
        // Most calls allocate nothing between two events: one load tells.
        if counts.blocks() != s.last_mem.get()[2] {
            charge_memory_lean(s, counts);
        }
    }
}

#[cold]
#[inline(never)]
fn charge_memory_lean(s: &Stack, counts: &Counts) {
    let last = s.last_mem.get();
    let now = counts.totals();
    s.last_mem.set(now);
    if let Some(acc) = s.lean_current.get() {
        bump(&acc.words, now[0].wrapping_sub(last[0]));
        bump(&acc.bytes, now[1].wrapping_sub(last[1]));
        bump(&acc.blocks, now[2].wrapping_sub(last[2]));
    }
}

/// [`push_in`] in a lean poll: enters a frame of function `id` for the one session measuring
/// it; `call` when this is the call's entry. A lean poll records no call durations (no
/// session measuring it asks for them), so it keeps no frame's own time.
#[inline(always)]
fn push_lean(s: &Stack, id: u32, call: bool) {
    charge_lean(s);
    let depth = s.depth.get();
    let acc = if s.lean_tree.get() {
        push_lean_tree(s, id, depth)
    } else {
        let acc = &s.lean_table.get()[id as usize];
        if !acc.touched.load(Ordering::Relaxed) {
            touch(s, acc, s.lean_slot.get(), id);
        }
        acc
    };
    if call {
        bump(&acc.calls, 1);
    }
    if depth >= CAPACITY {
        s.depth.set(depth + 1);
        return; // counted; its time and memory go to the deepest frame kept
    }
    s.parents[depth].set(s.lean_current.replace(Some(acc)));
    // Its function before the depth that shows it to the signal handler (see `sigcell`).
    s.ids[depth + 1].set(id);
    s.depth.set(depth + 1);
    s.function.get().store(id, Ordering::Relaxed);
}

/// [`push_lean`] in call-tree mode, at `depth`: enters the path extending the innermost
/// frame's with a call of `id` (its path, unless the frame is deeper than the stack) and
/// returns its accumulator, marked touched; the pop restores the path from `parent_paths`.
#[inline(never)]
fn push_lean_tree(s: &Stack, id: u32, depth: usize) -> &'static Accumulator {
    let bit = s.lean_slot.get();
    let parent = s.lean_path.get();
    let (path, acc) = tree::enter(bit as usize, parent, id);
    if !acc.touched.load(Ordering::Relaxed) {
        touch(s, acc, bit, path);
    }
    if depth < CAPACITY {
        s.parent_paths[depth].set(parent);
        s.lean_path.set(path);
    }
    acc
}

/// [`pop_checked`] in a lean poll: leaves the top frame (`pending` when it is a future's poll
/// that returned `Pending`).
#[inline(always)]
fn pop_lean(s: &Stack, pending: bool) {
    let depth = s.depth.get();
    if depth.wrapping_sub(1) >= CAPACITY {
        // Deeper than the stack (nothing kept), or its poll has ended (a leaked guard).
        if depth > 0 {
            s.depth.set(depth - 1);
        }
        return;
    }
    charge_lean(s);
    let depth = depth - 1;
    s.depth.set(depth);
    s.lean_current.set(s.parents[depth].get());
    if s.lean_tree.get() {
        s.lean_path.set(s.parent_paths[depth].get());
    }
    if pending {
        record_pending(s, s.ids[depth + 1].get());
    } else {
        record_restore(s, s.ids[depth].get());
    }
}

/// Enters a frame of function `id` in a sample poll ([`Stack::sample`]); `call` when this is
/// the call's entry, which is counted for the poll's session in this thread's counters. The
/// frame's function is written before the depth that makes it visible to the signal handler
/// (see [`super::sigcell`]).
#[inline(always)]
fn push_sample(s: &Stack, id: u32, call: bool) {
    if call {
        let bit = s.sample.get().trailing_zeros();
        super::session::count_sampled(id, bit, s.generations[bit as usize].get());
    }
    let depth = s.depth.get();
    if depth < CAPACITY {
        s.ids[depth + 1].set(id);
        s.function.get().store(id, Ordering::Relaxed);
    }
    // Deeper than the stack: counted, not kept.
    s.depth.set(depth + 1);
}

/// Leaves the top frame in a sample poll (`pending` when it is a future's poll that returned
/// `Pending`), recording the function the process is back in, or where it suspends.
#[inline(always)]
fn pop_sample(s: &Stack, pending: bool) {
    let depth = s.depth.get();
    if depth == 0 {
        return; // its poll has ended (only after a leaked guard)
    }
    let depth = depth - 1;
    s.depth.set(depth);
    if depth >= CAPACITY {
        return; // deeper than the stack: nothing kept
    }
    if pending {
        record_pending(s, s.ids[depth + 1].get());
    } else {
        record_restore(s, s.ids[depth].get());
    }
}

/// [`charge_lean`] in its common case, inline, and true: time read from the time-stamp counter
/// or not measured, and no memory allocated since the last event (or memory not measured).
/// False, having charged nothing, otherwise.
#[inline(always)]
fn charge_quick(s: &Stack) -> bool {
    if s.blocks.get().load(Ordering::Relaxed) != s.last_mem.get()[2] {
        return false;
    }
    if s.tsc.get() {
        let now = rdtsc();
        let dt = now.saturating_sub(s.last_ticks.replace(now));
        if let Some(acc) = s.lean_current.get() {
            bump(&acc.ticks, dt);
        }
    }
    true
}

/// Pops a synchronous call's frame pushed by [`push_lean`]. Finds the stack itself: the
/// caller keeps nothing live across the traced body for it.
#[inline(never)]
fn pop_sync_lean() {
    with_stack(pop_lean_sync);
}

/// Pops a synchronous call's frame pushed by [`push_in`] (`pushed` is [`PUSHED`]), by
/// [`enter_outside`] ([`PUSHED_OUTSIDE`]), by [`push_sample`] ([`PUSHED_SAMPLE`]) or by
/// [`FrameGuard::enter_quick`] (`QUICK | depth`); finds the stack itself.
#[inline(never)]
fn pop_sync_any(pushed: u8) {
    if pushed == PUSHED_SAMPLE {
        return with_stack(|s| pop_sample(s, false));
    }
    if pushed & QUICK == 0 {
        std::hint::cold_path();
        if pushed == PUSHED_OUTSIDE {
            return pop_outside();
        }
        return pop_sync();
    }
    // The mask keeps the index within the stack's arrays (it is below `CAPACITY` already), so
    // that no bounds check is left.
    pop_quick(usize::from(pushed) & (CAPACITY - 1));
}

/// Pops a synchronous call's frame pushed by [`FrameGuard::enter_quick`] at `depth`: in the
/// common case (it is the top frame, and nothing was allocated since the last event: the
/// poll measures nothing else) with no load of the depth, which the guard carries; any other
/// case takes [`pop_sync_lean`], which pops the top frame.
#[inline(always)]
fn pop_quick(depth: usize) {
    with_stack(|s| {
        if s.depth.get() == depth + 1
            && s.blocks.get().load(Ordering::Relaxed) == s.last_mem.get()[2]
        {
            s.depth.set(depth);
            s.lean_current.set(s.parents[depth].get());
            record_restore(s, s.ids[depth].get());
            return;
        }
        std::hint::cold_path();
        pop_sync_lean();
    });
}

/// Pops a synchronous call's frame pushed by [`push_in`]; finds the stack itself.
#[inline(never)]
fn pop_sync() {
    with_stack(|s| pop_any(s, false));
}

/// Pops a synchronous call's frame pushed by [`push_lean`]. Its common case, a kept frame
/// with nothing to charge, takes no call (nor saves a register).
#[inline(always)]
fn pop_lean_sync(s: &Stack) {
    let depth = s.depth.get();
    if depth.wrapping_sub(1) >= CAPACITY || !charge_quick(s) {
        return pop_lean_sync_full(s);
    }
    let depth = depth - 1;
    s.depth.set(depth);
    s.lean_current.set(s.parents[depth].get());
    record_restore(s, s.ids[depth].get());
}

#[inline(never)]
fn pop_lean_sync_full(s: &Stack) {
    pop_lean(s, false);
}

/// A call of `callsite` that some session wants (`mask`) and that the inlined count-only
/// case did not take: counts it for the sessions that count, and pushes a frame for those
/// measuring this poll, if any. One call out of line for the whole entry; its common case in
/// a lean poll with nothing to charge takes no further call (nor saves a register).
#[inline(never)]
fn enter_call_in(s: &Stack, callsite: &'static Callsite, mask: u64) -> FrameGuard {
    // Every session of `mask` measures and none counts (one load), and the poll is lean for
    // one of them.
    if mask & s.lean.get() == 0 || mask & super::measure::not_lean() != 0 {
        // Or a sample poll's session wants it, and no session counts it apart.
        if mask & s.sample.get() != 0 && mask & super::measure::not_lean() == 0 {
            push_sample(s, callsite.id() as u32, true);
            return FrameGuard {
                pushed: PUSHED_SAMPLE,
            };
        }
        return enter_call_full(s, callsite, mask);
    }
    let depth = s.depth.get();
    let table = s.lean_table.get();
    let id = callsite.raw_id();
    if id >= table.len() || depth >= CAPACITY || !table[id].touched.load(Ordering::Relaxed) {
        return enter_call_full(s, callsite, mask);
    }
    let acc = &table[id];
    if !charge_quick(s) {
        return enter_call_full(s, callsite, mask);
    }
    // The rest of `push_lean`.
    bump(&acc.calls, 1);
    s.parents[depth].set(s.lean_current.replace(Some(acc)));
    s.ids[depth + 1].set(id as u32);
    s.depth.set(depth + 1);
    s.function.get().store(id as u32, Ordering::Relaxed);
    FrameGuard {
        pushed: PUSHED_LEAN,
    }
}

/// [`enter_call_in`] in every case.
#[inline(never)]
fn enter_call_full(s: &Stack, callsite: &'static Callsite, mask: u64) -> FrameGuard {
    if mask & super::measure::counting() != 0 {
        super::record_call(callsite, mask);
    }
    let mask = mask & super::measure::measuring();
    if mask == 0 {
        return FrameGuard::NONE;
    }
    if s.active.get() == 0 {
        // No measured poll here: a process no session measures (one thread-local load tells),
        // or perhaps a call outside any process.
        if crate::context::current_node_id() & crate::context::OUTSIDE == 0 {
            return FrameGuard::NONE;
        }
        return enter_outside(callsite, mask);
    }
    push_call(s, callsite, mask)
}

/// Pushes the frame of a synchronous call of `callsite` for the sessions of `mask` that
/// measure this poll, if any.
#[inline(always)]
fn push_call(s: &Stack, callsite: &'static Callsite, mask: u64) -> FrameGuard {
    let id = callsite.id() as u32;
    if mask & s.lean.get() != 0 {
        push_lean(s, id, true);
        // A call-tree frame is popped by `pop_lean`, which restores its path too.
        let pushed = if s.lean_tree.get() {
            PUSHED
        } else {
            PUSHED_LEAN
        };
        return FrameGuard { pushed };
    }
    let mask = mask & s.active.get();
    if mask != 0 {
        if s.sample.get() != 0 {
            push_sample(s, id, true);
            return FrameGuard {
                pushed: PUSHED_SAMPLE,
            };
        }
        push_in(s, id, mask, true, 0);
        return FrameGuard { pushed: PUSHED };
    }
    FrameGuard::NONE
}

/// Enters a synchronous call of `callsite`, wanted by the measuring sessions of `mask`, made
/// where no poll is measured: outside any process, it is measured as a call outside processes
/// ([`super::outside`]) until it returns, if a session of `mask` measures those here.
#[cold]
#[inline(never)]
fn enter_outside(callsite: &'static Callsite, mask: u64) -> FrameGuard {
    let sessions = super::outside::begin(mask);
    if sessions == 0 {
        return FrameGuard::NONE;
    }
    let mut guard = with_stack(|s| push_call(s, callsite, sessions));
    if !guard.pushed() {
        super::outside::end();
        return guard;
    }
    // Popped as the outermost frame, which ends the measure.
    guard.pushed = PUSHED_OUTSIDE;
    guard
}

/// Leaves the outermost frame of a call outside processes, and ends its measure (unless a
/// poll that began inside it ended it already).
#[cold]
#[inline(never)]
fn pop_outside() {
    if super::outside::active() {
        with_stack(|s| pop_any(s, false));
        super::outside::end();
    }
}

/// [`poll_in_frame`] where no poll is measured: outside any process, the poll is measured as a
/// call outside processes ([`super::outside`]) for the sessions of `mask` that measure those
/// here.
#[cold]
#[inline(never)]
fn poll_outside<R>(
    id: u32,
    mask: u64,
    call: bool,
    polled: &mut u64,
    poll: impl FnOnce() -> std::task::Poll<R>,
) -> std::task::Poll<R> {
    let sessions = super::outside::begin(mask);
    if sessions == 0 {
        return poll();
    }
    /// Ends the measure when dropped, on unwind too.
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            super::outside::end();
        }
    }
    let _end = End;
    with_stack(|s| {
        if s.lean.get() != 0 {
            push_lean(s, id, call);
        } else {
            push_in(s, id, sessions, call, *polled);
        }
    });
    let out = poll();
    // Unless a poll that began inside it ended the measure.
    if super::outside::active()
        && let Some(so_far) = with_stack(|s| pop_any(s, out.is_pending()))
    {
        *polled = so_far;
    }
    out
}

/// No frame pushed.
const NOT_PUSHED: u8 = 0;
/// A frame pushed by [`push_in`].
const PUSHED: u8 = 1;
/// A synchronous call's frame pushed by [`push_lean`].
const PUSHED_LEAN: u8 = 2;
/// The outermost frame of a call outside processes ([`enter_outside`]).
const PUSHED_OUTSIDE: u8 = 3;
/// A synchronous call's frame pushed by [`push_sample`].
const PUSHED_SAMPLE: u8 = 4;
/// `QUICK | depth`: a synchronous call's frame pushed by [`FrameGuard::enter_quick`], kept at
/// `depth` (below [`CAPACITY`], so that it fits the low bits).
const QUICK: u8 = 0x80;
const _: () = assert!(CAPACITY == QUICK as usize);

/// A frame on the traced stack, popped when dropped (on unwind too) unless its pusher pops
/// it itself ([`poll_in_frame`]).
pub(crate) struct FrameGuard {
    pushed: u8,
}

impl FrameGuard {
    /// No frame.
    pub(crate) const NONE: FrameGuard = FrameGuard { pushed: NOT_PUSHED };

    /// Enters a synchronous call of `callsite`, which the sessions of `mask` want: counts it
    /// for those that count, and pushes a frame for those that measure this poll, if any.
    #[inline(always)]
    pub(crate) fn enter_call(callsite: &'static Callsite, mask: u64) -> FrameGuard {
        with_stack(|s| enter_call_in(s, callsite, mask))
    }

    /// A synchronous call of `callsite` in the commonest measured case, inline where it is
    /// called: the sessions of `mask` are exactly the one measuring this lean poll, in flat
    /// mode and for memory only (see [`Stack::quick`]), none of them counts, the call is kept
    /// on the stack, its function's accumulator is already touched in this poll, and nothing
    /// was allocated since the last event. Pushes its frame as [`push_lean`] would and
    /// returns its guard, which hands the frame's depth to the pop; `None`, having done
    /// nothing, in every other case.
    #[inline(always)]
    pub(crate) fn enter_quick(callsite: &Callsite, mask: u64) -> Option<FrameGuard> {
        with_stack(|s| {
            // Not this poll's quick session, or something allocated since the last event
            // (common where the call does real work): such a call gives up here at the least
            // cost, before the stack's other fields are read.
            if mask != s.quick.get()
                || s.blocks.get().load(Ordering::Relaxed) != s.last_mem.get()[2]
                || mask & super::measure::not_lean() != 0
            {
                return None;
            }
            let depth = s.depth.get();
            let table = s.lean_table.get();
            let id = callsite.raw_id();
            if depth >= CAPACITY || id >= table.len() {
                return None;
            }
            let acc = &table[id];
            if !acc.touched.load(Ordering::Relaxed) {
                return None;
            }
            bump(&acc.calls, 1);
            s.parents[depth].set(s.lean_current.replace(Some(acc)));
            s.ids[depth + 1].set(id as u32);
            s.depth.set(depth + 1);
            s.function.get().store(id as u32, Ordering::Relaxed);
            Some(FrameGuard {
                pushed: QUICK | depth as u8,
            })
        })
    }

    /// Whether a frame was pushed.
    #[inline(always)]
    pub(crate) fn pushed(&self) -> bool {
        self.pushed != NOT_PUSHED
    }
}

/// Runs `poll`, one poll of an async call of function `id`, in the call's frame: pushed for
/// the sessions of `mask` that measure this poll, if any (`call` at the call's first poll), and
/// popped when `poll` returns or unwinds. `polled`: the clock ticks charged to the call in
/// its earlier polls, exclusive of the traced calls it made (its own time, for its duration),
/// brought up to date when a poll recording durations pops the frame.
///
/// The thread's stack is found once for the push and the pop; a lean poll's push and pop are
/// inline (their uncommon cases out of line).
#[inline(always)]
pub(crate) fn poll_in_frame<R>(
    id: u32,
    mask: u64,
    call: bool,
    polled: &mut u64,
    poll: impl FnOnce() -> std::task::Poll<R>,
) -> std::task::Poll<R> {
    with_stack(|s| {
        let mut guard = FrameGuard::NONE;
        if mask & s.lean.get() != 0 {
            push_lean(s, id, call);
            guard.pushed = PUSHED;
        } else if mask & s.active.get() != 0 {
            if s.sample.get() != 0 {
                push_sample(s, id, call);
            } else {
                push_in(s, id, mask & s.active.get(), call, *polled);
            }
            guard.pushed = PUSHED;
        } else if s.active.get() == 0 {
            // No measured poll here: perhaps a call outside any process.
            return poll_outside(id, mask, call, polled, poll);
        }
        // Popped by `guard` if this unwinds.
        let out = poll();
        if guard.pushed != NOT_PUSHED {
            guard.pushed = NOT_PUSHED;
            let pending = out.is_pending();
            let so_far = if s.lean.get() != 0 {
                pop_lean(s, pending);
                None
            } else if s.sample.get() != 0 {
                pop_sample(s, pending);
                None
            } else {
                pop_any(s, pending)
            };
            if let Some(so_far) = so_far {
                *polled = so_far;
            }
        }
        out
    })
}

impl Drop for FrameGuard {
    #[inline(always)]
    fn drop(&mut self) {
        // This shape (one comparison with a constant, then the rest out of line) lets the
        // compiler keep a small traced body's inlined cases free of any test here.
        if self.pushed == PUSHED_LEAN {
            pop_sync_lean();
        } else if self.pushed != NOT_PUSHED {
            pop_sync_any(self.pushed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field a poll's frames and its end read, as begin left them for session `bit`.
    fn poll_state(bit: usize) -> String {
        with_stack(|s| {
            format!(
                "active {} lean {} slot {} table {:p}/{} current {} quick {} lean_tree {} \
                 path {} tsc {} tree {} events {} extra {} timing {} histograms {} memory {} \
                 blocks {:p} function {:p} restore {:p} last_mem {:?} depth {} hist_top {} \
                 current[bit] {} generation {}",
                s.active.get(),
                s.lean.get(),
                s.lean_slot.get(),
                s.lean_table.get().as_ptr(),
                s.lean_table.get().len(),
                s.lean_current.get().is_some(),
                s.quick.get(),
                s.lean_tree.get(),
                s.lean_path.get(),
                s.tsc.get(),
                s.tree.get(),
                s.events.get(),
                s.extra.get(),
                s.timing.get(),
                s.histograms.get(),
                s.memory.get().is_some(),
                s.blocks.get(),
                s.function.get(),
                s.restore.get(),
                s.last_mem.get(),
                s.depth.get(),
                s.hist_top.get(),
                s.current[bit].get().is_some(),
                s.generations[bit].get(),
            )
        })
    }

    /// Leaves every field [`poll_state`] reads as no begin would.
    fn dirty(bit: usize) {
        with_stack(|s| {
            s.active.set(!0);
            s.lean.set(0);
            s.lean_slot.set(63);
            s.lean_table.set(&[]);
            s.lean_current
                .set(s.tables.iter().find_map(Cell::get).and_then(|t| t.first()));
            s.quick.set(0);
            s.lean_tree.set(true);
            s.lean_path.set(77);
            s.tsc.set(true);
            s.tree.set(!0);
            s.events.set(!0);
            s.extra.set(!0);
            s.timing.set(true);
            s.histograms.set(!0);
            s.blocks.set(&NO_BLOCKS);
            s.function.set(&NO_CELL);
            s.restore.set(&NO_CELL);
            s.last_mem.set([1, 2, 3]);
            s.hist_top.set(5);
            s.generations[bit].set(12_345);
        });
    }

    #[test]
    fn a_plain_poll_begins_as_the_general_begin_leaves_it() {
        static FUNCTION: AtomicU32 = AtomicU32::new(0);
        let bit = 5;
        let active = 1u64 << bit;
        // The general begin, for one session that measures neither time nor memory and keeps
        // no tree, histograms or events: the case `begin_plain_poll` stands in for.
        dirty(bit);
        begin_poll(active, 0, 0, false, None, 0, &FUNCTION);
        let general = poll_state(bit);
        dirty(bit);
        assert_ne!(poll_state(bit), general, "dirty() changes what is compared");
        begin_plain_poll(active, &FUNCTION);
        assert_eq!(poll_state(bit), general);
        with_stack(|s| {
            s.active.set(0);
            s.lean.set(0);
            s.quick.set(0);
        });
        super::super::inflight::end();
    }

    /// The lean begin leaves every field as the general one does, for each combination of
    /// what a lean session measures: time alone, memory alone, both.
    #[test]
    fn a_lean_poll_begins_as_the_general_begin_leaves_it() {
        static FUNCTION: AtomicU32 = AtomicU32::new(0);
        static COUNTS: Counts = Counts::new();
        clock();
        let bit = 6;
        let active = 1u64 << bit;
        let cases: &[(bool, Option<&'static Counts>)] = if clock_is_tsc() {
            &[(true, None), (false, Some(&COUNTS)), (true, Some(&COUNTS))]
        } else {
            &[(false, Some(&COUNTS))]
        };
        for &(timing, memory) in cases {
            dirty(bit);
            begin_poll(active, 0, 0, timing, memory, 0, &FUNCTION);
            let general = poll_state(bit);
            dirty(bit);
            assert_ne!(poll_state(bit), general, "dirty() changes what is compared");
            begin_lean_poll(active, timing, memory, &FUNCTION);
            assert_eq!(
                poll_state(bit),
                general,
                "timing {timing}, memory {}",
                memory.is_some()
            );
            with_stack(|s| {
                s.active.set(0);
                s.lean.set(0);
                s.quick.set(0);
                s.memory.set(None);
                s.blocks.set(&NO_BLOCKS);
            });
            super::super::inflight::end();
        }
    }

    #[test]
    fn raw_readings_are_the_tsc_when_quanta_says_so() {
        let clock = clock();
        let tsc = rdtsc();
        if cfg!(target_arch = "x86_64") {
            assert!(tsc > 0);
        }
        if RAW_IS_TSC.get() == Some(&true) {
            let before = clock.raw();
            let tsc = rdtsc();
            let after = clock.raw();
            assert!(before <= tsc && tsc <= after);
        }
    }
}
