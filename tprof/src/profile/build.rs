//! Reading trace sessions' snapshots into a [`Profile`] ([`Profile::from_snapshots`]): each
//! snapshot's functions resolved once, its processes' figures added to one list per
//! function (kept in group order as they come), its call paths united with those so far, its
//! event logs and samples taken in; then everything sorted and united once, at the end.

use std::collections::HashMap;

use runtime::Pid;
use runtime::trace::{Snapshot, SnapshotPercentiles};

use super::{
    CallTree, Entry, Event, EventKind, EventLog, FunctionTrace, Group, OUTSIDE_PROCESSES,
    PathEntry, Percentiles, ProcessRecord, Profile, Run, TraceType,
};
use crate::functions::{Function, TreeTable};

mod prefetch;

/// [`Profile::from_snapshots`]: the snapshots of one run's nodes as a `trace_type` profile,
/// leaving out functions of the modules in `exclude` (and their submodules).
pub(super) fn from_snapshots(
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
            run_queue: run_queue_of_one_program(snapshots.iter().map(|s| s.run_queue)),
        });
        profile
    }
}

/// The run-queue figures of one program's sessions (one per node: each read every thread of
/// the program, over about the same time): the widest, not their sum, which would count each
/// thread once per node.
pub(crate) fn run_queue_of_one_program(
    readings: impl Iterator<Item = Option<runtime::trace::SnapshotRunQueue>>,
) -> Option<runtime::trace::SnapshotRunQueue> {
    readings
        .flatten()
        .max_by_key(|r| r.ran_ns.saturating_add(r.waited_ns))
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
