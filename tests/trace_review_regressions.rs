//! Regressions from a review of the trace machinery: a slot changing hands, `traced_by` of a
//! dropped session, pause and call durations, durations across unmeasured polls. Session slots
//! are per OS process, so these tests take turns.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use runtime::trace::{ProcessSpec, TracePattern, TraceSession, TraceTypes};
use runtime::{Node, NodeHandle, SpawnOptions, receive, traced};

/// Held by each test: slot numbers must not move under them.
static TURN: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

#[traced]
fn work(n: u64) -> u64 {
    std::hint::black_box(n + 1)
}

// ---------------------------------------------------------------- F1: traced_by after slot reuse
#[test]
fn f1_traced_by_of_a_dropped_session_traces_for_the_slots_next_owner() {
    let _turn = turn();
    let node = Node::builder().worker_threads(1).build().unwrap();
    let s1 = node.trace_session_with(TraceTypes::CALL_TIME).unwrap();
    let opts = SpawnOptions::new().traced_by(&s1, false);
    let bit = s1.slot();
    drop(s1);
    let s2 = node.trace_session_with(TraceTypes::CALL_TIME).unwrap();
    assert_eq!(s2.slot(), bit);
    s2.set_pattern(&TracePattern::function(module_path!(), "work"))
        .unwrap();
    let pid = node
        .spawn_opt(
            async {
                let _: u32 = receive().await;
                work(1);
            },
            opts,
        )
        .unwrap()
        .pid;
    node.send(pid, 1u32);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !s2.is_traced(pid) && s2.measurements().is_empty(),
        "s2 enabled no process, yet traces {pid}: is_traced={} measured={:?}",
        s2.is_traced(pid),
        s2.measurements()
    );
}

// ------------------------------------ F2: a slot reused mid-poll: histograms and flush attribution
static S1: Mutex<Option<TraceSession>> = Mutex::new(None);
static S2: Mutex<Option<TraceSession>> = Mutex::new(None);
static OTHER: Mutex<Option<NodeHandle>> = Mutex::new(None);
static TYPES2: Mutex<Option<TraceTypes>> = Mutex::new(None);

/// Drops the session measuring this poll and opens another in its slot (on `OTHER`).
#[traced]
fn victim() {
    drop(S1.lock().unwrap().take());
    let t = TYPES2.lock().unwrap().unwrap();
    let other = OTHER.lock().unwrap().clone().unwrap();
    *S2.lock().unwrap() = Some(other.trace_session_with(t).unwrap());
}

fn reuse_mid_poll(node_a: &Node, other: &NodeHandle, types2: TraceTypes) -> TraceSession {
    *OTHER.lock().unwrap() = Some(other.clone());
    *TYPES2.lock().unwrap() = Some(types2);
    let s1 = node_a
        .trace_session_with(TraceTypes::CALL_TIME_HISTOGRAMS)
        .unwrap();
    s1.set_pattern(&TracePattern::function(module_path!(), "victim"))
        .unwrap();
    s1.enable_trace(ProcessSpec::New, false).unwrap();
    *S1.lock().unwrap() = Some(s1);
    node_a.run(async { victim() }).unwrap();
    S2.lock().unwrap().take().unwrap()
}

#[test]
fn f2a_other_nodes_new_session_gets_histogram_samples_of_a_dropped_session() {
    let _turn = turn();
    let a = Node::builder().worker_threads(1).build().unwrap();
    let b = Node::builder().worker_threads(1).build().unwrap();
    // s2: node b, call_count only, no patterns, no processes.
    let s2 = reuse_mid_poll(&a, b.handle(), TraceTypes::CALL_COUNT);
    let p = s2.call_time_percentiles();
    assert!(
        p.is_empty(),
        "a call_count session of node {} got percentiles of node {}: {p:?}",
        b.id(),
        a.id()
    );
}

#[test]
fn f2b_same_nodes_new_session_measures_a_process_it_never_enabled() {
    let _turn = turn();
    let a = Node::builder().worker_threads(1).build().unwrap();
    let s2 = reuse_mid_poll(&a, a.handle(), TraceTypes::CALL_TIME);
    let m = s2.measurements();
    assert!(m.is_empty(), "s2 enabled no process, yet measured: {m:?}");
}

// ------------------------------------------------ F3: pause does not make percentiles stable
#[test]
fn f3_percentiles_change_after_pause_returns() {
    let _turn = turn();
    let node = Node::builder().worker_threads(2).build().unwrap();
    let mut moved = 0;
    for round in 0..10 {
        let s = node
            .trace_session_with(TraceTypes::CALL_TIME_HISTOGRAMS)
            .unwrap();
        s.set_pattern(&TracePattern::function(module_path!(), "work"))
            .unwrap();
        s.enable_trace(ProcessSpec::New, false).unwrap();
        let pid = node
            .spawn(async {
                // One long poll: samples go to the histograms every 4,096 calls.
                let end = std::time::Instant::now() + Duration::from_millis(60);
                let mut n = 0;
                while std::time::Instant::now() < end {
                    n = work(n);
                }
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(5 + (round % 7) as u64));
        s.pause();
        let before: u64 = s.call_time_percentiles().iter().map(|c| c.calls).sum();
        std::thread::sleep(Duration::from_millis(80));
        let after: u64 = s.call_time_percentiles().iter().map(|c| c.calls).sum();
        if before != after {
            moved += 1;
        }
        node.exit(pid, runtime::ExitReason::Kill);
    }
    assert_eq!(
        moved, 0,
        "percentiles moved after pause in {moved}/10 rounds"
    );
}

// -------------------------------- F4: an unmeasured poll keeps a call's earlier polled time
static STEPS: Mutex<Option<std::sync::mpsc::Sender<u32>>> = Mutex::new(None);

fn step(n: u32) {
    let _ = STEPS.lock().unwrap().as_ref().unwrap().send(n);
}

#[traced]
async fn long_call() {
    std::thread::sleep(Duration::from_millis(30)); // poll 1: measured
    step(1);
    let _: u32 = receive().await;
    step(2); // poll 2: the session is paused
    let _: u32 = receive().await;
    // poll 3: measured again, returns at once
}

#[test]
fn f4_an_unmeasured_poll_keeps_the_calls_earlier_polled_time() {
    let _turn = turn();
    let (tx, rx) = std::sync::mpsc::channel();
    *STEPS.lock().unwrap() = Some(tx);
    let node = Node::builder().worker_threads(1).build().unwrap();
    let s = node
        .trace_session_with(TraceTypes::CALL_TIME_HISTOGRAMS)
        .unwrap();
    s.set_pattern(&TracePattern::function(module_path!(), "long_call"))
        .unwrap();
    s.enable_trace(ProcessSpec::New, false).unwrap();
    let (pid, watch) = node
        .spawn_watched(long_call(), SpawnOptions::new())
        .unwrap();
    assert_eq!(rx.recv().unwrap(), 1);
    s.pause();
    node.send(pid, 1u32);
    assert_eq!(rx.recv().unwrap(), 2);
    // Wait until poll 2 has ended (the call suspended again), so that the next message starts
    // a poll of its own, measured after the resume.
    let start = std::time::Instant::now();
    while node.process_info(pid).unwrap().status != runtime::ProcessStatus::Waiting {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the process never suspended"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    s.resume();
    node.send(pid, 2u32);
    node.block_on(watch.wait());
    let p = s.call_time_percentiles();
    let c = p
        .iter()
        .find(|c| c.callsite.function() == "long_call")
        .unwrap_or_else(|| {
            panic!(
                "no percentiles for long_call: {p:?}; {:?}",
                s.measurements()
            )
        });
    assert_eq!(c.calls, 1);
    assert!(
        c.max_ns >= 30_000_000,
        "a call measured for >= 30 ms of polls is recorded as {} ns",
        c.max_ns
    );
}

// ----------------------------------------- F0: every duration is clamped to the histogram's 2 ns
#[traced]
fn sleeps_2ms() {
    std::thread::sleep(Duration::from_millis(2));
}

#[test]
fn f0_a_2ms_call_is_recorded_as_2ms() {
    let _turn = turn();
    let node = Node::builder().worker_threads(1).build().unwrap();
    let s = node
        .trace_session_with(TraceTypes::CALL_TIME_HISTOGRAMS)
        .unwrap();
    s.set_pattern(&TracePattern::function(module_path!(), "sleeps_2ms"))
        .unwrap();
    s.enable_trace(ProcessSpec::New, false).unwrap();
    node.run(async {
        for _ in 0..5 {
            sleeps_2ms();
        }
    })
    .unwrap();
    let p = s.call_time_percentiles();
    assert_eq!(p[0].calls, 5);
    assert!(
        p[0].p50_ns >= 1_900_000,
        "p50 of 2 ms calls: {} ns",
        p[0].p50_ns
    );
    assert!(p[0].max_ns >= p[0].p50_ns);
}
