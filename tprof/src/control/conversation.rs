//! A control connection's messages, one after another, over a Unix or TCP stream: each is
//! waited for in slices that notice the endpoint closing, for at most the connection's idle
//! limit; once its first byte has come it must arrive whole within [`FRAME_WITHIN`]; and a
//! connection that goes quiet past its limit, or whose endpoint closes, is told why and
//! closed, so that no connection holds its slot (and its thread) forever. Each message is
//! answered with its [`respond`]: the request read, its protocol version checked and its
//! command served, the answer written within [`WRITE_WITHIN`].

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use runtime::NodeHandle;

use super::protocol::{
    FrameError, MAX_FRAME, Request, Response, VERSION, read_frame_up_to, write_frame,
};
use super::serve;

/// How long a message may take to arrive once its first byte has come.
pub(super) const FRAME_WITHIN: Duration = Duration::from_secs(10);

/// How often a connection waiting for its next message looks whether the endpoint closes.
const CLOSING_CHECK: Duration = Duration::from_millis(100);

/// What every connection of an endpoint is held to.
#[derive(Clone, Debug)]
pub(super) struct Limits {
    /// Set when the endpoint closes: waits end, profiles in progress are cut short.
    pub(super) closing: Arc<AtomicBool>,
    /// The longest a connection may be silent between two messages.
    pub(super) idle: Duration,
}

/// A stream a connection is served over.
pub(super) trait Socket: Read + Write {
    /// How long a read may block.
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
}

impl Socket for UnixStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, timeout)
    }
}

impl Socket for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
}

/// Why a connection's next message did not come.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// The peer closed (or the stream failed).
    Closed,
    /// Nothing came within the wait.
    Quiet(Duration),
    /// The endpoint is closing.
    Closing,
    /// A message that began did not arrive whole within [`FRAME_WITHIN`], or announced more
    /// than the limit (that error's sentence).
    Broken(Option<String>),
}

impl Ended {
    /// What the peer is told before the connection is closed, if anything.
    pub(super) fn sentence(&self) -> Option<String> {
        match self {
            Ended::Closed | Ended::Broken(None) => None,
            Ended::Quiet(waited) => Some(format!(
                "the endpoint closed this connection: no message came for {} s (its idle \
                 limit, ControlOptions::idle_timeout); connect again (run tprof attach again)",
                waited.as_secs_f64()
            )),
            Ended::Closing => Some(
                "the endpoint is closing (the program is stopping its control endpoint): this \
                 connection ends"
                    .to_owned(),
            ),
            Ended::Broken(Some(why)) => Some(why.clone()),
        }
    }
}

/// The next message's bytes, of at most `limit`: waited for at most `within` (looking at
/// `closing` every [`CLOSING_CHECK`]), then read whole within [`FRAME_WITHIN`].
pub(super) fn next_message(
    stream: &mut impl Socket,
    within: Duration,
    limit: usize,
    closing: &AtomicBool,
) -> Result<Vec<u8>, Ended> {
    let start = Instant::now();
    // Its first byte, in slices; the rest within FRAME_WITHIN of it.
    let mut first = [0u8; 1];
    loop {
        if closing.load(Ordering::SeqCst) {
            return Err(Ended::Closing);
        }
        let left = within.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(Ended::Quiet(within));
        }
        if stream
            .set_read_timeout(Some(left.min(CLOSING_CHECK)))
            .is_err()
        {
            return Err(Ended::Closed);
        }
        match stream.read(&mut first) {
            Ok(0) => return Err(Ended::Closed),
            Ok(_) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Err(Ended::Closed),
        }
    }
    let timed = Within {
        stream,
        end: Instant::now() + FRAME_WITHIN,
    };
    read_frame_up_to(&mut (&first[..]).chain(timed), limit).map_err(|e| match e {
        FrameError::Closed => Ended::Closed,
        FrameError::Io(_) => Ended::Broken(None),
        e @ FrameError::TooLong(_) => Ended::Broken(Some(e.to_string())),
    })
}

/// A stream whose reads must all be done by `end`.
struct Within<'a, S: Socket> {
    stream: &'a mut S,
    end: Instant,
}

impl<S: Socket> Read for Within<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// Tells the peer why its connection ends, if there is something to tell.
pub(super) fn say_why(stream: &mut impl Write, ended: &Ended) {
    if let Some(why) = ended.sentence() {
        let _ = send(stream, &failure(0, why));
        let _ = stream.flush();
    }
}

/// One connection: requests in, responses out, until the peer closes, goes quiet past
/// `limits.idle`, sends a frame whose length cannot be trusted, or the endpoint closes.
pub(super) fn converse(mut stream: impl Socket, node: &NodeHandle, limits: &Limits) {
    loop {
        match next_message(&mut stream, limits.idle, MAX_FRAME, &limits.closing) {
            Ok(body) => {
                if send(&mut stream, &respond(node, &body, &limits.closing)).is_err() {
                    return;
                }
            }
            Err(ended) => {
                say_why(&mut stream, &ended);
                return;
            }
        }
    }
}

/// How long writing an answer may block on a peer that does not read.
pub(super) const WRITE_WITHIN: Duration = Duration::from_secs(60);

/// The response to one frame; a profile of the next seconds in it is cut short once `cut` is
/// set (the endpoint closing).
pub(super) fn respond(node: &NodeHandle, body: &[u8], cut: &Arc<AtomicBool>) -> Response {
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
    match serve::handle(node, request.command, cut) {
        Ok(reply) => Response {
            version: VERSION,
            id: request.id,
            reply: Some(reply),
            error: None,
        },
        Err(why) => failure(request.id, why),
    }
}

/// An error response to request `id`, saying `why`.
pub(super) fn failure(id: u64, why: String) -> Response {
    Response {
        version: VERSION,
        id,
        reply: None,
        error: Some(why),
    }
}

/// Writes `response` to `stream`, as one frame.
pub(super) fn send(stream: &mut impl Write, response: &Response) -> io::Result<()> {
    write_frame(
        stream,
        &serde_json::to_vec(response).map_err(io::Error::other)?,
    )
}
