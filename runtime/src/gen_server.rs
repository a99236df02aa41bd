//! gen_server: a generic server behaviour, as OTP's.
//!
//! Implement [`GenServer`] on the server's state, with plain `async fn`s: [`init`] builds it
//! from the start arguments, [`handle_call`] answers requests, [`handle_cast`] takes
//! fire-and-forget messages, [`handle_info`] takes every other message (monitors' `Down`,
//! trapped `Exit`s, plain sends), and [`terminate`] runs when the server stops on its own or is
//! told to by its parent or by [`stop`](fn@stop). Start it with [`start`], [`start_link`] or
//! [`start_on`]; talk to it with [`call`] and [`cast`], by pid or registered name, or through
//! the typed [`Server`] handle; [`stop`](fn@stop) it and wait until it has ended.
//!
//! ```
//! use runtime::gen_server::{self, CallReply, Caller, GenServer, StartOptions};
//! use runtime::{ExitReason, Node};
//! use std::time::Duration;
//!
//! struct Counter(u64);
//!
//! impl GenServer for Counter {
//!     type Args = u64;
//!     type Call = ();
//!     type Reply = u64;
//!     type Cast = u64;
//!
//!     async fn init(start: u64) -> Result<Self, ExitReason> {
//!         Ok(Counter(start))
//!     }
//!     async fn handle_call(&mut self, _: (), _: &mut Caller<u64>) -> CallReply<u64> {
//!         CallReply::Reply(self.0)
//!     }
//!     async fn handle_cast(&mut self, add: u64) -> gen_server::Next {
//!         self.0 += add;
//!         gen_server::Next::Continue
//!     }
//! }
//!
//! let node = Node::new().unwrap();
//! let total = node.run(async {
//!     let counter = gen_server::start::<Counter>(40, StartOptions::new().name("counter"))
//!         .await
//!         .unwrap();
//!     gen_server::cast::<Counter>("counter", 2).unwrap();
//!     counter.call((), Duration::from_secs(5)).await.unwrap()
//! });
//! assert_eq!(total.unwrap(), 42);
//! ```
//!
//! # Why `call` is fast
//!
//! The handlers are the trait's own `async fn`s (no `#[async_trait]`): the server loop is
//! generic over the server's type, so each handler's future lives inside the loop's future
//! rather than in a box allocated per message. That saves an allocation and a free per call
//! (about a tenth of a call's cost); in exchange the server's task is as large as its largest
//! handler's future. A handler with a very large future can box it itself
//! (`Box::pin(async move { ... }).await`).
//!
//! The reply travels through a one-shot slot, not the caller's mailbox: lock-free, and reused
//! by the next call of the same thread, so a call in a loop allocates nothing; the server's
//! death is seen through the dropped request and the server's exit-reason cell, not a monitor
//! per call; the timeout re-arms the calling process's entry in the node's coarse deadline
//! wheel (a few stores), not a tokio timer per call.
//!
//! [`init`]: GenServer::init
//! [`handle_call`]: GenServer::handle_call
//! [`handle_cast`]: GenServer::handle_cast
//! [`handle_info`]: GenServer::handle_info
//! [`terminate`]: GenServer::terminate

mod client;
mod reply;
mod server;
mod stop;
#[cfg(test)]
mod tests;

pub use client::{CallError, CastError, Server, ServerRef, Timeout, call, cast};
pub use reply::ReplyTo;
pub use server::{StartError, StartOptions, start, start_link, start_on};
pub use stop::{StopError, stop};
pub(crate) use stop::{StopRequest, stop_process};

use crate::{ExitReason, Message, Pid};

/// What [`GenServer::handle_call`] returns: Erlang's `{reply, R, S}`, `{noreply, S}`,
/// `{stop, Reason, Reply, S}` and `{stop, Reason, S}`.
#[derive(Debug)]
pub enum CallReply<R> {
    /// Answer the caller now.
    Reply(R),
    /// Answer later, through the [`ReplyTo`] taken with [`Caller::defer`]. If it was not
    /// taken, the caller gets [`CallError::NoReply`].
    NoReply,
    /// Stop the server with this reason, answering the caller first if a reply is given.
    Stop(ExitReason, Option<R>),
}

/// What [`GenServer::handle_cast`] and [`GenServer::handle_info`] return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Keep serving.
    Continue,
    /// Stop the server with this reason ([`GenServer::terminate`] runs first).
    Stop(ExitReason),
}

/// The caller of a request being handled: who it is, and the right to answer it later.
#[derive(Debug)]
pub struct Caller<R> {
    pid: Option<Pid>,
    reply_to: Option<ReplyTo<R>>,
}

impl<R> Caller<R> {
    /// The calling process, if the call came from a process.
    pub fn pid(&self) -> Option<Pid> {
        self.pid
    }

    /// Takes the right to answer, to answer later (return [`CallReply::NoReply`] now).
    /// `None` if already taken.
    pub fn defer(&mut self) -> Option<ReplyTo<R>> {
        self.reply_to.take()
    }
}

/// A generic server: the state of a process that answers calls and casts in a loop.
///
/// Every handler has a default but [`handle_call`](GenServer::handle_call) and
/// [`init`](GenServer::init). A message of any type the server does not expect as a call or
/// cast reaches [`handle_info`](GenServer::handle_info).
///
/// Implement the handlers as `async fn`s; no attribute macro is needed. Each returns a future
/// that must be `Send` (the server may move between worker threads at any `.await`), so a
/// handler may not hold a non-`Send` value, such as an `Rc` or a `std::sync::MutexGuard`,
/// across an `.await`: the compiler says so at the `impl`.
pub trait GenServer: Sized + Send + 'static {
    /// What [`init`](GenServer::init) is started with.
    type Args: Send + 'static;
    /// The requests [`call`] sends.
    type Call: Send + 'static;
    /// The answers to them.
    type Reply: Send + 'static;
    /// The messages [`cast`] sends.
    type Cast: Send + 'static;

    /// Builds the state, in the new process, before the starter is answered. An `Err` stops
    /// the server with that reason and fails the start with [`StartError::Init`].
    fn init(args: Self::Args) -> impl Future<Output = Result<Self, ExitReason>> + Send;

    /// Answers a request.
    fn handle_call(
        &mut self,
        request: Self::Call,
        from: &mut Caller<Self::Reply>,
    ) -> impl Future<Output = CallReply<Self::Reply>> + Send;

    /// Takes a cast. The default ignores it.
    fn handle_cast(&mut self, msg: Self::Cast) -> impl Future<Output = Next> + Send {
        let _ = msg;
        std::future::ready(Next::Continue)
    }

    /// Takes any other message. The default ignores it.
    fn handle_info(&mut self, msg: Message) -> impl Future<Output = Next> + Send {
        let _ = msg;
        std::future::ready(Next::Continue)
    }

    /// Runs when the server stops because a handler said so, because [`stop`](fn@stop) asked, or
    /// because its parent (when it traps exits) told it to. Not run when it is killed or
    /// panics.
    fn terminate(&mut self, reason: &ExitReason) -> impl Future<Output = ()> + Send {
        let _ = reason;
        std::future::ready(())
    }
}
