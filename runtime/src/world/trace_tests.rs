//! Tests of tracing that need a node: they live in the process layer, because tracing never
//! names it.

use crate::trace::TraceTypes;
use crate::trace::tree::{MADE, ROOT, begin_poll, enter};

/// Threads that end give their accumulators back: sessions on thread after thread (a node
/// per profile, each with its own worker threads) reuse them rather than leak one per path
/// per thread (56 bytes each, growing without bound before).
#[test]
fn accumulators_of_ended_threads_are_reused() {
    const PATHS: u32 = 50;
    let node = crate::Node::builder()
        .current_thread()
        .build()
        .expect("node");
    let made_before = MADE.load(std::sync::atomic::Ordering::Relaxed);
    for _ in 0..20 {
        let session = node
            .trace_session_with(TraceTypes::CALL_TIME | TraceTypes::CALL_TREE)
            .expect("session");
        let (bit, generation) = (session.slot() as usize, session.generation());
        std::thread::Builder::new()
            .name("tree".into())
            .spawn(move || {
                begin_poll(bit, generation);
                let mut parent = ROOT;
                for callsite in 0..PATHS {
                    parent = enter(bit, parent, callsite).0;
                }
            })
            .expect("thread")
            .join()
            .expect("joined");
    }
    let made = MADE.load(std::sync::atomic::Ordering::Relaxed) - made_before;
    assert!(
        (PATHS as usize..=2 * PATHS as usize).contains(&made),
        "{made} accumulators made for 20 threads of {PATHS} paths each"
    );
}
