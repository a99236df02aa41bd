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
//!
//! This file holds the session slots and a session's state ([`SessionState`]); its parts: the
//! call counting ([`count`]), the session handle's API ([`TraceSession`], in [`handle`]) and
//! its options and errors ([`options`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwapOption;

mod count;
mod handle;
mod options;

pub(crate) use count::{count_sampled, count_several, count_single, record_call};
pub use handle::{CallCount, TraceMap, TraceSession};
pub(crate) use options::COMPILED_OUT;
pub use options::{PatternError, SessionError, SessionOptions};

use super::callsites;
use super::flags::FlaggedProcess;
use super::measure::{ProcTraceRef, TraceTypes};
use crate::Pid;
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
    /// call_time: every thread's time run and waited on the OS's run queue as the session
    /// opened (or last restarted), to say in its snapshot how much of the calls' time the OS
    /// may have taken ([`super::run_queue`]); `None` for other sessions, or without figures.
    pub(super) run_queue: Mutex<Option<super::run_queue::Reading>>,
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

/// The trace sessions open on node `node` whose measured polls record the function each
/// process is in (call_time, call_memory), sample sessions left out (the sampler lists those):
/// `(slot, types)`, by slot.
pub(crate) fn poll_measuring_on(node: u32) -> Vec<(u32, TraceTypes)> {
    (0..MAX_SESSIONS as u32)
        .filter_map(|bit| {
            let session = SLOTS[bit as usize].load();
            let s = session.as_ref()?;
            let measures_polls = s.types.contains(TraceTypes::CALL_TIME)
                || s.types.contains(TraceTypes::CALL_MEMORY);
            (s.node == node && measures_polls && !s.types.contains(TraceTypes::SAMPLE))
                .then_some((bit, s.types))
        })
        .collect()
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

    /// What the program's threads ran and waited on the OS's run queue since the session
    /// opened (or last restarted): call_time sessions only, where the OS gives the figures.
    pub(crate) fn run_queue(&self) -> Option<super::SnapshotRunQueue> {
        let opened = lock(&self.run_queue);
        let opened = opened.as_ref()?;
        Some(super::run_queue::Reading::now()?.since(opened))
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
