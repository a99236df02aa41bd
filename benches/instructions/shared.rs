//! What both instruction-count bench binaries share: the operation counts and the loops whose
//! instructions they count.
//!
//! Every row runs its loop at `n` and at `2n` operations, each a benchmark of its own (ids
//! `…_n` and `…_2n`); `instructions_table` prints the cost of one operation as
//! `(Ir at 2n − Ir at n) / n`, so that what a run costs once (entering the node, starting a
//! server, its teardown) cancels out. Everything a loop needs is built in the benchmark's setup,
//! which callgrind does not count, and warmed there by a first short run.

use std::future::Future;
use std::hint::black_box;

use runtime::Node;

/// Operations per run of the cheap rows (a traced call, an allocation).
pub(crate) const CALLS: u64 = 20_000;
/// Operations per run of the message rows (a round trip).
pub(crate) const ROUND_TRIPS: u64 = 4_000;
/// Operations per run of the spawn rows (a spawn and its exit).
pub(crate) const SPAWNS: u64 = 2_000;

/// A current-thread node, as the criterion benches use: the measured loop runs on the thread
/// callgrind counts.
pub(crate) fn node() -> Node {
    Node::builder()
        .current_thread()
        .build()
        .expect("cannot start the node")
}

/// A current-thread tokio runtime, built as the node builds its own.
pub(crate) fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot build the tokio runtime")
}

/// Runs `work` in a process of `node`.
pub(crate) fn in_node<F, T>(node: &Node, work: F) -> T
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    node.run(work).expect("the measured process failed")
}

/// Runs `work` in a task spawned on `rt` (not as the `block_on` future, as the messaging bench).
pub(crate) fn in_tokio<F, T>(rt: &tokio::runtime::Runtime, work: F) -> T
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    rt.block_on(async move {
        tokio::spawn(work)
            .await
            .expect("the measured task panicked")
    })
}

/// Allocates and frees `iters` boxes of 8 bytes in a process of `node`, through the global
/// allocator of the binary (the counting allocator in one binary, the system's in the other).
pub(crate) fn alloc_free(node: &Node, iters: u64) {
    in_node(node, async move {
        for i in 0..iters {
            drop(black_box(Box::new(black_box(i))));
        }
    });
}

/// The setup of an allocation row: a node, warmed by a first run, and the allocations to make.
pub(crate) fn allocations(iters: u64) -> (Node, u64) {
    let node = node();
    alloc_free(&node, 1_000);
    (node, iters)
}
