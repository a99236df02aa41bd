//! The viewer's data for a sampled profile (the mapping: the parent module's docs, *Sampled
//! profiles*).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::{
    Figures, FunctionEntry, FunctionView, Lists, PercentilesView, ProcessView, TimelineView,
    ViewData,
};
use crate::export::sampled::{self, Dropped, Root};
use crate::listing::{LineFigures, ListOptions, Routine, SourceState, TracedByName, line_frame};
use crate::sample_report::view::is_plumbing;
use crate::samples::{SampleFrame, SamplerKind};
use crate::{Group, Profile};

/// A native frame, or a wall sample's state, in the viewer's function list: named as a
/// function (`module` is the name's path, for its colour), with `native` set.
#[derive(Serialize)]
pub(super) struct NativeView {
    module: String,
    name: String,
    file: String,
    line: u32,
    mfa: String,
    native: bool,
    /// Plumbing (the runtime's, tokio's, std's, system libraries': see
    /// [`Native::User`](crate::sample_report::Native::User)), which the viewer folds by default;
    /// left out when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    plumbing: bool,
}

/// What was sampled, for the page's header.
#[derive(Serialize)]
pub(super) struct SamplesView {
    /// `cpu samples at 999 Hz asked (412 per CPU-second taken)`.
    what: String,
    /// What the values are: `nanoseconds of CPU time`, ...
    measure: String,
    /// How many samples were taken.
    count: u64,
    /// How many were dropped because the sample buffer was full (their weight, rounded).
    dropped: u64,
    /// The nanoseconds those stood for.
    dropped_ns: u64,
    /// The sentence that says so, when any were.
    #[serde(skip_serializing_if = "Option::is_none")]
    dropped_note: Option<String>,
    /// What the CPU samples could see (the header prints its summary lines and warnings),
    /// when their sources carry it.
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu: Option<crate::samples::CpuTruth>,
    /// The filter controls as the command set them (none: the page's defaults).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) filters: Option<FiltersView>,
}

/// The page's filter controls as [`write_with`](super::write_with) sets them: the focus and
/// hide boxes (`None`: empty) and the plumbing checkbox.
#[derive(Serialize)]
pub(super) struct FiltersView {
    pub(super) focus: Option<String>,
    pub(super) hide: Option<String>,
    pub(super) plumbing: bool,
}

/// The viewer's data for `profile`'s samples.
pub(super) fn view_data(profile: &Profile) -> ViewData<'_> {
    let set = &profile.samples;
    let kinds = sampled::samplers(set);
    let labels = profile.labels();
    let table = sampled::stack_frames(set);
    let names: HashMap<runtime::Pid, &crate::ProcessRecord> =
        profile.processes.iter().map(|p| (p.pid, p)).collect();
    let mut functions = Entries::new(profile);
    let mut processes: Vec<ProcessView<'static>> = Vec::new();
    let mut process_index: HashMap<(bool, Root), usize> = HashMap::new();
    let mut stacks: Vec<Figures> = Vec::new();
    // Per process and function: samples with it on their stack, its own nanoseconds, and
    // those of the samples with it on their stack.
    let mut rows: BTreeMap<(usize, usize), (u64, f64, f64)> = BTreeMap::new();
    let mut path: Vec<usize> = Vec::new();
    let mut paths = super::compact::Paths::default();
    for s in sampled::summed(set) {
        let wall = s.sampler == SamplerKind::Wall;
        let process = *process_index.entry((wall, s.root)).or_insert_with(|| {
            let prefix = if kinds.len() > 1 {
                format!("{}: ", s.sampler)
            } else {
                String::new()
            };
            let record = match s.root {
                Root::Process(pid) => names.get(&pid).copied(),
                Root::Outside => None,
            };
            processes.push(ProcessView {
                id: match s.root {
                    Root::Process(pid) => Cow::Owned(Group::Process(pid).to_string()),
                    Root::Outside => Cow::Borrowed(sampled::OUTSIDE),
                },
                label: Cow::Owned(format!("{prefix}{}", s.root.label(&labels))),
                name: record.and_then(|r| r.name.clone()).map(Cow::Owned),
                initial_call: Cow::Owned(
                    record.map(|r| r.initial_call.clone()).unwrap_or_default(),
                ),
                run: record.map(|r| r.run),
                members: 1,
            });
            processes.len() - 1
        });
        path.clear();
        path.extend(
            sampled::frames_of(&table, s.stack)
                .iter()
                .map(|&f| functions.frame(f)),
        );
        if let Some(state) = s.state {
            path.push(functions.named(&sampled::state_frame(state)));
        }
        if let Some(&leaf) = path.last() {
            rows.entry((process, leaf)).or_default().1 += s.ns;
        }
        // Each function once per path, however often it recurs on it.
        let mut distinct = path.clone();
        distinct.sort_unstable();
        distinct.dedup();
        for f in distinct {
            let row = rows.entry((process, f)).or_default();
            row.0 += s.samples;
            row.2 += s.ns;
        }
        stacks.push(Figures {
            process,
            path: paths.of(&path),
            function: None,
            calls: s.samples,
            value: s.ns.round() as u64,
            total: None,
            words: None,
            bytes: 0,
            blocks: 0,
        });
    }
    let rows = rows
        .into_iter()
        .map(|((process, function), (samples, own, total))| Figures {
            process,
            path: -1,
            function: Some(function),
            calls: samples,
            value: own.round() as u64,
            total: Some(total.round() as u64),
            words: None,
            bytes: 0,
            blocks: 0,
        })
        .collect();
    let dropped = Dropped::of(set, None);
    let measures: Vec<String> = kinds
        .iter()
        .map(|k| {
            let unit = sampled::unit_of(*k).0;
            if kinds.len() > 1 {
                format!("{k}: {unit} of {}", sampled::measure(*k))
            } else {
                format!("{unit} of {}", sampled::measure(*k))
            }
        })
        .collect();
    let listings = listings(profile, &functions);
    ViewData {
        trace_type: profile.trace_type,
        unit: sampled::unit_of_all(&kinds).1,
        call_tree: true,
        runs: &profile.meta.runs,
        functions: functions.list,
        paths,
        lists: Box::new(Built {
            processes,
            stacks,
            rows,
        }),
        samples: Some(SamplesView {
            what: sampled::describe(set),
            measure: measures.join("; "),
            count: set.samples.len() as u64,
            dropped: dropped.count,
            dropped_ns: dropped.ns.round() as u64,
            dropped_note: dropped.note(),
            cpu: set.cpu_truth(),
            filters: None,
        }),
        listings,
        note: None,
    }
}

/// The lists of a sampled profile's page, made beforehand (they are as long as its distinct
/// stacks, not its samples).
struct Built {
    processes: Vec<ProcessView<'static>>,
    stacks: Vec<Figures>,
    rows: Vec<Figures>,
}

impl Lists for Built {
    fn processes(&self, each: &mut dyn FnMut(&ProcessView<'_>)) {
        self.processes.iter().for_each(each);
    }

    fn stacks(&self, each: &mut dyn FnMut(&Figures)) {
        self.stacks.iter().for_each(each);
    }

    fn rows(&self, each: &mut dyn FnMut(&Figures)) {
        self.rows.iter().for_each(each);
    }

    fn percentiles(&self, _: &mut dyn FnMut(&PercentilesView)) {}

    fn timelines(&self, _: &mut dyn FnMut(&TimelineView)) {}
}

/// The source listings of a sampled profile's functions, for the viewer.
#[derive(Serialize)]
pub(super) struct ListingsView {
    /// Whose samples: `cpu` or `wall`.
    sampler: SamplerKind,
    /// The columns (one: the sampler's nanoseconds).
    columns: Vec<crate::listing::Column>,
    /// The values of every sample, per column.
    totals: Vec<f64>,
    /// Each function's listing, with its entry in the function list.
    routines: Vec<RoutineView>,
}

/// One function's listing and its entry in the viewer's function list; values rounded to
/// whole units, each line `[line, flat, cum, text]`.
#[derive(Serialize)]
struct RoutineView {
    /// Its entry in the function list.
    entry: usize,
    file: Option<String>,
    source: SourceState,
    flat: Vec<f64>,
    cum: Vec<f64>,
    at_definition: Option<(u32, Vec<f64>)>,
    lines: Vec<LineView>,
}

/// A listed line as the viewer reads it: `[line, flat, cum, text]`.
type LineView = (u32, Vec<f64>, Vec<f64>, Option<String>);

impl RoutineView {
    fn new(entry: usize, routine: Routine) -> RoutineView {
        let round = |v: Vec<f64>| v.into_iter().map(f64::round).collect::<Vec<f64>>();
        RoutineView {
            entry,
            file: routine.file,
            source: routine.source,
            flat: round(routine.flat),
            cum: round(routine.cum),
            at_definition: routine.at_definition.map(|(line, v)| (line, round(v))),
            lines: routine
                .lines
                .into_iter()
                .map(|l| (l.line, round(l.flat), round(l.cum), l.text))
                .collect(),
        }
    }
}

/// The listing of every function of `profile`'s samples of one sampler (CPU when it has
/// any, else wall, else allocations), each tied to its entry of `entries`; `None` without samples. Relative
/// source paths are read from the current folder.
fn listings(profile: &Profile, entries: &Entries<'_>) -> Option<ListingsView> {
    let set = &profile.samples;
    let sampler = [SamplerKind::Cpu, SamplerKind::Wall, SamplerKind::Alloc]
        .into_iter()
        .find(|k| set.sources.iter().any(|s| s.sampler == *k))?;
    let traced = TracedByName::new(&profile.function_table);
    let mut entry_of: HashMap<(String, Option<String>), usize> = HashMap::new();
    for (frame, entry) in entries.of_frame.iter().enumerate() {
        if let Some(entry) = entry {
            let f = traced.merged(line_frame(
                set,
                &profile.function_table,
                crate::functions::index32(frame),
            ));
            entry_of.entry((f.function, f.file)).or_insert(*entry);
        }
    }
    let listing = LineFigures::of_samples(profile, sampler).listing_all(&ListOptions::new());
    let routines = listing
        .routines
        .into_iter()
        .filter_map(|routine| {
            let entry = *entry_of.get(&(routine.function.clone(), routine.file.clone()))?;
            Some(RoutineView::new(entry, routine))
        })
        .collect();
    Some(ListingsView {
        sampler,
        columns: listing.columns,
        totals: listing.totals,
        routines,
    })
}

/// The viewer's function list being made: each sample frame once, each state once.
struct Entries<'a> {
    profile: &'a Profile,
    list: Vec<FunctionEntry<'a>>,
    of_frame: Vec<Option<usize>>,
    /// [`SampleSet::function_frames`](crate::samples::SampleSet::function_frames): a traced
    /// function is one entry.
    function_frames: Vec<u32>,
    named: HashMap<String, usize>,
}

impl<'a> Entries<'a> {
    fn new(profile: &'a Profile) -> Entries<'a> {
        Entries {
            profile,
            list: Vec::new(),
            of_frame: vec![None; profile.samples.frames.len()],
            function_frames: profile.samples.function_frames(),
            named: HashMap::new(),
        }
    }

    /// The index of sample frame `frame`.
    fn frame(&mut self, frame: u32) -> usize {
        let frame = self
            .function_frames
            .get(frame as usize)
            .copied()
            .unwrap_or(frame);
        if let Some(Some(i)) = self.of_frame.get(frame as usize) {
            return *i;
        }
        let profile = self.profile;
        let traced = match profile.samples.frames.get(frame as usize) {
            Some(SampleFrame {
                function: Some(f), ..
            }) => profile.function_table.get(*f as usize),
            _ => None,
        };
        let entry = match traced {
            Some(function) => FunctionEntry::Traced(FunctionView {
                function,
                mfa: function.mfa(),
            }),
            None => {
                let native = profile.samples.frames.get(frame as usize);
                let mut view = native_view(
                    sampled::frame_name(profile, frame, true),
                    native.and_then(|n| n.file.clone()).unwrap_or_default(),
                    native.and_then(|n| n.line).unwrap_or(0),
                );
                if let (FunctionEntry::Native(view), Some(native)) = (&mut view, native) {
                    view.plumbing = is_plumbing(native, &profile.function_table);
                }
                view
            }
        };
        self.list.push(entry);
        let i = self.list.len() - 1;
        if let Some(slot) = self.of_frame.get_mut(frame as usize) {
            *slot = Some(i);
        }
        i
    }

    /// The index of a made-up frame named `name` (a state).
    fn named(&mut self, name: &str) -> usize {
        if let Some(&i) = self.named.get(name) {
            return i;
        }
        self.list
            .push(native_view(name.to_owned(), String::new(), 0));
        self.named.insert(name.to_owned(), self.list.len() - 1);
        self.list.len() - 1
    }
}

/// A native frame's entry: `module` is the path before the name's last `::`.
fn native_view(name: String, file: String, line: u32) -> FunctionEntry<'static> {
    let module = name
        .rsplit_once("::")
        .map_or(String::new(), |(m, _)| m.to_owned());
    FunctionEntry::Native(NativeView {
        module,
        mfa: name.clone(),
        name,
        file,
        line,
        native: true,
        plumbing: false,
    })
}
