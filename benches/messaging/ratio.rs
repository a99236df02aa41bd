//! The `ratio` group: the targets measured as ratios, each sample timing the runtime
//! and its baseline back to back.
//!
//! The groups above time one implementation per row, one row after another. On a shared
//! machine the speed of the host drifts over seconds (this project's 2-core machines have
//! run tokio's call round trip at anywhere from 120 to 240 ns), so a ratio of two rows measured
//! a minute apart can be off by more than the margin a target leaves. Here each sample runs
//! the runtime's loop and the baseline's loop for the same number of operations, on the same
//! scheduler, one right after the other (alternating which goes first), and records the first's
//! time as a percentage of the second's: both halves of a sample see the same machine.
//!
//! Rows, `ratio/WORKLOAD/SCHEDULER` (percent of the baseline's time; lower is faster):
//!
//! - `call_vs_tokio`: `gen_server::call` with the 5 s timeout against tokio's mpsc + oneshot
//!   without one (the "call round trip ≤ 1.3× raw tokio": at most 130 %);
//! - `call_infinity_vs_tokio`: the same call with `Timeout::Infinity`;
//! - `call_vs_ractor`: the call with its timeout against ractor's `call` without one (the
//!   issue's "≤ 0.5× ractor's call": at most 50 %), the stricter comparison;
//! - `call_infinity_vs_ractor`: like for like, neither side with a timeout (ractor's
//!   `call(msg, None)` and `Timeout::Infinity`).
//! - `ping_pong_vs_tokio`: ping-pong against tokio's unbounded channels (at most 130 %);
//! - `spawn_exit_vs_tokio`: spawn + monitor + `Down` against spawn + join (at most 200 %).
//!
//! The loops are the other groups' own (same servers, same setup outside the timing).
//!
//! How criterion sees it: a [`Ratio`] measurement whose value per operation is the percentage,
//! which criterion's sampling takes for nanoseconds. A row therefore runs several times its
//! measurement time (each operation costs both loops, a few hundred nanoseconds, where the
//! value says about a hundred).

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use runtime::gen_server::Timeout;

use super::workloads::{
    CALL_TIMEOUT, ractor_call, runtime_call, runtime_ping_pong, runtime_spawn_exit, tokio_call,
    tokio_ping_pong, tokio_spawn_exit,
};
use super::{Sched, on_node, on_tokio};

pub(crate) use super::ratio_measurement::Ratio;

/// One ratio row: `ours` on a node and `base` on a tokio runtime (both built for `sched`),
/// `iters` operations each per sample.
fn row<A, AF, B, BF>(
    group: &mut criterion::BenchmarkGroup<'_, Ratio>,
    name: &str,
    sched: Sched,
    ours: A,
    base: B,
) where
    A: Fn(u64) -> AF,
    AF: Future<Output = Duration> + Send + 'static,
    B: Fn(u64) -> BF,
    BF: Future<Output = Duration> + Send + 'static,
{
    let node = sched.node();
    let rt = sched.tokio();
    let ours_first = Cell::new(true);
    group.bench_function(BenchmarkId::new(name, sched.label()), |b| {
        b.iter_custom(|iters| {
            let first = ours_first.replace(!ours_first.get());
            let (ours, base) = if first {
                let ours = on_node(&node, ours(iters));
                (ours, on_tokio(&rt, base(iters)))
            } else {
                let base = on_tokio(&rt, base(iters));
                (on_node(&node, ours(iters)), base)
            };
            let base = base.as_secs_f64().max(f64::MIN_POSITIVE);
            100.0 * iters as f64 * ours.as_secs_f64() / base
        })
    });
    drop(node);
    drop(rt);
}

/// The `ratio` group (see the module documentation).
pub(crate) fn ratios(c: &mut Criterion<Ratio>) {
    let mut group = c.benchmark_group("ratio");
    for sched in Sched::ALL {
        row(
            &mut group,
            "call_vs_tokio",
            sched,
            |iters| runtime_call(iters, Timeout::After(CALL_TIMEOUT)),
            tokio_call::<false>,
        );
        row(
            &mut group,
            "call_infinity_vs_tokio",
            sched,
            |iters| runtime_call(iters, Timeout::Infinity),
            tokio_call::<false>,
        );
        row(
            &mut group,
            "call_vs_ractor",
            sched,
            |iters| runtime_call(iters, Timeout::After(CALL_TIMEOUT)),
            ractor_call,
        );
        row(
            &mut group,
            "call_infinity_vs_ractor",
            sched,
            |iters| runtime_call(iters, Timeout::Infinity),
            ractor_call,
        );
        row(
            &mut group,
            "ping_pong_vs_tokio",
            sched,
            runtime_ping_pong,
            tokio_ping_pong,
        );
        row(
            &mut group,
            "spawn_exit_vs_tokio",
            sched,
            runtime_spawn_exit,
            tokio_spawn_exit,
        );
    }
    group.finish();
}
