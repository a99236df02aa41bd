//! The server side: starting a gen_server and its receive loop.

use crate::traced;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::client::{CallRequest, CastRequest, Server};
use super::{CallReply, Caller, GenServer, Next, StopRequest};
use crate::name::Name;
use crate::node::NodeInner;
use crate::process::{Process, SpawnError, SpawnOptions, spawn_on_node, with_current};
use crate::registry::RegistryError;
use crate::{Exit, ExitReason, Message, NodeHandle, Pid, receive_any};

/// Options for starting a gen_server.
#[derive(Clone, Debug, Default)]
#[must_use = "options do nothing until passed to start"]
pub struct StartOptions {
    name: Option<Name>,
    trap_exit: bool,
}

impl StartOptions {
    /// No name, not trapping exits.
    pub fn new() -> StartOptions {
        StartOptions::default()
    }

    /// Registers the server under `name` before `init` runs; the start fails with
    /// [`StartError::AlreadyStarted`] if the name is taken.
    pub fn name(mut self, name: impl Into<Name>) -> StartOptions {
        self.name = Some(name.into());
        self
    }

    /// Starts the server trapping exits, so that its parent's `Shutdown` runs
    /// [`GenServer::terminate`] (as a supervised OTP server does with `process_flag(trap_exit,
    /// true)` in `init`).
    pub fn trap_exit(mut self) -> StartOptions {
        self.trap_exit = true;
        self
    }
}

/// Why a gen_server did not start.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// The name is registered to another process (which may be a running instance).
    AlreadyStarted {
        /// The name asked for.
        name: Name,
        /// The process holding it.
        pid: Pid,
    },
    /// `init` returned an error or the process ended during `init`; the server is gone.
    Init(ExitReason),
    /// The process could not be spawned.
    Spawn(SpawnError),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::AlreadyStarted { name, pid } => {
                write!(
                    f,
                    "cannot start the server: `{name}` is already registered to {pid}"
                )
            }
            StartError::Init(reason) => write!(f, "the server's init failed: {reason}"),
            StartError::Spawn(e) => write!(f, "cannot start the server: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// Starts a gen_server from the calling process (its parent), waiting until `init` is done,
/// Erlang's `gen_server:start/3,4`.
///
/// # Errors
/// [`StartError::AlreadyStarted`], [`StartError::Init`], [`StartError::Spawn`] (for example
/// `NotInProcess`: use [`start_on`] outside a process).
#[allow(unsafe_code)]
#[traced(module = "runtime::gen_server")]
pub async fn start<S: GenServer>(
    args: S::Args,
    opts: StartOptions,
) -> Result<Server<S>, StartError> {
    let parent =
        with_current(|c| c.map(Arc::clone)).ok_or(StartError::Spawn(SpawnError::NotInProcess))?;
    start_inner::<S>(&parent.node, Some(&parent), args, opts, false).await
}

/// As [`start`], and links the server to the caller, Erlang's `gen_server:start_link/3,4`.
/// If `init` fails (returns an error, panics, or is killed) the link is removed first, so the
/// caller is not killed.
///
/// # Errors
/// As [`start`].
#[allow(unsafe_code)]
#[traced(module = "runtime::gen_server")]
pub async fn start_link<S: GenServer>(
    args: S::Args,
    opts: StartOptions,
) -> Result<Server<S>, StartError> {
    let parent =
        with_current(|c| c.map(Arc::clone)).ok_or(StartError::Spawn(SpawnError::NotInProcess))?;
    start_inner::<S>(&parent.node, Some(&parent), args, opts, true).await
}

/// Starts a gen_server on `node` from outside any process (it has no parent).
///
/// # Errors
/// As [`start`].
#[allow(unsafe_code)]
#[traced(module = "runtime::gen_server")]
pub async fn start_on<S: GenServer>(
    node: &NodeHandle,
    args: S::Args,
    opts: StartOptions,
) -> Result<Server<S>, StartError> {
    start_inner::<S>(&node.inner, None, args, opts, false).await
}

async fn start_inner<S: GenServer>(
    node: &Arc<NodeInner>,
    parent: Option<&Arc<Process>>,
    args: S::Args,
    opts: StartOptions,
    link: bool,
) -> Result<Server<S>, StartError> {
    let (ack_tx, ack_rx) = tokio::sync::oneshot::channel::<Result<(), ExitReason>>();
    // The server's type is its initial call (OTP reports `{Module, init, 1}`); a static
    // string, so a server allocates nothing for it.
    let mut spawn_opts =
        SpawnOptions::new().initial_call(Cow::Borrowed(std::any::type_name::<S>()));
    if let Some(name) = &opts.name {
        spawn_opts = spawn_opts.name(name.clone());
    }
    if link {
        spawn_opts = spawn_opts.link();
    }
    if opts.trap_exit {
        spawn_opts = spawn_opts.trap_exit();
    }
    let future = async move {
        // Until `init` succeeds: however it fails (an error, a panic, a kill while it runs),
        // the caller is unlinked before the server exits, so the failure does not kill it.
        let unlink_on_failure = UnlinkParentOnDrop { armed: link };
        let state = match S::init(args).await {
            Ok(state) => {
                unlink_on_failure.disarm();
                let _ = ack_tx.send(Ok(()));
                state
            }
            Err(reason) => {
                drop(unlink_on_failure);
                let _ = ack_tx.send(Err(reason.clone()));
                return reason;
            }
        };
        serve(state).await
    };
    let (process, _) = match spawn_on_node(node, parent, future, spawn_opts) {
        Ok(spawned) => spawned,
        Err(SpawnError::Name(RegistryError::NameTaken { name, holder })) => {
            return Err(StartError::AlreadyStarted { name, pid: holder });
        }
        Err(e) => return Err(StartError::Spawn(e)),
    };
    let reason = match ack_rx.await {
        Ok(Ok(())) => return Ok(Server::from_pid(process.pid)),
        Ok(Err(reason)) => Some(reason),
        Err(_) => None,
    };
    // Return once the failed server is gone, so its name is free again.
    let pid = process.pid;
    node.wait_until(|| node.table.get(pid).is_none()).await;
    Err(StartError::Init(reason.unwrap_or_else(|| {
        process.exit_reason().cloned().unwrap_or(ExitReason::Killed)
    })))
}

/// The spawning parent of the current process (a server's parent is its process's).
fn parent_of_current() -> Option<Pid> {
    with_current(|p| p.and_then(|p| p.parent()))
}

/// Unlinks the server from its parent when dropped armed, always inside the server's process
/// and before its exit signals go out: on an error return, on the way out; on a panic in
/// `init`, as the panic unwinds the poll; on a kill, when the process drops its future.
struct UnlinkParentOnDrop {
    armed: bool,
}

impl UnlinkParentOnDrop {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for UnlinkParentOnDrop {
    fn drop(&mut self) {
        if self.armed
            && let Some(parent) = parent_of_current()
        {
            let _ = crate::unlink(parent);
        }
    }
}

/// The receive loop of a gen_server.
///
/// Written so that its future stays small (it is most of an idle server's tokio task): no
/// local or match temporary lives across more than one of its awaits except the state (the
/// compiler can overlap only such locals; the handlers' futures, held in place rather than
/// boxed, overlap each other and the receive), and the parent is read from the process when an
/// `Exit` arrives rather than kept in the future. With unit state it is 96 bytes, so that the
/// server's tokio task fits a 256-byte cell (it was 192 bytes once, in a 384-byte cell).
async fn serve<S: GenServer>(mut state: S) -> ExitReason {
    loop {
        let msg = receive_any().await;
        // A call the server stops without answering, made after the handler's await so that
        // it takes no room in the future across the handlers.
        let (next, unanswered) = 'handled: {
            let msg = match msg.downcast::<CallRequest<S::Call, S::Reply>>() {
                Ok(req) => {
                    let mut caller = Caller {
                        pid: req.reply_to.caller(),
                        reply_to: Some(req.reply_to),
                    };
                    break 'handled match state.handle_call(req.request, &mut caller).await {
                        CallReply::Reply(reply) => {
                            if let Some(reply_to) = caller.reply_to.take() {
                                reply_to.reply(reply);
                            }
                            (Next::Continue, None)
                        }
                        CallReply::NoReply => (Next::Continue, None),
                        CallReply::Stop(reason, reply) => {
                            let unanswered = match (reply, caller.reply_to.take()) {
                                (Some(reply), Some(reply_to)) => {
                                    reply_to.reply(reply);
                                    None
                                }
                                (None, reply_to) => reply_to,
                                (Some(_), None) => None,
                            };
                            (Next::Stop(reason), unanswered)
                        }
                    };
                }
                Err(msg) => msg,
            };
            let msg = match msg.downcast::<CastRequest<S::Cast>>() {
                Ok(CastRequest(cast)) => break 'handled (state.handle_cast(cast).await, None),
                Err(msg) => msg,
            };
            match exit_to_stop(msg) {
                Ok(reason) => (Next::Stop(reason), None),
                Err(msg) => (state.handle_info(msg).await, None),
            }
        };
        let Some(reason) = stop_reason(next) else {
            continue;
        };
        state.terminate(&reason).await;
        // From here the process is exiting: a call left unanswered (now or deferred in the
        // state) reports this reason to its caller.
        with_current(|p| {
            if let Some(p) = p {
                p.begin_exit(reason.clone());
            }
        });
        drop(unanswered);
        drop(state);
        return reason;
    }
}

/// The reason to stop with when `msg` is a [`StopRequest`] ([`stop`](fn@super::stop)), or an
/// [`Exit`] from the server's parent, or from itself (how node shutdown and `exit` from outside
/// a process reach a server without a parent);
/// otherwise `msg`, for `handle_info`. Takes the message by value, so that the loop's future
/// does not keep it (a borrowed local is kept across the awaits that follow).
fn exit_to_stop(msg: Message) -> Result<ExitReason, Message> {
    let msg = match msg.downcast::<StopRequest>() {
        Ok(StopRequest(reason)) => return Ok(reason),
        Err(msg) => msg,
    };
    match msg.downcast_ref::<Exit>() {
        Some(exit)
            if Some(exit.from) == parent_of_current()
                || Some(exit.from) == crate::try_self_pid() =>
        {
            Ok(exit.reason.clone())
        }
        _ => Err(msg),
    }
}

/// The reason of a [`Next::Stop`]. Takes `next` whole, so that the loop's future does not keep
/// it across `terminate`.
fn stop_reason(next: Next) -> Option<ExitReason> {
    match next {
        Next::Continue => None,
        Next::Stop(reason) => Some(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Unit;

    impl GenServer for Unit {
        type Args = ();
        type Call = ();
        type Reply = ();
        type Cast = ();

        async fn init((): ()) -> Result<Self, ExitReason> {
            Ok(Unit)
        }

        async fn handle_call(&mut self, (): (), _from: &mut Caller<()>) -> CallReply<()> {
            CallReply::Reply(())
        }
    }

    /// The receive loop of a unit-state server stays small enough for the server's tokio task
    /// to fit a 256-byte cell (issue #2's idle memory: 128 bytes more per server otherwise).
    /// It grows when a local or a match temporary comes to live across two of its awaits.
    #[test]
    fn the_receive_loop_future_stays_small() {
        let size = std::mem::size_of_val(&serve(Unit));
        assert!(size <= 96, "serve::<Unit> is {size} bytes");
    }
}
