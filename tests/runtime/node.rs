//! Nodes: flavours, several per OS process, start_on, dropping without blocking or leaking.

use std::sync::mpsc;
use std::time::Duration;

use runtime::{Node, NodeHandle, Pid, receive, self_pid, send, spawn};

const LONG: Duration = Duration::from_secs(30);

#[test]
fn current_thread_and_multi_thread_nodes_run_processes() {
    for node in [
        Node::builder().current_thread().build().unwrap(),
        Node::builder().worker_threads(2).build().unwrap(),
        Node::new().unwrap(),
    ] {
        let sum = node
            .run(async {
                let me = self_pid();
                for i in 0..10u64 {
                    spawn(async move { send(me, i) }).unwrap();
                }
                let mut sum = 0;
                for _ in 0..10 {
                    sum += receive::<u64>().await;
                }
                sum
            })
            .unwrap();
        assert_eq!(sum, 45);
    }
}

#[test]
fn nodes_are_isolated_and_pids_name_their_node() {
    let a = Node::new().unwrap();
    let b = Node::new().unwrap();
    assert_ne!(a.id(), b.id());
    let pa = a.run(async { self_pid() }).unwrap();
    assert_eq!(pa.node(), a.id());
    let idle = a
        .spawn(async {
            let () = receive().await;
        })
        .unwrap();
    assert!(a.processes().contains(&idle));
    assert!(!b.processes().contains(&idle));
    // A pid of another node in this OS process is still reachable by send.
    let (tx, rx) = mpsc::channel();
    let on_b = b
        .spawn(async move {
            let n: u8 = receive().await;
            tx.send(n).unwrap();
        })
        .unwrap();
    a.run(async move { send(on_b, 5u8) }).unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), 5);
    send(idle, ());
}

#[test]
fn pids_print_and_parse_back() {
    let node = Node::new().unwrap();
    let pid = node.run(async { self_pid() }).unwrap();
    let text = pid.to_string();
    assert!(text.starts_with(&format!("<{}.", node.id())));
    assert_eq!(text.parse::<Pid>().unwrap(), pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_starts_on_an_existing_runtime() {
    let node = Node::start_on(tokio::runtime::Handle::current());
    let doubled = node
        .run_async(async {
            let me = self_pid();
            spawn(async move { send(me, 21u32 * 2) }).unwrap();
            receive::<u32>().await
        })
        .await
        .unwrap();
    assert_eq!(doubled, 42);
    node.shutdown().await;
    assert!(node.processes().is_empty());
}

struct OnDrop(mpsc::Sender<&'static str>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        let _ = self.0.send("dropped");
    }
}

#[test]
fn dropping_a_node_never_blocks_and_leaks_nothing() {
    let (tx, rx) = mpsc::channel();
    let handle: NodeHandle;
    {
        let node = Node::builder().worker_threads(2).build().unwrap();
        handle = node.handle().clone();
        let (started_tx, started_rx) = mpsc::channel();
        for _ in 0..10 {
            let tx = tx.clone();
            let started_tx = started_tx.clone();
            node.spawn(async move {
                let _guard = OnDrop(tx);
                started_tx.send(()).unwrap();
                // Never yields control back voluntarily for long, never ends by itself.
                loop {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            })
            .unwrap();
        }
        for _ in 0..10 {
            started_rx.recv_timeout(LONG).unwrap();
        }
        // Drop returns at once even though every process would run for ever.
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("dropper".into())
            .spawn(move || {
                drop(node);
                done_tx.send(()).unwrap();
            })
            .unwrap();
        done_rx
            .recv_timeout(LONG)
            .expect("dropping a node returned");
    }
    for _ in 0..10 {
        assert_eq!(rx.recv_timeout(LONG).unwrap(), "dropped");
    }
    // Everything that referred to the node's internals is gone but our handle.
    let start = std::time::Instant::now();
    while handle.__strong_count() > 1 {
        assert!(start.elapsed() < LONG, "node internals leaked");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(handle.processes().is_empty());
    assert!(handle.is_stopping());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_node_on_a_borrowed_runtime_kills_its_processes() {
    let (tx, rx) = mpsc::channel();
    let node = Node::start_on(tokio::runtime::Handle::current());
    let handle = node.handle().clone();
    let (started_tx, started_rx) = mpsc::channel();
    node.spawn(async move {
        let _guard = OnDrop(tx);
        started_tx.send(()).unwrap();
        let () = receive().await;
    })
    .unwrap();
    tokio::task::spawn_blocking(move || started_rx.recv_timeout(LONG))
        .await
        .unwrap()
        .unwrap();
    drop(node);
    let got = tokio::task::spawn_blocking(move || rx.recv_timeout(LONG))
        .await
        .unwrap();
    assert_eq!(got.unwrap(), "dropped");
    let start = std::time::Instant::now();
    while handle.__strong_count() > 1 {
        assert!(start.elapsed() < LONG, "node internals leaked");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A helper task outlives its process, but not its node: dropping a node on a runtime it does
/// not own cancels the helpers still running, which would otherwise keep its internals alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_node_on_a_borrowed_runtime_cancels_the_helpers_of_its_processes() {
    let (tx, rx) = mpsc::channel();
    let node = Node::start_on(tokio::runtime::Handle::current());
    let handle = node.handle().clone();
    let (task_tx, task_rx) = tokio::sync::oneshot::channel();
    let owner = node
        .spawn(async move {
            let helper = runtime::spawn_task(async move {
                let _guard = OnDrop(tx);
                std::future::pending::<()>().await;
            })
            .unwrap();
            let _ = task_tx.send(helper);
        })
        .unwrap();
    let helper = task_rx.await.unwrap();
    // Its process has ended; the helper runs on.
    let start = std::time::Instant::now();
    while handle.processes().contains(&owner) {
        assert!(start.elapsed() < LONG, "the owner ended");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!helper.is_finished());
    drop(node);
    let joined = tokio::time::timeout(LONG, helper).await.expect("cancelled");
    assert!(joined.is_err_and(|e| e.is_cancelled()));
    assert_eq!(
        tokio::task::spawn_blocking(move || rx.recv_timeout(LONG))
            .await
            .unwrap()
            .unwrap(),
        "dropped"
    );
    let start = std::time::Instant::now();
    while handle.__strong_count() > 1 {
        assert!(start.elapsed() < LONG, "node internals leaked");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(handle.processes().is_empty());
}
