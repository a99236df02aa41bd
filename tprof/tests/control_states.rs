//! What the endpoint's process lists (`processes`, `top`) say each process waits for: a
//! `receive`, a `receive` with a timer, a call and to whom, as peek says it.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/waits.rs"]
mod waits;

use std::time::Duration;

use runtime::gen_server::{self, Timeout};
use runtime::{Node, Pid, receive};
use tprof::control::protocol::{Command, ProcessRow, Reply};
use tprof::control::top::render;
use tprof::control::{ControlClient, ControlEndpoint, ControlOptions};
use waits::{Unanswered, until_waiting};

fn row(rows: &[ProcessRow], pid: Pid) -> &ProcessRow {
    rows.iter()
        .find(|r| r.pid == pid.to_string())
        .unwrap_or_else(|| panic!("{pid} listed: {rows:?}"))
}

#[test]
fn the_process_lists_tell_receive_timers_and_calls_to_whom() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let db = node
        .spawn(async {
            let _: String = receive().await;
        })
        .unwrap();
    node.handle().register("db", db).unwrap();
    let timed = node
        .spawn(async {
            let _: Option<String> = runtime::receive_timeout(Duration::from_secs(3600)).await;
        })
        .unwrap();
    let caller = node
        .spawn(async move {
            let _ = gen_server::call::<Unanswered>(db, (), Timeout::Infinity).await;
        })
        .unwrap();
    let anonymous = node
        .spawn(async {
            let _: String = receive().await;
        })
        .unwrap();
    let caller_of_anonymous = node
        .spawn(async move {
            let _ = gen_server::call::<Unanswered>(anonymous, (), Timeout::Infinity).await;
        })
        .unwrap();
    // The callers first: once a caller waits, its request is in its callee's mailbox, so a
    // callee seen waiting afterwards has taken it in and waits again.
    until_waiting(&node, &[caller, caller_of_anonymous, db, anonymous, timed]);
    let path = std::env::temp_dir().join(format!("tprof-states-{}.sock", std::process::id()));
    let endpoint = ControlEndpoint::open(node.handle(), ControlOptions::new().path(path)).unwrap();
    let mut client = ControlClient::connect(endpoint.path()).unwrap();

    let Reply::Processes { processes } = client.request(Command::Processes).unwrap() else {
        panic!("processes")
    };
    assert_eq!(row(&processes, db).state_text(), "receive");
    assert_eq!(row(&processes, timed).state_text(), "receive (timer)");
    assert_eq!(
        row(&processes, caller).state_text(),
        format!("call {db} (db)")
    );
    assert_eq!(
        row(&processes, caller_of_anonymous).state_text(),
        format!("call {anonymous}")
    );

    let Reply::Top { frame } = client
        .request(Command::Top {
            sort: "state".into(),
            rows: 10,
            baseline: 11,
        })
        .unwrap()
    else {
        panic!("top")
    };
    let count = |state: &str| {
        frame
            .states
            .iter()
            .find(|(s, _)| s == state)
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(count("receive (timer)"), 1, "{frame:?}");
    assert_eq!(count("call"), 2, "{frame:?}");
    assert!(count("receive") >= 2, "{frame:?}");
    // Sorted by state: receive, then the timer, then the calls (running and runnable come
    // first: the endpoint's own request process may be one of them).
    let states: Vec<&str> = frame
        .rows
        .iter()
        .map(|r| r.state.as_str())
        .filter(|s| !matches!(*s, "running" | "runnable"))
        .collect();
    assert_eq!(
        states,
        ["receive", "receive", "receive (timer)", "call", "call"],
        "{frame:?}"
    );
    assert_eq!(row(&frame.rows, caller).callee_name.as_deref(), Some("db"));
    let text = render(&frame);
    assert!(text.contains(&format!("call {db} (db)")), "{text}");
    assert!(text.contains("1 receive (timer), 2 call"), "{text}");
}
