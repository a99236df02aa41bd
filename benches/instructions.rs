//! Instruction counts of the traced call and the counting allocator (issue 33), under
//! callgrind through gungraun: one run per benchmark, the same count whatever else the machine
//! does, where the criterion benches' times move 30–500 % on a shared machine.
//!
//! This binary installs the counting allocator (as `traced_call` does); its twin
//! `instructions_plain` keeps the system's, for the allocator's baseline and the message rows.
//! Rows (each at `n` and `2n` operations, see `instructions/shared.rs`):
//!
//! - `traced_call`: a loop of calls from inside a process on a current-thread node to
//!   `untraced` (the baseline), and to `traced_fn` disabled, under one and two call_count
//!   sessions, under call_time and under call_memory (the sessions trace the timing process),
//!   and under a CPU sample session open at 1 Hz (`sampled`: what its frame costs per call).
//! - `allocation`: a box of 8 bytes allocated and freed in a process, through the counting
//!   allocator (its baseline, the system allocator, is `instructions_plain`'s row).
//! - `gen_server_traced`: a gen_server call round trip with every runtime function traced
//!   under call_time (patterns `runtime::_` and `runtime::gen_server::_`, both processes
//!   measured), untraced, and sampled (a CPU sample session open at 1 Hz tracing every
//!   function of the processes it samples, as `tprof run` does: what an open session adds per
//!   round trip beside its samples), and the same with a wall sample session (`sampled_wall`).
//!
//! Run all of it, the runner's install included, with `benches/instructions/run`; it ends with
//! `instructions_table`, which prints each row per operation beside its goal.

// gungraun's macros generate public modules, constants and functions without documentation.
#![allow(missing_docs)]

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};
use runtime::Node;
use runtime::gen_server::Timeout;
use runtime::sample::{SampleOptions, SampleSession, Sampler};
use runtime::trace::{ProcessSpec, TracePattern, TraceSession, TraceTypes};

// Its tokio side and spawn count are `instructions_plain`'s.
#[allow(dead_code)]
#[path = "instructions/shared.rs"]
mod shared;
// The round trips, written once for this bench and `messaging`; the actors and loops this
// binary does not run are left unused here.
#[allow(dead_code)]
#[path = "messaging/workloads.rs"]
mod workloads;

use shared::{CALLS, ROUND_TRIPS, alloc_free, allocations, in_node, node};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

#[path = "traced_fns.rs"]
mod traced_fns;

use traced_fns::{traced_fn, traced_fn_pattern, untraced};

/// A node, the sessions a traced-call row measures with, and what its loop calls.
struct Calls {
    node: Node,
    /// Held so that the row's sessions measure while its loop runs.
    _sessions: Vec<TraceSession>,
    _sample: Option<SampleSession>,
    call: fn(u64) -> u64,
    iters: u64,
}

fn call_loop(node: &Node, call: fn(u64) -> u64, iters: u64) -> u64 {
    in_node(node, async move {
        let mut acc = 0u64;
        for i in 0..iters {
            acc = acc.wrapping_add(call(i));
        }
        acc
    })
}

/// A session of `types` tracing `traced_fn` and every process spawned from now on.
fn session(node: &Node, types: TraceTypes) -> TraceSession {
    let session = node.trace_session_with(types).expect("session");
    session.set_pattern(&traced_fn_pattern()).expect("pattern");
    session.enable_trace(ProcessSpec::New, true).expect("flags");
    session
}

/// A sample session of `sampler` at 1 Hz on `node`, tracing the functions of `pattern` in
/// every process spawned from now on (with every function, what `tprof run` opens).
fn sample_session(node: &Node, sampler: Sampler, pattern: &TracePattern) -> SampleSession {
    let session = node
        .sample_session(SampleOptions::new().sampler(sampler).hz(1))
        .expect("sample session");
    session.trace().set_pattern(pattern).expect("pattern");
    session
        .trace()
        .enable_trace(ProcessSpec::New, true)
        .expect("flags");
    session
}

/// The setup of a traced-call row: `row` names what is measured.
fn calls(row: &str, iters: u64) -> Calls {
    let node = node();
    let (call, sessions): (fn(u64) -> u64, Vec<TraceSession>) = match row {
        "untraced" => (untraced, vec![]),
        "disabled" => (traced_fn, vec![]),
        "call_count" => (traced_fn, vec![session(&node, TraceTypes::CALL_COUNT)]),
        "call_count_2" => (
            traced_fn,
            vec![
                session(&node, TraceTypes::CALL_COUNT),
                session(&node, TraceTypes::CALL_COUNT),
            ],
        ),
        "call_time" => (traced_fn, vec![session(&node, TraceTypes::CALL_TIME)]),
        "call_memory" => (traced_fn, vec![session(&node, TraceTypes::CALL_MEMORY)]),
        "sampled" => (traced_fn, vec![]),
        other => panic!("no traced-call row {other}"),
    };
    // What an open CPU sample session adds per traced call beside its samples (issue 29,
    // point 4).
    let sample =
        (row == "sampled").then(|| sample_session(&node, Sampler::Cpu, &traced_fn_pattern()));
    black_box(call_loop(&node, call, 1_000));
    Calls {
        node,
        _sessions: sessions,
        _sample: sample,
        call,
        iters,
    }
}

#[library_benchmark]
#[bench::untraced_n(calls("untraced", CALLS))]
#[bench::untraced_2n(calls("untraced", 2 * CALLS))]
#[bench::disabled_n(calls("disabled", CALLS))]
#[bench::disabled_2n(calls("disabled", 2 * CALLS))]
#[bench::call_count_n(calls("call_count", CALLS))]
#[bench::call_count_2n(calls("call_count", 2 * CALLS))]
#[bench::call_count_2_n(calls("call_count_2", CALLS))]
#[bench::call_count_2_2n(calls("call_count_2", 2 * CALLS))]
#[bench::call_time_n(calls("call_time", CALLS))]
#[bench::call_time_2n(calls("call_time", 2 * CALLS))]
#[bench::call_memory_n(calls("call_memory", CALLS))]
#[bench::call_memory_2n(calls("call_memory", 2 * CALLS))]
#[bench::sampled_n(calls("sampled", CALLS))]
#[bench::sampled_2n(calls("sampled", 2 * CALLS))]
fn traced_call(calls: Calls) -> Calls {
    black_box(call_loop(&calls.node, calls.call, calls.iters));
    calls
}

#[library_benchmark]
#[bench::counting_n(allocations(CALLS))]
#[bench::counting_2n(allocations(2 * CALLS))]
fn allocation((node, iters): (Node, u64)) -> Node {
    alloc_free(&node, iters);
    node
}

/// The session a gen_server row measures under, held while its loop runs.
#[allow(dead_code)]
enum Held {
    Trace(TraceSession),
    Sample(SampleSession),
}

/// The setup of a gen_server row: untraced; every runtime function traced under call_time; or
/// sampled, by a CPU (`sampled`) or wall (`sampled_wall`) sample session at 1 Hz that traces
/// every function of the processes it samples (what `tprof run` opens), so that the row counts
/// what an open sample session adds per round trip beside its samples (issue 29, point 4).
fn servers(row: &str, iters: u64) -> (Node, Option<Held>, u64) {
    let node = node();
    let session = match row {
        "untraced" => None,
        "sampled" | "sampled_wall" => {
            let sampler = if row == "sampled" {
                Sampler::Cpu
            } else {
                Sampler::Wall
            };
            Some(Held::Sample(sample_session(
                &node,
                sampler,
                &TracePattern::all(),
            )))
        }
        "call_time" => {
            let session = node
                .trace_session_with(TraceTypes::CALL_TIME)
                .expect("session");
            for pattern in [
                TracePattern::module("runtime"),
                TracePattern::module("runtime::gen_server"),
            ] {
                session.set_pattern(&pattern).expect("pattern");
            }
            session.enable_trace(ProcessSpec::New, true).expect("flags");
            Some(Held::Trace(session))
        }
        other => panic!("no gen_server row {other}"),
    };
    black_box(in_node(
        &node,
        workloads::runtime_call(100, Timeout::Infinity),
    ));
    (node, session, iters)
}

#[library_benchmark]
#[bench::untraced_n(servers("untraced", ROUND_TRIPS))]
#[bench::untraced_2n(servers("untraced", 2 * ROUND_TRIPS))]
#[bench::call_time_n(servers("call_time", ROUND_TRIPS))]
#[bench::call_time_2n(servers("call_time", 2 * ROUND_TRIPS))]
#[bench::sampled_n(servers("sampled", ROUND_TRIPS))]
#[bench::sampled_2n(servers("sampled", 2 * ROUND_TRIPS))]
#[bench::sampled_wall_n(servers("sampled_wall", ROUND_TRIPS))]
#[bench::sampled_wall_2n(servers("sampled_wall", 2 * ROUND_TRIPS))]
fn gen_server_traced((node, session, iters): (Node, Option<Held>, u64)) -> (Node, Option<Held>) {
    black_box(in_node(
        &node,
        workloads::runtime_call(iters, Timeout::Infinity),
    ));
    (node, session)
}

library_benchmark_group!(name = hot_paths; benchmarks = traced_call, allocation, gen_server_traced);

main!(library_benchmark_groups = hot_paths);
