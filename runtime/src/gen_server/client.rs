//! The client side: `call`, `cast`, and the typed [`Server`] handle.

use crate::traced;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use super::GenServer;
use super::reply::{OneOffDeadline, Outcome, ReplySlot, ReplyTo};
use crate::name::Name;
use crate::node::NodeInner;
use crate::process::{with_current, with_current_owner};
use crate::timer::{Armed, Expire};
use crate::{ExitReason, Message, Pid};

/// A request as it travels to the server.
pub(crate) struct CallRequest<C, R> {
    pub(crate) request: C,
    /// Also knows the caller's pid (kept in the slot, so that a small request with its reply
    /// pointer travels inline in its message).
    pub(crate) reply_to: ReplyTo<R>,
}

/// A cast as it travels to the server.
pub(crate) struct CastRequest<C>(pub(crate) C);

/// How long [`call`] waits for the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// Give up after this long (to within a couple of milliseconds, never early).
    After(Duration),
    /// Wait for ever (Erlang's `infinity`).
    Infinity,
}

impl From<Duration> for Timeout {
    fn from(d: Duration) -> Timeout {
        Timeout::After(d)
    }
}

/// A server to call: a pid or a name registered on the caller's node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ServerRef {
    /// A process.
    Pid(Pid),
    /// A registered name.
    Name(Name),
}

impl fmt::Display for ServerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerRef::Pid(pid) => write!(f, "{pid}"),
            ServerRef::Name(name) => write!(f, "`{name}`"),
        }
    }
}

impl From<Pid> for ServerRef {
    fn from(pid: Pid) -> ServerRef {
        ServerRef::Pid(pid)
    }
}

impl From<&str> for ServerRef {
    fn from(name: &str) -> ServerRef {
        ServerRef::Name(Arc::from(name))
    }
}

impl From<String> for ServerRef {
    fn from(name: String) -> ServerRef {
        ServerRef::Name(Arc::from(name))
    }
}

impl From<Name> for ServerRef {
    fn from(name: Name) -> ServerRef {
        ServerRef::Name(name)
    }
}

impl<S> From<Server<S>> for ServerRef {
    fn from(server: Server<S>) -> ServerRef {
        ServerRef::Pid(server.pid)
    }
}

/// Why a [`call`] failed. Each names the server.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// No reply came in time. The request may still be handled; its late reply is dropped.
    Timeout {
        /// The server called.
        server: ServerRef,
        /// The timeout that passed.
        after: Duration,
    },
    /// The server was not alive (or the name not registered) when called.
    NoProc(ServerRef),
    /// The server died before replying.
    Exit {
        /// The server called.
        server: Pid,
        /// Why it died.
        reason: ExitReason,
    },
    /// The server dropped the request without replying (returned `NoReply` without
    /// [`Caller::defer`](super::Caller::defer), or dropped the deferred [`ReplyTo`]).
    NoReply(Pid),
    /// A name was called from outside a process, where there is no current node.
    NotInProcess(Name),
    /// A process called itself, which could never answer (Erlang's `calling_self`).
    CallingSelf(Pid),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Timeout { server, after } => {
                write!(f, "call to {server} timed out after {after:?}")
            }
            CallError::NoProc(server) => {
                write!(
                    f,
                    "call to {server} failed: no such process (not alive, or the name is not registered)"
                )
            }
            CallError::Exit { server, reason } => {
                write!(
                    f,
                    "call to {server} failed: the server exited with reason `{reason}`"
                )
            }
            CallError::NoReply(server) => {
                write!(
                    f,
                    "call to {server} failed: the server dropped the request without replying"
                )
            }
            CallError::CallingSelf(pid) => write!(
                f,
                "{pid} called itself: a server cannot answer its own call while making it"
            ),
            CallError::NotInProcess(name) => write!(
                f,
                "cannot call `{name}` by name outside a process: call it by pid, or from a process of its node"
            ),
        }
    }
}

impl std::error::Error for CallError {}

/// Why a [`cast`] failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CastError {
    /// No process is registered under the name.
    NotRegistered(Name),
    /// A name was cast to from outside a process.
    NotInProcess(Name),
}

impl fmt::Display for CastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CastError::NotRegistered(name) => {
                write!(
                    f,
                    "cannot cast to `{name}`: no process is registered under that name"
                )
            }
            CastError::NotInProcess(name) => write!(
                f,
                "cannot cast to `{name}` by name outside a process: cast by pid instead"
            ),
        }
    }
}

impl std::error::Error for CastError {}

fn resolve_name(name: &Name) -> Result<Option<Pid>, ()> {
    with_current(|c| c.map(|p| p.node.registry.whereis(name))).ok_or(())
}

/// Sends `request` to the gen_server `server` and waits for its reply, Erlang's
/// `gen_server:call/3`.
///
/// Works from a process or from any other async code (a name needs a process, to know the
/// node). With [`Timeout::After`], the wait ends with [`CallError::Timeout`] to within a couple
/// of milliseconds after the deadline.
///
/// # Errors
/// [`CallError::NoProc`], [`CallError::Timeout`], [`CallError::Exit`] when the server dies
/// before replying, [`CallError::NoReply`], [`CallError::NotInProcess`].
#[allow(unsafe_code)]
#[traced(module = "runtime::gen_server")]
pub async fn call<S: GenServer>(
    server: impl Into<ServerRef>,
    request: S::Call,
    timeout: impl Into<Timeout>,
) -> Result<S::Reply, CallError> {
    let server = server.into();
    let timeout = timeout.into();
    let pid = match &server {
        ServerRef::Pid(pid) => *pid,
        ServerRef::Name(name) => match resolve_name(name) {
            Ok(Some(pid)) => pid,
            Ok(None) => return Err(CallError::NoProc(server)),
            Err(()) => return Err(CallError::NotInProcess(name.clone())),
        },
    };
    // Whom it calls is kept by the caller, for peek and the wall sampler to tell.
    let me = crate::process::calling(pid);
    if me == Some(pid) {
        return Err(CallError::CallingSelf(pid));
    }
    // A timed call of a process arms the process's timer, which the slot keeps and lends.
    let (slot, reply_to) = match timeout {
        Timeout::After(_) => with_current_owner(|owner| {
            ReplySlot::<S::Reply>::new_for(pid, me, owner.map(|p| p.call_timer()))
        }),
        Timeout::Infinity => ReplySlot::<S::Reply>::new(pid, me),
    };
    let msg = Message::new(CallRequest::<S::Call, S::Reply> { request, reply_to });
    // A process's own calls re-arm its reusable deadline; anything else registers a one-off.
    let mut deadline = Deadline::None;
    let sent = NodeInner::with_process(pid, |p| {
        let queued = p.try_push_message(msg).is_ok();
        if queued && let Timeout::After(after) = timeout {
            let armed = with_current_owner(|me| {
                let me = me?;
                // On the caller's node: its ticker runs as long as the caller does. The slot
                // keeps `me`'s timer: `new_for` above, in this same poll of `me`.
                let timer = slot.timer()?;
                debug_assert!(Arc::ptr_eq(timer, me.call_timer()));
                timer.arm(&me.node, after).map(Deadline::Armed)
            })
            .unwrap_or_else(|| {
                let one_off = Arc::new(OneOffDeadline::default());
                let weak: Weak<dyn Expire> = Arc::downgrade(&one_off) as Weak<OneOffDeadline>;
                p.node.timers.insert(&p.node, weak, after);
                Deadline::OneOff(one_off)
            });
            // What it replaces is `Deadline::None`, which owns nothing: no drop to run.
            std::mem::forget(std::mem::replace(&mut deadline, armed));
        }
        queued
    });
    if sent != Some(true) {
        return Err(CallError::NoProc(server));
    }
    let outcome = WaitReply {
        slot: &slot,
        deadline: &deadline,
    }
    .await;
    drop(deadline);
    ReplySlot::recycle(slot);
    match outcome {
        Outcome::Replied(reply) => Ok(reply),
        Outcome::NoReply => Err(CallError::NoReply(pid)),
        Outcome::Expired => Err(CallError::Timeout {
            server,
            after: match timeout {
                Timeout::After(d) => d,
                Timeout::Infinity => Duration::MAX,
            },
        }),
        // Out of line and boxed, so that the call's future stays small on the common path.
        Outcome::Died(process) => Box::pin(server_died(server, pid, process, timeout)).await,
    }
}

/// A call whose server died before replying: waits for its exit reason.
async fn server_died<R>(
    server: ServerRef,
    pid: Pid,
    process: Arc<crate::process::Process>,
    timeout: Timeout,
) -> Result<R, CallError> {
    // The server is ending: its reason is recorded right away. Bounded, in case it survived
    // after all (a panic it caught).
    let ended = process.node.wait_until(|| process.exit_reason().is_some());
    match timeout {
        Timeout::Infinity => ended.await,
        // Bounded by the call's timeout once more (no clock is read on a call's common path
        // to know how much of it is left).
        Timeout::After(after) => {
            if tokio::time::timeout(after, ended).await.is_err() {
                return Err(CallError::Timeout { server, after });
            }
        }
    }
    Err(CallError::Exit {
        server: pid,
        reason: process.exit_reason().cloned().unwrap_or(ExitReason::NoProc),
    })
}

/// How a call's wait ends if no reply comes in time.
enum Deadline<'a> {
    /// Waits for ever.
    None,
    /// The calling process's reusable deadline.
    Armed(Armed<'a>),
    /// An entry of its own in the deadline wheel.
    OneOff(Arc<OneOffDeadline>),
}

struct WaitReply<'a, R> {
    slot: &'a ReplySlot<R>,
    deadline: &'a Deadline<'a>,
}

impl<R> Future for WaitReply<'_, R> {
    type Output = Outcome<R>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome<R>> {
        if let Poll::Ready(outcome) = self.slot.poll_outcome(cx) {
            return Poll::Ready(outcome);
        }
        let fired = match self.deadline {
            Deadline::None => false,
            Deadline::Armed(armed) => armed.poll_fired(cx),
            Deadline::OneOff(one_off) => one_off.poll_fired(cx),
        };
        if fired {
            // Refuse a late reply; one that came just now still counts.
            Poll::Ready(self.slot.close())
        } else {
            crate::process::note_current_wait(crate::process::Wait::Call);
            Poll::Pending
        }
    }
}

/// Sends `msg` to the gen_server `server` without waiting, Erlang's `gen_server:cast/2`. A dead
/// pid drops it.
///
/// # Errors
/// [`CastError::NotRegistered`] for an unknown name, [`CastError::NotInProcess`] for a name
/// outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime::gen_server")]
pub fn cast<S: GenServer>(server: impl Into<ServerRef>, msg: S::Cast) -> Result<(), CastError> {
    let pid = match server.into() {
        ServerRef::Pid(pid) => pid,
        ServerRef::Name(name) => match resolve_name(&name) {
            Ok(Some(pid)) => pid,
            Ok(None) => return Err(CastError::NotRegistered(name)),
            Err(()) => return Err(CastError::NotInProcess(name)),
        },
    };
    crate::send(pid, CastRequest::<S::Cast>(msg));
    Ok(())
}

/// A typed handle to a running gen_server of type `S`: a pid that knows its server's
/// request types. `Copy`, like a pid.
pub struct Server<S> {
    pid: Pid,
    _server: PhantomData<fn() -> S>,
}

impl<S> Server<S> {
    /// A handle for the gen_server `pid`, which must run `S` (requests to a server of
    /// another type reach its `handle_info` and go unanswered).
    pub fn from_pid(pid: Pid) -> Server<S> {
        Server {
            pid,
            _server: PhantomData,
        }
    }

    /// The server's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }
}

impl<S: GenServer> Server<S> {
    /// [`call`] this server.
    ///
    /// # Errors
    /// As [`call`].
    ///
    /// Returns [`call`]'s future itself (no wrapper around it, and it does not borrow the
    /// handle).
    pub fn call(
        &self,
        request: S::Call,
        timeout: impl Into<Timeout>,
    ) -> impl Future<Output = Result<S::Reply, CallError>> + Send + 'static {
        call::<S>(self.pid, request, timeout.into())
    }

    /// [`cast`] to this server.
    pub fn cast(&self, msg: S::Cast) {
        crate::send(self.pid, CastRequest::<S::Cast>(msg));
    }

    /// [`stop`](fn@super::stop) this server with `reason`, waiting until it has ended.
    ///
    /// # Errors
    /// As [`stop`](fn@super::stop).
    pub fn stop(
        &self,
        reason: ExitReason,
        timeout: impl Into<Timeout>,
    ) -> impl Future<Output = Result<(), super::StopError>> + Send + 'static {
        super::stop(self.pid, reason, timeout.into())
    }
}

impl<S> Clone for Server<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Server<S> {}

impl<S> PartialEq for Server<S> {
    fn eq(&self, other: &Self) -> bool {
        self.pid == other.pid
    }
}

impl<S> Eq for Server<S> {}

impl<S> fmt::Debug for Server<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Server<{}>({})", std::any::type_name::<S>(), self.pid)
    }
}
