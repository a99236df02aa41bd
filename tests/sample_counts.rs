//! A sample session's call counts are exact: every traced call of the processes it samples,
//! once, and no call of the others, whatever else runs beside it — the polls that are only
//! its own, those it shares with a call_time session, helper tasks, message-heavy ping-pong
//! across two workers — and pause, resume and restart keep what they say. A trace session open
//! at the same time stays exact too, and so does one opened and closed while it samples (its
//! polls switch from sample polls and back). Counts, never timing.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use runtime::sample::{SampleOptions, SampleSession, Sampler};
use runtime::trace::{ProcessSpec, Snapshot, TracePattern, TraceSession, TraceTypes};
use runtime::{Down, Node, Pid, monitor, receive, self_pid, send, spawn};

/// One sample session at a time in this binary: the CPU sampler has one rate per program.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A synchronous traced call.
#[runtime::traced]
fn hit(n: u64) -> u64 {
    n.wrapping_mul(3)
}

/// An asynchronous traced call that suspends until a message comes.
#[runtime::traced]
async fn await_ball() -> (Pid, u64) {
    receive::<(Pid, u64)>().await
}

/// A ping-pong partner: answers each ball with a call of `hit`, until a ball of 0.
async fn partner() {
    loop {
        let (from, n) = await_ball().await;
        if n == 0 {
            break;
        }
        send(from, (self_pid(), hit(n)));
    }
}

/// Plays `rounds` round trips with `partner`: per round trip each side makes one call of
/// `hit` and one of `await_ball` (which suspends), so `4 * rounds` calls in all, plus the
/// partner's last `await_ball`, which ends it.
async fn lead(partner: Pid, rounds: u64) {
    let me = self_pid();
    for n in 1..=rounds {
        send(partner, (me, hit(n)));
        let _ = await_ball().await;
    }
    send(partner, (me, 0u64));
}

/// [`lead`] with a partner of its own; returns once the partner has ended. The partner's last
/// `await_ball`, which the counts include, is entered in the poll that sends the last answer,
/// and the lead can run on the other worker and finish before that poll ends: the partner's
/// `Down` comes after its last poll has ended, with every call counted.
async fn ping_pong(rounds: u64) {
    let partner = spawn(partner()).expect("spawn");
    monitor(partner).expect("monitor");
    lead(partner, rounds).await;
    let _: Down = receive().await;
}

/// The calls of function `name` that `snapshot` counts (see `common::snapshot_calls`).
fn calls(snapshot: &Snapshot, name: &str) -> u64 {
    common::snapshot_calls(snapshot, name)
}

/// A sample session of `sampler` on `node`, tracing this file's functions in every new
/// process.
fn sampling(node: &Node, sampler: Sampler) -> SampleSession {
    let session = node
        .sample_session(SampleOptions::new().sampler(sampler).hz(999))
        .expect("sample session");
    common::trace_new_processes(session.trace(), &TracePattern::module(module_path!()));
    session
}

/// Runs `pairs` ping-pong pairs of `rounds` round trips on `node` and waits for every one.
fn play(node: &Node, pairs: u64, rounds: u64) {
    let (done_tx, done_rx) = mpsc::channel();
    for _ in 0..pairs {
        let done = done_tx.clone();
        node.spawn(async move {
            ping_pong(rounds).await;
            done.send(()).expect("done");
        })
        .expect("spawn");
    }
    for _ in 0..pairs {
        done_rx
            .recv_timeout(Duration::from_secs(120))
            .expect("a pair finished");
    }
}

/// Per process a trace session measured, the calls of `name`, summed.
fn measured(session: &TraceSession, name: &str) -> u64 {
    session
        .measurements()
        .iter()
        .flat_map(|p| &p.functions)
        .filter(|f| f.callsite.function() == name)
        .map(|f| f.calls)
        .sum()
}

#[test]
fn every_call_of_the_sampled_processes_is_counted_once_on_two_workers() {
    let _serial = serial();
    for sampler in [Sampler::Cpu, Sampler::Wall] {
        if sampler == Sampler::Cpu && !cfg!(target_os = "linux") {
            continue;
        }
        let node = Node::builder().worker_threads(2).build().expect("node");
        // A pair spawned before the session is not sampled: its calls are no one's, although
        // it plays while the session samples the others.
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let (unsampled_tx, unsampled_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        node.spawn(async move {
            let partner = spawn(partner()).expect("spawn");
            ready_tx.send(()).expect("ready");
            let _ = go_rx.await;
            lead(partner, 500).await;
            unsampled_tx.send(()).expect("done");
        })
        .expect("spawn");
        ready_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the unsampled pair is spawned");
        let session = sampling(&node, sampler);
        go_tx.send(()).expect("go");
        let (pairs, rounds) = (4, 2_000);
        play(&node, pairs, rounds);
        unsampled_rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the unsampled pair finished");
        let snapshot = session.snapshot();
        assert_eq!(
            calls(&snapshot, "hit"),
            2 * pairs * rounds,
            "{sampler}: calls of hit"
        );
        assert_eq!(
            calls(&snapshot, "await_ball"),
            2 * pairs * rounds + pairs,
            "{sampler}: calls of await_ball"
        );
        // Processes spawned after it is dropped are not counted by the next one.
        drop(session);
        let next = sampling(&node, sampler);
        play(&node, 1, 10);
        assert_eq!(
            calls(&next.snapshot(), "hit"),
            20,
            "{sampler}: the next session"
        );
    }
}

#[test]
fn a_call_time_session_beside_a_sample_session_and_both_stay_exact() {
    let _serial = serial();
    let node = Node::builder().worker_threads(2).build().expect("node");
    let sample = sampling(&node, Sampler::Cpu);
    let timing = node
        .trace_session_with(TraceTypes::CALL_TIME)
        .expect("trace session");
    timing
        .set_pattern(&TracePattern::module(module_path!()))
        .expect("pattern");
    let counting = node.trace_session().expect("call_count session");
    counting
        .set_pattern(&TracePattern::module(module_path!()))
        .expect("pattern");
    // The call_time session measures the first pairs with the sample session, then stops
    // measuring new processes: the later pairs' polls are the sample session's alone.
    timing.enable_trace(ProcessSpec::New, true).expect("flags");
    let (pairs, rounds) = (2, 1_000);
    play(&node, pairs, rounds);
    timing.disable_trace(ProcessSpec::New).expect("flags");
    play(&node, pairs, rounds);
    let both = 2 * (2 * pairs * rounds);
    assert_eq!(
        calls(&sample.snapshot(), "hit"),
        both,
        "sampled calls of hit"
    );
    assert_eq!(
        calls(&sample.snapshot(), "await_ball"),
        both + 2 * pairs,
        "sampled calls of await_ball"
    );
    assert_eq!(measured(&timing, "hit"), 2 * pairs * rounds, "timed calls");
    assert_eq!(
        measured(&timing, "await_ball"),
        2 * pairs * rounds + pairs,
        "timed calls of await_ball"
    );
    let counted: u64 = counting
        .call_counts()
        .iter()
        .filter(|c| c.callsite.function() == "hit")
        .map(|c| c.calls)
        .sum();
    assert_eq!(counted, both, "call_count's calls of hit");
}

#[test]
fn the_calls_of_helper_tasks_count_as_their_process_calls() {
    let _serial = serial();
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = sampling(&node, Sampler::Cpu);
    let total = node
        .run(async {
            let blocking =
                runtime::spawn_blocking(|| (1..=10).map(hit).sum::<u64>()).expect("spawn_blocking");
            let task =
                runtime::spawn_task(async { (1..=5).map(hit).sum::<u64>() }).expect("spawn_task");
            let own = hit(1);
            blocking.await.expect("joined") + task.await.expect("joined") + own
        })
        .expect("ran");
    assert!(total > 0);
    assert_eq!(calls(&session.snapshot(), "hit"), 16);
}

/// A process that makes `n` calls of `hit` for each `n` it receives, then says so.
fn caller(node: &Node) -> (Pid, mpsc::Receiver<u64>) {
    let (tx, rx) = mpsc::channel();
    let pid = node
        .spawn(async move {
            loop {
                let n: u64 = receive().await;
                let mut sum = 0u64;
                for i in 0..n {
                    sum = sum.wrapping_add(hit(i));
                }
                tx.send(sum).expect("told");
            }
        })
        .expect("spawn");
    (pid, rx)
}

/// Has the caller make `n` calls and waits until it has.
fn make_calls(node: &Node, caller: &(Pid, mpsc::Receiver<u64>), n: u64) {
    node.send(caller.0, n);
    caller
        .1
        .recv_timeout(Duration::from_secs(60))
        .expect("the calls were made");
}

#[test]
fn pause_resume_and_restart_keep_what_they_say() {
    let _serial = serial();
    for sampler in [Sampler::Cpu, Sampler::Wall] {
        if sampler == Sampler::Cpu && !cfg!(target_os = "linux") {
            continue;
        }
        let node = Node::builder().worker_threads(2).build().expect("node");
        let session = sampling(&node, sampler);
        let caller = caller(&node);
        make_calls(&node, &caller, 100);
        assert!(session.trace().pause());
        assert_eq!(calls(&session.snapshot(), "hit"), 100, "{sampler}: paused");
        make_calls(&node, &caller, 7);
        assert_eq!(
            calls(&session.snapshot(), "hit"),
            100,
            "{sampler}: calls made while paused are left out"
        );
        assert!(session.trace().resume());
        make_calls(&node, &caller, 11);
        assert_eq!(calls(&session.snapshot(), "hit"), 111, "{sampler}: resumed");
        session.trace().restart();
        make_calls(&node, &caller, 3);
        assert_eq!(calls(&session.snapshot(), "hit"), 3, "{sampler}: restarted");
    }
}

#[test]
fn trace_sessions_opened_and_closed_during_a_sample_session_count_as_alone() {
    let _serial = serial();
    let node = Node::builder().worker_threads(2).build().expect("node");
    let sample = sampling(&node, Sampler::Cpu);
    let (pairs, rounds) = (2, 1_000);
    let per_phase = |name: &str| match name {
        "hit" => 2 * pairs * rounds,
        _ => 2 * pairs * rounds + pairs,
    };
    // Sample polls alone.
    play(&node, pairs, rounds);
    // A call_count session opens: every call made while it is open is counted, the async
    // calls' first polls included.
    let counting = node.trace_session().expect("call_count session");
    counting
        .set_pattern(&TracePattern::module(module_path!()))
        .expect("pattern");
    play(&node, pairs, rounds);
    for name in ["hit", "await_ball"] {
        let counted: u64 = counting
            .call_counts()
            .iter()
            .filter(|c| c.callsite.function() == name)
            .map(|c| c.calls)
            .sum();
        assert_eq!(counted, per_phase(name), "call_count's calls of {name}");
    }
    drop(counting);
    // A call_time session measures the new processes beside the sample session, then closes.
    let timing = node
        .trace_session_with(TraceTypes::CALL_TIME)
        .expect("trace session");
    timing
        .set_pattern(&TracePattern::module(module_path!()))
        .expect("pattern");
    timing.enable_trace(ProcessSpec::New, true).expect("flags");
    play(&node, pairs, rounds);
    assert!(timing.pause(), "paused");
    for name in ["hit", "await_ball"] {
        assert_eq!(
            measured(&timing, name),
            per_phase(name),
            "timed calls of {name}"
        );
    }
    drop(timing);
    // Sample polls alone again.
    play(&node, pairs, rounds);
    let snapshot = sample.snapshot();
    for name in ["hit", "await_ball"] {
        assert_eq!(
            calls(&snapshot, name),
            4 * per_phase(name),
            "sampled calls of {name}"
        );
    }
}
