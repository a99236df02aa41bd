//! The stack-shaped exports (folded, speedscope, chrome, pprof) read back by real parsers —
//! line splitting, serde_json, prost — and checked against the profile they came from: a real
//! flat profile from `tprof::profile`, and a call-tree profile built by hand (the runtime does
//! not produce call paths yet).
//!
//! `cargo test -p tprof --test export_stacks -- --ignored` also writes sample files of every
//! format to `$TPROF_EXPORT_DIR` (default: `tprof-exports` in the temp dir) for the real tools.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};

mod common;

use common::{Real, TYPES, decode_pprof, function, path_entry, process, real_profile};
use runtime::Pid;
use serde_json::Value;
use tprof::export::{self, Format, pprof};
use tprof::{
    CallTree, Entry, Function, FunctionTrace, Group, PathEntry, PathNode, Profile, TraceType,
};

/// The real profiles of this file: a process calling `branch` three times, and a child of it
/// calling it once.
const REAL: Real = Real {
    child: true,
    ..Real::FLAT
};

/// The registered process of [`tree_profile`].
const DISPATCHER: Pid = Pid::from_parts(0, 5, 0);
/// The unnamed process of [`tree_profile`].
const WORKER: Pid = Pid::from_parts(0, 6, 1);

/// A call-tree profile of `trace_type` (call_time or call_memory) built by hand: a process
/// registered as `dispatcher` and an unnamed one, paths three deep, one function reached on
/// two paths, one named `<Parser as Iterator>::next`, a path that measured nothing, and a path
/// whose parent has no figures of its own in that process.
fn tree_profile(trace_type: TraceType) -> Profile {
    let function_table = vec![
        function("app", "main", 0, 10),
        function("app", "handle", 1, 20),
        function("app::parse", "<Parser as Iterator>::next", 1, 30),
        function("app", "log", 2, 40),
    ];
    // 0 main; 1 main>handle; 2 main>handle>next; 3 main>log; 4 log; 5 main>handle>log
    let nodes = [
        (None, 0),
        (Some(0), 1),
        (Some(1), 2),
        (Some(0), 3),
        (None, 3),
        (Some(1), 3),
    ]
    .map(|(parent, function)| PathNode { parent, function })
    .to_vec();
    let d = Group::Process(DISPATCHER);
    let w = Group::Process(WORKER);
    // (group, node, calls, measurement)
    let figures = [
        (d, 0, 1, 100),
        (d, 1, 3, 300),
        (d, 2, 9, 450),
        (d, 3, 2, 0),
        (d, 5, 1, 25),
        (w, 1, 1, 70),
        (w, 2, 2, 30),
        (w, 4, 5, 55),
    ];
    let memory = trace_type == TraceType::CallMemory;
    let entries: Vec<PathEntry> = figures
        .iter()
        .map(|&(group, node, calls, measurement)| PathEntry {
            // Bytes are not always words * 8: 7 bytes less per call, where anything was
            // allocated.
            bytes: if memory && measurement > 0 {
                measurement * 8 - 7 * calls
            } else {
                0
            },
            blocks: if memory { calls } else { 0 },
            ..path_entry(group, node, calls, measurement)
        })
        .collect();
    // The flat figures: per function, the sum over the paths that end in it.
    let call_tree = CallTree { nodes, entries };
    let mut flat: BTreeMap<(u32, Group), Entry> = BTreeMap::new();
    for e in &call_tree.entries {
        let f = call_tree.nodes[e.node as usize].function;
        let entry = flat
            .entry((f, e.group))
            .or_insert(common::entry(e.group, 0, 0));
        entry.calls += e.calls;
        entry.measurement += e.measurement;
        entry.bytes += e.bytes;
        entry.blocks += e.blocks;
    }
    let mut functions: Vec<FunctionTrace> = Vec::new();
    for ((f, _), entry) in flat {
        match functions.last_mut() {
            Some(t) if t.function == function_table[f as usize] => t.entries.push(entry),
            _ => functions.push(FunctionTrace {
                function: function_table[f as usize].clone(),
                entries: vec![entry],
            }),
        }
    }
    let mut profile = Profile::new(trace_type, functions);
    profile.function_table = function_table;
    profile.call_tree = call_tree;
    profile.processes = vec![
        process(DISPATCHER, Some("dispatcher"), "app::dispatch", 0),
        process(WORKER, None, "app::work", 0),
    ];
    profile
}

/// A bigger call-tree profile of `trace_type`, made up by a fixed pseudo-random sequence:
/// three processes, a few hundred paths up to a dozen deep (recursion included), and figures
/// from 0 to seconds, so that microseconds that are not whole add up in chrome's layout.
fn big_tree_profile(trace_type: TraceType) -> Profile {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let function_table: Vec<Function> = (0..24)
        .map(|i| function(&format!("big::m{}", i % 5), &format!("f{i}"), 1, 100 + i))
        .collect();
    let mut nodes: Vec<PathNode> = Vec::new();
    let mut depth: Vec<u32> = Vec::new();
    while nodes.len() < 400 {
        let parent = (next(10) > 0 && !nodes.is_empty()).then(|| next(nodes.len() as u64) as u32);
        if parent.is_some_and(|p| depth[p as usize] >= 12) {
            continue;
        }
        let function = next(function_table.len() as u64) as u32;
        if nodes
            .iter()
            .any(|n| n.parent == parent && n.function == function)
        {
            continue;
        }
        depth.push(parent.map_or(1, |p| depth[p as usize] + 1));
        nodes.push(PathNode { parent, function });
    }
    let mut entries = Vec::new();
    for (i, pid) in [(0, 7, 0), (0, 8, 3), (1, 2, 0)].into_iter().enumerate() {
        let group = Group::Process(Pid::from_parts(pid.0, pid.1, pid.2));
        for node in 0..nodes.len() as u32 {
            if next(10) < 3 + i as u64 * 2 {
                continue;
            }
            let measurement = match next(4) {
                0 => 0,
                1 => next(1000),
                2 => next(10_000_000),
                _ => next(3_000_000_000),
            };
            let calls = 1 + next(50);
            let memory = trace_type == TraceType::CallMemory;
            entries.push(PathEntry {
                bytes: if memory { measurement * 8 } else { 0 },
                blocks: if memory { calls } else { 0 },
                ..path_entry(group, node, calls, measurement)
            });
        }
    }
    let mut profile = Profile::empty(trace_type);
    profile.function_table = function_table;
    profile.call_tree = CallTree { nodes, entries };
    profile
}

/// The figure the stack exports weigh: bytes for call_memory, else the measurement.
fn weight(trace_type: TraceType, measurement: u64, bytes: u64) -> u64 {
    if trace_type == TraceType::CallMemory {
        bytes
    } else {
        measurement
    }
}

/// One expected path: its process label, its functions outermost first, and its figures.
#[derive(Debug, Clone)]
struct Path {
    label: String,
    frames: Vec<Function>,
    calls: u64,
    measurement: u64,
    bytes: u64,
    blocks: u64,
}

/// The profile's paths, read from the model directly (not through `export::stacks`).
fn expected_paths(profile: &Profile) -> Vec<Path> {
    if profile.call_tree.is_empty() {
        profile
            .functions
            .iter()
            .flat_map(|f| {
                f.entries.iter().map(|e| Path {
                    label: profile.group_label(e.group),
                    frames: vec![f.function.clone()],
                    calls: e.calls,
                    measurement: e.measurement,
                    bytes: e.bytes,
                    blocks: e.blocks,
                })
            })
            .collect()
    } else {
        profile
            .call_tree
            .entries
            .iter()
            .map(|e| Path {
                label: profile.group_label(e.group),
                frames: profile
                    .call_tree
                    .stack(e.node)
                    .into_iter()
                    .map(|i| profile.function_table[i as usize].clone())
                    .collect(),
                calls: e.calls,
                measurement: e.measurement,
                bytes: e.bytes,
                blocks: e.blocks,
            })
            .collect()
    }
}

/// Per process label, the sum of the weights of its paths.
fn expected_totals(profile: &Profile) -> BTreeMap<String, u64> {
    let mut totals = BTreeMap::new();
    for p in expected_paths(profile) {
        let w = weight(profile.trace_type, p.measurement, p.bytes);
        if w > 0 {
            *totals.entry(p.label).or_insert(0) += w;
        }
    }
    totals
}

fn name(f: &Function) -> String {
    format!("{}::{}", f.module, f.name)
}

fn export_text(format: Format, profile: &Profile) -> String {
    export::to_string(format, profile).unwrap()
}

fn profiles() -> Vec<(String, Profile)> {
    let mut out: Vec<(String, Profile)> = TYPES
        .iter()
        .map(|&t| (format!("real {t}"), real_profile(t, REAL)))
        .collect();
    for t in [TraceType::CallTime, TraceType::CallMemory] {
        out.push((format!("tree {t}"), tree_profile(t)));
        out.push((format!("big tree {t}"), big_tree_profile(t)));
    }
    out
}

/// The formats this file tests: the format, its name and its extension.
const FORMATS: [(Format, &str, &str); 4] = [
    (Format::Speedscope, "speedscope", "speedscope.json"),
    (Format::Chrome, "chrome", "trace.json"),
    (Format::Pprof, "pprof", "pb.gz"),
    (Format::Folded, "folded", "folded"),
];

#[test]
fn the_new_formats_have_names_and_extensions() {
    for (f, name, ext) in FORMATS {
        assert!(Format::ALL.contains(&f));
        assert_eq!(f.name(), name);
        assert_eq!(f.extension(), ext);
        assert_eq!(name.parse::<Format>().unwrap(), f);
    }
}

#[test]
fn the_hand_built_profile_is_what_the_tests_think() {
    let profile = tree_profile(TraceType::CallTime);
    assert_eq!(
        profile.group_label(Group::Process(DISPATCHER)),
        "dispatcher"
    );
    assert_eq!(profile.group_label(Group::Process(WORKER)), "<0.6.1>");
    assert_eq!(
        expected_totals(&profile),
        BTreeMap::from([("<0.6.1>".to_owned(), 155), ("dispatcher".to_owned(), 875)])
    );
    // The flat figures agree with the paths.
    assert_eq!(profile.total(), 875 + 155);
}

// ---- folded

/// Folded lines as (frames, value); panics on a line that is not `frames VALUE`.
fn parse_folded(text: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .map(|line| {
            let (stack, value) = line.rsplit_once(' ').expect("a space before the value");
            assert!(!stack.contains(char::is_whitespace), "{line:?}");
            let value: u64 = value.parse().expect("an integer value");
            assert!(value > 0, "{line:?}");
            (stack.split(';').map(str::to_owned).collect(), value)
        })
        .collect()
}

#[test]
fn folded_lines_sum_to_each_process_total() {
    for (what, profile) in profiles() {
        let text = export_text(Format::Folded, &profile);
        assert!(text.ends_with('\n'), "{what}");
        let lines = parse_folded(&text);
        let mut totals: BTreeMap<String, u64> = BTreeMap::new();
        for (frames, value) in &lines {
            // The process is the root frame; spaces in it became `_`.
            *totals.entry(frames[0].replace('_', " ")).or_insert(0) += value;
        }
        assert_eq!(totals, expected_totals(&profile), "{what}\n{text}");
        // One line per path that weighs something, its frames the path's.
        let mut want: Vec<Vec<String>> = expected_paths(&profile)
            .into_iter()
            .filter(|p| weight(profile.trace_type, p.measurement, p.bytes) > 0)
            .map(|p| {
                std::iter::once(p.label.replace(' ', "_"))
                    .chain(p.frames.iter().map(|f| name(f).replace(' ', "_")))
                    .collect()
            })
            .collect();
        let mut got: Vec<Vec<String>> = lines.into_iter().map(|(f, _)| f).collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn folded_tree_lines_are_exact() {
    let text = export_text(Format::Folded, &tree_profile(TraceType::CallTime));
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "<0.6.1>;app::log 55",
            "<0.6.1>;app::main;app::handle 70",
            "<0.6.1>;app::main;app::handle;app::parse::<Parser_as_Iterator>::next 30",
            "dispatcher;app::main 100",
            "dispatcher;app::main;app::handle 300",
            "dispatcher;app::main;app::handle;app::log 25",
            "dispatcher;app::main;app::handle;app::parse::<Parser_as_Iterator>::next 450",
        ],
        "the path with 0 ns (main>log) is left out"
    );
    // call_memory weighs bytes, not words.
    let text = export_text(Format::Folded, &tree_profile(TraceType::CallMemory));
    assert!(
        text.lines().any(|l| l == "dispatcher;app::main 793"),
        "{text}"
    );
}

// ---- speedscope

#[test]
fn speedscope_frames_samples_and_weights_agree_with_the_profile() {
    for (what, profile) in profiles() {
        let text = export_text(Format::Speedscope, &profile);
        let file: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            file["$schema"],
            "https://www.speedscope.app/file-format-schema.json"
        );
        let frames = file["shared"]["frames"].as_array().unwrap();
        let unit = match profile.trace_type {
            TraceType::CallCount => "none",
            TraceType::CallTime => "nanoseconds",
            TraceType::CallMemory => "bytes",
        };
        // Per process label: the stacks (as frame names) and their weights.
        let mut got: BTreeMap<String, Vec<(Vec<String>, u64)>> = BTreeMap::new();
        let mut totals = BTreeMap::new();
        for p in file["profiles"].as_array().unwrap() {
            assert_eq!(p["type"], "sampled", "{what}");
            assert_eq!(p["unit"], unit, "{what}");
            assert_eq!(p["startValue"], 0, "{what}");
            let samples = p["samples"].as_array().unwrap();
            let weights = p["weights"].as_array().unwrap();
            assert_eq!(samples.len(), weights.len(), "{what}");
            let label = p["name"].as_str().unwrap().to_owned();
            let mut sum = 0;
            for (sample, weight) in samples.iter().zip(weights) {
                let weight = weight.as_u64().unwrap();
                assert!(weight > 0, "{what}");
                sum += weight;
                let names = sample
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| {
                        let frame = &frames[i.as_u64().unwrap() as usize];
                        frame["name"].as_str().unwrap().to_owned()
                    })
                    .collect();
                got.entry(label.clone()).or_default().push((names, weight));
            }
            assert_eq!(p["endValue"].as_u64().unwrap(), sum, "{what}");
            assert!(
                totals.insert(label, sum).is_none(),
                "one profile per process"
            );
        }
        assert_eq!(totals, expected_totals(&profile), "{what}");
        let mut want: BTreeMap<String, Vec<(Vec<String>, u64)>> = BTreeMap::new();
        for p in expected_paths(&profile) {
            let w = weight(profile.trace_type, p.measurement, p.bytes);
            if w > 0 {
                want.entry(p.label)
                    .or_default()
                    .push((p.frames.iter().map(name).collect(), w));
            }
        }
        for v in got.values_mut().chain(want.values_mut()) {
            v.sort();
        }
        assert_eq!(got, want, "{what}");
        // Each frame once, with the function's file and line.
        let all: Vec<&Function> = profile
            .functions
            .iter()
            .map(|f| &f.function)
            .chain(&profile.function_table)
            .collect();
        let mut names: Vec<&str> = Vec::new();
        for frame in frames {
            let n = frame["name"].as_str().unwrap();
            let f = all.iter().find(|f| name(f) == n).unwrap();
            assert_eq!(frame["file"], f.file.as_str(), "{what}");
            assert_eq!(frame["line"], f.line, "{what}");
            names.push(n);
        }
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "{what}: a frame twice");
    }
}

#[test]
fn speedscope_names_profiles_by_registered_name() {
    let text = export_text(Format::Speedscope, &tree_profile(TraceType::CallTime));
    let file: Value = serde_json::from_str(&text).unwrap();
    let names: Vec<&str> = file["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["dispatcher", "<0.6.1>"],
        "pid order, names where registered"
    );
    assert!(
        file["shared"]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "app::parse::<Parser as Iterator>::next"),
        "JSON needs no escaping of the name"
    );
}

// ---- chrome

/// One complete event, read back.
#[derive(Debug, Clone)]
struct Slice {
    name: String,
    ts: f64,
    dur: f64,
    calls: u64,
    measurement: u64,
    inclusive: u64,
    path: String,
}

/// The chrome trace's process names (by pid) and its X events (by pid).
fn parse_chrome(text: &str) -> (HashMap<u64, String>, BTreeMap<u64, Vec<Slice>>) {
    let file: Value = serde_json::from_str(text).unwrap();
    assert_eq!(file["displayTimeUnit"], "ns");
    let mut names = HashMap::new();
    let mut slices: BTreeMap<u64, Vec<Slice>> = BTreeMap::new();
    for e in file["traceEvents"].as_array().unwrap() {
        let pid = e["pid"].as_u64().unwrap();
        assert_eq!(e["tid"].as_u64().unwrap(), pid, "one thread per process");
        match e["ph"].as_str().unwrap() {
            "M" => {
                if e["name"] == "process_name" {
                    let name = e["args"]["name"].as_str().unwrap().to_owned();
                    assert!(names.insert(pid, name).is_none(), "one name per process");
                }
            }
            "X" => {
                let args = &e["args"];
                slices.entry(pid).or_default().push(Slice {
                    name: e["name"].as_str().unwrap().to_owned(),
                    ts: e["ts"].as_f64().unwrap(),
                    dur: e["dur"].as_f64().unwrap(),
                    calls: args["calls"].as_u64().unwrap(),
                    measurement: args["measurement"].as_u64().unwrap(),
                    inclusive: args["inclusive"].as_u64().unwrap(),
                    path: args["path"].as_str().unwrap().to_owned(),
                });
            }
            other => panic!("unexpected event {other}"),
        }
    }
    (names, slices)
}

#[test]
fn chrome_children_lie_within_their_parents() {
    for (what, profile) in profiles() {
        let text = export_text(Format::Chrome, &profile);
        let (names, slices) = parse_chrome(&text);
        let us_per_unit = if profile.trace_type == TraceType::CallTime {
            1e-3
        } else {
            1.0
        };
        let mut totals = BTreeMap::new();
        for (pid, slices) in &slices {
            let label = names.get(pid).expect("process_name for every track");
            let by_path: HashMap<&str, &Slice> =
                slices.iter().map(|s| (s.path.as_str(), s)).collect();
            assert_eq!(by_path.len(), slices.len(), "{what}: a path twice");
            let mut roots_end = 0.0f64;
            let mut total = 0;
            for s in slices {
                assert!(s.dur > 0.0, "{what}: {s:?}");
                // The duration is the inclusive figure (to the rounding of doubles near ts).
                let want = s.inclusive as f64 * us_per_unit;
                let rounding = 4.0 * f64::EPSILON * (s.ts + s.dur).max(want);
                assert!((s.dur - want).abs() <= rounding, "{what}: {s:?}");
                let children: Vec<&Slice> = slices
                    .iter()
                    .filter(|c| {
                        c.path
                            .strip_suffix(c.name.as_str())
                            .and_then(|p| p.strip_suffix(';'))
                            == Some(s.path.as_str())
                    })
                    .collect();
                let below: u64 = children.iter().map(|c| c.inclusive).sum();
                assert_eq!(s.inclusive, s.measurement + below, "{what}: {s:?}");
                // Every child lies within its parent (as a reader adds ts and dur).
                for c in &children {
                    assert!(
                        c.ts >= s.ts && c.ts + c.dur <= s.ts + s.dur,
                        "{what}: {c:?} is not within {s:?}"
                    );
                }
                // Siblings do not overlap.
                let mut spans: Vec<(f64, f64)> =
                    children.iter().map(|c| (c.ts, c.ts + c.dur)).collect();
                spans.sort_by(|a, b| a.0.total_cmp(&b.0));
                assert!(
                    spans.windows(2).all(|w| w[0].1 <= w[1].0),
                    "{what}: {spans:?}"
                );
                match s.path.strip_suffix(&s.name) {
                    Some("") => {
                        // A root: roots are laid side by side from 0.
                        assert!(s.ts >= roots_end, "{what}: {s:?}");
                        roots_end = s.ts + s.dur;
                        total += s.inclusive;
                    }
                    Some(parent) => {
                        let parent = parent.strip_suffix(';').unwrap();
                        assert!(by_path.contains_key(parent), "{what}: {s:?} has no parent");
                    }
                    None => panic!("{what}: the path does not end in the name: {s:?}"),
                }
            }
            totals.insert(label.clone(), total);
        }
        // Laid out in what every export weighs: bytes for call_memory.
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        for p in expected_paths(&profile) {
            *want.entry(p.label).or_insert(0) += weight(profile.trace_type, p.measurement, p.bytes);
        }
        want.retain(|_, v| *v > 0);
        assert_eq!(totals, want, "{what}");
        // Each path's own figures are the profile's.
        for p in expected_paths(&profile) {
            let path = p.frames.iter().map(name).collect::<Vec<_>>().join(";");
            let pid = names
                .iter()
                .find(|(_, n)| **n == p.label)
                .map(|(pid, _)| pid);
            let found = pid
                .and_then(|pid| slices.get(pid))
                .and_then(|s| s.iter().find(|s| s.path == path));
            match found {
                Some(s) => {
                    let w = weight(profile.trace_type, p.measurement, p.bytes);
                    assert_eq!((s.calls, s.measurement), (p.calls, w), "{what}");
                }
                None => assert_eq!(
                    weight(profile.trace_type, p.measurement, p.bytes),
                    0,
                    "{what}: {p:?} is missing"
                ),
            }
        }
    }
}

#[test]
fn chrome_names_tracks_by_registered_name() {
    let profile = tree_profile(TraceType::CallMemory);
    let text = export_text(Format::Chrome, &profile);
    let (names, slices) = parse_chrome(&text);
    let mut tracks: Vec<(&u64, &String)> = names.iter().collect();
    tracks.sort();
    assert_eq!(
        tracks,
        [(&1, &"dispatcher".to_owned()), (&2, &"<0.6.1>".to_owned())]
    );
    // The worker's main has no figures of its own, and still frames what ran under it: main
    // spans handle (70 words, 553 bytes) and next below it (30 words, 226 bytes).
    let worker = &slices[&2];
    let main = worker.iter().find(|s| s.path == "app::main").unwrap();
    assert_eq!((main.calls, main.measurement, main.inclusive), (0, 0, 779));
    let file: Value = serde_json::from_str(&text).unwrap();
    let thread = file["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "thread_name")
        .unwrap();
    assert_eq!(thread["args"]["name"], "bytes allocated (1 µs = 1 byte)");
    let x = file["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ph"] == "X" && e["args"]["path"] == "app::main" && e["pid"] == 1)
        .unwrap();
    assert_eq!(x["args"]["bytes"], 793);
    assert_eq!(x["args"]["blocks"], 1);
}

// ---- processes sharing a name

/// [`tree_profile`] with both processes registered as `worker` (one after the other, say), and
/// a third process of its own name.
fn twins_profile(trace_type: TraceType) -> Profile {
    let mut profile = tree_profile(trace_type);
    let third = Pid::from_parts(0, 7, 0);
    for p in &mut profile.processes {
        p.name = Some("worker".to_owned());
    }
    profile
        .processes
        .push(process(third, Some("solo"), "app::solo", 0));
    let log = profile.function_table[3].clone();
    let f = profile
        .functions
        .iter_mut()
        .find(|f| f.function == log)
        .unwrap();
    f.entries.push(common::entry(Group::Process(third), 1, 5));
    f.entries.sort_by_key(|e| e.group);
    profile
        .call_tree
        .entries
        .push(path_entry(Group::Process(third), 4, 1, 5));
    profile
}

#[test]
fn processes_sharing_a_name_are_told_apart_by_pid() {
    let profile = twins_profile(TraceType::CallTime);
    let (a, b) = ("worker <0.5.0>", "worker <0.6.1>");
    assert_eq!(profile.group_label(Group::Process(DISPATCHER)), a);
    assert_eq!(profile.group_label(Group::Process(WORKER)), b);
    let solo = Group::Process(Pid::from_parts(0, 7, 0));
    assert_eq!(profile.group_label(solo), "solo", "a name no one shares");
    // folded: the root frame.
    let folded = export_text(Format::Folded, &profile);
    let mut roots: Vec<String> = parse_folded(&folded)
        .into_iter()
        .map(|(frames, _)| frames[0].clone())
        .collect();
    roots.dedup();
    assert_eq!(roots, ["worker_<0.5.0>", "worker_<0.6.1>", "solo"]);
    // speedscope: the profiles' names.
    let file: Value = serde_json::from_str(&export_text(Format::Speedscope, &profile)).unwrap();
    let names: Vec<&str> = file["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [a, b, "solo"]);
    // chrome: the tracks' names.
    let (names, _) = parse_chrome(&export_text(Format::Chrome, &profile));
    let mut tracks: Vec<(u64, String)> = names.into_iter().collect();
    tracks.sort();
    let tracks: Vec<&str> = tracks.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(tracks, [a, b, "solo"]);
    // pprof keeps the registered name as `process` (to focus on every worker), and the pid.
    let p = decode_pprof(&profile);
    let mut labels: Vec<(&str, &str)> = p
        .sample
        .iter()
        .map(|s| (p.string(s.label[0].str), p.string(s.label[1].str)))
        .collect();
    labels.dedup();
    assert_eq!(
        labels,
        [
            ("worker", "<0.5.0>"),
            ("worker", "<0.6.1>"),
            ("solo", "<0.7.0>")
        ]
    );
}

// ---- units

#[test]
fn chrome_lays_call_memory_out_in_bytes_as_every_export_weighs_it() {
    let profile = tree_profile(TraceType::CallMemory);
    let text = export_text(Format::Chrome, &profile);
    let file: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        file["otherData"]["duration_unit"],
        "1 µs of duration = 1 byte allocated"
    );
    let thread = file["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "thread_name")
        .unwrap();
    assert_eq!(thread["args"]["name"], "bytes allocated (1 µs = 1 byte)");
    let (_, slices) = parse_chrome(&text);
    // Per process, the roots' inclusive figures are the bytes folded and speedscope weigh.
    let folded = parse_folded(&export_text(Format::Folded, &profile));
    let (names, _) = parse_chrome(&text);
    for (pid, slices) in &slices {
        let label = &names[pid];
        let roots: u64 = slices
            .iter()
            .filter(|s| s.path == s.name)
            .map(|s| s.inclusive)
            .sum();
        let want: u64 = folded
            .iter()
            .filter(|(frames, _)| frames[0] == label.replace(' ', "_"))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(roots, want, "{label}");
        assert!(slices.iter().all(|s| s.measurement <= s.inclusive));
    }
    let x = file["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ph"] == "X" && e["args"]["path"] == "app::main" && e["pid"] == 1)
        .unwrap();
    assert_eq!(x["args"]["unit"], "bytes");
    assert_eq!(x["args"]["measurement"], 793);
    assert_eq!(x["args"]["words"], 100);
}

// ---- pprof

#[test]
fn pprof_decodes_to_the_profile_s_samples() {
    for (what, profile) in profiles() {
        let p = decode_pprof(&profile);
        assert_eq!(p.string_table[0], "", "{what}");
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (p.string(t.r#type), p.string(t.unit)))
            .collect();
        let want_types: &[(&str, &str)] = match profile.trace_type {
            TraceType::CallCount => &[("calls", "count")],
            TraceType::CallTime => &[("calls", "count"), ("time", "nanoseconds")],
            TraceType::CallMemory => &[
                ("calls", "count"),
                ("alloc_space", "bytes"),
                ("alloc_objects", "count"),
            ],
        };
        assert_eq!(types, want_types, "{what}");
        let main = p.period_type.as_ref().unwrap();
        assert_eq!(main.r#type, p.default_sample_type, "{what}");
        let want_main = match profile.trace_type {
            TraceType::CallCount => "calls",
            TraceType::CallTime => "time",
            TraceType::CallMemory => "alloc_space",
        };
        assert_eq!(p.string(main.r#type), want_main, "{what}");

        // Every id is nonzero, unique and refers to something that exists.
        let functions: HashMap<u64, &pprof::Function> =
            p.function.iter().map(|f| (f.id, f)).collect();
        let locations: HashMap<u64, &pprof::Location> =
            p.location.iter().map(|l| (l.id, l)).collect();
        assert_eq!(functions.len(), p.function.len(), "{what}");
        assert_eq!(locations.len(), p.location.len(), "{what}");
        assert!(
            !functions.contains_key(&0) && !locations.contains_key(&0),
            "{what}"
        );
        for l in &p.location {
            assert_eq!(l.mapping_id, 0, "{what}: no mappings");
            assert!(
                l.line
                    .iter()
                    .all(|line| functions.contains_key(&line.function_id))
            );
        }
        let in_table = |i: i64| usize::try_from(i).is_ok_and(|i| i < p.string_table.len());
        for f in &p.function {
            assert!(in_table(f.name) && in_table(f.system_name) && in_table(f.filename));
        }

        // The samples, read as (process, pid, frames outermost first as `name file:line`,
        // values), against the profile's paths.
        let mut got = Vec::new();
        for s in &p.sample {
            assert_eq!(s.value.len(), p.sample_type.len(), "{what}");
            let label = |key: &str| {
                s.label
                    .iter()
                    .find(|l| p.string(l.key) == key)
                    .map(|l| p.string(l.str).to_owned())
            };
            let mut frames: Vec<String> = s
                .location_id
                .iter()
                .map(|id| {
                    let line = &locations[id].line[0];
                    let f = functions[&line.function_id];
                    assert_eq!(f.start_line, line.line, "{what}");
                    format!(
                        "{} {}:{}",
                        p.string(f.name),
                        p.string(f.filename),
                        line.line
                    )
                })
                .collect();
            frames.reverse(); // pprof lists the leaf first
            got.push((label("process"), label("pid"), frames, s.value.clone()));
        }
        let mut want = Vec::new();
        for path in expected_paths(&profile) {
            let value: Vec<i64> = match profile.trace_type {
                TraceType::CallCount => vec![path.measurement],
                TraceType::CallTime => vec![path.calls, path.measurement],
                TraceType::CallMemory => vec![path.calls, path.bytes, path.blocks],
            }
            .into_iter()
            .map(|v| v as i64)
            .collect();
            if value.iter().all(|&v| v == 0) {
                continue;
            }
            let pid = profile
                .processes
                .iter()
                .find(|r| r.label() == path.label)
                .map(|r| r.pid.to_string())
                .or_else(|| path.label.starts_with('<').then(|| path.label.clone()));
            let frames = path
                .frames
                .iter()
                .map(|f| format!("{} {}:{}", name(f), f.file, f.line))
                .collect();
            want.push((Some(path.label), pid, frames, value));
        }
        got.sort();
        want.sort();
        assert_eq!(got, want, "{what}");
        if profile.trace_type == TraceType::CallCount {
            assert!(
                got.iter()
                    .all(|s| s.0.as_deref() == Some("all processes") && s.1.is_none())
            );
        }
    }
}

#[test]
fn pprof_labels_the_registered_process_and_names_functions_by_module() {
    let p = decode_pprof(&tree_profile(TraceType::CallTime));
    let next = p
        .function
        .iter()
        .find(|f| p.string(f.name) == "app::parse::<Parser as Iterator>::next")
        .unwrap();
    assert_eq!(
        p.string(next.system_name),
        "app::parse::<Parser as Iterator>::next/1"
    );
    assert_eq!(p.string(next.filename), "src/app/parse.rs");
    assert_eq!(next.start_line, 30);
    // The deepest dispatcher path: next, handle, main, leaf first, with 9 calls and 450 ns.
    let deepest = p
        .sample
        .iter()
        .find(|s| s.value == [9, 450])
        .expect("the dispatcher's next");
    let names: Vec<&str> = deepest
        .location_id
        .iter()
        .map(|id| {
            let l = p.location.iter().find(|l| l.id == *id).unwrap();
            let f = p
                .function
                .iter()
                .find(|f| f.id == l.line[0].function_id)
                .unwrap();
            p.string(f.name)
        })
        .collect();
    assert_eq!(
        names,
        [
            "app::parse::<Parser as Iterator>::next",
            "app::handle",
            "app::main"
        ]
    );
    let labels: Vec<(&str, &str)> = deepest
        .label
        .iter()
        .map(|l| (p.string(l.key), p.string(l.str)))
        .collect();
    assert_eq!(labels, [("process", "dispatcher"), ("pid", "<0.5.0>")]);
}

// ---- sample files for the real tools

/// Writes every stack-shaped format of a few profiles to `$TPROF_EXPORT_DIR`, for
/// `validators/check.sh`.
#[test]
#[ignore = "writes files for the real tools to check by hand"]
fn write_sample_files() {
    let dir = std::env::var_os("TPROF_EXPORT_DIR")
        .map_or_else(|| std::env::temp_dir().join("tprof-exports"), Into::into);
    std::fs::create_dir_all(&dir).unwrap();
    let mut named: Vec<(String, Profile)> =
        vec![("x".to_owned(), tree_profile(TraceType::CallTime))];
    named.push((
        "tree-memory".to_owned(),
        tree_profile(TraceType::CallMemory),
    ));
    named.push(("big-time".to_owned(), big_tree_profile(TraceType::CallTime)));
    for t in TYPES {
        named.push((format!("real-{t}"), real_profile(t, REAL)));
    }
    let events = Real {
        events: true,
        ..REAL
    };
    named.push((
        "real-events".to_owned(),
        real_profile(TraceType::CallTime, events),
    ));
    for (name, profile) in &named {
        for (f, _, _) in FORMATS {
            let path = dir.join(format!("{name}.{}", f.extension()));
            let mut out = Vec::new();
            export::write(f, profile, &mut out).unwrap();
            std::fs::write(&path, out).unwrap();
            println!("{}", path.display());
        }
    }
}

/// The pprof export writes its samples as it makes them: what it writes decodes to the
/// profile `to_proto` builds whole, for every trace type, with and without call paths.
#[test]
fn pprof_written_sample_by_sample_is_the_whole_profile() {
    for trace_type in TYPES {
        for profile in [tree_profile(trace_type), big_tree_profile(trace_type)] {
            let whole = pprof::to_proto(&profile);
            assert!(!whole.sample.is_empty());
            assert_eq!(decode_pprof(&profile), whole, "{trace_type}");
            // Byte for byte: the fields in the order of their numbers.
            let mut gz = Vec::new();
            export::write(Format::Pprof, &profile, &mut gz).unwrap();
            let mut raw = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw)
                .unwrap();
            assert_eq!(raw, prost::Message::encode_to_vec(&whole), "{trace_type}");
        }
        let mut flat = tree_profile(trace_type);
        flat.call_tree = tprof::CallTree::default();
        assert_eq!(decode_pprof(&flat), pprof::to_proto(&flat), "{trace_type}");
    }
}
