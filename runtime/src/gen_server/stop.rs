//! Stopping a behaviour's process from outside, as OTP's `gen_server:stop/3` (`proc_lib:stop`):
//! the request, and the wait until the process has ended.
//!
//! A [`StopRequest`] is queued in the server's mailbox like any message; its receive loop (a
//! gen_server's or a supervisor's) takes it in order, runs what stopping runs there
//! ([`GenServer::terminate`](super::GenServer::terminate); a supervisor stops its children)
//! and returns the reason. [`stop`] returns once the process has done everything an exit does
//! — its name is free, its links and monitors are told, whatever its state held (a trace
//! session, say) is dropped — so that the caller can start another under the same name at
//! once.

use crate::traced;
use std::fmt;
use std::time::Duration;

use super::{ServerRef, Timeout};
use crate::name::Name;
use crate::node::NodeInner;
use crate::process::with_current;
use crate::{ExitReason, Message, Pid};

/// Asks a behaviour's receive loop to stop with this reason.
pub(crate) struct StopRequest(pub(crate) ExitReason);

/// Why a [`stop`] failed. Each names the server.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopError {
    /// The server was not alive (or the name not registered) when asked.
    NoProc(ServerRef),
    /// The server had not ended when the timeout passed; it may still end.
    Timeout {
        /// The server asked.
        server: ServerRef,
        /// The timeout that passed.
        after: Duration,
    },
    /// The server ended with another reason than the one asked for (it crashed, or its
    /// `terminate` did, or something else ended it first).
    Exit {
        /// The server asked.
        server: Pid,
        /// Why it ended.
        reason: ExitReason,
    },
    /// A name was given outside a process, where there is no current node.
    NotInProcess(Name),
    /// A process asked itself to stop, and would wait for ever for its own end: return the
    /// reason from a handler instead.
    CallingSelf(Pid),
}

impl fmt::Display for StopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopError::NoProc(server) => write!(
                f,
                "cannot stop {server}: no such process (not alive, or the name is not registered)"
            ),
            StopError::Timeout { server, after } => {
                write!(f, "{server} had not stopped after {after:?}")
            }
            StopError::Exit { server, reason } => write!(
                f,
                "{server} was asked to stop but exited with reason `{reason}`"
            ),
            StopError::NotInProcess(name) => write!(
                f,
                "cannot stop `{name}` by name outside a process: stop it by pid, or from a \
                 process of its node"
            ),
            StopError::CallingSelf(pid) => write!(
                f,
                "{pid} asked itself to stop, which it could never wait for: return \
                 Next::Stop (or CallReply::Stop) from a handler instead"
            ),
        }
    }
}

impl std::error::Error for StopError {}

/// Stops the gen_server `server` with `reason` and waits until it has ended, Erlang's
/// `gen_server:stop/3`: the server takes the request after the messages already in its
/// mailbox, runs [`GenServer::terminate`](super::GenServer::terminate) and exits with
/// `reason`. When this returns `Ok`, the server is gone: its name is free, its links and
/// monitors have been told, and its state has been dropped. Works from a process or from any
/// other async code (a name needs a process, to know the node).
///
/// ```
/// use runtime::gen_server::{self, CallReply, Caller, GenServer, StartOptions, Timeout};
/// use runtime::{ExitReason, Node};
///
/// struct Unit;
///
/// impl GenServer for Unit {
///     type Args = ();
///     type Call = ();
///     type Reply = ();
///     type Cast = ();
///     async fn init((): ()) -> Result<Self, ExitReason> { Ok(Unit) }
///     async fn handle_call(&mut self, (): (), _: &mut Caller<()>) -> CallReply<()> {
///         CallReply::Reply(())
///     }
/// }
///
/// let node = Node::new().unwrap();
/// node.run(async {
///     let opts = || StartOptions::new().name("unit");
///     let first = gen_server::start::<Unit>((), opts()).await.unwrap();
///     gen_server::stop(first, ExitReason::Normal, Timeout::Infinity).await.unwrap();
///     // The name is free the moment `stop` returns.
///     gen_server::start::<Unit>((), opts()).await.unwrap();
/// })
/// .unwrap();
/// ```
///
/// # Errors
/// [`StopError::NoProc`], [`StopError::Timeout`] (the server keeps running, or ends later),
/// [`StopError::Exit`] when it ended with another reason, [`StopError::NotInProcess`],
/// [`StopError::CallingSelf`].
#[allow(unsafe_code)]
#[traced(module = "runtime::gen_server")]
pub async fn stop(
    server: impl Into<ServerRef>,
    reason: ExitReason,
    timeout: impl Into<Timeout>,
) -> Result<(), StopError> {
    stop_process(server.into(), reason, timeout.into()).await
}

/// [`stop`] for any behaviour whose receive loop takes a [`StopRequest`].
pub(crate) async fn stop_process(
    server: ServerRef,
    reason: ExitReason,
    timeout: Timeout,
) -> Result<(), StopError> {
    let pid = match &server {
        ServerRef::Pid(pid) => *pid,
        ServerRef::Name(name) => match with_current(|c| c.map(|p| p.node.registry.whereis(name))) {
            Some(Some(pid)) => pid,
            Some(None) => return Err(StopError::NoProc(server)),
            None => return Err(StopError::NotInProcess(name.clone())),
        },
    };
    if crate::try_self_pid() == Some(pid) {
        return Err(StopError::CallingSelf(pid));
    }
    let Some(process) = NodeInner::process(pid) else {
        return Err(StopError::NoProc(server));
    };
    // A process already exiting refuses the request: its end is waited for all the same.
    let _ = process.try_push_message(Message::new(StopRequest(reason.clone())));
    let node = &process.node;
    let ended = node.wait_until(|| node.table.get(pid).is_none());
    match timeout {
        Timeout::Infinity => ended.await,
        Timeout::After(after) => {
            if tokio::time::timeout(after, ended).await.is_err() {
                return Err(StopError::Timeout { server, after });
            }
        }
    }
    match process.exit_reason() {
        Some(ended) if *ended != reason => Err(StopError::Exit {
            server: pid,
            reason: ended.clone(),
        }),
        _ => Ok(()),
    }
}
