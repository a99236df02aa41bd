//! The trace-event file every Chrome trace is written as: its events and their `args`, the
//! figures as the microseconds they are drawn in ([`Scale`], [`interval`]), and the file
//! written streamed ([`write_file`]), past [`MAX_SLICES`] with only the longest slices
//! ([`Cutoff`]).

use std::borrow::Cow;
use std::io::Write;

use serde::Serialize;

use super::forest::PathOf;
use super::{alloc, sampled};
use crate::TraceType;
use crate::export::ExportError;
use crate::export::weight::unit;

/// What the file says about itself (shown by `chrome://tracing`'s metadata view).
#[derive(Debug, Serialize)]
pub(super) struct OtherData {
    pub(super) exporter: String,
    pub(super) trace_type: &'static str,
    pub(super) duration_unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) timelines: Option<&'static str>,
    /// What was sampled, and what was dropped (sampled profiles).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) samples: Option<sampled::SamplesData>,
    /// How many of the shortest slices were left out, past [`MAX_SLICES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) slices_left_out: Option<String>,
    /// A call_time profile's note of the waits on the OS's run queue, when they were large
    /// ([`crate::Profile::run_queue`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) run_queue: Option<String>,
}

/// The most slices a trace holds: past it, the shortest are left out and the file says how
/// many (viewers load a trace of a million events; one of a hundred million, not at all).
pub(super) const MAX_SLICES: usize = 1_000_000;

/// Which slices a trace keeps: the `max` longest; of slices as long as the shortest kept,
/// those that come first. A slice is never longer than its parent, which comes before it: a
/// slice kept keeps its parent.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cutoff {
    /// Slices longer than this are kept (none past `f64::INFINITY`; all below 0).
    shortest: f64,
    /// How many more slices as long as `shortest` are kept.
    ties: usize,
}

impl Cutoff {
    /// The cutoff of slices of these `durations` (in their order) to keep `max`, and how many
    /// it leaves out. Linear in the slices.
    pub(super) fn of(mut durations: Vec<f64>, max: usize) -> (Cutoff, usize) {
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
    pub(super) fn keeps(&mut self, dur: f64) -> bool {
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
pub(super) type Draw<'d> = dyn FnMut(&mut dyn FnMut(Event<'_>)) + 'd;

/// Writes a trace file, `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`,
/// to `out`: the events `draw` gives (the same, in order, each time it is called), past `max`
/// slices (`X` events) the longest of them ([`Cutoff`]) and every other event, then the
/// `otherData` that `other_data` makes, given how many slices were left out.
///
/// Streamed: the events are drawn twice, once to find which slices to keep, then to write
/// them, so that the file is never held whole.
pub(super) fn write_file(
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
pub(super) struct Event<'a> {
    pub(super) name: Cow<'a, str>,
    pub(super) ph: &'static str,
    pub(super) pid: u32,
    pub(super) tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cat: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) dur: Option<f64>,
    /// The scope of an instant event (`t`: its thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) s: Option<&'static str>,
    pub(super) args: Args<'a>,
}

/// An event's `args`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum Args<'a> {
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
pub(super) struct FrameArgs {
    pub(super) duration_ns: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) cut_short: bool,
}

/// A path's figures, on its event.
#[derive(Debug, Serialize)]
pub(super) struct SliceArgs<'a> {
    pub(super) calls: u64,
    pub(super) measurement: u64,
    pub(super) inclusive: u64,
    pub(super) unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) words: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) blocks: Option<u64>,
    pub(super) path: PathOf<'a>,
}

/// How a trace type's figures become durations.
#[derive(Clone, Copy, Debug)]
pub(super) struct Scale {
    /// Microseconds per unit of the weight.
    pub(super) us_per_unit: f64,
    /// The unit's name in `args`.
    pub(super) unit: &'static str,
    /// The thread's name: what its durations are.
    pub(super) thread_name: &'static str,
    /// `otherData.duration_unit`.
    pub(super) duration_unit: &'static str,
}

impl Scale {
    pub(super) fn of(trace_type: TraceType) -> Scale {
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
    pub(super) fn timeline() -> Scale {
        Scale::of(TraceType::CallTime)
    }

    /// `units` in microseconds.
    pub(super) fn us(self, units: u64) -> f64 {
        // Microseconds are exact for call_count and call_memory; for call_time, `ns / 1000`
        // is the nearest double, as a reader parsing `ns / 1000` in decimal would get.
        if self.us_per_unit == 1.0 {
            units as f64
        } else {
            units as f64 / 1000.0
        }
    }
}

/// What `otherData.slices_left_out` says when `left_out` slices were left out to keep `max`.
pub(super) fn slices_left_out(left_out: usize, max: usize) -> Option<String> {
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
pub(super) fn interval(scale: Scale, start: u64, end: u64, cap: f64) -> (f64, f64) {
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
