//! The profile: what a trace session gathered, per function, per process (tprof's
//! `{Type, [trace_info()]}`), and per call path in call-tree mode, with the processes' names
//! and where the run came from.
//!
//! A [`Profile`] is plain data: it holds no handle into the runtime, so it can be written to an
//! archive, read back by another program, merged with others and exported. Every report and
//! every export reads this one model.
//!
//! Here, the model's types; beside them, what it is measured in (`trace_type`), how it is read
//! from trace sessions' snapshots (`build`), the names processes go by in it (`labels`) and
//! how a function is found in it by name (`lookup`).

use std::fmt;

use runtime::Pid;
use runtime::trace::{Snapshot, TraceSession};
use serde::{Deserialize, Serialize};

mod build;
mod labels;
mod lookup;
mod trace_type;

// The functions and call paths the model indexes into sit below it, in `functions`.
use crate::functions::{Function, PathNode};
pub(crate) use labels::ALL as ALL_PROCESSES;
pub use labels::Labels;
pub use lookup::LookupError;
pub use trace_type::{TraceType, TraceTypeError};

/// How reports name the traced calls made outside any process (in `main`, a plain tokio task,
/// `Node::block_on`): a [`ProcessRecord`] of this name, with a
/// [`Pid::outside`](runtime::Pid::outside) pid — one per node (call_count, call_memory), or
/// one per thread followed by the thread's name and number (call_time, where threads' times
/// overlap).
pub const OUTSIDE_PROCESSES: &str = "(outside processes)";

/// Whose figures an [`Entry`] holds: one process, or every process (call_count).
///
/// In JSON: `"all"`, or the pid as it prints (`"<1.5.0>"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Group {
    /// All processes together (tprof's `all`).
    All,
    /// One process.
    Process(Pid),
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Group::All => f.write_str("all"),
            Group::Process(pid) => write!(f, "{pid}"),
        }
    }
}

impl From<Group> for String {
    fn from(group: Group) -> String {
        group.to_string()
    }
}

impl TryFrom<String> for Group {
    type Error = runtime::ParsePidError;
    fn try_from(s: String) -> Result<Group, Self::Error> {
        if s == "all" {
            Ok(Group::All)
        } else {
            s.parse().map(Group::Process)
        }
    }
}

/// One function's figures for one process (or all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The process, or [`Group::All`] for call_count.
    pub group: Group,
    /// Calls.
    pub calls: u64,
    /// The measurement: calls (call_count), nanoseconds (call_time) or words (call_memory).
    pub measurement: u64,
    /// Bytes allocated (call_memory; 0 otherwise).
    pub bytes: u64,
    /// Allocations made (call_memory; 0 otherwise).
    pub blocks: u64,
}

/// One traced function and its figures per process (tprof's `trace_info()`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionTrace {
    /// The function.
    pub function: Function,
    /// Its figures, one entry per process that called it, in pid order.
    pub entries: Vec<Entry>,
}

impl FunctionTrace {
    /// The module path.
    pub fn module(&self) -> &str {
        &self.function.module
    }

    /// The function's name (`name`, `Type::method`, `<Type as Trait>::method`).
    pub fn function(&self) -> &str {
        &self.function.name
    }

    /// The number of parameters, `self` included.
    pub fn arity(&self) -> u8 {
        self.function.arity
    }
}

/// The distribution of one function's call durations in one process (call_time with
/// percentiles): each call's own time, polled from entry to return, exclusive of the traced
/// calls it made — the measure of the time column beside it, call by call — to the
/// precision asked for ([`ProfileOptions::percentile_precision`](crate::ProfileOptions)).
///
/// Profiles of an older tprof have one per function over every process, with callees' time
/// included: their group is [`Group::All`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Percentiles {
    /// The process ([`Group::All`] in profiles of an older tprof: every process together).
    #[serde(default = "group_all")]
    pub group: Group,
    /// The function.
    pub function: Function,
    /// Calls recorded.
    pub calls: u64,
    /// Median, in nanoseconds.
    pub p50_ns: u64,
    /// 90th percentile, in nanoseconds.
    pub p90_ns: u64,
    /// 99th percentile, in nanoseconds.
    pub p99_ns: u64,
    /// Longest, in nanoseconds.
    pub max_ns: u64,
}

/// What a [`Percentiles`] of an older tprof, which had no group, was for.
fn group_all() -> Group {
    Group::All
}

/// A process that has figures in a profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// Its pid (after a merge, renumbered apart from the pids of other runs).
    #[serde(with = "pid_text")]
    pub pid: Pid,
    /// Its registered name, if it had one when the profile was taken.
    pub name: Option<String>,
    /// What it was spawned to run ([`runtime::SpawnOptions::initial_call`]).
    pub initial_call: String,
    /// The run it belongs to: an index into [`Meta::runs`].
    pub run: u32,
}

impl ProcessRecord {
    /// Its registered name, else its pid. Reports and exports add the pid to a name other
    /// processes of the profile share ([`Profile::labels`]).
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => self.pid.to_string(),
        }
    }
}

/// One call path's figures in one process: exclusive of the traced calls below it, like the
/// flat table's, so the flat figure of a function is the sum over the paths that end in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathEntry {
    /// The process.
    pub group: Group,
    /// The path: an index into [`CallTree::nodes`].
    pub node: u32,
    /// Calls made on this path.
    pub calls: u64,
    /// Nanoseconds (call_time) or words (call_memory).
    pub measurement: u64,
    /// Bytes allocated (call_memory).
    pub bytes: u64,
    /// Allocations made (call_memory).
    pub blocks: u64,
}

/// Call-tree mode's data: the traced call paths seen, and per process the figures of each.
/// Empty unless the profile was taken with
/// `ProfileOptions::call_tree` (call-tree mode).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTree {
    /// The paths; a parent always comes before its children.
    pub nodes: Vec<PathNode>,
    /// Figures per process per path, by process then path.
    pub entries: Vec<PathEntry>,
}

impl CallTree {
    /// The functions on path `node`, outermost first (indices into
    /// [`Profile::function_table`]).
    pub fn stack(&self, node: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = Some(node);
        while let Some(n) = at {
            let Some(p) = self.nodes.get(n as usize) else {
                break;
            };
            out.push(p.function);
            at = p.parent.filter(|&q| q < n);
        }
        out.reverse();
        out
    }

    /// Whether there is no path.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// Whether an [`Event`] enters or leaves a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A frame was entered: a synchronous call began, or an async call was polled.
    Enter,
    /// The frame was left: the call returned, or its poll did.
    Leave,
}

/// One entry of a process's event log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// When, in nanoseconds since profiling started (on the first node of the run, when
    /// several nodes' logs are read together).
    pub ts_ns: u64,
    /// The function: an index into [`Profile::function_table`].
    pub function: u32,
    /// Entered or left.
    pub kind: EventKind,
}

/// One process's event log: its traced frames entered and left, oldest first. Each poll's
/// frames are balanced; a log cut short at its capacity may end inside frames.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventLog {
    /// The process.
    pub group: Group,
    /// Its events.
    pub events: Vec<Event>,
    /// Events it could not keep.
    pub dropped: u64,
}

/// One profiling run: a program, the nodes it ran, when and for how long.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// The program and its arguments, or what the profile was taken of.
    pub program: String,
    /// When the run started, in milliseconds since the Unix epoch (0 when unknown).
    pub started_unix_ms: u64,
    /// How long profiling ran, in nanoseconds (0 when unknown).
    pub duration_ns: u64,
    /// The nodes its processes ran on.
    pub nodes: Vec<u32>,
    /// call_time: how long the program's threads ran, and waited on the OS's run queue while
    /// ready to run, while it was profiled. A call's time is wall time while its process is
    /// polled, so it includes what the OS made its worker wait: the call_time report says so
    /// when the share waited is large ([`RUN_QUEUE_NOTE_SHARE`](crate::RUN_QUEUE_NOTE_SHARE)).
    /// `None` for other profiles, where the OS gives no such figures, and in older archives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue: Option<runtime::trace::SnapshotRunQueue>,
}

/// From this share of their ready time spent waiting on the OS's run queue
/// ([`SnapshotRunQueue::waited_share`](runtime::trace::SnapshotRunQueue::waited_share)), a
/// call_time report says that its times include such waits ([`format`](crate::format())):
/// below it, the waits are the noise of any machine.
pub const RUN_QUEUE_NOTE_SHARE: f64 = 0.05;

/// Where a profile's data came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The runs it holds: one, or several after a merge.
    pub runs: Vec<Run>,
}

/// Serde for a pid as the text it prints as.
mod pid_text {
    use runtime::Pid;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(pid: &Pid, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(pid)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Pid, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A raw profile: the trace type and, per traced function that was called, its figures per
/// process. Unlike tprof's `collect`, a call_memory profile keeps functions that were called
/// and allocated nothing (0 words), so that a test can assert exactly that; [`inspect`]
/// leaves them out, as tprof does.
///
/// [`inspect`]: crate::inspect()
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// What was measured.
    pub trace_type: TraceType,
    /// The functions: in source order (file, then line) when read from a session.
    pub functions: Vec<FunctionTrace>,
    /// Per process and function, the distribution of the calls' own time (call_time with
    /// [`ProfileOptions::percentiles`](crate::ProfileOptions::percentiles); empty otherwise),
    /// by process, then function.
    #[serde(default)]
    pub percentiles: Vec<Percentiles>,
    /// The processes that have figures, in pid order, with their names.
    #[serde(default)]
    pub processes: Vec<ProcessRecord>,
    /// Every function a call path names (paths refer to it by index); the functions of
    /// [`functions`](Profile::functions) need not be here.
    #[serde(default)]
    pub function_table: Vec<Function>,
    /// Call-tree mode's paths and their figures (empty otherwise).
    #[serde(default)]
    pub call_tree: CallTree,
    /// Per process, its event log (with
    /// [`ProfileOptions::event_log`](crate::ProfileOptions::event_log); empty otherwise).
    #[serde(default)]
    pub event_logs: Vec<EventLog>,
    /// Where the data came from.
    #[serde(default)]
    pub meta: Meta,
    /// Whether tprof's per-process tables ([`inspect`](crate::inspect()),
    /// [`format`](crate::format())) show the [`OUTSIDE_PROCESSES`] entries, as groups of their
    /// own. Off by default, so that the tables stay as OTP's tprof prints them (which then
    /// says how many calls it left out); every other report and export shows them.
    #[serde(default)]
    pub outside_in_tables: bool,
    /// Sample mode's samples (empty for a profile of trace mode only).
    #[serde(default, skip_serializing_if = "crate::samples::SampleSet::is_empty")]
    pub samples: crate::samples::SampleSet,
}

impl Profile {
    /// An empty profile of `trace_type`.
    pub fn empty(trace_type: TraceType) -> Profile {
        Profile::new(trace_type, Vec::new())
    }

    /// A profile of `trace_type` with these functions (and no percentiles).
    pub fn new(trace_type: TraceType, functions: Vec<FunctionTrace>) -> Profile {
        Profile {
            trace_type,
            functions,
            percentiles: Vec::new(),
            processes: Vec::new(),
            function_table: Vec::new(),
            call_tree: CallTree::default(),
            event_logs: Vec::new(),
            meta: Meta::default(),
            outside_in_tables: false,
            samples: crate::samples::SampleSet::default(),
        }
    }

    /// Reads what `session` gathered as a `trace_type` profile, leaving out functions of the
    /// modules in `exclude` (and their submodules).
    pub fn from_session(
        session: &TraceSession,
        trace_type: TraceType,
        exclude: &[&str],
    ) -> Profile {
        Profile::from_snapshot(&session.snapshot(), trace_type, exclude)
    }

    /// Reads a session's [`Snapshot`] (taken here, or written by a profiled program as it
    /// stopped) as a `trace_type` profile, leaving out functions of the modules in `exclude`
    /// (and their submodules). Pids that do not parse are left out.
    pub fn from_snapshot(snapshot: &Snapshot, trace_type: TraceType, exclude: &[&str]) -> Profile {
        Profile::from_snapshots(std::slice::from_ref(snapshot), trace_type, exclude)
    }

    /// [`from_snapshot`](Profile::from_snapshot) for the sessions of several nodes of one
    /// run: their processes side by side (pids of different nodes differ), their call counts
    /// summed, their call paths united.
    pub fn from_snapshots(
        snapshots: &[Snapshot],
        trace_type: TraceType,
        exclude: &[&str],
    ) -> Profile {
        build::from_snapshots(snapshots, trace_type, exclude)
    }

    /// The figures of the one function `name` names: its bare name (as
    /// [`Callsite::function`] gives it), or the name the reports print, with or without the
    /// module and the arity ([`lookup`](Profile::lookup) says which forms). `None` when no
    /// function, or more than one, goes by `name`: [`lookup`](Profile::lookup) says which.
    ///
    /// [`Callsite::function`]: runtime::trace::Callsite::function
    pub fn function(&self, name: &str) -> Option<&FunctionTrace> {
        self.lookup(name).ok()
    }

    /// call_time: how long the program's threads ran, and waited on the OS's run queue while
    /// ready to run, while it was profiled ([`Run::run_queue`]), every run that says together;
    /// `None` when none says.
    ///
    /// ```
    /// use runtime::trace::SnapshotRunQueue;
    /// use tprof::{Profile, Run, TraceType};
    ///
    /// let mut profile = Profile::empty(TraceType::CallTime);
    /// assert_eq!(profile.run_queue(), None);
    /// let waits = SnapshotRunQueue { ran_ns: 600, waited_ns: 400, threads: 2, exited: 0 };
    /// profile.meta.runs.push(Run { run_queue: Some(waits), ..Run::default() });
    /// assert_eq!(profile.run_queue().unwrap().waited_share(), 0.4);
    /// ```
    pub fn run_queue(&self) -> Option<runtime::trace::SnapshotRunQueue> {
        self.meta
            .runs
            .iter()
            .filter_map(|r| r.run_queue)
            .reduce(|a, b| runtime::trace::SnapshotRunQueue {
                ran_ns: a.ran_ns.saturating_add(b.ran_ns),
                waited_ns: a.waited_ns.saturating_add(b.waited_ns),
                threads: a.threads.saturating_add(b.threads),
                exited: a.exited.saturating_add(b.exited),
            })
    }

    /// The groups that hold the calls made outside any process: those recorded with
    /// [`OUTSIDE_PROCESSES`] as their initial call.
    pub fn outside_pids(&self) -> std::collections::HashSet<Pid> {
        self.processes
            .iter()
            .filter(|p| p.initial_call == OUTSIDE_PROCESSES)
            .map(|p| p.pid)
            .collect()
    }

    /// The processes that have figures, in pid order.
    pub fn pids(&self) -> Vec<Pid> {
        let mut pids: Vec<Pid> = self
            .functions
            .iter()
            .flat_map(|f| f.entries.iter())
            .filter_map(|e| match e.group {
                Group::Process(pid) => Some(pid),
                Group::All => None,
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// The sum of every entry's measurement.
    pub fn total(&self) -> u64 {
        self.functions
            .iter()
            .flat_map(|f| f.entries.iter())
            .map(|e| e.measurement)
            .sum()
    }

    /// True when no function has figures and there is no sample.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty() && self.samples.samples.is_empty()
    }
}
