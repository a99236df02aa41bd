//! A node of a million processes, step by step (issue 22): spawn them, profile them with
//! call_count and then call_memory (each process called 10 traced functions under the
//! profile), collect, write the archive and the pprof export. Not a criterion bench: each step
//! runs once (a million processes take seconds and gigabytes) and prints its time, the
//! resident memory after it, and the peak so far (`VmRSS`, `VmHWM` of /proc/self/status).
//!
//! Run with `cargo bench --bench million` (`TPROF_MILLION=N` for another count).

use std::hint::black_box;
use std::time::Instant;

use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{CountingAlloc, Node, Pid, receive, self_pid, send};
use tprof::export::{self, Format};
use tprof::{ServerOptions, Tprof, TraceType};

#[global_allocator]
static COUNTING: CountingAlloc = CountingAlloc::system();

macro_rules! functions {
    ($($name:ident)*) => {
        $(
            #[runtime::traced]
            #[inline(never)]
            fn $name(x: u64) -> Vec<u64> {
                vec![black_box(x).wrapping_mul(31).rotate_left(7)]
            }
        )*
        /// The traced functions each process calls, in order.
        const FUNCTIONS: &[fn(u64) -> Vec<u64>] = &[$($name),*];
    };
}

functions!(f0 f1 f2 f3 f4 f5 f6 f7 f8 f9);

/// `VmRSS` and `VmHWM` of this process, in MB.
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Runs `step`, printing its time and the memory after it.
fn step<R>(name: &str, step: impl FnOnce() -> R) -> R {
    let start = Instant::now();
    let made = step();
    let took = start.elapsed();
    let (rss, peak) = memory();
    eprintln!("{name:<44} {took:>10.2?}   rss {rss:>8.0} MB   peak {peak:>8.0} MB");
    made
}

/// Each process: on every `(from, round)` message, calls the functions and answers.
async fn process() {
    loop {
        let (from, round): (Pid, u64) = receive().await;
        for f in FUNCTIONS {
            black_box(f(round));
        }
        send(from, ());
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = std::env::var("TPROF_MILLION")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let node = Node::builder().worker_threads(2).build().expect("node");
    let pids: Vec<Pid> = step(&format!("spawn {n} processes"), || {
        node.block_on(async {
            (0..n)
                .map(|_| node.spawn(process()).expect("spawn"))
                .collect()
        })
    });
    for (round, trace_type) in [TraceType::CallCount, TraceType::CallMemory]
        .into_iter()
        .enumerate()
    {
        let tprof = node
            .block_on(Tprof::start(
                &node,
                ServerOptions::new().trace_type(trace_type),
            ))
            .expect("server");
        node.block_on(tprof.set_pattern(TracePattern::module(module_path!())))
            .expect("pattern");
        step(&format!("{trace_type:?}: enable_trace(all)"), || {
            node.block_on(tprof.enable_trace(ProcessSpec::All, true))
                .expect("flags")
        });
        let list = pids.clone();
        step(&format!("{trace_type:?}: every process calls 10"), || {
            node.run(async move {
                let me = self_pid();
                for &pid in &list {
                    send(pid, (me, round as u64));
                }
                for _ in 0..list.len() {
                    receive::<()>().await;
                }
            })
            .expect("the round ran")
        });
        let profile = step(&format!("{trace_type:?}: collect"), || {
            node.block_on(tprof.collect()).expect("collect")
        });
        if trace_type == TraceType::CallMemory {
            // call_count counts per function for the whole node, as OTP's does.
            assert_eq!(profile.processes.len(), n, "every process in the profile");
        }
        step(&format!("{trace_type:?}: archive write"), || {
            tprof::archive::write(&profile, &mut std::io::sink()).expect("archive")
        });
        step(&format!("{trace_type:?}: pprof export"), || {
            export::write(Format::Pprof, &profile, &mut std::io::sink()).expect("pprof")
        });
        drop(profile);
        node.block_on(tprof.stop()).expect("stop");
    }
}
