//! The viewer's data for a trace profile (call_count, call_time, call_memory), made from the
//! profile as the page is written rather than held whole: what is kept is the function list,
//! the distinct call paths, an index of the processes, and each stack's call path (4 bytes a
//! stack). A page of 100,000 processes takes about a third of its profile's size in memory
//! while it is written, rather than five times it.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use super::{
    Figures, FunctionEntry, FunctionView, Lists, PercentilesView, ProcessView, TimelineView,
};
use super::{ViewData, compact};
use crate::export::stacks::Stacks;
use crate::export::timeline::{self, Log, frames};
use crate::export::weight::{unit, weight};
use crate::profile::Labels;
use crate::{Function, Group, ProcessRecord, Profile, TraceType};

/// Gives each distinct function one index, found by its address first (the stacks, rows and
/// logs point into the profile), by its value the first time an address is seen.
#[derive(Default)]
struct Functions<'a> {
    list: Vec<FunctionEntry<'a>>,
    by_value: HashMap<&'a Function, usize>,
    by_address: HashMap<*const Function, usize>,
}

impl<'a> Functions<'a> {
    fn of(&mut self, f: &'a Function) -> usize {
        if let Some(&i) = self.by_address.get(&std::ptr::from_ref(f)) {
            return i;
        }
        let i = *self.by_value.entry(f).or_insert_with(|| {
            self.list.push(FunctionEntry::Traced(FunctionView {
                function: f,
                mfa: f.mfa(),
            }));
            self.list.len() - 1
        });
        self.by_address.insert(std::ptr::from_ref(f), i);
        i
    }

    /// The index `f` was given (0 if none: every function written was given one first).
    fn get(&self, f: &Function) -> usize {
        self.by_address
            .get(&std::ptr::from_ref(f))
            .or_else(|| self.by_value.get(f))
            .copied()
            .unwrap_or(0)
    }
}

/// The lists of a trace profile's page, read from it as they are written.
struct Traced<'a> {
    profile: &'a Profile,
    stacks: Stacks<'a>,
    /// Each stack's call path, in the stacks' order: an index into the page's paths.
    stack_paths: Vec<u32>,
    /// The processes (groups) with a stack, a flat row, a log or percentiles, in order, each
    /// with its record.
    groups: Vec<(Group, Option<&'a ProcessRecord>)>,
    /// Each group's index in `groups`.
    index: HashMap<Group, usize>,
    labels: Labels,
    functions: Functions<'a>,
    /// The flat rows summed from the stacks, for a profile without flat figures.
    summed: Option<Vec<Figures>>,
    logs: BTreeMap<Group, Log<'a>>,
    origin: u64,
}

/// The viewer's data for `profile`, which has no samples.
pub(super) fn view_data(profile: &Profile) -> ViewData<'_> {
    let stacks = Stacks::of(profile);
    let logs = timeline::logs(profile);
    // The groups that have a stack, a flat row, a log or percentiles.
    let mut index: HashMap<Group, usize> = HashMap::new();
    stacks.for_each(|s| {
        index.entry(s.group).or_default();
    });
    let entries = profile.functions.iter().flat_map(|f| &f.entries);
    for group in entries
        .map(|e| e.group)
        .chain(logs.keys().copied())
        .chain(profile.percentiles.iter().map(|p| p.group))
    {
        index.entry(group).or_default();
    }
    let records: HashMap<runtime::Pid, &ProcessRecord> =
        profile.processes.iter().map(|p| (p.pid, p)).collect();
    let mut groups: Vec<(Group, Option<&ProcessRecord>)> = index
        .keys()
        .map(|&group| match group {
            Group::Process(pid) => (group, records.get(&pid).copied()),
            Group::All => (group, None),
        })
        .collect();
    drop(records);
    groups.sort_unstable_by_key(|&(group, _)| group);
    for (i, (group, _)) in groups.iter().enumerate() {
        index.insert(*group, i);
    }
    // The function list, in the order the stacks, rows, percentiles and logs name them; each
    // stack's path.
    let mut functions = Functions::default();
    let mut paths = compact::Paths::default();
    let mut stack_paths = Vec::new();
    let mut frame_buffer = Vec::new();
    // Without flat figures, each function's are the sum over the paths that end in it:
    // `(process, function, [calls, measurement, bytes, blocks])`.
    let mut sums: Vec<(usize, usize, [u64; 4])> = Vec::new();
    let flat = !profile.functions.is_empty();
    stacks.for_each(|s| {
        frame_buffer.clear();
        frame_buffer.extend(s.frames.iter().map(|f| functions.of(f)));
        let path = paths.of(&frame_buffer);
        stack_paths.push(u32::try_from(path).unwrap_or(u32::MAX));
        if let (false, Some(&last)) = (flat, frame_buffer.last()) {
            sums.push((
                index[&s.group],
                last,
                [s.calls, s.measurement, s.bytes, s.blocks],
            ));
        }
    });
    for f in &profile.functions {
        if !f.entries.is_empty() {
            functions.of(&f.function);
        }
    }
    let summed = (!flat).then(|| summed_rows(profile.trace_type, sums));
    for p in &profile.percentiles {
        functions.of(&p.function);
    }
    for log in logs.values() {
        for e in log.events.iter() {
            if e.kind == crate::EventKind::Enter
                && let Some(f) = profile.function_table.get(e.function as usize)
            {
                functions.of(f);
            }
        }
    }
    let list = std::mem::take(&mut functions.list);
    let traced = Traced {
        profile,
        stacks,
        stack_paths,
        groups,
        index,
        labels: profile.labels(),
        functions,
        summed,
        logs,
        origin: timeline::origin(profile),
    };
    ViewData {
        trace_type: profile.trace_type,
        unit: unit(profile.trace_type),
        call_tree: !profile.call_tree.is_empty(),
        runs: &profile.meta.runs,
        functions: list,
        paths,
        lists: Box::new(traced),
        samples: None,
        listings: None,
        note: None,
    }
}

/// A flat row's value and words (tprof's measurement of call_memory, else 0), from its
/// measurement and bytes.
fn value_words(trace_type: TraceType, measurement: u64, bytes: u64) -> (u64, Option<u64>) {
    if trace_type == TraceType::CallMemory {
        (bytes, Some(measurement))
    } else {
        (measurement, Some(0))
    }
}

/// The flat rows of `sums` (each path's figures by its process and last function), summed
/// per process and function, in that order.
fn summed_rows(trace_type: TraceType, mut sums: Vec<(usize, usize, [u64; 4])>) -> Vec<Figures> {
    sums.sort_by_key(|&(process, function, _)| (process, function));
    let mut rows: Vec<Figures> = Vec::new();
    let mut last: Option<(usize, usize, [u64; 4])> = None;
    let mut row =
        |(process, function, [calls, measurement, bytes, blocks]): (usize, usize, [u64; 4])| {
            let (value, words) = value_words(trace_type, measurement, bytes);
            rows.push(Figures {
                process,
                path: -1,
                function: Some(function),
                calls,
                value,
                total: None,
                words,
                bytes,
                blocks,
            });
        };
    for (process, function, figures) in sums {
        match &mut last {
            Some((p, f, sum)) if *p == process && *f == function => {
                for (into, add) in sum.iter_mut().zip(figures) {
                    *into = into.saturating_add(add);
                }
            }
            _ => {
                if let Some(done) = last.replace((process, function, figures)) {
                    row(done);
                }
            }
        }
    }
    if let Some(done) = last {
        row(done);
    }
    rows
}

impl Lists for Traced<'_> {
    fn processes(&self, each: &mut dyn FnMut(&ProcessView<'_>)) {
        for &(group, record) in &self.groups {
            each(&ProcessView {
                id: Cow::Owned(group.to_string()),
                label: self.labels.get(group),
                name: record.and_then(|r| r.name.as_deref()).map(Cow::Borrowed),
                initial_call: Cow::Borrowed(record.map_or("", |r| r.initial_call.as_str())),
                run: record.map(|r| r.run),
                members: 1,
            });
        }
    }

    fn stacks(&self, each: &mut dyn FnMut(&Figures)) {
        let mut paths = self.stack_paths.iter();
        let trace_type = self.profile.trace_type;
        self.stacks.for_each(|s| {
            let path = paths.next().copied().unwrap_or(u32::MAX);
            each(&Figures {
                process: self.index[&s.group],
                path: i64::from(path),
                function: None,
                calls: s.calls,
                value: weight(trace_type, s),
                total: None,
                words: None,
                bytes: s.bytes,
                blocks: s.blocks,
            });
        });
    }

    fn rows(&self, each: &mut dyn FnMut(&Figures)) {
        if let Some(summed) = &self.summed {
            summed.iter().for_each(each);
            return;
        }
        let trace_type = self.profile.trace_type;
        for f in &self.profile.functions {
            let function = self.functions.get(&f.function);
            for e in &f.entries {
                let (value, words) = value_words(trace_type, e.measurement, e.bytes);
                each(&Figures {
                    process: self.index[&e.group],
                    path: -1,
                    function: Some(function),
                    calls: e.calls,
                    value,
                    total: None,
                    words,
                    bytes: e.bytes,
                    blocks: e.blocks,
                });
            }
        }
    }

    fn percentiles(&self, each: &mut dyn FnMut(&PercentilesView)) {
        for p in &self.profile.percentiles {
            each(&PercentilesView {
                process: self.index[&p.group],
                function: self.functions.get(&p.function),
                calls: p.calls,
                p50_ns: p.p50_ns,
                p90_ns: p.p90_ns,
                p99_ns: p.p99_ns,
                max_ns: p.max_ns,
            });
        }
    }

    fn timelines(&self, each: &mut dyn FnMut(&TimelineView)) {
        for (group, log) in &self.logs {
            each(&TimelineView {
                process: self.index[group],
                dropped: log.dropped,
                frames: frames(self.profile, &log.events, self.origin)
                    .iter()
                    .map(|f| {
                        let function = self.functions.get(f.function);
                        (function, f.start, f.end, f.depth, u8::from(f.cut_short))
                    })
                    .collect(),
            });
        }
    }
}
