//! The pull endpoint in-process: `/debug/pprof/goroutine` (pprof and text), `heap` and
//! `profile` read back as pprof with the node's pids, and malformed or slow requests answered
//! with 4xx while the program's work goes on, counted right.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "support/worker.rs"]
mod worker;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use runtime::{Node, Pid};
use tprof::control::{ControlEndpoint, ControlOptions};
use tprof::export::pprof::Profile as Pprof;
use worker::{ask_worker, start_worker};

fn open_http(node: &Node, test: &str) -> (ControlEndpoint, SocketAddr) {
    let path = std::env::temp_dir().join(format!(
        "tprof-http-test-{}-{test}.sock",
        std::process::id()
    ));
    let endpoint = ControlEndpoint::open(
        node.handle(),
        // These tests are about what is served; the token's are below.
        ControlOptions::new()
            .path(path)
            .http("127.0.0.1:0")
            .http_open(true),
    )
    .unwrap();
    let addr = endpoint.http_addr().unwrap();
    (endpoint, addr)
}

/// Sends `request` as is; the status, the head and the body of the answer.
fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("an HTTP answer: {:?}", String::from_utf8_lossy(&answer)));
    let head = String::from_utf8(answer[..end].to_vec()).unwrap();
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|h| h.get(..3))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"));
    let body = answer[end + 4..].to_vec();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(body.len(), length, "{head}");
    (status, head, body)
}

fn get(addr: SocketAddr, target: &str) -> (u16, Vec<u8>) {
    let request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: test\r\n\r\n");
    let (status, _, body) = exchange(addr, request.as_bytes());
    (status, body)
}

fn decode(gz: &[u8]) -> Pprof {
    assert_eq!(&gz[..2], b"\x1f\x8b", "gzip");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .unwrap();
    <Pprof as prost::Message>::decode(raw.as_slice()).unwrap()
}

/// Each sample's labels, as (key, value) strings.
fn labels(p: &Pprof) -> Vec<Vec<(&str, &str)>> {
    p.sample
        .iter()
        .map(|s| {
            s.label
                .iter()
                .map(|l| (p.string(l.key), p.string(l.str)))
                .collect()
        })
        .collect()
}

fn label<'a>(sample: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    sample.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// A registered `hog` that allocates a MiB and spins a while each turn, yielding between.
fn start_hog(node: &Node) -> Pid {
    let pid = node
        .handle()
        .spawn(async {
            loop {
                let block = std::hint::black_box(vec![1u8; 1 << 20]);
                let mut x = 0u64;
                for b in block.iter().step_by(64) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(u64::from(*b)));
                }
                std::hint::black_box(x);
                tokio::task::yield_now().await;
            }
        })
        .unwrap();
    node.handle().register("hog", pid).unwrap();
    pid
}

#[test]
fn goroutine_gives_every_process_once_with_its_state() {
    let node = Node::new().unwrap();
    let worker = start_worker(&node);
    let (_endpoint, addr) = open_http(&node, "goroutine");
    // The worker has answered once: it waits in receive.
    assert_eq!(ask_worker(&node, worker, 1), 72);

    let (status, body) = get(addr, "/debug/pprof/goroutine");
    assert_eq!(status, 200);
    let p = decode(&body);
    // Go's goroutine profile: processes counted, not wall time.
    let text = |i: i64| p.string_table[i as usize].as_str();
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (text(t.r#type), text(t.unit)))
        .collect();
    assert_eq!(types, [("goroutine", "count")]);
    assert!(p.sample.iter().all(|s| s.value == [1]), "{:?}", p.sample);
    let samples = labels(&p);
    let pids: Vec<&str> = samples.iter().filter_map(|s| label(s, "pid")).collect();
    let unique: HashSet<&str> = pids.iter().copied().collect();
    assert_eq!(pids.len(), unique.len(), "one sample per process: {pids:?}");
    let expected = node.handle().processes().len();
    assert_eq!(pids.len(), expected, "every process: {pids:?}");
    let seen = samples
        .iter()
        .find(|s| label(s, "pid") == Some(&worker.to_string()))
        .expect("the worker is there");
    assert_eq!(label(seen, "process"), Some("worker"));
    // What it waits for is noted by a wait that began while a wall session was open; this one
    // began before the request's.
    assert!(
        matches!(label(seen, "state"), Some("receive" | "waiting")),
        "{seen:?}"
    );

    let (status, body) = get(addr, "/debug/pprof/goroutine?debug=1");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.starts_with(&format!("process profile: total {expected}\n")),
        "{text}"
    );
    assert!(
        text.contains(" @ receive\n") || text.contains(" @ waiting\n"),
        "{text}"
    );
    let (status, body) = get(addr, "/debug/pprof/goroutine?debug=2");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.contains(&format!(
            "process {worker} (worker) [receive, mailbox 0]:\n"
        )) || text.contains(&format!(
            "process {worker} (worker) [waiting, mailbox 0]:\n"
        )),
        "{text}"
    );
    let (status, _) = get(addr, "/debug/pprof/goroutine?debug=7");
    assert_eq!(status, 400);
}

#[test]
fn profile_and_heap_are_pprof_with_the_pids_of_the_node() {
    let node = Node::new().unwrap();
    let hog = start_hog(&node);
    let (_endpoint, addr) = open_http(&node, "heap");

    let (status, body) = get(addr, "/debug/pprof/heap?seconds=1");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let p = decode(&body);
    let types: Vec<&str> = p.sample_type.iter().map(|t| p.string(t.r#type)).collect();
    assert!(types.contains(&"alloc_space"), "{types:?}");
    assert!(types.contains(&"inuse_space"), "{types:?}");
    let samples = labels(&p);
    assert!(
        samples.iter().any(
            |s| label(s, "pid") == Some(&hog.to_string()) && label(s, "process") == Some("hog")
        ),
        "the hog's allocations: {samples:?}"
    );

    let (status, body) = get(addr, "/debug/pprof/profile?seconds=1");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let p = decode(&body);
    let types: Vec<&str> = p.sample_type.iter().map(|t| p.string(t.r#type)).collect();
    assert!(types.contains(&"cpu"), "{types:?}");
    assert!(
        labels(&p)
            .iter()
            .any(|s| label(s, "pid") == Some(&hog.to_string())),
        "the hog's CPU time"
    );
    // The sampling server and the request's process are not in it.
    assert!(
        labels(&p)
            .iter()
            .all(|s| label(s, "process") != Some("tprof_control_sample")),
    );
}

#[test]
fn malformed_and_slow_requests_get_4xx_and_the_work_goes_on() {
    let node = Node::new().unwrap();
    let worker = start_worker(&node);
    let (_endpoint, addr) = open_http(&node, "malformed");
    let mut counted = 0;
    let mut expected = 0;
    let long = format!(
        "GET /debug/pprof/ HTTP/1.1\r\nX-Long: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let cases: [(&[u8], u16); 10] = [
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
        (b"GET\r\n\r\n", 400),
        (b"GET /debug/pprof/ HTTP/9.9\r\n\r\n", 400),
        (b"GET /debug/pprof/ HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"hello there", 400),
        (b"POST /debug/pprof/profile HTTP/1.1\r\n\r\n", 405),
        (b"GET /etc/passwd HTTP/1.1\r\n\r\n", 404),
        (b"GET /debug/pprof/profile?seconds=x HTTP/1.1\r\n\r\n", 400),
        (b"GET /debug/pprof/heap?seconds=9999 HTTP/1.1\r\n\r\n", 400),
        (long.as_bytes(), 431),
    ];
    for round in 0..20 {
        for (request, want) in &cases {
            if *request == b"hello there" {
                // No blank line: the client half-closes, the head ends early.
                let mut stream = TcpStream::connect(addr).unwrap();
                stream.write_all(request).unwrap();
                stream.shutdown(std::net::Shutdown::Write).unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).unwrap();
                assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
                continue;
            }
            let (status, head, _) = exchange(addr, request);
            assert_eq!(
                status,
                *want,
                "{}: {head}",
                String::from_utf8_lossy(request)
            );
            assert!(head.contains("Content-Type: text/plain"), "{head}");
        }
        counted += ask_worker(&node, worker, 1);
        expected += 72;
        assert_eq!(counted, expected, "round {round}");
    }

    // A client that connects and says nothing holds the endpoint's thread, not the workers.
    let silent = TcpStream::connect(addr).unwrap();
    assert_eq!(ask_worker(&node, worker, 2), 144);
    drop(silent);
    let (status, index) = get(addr, "/debug/pprof/");
    assert_eq!(status, 200);
    let index = String::from_utf8(index).unwrap();
    for link in ["profile?seconds=", "heap", "goroutine?debug=1"] {
        assert!(index.contains(link), "{index}");
    }
}

/// Closing the endpoint while a long profile is being taken ends the profile early and
/// answers with what was gathered, rather than holding the close for the profile's seconds.
#[test]
fn closing_the_endpoint_cuts_a_profile_in_progress_short() {
    let node = Node::new().unwrap();
    let (endpoint, addr) = open_http(&node, "cut");
    let asked = std::thread::Builder::new()
        .name("asks".into())
        .spawn(move || get(addr, "/debug/pprof/profile?seconds=600"))
        .unwrap();
    // The profile is being taken once the sampler's thread runs (a thread, not a process).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !sampler_runs() {
        assert!(
            std::time::Instant::now() < deadline,
            "the profile never began"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let (closed, done) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("closes".into())
        .spawn(move || {
            drop(endpoint);
            let _ = closed.send(());
        })
        .unwrap();
    done.recv_timeout(Duration::from_secs(120))
        .expect("closing the endpoint does not wait out a 600 s profile");
    let (status, body) = asked.join().unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let p = decode(&body);
    let types: Vec<&str> = p.sample_type.iter().map(|t| p.string(t.r#type)).collect();
    assert!(types.contains(&"cpu"), "a CPU profile: {types:?}");
}

/// Whether a thread of the sampler runs in this process (its name begins `tprof-sample`).
fn sampler_runs() -> bool {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .any(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|name| name.starts_with("tprof-sample"))
        })
}

/// A head of 16 KiB and a few bytes, all in one piece, is refused: the limit is hard.
#[test]
fn a_head_over_the_limit_in_one_piece_is_refused() {
    let node = Node::new().unwrap();
    let (_endpoint, addr) = open_http(&node, "hardhead");
    let line = "GET /debug/pprof/ HTTP/1.1\r\n";
    let pad = (16 << 10) + 40 - line.len() - "X-Pad: \r\n\r\n".len();
    let request = format!("{line}X-Pad: {}\r\n\r\n", "a".repeat(pad));
    assert_eq!(request.len(), (16 << 10) + 40);
    let (status, head, _) = exchange(addr, request.as_bytes());
    assert_eq!(status, 431, "{head}");
}

/// The token: a request without it gets 401 and no profile; with it in the query or as a
/// bearer, the profile.
#[test]
fn the_pull_endpoint_serves_only_those_who_show_its_token() {
    let node = Node::new().unwrap();
    let path =
        std::env::temp_dir().join(format!("tprof-http-test-{}-token.sock", std::process::id()));
    let endpoint = ControlEndpoint::open(
        node.handle(),
        ControlOptions::new().path(&path).http("127.0.0.1:0"),
    )
    .unwrap();
    let addr = endpoint.http_addr().unwrap();
    let token = endpoint.token().expect("a token").as_str().to_owned();
    let file = std::fs::read_to_string(endpoint.token_path().unwrap()).unwrap();
    assert_eq!(file.trim(), token, "the token file beside the socket");
    for target in [
        "/debug/pprof/goroutine?debug=1",
        "/debug/pprof/",
        "/debug/pprof/heap?seconds=1",
        "/debug/pprof/goroutine?debug=1&token=wrong",
    ] {
        let (status, body) = get(addr, target);
        let text = String::from_utf8_lossy(&body);
        assert_eq!(status, 401, "{target}: {text}");
        assert!(text.contains("TPROF_PPROF_HTTP_OPEN=1"), "{text}");
        assert!(
            !text.contains(&token),
            "the refusal does not give the token away"
        );
    }
    let (status, body) = get(
        addr,
        &format!("/debug/pprof/goroutine?debug=1&token={token}"),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let request = format!(
        "GET /debug/pprof/goroutine?debug=2 HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    let (status, head, _) = exchange(addr, request.as_bytes());
    assert_eq!(status, 200, "{head}");
}

/// Five clients that send a header line now and then hold five threads, not the endpoint: a
/// good request is answered while all five are still sending; and a request over the cap of
/// requests in progress is told so at once.
#[test]
fn slow_clients_do_not_stall_a_good_request() {
    let node = Node::new().unwrap();
    let (_endpoint, addr) = open_http(&node, "slowloris");
    let mut slow: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /debug/pprof/ HTTP/1.1\r\nX-A: 1\r\n")
                .unwrap();
            s
        })
        .collect();
    let (status, _) = get(addr, "/debug/pprof/goroutine?debug=1");
    assert_eq!(status, 200);
    // The slow ones are still being read: none has been answered.
    for s in &mut slow {
        s.write_all(b"X-B: 2\r\n").unwrap();
        s.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let read = s.read(&mut byte);
        assert!(
            matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a slow client was answered before the good one: {read:?}"
        );
    }
    // Up to the cap, more slow clients; the one past it is told why at once.
    let more: Vec<TcpStream> = (5..16).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = get(addr, "/debug/pprof/");
        if status == 503 {
            let text = String::from_utf8_lossy(&body);
            assert!(text.contains("16 requests are in progress"), "{text}");
            break;
        }
        // The acceptor may not have counted the last connections yet.
        assert!(std::time::Instant::now() < deadline, "never over the cap");
    }
    drop(more);
}

/// Two profiles of a few seconds are taken at once, and a goroutine request that comes after
/// them is answered before either ends.
#[test]
fn requests_are_served_concurrently() {
    let node = Node::new().unwrap();
    let _hog = start_hog(&node);
    let (_endpoint, addr) = open_http(&node, "concurrent");
    let (done, finished) = std::sync::mpsc::channel();
    for _ in 0..2 {
        let done = done.clone();
        std::thread::Builder::new()
            .name("profiles".into())
            .spawn(move || {
                let (status, _) = get(addr, "/debug/pprof/profile?seconds=5");
                let _ = done.send(("profile", status));
            })
            .unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !sampler_runs() {
        assert!(std::time::Instant::now() < deadline, "no profile began");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (status, _) = get(addr, "/debug/pprof/goroutine?debug=1");
    done.send(("goroutine", status)).unwrap();
    let order: Vec<(&str, u16)> = (0..3)
        .map(|_| finished.recv_timeout(Duration::from_secs(120)).unwrap())
        .collect();
    assert_eq!(order[0], ("goroutine", 200), "{order:?}");
    assert!(
        order[1..].iter().all(|o| *o == ("profile", 200)),
        "{order:?}"
    );
}
