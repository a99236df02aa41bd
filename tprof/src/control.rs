//! A control endpoint: a live program's node driven from outside, as an Erlang shell drives
//! `tprof` on a running system (`tprof attach`).
//!
//! [`ControlEndpoint::open`] listens on a Unix socket, mode 0600, in `$XDG_RUNTIME_DIR` (or the
//! temp dir), named by the OS pid and the node (`tprof-<ospid>-<node>.sock`). Each connection's
//! peer is checked with `SO_PEERCRED`: a process of another user is refused before a byte is
//! read. It is off unless the program opens it ([`ControlEndpoint::open`]) or asks the
//! environment ([`ControlEndpoint::open_from_env`]: `TPROF_CONTROL=1`, or a socket path).
//!
//! The endpoint is pull-based: a thread outside the runtime waits in `accept`, and does nothing
//! while nobody asks; each connection gets a thread of its own, which runs each request's
//! calls to the tprof server in a short process of the node. Requests and replies are the
//! [`protocol`]: length-prefixed JSON frames, versioned. A message that does not parse gets an
//! error reply and never disturbs the program.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let node = runtime::Node::new()?;
//! let endpoint = tprof::control::ControlEndpoint::open(node.handle(), Default::default())?;
//! println!("tprof attach {}", endpoint.path().display());
//! # Ok(()) }
//! ```
//!
//! [`ControlClient`] is the other end, which `tprof attach` uses.
//!
//! # TCP, on loopback, with a token
//!
//! [`ControlOptions::tcp`] (or `TPROF_CONTROL_TCP=127.0.0.1:PORT`, port 0 for any) also
//! listens on a TCP address, which must be on loopback (127.0.0.0/8 or ::1): anything else is
//! [`ControlError::NotLoopback`]. A TCP client must send the endpoint's [`Token`] in its first
//! message, `hello`; one that sends anything else, or a wrong token, gets an error response
//! and is disconnected. The token is generated (256 bits from the OS) unless the program gives
//! one ([`ControlOptions::token`]), and written beside the socket, mode 0600
//! (`tprof-<ospid>-<node>.token`), with the address it listens on (`.tcp`), where `tprof
//! attach HOST:PORT` finds it (or give `--token`/`--token-file`).
//!
//! # The pull endpoint
//!
//! [`ControlOptions::http`] (or `TPROF_PPROF_HTTP=127.0.0.1:PORT`) serves the URLs that
//! pull-based profilers scrape, on loopback only, to requests that show the same token
//! (unless [`ControlOptions::http_open`], `TPROF_PPROF_HTTP_OPEN=1`): see [`http`].
//!
//! # Limits
//!
//! The Unix socket serves at most 64 connections at once (one more is told so and closed),
//! each on a thread of its own; a connection's first message must come within 10 s, as the
//! TCP listener's `hello` must, a message once begun must arrive whole within 10 s, and a
//! message's body is read as it arrives (an announced length makes no buffer of that size).
//! A connection (Unix or TCP) silent for longer than its idle limit between two messages
//! ([`ControlOptions::idle_timeout`], 10 minutes by default) is told so and closed: `tprof
//! attach` may pause for minutes, but a connection held and forgotten frees its slot.
//! Closing the endpoint (dropping it) tells every connection waiting for a message so and
//! cuts every profile in progress short: `sample` and `trace` answer with what they gathered
//! and say so, and closing waits up to 5 s for those answers. Profiles of the next seconds (`sample`, `trace`,
//! and the pull endpoint's `profile` and `heap`) are taken on the connection's thread by a
//! session of their own, so they answer while every worker is busy; a request that must run
//! in a process of the node (the `tprof` server's commands) is given up with an error that
//! says why if no worker runs it within 10 s.
//!
//! # Where it is written
//!
//! Here, the endpoint, its options and its errors; its Unix socket's acceptor in `unix`, its
//! TCP listener in `tcp`, a connection's messages and the answer to each in `conversation`,
//! the commands served in `serve`, where endpoints live in `paths`, and the other end,
//! [`ControlClient`], in `client`.

mod client;
pub mod complete;
mod conversation;
pub mod http;
mod paths;
pub mod protocol;
pub mod script;
mod serve;
mod tcp;
mod token;
pub mod top;
mod unix;

pub use client::ControlClient;
pub use paths::{default_path, runtime_dir};
pub use tcp::{connect_target, parse_addr};
pub use token::{MIN_TOKEN_LEN, Token};

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use runtime::NodeHandle;

use conversation::Limits;

/// Where and how to open an endpoint.
#[derive(Clone, Debug, Default)]
pub struct ControlOptions {
    path: Option<PathBuf>,
    tcp: Option<String>,
    token: Option<Token>,
    http: Option<String>,
    http_open: bool,
    idle: Option<Duration>,
}

impl ControlOptions {
    /// The default place: `$XDG_RUNTIME_DIR/tprof-<ospid>-<node>.sock`, or the temp dir's.
    pub fn new() -> ControlOptions {
        ControlOptions::default()
    }

    /// The socket's path.
    pub fn path(mut self, path: impl Into<PathBuf>) -> ControlOptions {
        self.path = Some(path.into());
        self
    }

    /// Also listen on this TCP address (`IP:PORT` or `localhost:PORT`; port 0 picks one),
    /// which must be on loopback; clients show the [`token`](Self::token).
    pub fn tcp(mut self, addr: impl Into<String>) -> ControlOptions {
        self.tcp = Some(addr.into());
        self
    }

    /// The token TCP clients must show (by default one is generated).
    pub fn token(mut self, token: Token) -> ControlOptions {
        self.token = Some(token);
        self
    }

    /// Also serve the pull endpoint ([`http`]) on this address, which must be on loopback;
    /// its requests show the [`token`](Self::token) (by default one is generated), unless
    /// [`http_open`](Self::http_open).
    pub fn http(mut self, addr: impl Into<String>) -> ControlOptions {
        self.http = Some(addr.into());
        self
    }

    /// Serves the pull endpoint to every local user, without a token
    /// (`TPROF_PPROF_HTTP_OPEN=1`): for scrapers that cannot send one. Profiles name the
    /// program's functions, files and processes.
    pub fn http_open(mut self, open: bool) -> ControlOptions {
        self.http_open = open;
        self
    }

    /// The longest a control connection (Unix or TCP) may be silent between two messages
    /// before the endpoint tells it so and closes it; by default [`IDLE_WITHIN`], 10 minutes:
    /// a person thinking at `tprof attach` does not reach it, and a connection held and
    /// forgotten does not keep its slot (and its thread) for ever. Its first message must
    /// come within 10 s whatever this is.
    pub fn idle_timeout(mut self, idle: Duration) -> ControlOptions {
        self.idle = Some(idle);
        self
    }
}

/// How long a control connection may be silent between two messages by default
/// ([`ControlOptions::idle_timeout`]).
pub const IDLE_WITHIN: Duration = Duration::from_secs(600);

/// Why an endpoint could not be opened or a client could not connect.
#[derive(Debug)]
#[non_exhaustive]
pub enum ControlError {
    /// Another live endpoint listens at the path.
    InUse(PathBuf),
    /// The socket could not be made, bound or connected to.
    Io {
        /// The socket.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// `TPROF_CONTROL` holds something that is neither `1` nor a path.
    BadEnvironment(String),
    /// A TCP or HTTP address that is not on loopback.
    NotLoopback(SocketAddr),
    /// A TCP or HTTP address that does not read as `IP:PORT`.
    BadAddress(String),
    /// A TCP or HTTP address could not be listened on or connected to.
    Net {
        /// The address.
        addr: String,
        /// What failed.
        source: io::Error,
    },
    /// The endpoint refused the client (a wrong or missing token), in its words.
    Refused(String),
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::InUse(path) => write!(
                f,
                "another control endpoint listens at {}: choose another path",
                path.display()
            ),
            ControlError::Io { path, source } => {
                write!(f, "control socket {}: {source}", path.display())
            }
            ControlError::BadEnvironment(value) => write!(
                f,
                "TPROF_CONTROL={value:?}: set it to 1 (the default socket) or to a socket path"
            ),
            ControlError::NotLoopback(addr) => write!(
                f,
                "{addr} is not a loopback address: the control and pull endpoints listen only \
                 on 127.0.0.0/8 or [::1] (from another host, tunnel to it, e.g. ssh -L)"
            ),
            ControlError::BadAddress(addr) => write!(
                f,
                "{addr:?} is not an address: give IP:PORT on loopback, e.g. 127.0.0.1:0 \
                 (port 0 picks a free one)"
            ),
            ControlError::Net { addr, source } => write!(f, "{addr}: {source}"),
            ControlError::Refused(why) => write!(f, "the endpoint refused: {why}"),
        }
    }
}

impl std::error::Error for ControlError {}

/// An open control endpoint. Dropping it stops listening and removes the socket.
pub struct ControlEndpoint {
    path: PathBuf,
    closing: Arc<AtomicBool>,
    /// The Unix socket's connections in progress, which closing waits for (a while).
    peers: Arc<AtomicUsize>,
    acceptor: Option<JoinHandle<()>>,
    tcp: Option<tcp::Listening>,
    token: Option<Token>,
    http: Option<tcp::Listening>,
}

impl fmt::Debug for ControlEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlEndpoint")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ControlEndpoint {
    /// Opens an endpoint for `node`.
    ///
    /// # Errors
    /// [`ControlError::InUse`] when a live endpoint already listens at the path (a stale
    /// socket file is replaced), [`ControlError::Io`] when the socket cannot be made;
    /// [`ControlError::NotLoopback`] or [`ControlError::BadAddress`] for a TCP or HTTP
    /// address off loopback or unreadable (checked before anything is opened),
    /// [`ControlError::Net`] when it cannot be listened on.
    pub fn open(
        node: &NodeHandle,
        options: ControlOptions,
    ) -> Result<ControlEndpoint, ControlError> {
        let tcp_addr = options.tcp.as_deref().map(parse_loopback).transpose()?;
        let http_addr = options.http.as_deref().map(parse_loopback).transpose()?;
        // The TCP listener asks for the token, and so does the pull endpoint unless opened.
        let asks = tcp_addr.or(http_addr.filter(|_| !options.http_open));
        let token = match (asks, options.token) {
            (None, _) => None,
            (Some(_), Some(token)) => Some(token),
            (Some(addr), None) => Some(Token::generate().map_err(|source| ControlError::Net {
                addr: addr.to_string(),
                source,
            })?),
        };
        let path = options
            .path
            .unwrap_or_else(|| default_path(std::process::id(), node.id()));
        let io_error = |source| ControlError::Io {
            path: path.clone(),
            source,
        };
        if UnixStream::connect(&path).is_ok() {
            return Err(ControlError::InUse(path));
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(e)),
        }
        let listener = UnixListener::bind(&path).map_err(io_error)?;
        // Only its owner may connect (the peer check refuses others all the same).
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(io_error)?;
        }
        let closing = Arc::new(AtomicBool::new(false));
        let limits = Limits {
            closing: Arc::clone(&closing),
            idle: options.idle.unwrap_or(IDLE_WITHIN),
        };
        let peers = Arc::new(AtomicUsize::new(0));
        let acceptor = {
            let limits = limits.clone();
            let peers = Arc::clone(&peers);
            let node = node.clone();
            std::thread::Builder::new()
                .name("tprof-control".into())
                .spawn(move || unix::accept(&listener, &node, &limits, &peers))
                .map_err(io_error)?
        };
        let mut endpoint = ControlEndpoint {
            path,
            closing,
            peers,
            acceptor: Some(acceptor),
            tcp: None,
            token,
            http: None,
        };
        // Dropped on an error below: what was opened is closed again.
        if let (Some(addr), Some(token)) = (tcp_addr, endpoint.token.clone()) {
            endpoint.tcp = Some(tcp::listen(addr, &endpoint.path, node, &limits, token)?);
        }
        if let Some(addr) = http_addr {
            let access = match (&endpoint.token, options.http_open) {
                (Some(token), false) => http::Access::Token(token.clone()),
                _ => http::Access::Open,
            };
            endpoint.http = Some(http::listen(
                addr,
                &endpoint.path,
                node,
                &endpoint.closing,
                access,
            )?);
        }
        Ok(endpoint)
    }

    /// Opens an endpoint when the environment asks for one: `TPROF_CONTROL=1` (the default
    /// path) or `TPROF_CONTROL=PATH`; `None` when it is unset, empty or `0`.
    /// `TPROF_CONTROL_TCP=IP:PORT` adds a TCP listener, `TPROF_PPROF_HTTP=IP:PORT` the pull
    /// endpoint (both on loopback); either opens the endpoint at its default path when
    /// `TPROF_CONTROL` is unset. `TPROF_PPROF_HTTP_OPEN=1` serves the pull endpoint without
    /// its token ([`ControlOptions::http_open`]).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_from_env(node: &NodeHandle) -> Result<Option<ControlEndpoint>, ControlError> {
        let value = std::env::var_os("TPROF_CONTROL").unwrap_or_default();
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        let (tcp, http) = (var("TPROF_CONTROL_TCP"), var("TPROF_PPROF_HTTP"));
        let network = tcp.is_some() || http.is_some();
        let mut options = match value.to_str() {
            Some("") if network => ControlOptions::new(),
            Some("" | "0") => return Ok(None),
            Some("1") => ControlOptions::new(),
            _ if Path::new(&value).is_absolute() => ControlOptions::new().path(value),
            _ => {
                return Err(ControlError::BadEnvironment(
                    value.to_string_lossy().into_owned(),
                ));
            }
        };
        options.tcp = tcp;
        options.http = http;
        options.http_open = var("TPROF_PPROF_HTTP_OPEN").is_some_and(|v| v != "0");
        ControlEndpoint::open(node, options).map(Some)
    }

    /// The socket's path: what `tprof attach` takes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The TCP address it listens on (with port 0 asked, the port chosen), if any.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().map(|l| l.addr)
    }

    /// The token TCP clients and pull-endpoint requests must show, if it listens on TCP or
    /// serves the pull endpoint with one.
    pub fn token(&self) -> Option<&Token> {
        self.token.as_ref()
    }

    /// The file (mode 0600, beside the socket) that holds the token, if there is one.
    pub fn token_path(&self) -> Option<PathBuf> {
        self.token
            .as_ref()
            .map(|_| token::beside(&self.path, "token"))
    }

    /// The pull endpoint's address, if it serves one.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().map(|l| l.addr)
    }
}

impl Drop for ControlEndpoint {
    /// Closes the endpoint: every connection waiting for a message is told so and closed,
    /// every profile in progress (`sample`, `trace`, the pull endpoint's) is cut short and
    /// answers with what it has; closing waits a few seconds for those answers.
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        // Wakes the acceptor out of `accept`; it sees `closing` and ends.
        let _ = UnixStream::connect(&self.path);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        for listening in [self.tcp.take(), self.http.take()].into_iter().flatten() {
            listening.close();
        }
        drain(&self.peers);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `addr` as a socket address on loopback.
fn parse_loopback(addr: &str) -> Result<SocketAddr, ControlError> {
    let parsed = parse_addr(addr).ok_or_else(|| ControlError::BadAddress(addr.to_owned()))?;
    if parsed.ip().is_loopback() {
        Ok(parsed)
    } else {
        Err(ControlError::NotLoopback(parsed))
    }
}

/// How long closing waits for the connections in progress to see that the endpoint is
/// closing and answer: each looks at it at least every tenth of a second while it waits or
/// profiles; one stuck writing to a client that does not read is left behind.
const DRAIN_WITHIN: Duration = Duration::from_secs(5);

/// Waits until no connection counted in `in_flight` is left, or [`DRAIN_WITHIN`].
fn drain(in_flight: &AtomicUsize) {
    let deadline = Instant::now() + DRAIN_WITHIN;
    while in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A connection in progress, counted while it lives.
struct Peer(Arc<AtomicUsize>);

impl Drop for Peer {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
