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
//! - the deadline wheel expired it: [`Outcome::Expired`].

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

pub(crate) struct ReplySlot<R> {
    state: Mutex<State<R>>,
}

impl<R> ReplySlot<R> {
    pub(crate) fn new() -> ReplySlot<R> {
        ReplySlot {
            state: Mutex::new(State::Waiting(None)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
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
                _ => unreachable!(),
            },
            State::Taken => Poll::Pending,
        }
    }
}

impl<R: Send> Expire for ReplySlot<R> {
    fn expire(&self) {
        let _ = self.settle(Outcome::Expired);
    }
}

/// The right to answer one call: handed to the server with the request (see
/// [`Caller::defer`](crate::gen_server::Caller::defer)). Replying consumes it; dropping it
/// unanswered fails the call, with [`CallError::NoReply`](crate::gen_server::CallError::NoReply)
/// if the server is alive and [`CallError::Exit`](crate::gen_server::CallError::Exit) if it is
/// dying.
pub struct ReplyTo<R> {
    slot: Option<Arc<ReplySlot<R>>>,
    server: Pid,
}

impl<R> std::fmt::Debug for ReplyTo<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyTo")
            .field("server", &self.server)
            .field("answered", &self.slot.is_none())
            .finish()
    }
}

impl<R> ReplyTo<R> {
    pub(crate) fn new(slot: Arc<ReplySlot<R>>, server: Pid) -> ReplyTo<R> {
        ReplyTo {
            slot: Some(slot),
            server,
        }
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
            c.filter(|p| p.pid == self.server && (std::thread::panicking() || p.is_exiting()))
                .map(Arc::clone)
        });
        let outcome = match dying {
            Some(server) => Outcome::Died(server),
            None => Outcome::NoReply,
        };
        let _ = slot.settle(outcome);
    }
}
