//! A control connection never holds its slot for ever: closing the endpoint cuts a `sample` or
//! a `trace` in progress short (the client gets what was gathered, or an error that says the
//! endpoint is closing, never silence), and a connection silent past the endpoint's idle limit
//! is told so and closed, on the Unix socket and over TCP.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/served.rs"]
mod served;

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use runtime::Node;
use tprof::control::protocol::{
    Command, FrameError, Reply, Request, Response, VERSION, read_frame, write_frame,
};
use tprof::control::{ControlClient, ControlEndpoint, ControlOptions};

/// How long an answer is waited for before the test says it never came: far over what
/// closing takes (a tenth of a second to notice, plus collecting), far under a 600-s profile.
const PATIENCE: Duration = Duration::from_secs(120);

fn socket_path(test: &str) -> PathBuf {
    tprof::control::runtime_dir().join(format!(
        "tprof-close-test-{}-{test}.sock",
        std::process::id()
    ))
}

/// What a profile of 600 s gave once the endpoint closed while it ran: its text says it was
/// cut short, or (had the request not been read yet) the error says the endpoint closes.
fn assert_cut_short(answer: Result<Reply, String>) {
    match answer {
        Ok(Reply::Text { text }) => assert!(
            text.starts_with("(cut short after ") && text.contains("of 600 s"),
            "{text}"
        ),
        Ok(other) => panic!("not text: {other:?}"),
        Err(why) => assert!(why.contains("closing"), "{why}"),
    }
}

/// Sends `command` from a thread of its own over `client`, and closes `endpoint` while it is
/// (most likely) in progress; the answer must come.
fn closed_during(endpoint: ControlEndpoint, mut client: ControlClient, command: Command) {
    // The connection is being served before the long request is sent.
    assert!(matches!(
        client.request(Command::Registered),
        Ok(Reply::Names { .. })
    ));
    let (tx, rx) = mpsc::channel();
    let asking = std::thread::Builder::new()
        .name("asking".into())
        .spawn(move || {
            let _ = tx.send(client.request(command));
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(endpoint);
    let answer = rx
        .recv_timeout(PATIENCE)
        .expect("closing the endpoint cuts the profile in progress short");
    assert_cut_short(answer);
    asking.join().unwrap();
}

#[test]
fn closing_the_endpoint_cuts_a_sample_in_progress_short() {
    let node = Node::new().unwrap();
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new().path(socket_path("sample")),
    )
    .unwrap();
    let client = ControlClient::connect(endpoint.path()).unwrap();
    let sample = Command::Sample {
        seconds: 600.0,
        sampler: "wall".into(),
        hz: 10,
    };
    closed_during(endpoint, client, sample);
}

#[test]
fn closing_the_endpoint_cuts_a_trace_over_tcp_in_progress_short() {
    let node = Node::new().unwrap();
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new()
            .path(socket_path("trace"))
            .tcp("127.0.0.1:0"),
    )
    .unwrap();
    let client =
        ControlClient::connect_tcp(endpoint.tcp_addr().unwrap(), endpoint.token().unwrap())
            .unwrap();
    let trace = Command::Trace {
        trace_type: "call_count".into(),
        seconds: 600.0,
    };
    closed_during(endpoint, client, trace);
}

/// Writes one request and reads its response.
fn ask(stream: &mut (impl std::io::Read + Write), command: Command) -> Response {
    let request = Request {
        version: VERSION,
        id: 1,
        command,
    };
    write_frame(stream, &serde_json::to_vec(&request).unwrap()).unwrap();
    serde_json::from_slice(&read_frame(stream).unwrap()).unwrap()
}

/// After its last answer, a silent connection gets one more message, the error saying why it
/// is closed, and then the end of the stream.
fn assert_told_and_closed(stream: &mut impl std::io::Read) {
    let body = read_frame(stream).expect("a silent connection is told why it is closed");
    let response: Response = serde_json::from_slice(&body).unwrap();
    let why = response.error.expect("an error");
    assert!(why.contains("no message came for 0.3 s"), "{why}");
    assert!(why.contains("idle_timeout"), "{why}");
    assert!(matches!(read_frame(stream), Err(FrameError::Closed)));
}

#[test]
fn a_silent_unix_connection_is_closed_and_frees_its_slot() {
    let node = Node::new().unwrap();
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new()
            .path(socket_path("idle"))
            .idle_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    // As many as the socket serves at once, each served once and then silent.
    let mut held: Vec<UnixStream> = (0..64)
        .map(|_| {
            let mut s = UnixStream::connect(endpoint.path()).unwrap();
            s.set_read_timeout(Some(PATIENCE)).unwrap();
            let hello = ask(&mut s, Command::Hello { token: None });
            assert!(hello.error.is_none(), "{hello:?}");
            s
        })
        .collect();
    for s in &mut held {
        assert_told_and_closed(s);
    }
    // Their slots are free: a new connection is served (each thread counted out first).
    served::wait_until_served(endpoint.path(), PATIENCE);
}

#[test]
fn a_silent_tcp_connection_is_told_why_and_closed() {
    let node = Node::new().unwrap();
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new()
            .path(socket_path("idle-tcp"))
            .tcp("127.0.0.1:0")
            .idle_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let mut stream = TcpStream::connect(endpoint.tcp_addr().unwrap()).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let token = endpoint.token().unwrap().as_str().to_owned();
    let hello = ask(&mut stream, Command::Hello { token: Some(token) });
    assert!(hello.error.is_none(), "{hello:?}");
    assert_told_and_closed(&mut stream);
}
