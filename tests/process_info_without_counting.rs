//! `process_info` without the counting allocator: no heap figures, and still the traced
//! function a measured process is suspended in (its heap account is then taken only when a
//! trace session first measures it).

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
