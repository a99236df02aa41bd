//! A dropped session's process flags never count for a later session in the same slot, on
//! another node or on the same one, even when traced processes keep spawning while it drops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use runtime::trace::{ProcessSpec, TracePattern, TraceTypes};
use runtime::{Node, spawn, traced};

#[traced]
fn tick(n: u64) -> u64 {
    n + 1
}

/// The tests of this file take turns: each expects a dropped session's slot to be the next
/// one handed out, which a session opened by the other at the same moment would take.
fn turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_dropped_sessions_flags_never_count_for_the_next_session_in_its_slot() {
    let _turn = turn();
    let node1 = Node::builder().worker_threads(2).build().unwrap();
    let node2 = Node::builder().worker_threads(1).build().unwrap();
    for round in 0..5 {
        let s = node1.trace_session_with(TraceTypes::CALL_TIME).unwrap();
        let bit = s.slot();
        s.enable_trace(ProcessSpec::New, true).unwrap();
        // Traced spawners keep spawning (children inherit the flag) while the session drops.
        let spawners: Vec<_> = (0..3)
            .map(|_| {
                node1
                    .spawn(async {
                        for _ in 0..500 {
                            let _ = spawn(async {
                                let mut n = 0;
                                for _ in 0..20 {
                                    n = tick(n);
                                    tokio::time::sleep(Duration::from_millis(1)).await;
                                }
                            });
                            tokio::task::yield_now().await;
                        }
                    })
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(2));
        drop(s);
        // The next session in the slot: on the other node on even rounds, this one on odd.
        let other = if round % 2 == 0 { &node2 } else { &node1 };
        let s2 = other.trace_session_with(TraceTypes::CALL_TIME).unwrap();
        assert_eq!(s2.slot(), bit);
        s2.set_pattern(&TracePattern::function(module_path!(), "tick"))
            .unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let measured = s2.measurements();
        assert!(
            measured.is_empty(),
            "round {round}: a session that enabled no process measured {} processes",
            measured.len()
        );
        for p in spawners {
            node1.exit(p, runtime::ExitReason::Kill);
        }
    }
}

#[test]
fn spawns_racing_with_a_session_opening_in_a_freed_slot_never_carry_its_bit() {
    let _turn = turn();
    let node = Node::builder().worker_threads(2).build().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut leaked = 0;
    for round in 0..200 {
        let s = node.trace_session_with(TraceTypes::CALL_TIME).unwrap();
        s.enable_trace(ProcessSpec::New, true).unwrap();
        // Spawners inherit the flag and pass it on to every child, as fast as they can.
        let spawners: Vec<_> = (0..2)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                node.spawn(async move {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let _ = spawn(async {
                            tick(0);
                        });
                        tokio::task::yield_now().await;
                    }
                })
                .unwrap()
            })
            .collect();
        std::thread::yield_now();
        drop(s);
        let s2 = node.trace_session_with(TraceTypes::CALL_TIME).unwrap();
        s2.set_pattern(&TracePattern::function(module_path!(), "tick"))
            .unwrap();
        std::thread::sleep(Duration::from_millis(1));
        for p in spawners {
            node.exit(p, runtime::ExitReason::Kill);
        }
        std::thread::sleep(Duration::from_millis(1));
        let measured = s2.measurements();
        if !measured.is_empty() {
            leaked += 1;
            eprintln!("round {round}: {} processes measured", measured.len());
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        leaked, 0,
        "a session that enabled no process measured some in {leaked} rounds"
    );
}
