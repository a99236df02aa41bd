//! The Chrome trace of a sampled profile (the mapping: the parent module's docs, *Sampled
//! profiles*).

use std::collections::BTreeMap;

use super::{Args, Event, OtherData, Scale, TraceFile, interval, keep_longest, slices_left_out};
use crate::Profile;
use crate::export::sampled::{self, Dropped, NO_STACK, Root};
use crate::samples::{SampleRecord, SampleSet, SamplerKind, WaitState};

/// One lane of samples, drawn as one thread: a process's samples of one sampler (whether
/// wall), or the CPU samples of one thread outside any process (those of different threads
/// overlap in time).
type Lane = (Root, bool, Option<u32>);

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
pub(super) struct SampleArgs {
    /// How many samples it spans.
    samples: u64,
    /// What they weigh, in nanoseconds (CPU time, or wall time summed over processes).
    weight_ns: u64,
    /// Where its frame is, `file:line`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<String>,
}

/// What `otherData` says of the samples.
#[derive(Debug, serde::Serialize)]
pub(super) struct SamplesData {
    /// What was sampled at which rate.
    sampled: String,
    /// What slices' `weight_ns` are.
    weight: &'static str,
    /// Samples dropped because the sample buffer was full (their weight, rounded).
    dropped_samples: u64,
    /// The nanoseconds they stood for.
    dropped_ns: u64,
}

/// `profile`'s samples as a trace file: past `max_slices` slices, the longest of them
/// ([`keep_longest`]), `otherData` saying how many were left out.
pub(super) fn file(profile: &Profile, max_slices: usize) -> TraceFile<'static> {
    let set = &profile.samples;
    let labels = profile.labels();
    let mut table = sampled::stack_frames(set);
    // A traced function is one slice, whatever line in it each sample was at.
    let function_frames = set.function_frames();
    for frame in table.iter_mut().flatten() {
        *frame = function_frames
            .get(*frame as usize)
            .copied()
            .unwrap_or(*frame);
    }
    // Each lane's samples, in time order (a merge's runs one after another).
    let mut lanes: BTreeMap<Lane, Vec<&SampleRecord>> = BTreeMap::new();
    for s in &set.samples {
        let root = Root::of(s);
        let thread = match root {
            Root::Outside => s.thread,
            Root::Process(_) => None,
        };
        lanes
            .entry((root, sampled::sampler(set, s) == SamplerKind::Wall, thread))
            .or_default()
            .push(s);
    }
    let mut events = Vec::new();
    let mut last_end = 0u64;
    let mut root_id: Option<(Root, u32)> = None;
    for (n, ((root, wall, thread), mut samples)) in lanes.into_iter().enumerate() {
        let kind = if wall {
            SamplerKind::Wall
        } else {
            SamplerKind::Cpu
        };
        samples.sort_by_key(|s| {
            let run = set.sources.get(s.source as usize).map_or(0, |src| src.run);
            (run, s.time_ns)
        });
        // Every lane's id is its own; a root's pid is its first lane's, so that no pid is
        // another process's thread.
        let tid = u32::try_from(n + 1).unwrap_or(u32::MAX);
        let pid = match root_id {
            Some((r, id)) if r == root => id,
            _ => {
                root_id = Some((root, tid));
                events.push(meta("process_name", tid, tid, root.label(&labels)));
                events.push(Event {
                    args: Args::SortIndex { sort_index: tid },
                    ..meta("process_sort_index", tid, tid, String::new())
                });
                tid
            }
        };
        let rate = samples
            .first()
            .and_then(|s| set.sources.get(s.source as usize))
            .map_or(0, |s| s.hz);
        let thread_name = match thread.and_then(|t| set.threads.get(t as usize)) {
            Some(t) => format!(
                "{} ({kind} samples, {rate} Hz)",
                t.name
                    .as_ref()
                    .map_or_else(|| t.tid.to_string(), |n| format!("{n}/{}", t.tid))
            ),
            None => format!("{kind} samples, {rate} Hz"),
        };
        events.push(meta("thread_name", pid, tid, thread_name));
        let slices = slices(set, &table, &samples);
        last_end = slices.iter().fold(last_end, |end, s| end.max(s.end));
        draw(profile, &slices, pid, tid, &mut events);
    }
    let dropped = Dropped::of(set, None);
    if let Some(note) = dropped.note() {
        events.push(Event {
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
    let left_out = keep_longest(&mut events, max_slices);
    let measures: Vec<&str> = sampled::samplers(set)
        .into_iter()
        .map(sampled::measure)
        .collect();
    TraceFile {
        trace_events: events,
        display_time_unit: "ns",
        other_data: OtherData {
            exporter: format!("tprof {}", env!("CARGO_PKG_VERSION")),
            trace_type: "samples",
            duration_unit: "durations are the time between samples, as long as each sample \
                            weighs (weight x period) at most",
            timelines: None,
            slices_left_out: slices_left_out(left_out, max_slices),
            samples: Some(SamplesData {
                sampled: sampled::describe(set),
                weight: if measures.len() == 1 && measures[0] == "CPU time" {
                    "nanoseconds of CPU time"
                } else {
                    "nanoseconds of CPU time (cpu) or of wall time summed over processes (wall)"
                },
                dropped_samples: dropped.count,
                dropped_ns: dropped.ns.round() as u64,
            }),
        },
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
fn slices(set: &SampleSet, table: &[Vec<u32>], samples: &[&SampleRecord]) -> Vec<Slice> {
    let mut out: Vec<Slice> = Vec::new();
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
            close(&mut out, &mut open, 0, cursor);
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
        close(&mut out, &mut open, common, start);
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
    close(&mut out, &mut open, 0, cursor);
    out
}

/// Closes the open slices from depth `from` on, at `at`.
fn close(out: &mut [Slice], open: &mut Vec<usize>, from: usize, at: u64) {
    for i in open.drain(from.min(open.len())..) {
        out[i].end = at;
    }
}

/// Writes `slices` as complete events of thread `tid` of process `pid`.
fn draw(profile: &Profile, slices: &[Slice], pid: u32, tid: u32, events: &mut Vec<Event<'static>>) {
    let scale = Scale::timeline();
    // The end of the last slice written at each depth: a slice must not pass its parent's.
    let mut ends: Vec<f64> = Vec::new();
    for slice in slices {
        let cap = match slice.depth.checked_sub(1) {
            Some(parent) => ends.get(parent).copied().unwrap_or(f64::INFINITY),
            None => f64::INFINITY,
        };
        let (ts, dur) = interval(scale, slice.start, slice.end, cap);
        ends.truncate(slice.depth);
        ends.push(ts + dur);
        let (name, location) = match slice.item {
            Item::Frame(f) => (
                sampled::frame_name(profile, f, false),
                profile
                    .samples
                    .frame_location(&profile.function_table, f)
                    .map(|(file, line)| format!("{file}:{line}")),
            ),
            Item::State(state) => (sampled::state_frame(state), None),
            Item::NoStack => (NO_STACK.to_owned(), None),
        };
        events.push(Event {
            name: name.into(),
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
                native_walked: true,
                duration_ns: 0,
                capacity: 0,
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
        let slices = |file: &TraceFile<'_>| -> Vec<f64> {
            file.trace_events
                .iter()
                .filter(|e| e.ph == "X")
                .filter_map(|e| e.dur)
                .collect()
        };
        let whole = file(&profile, 100);
        assert_eq!(slices(&whole).len(), 20);
        assert_eq!(whole.other_data.slices_left_out, None);
        let cut = file(&profile, 5);
        // The five longest (16 to 20 twentieths of a millisecond), in time order.
        assert_eq!(slices(&cut), [800.0, 850.0, 900.0, 950.0, 1000.0]);
        let note = cut.other_data.slices_left_out.unwrap();
        assert!(
            note.starts_with("15 slices shorter than the 5 kept"),
            "{note}"
        );
        // The tracks' names are kept.
        assert_eq!(
            cut.trace_events.iter().filter(|e| e.ph == "M").count(),
            whole.trace_events.iter().filter(|e| e.ph == "M").count()
        );
    }
}
