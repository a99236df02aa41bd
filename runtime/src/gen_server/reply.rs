//! The one-shot reply slot of a call.
//!
//! A call's reply never goes through the caller's mailbox (no selective-receive scan): the
//! request carries a [`ReplyTo`] that fills a slot the caller waits on. The slot also learns
//! when the call cannot be answered:
//!
//! - the server dropped the request without replying while alive: [`Outcome::NoReply`];
//! - the server died with the request in hand or in its mailbox (the `ReplyTo` is dropped
//!   inside the exiting process, or while it unwinds): [`Outcome::Died`] with the server, whose
//!   exit reason the caller then reads — no monitor per call;
//! - the call's deadline passed first: [`Outcome::Expired`], and the slot refuses the late
//!   reply ([`ReplyTo::reply`] returns false).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

use tokio::sync::oneshot;

use crate::Pid;
use crate::process::{Process, with_current_owner};
use crate::timer::Expire;

pub(crate) enum Outcome<R> {
    Replied(R),
    NoReply,
    Died(Arc<Process>),
    Expired,
}

/// The caller's end of the slot: a tokio one-shot channel (one allocation, no lock). The
/// [`ReplyTo`] holds the sending end.
pub(crate) struct ReplySlot<R> {
    rx: oneshot::Receiver<Outcome<R>>,
}

impl<R> ReplySlot<R> {
    /// A slot and the right to answer it, held by `server`'s request.
    pub(crate) fn new(server: Pid) -> (ReplySlot<R>, ReplyTo<R>) {
        let (tx, rx) = oneshot::channel();
        (
            ReplySlot { rx },
            ReplyTo {
                tx: Some(tx),
                server,
            },
        )
    }

    /// The outcome, once the server settled it.
    #[inline]
    pub(crate) fn poll_outcome(&mut self, cx: &mut Context<'_>) -> Poll<Outcome<R>> {
        match std::pin::Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(Ok(outcome)) => Poll::Ready(outcome),
            // Never: the `ReplyTo` settles the slot when it is dropped.
            Poll::Ready(Err(_)) => Poll::Ready(Outcome::NoReply),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The call's deadline passed: refuses any later reply, and gives the outcome settled
    /// before that, if any, or [`Outcome::Expired`].
    pub(crate) fn expire(&mut self) -> Outcome<R> {
        self.rx.close();
        self.rx.try_recv().unwrap_or(Outcome::Expired)
    }
}

/// The deadline of a call made outside a process (or a second concurrent call of one): an
/// entry of the node's deadline wheel, which fires it.
#[derive(Default)]
pub(crate) struct OneOffDeadline {
    fired: AtomicBool,
    waker: std::sync::Mutex<Option<Waker>>,
}

impl OneOffDeadline {
    /// Whether the deadline passed; if not, the waker is kept to be woken when it does.
    pub(crate) fn poll_fired(&self, cx: &mut Context<'_>) -> bool {
        if self.fired.load(Ordering::Acquire) {
            return true;
        }
        {
            let mut waker = self.waker.lock().unwrap_or_else(|e| e.into_inner());
            match &*waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *waker = Some(cx.waker().clone()),
            }
        }
        // `expire` stores `fired` before it takes the waker: seen here, or woken.
        self.fired.load(Ordering::Acquire)
    }
}

impl Expire for OneOffDeadline {
    fn expire(&self) {
        self.fired.store(true, Ordering::Release);
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The right to answer one call: handed to the server with the request (see
/// [`Caller::defer`](crate::gen_server::Caller::defer)). Replying consumes it; dropping it
/// unanswered fails the call, with [`CallError::NoReply`](crate::gen_server::CallError::NoReply)
/// if the server is alive and [`CallError::Exit`](crate::gen_server::CallError::Exit) if it is
/// dying.
pub struct ReplyTo<R> {
    tx: Option<oneshot::Sender<Outcome<R>>>,
    server: Pid,
}

impl<R> std::fmt::Debug for ReplyTo<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyTo")
            .field("server", &self.server)
            .field("answered", &self.tx.is_none())
            .finish()
    }
}

impl<R> ReplyTo<R> {
    /// Answers the call. Returns false when the caller has stopped waiting (its timeout
    /// passed), as a late reply is then dropped.
    pub fn reply(mut self, reply: R) -> bool {
        match self.tx.take() {
            Some(tx) => tx.send(Outcome::Replied(reply)).is_ok(),
            None => false,
        }
    }
}

impl<R> Drop for ReplyTo<R> {
    fn drop(&mut self) {
        let Some(tx) = self.tx.take() else { return };
        // Dropped inside the server while it ends (its future or mailbox being dropped, or a
        // panic unwinding): the caller reads the exit reason from the server itself.
        let dying = with_current_owner(|c| {
            c.filter(|p| p.pid == self.server && (std::thread::panicking() || p.is_exiting()))
                .map(Arc::clone)
        });
        let outcome = match dying {
            Some(server) => Outcome::Died(server),
            None => Outcome::NoReply,
        };
        let _ = tx.send(outcome);
    }
}
