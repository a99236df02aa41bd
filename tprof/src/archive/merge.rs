//! Merging: the runs of several profiles of one trace type, in one profile.
//!
//! Each input is folded into an accumulator that keys every figure by what it is about — a
//! function and a process, a call path and a process — so figures about the same thing add up
//! and the rest sits side by side. An input is checked before any of it is folded in, so an
//! input refused leaves the accumulator as it was.

use std::collections::{BTreeSet, HashMap};

use runtime::Pid;

use super::MergeError;
use crate::functions::{TreeTable, index32};
use crate::samples::SampleBuilder;
use crate::{
    CallTree, Entry, Event, EventLog, Function, FunctionTrace, Group, Meta, PathEntry, Percentiles,
    ProcessRecord, Profile, Run, TraceType,
};

/// Merges `profiles`, all of one trace type, into one profile holding all their runs.
///
/// - **Runs** are appended, in input order: the output's [`Meta::runs`] holds every input's
///   runs (an input without any counts as one run, of an unknown program). Each
///   [`ProcessRecord::run`] is offset by the number of runs before its input.
/// - **Processes of different runs stay apart**: the pids of the first input keep their node
///   numbers; each distinct node number of a later input is given a fresh one, not used by any
///   input before it (the smallest above every number used so far), in every pid of that input.
///   Each run's [`Run::nodes`] lists the node numbers its processes have in the output.
/// - **Figures** are summed per function and group: per process (which, with the pids apart,
///   keeps each run's own), and across runs for [`Group::All`] — so a call_count merge counts
///   every run's calls of a function. Functions come in the order they are first met; each
///   one's entries in group order, processes in pid order.
/// - **Call trees**: the function tables are united (each distinct function once) and the
///   call paths re-interned by (parent, function), so a path that several inputs have is one
///   node in the output, with each process's figures on it. An input without a call tree
///   (a `--flat` run) merged with one that has a call tree gives each of its functions as a
///   path of one frame, with that function's flat figures for each of its processes, so the
///   stack-shaped exports draw every run (as they draw a flat profile alone).
/// - **Event logs** are kept, every input's, as they were: each log's process renumbered as
///   the processes are, and its events' functions pointed into the united function table.
///   They are not combined (a pid of one input is never one of another's), only ordered by
///   process like the rest.
/// - **Samples** are kept, every input's, in input order: each input's sample sources (with
///   their threads and mappings) are appended, their runs offset as the processes' are and
///   their nodes renumbered as the pids are; the frames and stacks are united (a frame that
///   several inputs have, its function pointed into the united function table, is one frame
///   in the output, and so is a stack of the same frames), and each sample keeps its weight,
///   time and state, in the output's pids, sources, threads and stacks. An input with samples
///   merged with one without keeps both: the samples of the one as they were, the figures of
///   the other as without samples.
/// - **Percentiles** are per process and function, so each run keeps its own, renumbered as
///   the processes are. Those of every process together ([`Group::All`], from older
///   profiles) are **approximate after a merge**: `calls` is the sum and `max_ns` the
///   largest, exactly, but the durations themselves are not in the profiles, so p50, p90 and
///   p99 are each a calls-weighted choice among the inputs' values — the smallest input value
///   at which the inputs holding at most that value account for the percentile's share of the
///   calls. A function measured in one input only keeps its values as they were.
///
/// Merging one profile returns it unchanged.
///
/// # Errors
///
/// [`MergeError::Empty`] for no profile, [`MergeError::MixedTypes`] when the trace types
/// differ, [`MergeError::Inconsistent`] for a profile that contradicts itself (a process of a
/// run it does not have, a call path naming a function its table does not have, ...).
///
/// # Examples
///
/// ```
/// use tprof::archive::merge;
/// use tprof::{Entry, Function, FunctionTrace, Group, Profile, TraceType};
///
/// let run = |calls| {
///     let function = Function {
///         module: "app".into(),
///         name: "handle".into(),
///         arity: 1,
///         file: "src/app.rs".into(),
///         line: 3,
///     };
///     let entry = Entry { group: Group::All, calls, measurement: calls, bytes: 0, blocks: 0 };
///     Profile::new(TraceType::CallCount, vec![FunctionTrace { function, entries: vec![entry] }])
/// };
/// let merged = merge(&[run(2), run(5)]).unwrap();
/// assert_eq!(merged.function("handle").unwrap().entries[0].calls, 7);
/// assert_eq!(merged.meta.runs.len(), 2);
///
/// let err = merge(&[run(2), Profile::empty(TraceType::CallTime)]).unwrap_err();
/// assert!(err.to_string().contains("call_time"), "{err}");
/// ```
pub fn merge(profiles: &[Profile]) -> Result<Profile, MergeError> {
    match profiles {
        [] => Err(MergeError::Empty),
        [one] => Ok(one.clone()),
        [first, rest @ ..] => {
            let mut acc = Acc::new(first);
            acc.fold(first, 0)?;
            for (i, p) in rest.iter().enumerate() {
                acc.fold(p, i + 1)?;
            }
            Ok(acc.finish())
        }
    }
}

/// [`merge`], one input at a time: to report progress, or to read inputs one after another
/// without holding them all.
///
/// ```
/// use tprof::archive::Merger;
/// use tprof::{Profile, TraceType};
///
/// let mut merger = Merger::new(Profile::empty(TraceType::CallTime));
/// merger.add(Profile::empty(TraceType::CallTime)).unwrap();
/// assert!(merger.add(Profile::empty(TraceType::CallMemory)).is_err());
/// assert_eq!(merger.inputs(), 2);
/// assert_eq!(merger.finish().meta.runs.len(), 2);
/// ```
#[derive(Debug)]
pub struct Merger {
    /// The first input, until a second one comes (merging one profile returns it unchanged).
    first: Option<Profile>,
    acc: Acc,
    inputs: usize,
}

impl Merger {
    /// A merge that starts with `first`.
    pub fn new(first: Profile) -> Merger {
        Merger {
            acc: Acc::new(&first),
            first: Some(first),
            inputs: 1,
        }
    }

    /// Adds the next input.
    ///
    /// # Errors
    ///
    /// As [`merge`]: [`MergeError::MixedTypes`] when `profile` is not of the first profile's
    /// trace type, [`MergeError::Inconsistent`] when it (or, at the second input, the first
    /// one) contradicts itself. The merge goes on without it.
    pub fn add(&mut self, profile: Profile) -> Result<(), MergeError> {
        let index = self.inputs;
        self.acc.check_type(&profile, index)?;
        if let Some(first) = &self.first {
            self.acc.fold(first, 0)?;
            self.first = None;
        }
        self.acc.fold(&profile, index)?;
        self.inputs += 1;
        Ok(())
    }

    /// How many inputs were merged so far, the first one included.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// The merged profile.
    pub fn finish(self) -> Profile {
        match self.first {
            Some(first) => first,
            None => self.acc.finish(),
        }
    }
}

/// Adds `v` to `into`, saturating.
fn sum(into: &mut u64, v: u64) {
    *into = into.saturating_add(v);
}

/// What the inputs folded so far add up to.
#[derive(Debug)]
struct Acc {
    trace_type: TraceType,
    /// What the first input is, for the error of a mixed merge ([`super::profile_kind`]).
    first_kind: String,
    inputs: usize,
    functions: Vec<FunctionTrace>,
    function_index: HashMap<Function, usize>,
    /// (index in `functions`, group) → index in its entries.
    entry_index: HashMap<(usize, Group), usize>,
    /// Per function and group, each input's percentiles.
    percentiles: Vec<(Function, Group, Vec<Percentiles>)>,
    percentile_index: HashMap<(Function, Group), usize>,
    processes: Vec<ProcessRecord>,
    table: TreeTable,
    tree: Vec<PathEntry>,
    /// (group, node) → index in `tree`.
    tree_index: HashMap<(Group, u32), usize>,
    event_logs: Vec<EventLog>,
    samples: SampleBuilder,
    /// The flat figures of inputs without a call tree (in the output's pids): paths of one
    /// frame if another input has a call tree.
    flat_only: Vec<(Function, Vec<Entry>)>,
    /// Whether an input so far has a call tree.
    has_tree: bool,
    runs: Vec<Run>,
    /// Node numbers the pids of the inputs so far have.
    used_nodes: BTreeSet<u32>,
}

impl Acc {
    fn new(first: &Profile) -> Acc {
        Acc {
            trace_type: first.trace_type,
            first_kind: super::profile_kind(first),
            inputs: 0,
            functions: Vec::new(),
            function_index: HashMap::new(),
            entry_index: HashMap::new(),
            percentiles: Vec::new(),
            percentile_index: HashMap::new(),
            processes: Vec::new(),
            table: TreeTable::default(),
            tree: Vec::new(),
            tree_index: HashMap::new(),
            event_logs: Vec::new(),
            samples: SampleBuilder::default(),
            flat_only: Vec::new(),
            has_tree: false,
            runs: Vec::new(),
            used_nodes: BTreeSet::new(),
        }
    }

    fn check_type(&self, p: &Profile, index: usize) -> Result<(), MergeError> {
        if p.trace_type == self.trace_type {
            Ok(())
        } else {
            Err(MergeError::MixedTypes {
                first: self.trace_type,
                other: p.trace_type,
                index,
                first_kind: self.first_kind.clone(),
                other_kind: super::profile_kind(p),
            })
        }
    }

    /// A node number no input so far used.
    fn fresh_node(&mut self) -> u32 {
        let n = match self.used_nodes.last() {
            None => 1,
            Some(&last) => last
                .checked_add(1)
                .or_else(|| (1..=u32::MAX).find(|n| !self.used_nodes.contains(n)))
                .unwrap_or(0),
        };
        self.used_nodes.insert(n);
        n
    }

    /// Folds in input `index`.
    fn fold(&mut self, p: &Profile, index: usize) -> Result<(), MergeError> {
        self.check_type(p, index)?;
        check(p, index)?;

        // Node numbers: the first input keeps its own, each later one gets fresh ones.
        let mut seen: BTreeSet<u32> = BTreeSet::new();
        seen.extend(p.processes.iter().map(|r| r.pid.node()));
        seen.extend(groups(p).filter_map(|g| match g {
            Group::Process(pid) => Some(pid.node()),
            Group::All => None,
        }));
        seen.extend(p.meta.runs.iter().flat_map(|r| r.nodes.iter().copied()));
        seen.extend(p.samples.sources.iter().map(|s| s.node));
        seen.extend(
            p.samples
                .samples
                .iter()
                .filter_map(|s| s.pid.map(Pid::node)),
        );
        let node_map: HashMap<u32, u32> = if self.inputs == 0 {
            self.used_nodes.extend(&seen);
            seen.iter().map(|&n| (n, n)).collect()
        } else {
            seen.iter().map(|&n| (n, self.fresh_node())).collect()
        };
        let map_node = |n: u32| node_map.get(&n).copied().unwrap_or(n);
        let map_pid = |pid: Pid| Pid::from_parts(map_node(pid.node()), pid.index(), pid.serial());
        let map_group = |g: Group| match g {
            Group::All => Group::All,
            Group::Process(pid) => Group::Process(map_pid(pid)),
        };

        // Runs, and their processes.
        let base = index32(self.runs.len());
        let all_nodes: BTreeSet<u32> = seen.iter().map(|&n| map_node(n)).collect();
        if p.meta.runs.is_empty() {
            self.runs.push(Run {
                nodes: all_nodes.into_iter().collect(),
                ..Run::default()
            });
        } else {
            let single = p.meta.runs.len() == 1;
            for (r, run) in p.meta.runs.iter().enumerate() {
                let mut nodes: BTreeSet<u32> = run.nodes.iter().map(|&n| map_node(n)).collect();
                if single {
                    nodes.extend(&all_nodes);
                } else {
                    nodes.extend(
                        p.processes
                            .iter()
                            .filter(|pr| pr.run as usize == r)
                            .map(|pr| map_node(pr.pid.node())),
                    );
                    nodes.extend(
                        p.samples
                            .sources
                            .iter()
                            .filter(|s| s.run as usize == r)
                            .map(|s| map_node(s.node)),
                    );
                }
                self.runs.push(Run {
                    program: run.program.clone(),
                    started_unix_ms: run.started_unix_ms,
                    duration_ns: run.duration_ns,
                    nodes: nodes.into_iter().collect(),
                    run_queue: run.run_queue,
                });
            }
        }
        for pr in &p.processes {
            self.processes.push(ProcessRecord {
                pid: map_pid(pr.pid),
                name: pr.name.clone(),
                initial_call: pr.initial_call.clone(),
                run: pr.run.saturating_add(base),
            });
        }

        // Flat figures, summed per (function, group).
        self.has_tree |= !p.call_tree.is_empty();
        if p.call_tree.is_empty() {
            for ft in p.functions.iter().filter(|ft| !ft.entries.is_empty()) {
                let entries = ft
                    .entries
                    .iter()
                    .map(|e| Entry {
                        group: map_group(e.group),
                        ..*e
                    })
                    .collect();
                self.flat_only.push((ft.function.clone(), entries));
            }
        }
        for ft in &p.functions {
            let fi = *self
                .function_index
                .entry(ft.function.clone())
                .or_insert_with(|| {
                    self.functions.push(FunctionTrace {
                        function: ft.function.clone(),
                        entries: Vec::new(),
                    });
                    self.functions.len() - 1
                });
            let entries = &mut self.functions[fi].entries;
            for e in &ft.entries {
                let group = map_group(e.group);
                match self.entry_index.get(&(fi, group)) {
                    Some(&k) => {
                        let into = &mut entries[k];
                        sum(&mut into.calls, e.calls);
                        sum(&mut into.measurement, e.measurement);
                        sum(&mut into.bytes, e.bytes);
                        sum(&mut into.blocks, e.blocks);
                    }
                    None => {
                        self.entry_index.insert((fi, group), entries.len());
                        entries.push(Entry { group, ..*e });
                    }
                }
            }
        }

        // Per process, each input's own (its pids are apart from the others'); those of every
        // process together (older profiles) combined over the inputs.
        for pc in &p.percentiles {
            let group = map_group(pc.group);
            let k = *self
                .percentile_index
                .entry((pc.function.clone(), group))
                .or_insert_with(|| {
                    self.percentiles
                        .push((pc.function.clone(), group, Vec::new()));
                    self.percentiles.len() - 1
                });
            self.percentiles[k].2.push(pc.clone());
        }

        // Call trees: one function table, paths re-interned by (parent, function).
        let table_map: Vec<u32> = p
            .function_table
            .iter()
            .map(|f| self.table.function(f))
            .collect();
        let mut path_map: Vec<u32> = Vec::with_capacity(p.call_tree.nodes.len());
        for n in &p.call_tree.nodes {
            // `check` saw that the parent comes before and the function is in the table.
            let parent = n.parent.map(|q| path_map[q as usize]);
            let function = table_map[n.function as usize];
            path_map.push(self.table.node(parent, function));
        }
        for e in &p.call_tree.entries {
            let group = map_group(e.group);
            let node = path_map[e.node as usize];
            match self.tree_index.get(&(group, node)) {
                Some(&k) => {
                    let into = &mut self.tree[k];
                    sum(&mut into.calls, e.calls);
                    sum(&mut into.measurement, e.measurement);
                    sum(&mut into.bytes, e.bytes);
                    sum(&mut into.blocks, e.blocks);
                }
                None => {
                    self.tree_index.insert((group, node), self.tree.len());
                    self.tree.push(PathEntry { group, node, ..*e });
                }
            }
        }

        // Event logs: kept as they are, in the output's pids and function table.
        for log in &p.event_logs {
            self.event_logs.push(EventLog {
                group: map_group(log.group),
                events: log
                    .events
                    .iter()
                    // `check` saw that every function is in the table.
                    .map(|e| Event {
                        function: table_map[e.function as usize],
                        ..*e
                    })
                    .collect(),
                dropped: log.dropped,
            });
        }

        // Samples: kept as they are, in the output's runs, pids and function table.
        self.samples
            .add_set(&p.samples, base, &table_map, &map_node, &map_pid);

        self.inputs += 1;
        Ok(())
    }

    /// Adds the figures of the flat inputs as paths of one frame, if an input has a call tree.
    fn add_flat_paths(&mut self) {
        if !self.has_tree {
            return;
        }
        for (function, entries) in std::mem::take(&mut self.flat_only) {
            let f = self.table.function(&function);
            let node = self.table.node(None, f);
            for e in entries {
                let at = *self.tree_index.entry((e.group, node)).or_insert_with(|| {
                    self.tree.push(PathEntry {
                        group: e.group,
                        node,
                        calls: 0,
                        measurement: 0,
                        bytes: 0,
                        blocks: 0,
                    });
                    self.tree.len() - 1
                });
                let into = &mut self.tree[at];
                sum(&mut into.calls, e.calls);
                sum(&mut into.measurement, e.measurement);
                sum(&mut into.bytes, e.bytes);
                sum(&mut into.blocks, e.blocks);
            }
        }
    }

    fn finish(mut self) -> Profile {
        self.add_flat_paths();
        let mut functions = self.functions;
        for f in &mut functions {
            f.entries.sort_by_key(|e| e.group);
        }
        let mut processes = self.processes;
        processes.sort_by_key(|p| p.pid);
        let mut entries = self.tree;
        entries.sort_by_key(|e| (e.group, e.node));
        let mut event_logs = self.event_logs;
        event_logs.sort_by_key(|l| l.group);
        let (function_table, nodes) = self.table.into_parts();
        Profile {
            trace_type: self.trace_type,
            functions,
            percentiles: {
                let mut percentiles: Vec<Percentiles> = self
                    .percentiles
                    .into_iter()
                    .map(|(function, group, parts)| combine(function, group, &parts))
                    .collect();
                percentiles.sort_by_key(|p| p.group);
                percentiles
            },
            processes,
            function_table,
            call_tree: CallTree { nodes, entries },
            event_logs,
            meta: Meta { runs: self.runs },
            // A view preference, not data: not kept in an archive.
            outside_in_tables: false,
            samples: self.samples.finish().0,
        }
    }
}

/// Every group `p` has figures or an event log for.
fn groups(p: &Profile) -> impl Iterator<Item = Group> + '_ {
    p.functions
        .iter()
        .flat_map(|f| f.entries.iter().map(|e| e.group))
        .chain(p.call_tree.entries.iter().map(|e| e.group))
        .chain(p.event_logs.iter().map(|l| l.group))
}

/// Checks that input `index` does not contradict itself where folding relies on it.
fn check(p: &Profile, index: usize) -> Result<(), MergeError> {
    let bad = |what: String| Err(MergeError::Inconsistent { index, what });
    let runs = p.meta.runs.len().max(1);
    for pr in &p.processes {
        if pr.run as usize >= runs {
            return bad(format!(
                "process {} belongs to run {}, but the profile has {runs} run(s)",
                pr.pid, pr.run
            ));
        }
    }
    let tree = &p.call_tree;
    for (i, n) in tree.nodes.iter().enumerate() {
        if let Some(q) = n.parent
            && q as usize >= i
        {
            return bad(format!(
                "call path {i} extends path {q}, which does not come before it"
            ));
        }
        if n.function as usize >= p.function_table.len() {
            return bad(format!(
                "call path {i} names function {}, but the function table has {}",
                n.function,
                p.function_table.len()
            ));
        }
    }
    for e in &tree.entries {
        if e.node as usize >= tree.nodes.len() {
            return bad(format!(
                "figures of {} are on call path {}, but there are {} paths",
                e.group,
                e.node,
                tree.nodes.len()
            ));
        }
    }
    for log in &p.event_logs {
        if let Some(e) = log
            .events
            .iter()
            .find(|e| e.function as usize >= p.function_table.len())
        {
            return bad(format!(
                "an event of {} names function {}, but the function table has {}",
                log.group,
                e.function,
                p.function_table.len()
            ));
        }
    }
    for (i, s) in p.samples.sources.iter().enumerate() {
        if s.run as usize >= runs {
            return bad(format!(
                "sample source {i} belongs to run {}, but the profile has {runs} run(s)",
                s.run
            ));
        }
    }
    if let Some(what) = super::samples::contradiction(&p.samples, p.function_table.len()) {
        return bad(what);
    }
    Ok(())
}

/// One function's percentiles in `group` from each input's: see [`merge`].
fn combine(function: Function, group: Group, parts: &[Percentiles]) -> Percentiles {
    let calls = parts.iter().fold(0u64, |a, p| a.saturating_add(p.calls));
    let max_ns = parts.iter().map(|p| p.max_ns).max().unwrap_or(0);
    let pick = |share: u128, value: fn(&Percentiles) -> u64| -> u64 {
        let mut values: Vec<(u64, u64)> = parts.iter().map(|p| (value(p), p.calls)).collect();
        values.sort_unstable();
        let need = u128::from(calls) * share;
        let mut seen = 0u128;
        for &(v, c) in &values {
            seen += u128::from(c);
            if seen * 100 >= need {
                return v;
            }
        }
        values.last().map_or(0, |&(v, _)| v)
    };
    Percentiles {
        group,
        function,
        calls,
        p50_ns: pick(50, |p| p.p50_ns),
        p90_ns: pick(90, |p| p.p90_ns),
        p99_ns: pick(99, |p| p.p99_ns),
        max_ns,
    }
}
