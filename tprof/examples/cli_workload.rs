//! A small actor program with no profiling code in it: a registered `summer` process parses
//! and sums the lines other processes send it. `tprof run` profiles it from the outside:
//!
//! ```text
//! cargo build --example cli_workload -p tprof
//! cargo run -p tprof -- run --type call_memory -- target/debug/examples/cli_workload
//! ```
//!
//! Arguments: `--fail` ends with exit code 3 (after its node stopped); `--two-nodes` runs a
//! second node beside the first; `--wait-for-signal` prints `ready <os pid>` once the work is
//! done and then waits, its node running, until a signal ends it; `--lines N` sends N lines
//! (default 100: a few milliseconds; 200000 keeps a sampler busy for a while); `--keep`
//! leaves the `summer` running, holding a 1 MiB table, until its node stops (for a heap
//! snapshot to show); `--cpu-session HZ` opens a CPU sample session of its own at `HZ` on
//! its node first, and ends with exit code 2 and the error's message when it cannot.

use std::process::ExitCode;

use runtime::{Node, Pid, receive, register, self_pid, send, traced};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

#[traced]
fn parse(line: &str) -> Vec<u64> {
    line.split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect()
}

#[traced]
fn sum(numbers: &[u64]) -> u64 {
    numbers.iter().sum()
}

#[traced]
async fn summer(keep: bool) {
    // Something to see in a heap snapshot.
    let table = if keep { vec![1u8; 1 << 20] } else { Vec::new() };
    loop {
        let (from, line): (Pid, String) = receive().await;
        if line.is_empty() {
            break;
        }
        send(from, sum(&parse(&line)));
    }
    drop(table);
}

#[traced]
async fn client(lines: u64) -> u64 {
    let me = self_pid();
    let summer = runtime::whereis("summer").expect("summer is registered");
    let mut total = 0;
    for i in 0..lines {
        send(summer, (me, format!("{i}, {}, {}", i * 2, i * 3)));
        total += receive::<u64>().await;
    }
    total
}

fn workload(node: &Node, lines: u64, keep: bool) -> u64 {
    node.run(async move {
        let summer = runtime::spawn(summer(keep)).expect("spawn the summer");
        register("summer", summer).expect("register the summer");
        let total = client(lines).await;
        if !keep {
            send(summer, (self_pid(), String::new()));
        }
        total
    })
    .expect("the workload runs")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let lines = args
        .iter()
        .position(|a| a == "--lines")
        .and_then(|i| args.get(i + 1))
        .map_or(100, |n| n.parse().expect("--lines takes a number"));
    let keep = args.iter().any(|a| a == "--keep");
    let node = Node::new().expect("start a node");
    let hz = args.iter().position(|a| a == "--cpu-session").map(|i| {
        args.get(i + 1)
            .and_then(|hz| hz.parse().ok())
            .expect("--cpu-session takes a rate in Hz")
    });
    let _session = match hz.map(|hz| {
        let options = runtime::sample::SampleOptions::new().hz(hz);
        node.handle().sample_session(options)
    }) {
        Some(Err(e)) => {
            eprintln!("Error: {e}");
            return ExitCode::from(2);
        }
        Some(Ok(session)) => Some(session),
        None => None,
    };
    let mut total = workload(&node, lines, keep);
    if args.iter().any(|a| a == "--wait-for-signal") {
        println!("ready {}", std::process::id());
        let _ = std::io::Write::flush(&mut std::io::stdout());
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    if args.iter().any(|a| a == "--two-nodes") {
        let second = Node::new().expect("start a second node");
        total += workload(&second, lines, keep);
        second.stop();
    }
    node.stop();
    println!("total {total}");
    if args.iter().any(|a| a == "--fail") {
        return ExitCode::from(3);
    }
    ExitCode::SUCCESS
}
