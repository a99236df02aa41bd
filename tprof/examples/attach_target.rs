//! A long-running service for `tprof attach`: a registered `counter` process that, for each
//! message, calls the traced `tally` and `step`. It opens its control endpoint as the
//! environment says (`TPROF_CONTROL=1` for the default socket, or a socket path), prints the
//! socket's path, and serves until its standard input closes:
//!
//! ```sh
//! TPROF_CONTROL=1 cargo run -p tprof --example attach_target &
//! tprof attach $! -c 'start; set_pattern attach_target; enable_trace counter; sample 1 wall; collect'
//! ```
//!
//! A line `work N` on its standard input sends the counter N messages and prints `done TOTAL`
//! once they are counted, so a test knows the calls were made. A line `park N` spawns N idle
//! processes, the `i`th with `i % 10` messages it never takes in its mailbox, and prints
//! `parked N` (for `tprof top`: `park 100000` makes a node of 100,000 processes).

use std::io::BufRead;

use runtime::{Node, Pid, receive, send};

#[runtime::traced(module = "attach_target")]
fn step(n: u64) -> u64 {
    n * 2
}

#[runtime::traced(module = "attach_target")]
fn tally(total: u64, n: u64) -> u64 {
    total + step(n)
}

fn main() {
    let node = Node::new().expect("start a node");
    let endpoint = match tprof::control::ControlEndpoint::open_from_env(node.handle()) {
        Ok(Some(endpoint)) => endpoint,
        Ok(None) => {
            eprintln!("attach_target: set TPROF_CONTROL=1 (or a socket path) to open the endpoint");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("attach_target: {e}");
            std::process::exit(2);
        }
    };
    let counter = node
        .handle()
        .spawn(async {
            let mut total = 0;
            loop {
                let (from, n): (Option<Pid>, u64) = receive().await;
                total = tally(total, n);
                if let Some(from) = from {
                    send(from, total);
                }
            }
        })
        .expect("spawn the counter");
    node.handle()
        .register("counter", counter)
        .expect("register the counter");
    println!("control: {}", endpoint.path().display());
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if let Some(n) = line
            .strip_prefix("park ")
            .and_then(|n| n.trim().parse::<u64>().ok())
        {
            for i in 0..n {
                let parked = node
                    .handle()
                    .spawn(async {
                        // Waits for a text that never comes; the numbers stay queued.
                        let _: String = receive().await;
                    })
                    .expect("spawn a parked process");
                for m in 0..i % 10 {
                    node.handle().send(parked, m);
                }
            }
            println!("parked {n}");
        }
        if let Some(n) = line
            .strip_prefix("work ")
            .and_then(|n| n.trim().parse::<u64>().ok())
        {
            let total = node
                .run(async move {
                    for i in 1..n {
                        send(counter, (None::<Pid>, i));
                    }
                    send(counter, (Some(runtime::self_pid()), n));
                    receive::<u64>().await
                })
                .expect("the work runs");
            println!("done {total}");
        }
    }
    drop(endpoint);
    node.stop();
}
