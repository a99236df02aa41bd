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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crate::Pid;
use crate::process::{Process, with_current_owner};
use crate::timer::Expire;

pub(crate) enum Outcome<R> {
    Replied(R),
    NoReply,
    Died(Arc<Process>),
    Expired,
}

enum State<R> {
    Waiting(Option<Waker>),
    Done(Outcome<R>),
    Taken,
}

/// The slot, shared by the caller and the [`ReplyTo`] in the request. It also carries the two
/// pids of the call, so that the request itself is the request and one pointer (small requests
/// then travel inline in their [`Message`](crate::Message), allocating nothing more).
pub(crate) struct ReplySlot<R> {
    state: Mutex<State<R>>,
    server: Pid,
    from: Option<Pid>,
}

impl<R> ReplySlot<R> {
    /// A slot for a call from `from` to `server`, and the right to answer it.
    pub(crate) fn new(server: Pid, from: Option<Pid>) -> (Arc<ReplySlot<R>>, ReplyTo<R>) {
        let slot = Arc::new(ReplySlot {
            state: Mutex::new(State::Waiting(None)),
            server,
            from,
        });
        let reply_to = ReplyTo {
            slot: Some(Arc::clone(&slot)),
        };
        (slot, reply_to)
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // Each critical section is a few moves that cannot panic halfway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Settles the slot unless it already is; wakes the caller.
    fn settle(&self, outcome: Outcome<R>) -> Result<(), Outcome<R>> {
        let mut state = self.lock();
        let waker = match &mut *state {
            State::Waiting(w) => w.take(),
            _ => return Err(outcome),
        };
        *state = State::Done(outcome);
        drop(state);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// The outcome, once the server (or the deadline) settled it.
    pub(crate) fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<Outcome<R>> {
        let mut state = self.lock();
        match &mut *state {
            State::Waiting(w) => {
                match w {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Done(_) => match std::mem::replace(&mut *state, State::Taken) {
                State::Done(outcome) => Poll::Ready(outcome),
                _ => unreachable!("the state was Done"),
            },
            State::Taken => Poll::Pending,
        }
    }

    /// The call's deadline passed: refuses any later reply, and gives the outcome settled
    /// before that, if any, or [`Outcome::Expired`]. Called by the caller, once.
    pub(crate) fn expire(&self) -> Outcome<R> {
        let mut state = self.lock();
        match std::mem::replace(&mut *state, State::Taken) {
            State::Done(outcome) => outcome,
            State::Waiting(_) | State::Taken => Outcome::Expired,
        }
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
    slot: Option<Arc<ReplySlot<R>>>,
}

impl<R> std::fmt::Debug for ReplyTo<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyTo")
            .field("server", &self.slot.as_ref().map(|s| s.server))
            .field("answered", &self.slot.is_none())
            .finish()
    }
}

impl<R> ReplyTo<R> {
    /// The calling process, if the call came from a process.
    pub(crate) fn caller(&self) -> Option<Pid> {
        self.slot.as_ref().and_then(|s| s.from)
    }

    /// Answers the call. Returns false when the caller has stopped waiting (its timeout
    /// passed), as a late reply is then dropped.
    pub fn reply(mut self, reply: R) -> bool {
        match self.slot.take() {
            Some(slot) => slot.settle(Outcome::Replied(reply)).is_ok(),
            None => false,
        }
    }
}

impl<R> Drop for ReplyTo<R> {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else { return };
        // Dropped inside the server while it ends (its future or mailbox being dropped, or a
        // panic unwinding): the caller reads the exit reason from the server itself.
        let dying = with_current_owner(|c| {
            c.filter(|p| p.pid == slot.server && (std::thread::panicking() || p.is_exiting()))
                .map(Arc::clone)
        });
        let outcome = match dying {
            Some(server) => Outcome::Died(server),
            None => Outcome::NoReply,
        };
        let _ = slot.settle(outcome);
    }
}
