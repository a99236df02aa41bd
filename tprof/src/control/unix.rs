//! The endpoint's Unix socket: the acceptor's loop, which checks each peer's user with
//! `SO_PEERCRED` before a byte is read and serves at most [`MAX_PEERS`] connections at once,
//! each on a thread of its own, its first message within [`FIRST_WITHIN`].

use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use runtime::NodeHandle;

use super::Peer;
use super::conversation::{self, Limits, WRITE_WITHIN, respond, send};
use super::protocol::{MAX_FRAME, Response, VERSION, write_frame};

/// The most connections the control socket serves at once, each on a thread of its own; a
/// peer over it is told so and closed.
const MAX_PEERS: usize = 64;

/// How long a peer has to send its first message (the TCP listener's `hello` has as long).
const FIRST_WITHIN: Duration = Duration::from_secs(10);

/// The acceptor's loop: each peer of this user gets a thread, up to [`MAX_PEERS`] at once;
/// others are told why and closed at once.
pub(super) fn accept(
    listener: &UnixListener,
    node: &NodeHandle,
    limits: &Limits,
    peers: &Arc<AtomicUsize>,
) {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let own = unsafe { libc::geteuid() };
    for stream in listener.incoming() {
        if limits.closing.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else { continue };
        if !peer_allowed(peer_uid(&stream), own) {
            let _ = refuse(
                &mut stream,
                "refused: the control endpoint serves only its own user",
            );
            continue;
        }
        if peers.fetch_add(1, Ordering::SeqCst) >= MAX_PEERS {
            peers.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = refuse(
                &mut stream,
                &format!(
                    "refused: {MAX_PEERS} connections are open, the most this endpoint serves \
                     at once; close one and try again"
                ),
            );
            continue;
        }
        let peer = Peer(Arc::clone(peers));
        let node = node.clone();
        let limits = limits.clone();
        let _ = std::thread::Builder::new()
            .name("tprof-control-peer".into())
            .spawn(move || {
                let _peer = peer;
                converse_local(stream, &node, &limits);
            });
    }
}

/// A Unix socket's connection: its first message within [`FIRST_WITHIN`], then the next ones
/// each within `limits.idle` of the one before (a person at `tprof attach` thinks between
/// commands; minutes by default).
fn converse_local(mut stream: UnixStream, node: &NodeHandle, limits: &Limits) {
    let _ = stream.set_write_timeout(Some(WRITE_WITHIN));
    match conversation::next_message(&mut stream, FIRST_WITHIN, MAX_FRAME, &limits.closing) {
        Ok(first) => {
            if send(&mut stream, &respond(node, &first, &limits.closing)).is_ok() {
                conversation::converse(stream, node, limits);
            }
        }
        Err(ended) => conversation::say_why(&mut stream, &ended),
    }
}

/// Whether a peer whose uid is `peer` may drive a program running as `own`: only its user.
fn peer_allowed(peer: io::Result<u32>, own: u32) -> bool {
    matches!(peer, Ok(uid) if uid == own)
}

/// Tells a refused peer why, in one response, and closes.
fn refuse(stream: &mut UnixStream, why: &str) -> io::Result<()> {
    let response = Response {
        version: VERSION,
        id: 0,
        reply: None,
        error: Some(why.to_owned()),
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
}
