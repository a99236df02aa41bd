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

pub mod complete;
pub mod protocol;
pub mod script;
mod serve;
pub mod top;

use std::fmt;
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use runtime::NodeHandle;

use protocol::{
    Command, FrameError, MAX_REPLY, Reply, Request, Response, VERSION, read_frame,
    read_frame_up_to, write_frame,
};

/// Where and how to open an endpoint.
#[derive(Clone, Debug, Default)]
pub struct ControlOptions {
    path: Option<PathBuf>,
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
}

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
        }
    }
}

impl std::error::Error for ControlError {}

/// An open control endpoint. Dropping it stops listening and removes the socket.
pub struct ControlEndpoint {
    path: PathBuf,
    closing: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
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
    /// socket file is replaced), [`ControlError::Io`] when the socket cannot be made.
    pub fn open(
        node: &NodeHandle,
        options: ControlOptions,
    ) -> Result<ControlEndpoint, ControlError> {
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
        let acceptor = {
            let closing = closing.clone();
            let node = node.clone();
            std::thread::Builder::new()
                .name("tprof-control".into())
                .spawn(move || accept(&listener, &node, &closing))
                .map_err(io_error)?
        };
        Ok(ControlEndpoint {
            path,
            closing,
            acceptor: Some(acceptor),
        })
    }

    /// Opens an endpoint when the environment asks for one: `TPROF_CONTROL=1` (the default
    /// path) or `TPROF_CONTROL=PATH`; `None` when it is unset, empty or `0`.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_from_env(node: &NodeHandle) -> Result<Option<ControlEndpoint>, ControlError> {
        let value = std::env::var_os("TPROF_CONTROL").unwrap_or_default();
        let options = match value.to_str() {
            Some("" | "0") => return Ok(None),
            Some("1") => ControlOptions::new(),
            _ if Path::new(&value).is_absolute() => ControlOptions::new().path(value),
            _ => {
                return Err(ControlError::BadEnvironment(
                    value.to_string_lossy().into_owned(),
                ));
            }
        };
        ControlEndpoint::open(node, options).map(Some)
    }

    /// The socket's path: what `tprof attach` takes.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlEndpoint {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        // Wakes the acceptor out of `accept`; it sees `closing` and ends.
        let _ = UnixStream::connect(&self.path);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `$XDG_RUNTIME_DIR/tprof-<ospid>-<node>.sock`, or in the temp dir.
pub fn default_path(os_pid: u32, node: u32) -> PathBuf {
    runtime_dir().join(format!("tprof-{os_pid}-{node}.sock"))
}

/// Where endpoints are made: `$XDG_RUNTIME_DIR`, or the temp dir.
pub fn runtime_dir() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(std::env::temp_dir)
}

/// The acceptor's loop: each peer of this user gets a thread; others are closed at once.
fn accept(listener: &UnixListener, node: &NodeHandle, closing: &AtomicBool) {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let own = unsafe { libc::geteuid() };
    for stream in listener.incoming() {
        if closing.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else { continue };
        if !peer_allowed(peer_uid(&stream), own) {
            let _ = refuse(&mut stream);
            continue;
        }
        let node = node.clone();
        let _ = std::thread::Builder::new()
            .name("tprof-control-peer".into())
            .spawn(move || converse(stream, &node));
    }
}

/// Whether a peer whose uid is `peer` may drive a program running as `own`: only its user.
fn peer_allowed(peer: io::Result<u32>, own: u32) -> bool {
    matches!(peer, Ok(uid) if uid == own)
}

/// Tells a refused peer why, in one response, and closes.
fn refuse(stream: &mut UnixStream) -> io::Result<()> {
    let response = Response {
        version: VERSION,
        id: 0,
        reply: None,
        error: Some("refused: the control endpoint serves only its own user".to_owned()),
    };
    write_frame(
        stream,
        &serde_json::to_vec(&response).map_err(io::Error::other)?,
    )
}

/// The uid of the process at the other end of `stream`.
#[cfg(target_os = "linux")]
fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the descriptor is the stream's, open while `stream` is borrowed; `cred` is a
    // writable `ucred` and `len` holds its size, as SO_PEERCRED requires; the kernel writes at
    // most `len` bytes and updates `len`.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::from_mut(&mut cred).cast::<libc::c_void>(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Without `SO_PEERCRED`, no peer can be vouched for: every one is refused.
#[cfg(not(target_os = "linux"))]
fn peer_uid(_stream: &UnixStream) -> io::Result<u32> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "peer credentials are read on Linux only",
    ))
}

/// One connection: requests in, responses out, until the peer closes or sends a frame whose
/// length cannot be trusted.
fn converse(mut stream: UnixStream, node: &NodeHandle) {
    loop {
        let response = match read_frame(&mut stream) {
            Ok(body) => respond(node, &body),
            Err(FrameError::Closed | FrameError::Io(_)) => return,
            Err(e @ FrameError::TooLong(_)) => {
                let _ = send(&mut stream, &failure(0, e.to_string()));
                return;
            }
        };
        if send(&mut stream, &response).is_err() {
            return;
        }
    }
}

/// The response to one frame.
fn respond(node: &NodeHandle, body: &[u8]) -> Response {
    let request: Request = match serde_json::from_slice(body) {
        Ok(request) => request,
        Err(e) => {
            // Its id, if that much can be read, so the client can match the error.
            let id = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64))
                .unwrap_or(0);
            return failure(id, format!("cannot read the request: {e}"));
        }
    };
    if request.version != VERSION {
        return failure(
            request.id,
            format!(
                "protocol version {} is not spoken here: this endpoint speaks version {VERSION}",
                request.version
            ),
        );
    }
    match serve::handle(node, request.command) {
        Ok(reply) => Response {
            version: VERSION,
            id: request.id,
            reply: Some(reply),
            error: None,
        },
        Err(why) => failure(request.id, why),
    }
}

fn failure(id: u64, why: String) -> Response {
    Response {
        version: VERSION,
        id,
        reply: None,
        error: Some(why),
    }
}

fn send(stream: &mut UnixStream, response: &Response) -> io::Result<()> {
    write_frame(
        stream,
        &serde_json::to_vec(response).map_err(io::Error::other)?,
    )
}

/// A connection to a control endpoint (what `tprof attach` speaks through).
#[derive(Debug)]
pub struct ControlClient {
    stream: UnixStream,
    next_id: u64,
}

impl ControlClient {
    /// Connects to the endpoint at `path`.
    ///
    /// # Errors
    /// [`ControlError::Io`] when nothing listens there.
    pub fn connect(path: impl AsRef<Path>) -> Result<ControlClient, ControlError> {
        let path = path.as_ref();
        let stream = UnixStream::connect(path).map_err(|source| ControlError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(ControlClient { stream, next_id: 1 })
    }

    /// Sends `command` and waits for its reply; a refusal or a failed command is `Err` with
    /// the endpoint's sentence.
    ///
    /// # Errors
    /// The endpoint's error, or why the connection failed.
    pub fn request(&mut self, command: Command) -> Result<Reply, String> {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request {
            version: VERSION,
            id,
            command,
        };
        let body = serde_json::to_vec(&request).map_err(|e| e.to_string())?;
        let sent = write_frame(&mut self.stream, &body);
        // A refused peer may find the connection closed before it sends: the refusal is
        // waiting to be read all the same.
        let body = read_frame_up_to(&mut self.stream, MAX_REPLY).map_err(|e| match &sent {
            Err(send) => format!("cannot send: {send}"),
            Ok(()) => e.to_string(),
        })?;
        let response: Response = serde_json::from_slice(&body)
            .map_err(|e| format!("the endpoint's reply does not read: {e}"))?;
        match (response.reply, response.error) {
            (_, Some(error)) => Err(error),
            (Some(reply), None) => Ok(reply),
            (None, None) => Err("the endpoint replied with nothing".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_user_is_allowed() {
        assert!(peer_allowed(Ok(1000), 1000));
        assert!(!peer_allowed(Ok(1001), 1000));
        assert!(!peer_allowed(Ok(0), 1000), "not even root, by this check");
        assert!(!peer_allowed(Err(io::ErrorKind::Other.into()), 1000));
    }

    #[test]
    fn the_default_path_names_the_program_and_the_node() {
        let path = default_path(4242, 3);
        assert_eq!(path.file_name().unwrap(), "tprof-4242-3.sock");
        assert!(path.is_absolute());
    }
}
