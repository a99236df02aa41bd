//! The profile: what a trace session gathered, per function, per process (tprof's
//! `{Type, [trace_info()]}`), and per call path in call-tree mode, with the processes' names
//! and where the run came from.
//!
//! A [`Profile`] is plain data: it holds no handle into the runtime, so it can be written to an
//! archive, read back by another program, merged with others and exported. Every report and
//! every export reads this one model.

use std::fmt;

use runtime::Pid;
use std::collections::HashMap;

use runtime::trace::{Snapshot, SnapshotPercentiles, TraceSession, TraceTypes};
use serde::{Deserialize, Serialize};

mod labels;
mod lookup;
mod prefetch;

// The functions and call paths the model indexes into sit below it, in `functions`; named here
// too, as part of the model's vocabulary.
pub(crate) use crate::functions::{Function, PathNode, TreeTable, index32};
pub(crate) use labels::ALL as ALL_PROCESSES;
pub use labels::Labels;
pub use lookup::LookupError;

/// How reports name the traced calls made outside any process (in `main`, a plain tokio task,
/// `Node::block_on`): a [`ProcessRecord`] of this name, with a
/// [`Pid::outside`](runtime::Pid::outside) pid — one per node (call_count, call_memory), or
/// one per thread followed by the thread's name and number (call_time, where threads' times
/// overlap).
pub const OUTSIDE_PROCESSES: &str = "(outside processes)";

/// What to measure: tprof's `trace_type()`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum TraceType {
    /// Calls per function, across every process of the node (no per-process figures).
    #[default]
    CallCount,
    /// Calls and time per process per function, counted only while the process is polled
    /// (wall time within the poll: time the OS takes the worker thread away mid-poll counts
    /// too, which shows as a rare call far slower than the rest; see
    /// [call-time outliers](runtime::trace#call-time-outliers)).
    CallTime,
    /// Calls and memory allocated per process per function: words (the measurement), bytes
    /// and blocks.
    CallMemory,
}

impl TraceType {
    /// The trace session types that gather this; with `percentiles`, call_time also records
    /// each call's duration in a histogram.
    pub fn session_types(self, percentiles: bool) -> TraceTypes {
        match self {
            TraceType::CallCount => TraceTypes::CALL_COUNT,
            TraceType::CallTime if percentiles => TraceTypes::CALL_TIME_HISTOGRAMS,
            TraceType::CallTime => TraceTypes::CALL_TIME,
            TraceType::CallMemory => TraceTypes::CALL_MEMORY,
        }
    }

    /// [`session_types`](TraceType::session_types), with call-tree mode and event logs when
    /// asked for (call_time and call_memory only: call_count has no per-process figures).
    pub fn session_types_with(
        self,
        percentiles: bool,
        call_tree: bool,
        event_log: bool,
    ) -> TraceTypes {
        let mut types = self.session_types(percentiles);
        if self != TraceType::CallCount {
            if call_tree {
                types = types | TraceTypes::CALL_TREE;
            }
            if event_log {
                types = types | TraceTypes::CALL_EVENTS;
            }
        }
        types
    }

    /// Its name, as tprof spells it.
    pub fn name(self) -> &'static str {
        match self {
            TraceType::CallCount => "call_count",
            TraceType::CallTime => "call_time",
            TraceType::CallMemory => "call_memory",
        }
    }
}

/// A trace type name that is not `call_count`, `call_time` or `call_memory`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceTypeError {
    /// What was given.
    pub input: String,
}

impl fmt::Display for TraceTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown trace type `{}`: expected call_count, call_time or call_memory",
            self.input
        )
    }
}

impl std::error::Error for TraceTypeError {}

impl std::str::FromStr for TraceType {
    type Err = TraceTypeError;

    fn from_str(s: &str) -> Result<TraceType, TraceTypeError> {
        [
            TraceType::CallCount,
            TraceType::CallTime,
            TraceType::CallMemory,
        ]
        .into_iter()
        .find(|t| t.name() == s.trim())
        .ok_or_else(|| TraceTypeError {
            input: s.to_owned(),
        })
    }
}

impl fmt::Display for TraceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
}

/// Where a profile's data came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The runs it holds: one, or several after a merge.
    pub runs: Vec<Run>,
}

/// Builds a profile from snapshots ([`Profile::from_snapshots`]).
struct Builder<'a> {
    trace_type: TraceType,
    exclude: &'a [&'a str],
    functions: Vec<FunctionTrace>,
    /// Per function in `functions`: whether an entry came after one of a later group, so
    /// that its entries need sorting (those of calls outside processes, `all` in the
    /// snapshots of several nodes). Otherwise they are in group order, a group once.
    disordered: Vec<bool>,
    by_function: HashMap<Function, usize>,
    /// The functions of the snapshot being added, resolved once per snapshot.
    ids: SnapshotIds,
    processes: Vec<ProcessRecord>,
    percentiles: Vec<Percentiles>,
    tree: TreeTable,
    path_entries: Vec<PathEntry>,
    event_logs: Vec<EventLog>,
    /// Added to the event times of the snapshot being added.
    events_offset: u64,
    samples: crate::samples::SampleBuilder,
}

/// The functions of the snapshot a [`Builder`] is adding, each resolved once.
#[derive(Debug, Default)]
struct SnapshotIds {
    /// Per function of the snapshot: the function, and whether it is left out.
    functions: Vec<(Function, bool)>,
    /// Its index in [`Builder::functions`], once it has figures.
    traces: Vec<Option<usize>>,
    /// Its index in the function table, once a path or an event names it.
    table: Vec<Option<u32>>,
    /// Per process of the snapshot, its pid (`None` when it does not parse), read once.
    pids: Vec<Option<Pid>>,
    /// Per function of the snapshot, the entries its processes' figures add to it
    /// ([`Builder::reserve`]), room made for once its trace is first given one.
    room: Vec<usize>,
}

impl SnapshotIds {
    /// The pid of the snapshot's process `i`.
    fn pid(&self, i: usize) -> Option<Pid> {
        self.pids.get(i).copied().flatten()
    }
}

impl Builder<'_> {
    fn excluded(&self, module: &str) -> bool {
        self.exclude.iter().any(|m| {
            module == *m
                || module
                    .strip_prefix(m)
                    .is_some_and(|rest| rest.starts_with("::"))
        })
    }

    /// Resolves the functions of `snapshot` (each cloned once, whatever the number of
    /// figures that name it).
    fn resolve(&mut self, snapshot: &Snapshot) {
        let functions = snapshot
            .functions
            .iter()
            .map(|f| {
                let function = Function {
                    module: f.module.clone(),
                    name: f.name.clone(),
                    arity: f.arity,
                    file: f.file.clone(),
                    line: f.line,
                };
                (function, self.excluded(&f.module))
            })
            .collect::<Vec<_>>();
        self.ids = SnapshotIds {
            traces: vec![None; functions.len()],
            table: vec![None; functions.len()],
            functions,
            pids: snapshot
                .processes
                .iter()
                .map(|p| p.pid.parse().ok())
                .collect(),
            room: Vec::new(),
        };
    }

    /// The function `id` of the snapshot being added, unless it is left out.
    fn kept(&self, id: u32) -> Option<&Function> {
        match self.ids.functions.get(id as usize) {
            Some((function, false)) => Some(function),
            _ => None,
        }
    }

    /// The index in the function table of the snapshot's function `id` (added if new), and
    /// whether it is left out.
    fn table_index(&mut self, id: u32) -> Option<(u32, bool)> {
        let (function, excluded) = self.ids.functions.get(id as usize)?;
        let slot = self.ids.table.get_mut(id as usize)?;
        let index = *slot.get_or_insert_with(|| self.tree.function(function));
        Some((index, *excluded))
    }

    /// Makes room for the entries `snapshot`'s processes add to each function, so that
    /// adding a million entries does not copy each function's entries again and again as
    /// they grow.
    fn reserve(&mut self, snapshot: &Snapshot) {
        let counts = if snapshot.figures_per_function.len() == self.ids.functions.len() {
            // Counted as the snapshot was written: no pass over every figure. Only a hint
            // (a file could say anything): no function gets room for more than one entry per
            // process.
            let most = snapshot.processes.len();
            snapshot
                .figures_per_function
                .iter()
                .map(|&n| (n as usize).min(most))
                .collect()
        } else {
            let mut counts = vec![0usize; self.ids.functions.len()];
            for f in snapshot.processes.iter().flat_map(|p| &p.functions) {
                // The figures `add` leaves out make no entry (nor their function a trace).
                if f.calls == 0 && f.time_ns == 0 && f.words == 0 {
                    continue;
                }
                if let Some(count) = counts.get_mut(f.id as usize) {
                    *count += 1;
                }
            }
            counts
        };
        // Given as the function is first given an entry ([`Builder::trace_index`]): a
        // function whose figures are all left out gets no trace.
        self.ids.room = counts;
    }

    /// The index in [`Builder::functions`] of the snapshot's function `id`, added if new;
    /// `None` when it is left out.
    fn trace_index(&mut self, id: u32) -> Option<usize> {
        if let Some(&Some(at)) = self.ids.traces.get(id as usize) {
            return Some(at);
        }
        let function = self.kept(id)?;
        let at = match self.by_function.get(function) {
            Some(&at) => at,
            None => {
                let function = function.clone();
                self.functions.push(FunctionTrace {
                    function: function.clone(),
                    entries: Vec::new(),
                });
                self.disordered.push(false);
                self.by_function.insert(function, self.functions.len() - 1);
                self.functions.len() - 1
            }
        };
        self.ids.traces[id as usize] = Some(at);
        if let Some(room) = self.ids.room.get_mut(id as usize) {
            self.functions[at].entries.reserve(std::mem::take(room));
        }
        Some(at)
    }

    /// Adds `entry`'s figures to the snapshot's function `id`, unless it is left out.
    fn entry(&mut self, id: u32, entry: Entry) {
        if let Some(at) = self.trace_index(id) {
            self.entry_at(at, entry);
        }
    }

    /// Adds `entry`'s figures to the function at `at` in [`Builder::functions`].
    fn entry_at(&mut self, at: usize, entry: Entry) {
        // A group's figures of a function come together (a process's, one after another):
        // they are added to the last entry. Those that do not (`all` in the snapshots of
        // several nodes) are united as the entries are sorted ([`Builder::finish`]).
        let entries = &mut self.functions[at].entries;
        match entries.last_mut() {
            Some(last) if last.group == entry.group => add_entry(last, &entry),
            Some(last) => {
                if entry.group < last.group {
                    self.disordered[at] = true;
                }
                entries.push(entry);
            }
            None => entries.push(entry),
        }
        // A profile's entries go to one list per function, in turn: with a hundred functions
        // the CPU cannot tell where the next writes go, and each would wait for its memory.
        prefetch::next_slot(entries);
    }

    /// The group a snapshot's process (or thread outside processes) is reported under: the
    /// calls outside processes of a node's threads are one group for call_memory (their
    /// words add up), one per thread for call_time (their times overlap).
    fn group_of(&self, pid: Pid) -> Pid {
        if pid.is_outside() && self.trace_type != TraceType::CallTime {
            Pid::outside(pid.node(), 0)
        } else {
            pid
        }
    }

    /// Records `pid`, once, as a process with figures (`process`: its snapshot entry).
    fn record(&mut self, pid: Pid, process: Option<&runtime::trace::SnapshotProcess>) {
        // A process recorded again (its event log, a repeat in an older snapshot) is dropped
        // as the records are sorted ([`Builder::finish`]): no table of a million pids looked
        // up at random. Most repeats follow their first record.
        if self.processes.last().is_some_and(|last| last.pid == pid) {
            return;
        }
        let record = if pid.is_outside() {
            let name = match process {
                Some(thread) if pid.index() != 0 => {
                    format!(
                        "{OUTSIDE_PROCESSES} {} #{}",
                        thread.initial_call,
                        pid.index()
                    )
                }
                _ => OUTSIDE_PROCESSES.to_owned(),
            };
            ProcessRecord {
                pid,
                name: Some(name),
                initial_call: OUTSIDE_PROCESSES.to_owned(),
                run: 0,
            }
        } else {
            ProcessRecord {
                pid,
                name: process.and_then(|p| p.registered_name.clone()),
                initial_call: process.map(|p| p.initial_call.clone()).unwrap_or_default(),
                run: 0,
            }
        };
        self.processes.push(record);
    }

    fn add(&mut self, snapshot: &Snapshot) {
        self.resolve(snapshot);
        if let Some(samples) = &snapshot.samples {
            self.samples
                .add(snapshot.node, samples, &snapshot.functions, &mut self.tree);
        }
        let memory = self.trace_type == TraceType::CallMemory;
        if self.trace_type == TraceType::CallCount {
            let outside = Pid::outside(snapshot.node, 0);
            for (counts, group) in [
                (&snapshot.call_counts, Group::All),
                (&snapshot.outside_call_counts, Group::Process(outside)),
            ] {
                for &(id, calls) in counts {
                    if calls > 0 && self.kept(id).is_some() {
                        let entry = Entry {
                            group,
                            calls,
                            measurement: calls,
                            bytes: 0,
                            blocks: 0,
                        };
                        self.entry(id, entry);
                        if group != Group::All {
                            self.record(outside, None);
                        }
                    }
                }
            }
            // A sample session measures its processes: their names and initial calls label
            // the samples, and their calls, all processes together, are the call counts.
            if snapshot.samples.is_some() {
                for (i, process) in snapshot.processes.iter().enumerate() {
                    let Some(pid) = self.ids.pid(i) else {
                        continue;
                    };
                    self.record(pid, Some(process));
                    for f in process.functions.iter().filter(|f| f.calls > 0) {
                        let entry = Entry {
                            group: Group::All,
                            calls: f.calls,
                            measurement: f.calls,
                            bytes: 0,
                            blocks: 0,
                        };
                        self.entry(f.id, entry);
                    }
                }
            }
            return;
        }
        self.reserve(snapshot);
        for (i, process) in snapshot.processes.iter().enumerate() {
            let Some(pid) = self.ids.pid(i) else {
                continue;
            };
            let pid = self.group_of(pid);
            let mut seen = false;
            for f in &process.functions {
                if f.calls == 0 && f.time_ns == 0 && f.words == 0 {
                    continue;
                }
                // An index per figure once its function is resolved, not a lookup.
                let Some(at) = self.trace_index(f.id) else {
                    continue;
                };
                seen = true;
                let entry = Entry {
                    group: Group::Process(pid),
                    calls: f.calls,
                    measurement: if memory { f.words } else { f.time_ns },
                    bytes: if memory { f.bytes } else { 0 },
                    blocks: if memory { f.blocks } else { 0 },
                };
                self.entry_at(at, entry);
            }
            if self.trace_type == TraceType::CallTime {
                for p in process.percentiles.iter().filter(|p| p.calls > 0) {
                    if let Some(function) = self.kept(p.function) {
                        let p = percentiles(Group::Process(pid), function.clone(), p);
                        self.percentiles.push(p);
                    }
                }
            }
            if seen {
                self.record(pid, Some(process));
            }
        }
        // A snapshot of an older runtime: percentiles over every process.
        if self.trace_type == TraceType::CallTime {
            for p in snapshot.percentiles.iter().filter(|p| p.calls > 0) {
                if let Some(function) = self.kept(p.function) {
                    let p = percentiles(Group::All, function.clone(), p);
                    self.percentiles.push(p);
                }
            }
        }
        if snapshot.types.call_tree {
            self.add_tree(snapshot);
        }
        self.add_events(snapshot);
    }

    /// Adds `snapshot`'s event logs, leaving out the events of left-out functions.
    fn add_events(&mut self, snapshot: &Snapshot) {
        for (i, process) in snapshot.processes.iter().enumerate() {
            let Some(pid) = self.ids.pid(i) else {
                continue;
            };
            if process.events.is_empty() && process.events_dropped == 0 {
                continue;
            }
            // A thread's timeline is its own, also where its figures are its node's.
            self.record(pid, Some(process));
            let mut events = Vec::with_capacity(process.events.len());
            for e in &process.events {
                let Some((function, false)) = self.table_index(e.function) else {
                    continue;
                };
                events.push(Event {
                    ts_ns: e.ts_ns.saturating_add(self.events_offset),
                    function,
                    kind: if e.enter {
                        EventKind::Enter
                    } else {
                        EventKind::Leave
                    },
                });
            }
            self.event_logs.push(EventLog {
                group: Group::Process(pid),
                events,
                dropped: process.events_dropped,
            });
        }
    }

    /// Unites `snapshot`'s call paths with those so far and adds its processes' figures.
    fn add_tree(&mut self, snapshot: &Snapshot) {
        let memory = self.trace_type == TraceType::CallMemory;
        // Per path of the snapshot: its node here, and whether its function is left out.
        let mut here: Vec<Option<(u32, bool)>> = Vec::with_capacity(snapshot.paths.len());
        for path in &snapshot.paths {
            let Some((f, excluded)) = self.table_index(path.function) else {
                here.push(None);
                continue;
            };
            let parent = match path.parent {
                None => None,
                Some(p) => match here.get(p as usize) {
                    Some(Some((node, _))) => Some(*node),
                    _ => {
                        here.push(None); // a parent after its child: not a path
                        continue;
                    }
                },
            };
            let node = self.tree.node(parent, f);
            here.push(Some((node, excluded)));
        }
        for (i, process) in snapshot.processes.iter().enumerate() {
            let Some(pid) = self.ids.pid(i) else {
                continue;
            };
            let pid = self.group_of(pid);
            for m in &process.paths {
                let Some(Some((node, false))) = here.get(m.id as usize).copied() else {
                    continue;
                };
                if m.calls == 0 && m.time_ns == 0 && m.words == 0 {
                    continue;
                }
                self.path_entries.push(PathEntry {
                    group: Group::Process(pid),
                    node,
                    calls: m.calls,
                    measurement: if memory { m.words } else { m.time_ns },
                    bytes: if memory { m.bytes } else { 0 },
                    blocks: if memory { m.blocks } else { 0 },
                });
            }
        }
    }

    fn finish(mut self, snapshots: &[Snapshot]) -> Profile {
        // In group order already, each group once ([`Builder::entry_at`]), but for those
        // marked: a pass over those only, not over every entry.
        for (f, _) in self
            .functions
            .iter_mut()
            .zip(&self.disordered)
            .filter(|d| *d.1)
        {
            f.entries.sort_by_key(|e| e.group);
            f.entries.dedup_by(|later, first| {
                later.group == first.group && {
                    add_entry(first, later);
                    true
                }
            });
        }
        // Source order: file, then line.
        self.functions.sort_by(|a, b| {
            (&a.function.file, a.function.line, &a.function.name).cmp(&(
                &b.function.file,
                b.function.line,
                &b.function.name,
            ))
        });
        // Stable: of a process recorded more than once, its first record is kept.
        self.processes.sort_by_cached_key(|p| p.pid);
        self.processes.dedup_by_key(|p| p.pid);
        self.path_entries.sort_by_key(|e| (e.group, e.node));
        // The threads outside processes of a node, one group for call_memory: each path once.
        self.path_entries.dedup_by(|later, first| {
            if (later.group, later.node) != (first.group, first.node) {
                return false;
            }
            first.calls = first.calls.saturating_add(later.calls);
            first.measurement = first.measurement.saturating_add(later.measurement);
            first.bytes = first.bytes.saturating_add(later.bytes);
            first.blocks = first.blocks.saturating_add(later.blocks);
            true
        });
        let mut profile = Profile::new(self.trace_type, self.functions);
        // By process (stable: each process's in the order its session gave them).
        self.percentiles.sort_by_key(|p| p.group);
        profile.percentiles = self.percentiles;
        profile.processes = self.processes;
        self.event_logs.sort_by_key(|l| l.group);
        profile.event_logs = self.event_logs;
        let (samples, names) = self.samples.finish();
        profile.samples = samples;
        // A process a wall sample saw under a registered name is known by it.
        for p in &mut profile.processes {
            if p.name.is_none() {
                p.name = names.get(&p.pid).cloned();
            }
        }
        // Processes seen only in samples (a wall sample of a process that made no traced
        // call) have a record too. The records are in pid order: a binary search finds those
        // that have one.
        let mut seen = std::collections::HashSet::new();
        let mut extra = Vec::new();
        for s in &profile.samples.samples {
            if let Some(pid) = s.pid
                && profile
                    .processes
                    .binary_search_by_key(&pid, |p| p.pid)
                    .is_err()
                && seen.insert(pid)
            {
                extra.push(ProcessRecord {
                    pid,
                    name: names.get(&pid).cloned(),
                    initial_call: String::new(),
                    run: 0,
                });
            }
        }
        if !extra.is_empty() {
            profile.processes.extend(extra);
            profile.processes.sort_by_key(|p| p.pid);
        }
        let (function_table, nodes) = self.tree.into_parts();
        profile.function_table = function_table;
        profile.call_tree = CallTree {
            nodes,
            entries: self.path_entries,
        };
        profile.meta.runs.push(Run {
            program: String::new(),
            started_unix_ms: 0,
            duration_ns: 0,
            nodes: snapshots.iter().map(|s| s.node).collect(),
        });
        profile
    }
}

/// Adds the figures of `more` to `into`.
fn add_entry(into: &mut Entry, more: &Entry) {
    into.calls = into.calls.saturating_add(more.calls);
    into.measurement = into.measurement.saturating_add(more.measurement);
    into.bytes = into.bytes.saturating_add(more.bytes);
    into.blocks = into.blocks.saturating_add(more.blocks);
}

/// The percentiles of `group` in `function`, as a snapshot holds them.
fn percentiles(group: Group, function: Function, p: &SnapshotPercentiles) -> Percentiles {
    Percentiles {
        group,
        function,
        calls: p.calls,
        p50_ns: p.p50_ns,
        p90_ns: p.p90_ns,
        p99_ns: p.p99_ns,
        max_ns: p.max_ns,
    }
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
        let mut builder = Builder {
            trace_type,
            exclude,
            functions: Vec::new(),
            disordered: Vec::new(),
            by_function: HashMap::new(),
            ids: SnapshotIds::default(),
            processes: Vec::new(),
            percentiles: Vec::new(),
            tree: TreeTable::default(),
            path_entries: Vec::new(),
            event_logs: Vec::new(),
            events_offset: 0,
            samples: crate::samples::SampleBuilder::default(),
        };
        // Event times count from each session's opening: line the nodes up on the earliest.
        let origin = snapshots
            .iter()
            .filter(|s| s.processes.iter().any(|p| !p.events.is_empty()))
            .map(|s| s.opened_unix_ns)
            .min()
            .unwrap_or(0);
        for snapshot in snapshots {
            builder.events_offset = snapshot.opened_unix_ns.saturating_sub(origin);
            builder.add(snapshot);
        }
        builder.finish(snapshots)
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
