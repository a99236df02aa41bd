//! Without the counting allocator: `process_info` has no heap figures, and still the traced
//! function a measured process is suspended in (its heap account is then taken only when a
//! trace session first measures it); a heap limit is refused, with an error that says how to
//! install the allocator.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use runtime::trace::{ProcessSpec, TracePattern, TraceTypes};
use runtime::{Node, heap, receive, send, traced};

#[traced]
async fn waits_for_a_message() -> u32 {
    receive::<u32>().await
}

#[test]
fn a_measured_process_names_the_function_it_is_suspended_in() {
    assert!(!heap::installed());
    let node = Node::builder().worker_threads(2).build().unwrap();
    let s = node.trace_session_with(TraceTypes::CALL_TIME).unwrap();
    s.set_pattern(&TracePattern::function(
        module_path!(),
        "waits_for_a_message",
    ))
    .unwrap();
    s.enable_trace(ProcessSpec::New, true).unwrap();
    let (current, heap_figures, untraced) = node
        .run(async {
            let untraced = runtime::process_info(runtime::self_pid()).unwrap();
            assert_eq!(
                heap::process_heap(runtime::self_pid()),
                Err(heap::HeapError::NotInstalled)
            );
            let pid = runtime::spawn(async {
                waits_for_a_message().await;
            })
            .unwrap();
            // Wait until it has been polled and suspended.
            let mut current = None;
            let mut heap_figures = None;
            for _ in 0..1000 {
                let info = runtime::process_info(pid).unwrap();
                if info.current_function.is_some() {
                    current = info.current_function;
                    heap_figures = Some(info.heap);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            send(pid, 7u32);
            (current, heap_figures, untraced)
        })
        .unwrap();
    assert_eq!(current.unwrap().function(), "waits_for_a_message");
    assert_eq!(
        heap_figures,
        Some(None),
        "no heap figures without the allocator"
    );
    assert!(untraced.current_function.is_none());
    assert!(untraced.heap.is_none());
    drop(s);
}

#[test]
fn a_heap_limit_is_refused_with_an_error_that_says_how_to_install_the_allocator() {
    assert!(!heap::installed());
    let node = Node::builder().current_thread().build().unwrap();
    let err = node
        .spawn_opt(
            async {},
            runtime::SpawnOptions::new().max_heap_size(1 << 20),
        )
        .unwrap_err();
    assert_eq!(
        err,
        runtime::SpawnError::HeapLimit(heap::HeapError::NotInstalled)
    );
    let message = err.to_string();
    assert!(message.contains("max_heap_size"), "{message}");
    assert!(message.contains("#[global_allocator]"), "{message}");
    // Nothing was spawned, and the node still spawns without the limit.
    let processes = node.run(async { runtime::processes().len() }).unwrap();
    assert_eq!(processes, 1, "only the process `run` spawned");
    node.spawn(async {}).unwrap();
}
