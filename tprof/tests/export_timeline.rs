//! The chrome export of processes with event logs: real timelines, read back with serde_json
//! and checked against the logs they came from — a real profile taken with
//! `ProfileOptions::event_log`, and logs built by hand (cut short, damaged, beside a process
//! without a log).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

mod common;

use common::{Real, function, process};
use runtime::Pid;
use serde_json::Value;
use tprof::export::{self, Format};
use tprof::{Event, EventKind, EventLog, FunctionTrace, Group, Profile, TraceType};

/// One complete event, read back.
#[derive(Debug, Clone, PartialEq)]
struct Slice {
    name: String,
    ts: f64,
    dur: f64,
    duration_ns: u64,
    cut_short: bool,
}

/// One track of the trace, read back.
#[derive(Debug, Default)]
struct Track {
    process_name: String,
    thread_name: String,
    /// The `dropped` of the thread name's args.
    dropped: Option<u64>,
    /// Its X events, in file order.
    slices: Vec<Slice>,
    /// Its instant events: (name, ts, args.dropped).
    instants: Vec<(String, f64, u64)>,
}

/// The tracks of a chrome trace, by `pid`, and its `otherData`.
fn parse(text: &str) -> (BTreeMap<u64, Track>, Value) {
    let file: Value = serde_json::from_str(text).unwrap();
    let mut tracks: BTreeMap<u64, Track> = BTreeMap::new();
    for e in file["traceEvents"].as_array().unwrap() {
        let pid = e["pid"].as_u64().unwrap();
        assert_eq!(e["tid"].as_u64().unwrap(), pid, "one thread per process");
        let track = tracks.entry(pid).or_default();
        let args = &e["args"];
        match (e["ph"].as_str().unwrap(), e["name"].as_str().unwrap()) {
            ("M", "process_name") => track.process_name = args["name"].as_str().unwrap().into(),
            ("M", "thread_name") => {
                track.thread_name = args["name"].as_str().unwrap().into();
                track.dropped = args["dropped"].as_u64();
            }
            ("M", "process_sort_index") => assert_eq!(args["sort_index"].as_u64(), Some(pid)),
            ("X", name) if args.get("duration_ns").is_some() => {
                assert_eq!(e["cat"], "tprof");
                track.slices.push(Slice {
                    name: name.to_owned(),
                    ts: e["ts"].as_f64().unwrap(),
                    dur: e["dur"].as_f64().unwrap(),
                    duration_ns: args["duration_ns"].as_u64().unwrap(),
                    cut_short: args
                        .get("cut_short")
                        .map(|c| c.as_bool().unwrap())
                        .unwrap_or(false),
                });
            }
            ("X", _) => {
                // A slice of the synthetic layout: the figures of a path.
                assert!(args["calls"].is_u64() && args["path"].is_string(), "{e}");
                track.slices.push(Slice {
                    name: e["name"].as_str().unwrap().into(),
                    ts: e["ts"].as_f64().unwrap(),
                    dur: e["dur"].as_f64().unwrap(),
                    duration_ns: 0,
                    cut_short: false,
                });
            }
            ("i", name) => {
                assert_eq!(e["s"], "t", "an instant of its thread");
                let ts = e["ts"].as_f64().unwrap();
                track
                    .instants
                    .push((name.to_owned(), ts, args["dropped"].as_u64().unwrap()));
            }
            (ph, name) => panic!("unexpected event {ph} {name}"),
        }
    }
    (tracks, file["otherData"].clone())
}

/// The frames of `log` as the export should draw them, in the order they were entered: the
/// name of each, and the index (in that order) of the frame it ran in. The log is well formed:
/// each Leave leaves the frame entered last.
fn expected_frames(profile: &Profile, log: &EventLog) -> Vec<(String, Option<usize>)> {
    let mut out: Vec<(String, Option<usize>)> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for e in &log.events {
        let f = &profile.function_table[e.function as usize];
        match e.kind {
            EventKind::Enter => {
                out.push((format!("{}::{}", f.module, f.name), open.last().copied()));
                open.push(out.len() - 1);
            }
            EventKind::Leave => {
                let at = open.pop().expect("a Leave of an entered frame");
                assert_eq!(out[at].0, format!("{}::{}", f.module, f.name));
            }
        }
    }
    out
}

#[test]
fn a_real_event_log_is_drawn_as_a_timeline_of_nested_slices() {
    for t in [TraceType::CallTime, TraceType::CallMemory] {
        let outcome = tprof::profile(
            common::two_processes,
            common::options(
                t,
                Real {
                    events: true,
                    ..Real::FLAT
                },
            ),
        )
        .unwrap();
        assert_eq!(outcome.result, Ok(72));
        let profile = outcome.profile;
        assert_eq!(
            profile.event_logs.len(),
            2,
            "{t}: the process and its child"
        );
        let text = export::to_string(Format::Chrome, &profile).unwrap();
        let (tracks, other) = parse(&text);
        assert!(other["timelines"].is_string(), "{t}: {other}");
        assert_eq!(tracks.len(), 2, "{t}");
        let mut earliest = f64::INFINITY;
        for (track, log) in tracks.values().zip(&profile.event_logs) {
            let what = format!("{t} {}", track.process_name);
            assert_eq!(track.process_name, profile.group_label(log.group), "{what}");
            assert_eq!(track.thread_name, "timeline", "{what}");
            assert_eq!(track.dropped, Some(0), "{what}");
            assert!(track.instants.is_empty(), "{what}: nothing dropped");
            let want = expected_frames(&profile, log);
            let enters = log
                .events
                .iter()
                .filter(|e| e.kind == EventKind::Enter)
                .count();
            assert!(enters > 0, "{what}");
            assert_eq!(track.slices.len(), enters, "{what}: a slice per Enter");
            let names: Vec<&str> = track.slices.iter().map(|s| s.name.as_str()).collect();
            let want_names: Vec<&str> = want.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, want_names, "{what}");
            assert!(
                names.contains(&"fixture::leaf") && names.contains(&"fixture::branch"),
                "{what}: {names:?}"
            );
            // In time order, each within the frame it ran in (as a reader adds ts and dur),
            // and as long as the log says.
            assert!(
                track.slices.windows(2).all(|w| w[0].ts <= w[1].ts),
                "{what}: {:?}",
                track.slices
            );
            let times: Vec<u64> = log.events.iter().map(|e| e.ts_ns).collect();
            let span = times.last().unwrap() - times.first().unwrap();
            for (s, (_, parent)) in track.slices.iter().zip(&want) {
                assert!(!s.cut_short, "{what}: {s:?}");
                assert!(s.duration_ns <= span, "{what}: {s:?}");
                let rounding = 4.0 * f64::EPSILON * (s.ts + s.dur).max(1.0);
                assert!(
                    (s.dur - s.duration_ns as f64 / 1000.0).abs() <= rounding,
                    "{what}: {s:?}"
                );
                if let Some(p) = parent {
                    let p = &track.slices[*p];
                    assert!(
                        s.ts >= p.ts && s.ts + s.dur <= p.ts + p.dur,
                        "{what}: {s:?} is not within {p:?}"
                    );
                }
            }
            earliest = earliest.min(track.slices[0].ts);
        }
        assert_eq!(earliest, 0.0, "{t}: times count from the earliest event");
        // The child's track shows its one call of branch, with leaf twice inside it.
        let child = tracks
            .values()
            .find(|t| t.slices.len() == 3)
            .expect("the child's track");
        let names: Vec<&str> = child.slices.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fixture::branch", "fixture::leaf", "fixture::leaf"]);
    }
}

/// An event of `function` at `ts_ns`.
fn event(ts_ns: u64, function: u32, kind: EventKind) -> Event {
    Event {
        ts_ns,
        function,
        kind,
    }
}

/// A call_time profile of three functions (`app::main`, `app::parse`, `app::write`) with these
/// event logs, and flat figures of `<0.9.0>`, which has no log.
fn logged_profile(logs: Vec<EventLog>) -> Profile {
    let main = function("app", "main", 0, 1);
    let mut profile = Profile::new(
        TraceType::CallTime,
        vec![FunctionTrace {
            function: main.clone(),
            entries: vec![common::entry(
                Group::Process(Pid::from_parts(0, 9, 0)),
                2,
                5_000,
            )],
        }],
    );
    profile.function_table = vec![
        main,
        function("app", "parse", 1, 2),
        function("app", "write", 1, 3),
    ];
    profile.processes = vec![process(
        Pid::from_parts(0, 5, 1),
        Some("dispatcher"),
        "x",
        0,
    )];
    profile.event_logs = logs;
    profile
}

#[test]
fn a_truncated_log_is_closed_at_its_last_time_and_a_stray_leave_is_ignored() {
    use EventKind::{Enter, Leave};
    let profile = logged_profile(vec![EventLog {
        group: Group::Process(Pid::from_parts(0, 5, 1)),
        events: vec![
            event(100, 1, Leave), // a Leave without its Enter: ignored
            event(1_000, 0, Enter),
            event(1_500, 1, Enter),
            event(2_500, 1, Leave),
            event(2_600, 2, Leave), // write was not entered: ignored
            event(4_000, 2, Enter), // the log is cut short here, inside main and write
        ],
        dropped: 7,
    }]);
    let text = export::to_string(Format::Chrome, &profile).unwrap();
    let (tracks, _) = parse(&text);
    let names: Vec<(&str, &str)> = tracks
        .values()
        .map(|t| (t.process_name.as_str(), t.thread_name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("dispatcher", "timeline (7 events not kept)"),
            ("<0.9.0>", "polled time")
        ]
    );
    let timeline = &tracks[&1];
    assert_eq!(timeline.dropped, Some(7));
    let slice = |name: &str, ts: f64, dur: f64, duration_ns: u64, cut_short: bool| Slice {
        name: name.to_owned(),
        ts,
        dur,
        duration_ns,
        cut_short,
    };
    // Times count from the earliest event (the stray Leave at 100 ns), in µs.
    assert_eq!(
        timeline.slices,
        [
            slice("app::main", 0.9, 3.0, 3_000, true),
            slice("app::parse", 1.4, 1.0, 1_000, false),
            slice("app::write", 3.9, 0.0, 0, true),
        ]
    );
    assert_eq!(
        timeline.instants,
        [("event log full".to_owned(), 3.9, 7)],
        "where the log stops"
    );
    // The process without a log keeps the synthetic layout, from 0.
    let synthetic = &tracks[&2];
    assert_eq!(synthetic.dropped, None);
    assert_eq!(synthetic.slices.len(), 1);
    assert_eq!(
        (synthetic.slices[0].ts, synthetic.slices[0].dur),
        (0.0, 5.0)
    );
}

#[test]
fn a_damaged_log_still_nests() {
    use EventKind::{Enter, Leave};
    let profile = logged_profile(vec![
        EventLog {
            group: Group::Process(Pid::from_parts(0, 5, 1)),
            events: vec![
                event(2_000, 0, Enter),
                event(2_100, 1, Enter),
                event(2_150, 7, Enter), // no function 7: ignored
                event(2_200, 2, Enter),
                event(2_300, 0, Leave), // leaves main: closes write and parse too
                event(1_000, 1, Enter), // a time that goes back: counts as 2 300
                event(3_000, 1, Leave),
            ],
            dropped: 0,
        },
        // A log of only dropped events, for the process that has flat figures: it keeps them.
        EventLog {
            group: Group::Process(Pid::from_parts(0, 9, 0)),
            events: Vec::new(),
            dropped: 4,
        },
    ]);
    let text = export::to_string(Format::Chrome, &profile).unwrap();
    let (tracks, _) = parse(&text);
    let spans: Vec<(&str, f64, f64)> = tracks[&1]
        .slices
        .iter()
        .map(|s| (s.name.as_str(), s.ts, s.ts + s.dur))
        .collect();
    // The origin is the earliest time logged, even one that goes back (1 000 ns).
    assert_eq!(
        spans,
        [
            ("app::main", 1.0, 1.3),
            ("app::parse", 1.1, 1.3),
            ("app::write", 1.2, 1.3),
            ("app::parse", 1.3, 2.0),
        ]
    );
    let other = &tracks[&2];
    assert_eq!(
        (other.thread_name.as_str(), other.dropped),
        ("polled time", Some(4))
    );
    assert_eq!(other.slices.len(), 1, "its flat figure");
}

#[test]
fn a_log_of_a_process_without_figures_is_a_track_of_its_own() {
    let profile = logged_profile(vec![EventLog {
        group: Group::Process(Pid::from_parts(0, 2, 0)),
        events: Vec::new(),
        dropped: 12,
    }]);
    let (tracks, other) = parse(&export::to_string(Format::Chrome, &profile).unwrap());
    let track = &tracks[&1];
    assert_eq!(
        (track.process_name.as_str(), track.thread_name.as_str()),
        ("<0.2.0>", "timeline (12 events not kept)")
    );
    assert!(track.slices.is_empty());
    assert_eq!(track.instants, [("event log full".to_owned(), 0.0, 12)]);
    assert!(other["timelines"].is_string());
    // Without logs, no track is a timeline.
    let (_, other) =
        parse(&export::to_string(Format::Chrome, &logged_profile(Vec::new())).unwrap());
    assert!(other.get("timelines").is_none(), "{other}");
}
