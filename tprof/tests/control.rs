//! The control endpoint driven from outside the node, as `tprof attach` drives it: a whole
//! server-aided session gives the library's tables; malformed messages get errors and leave
//! the program's work alone; a second endpoint at a live path is refused.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "support/served.rs"]
mod served;
#[path = "support/waits.rs"]
mod waits;
#[path = "support/worker.rs"]
mod worker;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use runtime::Node;
use tprof::control::protocol::{Command, Reply, Response, read_frame};
use tprof::control::{ControlClient, ControlEndpoint, ControlError, ControlOptions};
use tprof::{Aggregate, Column, DEFAULT_NAME, SortBy, Tprof, format_to_string, inspect};
use worker::{ask_worker, start_worker};

fn socket_path(test: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("tprof-test-{}-{test}.sock", std::process::id()))
}

fn text(reply: Reply) -> String {
    match reply {
        Reply::Text { text } => text,
        other => panic!("not text: {other:?}"),
    }
}

#[test]
fn a_whole_server_aided_session_gives_the_librarys_tables() {
    let node = Node::new().unwrap();
    let worker = start_worker(&node);
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new().path(socket_path("session")),
    )
    .unwrap();
    let mut client = ControlClient::connect(endpoint.path()).unwrap();

    match client.request(Command::Hello { token: None }).unwrap() {
        Reply::Hello {
            os_pid, node: id, ..
        } => {
            assert_eq!(os_pid, std::process::id());
            assert_eq!(id, node.handle().id());
        }
        other => panic!("{other:?}"),
    }
    match client.request(Command::Processes).unwrap() {
        Reply::Processes { processes } => {
            let row = processes
                .iter()
                .find(|p| p.pid == worker.to_string())
                .expect("the worker is listed");
            assert_eq!(row.name.as_deref(), Some("worker"));
        }
        other => panic!("{other:?}"),
    }
    // Before start: an error that says what to do.
    let error = client.request(Command::Pause).unwrap_err();
    assert!(error.contains("send start first"), "{error}");

    let start = Command::Start {
        trace_type: "call_count".into(),
        call_tree: false,
    };
    assert_eq!(client.request(start).unwrap(), Reply::Ok);
    let matched = client
        .request(Command::SetPattern {
            module: Some(common::MODULE.into()),
            function: None,
            arity: None,
        })
        .unwrap();
    // leaf, branch and two_processes.
    assert_eq!(matched, Reply::Matched { count: 3 });
    let enabled = client
        .request(Command::EnableTrace {
            processes: "worker".into(),
            set_on_spawn: false,
        })
        .unwrap();
    assert_eq!(enabled, Reply::Matched { count: 1 });

    assert_eq!(ask_worker(&node, worker, 2), 144);
    assert_eq!(client.request(Command::Pause).unwrap(), Reply::Ok);
    let tables = text(
        client
            .request(Command::Collect {
                format: "process".into(),
            })
            .unwrap(),
    );

    // The library's tables of the same server's profile.
    let library = node
        .run(async {
            let server = Tprof::whereis(&runtime::NodeHandle::current().unwrap(), DEFAULT_NAME)
                .expect("the endpoint's server runs under the default name");
            server.collect().await.unwrap()
        })
        .unwrap();
    let expected = format_to_string(&inspect(&library, Aggregate::Process, SortBy::default()));
    assert_eq!(tables, expected);
    // Two rounds of branches(): 6 calls of branch, 12 of leaf (call_count: all processes).
    assert!(tables.contains("fixture::leaf/1       12"), "{tables}");
    assert!(tables.contains("fixture::branch/1      6"), "{tables}");

    // inspect/3 and format/1: grouped and sorted as asked, as the library lays them out.
    let sorted = text(
        client
            .request(Command::Inspect {
                group_by: "total".into(),
                column: "calls".into(),
                direction: "descending".into(),
            })
            .unwrap(),
    );
    let expected = format_to_string(&inspect(
        &library,
        Aggregate::Total,
        SortBy::descending(Column::Calls),
    ));
    assert_eq!(sorted, expected);
    let at = |f: &str| sorted.find(f).unwrap_or_else(|| panic!("{f}: {sorted}"));
    assert!(at("fixture::leaf/1") < at("fixture::branch/1"), "{sorted}");
    let refused = client
        .request(Command::Inspect {
            group_by: "total".into(),
            column: "time".into(),
            direction: "descending".into(),
        })
        .unwrap_err();
    assert!(refused.contains("measurement_per_call"), "{refused}");

    let folded = text(
        client
            .request(Command::Collect {
                format: "folded".into(),
            })
            .unwrap(),
    );
    assert!(folded.contains("fixture::leaf 12"), "{folded}");
    let refused = client
        .request(Command::Collect {
            format: "pprof".into(),
        })
        .unwrap_err();
    assert!(refused.contains("binary"), "{refused}");

    assert_eq!(client.request(Command::Stop).unwrap(), Reply::Ok);
    assert!(client.request(Command::Stop).is_err(), "stopped already");
    drop(client);
    let path = endpoint.path().to_owned();
    drop(endpoint);
    assert!(!path.exists(), "closing removes the socket");
}

/// Writes one raw frame of `body`.
fn raw_frame(stream: &mut UnixStream, body: &[u8]) {
    stream
        .write_all(&(body.len() as u32).to_be_bytes())
        .unwrap();
    stream.write_all(body).unwrap();
}

#[test]
fn malformed_messages_get_errors_and_the_work_goes_on() {
    let node = Node::new().unwrap();
    let worker = start_worker(&node);
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new().path(socket_path("bad")),
    )
    .unwrap();
    let mut stream = UnixStream::connect(endpoint.path()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();

    let bad: Vec<Vec<u8>> = (0..300u32)
        .map(|i| match i % 6 {
            0 => b"not json".to_vec(),
            1 => format!(r#"{{"version":9,"id":{i},"command":{{"op":"hello"}}}}"#).into_bytes(),
            2 => format!(r#"{{"version":1,"id":{i},"command":{{"op":"launch"}}}}"#).into_bytes(),
            3 => Vec::new(),
            4 => (0..i).map(|b| (b * 37 % 256) as u8).collect(),
            _ => format!(r#"{{"version":1,"id":{i},"command":{{"op":"set_pattern","module":7}}}}"#)
                .into_bytes(),
        })
        .collect();
    let mut answered = 0;
    for (i, body) in bad.iter().enumerate() {
        raw_frame(&mut stream, body);
        let response: Response = serde_json::from_slice(&read_frame(&mut stream).unwrap())
            .expect("an error reply reads");
        assert!(response.reply.is_none());
        let error = response.error.expect("an error");
        assert!(!error.is_empty());
        if i % 6 == 1 {
            assert!(error.contains("version 9"), "{error}");
            assert_eq!(response.id, i as u64);
        }
        answered += 1;
        // The program's work goes on between them, and is right.
        if i % 50 == 0 {
            assert_eq!(ask_worker(&node, worker, 1), 72);
        }
    }
    assert_eq!(answered, 300);

    // The connection is still usable after all that.
    raw_frame(
        &mut stream,
        br#"{"version":1,"id":1000,"command":{"op":"hello"}}"#,
    );
    let response: Response = serde_json::from_slice(&read_frame(&mut stream).unwrap()).unwrap();
    assert_eq!(response.id, 1000);
    assert!(matches!(response.reply, Some(Reply::Hello { .. })));

    // A length it cannot trust: one error, then the connection is closed.
    stream.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let response: Response = serde_json::from_slice(&read_frame(&mut stream).unwrap()).unwrap();
    assert!(response.error.unwrap().contains("over the limit"));
    let mut rest = Vec::new();
    assert_eq!(stream.read_to_end(&mut rest).unwrap(), 0, "closed");

    // And the endpoint serves the next client.
    let mut client = ControlClient::connect(endpoint.path()).unwrap();
    assert!(matches!(
        client.request(Command::Hello { token: None }).unwrap(),
        Reply::Hello { .. }
    ));
    assert_eq!(ask_worker(&node, worker, 3), 216);
}

#[test]
fn a_live_endpoint_is_not_replaced_and_a_stale_socket_is() {
    let node = Node::new().unwrap();
    let path = socket_path("twice");
    let first = ControlEndpoint::open(node.handle(), ControlOptions::new().path(&path)).unwrap();
    let second = ControlEndpoint::open(node.handle(), ControlOptions::new().path(&path));
    assert!(matches!(second, Err(ControlError::InUse(_))), "{second:?}");
    drop(first);
    // A socket file nobody listens on (a program that died) is replaced.
    let stale = std::os::unix::net::UnixListener::bind(socket_path("stale")).unwrap();
    drop(stale);
    let reopened = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new().path(socket_path("stale")),
    )
    .unwrap();
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(reopened.path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode, 0o600);
}

#[test]
fn sample_profiles_the_next_seconds_and_reports_by_process() {
    let node = Node::new().unwrap();
    let worker = start_worker(&node);
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new().path(socket_path("sample")),
    )
    .unwrap();
    let mut client = ControlClient::connect(endpoint.path()).unwrap();
    let report = text(
        client
            .request(Command::Sample {
                seconds: 0.5,
                sampler: "wall".into(),
                hz: 200,
            })
            .unwrap(),
    );
    assert!(report.contains(&worker.to_string()), "{report}");
    assert!(report.contains("worker"), "{report}");
    // Waiting in receive: said so when its wait began after the session opened, else as
    // waiting (what it waits for is noted by the wait, while a wall session is open).
    assert!(
        report.contains("receive") || report.contains("waiting"),
        "{report}"
    );
    assert!(report.contains("Total snapshots"), "{report}");
    assert!(
        !report.contains("tprof_control_sample"),
        "the sampling server is not sampled: {report}"
    );
    // A CPU sample's report starts with what its samples could see: the mechanism, the share
    // captured, the rate taken beside the rate asked.
    let report = text(
        client
            .request(Command::Sample {
                seconds: 0.2,
                sampler: "cpu".into(),
                hz: 200,
            })
            .unwrap(),
    );
    assert!(report.starts_with("CPU samples by "), "{report}");
    assert!(report.contains(" at 200 Hz asked"), "{report}");
    for (seconds, sampler, hz) in [(0.0, "wall", 99), (1.0, "sundial", 99), (1.0, "cpu", 0)] {
        let error = client
            .request(Command::Sample {
                seconds,
                sampler: sampler.into(),
                hz,
            })
            .unwrap_err();
        assert!(!error.is_empty());
    }
    // The sample's own server is gone: the default name is free for a session.
    let start = Command::Start {
        trace_type: "call_count".into(),
        call_tree: false,
    };
    assert_eq!(client.request(start).unwrap(), Reply::Ok);
}

/// Peek through the endpoint: every process with what it waits for, then samples; a
/// duration out of bounds is refused and the connection still serves.
#[test]
fn peek_comes_through_the_endpoint() {
    let node = Node::new().unwrap();
    let worker = start_worker(&node);
    waits::until_waiting(&node, &[worker]);
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new().path(socket_path("peek")),
    )
    .unwrap();
    let mut client = ControlClient::connect(endpoint.path()).unwrap();
    for seconds in [-1.0, 601.0] {
        let error = client
            .request(Command::Peek {
                seconds: Some(seconds),
            })
            .unwrap_err();
        assert!(error.contains("0 to 600 seconds"), "{error}");
    }
    let report = text(
        client
            .request(Command::Peek { seconds: Some(0.2) })
            .unwrap(),
    );
    assert!(report.starts_with("==== peek: node "), "{report}");
    assert!(
        report.trim_end().ends_with("==== end of peek ===="),
        "{report}"
    );
    let line = report
        .lines()
        .find(|l| l.starts_with(&format!("{worker} ")))
        .unwrap_or_else(|| panic!("the worker is listed: {report}"));
    assert!(
        line.contains(" worker ") && line.contains(" receive "),
        "{line}"
    );
    assert_eq!(ask_worker(&node, worker, 2), 144, "the worker still works");
}

#[test]
fn a_heap_snapshot_comes_through_the_endpoint() {
    let node = Node::new().unwrap();
    let worker = start_worker(&node);
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new().path(socket_path("heap")),
    )
    .unwrap();
    let mut client = ControlClient::connect(endpoint.path()).unwrap();
    let snapshot: serde_json::Value =
        serde_json::from_str(&text(client.request(Command::HeapSnapshot).unwrap())).unwrap();
    let fields = snapshot["snapshot"]["meta"]["node_fields"]
        .as_array()
        .unwrap()
        .len();
    let nodes = snapshot["nodes"].as_array().unwrap().len();
    assert_eq!(nodes % fields, 0);
    assert_eq!(
        snapshot["snapshot"]["node_count"].as_u64().unwrap() as usize,
        nodes / fields
    );
    let strings = snapshot["strings"].as_array().unwrap();
    assert!(
        strings
            .iter()
            .any(|s| s.as_str().is_some_and(|s| s.contains(&worker.to_string()))),
        "the worker is in the snapshot"
    );
}

/// The Unix socket serves at most 64 connections at once: one more is told why and closed,
/// and once one of the held ones closes, a new one is served again. A held connection that
/// announces 16 MiB and sends nothing does not hold 16 MiB.
#[test]
fn the_socket_caps_its_connections() {
    let node = Node::new().unwrap();
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new().path(socket_path("cap")),
    )
    .unwrap();
    let mut held: Vec<UnixStream> = (0..64)
        .map(|_| {
            let mut s = UnixStream::connect(endpoint.path()).unwrap();
            // A frame of 16 MiB announced, none of it sent.
            s.write_all(&(16u32 << 20).to_be_bytes()).unwrap();
            s
        })
        .collect();
    let refused = |path: &std::path::Path| {
        let mut extra = UnixStream::connect(path).unwrap();
        extra
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let body = read_frame(&mut extra).expect("an answer, not silence");
        let response: Response = serde_json::from_slice(&body).unwrap();
        response.error
    };
    let error = refused(endpoint.path()).expect("the 65th is refused");
    assert!(error.contains("64 connections are open"), "{error}");
    // One closes: a new connection is served (its thread counted out first).
    drop(held.pop());
    served::wait_until_served(endpoint.path(), Duration::from_secs(60));
    drop(held);
}
