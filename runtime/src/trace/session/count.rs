//! Call counting (call_count, and a sample poll's counts): each thread's shard per session
//! slot, its cache of where it counts ([`CountCache`]), the counting of a call the sessions of
//! its mask want, inline or on the cold path, and the making of shards.
//!
//! Uses the session slots and state (the parent module) and the callsites' ids; nothing of
//! the measuring.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{GENERATIONS, MAX_SESSIONS, SLOTS, Shard, lock};
use crate::context::current_node_id;
use crate::trace::measure::TraceTypes;
use crate::trace::{Callsite, callsites};

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
        // against it, or against `not_fast`, whose complement is in `counted`), and `single`
        // and the slots of `pair` are among them or 0 (`fast_single` and `fast_pair` are
        // `single` and `pair` or 0, and no mask is 0). So each pointer was copied by `remember`
        // from this thread's `SHARDS` entry for its slot (its shard, or its shard of calls
        // outside processes, which once made is kept as long as the entry), an `Arc<Shard>` of
        // one word more than there are callsites, and that entry still holds it: `SHARDS`
        // entries are replaced only by `record_call_slow`, which calls `forget` for the slot
        // first (clearing `single`, `pair` and their `fast_` copies if they name it), and
        // dropped only at thread exit, by `Shards::drop`, which empties this cache first.
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

/// `COUNT.with(f)`, with `f` inlined into its caller (see [`crate::trace::tls::with_local`]).
#[inline(always)]
fn with_count<R>(f: impl FnOnce(&CountCache) -> R) -> R {
    crate::trace::tls::with_local(&COUNT, f)
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

/// A traced call's cheapest case, inlined where it is called: the one session that wants it
/// (`mask`) counts calls and measures nothing per process, and this thread has counted for it
/// for this node last. Counts the call and returns true; false, having counted nothing,
/// otherwise: a call some session measures gives up after one comparison.
#[inline(always)]
pub(crate) fn count_single(callsite: &Callsite, mask: std::num::NonZeroU64) -> bool {
    with_count(
        #[inline(always)]
        |c| count_single_in(c, callsite, mask.get()),
    )
}

/// [`count_single`] with this thread's cache.
#[inline(always)]
fn count_single_in(c: &CountCache, callsite: &Callsite, mask: u64) -> bool {
    if mask != c.fast_single.get() {
        return false;
    }
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
    false
}

/// [`count_single`]'s next case, asked once the inline entries of a measured poll have not
/// taken the call: every session of `mask`, more than one, counts calls and measures nothing
/// per process, and this thread has counted for them for this node. Counts the call for all
/// of them and returns true; false, having counted nothing, otherwise.
#[inline(always)]
pub(crate) fn count_several(callsite: &Callsite, mask: std::num::NonZeroU64) -> bool {
    with_count(
        #[inline(always)]
        |c| count_several_in(c, callsite, mask.get()),
    )
}

/// [`count_several`] with this thread's cache.
#[inline(always)]
fn count_several_in(c: &CountCache, callsite: &Callsite, mask: u64) -> bool {
    // Some session of `mask` measures, or one this thread has not counted for: not here.
    if mask & c.not_fast.get() != 0 {
        return false;
    }
    // Two count-only sessions take no loop either.
    c.node.get() == current_node_id()
        && if mask == c.fast_pair.get() {
            c.count_pair(callsite.raw_id())
        } else {
            c.count_many(mask, callsite.raw_id())
        }
}

/// A traced call: counts it for every session in `mask` that belongs to the calling process's
/// node. The common case reads this thread's [`COUNT`] cache and the thread's node.
#[inline(always)]
pub(crate) fn record_call(callsite: &'static Callsite, mask: u64) {
    let mask = mask & crate::trace::measure::counting();
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
