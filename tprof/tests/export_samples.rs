//! Every export of a sampled profile, read back and checked exactly: a sample set built by hand
//! (CPU samples of two processes and outside any process, with native frames, an overrun and
//! dropped samples; wall samples with states), and one real sampled profile end to end.
//!
//! `cargo test -p tprof --test export_samples -- --ignored` also writes sample files of every
//! format to `$TPROF_EXPORT_DIR` (default: `tprof-exports` in the temp dir) for the real tools.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::svg::svg_frames;
use common::{decode_pprof, embedded, function, pid, process};
use std::collections::BTreeMap;

use runtime::Pid;
use serde_json::Value;
use tprof::export::{self, Format};
use tprof::samples::{
    SampleFrame, SampleMapping, SampleRecord, SampleSet, SampleSource, SampleStack, SampleThread,
    SamplerKind, WaitState,
};
use tprof::{Meta, Profile, Run, TraceType};

/// The registered process of [`cpu_profile`].
fn dispatcher() -> Pid {
    pid("<0.5.0>")
}

/// The unnamed process of [`cpu_profile`].
fn unnamed() -> Pid {
    pid("<0.6.0>")
}

/// A frame of a traced function (an index into the function table).
fn traced(function: u32) -> SampleFrame {
    SampleFrame {
        function: Some(function),
        name: String::new(),
        file: None,
        line: None,
        address: 0,
    }
}

/// A native frame.
fn native(name: &str, file: Option<&str>, line: Option<u32>, address: u64) -> SampleFrame {
    SampleFrame {
        function: None,
        name: name.to_owned(),
        file: file.map(str::to_owned),
        line,
        address,
    }
}

/// A source of `sampler` at `hz`.
fn source(sampler: SamplerKind, hz: u32, dropped: f64) -> SampleSource {
    SampleSource {
        run: 0,
        node: 0,
        sampler,
        hz,
        alloc_rate: None,
        dropped,
        lost_frees: 0,
        before_sampling: 0,
        native_walked: true,
        duration_ns: 50_000_000,
        capacity: 1000,
        cpu: None,
    }
}

/// A sample of source 0.
fn sample(
    time_ms: u64,
    pid: Option<Pid>,
    thread: Option<u32>,
    weight: f64,
    stack: Option<u32>,
) -> SampleRecord {
    SampleRecord {
        source: 0,
        pid,
        thread,
        time_ns: time_ms * 1_000_000,
        weight,
        stack,
        state: None,
        mailbox_len: 0,
        callee: None,
        size: 0,
        live: false,
    }
}

/// A CPU profile at 1000 Hz (a period is 1 ms), built by hand:
///
/// - functions: `app::main/0` (line 10), `app::handle/1` (20) and
///   `app::parse::<Parser as Iterator>::next/1` (30);
/// - frames: 0 main, 1 handle, 2 next (traced); 3 `core::str::from_utf8` (a file and line, in
///   the mapping of `/bin/app`), 4 `std::thread::park` (no file, outside the mapping),
///   5 a frame with no name at `0x402000`;
/// - stacks: 0 main; 1 main > handle; 2 main > handle > from_utf8; 3 park; 4 park > 0x402000;
///   5 main > handle > next;
/// - samples: `dispatcher` (`<0.5.0>`) 2 ms in from_utf8 (two samples), 2 ms in next (one
///   sample, one overrun), 1 ms in main; `<0.6.0>` 1 ms in handle, 1 ms with no stack;
///   outside processes 1 ms in park > 0x402000 and 1 ms in park, on two threads;
/// - 2 samples dropped (2 ms).
fn cpu_profile() -> Profile {
    let mut profile = Profile::empty(TraceType::CallCount);
    profile.function_table = vec![
        function("app", "main", 0, 10),
        function("app", "handle", 1, 20),
        function("app::parse", "<Parser as Iterator>::next", 1, 30),
    ];
    profile.processes = vec![
        process(dispatcher(), Some("dispatcher"), "app::dispatch", 0),
        process(unnamed(), None, "app::work", 0),
    ];
    profile.meta = Meta {
        runs: vec![Run {
            program: "app --serve".to_owned(),
            started_unix_ms: 1_700_000_000_000,
            duration_ns: 60_000_000,
            nodes: vec![0],
            run_queue: None,
        }],
    };
    let stack = |parent: Option<u32>, frame: u32| SampleStack { parent, frame };
    let (d, u) = (Some(dispatcher()), Some(unnamed()));
    profile.samples = SampleSet {
        sources: vec![source(SamplerKind::Cpu, 1000, 2.0)],
        frames: vec![
            traced(0),
            traced(1),
            traced(2),
            native(
                "core::str::from_utf8",
                Some("/rustc/core/src/str/mod.rs"),
                Some(100),
                0x40_1234,
            ),
            native("std::thread::park", None, None, 0x7f00_0000_1000),
            native("", None, None, 0x40_2000),
        ],
        stacks: vec![
            stack(None, 0),
            stack(Some(0), 1),
            stack(Some(1), 3),
            stack(None, 4),
            stack(Some(3), 5),
            stack(Some(1), 2),
        ],
        samples: vec![
            sample(0, d, Some(0), 1.0, Some(2)),
            sample(1, d, Some(0), 1.0, Some(2)),
            sample(2, d, Some(0), 2.0, Some(5)),
            sample(4, u, Some(1), 1.0, Some(1)),
            sample(5, None, Some(1), 1.0, Some(4)),
            sample(6, None, Some(0), 1.0, Some(3)),
            sample(7, d, Some(1), 1.0, Some(0)),
            sample(8, u, Some(1), 1.0, None),
        ],
        threads: vec![
            SampleThread {
                source: 0,
                tid: 101,
                name: Some("node-worker".to_owned()),
            },
            SampleThread {
                source: 0,
                tid: 102,
                name: None,
            },
        ],
        mappings: vec![SampleMapping {
            source: 0,
            start: 0x40_0000,
            limit: 0x50_0000,
            offset: 0x1000,
            file: "/bin/app".to_owned(),
        }],
    };
    profile
}

/// A wall profile at 100 Hz (a tick is 10 ms) of [`cpu_profile`]'s functions: `dispatcher`
/// waits in `receive` under main (2.5 process-ticks, then 1.5), then runs handle (1); `<0.6.0>`
/// waits in a call under handle (4); nothing dropped.
fn wall_profile() -> Profile {
    let mut profile = cpu_profile();
    let wall = |time_ms, pid, weight, stack, state| SampleRecord {
        state: Some(state),
        mailbox_len: 3,
        callee: None,
        ..sample(time_ms, Some(pid), None, weight, Some(stack))
    };
    profile.samples.sources = vec![source(SamplerKind::Wall, 100, 0.0)];
    profile.samples.threads.clear();
    profile.samples.mappings.clear();
    profile.samples.samples = vec![
        wall(0, dispatcher(), 2.5, 0, WaitState::Receive),
        wall(10, unnamed(), 4.0, 1, WaitState::Call),
        wall(20, dispatcher(), 1.5, 0, WaitState::Receive),
        wall(30, dispatcher(), 1.0, 1, WaitState::Running),
    ];
    profile
}

/// CPU and wall samples together, as a merge of [`cpu_profile`] and [`wall_profile`] gives
/// them: the wall samples are source 1.
fn mixed_profile() -> Profile {
    let mut mixed = cpu_profile();
    let wall = wall_profile().samples;
    mixed.samples.sources.push(wall.sources[0].clone());
    mixed.samples.samples.extend(
        wall.samples
            .into_iter()
            .map(|s| SampleRecord { source: 1, ..s }),
    );
    mixed
}

/// The lines of a text export.
fn lines(format: Format, profile: &Profile) -> Vec<String> {
    export::to_string(format, profile)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------- folded

#[test]
fn folded_samples_are_one_line_per_path_in_nanoseconds_under_their_process() {
    assert_eq!(
        lines(Format::Folded, &cpu_profile()),
        [
            "dispatcher;app::main 1000000",
            "dispatcher;app::main;app::handle;app::parse::<Parser_as_Iterator>::next 2000000",
            "dispatcher;app::main;app::handle;core::str::from_utf8 2000000",
            "<0.6.0> 1000000",
            "<0.6.0>;app::main;app::handle 1000000",
            "(outside_processes);std::thread::park 1000000",
            "(outside_processes);std::thread::park;0x402000 1000000",
            "(dropped_samples) 2000000",
        ]
    );
}

#[test]
fn folded_wall_samples_end_in_their_state_and_samplers_split_when_mixed() {
    assert_eq!(
        lines(Format::Folded, &wall_profile()),
        [
            "dispatcher;app::main;[receive] 40000000",
            "dispatcher;app::main;app::handle;[running] 10000000",
            "<0.6.0>;app::main;app::handle;[call] 40000000",
        ]
    );
    // CPU and wall samples together (a merge): one total of them would mean nothing, so
    // the export is refused, naming the filter that exports one sampler at a time.
    let mixed = mixed_profile();
    let refused = export::to_string(Format::Folded, &mixed).unwrap_err();
    assert!(refused.to_string().contains("--sampler cpu"), "{refused}");
    let only = |kind| Profile {
        samples: mixed.samples.only(kind),
        ..mixed.clone()
    };
    let cpu = lines(Format::Folded, &only(SamplerKind::Cpu));
    assert_eq!(cpu, lines(Format::Folded, &cpu_profile()));
    assert_eq!(cpu[0], "dispatcher;app::main 1000000");
    let wall = lines(Format::Folded, &only(SamplerKind::Wall));
    assert_eq!(wall, lines(Format::Folded, &wall_profile()));
}

// ---------------------------------------------------------------- svg

#[test]
fn the_flame_graph_of_samples_weighs_nanoseconds_and_shows_what_was_dropped() {
    let svg = export::to_string(Format::Svg, &cpu_profile()).unwrap();
    let (frames, total) = svg_frames(&svg);
    assert_eq!(total, 11_000_000, "9 ms sampled and 2 ms dropped");
    let widths: Vec<(&str, u64)> = frames.iter().map(|f| (f.name.as_str(), f.units)).collect();
    // inferno's order: by depth, then name.
    let nbsp = |s: &str| s.replace(' ', "\u{A0}");
    let next = nbsp("app::parse::<Parser as Iterator>::next/1");
    let mut expected = vec![
        ("all", 11_000_000),
        ("(outside\u{A0}processes)", 2_000_000),
        ("(dropped\u{A0}samples)", 2_000_000),
        ("<0.6.0>", 2_000_000),
        ("dispatcher", 5_000_000),
        ("std::thread::park", 2_000_000),
        ("app::main/0", 1_000_000),
        ("app::main/0", 5_000_000),
        ("0x402000", 1_000_000),
        ("app::handle/1", 1_000_000),
        ("app::handle/1", 4_000_000),
        (next.as_str(), 2_000_000),
        ("core::str::from_utf8", 2_000_000),
    ];
    let mut got = widths.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert!(
        svg.contains("cpu samples at 1000 Hz asked flame graph (ns of CPU time)"),
        "{svg}"
    );
    assert!(
        svg.contains("2 samples dropped (the sample buffer was full): about 2.000 ms not shown"),
        "the subtitle says what was dropped"
    );
    // The document's title (a browser's tab): the program and what is drawn, first in the
    // root element, not left empty.
    let root = svg.find("<svg").unwrap();
    let after_root = &svg[root + svg[root..].find('>').unwrap() + 1..];
    assert!(
        after_root.starts_with(
            "<title>app --serve — cpu samples at 1000 Hz asked flame graph (ns of CPU \
             time)</title>"
        ),
        "{after_root:.200}"
    );
}

#[test]
fn the_flame_graph_leaves_out_frames_narrower_than_a_pixel() {
    // One path of 1,000,000 periods, and 5,000 distinct paths of one period each, far under a
    // pixel (1/1200 of the width) each.
    let mut profile = cpu_profile();
    let set = &mut profile.samples;
    set.sources[0].dropped = 0.0;
    set.samples = vec![sample(0, Some(dispatcher()), None, 1e6, Some(0))];
    for i in 0..5000u32 {
        let frame = u32::try_from(set.frames.len()).unwrap();
        set.frames.push(native(&format!("f{i}"), None, None, 0));
        let stack = u32::try_from(set.stacks.len()).unwrap();
        set.stacks.push(SampleStack {
            parent: Some(0),
            frame,
        });
        set.samples
            .push(sample(1, Some(dispatcher()), None, 1.0, Some(stack)));
    }
    assert_eq!(lines(Format::Folded, &profile).len(), 5001);
    let (frames, total) = svg_frames(&export::to_string(Format::Svg, &profile).unwrap());
    assert_eq!(total, 1_005_000_000_000);
    let names: Vec<&str> = frames.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["all", "dispatcher", "app::main/0"]);
}

// ---------------------------------------------------------------- pprof

/// A pprof sample as read back: its frames' names (leaf first), its labels, its values.
type ReadSample = (Vec<String>, BTreeMap<String, String>, Vec<i64>);

/// The samples of a decoded pprof, read back through its ids, sorted.
fn pprof_samples(p: &tprof::export::pprof::Profile) -> Vec<ReadSample> {
    let mut out: Vec<ReadSample> = p
        .sample
        .iter()
        .map(|s| {
            let frames = s
                .location_id
                .iter()
                .map(|id| {
                    let location = &p.location[usize::try_from(*id).unwrap() - 1];
                    assert_eq!(location.id, *id, "ids are positions from 1");
                    assert_eq!(location.line.len(), 1);
                    let f = &p.function[usize::try_from(location.line[0].function_id).unwrap() - 1];
                    p.string(f.name).to_owned()
                })
                .collect();
            let labels = s
                .label
                .iter()
                .map(|l| (p.string(l.key).to_owned(), p.string(l.str).to_owned()))
                .collect();
            (frames, labels, s.value.clone())
        })
        .collect();
    out.sort();
    out
}

/// Labels from `key=value` pairs.
fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn pprof_of_cpu_samples_has_counts_and_cpu_time_with_labels_and_locations() {
    let p = decode_pprof(&cpu_profile());
    assert_eq!(p.string_table[0], "");
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (p.string(t.r#type), p.string(t.unit)))
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    let period_type = p.period_type.clone().unwrap();
    assert_eq!(
        (p.string(period_type.r#type), p.string(period_type.unit)),
        ("cpu", "nanoseconds")
    );
    assert_eq!(p.period, 1_000_000);
    assert_eq!(p.string(p.default_sample_type), "cpu");
    assert_eq!(p.duration_nanos, 50_000_000);
    assert_eq!(p.time_nanos, 1_700_000_000_000_000_000);
    let comments: Vec<&str> = p.comment.iter().map(|c| p.string(*c)).collect();
    assert_eq!(
        comments,
        [
            "tprof cpu samples at 1000 Hz asked",
            "cpu: nanoseconds of CPU time (each sample's weight times its period)",
            "2 samples dropped (the sample buffer was full): about 2.000 ms not shown",
        ]
    );

    let names = |frames: &[&str]| frames.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>();
    let d = [("process", "dispatcher"), ("pid", "<0.5.0>")];
    let u = [("process", "<0.6.0>"), ("pid", "<0.6.0>")];
    let outside = [("process", "(outside processes)")];
    let with = |base: &[(&'static str, &'static str)], thread: &'static str| {
        let mut l = base.to_vec();
        l.push(("thread", thread));
        labels(&l)
    };
    let mut expected: Vec<ReadSample> = vec![
        (
            names(&["core::str::from_utf8", "app::handle", "app::main"]),
            with(&d, "node-worker/101"),
            vec![2, 2_000_000],
        ),
        (
            names(&[
                "app::parse::<Parser as Iterator>::next",
                "app::handle",
                "app::main",
            ]),
            with(&d, "node-worker/101"),
            vec![1, 2_000_000],
        ),
        (names(&["app::main"]), with(&d, "102"), vec![1, 1_000_000]),
        (
            names(&["app::handle", "app::main"]),
            with(&u, "102"),
            vec![1, 1_000_000],
        ),
        (names(&["(no stack)"]), with(&u, "102"), vec![1, 1_000_000]),
        (
            names(&["0x402000", "std::thread::park"]),
            with(&outside, "102"),
            vec![1, 1_000_000],
        ),
        (
            names(&["std::thread::park"]),
            with(&outside, "node-worker/101"),
            vec![1, 1_000_000],
        ),
    ];
    expected.sort();
    assert_eq!(pprof_samples(&p), expected);

    // One mapping, as the sample set has it.
    assert_eq!(p.mapping.len(), 1);
    let m = &p.mapping[0];
    assert_eq!(
        (m.id, m.memory_start, m.memory_limit, m.file_offset),
        (1, 0x40_0000, 0x50_0000, 0x1000)
    );
    assert_eq!(p.string(m.filename), "/bin/app");
    assert!(m.has_functions && m.has_filenames && m.has_line_numbers);
    // Locations: native ones at their addresses, in the mapping they fall in (or none);
    // traced ones at no address, at their function's line.
    let mut read: Vec<(String, u64, u64, i64, String, i64)> = p
        .location
        .iter()
        .map(|l| {
            let f = &p.function[usize::try_from(l.line[0].function_id).unwrap() - 1];
            (
                p.string(f.name).to_owned(),
                l.address,
                l.mapping_id,
                l.line[0].line,
                p.string(f.filename).to_owned(),
                f.start_line,
            )
        })
        .collect();
    read.sort();
    let loc = |name: &str, address, mapping, line, file: &str, start| {
        (
            name.to_owned(),
            address,
            mapping,
            line,
            file.to_owned(),
            start,
        )
    };
    assert_eq!(
        read,
        [
            loc("(no stack)", 0, 0, 0, "", 0),
            loc("0x402000", 0x40_2000, 1, 0, "", 0),
            loc("app::handle", 0, 0, 20, "src/app.rs", 20),
            loc("app::main", 0, 0, 10, "src/app.rs", 10),
            loc(
                "app::parse::<Parser as Iterator>::next",
                0,
                0,
                30,
                "src/app/parse.rs",
                30
            ),
            loc(
                "core::str::from_utf8",
                0x40_1234,
                1,
                100,
                "/rustc/core/src/str/mod.rs",
                0
            ),
            loc("std::thread::park", 0x7f00_0000_1000, 0, 0, "", 0),
        ]
    );
    // Traced functions keep their arity in the system name.
    let system: Vec<&str> = p.function.iter().map(|f| p.string(f.system_name)).collect();
    assert!(system.contains(&"app::handle/1"), "{system:?}");
}

#[test]
fn pprof_of_wall_samples_values_wall_time_and_labels_the_state() {
    let p = decode_pprof(&wall_profile());
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (p.string(t.r#type), p.string(t.unit)))
        .collect();
    assert_eq!(types, [("samples", "count"), ("wall", "nanoseconds")]);
    assert_eq!(p.string(p.default_sample_type), "wall");
    assert_eq!(p.period, 10_000_000);
    let got = pprof_samples(&p);
    let read = |f: &[&str], process: &str, pid: &str, state: &str, value: Vec<i64>| {
        let frames = f.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let labels = labels(&[("process", process), ("pid", pid), ("state", state)]);
        (frames, labels, value)
    };
    let handle = ["app::handle", "app::main"];
    let mut expected: Vec<ReadSample> = vec![
        read(
            &["app::main"],
            "dispatcher",
            "<0.5.0>",
            "receive",
            vec![2, 40_000_000],
        ),
        read(
            &handle,
            "dispatcher",
            "<0.5.0>",
            "running",
            vec![1, 10_000_000],
        ),
        read(&handle, "<0.6.0>", "<0.6.0>", "call", vec![1, 40_000_000]),
    ];
    expected.sort();
    assert_eq!(got, expected);
    assert!(p.comment.iter().all(|c| !p.string(*c).contains("dropped")));
    // A merge of CPU and wall samples: each sample valued in its own type, 0 in the other.
    let mixed = mixed_profile();
    let p = decode_pprof(&mixed);
    let types: Vec<&str> = p.sample_type.iter().map(|t| p.string(t.r#type)).collect();
    assert_eq!(types, ["samples", "cpu", "wall"]);
    let values: Vec<Vec<i64>> = pprof_samples(&p).into_iter().map(|s| s.2).collect();
    assert!(values.contains(&vec![2, 2_000_000, 0]), "{values:?}");
    assert!(values.contains(&vec![1, 0, 40_000_000]), "{values:?}");
    let total = |column: usize| values.iter().map(|v| v[column]).sum::<i64>();
    assert_eq!((total(0), total(1), total(2)), (12, 9_000_000, 90_000_000));
}

// ---------------------------------------------------------------- speedscope

/// A speedscope profile as read back: its name, and its samples' paths and weights.
type ReadProfile = (String, Vec<(String, u64)>);

/// The speedscope file of `profile`, and its profiles read back: each one's name, and each
/// sample as its frames' names joined by `;` with its weight; checking the unit and that
/// `endValue` is the weights' sum.
fn speedscope_profiles(profile: &Profile) -> (Value, Vec<ReadProfile>) {
    let file: Value =
        serde_json::from_str(&export::to_string(Format::Speedscope, profile).unwrap()).unwrap();
    assert_eq!(
        file["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = file["shared"]["frames"].as_array().unwrap();
    let profiles = file["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["type"], "sampled");
            assert_eq!(p["unit"], "nanoseconds");
            assert_eq!(p["startValue"], 0);
            let samples = p["samples"].as_array().unwrap();
            let weights = p["weights"].as_array().unwrap();
            assert_eq!(samples.len(), weights.len());
            let read: Vec<(String, u64)> = samples
                .iter()
                .zip(weights)
                .map(|(sample, weight)| {
                    let names: Vec<&str> = sample
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|i| {
                            frames[usize::try_from(i.as_u64().unwrap()).unwrap()]["name"]
                                .as_str()
                                .unwrap()
                        })
                        .collect();
                    (names.join(";"), weight.as_u64().unwrap())
                })
                .collect();
            assert_eq!(
                p["endValue"].as_u64().unwrap(),
                read.iter().map(|(_, w)| w).sum::<u64>()
            );
            (p["name"].as_str().unwrap().to_owned(), read)
        })
        .collect();
    (file, profiles)
}

/// `(path, weight)` pairs from string slices.
fn weighed(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(p, w)| ((*p).to_owned(), *w)).collect()
}

#[test]
fn speedscope_has_every_process_then_each_in_time_order_in_nanoseconds() {
    let (file, profiles) = speedscope_profiles(&cpu_profile());
    let dropped = "2 samples dropped (the sample buffer was full): about 2.000 ms not shown";
    assert_eq!(
        file["name"],
        format!("tprof cpu samples at 1000 Hz asked of app --serve; {dropped}")
    );
    assert_eq!(file["activeProfileIndex"], 0);
    let next = "app::main;app::handle;app::parse::<Parser as Iterator>::next";
    let utf8 = "app::main;app::handle;core::str::from_utf8";
    assert_eq!(
        profiles,
        [
            (
                format!("all processes ({dropped})"),
                weighed(&[
                    (&format!("dispatcher;{utf8}"), 2_000_000),
                    (&format!("dispatcher;{next}"), 2_000_000),
                    ("<0.6.0>;app::main;app::handle", 1_000_000),
                    ("(outside processes);std::thread::park;0x402000", 1_000_000),
                    ("(outside processes);std::thread::park", 1_000_000),
                    ("dispatcher;app::main", 1_000_000),
                    ("<0.6.0>", 1_000_000),
                ])
            ),
            (
                "dispatcher".to_owned(),
                weighed(&[
                    (utf8, 2_000_000),
                    (next, 2_000_000),
                    ("app::main", 1_000_000)
                ])
            ),
            (
                "<0.6.0>".to_owned(),
                weighed(&[("app::main;app::handle", 1_000_000), ("", 1_000_000)])
            ),
            (
                "(outside processes)".to_owned(),
                weighed(&[
                    ("std::thread::park;0x402000", 1_000_000),
                    ("std::thread::park", 1_000_000)
                ])
            ),
        ]
    );
    // Frames carry their file and line where known.
    let frames = file["shared"]["frames"].as_array().unwrap();
    let frame = |name: &str| {
        frames
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("a frame {name}"))
    };
    assert_eq!(frame("app::main")["file"], "src/app.rs");
    assert_eq!(frame("app::main")["line"], 10);
    assert_eq!(
        frame("core::str::from_utf8")["file"],
        "/rustc/core/src/str/mod.rs"
    );
    assert_eq!(frame("core::str::from_utf8")["line"], 100);
    assert!(frame("std::thread::park").get("file").is_none());
    assert!(frame("dispatcher").get("line").is_none());
    let names: Vec<&str> = frames.iter().map(|f| f["name"].as_str().unwrap()).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "each frame once: {names:?}");
}

#[test]
fn speedscope_wall_samples_end_in_their_state_and_samplers_get_profiles_of_their_own() {
    let (file, profiles) = speedscope_profiles(&wall_profile());
    assert_eq!(
        file["name"],
        "tprof wall samples at 100 Hz asked of app --serve"
    );
    assert_eq!(
        profiles,
        [
            (
                "all processes".to_owned(),
                weighed(&[
                    ("dispatcher;app::main;[receive]", 25_000_000),
                    ("<0.6.0>;app::main;app::handle;[call]", 40_000_000),
                    ("dispatcher;app::main;[receive]", 15_000_000),
                    ("dispatcher;app::main;app::handle;[running]", 10_000_000),
                ])
            ),
            (
                "dispatcher".to_owned(),
                weighed(&[
                    ("app::main;[receive]", 40_000_000),
                    ("app::main;app::handle;[running]", 10_000_000),
                ])
            ),
            (
                "<0.6.0>".to_owned(),
                weighed(&[("app::main;app::handle;[call]", 40_000_000)])
            ),
        ]
    );
    let (_, profiles) = speedscope_profiles(&mixed_profile());
    let names: Vec<&str> = profiles.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "cpu: all processes (2 samples dropped (the sample buffer was full): about 2.000 ms not shown)",
            "cpu: dispatcher",
            "cpu: <0.6.0>",
            "cpu: (outside processes)",
            "wall: all processes",
            "wall: dispatcher",
            "wall: <0.6.0>",
        ]
    );
}

// ---------------------------------------------------------------- chrome

/// A slice as read back: pid, tid, name, ts and dur (µs), samples, weight_ns.
type ReadSlice = (u64, u64, String, f64, f64, u64, u64);

/// A metadata event as read back: name, pid, tid, args.
type ReadMeta = (String, u64, u64, Value);

/// The chrome export of `profile`: the file, its metadata events as `(name, pid, tid, value)`,
/// and its slices in file order, checking that slices of a thread nest.
fn chrome(profile: &Profile) -> (Value, Vec<ReadMeta>, Vec<ReadSlice>) {
    let file: Value =
        serde_json::from_str(&export::to_string(Format::Chrome, profile).unwrap()).unwrap();
    let mut meta = Vec::new();
    let mut slices = Vec::new();
    for e in file["traceEvents"].as_array().unwrap() {
        let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        match e["ph"].as_str().unwrap() {
            "M" => meta.push((
                e["name"].as_str().unwrap().to_owned(),
                pid,
                tid,
                e["args"].clone(),
            )),
            "X" => slices.push((
                pid,
                tid,
                e["name"].as_str().unwrap().to_owned(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
                e["args"]["samples"].as_u64().unwrap(),
                e["args"]["weight_ns"].as_u64().unwrap(),
            )),
            _ => {}
        }
    }
    // Per thread, each slice starts no earlier than the one before, and lies within every
    // slice still open.
    let mut open: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    for (pid, tid, name, ts, dur, ..) in &slices {
        let stack = open.entry((*pid, *tid)).or_default();
        while stack.last().is_some_and(|(_, end)| *end <= *ts) {
            stack.pop();
        }
        if let Some((start, end)) = stack.last() {
            assert!(
                *start <= *ts && ts + dur <= *end,
                "{name} at {ts} in {start}..{end}"
            );
        }
        stack.push((*ts, ts + dur));
    }
    (file, meta, slices)
}

/// A slice of `name` on thread `tid` of `pid`, from `ts` for `dur` ms, of `samples` weighing
/// `weight_ms`.
fn slice(
    pid: u64,
    tid: u64,
    name: &str,
    ts_ms: f64,
    dur_ms: f64,
    samples: u64,
    weight_ms: u64,
) -> ReadSlice {
    (
        pid,
        tid,
        name.to_owned(),
        ts_ms * 1000.0,
        dur_ms * 1000.0,
        samples,
        weight_ms * 1_000_000,
    )
}

#[test]
fn chrome_draws_each_process_s_samples_as_nested_slices_over_time() {
    let (file, meta, slices) = chrome(&cpu_profile());
    let name = |n: &str| serde_json::json!({ "name": n });
    assert_eq!(
        meta,
        [
            ("process_name".to_owned(), 1, 1, name("dispatcher")),
            (
                "process_sort_index".to_owned(),
                1,
                1,
                serde_json::json!({ "sort_index": 1 })
            ),
            (
                "thread_name".to_owned(),
                1,
                1,
                name("cpu samples, 1000 Hz asked")
            ),
            ("process_name".to_owned(), 2, 2, name("<0.6.0>")),
            (
                "process_sort_index".to_owned(),
                2,
                2,
                serde_json::json!({ "sort_index": 2 })
            ),
            (
                "thread_name".to_owned(),
                2,
                2,
                name("cpu samples, 1000 Hz asked")
            ),
            ("process_name".to_owned(), 3, 3, name("(outside processes)")),
            (
                "process_sort_index".to_owned(),
                3,
                3,
                serde_json::json!({ "sort_index": 3 })
            ),
            (
                "thread_name".to_owned(),
                3,
                3,
                name("node-worker/101 (cpu samples, 1000 Hz asked)")
            ),
            (
                "thread_name".to_owned(),
                3,
                4,
                name("102 (cpu samples, 1000 Hz asked)")
            ),
        ]
    );
    let next = "app::parse::<Parser as Iterator>::next";
    assert_eq!(
        slices,
        [
            // dispatcher: from_utf8 twice (0-2 ms), next with an overrun (2-4 ms), a gap
            // (nothing sampled from 4 to 7 ms), main (7-8 ms).
            slice(1, 1, "app::main", 0.0, 4.0, 3, 4),
            slice(1, 1, "app::handle", 0.0, 4.0, 3, 4),
            slice(1, 1, "core::str::from_utf8", 0.0, 2.0, 2, 2),
            slice(1, 1, next, 2.0, 2.0, 1, 2),
            slice(1, 1, "app::main", 7.0, 1.0, 1, 1),
            // <0.6.0>: handle, then a sample with no stack.
            slice(2, 2, "app::main", 4.0, 1.0, 1, 1),
            slice(2, 2, "app::handle", 4.0, 1.0, 1, 1),
            slice(2, 2, "(no stack)", 8.0, 1.0, 1, 1),
            // Outside processes, a thread each.
            slice(3, 3, "std::thread::park", 6.0, 1.0, 1, 1),
            slice(3, 4, "std::thread::park", 5.0, 1.0, 1, 1),
            slice(3, 4, "0x402000", 5.0, 1.0, 1, 1),
        ]
    );
    let events = file["traceEvents"].as_array().unwrap();
    let x = events
        .iter()
        .find(|e| e["name"] == "core::str::from_utf8")
        .unwrap();
    assert_eq!(x["args"]["location"], "/rustc/core/src/str/mod.rs:100");
    let main = events.iter().find(|e| e["name"] == "app::main").unwrap();
    assert_eq!(main["args"]["location"], "src/app.rs:10");
    // The dropped samples: in otherData, and a global instant at the end.
    let samples = &file["otherData"]["samples"];
    assert_eq!(samples["sampled"], "cpu samples at 1000 Hz asked");
    assert_eq!(samples["dropped_samples"], 2);
    assert_eq!(samples["dropped_ns"], 2_000_000);
    let instant = events.iter().find(|e| e["ph"] == "i").unwrap();
    assert_eq!(
        instant["name"],
        "2 samples dropped (the sample buffer was full): about 2.000 ms not shown"
    );
    assert_eq!(
        (instant["s"].as_str(), instant["ts"].as_f64()),
        (Some("g"), Some(9000.0))
    );
    assert_eq!(instant["args"]["dropped"], 2);
}

#[test]
fn chrome_wall_samples_end_in_their_state_and_last_until_the_next_sample() {
    let (file, _, slices) = chrome(&wall_profile());
    assert_eq!(
        slices,
        [
            // dispatcher: 2.5 ticks in receive at 0 (cut at its next sample, at 20 ms), 1.5
            // at 20 (15 ms, cut at 30), running at 30 for 10 ms.
            slice(1, 1, "app::main", 0.0, 40.0, 3, 50),
            slice(1, 1, "[receive]", 0.0, 30.0, 2, 40),
            slice(1, 1, "app::handle", 30.0, 10.0, 1, 10),
            slice(1, 1, "[running]", 30.0, 10.0, 1, 10),
            slice(2, 2, "app::main", 10.0, 40.0, 1, 40),
            slice(2, 2, "app::handle", 10.0, 40.0, 1, 40),
            slice(2, 2, "[call]", 10.0, 40.0, 1, 40),
        ]
    );
    assert!(
        file["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["ph"] != "i")
    );
    assert_eq!(file["otherData"]["samples"]["dropped_samples"], 0);
}
// ---------------------------------------------------------------- html

/// The page of `profile` and the data embedded in it.
fn html(profile: &Profile) -> (String, Value) {
    let html = export::to_string(Format::Html, profile).unwrap();
    let data = embedded(&html);
    (html, data)
}

/// The `(process, frames, samples, value)` of each stack of the viewer's data.
fn view_stacks(data: &Value) -> Vec<(u64, Vec<u64>, u64, u64)> {
    data["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let frames = s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_u64().unwrap())
                .collect();
            (
                s["process"].as_u64().unwrap(),
                frames,
                s["calls"].as_u64().unwrap(),
                s["value"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The `(process, function, samples, own, total)` of each row of the viewer's data.
fn view_rows(data: &Value) -> Vec<[u64; 5]> {
    data["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| ["process", "function", "calls", "value", "total"].map(|k| r[k].as_u64().unwrap()))
        .collect()
}

#[test]
fn html_shows_samples_as_a_flame_graph_and_a_table_per_process() {
    let (html, data) = html(&cpu_profile());
    assert!(
        html.contains("<title>cpu samples at 1000 Hz asked (ns) — app --serve (60.000 ms)</title>"),
        "{html}"
    );
    assert_eq!(data["unit"], "ns");
    let samples = &data["samples"];
    assert_eq!(samples["what"], "cpu samples at 1000 Hz asked");
    assert_eq!(samples["measure"], "nanoseconds of CPU time");
    assert_eq!(samples["count"], 8);
    assert_eq!(samples["dropped"], 2);
    assert_eq!(samples["dropped_ns"], 2_000_000);
    assert_eq!(
        samples["dropped_note"],
        "2 samples dropped (the sample buffer was full): about 2.000 ms not shown"
    );
    let processes: Vec<(&str, &str)> = data["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["label"].as_str().unwrap()))
        .collect();
    assert_eq!(
        processes,
        [
            ("<0.5.0>", "dispatcher"),
            ("<0.6.0>", "<0.6.0>"),
            ("(outside processes)", "(outside processes)"),
        ]
    );
    let functions = data["functions"].as_array().unwrap();
    let mfas: Vec<&str> = functions
        .iter()
        .map(|f| f["mfa"].as_str().unwrap())
        .collect();
    assert_eq!(
        mfas,
        [
            "app::main/0",
            "app::handle/1",
            "core::str::from_utf8",
            "app::parse::<Parser as Iterator>::next/1",
            "std::thread::park",
            "0x402000",
        ]
    );
    assert_eq!(functions[0]["file"], "src/app.rs");
    assert_eq!(functions[0].get("native"), None);
    assert_eq!(
        (
            &functions[2]["module"],
            &functions[2]["file"],
            &functions[2]["line"],
            &functions[2]["native"]
        ),
        (
            &serde_json::json!("core::str"),
            &serde_json::json!("/rustc/core/src/str/mod.rs"),
            &serde_json::json!(100),
            &serde_json::json!(true)
        )
    );
    const MS: u64 = 1_000_000;
    assert_eq!(
        view_stacks(&data),
        [
            (0, vec![0], 1, MS),
            (0, vec![0, 1, 2], 2, 2 * MS),
            (0, vec![0, 1, 3], 1, 2 * MS),
            (1, vec![], 1, MS),
            (1, vec![0, 1], 1, MS),
            (2, vec![4], 1, MS),
            (2, vec![4, 5], 1, MS),
        ]
    );
    assert_eq!(data["total"], 9 * MS);
    // Per process and frame: the samples with it on their stack, its own time, its total.
    assert_eq!(
        view_rows(&data),
        [
            [0, 0, 4, MS, 5 * MS],
            [0, 1, 3, 0, 4 * MS],
            [0, 2, 2, 2 * MS, 2 * MS],
            [0, 3, 1, 2 * MS, 2 * MS],
            [1, 0, 1, 0, MS],
            [1, 1, 1, MS, MS],
            [2, 4, 2, MS, 2 * MS],
            [2, 5, 1, MS, MS],
        ]
    );
}

#[test]
fn html_of_samples_filters_by_focus_hide_and_plumbing_in_the_page() {
    let (html, data) = html(&cpu_profile());
    let plumbing: Vec<&str> = data["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["plumbing"] == true)
        .map(|f| f["mfa"].as_str().unwrap())
        .collect();
    assert_eq!(plumbing, ["core::str::from_utf8", "std::thread::park"]);
    for id in ["focus", "hide", "plumbing"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
    }
    // In a browser: the plumbing folded by default, and said so; a link sets the filters.
    let frame = |name: &str| format!("role=\"treeitem\" aria-label=\"{name}\"");
    let Some(dom) = common::browser::page_dom_at(&html, "") else {
        return;
    };
    // The tables' rows too: `<span class="fn" ...>NAME</span>`.
    let row = |name: &str| format!("title=\"Search the graph for this function\">{name}</span>");
    assert!(dom.contains("2 plumbing frames folded"), "{dom}");
    assert!(dom.contains(&frame("app::main/0")), "{dom}");
    assert!(!dom.contains(&frame("std::thread::park")), "{dom}");
    assert!(dom.contains(&row("app::main/0")), "{dom}");
    for plumbing in ["std::thread::park", "core::str::from_utf8"] {
        assert!(!dom.contains(&row(plumbing)), "{plumbing}: {dom}");
    }
    let dom = common::browser::page_dom_at(&html, "#plumbing=0&hide=main").unwrap();
    // Hide keeps every sample: the header gives the whole.
    assert!(!dom.contains("of 8 samples shown"), "{dom}");
    assert!(dom.contains("from 8 samples, by stack"), "{dom}");
    assert!(dom.contains(&frame("std::thread::park")), "{dom}");
    assert!(dom.contains(&frame("app::handle/1")), "{dom}");
    assert!(!dom.contains(&frame("app::main/0")), "{dom}");
    assert!(!dom.contains("plumbing frames folded"), "{dom}");
    assert!(
        dom.contains(&row("std::thread::park")) && dom.contains(&row("app::handle/1")),
        "{dom}"
    );
    assert!(!dom.contains(&row("app::main/0")), "{dom}");
    // Focus keeps the rows of the samples it keeps: parse's (process <0.5.0>) alone, and the
    // header says how many of the samples those are. Rust's `(?i)` is read as the `i` flag.
    for focus in ["parse", "(?i)PARSE"] {
        let dom = common::browser::page_dom_at(&html, &format!("#focus={focus}")).unwrap();
        assert!(
            dom.contains(&row("app::parse::&lt;Parser as Iterator&gt;::next/1"))
                && dom.contains(&row("app::handle/1"))
                && !dom.contains(&row("0x402000")),
            "{focus}: {dom}"
        );
        assert!(dom.contains("1 of 8 samples shown"), "{focus}: {dom}");
    }
    // A form JavaScript cannot read is named, and filters nothing.
    let dom = common::browser::page_dom_at(&html, "#focus=(?x)parse").unwrap();
    assert!(
        dom.contains(
            "focus `(?x)parse` cannot be read here (its flag `x` has no JavaScript equivalent)"
        ),
        "{dom}"
    );
    assert!(dom.contains(&row("0x402000")), "{dom}");
    // Rust's Unicode classes are read with JavaScript's `u` flag (a bare script name as
    // script extensions, `\pL` as `\p{L}`), and with them an escaped punctuation character
    // (`\:`), which that flag refuses as written. Fragments are percent-encoded: `\` `{` `}`.
    for focus in [
        "%5Cp%7BLu%7Darser",
        "%5CpLarser",
        "%5C:%5C:%5Cp%7BLatin%7Darse",
    ] {
        let dom = common::browser::page_dom_at(&html, &format!("#focus={focus}")).unwrap();
        assert!(dom.contains("1 of 8 samples shown"), "{focus}: {dom}");
        assert!(
            !dom.contains("id=\"filtered\" class=\"error\""),
            "{focus}: {dom}"
        );
        assert!(!dom.contains(&row("0x402000")), "{focus}: {dom}");
    }
    // What has no JavaScript equivalent is named: a class name as Rust alone spells it, a
    // word boundary, a class set operation, a form the `u` flag refuses (as the DOM writes
    // them: `&lt;`, `&amp;`).
    for (focus, written, why) in [
        (
            "%5Cp%7Blatin%7Darse",
            "\\p{latin}arse",
            "the class `\\p{latin}` has no JavaScript equivalent",
        ),
        (
            "%5C%3Cparse",
            "\\&lt;parse",
            "the word boundary `\\&lt;` has no JavaScript equivalent",
        ),
        (
            "%5B%5Cp%7BL%7D%26%26a%5D",
            "[\\p{L}&amp;&amp;a]",
            "class set operations",
        ),
        (
            "%5Cp%7BL%7D%5D",
            "\\p{L}]",
            "its Unicode classes need JavaScript's `u` flag, under which",
        ),
    ] {
        let dom = common::browser::page_dom_at(&html, &format!("#focus={focus}")).unwrap();
        assert!(
            dom.contains(&format!("focus `{written}` cannot be read here ({why}")),
            "{focus}: {dom}"
        );
        assert!(dom.contains(&row("0x402000")), "{focus}: {dom}");
    }
    let dom = common::browser::page_dom_at(&html, "#focus=no_such_frame").unwrap();
    assert!(
        dom.contains("No sample has a frame the focus matches."),
        "{dom}"
    );
    assert!(
        dom.contains("No sample has a frame the filters show."),
        "{dom}"
    );
    let dom = common::browser::page_dom_at(&html, "#focus=(").unwrap();
    assert!(
        dom.contains("focus `(` is not a regular expression"),
        "{dom}"
    );
}

#[test]
fn html_of_samples_starts_with_the_command_s_filters() {
    use tprof::sample_report::{Native, PrintOptions};
    let profile = cpu_profile();
    let page = |options: &PrintOptions| {
        let mut out = Vec::new();
        export::write_shown(Format::Html, &profile, options, &mut out).unwrap();
        let html = String::from_utf8(out).unwrap();
        let data = embedded(&html);
        (html, data)
    };
    let mfas = |data: &Value| -> Vec<String> {
        data["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["mfa"].as_str().unwrap().to_owned())
            .collect()
    };
    // Focus, hide and the plumbing are the page's controls: set, every frame kept to unfold.
    let all_hidden = PrintOptions::new().native(true).hide("main").unwrap();
    let (unfolded, data) = page(&all_hidden);
    assert_eq!(
        data["samples"]["filters"],
        serde_json::json!({"focus": null, "hide": "main", "plumbing": false})
    );
    assert_eq!(mfas(&data).len(), 6, "{:?}", mfas(&data));
    let (focused, data) = page(&PrintOptions::new().focus("parse").unwrap());
    assert_eq!(data["samples"]["filters"]["plumbing"], true);
    // The header, as written before the script runs: the samples the focus keeps of all.
    assert!(
        focused.contains(
            "<p id=\"summary\">1 of 8 samples shown (those with a frame the focus `parse` matches)</p>"
        ),
        "{focused}"
    );
    assert!(unfolded.contains("<p id=\"summary\"></p>"));
    let (insensitive, _) = page(&PrintOptions::new().focus("(?i)PARSE").unwrap());
    assert!(insensitive.contains("<p id=\"summary\">1 of 8 samples shown"));
    // What the page has no control for is left out of its data: native frames none.
    let (_, data) = page(&PrintOptions::new().native(Native::None));
    assert_eq!(
        mfas(&data),
        [
            "app::main/0",
            "app::handle/1",
            "app::parse::<Parser as Iterator>::next/1"
        ]
    );
    // A bad pattern is refused, naming it.
    let mut bad = PrintOptions::new();
    bad.focus = Some("(".to_owned());
    let e = export::write_shown(Format::Html, &profile, &bad, &mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("the focus pattern `(`"), "{e}");
    // In a browser, the graph and the tables start filtered as asked.
    let row = |name: &str| format!("title=\"Search the graph for this function\">{name}</span>");
    let Some(dom) = common::browser::page_dom_at(&unfolded, "") else {
        return;
    };
    assert!(
        dom.contains(&row("std::thread::park")) && !dom.contains(&row("app::main/0")),
        "{dom}"
    );
    let dom = common::browser::page_dom_at(&focused, "").unwrap();
    assert!(
        dom.contains(&row("app::main/0"))
            && !dom.contains(&row("core::str::from_utf8"))
            && !dom.contains(&row("0x402000")),
        "{dom}"
    );
    assert!(dom.contains("1 of 8 samples shown"), "{dom}");
    // The command's Rust pattern filters the page as it does the report.
    let dom = common::browser::page_dom_at(&insensitive, "").unwrap();
    assert!(
        dom.contains(&row("app::main/0")) && !dom.contains(&row("0x402000")),
        "{dom}"
    );
    assert!(dom.contains("1 of 8 samples shown"), "{dom}");
}

#[test]
fn html_of_wall_samples_has_states_as_frames_and_recursion_counts_once() {
    let (_, data) = html(&wall_profile());
    assert_eq!(
        data["samples"]["measure"],
        "nanoseconds of wall time, summed over processes"
    );
    assert_eq!(data["samples"]["dropped"], 0);
    assert_eq!(data["samples"].get("dropped_note"), None);
    let mfas: Vec<&str> = data["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["mfa"].as_str().unwrap())
        .collect();
    assert_eq!(
        mfas,
        [
            "app::main/0",
            "[receive]",
            "app::handle/1",
            "[running]",
            "[call]"
        ]
    );
    const MS: u64 = 1_000_000;
    assert_eq!(
        view_stacks(&data),
        [
            (0, vec![0, 1], 2, 40 * MS),
            (0, vec![0, 2, 3], 1, 10 * MS),
            (1, vec![0, 2, 4], 1, 40 * MS),
        ]
    );
    // A recursive stack: main > main > main counts main's total once per sample.
    let mut profile = cpu_profile();
    let set = &mut profile.samples;
    set.stacks.push(SampleStack {
        parent: Some(0),
        frame: 0,
    });
    set.stacks.push(SampleStack {
        parent: Some(6),
        frame: 0,
    });
    set.samples = vec![sample(0, Some(dispatcher()), None, 3.0, Some(7))];
    let (_, data) = html(&profile);
    assert_eq!(view_rows(&data), [[0, 0, 1, 3 * MS, 3 * MS]]);
}

// ---------------------------------------------------------------- json

#[test]
fn json_carries_the_samples_and_reads_back_as_the_same_profile() {
    let mut profile = mixed_profile();
    profile.samples.samples[0].weight = 1.0 / 3.0;
    let text = export::to_string(Format::Json, &profile).unwrap();
    let back: Profile = serde_json::from_str(&text).unwrap();
    assert_eq!(back, profile);
    let value: Value = serde_json::from_str(&text).unwrap();
    let samples = &value["samples"];
    assert_eq!(samples["sources"][0]["sampler"], "cpu");
    assert_eq!(samples["sources"][0]["dropped"], 2.0);
    assert_eq!(samples["sources"][1]["sampler"], "wall");
    assert_eq!(samples["samples"][0]["pid"], "<0.5.0>");
    assert_eq!(
        samples["samples"][4]["pid"],
        Value::Null,
        "outside processes"
    );
    assert_eq!(samples["samples"][8]["state"], "receive");
    assert_eq!(samples["mappings"][0]["file"], "/bin/app");
    assert_eq!(samples["frames"][3]["name"], "core::str::from_utf8");
}

// ---------------------------------------------------------------- many processes

#[test]
fn every_export_of_many_processes_is_one_entry_per_process_and_stack() {
    // 10,000 processes, two consecutive samples each of main > handle > next (one stack).
    const N: u32 = 10_000;
    let mut profile = cpu_profile();
    profile.processes.clear();
    let set = &mut profile.samples;
    set.sources[0].dropped = 0.0;
    set.samples = (0..N)
        .flat_map(|i| {
            let pid = Some(Pid::from_parts(0, 100 + i, 0));
            let at = u64::from(i) * 10;
            [
                sample(at, pid, Some(0), 1.0, Some(5)),
                sample(at + 1, pid, Some(0), 1.0, Some(5)),
            ]
        })
        .collect();
    let n = N as usize;
    assert_eq!(lines(Format::Folded, &profile).len(), n);
    assert_eq!(decode_pprof(&profile).sample.len(), n);
    let (_, profiles) = speedscope_profiles(&profile);
    assert_eq!(profiles.len(), n + 1);
    assert!(
        profiles
            .iter()
            .skip(1)
            .all(|(_, samples)| samples.len() == 1)
    );
    let (_, _, slices) = chrome(&profile);
    assert_eq!(
        slices.len(),
        3 * n,
        "one slice per frame of each process's run"
    );
    let (_, data) = html(&profile);
    assert_eq!(data["stacks"].as_array().unwrap().len(), n);
    assert_eq!(data["rows"].as_array().unwrap().len(), 3 * n);
    // Each process is 1/10,000 of the width: under a pixel, so not drawn.
    let (frames, _) = svg_frames(&export::to_string(Format::Svg, &profile).unwrap());
    assert_eq!(frames.len(), 1, "only `all`");
}

// ---------------------------------------------------------------- a real sampled profile

#[runtime::traced]
fn busy(n: u64) -> u64 {
    (0..n).fold(0u64, |a, i| a.rotate_left(5) ^ i.wrapping_mul(31))
}

#[runtime::traced]
async fn work() -> u64 {
    let mut total = 0;
    for _ in 0..300 {
        total ^= busy(40_000);
        tokio::task::yield_now().await;
    }
    total
}

/// A real CPU-sampled profile of [`work`] (Linux: the CPU sampler's timers).
#[cfg(target_os = "linux")]
fn real_sampled() -> Profile {
    let outcome = tprof::profile(
        || async { work().await },
        tprof::ProfileOptions::new()
            .sample(runtime::sample::SampleOptions::new().hz(999))
            .report(tprof::Report::Return),
    )
    .expect("profiled");
    assert!(outcome.result.is_ok());
    let profile = outcome.profile;
    assert!(!profile.samples.samples.is_empty(), "samples were taken");
    profile
}

#[cfg(target_os = "linux")]
#[test]
fn every_export_of_a_real_sampled_profile_shows_its_samples() {
    let profile = real_sampled();
    let set = &profile.samples;
    let pid = profile.processes[0].pid;
    let label = pid.to_string();
    let weight_ns = |pred: &dyn Fn(&SampleRecord) -> bool| -> f64 {
        set.samples
            .iter()
            .filter(|s| pred(s))
            .map(|s| s.weight * set.sources[s.source as usize].period_ns())
            .sum()
    };
    let total_ns = weight_ns(&|_| true);
    // folded: the values add up to the samples' nanoseconds (each line rounded), and the
    // process's lines pass through work into busy.
    let folded = lines(Format::Folded, &profile);
    let sum: u64 = folded
        .iter()
        .filter(|l| !l.starts_with("(dropped_samples)"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(
        (sum as f64 - total_ns).abs() <= folded.len() as f64,
        "{sum} vs {total_ns}"
    );
    assert!(
        folded.iter().any(|l| l.starts_with(&format!(
            "{label};export_samples::work;export_samples::busy"
        ))),
        "{folded:#?}"
    );
    // pprof: cpu nanoseconds as much as the samples weigh, every sample of the process
    // labelled with its pid.
    let p = decode_pprof(&profile);
    let types: Vec<&str> = p.sample_type.iter().map(|t| p.string(t.r#type)).collect();
    assert_eq!(types, ["samples", "cpu"]);
    let counted: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(counted, set.samples.len() as i64);
    let cpu: i64 = p.sample.iter().map(|s| s.value[1]).sum();
    assert!((cpu as f64 - total_ns).abs() <= p.sample.len() as f64);
    let of_pid = |s: &tprof::export::pprof::Sample| {
        s.label
            .iter()
            .any(|l| p.string(l.key) == "pid" && p.string(l.str) == label)
    };
    let pid_ns: i64 = p
        .sample
        .iter()
        .filter(|s| of_pid(s))
        .map(|s| s.value[1])
        .sum();
    let expected = weight_ns(&|s| s.pid == Some(pid));
    assert!((pid_ns as f64 - expected).abs() <= p.sample.len() as f64);
    // Native frames keep their addresses, each in a mapping that holds it.
    for l in p.location.iter().filter(|l| l.mapping_id != 0) {
        let m = &p.mapping[usize::try_from(l.mapping_id).unwrap() - 1];
        assert!(m.memory_start <= l.address && l.address < m.memory_limit);
    }
    // speedscope: the profile of every process weighs the samples, and the process's own
    // profile is there.
    let (_, profiles) = speedscope_profiles(&profile);
    let all: u64 = profiles[0].1.iter().map(|(_, w)| w).sum();
    assert!((all as f64 - total_ns).abs() <= profiles[0].1.len() as f64);
    assert!(profiles.iter().any(|(name, _)| *name == label));
    // chrome: slices nest (checked by `chrome`), and busy is drawn on the process's track.
    let (_, meta, slices) = chrome(&profile);
    let track = meta
        .iter()
        .find(|(name, _, _, args)| name == "process_name" && args["name"] == label.as_str())
        .map(|(_, pid, _, _)| *pid)
        .expect("the process's track");
    assert!(
        slices
            .iter()
            .any(|s| s.0 == track && s.2 == "export_samples::busy")
    );
    // svg and html draw the same total.
    let (_, total) = svg_frames(&export::to_string(Format::Svg, &profile).unwrap());
    assert_eq!(
        total,
        sum + folded
            .iter()
            .filter(|l| l.starts_with("(dropped_samples)"))
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum::<u64>()
    );
    let (_, data) = html(&profile);
    assert!(
        (data["total"].as_f64().unwrap() - total_ns).abs()
            <= data["stacks"].as_array().unwrap().len() as f64
    );
    assert_eq!(data["samples"]["count"], set.samples.len());
}

// ---------------------------------------------------------------- files for the real tools

#[test]
#[ignore = "writes files for the real tools to check by hand"]
fn write_sample_files() {
    let dir = std::env::var_os("TPROF_EXPORT_DIR")
        .map_or_else(|| std::env::temp_dir().join("tprof-exports"), Into::into);
    std::fs::create_dir_all(&dir).unwrap();
    let mut named = vec![
        ("samples-cpu", cpu_profile()),
        ("samples-wall", wall_profile()),
        ("samples-mixed", mixed_profile()),
    ];
    // Every sample dropped: the buffer was full from the start.
    let mut dropped = cpu_profile();
    dropped.samples.samples.clear();
    named.push(("samples-all-dropped", dropped));
    #[cfg(target_os = "linux")]
    named.push(("samples-real", real_sampled()));
    for (name, profile) in &named {
        for &f in Format::ALL {
            let path = dir.join(format!("{name}.{}", f.extension()));
            let mut out = Vec::new();
            match export::write(f, profile, &mut out) {
                // A merge of samplers in a format that draws one total.
                Err(export::ExportError::Unsupported { reason, .. }) => {
                    println!("{}: not written: {reason}", path.display());
                    continue;
                }
                written => written.unwrap(),
            }
            std::fs::write(&path, out).unwrap();
            println!("{}", path.display());
        }
    }
}
