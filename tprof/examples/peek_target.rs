//! A node of two workers, both stuck in loops, for peek: two processes spin in the traced
//! `spin` forever, a registered `idle` process waits in `receive`, and `left` and `right`
//! call each other (a deadlock). With `TPROF_PEEK=1`,
//! `kill -USR1 <pid>` prints every process and a second of samples on standard error:
//!
//! ```sh
//! TPROF_PEEK=1 cargo run -p tprof --example peek_target &
//! kill -USR1 $!
//! ```
//!
//! It prints `ready` once both spinners run, and runs until killed.

use std::hint::black_box;

use runtime::gen_server::{self, CallReply, Caller, GenServer, Timeout};
use runtime::{ExitReason, Node, Pid};

/// The request type of `left` and `right`'s calls (neither is a server: each only waits).
struct Peer;

impl GenServer for Peer {
    type Args = ();
    type Call = ();
    type Reply = ();
    type Cast = ();
    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Peer)
    }
    async fn handle_call(&mut self, (): (), _from: &mut Caller<()>) -> CallReply<()> {
        CallReply::NoReply
    }
}

/// A process registered as `name` that calls the pid it is sent, waiting for ever.
fn caller(node: &Node, name: &str) -> Pid {
    let pid = node
        .handle()
        .spawn(async {
            let callee: Pid = runtime::receive().await;
            let _ = gen_server::call::<Peer>(callee, (), Timeout::Infinity).await;
        })
        .expect("spawn a caller");
    node.handle()
        .register(name, pid)
        .expect("register a caller");
    pid
}

#[runtime::traced(module = "peek_target")]
fn spin() -> u64 {
    let mut x = 0u64;
    loop {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        if x == 42 {
            return x;
        }
    }
}

fn main() {
    let node = Node::builder()
        .worker_threads(2)
        .build()
        .expect("start a node");
    match tprof::peek::install_from_env(node.handle()) {
        Ok(true) => {}
        Ok(false) => eprintln!("peek_target: set TPROF_PEEK=1 to peek on SIGUSR1"),
        Err(e) => eprintln!("peek_target: {e}"),
    }
    let idle = node
        .handle()
        .spawn(async {
            let _: u8 = runtime::receive().await;
        })
        .expect("spawn idle");
    node.handle().register("idle", idle).expect("register idle");
    let left = caller(&node, "left");
    let right = caller(&node, "right");
    node.send(left, right);
    node.send(right, left);
    // Both in their calls before the spinners take the workers.
    for pid in [left, right] {
        while node.process_info(pid).map(|i| i.status) != Some(runtime::ProcessStatus::Waiting) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let (started, ready) = std::sync::mpsc::channel();
    for _ in 0..2 {
        let started = started.clone();
        node.handle()
            .spawn(async move {
                let _ = started.send(());
                spin();
            })
            .expect("spawn a spinner");
    }
    for _ in 0..2 {
        ready.recv().expect("a spinner started");
    }
    println!("ready");
    loop {
        std::thread::park();
    }
}
