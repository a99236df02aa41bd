//! The control endpoint's wire protocol, version 1.
//!
//! Each message is one **frame**: its length in bytes as a 4-byte big-endian unsigned integer,
//! then that many bytes of UTF-8 JSON. A frame longer than [`MAX_FRAME`] is refused (the
//! connection is then closed: past a length it does not trust, the reader cannot find the next
//! frame). A client sends a [`Request`] and reads one [`Response`] per request, in order.
//!
//! ```text
//! -> {"version":1,"id":7,"command":{"op":"set_pattern","module":"app","function":null,"arity":null}}
//! <- {"version":1,"id":7,"reply":{"kind":"matched","count":3}}
//! <- {"version":1,"id":8,"error":"the server is not started: send start first"}
//! ```
//!
//! The commands mirror the tprof server's API ([`Tprof`](crate::Tprof)): `start`, `stop`,
//! `set_pattern`, `clear_pattern`, `enable_trace`, `disable_trace`, `pause`, `resume`,
//! `restart`, `collect` (the profile as tprof's tables or any text export), `inspect` (tprof's
//! tables grouped and sorted as `inspect/3` and `format/1` lay them out); plus `hello` (who
//! is there; over TCP the first message, carrying the endpoint's token: a TCP client that
//! sends anything else first, or a wrong token, gets an error response and is
//! disconnected), `processes` (the node's processes), `top` (the first processes by a key,
//! with their polls since the previous `top`), `registered` (their registered names),
//! `functions` (the traced functions the program has), `sample` (profile the next seconds in
//! sample mode and get Julia's report), `trace` (trace every process for the next seconds
//! and get tprof's table), `peek` (what every process is doing now, and the next seconds'
//! samples) and `heap_snapshot`. A request of another version, or one that does not
//! parse, gets an error response and the connection stays usable.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// The largest request frame the endpoint accepts, in bytes (16 MiB).
pub const MAX_FRAME: usize = 16 << 20;

/// The largest reply frame a client accepts, in bytes (1 GiB: a heap snapshot or an export of
/// a large node).
pub const MAX_REPLY: usize = 1 << 30;

/// A request: a command and the id its response carries back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// [`VERSION`].
    pub version: u32,
    /// Chosen by the client; echoed in the response.
    pub id: u64,
    /// What to do.
    pub command: Command,
}

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Command {
    /// Who is there: the program, its OS pid, the node. Over TCP, the first message, with the
    /// endpoint's token (a Unix socket's peers are vouched for by their uid, and need none).
    Hello {
        /// The endpoint's token ([`Token`](super::Token)); left out of the JSON when `None`,
        /// so that `{"op":"hello"}` is the same message as before tokens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
    },
    /// The node's processes.
    Processes,
    /// The node's registered names (Erlang's `registered()`).
    Registered,
    /// The first `rows` processes by `sort` (`tprof top`), each with its polls since the
    /// previous `top` request that named the same `baseline`.
    Top {
        /// `polls`, `mailbox`, `heap`, `state`, `name` or `pid`.
        sort: String,
        /// How many processes to return.
        rows: usize,
        /// A number the client chose (at random), under which the endpoint keeps the poll
        /// counts of this request for the next one (the few most recent numbers only).
        baseline: u64,
    },
    /// The traced functions linked into the program, which patterns match.
    Functions,
    /// Starts this connection's tprof server on the node (`tprof:start/1`).
    Start {
        /// `call_count`, `call_time` or `call_memory`.
        trace_type: String,
        /// Call paths too.
        #[serde(default)]
        call_tree: bool,
    },
    /// Stops the server this connection started.
    Stop,
    /// `tprof:set_pattern(Module, Function, Arity)`; `None` is `_`.
    SetPattern {
        /// The module path.
        module: Option<String>,
        /// The function.
        function: Option<String>,
        /// The arity.
        arity: Option<u8>,
    },
    /// `tprof:clear_pattern(Module, Function, Arity)`.
    ClearPattern {
        /// The module path.
        module: Option<String>,
        /// The function.
        function: Option<String>,
        /// The arity.
        arity: Option<u8>,
    },
    /// `tprof:enable_trace(Spec)`: `all`, `new`, `existing`, a pid (`<0.5.0>`) or a name.
    EnableTrace {
        /// Which processes.
        processes: String,
        /// Their children too (`set_on_spawn`).
        #[serde(default = "yes")]
        set_on_spawn: bool,
    },
    /// `tprof:disable_trace(Spec)`.
    DisableTrace {
        /// Which processes.
        processes: String,
    },
    /// `tprof:pause()`.
    Pause,
    /// `tprof:continue()`.
    Resume,
    /// `tprof:restart()`.
    Restart,
    /// `tprof:collect()`, laid out: `process` or `total` (tprof's tables, by percent) or the
    /// name of a text export (`pretty`, `json`, `folded`, `speedscope`, `chrome`, `html`).
    Collect {
        /// The layout.
        format: String,
    },
    /// `tprof:format(tprof:inspect(tprof:collect(), GroupBy, {Column, Direction}))`: the
    /// profile as tprof's tables, grouped and sorted as asked.
    Inspect {
        /// `process` (the default) or `total`.
        #[serde(default = "process")]
        group_by: String,
        /// `module`, `function`, `calls`, `measurement`, `measurement_per_call` or `percent`
        /// (the default).
        #[serde(default = "percent")]
        column: String,
        /// `ascending` (the default, as tprof's) or `descending`.
        #[serde(default = "ascending")]
        direction: String,
    },
    /// Peek (Julia's `Profile.peek_report`, [`crate::peek`]): the deadlocks, every process
    /// with its state, then `seconds` of samples by process.
    Peek {
        /// How long to sample, 0 to 600; `None`: the program's
        /// [`peek_duration`](crate::peek::peek_duration).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
    },
    /// The node's heap snapshot (Chrome DevTools' `.heapsnapshot`), as text.
    HeapSnapshot,
    /// Samples the node for `seconds` (cpu or wall sampler, at `hz`) and returns Julia's
    /// report grouped by process.
    Sample {
        /// How long, at most 600.
        seconds: f64,
        /// `cpu` or `wall`.
        sampler: String,
        /// Rate, 1 to 10,000.
        hz: u32,
    },
    /// Traces every function of every process for `seconds` (a server of its own, beside any
    /// `tprof`) and returns tprof's table per process.
    Trace {
        /// `call_count`, `call_time` or `call_memory`.
        trace_type: String,
        /// How long, at most 600.
        seconds: f64,
    },
}

fn yes() -> bool {
    true
}

fn process() -> String {
    "process".to_owned()
}

fn percent() -> String {
    "percent".to_owned()
}

fn ascending() -> String {
    "ascending".to_owned()
}

/// A response: the request's id and its reply or error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// [`VERSION`].
    pub version: u32,
    /// The request's id (0 when the request could not be read).
    pub id: u64,
    /// What the command gave, unless it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Reply>,
    /// Why it failed: a sentence for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a command gave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reply {
    /// Done.
    Ok,
    /// Who is there.
    Hello {
        /// The program (its first argument).
        program: String,
        /// Its OS pid.
        os_pid: u32,
        /// The node's id.
        node: u32,
        /// [`VERSION`].
        protocol: u32,
    },
    /// How many functions or processes the command matched.
    Matched {
        /// The count.
        count: usize,
    },
    /// The node's processes.
    Processes {
        /// One row per process, by pid.
        processes: Vec<ProcessRow>,
    },
    /// The first processes by a sort key.
    Top {
        /// The processes, and how many there are.
        frame: super::top::TopFrame,
    },
    /// Names, sorted.
    Names {
        /// The names.
        names: Vec<String>,
    },
    /// Traced functions.
    Functions {
        /// One per function, by module, function and arity.
        functions: Vec<FunctionRow>,
    },
    /// A report or an export, as text.
    Text {
        /// The text.
        text: String,
    },
}

/// One process in [`Reply::Processes`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ProcessRow {
    /// `<node.serial.generation>`.
    pub pid: String,
    /// Its registered name, if any (left out of the message when none, as are the heap and
    /// the current function: a list of 100,000 processes is a third shorter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it was spawned to run.
    pub initial_call: String,
    /// Queued messages.
    pub message_queue_len: usize,
    /// Live heap bytes, when the counting allocator is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_bytes: Option<u64>,
    /// What it is doing: `running`, `runnable`, `receive`, `receive (timer)`, `call` (see
    /// [`callee`](Self::callee)), `waiting` (on something else) or `exiting`.
    #[serde(default)]
    pub state: String,
    /// For a process in a `call`, the process it waits for, when its call noted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callee: Option<String>,
    /// That process's registered name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callee_name: Option<String>,
    /// Its polls so far, wrapping at `u32::MAX` (the polls between two lists are the
    /// difference, taken with `wrapping_sub`).
    #[serde(default)]
    pub polls: u32,
    /// The traced function it runs or is suspended in (`module::function/arity`), while a
    /// session measures it (a sample session, call_time or call_memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_function: Option<String>,
    /// Whether a session measures it (a sample session, call_time or call_memory) but its
    /// current poll (running) or last one (suspended) began before any did: what it runs or
    /// waits in is then unknown (see
    /// [`runtime::introspect::ProcessView::polled_before_sampling`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub polled_before_sampling: bool,
}

impl ProcessRow {
    /// The state as the process lists print it: a call names whom it waits for (`call
    /// <0.5.0> (name)`), as peek does.
    pub fn state_text(&self) -> String {
        match (&self.callee, &self.callee_name) {
            (Some(callee), Some(name)) => format!("{} {callee} ({name})", self.state),
            (Some(callee), None) => format!("{} {callee}", self.state),
            _ => self.state.clone(),
        }
    }
}

/// One traced function in [`Reply::Functions`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FunctionRow {
    /// Its module path.
    pub module: String,
    /// Its name.
    pub function: String,
    /// Its arity.
    pub arity: u8,
}

/// Why a frame could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum FrameError {
    /// The peer closed the connection between frames.
    Closed,
    /// A length over [`MAX_FRAME`].
    TooLong(usize),
    /// Reading failed (or the connection ended inside a frame).
    Io(io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Closed => f.write_str("the connection was closed"),
            FrameError::TooLong(n) => write!(
                f,
                "a frame of {n} bytes is over the limit of {MAX_FRAME} bytes"
            ),
            FrameError::Io(e) => write!(f, "cannot read a frame: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Reads one frame's bytes, of at most [`MAX_FRAME`].
///
/// # Errors
/// [`FrameError::Closed`] at a clean end between frames, [`FrameError::TooLong`] for a length
/// over [`MAX_FRAME`], [`FrameError::Io`] otherwise.
pub fn read_frame(from: &mut dyn Read) -> Result<Vec<u8>, FrameError> {
    read_frame_up_to(from, MAX_FRAME)
}

/// Reads one frame's bytes, of at most `limit`.
///
/// # Errors
/// As [`read_frame`], with `limit` for the length.
pub fn read_frame_up_to(from: &mut dyn Read, limit: usize) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match from.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > limit {
        return Err(FrameError::TooLong(len));
    }
    // Read as it arrives: memory follows the bytes that came, not the length announced.
    let mut body = Vec::with_capacity(len.min(FIRST_CAPACITY));
    let got = from
        .take(len as u64)
        .read_to_end(&mut body)
        .map_err(FrameError::Io)?;
    if got < len {
        return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(body)
}

/// What a frame's body is given before its bytes come: a request is a few hundred bytes.
const FIRST_CAPACITY: usize = 64 << 10;

/// Writes `body` as one frame.
///
/// # Errors
/// When writing fails, or `body` is over [`MAX_REPLY`] (`InvalidInput`).
pub fn write_frame(to: &mut dyn Write, body: &[u8]) -> io::Result<()> {
    if body.len() > MAX_REPLY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a message of {} bytes is over the limit of {MAX_REPLY} bytes",
                body.len()
            ),
        ));
    }
    to.write_all(&(body.len() as u32).to_be_bytes())?;
    to.write_all(body)?;
    to.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_and_frames_round_trip() {
        let request = Request {
            version: VERSION,
            id: 7,
            command: Command::SetPattern {
                module: Some("app".into()),
                function: None,
                arity: None,
            },
        };
        let body = serde_json::to_vec(&request).unwrap();
        let mut wire = Vec::new();
        write_frame(&mut wire, &body).unwrap();
        assert_eq!(&wire[..4], &(body.len() as u32).to_be_bytes());
        let read = read_frame(&mut wire.as_slice()).unwrap();
        assert_eq!(serde_json::from_slice::<Request>(&read).unwrap(), request);
        assert!(matches!(
            read_frame(&mut [].as_slice()),
            Err(FrameError::Closed)
        ));
    }

    #[test]
    fn a_length_over_the_limit_is_refused_before_reading_it() {
        let wire = u32::MAX.to_be_bytes();
        assert!(matches!(
            read_frame(&mut wire.as_slice()),
            Err(FrameError::TooLong(n)) if n == u32::MAX as usize
        ));
        let short = [0u8, 0, 0, 9, b'{'];
        assert!(matches!(
            read_frame(&mut short.as_slice()),
            Err(FrameError::Io(_))
        ));
    }

    /// A reader that gives `data`, then fails as a read deadline does, and remembers the
    /// largest buffer it was asked to fill.
    struct Trickle {
        data: Vec<u8>,
        largest: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.largest = self.largest.max(buf.len());
            if self.data.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data.drain(..n);
            Ok(n)
        }
    }

    /// A frame that announces 16 MiB and sends ten bytes makes no 16 MiB buffer: the body is
    /// read as it arrives.
    #[test]
    fn a_frame_body_is_read_as_it_arrives() {
        let mut data = (16u32 << 20).to_be_bytes().to_vec();
        data.extend_from_slice(b"0123456789");
        let mut from = Trickle { data, largest: 0 };
        assert!(matches!(read_frame(&mut from), Err(FrameError::Io(_))));
        assert!(
            from.largest <= 1 << 20,
            "a buffer of {} bytes was made for ten",
            from.largest
        );
        // A whole frame still reads back.
        let mut data = 3u32.to_be_bytes().to_vec();
        data.extend_from_slice(b"abc");
        let mut from = Trickle { data, largest: 0 };
        assert_eq!(read_frame(&mut from).unwrap(), b"abc");
    }
}
