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

#[test]
fn a_dropped_sessions_flags_never_count_for_the_next_session_in_its_slot() {
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
