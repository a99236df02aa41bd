//! Traced calls and gen_server round trips on a current-thread node, for counting the
//! instructions of each with callgrind: `traced_call_ir N MODE`, where MODE is `untraced`
//! (the same body without `#[traced]`), `disabled` (no session wants the function),
//! `call_count`, `call_time` or `call_memory` (one session tracing the function and the
//! calling process), or `gen_server` (N call round trips to a gen_server, nothing traced).
//!
//! Run it at N and 2N; the cost of one call is the difference over N:
//!
//! ```text
//! cargo build --release --example traced_call_ir
//! valgrind --tool=callgrind --separate-threads=yes target/release/examples/traced_call_ir 100000 call_time
//! ```
//!
//! Read the main thread's total (`callgrind.out.PID-01`): the node runs on it.

use std::hint::black_box;

use runtime::gen_server::{self, CallReply, Caller, GenServer, Timeout};
use runtime::trace::{ProcessSpec, TracePattern, TraceTypes};
use runtime::{ExitReason, Node};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

#[inline(never)]
fn untraced(x: u64) -> u64 {
    black_box(x).wrapping_mul(31).rotate_left(7)
}

#[runtime::traced]
#[inline(never)]
fn traced_fn(x: u64) -> u64 {
    black_box(x).wrapping_mul(31).rotate_left(7)
}

/// A server that answers each call with the request plus one.
struct Echo;

impl GenServer for Echo {
    type Args = ();
    type Call = u64;
    type Reply = u64;
    type Cast = ();

    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Echo)
    }

    async fn handle_call(&mut self, n: u64, _from: &mut Caller<u64>) -> CallReply<u64> {
        CallReply::Reply(n + 1)
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).expect(
        "usage: traced_call_ir N untraced|disabled|call_count|call_time|call_memory|gen_server",
    );
    let mode = args.next().unwrap_or_else(|| "disabled".to_owned());
    let node = Node::builder().current_thread().build().expect("node");
    let types = match mode.as_str() {
        "call_count" => Some(TraceTypes::CALL_COUNT),
        "call_time" => Some(TraceTypes::CALL_TIME),
        "call_memory" => Some(TraceTypes::CALL_MEMORY),
        "untraced" | "disabled" | "gen_server" => None,
        other => panic!("no mode {other}"),
    };
    let session = types.map(|types| {
        let session = node.trace_session_with(types).expect("session");
        session
            .set_pattern(&TracePattern::function(module_path!(), "traced_fn"))
            .expect("pattern");
        session.enable_trace(ProcessSpec::New, true).expect("flags");
        session
    });
    let f: fn(u64) -> u64 = if mode == "untraced" {
        untraced
    } else {
        traced_fn
    };
    let round_trips = mode == "gen_server";
    let sum = node
        .run(async move {
            let mut acc = 0u64;
            if round_trips {
                let server = gen_server::start::<Echo>((), Default::default())
                    .await
                    .expect("server");
                for i in 0..n {
                    acc = acc.wrapping_add(server.call(i, Timeout::Infinity).await.expect("reply"));
                }
                runtime::exit(server.pid(), ExitReason::Kill);
            } else {
                for i in 0..n {
                    acc = acc.wrapping_add(f(i));
                }
            }
            acc
        })
        .expect("the process ran");
    black_box(sum);
    if let Some(session) = session {
        let calls: u64 = session
            .measurements()
            .iter()
            .flat_map(|p| &p.functions)
            .map(|f| f.calls)
            .sum::<u64>()
            + session.call_counts().iter().map(|c| c.calls).sum::<u64>();
        eprintln!("{mode}: {calls} calls counted");
    }
}
