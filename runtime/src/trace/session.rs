//! Trace sessions: who wants which functions, and their call counts.
//!
//! A [`TraceSession`] belongs to one node and has its own patterns and counters, as OTP's trace
//! sessions do: pausing, restarting or dropping one never touches another, and a session counts
//! only the calls made by processes of its own node. At most [`MAX_SESSIONS`] exist at once in
//! an OS process: each owns one bit of every callsite's session mask.
//!
//! # Counting calls
//!
//! A call of a function some session wants takes the cold path of
//! [`enter`](super::enter): for each session in the mask that belongs to the calling process's
//! node, it adds one to that session's counter for the function in the calling thread's own
//! shard (a plain load and store: no other thread writes it). Each thread caches where it
//! counts per slot, valid while the thread's node is the one it was filled for; a dropped
//! session closes its shards (a word at the front of each, which the cache's counting checks):
//! a call that only count-only sessions want is then counted inline at its callsite, with no
//! global load. [`TraceSession::call_counts`]
//! sums the shards of every thread that ever counted for the session, live or exited, without
//! stopping anything. `pause` and `restart` never write other threads' shards: they record a
//! snapshot and a baseline that reads are taken against, so that once `pause` returns, reads
//! are stable.
//!
//! Calls made outside any process ([`super::outside`]) are counted apart, in a second shard
//! a thread makes when it first counts one ([`TraceSession::outside_call_counts`]): the
//! thread's node is then `OUTSIDE` with the node it belongs to, so its cache counts there.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwapOption;

use super::flags::FlaggedProcess;
use super::measure::{
    CallPercentiles, CallTreeMeasurement, ProcTraceRef, ProcessEvents, ProcessMeasurement,
    TraceTypes,
};
use super::{Callsite, TracePattern, callsites};
use super::{FlagError, FlagOutcome, ProcessSpec};
use crate::Pid;
use crate::context::current_node_id;
use crate::name::Name;

/// What a trace session needs of its node: the process layer's node implements it, and the
/// session keeps it (tracing never names the node or its table).
pub(crate) trait SessionNode: Send + Sync {
    /// The node's id.
    fn id(&self) -> u32;
    /// The sessions open on the node, as bits: read by each poll of its processes.
    fn trace_sessions(&self) -> &AtomicU64;
    /// The pid registered under `name` on the node, if any.
    fn whereis(&self, name: &Name) -> Option<Pid>;
    /// Process `pid` of the node, if it is alive.
    fn process(&self, pid: Pid) -> Option<Arc<dyn FlaggedProcess>>;
    /// Every live process of the node.
    fn processes(&self) -> Vec<Arc<dyn FlaggedProcess>>;
}

/// How many trace sessions may exist at once in one OS process.
pub const MAX_SESSIONS: usize = 64;

static SLOTS: [ArcSwapOption<SessionState>; MAX_SESSIONS] =
    [const { ArcSwapOption::const_empty() }; MAX_SESSIONS];
/// The generation of the session in each slot, 0 when the slot is free: a thread's cached
/// shard is valid while this matches it.
static GENERATIONS: [AtomicU64; MAX_SESSIONS] = [const { AtomicU64::new(0) }; MAX_SESSIONS];
static USED: Mutex<u64> = Mutex::new(0);
static GENERATION: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One thread's counters for one session: `[open, counter of callsite 0, counter of callsite
/// 1, ...]`, where `open` is the number of counters while the session is open and 0 once it is
/// dropped (a thread's cached pointer to a closed shard then counts nothing).
type Shard = [AtomicU64];

/// A session's shards, and whether it is closed (dropped): a shard made after that is made
/// closed.
#[derive(Default)]
struct ShardList {
    closed: bool,
    all: Vec<Arc<Shard>>,
    /// The shards of calls outside processes.
    outside: Vec<Arc<Shard>>,
}

pub(crate) struct SessionState {
    bit: u32,
    node: u32,
    generation: u64,
    types: TraceTypes,
    /// The tables of the processes this session has measured (call_time, call_memory;
    /// sample sessions, until they fold them: see [`super::measure::fold_ended`]).
    pub(super) measured: Mutex<Vec<ProcTraceRef>>,
    /// A sample session's processes folded once they ended. Taken before `measured` and any
    /// table, by whoever takes it with them.
    pub(super) folded: Mutex<super::measure::Folded>,
    /// The significant figures of its call-duration histograms.
    histogram_precision: u8,
    /// Which callsites this session traces, by callsite id.
    traced: Mutex<Vec<bool>>,
    /// Every thread's shard, kept after the thread exits.
    shards: Mutex<ShardList>,
    counters: Mutex<CounterState>,
    /// Call-tree mode's interned paths.
    paths: Mutex<super::tree::PathTable>,
    /// The clock when the session opened (with an event log): event times count from here.
    opened_ticks: u64,
    /// The wall clock then, in nanoseconds since the Unix epoch, to line up the event logs of
    /// several nodes.
    opened_unix_ns: u64,
}

#[derive(Default)]
struct CounterState {
    /// Subtracted from the shard sums (what `restart` and `resume` leave behind).
    baseline: Vec<u64>,
    /// The counts as `pause` left them, while paused.
    paused: Option<Vec<u64>>,
}

/// The generation of the session in slot `bit`, 0 when the slot is free.
#[inline]
pub(crate) fn generation_of(bit: u32) -> u64 {
    GENERATIONS[bit as usize].load(Ordering::Relaxed)
}

/// [`generation_of`], sequentially consistent: a reader that sees a slot's generation sees
/// what was done before it was stored (a dropped session clears its masks before it frees its
/// slot).
#[inline]
pub(crate) fn generation_acquire(bit: u32) -> u64 {
    GENERATIONS[bit as usize].load(Ordering::SeqCst)
}

/// The session in slot `bit`, if any.
pub(crate) fn session_in_slot(bit: u32) -> Option<Arc<SessionState>> {
    SLOTS[bit as usize].load_full()
}

impl SessionState {
    pub(crate) fn bit(&self) -> u32 {
        self.bit
    }

    pub(crate) fn node(&self) -> u32 {
        self.node
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    pub(crate) fn types(&self) -> TraceTypes {
        self.types
    }

    /// The significant figures its call-duration histograms keep.
    pub(crate) fn histogram_precision(&self) -> u8 {
        self.histogram_precision
    }

    /// The clock when the session opened (0 without an event log).
    pub(crate) fn opened_ticks(&self) -> u64 {
        self.opened_ticks
    }

    /// The wall clock when the session opened, in nanoseconds since the Unix epoch.
    pub(crate) fn opened_unix_ns(&self) -> u64 {
        self.opened_unix_ns
    }

    /// Call-tree mode's paths.
    pub(crate) fn paths(&self) -> MutexGuard<'_, super::tree::PathTable> {
        lock(&self.paths)
    }

    /// The counts of every shard: per callsite, the calls made in processes, then per
    /// callsite the calls made outside them.
    fn sums(&self) -> Vec<u64> {
        let len = callsites().len();
        let mut sums = vec![0u64; 2 * len];
        let shards = lock(&self.shards);
        let (inside, outside) = sums.split_at_mut(len);
        for (sums, list) in [(inside, &shards.all), (outside, &shards.outside)] {
            for shard in list {
                for (sum, c) in sums.iter_mut().zip(shard.iter().skip(1)) {
                    *sum += c.load(Ordering::Relaxed);
                }
            }
        }
        sums
    }

    fn counts(&self) -> Vec<u64> {
        let counters = lock(&self.counters);
        if let Some(paused) = &counters.paused {
            return paused.clone();
        }
        let mut sums = self.sums();
        for (s, b) in sums.iter_mut().zip(counters.baseline.iter()) {
            *s -= b;
        }
        sums
    }
}

/// A thread's shard for one session slot: the session generation and node it was made for.
struct SlotShard {
    generation: u64,
    node: u32,
    /// The session counts calls and measures nothing per process.
    count_only: bool,
    /// The session counts calls outside processes on threads of no node.
    any_thread: bool,
    shard: Arc<Shard>,
    /// For calls outside processes, once the thread has counted one.
    outside: Option<Arc<Shard>>,
}

/// This thread's shards, one per session slot. Dropping them (at thread exit) first empties
/// the [`COUNT`] cache of pointers into them.
struct Shards([Option<SlotShard>; MAX_SESSIONS]);

impl Drop for Shards {
    fn drop(&mut self) {
        COUNT.with(|c| c.reset(0));
    }
}

thread_local! {
    /// This thread's shard for each session slot.
    static SHARDS: RefCell<Shards> =
        const { RefCell::new(Shards([const { None }; MAX_SESSIONS])) };
    /// Where this thread counts, for the slots it has counted for in a process of one node: a
    /// counted call then takes a thread-local load, a comparison and an increment per session.
    static COUNT: CountCache = const {
        CountCache {
            node: Cell::new(0),
            counted: Cell::new(0),
            not_fast: Cell::new(u64::MAX),
            single: Cell::new(0),
            fast_single: Cell::new(0),
            single_counters: Cell::new(std::ptr::null()),
            pair: Cell::new(0),
            fast_pair: Cell::new(0),
            pair_counters: [const { Cell::new(std::ptr::null()) }; 2],
            counters: [const { Cell::new(std::ptr::null()) }; MAX_SESSIONS],
            sampled: Cell::new(0),
            sampled_counters: Cell::new(std::ptr::null()),
        }
    };
}

/// Copies of this thread's [`SHARDS`] entries, for the processes of one node.
struct CountCache {
    /// The node of the processes it counts for (0: none).
    node: Cell<u32>,
    /// The slots whose counters are below.
    counted: Cell<u64>,
    /// The complement of the slots of `counted` whose sessions count and measure nothing per
    /// process: a call whose mask has no bit here needs nothing else.
    not_fast: Cell<u64>,
    /// The bit of the slot remembered last, 0 if none: a call whose mask is that one slot
    /// takes no loop.
    single: Cell<u64>,
    /// `single` when its session counts and measures nothing per process, 0 otherwise: a call
    /// whose mask is this needs nothing but the count (one comparison for both questions).
    fast_single: Cell<u64>,
    /// Its counters.
    single_counters: Cell<*const AtomicU64>,
    /// The two bits of `counted` when it has two, 0 otherwise: a call whose mask is those two
    /// slots takes no loop either.
    pair: Cell<u64>,
    /// `pair` when both its sessions count and measure nothing per process, 0 otherwise: a
    /// call whose mask is this needs nothing but the two counts.
    fast_pair: Cell<u64>,
    /// Their counters, lower slot first.
    pair_counters: [Cell<*const AtomicU64>; 2],
    /// Per slot of `counted`, the counters of its [`SHARDS`] entry.
    counters: [Cell<*const AtomicU64>; MAX_SESSIONS],
    /// The bit of the slot whose sample session this thread counted a call for last in a
    /// sample poll ([`count_sampled`]), 0 if none: apart from `counted`, which is call_count's
    /// (for the processes of one node; a sample poll's session is its process's node's).
    sampled: Cell<u64>,
    /// Its counters: those of its [`SHARDS`] entry.
    sampled_counters: Cell<*const AtomicU64>,
}

impl CountCache {
    fn reset(&self, node: u32) {
        self.sampled.set(0);
        self.node.set(node);
        self.counted.set(0);
        self.not_fast.set(u64::MAX);
        self.single.set(0);
        self.fast_single.set(0);
        self.pair.set(0);
        self.fast_pair.set(0);
    }

    /// Forgets slot `bit` (before its [`SHARDS`] entry is replaced).
    fn forget(&self, bit: usize) {
        if self.sampled.get() == 1 << bit {
            self.sampled.set(0);
        }
        self.counted.set(self.counted.get() & !(1 << bit));
        self.not_fast.set(self.not_fast.get() | 1 << bit);
        self.counters[bit].set(std::ptr::null());
        if self.single.get() == 1 << bit {
            self.single.set(0);
            self.fast_single.set(0);
        }
        if self.pair.get() & 1 << bit != 0 {
            self.pair.set(0);
            self.fast_pair.set(0);
        }
    }

    /// Counts for slot `bit` in `shard`, one of the slot's [`SHARDS`] entry's (its shard, or
    /// its shard of calls outside processes); `count_only` when its session counts calls and
    /// measures nothing per process.
    fn remember(&self, bit: usize, shard: &Arc<Shard>, count_only: bool) {
        self.counters[bit].set(shard.as_ptr());
        self.counted.set(self.counted.get() | 1 << bit);
        self.single.set(1 << bit);
        self.single_counters.set(shard.as_ptr());
        if count_only {
            self.not_fast.set(self.not_fast.get() & !(1 << bit));
        }
        self.fast_single.set(if count_only { 1 << bit } else { 0 });
        let counted = self.counted.get();
        if counted.count_ones() == 2 {
            let low = counted.trailing_zeros() as usize;
            let high = 63 - counted.leading_zeros() as usize;
            self.pair.set(counted);
            self.fast_pair.set(if counted & self.not_fast.get() == 0 {
                counted
            } else {
                0
            });
            self.pair_counters[0].set(self.counters[low].get());
            self.pair_counters[1].set(self.counters[high].get());
        } else {
            self.pair.set(0);
            self.fast_pair.set(0);
        }
    }

    /// Counts a call of `callsite` for every session in `mask` (all in `counted`, and the
    /// calling process of `node`), unless one of their shards is closed.
    #[inline(always)]
    fn count(&self, callsite: &Callsite, mask: u64) -> bool {
        let id = callsite.raw_id();
        // SAFETY (all blocks): every slot of `mask` is in `counted` (the callers check `mask`
        // against it, or against `not_fast`, whose complement is in `counted`), and `single` and
        // the slots of `pair` are among them or 0 (`fast_single` and `fast_pair` are `single` and
        // `pair` or 0, and no mask is 0). So each pointer was copied by `remember` from this
        // thread's `SHARDS` entry for its slot (its shard, or its shard of calls outside
        // processes, which once made is kept as long as the entry), an `Arc<Shard>` of one word
        // more than there are callsites, and that entry still holds it: `SHARDS` entries are
        // replaced only by
        // `record_call_slow`, which calls `forget` for the slot first (clearing `single`, `pair`
        // and their `fast_` copies if they name it), and dropped only at thread exit, by
        // `Shards::drop`, which empties this cache first.
        if mask == self.single.get() {
            // SAFETY: see above; `single_counters` is the counters of slot `single`.
            #[allow(unsafe_code)]
            return unsafe { increment(self.single_counters.get(), id) };
        }
        self.count_many(mask, id)
    }

    /// [`count`](Self::count) for the mask `pair` (or `fast_pair`, which is `pair` or 0), not
    /// 0: counts for both slots unless one of their shards is closed.
    #[inline(always)]
    fn count_pair(&self, id: usize) -> bool {
        let [low, high] = [self.pair_counters[0].get(), self.pair_counters[1].get()];
        // SAFETY: as in `count`: the mask was `pair`, and not 0, so `pair` is two slots of
        // `counted`, and `pair_counters` are their counters, copied by `remember` from this
        // thread's `SHARDS` entries, which still hold them (`forget` clears `pair` and
        // `fast_pair` first).
        #[allow(unsafe_code)]
        let open = unsafe { is_open(low, id) && is_open(high, id) };
        if !open {
            return false;
        }
        // SAFETY: as above; both have a counter for `id` (just checked).
        #[allow(unsafe_code)]
        unsafe {
            increment_unchecked(low, id);
            increment_unchecked(high, id);
        }
        true
    }

    /// [`count`](Self::count) for a mask of more than one slot.
    #[inline(always)]
    fn count_many(&self, mask: u64, id: usize) -> bool {
        // SAFETY (all blocks): as in `count`, which this continues.
        if mask == self.pair.get() {
            return self.count_pair(id);
        }
        // All open first: a call counts for all of them here or for none.
        let mut m = mask;
        let mut open = true;
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            #[allow(unsafe_code)]
            // SAFETY: see above.
            let this = unsafe { is_open(self.counters[bit].get(), id) };
            open &= this;
        }
        if !open {
            return false;
        }
        let mut m = mask;
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            // SAFETY: see above; every shard of `mask` has a counter for `id` (checked just
            // above, by this thread, the only one that replaces them).
            #[allow(unsafe_code)]
            unsafe {
                increment_unchecked(self.counters[bit].get(), id);
            }
        }
        true
    }
}

/// `COUNT.with(f)`, with `f` inlined into its caller (see [`super::tls::with_local`]).
#[inline(always)]
fn with_count<R>(f: impl FnOnce(&CountCache) -> R) -> R {
    super::tls::with_local(&COUNT, f)
}

/// Whether the shard at `counters` is open and has a counter for callsite `id`.
///
/// # Safety
/// `counters` points to a live [`Shard`].
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn is_open(counters: *const AtomicU64, id: usize) -> bool {
    // SAFETY: the caller's promise; a shard has at least its `open` word.
    id < unsafe { &*counters }.load(Ordering::Relaxed) as usize
}

/// Adds one to the counter of callsite `id` in the shard at `counters` (for
/// [`CountCache::count`]) and returns true, if the shard is open and has one; false otherwise.
/// Counters are atomics, written by this thread only: the session's readers on other threads
/// may load them.
///
/// # Safety
/// `counters` points to a live [`Shard`].
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn increment(counters: *const AtomicU64, id: usize) -> bool {
    // SAFETY: the caller's promise; a shard has at least its `open` word.
    if !unsafe { is_open(counters, id) } {
        return false;
    }
    // SAFETY: `open` is the number of counters after it while the shard is open (0 once it
    // is closed), so `id < open` puts `id + 1` inside the shard.
    unsafe { increment_unchecked(counters, id) };
    true
}

/// Adds one to the counter of callsite `id` in the shard at `counters`.
///
/// # Safety
/// `counters` points to a live [`Shard`] with a counter for `id` (`id` below its `open` word
/// once).
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn increment_unchecked(counters: *const AtomicU64, id: usize) {
    // SAFETY: the caller's promise: `id + 1` is inside the shard.
    let c = unsafe { &*counters.add(id + 1) };
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// A traced call's cheapest cases, inlined where it is called: one or two sessions want it
/// (`mask`), which count calls and measure nothing per process, and this thread has counted
/// for them for this node. Counts the call and returns true; false when the call needs
/// [`count_many_only`], [`record_call`] or more.
#[inline(always)]
pub(crate) fn count_only(callsite: &Callsite, mask: std::num::NonZeroU64) -> bool {
    with_count(
        #[inline(always)]
        |c| count_only_in(c, callsite, mask.get()),
    )
}

/// [`count_only`] with this thread's cache.
#[inline(always)]
fn count_only_in(c: &CountCache, callsite: &Callsite, mask: u64) -> bool {
    if mask == c.fast_single.get() {
        // One count-only session: no loop, and `not_fast` need not be read.
        let counters = c.single_counters.get();
        let id = callsite.raw_id();
        // SAFETY: as in `CountCache::count`: `fast_single` is `single` or 0, `mask` is not 0,
        // and `single_counters` is the counters of slot `single`.
        #[allow(unsafe_code)]
        if c.node.get() == current_node_id() && unsafe { is_open(counters, id) } {
            // SAFETY: as above, and `id` is below the shard's `open` word (just checked).
            #[allow(unsafe_code)]
            unsafe {
                increment_unchecked(counters, id)
            };
            return true;
        }
        std::hint::cold_path();
        return false;
    }
    // Two count-only sessions: no loop either.
    mask == c.fast_pair.get()
        && c.node.get() == current_node_id()
        && c.count_pair(callsite.raw_id())
}

/// [`count_only`] for any number of sessions, each counting calls and measuring nothing per
/// process (checked after the inline measured case: two sessions take `count_only`).
#[inline(always)]
pub(crate) fn count_many_only(callsite: &Callsite, mask: std::num::NonZeroU64) -> bool {
    with_count(
        #[inline(always)]
        |c| {
            mask.get() & c.not_fast.get() == 0
                && c.node.get() == current_node_id()
                && c.count_many(mask.get(), callsite.raw_id())
        },
    )
}

/// A traced call: counts it for every session in `mask` that belongs to the calling process's
/// node. The common case reads this thread's [`COUNT`] cache and the thread's node.
#[inline(always)]
pub(crate) fn record_call(callsite: &'static Callsite, mask: u64) {
    let mask = mask & super::measure::counting();
    if mask == 0 {
        return;
    }
    if !with_count(|c| {
        mask & !c.counted.get() == 0 && c.node.get() == current_node_id() && c.count(callsite, mask)
    }) {
        record_call_slow(callsite, mask);
    }
}

#[cold]
fn record_call_slow(callsite: &'static Callsite, mask: u64) {
    let node = current_node_id();
    if node == 0 {
        return;
    }
    // Outside any process: the calls of a thread of a node count for that node's sessions,
    // those of a thread of no node for the sessions that ask for them.
    let outside = node & crate::context::OUTSIDE != 0;
    let home = node & !crate::context::OUTSIDE;
    let id = callsite.id();
    // Fails only while this thread's destructors run: such a call is not counted.
    let _ = SHARDS.try_with(|shards| {
        let mut shards = shards.borrow_mut();
        COUNT.with(|cache| {
            if cache.node.get() != node {
                cache.reset(node);
            }
            let mut m = mask;
            while m != 0 {
                let bit = m.trailing_zeros() as usize;
                m &= m - 1;
                let generation = GENERATIONS[bit].load(Ordering::Relaxed);
                let entry = &mut shards.0[bit];
                if !matches!(entry, Some(e) if e.generation == generation) {
                    cache.forget(bit);
                    if refill(bit, entry).is_none() {
                        continue;
                    }
                }
                let Some(e) = entry.as_mut() else {
                    continue;
                };
                let shard = if !outside {
                    if e.node != node {
                        continue;
                    }
                    &e.shard
                } else {
                    if !(home == e.node || home == 0 && e.any_thread) {
                        continue;
                    }
                    if e.outside.is_none() {
                        e.outside = new_shard(bit, e.generation, true);
                    }
                    let Some(shard) = e.outside.as_ref() else {
                        continue;
                    };
                    shard
                };
                let c = &shard[id + 1];
                c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                cache.remember(bit, shard, e.count_only);
            }
        });
    });
}

/// Counts a call of callsite `id` for the sample session in slot `bit`, of `generation`, which
/// alone measures the poll this thread runs (a sample poll, see `measure::SAMPLING`): in this
/// thread's shard of the session, as call_count counts, so that the poll has nothing to flush
/// when it ends. Its common case is a thread-local load, a comparison and an increment.
#[inline(always)]
pub(crate) fn count_sampled(id: u32, bit: u32, generation: u64) {
    let counted = with_count(|c| {
        if c.sampled.get() != 1 << bit {
            return false;
        }
        // SAFETY: `sampled` names slot `bit`, so `sampled_counters` was copied by
        // `count_sampled_slow` from this thread's `SHARDS` entry for that slot (an
        // `Arc<Shard>` of one word more than there are callsites), which still holds it:
        // entries are replaced only by `record_call_slow` and `count_sampled_slow`, which call
        // `forget` for the slot first (clearing `sampled` when it names it), and dropped only
        // at thread exit by `Shards::drop`, which `reset`s this cache first (clearing
        // `sampled`).
        #[allow(unsafe_code)]
        return unsafe { increment(c.sampled_counters.get(), id as usize) };
    });
    if !counted {
        count_sampled_slow(id, bit, generation);
    }
}

/// [`count_sampled`] in every case: makes this thread's shard for the session if need be, and
/// counts the call only if the session in slot `bit` is still the one of `generation` (the one
/// the poll began for) and open.
#[cold]
#[inline(never)]
fn count_sampled_slow(id: u32, bit: u32, generation: u64) {
    let slot = bit as usize;
    // Fails only while this thread's destructors run: such a call is not counted.
    let _ = SHARDS.try_with(|shards| {
        let mut shards = shards.borrow_mut();
        let entry = &mut shards.0[slot];
        if !matches!(entry, Some(e) if e.generation == generation) {
            if GENERATIONS[slot].load(Ordering::Relaxed) != generation {
                return;
            }
            COUNT.with(|cache| cache.forget(slot));
            if refill(slot, entry).is_none() {
                return;
            }
        }
        let Some(e) = entry.as_ref().filter(|e| e.generation == generation) else {
            return;
        };
        // Open (its session not dropped) and with a counter for `id`.
        if (id as usize) < e.shard[0].load(Ordering::Relaxed) as usize {
            let c = &e.shard[id as usize + 1];
            c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            COUNT.with(|cache| {
                cache.sampled.set(1 << bit);
                cache.sampled_counters.set(e.shard.as_ptr());
            });
        }
    });
}

/// Makes this thread's shard for the session now in slot `bit`.
#[cold]
fn refill(bit: usize, entry: &mut Option<SlotShard>) -> Option<&mut SlotShard> {
    let guard = SLOTS[bit].load();
    let session = guard.as_deref()?;
    let shard = new_shard(bit, session.generation, false)?;
    Some(entry.insert(SlotShard {
        generation: session.generation,
        node: session.node,
        count_only: !session.types.per_process(),
        any_thread: session.types.contains(TraceTypes::ANY_THREAD),
        shard,
        outside: None,
    }))
}

/// A new shard (of calls outside processes when `outside`) of the session in slot `bit`, if
/// it is still the one of `generation`.
#[cold]
fn new_shard(bit: usize, generation: u64, outside: bool) -> Option<Arc<Shard>> {
    let guard = SLOTS[bit].load();
    let session = guard.as_deref().filter(|s| s.generation == generation)?;
    // The profiler's own memory: charged to no process or function.
    Some(crate::heap::suppressed(|| {
        let mut shards = lock(&session.shards);
        let len = callsites().len();
        let open = if shards.closed { 0 } else { len as u64 };
        let shard: Arc<Shard> = std::iter::once(AtomicU64::new(open))
            .chain((0..len).map(|_| AtomicU64::new(0)))
            .collect();
        if outside {
            shards.outside.push(Arc::clone(&shard));
        } else {
            shards.all.push(Arc::clone(&shard));
        }
        shard
    }))
}

/// Why a session could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionError {
    /// [`MAX_SESSIONS`] sessions are open in this OS process.
    TooManySessions {
        /// The limit.
        limit: usize,
    },
    /// call_memory was asked for, but [`CountingAlloc`](crate::CountingAlloc) is not the
    /// global allocator.
    AllocatorNotInstalled,
    /// Call-duration histograms were asked to keep a number of significant figures outside
    /// [`SessionOptions::PRECISIONS`].
    HistogramPrecision {
        /// What was asked for.
        significant_figures: u8,
    },
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::TooManySessions { limit } => write!(
                f,
                "cannot open a trace session: {limit} are already open in this OS process; \
                 drop (stop) one first"
            ),
            SessionError::AllocatorNotInstalled => write!(
                f,
                "call_memory figures {}",
                crate::heap::NEEDS_THE_ALLOCATOR
            ),
            SessionError::HistogramPrecision {
                significant_figures,
            } => write!(
                f,
                "call-duration histograms keep {} to {} significant figures, not \
                 {significant_figures}; the default, {}, reads durations to 1%",
                SessionOptions::PRECISIONS.start(),
                SessionOptions::PRECISIONS.end(),
                SessionOptions::DEFAULT_PRECISION
            ),
        }
    }
}

impl std::error::Error for SessionError {}

/// How a trace session measures, beyond its [`TraceTypes`]
/// ([`NodeHandle::trace_session_with_options`](crate::NodeHandle::trace_session_with_options)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionOptions {
    histogram_precision: u8,
}

impl SessionOptions {
    /// The significant figures a call-duration histogram may keep: hdrhistogram's range.
    pub const PRECISIONS: std::ops::RangeInclusive<u8> = 1..=5;
    /// The significant figures call-duration histograms keep unless told otherwise: 2, each
    /// duration to within 1%.
    pub const DEFAULT_PRECISION: u8 = 2;

    /// The defaults: histograms of [`DEFAULT_PRECISION`](Self::DEFAULT_PRECISION).
    pub const fn new() -> SessionOptions {
        SessionOptions {
            histogram_precision: Self::DEFAULT_PRECISION,
        }
    }

    /// The significant figures each call-duration histogram
    /// ([`TraceTypes::CALL_TIME_HISTOGRAMS`]) keeps, in [`PRECISIONS`](Self::PRECISIONS): a
    /// duration is read to within one part in 10^`significant_figures`. Each figure more
    /// makes a histogram about ten times larger (at 2, a few KiB per process and function).
    pub const fn histogram_precision(mut self, significant_figures: u8) -> SessionOptions {
        self.histogram_precision = significant_figures;
        self
    }
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions::new()
    }
}

/// Why a pattern could not be set or cleared; each names the pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatternError {
    /// No traced function linked into this binary matches.
    NoMatch {
        /// The pattern.
        pattern: TracePattern,
        /// How many traced functions the binary links.
        linked: usize,
    },
    /// The pattern's module has no function traced by this session.
    NotTraced {
        /// The pattern.
        pattern: TracePattern,
    },
    /// The build has no instrumentation at all: the feature `runtime/no-trace` is on
    /// ([`INSTRUMENTED`](super::INSTRUMENTED) is false), so no pattern can match.
    CompiledOut {
        /// The pattern.
        pattern: TracePattern,
    },
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::NoMatch { pattern, linked } => write!(
                f,
                "no traced function matches {pattern} (this binary links {linked} traced \
                 functions); check the module path (`module_path!()`), the function name \
                 (`Type::method`, `<Type as Trait>::method`) and the arity (`self` counts). A \
                 binary links only the crates it uses: a test binary that never names a crate \
                 has none of its functions"
            ),
            PatternError::CompiledOut { pattern } => write!(
                f,
                "no traced function matches {pattern}: instrumentation is compiled out of this \
                 build. {COMPILED_OUT}"
            ),
            PatternError::NotTraced { pattern } => {
                write!(
                    f,
                    "cannot clear {pattern}: this session traces nothing in that module"
                )
            }
        }
    }
}

impl std::error::Error for PatternError {}

/// Why a build has no instrumentation, and how to find what turned it off: the feature is
/// often enabled by another crate of the build, through feature unification.
pub(crate) const COMPILED_OUT: &str = "The feature `runtime/no-trace` is on, so every \
     #[traced] function was built without its callsite; a crate in the build may enable it \
     for all (`cargo tree -e features -i runtime` shows which). Build without it to profile.";

/// The functions a session traces, by module: Erlang's trace map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceMap {
    /// Whether every traced function linked into the binary is traced (`{_, _, _}`).
    pub all: bool,
    /// Module path -> (function, arity), sorted.
    pub modules: BTreeMap<&'static str, Vec<(&'static str, u8)>>,
}

/// How many times a function was called, as [`TraceSession::call_counts`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallCount {
    /// The function.
    pub callsite: &'static Callsite,
    /// Calls counted.
    pub calls: u64,
}

/// A trace session of one node: its patterns and its call counts. Dropping it stops it: its
/// functions are no longer traced for it and its slot is free again.
///
/// ```
/// use runtime::Node;
/// use runtime::trace::TracePattern;
///
/// #[runtime::traced]
/// fn work(n: u64) -> u64 { n * 2 }
///
/// let node = Node::new().unwrap();
/// let session = node.trace_session().unwrap();
/// let matched = session.set_pattern(&TracePattern::function(module_path!(), "work")).unwrap();
/// assert_eq!(matched, 1);
/// node.run(async { (0..10).map(work).sum::<u64>() }).unwrap();
/// let counts = session.call_counts();
/// assert_eq!(counts[0].calls, 10);
/// ```
pub struct TraceSession {
    state: Arc<SessionState>,
    node: Arc<dyn SessionNode>,
}

impl fmt::Debug for TraceSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceSession")
            .field("slot", &self.state.bit)
            .field("node", &self.state.node)
            .finish_non_exhaustive()
    }
}

impl TraceSession {
    /// Opens a session on `node` measuring `types`, with `options` (the process layer's
    /// [`NodeHandle::trace_session_with_options`](crate::NodeHandle::trace_session_with_options)).
    pub(crate) fn open(
        node: Arc<dyn SessionNode>,
        types: TraceTypes,
        options: SessionOptions,
    ) -> Result<TraceSession, SessionError> {
        if !SessionOptions::PRECISIONS.contains(&options.histogram_precision) {
            return Err(SessionError::HistogramPrecision {
                significant_figures: options.histogram_precision,
            });
        }
        if types.contains(TraceTypes::CALL_MEMORY) && !crate::heap::installed() {
            return Err(SessionError::AllocatorNotInstalled);
        }
        if types.contains(TraceTypes::CALL_TIME) {
            super::stack::clock();
        }
        let mut used = lock(&USED);
        if *used == u64::MAX {
            return Err(SessionError::TooManySessions {
                limit: MAX_SESSIONS,
            });
        }
        let bit = (!*used).trailing_zeros();
        *used |= 1 << bit;
        let state = Arc::new(SessionState {
            bit,
            node: node.id(),
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
            types,
            measured: Mutex::new(Vec::new()),
            folded: Mutex::new(super::measure::Folded::default()),
            histogram_precision: options.histogram_precision,
            traced: Mutex::new(vec![false; callsites().len()]),
            shards: Mutex::new(ShardList::default()),
            counters: Mutex::new(CounterState {
                baseline: vec![0; 2 * callsites().len()],
                paused: None,
            }),
            paths: Mutex::new(super::tree::PathTable::default()),
            opened_ticks: if types.contains(TraceTypes::CALL_EVENTS) {
                super::stack::clock().raw()
            } else {
                0
            },
            opened_unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        });
        super::outside::open(bit, node.id(), types.contains(TraceTypes::ANY_THREAD));
        GENERATIONS[bit as usize].store(state.generation, Ordering::SeqCst);
        SLOTS[bit as usize].store(Some(Arc::clone(&state)));
        // A flag a dropped session of this node left on a process (one spawned while the
        // session was being dropped) must not count for this one. A spawn storing such a
        // flag after this sweep passed its process reads the new generation after its own
        // fence and clears it (`flags::flags_at_spawn`); one that read the old generation
        // stored its flag before its fence, which this sweep then sees.
        std::sync::atomic::fence(Ordering::SeqCst);
        for p in node.processes() {
            p.trace_flags().clear(bit);
        }
        node.trace_sessions().fetch_or(1 << bit, Ordering::SeqCst);
        super::measure::open(bit, types);
        Ok(TraceSession { state, node })
    }
}

impl TraceSession {
    /// The node this session belongs to.
    pub fn node(&self) -> u32 {
        self.state.node
    }

    /// The session's generation: unique among every session of the OS process.
    pub(crate) fn generation(&self) -> u64 {
        self.state.generation
    }

    /// What this session measures.
    pub fn types(&self) -> TraceTypes {
        self.state.types
    }

    /// Waits until every poll this session measures that is running on another thread now
    /// has ended, for at most `limit`, and returns how many were still running when it gave
    /// up (0 when all ended).
    ///
    /// A poll's call_time and call_memory figures reach the session when the poll ends. A
    /// reader that has just learned that something happened — a reply arrived, a process
    /// exited — may ask while the poll that did it is still finishing on another worker
    /// (a server's poll sends a reply, then ends). Every read of measured figures
    /// ([`measurements`](Self::measurements), [`call_tree`](Self::call_tree),
    /// [`event_logs`](Self::event_logs), [`call_time_percentiles`](Self::call_time_percentiles),
    /// [`snapshot`](Self::snapshot)) settles first, for at most [`Self::SETTLE_LIMIT`]; call
    /// this with a longer limit where exact figures matter more than a prompt answer. A poll
    /// on the calling thread is not waited for. Call counts need no settling: they are
    /// visible as each call is made.
    pub fn settle(&self, limit: std::time::Duration) -> usize {
        super::inflight::settle(1 << self.state.bit(), limit)
    }

    /// How long the reads of measured figures wait, at most, for polls still running (see
    /// [`settle`](Self::settle)): a poll that runs longer (a process computing without
    /// yielding) is read as it stood at the end of its last poll.
    pub const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

    /// The figures per function and per path, read in one walk (for
    /// [`snapshot`](Self::snapshot)), once the polls running have ended (as
    /// [`measurements`](Self::measurements)).
    ///
    /// `function_id` gives a function's id in the figures from its callsite's id, `None` to
    /// leave it out.
    pub(super) fn gathered(
        &self,
        function_id: impl FnMut(u32) -> Option<u32>,
    ) -> super::measure::Gathered {
        self.settle(Self::SETTLE_LIMIT);
        crate::heap::suppressed(|| self.state.gathered(function_id))
    }

    /// call_time and call_memory figures: per process this session has measured (alive or
    /// not), per function it called, including every poll that had ended when it was called
    /// and, within [`Self::SETTLE_LIMIT`], those that were running (see
    /// [`settle`](Self::settle)). Never stops the processes it measures.
    pub fn measurements(&self) -> Vec<ProcessMeasurement> {
        self.settle(Self::SETTLE_LIMIT);
        crate::heap::suppressed(|| self.state.measurements())
    }

    /// In call-tree mode ([`TraceTypes::CALL_TREE`]): every traced call path seen, and per
    /// process measured the figures of each path, exclusive of the traced calls below it
    /// (summed by last function, they are [`measurements`](Self::measurements)). Empty in
    /// the other modes.
    pub fn call_tree(&self) -> CallTreeMeasurement {
        self.settle(Self::SETTLE_LIMIT);
        crate::heap::suppressed(|| self.state.call_tree())
    }

    /// With [`TraceTypes::CALL_EVENTS`]: per process measured, its event log — each traced
    /// frame entered and left, with its time since the session opened. Empty otherwise.
    pub fn event_logs(&self) -> Vec<ProcessEvents> {
        self.settle(Self::SETTLE_LIMIT);
        crate::heap::suppressed(|| self.state.event_logs())
    }

    /// With [`TraceTypes::CALL_TIME_HISTOGRAMS`]: per process measured and function it called,
    /// the distribution of the calls' own time (p50, p90, p99, max), exclusive of traced
    /// callees as the time figure is, in pid order; empty otherwise.
    pub fn call_time_percentiles(&self) -> Vec<CallPercentiles> {
        self.settle(Self::SETTLE_LIMIT);
        crate::heap::suppressed(|| self.state.percentiles())
    }

    /// When the session was opened, in nanoseconds since the Unix epoch (event times count
    /// from then).
    pub fn opened_unix_ns(&self) -> u64 {
        self.state.opened_unix_ns()
    }

    /// The session's slot: its bit in [`ProcessInfo::trace_sessions`](crate::ProcessInfo).
    pub fn slot(&self) -> u32 {
        self.state.bit
    }

    /// Traces the processes `spec` names for this session; with `set_on_spawn`, the processes
    /// they spawn are traced too (and pass it on). Returns how many processes it changed and,
    /// for a list, the items that failed, in input order.
    ///
    /// A process is measured (call_time, call_memory) from its first poll that begins once
    /// it is traced. So that every call it makes after this returns is measured, this waits
    /// for the polls of the processes it traces that are running when it is called (the
    /// calling process's own aside) to end, as [`pause`](Self::pause) does, for at most
    /// [`Self::SETTLE_LIMIT`]: a poll that runs longer, a process computing without
    /// yielding, is not measured to its end.
    ///
    /// # Errors
    /// For a single pid or name: [`FlagError::NoProc`] or [`FlagError::NotRegistered`].
    pub fn enable_trace(
        &self,
        spec: impl Into<ProcessSpec>,
        set_on_spawn: bool,
    ) -> Result<FlagOutcome, FlagError> {
        super::flags::apply(&self.state, &*self.node, &spec.into(), true, set_on_spawn)
    }

    /// Stops tracing the processes `spec` names for this session (`New`: stops tracing new
    /// processes).
    ///
    /// # Errors
    /// As [`enable_trace`](TraceSession::enable_trace).
    pub fn disable_trace(&self, spec: impl Into<ProcessSpec>) -> Result<FlagOutcome, FlagError> {
        super::flags::apply(&self.state, &*self.node, &spec.into(), false, false)
    }

    /// Whether this session traces process `pid`.
    pub fn is_traced(&self, pid: Pid) -> bool {
        self.node
            .process(pid)
            .is_some_and(|p| p.trace_flags().traced() & (1 << self.state.bit) != 0)
    }

    /// Traces every function that `pattern` matches; returns how many it matched.
    ///
    /// # Errors
    /// [`PatternError::NoMatch`] when no traced function in the binary matches;
    /// [`PatternError::CompiledOut`] in a build without instrumentation (`runtime/no-trace`).
    pub fn set_pattern(&self, pattern: &TracePattern) -> Result<usize, PatternError> {
        let mut traced = lock(&self.state.traced);
        let mut matched = 0;
        for cs in callsites() {
            if pattern.matches(cs) {
                matched += 1;
                traced[cs.id()] = true;
                cs.add_session(self.state.bit);
            }
        }
        if matched == 0 && !super::INSTRUMENTED {
            return Err(PatternError::CompiledOut {
                pattern: pattern.clone(),
            });
        }
        if matched == 0 {
            return Err(PatternError::NoMatch {
                pattern: pattern.clone(),
                linked: callsites().len(),
            });
        }
        Ok(matched)
    }

    /// Stops tracing the functions `pattern` matches; returns how many were traced and are
    /// no longer. Their counts so far are kept.
    ///
    /// # Errors
    /// [`PatternError::NotTraced`] when the pattern names a module in which this session traces
    /// nothing.
    pub fn clear_pattern(&self, pattern: &TracePattern) -> Result<usize, PatternError> {
        let mut traced = lock(&self.state.traced);
        if let super::Part::Exact(module) = &pattern.module
            && !callsites()
                .iter()
                .any(|cs| traced[cs.id()] && cs.module() == module)
        {
            return Err(PatternError::NotTraced {
                pattern: pattern.clone(),
            });
        }
        let mut cleared = 0;
        for cs in callsites() {
            if traced[cs.id()] && pattern.matches(cs) {
                cleared += 1;
                traced[cs.id()] = false;
                cs.remove_session(self.state.bit);
            }
        }
        Ok(cleared)
    }

    /// The functions this session traces.
    pub fn trace_map(&self) -> TraceMap {
        let traced = lock(&self.state.traced);
        let mut modules: BTreeMap<&'static str, Vec<(&'static str, u8)>> = BTreeMap::new();
        for cs in callsites() {
            if traced[cs.id()] {
                modules
                    .entry(cs.module())
                    .or_default()
                    .push((cs.function(), cs.arity()));
            }
        }
        for functions in modules.values_mut() {
            functions.sort_unstable();
        }
        TraceMap {
            all: !callsites().is_empty() && traced.iter().all(|t| *t),
            modules,
        }
    }

    /// The calls counted for every function this session traces or has traced, in callsite
    /// order, zero counts included: calls made by processes of the node. Never stops the
    /// processes it counts. For a sample session ([`TraceTypes::SAMPLE`]): the calls of the
    /// polls it alone measured, the rest being in its processes' figures (its
    /// [`snapshot`](Self::snapshot) gives them all).
    pub fn call_counts(&self) -> Vec<CallCount> {
        let counts = self.state.counts();
        let traced = lock(&self.state.traced);
        callsites()
            .iter()
            .zip(counts)
            .filter(|(cs, calls)| traced[cs.id()] || *calls > 0)
            .map(|(callsite, calls)| CallCount { callsite, calls })
            .collect()
    }

    /// The calls counted outside any process (see
    /// [outside processes](super#outside-processes)), per function called so, in callsite
    /// order. Kept apart from [`call_counts`](Self::call_counts), as no process made them.
    pub fn outside_call_counts(&self) -> Vec<CallCount> {
        let counts = self.state.counts();
        callsites()
            .iter()
            .zip(counts.into_iter().skip(callsites().len()))
            .filter(|(_, calls)| *calls > 0)
            .map(|(callsite, calls)| CallCount { callsite, calls })
            .collect()
    }

    /// Stops counting and measuring, keeping what was gathered before it returns — the
    /// figures of polls still running when it is called included: it waits for them to end
    /// (for at most [`Self::SETTLE_LIMIT`]; a poll that runs longer, a process computing
    /// without yielding, loses what that poll gathers). Returns false if already paused. Once
    /// it returns, [`call_counts`](TraceSession::call_counts),
    /// [`measurements`](TraceSession::measurements) and the other reads are stable.
    pub fn pause(&self) -> bool {
        let mut counters = lock(&self.state.counters);
        if counters.paused.is_some() {
            return false;
        }
        self.state.pause_measuring(Self::SETTLE_LIMIT);
        let mut now = self.state.sums();
        for (s, b) in now.iter_mut().zip(counters.baseline.iter()) {
            *s -= b;
        }
        counters.paused = Some(now);
        true
    }

    /// Counts again after [`pause`](TraceSession::pause), keeping the counts gathered before
    /// it; returns false if not paused.
    #[doc(alias = "continue")]
    pub fn resume(&self) -> bool {
        let mut counters = lock(&self.state.counters);
        let Some(kept) = counters.paused.take() else {
            return false;
        };
        self.state.resume_measuring();
        // Calls made while paused are left out: the baseline absorbs them.
        let now = self.state.sums();
        counters.baseline = now.iter().zip(kept.iter()).map(|(n, k)| n - k).collect();
        true
    }

    /// Zeroes the counts and figures and counts on (also when paused). Polls running when it
    /// is called end first (as for [`pause`](Self::pause)), so that nothing gathered before
    /// it lands after the zeroing.
    pub fn restart(&self) {
        let mut counters = lock(&self.state.counters);
        self.state.pause_measuring(Self::SETTLE_LIMIT);
        counters.baseline = self.state.sums();
        counters.paused = None;
        self.state.clear_measurements();
        self.state.resume_measuring();
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        let bit = self.state.bit;
        // First: from now on no process of the node passes this bit on or is measured for it.
        self.node
            .trace_sessions()
            .fetch_and(!(1 << bit), Ordering::SeqCst);
        super::measure::close(bit);
        for cs in callsites() {
            cs.remove_session(bit);
        }
        super::flags::clear_new(bit);
        for p in self.node.processes() {
            p.trace_flags().clear(bit);
        }
        // Every thread's cached pointer to this session's shards counts nothing from now on,
        // and a shard made from now on is made closed.
        {
            let mut shards = lock(&self.state.shards);
            shards.closed = true;
            for shard in shards.all.iter().chain(&shards.outside) {
                shard[0].store(0, Ordering::Relaxed);
            }
        }
        super::outside::close(bit);
        // Release: whoever sees the slot free sees the masks above cleared.
        GENERATIONS[bit as usize].store(0, Ordering::SeqCst);
        SLOTS[bit as usize].store(None);
        *lock(&USED) &= !(1u64 << bit);
    }
}
