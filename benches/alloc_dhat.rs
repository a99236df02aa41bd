//! The allocation-heavy actor workload of `alloc_sampling` (`alloc_workload/every`: each
//! allocation recorded by the allocation sampler) under dhat's heap profiler, which records every
//! allocation too: `alloc_workload/dhat`, and `alloc_workload/system` with dhat's allocator
//! but no profiler running. dhat must be the global allocator, hence a binary of its own.
//!
//! Run with `cargo bench --bench alloc_dhat`.

use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use runtime::Node;

#[path = "alloc_workload.rs"]
mod alloc_workload;
use alloc_workload::workload;

#[global_allocator]
static DHAT: dhat::Alloc = dhat::Alloc;

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
    group.bench_function("system", |b| b.iter_custom(run));
    group.bench_function("dhat", |b| {
        b.iter_custom(|iters| {
            // Testing mode: no file written at the end.
            let profiler = dhat::Profiler::builder().testing().build();
            let elapsed = run(iters);
            drop(profiler);
            elapsed
        })
    });
    group.finish();
}

criterion_group!(benches, bench_workload);
criterion_main!(benches);
