//! Fairness: while every worker runs processes that yield in a loop, a runnable process is
//! polled within a bounded number of their polls, however it became runnable (spawned from a
//! thread outside the node or from a process, woken by a message from either).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use runtime::{Node, receive, send, spawn};

/// The most polls of the yielding processes a runnable process may wait for: the workers
/// look at the node's shared queue at least every 61 polls each, so a few hundred is far
/// over what a fair scheduler needs, and far under the millions of a starved process.
const BOUND: u64 = 5_000;

/// How long a starved probe is waited for before the test says so (not a speed bound: a
/// fair run takes microseconds).
const PATIENCE: Duration = Duration::from_secs(60);

/// A node of two workers, each kept busy by `yielders` processes that do a little work, count
/// their poll, and yield, until `stop`.
fn busy_node(yielders: usize) -> (Node, Arc<AtomicU64>, Arc<AtomicBool>) {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let polls = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    for _ in 0..yielders {
        let (polls, stop) = (Arc::clone(&polls), Arc::clone(&stop));
        node.spawn(async move {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for i in 0..2_000u64 {
                    x = std::hint::black_box(x.rotate_left(5) ^ i);
                }
                polls.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        })
        .unwrap();
    }
    // Both workers are in the loop before the probes come.
    let deadline = std::time::Instant::now() + PATIENCE;
    while polls.load(Ordering::Relaxed) < 1_000 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    (node, polls, stop)
}

/// How many polls of the yielders passed between `before` and the probe's report.
fn waited(rx: &mpsc::Receiver<u64>, before: u64, what: &str) -> u64 {
    let at = rx
        .recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("{what}: not polled in {PATIENCE:?} of busy workers"));
    at.saturating_sub(before)
}

#[test]
fn a_process_spawned_from_outside_runs_while_the_workers_yield_in_a_loop() {
    for yielders in [1, 2, 3, 8] {
        let (node, polls, stop) = busy_node(yielders);
        for round in 0..20 {
            let (tx, rx) = mpsc::channel();
            let counter = Arc::clone(&polls);
            let before = polls.load(Ordering::Relaxed);
            node.spawn(async move {
                let _ = tx.send(counter.load(Ordering::Relaxed));
            })
            .unwrap();
            let waited = waited(&rx, before, "a process spawned from outside");
            assert!(
                waited <= BOUND,
                "{yielders} yielders, round {round}: the new process waited {waited} polls"
            );
        }
        stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_process_woken_from_outside_runs_while_the_workers_yield_in_a_loop() {
    let (node, polls, stop) = busy_node(2);
    let (tx, rx) = mpsc::channel();
    let counter = Arc::clone(&polls);
    let waiter = node
        .spawn(async move {
            loop {
                let () = receive().await;
                let _ = tx.send(counter.load(Ordering::Relaxed));
            }
        })
        .unwrap();
    for round in 0..20 {
        let before = polls.load(Ordering::Relaxed);
        node.send(waiter, ());
        let waited = waited(&rx, before, "a process woken from outside");
        assert!(
            waited <= BOUND,
            "round {round}: the woken process waited {waited} polls"
        );
    }
    stop.store(true, Ordering::Relaxed);
}

#[test]
fn a_process_spawned_and_woken_by_a_yielder_runs_while_the_workers_yield_in_a_loop() {
    let (node, polls, stop) = busy_node(2);
    let (tx, rx) = mpsc::channel::<u64>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Arc::new(std::sync::Mutex::new(go_rx));
    let counter = Arc::clone(&polls);
    // A yielder of its own that, each time it is asked, spawns a probe and wakes a waiter.
    node.spawn(async move {
        let waiter = {
            let (tx, counter) = (tx.clone(), Arc::clone(&counter));
            spawn(async move {
                loop {
                    let () = receive().await;
                    let _ = tx.send(counter.load(Ordering::Relaxed));
                }
            })
            .unwrap()
        };
        loop {
            let asked = go_rx.lock().unwrap().try_recv();
            match asked {
                Ok(()) => {
                    let (tx, counter) = (tx.clone(), Arc::clone(&counter));
                    spawn(async move {
                        let _ = tx.send(counter.load(Ordering::Relaxed));
                    })
                    .unwrap();
                    send(waiter, ());
                }
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
            tokio::task::yield_now().await;
        }
    })
    .unwrap();
    for round in 0..20 {
        let before = polls.load(Ordering::Relaxed);
        go_tx.send(()).unwrap();
        for what in ["spawned", "woken"] {
            let waited = waited(&rx, before, what);
            assert!(
                waited <= BOUND,
                "round {round}: a process {what} by a yielder waited {waited} polls"
            );
        }
    }
    drop(go_tx);
    stop.store(true, Ordering::Relaxed);
}
