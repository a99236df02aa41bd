//! The Chrome trace of a sampled profile (the mapping: the parent module's docs, *Sampled
//! profiles*).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;

use super::alloc;
use super::file::{Args, Cutoff, Event, OtherData, Scale, interval, slices_left_out, write_file};
use crate::Profile;
use crate::export::ExportError;
use crate::export::sampled::{self, Dropped, NO_STACK, Root};
use crate::profile::Labels;
use crate::samples::{SampleRecord, SampleSet, SamplerKind, WaitState};

/// One lane of samples, drawn as one thread: a process's samples of one sampler (its
/// [`sampler_rank`]), or the CPU samples of one thread outside any process (those of
/// different threads overlap in time).
type Lane = (Root, u8, Option<u32>);

/// The order of a sampler's lanes: cpu, wall, alloc.
fn sampler_rank(kind: SamplerKind) -> u8 {
    match kind {
        SamplerKind::Cpu => 0,
        SamplerKind::Wall => 1,
        SamplerKind::Alloc => 2,
    }
}

/// The sampler of a lane's rank.
fn sampler_of_rank(rank: u8) -> SamplerKind {
    match rank {
        0 => SamplerKind::Cpu,
        1 => SamplerKind::Wall,
        _ => SamplerKind::Alloc,
    }
}

/// The lane of `sample`.
fn lane(set: &SampleSet, sample: &SampleRecord) -> Lane {
    let root = Root::of(sample);
    let thread = match root {
        Root::Outside => sample.thread,
        Root::Process(_) => None,
    };
    (root, sampler_rank(sampled::sampler(set, sample)), thread)
}

/// What a slice stands for: a frame of the stacks, or a wall sample's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item {
    Frame(u32),
    State(WaitState),
    /// The whole of an empty stack.
    NoStack,
}

/// One slice: from `start` to `end` (nanoseconds), at `depth`, and the samples in it.
#[derive(Debug)]
struct Slice {
    item: Item,
    start: u64,
    end: u64,
    depth: usize,
    samples: u64,
    ns: f64,
}

/// The `args` of a slice of samples.
#[derive(Debug, serde::Serialize)]
pub(super) struct SampleArgs<'a> {
    /// How many samples it spans.
    samples: u64,
    /// What they weigh, in nanoseconds (CPU time, or wall time summed over processes).
    weight_ns: u64,
    /// Where its frame is, `file:line`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<&'a str>,
}

/// What `otherData` says of the samples.
#[derive(Debug, serde::Serialize)]
pub(super) struct SamplesData {
    /// What was sampled at which rate.
    sampled: String,
    /// What slices' `weight_ns` are, and how allocations are drawn.
    weight: String,
    /// Samples dropped because the sample buffer was full (their weight, rounded; for
    /// allocation samples, an estimate).
    dropped_samples: u64,
    /// The nanoseconds the dropped CPU and wall samples stood for.
    dropped_ns: u64,
    /// The bytes the dropped allocation samples stood for.
    #[serde(skip_serializing_if = "is_zero")]
    dropped_bytes: u64,
    /// How many allocation samples were left out, past [`alloc::MAX_ALLOCATIONS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    allocations_left_out: Option<String>,
    /// What the CPU samples could see, when their sources carry it.
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu: Option<crate::samples::CpuTruth>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Writes `profile`'s samples as a trace file ([`write_file`]: streamed, never held whole):
/// past `max_slices` slices, the longest of them, `otherData` saying how many were left out.
pub(super) fn write(
    profile: &Profile,
    max_slices: usize,
    out: &mut dyn Write,
) -> Result<(), ExportError> {
    let set = &profile.samples;
    let drawing = Drawing::of(profile);
    let other_data = |left_out| {
        let dropped = Dropped::of(set, None);
        let mut measures: Vec<String> = Vec::new();
        for kind in sampled::samplers(set) {
            measures.push(match kind {
                SamplerKind::Cpu | SamplerKind::Wall => format!(
                    "{kind}: slices whose args.weight_ns are nanoseconds of {}",
                    sampled::measure(kind)
                ),
                SamplerKind::Alloc => format!(
                    "alloc: an instant per allocation sampled (args.size: its bytes; \
                     args.bytes: the bytes it stands for, estimated) and a counter `{}` per \
                     process",
                    alloc::COUNTER
                ),
            });
        }
        OtherData {
            exporter: format!("tprof {}", env!("CARGO_PKG_VERSION")),
            trace_type: "samples",
            duration_unit: "durations are the time between samples, as long as each sample \
                            weighs (weight x period) at most",
            timelines: None,
            slices_left_out: slices_left_out(left_out, max_slices),
            run_queue: None,
            samples: Some(SamplesData {
                sampled: sampled::describe(set),
                weight: measures.join("; "),
                dropped_samples: dropped.count,
                dropped_ns: dropped.ns.round() as u64,
                cpu: set.cpu_truth(),
                dropped_bytes: dropped.bytes.round() as u64,
                allocations_left_out: alloc::left_out_note(
                    drawing.allocations_left_out,
                    alloc::MAX_ALLOCATIONS,
                ),
            }),
        }
    };
    write_file(out, max_slices, &mut |sink| drawing.draw(sink), other_data)
}

/// What the events of a sampled profile are drawn from: its samples in lane order, and the
/// name (and `file:line`) of each frame and state they have, made once rather than per slice.
struct Drawing<'a> {
    profile: &'a Profile,
    labels: Labels,
    /// Each sampled stack's frames, a traced function's as its first frame.
    table: Vec<Vec<u32>>,
    /// The samples (indices into the set's), by lane, then in time order (a merge's runs
    /// one after another).
    order: Vec<u32>,
    /// The name and location of each frame of `table`.
    frames: HashMap<u32, (String, Option<String>)>,
    /// The name of each state sampled.
    states: HashMap<WaitState, String>,
    /// Which allocation samples are drawn ([`alloc::cutoff`]), and how many are not.
    allocations: Cutoff,
    allocations_left_out: usize,
}

impl<'a> Drawing<'a> {
    fn of(profile: &'a Profile) -> Drawing<'a> {
        let set = &profile.samples;
        let mut table = sampled::stack_frames(set);
        // A traced function is one slice, whatever line in it each sample was at.
        let function_frames = set.function_frames();
        for frame in table.iter_mut().flatten() {
            *frame = function_frames
                .get(*frame as usize)
                .copied()
                .unwrap_or(*frame);
        }
        let mut frames = HashMap::new();
        for &f in table.iter().flatten() {
            frames.entry(f).or_insert_with(|| {
                let location = set
                    .frame_location(&profile.function_table, f)
                    .map(|(file, line)| format!("{file}:{line}"));
                (sampled::frame_name(profile, f, false), location)
            });
        }
        let mut states = HashMap::new();
        for s in &set.samples {
            if let Some(state) = sampled::state_of(set, s) {
                states
                    .entry(state)
                    .or_insert_with(|| sampled::state_frame(state));
            }
        }
        let run = |s: &SampleRecord| set.sources.get(s.source as usize).map_or(0, |src| src.run);
        let mut order: Vec<u32> = (0..set.samples.len())
            .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
            .collect();
        order.sort_by_key(|&i| {
            let s = &set.samples[i as usize];
            (lane(set, s), run(s), s.time_ns)
        });
        let (allocations, allocations_left_out) = alloc::cutoff(profile, alloc::MAX_ALLOCATIONS);
        Drawing {
            profile,
            labels: profile.labels(),
            table,
            order,
            frames,
            states,
            allocations,
            allocations_left_out,
        }
    }

    /// Draws every event, in order, into `sink`.
    fn draw(&self, sink: &mut dyn FnMut(Event<'_>)) {
        let set = &self.profile.samples;
        let mut last_end = 0u64;
        let mut root_id: Option<(Root, u32)> = None;
        let mut samples: Vec<&SampleRecord> = Vec::new();
        let mut slices_of_lane: Vec<Slice> = Vec::new();
        for warning in set.cpu_truth().map(|t| t.warnings).unwrap_or_default() {
            sink(Event {
                name: format!("Warning: {warning}").into(),
                ph: "i",
                pid: 0,
                tid: 0,
                cat: Some("tprof"),
                ts: Some(Scale::timeline().us(0)),
                dur: None,
                s: Some("g"),
                args: Args::Warning {
                    warning: "cpu coverage",
                },
            });
        }
        let mut allocations = self.allocations;
        let same_lane = |&a: &u32, &b: &u32| {
            lane(set, &set.samples[a as usize]) == lane(set, &set.samples[b as usize])
        };
        for (n, chunk) in self.order.chunk_by(same_lane).enumerate() {
            samples.clear();
            samples.extend(chunk.iter().map(|&i| &set.samples[i as usize]));
            let Some(&first) = samples.first() else {
                continue;
            };
            let (root, rank, thread) = lane(set, first);
            let kind = sampler_of_rank(rank);
            // Every lane's id is its own; a root's pid is its first lane's, so that no pid
            // is another process's thread.
            let tid = u32::try_from(n + 1).unwrap_or(u32::MAX);
            let pid = match root_id {
                Some((r, id)) if r == root => id,
                _ => {
                    root_id = Some((root, tid));
                    sink(meta("process_name", tid, tid, root.label(&self.labels)));
                    sink(Event {
                        args: Args::SortIndex { sort_index: tid },
                        ..meta("process_sort_index", tid, tid, String::new())
                    });
                    tid
                }
            };
            let source = set.sources.get(first.source as usize);
            let rate = source.map_or(0, |s| s.hz);
            if kind == SamplerKind::Alloc {
                let model = source
                    .and_then(|s| s.alloc_rate)
                    .map_or_else(String::new, |r| format!(", allocations at {r}"));
                sink(meta(
                    "thread_name",
                    pid,
                    tid,
                    format!("alloc samples{model}"),
                ));
                let frame = |f: u32| -> (Cow<'_, str>, Option<&'_ str>) {
                    match self.frames.get(&f) {
                        Some((name, location)) => (name.into(), location.as_deref()),
                        None => (sampled::frame_name(self.profile, f, false).into(), None),
                    }
                };
                alloc::draw(
                    &self.table,
                    &samples,
                    (pid, tid),
                    &mut allocations,
                    &frame,
                    sink,
                );
                if let Some(end) = samples.iter().map(|s| s.time_ns).max() {
                    last_end = last_end.max(end);
                }
                continue;
            }
            let thread_name = match thread.and_then(|t| set.threads.get(t as usize)) {
                Some(t) => format!(
                    "{} ({kind} samples, {rate} Hz asked)",
                    t.name
                        .as_ref()
                        .map_or_else(|| t.tid.to_string(), |n| format!("{n}/{}", t.tid))
                ),
                None => format!("{kind} samples, {rate} Hz asked"),
            };
            sink(meta("thread_name", pid, tid, thread_name));
            slices(set, &self.table, &samples, &mut slices_of_lane);
            last_end = slices_of_lane
                .iter()
                .fold(last_end, |end, s| end.max(s.end));
            self.slices(&slices_of_lane, pid, tid, sink);
        }
        let dropped = Dropped::of(set, None);
        if let Some(note) = dropped.note() {
            sink(Event {
                name: note.into(),
                ph: "i",
                pid: 0,
                tid: 0,
                cat: Some("tprof"),
                ts: Some(Scale::timeline().us(last_end)),
                dur: None,
                s: Some("g"),
                args: Args::Dropped {
                    dropped: dropped.count,
                },
            });
        }
    }

    /// Draws `slices` as complete events of thread `tid` of process `pid`.
    fn slices(&self, slices: &[Slice], pid: u32, tid: u32, sink: &mut dyn FnMut(Event<'_>)) {
        let scale = Scale::timeline();
        // The end of the last slice written at each depth: a slice must not pass its
        // parent's.
        let mut ends: Vec<f64> = Vec::new();
        for slice in slices {
            let cap = match slice.depth.checked_sub(1) {
                Some(parent) => ends.get(parent).copied().unwrap_or(f64::INFINITY),
                None => f64::INFINITY,
            };
            let (ts, dur) = interval(scale, slice.start, slice.end, cap);
            ends.truncate(slice.depth);
            ends.push(ts + dur);
            let (name, location): (Cow<'_, str>, _) = match slice.item {
                Item::Frame(f) => match self.frames.get(&f) {
                    Some((name, location)) => (name.into(), location.as_deref()),
                    None => (sampled::frame_name(self.profile, f, false).into(), None),
                },
                Item::State(state) => match self.states.get(&state) {
                    Some(name) => (name.into(), None),
                    None => (sampled::state_frame(state).into(), None),
                },
                Item::NoStack => (NO_STACK.into(), None),
            };
            sink(Event {
                name,
                ph: "X",
                pid,
                tid,
                cat: Some("tprof"),
                ts: Some(ts),
                dur: Some(dur),
                s: None,
                args: Args::Sample(SampleArgs {
                    samples: slice.samples,
                    weight_ns: slice.ns.round() as u64,
                    location,
                }),
            });
        }
    }
}

/// A metadata event `name` of thread `tid` of process `pid`, naming it `value`.
fn meta(name: &'static str, pid: u32, tid: u32, value: String) -> Event<'static> {
    Event {
        name: name.into(),
        ph: "M",
        pid,
        tid,
        cat: None,
        ts: None,
        dur: None,
        s: None,
        args: Args::Name {
            name: value,
            dropped: None,
        },
    }
}

/// The slices of one lane's `samples` (in time order): in the order they open, so each
/// slice's parent comes before it.
///
/// Each sample lasts from its time for as long as it weighs, cut at the next sample's time;
/// a sample that weighs nothing is not drawn. A sample whose path (its frames, then a wall
/// sample's state) starts as the slices open when it starts keeps them open; the others close
/// there, and its remaining frames open. Where a sample ends before the next one starts, every
/// slice closes.
fn slices(set: &SampleSet, table: &[Vec<u32>], samples: &[&SampleRecord], out: &mut Vec<Slice>) {
    out.clear();
    // The open slices, outermost first: indices into `out`.
    let mut open: Vec<usize> = Vec::new();
    // Where the last sample drawn ends.
    let mut cursor = 0u64;
    let mut path: Vec<Item> = Vec::new();
    for (k, s) in samples.iter().enumerate() {
        // Never before the last sample ended (two samples at one time: the second is cut to
        // nothing).
        let start = s.time_ns.max(cursor);
        let ns = sampled::weight_ns(set, s);
        let mut end = start.saturating_add(ns.round() as u64);
        if let Some(next) = samples.get(k + 1) {
            end = end.min(next.time_ns.max(start));
        }
        if start > cursor {
            close(out, &mut open, 0, cursor);
        }
        if end <= start {
            continue;
        }
        path.clear();
        path.extend(
            sampled::frames_of(table, s.stack)
                .iter()
                .map(|&f| Item::Frame(f)),
        );
        if let Some(state) = sampled::state_of(set, s) {
            path.push(Item::State(state));
        }
        if path.is_empty() {
            path.push(Item::NoStack);
        }
        let common = open
            .iter()
            .zip(&path)
            .take_while(|(i, item)| out[**i].item == **item)
            .count();
        close(out, &mut open, common, start);
        for &item in &path[common..] {
            open.push(out.len());
            out.push(Slice {
                item,
                start,
                end: start,
                depth: open.len() - 1,
                samples: 0,
                ns: 0.0,
            });
        }
        for &i in &open {
            out[i].samples += 1;
            out[i].ns += ns;
        }
        cursor = end;
    }
    close(out, &mut open, 0, cursor);
}

/// Closes the open slices from depth `from` on, at `at`.
fn close(out: &mut [Slice], open: &mut Vec<usize>, from: usize, at: u64) {
    for i in open.drain(from.min(open.len())..) {
        out[i].end = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceType;
    use crate::samples::{SampleFrame, SampleSource, SampleStack};

    /// A CPU profile of one process: `n` samples 1 ms apart, the `i`th weighing `i` 20ths of
    /// a period (so each is a slice of its own, `i` × 50 µs long).
    fn sampled(n: u32) -> Profile {
        let sample = |i: u32| SampleRecord {
            source: 0,
            pid: Some(runtime::Pid::from_parts(0, 5, 0)),
            thread: None,
            time_ns: u64::from(i) * 1_000_000,
            weight: f64::from(i) / 20.0,
            stack: Some(0),
            state: None,
            mailbox_len: 0,
            callee: None,
            size: 0,
            live: false,
        };
        let mut profile = Profile::empty(TraceType::CallTime);
        profile.samples = SampleSet {
            sources: vec![SampleSource {
                run: 0,
                node: 0,
                sampler: SamplerKind::Cpu,
                hz: 1000,
                alloc_rate: None,
                dropped: 0.0,
                lost_frees: 0,
                before_sampling: 0,
                native_walked: true,
                duration_ns: 0,
                capacity: 0,
                cpu: None,
            }],
            frames: vec![SampleFrame {
                function: None,
                name: "work".to_owned(),
                file: None,
                line: None,
                address: 0,
            }],
            stacks: vec![SampleStack {
                parent: None,
                frame: 0,
            }],
            samples: (1..=n).map(sample).collect(),
            ..SampleSet::default()
        };
        profile
    }

    #[test]
    fn a_sampled_trace_past_its_limit_keeps_its_longest_slices_and_says_how_many_it_left_out() {
        let profile = sampled(20);
        // The file written with at most `max` slices, read back.
        let file = |profile: &Profile, max: usize| -> serde_json::Value {
            let mut out = Vec::new();
            write(profile, max, &mut out).unwrap();
            serde_json::from_slice(&out).unwrap()
        };
        let events = |file: &serde_json::Value, ph: &str| -> Vec<serde_json::Value> {
            let events = file["traceEvents"].as_array().unwrap().iter();
            events.filter(|e| e["ph"] == ph).cloned().collect()
        };
        let slices = |file: &serde_json::Value| -> Vec<f64> {
            events(file, "X")
                .iter()
                .filter_map(|e| e["dur"].as_f64())
                .collect()
        };
        let whole = file(&profile, 100);
        assert_eq!(slices(&whole).len(), 20);
        assert_eq!(whole["otherData"].get("slices_left_out"), None);
        let cut = file(&profile, 5);
        // The five longest (16 to 20 twentieths of a millisecond), in time order.
        assert_eq!(slices(&cut), [800.0, 850.0, 900.0, 950.0, 1000.0]);
        let note = cut["otherData"]["slices_left_out"].as_str().unwrap();
        assert!(
            note.starts_with("15 slices shorter than the 5 kept"),
            "{note}"
        );
        // The tracks' names are kept.
        assert_eq!(events(&cut, "M").len(), events(&whole, "M").len());
    }
}
