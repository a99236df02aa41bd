//! `chrome`: Chrome's trace-event JSON (the "Trace Event Format"), opened by Perfetto
//! (<https://ui.perfetto.dev>), `chrome://tracing` and speedscope.
//!
//! Name the file `*.trace.json` (or just `*.json`): speedscope sends `*.chrome.json` to its
//! importer of DevTools recordings, which rejects plain trace events.
//!
//! # Mapping
//!
//! `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`, with one track per
//! process:
//!
//! - Each process (in pid order; for call_count, the one group of all processes) gets a small
//!   `pid` of its own, 1, 2, 3, ..., with one thread whose `tid` is that same number.
//!   Metadata events (`"ph": "M"`) name them: `process_name` is the process's registered name
//!   (with its pid where other processes share the name), else its pid
//!   ([`Profile::labels`]), `thread_name` says what the track shows, and
//!   `process_sort_index` keeps pid order.
//! - A process with an event log ([`Profile::event_logs`]) is drawn as a **timeline** (below);
//!   the others get the **synthetic layout** of their call tree or flat figures.
//!
//! ## Timelines, from event logs
//!
//! Each traced frame of the log (a synchronous call, or one poll of an async call), from its
//! Enter to its Leave, is a complete event (`"ph": "X"`, category `tprof`) named
//! `module::name`, at the time it was entered, lasting until it was left: `ts` and `dur` in
//! microseconds (floats), `ts` counted from the earliest logged event of the profile (every
//! timeline shares that origin). A track's frames nest as they ran and come in the order
//! they were entered. `args`: `duration_ns` (exact) and, for a frame still open where the log
//! ends, `cut_short: true`.
//!
//! - A log cut short at its capacity may end inside frames: those are closed at the last
//!   time of the log (and marked `cut_short`).
//! - A Leave with no open Enter of its function is ignored; a Leave of a function entered
//!   further out closes the frames opened inside it at that time. An event naming a function
//!   the function table does not have is ignored. A time earlier than the one before it (a
//!   log is oldest first; a damaged one may not be) counts as that one, so frames still nest.
//! - `thread_name` is `timeline`; when the log could not keep every event it says how many
//!   it lost (`timeline (12 events not kept)`), its `args` carry `dropped`, and an instant
//!   event (`"ph": "i"`, named `event log full`, `args.dropped`) marks where the log stops.
//!   A process with several logs has them read one after another as one. A process whose
//!   log holds no event keeps the synthetic layout when it has figures (its `thread_name`'s
//!   `args` still carry `dropped`).
//!
//! ## The synthetic layout, from the figures
//!
//! - Each call path is a complete event (`"ph": "X"`, category `tprof`) named `module::name`,
//!   with `ts` and `dur` in microseconds (floats). Its duration is inclusive: its own
//!   (exclusive) figure plus its children's durations. The children are laid one after
//!   another from the parent's start, and the parent's own figure after them, so each child
//!   lies within its parent and a track reads as a flame chart (not a timeline: the calls did
//!   not happen in this order or at these times). The paths that start a process's tree are
//!   laid one after another from 0. A profile without call paths gives one event per
//!   function, side by side.
//! - Durations: call_time lays out the polled **nanoseconds** (shown as time, as measured).
//!   call_count and call_memory have no time, so they lay out what every export weighs them
//!   in (the `weight` module), **1 µs per call** or **1 µs per byte** allocated: a slice of
//!   16 µs is 16 calls or 16 bytes. The thread's name says which (`calls (1 µs = 1 call)`,
//!   `bytes allocated (1 µs = 1 byte)`), and `otherData.duration_unit` too.
//! - `args` of each event: `calls` (made on that path), `measurement` (its own figure, in
//!   `unit`), `inclusive` (with the paths below it), `unit` (`ns`, `calls` or `bytes`) and
//!   `path` (the functions from the root, `;`-separated; past 32, the innermost 32 after
//!   `…;`); call_memory adds `bytes`, `words`
//!   (tprof's measurement) and `blocks` (its own).
//! - A path whose inclusive figure is 0 (a call_memory function that allocated nothing, with
//!   nothing allocating below it) has no width and is left out, as in a flame graph: a slice
//!   of no width would not nest unambiguously.
//!
//! `otherData.timelines`, present when some track is a timeline, says so.
//!
//! ## Sampled profiles
//!
//! A profile of samples ([`Profile::samples`]) is drawn as its samples, at the times they
//! were taken (`ts` in microseconds since its sampler started):
//!
//! - Each process with samples is a track (`process_name` its label, in pid order), with one
//!   thread per sampler (`cpu samples, 999 Hz asked`); CPU time outside any process is one
//!   more track, `(outside processes)`, with a thread per OS thread (`node-worker/4242 (cpu
//!   samples, 999 Hz asked)`), since those threads run at the same time. Every thread has an id of
//!   its own; a track's pid is its first thread's.
//! - On each thread, the samples are **nested complete events** (`"ph": "X"`), a flame chart
//!   over time: a sample lasts from its time for as long as it weighs (its weight times the
//!   period: CPU time, or for wall samples the process's share of wall time), cut at the
//!   next sample of the thread; each frame of its stack (traced functions `module::name`,
//!   native frames by their function, a wall sample's state last, `[receive]`; `(no stack)`
//!   for an empty stack) is a slice, and consecutive samples that share the outer frames share
//!   those slices, so a run of samples of the same stack is one slice per frame. Where a
//!   sample ends before the next begins (the process was not running), every slice closes.
//!   `args`: `samples` (how many it spans), `weight_ns` (what they weigh) and `location`
//!   (`file:line`, when known).
//! - Why slices and not the format's sample events (`"ph": "P"` with `stackFrames`): Perfetto
//!   loads sample events without drawing them (a trace of them shows empty tracks and no
//!   slice), while it draws nested slices as a flame chart per thread, selectable and
//!   searchable, with their `args`, as `chrome://tracing` and speedscope do too.
//! - Dropped samples: `otherData.samples` says what was sampled, what `weight_ns` is, and
//!   `dropped_samples` and `dropped_ns`; when some were dropped, a global instant event
//!   (`"ph": "i"`, `"s": "g"`) at the end says how many (`args.dropped`).
//! - What the CPU samples could see: `otherData.samples.sampled` gives the rate asked and
//!   the distinct samples per CPU-second taken, `otherData.samples.cpu` the figures, summary
//!   lines and warnings ([`CpuTruth`](crate::samples::CpuTruth)), and each warning is also a
//!   global instant event at the start, named `Warning: ...` (`args.warning`: `cpu coverage`),
//!   so that the timeline shows it.
//! - Past a million slices (as for a trace profile), the shortest are left out and
//!   `otherData.slices_left_out` says how many.
//! - **Allocation samples** are not time: a process's `alloc samples` thread has an instant
//!   per allocation sampled and a counter track of the bytes allocated so far (estimated),
//!   bounded at 100,000 allocations (the `alloc` module); `otherData.samples.dropped_bytes`
//!   says what the dropped ones stood for.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use serde::Serialize;

use super::sampled::is_sampled;
use super::stacks::Stacks;
use super::timeline::{self, Log, frames};
use super::weight::{frame_name, unit, weight};
use super::{ExportError, Stack};
use crate::{Function, Group, Profile, TraceType};

mod alloc;
mod sampled;

/// What the file says about itself (shown by `chrome://tracing`'s metadata view).
#[derive(Debug, Serialize)]
struct OtherData {
    exporter: String,
    trace_type: &'static str,
    duration_unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    timelines: Option<&'static str>,
    /// What was sampled, and what was dropped (sampled profiles).
    #[serde(skip_serializing_if = "Option::is_none")]
    samples: Option<sampled::SamplesData>,
    /// How many of the shortest slices were left out, past [`MAX_SLICES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    slices_left_out: Option<String>,
}

/// The most slices a trace holds: past it, the shortest are left out and the file says how
/// many (viewers load a trace of a million events; one of a hundred million, not at all).
const MAX_SLICES: usize = 1_000_000;

/// Which slices a trace keeps: the `max` longest; of slices as long as the shortest kept,
/// those that come first. A slice is never longer than its parent, which comes before it: a
/// slice kept keeps its parent.
#[derive(Clone, Copy, Debug)]
struct Cutoff {
    /// Slices longer than this are kept (none past `f64::INFINITY`; all below 0).
    shortest: f64,
    /// How many more slices as long as `shortest` are kept.
    ties: usize,
}

impl Cutoff {
    /// The cutoff of slices of these `durations` (in their order) to keep `max`, and how many
    /// it leaves out. Linear in the slices.
    fn of(mut durations: Vec<f64>, max: usize) -> (Cutoff, usize) {
        let slices = durations.len();
        if slices <= max {
            let all = Cutoff {
                shortest: f64::NEG_INFINITY,
                ties: 0,
            };
            return (all, 0);
        }
        if max == 0 {
            let none = Cutoff {
                shortest: f64::INFINITY,
                ties: 0,
            };
            return (none, slices);
        }
        let (_, cutoff, _) = durations.select_nth_unstable_by(slices - max, f64::total_cmp);
        let shortest = *cutoff;
        let longer = durations
            .iter()
            .filter(|d| d.total_cmp(&shortest).is_gt())
            .count();
        let cut = Cutoff {
            shortest,
            ties: max - longer,
        };
        (cut, slices - max)
    }

    /// Whether the next slice, lasting `dur`, is kept.
    fn keeps(&mut self, dur: f64) -> bool {
        match dur.total_cmp(&self.shortest) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal if self.ties > 0 => {
                self.ties -= 1;
                true
            }
            _ => false,
        }
    }
}

/// Draws a trace's events: gives each, in order, to the sink it is passed.
type Draw<'d> = dyn FnMut(&mut dyn FnMut(Event<'_>)) + 'd;

/// Writes a trace file, `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`,
/// to `out`: the events `draw` gives (the same, in order, each time it is called), past `max`
/// slices (`X` events) the longest of them ([`Cutoff`]) and every other event, then the
/// `otherData` that `other_data` makes, given how many slices were left out.
///
/// Streamed: the events are drawn twice, once to find which slices to keep, then to write
/// them, so that the file is never held whole.
fn write_file(
    out: &mut dyn Write,
    max: usize,
    draw: &mut Draw<'_>,
    other_data: impl FnOnce(usize) -> OtherData,
) -> Result<(), ExportError> {
    // serde_json writes a token at a time.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    // Which slices to keep, from their durations.
    let mut durations = Vec::new();
    draw(&mut |e| {
        if e.ph == "X" {
            durations.push(e.dur.unwrap_or(0.0));
        }
    });
    let (mut cutoff, left_out) = Cutoff::of(durations, max);
    out.write_all(b"{\"traceEvents\":[")?;
    let mut first = true;
    let mut failed: Option<ExportError> = None;
    draw(&mut |e| {
        if failed.is_some() || (e.ph == "X" && !cutoff.keeps(e.dur.unwrap_or(0.0))) {
            return;
        }
        let comma = if first { &b""[..] } else { b"," };
        first = false;
        let written = out
            .write_all(comma)
            .map_err(ExportError::from)
            .and_then(|()| serde_json::to_writer(&mut out, &e).map_err(ExportError::from));
        failed = written.err();
    });
    if let Some(error) = failed {
        return Err(error);
    }
    out.write_all(b"],\"displayTimeUnit\":\"ns\",\"otherData\":")?;
    serde_json::to_writer(&mut out, &other_data(left_out))?;
    out.write_all(b"}\n")?;
    out.flush()?;
    Ok(())
}

/// One trace event.
#[derive(Debug, Serialize)]
struct Event<'a> {
    name: Cow<'a, str>,
    ph: &'static str,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    /// The scope of an instant event (`t`: its thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    args: Args<'a>,
}

/// An event's `args`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Args<'a> {
    /// `process_name`, `thread_name`; a timeline's `thread_name` and its `event log full`
    /// instant also say how many events its log could not keep.
    Name {
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        dropped: Option<u64>,
    },
    /// `process_sort_index`.
    SortIndex { sort_index: u32 },
    /// A path's figures.
    Slice(SliceArgs<'a>),
    /// A frame of a timeline.
    Frame(FrameArgs),
    /// The `event log full` instant, and the dropped samples' one.
    Dropped { dropped: u64 },
    /// A warning's instant (what the CPU samples could not see).
    Warning { warning: &'static str },
    /// A slice of samples.
    Sample(sampled::SampleArgs<'a>),
    /// An allocation sampled.
    Allocation(alloc::AllocArgs<'a>),
    /// A point of the counter of bytes allocated.
    Counter { bytes: u64 },
}

/// A frame of a timeline, on its event.
#[derive(Debug, Serialize)]
struct FrameArgs {
    duration_ns: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cut_short: bool,
}

/// A path's figures, on its event.
#[derive(Debug, Serialize)]
struct SliceArgs<'a> {
    calls: u64,
    measurement: u64,
    inclusive: u64,
    unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    words: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocks: Option<u64>,
    path: PathOf<'a>,
}

/// No node.
const NONE: u32 = u32::MAX;

/// One node of a process's call tree, built from its stacks: 64 bytes, its links indices
/// into [`Forest::nodes`] ([`NONE`] for none).
#[derive(Debug)]
struct Node {
    /// Its function, as [`Names`] numbers it.
    function: u32,
    /// The node it extends.
    parent: u32,
    /// Its first and last child, and the next child of its parent: children in the order
    /// they were first seen.
    first_child: u32,
    last_child: u32,
    next_sibling: u32,
    calls: u64,
    /// Its own figure, in the export's unit.
    own: u64,
    /// Its own measurement (call_memory: words).
    measurement: u64,
    bytes: u64,
    blocks: u64,
    /// Own figure plus the children's inclusive ones.
    inclusive: u64,
}

/// The call trees of every process, in one arena: a child always after its parent.
#[derive(Debug, Default)]
struct Forest {
    nodes: Vec<Node>,
    /// Each node by its track, its parent ([`NONE`] for a root) and its function: finding
    /// a child is a lookup, not a scan of the siblings (a node may have thousands).
    index: HashMap<(u32, u32, u32), u32>,
}

/// A track's roots in the [`Forest`].
#[derive(Debug, Clone, Copy)]
struct Roots {
    first: u32,
    last: u32,
}

impl Default for Roots {
    fn default() -> Roots {
        Roots {
            first: NONE,
            last: NONE,
        }
    }
}

impl Forest {
    /// Adds `stack`'s figures (of a `trace_type` profile) at its path in track `track`,
    /// creating the path's nodes as needed.
    fn add<'a>(
        &mut self,
        track: u32,
        roots: &mut Roots,
        trace_type: TraceType,
        stack: &Stack<'a>,
        names: &mut Names<'a>,
    ) {
        let mut at = NONE;
        for &function in &stack.frames {
            let function = names.intern(function);
            let next = u32::try_from(self.nodes.len()).unwrap_or(NONE);
            let index = *self.index.entry((track, at, function)).or_insert(next);
            if index == next {
                self.nodes.push(Node {
                    function,
                    parent: at,
                    first_child: NONE,
                    last_child: NONE,
                    next_sibling: NONE,
                    calls: 0,
                    own: 0,
                    measurement: 0,
                    bytes: 0,
                    blocks: 0,
                    inclusive: 0,
                });
                let (first, last) = match self.nodes.get_mut(at as usize) {
                    Some(parent) => (&mut parent.first_child, &mut parent.last_child),
                    None => (&mut roots.first, &mut roots.last),
                };
                let before = *last;
                *last = index;
                if before == NONE {
                    *first = index;
                } else {
                    self.nodes[before as usize].next_sibling = index;
                }
            }
            at = index;
        }
        if let Some(node) = self.nodes.get_mut(at as usize) {
            node.calls = node.calls.saturating_add(stack.calls);
            node.own = node.own.saturating_add(weight(trace_type, stack));
            node.measurement = node.measurement.saturating_add(stack.measurement);
            node.bytes = node.bytes.saturating_add(stack.bytes);
            node.blocks = node.blocks.saturating_add(stack.blocks);
        }
    }

    /// Sets every node's inclusive figure (children come after their parent, so a pass
    /// from the back sees every child before its parent).
    fn sum(&mut self) {
        for i in (0..self.nodes.len()).rev() {
            let node = &mut self.nodes[i];
            node.inclusive = node.inclusive.saturating_add(node.own);
            let (parent, inclusive) = (node.parent, node.inclusive);
            if let Some(parent) = self.nodes.get_mut(parent as usize) {
                parent.inclusive = parent.inclusive.saturating_add(inclusive);
            }
        }
    }

    /// The children of `first`'s parent from `first` on, in order.
    fn siblings(&self, first: u32) -> impl Iterator<Item = u32> {
        std::iter::successors(Some(first).filter(|&n| n != NONE), |&n| {
            Some(self.nodes[n as usize].next_sibling).filter(|&n| n != NONE)
        })
    }
}

/// The functions of a profile, numbered, and their names as slices show them: made once per
/// function, not per slice. A function is found by its address first (the stacks and logs
/// point into the profile), and by its value the first time an address is seen.
#[derive(Debug, Default)]
struct Names<'a> {
    by_address: HashMap<*const Function, u32>,
    by_value: HashMap<&'a Function, u32>,
    names: Vec<String>,
}

impl<'a> Names<'a> {
    /// The number of `function`, given it if it has none.
    fn intern(&mut self, function: &'a Function) -> u32 {
        if let Some(&id) = self.by_address.get(&std::ptr::from_ref(function)) {
            return id;
        }
        let next = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        let id = *self.by_value.entry(function).or_insert(next);
        if id == next {
            self.names.push(frame_name(function));
        }
        self.by_address.insert(std::ptr::from_ref(function), id);
        id
    }

    /// The name of function number `id`.
    fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("?", String::as_str)
    }
}

/// The most functions a slice's `args.path` names: a deeper path names its innermost, after
/// `…;` (each slice's path is written in full otherwise, and a trace of deep paths would
/// grow with the square of their depth).
const PATH_FUNCTIONS: usize = 32;

/// A node's path, as `args.path` writes it: the functions from the root, `;`-separated, or
/// past [`PATH_FUNCTIONS`] the innermost (written out as the file is, not kept per slice).
#[derive(Debug)]
struct PathOf<'a> {
    forest: &'a Forest,
    names: &'a Names<'a>,
    node: u32,
}

impl std::fmt::Display for PathOf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes = &self.forest.nodes;
        let mut path: Vec<u32> = std::iter::successors(Some(self.node), |&n| {
            nodes
                .get(n as usize)
                .map(|n| n.parent)
                .filter(|&p| p != NONE)
        })
        .take(PATH_FUNCTIONS + 1)
        .collect();
        if path.len() > PATH_FUNCTIONS {
            path.truncate(PATH_FUNCTIONS);
            f.write_str("…;")?;
        }
        for (i, &node) in path.iter().rev().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            f.write_str(self.names.name(nodes[node as usize].function))?;
        }
        Ok(())
    }
}

impl Serialize for PathOf<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// How a trace type's figures become durations.
#[derive(Clone, Copy, Debug)]
struct Scale {
    /// Microseconds per unit of the weight.
    us_per_unit: f64,
    /// The unit's name in `args`.
    unit: &'static str,
    /// The thread's name: what its durations are.
    thread_name: &'static str,
    /// `otherData.duration_unit`.
    duration_unit: &'static str,
}

impl Scale {
    fn of(trace_type: TraceType) -> Scale {
        match trace_type {
            TraceType::CallTime => Scale {
                us_per_unit: 1e-3,
                unit: unit(TraceType::CallTime),
                thread_name: "polled time",
                duration_unit: "durations are polled time",
            },
            TraceType::CallCount => Scale {
                us_per_unit: 1.0,
                unit: unit(TraceType::CallCount),
                thread_name: "calls (1 µs = 1 call)",
                duration_unit: "1 µs of duration = 1 call",
            },
            TraceType::CallMemory => Scale {
                us_per_unit: 1.0,
                unit: unit(TraceType::CallMemory),
                thread_name: "bytes allocated (1 µs = 1 byte)",
                duration_unit: "1 µs of duration = 1 byte allocated",
            },
        }
    }

    /// The scale of timelines: nanoseconds, shown as time.
    fn timeline() -> Scale {
        Scale::of(TraceType::CallTime)
    }

    /// `units` in microseconds.
    fn us(self, units: u64) -> f64 {
        // Microseconds are exact for call_count and call_memory; for call_time, `ns / 1000`
        // is the nearest double, as a reader parsing `ns / 1000` in decimal would get.
        if self.us_per_unit == 1.0 {
            units as f64
        } else {
            units as f64 / 1000.0
        }
    }
}

/// What one process's track is drawn from.
#[derive(Debug, Default)]
struct Track<'p> {
    /// Its number among the tracks, in the order they were made.
    number: u32,
    /// Its call tree (or flat figures), for the synthetic layout.
    roots: Roots,
    /// Its event log, if it has one.
    log: Option<Log<'p>>,
}

/// Writes `profile` as Chrome trace-event JSON ([`write_file`]: streamed).
pub(super) fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    if is_sampled(profile) {
        return sampled::write(profile, MAX_SLICES, out);
    }
    let mut names = Names::default();
    // Every function a log may name, numbered before the slices borrow the names.
    for function in &profile.function_table {
        names.intern(function);
    }
    // The tracks, one per process, in pid order (`stacks` gives them by process).
    let mut forest = Forest::default();
    let mut tracks: BTreeMap<Group, Track<'_>> = BTreeMap::new();
    let mut made = 0u32;
    Stacks::of(profile).for_each(|stack| {
        let track = tracks.entry(stack.group).or_insert_with(|| {
            made += 1;
            Track {
                number: made,
                ..Track::default()
            }
        });
        forest.add(
            track.number,
            &mut track.roots,
            profile.trace_type,
            stack,
            &mut names,
        );
    });
    for (group, log) in timeline::logs(profile) {
        tracks.entry(group).or_default().log = Some(log);
    }
    forest.sum();
    let drawing = Drawing {
        profile,
        tracks: &tracks,
        forest: &forest,
        names: &names,
        origin: timeline::origin(profile),
        labels: profile.labels(),
    };
    let timelines = std::cell::Cell::new(false);
    let scale = Scale::of(profile.trace_type);
    write_file(
        out,
        MAX_SLICES,
        &mut |sink| timelines.set(drawing.draw(sink)),
        |left_out| OtherData {
            exporter: format!("tprof {}", env!("CARGO_PKG_VERSION")),
            trace_type: profile.trace_type.name(),
            duration_unit: scale.duration_unit,
            timelines: timelines.get().then_some(
                "the tracks named `timeline` are drawn from event logs: each frame at the \
                 time it ran, ts in µs since the profile's earliest logged event",
            ),
            samples: None,
            slices_left_out: slices_left_out(left_out, MAX_SLICES),
        },
    )
}

/// What the events of a trace profile are drawn from.
struct Drawing<'a> {
    profile: &'a Profile,
    tracks: &'a BTreeMap<Group, Track<'a>>,
    forest: &'a Forest,
    names: &'a Names<'a>,
    origin: u64,
    labels: crate::profile::Labels,
}

impl<'a> Drawing<'a> {
    /// Draws every event, in order, into `sink`; whether some track is a timeline.
    fn draw(&self, sink: &mut dyn FnMut(Event<'_>)) -> bool {
        let profile = self.profile;
        let scale = Scale::of(profile.trace_type);
        let mut timelines = false;
        for (n, (group, track)) in self.tracks.iter().enumerate() {
            let id = u32::try_from(n + 1).unwrap_or(u32::MAX);
            let dropped = track.log.as_ref().map(|l| l.dropped);
            let log = track
                .log
                .as_ref()
                .filter(|l| !l.events.is_empty() || track.roots.first == NONE);
            timelines |= log.is_some();
            let meta = |name: &'static str, args: Args<'static>| Event {
                name: Cow::Borrowed(name),
                ph: "M",
                pid: id,
                tid: id,
                cat: None,
                ts: None,
                dur: None,
                s: None,
                args,
            };
            sink(meta(
                "process_name",
                Args::Name {
                    name: self.labels.get(*group).into_owned(),
                    dropped: None,
                },
            ));
            sink(meta(
                "process_sort_index",
                Args::SortIndex { sort_index: id },
            ));
            let thread_name = match log {
                None => scale.thread_name.to_owned(),
                Some(log) if log.dropped > 0 => {
                    format!("timeline ({} events not kept)", log.dropped)
                }
                Some(_) => "timeline".to_owned(),
            };
            sink(meta(
                "thread_name",
                Args::Name {
                    name: thread_name,
                    dropped,
                },
            ));
            if let Some(log) = log {
                self.timeline(log, id, sink);
            } else {
                self.tree(track.roots, scale, id, sink);
            }
        }
        timelines
    }

    /// Draws `log` as the timeline of track `id`.
    fn timeline(&self, log: &Log<'_>, id: u32, sink: &mut dyn FnMut(Event<'_>)) {
        let scale = Scale::timeline();
        let names = self.names;
        // The end of the last frame drawn at each depth, as written: a frame must not pass
        // its parent's (the one at the depth above, entered last).
        let mut ends: Vec<f64> = Vec::new();
        let mut last = 0u64;
        for frame in frames(self.profile, &log.events, self.origin) {
            let cap = match frame.depth.checked_sub(1) {
                Some(parent) => ends.get(parent).copied().unwrap_or(f64::INFINITY),
                None => f64::INFINITY,
            };
            let (ts, dur) = interval(scale, frame.start, frame.end, cap);
            ends.truncate(frame.depth);
            ends.push(ts + dur);
            last = last.max(frame.end);
            let name = match names.by_address.get(&std::ptr::from_ref(frame.function)) {
                Some(&f) => Cow::Borrowed(names.name(f)),
                None => Cow::Owned(frame_name(frame.function)),
            };
            sink(Event {
                name,
                ph: "X",
                pid: id,
                tid: id,
                cat: Some("tprof"),
                ts: Some(ts),
                dur: Some(dur),
                s: None,
                args: Args::Frame(FrameArgs {
                    duration_ns: frame.end.saturating_sub(frame.start),
                    cut_short: frame.cut_short,
                }),
            });
        }
        if log.dropped > 0 {
            sink(Event {
                name: Cow::Borrowed("event log full"),
                ph: "i",
                pid: id,
                tid: id,
                cat: Some("tprof"),
                ts: Some(scale.us(last)),
                dur: None,
                s: Some("t"),
                args: Args::Dropped {
                    dropped: log.dropped,
                },
            });
        }
    }

    /// Draws the tree of `roots` (its figures summed) in the synthetic layout, as track
    /// `id`.
    fn tree(&self, roots: Roots, scale: Scale, id: u32, sink: &mut dyn FnMut(Event<'_>)) {
        let (forest, names) = (self.forest, self.names);
        let memory = self.profile.trace_type == TraceType::CallMemory;
        // Depth first, parents before children: (node, start in units, the end of the
        // parent's event as written, which the node's must not pass).
        let mut todo: Vec<(u32, u64, f64)> = Vec::new();
        let mut start = 0u64;
        for root in forest.siblings(roots.first) {
            todo.push((root, start, f64::INFINITY));
            start = start.saturating_add(forest.nodes[root as usize].inclusive);
        }
        todo.reverse();
        while let Some((i, start, cap)) = todo.pop() {
            let node = &forest.nodes[i as usize];
            if node.inclusive == 0 {
                continue;
            }
            let (ts, dur) = interval(scale, start, start.saturating_add(node.inclusive), cap);
            sink(Event {
                name: Cow::Borrowed(names.name(node.function)),
                ph: "X",
                pid: id,
                tid: id,
                cat: Some("tprof"),
                ts: Some(ts),
                dur: Some(dur),
                s: None,
                args: Args::Slice(SliceArgs {
                    calls: node.calls,
                    measurement: node.own,
                    inclusive: node.inclusive,
                    unit: scale.unit,
                    bytes: memory.then_some(node.bytes),
                    words: memory.then_some(node.measurement),
                    blocks: memory.then_some(node.blocks),
                    path: PathOf {
                        forest,
                        names,
                        node: i,
                    },
                }),
            });
            let children = todo.len();
            let mut child_start = start;
            for c in forest.siblings(node.first_child) {
                todo.push((c, child_start, ts + dur));
                child_start = child_start.saturating_add(forest.nodes[c as usize].inclusive);
            }
            todo[children..].reverse();
        }
    }
}

/// What `otherData.slices_left_out` says when `left_out` slices were left out to keep `max`.
fn slices_left_out(left_out: usize, max: usize) -> Option<String> {
    (left_out > 0).then(|| {
        format!(
            "{left_out} slices shorter than the {max} kept were left out, to keep the trace \
             loadable"
        )
    })
}

/// The `ts` and `dur` of an event from `start` to `end` (in units), such that neither `ts`
/// nor `ts + dur`, as a reader computes it in doubles, is past `end` or past `cap` (the end of
/// the parent's event as written): microseconds that are not whole are not exact in binary,
/// and a child ending with its parent must not end a rounding error after it.
fn interval(scale: Scale, start: u64, end: u64, cap: f64) -> (f64, f64) {
    let limit = scale.us(end).min(cap);
    // A frame of no width where its parent ends starts there, not a rounding error after.
    let ts = scale.us(start).min(limit);
    // The duration as the nearest double to it, unless that would end past the limit.
    let mut dur = scale.us(end.saturating_sub(start)).min(limit - ts).max(0.0);
    while dur > 0.0 && ts + dur > limit {
        dur = dur.next_down();
    }
    (ts, dur)
}

#[cfg(test)]
mod tests {
    use super::{Args, Cutoff, Event, Scale, interval};
    use crate::TraceType;

    /// Keeps the `max` longest slices of `events` as a trace does ([`Cutoff`]), and every
    /// other event, in their order; returns how many it left out.
    fn keep_longest(events: &mut Vec<Event<'_>>, max: usize) -> usize {
        let is_slice = |e: &Event<'_>| e.ph == "X";
        let durations = events
            .iter()
            .filter(|e| is_slice(e))
            .map(|e| e.dur.unwrap_or(0.0))
            .collect();
        let (mut cutoff, left_out) = Cutoff::of(durations, max);
        events.retain(|e| !is_slice(e) || cutoff.keeps(e.dur.unwrap_or(0.0)));
        left_out
    }

    fn event(ph: &'static str, name: &'static str, dur: f64) -> Event<'static> {
        Event {
            name: name.into(),
            ph,
            pid: 1,
            tid: 1,
            cat: None,
            ts: Some(0.0),
            dur: (ph == "X").then_some(dur),
            s: None,
            args: Args::Dropped { dropped: 0 },
        }
    }

    #[test]
    fn a_trace_past_its_limit_keeps_its_longest_slices_in_order() {
        let mut events = vec![
            event("M", "process_name", 0.0),
            event("X", "a", 5.0),
            event("X", "a.1", 2.0),
            event("X", "a.2", 3.0),
            event("X", "b", 3.0),
            event("i", "event log full", 0.0),
            event("X", "b.1", 1.0),
        ];
        assert_eq!(keep_longest(&mut events, 2), 3);
        let names: Vec<&str> = events.iter().map(|e| e.name.as_ref()).collect();
        // The longest, then the first of the two of 3.0; every event that is not a slice.
        assert_eq!(names, ["process_name", "a", "a.2", "event log full"]);
        assert_eq!(keep_longest(&mut events, 2), 0);
        assert_eq!(keep_longest(&mut events, 0), 2);
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn a_child_ending_with_its_parent_does_not_end_after_it() {
        let scale = Scale::of(TraceType::CallTime);
        for parent_start in 0..300u64 {
            for len in 1..40u64 {
                let (pts, pdur) = interval(scale, parent_start, parent_start + 3 * len, f64::MAX);
                let parent_end = pts + pdur;
                let child = parent_start + len;
                let (cts, cdur) = interval(scale, child, parent_start + 3 * len, parent_end);
                assert!(
                    cts >= pts && cts + cdur <= parent_end,
                    "{parent_start} {len}"
                );
                assert!(cdur > 0.0);
            }
        }
    }
}
