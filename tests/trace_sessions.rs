//! Trace sessions: patterns, the trace map, and call counts per node and per session.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use runtime::trace::{PatternError, TracePattern};
use runtime::{Node, receive, self_pid, send, spawn, traced};

#[traced]
fn leaf(n: u64) -> u64 {
    n + 1
}

#[traced]
fn branch(n: u64) -> u64 {
    leaf(n) + leaf(n)
}

#[traced]
async fn slow_call(polls: u32) -> u32 {
    for _ in 0..polls {
        tokio::task::yield_now().await;
    }
    polls
}

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

fn calls_of(session: &runtime::trace::TraceSession, function: &str) -> u64 {
    session
        .call_counts()
        .iter()
        .find(|c| c.callsite.function() == function)
        .map_or(0, |c| c.calls)
}

#[test]
fn set_and_clear_patterns_return_counts_and_typed_errors() {
    let node = node();
    let s = node.trace_session().unwrap();
    let m = module_path!();
    assert_eq!(s.set_pattern(&TracePattern::module(m)).unwrap(), 3);
    assert_eq!(s.set_pattern(&TracePattern::mfa(m, "leaf", 1)).unwrap(), 1);
    let err = s.set_pattern(&TracePattern::mfa(m, "leaf", 2)).unwrap_err();
    assert!(matches!(err, PatternError::NoMatch { .. }));
    assert!(err.to_string().contains("leaf"), "{err}");
    assert!(err.to_string().contains("links only the crates"), "{err}");
    let map = s.trace_map();
    assert_eq!(
        map.modules.get(m).unwrap(),
        &vec![("branch", 1), ("leaf", 1), ("slow_call", 1)]
    );
    assert_eq!(
        s.clear_pattern(&TracePattern::function(m, "leaf")).unwrap(),
        1
    );
    assert_eq!(s.trace_map().modules.get(m).unwrap().len(), 2);
    let err = s
        .clear_pattern(&TracePattern::module("not::traced"))
        .unwrap_err();
    assert!(matches!(err, PatternError::NotTraced { .. }));
    assert!(err.to_string().contains("not::traced"));
}

#[test]
fn call_count_counts_calls_of_every_process_of_the_node_without_flags() {
    let node = node();
    let s = node.trace_session().unwrap();
    s.set_pattern(&TracePattern::module(module_path!()))
        .unwrap();
    node.run(async {
        let me = self_pid();
        for _ in 0..4 {
            spawn(async move {
                for i in 0..25 {
                    branch(i);
                }
                send(me, ());
            })
            .unwrap();
        }
        for _ in 0..4 {
            let () = receive().await;
        }
    })
    .unwrap();
    // Calls outside any process, and on another node, are not this session's.
    branch(1);
    let other = self::node();
    other.run(async { branch(2) }).unwrap();
    assert_eq!(calls_of(&s, "branch"), 100);
    assert_eq!(calls_of(&s, "leaf"), 200);
}

#[test]
fn an_async_call_counts_once_and_only_if_it_started_while_traced() {
    let node = node();
    let s = node.trace_session().unwrap();
    let m = module_path!();
    let out = node
        .run(async move {
            // Started before its function is traced: never counted.
            let mut running = Box::pin(slow_call(3));
            let first = futures_poll_once(running.as_mut()).await;
            assert!(first.is_none());
            s.set_pattern(&TracePattern::function(m, "slow_call"))
                .unwrap();
            let a = running.await;
            let b = slow_call(5).await;
            (a + b, calls_of(&s, "slow_call"))
        })
        .unwrap();
    assert_eq!(out, (8, 1));
}

/// Polls a future once.
async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(move |cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[test]
fn sessions_are_independent_and_pause_resume_restart_behave() {
    let node = node();
    let a = node.trace_session().unwrap();
    let b = node.trace_session().unwrap();
    let m = module_path!();
    a.set_pattern(&TracePattern::function(m, "leaf")).unwrap();
    b.set_pattern(&TracePattern::function(m, "leaf")).unwrap();
    let run = |n: u64| {
        node.run(async move {
            for i in 0..n {
                leaf(i);
            }
        })
        .unwrap()
    };
    run(10);
    assert_eq!((calls_of(&a, "leaf"), calls_of(&b, "leaf")), (10, 10));
    a.restart();
    run(5);
    assert_eq!((calls_of(&a, "leaf"), calls_of(&b, "leaf")), (5, 15));
    assert!(a.pause());
    assert!(!a.pause());
    run(7);
    assert_eq!((calls_of(&a, "leaf"), calls_of(&b, "leaf")), (5, 22));
    assert!(a.resume());
    assert!(!a.resume());
    run(1);
    assert_eq!((calls_of(&a, "leaf"), calls_of(&b, "leaf")), (6, 23));
    // Dropping a session stops it without touching the other.
    drop(a);
    run(2);
    assert_eq!(calls_of(&b, "leaf"), 25);
}

#[test]
fn the_runtime_api_is_traced_like_bifs() {
    let node = node();
    let s = node.trace_session().unwrap();
    let n = s.set_pattern(&TracePattern::module("runtime")).unwrap();
    assert!(n >= 20, "{n}");
    assert_eq!(
        s.set_pattern(&TracePattern::function("runtime::gen_server", "call"))
            .unwrap(),
        1
    );
    node.run(async {
        let me = self_pid();
        for i in 0..10u32 {
            send(me, i);
        }
        for _ in 0..10 {
            let _: u32 = receive().await;
        }
        spawn(async {}).unwrap();
        // Introspection is traced too, as `erlang:processes/0` and `process_info/1` are.
        let all = runtime::processes();
        assert!(all.contains(&me));
        assert!(runtime::process_info(me).is_some());
    })
    .unwrap();
    assert_eq!(calls_of(&s, "send"), 10);
    assert_eq!(calls_of(&s, "receive"), 10);
    assert_eq!(calls_of(&s, "spawn"), 1);
    assert_eq!(calls_of(&s, "self_pid"), 1);
    assert_eq!(calls_of(&s, "processes"), 1);
    assert_eq!(calls_of(&s, "process_info"), 1);
}

#[test]
fn the_supervisor_api_is_traced_in_its_own_module() {
    use runtime::supervisor::{self, StartOptions, SupervisorFlags, SupervisorSpec};
    let node = node();
    let s = node.trace_session().unwrap();
    let n = s
        .set_pattern(&TracePattern::module("runtime::supervisor"))
        .unwrap();
    assert_eq!(
        n, 9,
        "start, start_link, start_on, stop and five client functions"
    );
    // The runtime's own use of its API inside a supervisor is not the user's call.
    s.set_pattern(&TracePattern::function("runtime", "self_pid"))
        .unwrap();
    node.run(async {
        let spec = SupervisorSpec::new(SupervisorFlags::default());
        let sup = supervisor::start(spec, StartOptions::new()).await.unwrap();
        let timeout = std::time::Duration::from_secs(30);
        assert!(
            supervisor::which_children(sup, timeout)
                .await
                .unwrap()
                .is_empty()
        );
        supervisor::count_children(sup, timeout).await.unwrap();
    })
    .unwrap();
    assert_eq!(calls_of(&s, "start"), 1);
    assert_eq!(calls_of(&s, "which_children"), 1);
    assert_eq!(calls_of(&s, "count_children"), 1);
    assert_eq!(calls_of(&s, "self_pid"), 0);
}

#[test]
fn call_memory_without_the_counting_allocator_is_an_error_that_says_how_to_install_it() {
    let node = node();
    let err = node
        .trace_session_with(runtime::trace::TraceTypes::CALL_MEMORY)
        .unwrap_err();
    assert_eq!(err, runtime::trace::SessionError::AllocatorNotInstalled);
    assert!(err.to_string().contains("#[global_allocator]"), "{err}");
    // call_time needs no allocator.
    node.trace_session_with(runtime::trace::TraceTypes::CALL_TIME)
        .unwrap();
}

/// A session of `node` in slot `slot`, freed just before. Other tests of this binary open
/// sessions at the same time and may take it for a moment: slots below it that are free are
/// held while trying, and the attempt is repeated (bounded) while another test holds it.
fn session_in_slot(node: &Node, slot: u32) -> runtime::trace::TraceSession {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let mut below = Vec::new();
        loop {
            let s = node.trace_session().unwrap();
            if s.slot() == slot {
                return s;
            }
            if s.slot() > slot {
                break;
            }
            below.push(s);
        }
        drop(below);
        assert!(
            std::time::Instant::now() < deadline,
            "slot {slot} never came free again"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A session of `node` in the slot `last` names (any slot the first time), which becomes the
/// new session's.
fn session_in_last_slot(node: &Node, last: &mut Option<u32>) -> runtime::trace::TraceSession {
    let s = match *last {
        None => node.trace_session().unwrap(),
        Some(slot) => session_in_slot(node, slot),
    };
    *last = Some(s.slot());
    s
}

#[test]
fn counts_stay_exact_across_sessions_reusing_a_slot_and_threads_that_exit() {
    // One worker thread: its cached shard must not count for the next session in the slot.
    let single = Node::builder().current_thread().build().unwrap();
    let m = module_path!();
    let mut last_slot = None;
    for round in 1..=4u64 {
        let s = session_in_last_slot(&single, &mut last_slot);
        s.set_pattern(&TracePattern::function(m, "leaf")).unwrap();
        single
            .run(async move {
                for i in 0..100 * round {
                    leaf(i);
                }
            })
            .unwrap();
        assert_eq!(calls_of(&s, "leaf"), 100 * round, "round {round}");
    }
    // Threads that counted and then exited keep their counts in the session.
    let s = {
        let short_lived = node();
        let s = short_lived.trace_session().unwrap();
        s.set_pattern(&TracePattern::function(m, "leaf")).unwrap();
        short_lived
            .run(async {
                for _ in 0..8 {
                    runtime::spawn_monitor(async {
                        for i in 0..1000 {
                            leaf(i);
                        }
                    })
                    .unwrap();
                }
                for _ in 0..8 {
                    let _: runtime::Down = receive().await;
                }
            })
            .unwrap();
        short_lived.stop();
        s
    };
    assert_eq!(calls_of(&s, "leaf"), 8000);
}

#[test]
fn two_sessions_count_exactly_when_one_of_them_is_dropped_and_its_slot_reused() {
    // One worker thread, so its cached shards (one per slot, counted in one go for a call both
    // sessions want) are those of the previous owner of the reused slot: they must count for
    // neither session once that owner is dropped.
    let single = Node::builder().current_thread().build().unwrap();
    let m = module_path!();
    let stays = single.trace_session().unwrap();
    stays
        .set_pattern(&TracePattern::function(m, "leaf"))
        .unwrap();
    let mut total = 0;
    let mut last_slot = None;
    for round in 1..=4u64 {
        let s = session_in_last_slot(&single, &mut last_slot);
        s.set_pattern(&TracePattern::function(m, "leaf")).unwrap();
        single
            .run(async move {
                for i in 0..100 * round {
                    leaf(i);
                }
            })
            .unwrap();
        total += 100 * round;
        assert_eq!(calls_of(&s, "leaf"), 100 * round, "round {round}");
        assert_eq!(calls_of(&stays, "leaf"), total, "round {round}");
    }
    // Calls outside any process are counted by no session.
    leaf(1);
    assert_eq!(calls_of(&stays, "leaf"), total);
}

#[test]
fn count_only_sessions_and_a_measuring_session_on_one_function_each_see_every_call() {
    // One worker thread: the thread's count cache holds both counting sessions (the two-slot
    // case counted inline), while the third session measures the process, which the inline
    // case must leave to the measuring path.
    let single = Node::builder().current_thread().build().unwrap();
    let leaf_only = TracePattern::function(module_path!(), "leaf");
    let one = single.trace_session().unwrap();
    one.set_pattern(&leaf_only).unwrap();
    let two = single.trace_session().unwrap();
    two.set_pattern(&leaf_only).unwrap();
    single
        .run(async {
            for i in 0..100 {
                leaf(i);
            }
        })
        .unwrap();
    assert_eq!((calls_of(&one, "leaf"), calls_of(&two, "leaf")), (100, 100));
    let timing = single
        .trace_session_with(runtime::trace::TraceTypes::CALL_TIME)
        .unwrap();
    timing.set_pattern(&leaf_only).unwrap();
    timing
        .enable_trace(runtime::trace::ProcessSpec::New, true)
        .unwrap();
    single
        .run(async {
            for i in 0..100 {
                leaf(i);
            }
        })
        .unwrap();
    assert_eq!((calls_of(&one, "leaf"), calls_of(&two, "leaf")), (200, 200));
    let measured: u64 = timing
        .measurements()
        .iter()
        .flat_map(|p| p.functions.iter())
        .map(|f| f.calls)
        .sum();
    assert_eq!(measured, 100);
}

/// `exit_self` never returns: it unwinds the process through its own traced frame, which is
/// counted once and leaves nothing behind (the process ends with the reason it gave).
#[test]
fn exit_self_is_counted_as_it_unwinds_the_process() {
    let node = node();
    let s = node.trace_session().unwrap();
    assert_eq!(
        s.set_pattern(&TracePattern::function("runtime", "exit_self"))
            .unwrap(),
        1
    );
    let reasons = node
        .run(async {
            let mut reasons = Vec::new();
            for _ in 0..3 {
                let (_, mref) = runtime::spawn_monitor(async {
                    runtime::exit_self(runtime::ExitReason::custom("done"))
                })
                .unwrap();
                let down: runtime::Down =
                    runtime::receive_where(move |d: &runtime::Down| d.monitor_ref == mref).await;
                reasons.push(down.reason);
            }
            reasons
        })
        .unwrap();
    assert_eq!(reasons, vec![runtime::ExitReason::custom("done"); 3]);
    assert_eq!(calls_of(&s, "exit_self"), 3);
}
