//! The cost of a traced call (issue #3), paired against the same function untraced, in the
//! same run and the same loop shape.
//!
//! Rows (`traced_call/<row>`), each timing calls made from inside a process on a
//! current-thread node:
//!
//! - `untraced`: the baseline function, no `#[traced]`.
//! - `disabled`: the same body with `#[traced]`, no session wants it (one relaxed load).
//! - `call_count_1_session`: one session of this node traces it.
//! - `call_count_2_sessions`: two sessions of this node trace it.
//! - `sample_cpu_99hz`: a sample session (the CPU sampler at 99 Hz) traces it and samples the
//!   timing process: each call keeps its frame on the traced stack, for the samples.
//! - `call_time`: a call_time session traces it and the timing process (one clock read at
//!   each entry and exit).
//! - `call_time_histograms`: call_time, also recording each call's duration (opt-in).
//! - `call_memory`: a call_memory session traces it and the timing process (the counting
//!   allocator is installed in this binary; the function allocates nothing).
//! - `call_time_call_memory`: one session measuring both.
//! - `call_time_call_tree`, `call_memory_call_tree`: `call_time` and `call_memory` in call-tree
//!   mode (`| CALL_TREE`): each call also finds its call path (parent path, callsite) in the
//!   thread's path cache and is measured into that path's accumulator. The extra cost of the
//!   tree is the row's time minus its flat row's.
//!
//! Rows whose loop calls `nested_outer`, which calls `traced_fn`: two traced calls per
//! iteration, the inner one at depth 2 (its path extends the outer call's), timed per outer
//! call:
//!
//! - `nested_untraced`: the same two calls, neither `#[traced]`.
//! - `nested_call_time`: a call_time session traces both functions and the timing process.
//! - `nested_call_time_call_tree`: the same in call-tree mode.
//!
//! A second group, `gen_server_call`, times a call round trip to a gen_server with every
//! runtime function traced: `untraced`, `call_count` (pattern `runtime::_`, `runtime::gen_server::_`
//! for one session) and `call_time` (the same, measuring both processes). It prints the traced
//! calls per round trip. Under call_time, each poll of a traced call reads the clock twice (its
//! frame's push and pop) and the start and end of a process's poll read none: a round trip
//! makes 8 reads (`call` and `receive_any`, each polled twice; counted as executed `rdtsc`
//! instructions under callgrind).
//!
//! The overhead of a row is its time minus `untraced`'s (of a `nested_` row, minus
//! `nested_untraced`'s), in ns per call. The session masks are
//! written at run time (by `set_pattern`), so nothing is folded away at compile time.
//!
//! Run with `cargo bench --bench traced_call`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use runtime::Node;
use runtime::gen_server::{self, CallReply, Caller, GenServer, Timeout};
use runtime::trace::{ProcessSpec, TracePattern, TraceSession, TraceTypes};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

#[path = "traced_fns.rs"]
mod traced_fns;

use traced_fns::{traced_fn, traced_fn_pattern, untraced};

#[inline(never)]
fn untraced_outer(x: u64) -> u64 {
    untraced(black_box(x)).wrapping_add(1)
}

#[runtime::traced]
#[inline(never)]
fn nested_outer(x: u64) -> u64 {
    traced_fn(black_box(x)).wrapping_add(1)
}

fn time_in_process(node: &Node, iters: u64, f: fn(u64) -> u64) -> Duration {
    node.run(async move {
        let start = Instant::now();
        let mut acc = 0u64;
        for i in 0..iters {
            acc = acc.wrapping_add(f(i));
        }
        black_box(acc);
        start.elapsed()
    })
    .expect("the timing process ran")
}

fn measuring(node: &Node, types: TraceTypes, patterns: &[&TracePattern]) -> TraceSession {
    let session = node.trace_session_with(types).expect("session");
    for pattern in patterns {
        session.set_pattern(pattern).expect("pattern");
    }
    session.enable_trace(ProcessSpec::New, true).expect("flags");
    session
}

/// Reads the session's figures; in call-tree mode, checks that its deepest path is `depth`
/// calls long (the rows measured what they claim). A row left out by the command line's
/// filter measured nothing: there is nothing to check.
fn check_tree(session: &TraceSession, types: TraceTypes, depth: usize) {
    let measured = black_box(session.measurements().len());
    if measured > 0 && types.contains(TraceTypes::CALL_TREE) {
        let tree = session.call_tree();
        let deepest = (0..tree.paths.len() as u32)
            .map(|p| tree.stack(p).len())
            .max();
        assert_eq!(deepest, Some(depth), "the call tree's deepest path");
    }
}

fn bench(c: &mut Criterion) {
    let node = Node::builder().current_thread().build().expect("node");
    let pattern = traced_fn_pattern();
    let mut group = c.benchmark_group("traced_call");
    group.bench_function("untraced", |b| {
        b.iter_custom(|iters| time_in_process(&node, iters, untraced))
    });
    group.bench_function("disabled", |b| {
        b.iter_custom(|iters| time_in_process(&node, iters, traced_fn))
    });
    let one = node.trace_session().expect("session");
    one.set_pattern(&pattern).expect("pattern");
    group.bench_function("call_count_1_session", |b| {
        b.iter_custom(|iters| time_in_process(&node, iters, traced_fn))
    });
    let two = node.trace_session().expect("session");
    two.set_pattern(&pattern).expect("pattern");
    group.bench_function("call_count_2_sessions", |b| {
        b.iter_custom(|iters| time_in_process(&node, iters, traced_fn))
    });
    black_box(one.call_counts().len() + two.call_counts().len());
    drop((one, two));
    // A sample session keeps the traced stack of the processes it samples (and counts their
    // calls), so that each CPU sample has its traced stack.
    #[cfg(target_os = "linux")]
    {
        let sampler = node
            .sample_session(runtime::sample::SampleOptions::new())
            .expect("sample session");
        sampler.trace().set_pattern(&pattern).expect("pattern");
        sampler
            .trace()
            .enable_trace(ProcessSpec::New, true)
            .expect("flags");
        group.bench_function("sample_cpu_99hz", |b| {
            b.iter_custom(|iters| time_in_process(&node, iters, traced_fn))
        });
        black_box(sampler.samples().samples.len());
    }
    for (row, types) in [
        ("call_time", TraceTypes::CALL_TIME),
        ("call_time_histograms", TraceTypes::CALL_TIME_HISTOGRAMS),
        ("call_memory", TraceTypes::CALL_MEMORY),
        (
            "call_time_call_memory",
            TraceTypes::CALL_TIME | TraceTypes::CALL_MEMORY,
        ),
        (
            "call_time_call_tree",
            TraceTypes::CALL_TIME | TraceTypes::CALL_TREE,
        ),
        (
            "call_memory_call_tree",
            TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE,
        ),
    ] {
        let session = measuring(&node, types, &[&pattern]);
        group.bench_function(row, |b| {
            b.iter_custom(|iters| time_in_process(&node, iters, traced_fn))
        });
        check_tree(&session, types, 1);
    }
    group.bench_function("nested_untraced", |b| {
        b.iter_custom(|iters| time_in_process(&node, iters, untraced_outer))
    });
    let outer = TracePattern::function(module_path!(), "nested_outer");
    for (row, types) in [
        ("nested_call_time", TraceTypes::CALL_TIME),
        (
            "nested_call_time_call_tree",
            TraceTypes::CALL_TIME | TraceTypes::CALL_TREE,
        ),
    ] {
        let session = measuring(&node, types, &[&outer, &pattern]);
        group.bench_function(row, |b| {
            b.iter_custom(|iters| time_in_process(&node, iters, nested_outer))
        });
        check_tree(&session, types, 2);
    }
    group.finish();
}

/// A server that answers each call with the request plus one.
struct Echo;

impl GenServer for Echo {
    type Args = ();
    type Call = u64;
    type Reply = u64;
    type Cast = ();

    async fn init((): ()) -> Result<Self, runtime::ExitReason> {
        Ok(Echo)
    }

    async fn handle_call(&mut self, n: u64, _from: &mut Caller<u64>) -> CallReply<u64> {
        CallReply::Reply(n + 1)
    }
}

fn time_calls(node: &Node, iters: u64) -> Duration {
    node.run(async move {
        let server = gen_server::start::<Echo>((), Default::default())
            .await
            .expect("server");
        let start = Instant::now();
        for i in 0..iters {
            let r = server.call(i, Timeout::Infinity).await.expect("reply");
            black_box(r);
        }
        let elapsed = start.elapsed();
        runtime::exit(server.pid(), runtime::ExitReason::Kill);
        elapsed
    })
    .expect("the timing process ran")
}

fn bench_gen_server(c: &mut Criterion) {
    let node = Node::builder().current_thread().build().expect("node");
    let patterns = [
        TracePattern::module("runtime"),
        TracePattern::module("runtime::gen_server"),
    ];
    let mut group = c.benchmark_group("gen_server_call");
    group.bench_function("untraced", |b| {
        b.iter_custom(|iters| time_calls(&node, iters))
    });
    let counting = node.trace_session().expect("session");
    for p in &patterns {
        counting.set_pattern(p).expect("pattern");
    }
    group.bench_function("call_count", |b| {
        b.iter_custom(|iters| time_calls(&node, iters))
    });
    counting.restart();
    time_calls(&node, 10_000);
    let traced_calls: u64 = counting.call_counts().iter().map(|c| c.calls).sum();
    eprintln!(
        "gen_server_call: {:.1} traced calls per round trip (call_time reads the clock twice \
         per poll of each)",
        traced_calls as f64 / 10_000.0
    );
    drop(counting);
    let timing = node
        .trace_session_with(TraceTypes::CALL_TIME)
        .expect("session");
    for p in &patterns {
        timing.set_pattern(p).expect("pattern");
    }
    timing.enable_trace(ProcessSpec::New, true).expect("flags");
    group.bench_function("call_time", |b| {
        b.iter_custom(|iters| time_calls(&node, iters))
    });
    black_box(timing.measurements().len());
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = bench, bench_gen_server
}
criterion_main!(benches);
