//! A service for the pull endpoint: two registered processes, `cruncher_a` and `cruncher_b`,
//! keep the workers busy in the traced `crunch` (which allocates), and `idle` waits in
//! `receive`. It opens its control endpoint as the environment says (`TPROF_PPROF_HTTP` for
//! the pull endpoint; `TPROF_CONTROL`, `TPROF_CONTROL_TCP`), prints `http: ADDR` and serves
//! until its standard input closes. Requests show the token written beside the control
//! socket (or set `TPROF_PPROF_HTTP_OPEN=1`):
//!
//! ```sh
//! TPROF_CONTROL=/tmp/pull.sock TPROF_PPROF_HTTP=127.0.0.1:6060 cargo run -p tprof --example pull_target &
//! go tool pprof -top "http://127.0.0.1:6060/debug/pprof/profile?seconds=5&token=$(cat /tmp/pull.token)"
//! ```

use std::hint::black_box;
use std::io::BufRead;

use runtime::Node;

/// Counts what each process allocates, for `/debug/pprof/heap`.
#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// A few microseconds of work over a fresh vector.
#[runtime::traced(module = "pull_target")]
fn crunch(round: u64) -> u64 {
    let words: Vec<u64> = (0..2048).map(|i| black_box(i ^ round)).collect();
    words.iter().fold(round, |a, w| a.rotate_left(5) ^ w)
}

fn main() {
    let node = Node::builder()
        .worker_threads(2)
        .build()
        .expect("start a node");
    let endpoint = match tprof::control::ControlEndpoint::open_from_env(node.handle()) {
        Ok(Some(endpoint)) => endpoint,
        Ok(None) => {
            eprintln!("pull_target: set TPROF_PPROF_HTTP=127.0.0.1:PORT to serve /debug/pprof/");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("pull_target: {e}");
            std::process::exit(2);
        }
    };
    for name in ["cruncher_a", "cruncher_b"] {
        let pid = node
            .handle()
            .spawn(async {
                let mut round = 0u64;
                loop {
                    round = crunch(round);
                    // Other processes (the endpoint's among them) get their turn.
                    tokio::task::yield_now().await;
                }
            })
            .expect("spawn a cruncher");
        node.handle().register(name, pid).expect("register it");
    }
    let idle = node
        .handle()
        .spawn(async {
            let _: u8 = runtime::receive().await;
        })
        .expect("spawn idle");
    node.handle().register("idle", idle).expect("register idle");
    match endpoint.http_addr() {
        Some(addr) => println!("http: {addr}"),
        None => println!("control: {}", endpoint.path().display()),
    }
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
    }
    drop(endpoint);
    node.stop();
}
