//! A program on the runtime that does not install the counting allocator: `tprof run --type
//! call_memory` cannot profile it, and says why. With `--drop-while-running`, its `main` ends
//! (dropping its node) while a process is still in the middle of a long poll: what that poll
//! measured is in the profile all the same. With `--three-nodes`, it runs three nodes, one after
//! another.

use std::time::{Duration, Instant};

use runtime::{Node, traced};

#[traced]
fn work(n: u64) -> u64 {
    (1..=n).sum()
}

#[traced]
fn spin(for_how_long: Duration) -> u64 {
    let start = Instant::now();
    let mut total = 0;
    while start.elapsed() < for_how_long {
        total += work(100);
    }
    total
}

fn main() {
    let node = Node::new().expect("start a node");
    if std::env::args().any(|a| a == "--drop-while-running") {
        node.spawn(async {
            spin(Duration::from_millis(300));
        })
        .expect("spawn the spinner");
        std::thread::sleep(Duration::from_millis(50));
        println!("dropping the node");
        return; // the node is dropped with the spinner in its poll
    }
    let mut total = node.run(async { work(100) }).expect("the work runs");
    node.stop();
    if std::env::args().any(|a| a == "--three-nodes") {
        for _ in 0..2 {
            let node = Node::new().expect("start a node");
            total += node.run(async { work(100) }).expect("the work runs");
            node.stop();
        }
    }
    println!("total {total}");
}
