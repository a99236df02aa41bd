//! Ping-pong round trips on a current-thread node, for counting what a session adds per round
//! trip with callgrind: `pingpong_ir ROUNDS MODE`, where MODE is `none`, `cpu` (a CPU sample
//! session at `HZ`, 1 by default, so that the samples themselves cost next to nothing), `wall`
//! (a wall sample session), `count` (call_count), `time` (call_time) or `cpu+time` (a CPU
//! sample session and a call_time session at once). Every session traces every function and
//! every process.
//!
//! Run it at N and 2N rounds; the cost of a round trip is the difference over N:
//!
//! ```text
//! cargo build --release --example pingpong_ir
//! valgrind --tool=callgrind --separate-threads=yes target/release/examples/pingpong_ir 20000 cpu
//! ```
//!
//! Read the main thread's total (`callgrind.out.PID-01`): the node runs on it; the sampler's
//! drain thread, woken by the wall clock, is another thread.

use runtime::sample::{SampleOptions, Sampler};
use runtime::trace::{ProcessSpec, TracePattern, TraceTypes};
use runtime::{Node, Pid, receive, self_pid, send, spawn};

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: pingpong_ir ROUNDS none|cpu|wall|count|time|cpu+time");
    let mode = args.next().unwrap_or_else(|| "none".to_owned());
    let hz: u32 = std::env::var("HZ")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or(1);
    let node = Node::builder().current_thread().build().expect("node");
    let mut samples = Vec::new();
    let mut traces = Vec::new();
    for part in mode.split('+') {
        match part {
            "none" => {}
            "cpu" | "wall" => {
                let sampler = if part == "cpu" {
                    Sampler::Cpu
                } else {
                    Sampler::Wall
                };
                let session = node
                    .sample_session(SampleOptions::new().sampler(sampler).hz(hz))
                    .expect("sample session");
                session
                    .trace()
                    .set_pattern(&TracePattern::all())
                    .expect("pattern");
                session
                    .trace()
                    .enable_trace(ProcessSpec::New, true)
                    .expect("flags");
                samples.push(session);
            }
            "count" | "time" => {
                let types = if part == "count" {
                    TraceTypes::CALL_COUNT
                } else {
                    TraceTypes::CALL_TIME
                };
                let session = node.trace_session_with(types).expect("trace session");
                session.set_pattern(&TracePattern::all()).expect("pattern");
                session.enable_trace(ProcessSpec::New, true).expect("flags");
                traces.push(session);
            }
            other => panic!("no mode {other}"),
        }
    }
    let done = node
        .run(async move {
            let me = self_pid();
            let echo = spawn(async move {
                loop {
                    let (from, n): (Pid, u64) = receive().await;
                    if n == 0 {
                        break;
                    }
                    send(from, n);
                }
            })
            .expect("spawn");
            let mut sum = 0u64;
            for n in 1..=rounds {
                send(echo, (me, n));
                sum += receive::<u64>().await;
            }
            send(echo, (me, 0u64));
            sum
        })
        .expect("ran");
    assert_eq!(done, rounds * (rounds + 1) / 2);
    for session in &traces {
        let calls: u64 = session
            .measurements()
            .iter()
            .flat_map(|p| &p.functions)
            .map(|f| f.calls)
            .sum();
        eprintln!("{}: {calls} calls measured", session.types());
    }
    for session in &samples {
        eprintln!(
            "{} samples: {} taken",
            session.options().get_sampler(),
            session.samples().samples.len()
        );
    }
}
