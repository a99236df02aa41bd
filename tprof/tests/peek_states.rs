//! Peek in-process ([`tprof::peek::peek_report`]): what each process waits for, whatever
//! began before peek, whom a call waits for, and the cycles of calls that never end.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/waits.rs"]
mod waits;

use std::time::Duration;

use runtime::gen_server::{self, Timeout};
use runtime::{Node, Pid, receive};
use waits::{Unanswered, until_waiting};

/// A process that waits to be told whom to call, then calls it for ever; registered as
/// `name`.
fn caller(node: &Node, name: &str) -> Pid {
    let pid = node
        .spawn(async {
            let callee: Pid = receive().await;
            let _ = gen_server::call::<Unanswered>(callee, (), Timeout::Infinity).await;
        })
        .unwrap();
    node.handle().register(name, pid).unwrap();
    pid
}

/// The process table's line of `pid`.
fn row(report: &str, pid: Pid) -> &str {
    let prefix = format!("{pid} ");
    report
        .lines()
        .skip_while(|l| !l.starts_with("PID"))
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{pid} listed: {report}"))
}

/// The deadlock lines at the top of `report`.
fn deadlocks(report: &str) -> Vec<&str> {
    report
        .lines()
        .skip_while(|l| !l.starts_with("==== peek: ") || !l.contains(" deadlock"))
        .skip(1)
        .take_while(|l| !l.starts_with("PID"))
        .collect()
}

#[test]
fn two_processes_calling_each_other_are_a_deadlock() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let a = caller(&node, "alice");
    let b = caller(&node, "bob");
    node.send(a, b);
    node.send(b, a);
    until_waiting(&node, &[a, b]);
    let report = tprof::peek::peek_report(node.handle(), Duration::from_millis(10));
    assert!(
        report.contains("==== peek: 1 deadlock: processes blocked in call on each other ===="),
        "{report}"
    );
    assert_eq!(
        deadlocks(&report),
        [format!("{a} (alice) -> {b} (bob) -> {a} (alice)")],
        "{report}"
    );
    // The cycle comes before the list.
    assert!(report.find(" deadlock").unwrap() < report.find("PID").unwrap());
    assert!(
        row(&report, a).contains(&format!(" call {b} (bob) ")),
        "{report}"
    );
    assert!(
        row(&report, b).contains(&format!(" call {a} (alice) ")),
        "{report}"
    );
}

#[test]
fn a_cycle_of_three_is_a_deadlock_and_a_chain_into_it_is_not_in_it() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let a = caller(&node, "a");
    let b = caller(&node, "b");
    let c = caller(&node, "c");
    let d = caller(&node, "d");
    node.send(a, b);
    node.send(b, c);
    node.send(c, a);
    // d calls into the cycle: blocked for ever too, but not one of it.
    node.send(d, b);
    until_waiting(&node, &[a, b, c, d]);
    let report = tprof::peek::peek_report(node.handle(), Duration::from_millis(10));
    assert_eq!(
        deadlocks(&report),
        [format!("{a} (a) -> {b} (b) -> {c} (c) -> {a} (a)")],
        "{report}"
    );
    assert!(
        row(&report, d).contains(&format!(" call {b} (b) ")),
        "{report}"
    );
}

/// A caller whose callee waits in a `receive` (of something that never comes) is not
/// deadlocked: the callee could still be sent what it waits for.
#[test]
fn a_call_to_a_process_in_receive_is_no_deadlock() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let a = caller(&node, "asker");
    let b = node
        .spawn(async {
            let _: String = receive().await;
        })
        .unwrap();
    node.send(a, b);
    until_waiting(&node, &[a, b]);
    let report = tprof::peek::peek_report(node.handle(), Duration::from_millis(10));
    assert!(deadlocks(&report).is_empty(), "{report}");
    assert!(!report.contains(" deadlock"), "{report}");
    assert!(row(&report, a).contains(&format!(" call {b} ")), "{report}");
    assert!(row(&report, b).contains(" receive "), "{report}");
}

/// Processes that suspended before peek existed (no session was ever open on the node) show
/// what they wait for: `receive`, `receive (timer)`, a call and to whom.
#[test]
fn waits_that_began_before_peek_are_told() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let receiver = node
        .spawn(async {
            let _: u64 = receive().await;
        })
        .unwrap();
    let timed = node
        .spawn(async {
            let _ = runtime::receive_timeout::<u64>(Duration::from_secs(600)).await;
        })
        .unwrap();
    let asker = caller(&node, "asker");
    node.send(asker, receiver);
    // The caller first: once it waits, its request is in `receiver`'s mailbox, so `receiver`
    // seen waiting afterwards has taken it in and waits again.
    until_waiting(&node, &[asker, receiver, timed]);
    let report = tprof::peek::peek_report(node.handle(), Duration::from_millis(10));
    assert!(row(&report, receiver).contains(" receive "), "{report}");
    assert!(
        row(&report, timed).contains(" receive (timer) "),
        "{report}"
    );
    assert!(
        row(&report, asker).contains(&format!(" call {receiver} ")),
        "{report}"
    );
}

/// A supervisor's API (`which_children`, `count_children`, ...) calls the supervisor: its
/// caller shows as in a call to it, with or without a timeout, as a gen_server call does.
#[test]
fn a_supervisor_request_is_a_call_to_the_supervisor() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    // Stands in for a supervisor that never answers: a request only needs its mailbox.
    let busy = node
        .spawn(async {
            let _: String = receive().await;
        })
        .unwrap();
    let forever = node
        .spawn(async move {
            let _ = runtime::supervisor::which_children(busy, Timeout::Infinity).await;
        })
        .unwrap();
    let bounded = node
        .spawn(async move {
            let after = Timeout::After(Duration::from_secs(600));
            let _ = runtime::supervisor::count_children(busy, after).await;
        })
        .unwrap();
    // The callers first (see above).
    until_waiting(&node, &[forever, bounded, busy]);
    let report = tprof::peek::peek_report(node.handle(), Duration::from_millis(10));
    for asker in [forever, bounded] {
        assert!(
            row(&report, asker).contains(&format!(" call {busy} ")),
            "{asker}: {report}"
        );
    }
    assert!(row(&report, busy).contains(" receive "), "{report}");
    assert!(deadlocks(&report).is_empty(), "{report}");
}

/// Apart from the other tests' traced functions.
mod traced {
    #[runtime::traced]
    pub(crate) async fn waits_for_a_word() {
        let _: String = runtime::receive().await;
    }
}

/// A process that a call_time session measures shows the traced function it is suspended
/// in, though it suspended before peek began.
#[test]
fn a_measured_process_shows_the_function_it_waits_in() {
    use runtime::trace::{ProcessSpec, TracePattern};
    use tprof::{ServerOptions, Tprof, TraceType};
    let node = Node::builder().worker_threads(2).build().unwrap();
    let server = node
        .block_on(Tprof::start(
            &node,
            ServerOptions::new().trace_type(TraceType::CallTime),
        ))
        .unwrap();
    node.block_on(server.set_pattern(TracePattern::module(concat!(module_path!(), "::traced"))))
        .unwrap();
    node.block_on(server.enable_trace(ProcessSpec::New, true))
        .unwrap();
    // Spawned through a block of its own, so that its initial call does not name the function.
    let waiter = node
        .spawn(async { traced::waits_for_a_word().await })
        .unwrap();
    until_waiting(&node, &[waiter]);
    let report = tprof::peek::peek_report(node.handle(), Duration::from_millis(10));
    let line = row(&report, waiter);
    assert!(
        !line.contains("waits_for_a_word  "),
        "not the initial call: {line}"
    );
    assert!(
        line.trim_end()
            .ends_with("  peek_states::traced::waits_for_a_word"),
        "{report}"
    );
    assert!(row(&report, waiter).contains(" receive "), "{report}");
}
