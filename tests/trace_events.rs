//! Event logs ([`TraceTypes::CALL_EVENTS`]): each traced frame entered and left, in order, with
//! timestamps, bounded per process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::YieldOnce;

use std::future::Future;

use runtime::trace::{
    CallEventKind, EVENT_LOG_CAPACITY, ProcessEvents, ProcessSpec, TracePattern, TraceSession,
    TraceTypes,
};
use runtime::{Node, Pid, traced};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

#[traced]
fn outer() -> u64 {
    inner() + inner()
}

#[traced]
fn inner() -> u64 {
    std::hint::black_box(7)
}

#[traced]
async fn two_polls() -> u64 {
    let a = inner();
    YieldOnce(false).await;
    a + inner()
}

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

fn session(node: &Node, types: TraceTypes) -> TraceSession {
    let s = node.trace_session_with(types).unwrap();
    for f in ["outer", "inner", "two_polls"] {
        s.set_pattern(&TracePattern::function(module_path!(), f))
            .unwrap();
    }
    s.enable_trace(ProcessSpec::New, true).unwrap();
    s
}

fn run_in_process<F>(node: &Node, f: F) -> Pid
where
    F: Future<Output = ()> + Send + 'static,
{
    common::run_in_process(node, f).0
}

/// The log of `pid` as `+name` / `-name` strings.
fn log_of(logs: &[ProcessEvents], pid: Pid) -> Vec<String> {
    let log = logs.iter().find(|l| l.pid == pid).expect("a log");
    log.events
        .iter()
        .map(|e| {
            let sign = if e.kind == CallEventKind::Enter {
                "+"
            } else {
                "-"
            };
            format!("{sign}{}", e.callsite.function())
        })
        .collect()
}

#[test]
fn nested_calls_are_logged_in_order_with_rising_times() {
    // Alone and beside call-tree mode (one session, one bit for both).
    for types in [
        TraceTypes::CALL_TIME | TraceTypes::CALL_EVENTS,
        TraceTypes::CALL_TIME | TraceTypes::CALL_TREE | TraceTypes::CALL_EVENTS,
        TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE | TraceTypes::CALL_EVENTS,
    ] {
        let node = node();
        let s = session(&node, types);
        let pid = run_in_process(&node, async {
            outer();
            inner();
        });
        let logs = s.event_logs();
        assert_eq!(
            log_of(&logs, pid),
            [
                "+outer", "+inner", "-inner", "+inner", "-inner", "-outer", "+inner", "-inner"
            ],
            "{types:?}"
        );
        let events = &logs[0].events;
        assert!(events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        assert_eq!(logs[0].dropped, 0);
        if types.contains(TraceTypes::CALL_TREE) {
            assert!(!s.call_tree().paths.is_empty(), "{types:?}");
        }
    }
}

#[test]
fn each_poll_of_an_async_call_is_a_frame() {
    let node = node();
    let s = session(&node, TraceTypes::CALL_MEMORY | TraceTypes::CALL_EVENTS);
    let pid = run_in_process(&node, async {
        two_polls().await;
    });
    assert_eq!(
        log_of(&s.event_logs(), pid),
        [
            "+two_polls",
            "+inner",
            "-inner",
            "-two_polls",
            "+two_polls",
            "+inner",
            "-inner",
            "-two_polls"
        ]
    );
    // One call, polled twice.
    let m = s.measurements();
    let f = m[0]
        .functions
        .iter()
        .find(|f| f.callsite.function() == "two_polls")
        .unwrap();
    assert_eq!(f.calls, 1);
}

#[test]
fn a_log_keeps_its_capacity_and_counts_the_rest() {
    let node = node();
    let s = session(&node, TraceTypes::CALL_TIME | TraceTypes::CALL_EVENTS);
    let calls = EVENT_LOG_CAPACITY as u64; // two events each
    let pid = run_in_process(&node, async move {
        for _ in 0..calls / 2 {
            inner();
        }
        YieldOnce(false).await; // a second poll, its events dropped at the flush
        for _ in 0..calls / 2 + 10 {
            inner();
        }
    });
    let logs = s.event_logs();
    let log = logs.iter().find(|l| l.pid == pid).unwrap();
    assert_eq!(log.events.len(), EVENT_LOG_CAPACITY);
    assert_eq!(log.dropped, 2 * calls + 20 - EVENT_LOG_CAPACITY as u64);
    // The figures are all there all the same.
    let m = s.measurements();
    assert_eq!(m[0].functions[0].calls, calls + 10);
}

#[test]
fn restart_clears_the_logs_and_sessions_without_events_have_none() {
    let node = node();
    let s = session(&node, TraceTypes::CALL_TIME | TraceTypes::CALL_EVENTS);
    let plain = session(&node, TraceTypes::CALL_TIME);
    run_in_process(&node, async {
        outer();
    });
    assert!(plain.event_logs().is_empty());
    s.restart();
    assert!(s.event_logs().iter().all(|l| l.events.is_empty()));
    let pid = run_in_process(&node, async {
        inner();
    });
    assert_eq!(log_of(&s.event_logs(), pid), ["+inner", "-inner"]);
    let snapshot = s.snapshot();
    let p = snapshot
        .processes
        .iter()
        .find(|p| p.pid == pid.to_string())
        .unwrap();
    assert_eq!(p.events.len(), 2);
    assert!(p.events[0].enter && !p.events[1].enter);
    assert_eq!(
        snapshot.functions[p.events[0].function as usize].name,
        "inner"
    );
}

#[test]
fn two_event_sessions_each_count_what_they_could_not_keep() {
    let node = node();
    let one = session(&node, TraceTypes::CALL_TIME | TraceTypes::CALL_EVENTS);
    let two = session(&node, TraceTypes::CALL_TIME | TraceTypes::CALL_EVENTS);
    let calls = EVENT_LOG_CAPACITY as u64; // 2 events each, for each session: the poll's log fills
    let pid = run_in_process(&node, async move {
        for _ in 0..calls {
            inner();
        }
    });
    for s in [&one, &two] {
        let logs = s.event_logs();
        let log = logs
            .iter()
            .find(|l| l.pid == pid)
            .expect("each session has a log");
        // Each event is logged once for both sessions; the poll's log holds the capacity.
        assert_eq!(log.events.len() as u64 + log.dropped, 2 * calls);
    }
}
