//! The viewing exports read back: `svg` (a flame graph, parsed as XML) and `html` (a
//! self-contained page: its embedded JSON parsed, its references checked), from real flat
//! profiles and from hand-built call-tree profiles.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

mod common;

use common::svg::{Frame, svg_frames};
use common::{Real, TYPES, embedded, function, path_entry, pid, process, real_profile};
use serde_json::Value;
use tprof::export::{self, ExportError, Format, Stack, stacks};
use tprof::{CallTree, FunctionTrace, Group, Meta, PathNode, Profile, Run, TraceType};

/// The real (flat) profiles of this file: a process calling `branch` three times, and a child
/// of it calling it once; call_time with percentiles.
const REAL: Real = Real {
    percentiles: true,
    child: true,
    ..Real::FLAT
};

/// A call_time profile with call paths, built by hand, and its flat figures to match.
///
/// `worker` (`<1.0.1>`): main 100 ns; main → parse 300; main → render 50;
/// main → render → `<Vec<u8> as Write>::write` 200. `<1.0.2>` (no name): parse 70; main 30.
/// `names` replaces the functions' names (in table order), for the escaping tests.
fn call_tree_profile(names: [&str; 4]) -> Profile {
    let table = vec![
        function("app", names[0], 0, 10),
        function("app::parse", names[1], 1, 20),
        function("app::render", names[2], 2, 30),
        function("std::io", names[3], 2, 40),
    ];
    let (w, other) = (pid("<1.0.1>"), pid("<1.0.2>"));
    let node = |parent, function| PathNode { parent, function };
    let path =
        |pid, node, calls, measurement| path_entry(Group::Process(pid), node, calls, measurement);
    let call_tree = CallTree {
        nodes: vec![
            node(None, 0),
            node(Some(0), 1),
            node(Some(0), 2),
            node(Some(2), 3),
            node(None, 1),
        ],
        entries: vec![
            path(w, 0, 1, 100),
            path(w, 1, 2, 300),
            path(w, 2, 1, 50),
            path(w, 3, 4, 200),
            path(other, 0, 1, 30),
            path(other, 4, 1, 70),
        ],
    };
    let entry = |pid, calls, measurement| common::entry(Group::Process(pid), calls, measurement);
    let functions = vec![
        FunctionTrace {
            function: table[0].clone(),
            entries: vec![entry(w, 1, 100), entry(other, 1, 30)],
        },
        FunctionTrace {
            function: table[1].clone(),
            entries: vec![entry(w, 2, 300), entry(other, 1, 70)],
        },
        FunctionTrace {
            function: table[2].clone(),
            entries: vec![entry(w, 1, 50)],
        },
        FunctionTrace {
            function: table[3].clone(),
            entries: vec![entry(w, 4, 200)],
        },
    ];
    let mut profile = Profile::new(TraceType::CallTime, functions);
    profile.processes = vec![
        process(w, Some("worker"), "app::worker/0", 0),
        process(other, None, "app::helper/0", 0),
    ];
    profile.function_table = table;
    profile.call_tree = call_tree;
    profile.meta = Meta {
        runs: vec![Run {
            program: "app --input big.txt".to_owned(),
            started_unix_ms: 1_760_000_000_000,
            duration_ns: 1_500_000,
            nodes: vec![1],
            run_queue: None,
        }],
    };
    profile
}

fn plain_tree() -> Profile {
    call_tree_profile(["main", "parse", "render", "<Vec<u8> as Write>::write"])
}

const HOSTILE: &str = "</script><script>alert(1)</script>";

// ---------------------------------------------------------------- svg

/// What the svg export promises to do to a name (see `export::flamegraph`).
fn folded_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => "\u{FF1B}".to_owned(),
            ' ' => "\u{A0}".to_owned(),
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// What every export weighs a stack of a `trace_type` profile by: bytes for call_memory,
/// else its measurement.
fn weight(trace_type: TraceType, s: &Stack<'_>) -> u64 {
    if trace_type == TraceType::CallMemory {
        s.bytes
    } else {
        s.measurement
    }
}

/// Checks the flame graph of `profile`: every measured function and every process is a
/// frame, the root spans the total, and every width is proportional to its value.
fn check_svg(profile: &Profile, unit: &str) -> Vec<Frame> {
    let svg = export::to_string(Format::Svg, profile).unwrap();
    let (frames, total) = svg_frames(&svg);
    let sum: u64 = stacks(profile)
        .iter()
        .map(|s| weight(profile.trace_type, s))
        .sum();
    assert!(sum > 0);
    assert_eq!(total, sum);
    let title = format!("{} flame graph ({unit})", profile.trace_type);
    assert!(svg.contains(&title), "the title names trace type and unit");

    let root = frames
        .iter()
        .find(|f| f.name == "all")
        .expect("a root frame");
    assert_eq!(root.units, sum);
    assert!((root.width_pct - 100.0).abs() < 1e-3, "{root:?}");
    assert!(
        root.title.contains(&format!(" {unit}, 100%")),
        "{}",
        root.title
    );
    for f in &frames {
        let expected = f.units as f64 * 100.0 / sum as f64;
        assert!((f.width_pct - expected).abs() < 1e-3, "{f:?} vs {expected}");
    }

    // Each process: a frame as wide as its stacks.
    let mut per_group: BTreeMap<Group, u64> = BTreeMap::new();
    for s in stacks(profile) {
        *per_group.entry(s.group).or_default() += weight(profile.trace_type, &s);
    }
    for (group, value) in per_group {
        let label = folded_name(&profile.group_label(group));
        let frame = frames.iter().find(|f| f.name == label);
        let frame = frame.unwrap_or_else(|| panic!("no frame for process {label}"));
        assert_eq!(frame.units, value, "{label}");
    }
    // Each function with a measurement: at least one frame; one without: none.
    let mut measured: BTreeMap<String, u64> = BTreeMap::new();
    for s in stacks(profile) {
        let last = s.frames.last().unwrap();
        *measured.entry(last.mfa()).or_default() += weight(profile.trace_type, &s);
    }
    for (mfa, value) in measured {
        let found = frames.iter().any(|f| f.name == folded_name(&mfa));
        assert_eq!(found, value > 0, "{mfa}: {value}");
    }
    frames
}

#[test]
fn svg_of_real_profiles_has_every_function_and_process() {
    for (t, unit) in [
        (TraceType::CallCount, "calls"),
        (TraceType::CallTime, "ns"),
        (TraceType::CallMemory, "bytes"),
    ] {
        let profile = real_profile(t, REAL);
        let frames = check_svg(&profile, unit);
        let leaf = frames
            .iter()
            .find(|f| f.name == "fixture::leaf/1")
            .expect("leaf is drawn");
        if t == TraceType::CallCount {
            // One group for all processes: 4 calls of branch, 8 of leaf.
            assert!(frames.iter().any(|f| f.name == "all\u{A0}processes"));
            assert_eq!(leaf.units, 8);
        }
        if t == TraceType::CallMemory {
            // The child's leaf(4) + leaf(8) is 12 words; as a Vec may round up, at least 12:
            // 96 bytes.
            let leaves: u64 = frames
                .iter()
                .filter(|f| f.name == "fixture::leaf/1")
                .map(|f| f.units)
                .sum();
            assert!(leaves >= 8 * (12 + 3 * 24), "{leaves}");
        }
    }
}

#[test]
fn svg_of_a_call_tree_nests_paths_with_inclusive_widths() {
    let profile = plain_tree();
    let frames = check_svg(&profile, "ns");
    let width = |name: &str| -> Vec<u64> {
        let mut w: Vec<u64> = frames
            .iter()
            .filter(|f| f.name == name)
            .map(|f| f.units)
            .collect();
        w.sort_unstable();
        w
    };
    assert_eq!(width("all"), [750]);
    assert_eq!(width("worker"), [650]);
    assert_eq!(width("<1.0.2>"), [100]);
    // main: in worker 100 + 300 + 50 + 200 below it; in <1.0.2> 30.
    assert_eq!(width("app::main/0"), [30, 650]);
    assert_eq!(width("app::render::render/2"), [250]);
    assert_eq!(width("app::parse::parse/1"), [70, 300]);
    assert_eq!(
        width("std::io::<Vec<u8>\u{A0}as\u{A0}Write>::write/2"),
        [200]
    );
    let svg = export::to_string(Format::Svg, &profile).unwrap();
    assert!(svg.contains("app --input big.txt (1.500 ms)"), "the run");
}

#[test]
fn svg_and_html_tell_apart_processes_sharing_a_name() {
    let mut profile = plain_tree();
    profile.processes[1].name = Some("worker".to_owned());
    let frames = check_svg(&profile, "ns");
    let width = |name: &str| frames.iter().find(|f| f.name == name).map(|f| f.units);
    assert_eq!(width("worker\u{A0}<1.0.1>"), Some(650));
    assert_eq!(width("worker\u{A0}<1.0.2>"), Some(100));
    let html = export::to_string(Format::Html, &profile).unwrap();
    let data = check_data(&profile, &html);
    let labels: Vec<&str> = data["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["worker <1.0.1>", "worker <1.0.2>"]);
}

#[test]
fn svg_names_cannot_split_frames() {
    let profile = call_tree_profile(["a;b", "x 12", "line\nbreak", HOSTILE]);
    let frames = check_svg(&profile, "ns");
    assert!(frames.iter().any(|f| f.name == "app::a\u{FF1B}b/0"));
    assert!(frames.iter().any(|f| f.name == "app::parse::x\u{A0}12/1"));
    assert!(
        frames
            .iter()
            .any(|f| f.name == "app::render::line\\nbreak/2")
    );
    let hostile = folded_name(&format!("std::io::{HOSTILE}/2"));
    assert!(frames.iter().any(|f| f.name == hostile));
    // Still exactly the tree: 4 function frames in worker, 2 in <1.0.2>, 2 processes, 1 root.
    assert_eq!(frames.len(), 9, "{frames:#?}");
}

#[test]
fn svg_of_nothing_measured_is_refused() {
    let err = export::to_string(Format::Svg, &Profile::empty(TraceType::CallTime)).unwrap_err();
    assert!(
        matches!(
            err,
            ExportError::Unsupported {
                format: Format::Svg,
                ..
            }
        ),
        "{err}"
    );
}

// ---------------------------------------------------------------- html

/// Checks that the page loads nothing: no URL, no external script, style sheet or image in
/// its markup, and that the data element holds no markup at all.
fn check_self_contained(html: &str) {
    let open = "<script type=\"application/json\" id=\"tprof-data\">";
    let start = html.find(open).expect("the data element") + open.len();
    let end = start + html[start..].find("</script>").expect("its end");
    let data = &html[start..end];
    assert!(
        !data.contains('<') && !data.contains('>'),
        "the data is escaped"
    );
    let lower = format!("{}{}", &html[..start], &html[end..]).to_ascii_lowercase();
    assert!(!lower.contains("http://") && !lower.contains("https://"));
    assert!(!lower.contains("<script src") && !lower.contains(" src="));
    assert!(!lower.contains(" href=") && !lower.contains("<link"));
    assert!(!lower.contains("url(") && !lower.contains("@import"));
    // Exactly two scripts: the data and the viewer, both inline.
    assert_eq!(lower.matches("<script").count(), 2);
    assert_eq!(lower.matches("</script").count(), 2);
    assert!(lower.contains("<script>\n"));
    assert!(html.contains("content=\"default-src 'none';"), "the CSP");
}

/// Checks the page's data against `profile`: every stack, every flat row, the totals.
fn check_data(profile: &Profile, html: &str) -> Value {
    let data = embedded(html);
    assert_eq!(data["trace_type"], profile.trace_type.name());
    assert_eq!(data["call_tree"], !profile.call_tree.is_empty());
    let functions = data["functions"].as_array().unwrap();
    let processes = data["processes"].as_array().unwrap();
    let mfa = |i: &Value| {
        functions[i.as_u64().unwrap() as usize]["mfa"]
            .as_str()
            .unwrap()
    };
    let label = |i: &Value| {
        processes[i.as_u64().unwrap() as usize]["label"]
            .as_str()
            .unwrap()
    };

    let unit = match profile.trace_type {
        TraceType::CallCount => "calls",
        TraceType::CallTime => "ns",
        TraceType::CallMemory => "bytes",
    };
    assert_eq!(
        data["unit"], unit,
        "one unit per trace type, as the other exports"
    );
    // The stacks, as the export module gives them, valued in the unit.
    let expected: Vec<(String, Vec<String>, u64, u64)> = stacks(profile)
        .iter()
        .map(|s| {
            (
                profile.group_label(s.group),
                s.frames.iter().map(|f| f.mfa()).collect(),
                s.calls,
                weight(profile.trace_type, s),
            )
        })
        .collect();
    let got: Vec<(String, Vec<String>, u64, u64)> = data["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                label(&s["process"]).to_owned(),
                s["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| mfa(f).to_owned())
                    .collect(),
                s["calls"].as_u64().unwrap(),
                s["value"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, expected);
    let total: u64 = expected.iter().map(|s| s.3).sum();
    assert_eq!(data["total"], total);

    // The flat rows: every entry of every function, valued in the unit, with their words.
    let memory = profile.trace_type == TraceType::CallMemory;
    let mut rows: Vec<(String, String, u64, u64, u64, u64, u64)> = data["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                label(&r["process"]).to_owned(),
                mfa(&r["function"]).to_owned(),
                r["calls"].as_u64().unwrap(),
                r["value"].as_u64().unwrap(),
                r["words"].as_u64().unwrap(),
                r["bytes"].as_u64().unwrap(),
                r["blocks"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut flat: Vec<(String, String, u64, u64, u64, u64, u64)> = profile
        .functions
        .iter()
        .flat_map(|f| {
            f.entries.iter().map(|e| {
                (
                    profile.group_label(e.group),
                    f.function.mfa(),
                    e.calls,
                    if memory { e.bytes } else { e.measurement },
                    if memory { e.measurement } else { 0 },
                    e.bytes,
                    e.blocks,
                )
            })
        })
        .collect();
    rows.sort();
    flat.sort();
    assert_eq!(rows, flat);
    data
}

#[test]
fn html_of_real_profiles_is_self_contained_and_carries_the_data() {
    for t in TYPES {
        let profile = real_profile(t, REAL);
        let html = export::to_string(Format::Html, &profile).unwrap();
        check_self_contained(&html);
        let data = check_data(&profile, &html);
        // Flat: one frame per function, so the stacks' total is the profile's, in the unit.
        let total: u64 = if t == TraceType::CallMemory {
            profile
                .functions
                .iter()
                .flat_map(|f| &f.entries)
                .map(|e| e.bytes)
                .sum()
        } else {
            profile.total()
        };
        assert_eq!(data["total"], total);
        assert!(html.contains(&format!("<title>{t} profile (")), "{t}");
        // Time columns are labelled as tprof labels its own, in ASCII.
        assert!(
            html.contains("'time (us)'") && !html.contains("(µs)"),
            "{t}"
        );
        let processes = data["processes"].as_array().unwrap();
        if t == TraceType::CallCount {
            assert_eq!(processes.len(), 1);
            assert_eq!(processes[0]["id"], "all");
        } else {
            assert_eq!(processes.len(), 2, "the child is profiled too");
        }
        assert_eq!(
            data["percentiles"].as_array().unwrap().is_empty(),
            t != TraceType::CallTime
        );
        // Each process's percentiles, for its own table.
        for q in data["percentiles"].as_array().unwrap() {
            let process = &processes[q["process"].as_u64().unwrap() as usize];
            assert_ne!(process["id"], "all", "{q}");
            let function = q["function"].as_u64().unwrap();
            assert!(
                data["rows"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["process"] == q["process"] && r["function"] == function),
                "a row for {q}"
            );
        }
        if t == TraceType::CallMemory {
            assert!(
                data["rows"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["bytes"].as_u64() > Some(0))
            );
        }
    }
}

#[test]
fn html_of_a_call_tree_carries_the_paths() {
    let profile = plain_tree();
    let html = export::to_string(Format::Html, &profile).unwrap();
    check_self_contained(&html);
    let data = check_data(&profile, &html);
    assert_eq!(data["total"], 750);
    assert_eq!(data["unit"], "ns");
    assert_eq!(data["runs"][0]["program"], "app --input big.txt");
    let worker = &data["processes"][0];
    assert_eq!(
        (&worker["label"], &worker["id"], &worker["initial_call"]),
        (&"worker".into(), &"<1.0.1>".into(), &"app::worker/0".into())
    );
    assert!(
        html.contains("<title>call_time profile (ns) — app --input big.txt (1.500 ms)</title>")
    );
    // The deepest path is there whole, outermost first.
    let deepest = data["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["frames"].as_array().unwrap().len() == 3)
        .expect("main → render → write");
    assert_eq!(deepest["value"], 200);
    assert_eq!(deepest["calls"], 4);
}

#[test]
fn html_rows_come_from_the_paths_when_there_are_no_flat_figures() {
    let mut profile = plain_tree();
    profile.functions.clear();
    let html = export::to_string(Format::Html, &profile).unwrap();
    let data = embedded(&html);
    let rows = data["rows"].as_array().unwrap();
    let parse: Vec<u64> = rows
        .iter()
        .filter(|r| data["functions"][r["function"].as_u64().unwrap() as usize]["name"] == "parse")
        .map(|r| r["value"].as_u64().unwrap())
        .collect();
    assert_eq!(parse, [300, 70]);
    assert_eq!(
        rows.iter()
            .map(|r| r["value"].as_u64().unwrap())
            .sum::<u64>(),
        750
    );
}

#[test]
fn html_text_from_the_profile_cannot_break_out() {
    let mut profile = call_tree_profile([HOSTILE, "parse", "render", "write"]);
    profile.processes[0].name = Some("<img src=x onerror=alert(1)>".to_owned());
    profile.meta.runs[0].program = "</title><script>alert(2)</script>".to_owned();
    let html = export::to_string(Format::Html, &profile).unwrap();
    check_self_contained(&html);
    assert!(!html.contains("alert(1)</script>") && !html.contains("<img"));
    assert!(html.contains(
        "<title>call_time profile (ns) — &lt;/title&gt;&lt;script&gt;alert(2)&lt;/script&gt; (1.500 ms)</title>"
    ));
    let data = check_data(&profile, &html);
    assert_eq!(data["functions"][0]["name"], HOSTILE);
    assert_eq!(
        data["processes"][0]["label"],
        "<img src=x onerror=alert(1)>"
    );
}

#[test]
fn html_of_an_empty_profile_still_opens() {
    let html = export::to_string(Format::Html, &Profile::empty(TraceType::CallMemory)).unwrap();
    check_self_contained(&html);
    let data = embedded(&html);
    assert_eq!(data["total"], 0);
    assert!(data["stacks"].as_array().unwrap().is_empty());
    assert_eq!(data["unit"], "bytes");
}

#[test]
fn svg_and_html_are_formats() {
    for (name, format, ext) in [("svg", Format::Svg, "svg"), ("html", Format::Html, "html")] {
        assert_eq!(name.parse::<Format>().unwrap(), format);
        assert_eq!(format.extension(), ext);
        assert!(Format::ALL.contains(&format));
    }
}

// ---------------------------------------------------------------- html timelines

/// Each timeline of the page's data: its process's label, dropped, and frames as
/// (mfa, start, end, depth, cut_short).
type TimelineData = (String, u64, Vec<(String, u64, u64, u64, bool)>);

fn timelines(data: &Value) -> Vec<TimelineData> {
    let functions = data["functions"].as_array().unwrap();
    data["timelines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let process = t["process"].as_u64().unwrap() as usize;
            let frames = t["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    let f = f.as_array().unwrap();
                    assert_eq!(f.len(), 5, "{f:?}");
                    let n = |i: usize| f[i].as_u64().unwrap();
                    let mfa = functions[n(0) as usize]["mfa"].as_str().unwrap().to_owned();
                    assert!(n(4) <= 1, "cut_short is 0 or 1");
                    (mfa, n(1), n(2), n(3), n(4) == 1)
                })
                .collect();
            (
                data["processes"][process]["label"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                t["dropped"].as_u64().unwrap(),
                frames,
            )
        })
        .collect()
}

#[test]
fn html_of_an_event_log_profile_carries_each_process_s_timeline() {
    let profile = real_profile(
        TraceType::CallTime,
        Real {
            events: true,
            ..REAL
        },
    );
    assert_eq!(profile.event_logs.len(), 2);
    let html = export::to_string(Format::Html, &profile).unwrap();
    check_self_contained(&html);
    let data = check_data(&profile, &html);
    let got = timelines(&data);
    assert_eq!(got.len(), 2);
    let mut earliest = u64::MAX;
    for ((label, dropped, frames), log) in got.iter().zip(&profile.event_logs) {
        assert_eq!(*label, profile.group_label(log.group));
        assert_eq!(*dropped, 0);
        // One frame per Enter, in the order entered, at the depth the log nests it.
        let mut want = Vec::new();
        let mut depth = 0u64;
        for e in &log.events {
            match e.kind {
                tprof::EventKind::Enter => {
                    want.push((profile.function_table[e.function as usize].mfa(), depth));
                    depth += 1;
                }
                tprof::EventKind::Leave => depth -= 1,
            }
        }
        let shape: Vec<(String, u64)> = frames.iter().map(|f| (f.0.clone(), f.3)).collect();
        assert_eq!(shape, want, "{label}");
        assert!(
            frames.iter().all(|f| f.1 <= f.2 && !f.4),
            "{label}: {frames:?}"
        );
        assert!(frames.windows(2).all(|w| w[0].1 <= w[1].1), "{label}");
        let span = log.events.last().unwrap().ts_ns - log.events[0].ts_ns;
        let first = frames[0].1;
        assert!(frames.iter().all(|f| f.2 - first <= span), "{label}");
        earliest = earliest.min(first);
    }
    assert_eq!(earliest, 0, "times count from the first event logged");
}

#[test]
fn html_timelines_show_cut_short_frames_and_logs_of_processes_without_figures() {
    use tprof::{Event, EventKind, EventLog};
    let mut profile = plain_tree();
    let event = |ts_ns, function, kind| Event {
        ts_ns,
        function,
        kind,
    };
    profile.event_logs = vec![
        EventLog {
            group: Group::Process(pid("<1.0.1>")),
            events: vec![
                event(500, 0, EventKind::Enter),
                event(700, 1, EventKind::Enter),
                event(900, 1, EventKind::Leave),
                event(1_000, 2, EventKind::Enter),
            ],
            dropped: 3,
        },
        EventLog {
            group: Group::Process(pid("<1.0.9>")),
            events: vec![event(100, 3, EventKind::Leave)],
            dropped: 0,
        },
    ];
    let html = export::to_string(Format::Html, &profile).unwrap();
    check_self_contained(&html);
    let data = embedded(&html);
    let frame = |mfa: &str, start, end, depth, cut| (mfa.to_owned(), start, end, depth, cut);
    assert_eq!(
        timelines(&data),
        [
            (
                "worker".to_owned(),
                3,
                vec![
                    frame("app::main/0", 400, 900, 0, true),
                    frame("app::parse::parse/1", 600, 800, 1, false),
                    frame("app::render::render/2", 900, 900, 1, true),
                ]
            ),
            ("<1.0.9>".to_owned(), 0, vec![]),
        ]
    );
    // The process with a log only is listed, after those with figures.
    let ids: Vec<&str> = data["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["<1.0.1>", "<1.0.2>", "<1.0.9>"]);

    // Without event logs there is no timeline.
    let html = export::to_string(Format::Html, &plain_tree()).unwrap();
    assert!(embedded(&html)["timelines"].as_array().unwrap().is_empty());
}
