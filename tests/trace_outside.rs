//! Traced calls made outside any process — in a plain tokio task, in `Node::block_on`, in
//! `main` — are measured, apart from the processes' figures, under the node whose thread made
//! them: a thread of the node's runtime, or one running `Node::block_on`, belongs to the node;
//! any other thread counts for the sessions opened with `TraceTypes::ANY_THREAD`. Such a
//! session sees every plain thread of the OS process, so these tests take turns.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use runtime::trace::{ProcessSpec, TracePattern, TraceSession, TraceTypes};
use runtime::{Node, Pid, traced};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

#[traced]
fn leaf(n: usize) -> usize {
    std::hint::black_box(vec![0u64; n]).len()
}

#[traced]
fn branch(n: usize) -> usize {
    leaf(n) + leaf(n)
}

#[traced]
async fn later(n: usize) -> usize {
    tokio::task::yield_now().await;
    branch(n)
}

/// Held by each test: a session for every thread sees the other tests' plain threads.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

fn session(node: &Node, types: TraceTypes) -> TraceSession {
    let s = node.trace_session_with(types).unwrap();
    s.set_pattern(&TracePattern::module(module_path!()))
        .unwrap();
    s.enable_trace(ProcessSpec::New, true).unwrap();
    s
}

fn outside_calls(s: &TraceSession, function: &str) -> u64 {
    s.outside_call_counts()
        .iter()
        .filter(|c| c.callsite.function() == function)
        .map(|c| c.calls)
        .sum()
}

fn process_calls(s: &TraceSession, function: &str) -> u64 {
    s.call_counts()
        .iter()
        .filter(|c| c.callsite.function() == function)
        .map(|c| c.calls)
        .sum()
}

/// Runs `f` on a plain thread of no node, and waits for it.
fn on_a_plain_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .name("plain".into())
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn call_count_counts_calls_outside_processes_apart() {
    let _turn = turn();
    let node = node();
    let s = session(&node, TraceTypes::CALL_COUNT);
    // In a process: the processes' counts.
    node.run(async { branch(1) }).unwrap();
    // In a plain tokio task on the node's runtime, and in `block_on` on this thread.
    node.block_on(async {
        tokio::spawn(async { branch(1) }).await.unwrap();
        later(1).await;
    });
    // On a thread of no node: not this session's.
    on_a_plain_thread(|| {
        branch(1);
    });
    assert_eq!(process_calls(&s, "branch"), 1);
    assert_eq!(process_calls(&s, "leaf"), 2);
    assert_eq!(outside_calls(&s, "branch"), 2);
    assert_eq!(outside_calls(&s, "leaf"), 4);
    assert_eq!(outside_calls(&s, "later"), 1);
    // A session that asks for every thread counts the plain thread's calls too.
    let any = session(&node, TraceTypes::CALL_COUNT | TraceTypes::ANY_THREAD);
    on_a_plain_thread(|| {
        branch(1);
    });
    assert_eq!(outside_calls(&any, "branch"), 1);
    assert_eq!(outside_calls(&s, "branch"), 2);
    // Pause and restart cover them as the rest.
    s.pause();
    node.block_on(async { branch(1) });
    assert_eq!(outside_calls(&s, "branch"), 2);
    s.restart();
    assert_eq!(outside_calls(&s, "branch"), 0);
    node.block_on(async { branch(1) });
    assert_eq!(outside_calls(&s, "branch"), 1);
}

/// The measurements of the calls outside processes of `node`'s session, per function: (calls,
/// time, words), summed over its threads.
fn outside_figures(s: &TraceSession, function: &str) -> (u64, u64, u64) {
    s.measurements()
        .iter()
        .filter(|p| p.pid.is_outside())
        .inspect(|p| assert_eq!(p.pid.node(), s.node()))
        .flat_map(|p| p.functions.iter())
        .filter(|f| f.callsite.function() == function)
        .fold((0, 0, 0), |(c, t, w), f| {
            (c + f.calls, t + f.time_ns, w + f.words)
        })
}

#[test]
fn call_time_and_call_memory_measure_calls_outside_processes_per_thread() {
    let _turn = turn();
    let node = node();
    let s = session(
        &node,
        TraceTypes::CALL_TIME | TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE,
    );
    let pid: Pid = node
        .run(async {
            branch(8);
            runtime::self_pid()
        })
        .unwrap();
    node.block_on(async {
        tokio::spawn(async { branch(16) }).await.unwrap();
        later(16).await;
    });
    on_a_plain_thread(|| {
        branch(16);
    });
    let m = s.measurements();
    // The process's figures are its own.
    let process = m.iter().find(|p| p.pid == pid).unwrap();
    let leaf_in_process = process
        .functions
        .iter()
        .find(|f| f.callsite.function() == "leaf")
        .unwrap();
    assert_eq!((leaf_in_process.calls, leaf_in_process.words), (2, 16));
    // Outside: the task's branch and the async call's, with their leaves; not the plain
    // thread's (no node's, and this session does not ask for every thread).
    let (calls, time, words) = outside_figures(&s, "branch");
    assert_eq!(calls, 2);
    assert!(time > 0);
    assert_eq!(words, 0, "exclusive of the traced leaves");
    let (calls, _, words) = outside_figures(&s, "leaf");
    assert_eq!((calls, words), (4, 4 * 16));
    let (calls, time, _) = outside_figures(&s, "later");
    assert_eq!(calls, 1, "an async call is one call over its polls");
    assert!(time > 0);
    // Each thread is its own entry, named after it.
    let threads: Vec<_> = m.iter().filter(|p| p.pid.is_outside()).collect();
    assert!(!threads.is_empty());
    assert!(
        threads
            .iter()
            .all(|p| p.initial_call.starts_with("thread ")),
        "{threads:?}"
    );
    // Call paths too: branch -> leaf, outside processes.
    let tree = s.call_tree();
    let outside_paths: Vec<String> = tree
        .processes
        .iter()
        .filter(|p| p.pid.is_outside())
        .flat_map(|p| p.paths.iter())
        .map(|p| {
            tree.stack(p.path)
                .iter()
                .map(|c| c.function())
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect();
    assert!(
        outside_paths.iter().any(|p| p == "branch;leaf"),
        "{outside_paths:?}"
    );
    assert!(
        outside_paths.iter().any(|p| p == "later;branch;leaf"),
        "{outside_paths:?}"
    );
}

#[test]
fn a_session_for_every_thread_measures_a_plain_threads_calls() {
    let _turn = turn();
    let node = node();
    let s = session(&node, TraceTypes::CALL_MEMORY | TraceTypes::ANY_THREAD);
    on_a_plain_thread(|| {
        branch(4);
    });
    assert_eq!(outside_figures(&s, "branch").0, 1);
    assert_eq!(outside_figures(&s, "leaf"), (2, 0, 8));
    // The session's pause and restart cover them.
    s.pause();
    on_a_plain_thread(|| {
        branch(4);
    });
    assert_eq!(outside_figures(&s, "branch").0, 1);
    s.restart();
    assert!(s.measurements().iter().all(|p| p.functions.is_empty()));
}

#[traced]
fn drives_a_node(node: &Node) -> usize {
    node.run(async { branch(2) }).unwrap()
}

/// A traced call outside processes that runs a current-thread node's process on its own thread
/// (a poll inside the call): the call is measured up to the poll, the poll as the process's.
#[test]
fn a_poll_inside_a_call_outside_processes_ends_its_measure_there() {
    let _turn = turn();
    let node = Node::builder().current_thread().build().unwrap();
    let s = session(&node, TraceTypes::CALL_TIME | TraceTypes::ANY_THREAD);
    on_a_plain_thread(move || {
        drives_a_node(&node);
        drives_a_node(&node);
        branch(1);
    });
    let m = s.measurements();
    assert_eq!(outside_figures(&s, "drives_a_node").0, 2);
    assert_eq!(outside_figures(&s, "branch").0, 1);
    assert_eq!(outside_figures(&s, "leaf").0, 2);
    let in_processes: u64 = m
        .iter()
        .filter(|p| !p.pid.is_outside())
        .flat_map(|p| p.functions.iter())
        .filter(|f| f.callsite.function() == "branch")
        .map(|f| f.calls)
        .sum();
    assert_eq!(in_processes, 2);
}

/// Call-duration histograms of calls outside processes are per thread, as their figures: each
/// under the pid its measurements show (the session's node), never a process's.
#[test]
fn call_durations_outside_processes_are_under_their_threads_pids() {
    let _turn = turn();
    let node = node();
    let s = session(&node, TraceTypes::CALL_TIME_HISTOGRAMS);
    node.block_on(async {
        tokio::spawn(async { branch(1) }).await.unwrap();
        later(1).await;
    });
    let outside: Vec<Pid> = s
        .measurements()
        .iter()
        .filter(|p| p.pid.is_outside())
        .map(|p| p.pid)
        .collect();
    let p = s.call_time_percentiles();
    let calls = |function: &str| -> u64 {
        p.iter()
            .filter(|c| c.callsite.function() == function)
            .inspect(|c| assert!(outside.contains(&c.pid), "{c:?} not in {outside:?}"))
            .map(|c| c.calls)
            .sum()
    };
    assert_eq!(calls("branch"), 2);
    assert_eq!(calls("leaf"), 4);
    assert_eq!(
        calls("later"),
        1,
        "an async call is one call over its polls"
    );
}
