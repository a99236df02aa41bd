//! A registered `worker` process that does traced work on request, and a way to ask it: the
//! program's work the control endpoint's tests count, to see that nothing disturbs it.
//! Included with `#[path = "support/worker.rs"] mod worker;` beside `mod common;`.

use runtime::{Node, Pid, receive, send};

use crate::common;

/// A process registered as `worker`: for each `(from, n)`, `n` calls of `branches()` (72
/// each), the total sent back.
pub(crate) fn start_worker(node: &Node) -> Pid {
    let pid = node
        .handle()
        .spawn(async {
            loop {
                let (from, n): (Pid, u64) = receive().await;
                let total: usize = (0..n).map(|_| common::branches()).sum();
                send(from, total);
            }
        })
        .unwrap();
    node.handle().register("worker", pid).unwrap();
    pid
}

/// Asks the worker for `n` rounds from a process of `node`; its answer.
pub(crate) fn ask_worker(node: &Node, worker: Pid, n: u64) -> usize {
    node.run(async move {
        send(worker, (runtime::self_pid(), n));
        receive::<usize>().await
    })
    .unwrap()
}
