//! A process resumed on a worker that has run no process yet is not charged for that worker's
//! first use of the runtime. Alone in its test binary: arc-swap hands a thread the debt node
//! of a thread that has exited, so in a binary whose other tests' nodes have stopped, a fresh
//! worker may allocate nothing anyway, and the test would prove nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use runtime::heap::{self, HeapStats};
use runtime::{Node, self_pid};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

fn me() -> HeapStats {
    heap::process_heap(self_pid()).unwrap()
}

#[test]
fn a_process_resumed_on_a_worker_new_to_it_is_not_charged_for_that_workers_first_use() {
    // arc-swap gives each thread a debt node (one 128-byte block) on its first load, and the
    // runtime resolves pids through arc-swap (`process_heap`, `send`, ...): each worker of a
    // node's own runtime is warmed as it starts.
    let node = Node::builder().worker_threads(2).build().unwrap();
    let (charged, moved) = node
        .run(async {
            let started_on = std::thread::current().id();
            // Keep this worker busy past the timer, so that the other one, which has run no
            // process yet, resumes this one.
            let _busy = tokio::spawn(async { std::thread::sleep(Duration::from_millis(100)) });
            let before = me();
            tokio::time::sleep(Duration::from_millis(1)).await;
            let after = me();
            (
                after.blocks - before.blocks,
                std::thread::current().id() != started_on,
            )
        })
        .unwrap();
    if moved {
        assert_eq!(charged, 0);
    } else {
        // Scheduling kept it on its worker: nothing to check this time.
        eprintln!("the process was not resumed on the other worker");
    }
}
