//! A program on the runtime that does not install the counting allocator: `tprof run --type
//! call_memory` cannot profile it, and says why.

use runtime::{Node, traced};

#[traced]
fn work(n: u64) -> u64 {
    (1..=n).sum()
}

fn main() {
    let node = Node::new().expect("start a node");
    let total = node.run(async { work(100) }).expect("the work runs");
    node.stop();
    println!("total {total}");
}
