//! `pause` keeps what was gathered before it returns, in every trace type: a call made before
//! `pause` whose poll is still running when `pause` is called (so that its figures reach the
//! session only when that poll ends, after `pause` began) is in the figures once `pause`
//! returns, and they stay as they are.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::time::Duration;

use runtime::trace::{ProcessSpec, TracePattern, TraceSession, TraceTypes};
use runtime::{Node, traced};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

#[traced]
fn work(n: usize) -> usize {
    std::hint::black_box(vec![0u8; n]).len()
}

/// What the session gathered for `work`: calls, from every read that has it.
fn calls(session: &TraceSession, types: TraceTypes) -> Vec<(&'static str, u64)> {
    let mut out = Vec::new();
    let counted = session
        .call_counts()
        .iter()
        .filter(|c| c.callsite.function() == "work")
        .map(|c| c.calls)
        .sum();
    if types.contains(TraceTypes::CALL_COUNT) {
        out.push(("call_counts", counted));
    }
    if types.per_process() {
        let measured = session
            .measurements()
            .iter()
            .flat_map(|p| p.functions.iter())
            .filter(|f| f.callsite.function() == "work")
            .map(|f| f.calls)
            .sum();
        out.push(("measurements", measured));
    }
    if types.contains(TraceTypes::CALL_TREE) {
        let tree = session.call_tree();
        let on_paths = tree
            .processes
            .iter()
            .flat_map(|p| p.paths.iter())
            .filter(|p| tree.paths[p.path as usize].callsite.function() == "work")
            .map(|p| p.calls)
            .sum();
        out.push(("call_tree", on_paths));
    }
    if types.contains(TraceTypes::CALL_EVENTS) {
        let entered = session
            .event_logs()
            .iter()
            .flat_map(|l| l.events.iter())
            .filter(|e| {
                e.callsite.function() == "work" && e.kind == runtime::trace::CallEventKind::Enter
            })
            .count() as u64;
        out.push(("event_logs", entered));
    }
    if types.contains(TraceTypes::CALL_TIME_HISTOGRAMS) {
        let recorded = session
            .call_time_percentiles()
            .iter()
            .filter(|p| p.callsite.function() == "work")
            .map(|p| p.calls)
            .sum();
        out.push(("percentiles", recorded));
    }
    out
}

/// A process calls `work` once, tells the test, and keeps its poll running until the test is
/// about to pause (and a little longer, so that the poll usually ends while `pause` runs).
/// Once `pause` returns, every read has the call, and reads after the process ended agree.
fn a_call_before_pause_is_kept(types: TraceTypes) {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let session = node.trace_session_with(types).unwrap();
    session
        .set_pattern(&TracePattern::function(module_path!(), "work"))
        .unwrap();
    session.enable_trace(ProcessSpec::New, true).unwrap();
    let (called_tx, called_rx) = mpsc::channel();
    let (pausing_tx, pausing_rx) = mpsc::channel::<()>();
    let watch = node
        .spawn_watched(
            async move {
                work(64);
                called_tx.send(()).unwrap();
                // Still the same poll: its figures reach the session when it returns.
                pausing_rx.recv().unwrap();
                std::thread::sleep(Duration::from_millis(50));
            },
            runtime::SpawnOptions::new(),
        )
        .unwrap()
        .1;
    called_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    pausing_tx.send(()).unwrap();
    assert!(session.pause());
    let after_pause = calls(&session, types);
    assert!(
        after_pause.iter().all(|(_, n)| *n == 1),
        "{types}: {after_pause:?}"
    );
    node.block_on(watch.wait());
    session.settle(Duration::from_secs(30));
    assert_eq!(calls(&session, types), after_pause, "{types}");
}

#[test]
fn call_count() {
    a_call_before_pause_is_kept(TraceTypes::CALL_COUNT);
}

#[test]
fn call_time() {
    a_call_before_pause_is_kept(TraceTypes::CALL_TIME);
}

#[test]
fn call_memory() {
    a_call_before_pause_is_kept(TraceTypes::CALL_MEMORY);
}

#[test]
fn call_tree() {
    a_call_before_pause_is_kept(TraceTypes::CALL_TIME | TraceTypes::CALL_TREE);
    a_call_before_pause_is_kept(TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE);
}

#[test]
fn event_logs() {
    a_call_before_pause_is_kept(TraceTypes::CALL_MEMORY | TraceTypes::CALL_EVENTS);
}

#[test]
fn call_time_histograms() {
    a_call_before_pause_is_kept(TraceTypes::CALL_TIME_HISTOGRAMS);
}

#[test]
fn every_type_at_once() {
    a_call_before_pause_is_kept(
        TraceTypes::ALL
            | TraceTypes::CALL_TIME_HISTOGRAMS
            | TraceTypes::CALL_TREE
            | TraceTypes::CALL_EVENTS,
    );
}

/// After `restart`, nothing gathered before it shows: a poll running when `restart` is called
/// hands over its figures before they are zeroed.
#[test]
fn restart_zeroes_the_figures_of_a_poll_running_when_it_is_called() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let types = TraceTypes::CALL_MEMORY;
    let session = node.trace_session_with(types).unwrap();
    session
        .set_pattern(&TracePattern::function(module_path!(), "work"))
        .unwrap();
    session.enable_trace(ProcessSpec::New, true).unwrap();
    let (called_tx, called_rx) = mpsc::channel();
    let (restarting_tx, restarting_rx) = mpsc::channel::<()>();
    let watch = node
        .spawn_watched(
            async move {
                work(64);
                called_tx.send(()).unwrap();
                restarting_rx.recv().unwrap();
                std::thread::sleep(Duration::from_millis(50));
            },
            runtime::SpawnOptions::new(),
        )
        .unwrap()
        .1;
    called_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    restarting_tx.send(()).unwrap();
    session.restart();
    node.block_on(watch.wait());
    session.settle(Duration::from_secs(30));
    assert_eq!(calls(&session, types), vec![("measurements", 0)]);
}
