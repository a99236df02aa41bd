//! The other end of a control endpoint: [`ControlClient`], which `tprof attach` speaks
//! through, over the Unix socket or over TCP with the endpoint's token.

use std::fmt;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::protocol::{
    Command, MAX_REPLY, Reply, Request, Response, VERSION, read_frame_up_to, write_frame,
};
use super::{ControlError, Token};

/// A connection to a control endpoint (what `tprof attach` speaks through).
pub struct ControlClient {
    stream: Box<dyn Transport>,
    next_id: u64,
}

/// A Unix or TCP stream.
trait Transport: Read + Write + Send {}

impl<T: Read + Write + Send> Transport for T {}

impl fmt::Debug for ControlClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlClient")
            .field("next_id", &self.next_id)
            .finish_non_exhaustive()
    }
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
        Ok(ControlClient {
            stream: Box::new(stream),
            next_id: 1,
        })
    }

    /// Connects to an endpoint's TCP address and shows it `token` (in `hello`).
    ///
    /// # Errors
    /// [`ControlError::Net`] when nothing listens there, [`ControlError::Refused`] when the
    /// endpoint refuses the token.
    pub fn connect_tcp(addr: SocketAddr, token: &Token) -> Result<ControlClient, ControlError> {
        let stream = std::net::TcpStream::connect(addr).map_err(|source| ControlError::Net {
            addr: addr.to_string(),
            source,
        })?;
        // Each frame is two writes (its length, its body): without this, Nagle's algorithm
        // holds the second until the first is acknowledged, some 40 ms per request.
        let _ = stream.set_nodelay(true);
        let mut client = ControlClient {
            stream: Box::new(stream),
            next_id: 1,
        };
        client
            .request(Command::Hello {
                token: Some(token.as_str().to_owned()),
            })
            .map_err(ControlError::Refused)?;
        Ok(client)
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
        let sent = write_frame(&mut *self.stream, &body);
        // A refused peer may find the connection closed before it sends: the refusal is
        // waiting to be read all the same.
        let body = read_frame_up_to(&mut *self.stream, MAX_REPLY).map_err(|e| match &sent {
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
