//! The wall sampler: where processes wait, read without stopping them, at a bounded cost per
//! tick.

mod common;

use std::time::{Duration, Instant};

use runtime::gen_server::{self, CallReply, Caller, GenServer, StartOptions, Timeout};
use runtime::sample::{ProcessState, Sample, SampleOptions, SampleSession, Sampler};
use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{ExitReason, Node, Pid, receive};

/// A server that answers no call (it keeps each caller's reply for ever): its callers wait in
/// `call`.
struct Silent(Vec<gen_server::ReplyTo<()>>);

impl GenServer for Silent {
    type Args = ();
    type Call = ();
    type Reply = ();
    type Cast = ();
    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Silent(Vec::new()))
    }
    async fn handle_call(&mut self, (): (), from: &mut Caller<()>) -> CallReply<()> {
        self.0.extend(from.defer());
        CallReply::NoReply
    }
}

#[runtime::traced]
async fn waits_for_a_message() -> u64 {
    receive::<u64>().await
}

#[runtime::traced]
async fn asks_the_silent_server(server: Pid) {
    let _ = gen_server::call::<Silent>(server, (), Timeout::Infinity).await;
}

fn names(s: &Sample) -> Vec<String> {
    s.traced
        .iter()
        .map(|cs| format!("{}::{}", cs.module(), cs.function()))
        .collect()
}

/// Waits (within a generous bound) until `found` finds a sample among the session's.
fn sample_until(session: &SampleSession, what: &str, found: impl Fn(&Sample) -> bool) -> Sample {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = session.samples().samples.into_iter().find(&found) {
            return s;
        }
        assert!(Instant::now() < deadline, "no sample of {what} within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn finds_a_process_in_receive_and_one_in_call_with_their_paths() {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(SampleOptions::new().sampler(Sampler::Wall).hz(200))
        .expect("wall session");
    common::trace_new_processes(session.trace(), &TracePattern::all());
    let receiver = node
        .spawn(async {
            waits_for_a_message().await;
        })
        .expect("spawn");
    let server = node
        .block_on(gen_server::start_on::<Silent>(
            node.handle(),
            (),
            StartOptions::new().name("silent"),
        ))
        .expect("server")
        .pid();
    let caller = node
        .spawn(async move { asks_the_silent_server(server).await })
        .expect("spawn");

    let in_receive = sample_until(&session, "the receiver", |s| {
        s.pid == Some(receiver) && s.state == Some(ProcessState::Receive)
    });
    let path = names(&in_receive);
    assert_eq!(
        path.last().map(String::as_str),
        Some("runtime::receive"),
        "{path:?}"
    );
    assert!(
        path.iter().any(|f| f.ends_with("::waits_for_a_message")),
        "{path:?}"
    );

    let in_call = sample_until(&session, "the caller", |s| {
        s.pid == Some(caller) && s.state == Some(ProcessState::Call)
    });
    let path = names(&in_call);
    assert_eq!(
        path.last().map(String::as_str),
        Some("runtime::gen_server::call"),
        "{path:?}"
    );
    assert!(
        path.iter().any(|f| f.ends_with("::asks_the_silent_server")),
        "{path:?}"
    );

    // The server itself waits in its loop, under its registered name, with the call's
    // request taken from its mailbox.
    let the_server = sample_until(&session, "the server", |s| s.pid == Some(server));
    assert_eq!(the_server.registered_name.as_deref(), Some("silent"));
    assert_eq!(the_server.mailbox_len, 0);
    assert!(the_server.thread.is_none() && the_server.native.is_empty());

    // A census sees all three at once.
    let census = session.census();
    for pid in [receiver, server, caller] {
        assert!(
            census.iter().any(|s| s.pid == Some(pid)),
            "{pid} in the census"
        );
    }
    assert!(census.iter().all(|s| s.weight == 1.0));
    node.send(receiver, 1u64);
}

/// With many processes, each tick reads at most `per_tick` of them, and the weights still
/// estimate how many processes there are.
#[test]
fn a_tick_reads_a_bounded_number_and_weights_estimate_the_population() {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(
            SampleOptions::new()
                .sampler(Sampler::Wall)
                .hz(500)
                .per_tick(16),
        )
        .expect("wall session");
    common::trace_new_processes(session.trace(), &TracePattern::all());
    let n = 2_000;
    let pids: Vec<Pid> = (0..n)
        .map(|_| {
            node.spawn(async {
                waits_for_a_message().await;
            })
            .expect("spawn")
        })
        .collect();
    session.clear();
    let deadline = Instant::now() + Duration::from_secs(60);
    let data = loop {
        let data = session.samples();
        let mut ticks: Vec<u64> = data.samples.iter().map(|s| s.time_ns).collect();
        ticks.dedup();
        if ticks.len() >= 40 {
            break data;
        }
        assert!(Instant::now() < deadline, "40 ticks within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut per_tick: std::collections::BTreeMap<u64, (usize, f64)> = Default::default();
    for s in &data.samples {
        let e = per_tick.entry(s.time_ns).or_default();
        e.0 += 1;
        e.1 += s.weight;
    }
    assert!(
        per_tick.values().all(|(k, _)| *k <= 16),
        "at most 16 reads a tick"
    );
    let mean = per_tick.values().map(|(_, w)| w).sum::<f64>() / per_tick.len() as f64;
    assert!(
        (0.8 * n as f64..=1.2 * n as f64).contains(&mean),
        "estimated {mean} processes of {n}"
    );
    for pid in pids {
        node.send(pid, 1u64);
    }
}

#[runtime::traced]
async fn waits_with_a_timer() -> Option<u64> {
    runtime::receive_timeout::<u64>(std::time::Duration::from_secs(600)).await
}

/// What a process waits for is known whatever the patterns: with only this module's
/// functions traced (none of the runtime's), a process in `receive`, one in
/// `receive_timeout` and one in a call are told apart, with their paths.
#[test]
fn states_do_not_depend_on_the_runtime_being_traced() {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(SampleOptions::new().sampler(Sampler::Wall).hz(200))
        .expect("wall session");
    common::trace_new_processes(session.trace(), &TracePattern::module(module_path!()));
    let receiver = node
        .spawn(async {
            waits_for_a_message().await;
        })
        .expect("spawn");
    let timed = node
        .spawn(async {
            waits_with_a_timer().await;
        })
        .expect("spawn");
    let server = node
        .block_on(gen_server::start_on::<Silent>(
            node.handle(),
            (),
            StartOptions::new(),
        ))
        .expect("server")
        .pid();
    let caller = node
        .spawn(async move { asks_the_silent_server(server).await })
        .expect("spawn");
    for (pid, state, function) in [
        (receiver, ProcessState::Receive, "waits_for_a_message"),
        (timed, ProcessState::ReceiveTimeout, "waits_with_a_timer"),
        (caller, ProcessState::Call, "asks_the_silent_server"),
    ] {
        let s = sample_until(&session, function, |s| {
            s.pid == Some(pid) && s.state == Some(state)
        });
        let path: Vec<&str> = s.traced.iter().map(|cs| cs.function()).collect();
        assert_eq!(path, [function], "{state:?}");
    }
    node.send(receiver, 1u64);
    node.send(timed, 1u64);
}

/// A server that answers every call.
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
        CallReply::Reply(n)
    }
}

/// Waits (within a generous bound) until `node` says `pid` is suspended.
fn until_waiting(node: &Node, pid: Pid) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while node.process_info(pid).map(|i| i.status) != Some(runtime::ProcessStatus::Waiting) {
        assert!(Instant::now() < deadline, "{pid} never waited");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Processes that suspended before any session existed are told apart by a census taken
/// later: in `receive`, in `receive_timeout`, in a call (and to whom), and, after a call that
/// returned, waiting elsewhere (no stale call).
#[test]
fn a_census_tells_waits_that_began_before_the_session() {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let receiver = node
        .spawn(async {
            receive::<u64>().await;
        })
        .expect("spawn");
    let timed = node
        .spawn(async {
            runtime::receive_timeout::<u64>(Duration::from_secs(600)).await;
        })
        .expect("spawn");
    let silent = node
        .block_on(gen_server::start_on::<Silent>(
            node.handle(),
            (),
            StartOptions::new(),
        ))
        .expect("server")
        .pid();
    let echo = node
        .block_on(gen_server::start_on::<Echo>(
            node.handle(),
            (),
            StartOptions::new(),
        ))
        .expect("server")
        .pid();
    let caller = node
        .spawn(async move {
            let _ = gen_server::call::<Silent>(silent, (), Timeout::Infinity).await;
        })
        .expect("spawn");
    let answered = node
        .spawn(async move {
            let echoed = gen_server::call::<Echo>(echo, 7, Timeout::Infinity).await;
            assert_eq!(echoed, Ok(7));
            std::future::pending::<()>().await;
        })
        .expect("spawn");
    for pid in [receiver, timed, silent, echo, caller, answered] {
        until_waiting(&node, pid);
    }
    let session = node
        .sample_session(SampleOptions::new().sampler(Sampler::Wall))
        .expect("wall session");
    session
        .trace()
        .enable_trace(ProcessSpec::All, true)
        .expect("flags");
    let census = session.census();
    let seen = |pid: Pid| {
        census
            .iter()
            .find(|s| s.pid == Some(pid))
            .map(|s| (s.state, s.callee))
            .unwrap_or_else(|| panic!("{pid} in the census: {census:?}"))
    };
    assert_eq!(seen(receiver), (Some(ProcessState::Receive), None));
    assert_eq!(seen(timed), (Some(ProcessState::ReceiveTimeout), None));
    assert_eq!(seen(silent), (Some(ProcessState::Receive), None));
    assert_eq!(seen(caller), (Some(ProcessState::Call), Some(silent)));
    assert_eq!(seen(answered), (Some(ProcessState::Waiting), None));
    node.send(receiver, 1u64);
    node.send(timed, 1u64);
}
