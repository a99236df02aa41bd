//! The trace session handle ([`TraceSession`]): its opening, patterns and flags, pause,
//! restart and drop, and its reads (call counts, measurements, call trees, event logs,
//! percentiles, snapshots).
//!
//! Uses the session's state and slots (the parent module), the counting ([`super::count`]),
//! the measurements ([`crate::trace::measure`]) and the flags ([`crate::trace::flags`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::{
    CounterState, GENERATION, GENERATIONS, MAX_SESSIONS, PatternError, SLOTS, SessionError,
    SessionNode, SessionOptions, SessionState, ShardList, USED, lock,
};
use crate::Pid;
use crate::trace::measure::{
    CallPercentiles, CallTreeMeasurement, ProcessEvents, ProcessMeasurement, TraceTypes,
};
use crate::trace::{Callsite, FlagError, FlagOutcome, ProcessSpec, TracePattern, callsites};

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
            crate::trace::stack::clock();
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
            folded: Mutex::new(crate::trace::measure::Folded::default()),
            histogram_precision: options.histogram_precision,
            traced: Mutex::new(vec![false; callsites().len()]),
            shards: Mutex::new(ShardList::default()),
            counters: Mutex::new(CounterState {
                baseline: vec![0; 2 * callsites().len()],
                paused: None,
            }),
            paths: Mutex::new(crate::trace::tree::PathTable::default()),
            opened_ticks: if types.contains(TraceTypes::CALL_EVENTS) {
                crate::trace::stack::clock().raw()
            } else {
                0
            },
            opened_unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            run_queue: Mutex::new(if types.contains(TraceTypes::CALL_TIME) {
                crate::trace::run_queue::Reading::now()
            } else {
                None
            }),
        });
        crate::trace::outside::open(bit, node.id(), types.contains(TraceTypes::ANY_THREAD));
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
        crate::trace::measure::open(bit, types);
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
    /// reader that has just learned that something happened — a reply arrived, a process exited
    /// — may ask while the poll that did it is still finishing on another worker (a server's
    /// poll sends a reply, then ends). Every read of measured figures
    /// ([`measurements`](Self::measurements), [`call_tree`](Self::call_tree),
    /// [`event_logs`](Self::event_logs),
    /// [`call_time_percentiles`](Self::call_time_percentiles), [`snapshot`](Self::snapshot))
    /// settles first, for at most [`Self::SETTLE_LIMIT`]; call this with a longer limit where
    /// exact figures matter more than a prompt answer. A poll on the calling thread is not
    /// waited for. Call counts need no settling: they are visible as each call is made.
    pub fn settle(&self, limit: std::time::Duration) -> usize {
        crate::trace::inflight::settle(1 << self.state.bit(), limit)
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
    pub(in crate::trace) fn gathered(
        &self,
        function_id: impl FnMut(u32) -> Option<u32>,
    ) -> crate::trace::measure::Gathered {
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

    /// call_time: how long the program's threads ran, and waited on the OS's run queue while
    /// ready to run, since the session opened or last [restarted](Self::restart); what its
    /// [`Snapshot::run_queue`](crate::trace::Snapshot::run_queue) holds. `None` for a session
    /// that does not measure call_time, or where the OS gives no such figures.
    pub fn run_queue(&self) -> Option<crate::trace::SnapshotRunQueue> {
        self.state.run_queue()
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
        crate::trace::flags::apply(&self.state, &*self.node, &spec.into(), true, set_on_spawn)
    }

    /// Stops tracing the processes `spec` names for this session (`New`: stops tracing new
    /// processes).
    ///
    /// # Errors
    /// As [`enable_trace`](TraceSession::enable_trace).
    pub fn disable_trace(&self, spec: impl Into<ProcessSpec>) -> Result<FlagOutcome, FlagError> {
        crate::trace::flags::apply(&self.state, &*self.node, &spec.into(), false, false)
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
        if matched == 0 && !crate::trace::INSTRUMENTED {
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
        if let crate::trace::Part::Exact(module) = &pattern.module
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

    /// The calls counted outside any process (see [outside
    /// processes](crate::trace#outside-processes)), per function called so, in callsite order.
    /// Kept apart from [`call_counts`](Self::call_counts), as no process made them.
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
        if self.state.types().contains(TraceTypes::CALL_TIME) {
            *lock(&self.state.run_queue) = crate::trace::run_queue::Reading::now();
        }
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
        crate::trace::measure::close(bit);
        for cs in callsites() {
            cs.remove_session(bit);
        }
        crate::trace::flags::clear_new(bit);
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
        crate::trace::outside::close(bit);
        // Release: whoever sees the slot free sees the masks above cleared.
        GENERATIONS[bit as usize].store(0, Ordering::SeqCst);
        SLOTS[bit as usize].store(None);
        *lock(&USED) &= !(1u64 << bit);
    }
}
