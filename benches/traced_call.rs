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
//!
//! The overhead of a row is its time minus `untraced`'s, in ns per call. The session masks are
//! written at run time (by `set_pattern`), so nothing is folded away at compile time.
//!
//! Run with `cargo bench --bench traced_call`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use runtime::Node;
use runtime::trace::TracePattern;

#[inline(never)]
fn untraced(x: u64) -> u64 {
    black_box(x).wrapping_mul(31).rotate_left(7)
}

#[runtime::traced]
#[inline(never)]
fn traced_fn(x: u64) -> u64 {
    black_box(x).wrapping_mul(31).rotate_left(7)
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

fn bench(c: &mut Criterion) {
    let node = Node::builder().current_thread().build().expect("node");
    let pattern = TracePattern::function(module_path!(), "traced_fn");
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
    group.finish();
    black_box(one.call_counts().len() + two.call_counts().len());
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = bench
}
criterion_main!(benches);
