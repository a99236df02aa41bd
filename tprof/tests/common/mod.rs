//! What tprof's integration tests share: a traced workload to take real profiles of, and the
//! parts of hand-built profiles.
//!
//! Each test file is a crate of its own and includes this module with `mod common;`; none uses
//! all of it.

#![allow(dead_code)]

pub(crate) mod browser;
pub(crate) mod samples;
pub(crate) mod svg;

use runtime::trace::TracePattern;
use runtime::{Down, Pid, receive, spawn_monitor};
use tprof::{
    Entry, Function, Group, PathEntry, ProcessRecord, Profile, ProfileOptions, Report, TraceType,
};

/// Counts what each process allocates, for call_memory profiles.
#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// The module of the traced workload: [`leaf`], [`branch`] and [`two_processes`].
pub(crate) const MODULE: &str = "fixture";

/// The three trace types.
pub(crate) const TYPES: [TraceType; 3] = [
    TraceType::CallCount,
    TraceType::CallTime,
    TraceType::CallMemory,
];

/// Allocates `n` words.
#[runtime::traced(module = "fixture")]
pub(crate) fn leaf(n: u64) -> Vec<u64> {
    (0..n).collect()
}

/// Calls [`leaf`] twice: `n` and `2n` words.
#[runtime::traced(module = "fixture")]
pub(crate) fn branch(n: u64) -> usize {
    leaf(n).len() + leaf(n * 2).len()
}

/// `branch(8)` three times: 72, from 6 calls of [`leaf`] (24 words per call of `branch`).
pub(crate) fn branches() -> usize {
    let mut total = 0;
    for _ in 0..3 {
        total += branch(8);
    }
    total
}

/// A child calling `branch(4)` once, waited for; then [`branches`] (72).
#[runtime::traced(module = "fixture")]
pub(crate) async fn two_processes() -> usize {
    let (pid, _) = spawn_monitor(async {
        branch(4);
    })
    .expect("the child is spawned");
    let down: Down = receive().await;
    assert_eq!(down.pid, pid);
    branches()
}

/// What [`real_profile`] profiles and asks for; every switch is off in [`Real::FLAT`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Real {
    /// Percentiles, where the trace type is call_time.
    pub(crate) percentiles: bool,
    /// A child process too: the profiled function is [`two_processes`], not [`branches`].
    pub(crate) child: bool,
    /// Call paths as well as the flat figures.
    pub(crate) call_tree: bool,
    /// Event logs (call_time and call_memory).
    pub(crate) events: bool,
}

impl Real {
    /// One process calling [`branches`], flat figures only, no percentiles.
    pub(crate) const FLAT: Real = Real {
        percentiles: false,
        child: false,
        call_tree: false,
        events: false,
    };
}

/// The options of a real profile of `trace_type` as `real` says: the fixture's module only,
/// the profile returned.
pub(crate) fn options(trace_type: TraceType, real: Real) -> ProfileOptions {
    ProfileOptions::new()
        .trace_type(trace_type)
        .percentiles(real.percentiles && trace_type == TraceType::CallTime)
        .call_tree(real.call_tree)
        .event_log(real.events)
        .pattern(TracePattern::module(MODULE))
        .report(Report::Return)
}

/// A real profile of `trace_type`: a process calling `branch` three times (and, with
/// `real.child`, a child of it calling it once). Checks that the work returned 72 and that
/// something was profiled, in two processes where there is a child and the groups are
/// processes.
pub(crate) fn real_profile(trace_type: TraceType, real: Real) -> Profile {
    let options = options(trace_type, real);
    let outcome = if real.child {
        tprof::profile(two_processes, options)
    } else {
        tprof::profile(|| async { branches() }, options)
    }
    .expect("the profiled function runs");
    assert_eq!(outcome.result, Ok(72));
    let profile = outcome.profile;
    assert!(!profile.is_empty());
    if real.child && trace_type != TraceType::CallCount {
        assert_eq!(profile.pids().len(), 2, "the process and its child");
    }
    profile
}

/// A function of `module`, in the file the module's path names (`app::parse`:
/// `src/app/parse.rs`).
pub(crate) fn function(module: &str, name: &str, arity: u8, line: u32) -> Function {
    let file = format!("src/{}.rs", module.replace("::", "/"));
    function_in(&file, module, name, arity, line)
}

/// A function of `module` in `file`.
pub(crate) fn function_in(file: &str, module: &str, name: &str, arity: u8, line: u32) -> Function {
    Function {
        module: module.to_owned(),
        name: name.to_owned(),
        arity,
        file: file.to_owned(),
        line,
    }
}

/// Flat figures of `group`, with no bytes or blocks.
pub(crate) fn entry(group: Group, calls: u64, measurement: u64) -> Entry {
    Entry {
        group,
        calls,
        measurement,
        bytes: 0,
        blocks: 0,
    }
}

/// The figures of `group` on path `node`, with no bytes or blocks.
pub(crate) fn path_entry(group: Group, node: u32, calls: u64, measurement: u64) -> PathEntry {
    PathEntry {
        group,
        node,
        calls,
        measurement,
        bytes: 0,
        blocks: 0,
    }
}

/// The record of process `pid` of run `run`.
pub(crate) fn process(pid: Pid, name: Option<&str>, initial_call: &str, run: u32) -> ProcessRecord {
    ProcessRecord {
        pid,
        name: name.map(str::to_owned),
        initial_call: initial_call.to_owned(),
        run,
    }
}

/// The pid written `text` (`<0.5.1>`).
pub(crate) fn pid(text: &str) -> Pid {
    text.parse().expect("a pid")
}

/// Each stack of `profile` as its frames' names joined by `;`, outermost first.
pub(crate) fn stack_names(profile: &Profile) -> Vec<String> {
    tprof::export::stacks(profile)
        .iter()
        .map(|s| {
            s.frames
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect()
}

/// A sample run of call counts on node `node`, one CPU source at 100 Hz with a thread and a
/// mapping, and a sample for each `(index, stack, weight)` of `samples`: of process
/// `<node.index.0>`, 1 ms after the one before, its stack's frames outermost first — a name of
/// the form `app::f` a traced function of module `app`, any other a native frame (all at one
/// address, so that runs that name it have the same frame).
pub(crate) fn sampled_profile(node: u32, samples: &[(u32, &[&str], f64)]) -> Profile {
    use std::collections::HashMap;
    use tprof::samples::{
        SampleFrame, SampleMapping, SampleRecord, SampleSet, SampleSource, SampleStack,
        SampleThread, SamplerKind,
    };

    let mut profile = Profile::empty(TraceType::CallCount);
    let mut set = SampleSet {
        sources: vec![SampleSource {
            run: 0,
            node,
            sampler: SamplerKind::Cpu,
            hz: 100,
            alloc_rate: None,
            dropped: 0.0,
            lost_frees: 0,
            before_sampling: 0,
            native_walked: true,
            duration_ns: 1_000_000 * samples.len() as u64,
            capacity: 1 << 16,
            cpu: None,
        }],
        threads: vec![SampleThread {
            source: 0,
            tid: 1_000 + node as i32,
            name: Some("node-worker".to_owned()),
        }],
        mappings: vec![SampleMapping {
            source: 0,
            start: 0x1000,
            limit: 0x9000,
            offset: 0,
            file: "/usr/bin/app".to_owned(),
        }],
        ..SampleSet::default()
    };
    let mut frames: HashMap<&str, u32> = HashMap::new();
    let mut stacks: HashMap<(Option<u32>, u32), u32> = HashMap::new();
    let mut pids = std::collections::BTreeSet::new();
    for (i, &(index, names, weight)) in samples.iter().enumerate() {
        let mut stack = None;
        for &name in names {
            let frame = *frames.entry(name).or_insert_with(|| {
                let frame = match name.strip_prefix("app::") {
                    Some(traced) => {
                        profile.function_table.push(function("app", traced, 0, 1));
                        SampleFrame {
                            function: Some(profile.function_table.len() as u32 - 1),
                            name: String::new(),
                            file: None,
                            line: None,
                            address: 0,
                        }
                    }
                    None => SampleFrame {
                        function: None,
                        name: name.to_owned(),
                        file: Some("src/native.rs".to_owned()),
                        line: Some(7),
                        address: 0x4000,
                    },
                };
                set.frames.push(frame);
                set.frames.len() as u32 - 1
            });
            let next = set.stacks.len() as u32;
            let id = *stacks.entry((stack, frame)).or_insert(next);
            if id == next {
                set.stacks.push(SampleStack {
                    parent: stack,
                    frame,
                });
            }
            stack = Some(id);
        }
        let pid = Pid::from_parts(node, index, 0);
        pids.insert(pid);
        set.samples.push(SampleRecord {
            source: 0,
            pid: Some(pid),
            thread: Some(0),
            time_ns: 1_000_000 * i as u64,
            weight,
            stack,
            state: None,
            mailbox_len: 0,
            callee: None,
            size: 0,
            live: false,
        });
    }
    profile.processes = pids
        .into_iter()
        .map(|pid| process(pid, None, "app::worker/1", 0))
        .collect();
    profile.meta.runs = vec![tprof::Run {
        program: "sampled".to_owned(),
        started_unix_ms: 0,
        duration_ns: 1_000_000 * samples.len() as u64,
        nodes: vec![node],
        run_queue: None,
    }];
    profile.samples = set;
    profile
}

/// The `pprof` export of `profile`, gunzipped and decoded.
pub(crate) fn decode_pprof(profile: &Profile) -> tprof::export::pprof::Profile {
    let mut gz = Vec::new();
    tprof::export::write(tprof::export::Format::Pprof, profile, &mut gz).expect("exported");
    assert_eq!(&gz[..2], b"\x1f\x8b", "gzip");
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw)
        .expect("gzip data");
    <tprof::export::pprof::Profile as prost::Message>::decode(&raw[..]).expect("a profile")
}

/// The JSON embedded in an `html` export.
pub(crate) fn embedded(html: &str) -> serde_json::Value {
    let open = "<script type=\"application/json\" id=\"tprof-data\">";
    let start = html.find(open).expect("the data element") + open.len();
    let end = start + html[start..].find("</script>").expect("its end");
    let data: serde_json::Value =
        serde_json::from_str(&html[start..end]).expect("the embedded data is JSON");
    expanded(data)
}

/// The page's compact data (arrays, paths and initial calls by index; see the `html`
/// export's documentation) as objects with named fields: processes with their `initial_call`
/// and `label`, stacks with their `frames`, rows and percentiles with their figures named.
pub(crate) fn expanded(mut data: serde_json::Value) -> serde_json::Value {
    use serde_json::{Value, json};
    let n = |v: &Value| v.as_u64().expect("an index or a figure");
    let calls: Vec<Value> = data["initial_calls"]
        .as_array()
        .expect("initial calls")
        .clone();
    let paths: Vec<(i64, u64)> = data["paths"]
        .as_array()
        .expect("paths")
        .iter()
        .map(|p| (p[0].as_i64().expect("a parent"), n(&p[1])))
        .collect();
    let frames = |mut at: i64| {
        let mut out = Vec::new();
        while at >= 0 {
            let (parent, function) = paths[at as usize];
            out.push(function);
            at = parent;
        }
        out.reverse();
        out
    };
    let processes: Vec<Value> = data["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| {
            json!({"id": p[0], "label": if p[1].is_null() { p[0].clone() } else { p[1].clone() },
                   "name": p[2], "initial_call": calls[n(&p[3]) as usize], "run": p[4]})
        })
        .collect();
    let stacks: Vec<Value> = data["stacks"]
        .as_array()
        .expect("stacks")
        .iter()
        .map(|s| {
            json!({"process": s[0], "frames": frames(s[1].as_i64().expect("a path")), "calls": s[2],
                   "value": s[3], "bytes": s[4], "blocks": s[5]})
        })
        .collect();
    let rows: Vec<Value> = data["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let a = r.as_array().expect("a row");
            if a.len() == 8 {
                json!({"process": a[0], "function": a[1], "calls": a[2], "value": a[3],
                       "bytes": a[5], "blocks": a[6], "total": a[7]})
            } else {
                json!({"process": a[0], "function": a[1], "calls": a[2], "value": a[3],
                       "words": a[4], "bytes": a[5], "blocks": a[6]})
            }
        })
        .collect();
    let percentiles: Vec<Value> = data["percentiles"]
        .as_array()
        .expect("percentiles")
        .iter()
        .map(|q| {
            json!({"process": q[0], "function": q[1], "calls": q[2], "p50_ns": q[3],
                   "p90_ns": q[4], "p99_ns": q[5], "max_ns": q[6]})
        })
        .collect();
    data["processes"] = Value::Array(processes);
    data["stacks"] = Value::Array(stacks);
    data["rows"] = Value::Array(rows);
    data["percentiles"] = Value::Array(percentiles);
    data
}

/// A run whose program's threads ran `ran_ns` and waited `waited_ns` on the OS's run queue
/// ([`tprof::Run::run_queue`]), its other fields empty.
pub(crate) fn run_with_waits(ran_ns: u64, waited_ns: u64, threads: u32) -> tprof::Run {
    tprof::Run {
        run_queue: Some(runtime::trace::SnapshotRunQueue {
            ran_ns,
            waited_ns,
            threads,
            exited: 0,
        }),
        ..tprof::Run::default()
    }
}
