//! The pull endpoint: the URLs that pull-based profilers (Parca, Grafana Alloy, `go tool
//! pprof http://...`) scrape, served beside a control endpoint, on loopback only.
//!
//! | URL | What it gives |
//! |---|---|
//! | `/debug/pprof/` | an index of these |
//! | `/debug/pprof/profile?seconds=N` | CPU samples of every process for the next N seconds (default 30, at most 600), gzipped pprof with `pid` and `process` labels |
//! | `/debug/pprof/heap?seconds=N` | allocation samples for the next N seconds (default 10): pprof with `alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space` |
//! | `/debug/pprof/goroutine` | every process once, at the traced path it runs or waits in: pprof with `pid`, `process` and `state` labels; `?debug=1` as text grouped by path, `?debug=2` one block per process |
//!
//! **The heap profile is sampled for its seconds.** Go's `heap` is the live set of an
//! allocation sampler that runs from the program's start. tprof keeps no sampler running
//! while nobody asks (the endpoint costs nothing while idle, and the allocation sampler
//! costs a couple of percent even when it records nothing), so `heap` samples allocations
//! for `seconds`, as Go's `heap?seconds=N` gives the allocations of N seconds: `alloc_*` are
//! what was allocated then, `inuse_*` what of it is still live at the end. It needs the
//! counting allocator ([`runtime::CountingAlloc`] as the `#[global_allocator]`); without it
//! the answer is `503` and a sentence saying so, as it is when the CPU sampler cannot run
//! (`SIGPROF` taken by another profiler).
//!
//! **Only for those who show the token.** Profiles name functions, files and processes, so
//! the pull endpoint asks what the TCP control endpoint asks: the token, as `?token=TOKEN` in
//! the URL (`go tool pprof 'http://127.0.0.1:6060/debug/pprof/profile?seconds=5&token=TOKEN'`)
//! or as `Authorization: Bearer TOKEN`; a request without it gets `401`. The token is written
//! beside the control socket (`tprof-<ospid>-<node>.token`, mode 0600: its user's only) and is
//! [`ControlEndpoint::token`](super::ControlEndpoint::token). For a scraper that cannot send
//! one, `TPROF_PPROF_HTTP_OPEN=1` (or [`ControlOptions::http_open`](super::ControlOptions::http_open))
//! opens it to every local user, as Go's `net/http/pprof` is.
//!
//! Each request is served on a thread of its own outside the runtime, at most 16 at once (a
//! connection over that gets `503` at once): a slow or malformed client holds only its own
//! thread (its request head must arrive within 10 s and within 16 KiB), never other scrapers
//! nor the node's workers. Profiles are gathered on that thread, by a session of their own:
//! they answer while every worker is busy. Closing the endpoint cuts every request short (a
//! profile in progress answers with what it has). A request that does not parse as HTTP/1.x
//! gets `400`, another method than `GET` `405`, another path `404`; each answer closes its
//! connection. The request head is parsed by `httparse`; there is no HTTP stack under it.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tprof::control::{ControlEndpoint, ControlOptions};
//!
//! let node = runtime::Node::new()?;
//! let endpoint = ControlEndpoint::open(node.handle(), ControlOptions::new().http("127.0.0.1:0"))?;
//! let addr = endpoint.http_addr().expect("it serves the pull endpoint");
//! let token = endpoint.token().expect("it asks for one").as_str();
//! println!("go tool pprof 'http://{addr}/debug/pprof/profile?seconds=5&token={token}'");
//! # Ok(()) }
//! ```

mod profiles;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use runtime::NodeHandle;

use super::ControlError;
use super::tcp::Listening;
use super::token::{self, Token};

/// How long a client has to send its request head.
const HEAD_WITHIN: Duration = Duration::from_secs(10);

/// How long writing an answer may block on a client that does not read.
const WRITE_WITHIN: Duration = Duration::from_secs(60);

/// The largest request head read (a scraper's is a few hundred bytes): a head that has not
/// ended within it is refused, however its bytes come.
const MAX_HEAD: usize = 16 << 10;

/// The most header lines a request may have.
const MAX_HEADERS: usize = 64;

/// The most requests served at once, each on a thread of its own; a connection over it gets
/// `503` at once.
pub(super) const MAX_REQUESTS: usize = 16;

/// How often a connection's thread looks whether the endpoint is closing while it reads.
const CLOSING_CHECK: Duration = Duration::from_millis(100);

/// The profile's seconds when the URL gives none (Go's default).
const PROFILE_SECONDS: f64 = 30.0;

/// The heap profile's seconds when the URL gives none.
const HEAP_SECONDS: f64 = 10.0;

/// Who may read the profiles: those who show the token (in the query, `?token=`, or as
/// `Authorization: Bearer`), or, opted out, any local user.
#[derive(Clone, Debug)]
pub(super) enum Access {
    /// The request must show this token.
    Token(Token),
    /// Any client on loopback (`TPROF_PPROF_HTTP_OPEN=1`), for scrapers that cannot send one.
    Open,
}

/// Serves the pull endpoint on `addr`, each request on a thread of its own (at most
/// [`MAX_REQUESTS`] at once), and writes the address bound beside `socket` (`.http`), and
/// the token (`.token`, mode 0600) when `access` asks for one.
pub(super) fn listen(
    addr: SocketAddr,
    socket: &Path,
    node: &NodeHandle,
    closing: &Arc<AtomicBool>,
    access: Access,
) -> Result<Listening, ControlError> {
    let node = node.clone();
    let cut = Arc::clone(closing);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&in_flight);
    let secret = match &access {
        Access::Token(token) => Some(format!("{}\n", token.as_str())),
        Access::Open => None,
    };
    let token_file = move |_: SocketAddr| secret.clone().unwrap_or_default();
    let mut files: Vec<(std::path::PathBuf, &dyn Fn(SocketAddr) -> String)> =
        vec![(token::beside(socket, "http"), &|bound| format!("{bound}\n"))];
    if matches!(access, Access::Token(_)) {
        files.push((token::beside(socket, "token"), &token_file));
    }
    let access = Arc::new(access);
    let mut listening =
        Listening::open(addr, &files, "tprof-pprof-http", closing, move |stream| {
            admit(stream, &counted, &node, &cut, &access)
        })?;
    listening.in_flight = Some(in_flight);
    Ok(listening)
}

/// A request in progress, counted in the endpoint's `in_flight` while it lives.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A new connection: served on a thread of its own, or, with [`MAX_REQUESTS`] in progress,
/// told so with `503` and closed.
fn admit(
    mut stream: TcpStream,
    in_flight: &Arc<AtomicUsize>,
    node: &NodeHandle,
    closing: &Arc<AtomicBool>,
    access: &Arc<Access>,
) {
    if in_flight.fetch_add(1, Ordering::SeqCst) >= MAX_REQUESTS {
        in_flight.fetch_sub(1, Ordering::SeqCst);
        let busy = Answer::text(
            503,
            format!(
                "{MAX_REQUESTS} requests are in progress, the most served at once: ask again \
                 when one has ended"
            ),
        );
        // A short answer into an empty socket buffer: it does not block the acceptor.
        let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
        let _ = write_answer(&mut stream, &busy);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        return;
    }
    let counted = InFlight(Arc::clone(in_flight));
    let (node, closing, access) = (node.clone(), Arc::clone(closing), Arc::clone(access));
    // Should the thread not start, the closure is dropped: the count with it.
    let _ = std::thread::Builder::new()
        .name("tprof-pprof-request".into())
        .spawn(move || {
            let _counted = counted;
            serve(stream, &node, &closing, &access);
        });
}

/// An answer: its status, its content type and its body.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Answer {
    /// A `200` of binary pprof.
    fn pprof(body: Vec<u8>) -> Answer {
        Answer {
            status: 200,
            content_type: "application/octet-stream",
            body,
        }
    }

    /// Plain text with `status`: an error says what to do, and ends with a newline.
    fn text(status: u16, text: impl Into<String>) -> Answer {
        let mut body = text.into().into_bytes();
        if !body.ends_with(b"\n") {
            body.push(b'\n');
        }
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            body,
        }
    }
}

/// One connection: its request read, answered, and the connection closed. A profile in the
/// making is cut short when the endpoint closes (`closing`), as is a request head still
/// coming in, so that closing it waits for no request.
fn serve(mut stream: TcpStream, node: &NodeHandle, closing: &Arc<AtomicBool>, access: &Access) {
    let answer = match read_head(&mut stream, closing) {
        Ok(head) => answer(&head, node, closing, access),
        Err(answer) => answer,
    };
    let _ = stream.set_write_timeout(Some(WRITE_WITHIN));
    let _ = write_answer(&mut stream, &answer);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

/// The request head's bytes, up to the blank line, within [`HEAD_WITHIN`] and [`MAX_HEAD`]
/// bytes; given up once the endpoint is `closing`.
fn read_head(stream: &mut impl ReadWithin, closing: &AtomicBool) -> Result<Vec<u8>, Answer> {
    let deadline = Instant::now() + HEAD_WITHIN;
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    loop {
        // The blank line may straddle what came before and what just came.
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end + 4);
            return Ok(head);
        }
        if head.len() >= MAX_HEAD {
            return Err(Answer::text(
                431,
                format!("the request head is over {MAX_HEAD} bytes"),
            ));
        }
        if closing.load(Ordering::SeqCst) {
            return Err(Answer::text(503, "the endpoint is closing"));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Answer::text(400, "the request head did not come in time"));
        }
        // Never more than the limit leaves room for: the terminator must fall within it.
        let room = (MAX_HEAD - head.len()).min(chunk.len());
        match stream.read_within(&mut chunk[..room], left.min(CLOSING_CHECK)) {
            Ok(0) => {
                return Err(Answer::text(
                    400,
                    "the request ended before its head did (a blank line)",
                ));
            }
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Interrupted | ErrorKind::WouldBlock | ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(Answer::text(400, format!("cannot read the request: {e}"))),
        }
    }
}

/// A stream read with a bound on each read's wait.
trait ReadWithin {
    /// Reads into `buf`, waiting at most `within` (a `WouldBlock` or `TimedOut` error then).
    fn read_within(&mut self, buf: &mut [u8], within: Duration) -> std::io::Result<usize>;
}

impl ReadWithin for TcpStream {
    fn read_within(&mut self, buf: &mut [u8], within: Duration) -> std::io::Result<usize> {
        self.set_read_timeout(Some(within.max(Duration::from_millis(1))))?;
        self.read(buf)
    }
}

/// Whether the request shows `token`: `?token=` in its query or `Authorization: Bearer`.
fn shows_token(request: &httparse::Request<'_, '_>, query: &str, token: &Token) -> bool {
    let in_query = param(query, "token").is_some_and(|t| token.matches(t));
    let in_header = request.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("authorization")
            && std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().strip_prefix("Bearer "))
                .is_some_and(|t| token.matches(t.trim()))
    });
    in_query || in_header
}

/// What a request without the token is told.
const NEEDS_TOKEN: &str = "this pull endpoint serves only those who show its token: add \
     token=TOKEN to the URL's query (go tool pprof 'http://HOST:PORT/debug/pprof/profile?token=TOKEN') \
     or send Authorization: Bearer TOKEN; the token is in the .token file (mode 0600) beside the \
     program's control socket, readable by its user only. For a scraper that cannot send one, \
     start the program with TPROF_PPROF_HTTP_OPEN=1 (then any local user can read the profiles)";

/// The answer to a request head.
fn answer(head: &[u8], node: &NodeHandle, closing: &Arc<AtomicBool>, access: &Access) -> Answer {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Answer::text(400, "an incomplete request head"),
        Err(e) => return Answer::text(400, format!("not an HTTP/1.x request: {e}")),
    }
    let (Some(method), Some(target)) = (request.method, request.path) else {
        return Answer::text(400, "a request without a method or a path");
    };
    if method != "GET" {
        return Answer::text(405, format!("{method}: only GET is served here"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if let Access::Token(token) = access
        && !shows_token(&request, query, token)
    {
        return Answer::text(401, NEEDS_TOKEN);
    }
    match route(path, query, node, closing) {
        Ok(answer) | Err(answer) => answer,
    }
}

/// The answer for `path` and its query.
fn route(
    path: &str,
    query: &str,
    node: &NodeHandle,
    closing: &Arc<AtomicBool>,
) -> Result<Answer, Answer> {
    match path.trim_end_matches('/') {
        "/debug/pprof" => Ok(Answer {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: INDEX.as_bytes().to_vec(),
        }),
        "/debug/pprof/profile" => {
            let seconds = seconds(query, PROFILE_SECONDS)?;
            profiles::cpu(node, seconds, closing).map(Answer::pprof)
        }
        "/debug/pprof/heap" | "/debug/pprof/allocs" => {
            let seconds = seconds(query, HEAP_SECONDS)?;
            profiles::heap(node, seconds, closing).map(Answer::pprof)
        }
        "/debug/pprof/goroutine" => match param(query, "debug").unwrap_or("0") {
            "0" => profiles::processes(node).map(Answer::pprof),
            level @ ("1" | "2") => {
                profiles::processes_text(node, level == "2").map(|text| Answer::text(200, text))
            }
            other => Err(Answer::text(
                400,
                format!("debug={other}: give 0 (pprof), 1 or 2 (text)"),
            )),
        },
        _ => Err(Answer::text(
            404,
            format!("{path}: no such profile here (/debug/pprof/ lists them)"),
        )),
    }
}

/// The value of `name` in a query string (`a=1&b=2`); unknown names are ignored, as Go
/// ignores them.
fn param<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find_map(|(key, value)| (key == name).then_some(value))
}

/// The query's `seconds`, `default` when it has none.
fn seconds(query: &str, default: f64) -> Result<f64, Answer> {
    let Some(text) = param(query, "seconds") else {
        return Ok(default);
    };
    let max = super::serve::MAX_SAMPLE_SECONDS;
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= max => Ok(s),
        _ => Err(Answer::text(
            400,
            format!("seconds={text}: give a number of seconds over 0, at most {max}"),
        )),
    }
}

/// The status line's words.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// Writes `answer` as an HTTP/1.1 response that closes the connection.
fn write_answer(out: &mut impl Write, answer: &Answer) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         X-Content-Type-Options: nosniff\r\nConnection: close\r\n",
        answer.status,
        reason(answer.status),
        answer.content_type,
        answer.body.len()
    );
    if answer.status == 401 {
        head.push_str("WWW-Authenticate: Bearer realm=\"tprof\"\r\n");
    }
    if answer.status == 405 {
        head.push_str("Allow: GET\r\n");
    }
    if answer.content_type == "application/octet-stream" {
        head.push_str("Content-Disposition: attachment; filename=\"profile\"\r\n");
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(&answer.body)?;
    out.flush()
}

/// `/debug/pprof/`.
const INDEX: &str = "<!DOCTYPE html>
<html><head><title>/debug/pprof/</title></head><body>
<h1>/debug/pprof/</h1>
<p>tprof's pull endpoint: profiles of this node's processes.</p>
<table>
<tr><td><a href=\"profile?seconds=30\">profile</a></td><td>CPU samples of every process for <code>seconds</code> (pprof, labels pid and process)</td></tr>
<tr><td><a href=\"heap?seconds=10\">heap</a></td><td>allocation samples for <code>seconds</code> (needs the counting allocator)</td></tr>
<tr><td><a href=\"goroutine\">goroutine</a></td><td>every process at the path it runs or waits in (<a href=\"goroutine?debug=1\">debug=1</a>, <a href=\"goroutine?debug=2\">debug=2</a>: as text)</td></tr>
</table>
</body></html>
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_seconds_read_as_gos() {
        assert_eq!(param("seconds=5&debug=1", "debug"), Some("1"));
        assert_eq!(param("gc&debug=2", "gc"), Some(""));
        assert_eq!(param("", "seconds"), None);
        assert_eq!(seconds("", 30.0).unwrap(), 30.0);
        assert_eq!(seconds("seconds=0.5", 30.0).unwrap(), 0.5);
        for bad in [
            "seconds=0",
            "seconds=-1",
            "seconds=601",
            "seconds=x",
            "seconds=NaN",
        ] {
            assert_eq!(seconds(bad, 30.0).unwrap_err().status, 400, "{bad}");
        }
    }

    #[test]
    fn an_answer_is_an_http_response_that_closes() {
        let mut out = Vec::new();
        write_answer(&mut out, &Answer::text(405, "only GET")).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{text}"
        );
        assert!(text.contains("Content-Length: 9\r\n"), "{text}");
        assert!(text.contains("Allow: GET\r\n") && text.contains("Connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nonly GET\n"), "{text}");
    }

    impl ReadWithin for &[u8] {
        fn read_within(&mut self, buf: &mut [u8], _: Duration) -> std::io::Result<usize> {
            self.read(buf)
        }
    }

    /// The head limit is hard: a head that ends 40 bytes past it, sent in one piece, is
    /// refused; one that ends within it is read.
    #[test]
    fn the_head_limit_is_hard() {
        let closing = AtomicBool::new(false);
        let over = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD + 40));
        let err = read_head(&mut over.as_bytes(), &closing).unwrap_err();
        assert_eq!(err.status, 431);
        let exact = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD - 23));
        assert_eq!(exact.len(), MAX_HEAD);
        assert_eq!(
            read_head(&mut exact.as_bytes(), &closing).unwrap().len(),
            MAX_HEAD
        );
        // Once the endpoint closes, a head still coming is given up.
        closing.store(true, Ordering::SeqCst);
        let err = read_head(&mut &b"GET / HTTP/1.1\r\n"[..], &closing).unwrap_err();
        assert_eq!(err.status, 503);
    }
}
