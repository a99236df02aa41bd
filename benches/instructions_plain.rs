//! Instruction counts of the message path and of the allocator's baseline (issue 33), under
//! callgrind through gungraun, with the system allocator (as the `messaging` bench): the twin
//! of `instructions`, which installs the counting allocator.
//!
//! Rows (each at `n` and `2n` operations, see `instructions/shared.rs`), all on current-thread
//! schedulers, the runtime's loop in a process and the baselines' in a spawned tokio task:
//!
//! - `allocation`: a box of 8 bytes allocated and freed in a process, system allocator.
//! - `call`: a request/reply round trip: the runtime's `gen_server::call` (no timeout), tokio's
//!   mpsc + oneshot, ractor's `call`.
//! - `ping_pong`: a `u64` sent to a peer and back: the runtime's processes, tokio's two mpsc
//!   channels.
//! - `spawn_exit`: spawn a process that does nothing and receive its `Down` (the runtime);
//!   `tokio::spawn` and await the join handle (tokio).
//!
//! Run with `benches/instructions/run` (see `instructions`).

// gungraun's macros generate public modules, constants and functions without documentation.
#![allow(missing_docs)]

use gungraun::{library_benchmark, library_benchmark_group, main};
use runtime::Node;
use runtime::gen_server::Timeout;
use std::hint::black_box;
use tokio::runtime::Runtime;

#[path = "instructions/shared.rs"]
mod shared;
// The round trips, written once for this bench and `messaging`; the actors this binary does
// not run are left unused here.
#[allow(dead_code)]
#[path = "messaging/workloads.rs"]
mod workloads;

use shared::{
    CALLS, ROUND_TRIPS, SPAWNS, alloc_free, allocations, in_node, in_tokio, node, tokio_runtime,
};

#[library_benchmark]
#[bench::system_n(allocations(CALLS))]
#[bench::system_2n(allocations(2 * CALLS))]
fn allocation((node, iters): (Node, u64)) -> Node {
    alloc_free(&node, iters);
    node
}

/// Where a message row runs: a node, or a tokio runtime (the baselines).
enum On {
    Node(Node),
    Tokio(Runtime),
}

/// One message row: which workload, on what, how many operations.
struct Messages {
    row: &'static str,
    on: On,
    iters: u64,
}

/// Runs `iters` operations of `row`.
fn run(row: &'static str, on: &On, iters: u64) {
    let elapsed = match (row, on) {
        ("call/runtime", On::Node(node)) => {
            in_node(node, workloads::runtime_call(iters, Timeout::Infinity))
        }
        ("call/tokio", On::Tokio(rt)) => in_tokio(rt, workloads::tokio_call::<false>(iters)),
        ("call/ractor", On::Tokio(rt)) => in_tokio(rt, workloads::ractor_call(iters)),
        ("ping_pong/runtime", On::Node(node)) => in_node(node, workloads::runtime_ping_pong(iters)),
        ("ping_pong/tokio", On::Tokio(rt)) => in_tokio(rt, workloads::tokio_ping_pong(iters)),
        ("spawn_exit/runtime", On::Node(node)) => {
            in_node(node, workloads::runtime_spawn_exit(iters))
        }
        ("spawn_exit/tokio", On::Tokio(rt)) => in_tokio(rt, workloads::tokio_spawn_exit(iters)),
        (other, _) => panic!("no message row {other} on this scheduler"),
    };
    black_box(elapsed);
}

/// The setup of a message row: the scheduler its name asks for, warmed by a short run.
fn messages(row: &'static str, iters: u64) -> Messages {
    let on = if row.ends_with("/runtime") {
        On::Node(node())
    } else {
        On::Tokio(tokio_runtime())
    };
    run(row, &on, 100);
    Messages { row, on, iters }
}

#[library_benchmark]
#[bench::call_runtime_n(messages("call/runtime", ROUND_TRIPS))]
#[bench::call_runtime_2n(messages("call/runtime", 2 * ROUND_TRIPS))]
#[bench::call_tokio_n(messages("call/tokio", ROUND_TRIPS))]
#[bench::call_tokio_2n(messages("call/tokio", 2 * ROUND_TRIPS))]
#[bench::call_ractor_n(messages("call/ractor", ROUND_TRIPS))]
#[bench::call_ractor_2n(messages("call/ractor", 2 * ROUND_TRIPS))]
#[bench::ping_pong_runtime_n(messages("ping_pong/runtime", ROUND_TRIPS))]
#[bench::ping_pong_runtime_2n(messages("ping_pong/runtime", 2 * ROUND_TRIPS))]
#[bench::ping_pong_tokio_n(messages("ping_pong/tokio", ROUND_TRIPS))]
#[bench::ping_pong_tokio_2n(messages("ping_pong/tokio", 2 * ROUND_TRIPS))]
#[bench::spawn_exit_runtime_n(messages("spawn_exit/runtime", SPAWNS))]
#[bench::spawn_exit_runtime_2n(messages("spawn_exit/runtime", 2 * SPAWNS))]
#[bench::spawn_exit_tokio_n(messages("spawn_exit/tokio", SPAWNS))]
#[bench::spawn_exit_tokio_2n(messages("spawn_exit/tokio", 2 * SPAWNS))]
fn message(m: Messages) -> Messages {
    run(m.row, &m.on, m.iters);
    m
}

library_benchmark_group!(name = baselines; benchmarks = allocation, message);

main!(library_benchmark_groups = baselines);
