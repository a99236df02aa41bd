//! The control endpoint over TCP: only on loopback, only for a client that shows the token in
//! its hello; clients without it, with a wrong one, or sending garbage are refused and
//! disconnected while the program's work goes on, counted right.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "support/worker.rs"]
mod worker;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use runtime::Node;
use tprof::control::protocol::{Command, Reply, Response, read_frame};
use tprof::control::{ControlClient, ControlEndpoint, ControlError, ControlOptions, Token};
use worker::{ask_worker, start_worker};

/// A socket path in the directory `tprof attach` looks in for token files.
fn socket_path(test: &str) -> PathBuf {
    tprof::control::runtime_dir().join(format!("tprof-tcp-test-{}-{test}.sock", std::process::id()))
}

fn open_tcp(node: &Node, test: &str) -> ControlEndpoint {
    ControlEndpoint::open(
        node.handle(),
        ControlOptions::new()
            .path(socket_path(test))
            .tcp("127.0.0.1:0"),
    )
    .unwrap()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
}

fn raw_frame(stream: &mut TcpStream, body: &[u8]) {
    stream
        .write_all(&(body.len() as u32).to_be_bytes())
        .unwrap();
    stream.write_all(body).unwrap();
}

fn response(stream: &mut TcpStream) -> Response {
    serde_json::from_slice(&read_frame(stream).unwrap()).expect("a response reads")
}

/// Reads what is left of a connection the endpoint closed: nothing more comes.
fn assert_closed(stream: &mut TcpStream) {
    let mut rest = Vec::new();
    // A reset, after the endpoint closed with unread bytes, is closed too.
    let read = stream.read_to_end(&mut rest);
    assert!(
        read.is_err() || rest.is_empty(),
        "closed: {read:?} {rest:?}"
    );
}

/// Sends one frame as the first message and expects a refusal, then the connection closed.
fn assert_refused(addr: SocketAddr, body: &[u8]) {
    let mut stream = connect(addr);
    raw_frame(&mut stream, body);
    let refused = response(&mut stream);
    assert!(refused.reply.is_none());
    let error = refused.error.expect("an error");
    assert!(error.contains("token"), "{error}");
    assert_closed(&mut stream);
}

#[test]
fn a_tcp_client_without_the_token_or_with_a_wrong_one_is_refused_and_the_right_one_served() {
    let node = Node::new().unwrap();
    let worker = start_worker(&node);
    let endpoint = open_tcp(&node, "token");
    let addr = endpoint.tcp_addr().expect("it listens on TCP");
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    let token = endpoint.token().unwrap().clone();

    // Without a token, with a wrong one, with anything before hello: refused, disconnected.
    assert_refused(addr, br#"{"version":1,"id":1,"command":{"op":"hello"}}"#);
    let wrong = format!(
        r#"{{"version":1,"id":2,"command":{{"op":"hello","token":"{}"}}}}"#,
        "0".repeat(64)
    );
    assert_refused(addr, wrong.as_bytes());
    // The right token's prefix is not the token.
    let prefix = format!(
        r#"{{"version":1,"id":3,"command":{{"op":"hello","token":"{}"}}}}"#,
        &token.as_str()[..32]
    );
    assert_refused(addr, prefix.as_bytes());
    assert_refused(
        addr,
        br#"{"version":1,"id":4,"command":{"op":"processes"}}"#,
    );
    let other = Token::generate().unwrap();
    let refused = ControlClient::connect_tcp(addr, &other).unwrap_err();
    assert!(matches!(refused, ControlError::Refused(_)), "{refused:?}");
    assert!(refused.to_string().contains("token"), "{refused}");
    assert_eq!(ask_worker(&node, worker, 1), 72);

    // With the token: served as over the socket.
    let mut client = ControlClient::connect_tcp(addr, &token).unwrap();
    match client.request(Command::Processes).unwrap() {
        Reply::Processes { processes } => {
            assert!(
                processes
                    .iter()
                    .any(|p| p.name.as_deref() == Some("worker"))
            );
        }
        other => panic!("{other:?}"),
    }
    let start = Command::Start {
        trace_type: "call_count".into(),
        call_tree: false,
    };
    assert_eq!(client.request(start).unwrap(), Reply::Ok);
    assert_eq!(client.request(Command::Stop).unwrap(), Reply::Ok);

    // The token and the address, beside the socket, for this user only; `attach HOST:PORT`
    // finds the token there.
    let token_file = endpoint.token_path().unwrap();
    let tcp_file = endpoint.path().with_extension("tcp");
    for file in [&token_file, &tcp_file] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", file.display());
    }
    assert_eq!(Token::read_file(&token_file).unwrap(), token);
    assert_eq!(
        std::fs::read_to_string(&tcp_file).unwrap().trim(),
        addr.to_string()
    );
    let mut found = tprof::control::connect_target(&addr.to_string(), None).unwrap();
    assert!(matches!(
        found.request(Command::Hello { token: None }).unwrap(),
        Reply::Hello { .. }
    ));
    drop(found);
    drop(client);
    drop(endpoint);
    assert!(
        !token_file.exists() && !tcp_file.exists(),
        "closing removes them"
    );
    assert!(TcpStream::connect(addr).is_err(), "and stops listening");
}

#[test]
fn a_non_loopback_address_is_refused_at_open() {
    let node = Node::new().unwrap();
    let path = socket_path("loopback");
    for (tcp, http) in [
        (Some("0.0.0.0:0"), None),
        (Some("192.0.2.7:7000"), None),
        (Some("[::]:0"), None),
        (Some("[::ffff:127.0.0.1]:0"), None),
        (None, Some("0.0.0.0:0")),
        (Some("127.0.0.1:0"), Some("10.1.2.3:6060")),
    ] {
        let mut options = ControlOptions::new().path(&path);
        if let Some(tcp) = tcp {
            options = options.tcp(tcp);
        }
        if let Some(http) = http {
            options = options.http(http);
        }
        let error = ControlEndpoint::open(node.handle(), options).unwrap_err();
        assert!(matches!(error, ControlError::NotLoopback(_)), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("loopback"), "{message}");
        assert!(!path.exists(), "nothing was opened: {message}");
    }
    for bad in ["nonsense", "127.0.0.1", "localhost:http", ""] {
        let error =
            ControlEndpoint::open(node.handle(), ControlOptions::new().path(&path).tcp(bad))
                .unwrap_err();
        assert!(
            matches!(error, ControlError::BadAddress(_)),
            "{bad}: {error:?}"
        );
        assert!(error.to_string().contains("127.0.0.1:0"), "{error}");
    }
    // And loopback is served: an address in 127.0.0.0/8, and localhost.
    for good in ["127.0.0.1:0", "localhost:0"] {
        let endpoint =
            ControlEndpoint::open(node.handle(), ControlOptions::new().path(&path).tcp(good))
                .unwrap();
        assert!(endpoint.tcp_addr().unwrap().ip().is_loopback());
    }
}

#[test]
fn hundreds_of_malformed_messages_over_tcp_leave_the_work_counted() {
    let node = Node::new().unwrap();
    let worker = start_worker(&node);
    let endpoint = open_tcp(&node, "malformed");
    let addr = endpoint.tcp_addr().unwrap();
    let token = endpoint.token().unwrap().clone();
    let mut expected = 0;
    let mut counted = 0;

    // Strangers: 200 connections that never show the token, each sending one kind of garbage.
    for i in 0..200u32 {
        let mut stream = connect(addr);
        match i % 5 {
            0 => raw_frame(&mut stream, b"not json"),
            1 => stream.write_all(&u32::MAX.to_be_bytes()).unwrap(),
            2 => raw_frame(
                &mut stream,
                &(0..i).map(|b| (b * 31) as u8).collect::<Vec<_>>(),
            ),
            3 => {
                // Half a frame, then gone.
                stream.write_all(&[0, 0, 1, 0, b'{']).unwrap();
                drop(stream);
                continue;
            }
            _ => raw_frame(
                &mut stream,
                br#"{"version":1,"id":9,"command":{"op":"start","trace_type":"call_time"}}"#,
            ),
        }
        let refused = response(&mut stream);
        assert!(refused.error.unwrap().contains("token"));
        assert_closed(&mut stream);
        if i % 20 == 0 {
            counted += ask_worker(&node, worker, 1);
            expected += 72;
        }
    }
    // None of them started a server.
    assert!(tprof::Tprof::whereis(node.handle(), tprof::DEFAULT_NAME).is_none());

    // A client with the token, then 300 malformed messages on its connection.
    let mut stream = connect(addr);
    let hello = format!(
        r#"{{"version":1,"id":1,"command":{{"op":"hello","token":"{}"}}}}"#,
        token.as_str()
    );
    raw_frame(&mut stream, hello.as_bytes());
    assert!(matches!(
        response(&mut stream).reply,
        Some(Reply::Hello { .. })
    ));
    for i in 0..300u32 {
        let body = match i % 4 {
            0 => b"{]".to_vec(),
            1 => format!(r#"{{"version":1,"id":{i},"command":{{"op":"launch"}}}}"#).into_bytes(),
            2 => Vec::new(),
            _ => format!(r#"{{"version":2,"id":{i},"command":{{"op":"processes"}}}}"#).into_bytes(),
        };
        raw_frame(&mut stream, &body);
        let answer = response(&mut stream);
        assert!(answer.reply.is_none() && answer.error.is_some(), "{i}");
        if i % 30 == 0 {
            counted += ask_worker(&node, worker, 2);
            expected += 144;
        }
    }
    assert_eq!(counted, expected);
    assert_eq!(expected, 10 * 72 + 10 * 144);
    // The connection still serves, and so does the endpoint.
    raw_frame(
        &mut stream,
        br#"{"version":1,"id":500,"command":{"op":"processes"}}"#,
    );
    assert!(matches!(
        response(&mut stream).reply,
        Some(Reply::Processes { .. })
    ));
    let mut client = ControlClient::connect_tcp(addr, &token).unwrap();
    assert!(client.request(Command::Processes).is_ok());
    assert_eq!(ask_worker(&node, worker, 3), 216);
}
