//! Collect includes every traced call that returned before it was asked (issue 28), over many
//! rounds of "call, then collect at once": a process calls, tells the test (a message sent
//! from the very poll that made the call, or a gen_server reply), and the test collects at
//! once, while that poll may still be finishing on its worker. Each round asserts exact counts
//! (and, for call_memory, exact words): never timing.
//!
//! The process is traced (`enable_trace`) just before it is told to call, so the call may
//! come in a poll that was already running when its flag was set: the first call of a
//! gen_server started just before (whose first poll goes on past its `init` reply), or a
//! process of a fresh spawn tree (whose first poll goes on past its "ready" message).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::time::Duration;

use runtime::gen_server::{self, CallReply, Caller, GenServer, StartOptions, Timeout};
use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{Node, Pid, receive, self_pid, spawn, traced};
use tprof::{Group, Profile, ServerOptions, Tprof, TraceType};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// Allocates `n` words.
#[traced]
fn work(n: usize) -> usize {
    std::hint::black_box(Vec::<u64>::with_capacity(n)).capacity()
}

/// Rounds per test: each one a call and a collect right after it.
const ROUNDS: u64 = 300;

/// Words `work` allocates per call here.
const WORDS: usize = 2;

/// How long the test waits for a process's message before calling the run stuck.
const STUCK: Duration = Duration::from_secs(60);

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

/// A server of `trace_type` tracing this module's functions.
fn server(node: &Node, trace_type: TraceType) -> Tprof {
    let t = node
        .block_on(Tprof::start(
            node,
            ServerOptions::new().trace_type(trace_type),
        ))
        .unwrap();
    node.block_on(t.set_pattern(TracePattern::module(module_path!())))
        .unwrap();
    t
}

/// `pid`'s calls of `work` and its measurement (words for call_memory), `None` when the
/// profile has no entry for it.
fn figures(profile: &Profile, pid: Pid) -> Option<(u64, u64)> {
    profile
        .function("work")?
        .entries
        .iter()
        .find(|e| e.group == Group::Process(pid))
        .map(|e| (e.calls, e.measurement))
}

/// What `pid` should show after `calls` calls: for call_memory the words too; for call_time
/// the calls only (its time is not known).
fn check(profile: &Profile, trace_type: TraceType, pid: Pid, calls: u64, what: &str) {
    let got = figures(profile, pid);
    match trace_type {
        TraceType::CallMemory => assert_eq!(
            got,
            Some((calls, calls * WORDS as u64)),
            "{what}: {pid} after {calls} calls"
        ),
        _ => assert_eq!(
            got.map(|(calls, _)| calls),
            Some(calls),
            "{what}: {pid} after {calls} calls"
        ),
    }
}

/// Asks a worker to call `work` once.
struct Go;

/// Long-lived traced processes, each calling `work` once per `Go` and then telling the test
/// from the same poll; the test collects as soon as it hears, each round from one process in
/// turn (so that the poll that made the call is as fresh as can be).
fn calls_told_by_a_message(trace_type: TraceType) {
    const WORKERS: usize = 3;
    let node = node();
    let t = server(&node, trace_type);
    node.block_on(t.enable_trace(ProcessSpec::New, true))
        .unwrap();
    let (done_tx, done_rx) = mpsc::channel::<Pid>();
    let workers: Vec<Pid> = (0..WORKERS)
        .map(|_| {
            let done = done_tx.clone();
            node.spawn(async move {
                loop {
                    let Go = receive().await;
                    work(WORDS);
                    done.send(self_pid()).unwrap();
                    // The poll goes on a moment after telling (as one that replies, then
                    // does more, would): its figures reach the session only when it ends.
                    std::thread::yield_now();
                }
            })
            .unwrap()
        })
        .collect();
    let mut calls = [0u64; WORKERS];
    for round in 0..ROUNDS {
        let i = round as usize % WORKERS;
        node.send(workers[i], Go);
        assert_eq!(done_rx.recv_timeout(STUCK).unwrap(), workers[i]);
        calls[i] += 1;
        let profile = node.block_on(t.collect()).unwrap();
        check(
            &profile,
            trace_type,
            workers[i],
            calls[i],
            &format!("round {round}"),
        );
    }
    node.block_on(t.stop()).unwrap();
}

#[test]
fn a_call_told_by_a_message_is_in_the_next_collect_call_memory() {
    calls_told_by_a_message(TraceType::CallMemory);
}

#[test]
fn a_call_told_by_a_message_is_in_the_next_collect_call_time() {
    calls_told_by_a_message(TraceType::CallTime);
}

/// A gen_server that calls `work` for each call and replies from the same poll.
struct Worker;

impl GenServer for Worker {
    type Args = ();
    type Call = ();
    type Reply = ();
    type Cast = ();

    async fn init((): ()) -> Result<Worker, runtime::ExitReason> {
        Ok(Worker)
    }

    async fn handle_call(&mut self, (): (), _from: &mut Caller<()>) -> CallReply<()> {
        work(WORDS);
        CallReply::Reply(())
    }
}

/// A traced gen_server calls `work` and replies; the test collects as soon as the reply is
/// in (the server's poll may still be ending on the other worker).
fn calls_told_by_a_reply(trace_type: TraceType) {
    let node = node();
    let t = server(&node, trace_type);
    let worker = node
        .block_on(gen_server::start_on::<Worker>(
            &node,
            (),
            StartOptions::new(),
        ))
        .unwrap()
        .pid();
    node.block_on(t.enable_trace(worker, false)).unwrap();
    for round in 1..=ROUNDS {
        node.block_on(gen_server::call::<Worker>(worker, (), Timeout::Infinity))
            .unwrap();
        let profile = node.block_on(t.collect()).unwrap();
        check(
            &profile,
            trace_type,
            worker,
            round,
            &format!("round {round}"),
        );
    }
    node.block_on(t.stop()).unwrap();
}

#[test]
fn a_call_told_by_a_reply_is_in_the_next_collect_call_memory() {
    calls_told_by_a_reply(TraceType::CallMemory);
}

#[test]
fn a_call_told_by_a_reply_is_in_the_next_collect_call_time() {
    calls_told_by_a_reply(TraceType::CallTime);
}

/// Each round, a fresh spawn tree (a root, 3 children, 2 grandchildren each: 9 descendants)
/// waits; the test traces `AllChildren` of the root, tells every descendant to call `work`
/// once, and collects as soon as the last one says it did: each of the 9 shows one call.
fn a_spawn_tree(trace_type: TraceType) {
    const CHILDREN: usize = 3;
    const GRANDCHILDREN: usize = 2;
    const DESCENDANTS: usize = CHILDREN * (1 + GRANDCHILDREN);
    let node = node();
    let t = server(&node, trace_type);
    for round in 0..ROUNDS / 3 {
        node.block_on(t.restart()).unwrap();
        let (ready_tx, ready_rx) = mpsc::channel::<Pid>();
        let (done_tx, done_rx) = mpsc::channel::<Pid>();
        // A descendant: says it is there, waits for `Go`, calls, says so, and ends.
        let descendant = |ready: mpsc::Sender<Pid>, done: mpsc::Sender<Pid>| async move {
            ready.send(self_pid()).unwrap();
            let Go = receive().await;
            work(WORDS);
            done.send(self_pid()).unwrap();
        };
        let root = node
            .spawn(async move {
                for _ in 0..CHILDREN {
                    let (ready, done) = (ready_tx.clone(), done_tx.clone());
                    spawn(async move {
                        for _ in 0..GRANDCHILDREN {
                            spawn(descendant(ready.clone(), done.clone())).unwrap();
                        }
                        descendant(ready, done).await;
                    })
                    .unwrap();
                }
                // Stays until the round is over, so that its children's parent is alive.
                let () = receive().await;
            })
            .unwrap();
        let pids: Vec<Pid> = (0..DESCENDANTS)
            .map(|_| ready_rx.recv_timeout(STUCK).unwrap())
            .collect();
        let traced = node
            .block_on(t.enable_trace(ProcessSpec::all_children(root), false))
            .unwrap();
        assert_eq!(traced.count, DESCENDANTS, "round {round}");
        for &pid in &pids {
            node.send(pid, Go);
        }
        for _ in 0..DESCENDANTS {
            done_rx.recv_timeout(STUCK).unwrap();
        }
        let profile = node.block_on(t.collect()).unwrap();
        for (k, &pid) in pids.iter().enumerate() {
            check(
                &profile,
                trace_type,
                pid,
                1,
                &format!("round {round}, descendant {k} of {DESCENDANTS}"),
            );
        }
        node.send(root, ());
    }
    node.block_on(t.stop()).unwrap();
}

#[test]
fn every_process_of_a_spawn_tree_is_in_the_next_collect_call_memory() {
    a_spawn_tree(TraceType::CallMemory);
}

#[test]
fn every_process_of_a_spawn_tree_is_in_the_next_collect_call_time() {
    a_spawn_tree(TraceType::CallTime);
}
