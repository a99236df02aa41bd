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
//!   `bytes allocated (1 µs = 1 byte)`), and `otherData.duration_unit` too. A call_time
//!   profile whose program's threads waited long on the OS's run queue says so in
//!   `otherData.run_queue` (the text report's note: its call times include those waits).
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
//!
//! # Where it is written
//!
//! Here, a trace profile's tracks drawn as timelines or in the synthetic layout; the file's
//! events and their writing, with the cut past a million slices, in `file`; the call trees
//! the synthetic layout draws in `forest`; sampled profiles in `sampled`, their allocation
//! samples in `alloc`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;

use super::ExportError;
use super::sampled::is_sampled;
use super::stacks::Stacks;
use super::timeline::{self, Log, frames};
use super::weight::frame_name;
use crate::{Group, Profile, TraceType};
use file::{
    Args, Event, FrameArgs, MAX_SLICES, OtherData, Scale, SliceArgs, interval, slices_left_out,
    write_file,
};
use forest::{Forest, NONE, Names, PathOf, Roots};

mod alloc;
mod file;
mod forest;
mod sampled;

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
            run_queue: super::run_queue_note(profile),
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
