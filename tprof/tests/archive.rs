//! The `.tprof` archive: profiles read back exactly, damage of every kind reported (never a
//! panic), sections of later versions skipped, the files of each version still read, and
//! merging the runs of several profiles.

use std::path::{Path, PathBuf};

mod common;

use common::{
    Real, TYPES, entry, function, function_in, path_entry, process, real_profile, sampled_profile,
};
use proptest::prelude::*;
use runtime::Pid;
use tprof::archive::{self, ArchiveError, MergeError, Merger};
use tprof::samples::{
    CpuCoverage, CpuSource, SampleFrame, SampleMapping, SampleRecord, SampleSet, SampleSource,
    SampleStack, SampleThread, SamplerKind, ThreadCoverage, WaitState,
};
use tprof::{
    CallTree, Entry, Event, EventKind, EventLog, Function, FunctionTrace, Group, Meta, PathEntry,
    PathNode, Percentiles, ProcessRecord, Profile, Run, TraceType,
};

/// The real profiles of this file: call_time with percentiles, and event logs (call_time and
/// call_memory).
const REAL: Real = Real {
    percentiles: true,
    events: true,
    ..Real::FLAT
};

fn bytes_of(profile: &Profile) -> Vec<u8> {
    let mut out = Vec::new();
    archive::write(profile, &mut out).expect("writing to a Vec succeeds");
    out
}

fn read_bytes(bytes: &[u8]) -> Result<Profile, ArchiveError> {
    archive::read(&mut &bytes[..])
}

/// The initial call of the processes of the hand-built profiles.
const WORKER_CALL: &str = "app::worker/1";

/// The fixed profile the fixtures hold: every part of the model, two runs, unicode names,
/// and the largest values the fields take. Never change it without keeping the form the
/// older fixtures hold (see "Adding a fixture" in `tprof::archive`).
fn fixture_profile() -> Profile {
    let p1 = Pid::from_parts(1, 0, 1);
    let p2 = Pid::from_parts(1, 2, 0);
    let p3 = Pid::from_parts(2, 1, 3);
    let parse = function_in("src/parse.rs", "app::parse", "parse", 1, 10);
    let handle = function("app", "<Handler as Service>::call", 2, 42);
    let unicode = function_in(
        "src/日本語.rs",
        "ünïcødé::модуль",
        "método_🚀",
        255,
        u32::MAX,
    );
    let only_in_tree = function("app", "helper", 0, 7);
    Profile {
        trace_type: TraceType::CallTime,
        functions: vec![
            FunctionTrace {
                function: handle.clone(),
                entries: vec![
                    entry(Group::Process(p1), 3, 3_000),
                    entry(Group::Process(p3), 1, 900),
                ],
            },
            FunctionTrace {
                function: parse.clone(),
                entries: vec![
                    entry(Group::Process(p1), 7, 70),
                    entry(Group::Process(p2), 1, u64::MAX),
                ],
            },
            FunctionTrace {
                function: unicode.clone(),
                entries: vec![entry(Group::Process(p2), 0, 0)],
            },
        ],
        percentiles: vec![
            Percentiles {
                group: Group::All,
                function: handle.clone(),
                calls: 4,
                p50_ns: 700,
                p90_ns: 900,
                p99_ns: 990,
                max_ns: 1_000,
            },
            Percentiles {
                group: Group::All,
                function: parse.clone(),
                calls: 8,
                p50_ns: 9,
                p90_ns: 10,
                p99_ns: 11,
                max_ns: u64::MAX,
            },
        ],
        processes: vec![
            process(p1, Some("worker"), WORKER_CALL, 0),
            process(p2, None, WORKER_CALL, 0),
            process(p3, Some("日本語の名前"), WORKER_CALL, 1),
        ],
        function_table: vec![handle, parse, only_in_tree, unicode],
        call_tree: CallTree {
            nodes: vec![
                PathNode {
                    parent: None,
                    function: 0,
                },
                PathNode {
                    parent: Some(0),
                    function: 1,
                },
                PathNode {
                    parent: Some(1),
                    function: 2,
                },
                PathNode {
                    parent: None,
                    function: 3,
                },
            ],
            entries: vec![
                path_entry(Group::Process(p1), 0, 3, 2_930),
                path_entry(Group::Process(p1), 1, 7, 60),
                path_entry(Group::Process(p1), 2, 7, 10),
                path_entry(Group::Process(p2), 3, 1, 5),
            ],
        },
        event_logs: Vec::new(),
        meta: Meta {
            runs: vec![
                Run {
                    program: "demo --jobs 4".to_owned(),
                    started_unix_ms: 1_700_000_000_000,
                    duration_ns: 1_234_567_890,
                    nodes: vec![1],
                    run_queue: None,
                },
                Run {
                    program: "ünïcødé run".to_owned(),
                    started_unix_ms: 0,
                    duration_ns: 0,
                    nodes: vec![2, u32::MAX],
                    run_queue: None,
                },
            ],
        },
        outside_in_tables: false,
        samples: Default::default(),
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

/// [`fixture_profile`] with event logs: nested frames, a log cut short inside a frame, a log
/// of dropped events only, the largest time, a time that goes back and the largest function
/// index. `tests/data/v1-events.tprof` holds it; never change it.
fn fixture_profile_with_events() -> Profile {
    use EventKind::{Enter, Leave};
    let mut profile = fixture_profile();
    profile.event_logs = vec![
        EventLog {
            group: Group::Process(Pid::from_parts(1, 0, 1)),
            events: vec![
                event(1_000, 0, Enter),
                event(1_500, 1, Enter),
                event(1_700, 1, Leave),
                event(2_000, 0, Leave),
                event(1_000_000_000, 3, Enter),
            ],
            dropped: 12,
        },
        EventLog {
            group: Group::Process(Pid::from_parts(1, 2, 0)),
            events: Vec::new(),
            dropped: 3,
        },
        EventLog {
            group: Group::Process(Pid::from_parts(2, 1, 3)),
            events: vec![
                event(0, 2, Enter),
                event(u64::MAX, 2, Leave),
                event(5, u32::MAX, Enter),
            ],
            dropped: u64::MAX,
        },
    ];
    profile
}

/// [`fixture_profile`] with percentiles per process too (of a process, the largest values;
/// of another, two functions), after those of every process together.
/// `tests/data/v1-process-percentiles.tprof` holds it; never change it.
fn fixture_profile_with_process_percentiles() -> Profile {
    let mut profile = fixture_profile();
    let of = |group, function: &Function, calls, p50_ns, max_ns| Percentiles {
        group,
        function: function.clone(),
        calls,
        p50_ns,
        p90_ns: p50_ns + 1,
        p99_ns: p50_ns + 2,
        max_ns,
    };
    let (handle, parse) = (
        profile.functions[0].function.clone(),
        profile.functions[1].function.clone(),
    );
    let p1 = Group::Process(Pid::from_parts(1, 0, 1));
    let p3 = Group::Process(Pid::from_parts(2, 1, 3));
    profile.percentiles.extend([
        of(p1, &handle, 3, 900, 1_100),
        of(p1, &parse, 7, 8, 12),
        of(p3, &handle, 1, u64::MAX - 2, u64::MAX),
    ]);
    profile
}

/// A traced frame of function `function` of the function table.
fn traced_frame(function: u32) -> SampleFrame {
    SampleFrame {
        function: Some(function),
        name: String::new(),
        file: None,
        line: None,
        address: 0,
    }
}

/// A native frame.
fn native_frame(name: &str, file: Option<&str>, line: Option<u32>, address: u64) -> SampleFrame {
    SampleFrame {
        function: None,
        name: name.to_owned(),
        file: file.map(str::to_owned),
        line,
        address,
    }
}

/// A sample of `source` with no process, thread, state or mailbox.
fn sample(source: u32, time_ns: u64, weight: f64, stack: Option<u32>) -> SampleRecord {
    SampleRecord {
        source,
        pid: None,
        thread: None,
        time_ns,
        weight,
        stack,
        state: None,
        mailbox_len: 0,
        callee: None,
        size: 0,
        live: false,
    }
}

/// [`fixture_profile`] with samples: a CPU source of the first run and a wall source of the
/// second, traced and native frames, stacks whose parents come 1 to 3 before them, samples of
/// every state, with and without a process, thread or stack, whose times go back, weights
/// that are whole, fractional, repeated, signed zero and the largest, and the largest values
/// the fields take. `tests/data/v2.tprof` holds it; never change it.
fn fixture_profile_with_samples() -> Profile {
    let mut profile = fixture_profile();
    let p1 = Pid::from_parts(1, 0, 1);
    let p2 = Pid::from_parts(1, 2, 0);
    let p3 = Pid::from_parts(2, 1, 3);
    let cpu = |pid, thread, time_ns, weight, stack| SampleRecord {
        pid,
        thread: Some(thread),
        ..sample(0, time_ns, weight, stack)
    };
    let wall = |time_ns, weight, stack, state, mailbox_len| SampleRecord {
        pid: Some(p3),
        state: Some(state),
        mailbox_len,
        callee: None,
        ..sample(1, time_ns, weight, stack)
    };
    profile.samples = SampleSet {
        sources: vec![
            SampleSource {
                run: 0,
                node: 1,
                sampler: SamplerKind::Cpu,
                hz: 997,
                alloc_rate: None,
                dropped: 0.0,
                lost_frees: 0,
                before_sampling: 0,
                native_walked: true,
                duration_ns: 1_234_000_000,
                capacity: 1 << 16,
                cpu: None,
            },
            SampleSource {
                run: 1,
                node: 2,
                sampler: SamplerKind::Wall,
                hz: u32::MAX,
                alloc_rate: None,
                dropped: 2.5,
                lost_frees: 0,
                before_sampling: 0,
                native_walked: false,
                duration_ns: u64::MAX,
                capacity: u64::MAX,
                cpu: None,
            },
        ],
        frames: vec![
            traced_frame(0),
            traced_frame(1),
            native_frame(
                "core::ptr::drop_in_place<alloc::vec::Vec<u8>>",
                Some("/rustc/library/core/src/ptr/mod.rs"),
                Some(523),
                0x5555_5555_1234,
            ),
            native_frame("épée::λ", Some(""), Some(u32::MAX), u64::MAX),
            traced_frame(3),
            native_frame("", None, None, 0),
        ],
        stacks: vec![
            SampleStack {
                parent: None,
                frame: 0,
            },
            SampleStack {
                parent: Some(0),
                frame: 1,
            },
            SampleStack {
                parent: Some(1),
                frame: 2,
            },
            SampleStack {
                parent: None,
                frame: 4,
            },
            SampleStack {
                parent: Some(1),
                frame: 3,
            },
            SampleStack {
                parent: Some(2),
                frame: 5,
            },
        ],
        samples: vec![
            cpu(Some(p1), 0, 1_000_000, 1.0, Some(2)),
            cpu(Some(p1), 0, 2_000_000, 1.0, Some(4)),
            cpu(None, 1, 1_500_000, 3.0, Some(5)),
            cpu(Some(p2), 2, u64::MAX, 9_007_199_254_740_992.0, None),
            cpu(Some(p2), 2, 0, 1.0, Some(1)),
            wall(0, 1.0 / 3.0, Some(3), WaitState::Receive, 0),
            wall(10, 1.0 / 3.0, Some(3), WaitState::Running, 1),
            wall(20, 2.5, Some(0), WaitState::Runnable, u32::MAX),
            wall(30, 0.0, None, WaitState::ReceiveTimeout, 0),
            wall(40, -0.0, Some(1), WaitState::Call, 2),
            wall(50, 1e-300, Some(1), WaitState::Waiting, 0),
            wall(60, f64::MAX, Some(3), WaitState::Exiting, 0),
            SampleRecord {
                pid: Some(Pid::from_parts(u32::MAX, u32::MAX, u32::MAX)),
                ..sample(1, 70, 1.0, None)
            },
        ],
        threads: vec![
            SampleThread {
                source: 0,
                tid: 4242,
                name: Some("node-worker".to_owned()),
            },
            SampleThread {
                source: 0,
                tid: -1,
                name: None,
            },
            SampleThread {
                source: 0,
                tid: i32::MAX,
                name: Some("ünï-thread".to_owned()),
            },
        ],
        mappings: vec![
            SampleMapping {
                source: 0,
                start: 0x5555_5555_0000,
                limit: 0x5555_5556_0000,
                offset: 0x1000,
                file: "/usr/bin/demo".to_owned(),
            },
            SampleMapping {
                source: 0,
                start: 0,
                limit: u64::MAX,
                offset: u64::MAX,
                file: "/lib/日本語.so".to_owned(),
            },
        ],
    };
    profile
}

/// [`fixture_profile_with_samples`] whose sources lost frees of sampled blocks: 3 and the
/// largest count. `tests/data/v2-lost-frees.tprof` holds it; never change it.
fn fixture_profile_with_lost_frees() -> Profile {
    let mut profile = fixture_profile_with_samples();
    profile.samples.sources[0].lost_frees = 3;
    profile.samples.sources[1].lost_frees = u64::MAX;
    profile
}

/// [`fixture_profile_with_samples`] whose sources have samples taken in polls begun before
/// sampling began: 2 and the largest count. `tests/data/v2-before-sampling.tprof` holds it;
/// never change it.
fn fixture_profile_with_before_sampling() -> Profile {
    let mut profile = fixture_profile_with_samples();
    profile.samples.sources[0].before_sampling = 2;
    profile.samples.sources[1].before_sampling = u64::MAX;
    profile
}

/// [`fixture_profile_with_samples`] whose CPU source carries its figures: taken on the
/// fallback, for a reason in unicode, with a row for each of its three threads — one with the
/// largest values, one fallen back alone, one never armed. `tests/data/v2-cpu-coverage.tprof`
/// holds it; never change it.
fn fixture_profile_with_cpu_coverage() -> Profile {
    let mut profile = fixture_profile_with_samples();
    let mut fallen = ThreadCoverage::new(25_000_000, 4_000_000, 1);
    fallen.fallback = true;
    let mut unarmed = ThreadCoverage::new(30_000_000, 0, 0);
    unarmed.unarmed = true;
    profile.samples.sources[0].cpu = Some(CpuCoverage::new(
        CpuSource::Timers,
        Some("perf_event_open refusé: perf_event_paranoid 3 ✗".to_owned()),
        997,
        vec![
            (0, ThreadCoverage::new(u64::MAX, u64::MAX, u64::MAX)),
            (1, fallen),
            (2, unarmed),
        ],
    ));
    profile
}

/// [`fixture_profile_with_cpu_coverage`] whose first thread took samples of work the profile
/// does not sample and had its perf event stall, each figure the largest, and whose third took
/// 2 samples (3 ms) elsewhere and never stalled; the second has none of them.
/// `tests/data/v2-cpu-aside.tprof` holds it; never change it.
fn fixture_profile_with_cpu_aside() -> Profile {
    let mut profile = fixture_profile_with_cpu_coverage();
    let cpu = profile.samples.sources[0]
        .cpu
        .as_mut()
        .expect("the figures");
    let first = &mut cpu.threads[0].1;
    first.elsewhere = u64::MAX;
    first.elsewhere_ns = u64::MAX;
    first.stalls = u64::MAX;
    first.stalled_ns = u64::MAX;
    let third = &mut cpu.threads[2].1;
    third.elsewhere = 2;
    third.elsewhere_ns = 3_000_000;
    profile
}

/// [`fixture_profile_with_samples`] whose wall samples in a call know their callee: the one in
/// a call (sample 9) waits on `<1.7.2>`, and the last sample, of the largest pid, on the
/// largest pid. `tests/data/v2-callees.tprof` holds it; never change it.
fn fixture_profile_with_callees() -> Profile {
    let mut profile = fixture_profile_with_samples();
    let samples = &mut profile.samples.samples;
    assert_eq!(samples[9].state, Some(WaitState::Call));
    samples[9].callee = Some(Pid::from_parts(1, 7, 2));
    let last = samples.len() - 1;
    samples[last].callee = Some(Pid::from_parts(u32::MAX, u32::MAX, u32::MAX));
    profile
}

fn fixture_path(version: u16) -> PathBuf {
    fixture_file(&format!("v{version}.tprof"))
}

/// The fixture file `name` of `tests/data`.
fn fixture_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/data/{name}"))
}

/// The EVENT_LOGS and EVENTS tags.
const EVENT_LOGS: u64 = 16;
const EVENTS: u64 = 17;
/// The PROCESS_PERCENTILES tag.
const PROCESS_PERCENTILES: u64 = 18;
/// The tags of sample mode's sections, in the order they are written: SAMPLE_SOURCES,
/// SAMPLE_FRAMES, SAMPLE_STACKS, SAMPLE_THREADS, SAMPLE_MAPPINGS and SAMPLES.
const SAMPLE_TAGS: [u64; 6] = [12, 19, 20, 21, 22, 23];
const SAMPLE_SOURCES: u64 = 12;
const SAMPLE_FRAMES: u64 = 19;
const SAMPLE_STACKS: u64 = 20;
const SAMPLE_THREADS: u64 = 21;
const SAMPLE_MAPPINGS: u64 = 22;
const SAMPLES: u64 = 23;
/// The SAMPLE_LOST_FREES tag (added to version 2 without a bump).
const SAMPLE_LOST_FREES: u64 = 24;
/// The SAMPLE_CPU and SAMPLE_CPU_THREADS tags (added to version 2 without a bump).
const SAMPLE_CPU: u64 = 25;
const SAMPLE_CPU_THREADS: u64 = 26;
/// The SAMPLE_CALLEES tag (added to version 2 without a bump).
const SAMPLE_CALLEES: u64 = 27;
/// The SAMPLE_CPU_ASIDE tag (added to version 2 without a bump).
const SAMPLE_CPU_ASIDE: u64 = 28;
/// Samples taken in polls begun before sampling began (added to version 2 without a bump).
const SAMPLE_BEFORE: u64 = 29;
/// The OS's run-queue figures of a run (added to version 1 without a bump).
const RUN_QUEUE: u64 = 30;

/// The sections of an archive, END left out: (tag, payload). Panics on a bad frame.
fn sections(bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    assert!(bytes.starts_with(archive::MAGIC));
    let mut rest = &bytes[archive::MAGIC.len() + 2..];
    let mut out = Vec::new();
    loop {
        let header = rest;
        let tag = leb128::read::unsigned(&mut rest).expect("a section tag");
        let len = leb128::read::unsigned(&mut rest).expect("a section length") as usize;
        let framed = header.len() - rest.len() + len;
        let crc = u32::from_le_bytes(rest[len..len + 4].try_into().expect("4 bytes"));
        assert_eq!(crc, crc32fast::hash(&header[..framed]), "section {tag}");
        if tag == 0 {
            assert_eq!(rest.len(), len + 4, "END is last");
            return out;
        }
        out.push((tag, rest[..len].to_vec()));
        rest = &rest[len + 4..];
    }
}

/// An archive of these sections, each with its checksum, and END with the whole's.
fn frame(sections: &[(u64, Vec<u8>)]) -> Vec<u8> {
    frame_as(archive::VERSION, sections)
}

/// [`frame`], as an archive of format version `version`.
fn frame_as(version: u16, sections: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut out = archive::MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    let section = |out: &mut Vec<u8>, tag: u64, payload: &[u8]| {
        let start = out.len();
        leb128::write::unsigned(out, tag).expect("writing to a Vec succeeds");
        leb128::write::unsigned(out, payload.len() as u64).expect("writing to a Vec succeeds");
        out.extend_from_slice(payload);
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    };
    for (tag, payload) in sections {
        section(&mut out, *tag, payload);
    }
    let whole = crc32fast::hash(&out);
    section(&mut out, 0, &whole.to_le_bytes());
    out
}

// --- Round trips ---

#[test]
fn real_profiles_of_each_type_read_back_equal() {
    for t in TYPES {
        let profile = real_profile(t, REAL);
        assert!(!profile.is_empty(), "{t}");
        assert_eq!(profile.percentiles.is_empty(), t != TraceType::CallTime);
        let back = read_bytes(&bytes_of(&profile)).unwrap();
        assert_eq!(back, profile, "{t}");
    }
}

#[test]
fn real_event_logs_read_back_equal_in_a_few_bytes_an_event() {
    for t in [TraceType::CallTime, TraceType::CallMemory] {
        let profile = real_profile(t, REAL);
        assert_eq!(profile.event_logs.len(), 1, "{t}");
        let count = profile.event_logs[0].events.len();
        assert_eq!(
            count,
            3 * 6,
            "{t}: three calls of branch, each calling leaf twice"
        );
        let bytes = bytes_of(&profile);
        assert_eq!(read_bytes(&bytes).unwrap(), profile, "{t}");
        let events: usize = sections(&bytes)
            .iter()
            .filter(|(tag, _)| *tag == EVENTS)
            .map(|(_, payload)| payload.len())
            .sum();
        // A delta of under 2^21 ns (2 ms) and a function index under 64: at most 4 bytes.
        assert!(
            events <= 4 * count,
            "{t}: {events} bytes for {count} events"
        );
    }
}

#[test]
fn events_are_time_deltas_and_the_function_with_the_kind_in_its_low_bit() {
    use EventKind::{Enter, Leave};
    let mut profile = Profile::empty(TraceType::CallTime);
    profile.function_table = vec![
        function("app", "main", 0, 1),
        function("app", "parse", 1, 2),
    ];
    profile.event_logs = vec![
        EventLog {
            group: Group::Process(Pid::from_parts(1, 0, 1)),
            events: vec![event(5, 1, Enter), event(7, 1, Leave), event(300, 0, Enter)],
            dropped: 4,
        },
        EventLog {
            group: Group::Process(Pid::from_parts(0, 3, 0)),
            events: vec![event(2, 0, Leave)],
            dropped: 0,
        },
    ];
    let bytes = bytes_of(&profile);
    assert_eq!(read_bytes(&bytes).unwrap(), profile);
    let parts = sections(&bytes);
    let payload = |tag| {
        let found: Vec<&Vec<u8>> = parts
            .iter()
            .filter(|(t, _)| *t == tag)
            .map(|(_, p)| p)
            .collect();
        assert_eq!(found.len(), 1, "one section of tag {tag}");
        found[0].clone()
    };
    // Per log: the group (node + 1, index, serial), dropped, the event count.
    assert_eq!(payload(EVENT_LOGS), [2, 0, 1, 4, 3, 1, 3, 0, 0, 1]);
    // Per event: the delta from the event before in its log (300 - 7 = 293 is two bytes),
    // then function << 1 | kind (1 for a leave); the second log starts from 0 again.
    assert_eq!(payload(EVENTS), [5, 2, 2, 3, 0xa5, 0x02, 0, 2, 1]);
    // The event sections come last, after the tables that were there before them.
    let tags: Vec<u64> = parts.iter().map(|(t, _)| *t).collect();
    assert_eq!(tags[tags.len() - 2..], [EVENT_LOGS, EVENTS], "{tags:?}");
}

#[test]
fn empty_profiles_read_back_equal() {
    for t in TYPES {
        let profile = Profile::empty(t);
        assert_eq!(read_bytes(&bytes_of(&profile)).unwrap(), profile);
    }
}

#[test]
fn a_hand_built_profile_reads_back_equal_with_each_string_stored_once() {
    let profile = fixture_profile();
    let bytes = bytes_of(&profile);
    assert_eq!(read_bytes(&bytes).unwrap(), profile);
    // "src/app.rs" is the file of two functions, and the module "app" of two: once each.
    let count = |needle: &[u8]| bytes.windows(needle.len()).filter(|w| *w == needle).count();
    assert_eq!(count(b"src/app.rs"), 1);
    assert_eq!(count("ünïcødé::модуль".as_bytes()), 1);
    assert_eq!(
        count(b"app::worker/1"),
        1,
        "the initial call of three processes"
    );
}

#[test]
fn a_reader_that_hands_out_one_byte_at_a_time_reads_the_same() {
    struct Trickle<'a>(&'a [u8]);
    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some((&first, rest)) = self.0.split_first() else {
                return Ok(0);
            };
            if buf.is_empty() {
                return Ok(0);
            }
            buf[0] = first;
            self.0 = rest;
            Ok(1)
        }
    }
    let profile = fixture_profile();
    let bytes = bytes_of(&profile);
    assert_eq!(archive::read(&mut Trickle(&bytes)).unwrap(), profile);
}

#[test]
fn reading_stops_after_the_end_section() {
    let profile = fixture_profile();
    let mut bytes = bytes_of(&profile);
    let len = bytes.len();
    bytes.extend_from_slice(b"and what follows");
    let mut input = &bytes[..];
    assert_eq!(archive::read(&mut input).unwrap(), profile);
    assert_eq!(input, b"and what follows");
    assert_eq!(bytes.len() - input.len(), len);
}

#[test]
fn a_large_profile_is_written_in_several_sections_per_table() {
    let functions: Vec<FunctionTrace> = (0..20_000u32)
        .map(|i| FunctionTrace {
            function: function("big", &format!("f{i}"), 1, i),
            entries: vec![entry(Group::Process(Pid::from_parts(1, i, 0)), 1, 1_000)],
        })
        .collect();
    let profile = Profile::new(TraceType::CallTime, functions);
    let bytes = bytes_of(&profile);
    let tags: Vec<u64> = sections(&bytes).iter().map(|(tag, _)| *tag).collect();
    let count = |tag| tags.iter().filter(|&&t| t == tag).count();
    assert!(count(2) > 1, "STRINGS: {tags:?}");
    assert!(count(3) > 1, "FUNCTIONS: {tags:?}");
    assert!(
        tags.is_sorted(),
        "tables come in order, each whole: {tags:?}"
    );
    assert!(sections(&bytes).iter().all(|(_, p)| p.len() < 80 << 10));
    assert_eq!(read_bytes(&bytes).unwrap(), profile);
}

// --- Files ---

#[test]
fn files_read_back_and_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("tprof-archive-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.tprof");
    let profile = fixture_profile();
    archive::write_file(&profile, &path).unwrap();
    assert_eq!(archive::read_file(&path).unwrap(), profile);

    let missing = dir.join("missing.tprof");
    let err = archive::read_file(&missing).unwrap_err();
    assert!(matches!(&err, ArchiveError::File { path, source }
        if path == &missing && matches!(**source, ArchiveError::Io(_))));
    assert!(err.to_string().contains("missing.tprof"), "{err}");

    let text = dir.join("profile.json");
    std::fs::write(&text, "{\"trace_type\": \"call_time\"}").unwrap();
    let err = archive::read_file(&text).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("profile.json"), "{message}");
    assert!(message.contains("not a .tprof archive"), "{message}");

    let cut = dir.join("cut.tprof");
    let bytes = bytes_of(&profile);
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = archive::read_file(&cut).unwrap_err();
    assert!(err.offset().is_some_and(|at| at <= bytes.len() as u64 / 2));
    assert!(err.to_string().contains("cut.tprof"), "{err}");

    let err = archive::write_file(&profile, &dir.join("no-such-dir/x.tprof")).unwrap_err();
    assert!(err.to_string().contains("no-such-dir"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_symlink_a_fifo_or_a_device_is_written_in_place_not_replaced() {
    use std::os::unix::fs::{FileTypeExt, symlink};
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let profile = fixture_profile();

    // A symlink to a regular file: the file it points to gets the archive; the link stays.
    let target = dir.join("target.tprof");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.join("link.tprof");
    symlink(&target, &link).unwrap();
    archive::write_file(&profile, &link).unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(archive::read_file(&target).unwrap(), profile);

    // A FIFO: its reader gets the archive; the FIFO stays.
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let reading = fifo.clone();
    std::thread::Builder::new()
        .name("fifo reader".into())
        .spawn(move || {
            let _ = tx.send(std::fs::read(&reading));
        })
        .unwrap();
    archive::write_file(&profile, &fifo).unwrap();
    let bytes = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .unwrap()
        .unwrap();
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(read_bytes(&bytes).unwrap(), profile);

    // A device that is full: the error is reported, and the link to it stays.
    if std::path::Path::new("/dev/full").exists() {
        let full = dir.join("full.tprof");
        symlink("/dev/full", &full).unwrap();
        let err = archive::write_file(&profile, &full).unwrap_err();
        assert!(err.to_string().contains("full.tprof"), "{err}");
        assert!(err.to_string().contains("No space left"), "{err}");
        assert!(
            std::fs::symlink_metadata(&full)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::metadata(&full)
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }
}

// --- Damage ---

#[test]
fn every_truncation_is_truncated_or_corrupt_with_an_offset_within_it() {
    for bytes in [
        bytes_of(&fixture_profile()),
        bytes_of(&fixture_profile_with_events()),
        bytes_of(&fixture_profile_with_samples()),
        bytes_of(&real_profile(TraceType::CallMemory, REAL)),
    ] {
        for len in 0..bytes.len() {
            let err = read_bytes(&bytes[..len]).unwrap_err();
            match &err {
                ArchiveError::Truncated { at, .. } | ArchiveError::Corrupt { at, .. } => {
                    assert!(*at <= len as u64, "{len}: {err}");
                }
                other => panic!("a cut at {len} gives {other:?}"),
            }
        }
        assert!(read_bytes(&bytes).is_ok());
    }
}

#[test]
fn every_changed_byte_is_caught() {
    for profile in [
        fixture_profile_with_events(),
        fixture_profile_with_samples(),
    ] {
        let bytes = bytes_of(&profile);
        for i in 0..bytes.len() {
            for mask in [0x01, 0x80, 0xff] {
                let mut damaged = bytes.clone();
                damaged[i] ^= mask;
                let result = read_bytes(&damaged);
                assert!(result.is_err(), "byte {i} ^ {mask:#x} went unnoticed");
                if let Some(at) = result.unwrap_err().offset() {
                    assert!(at <= bytes.len() as u64);
                }
            }
        }
    }
}

#[test]
fn a_damaged_section_is_reported_at_its_offset() {
    let bytes = bytes_of(&fixture_profile());
    // The META section starts right after the header; damage its payload.
    let meta_at = archive::MAGIC.len() + 2;
    let mut damaged = bytes.clone();
    damaged[meta_at + 2] ^= 1;
    let err = read_bytes(&damaged).unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Corrupt { at, what } if *at == meta_at as u64 && what.contains("META")),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "the archive is damaged at byte {meta_at}: the checksum of the META section \
             (bytes {meta_at} to {}) does not match: the section is damaged",
            meta_at + 3
        )
    );
}

#[test]
fn other_files_and_other_versions_are_refused_with_what_to_do() {
    let err = read_bytes(b"{\"trace_type\": \"call_time\"}").unwrap_err();
    assert!(
        matches!(&err, ArchiveError::NotAnArchive { found } if found.starts_with(b"{\"")),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("not a .tprof archive"), "{err}");

    let mut bytes = bytes_of(&fixture_profile());
    let at = archive::MAGIC.len();
    bytes[at..at + 2].copy_from_slice(&(archive::VERSION + 1).to_le_bytes());
    let err = read_bytes(&bytes).unwrap_err();
    assert!(matches!(
        err,
        ArchiveError::UnsupportedVersion { version, newest }
            if version == archive::VERSION + 1 && newest == archive::VERSION
    ));
    assert!(err.to_string().contains("newer tprof"), "{err}");

    bytes[at..at + 2].copy_from_slice(&0u16.to_le_bytes());
    let err = read_bytes(&bytes).unwrap_err();
    assert!(err.to_string().contains("damaged"), "{err}");

    let err = read_bytes(b"").unwrap_err();
    assert!(
        matches!(err, ArchiveError::Truncated { at: 0, .. }),
        "{err:?}"
    );
}

#[test]
fn lengths_and_counts_are_not_trusted() {
    let mut header = archive::MAGIC.to_vec();
    header.extend_from_slice(&archive::VERSION.to_le_bytes());

    // A STRINGS section that says it is 2^62 bytes long: refused before reading it.
    let mut bytes = header.clone();
    bytes.push(2);
    leb128::write::unsigned(&mut bytes, 1 << 62).unwrap();
    let err = read_bytes(&bytes).unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Corrupt { at, what } if *at == header.len() as u64 && what.contains("length")),
        "{err}"
    );

    // A section of unknown kind that long is skipped as it streams: the input ends first.
    let mut bytes = header.clone();
    bytes.push(99);
    leb128::write::unsigned(&mut bytes, 1 << 62).unwrap();
    bytes.extend_from_slice(&[0; 100]);
    let err = read_bytes(&bytes).unwrap_err();
    assert!(
        matches!(err, ArchiveError::Truncated { at, .. } if at == bytes.len() as u64),
        "{err}"
    );

    // A string of 2^40 bytes, and a trace of 2^60 entries, in sections with good checksums.
    let mut meta = Vec::new();
    leb128::write::unsigned(&mut meta, 1).unwrap();
    let mut strings = Vec::new();
    leb128::write::unsigned(&mut strings, 1 << 40).unwrap();
    strings.extend_from_slice(b"abc");
    let err = read_bytes(&frame(&[(1, meta.clone()), (2, strings)])).unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Corrupt { what, .. } if what.contains("runs past the end")),
        "{err}"
    );

    let mut strings = Vec::new();
    for s in ["m", "f", "src/f.rs"] {
        leb128::write::unsigned(&mut strings, s.len() as u64).unwrap();
        strings.extend_from_slice(s.as_bytes());
    }
    let functions = vec![0, 1, 3, 2, 9];
    let mut traces = vec![0];
    leb128::write::unsigned(&mut traces, 1 << 60).unwrap();
    let err = read_bytes(&frame(&[
        (1, meta),
        (2, strings),
        (3, functions),
        (7, traces),
    ]))
    .unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Corrupt { what, .. } if what.contains("entries more than")),
        "{err}"
    );
}

#[test]
fn references_must_point_at_what_came_before() {
    let mut meta = Vec::new();
    leb128::write::unsigned(&mut meta, 0).unwrap();
    // A function whose module is string 5 where there is none.
    let err = read_bytes(&frame(&[(1, meta.clone()), (3, vec![5, 0, 0, 0, 0])])).unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Corrupt { what, .. } if what.contains("string 5")),
        "{err}"
    );
    // No META at all.
    let err = read_bytes(&frame(&[])).unwrap_err();
    assert!(err.to_string().contains("no META"), "{err}");
    // Two of them.
    let err = read_bytes(&frame(&[(1, meta.clone()), (1, meta)])).unwrap_err();
    assert!(err.to_string().contains("a second trace type"), "{err}");
}

#[test]
fn event_counts_and_functions_are_checked() {
    let mut meta = Vec::new();
    leb128::write::unsigned(&mut meta, 1).unwrap();
    // A log of <0.0.0> announcing `count` events, none dropped.
    let log = |count: u8| vec![1, 0, 0, 0, count];
    let one_event = vec![10, 2];

    let err = read_bytes(&frame(&[
        (1, meta.clone()),
        (EVENT_LOGS, log(2)),
        (EVENTS, one_event.clone()),
    ]))
    .unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Corrupt { what, .. }
            if what.contains("announce 1 events more than the EVENTS")),
        "{err}"
    );

    let two_events = [one_event.clone(), one_event.clone()].concat();
    let err = read_bytes(&frame(&[
        (1, meta.clone()),
        (EVENT_LOGS, log(1)),
        (EVENTS, two_events),
    ]))
    .unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Corrupt { what, .. }
            if what.contains("an event beyond the 1 that the EVENT_LOGS")),
        "{err}"
    );

    // Events before any log.
    let err = read_bytes(&frame(&[(1, meta.clone()), (EVENTS, one_event)])).unwrap_err();
    assert!(err.to_string().contains("beyond the 0"), "{err}");

    // A function index of 2^32, in the high bits of the code.
    let mut wide = vec![0];
    leb128::write::unsigned(&mut wide, 1 << 33).unwrap();
    let bytes = frame(&[(1, meta.clone()), (EVENT_LOGS, log(1)), (EVENTS, wide)]);
    let err = read_bytes(&bytes).unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Corrupt { what, .. }
            if what.contains("an event's function is 4294967296, more than 32 bits")),
        "{err}"
    );

    // A log's events may span sections, and a log may be empty: the counts say which is whose.
    let bytes = frame(&[
        (1, meta),
        (EVENT_LOGS, [log(1), log(0), log(2)].concat()),
        (EVENTS, vec![10, 2, 4, 3]),
        (EVENTS, vec![1, 1]),
    ]);
    let profile = read_bytes(&bytes).unwrap();
    let counts: Vec<usize> = profile.event_logs.iter().map(|l| l.events.len()).collect();
    assert_eq!(counts, [1, 0, 2]);
    assert_eq!(
        profile.event_logs[2].events,
        [event(4, 1, EventKind::Leave), event(5, 0, EventKind::Leave)]
    );
}

#[test]
fn sections_of_unknown_kinds_are_skipped() {
    let profile = fixture_profile();
    let mut parts = sections(&bytes_of(&profile));
    // One at the very start (a two-byte tag), one before END, one empty in the middle.
    parts.insert(0, (300, b"samples of a sampling mode".to_vec()));
    parts.insert(3, (13, Vec::new()));
    parts.push((14, vec![0xff; 100_000]));
    let bytes = frame(&parts);
    assert_eq!(read_bytes(&bytes).unwrap(), profile);

    // Skipped, but checked: damage in one is still caught.
    let mut damaged = bytes.clone();
    let at = bytes.len() - 50_000;
    damaged[at] ^= 1;
    let err = read_bytes(&damaged).unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Corrupt { what, .. } if what.contains("unknown (tag 14)")),
        "{err}"
    );
}

// --- Fixtures: the files each version wrote still read ---

#[test]
fn the_v1_fixture_reads_as_the_fixture_profile() {
    let profile = archive::read_file(&fixture_path(1)).unwrap();
    assert_eq!(profile, fixture_profile());
}

/// A profile without samples is written as version 1 was, so that older tprofs read it.
#[test]
fn the_writer_writes_the_v1_fixture_byte_for_byte() {
    let fixture = std::fs::read(fixture_path(1)).unwrap();
    assert_eq!(bytes_of(&fixture_profile()), fixture);
}

#[test]
fn the_v2_fixture_reads_as_the_fixture_profile_with_samples() {
    let profile = archive::read_file(&fixture_path(2)).unwrap();
    assert_eq!(profile, fixture_profile_with_samples());
    // Equal as numbers is not enough for a weight: -0.0 == 0.0.
    let bits = |p: &Profile| -> Vec<u64> {
        let set = &p.samples;
        let weights = set.samples.iter().map(|s| s.weight);
        let dropped = set.sources.iter().map(|s| s.dropped);
        weights.chain(dropped).map(f64::to_bits).collect()
    };
    assert_eq!(bits(&profile), bits(&fixture_profile_with_samples()));
}

#[test]
fn the_writer_writes_the_newest_fixture_byte_for_byte() {
    assert_eq!(archive::VERSION, 2);
    let fixture = std::fs::read(fixture_path(archive::VERSION)).unwrap();
    assert_eq!(bytes_of(&fixture_profile_with_samples()), fixture);
}

/// Writes the fixture of the current version: run it once when the version is bumped (see
/// "Adding a fixture" in `tprof::archive`).
#[test]
#[ignore = "writes tests/data/v<VERSION>.tprof; run by hand when the version is bumped"]
fn write_fixture() {
    let path = fixture_path(archive::VERSION);
    archive::write_file(&fixture_profile_with_samples(), &path).unwrap();
}

/// A profile with samples says version 2, which a tprof that predates samples refuses (it
/// would read the profile without them, as if nothing had been sampled); one without says
/// version 1. Its other sections are those of version 1: without its sample sections, the
/// v2 fixture is the v1 fixture, but for the strings the samples name, after the others.
#[test]
fn the_v2_fixture_is_the_v1_fixture_and_the_sample_sections() {
    let version = |bytes: &[u8]| {
        let at = archive::MAGIC.len();
        u16::from_le_bytes([bytes[at], bytes[at + 1]])
    };
    let v2 = std::fs::read(fixture_path(2)).unwrap();
    assert_eq!(version(&v2), 2);
    assert_eq!(version(&bytes_of(&fixture_profile())), 1);
    let mut parts = sections(&v2);
    let tags: Vec<u64> = parts.iter().map(|(tag, _)| *tag).collect();
    assert!(tags.ends_with(&SAMPLE_TAGS), "last, once each: {tags:?}");
    parts.retain(|(tag, _)| !SAMPLE_TAGS.contains(tag));
    assert_eq!(parts.len() + SAMPLE_TAGS.len(), tags.len());
    let v1 = sections(&std::fs::read(fixture_path(1)).unwrap());
    assert_eq!(parts.len(), v1.len());
    for ((tag, payload), (v1_tag, v1_payload)) in parts.iter().zip(&v1) {
        assert_eq!(tag, v1_tag);
        if *tag == 2 {
            assert!(payload.len() > v1_payload.len());
            assert!(payload.starts_with(v1_payload), "STRINGS: v1's, then more");
        } else {
            assert_eq!(payload, v1_payload, "section {tag}");
        }
    }
    // Read as version 2, the same sections are the profile without its samples.
    assert_eq!(read_bytes(&frame(&parts)).unwrap(), fixture_profile());
}

#[test]
fn the_v1_events_fixture_reads_as_the_fixture_profile_with_events() {
    let profile = archive::read_file(&fixture_file("v1-events.tprof")).unwrap();
    assert_eq!(profile, fixture_profile_with_events());
}

#[test]
fn the_writer_writes_the_events_fixture_byte_for_byte() {
    let fixture = std::fs::read(fixture_file("v1-events.tprof")).unwrap();
    assert_eq!(bytes_of(&fixture_profile_with_events()), fixture);
}

/// A reader that predates the event sections skips them: what it reads is the v1 fixture,
/// byte for byte, and the profile without its event logs.
#[test]
fn without_its_event_sections_the_events_fixture_is_the_v1_fixture() {
    let with_events = std::fs::read(fixture_file("v1-events.tprof")).unwrap();
    let mut parts = sections(&with_events);
    let before = parts.len();
    parts.retain(|(tag, _)| *tag != EVENT_LOGS && *tag != EVENTS);
    assert_eq!(
        before - parts.len(),
        2,
        "one EVENT_LOGS and one EVENTS section"
    );
    let v1 = std::fs::read(fixture_path(1)).unwrap();
    assert_eq!(frame_as(1, &parts), v1);
    let mut profile = fixture_profile_with_events();
    profile.event_logs.clear();
    assert_eq!(read_bytes(&frame(&parts)).unwrap(), profile);
}

/// Writes the fixture of the event sections, added to version 1 without a bump: it was run
/// once when they were added (see "Adding a fixture" in `tprof::archive`).
#[test]
#[ignore = "writes tests/data/v1-events.tprof; it was run once, when the event sections came"]
fn write_events_fixture() {
    let path = fixture_file("v1-events.tprof");
    archive::write_file(&fixture_profile_with_events(), &path).unwrap();
}

#[test]
fn the_v1_process_percentiles_fixture_reads_as_its_profile() {
    let profile = archive::read_file(&fixture_file("v1-process-percentiles.tprof")).unwrap();
    assert_eq!(profile, fixture_profile_with_process_percentiles());
}

#[test]
fn the_writer_writes_the_process_percentiles_fixture_byte_for_byte() {
    let fixture = std::fs::read(fixture_file("v1-process-percentiles.tprof")).unwrap();
    assert_eq!(
        bytes_of(&fixture_profile_with_process_percentiles()),
        fixture
    );
}

/// A reader that predates per-process percentiles skips their section: what it reads is the
/// v1 fixture, byte for byte, and the profile with the percentiles of every process only.
#[test]
fn without_its_process_percentiles_the_fixture_is_the_v1_fixture() {
    let with = std::fs::read(fixture_file("v1-process-percentiles.tprof")).unwrap();
    let mut parts = sections(&with);
    let before = parts.len();
    parts.retain(|(tag, _)| *tag != PROCESS_PERCENTILES);
    assert_eq!(before - parts.len(), 1, "one PROCESS_PERCENTILES section");
    assert_eq!(frame_as(1, &parts), std::fs::read(fixture_path(1)).unwrap());
    assert_eq!(read_bytes(&frame(&parts)).unwrap(), fixture_profile());
}

/// The fixture profile with the OS's run-queue figures of its first run (tag 30, added to
/// version 1 without a bump); the second run has none.
fn fixture_profile_with_run_queue() -> Profile {
    let mut profile = fixture_profile();
    profile.meta.runs[0].run_queue = Some(runtime::trace::SnapshotRunQueue {
        ran_ns: 3_000_000_000,
        waited_ns: u64::MAX,
        threads: 5,
        exited: 1,
    });
    profile
}

#[test]
fn the_v1_run_queue_fixture_reads_as_its_profile() {
    let profile = archive::read_file(&fixture_file("v1-run-queue.tprof")).unwrap();
    assert_eq!(profile, fixture_profile_with_run_queue());
    assert_eq!(profile.meta.runs[1].run_queue, None);
}

#[test]
fn the_writer_writes_the_run_queue_fixture_byte_for_byte() {
    let fixture = std::fs::read(fixture_file("v1-run-queue.tprof")).unwrap();
    assert_eq!(bytes_of(&fixture_profile_with_run_queue()), fixture);
}

/// A reader that predates the run-queue figures skips their section: what it reads is the v1
/// fixture, byte for byte, whose runs have none.
#[test]
fn without_its_run_queue_section_the_fixture_is_the_v1_fixture() {
    let with = std::fs::read(fixture_file("v1-run-queue.tprof")).unwrap();
    let mut parts = sections(&with);
    let before = parts.len();
    parts.retain(|(tag, _)| *tag != RUN_QUEUE);
    assert_eq!(before - parts.len(), 1, "one RUN_QUEUE section");
    assert_eq!(frame_as(1, &parts), std::fs::read(fixture_path(1)).unwrap());
    assert_eq!(read_bytes(&frame(&parts)).unwrap(), fixture_profile());
}

/// A run-queue record names a run that comes before it, once: run 2 of the fixture's 2, or
/// run 0 twice, is refused.
#[test]
fn a_run_queue_record_of_a_missing_run_or_twice_of_one_is_corrupt() {
    let with = std::fs::read(fixture_file("v1-run-queue.tprof")).unwrap();
    let parts = sections(&with);
    let at = parts
        .iter()
        .position(|(t, _)| *t == RUN_QUEUE)
        .expect("the section");
    let with_payload = |payload: Vec<u8>| {
        let mut parts = parts.clone();
        parts[at].1 = payload;
        read_bytes(&frame(&parts)).expect_err("refused").to_string()
    };
    let missing = with_payload(vec![2, 1, 1, 1, 0]);
    assert!(
        missing.contains("run 2, but only 2 come before it"),
        "{missing}"
    );
    let twice = with_payload(vec![0, 1, 1, 1, 0, 0, 2, 2, 2, 0]);
    assert!(
        twice.contains("a second run-queue record of run 0"),
        "{twice}"
    );
}

/// Writes the fixture of the RUN_QUEUE section, added to version 1 without a bump: it was run
/// once when it was added (see "Adding a fixture" in `tprof::archive`).
#[test]
#[ignore = "writes tests/data/v1-run-queue.tprof; it was run once, when the section came"]
fn write_run_queue_fixture() {
    let path = fixture_file("v1-run-queue.tprof");
    archive::write_file(&fixture_profile_with_run_queue(), &path).unwrap();
}

/// Writes the fixture of the PROCESS_PERCENTILES section, added to version 1 without a bump:
/// it was run once when it was added (see "Adding a fixture" in `tprof::archive`).
#[test]
#[ignore = "writes tests/data/v1-process-percentiles.tprof; it was run once, when the section came"]
fn write_process_percentiles_fixture() {
    let path = fixture_file("v1-process-percentiles.tprof");
    archive::write_file(&fixture_profile_with_process_percentiles(), &path).unwrap();
}

/// The v2 fixture `name` without its one section of `tag` (a section added to version 2 without
/// a bump): its sections are the v2 fixture's byte for byte, and what a reader that predates
/// the section reads of it.
fn without_section(name: &str, tag: u64) -> Profile {
    let with = std::fs::read(fixture_file(name)).expect("the fixture");
    let mut parts = sections(&with);
    let before = parts.len();
    parts.retain(|(t, _)| *t != tag);
    assert_eq!(
        before - parts.len(),
        1,
        "one section of tag {tag} in {name}"
    );
    assert_eq!(
        frame_as(2, &parts),
        std::fs::read(fixture_path(2)).expect("the v2 fixture")
    );
    read_bytes(&frame(&parts)).expect("read without the section")
}

/// The error of reading the v2 fixture `name` with its section of `tag` holding one record
/// (source 2 of the fixture's 2, count 5): the record names a source that does not come
/// before it.
fn record_of_a_missing_source(name: &str, tag: u64) -> String {
    let with = std::fs::read(fixture_file(name)).expect("the fixture");
    let mut parts = sections(&with);
    let at = parts
        .iter()
        .position(|(t, _)| *t == tag)
        .expect("the section");
    parts[at].1 = vec![2, 5];
    read_bytes(&frame(&parts))
        .expect_err("a record of a missing source is refused")
        .to_string()
}

#[test]
fn the_v2_lost_frees_fixture_reads_as_its_profile() {
    let profile = archive::read_file(&fixture_file("v2-lost-frees.tprof")).unwrap();
    assert_eq!(profile, fixture_profile_with_lost_frees());
    assert_eq!(profile.samples.lost_frees(), u64::MAX, "summed, saturating");
}

#[test]
fn the_writer_writes_the_lost_frees_fixture_byte_for_byte() {
    let fixture = std::fs::read(fixture_file("v2-lost-frees.tprof")).unwrap();
    assert_eq!(bytes_of(&fixture_profile_with_lost_frees()), fixture);
}

/// A reader that predates lost frees skips their section: what it reads is the v2 fixture,
/// byte for byte, whose sources lost none (a missing count reads as 0).
#[test]
fn without_its_lost_frees_section_the_fixture_is_the_v2_fixture() {
    let read = without_section("v2-lost-frees.tprof", SAMPLE_LOST_FREES);
    assert_eq!(read, fixture_profile_with_samples());
    assert_eq!(read.samples.lost_frees(), 0);
}

/// A lost-frees record names a source that comes before it: one past the last is refused.
#[test]
fn a_lost_frees_record_of_a_missing_source_is_corrupt() {
    // Source 2 of 2, 5 frees lost.
    let error = record_of_a_missing_source("v2-lost-frees.tprof", SAMPLE_LOST_FREES);
    assert!(
        error.contains("source 2, but only 2 come before it"),
        "{error}"
    );
}

/// Writes the fixture of the SAMPLE_LOST_FREES section, added to version 2 without a bump: it
/// was run once when it was added (see "Adding a fixture" in `tprof::archive`).
#[test]
#[ignore = "writes tests/data/v2-lost-frees.tprof; it was run once, when the section came"]
fn write_lost_frees_fixture() {
    let path = fixture_file("v2-lost-frees.tprof");
    archive::write_file(&fixture_profile_with_lost_frees(), &path).unwrap();
}

#[test]
fn the_v2_before_sampling_fixture_reads_as_its_profile() {
    let profile = archive::read_file(&fixture_file("v2-before-sampling.tprof")).unwrap();
    assert_eq!(profile, fixture_profile_with_before_sampling());
}

#[test]
fn the_writer_writes_the_before_sampling_fixture_byte_for_byte() {
    let fixture = std::fs::read(fixture_file("v2-before-sampling.tprof")).unwrap();
    assert_eq!(bytes_of(&fixture_profile_with_before_sampling()), fixture);
}

/// A reader that predates the count skips its section: what it reads is the v2 fixture, byte
/// for byte, whose sources have none (a missing count reads as 0).
#[test]
fn without_its_before_sampling_section_the_fixture_is_the_v2_fixture() {
    let read = without_section("v2-before-sampling.tprof", SAMPLE_BEFORE);
    assert_eq!(read, fixture_profile_with_samples());
    assert!(read.samples.sources.iter().all(|s| s.before_sampling == 0));
}

/// A before-sampling record names a source that comes before it: one past the last is
/// refused.
#[test]
fn a_before_sampling_record_of_a_missing_source_is_corrupt() {
    let error = record_of_a_missing_source("v2-before-sampling.tprof", SAMPLE_BEFORE);
    assert!(
        error.contains("source 2, but only 2 come before it"),
        "{error}"
    );
}

/// Writes the fixture of the SAMPLE_BEFORE section, added to version 2 without a bump: it was
/// run once when it was added (see "Adding a fixture" in `tprof::archive`).
#[test]
#[ignore = "writes tests/data/v2-before-sampling.tprof; it was run once, when the section came"]
fn write_before_sampling_fixture() {
    let path = fixture_file("v2-before-sampling.tprof");
    archive::write_file(&fixture_profile_with_before_sampling(), &path).unwrap();
}

#[test]
fn the_v2_cpu_coverage_fixture_reads_as_its_profile() {
    let profile = archive::read_file(&fixture_file("v2-cpu-coverage.tprof")).unwrap();
    assert_eq!(profile, fixture_profile_with_cpu_coverage());
    let truth = profile.samples.cpu_truth().expect("the figures");
    assert_eq!(truth.figures[0].threads.len(), 3);
    assert!(truth.summary[0].contains("(fallback: perf_event_open refusé"));
}

#[test]
fn the_writer_writes_the_cpu_coverage_fixture_byte_for_byte() {
    let fixture = std::fs::read(fixture_file("v2-cpu-coverage.tprof")).unwrap();
    assert_eq!(bytes_of(&fixture_profile_with_cpu_coverage()), fixture);
}

/// A reader that predates the CPU figures skips their sections: it reads the samples without
/// them. (The fallback's reason is among the strings, so the bytes are not the v2 fixture's.)
/// And this reader reads an archive written before them (the v2 fixture) as sources without
/// figures, which the reports then say nothing of.
#[test]
fn without_its_cpu_sections_the_fixture_reads_as_the_samples_fixture() {
    let with = std::fs::read(fixture_file("v2-cpu-coverage.tprof")).unwrap();
    let mut parts = sections(&with);
    let before = parts.len();
    parts.retain(|(tag, _)| *tag != SAMPLE_CPU && *tag != SAMPLE_CPU_THREADS);
    assert_eq!(before - parts.len(), 2, "one section of each");
    let read = read_bytes(&frame(&parts)).unwrap();
    assert_eq!(read, fixture_profile_with_samples());
    let old = archive::read_file(&fixture_path(2)).unwrap();
    assert!(old.samples.sources.iter().all(|s| s.cpu.is_none()));
    assert_eq!(old.samples.cpu_truth(), None);
}

/// The CPU figures' records are checked as they are read: an unknown mechanism, a thread row
/// no SAMPLE_CPU record announced, and rows announced but missing are each refused.
#[test]
fn damaged_cpu_figures_are_refused_naming_what_is_wrong() {
    let with = std::fs::read(fixture_file("v2-cpu-coverage.tprof")).unwrap();
    let parts = sections(&with);
    type Sections = Vec<(u64, Vec<u8>)>;
    let error = |edit: &dyn Fn(&mut Sections)| {
        let mut parts = parts.clone();
        edit(&mut parts);
        read_bytes(&frame(&parts)).unwrap_err().to_string()
    };
    let at = |parts: &[(u64, Vec<u8>)], tag: u64| {
        parts
            .iter()
            .position(|(t, _)| *t == tag)
            .expect("the section")
    };
    // Source 0, mechanism 3.
    let e = error(&|parts| {
        let i = at(parts, SAMPLE_CPU);
        parts[i].1[1] = 3;
    });
    assert!(e.contains("an unknown CPU sampling mechanism 3"), "{e}");
    let e = error(&|parts| parts.retain(|(tag, _)| *tag != SAMPLE_CPU));
    assert!(
        e.contains("a CPU figures row beyond the 0 that the SAMPLE_CPU sections announce"),
        "{e}"
    );
    let e = error(&|parts| parts.retain(|(tag, _)| *tag != SAMPLE_CPU_THREADS));
    assert!(
        e.contains("announce 3 thread rows more than the SAMPLE_CPU_THREADS sections hold"),
        "{e}"
    );
}

/// Writes the fixture of the SAMPLE_CPU and SAMPLE_CPU_THREADS sections, added to version 2
/// without a bump: it was run once when they were added (see "Adding a fixture" in
/// `tprof::archive`).
#[test]
#[ignore = "writes tests/data/v2-cpu-coverage.tprof; it was run once, when the sections came"]
fn write_cpu_coverage_fixture() {
    let path = fixture_file("v2-cpu-coverage.tprof");
    archive::write_file(&fixture_profile_with_cpu_coverage(), &path).unwrap();
}

#[test]
fn the_v2_cpu_aside_fixture_reads_as_its_profile() {
    let profile = archive::read_file(&fixture_file("v2-cpu-aside.tprof")).unwrap();
    assert_eq!(profile, fixture_profile_with_cpu_aside());
    let truth = profile.samples.cpu_truth().expect("the figures");
    let f = &truth.figures[0];
    assert_eq!((f.elsewhere, f.stalls), (u64::MAX, u64::MAX));
    let rows: Vec<(u64, u64, u64, u64)> = f
        .threads
        .iter()
        .map(|t| (t.elsewhere, t.elsewhere_ns, t.stalls, t.stalled_ns))
        .collect();
    assert_eq!(
        rows,
        [
            (u64::MAX, u64::MAX, u64::MAX, u64::MAX),
            (0, 0, 0, 0),
            (2, 3_000_000, 0, 0)
        ]
    );
    assert!(
        truth.summary[0].contains("more sample(s) of these threads"),
        "{}",
        truth.summary[0]
    );
    assert!(
        truth
            .warnings
            .iter()
            .any(|w| w.contains("perf event lost 18446744073709551615 overflow signal(s)")),
        "{:#?}",
        truth.warnings
    );
}

#[test]
fn the_writer_writes_the_cpu_aside_fixture_byte_for_byte() {
    let fixture = std::fs::read(fixture_file("v2-cpu-aside.tprof")).unwrap();
    assert_eq!(bytes_of(&fixture_profile_with_cpu_aside()), fixture);
}

/// A reader that predates SAMPLE_CPU_ASIDE skips it: without it the fixture is the CPU
/// figures' fixture byte for byte, whose rows have none of its figures. And this reader reads
/// that older archive's rows with zeros: no sentence on samples elsewhere, no stall.
#[test]
fn without_its_aside_section_the_fixture_is_the_cpu_coverage_fixture() {
    let with = std::fs::read(fixture_file("v2-cpu-aside.tprof")).unwrap();
    let mut parts = sections(&with);
    let before = parts.len();
    parts.retain(|(tag, _)| *tag != SAMPLE_CPU_ASIDE);
    assert_eq!(before - parts.len(), 1, "one SAMPLE_CPU_ASIDE section");
    let older = std::fs::read(fixture_file("v2-cpu-coverage.tprof")).unwrap();
    assert_eq!(frame_as(2, &parts), older);
    let read = archive::read_file(&fixture_file("v2-cpu-coverage.tprof")).unwrap();
    let cpu = read.samples.sources[0].cpu.as_ref().expect("the figures");
    assert_eq!((cpu.elsewhere(), cpu.stalls()), ((0, 0), (0, 0)));
    let truth = read.samples.cpu_truth().unwrap();
    assert!(!truth.summary[0].contains("more sample(s)"));
    assert!(!truth.warnings.iter().any(|w| w.contains("perf event lost")));
}

/// A SAMPLE_CPU_ASIDE record names a row read before it, after the row the record before
/// named: a row not yet read, and one named twice, are refused.
#[test]
fn damaged_aside_records_are_refused_naming_what_is_wrong() {
    let with = std::fs::read(fixture_file("v2-cpu-aside.tprof")).unwrap();
    let parts = sections(&with);
    let at = parts
        .iter()
        .position(|(tag, _)| *tag == SAMPLE_CPU_ASIDE)
        .expect("the section");
    let error = |payload: Vec<u8>| {
        let mut parts = parts.clone();
        parts[at].1 = payload;
        read_bytes(&frame(&parts)).unwrap_err().to_string()
    };
    // Row 3 of 3.
    let e = error(vec![3, 1, 1, 1, 1]);
    assert!(
        e.contains("samples aside of CPU figures row 3, but only 3 rows come before it"),
        "{e}"
    );
    // Row 2, then row 2 again.
    let e = error(vec![2, 1, 1, 1, 1, 2, 1, 1, 1, 1]);
    assert!(
        e.contains("samples aside of CPU figures row 2 after those of row 2"),
        "{e}"
    );
    // Before the rows: the section moved ahead of SAMPLE_CPU_THREADS.
    let mut moved = parts.clone();
    let aside = moved.remove(at);
    let rows = moved
        .iter()
        .position(|(tag, _)| *tag == SAMPLE_CPU_THREADS)
        .unwrap();
    moved.insert(rows, aside);
    let e = read_bytes(&frame(&moved)).unwrap_err().to_string();
    assert!(e.contains("but only 0 rows come before it"), "{e}");
}

/// Writes the fixture of the SAMPLE_CPU_ASIDE section, added to version 2 without a bump: it
/// was run once when it was added (see "Adding a fixture" in `tprof::archive`).
#[test]
#[ignore = "writes tests/data/v2-cpu-aside.tprof; it was run once, when the section came"]
fn write_cpu_aside_fixture() {
    let path = fixture_file("v2-cpu-aside.tprof");
    archive::write_file(&fixture_profile_with_cpu_aside(), &path).unwrap();
}

#[test]
fn the_v2_callees_fixture_reads_as_its_profile() {
    let profile = archive::read_file(&fixture_file("v2-callees.tprof")).unwrap();
    assert_eq!(profile, fixture_profile_with_callees());
    let callees: Vec<(usize, String)> = profile
        .samples
        .samples
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.callee?.to_string())))
        .collect();
    assert_eq!(
        callees,
        [
            (9, "<1.7.2>".to_owned()),
            (12, "<4294967295.4294967295.4294967295>".to_owned())
        ]
    );
}

#[test]
fn the_writer_writes_the_callees_fixture_byte_for_byte() {
    let fixture = std::fs::read(fixture_file("v2-callees.tprof")).unwrap();
    assert_eq!(bytes_of(&fixture_profile_with_callees()), fixture);
}

/// A reader that predates callees skips their section: what it reads is the v2 fixture, byte
/// for byte, whose wall samples know no callee.
#[test]
fn without_its_callees_section_the_fixture_is_the_v2_fixture() {
    let read = without_section("v2-callees.tprof", SAMPLE_CALLEES);
    assert!(read.samples.samples.iter().all(|s| s.callee.is_none()));
}

/// A callee record names a sample that comes before it: one past the last is refused.
#[test]
fn a_callee_of_a_missing_sample_is_corrupt() {
    let with = std::fs::read(fixture_file("v2-callees.tprof")).unwrap();
    let mut parts = sections(&with);
    let at = parts
        .iter()
        .position(|(tag, _)| *tag == SAMPLE_CALLEES)
        .expect("the section");
    // Sample 13 of 13, callee <1.1.1>.
    parts[at].1 = vec![13, 1, 1, 1];
    let error = read_bytes(&frame(&parts)).unwrap_err().to_string();
    assert!(
        error.contains("sample 13, but only 13 come before it"),
        "{error}"
    );
}

/// Writes the fixture of the SAMPLE_CALLEES section, added to version 2 without a bump: run
/// once, when the fixture was added (see "Adding a fixture" in `tprof::archive`).
#[test]
#[ignore = "writes tests/data/v2-callees.tprof; it was run once, when the fixture came"]
fn write_callees_fixture() {
    let path = fixture_file("v2-callees.tprof");
    archive::write_file(&fixture_profile_with_callees(), &path).unwrap();
}

// --- Samples ---

/// The profile a run of `work` under `sampler` takes: samples of it, and of the runtime.
#[cfg(target_os = "linux")]
fn real_sampled_profile(sampler: runtime::sample::Sampler) -> Profile {
    #[runtime::traced]
    fn spin(n: u64) -> u64 {
        (0..n).fold(1u64, |a, i| a.rotate_left(7) ^ i.wrapping_mul(0x9e37))
    }
    // Under the wall sampler, which gives a running process no path, half of each round is
    // spent suspended in `work` (a timer), so that many ticks find it waiting with its traced
    // path (a `yield_now` left it runnable for microseconds: on a fast machine no tick might
    // land there, and the wall profile had no stack). The CPU sampler's rounds yield: see the
    // closing note of this change for CPU timers seen expiring undelivered in runs whose
    // worker sleeps on a timer.
    #[runtime::traced]
    async fn work(sleeps: bool) -> u64 {
        let mut total = 0;
        for _ in 0..200 {
            total ^= spin(50_000);
            if sleeps {
                tokio::time::sleep(std::time::Duration::from_micros(500)).await;
            } else {
                tokio::task::yield_now().await;
            }
        }
        total
    }
    let sleeps = sampler == runtime::sample::Sampler::Wall;
    let options = tprof::ProfileOptions::new().sample(
        runtime::sample::SampleOptions::new()
            .sampler(sampler)
            .hz(997),
    );
    let outcome =
        tprof::profile(move || async move { work(sleeps).await }, options).expect("profiled");
    assert!(outcome.result.is_ok());
    outcome.profile
}

#[cfg(target_os = "linux")]
#[test]
fn real_sampled_profiles_read_back_equal() {
    use runtime::sample::Sampler;
    for sampler in [Sampler::Cpu, Sampler::Wall] {
        let profile = real_sampled_profile(sampler);
        let set = &profile.samples;
        assert!(!set.samples.is_empty(), "{sampler}: samples were taken");
        assert!(
            !set.stacks.is_empty() && !set.frames.is_empty(),
            "{sampler}"
        );
        let bytes = bytes_of(&profile);
        assert_eq!(read_bytes(&bytes).unwrap(), profile, "{sampler}");
    }
}

/// A million CPU samples of 1,000 processes in 300 stacks (`main;handle<i % 30>;native<i /
/// 30>`: 331 with the stacks they extend), 1 ms apart, mostly of weight 1.
fn a_million_samples() -> Profile {
    let stacks: Vec<[String; 3]> = (0..300)
        .map(|i| {
            [
                "app::main".to_owned(),
                format!("app::handle{}", i % 30),
                format!("native{}", i / 30),
            ]
        })
        .collect();
    let names: Vec<Vec<&str>> = stacks
        .iter()
        .map(|s| s.iter().map(String::as_str).collect())
        .collect();
    let spec: Vec<(u32, &[&str], f64)> = (0..1_000_000u32)
        .map(|i| {
            let weight = if i % 1_000 == 0 { 2.0 } else { 1.0 };
            (
                i % 1_000,
                names[(i as usize * 7) % names.len()].as_slice(),
                weight,
            )
        })
        .collect();
    sampled_profile(1, &spec)
}

/// Stacks are stored once and samples name them by index: a sample takes about 11 bytes (its
/// process 4, time 3, stack 2, thread and flags 1 each), where spelling its stack out would
/// take a hundred. Written, read and merged in time linear in the samples.
#[test]
fn a_million_samples_take_a_few_bytes_each() {
    let profile = a_million_samples();
    assert_eq!(profile.samples.stacks.len(), 331);
    let bytes = bytes_of(&profile);
    let per_sample = bytes.len() as f64 / 1e6;
    assert!(per_sample < 11.0, "{per_sample} bytes a sample");
    let back = read_bytes(&bytes).unwrap();
    assert!(back == profile, "reads back equal");
    let merged = archive::merge(&[profile, back]).unwrap();
    assert_eq!(merged.samples.samples.len(), 2_000_000);
    assert_eq!(merged.samples.stacks.len(), 331);
}

/// The bytes of varint `v`.
fn varint_len(v: u64) -> usize {
    let mut buf = Vec::new();
    leb128::write::unsigned(&mut buf, v).expect("writing to a Vec succeeds");
    buf.len()
}

/// The archive of `profile` with `record` appended to its last section of `tag`, and the
/// offset where `record` starts.
fn with_record(profile: &Profile, tag: u64, record: &[u8]) -> (Vec<u8>, u64) {
    let mut parts = sections(&bytes_of(profile));
    let k = parts
        .iter()
        .rposition(|(t, _)| *t == tag)
        .expect("a section of the tag");
    let old = parts[k].1.len();
    parts[k].1.extend_from_slice(record);
    let before = frame(&parts[..k]).len() - 10; // END: tag, length, 4 bytes, CRC
    let header = varint_len(tag) + varint_len(parts[k].1.len() as u64);
    (frame(&parts), (before + header + old) as u64)
}

#[test]
fn every_sample_reference_must_point_at_what_came_before() {
    let fixture = fixture_profile_with_samples();
    // The fixture has 4 functions in its table, 2 sources, 6 frames, 6 stacks and 3 threads.
    let cases: [(u64, &[u8], &str); 14] = [
        (SAMPLE_SOURCES, &[0, 1, 3, 99, 0, 0, 0, 0], "sampler 3"),
        (
            SAMPLE_SOURCES,
            &[0, 1, 2, 0, 0, 0, 0, 0, 5],
            "an allocation source's model is 5",
        ),
        (SAMPLE_SOURCES, &[0, 1, 0, 99, 0, 2, 0, 0], "walked with 2"),
        (SAMPLE_SOURCES, &[0, 1, 0, 99, 3, 0, 0, 0], "dropped weight"),
        (
            SAMPLE_FRAMES,
            &[5, 0, 0, 0, 0],
            "function 4, but the function table has 4",
        ),
        (SAMPLE_STACKS, &[0, 6], "frame 6, but only 6 come before it"),
        (
            SAMPLE_STACKS,
            &[8, 0],
            "8 stacks before it, but only 6 come before it",
        ),
        (
            SAMPLE_THREADS,
            &[2, 1, 0],
            "source 2, but only 2 come before it",
        ),
        (
            SAMPLE_MAPPINGS,
            &[2, 0, 0, 0, 0],
            "source 2, but only 2 come before it",
        ),
        (
            SAMPLES,
            &[0x80, 0x02, 2, 0],
            "source 2, but only 2 come before it",
        ),
        (SAMPLES, &[16, 3, 0], "thread 3, but only 3 come before it"),
        (SAMPLES, &[32, 0, 6], "stack 6, but only 6 come before it"),
        (SAMPLES, &[0x80, 0x01, 0, 3], "weight"),
        (SAMPLES, &[0x80, 0x10, 0], "unknown"),
    ];
    for (tag, record, expected) in cases {
        let (bytes, at) = with_record(&fixture, tag, record);
        let err = read_bytes(&bytes).unwrap_err();
        match &err {
            ArchiveError::Corrupt { at: found, what } => {
                assert!(
                    what.contains(expected),
                    "{tag} {record:?}: {what:?} should say {expected:?}"
                );
                assert!(
                    (at..at + record.len() as u64).contains(found),
                    "{tag} {record:?}: at {found}, the record is at {at}: {what}"
                );
            }
            other => panic!("{tag} {record:?}: {other:?}"),
        }
    }
    // The same mechanism, with a good record: a sample of the last one's source, at its time
    // and of its weight.
    let (bytes, _) = with_record(&fixture, SAMPLES, &[0, 0]);
    let back = read_bytes(&bytes).unwrap();
    assert_eq!(back.samples.samples.last(), Some(&sample(1, 70, 1.0, None)));

    // Samples in an archive without sources.
    let mut parts = sections(&bytes_of(&fixture_profile()));
    parts.push((SAMPLES, vec![0, 0]));
    let err = read_bytes(&frame(&parts)).unwrap_err();
    assert!(err.to_string().contains("source 0, but only 0"), "{err}");
}

/// A chain of `depth` sampled stacks, each extending the one before, and a sample on the
/// deepest.
fn sampled_chain(depth: usize) -> Profile {
    let names = vec!["app::recurse"; depth];
    sampled_profile(1, &[(0, &names, 1.0)])
}

#[test]
fn a_sampled_stack_deeper_than_the_limit_is_refused_at_its_offset() {
    let limit = archive::MAX_PATH_DEPTH as usize;
    let deepest = sampled_chain(limit);
    assert_eq!(read_bytes(&bytes_of(&deepest)).unwrap(), deepest);

    // One more frame, written by hand (the writer refuses it): the stack just after the last.
    let (bytes, at) = with_record(&deepest, SAMPLE_STACKS, &[1, 0]);
    let err = read_bytes(&bytes).unwrap_err();
    match &err {
        ArchiveError::Corrupt { at: found, what } => {
            assert_eq!(*found, at, "{what}");
            assert!(what.contains(&format!("{limit}")), "{what}");
            assert!(what.contains("deep"), "{what}");
        }
        other => panic!("{other}"),
    }

    let mut out = Vec::new();
    let err = archive::write(&sampled_chain(limit + 1), &mut out).unwrap_err();
    assert!(out.is_empty());
    assert!(
        matches!(&err, ArchiveError::TooLarge { what, .. } if what.contains("deep")),
        "{err}"
    );
}

/// Sample sets that contradict themselves, each with what the error must say.
fn broken_sample_sets() -> Vec<(Profile, &'static str)> {
    let fixture = fixture_profile_with_samples();
    let broken = |what: &'static str, change: fn(&mut SampleSet)| {
        let mut p = fixture.clone();
        change(&mut p.samples);
        (p, what)
    };
    vec![
        broken("sample 0 names stack 6, but there are 6", |s| {
            s.samples[0].stack = Some(6);
        }),
        broken("sample 0 names thread 3, but there are 3", |s| {
            s.samples[0].thread = Some(3);
        }),
        broken("sample 0 names source 2, but there are 2", |s| {
            s.samples[0].source = 2;
        }),
        broken(
            "stack 1 extends stack 1, which does not come before it",
            |s| {
                s.stacks[1].parent = Some(1);
            },
        ),
        broken("stack 1 names frame 6, but there are 6", |s| {
            s.stacks[1].frame = 6;
        }),
        broken(
            "frame 0 names function 4, but the function table has 4",
            |s| {
                s.frames[0].function = Some(4);
            },
        ),
        broken("thread 0 names source 2, but there are 2", |s| {
            s.threads[0].source = 2;
        }),
        broken("mapping 1 names source 9, but there are 2", |s| {
            s.mappings[1].source = 9;
        }),
    ]
}

#[test]
fn the_writer_refuses_samples_that_contradict_themselves_writing_nothing() {
    for (profile, what) in broken_sample_sets() {
        let mut out = Vec::new();
        let err = archive::write(&profile, &mut out).unwrap_err();
        assert!(out.is_empty(), "{what}");
        assert!(
            matches!(&err, ArchiveError::Inconsistent { .. }),
            "{what}: {err:?}"
        );
        assert!(err.to_string().contains(what), "{err} should say {what:?}");
    }
}

#[test]
fn native_frames_naming_a_string_over_and_over_cannot_exhaust_memory() {
    let mut meta = Vec::new();
    leb128::write::unsigned(&mut meta, 0).unwrap();
    // One string of 1 MiB, then 20,000 native frames named by it.
    let big = vec![b'x'; 1 << 20];
    let mut strings = Vec::new();
    leb128::write::unsigned(&mut strings, big.len() as u64).unwrap();
    strings.extend_from_slice(&big);
    let frames = [0, 0, 0, 0, 0].repeat(20_000); // function, name, file, line, address
    let bytes = frame(&[(1, meta), (2, strings), (SAMPLE_FRAMES, frames)]);
    let err = read_bytes(&bytes).unwrap_err();
    match &err {
        ArchiveError::Corrupt { at, what } => {
            assert!(*at <= bytes.len() as u64);
            assert!(what.contains("64 times"), "{what}");
        }
        other => panic!("{other}"),
    }
}

// --- Merging ---

/// `profile` as a program that ran it alone would have it: its processes on node 1.
fn as_run_alone(mut profile: Profile) -> Profile {
    let alone = |pid: Pid| Pid::from_parts(1, pid.index(), pid.serial());
    for f in &mut profile.functions {
        for e in &mut f.entries {
            if let Group::Process(pid) = e.group {
                e.group = Group::Process(alone(pid));
            }
        }
    }
    for p in &mut profile.processes {
        p.pid = alone(p.pid);
    }
    for log in &mut profile.event_logs {
        if let Group::Process(pid) = log.group {
            log.group = Group::Process(alone(pid));
        }
    }
    for p in &mut profile.percentiles {
        if let Group::Process(pid) = p.group {
            p.group = Group::Process(alone(pid));
        }
    }
    for run in &mut profile.meta.runs {
        run.nodes = vec![1];
    }
    profile
}

#[test]
fn two_call_time_runs_keep_their_processes_apart() {
    let a = as_run_alone(real_profile(TraceType::CallTime, REAL));
    let b = as_run_alone(real_profile(TraceType::CallTime, REAL));
    assert_eq!(a.pids(), b.pids(), "the runs' pids overlap");
    let merged = archive::merge(&[a.clone(), b.clone()]).unwrap();

    assert_eq!(merged.meta.runs.len(), 2);
    assert_eq!(
        merged.processes.len(),
        a.processes.len() + b.processes.len()
    );
    let runs: Vec<u32> = merged.processes.iter().map(|p| p.run).collect();
    assert!(runs.contains(&0) && runs.contains(&1), "{runs:?}");
    let pids = merged.pids();
    assert_eq!(pids.len(), a.pids().len() + b.pids().len(), "{pids:?}");
    for p in &merged.processes {
        assert_eq!(merged.meta.runs[p.run as usize].nodes, vec![p.pid.node()]);
    }
    assert_eq!(
        merged.meta.runs[0].nodes,
        vec![1],
        "the first run keeps its node"
    );
    assert_ne!(merged.meta.runs[1].nodes, vec![1]);

    // Each process's figures are its run's own.
    let leaf = merged.function("leaf").unwrap();
    assert_eq!(leaf.entries.len(), 2);
    assert!(leaf.entries.iter().all(|e| e.calls == 6), "{leaf:?}");
    assert_eq!(merged.total(), a.total() + b.total());
    // Percentiles are per process: each run keeps its own, as its processes are renumbered.
    assert_eq!(
        merged.percentiles.len(),
        a.percentiles.len() + b.percentiles.len()
    );
    let figures_of = |profile: &Profile| {
        profile
            .percentiles
            .iter()
            .map(|p| (p.group, p.function.clone(), p.calls))
            .collect::<Vec<_>>()
    };
    let (of_a, of_b): (Vec<_>, Vec<_>) = figures_of(&merged)
        .into_iter()
        .partition(|(g, _, _)| matches!(g, Group::Process(pid) if pid.node() == 1));
    assert_eq!(of_a, figures_of(&a), "the first run keeps its pids");
    let without_group = |v: Vec<(Group, Function, u64)>| -> Vec<(Function, u64)> {
        v.into_iter().map(|(_, f, c)| (f, c)).collect()
    };
    assert_eq!(
        without_group(of_b),
        without_group(figures_of(&b)),
        "the second run's, renumbered"
    );

    // Each run's event log is kept, on its process as renumbered, naming the same functions.
    let logs: Vec<Group> = merged.event_logs.iter().map(|l| l.group).collect();
    let processes: Vec<Group> = merged
        .processes
        .iter()
        .map(|p| Group::Process(p.pid))
        .collect();
    assert_eq!(logs, processes);
    for (log, input) in merged.event_logs.iter().zip([&a, &b]) {
        let named = |profile: &Profile, log: &EventLog| -> Vec<(u64, EventKind, String)> {
            let table = &profile.function_table;
            let name = |e: &Event| table[e.function as usize].name.clone();
            log.events
                .iter()
                .map(|e| (e.ts_ns, e.kind, name(e)))
                .collect()
        };
        assert_eq!(
            named(&merged, log),
            named(input, &input.event_logs[0]),
            "{}",
            log.group
        );
        assert!(!log.events.is_empty());
    }

    // The merged profile archives like any other.
    assert_eq!(read_bytes(&bytes_of(&merged)).unwrap(), merged);
}

#[test]
fn call_count_sums_per_function_across_runs() {
    let a = real_profile(TraceType::CallCount, REAL);
    let b = real_profile(TraceType::CallCount, REAL);
    let merged = archive::merge(&[a, b]).unwrap();
    let calls = |name| {
        let f = merged.function(name).unwrap();
        assert_eq!(f.entries.len(), 1);
        assert_eq!(f.entries[0].group, Group::All);
        f.entries[0].calls
    };
    assert_eq!(calls("leaf"), 12);
    assert_eq!(calls("branch"), 6);
    assert_eq!(merged.meta.runs.len(), 2);
}

#[test]
fn mixed_trace_types_are_an_error_naming_both() {
    let count = Profile::empty(TraceType::CallCount);
    let time = Profile::empty(TraceType::CallTime);
    let err = archive::merge(&[count.clone(), count.clone(), time]).unwrap_err();
    assert_eq!(
        err,
        MergeError::MixedTypes {
            first: TraceType::CallCount,
            other: TraceType::CallTime,
            index: 2,
            first_kind: "a call_count trace profile".to_owned(),
            other_kind: "a call_time trace profile".to_owned(),
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("call_count") && text.contains("call_time"),
        "{text}"
    );
    assert!(text.contains("input 3"), "{text}");
    assert_eq!(archive::merge(&[]).unwrap_err(), MergeError::Empty);
}

/// A call-time profile of one run, on node 1, with a call tree of `paths` (each a list of
/// function names, outermost first) in which process `<1.0.1>` spent `ns` on each.
fn tree_profile(table: &[&str], paths: &[&[&str]], ns: u64) -> Profile {
    let pid = Pid::from_parts(1, 0, 1);
    let function_table: Vec<Function> = table
        .iter()
        .map(|name| function("app", name, 0, 1))
        .collect();
    let mut nodes: Vec<PathNode> = Vec::new();
    let mut entries = Vec::new();
    for path in paths {
        let mut parent = None;
        for name in *path {
            let f = table
                .iter()
                .position(|n| n == name)
                .expect("a path names functions of the table") as u32;
            let at = match nodes
                .iter()
                .position(|n| n.parent == parent && n.function == f)
            {
                Some(at) => at,
                None => {
                    nodes.push(PathNode {
                        parent,
                        function: f,
                    });
                    nodes.len() - 1
                }
            };
            parent = Some(at as u32);
        }
        entries.push(path_entry(
            Group::Process(pid),
            parent.expect("a path is not empty"),
            1,
            ns,
        ));
    }
    let mut profile = Profile::empty(TraceType::CallTime);
    profile.function_table = function_table;
    profile.call_tree = CallTree { nodes, entries };
    profile.processes = vec![process(pid, None, WORKER_CALL, 0)];
    profile
}

/// A call path as its functions' names, with its entries' (pid, ns).
type NamedPath = (Vec<String>, Vec<(Pid, u64)>);

/// Each path of `profile` as names, with its entries' (pid, ns).
fn paths(profile: &Profile) -> Vec<NamedPath> {
    let tree = &profile.call_tree;
    (0..tree.nodes.len() as u32)
        .map(|node| {
            let names = tree
                .stack(node)
                .into_iter()
                .map(|f| profile.function_table[f as usize].name.clone())
                .collect();
            let figures = tree
                .entries
                .iter()
                .filter(|e| e.node == node)
                .map(|e| match e.group {
                    Group::Process(pid) => (pid, e.measurement),
                    Group::All => panic!("call_time has no `all`"),
                })
                .collect();
            (names, figures)
        })
        .collect()
}

#[test]
fn call_paths_that_runs_share_are_one_node() {
    let a = tree_profile(&["main", "parse"], &[&["main", "parse"]], 10);
    let b = tree_profile(
        &["parse", "main", "write"],
        &[&["main", "parse"], &["main", "write"]],
        20,
    );
    let merged = archive::merge(&[a, b]).unwrap();
    let names: Vec<&str> = merged
        .function_table
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["main", "parse", "write"]);
    let first = Pid::from_parts(1, 0, 1);
    let second = merged.processes[1].pid;
    assert_ne!(first, second);
    assert_eq!(
        paths(&merged),
        vec![
            (vec!["main".to_owned()], vec![]),
            (
                vec!["main".to_owned(), "parse".to_owned()],
                vec![(first, 10), (second, 20)]
            ),
            (
                vec!["main".to_owned(), "write".to_owned()],
                vec![(second, 20)]
            ),
        ]
    );
    // Parents come before their children, and entries by process then path.
    let tree = &merged.call_tree;
    assert!(
        tree.nodes
            .iter()
            .enumerate()
            .all(|(i, n)| n.parent.is_none_or(|p| (p as usize) < i))
    );
    assert!(tree.entries.is_sorted_by_key(|e| (e.group, e.node)));
}

#[test]
fn percentiles_after_a_merge_are_a_calls_weighted_choice() {
    let f = function("app", "handle", 1, 3);
    let with = |calls, p50_ns, p90_ns, p99_ns, max_ns| {
        let mut p = Profile::empty(TraceType::CallTime);
        p.percentiles = vec![Percentiles {
            group: Group::All,
            function: f.clone(),
            calls,
            p50_ns,
            p90_ns,
            p99_ns,
            max_ns,
        }];
        p
    };
    let merged = archive::merge(&[with(100, 10, 20, 30, 40), with(300, 50, 60, 70, 90)]).unwrap();
    assert_eq!(merged.percentiles.len(), 1);
    let p = &merged.percentiles[0];
    assert_eq!((p.calls, p.max_ns), (400, 90));
    assert_eq!((p.p50_ns, p.p90_ns, p.p99_ns), (50, 60, 70));

    let merged = archive::merge(&[with(900, 10, 20, 30, 40), with(100, 50, 60, 70, 90)]).unwrap();
    let p = &merged.percentiles[0];
    assert_eq!(
        (p.calls, p.p50_ns, p.p90_ns, p.p99_ns, p.max_ns),
        (1000, 10, 20, 70, 90)
    );
}

#[test]
fn merging_one_profile_returns_it_unchanged() {
    let profile = fixture_profile();
    assert_eq!(
        archive::merge(std::slice::from_ref(&profile)).unwrap(),
        profile
    );
    assert_eq!(Merger::new(profile.clone()).finish(), profile);
}

#[test]
fn a_merger_adds_one_input_at_a_time_and_goes_on_after_a_refused_one() {
    let input = |node: u32| {
        let mut p = fixture_profile();
        p.meta.runs.truncate(1);
        p.processes.retain(|r| r.run == 0);
        let pid = Pid::from_parts(node, 0, 1);
        p.processes[0].pid = pid;
        p
    };
    let all = [input(1), input(1), input(7)];
    let mut merger = Merger::new(all[0].clone());
    merger.add(all[1].clone()).unwrap();
    let mut bad = input(1);
    bad.processes[0].run = 4;
    let err = merger.add(bad).unwrap_err();
    assert!(
        matches!(&err, MergeError::Inconsistent { index: 2, what } if what.contains("run 4")),
        "{err}"
    );
    assert!(merger.add(Profile::empty(TraceType::CallMemory)).is_err());
    merger.add(all[2].clone()).unwrap();
    assert_eq!(merger.inputs(), 3);
    let merged = merger.finish();
    assert_eq!(merged, archive::merge(&all).unwrap());
    assert_eq!(merged.meta.runs.len(), 3);
    // Three runs, each on its own nodes: the first keeps 1 (and 2, which its pids name).
    let nodes: Vec<&Vec<u32>> = merged.meta.runs.iter().map(|r| &r.nodes).collect();
    assert_eq!(nodes[0], &vec![1, 2]);
    let mut every: Vec<u32> = nodes.iter().flat_map(|n| n.iter().copied()).collect();
    let len = every.len();
    every.sort_unstable();
    every.dedup();
    assert_eq!(every.len(), len, "no node is in two runs: {nodes:?}");
}

#[test]
fn inconsistent_inputs_are_refused_naming_what_is_wrong() {
    let mut p = fixture_profile();
    p.call_tree.nodes[1].function = 99;
    let err = archive::merge(&[fixture_profile(), p]).unwrap_err();
    assert!(
        matches!(&err, MergeError::Inconsistent { index: 1, what } if what.contains("function 99")),
        "{err}"
    );
    assert!(
        err.to_string().starts_with("cannot merge input 2:"),
        "{err}"
    );

    // The fixture's events name functions beyond its table: fine to archive, not to merge.
    let err = archive::merge(&[fixture_profile(), fixture_profile_with_events()]).unwrap_err();
    assert!(
        matches!(&err, MergeError::Inconsistent { index: 1, what }
            if what.contains("an event of <2.1.3> names function 4294967295")),
        "{err}"
    );
}

/// A log as (group, its events' times and function names, dropped).
type NamedLog<'a> = (Group, Vec<(u64, &'a str)>, u64);

#[test]
fn event_logs_of_every_input_are_kept_renumbered_and_remapped() {
    use EventKind::{Enter, Leave};
    let mut a = tree_profile(&["main", "parse"], &[&["main", "parse"]], 10);
    let worker = Pid::from_parts(1, 0, 1);
    a.event_logs = vec![EventLog {
        group: Group::Process(worker),
        events: vec![
            event(10, 0, Enter),
            event(12, 1, Enter),
            event(15, 1, Leave),
            event(20, 0, Leave),
        ],
        dropped: 0,
    }];
    let mut b = tree_profile(
        &["parse", "main", "write"],
        &[&["main", "parse"], &["main", "write"]],
        20,
    );
    // b's worker, and a process of another node that has a log but no figures.
    let idle = Pid::from_parts(3, 9, 0);
    b.event_logs = vec![
        EventLog {
            group: Group::Process(idle),
            events: vec![event(7, 2, Enter)],
            dropped: 40,
        },
        EventLog {
            group: Group::Process(worker),
            events: vec![event(1, 1, Enter), event(2, 2, Enter), event(3, 2, Leave)],
            dropped: 1,
        },
    ];
    let merged = archive::merge(&[a.clone(), b]).unwrap();
    let names: Vec<&str> = merged
        .function_table
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["main", "parse", "write"]);
    let second = merged.processes[1].pid;
    assert_ne!(second, worker);
    assert_eq!(second.node(), merged.meta.runs[1].nodes[0]);
    let named: Vec<NamedLog<'_>> = merged
        .event_logs
        .iter()
        .map(|l| {
            let events = l
                .events
                .iter()
                .map(|e| (e.ts_ns, names[e.function as usize]))
                .collect();
            (l.group, events, l.dropped)
        })
        .collect();
    let idle_now = named[2].0;
    let Group::Process(idle_pid) = idle_now else {
        panic!("a log of a process: {idle_now}");
    };
    assert_eq!((idle_pid.index(), idle_pid.serial()), (9, 0));
    assert_ne!(idle_pid.node(), 1, "a node of the first run");
    assert_ne!(idle_pid.node(), second.node(), "b's two nodes stay two");
    assert!(merged.meta.runs[1].nodes.contains(&idle_pid.node()));
    assert_eq!(
        named,
        [
            (
                Group::Process(worker),
                vec![(10, "main"), (12, "parse"), (15, "parse"), (20, "main")],
                0
            ),
            (
                Group::Process(second),
                vec![(1, "main"), (2, "write"), (3, "write")],
                1
            ),
            (idle_now, vec![(7, "write")], 40),
        ]
    );
    assert_eq!(
        merged.event_logs[0], a.event_logs[0],
        "the first input's as it was"
    );
    assert_eq!(read_bytes(&bytes_of(&merged)).unwrap(), merged);
}

/// A sampled stack as its frames' names (a traced one as `module::name/arity`).
fn stack_of(p: &Profile, stack: Option<u32>) -> Vec<String> {
    let set = &p.samples;
    stack
        .map(|s| set.frames_of(s))
        .unwrap_or_default()
        .into_iter()
        .map(|f| set.frame_name(&p.function_table, f))
        .collect()
}

/// The samples' weight per run, process index (its node changes in a merge) and stack.
fn weights(p: &Profile) -> std::collections::BTreeMap<(u32, Option<u32>, Vec<String>), f64> {
    let mut out = std::collections::BTreeMap::new();
    for s in &p.samples.samples {
        let run = p.samples.sources[s.source as usize].run;
        let key = (run, s.pid.map(Pid::index), stack_of(p, s.stack));
        *out.entry(key).or_insert(0.0) += s.weight;
    }
    out
}

/// `weights` of a profile whose runs come `by` after the first in a merge.
fn runs_shifted(
    weights: std::collections::BTreeMap<(u32, Option<u32>, Vec<String>), f64>,
    by: u32,
) -> std::collections::BTreeMap<(u32, Option<u32>, Vec<String>), f64> {
    weights
        .into_iter()
        .map(|((run, pid, stack), w)| ((run + by, pid, stack), w))
        .collect()
}

/// Whether the perf events sampled kernel mode too survives the archive (a bit added to the
/// mechanism's code; an archive without it, as every one written before, read user mode only).
#[test]
fn whether_kernel_mode_was_sampled_survives_the_archive() {
    let mut p = sampled_profile(1, &[(0, &["app::main"], 1.0)]);
    let thread = ThreadCoverage::new(10_000_000, 10_000_000, 1);
    let mut cpu = CpuCoverage::new(CpuSource::PerfEvents, None, 100, vec![(0, thread)]);
    cpu.kernel = true;
    p.samples.sources[0].cpu = Some(cpu);
    let back = read_bytes(&bytes_of(&p)).unwrap();
    assert_eq!(back, p);
    let truth = back.samples.cpu_truth().expect("the figures");
    assert!(
        truth.summary[0].contains("user and kernel mode"),
        "{}",
        truth.summary[0]
    );
}

/// Merged CPU profiles keep each source's figures, their threads renumbered as their samples'
/// are; the truth of one rate sums their threads (a run's threads are not another's), and
/// survives the archive. A source on the fallback merged with one on perf events: the line
/// says the fallback, and why.
#[test]
fn merged_cpu_figures_keep_each_run_s_threads_and_sum_them() {
    const MS: u64 = 1_000_000;
    let with = |node: u32, thread: ThreadCoverage, mechanism: CpuSource, why: Option<&str>| {
        let mut p = sampled_profile(node, &[(0, &["app::main"], 1.0)]);
        let why = why.map(str::to_owned);
        p.samples.sources[0].cpu = Some(CpuCoverage::new(mechanism, why, 100, vec![(0, thread)]));
        p
    };
    let perf = CpuSource::PerfEvents;
    let a = with(1, ThreadCoverage::new(300 * MS, 290 * MS, 29), perf, None);
    let b = with(2, ThreadCoverage::new(100 * MS, 30 * MS, 3), perf, None);
    let merged = archive::merge(&[a.clone(), b.clone()]).unwrap();
    let set = &merged.samples;
    assert_eq!(set.sources[0].cpu, a.samples.sources[0].cpu);
    let b_rows = &set.sources[1].cpu.as_ref().expect("b's figures").threads;
    assert_eq!(b_rows.len(), 1);
    assert_eq!(b_rows[0].0, 1, "b's thread is the merged set's second");
    assert_eq!(
        b_rows[0].1,
        b.samples.sources[0].cpu.as_ref().unwrap().threads[0].1
    );
    assert_eq!(set.samples[1].thread, Some(1), "as its sample's");
    let truth = set.cpu_truth().expect("the figures");
    assert_eq!(truth.figures.len(), 1, "one rate, one line");
    let f = &truth.figures[0];
    assert_eq!(
        (f.mechanism, f.cpu_ns, f.sampled_ns, f.samples),
        (perf, 400 * MS, 320 * MS, 32)
    );
    let names: Vec<&str> = f.threads.iter().map(|t| t.thread.as_str()).collect();
    assert_eq!(names, ["node-worker/1001", "node-worker/1002"]);
    assert_eq!(truth.warnings.len(), 2, "{:#?}", truth.warnings);
    assert!(truth.warnings[0].starts_with("the samples stand for 80.0% of"));
    assert!(
        truth.warnings[1].starts_with("thread node-worker/1002's samples stand for 30.0%"),
        "{}",
        truth.warnings[1]
    );
    assert_eq!(read_bytes(&bytes_of(&merged)).unwrap(), merged);

    let c = with(
        3,
        ThreadCoverage::new(100 * MS, 95 * MS, 10),
        CpuSource::Timers,
        Some("refused"),
    );
    let merged = archive::merge(&[a, c]).unwrap();
    let truth = merged.samples.cpu_truth().unwrap();
    assert_eq!(truth.figures[0].mechanism, CpuSource::Timers);
    assert!(
        truth.summary[0].starts_with("CPU samples by per-thread CPU timers"),
        "{}",
        truth.summary[0]
    );
    assert!(truth.summary[0].ends_with("(fallback: refused)"));
}

#[test]
fn sample_runs_merge_with_their_sources_frames_and_stacks_united() {
    let a = sampled_profile(
        1,
        &[
            (0, &["app::main", "app::parse"], 1.0),
            (0, &["app::main", "memcpy"], 2.0),
            (1, &["app::main"], 1.0),
        ],
    );
    let b = sampled_profile(
        1,
        &[
            (0, &["app::write", "memcpy"], 0.5),
            (2, &["app::main", "app::parse"], 3.0),
        ],
    );
    let merged = archive::merge(&[a.clone(), b.clone()]).unwrap();
    let set = &merged.samples;
    // Sources appended: b's of the second run, on the node its processes moved to.
    assert_eq!(merged.meta.runs[1].nodes.len(), 1);
    let b_node = merged.meta.runs[1].nodes[0];
    assert_ne!(b_node, 1);
    assert_eq!(
        set.sources,
        [
            a.samples.sources[0].clone(),
            SampleSource {
                run: 1,
                node: b_node,
                ..b.samples.sources[0].clone()
            }
        ]
    );
    // Frames united (main, parse, memcpy, write), and stacks (main, main;parse, main;memcpy,
    // write, write;memcpy).
    assert_eq!(set.frames.len(), 4, "{:?}", set.frames);
    assert_eq!(set.stacks.len(), 5, "{:?}", set.stacks);
    assert_eq!(merged.function_table.len(), 3);
    // Samples: a's as they were, then b's, in b's process numbers, thread and source.
    assert_eq!(set.samples[..3], a.samples.samples[..]);
    for (s, of_b) in set.samples[3..].iter().zip(&b.samples.samples) {
        assert_eq!(s.source, 1);
        assert_eq!(s.thread, Some(1));
        let pid = s.pid.expect("a process");
        let was = of_b.pid.expect("a process");
        assert_eq!(
            (pid.node(), pid.index(), pid.serial()),
            (b_node, was.index(), 0)
        );
        assert_eq!((s.time_ns, s.weight), (of_b.time_ns, of_b.weight));
        assert!(merged.processes.iter().any(|p| p.pid == pid));
    }
    let mut expected = weights(&a);
    expected.extend(runs_shifted(weights(&b), 1));
    assert_eq!(weights(&merged), expected);
    // Threads and mappings come with their source.
    assert_eq!(
        set.threads,
        [
            a.samples.threads[0].clone(),
            SampleThread {
                source: 1,
                ..b.samples.threads[0].clone()
            }
        ]
    );
    assert_eq!(set.mappings.len(), 2);
    assert_eq!(set.mappings[1].source, 1);
    assert_eq!(read_bytes(&bytes_of(&merged)).unwrap(), merged);

    // Merging the fixture with itself: twice its weight, and each frame and stack once.
    let fixture = fixture_profile_with_samples();
    let twice = archive::merge(&[fixture.clone(), fixture.clone()]).unwrap();
    assert_eq!(twice.samples.frames, fixture.samples.frames);
    assert_eq!(twice.samples.stacks, fixture.samples.stacks);
    assert_eq!(
        twice.samples.samples.len(),
        2 * fixture.samples.samples.len()
    );
    assert_eq!(read_bytes(&bytes_of(&twice)).unwrap(), twice);
}

#[test]
fn a_sample_run_merged_with_a_trace_run_keeps_both() {
    let trace = tree_profile(&["main", "parse"], &[&["main", "parse"], &["main"]], 10);
    // Its function table is write, main, parse: main and parse are the trace run's.
    let sampled = Profile {
        trace_type: TraceType::CallTime,
        ..sampled_profile(
            1,
            &[
                (3, &["app::write"], 1.0),
                (0, &["app::main", "app::parse"], 2.0),
                (3, &["app::main", "app::parse", "memcpy"], 1.0),
            ],
        )
    };
    for (inputs, at) in [
        ([trace.clone(), sampled.clone()], 1u32),
        ([sampled.clone(), trace.clone()], 0),
    ] {
        let merged = archive::merge(&inputs).unwrap();
        // The trace part as without the samples.
        let mut without = inputs.clone();
        without[at as usize].samples = SampleSet::default();
        let expected = archive::merge(&without).unwrap();
        assert_eq!(
            Profile {
                samples: SampleSet::default(),
                ..merged.clone()
            },
            expected
        );
        assert_eq!(paths(&merged), paths(&expected));
        // The samples as they were, in the merged function table.
        assert_eq!(weights(&merged), runs_shifted(weights(&sampled), at));
        if at == 0 {
            assert_eq!(merged.samples, sampled.samples);
        } else {
            let traced: Vec<Option<u32>> =
                merged.samples.frames.iter().map(|f| f.function).collect();
            assert_eq!(traced, [Some(2), Some(0), Some(1), None]);
        }
        assert_eq!(read_bytes(&bytes_of(&merged)).unwrap(), merged);
    }
}

#[test]
fn inconsistent_sample_sets_are_refused_naming_what_is_wrong() {
    for (p, what) in broken_sample_sets() {
        let err = archive::merge(&[fixture_profile(), p]).unwrap_err();
        assert!(
            matches!(&err, MergeError::Inconsistent { index: 1, what: w } if w.contains(what)),
            "{err} should say {what:?}"
        );
    }
    let mut p = fixture_profile_with_samples();
    p.samples.sources[1].run = 2;
    let err = archive::merge(&[p, fixture_profile()]).unwrap_err();
    assert!(
        err.to_string()
            .contains("sample source 1 belongs to run 2, but the profile has 2 run(s)"),
        "{err}"
    );
}

// --- Properties ---

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["app", "", "src/app.rs", "ünï", "🚀"]).prop_map(str::to_owned),
        any::<String>(),
    ]
}

fn pid() -> impl Strategy<Value = Pid> {
    (
        prop_oneof![0..3u32, any::<u32>()],
        prop_oneof![0..3u32, any::<u32>()],
        any::<u32>(),
    )
        .prop_map(|(n, i, s)| Pid::from_parts(n, i, s))
}

fn group() -> impl Strategy<Value = Group> {
    prop_oneof![Just(Group::All), pid().prop_map(Group::Process)]
}

fn a_function() -> impl Strategy<Value = Function> {
    (text(), text(), any::<u8>(), text(), any::<u32>()).prop_map(
        |(module, name, arity, file, line)| Function {
            module,
            name,
            arity,
            file,
            line,
        },
    )
}

fn figures() -> impl Strategy<Value = (u64, u64, u64, u64)> {
    let n = || prop_oneof![0..1000u64, any::<u64>()];
    (n(), n(), n(), n())
}

fn profile() -> impl Strategy<Value = Profile> {
    let trace_type = prop::sample::select(TYPES.to_vec());
    let entry =
        (group(), figures()).prop_map(|(group, (calls, measurement, bytes, blocks))| Entry {
            group,
            calls,
            measurement,
            bytes,
            blocks,
        });
    let trace = (a_function(), prop::collection::vec(entry, 0..4))
        .prop_map(|(function, entries)| FunctionTrace { function, entries });
    let percentiles = (group(), a_function(), figures(), any::<u64>()).prop_map(
        |(group, function, (calls, p50_ns, p90_ns, p99_ns), max_ns)| Percentiles {
            group,
            function,
            calls,
            p50_ns,
            p90_ns,
            p99_ns,
            max_ns,
        },
    );
    let process = (pid(), prop::option::of(text()), text(), any::<u32>()).prop_map(
        |(pid, name, initial_call, run)| ProcessRecord {
            pid,
            name,
            initial_call,
            run,
        },
    );
    let node = (prop::option::of(any::<u32>()), any::<u32>())
        .prop_map(|(parent, function)| PathNode { parent, function });
    let path_entry = (group(), any::<u32>(), figures()).prop_map(
        |(group, node, (calls, measurement, bytes, blocks))| PathEntry {
            group,
            node,
            calls,
            measurement,
            bytes,
            blocks,
        },
    );
    let an_event = (
        prop_oneof![0..10_000u64, any::<u64>()],
        prop_oneof![0..4u32, any::<u32>()],
        any::<bool>(),
    )
        .prop_map(|(ts_ns, function, enter)| Event {
            ts_ns,
            function,
            kind: if enter {
                EventKind::Enter
            } else {
                EventKind::Leave
            },
        });
    let event_log = (
        group(),
        prop::collection::vec(an_event, 0..6),
        prop_oneof![Just(0u64), any::<u64>()],
    )
        .prop_map(|(group, mut events, dropped)| {
            // Mostly oldest first, as a real log is; sometimes as drawn.
            if events.first().is_some_and(|e| e.ts_ns % 3 != 0) {
                events.sort_by_key(|e| e.ts_ns);
            }
            EventLog {
                group,
                events,
                dropped,
            }
        });
    let run = (
        text(),
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(any::<u32>(), 0..3),
        proptest::option::of(any::<(u64, u64, u32, u32)>()),
    )
        .prop_map(
            |(program, started_unix_ms, duration_ns, nodes, run_queue)| Run {
                program,
                started_unix_ms,
                duration_ns,
                nodes,
                run_queue: run_queue.map(|(ran_ns, waited_ns, threads, exited)| {
                    runtime::trace::SnapshotRunQueue {
                        ran_ns,
                        waited_ns,
                        threads,
                        exited,
                    }
                }),
            },
        );
    (
        trace_type,
        prop::collection::vec(trace, 0..4),
        prop::collection::vec(percentiles, 0..3),
        prop::collection::vec(process, 0..4),
        prop::collection::vec(a_function(), 0..4),
        prop::collection::vec(node, 0..4),
        prop::collection::vec(path_entry, 0..4),
        prop::collection::vec(run, 0..3),
        prop::collection::vec(event_log, 0..3),
        sample_set(),
    )
        .prop_map(
            |(
                trace_type,
                functions,
                mut percentiles,
                processes,
                function_table,
                nodes,
                entries,
                runs,
                event_logs,
                samples,
            )| {
                // In group order, as profiles keep them.
                percentiles.sort_by_key(|p| p.group);
                let samples = fit_samples(samples, function_table.len());
                Profile {
                    trace_type,
                    functions,
                    percentiles,
                    processes,
                    function_table,
                    call_tree: CallTree { nodes, entries },
                    event_logs,
                    meta: Meta { runs },
                    outside_in_tables: false,
                    samples,
                }
            },
        )
}

/// A weight: a usual one, or any finite number.
fn weight() -> impl Strategy<Value = f64> {
    use prop::num::f64::{NORMAL, SUBNORMAL, ZERO};
    prop_oneof![
        prop::sample::select(vec![1.0, 2.0, 0.5, 1.0 / 3.0, 0.0, -0.0, 1e300]),
        NORMAL | SUBNORMAL | ZERO,
    ]
}

/// Sample sets whose references may point anywhere: [`fit_samples`] makes them point at
/// what is there.
fn sample_set() -> impl Strategy<Value = SampleSet> {
    let source = (
        (
            any::<u32>(),
            prop_oneof![0..3u32, any::<u32>()],
            any::<bool>(),
        ),
        (
            any::<u32>(),
            weight(),
            any::<bool>(),
            any::<u64>(),
            any::<u64>(),
            prop_oneof![Just(0u64), any::<u64>()],
        ),
    )
        .prop_map(
            |((run, node, wall), (hz, dropped, native_walked, duration_ns, capacity, lost))| {
                SampleSource {
                    run,
                    node,
                    sampler: if wall {
                        SamplerKind::Wall
                    } else {
                        SamplerKind::Cpu
                    },
                    hz,
                    alloc_rate: None,
                    dropped,
                    lost_frees: lost,
                    before_sampling: 0,
                    native_walked,
                    duration_ns,
                    capacity,
                    cpu: None,
                }
            },
        );
    let a_frame = (
        prop::option::of(any::<u32>()),
        text(),
        prop::option::of(text()),
        prop::option::of(any::<u32>()),
        prop_oneof![Just(0u64), any::<u64>()],
    )
        .prop_map(|(function, name, file, line, address)| SampleFrame {
            function,
            name,
            file,
            line,
            address,
        });
    let stack = (prop::option::of(any::<u32>()), any::<u32>())
        .prop_map(|(parent, frame)| SampleStack { parent, frame });
    let state = prop::sample::select(WaitState::ALL.to_vec());
    let a_sample = (
        (
            any::<u32>(),
            prop::option::of(pid()),
            prop::option::of(any::<u32>()),
        ),
        (prop_oneof![0..10_000u64, any::<u64>()], weight()),
        (
            prop::option::of(any::<u32>()),
            prop::option::of(state),
            prop_oneof![Just(0u32), any::<u32>()],
        ),
    )
        .prop_map(
            |((source, pid, thread), (time_ns, weight), (stack, state, mailbox_len))| {
                SampleRecord {
                    source,
                    pid,
                    thread,
                    time_ns,
                    weight,
                    stack,
                    state,
                    mailbox_len,
                    callee: None,
                    size: 0,
                    live: false,
                }
            },
        );
    let thread = (any::<u32>(), any::<i32>(), prop::option::of(text()))
        .prop_map(|(source, tid, name)| SampleThread { source, tid, name });
    let mapping = (
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        text(),
    )
        .prop_map(|(source, start, limit, offset, file)| SampleMapping {
            source,
            start,
            limit,
            offset,
            file,
        });
    (
        prop::collection::vec(source, 0..3),
        prop::collection::vec(a_frame, 0..5),
        prop::collection::vec(stack, 0..7),
        prop::collection::vec(a_sample, 0..10),
        prop::collection::vec(thread, 0..3),
        prop::collection::vec(mapping, 0..3),
    )
        .prop_map(
            |(sources, frames, stacks, samples, threads, mappings)| SampleSet {
                sources,
                frames,
                stacks,
                samples,
                threads,
                mappings,
            },
        )
}

/// `set` with every reference pointing at what is there (and a parent before its child), in
/// a profile whose function table has `functions` functions.
fn fit_samples(mut set: SampleSet, functions: usize) -> SampleSet {
    let within = |i: u32, len: usize| i % len.max(1) as u32;
    let sources = set.sources.len();
    if sources == 0 {
        set.samples.clear();
        set.threads.clear();
        set.mappings.clear();
    }
    for f in &mut set.frames {
        f.function = f
            .function
            .filter(|_| functions > 0)
            .map(|i| within(i, functions));
    }
    let frames = set.frames.len();
    if frames == 0 {
        set.stacks.clear();
    }
    for (i, s) in set.stacks.iter_mut().enumerate() {
        s.parent = s.parent.filter(|_| i > 0).map(|p| within(p, i));
        s.frame = within(s.frame, frames);
    }
    let (stacks, threads) = (set.stacks.len(), set.threads.len());
    for t in &mut set.threads {
        t.source = within(t.source, sources);
    }
    for m in &mut set.mappings {
        m.source = within(m.source, sources);
    }
    for s in &mut set.samples {
        s.source = within(s.source, sources);
        s.thread = s.thread.filter(|_| threads > 0).map(|t| within(t, threads));
        s.stack = s.stack.filter(|_| stacks > 0).map(|t| within(t, stacks));
    }
    set
}

/// `p` made consistent enough to merge (processes of its runs, call paths of its function
/// table, parents before children), with figures small enough that sums do not saturate.
fn consistent(mut p: Profile) -> Profile {
    let runs = p.meta.runs.len().max(1) as u32;
    for r in &mut p.processes {
        r.run %= runs;
    }
    let table = p.function_table.len() as u32;
    if table == 0 {
        p.call_tree.nodes.clear();
    }
    for (i, n) in p.call_tree.nodes.iter_mut().enumerate() {
        n.parent = n.parent.filter(|_| i > 0).map(|q| q % i as u32);
        n.function %= table.max(1);
    }
    let nodes = p.call_tree.nodes.len() as u32;
    if nodes == 0 {
        p.call_tree.entries.clear();
    }
    for e in &mut p.call_tree.entries {
        e.node %= nodes.max(1);
        e.measurement %= 1 << 40;
    }
    for f in &mut p.functions {
        for e in &mut f.entries {
            e.measurement %= 1 << 40;
        }
    }
    for log in &mut p.event_logs {
        if table == 0 {
            log.events.clear();
        }
        for e in &mut log.events {
            e.function %= table.max(1);
        }
    }
    for s in &mut p.samples.sources {
        s.run %= runs;
    }
    // Eighths below a million: sums exact in any order.
    for s in &mut p.samples.samples {
        s.weight = (s.weight.abs() % 1e6 * 8.0).floor() / 8.0;
    }
    p
}

/// A log as what a merge must keep of it: its group (with the node number set to 0 where
/// `forget_node`), dropped count, and events as (time, entered, function).
type KeptLog = (Group, u64, Vec<(u64, bool, Function)>);

/// The logs of `p` as [`KeptLog`]s, sorted, of those where `which` holds.
fn kept_logs(p: &Profile, forget_node: bool, which: impl Fn(&EventLog) -> bool) -> Vec<KeptLog> {
    let mut out: Vec<KeptLog> = p
        .event_logs
        .iter()
        .filter(|l| which(l))
        .map(|l| {
            let group = match l.group {
                Group::Process(pid) if forget_node => {
                    Group::Process(Pid::from_parts(0, pid.index(), pid.serial()))
                }
                g => g,
            };
            let events = l
                .events
                .iter()
                .map(|e| {
                    let f = p.function_table[e.function as usize].clone();
                    (e.ts_ns, e.kind == EventKind::Enter, f)
                })
                .collect();
            (group, l.dropped, events)
        })
        .collect();
    out.sort();
    out
}

/// The sum of the measurements of the flat entries and of the call-path entries.
fn measured(p: &Profile) -> (u128, u128) {
    let flat = p.functions.iter().flat_map(|f| &f.entries);
    (
        flat.map(|e| u128::from(e.measurement)).sum(),
        p.call_tree
            .entries
            .iter()
            .map(|e| u128::from(e.measurement))
            .sum(),
    )
}

/// Every node number `p` names.
fn node_numbers(p: &Profile) -> std::collections::BTreeSet<u32> {
    let flat = p
        .functions
        .iter()
        .flat_map(|f| f.entries.iter().map(|e| e.group));
    let tree = p.call_tree.entries.iter().map(|e| e.group);
    let logs = p.event_logs.iter().map(|l| l.group);
    flat.chain(tree)
        .chain(logs)
        .filter_map(|g| match g {
            Group::Process(pid) => Some(pid.node()),
            Group::All => None,
        })
        .chain(p.processes.iter().map(|r| r.pid.node()))
        .chain(p.meta.runs.iter().flat_map(|r| r.nodes.iter().copied()))
        .chain(p.samples.sources.iter().map(|s| s.node))
        .chain(
            p.samples
                .samples
                .iter()
                .filter_map(|s| s.pid.map(Pid::node)),
        )
        .collect()
}

/// A frame as what it is: its function (not its index), else its name, file, line and
/// address.
type FrameValue = (Option<Function>, String, Option<String>, Option<u32>, u64);

/// Frame `frame` of `p`'s samples as a [`FrameValue`].
fn frame_value(p: &Profile, frame: u32) -> FrameValue {
    let f = &p.samples.frames[frame as usize];
    (
        f.function.map(|i| p.function_table[i as usize].clone()),
        f.name.clone(),
        f.file.clone(),
        f.line,
        f.address,
    )
}

/// The weight of `p`'s samples per input (`of_b` says which), process (its node forgotten
/// for b's, whose nodes a merge changes) and stack (as its frames' values).
type Weights = std::collections::BTreeMap<(bool, Option<(u32, u32, u32)>, Vec<FrameValue>), f64>;

fn weights_by_stack(p: &Profile, of_b: impl Fn(&SampleRecord) -> bool) -> Weights {
    let mut out = Weights::new();
    for s in &p.samples.samples {
        let b = of_b(s);
        let pid = s
            .pid
            .map(|pid| (if b { 0 } else { pid.node() }, pid.index(), pid.serial()));
        let stack = s
            .stack
            .map(|st| p.samples.frames_of(st))
            .unwrap_or_default()
            .into_iter()
            .map(|f| frame_value(p, f))
            .collect();
        *out.entry((b, pid, stack)).or_insert(0.0) += s.weight;
    }
    out
}

proptest! {
    #[test]
    fn merging_two_arbitrary_profiles_keeps_every_figure_and_every_run_apart(
        a in profile(),
        b in profile(),
    ) {
        let mut a = consistent(a);
        let mut b = Profile { trace_type: a.trace_type, ..consistent(b) };
        for log in &mut a.event_logs {
            log.dropped &= !1;
        }
        for log in &mut b.event_logs {
            log.dropped |= 1;
        }
        let merged = archive::merge(&[a.clone(), b.clone()]).unwrap();
        let (fa, ta) = measured(&a);
        let (fb, tb) = measured(&b);
        // A flat input's figures become paths of one frame when the other has a call tree.
        let trees = [&a, &b].map(|p| !p.call_tree.is_empty());
        let as_paths = |p: &Profile, flat| if trees.contains(&true) && p.call_tree.is_empty() {
            flat
        } else {
            0
        };
        prop_assert_eq!(
            measured(&merged),
            (fa + fb, ta + tb + as_paths(&a, fa) + as_paths(&b, fb))
        );
        let runs_a = a.meta.runs.len().max(1);
        prop_assert_eq!(merged.meta.runs.len(), runs_a + b.meta.runs.len().max(1));
        prop_assert_eq!(merged.processes.len(), a.processes.len() + b.processes.len());
        let of_a = node_numbers(&a);
        for r in merged.processes.iter().filter(|r| r.run as usize >= runs_a) {
            prop_assert!(!of_a.contains(&r.pid.node()), "{:?} collides with {:?}", r, of_a);
        }
        for run in &merged.meta.runs[runs_a..] {
            prop_assert!(run.nodes.iter().all(|n| !of_a.contains(n)));
        }
        let tree = &merged.call_tree;
        for (i, n) in tree.nodes.iter().enumerate() {
            prop_assert!(n.parent.is_none_or(|q| (q as usize) < i));
            prop_assert!((n.function as usize) < merged.function_table.len());
        }
        prop_assert!(tree.entries.iter().all(|e| (e.node as usize) < tree.nodes.len()));
        // Event logs: a's as they were (the first input keeps its nodes), b's on fresh nodes,
        // each naming the same functions. An even dropped count marks a's, an odd one b's.
        prop_assert_eq!(merged.event_logs.len(), a.event_logs.len() + b.event_logs.len());
        prop_assert!(merged.event_logs.is_sorted_by_key(|l| l.group));
        let of_b = |l: &EventLog| l.dropped % 2 == 1;
        prop_assert_eq!(
            kept_logs(&merged, false, |l| !of_b(l)),
            kept_logs(&a, false, |_| true)
        );
        prop_assert_eq!(
            kept_logs(&merged, true, of_b),
            kept_logs(&b, true, |_| true)
        );
        for log in merged.event_logs.iter().filter(|l| of_b(l)) {
            if let Group::Process(pid) = log.group {
                prop_assert!(!of_a.contains(&pid.node()), "{} collides with {:?}", pid, of_a);
            }
        }
        // Samples: a's, then b's with their sources, threads and mappings after a's, their
        // runs after a's and their processes on fresh nodes; the weight of each process and
        // stack that of a + b.
        let (sa, sb, sm) = (&a.samples, &b.samples, &merged.samples);
        prop_assert_eq!(sm.samples.len(), sa.samples.len() + sb.samples.len());
        prop_assert_eq!(sm.sources.len(), sa.sources.len() + sb.sources.len());
        prop_assert_eq!(sm.threads.len(), sa.threads.len() + sb.threads.len());
        prop_assert_eq!(sm.mappings.len(), sa.mappings.len() + sb.mappings.len());
        prop_assert_eq!(&sm.sources[..sa.sources.len()], &sa.sources[..]);
        for s in &sm.sources[sa.sources.len()..] {
            prop_assert!(s.run as usize >= runs_a);
            prop_assert!(!of_a.contains(&s.node), "{:?} collides with {:?}", s, of_a);
        }
        let of_b = |s: &SampleRecord| s.source as usize >= sa.sources.len();
        for pid in sm.samples.iter().filter(|s| of_b(s)).filter_map(|s| s.pid) {
            prop_assert!(!of_a.contains(&pid.node()), "{} collides with {:?}", pid, of_a);
        }
        prop_assert_eq!(sm.total_weight(), sa.total_weight() + sb.total_weight());
        let mut expected = weights_by_stack(&a, |_| false);
        expected.extend(weights_by_stack(&b, |_| true));
        prop_assert_eq!(weights_by_stack(&merged, of_b), expected);
        // United: each frame and stack once, every reference in range.
        let frames: std::collections::HashSet<&SampleFrame> = sm.frames.iter().collect();
        prop_assert_eq!(frames.len(), sm.frames.len());
        let stacks: std::collections::HashSet<(Option<u32>, u32)> =
            sm.stacks.iter().map(|s| (s.parent, s.frame)).collect();
        prop_assert_eq!(stacks.len(), sm.stacks.len());
        for (i, s) in sm.stacks.iter().enumerate() {
            prop_assert!(s.parent.is_none_or(|q| (q as usize) < i));
            prop_assert!((s.frame as usize) < sm.frames.len());
        }
        for f in &sm.frames {
            prop_assert!(f.function.is_none_or(|i| (i as usize) < merged.function_table.len()));
        }
        for s in &sm.samples {
            prop_assert!(s.stack.is_none_or(|i| (i as usize) < sm.stacks.len()));
            prop_assert!(s.thread.is_none_or(|i| (i as usize) < sm.threads.len()));
        }
        prop_assert_eq!(read_bytes(&bytes_of(&merged)).unwrap(), merged);
    }

    #[test]
    fn arbitrary_profiles_read_back_equal(profile in profile()) {
        let bytes = bytes_of(&profile);
        prop_assert_eq!(read_bytes(&bytes).unwrap(), profile);
    }

    #[test]
    fn arbitrary_profiles_read_back_equal_from_json(profile in profile()) {
        let text = serde_json::to_string(&profile).unwrap();
        let back: Profile = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, profile);
    }

    #[test]
    fn random_bytes_after_the_magic_are_an_error(
        rest in prop::collection::vec(any::<u8>(), 0..600),
        with_version in any::<bool>(),
    ) {
        let mut bytes = archive::MAGIC.to_vec();
        if with_version {
            bytes.extend_from_slice(&archive::VERSION.to_le_bytes());
        }
        bytes.extend_from_slice(&rest);
        let err = read_bytes(&bytes).unwrap_err();
        if let Some(at) = err.offset() {
            prop_assert!(at <= bytes.len() as u64);
        }
    }

    /// Damage behind good checksums (what a buggy writer would make) reaches the decoder:
    /// it answers, with an offset inside the input when it refuses, and never panics.
    #[test]
    fn damage_behind_good_checksums_never_panics(
        changes in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<u8>()), 1..6),
        with_samples in any::<bool>(),
    ) {
        let fixture = if with_samples {
            fixture_profile_with_samples()
        } else {
            fixture_profile_with_events()
        };
        let mut parts = sections(&bytes_of(&fixture));
        for (section, byte, value) in changes {
            let payload = &mut section.get_mut(&mut parts).1;
            if !payload.is_empty() {
                *byte.get_mut(payload.as_mut_slice()) = value;
            }
        }
        let bytes = frame(&parts);
        if let Err(err) = read_bytes(&bytes)
            && let Some(at) = err.offset()
        {
            prop_assert!(at <= bytes.len() as u64, "{}", err);
        }
    }
}

#[test]
fn a_string_named_over_and_over_cannot_exhaust_memory() {
    let mut meta = Vec::new();
    leb128::write::unsigned(&mut meta, 0).unwrap();
    // One string of 1 MiB, then 20,000 functions naming it three times each: a 1 MiB file
    // that would take 60 GB as a profile.
    let big = vec![b'x'; 1 << 20];
    let mut strings = Vec::new();
    leb128::write::unsigned(&mut strings, big.len() as u64).unwrap();
    strings.extend_from_slice(&big);
    let mut functions = Vec::new();
    for _ in 0..20_000 {
        functions.extend_from_slice(&[0, 0, 0, 0, 1]); // module, name, arity, file, line
    }
    let bytes = frame(&[(1, meta), (2, strings), (3, functions)]);
    let err = read_bytes(&bytes).unwrap_err();
    match &err {
        ArchiveError::Corrupt { at, what } => {
            assert!(*at <= bytes.len() as u64);
            assert!(what.contains("64 times"), "{what}");
            assert!(what.contains("bytes of strings"), "{what}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn what_the_writer_writes_the_reader_reads_functions_sharing_a_long_module() {
    // 40 functions of one module whose name takes 1 MiB, each traced and in the function
    // table: a 1 MiB archive whose records name 120 MiB of strings.
    let module = "m".repeat(1 << 20);
    let mut profile = Profile::empty(TraceType::CallCount);
    for i in 0..40 {
        let f = function_in("src/m.rs", &module, &format!("f{i}"), 0, i);
        profile.function_table.push(f.clone());
        profile.functions.push(FunctionTrace {
            function: f,
            entries: vec![entry(Group::All, 1, 1)],
        });
    }
    let bytes = bytes_of(&profile);
    assert!(bytes.len() < 2 << 20, "{}", bytes.len());
    let read = read_bytes(&bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read, profile);
}

#[test]
fn a_string_named_too_often_is_refused_in_one_plain_sentence() {
    let mut meta = Vec::new();
    leb128::write::unsigned(&mut meta, 0).unwrap();
    let big = vec![b'x'; 1 << 20];
    let mut strings = Vec::new();
    leb128::write::unsigned(&mut strings, big.len() as u64).unwrap();
    strings.extend_from_slice(&big);
    let functions = [0, 0, 0, 0, 1].repeat(2_000);
    let bytes = frame(&[(1, meta), (2, strings), (3, functions)]);
    let err = read_bytes(&bytes).unwrap_err().to_string();
    assert!(!err.contains("  "), "a run of spaces: {err:?}");
}

/// An archive of one function and a chain of `depth` call paths, each extending the one
/// before, with an entry on the deepest.
fn chain(depth: u32) -> Profile {
    let pid = Pid::from_parts(1, 0, 1);
    let mut profile = Profile::empty(TraceType::CallTime);
    profile.function_table = vec![function("app", "recurse", 1, 1)];
    profile.call_tree.nodes = (0..depth)
        .map(|i| PathNode {
            parent: i.checked_sub(1),
            function: 0,
        })
        .collect();
    profile.call_tree.entries = vec![path_entry(Group::Process(pid), depth - 1, 1, 10)];
    profile.processes = vec![process(pid, None, WORKER_CALL, 0)];
    profile
}

#[test]
fn a_call_path_deeper_than_the_limit_is_refused_at_its_offset() {
    let limit = archive::MAX_PATH_DEPTH;
    assert_eq!(read_bytes(&bytes_of(&chain(limit))).unwrap(), chain(limit));

    // Written by hand (the writer refuses it): a chain of 100,000 paths.
    let deep = chain(100_000);
    let mut meta = Vec::new();
    leb128::write::unsigned(&mut meta, 1).unwrap();
    let mut strings = Vec::new();
    for s in ["app", "recurse", "src/app.rs"] {
        leb128::write::unsigned(&mut strings, s.len() as u64).unwrap();
        strings.extend_from_slice(s.as_bytes());
    }
    let mut nodes = Vec::new();
    for n in &deep.call_tree.nodes {
        leb128::write::unsigned(&mut nodes, n.parent.map_or(0, |p| u64::from(p) + 1)).unwrap();
        leb128::write::unsigned(&mut nodes, n.function.into()).unwrap();
    }
    let mut sections = vec![
        (1, meta),
        (2, strings),
        (3, vec![0, 1, 1, 2, 1]),
        (4, vec![0]),
    ];
    // Where the TREE_NODES section starts: where END starts without it.
    let nodes_at = frame(&sections).len() as u64 - 10;
    sections.push((10, nodes));
    let bytes = frame(&sections);
    let err = read_bytes(&bytes).unwrap_err();
    match &err {
        ArchiveError::Corrupt { at, what } => {
            assert!(*at > nodes_at && *at < bytes.len() as u64, "{at}: {what}");
            assert!(what.contains(&format!("{limit}")), "{what}");
            assert!(what.contains("deep"), "{what}");
        }
        other => panic!("{other}"),
    }

    // The writer refuses it too, before writing anything.
    let mut out = Vec::new();
    let err = archive::write(&chain(limit + 1), &mut out).unwrap_err();
    assert!(out.is_empty());
    assert!(err.to_string().contains("deep"), "{err}");
}

#[test]
fn a_flat_run_merged_with_a_call_tree_run_keeps_its_figures_as_one_frame_per_function() {
    let tree = tree_profile(&["main", "parse"], &[&["main", "parse"], &["main"]], 10);
    let pid = Pid::from_parts(1, 0, 1);
    let mut flat = Profile::empty(TraceType::CallTime);
    flat.functions = vec![
        FunctionTrace {
            function: function("app", "parse", 0, 1),
            entries: vec![entry(Group::Process(pid), 4, 400)],
        },
        FunctionTrace {
            function: function("app", "flat_only", 0, 1),
            entries: vec![entry(Group::Process(pid), 2, 200)],
        },
    ];
    flat.processes = vec![process(pid, None, WORKER_CALL, 0)];
    for inputs in [[tree.clone(), flat.clone()], [flat.clone(), tree.clone()]] {
        let merged = archive::merge(&inputs).unwrap();
        let stacks = tprof::export::stacks(&merged);
        let measured: u64 = stacks.iter().map(|s| s.measurement).sum();
        assert_eq!(
            measured,
            10 + 10 + 400 + 200,
            "every run's figures are drawn"
        );
        // The flat run's process is the one on the other node.
        let flat_groups: Vec<Group> = stacks
            .iter()
            .filter(|s| s.measurement >= 200)
            .map(|s| s.group)
            .collect();
        assert_eq!(flat_groups.len(), 2);
        assert!(flat_groups.iter().all(|&g| g == flat_groups[0]));
        let mut frames: Vec<Vec<&str>> = stacks
            .iter()
            .filter(|s| s.group == flat_groups[0])
            .map(|s| s.frames.iter().map(|f| f.name.as_str()).collect())
            .collect();
        frames.sort();
        assert_eq!(frames, [["flat_only"], ["parse"]]);
    }
    // Flat runs alone stay flat.
    let merged = archive::merge(&[flat.clone(), flat]).unwrap();
    assert!(merged.call_tree.is_empty());
    assert!(merged.function_table.is_empty());
}
