//! Orderly shutdown of a node.

use std::time::Duration;

use runtime::{Exit, Node, SpawnError, receive, self_pid, send, spawn, trap_exit};

#[test]
fn shutdown_stops_every_process_and_returns_when_they_are_gone() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    for _ in 0..100 {
        node.spawn(async {
            let () = receive().await;
        })
        .unwrap();
    }
    // A process that traps exits and ignores Shutdown is killed after the grace period.
    node.spawn(async {
        trap_exit(true).unwrap();
        loop {
            let _: Exit = receive().await;
        }
    })
    .unwrap();
    assert_eq!(node.processes().len(), 101);
    let handle = node.handle().clone();
    node.block_on(handle.shutdown());
    assert!(node.processes().is_empty());
    assert!(matches!(
        node.spawn(async {}),
        Err(SpawnError::NodeStopping { .. })
    ));
}

#[test]
fn a_trapping_process_sees_shutdown_and_may_clean_up() {
    let node = Node::builder()
        .worker_threads(2)
        .shutdown_grace(Duration::from_secs(20))
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (trapping_tx, trapping) = std::sync::mpsc::channel();
    node.spawn(async move {
        trap_exit(true).unwrap();
        trapping_tx.send(()).unwrap();
        let exit: Exit = receive().await;
        tx.send(exit.reason).unwrap();
    })
    .unwrap();
    // Stopped once it traps exits: a shutdown signal before that ends it, as it would in Erlang.
    trapping.recv_timeout(Duration::from_secs(30)).unwrap();
    node.stop();
    assert_eq!(rx.try_recv().unwrap(), runtime::ExitReason::Shutdown);
}

#[test]
fn shutdown_called_from_a_process_of_the_node_completes() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    node.spawn(async move {
        let me = self_pid();
        spawn(async move { send(me, ()) }).unwrap();
        let () = receive().await;
        let handle = runtime::NodeHandle::current().unwrap();
        runtime::spawn_task(async move {
            handle.shutdown().await;
            tx.send("stopped").unwrap();
        })
        .unwrap();
        std::future::pending::<()>().await;
    })
    .unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)).unwrap(), "stopped");
    assert!(node.processes().is_empty());
}
