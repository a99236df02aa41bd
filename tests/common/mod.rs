//! Helpers shared by the trace tests (each test file that uses them is its own binary, so a
//! binary may leave some unused).

#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use runtime::trace::{ProcessSpec, TracePattern, TraceSession};
use runtime::{Down, ExitReason, Node, Pid, receive, spawn_monitor};

/// Returns `Pending` once, waking itself: a yield that allocates nothing.
pub(crate) struct YieldOnce(pub(crate) bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Runs `f` in a new process of `node`; returns its pid and exit reason once it has ended.
pub(crate) fn run_in_process<F>(node: &Node, f: F) -> (Pid, ExitReason)
where
    F: Future<Output = ()> + Send + 'static,
{
    node.run(async move {
        let (pid, _) = spawn_monitor(f).expect("spawn the process");
        let down: Down = receive().await;
        (pid, down.reason)
    })
    .expect("the waiting process runs")
}

/// The calls of function `name` that `snapshot` counts, as a sample profile sums them: the
/// calls of the processes folded or counted apart (its call counts), and those in its rows.
pub(crate) fn snapshot_calls(snapshot: &runtime::trace::Snapshot, name: &str) -> u64 {
    let Some(id) = snapshot.functions.iter().position(|f| f.name == name) else {
        return 0;
    };
    let id = id as u32;
    let counted: u64 = snapshot
        .call_counts
        .iter()
        .filter(|c| c.0 == id)
        .map(|c| c.1)
        .sum();
    let rows: u64 = snapshot
        .processes
        .iter()
        .flat_map(|p| &p.functions)
        .filter(|f| f.id == id)
        .map(|f| f.calls)
        .sum();
    counted + rows
}

/// Has `session` trace the functions of `pattern` in every process spawned from now on (a
/// sample session's through its `trace()`): the setup most sampled tests begin with.
pub(crate) fn trace_new_processes(session: &TraceSession, pattern: &TracePattern) {
    session.set_pattern(pattern).expect("pattern");
    session.enable_trace(ProcessSpec::New, true).expect("flags");
}
