//! Event logs read as frames, for the exports that draw timelines (`chrome`, `html`).
//!
//! Each traced frame of a log, from its Enter to its Leave, is one [`Frame`]. A log is read
//! leniently, so that whatever it holds the frames nest:
//!
//! - frames still open where the log ends (a log cut short at its capacity) are closed at the
//!   last time of the log and marked `cut_short`;
//! - a Leave with no open Enter of its function is ignored; a Leave of a function entered
//!   further out closes the frames opened inside it at that time;
//! - an event naming a function the function table does not have is ignored;
//! - a time earlier than the one before it counts as that one;
//! - a process with several logs has them read one after another, as one.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use crate::{Event, EventKind, Function, Group, Profile};

/// One frame of a timeline: a traced call, or one poll of an async call.
#[derive(Debug)]
pub(super) struct Frame<'a> {
    /// The function.
    pub(super) function: &'a Function,
    /// When it was entered, in ns since the profile's earliest logged event.
    pub(super) start: u64,
    /// When it was left (or the log ended), likewise.
    pub(super) end: u64,
    /// How many frames it ran inside.
    pub(super) depth: usize,
    /// Whether it was still open where the log ends.
    pub(super) cut_short: bool,
}

/// One process's logs: their events one after another (borrowed from the profile when the
/// process has one log), and the events they could not keep.
#[derive(Debug, Default)]
pub(super) struct Log<'a> {
    pub(super) events: Cow<'a, [Event]>,
    pub(super) dropped: u64,
}

/// The logs of `profile`, by process in pid order.
pub(super) fn logs(profile: &Profile) -> BTreeMap<Group, Log<'_>> {
    let mut out: BTreeMap<Group, Log<'_>> = BTreeMap::new();
    for log in &profile.event_logs {
        let into = out.entry(log.group).or_default();
        if into.events.is_empty() {
            into.events = Cow::Borrowed(&log.events);
        } else {
            into.events.to_mut().extend_from_slice(&log.events);
        }
        into.dropped = into.dropped.saturating_add(log.dropped);
    }
    out
}

/// The time every timeline counts from: the earliest logged event (0 without one).
pub(super) fn origin(profile: &Profile) -> u64 {
    profile
        .event_logs
        .iter()
        .flat_map(|l| &l.events)
        .map(|e| e.ts_ns)
        .min()
        .unwrap_or(0)
}

/// The frames of `events` (a process's log, oldest first), in the order they were entered,
/// with times since `origin`.
pub(super) fn frames<'a>(profile: &'a Profile, events: &[Event], origin: u64) -> Vec<Frame<'a>> {
    let mut frames: Vec<Frame<'a>> = Vec::new();
    // The open frames, outermost first: (index of the function, index in `frames`).
    let mut open: Vec<(u32, usize)> = Vec::new();
    // Per function, where in `open` its frames are, innermost last: a Leave finds the frame
    // it closes by a lookup, whatever the depth (a log may hold many a Leave of a function
    // not open, under thousands of open frames).
    let mut open_at: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut now = 0u64;
    for e in events {
        let Some(function) = profile.function_table.get(e.function as usize) else {
            continue;
        };
        now = now.max(e.ts_ns.saturating_sub(origin));
        match e.kind {
            EventKind::Enter => {
                open_at.entry(e.function).or_default().push(open.len());
                open.push((e.function, frames.len()));
                frames.push(Frame {
                    function,
                    start: now,
                    end: now,
                    depth: open.len() - 1,
                    cut_short: false,
                });
            }
            EventKind::Leave => {
                let Some(&at) = open_at.get(&e.function).and_then(|at| at.last()) else {
                    continue;
                };
                for (f, i) in open.drain(at..) {
                    // The frames closed are the innermost of their functions.
                    if let Some(at) = open_at.get_mut(&f) {
                        at.pop();
                    }
                    if let Some(frame) = frames.get_mut(i) {
                        frame.end = now;
                    }
                }
            }
        }
    }
    for (_, i) in open {
        if let Some(frame) = frames.get_mut(i) {
            frame.end = now;
            frame.cut_short = true;
        }
    }
    frames
}
