//! The control endpoint over TCP: on loopback only, and only for a client that shows the
//! token in its first message (`hello`); and the client's side, which finds the token beside
//! the endpoint's socket.

use std::io::Write;
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use runtime::NodeHandle;

use super::conversation::{self, Ended, Limits, WRITE_WITHIN, failure, respond, send};
use super::protocol::{Command, Request, VERSION};
use super::token::{self, Token};
use super::{ControlClient, ControlError, Peer};

/// How long a TCP client has to send its `hello` before it is disconnected.
const HELLO_WITHIN: Duration = Duration::from_secs(10);

/// The largest first message a client that has not shown the token may send (a `hello` is
/// well under it): nobody unproven makes the endpoint allocate 16 MiB.
const HELLO_LIMIT: usize = 64 << 10;

/// What a client that does not show the token is told before it is disconnected.
pub(super) const REFUSAL: &str = "refused: a TCP client must send the endpoint's token in its \
     first message, hello (tprof attach HOST:PORT finds it beside the endpoint's socket; or \
     give --token or --token-file)";

/// A listener of the endpoint on a TCP address, and the files that say where it is.
#[derive(Debug)]
pub(super) struct Listening {
    /// Where it listens (the port chosen when 0 was asked).
    pub(super) addr: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
    files: Vec<PathBuf>,
    /// The requests in progress on threads of their own, which `close` waits for (a while).
    pub(super) in_flight: Option<Arc<AtomicUsize>>,
}

impl Listening {
    /// Binds `addr` and writes `files` (each a path and its contents, mode 0600) with the
    /// address bound; the acceptor thread runs `serve` on each connection from loopback
    /// until `closing` is set.
    pub(super) fn open(
        addr: SocketAddr,
        files: &[(PathBuf, &dyn Fn(SocketAddr) -> String)],
        name: &str,
        closing: &Arc<AtomicBool>,
        serve: impl Fn(TcpStream) + Send + 'static,
    ) -> Result<Listening, ControlError> {
        let net = |source| ControlError::Net {
            addr: addr.to_string(),
            source,
        };
        let listener = TcpListener::bind(addr).map_err(net)?;
        let bound = listener.local_addr().map_err(net)?;
        let mut listening = Listening {
            addr: bound,
            acceptor: None,
            files: Vec::new(),
            in_flight: None,
        };
        for (path, contents) in files {
            token::write_private(path, &contents(bound)).map_err(|source| ControlError::Io {
                path: path.clone(),
                source,
            })?;
            listening.files.push(path.clone());
        }
        let closing = closing.clone();
        listening.acceptor = Some(
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(move || {
                    for stream in listener.incoming() {
                        if closing.load(Ordering::SeqCst) {
                            return;
                        }
                        let Ok(stream) = stream else { continue };
                        // The listener is on loopback, so its peers are too; checked anyway.
                        if stream.peer_addr().is_ok_and(|p| p.ip().is_loopback()) {
                            serve(stream);
                        }
                    }
                })
                .map_err(net)?,
        );
        Ok(listening)
    }

    /// Stops the acceptor (the endpoint's `closing` is set) and removes the files.
    pub(super) fn close(mut self) {
        // Wakes the acceptor out of `accept`; it sees `closing` and ends.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        // Each request looks at `closing` at least every tenth of a second while it reads or
        // profiles; one stuck writing to a client that does not read is left behind.
        if let Some(in_flight) = &self.in_flight {
            super::drain(in_flight);
        }
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Listens for control clients on `addr`, each in a thread of its own, and writes the token
/// and the address bound beside `socket`.
pub(super) fn listen(
    addr: SocketAddr,
    socket: &Path,
    node: &NodeHandle,
    limits: &Limits,
    token: Token,
) -> Result<Listening, ControlError> {
    let secret = token.clone();
    let node = node.clone();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&in_flight);
    let theirs = limits.clone();
    let mut listening = Listening::open(
        addr,
        &[
            (token::beside(socket, "token"), &move |_| {
                format!("{}\n", secret.as_str())
            }),
            (token::beside(socket, "tcp"), &|bound| format!("{bound}\n")),
        ],
        "tprof-control-tcp",
        &limits.closing,
        move |stream| {
            counted.fetch_add(1, Ordering::SeqCst);
            let peer = Peer(Arc::clone(&counted));
            let node = node.clone();
            let token = token.clone();
            let limits = theirs.clone();
            let _ = std::thread::Builder::new()
                .name("tprof-control-peer".into())
                .spawn(move || {
                    let _peer = peer;
                    converse_with_token(stream, &node, &token, &limits);
                });
        },
    )?;
    listening.in_flight = Some(in_flight);
    Ok(listening)
}

/// A TCP connection: its first message must be a `hello` with the token; then it is served
/// as a Unix socket's connection is. Otherwise it gets an error response and is closed.
fn converse_with_token(mut stream: TcpStream, node: &NodeHandle, token: &Token, limits: &Limits) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(WRITE_WITHIN));
    let body =
        match conversation::next_message(&mut stream, HELLO_WITHIN, HELLO_LIMIT, &limits.closing) {
            Ok(body) => body,
            Err(Ended::Closed) => return,
            Err(ended @ Ended::Closing) => return conversation::say_why(&mut stream, &ended),
            Err(_) => {
                let _ = send(&mut stream, &failure(0, REFUSAL.to_owned()));
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
        };
    let request = serde_json::from_slice::<Request>(&body).ok();
    let shown = request.as_ref().is_some_and(|r| {
        r.version == VERSION
            && matches!(&r.command, Command::Hello { token: Some(t) } if token.matches(t))
    });
    if !shown {
        let id = request.map_or(0, |r| r.id);
        let _ = send(&mut stream, &failure(id, REFUSAL.to_owned()));
        let _ = stream.flush();
        let _ = stream.shutdown(Shutdown::Both);
        return;
    }
    if send(&mut stream, &respond(node, &body, &limits.closing)).is_err() {
        return;
    }
    conversation::converse(stream, node, limits);
}

/// `text` as a socket address: `IP:PORT`, `[IPv6]:PORT`, or `localhost:PORT` (127.0.0.1).
pub fn parse_addr(text: &str) -> Option<SocketAddr> {
    if let Ok(addr) = text.parse() {
        return Some(addr);
    }
    let port = text.strip_prefix("localhost:")?.parse().ok()?;
    Some(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

/// Connects to the endpoint `target` names, as `tprof attach` does: `HOST:PORT` over TCP,
/// showing `token` (by default the one written beside the endpoint's socket that listens
/// there); else an OS pid or a socket path ([`find_endpoint`](super::script::find_endpoint)).
///
/// # Errors
/// A sentence: nothing listens, no token is found, or the endpoint refused.
pub fn connect_target(target: &str, token: Option<Token>) -> Result<ControlClient, String> {
    if let Some(addr) = parse_addr(target) {
        let token = match token {
            Some(token) => token,
            None => find_token(addr)?,
        };
        return ControlClient::connect_tcp(addr, &token).map_err(|e| e.to_string());
    }
    let path = super::paths::find_endpoint(target)?;
    ControlClient::connect(&path).map_err(|e| e.to_string())
}

/// The token of the endpoint whose `.tcp` file, in [`runtime_dir`](super::runtime_dir),
/// names `addr`.
fn find_token(addr: SocketAddr) -> Result<Token, String> {
    let dir = super::runtime_dir();
    let wanted = addr.to_string();
    let found = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "tcp")
                && std::fs::read_to_string(p).is_ok_and(|text| text.trim() == wanted)
        });
    match found {
        Some(tcp) => Token::read_file(&token::beside(&tcp, "token")),
        None => Err(format!(
            "no endpoint of this user listens on {addr} (none of the .tcp files in {} names \
             it): give its token with --token or --token-file",
            dir.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_ip_port_or_localhost() {
        assert_eq!(
            parse_addr("127.0.0.1:80"),
            Some(SocketAddr::from(([127, 0, 0, 1], 80)))
        );
        assert_eq!(
            parse_addr("localhost:0"),
            Some(SocketAddr::from(([127, 0, 0, 1], 0)))
        );
        assert!(parse_addr("[::1]:9").is_some_and(|a| a.ip().is_loopback()));
        assert_eq!(parse_addr("4242"), None, "an OS pid");
        assert_eq!(parse_addr("/run/x.sock"), None);
        assert_eq!(parse_addr("localhost:http"), None);
    }
}
