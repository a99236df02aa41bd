//! Tests of the window between a new process's insert in the table (from which on other
//! processes can resolve its pid) and the hand-over to its task, through a hook that the
//! spawning thread runs right after the insert (test builds only).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;
use std::sync::mpsc;
use std::time::Duration;

use crate::{Down, ExitReason, Node, SpawnOptions, receive};

thread_local! {
    static HOOK: RefCell<Option<Box<dyn FnMut()>>> = const { RefCell::new(None) };
}

/// Runs this thread's hook, if any (called by `spawn_process` right after the insert).
pub(super) fn run() {
    // Taken out while it runs, so that a panic in it leaves no borrow behind.
    if let Some(mut hook) = HOOK.with(|h| h.borrow_mut().take()) {
        hook();
    }
}

/// Runs `f` on this thread with `hook` run (once) after the next insert.
fn with_hook<R>(hook: impl FnMut() + 'static, f: impl FnOnce() -> R) -> R {
    HOOK.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    let out = f();
    HOOK.with(|h| h.borrow_mut().take());
    out
}

/// Waits in the window until `go` says so, after telling `reached`.
fn pause(reached: mpsc::Sender<()>, go: mpsc::Receiver<()>) -> impl FnMut() {
    move || {
        reached.send(()).unwrap();
        go.recv().unwrap();
    }
}

#[test]
fn a_monitor_made_in_the_window_of_a_refused_name_gets_its_down() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    node.spawn_opt(
        std::future::pending::<()>(),
        SpawnOptions::new().name("held"),
    )
    .unwrap();
    let holder = node.whereis("held").unwrap();
    let (reached_tx, reached) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    let handle = node.handle().clone();
    std::thread::scope(|s| {
        let spawner = s.spawn(move || {
            with_hook(pause(reached_tx, go_rx), || {
                handle.spawn_opt(async {}, SpawnOptions::new().name("held"))
            })
        });
        reached.recv().unwrap();
        let newcomer = node
            .processes()
            .into_iter()
            .find(|p| *p != holder)
            .expect("the new process is in the table");
        let (monitoring, monitored) = mpsc::channel();
        let (down_tx, down) = mpsc::channel();
        node.spawn(async move {
            let mref = crate::monitor(newcomer).unwrap();
            monitoring.send(()).unwrap();
            let d: Down = receive().await;
            assert_eq!(d.monitor_ref, mref);
            down_tx.send(d.reason).unwrap();
        })
        .unwrap();
        monitored.recv().unwrap();
        go.send(()).unwrap();
        let refused = spawner.join().unwrap();
        assert!(
            matches!(refused, Err(crate::SpawnError::Name(_))),
            "{refused:?}"
        );
        assert_eq!(
            down.recv_timeout(Duration::from_secs(30)),
            Ok(ExitReason::NoProc),
            "the monitor made in the window gets its Down"
        );
    });
}

#[test]
fn a_panic_in_the_window_ends_the_process_and_wakes_a_waiting_shutdown() {
    let node = Node::builder()
        .worker_threads(2)
        .shutdown_grace(Duration::from_millis(1))
        .build()
        .unwrap();
    let (reached_tx, reached) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let handle = node.handle().clone();
    std::thread::scope(|s| {
        let spawner = s.spawn(move || {
            let mut wait = pause(reached_tx, go_rx);
            with_hook(
                move || {
                    wait();
                    panic!("a panic between the insert and the task");
                },
                || {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        handle.spawn(async {})
                    }))
                },
            )
        });
        reached.recv().unwrap();
        assert_eq!(node.processes().len(), 1, "in its slot");
        // A shutdown starts while the process is in the table, and waits for it to leave.
        let stopping = node.handle().clone();
        let stopper = s.spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(30), stopping.shutdown())
                    .await
                    .is_ok()
            })
        });
        // Give the shutdown time to reach its wait (it passes either way when it has not).
        std::thread::sleep(Duration::from_millis(50));
        go.send(()).unwrap();
        assert!(
            spawner.join().unwrap().is_err(),
            "the panic reached the spawner"
        );
        assert!(stopper.join().unwrap(), "the shutdown returned");
        assert!(node.processes().is_empty());
    });
}
