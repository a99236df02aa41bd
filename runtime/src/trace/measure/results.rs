//! What a session's reads give: the public types of its figures per process, per function and
//! per path, its event logs and its call-duration percentiles.
//!
//! Plain data: uses nothing of the measuring.

use crate::Pid;
use crate::trace::Callsite;

/// Events a process keeps per session in its event log; later ones are counted as dropped.
pub const EVENT_LOG_CAPACITY: usize = 1 << 16;

/// The distribution of one function's call durations in one process, as
/// [`TraceSession::call_time_percentiles`](crate::trace::TraceSession::call_time_percentiles)
/// reports it: each call's own time — polled time from entry to return, exclusive of the
/// traced calls it made, as the time figure beside it is — in nanoseconds, to the session's
/// [precision](crate::trace::SessionOptions::histogram_precision).
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

/// One function's figures in one process, as [`TraceSession::measurements`] reports them.
///
/// [`TraceSession::measurements`]: crate::trace::TraceSession::measurements
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
    /// What it was spawned to run
    /// ([`SpawnOptions::initial_call`](crate::SpawnOptions::initial_call)).
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

/// One process's event log
/// ([`TraceTypes::CALL_EVENTS`](crate::trace::TraceTypes::CALL_EVENTS)): its frames entered and
/// left, in order. Each poll's frames are balanced; a log cut short by its capacity may end
/// inside frames.
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
/// ([`TraceSession::call_tree`](crate::trace::TraceSession::call_tree)).
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
