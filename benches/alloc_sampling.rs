//! Benchmarks of allocation sampling (issue #20), the counting allocator being this binary's
//! global allocator.
//!
//! - `alloc_sampling/<who>/<size>`: one allocation and its free, at 8, 64 and 512 bytes, inside
//!   a process: `system` (the system allocator), `off` (the counting allocator, no allocation
//!   sample session open), `on` (an allocation sample session at the default rate, 512 KiB,
//!   sampling the process: the sampled pairs, one per 512 KiB on average, are in the figure).
//!   `on_unsampled`: a session whose rate no run reaches, so that every pair takes the
//!   unsampled path (one subtraction and a branch more than `off`). The target: at most 1 ns
//!   above `off` for an unsampled pair.
//! - `alloc_ratio/default_vs_off`: the default rate's workload time in percent of `off`'s,
//!   both timed back to back in each sample (the target's measure: at most 102 %);
//!   `alloc_ratio/unsampled_vs_off` the same with a rate no run reaches: the open session's
//!   cost apart from taking samples.
//! - `alloc_workload/<who>`: an allocation-heavy actor workload (8 processes, each building,
//!   sending and dropping messages of 8 to 512 bytes in boxes and vectors, 20,000 messages in
//!   all) with no sampling (`off`), at the default rate (`default`; target: at most 2 % above
//!   `off`) and at `sample_rate = 1` (`every`: each allocation recorded). The bench
//!   `alloc_dhat` runs the same workload under dhat's heap profiler, which records every
//!   allocation too.
//!
//! Run with `cargo bench --bench alloc_sampling`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use runtime::sample::{AllocRate, SampleOptions, SampleSession, Sampler};
use runtime::trace::ProcessSpec;
use runtime::{CountingAlloc, Node};

#[path = "alloc_workload.rs"]
mod alloc_workload;
#[path = "ratio_measurement.rs"]
mod ratio_measurement;
use alloc_workload::workload;

#[global_allocator]
static COUNTING: CountingAlloc = CountingAlloc::system();

fn pairs<A: GlobalAlloc>(alloc: &A, layout: Layout, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        // SAFETY: `layout` has a non-zero size; the block is freed once, with the same layout,
        // by the allocator that made it.
        #[allow(unsafe_code)]
        unsafe {
            let p = alloc.alloc(layout);
            assert!(!p.is_null());
            black_box(p);
            alloc.dealloc(p, layout);
        }
    }
    start.elapsed()
}

/// An allocation sample session at `rate` on `node`, sampling the processes spawned from now.
fn sampling(node: &Node, rate: AllocRate) -> SampleSession {
    let session = node
        .sample_session(
            SampleOptions::new()
                .sampler(Sampler::Alloc)
                .alloc_rate(rate)
                .n(1_000_000),
        )
        .expect("alloc session");
    session
        .trace()
        .enable_trace(ProcessSpec::New, true)
        .expect("flags");
    session
}

fn bench_pairs(c: &mut Criterion) {
    let node = Node::builder().current_thread().build().expect("node");
    let mut group = c.benchmark_group("alloc_sampling");
    for size in [8usize, 64, 512] {
        let layout = Layout::from_size_align(size, 8).expect("layout");
        let in_process = |l: Layout, iters: u64| {
            node.run(async move { pairs(&COUNTING, l, iters) })
                .expect("the timing process ran")
        };
        group.bench_with_input(BenchmarkId::new("system", size), &layout, |b, l| {
            let l = *l;
            b.iter_custom(|iters| {
                node.run(async move { pairs(&System, l, iters) })
                    .expect("ran")
            })
        });
        group.bench_with_input(BenchmarkId::new("off", size), &layout, |b, l| {
            b.iter_custom(|iters| in_process(*l, iters))
        });
        group.bench_with_input(BenchmarkId::new("on", size), &layout, |b, l| {
            let session = sampling(&node, AllocRate::default());
            b.iter_custom(|iters| in_process(*l, iters));
            let data = session.samples();
            black_box(data.samples.len());
        });
        // The unsampled path alone: a rate no benchmark reaches.
        group.bench_with_input(BenchmarkId::new("on_unsampled", size), &layout, |b, l| {
            let _session = sampling(&node, AllocRate::Bytes(1 << 60));
            b.iter_custom(|iters| in_process(*l, iters));
        });
    }
    group.finish();
}

fn bench_workload(c: &mut Criterion) {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let mut group = c.benchmark_group("alloc_workload");
    group.sample_size(20);
    let run = |iters: u64| {
        let start = Instant::now();
        for _ in 0..iters {
            node.run(workload()).expect("the workload ran");
        }
        start.elapsed()
    };
    group.bench_function("off", |b| b.iter_custom(run));
    group.bench_function("default", |b| {
        let session = sampling(&node, AllocRate::default());
        b.iter_custom(run);
        black_box(session.samples().samples.len());
    });
    group.bench_function("every", |b| {
        let session = sampling(&node, AllocRate::SampleRate(1.0));
        b.iter_custom(|iters| {
            let elapsed = run(iters);
            // What the session gathered is not kept: its buffer stays below its size.
            session.clear();
            elapsed
        });
    });
    // Off again, last: the rows before ran on a warmed node.
    group.bench_function("off_after", |b| b.iter_custom(run));
    group.finish();
}

/// `alloc_ratio/default_vs_off`: the workload at the default rate in percent of the workload
/// without a session, the two timed back to back in each sample (alternating which goes
/// first), so that both see the same machine: the target's measure (at most 102 %).
fn bench_ratio(c: &mut Criterion<ratio_measurement::Ratio>) {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let mut group = c.benchmark_group("alloc_ratio");
    let run = |iters: u64| {
        let start = Instant::now();
        for _ in 0..iters {
            node.run(workload()).expect("the workload ran");
        }
        start.elapsed()
    };
    let on = |iters: u64, rate: AllocRate| {
        let session = sampling(&node, rate);
        let elapsed = run(iters);
        black_box(session.samples().samples.len());
        elapsed
    };
    let on_first = std::cell::Cell::new(true);
    // `unsampled_vs_off`: a session whose rate no run reaches: what the open session costs
    // apart from taking samples (its processes' polls are measured).
    for (name, rate) in [
        ("default_vs_off", AllocRate::default()),
        ("unsampled_vs_off", AllocRate::Bytes(1 << 60)),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let (on, off) = if on_first.replace(!on_first.get()) {
                    let on = on(iters, rate);
                    (on, run(iters))
                } else {
                    let off = run(iters);
                    (on(iters, rate), off)
                };
                100.0 * iters as f64 * on.as_secs_f64() / off.as_secs_f64().max(f64::MIN_POSITIVE)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_pairs, bench_workload);
criterion_group! {
    name = ratios;
    config = Criterion::default()
        .with_measurement(ratio_measurement::Ratio)
        .sample_size(20)
        .configure_from_args();
    targets = bench_ratio
}
criterion_main!(benches, ratios);
