//! What a suspended process waits for: a message (`receive`), a message or its timer
//! (`receive_timeout`), or a reply (a `gen_server` or supervisor call), and from whom.
//!
//! The wait notes it itself, on the path where it returns `Pending`, in the process's own
//! record: the kind in the status byte beside "running" / "waiting" (one bit per kind, set
//! with one atomic `or`, as the process's wakers set the byte's "woken" bit meanwhile, see
//! `waker`), and a call's callee in two words written before the wait. No lock, no
//! allocation, no thread-local beyond the current process the wait looks up anyway, and
//! nothing to switch on: a peek or a wall sample session opened later tells what a process
//! that suspended long before waits for.
//!
//! Each poll starts by storing "running", which clears the kind and the "woken" bit: a process
//! that suspends somewhere else afterwards (an untraced future, a timer of its own) never
//! shows a stale wait.

use std::future::Future;
use std::sync::atomic::Ordering;

use super::{Process, STATUS_RUNNING, STATUS_WAITING, with_current_owner};
use crate::Pid;

/// The bits of the status byte that say whether a process runs, waits or ends; the kind of
/// wait is above them.
pub(super) const STATUS_MASK: u8 = 3;
/// The kinds of wait a poll noted, one bit each ([`Wait::bit`]): noting one is a single
/// atomic `or`, where a field of the kind's number would take a compare-and-swap loop (the
/// wakers set [`WOKEN`] in the same byte at any time). When a poll noted more than one, the
/// outermost wait wins: a call over a receive timeout over a receive (`receive_timeout`
/// notes around the `receive` it wraps).
const RECEIVE: u8 = 1 << 2;
const RECEIVE_TIMEOUT: u8 = 1 << 3;
const CALL: u8 = 1 << 5;
/// Woken since its poll began: set by its wakers ([`Process::note_woken`]), cleared by the
/// store of "running" that begins each poll. A waiting process with it set is queued for a
/// worker: runnable.
pub(super) const WOKEN: u8 = 1 << 4;

/// What a suspended process waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// A message (`receive` in any form without a timeout).
    Receive,
    /// A message or its timer (`receive_timeout`).
    ReceiveTimeout,
    /// The reply to a call.
    Call,
}

impl Wait {
    /// Its bit in the status byte.
    #[inline(always)]
    const fn bit(self) -> u8 {
        match self {
            Wait::Receive => RECEIVE,
            Wait::ReceiveTimeout => RECEIVE_TIMEOUT,
            Wait::Call => CALL,
        }
    }

    /// The wait the status byte `status` notes: the outermost of those noted.
    fn from_status(status: u8) -> Option<Wait> {
        if status & CALL != 0 {
            Some(Wait::Call)
        } else if status & RECEIVE_TIMEOUT != 0 {
            Some(Wait::ReceiveTimeout)
        } else if status & RECEIVE != 0 {
            Some(Wait::Receive)
        } else {
            None
        }
    }
}

// The kinds' bits, "woken" and the status's bits are distinct.
const _: () = assert!((RECEIVE | RECEIVE_TIMEOUT | CALL) & (WOKEN | STATUS_MASK) == 0);

/// Whether a message in its mailbox wakes a process whose status byte is `status`: unless it
/// waits for a call's reply.
pub(super) fn woken_by_messages(status: u8) -> bool {
    Wait::from_status(status) != Some(Wait::Call)
}

impl Process {
    /// Notes, in a poll of this process by its own task, that it is about to suspend waiting
    /// for `wait` (of several noted in a poll, the outermost wins: `receive_timeout` notes
    /// after the `receive` it wraps). One atomic `or` into its own record, which
    /// keeps a "woken" bit a waker set meanwhile. (A destructor that polls a receive while its
    /// process ends notes a wait on an ending process: only readers of its state see that,
    /// which tell an ending process by its status bits first.)
    #[inline(always)]
    pub(crate) fn note_wait(&self, wait: Wait) {
        // Release: a reader that sees a call's kind sees its callee, stored before.
        self.status.fetch_or(wait.bit(), Ordering::Release);
    }

    /// At the end of a poll that suspends: waiting, for what the poll noted (running, `01`,
    /// becomes waiting, `11`, keeping the kind and a "woken" bit a waker set meanwhile).
    #[inline(always)]
    pub(super) fn mark_waiting(&self) {
        const _: () = assert!(STATUS_RUNNING | 2 == STATUS_WAITING);
        self.status.fetch_or(2, Ordering::Release);
    }

    /// Notes that the process was woken: it is queued for a worker until its next poll
    /// begins (run by its wakers, see `waker`).
    #[inline(always)]
    pub(super) fn note_woken(&self) {
        self.status.fetch_or(WOKEN, Ordering::Relaxed);
    }

    /// Records `callee` as the process it calls, before its call waits.
    #[inline(always)]
    fn note_callee(&self, callee: Pid) {
        self.callee.store(
            u64::from(callee.index()) << 32 | u64::from(callee.serial()),
            Ordering::Relaxed,
        );
        self.callee_node.store(callee.node(), Ordering::Relaxed);
    }

    /// What it waits for, as its last suspension noted it, and for a call the process
    /// called, as the status byte `status` says it (loaded with `Acquire` by the caller, who
    /// told the process's status from the same load, so that the wait and the status never
    /// come from two moments): `None` while it runs or ends, or when it waits for something
    /// else. Racing the process: a process that just woke may still show its last wait.
    pub(crate) fn waiting_given(&self, status: u8) -> Option<(Wait, Option<Pid>)> {
        if status & STATUS_MASK != STATUS_WAITING {
            return None;
        }
        let wait = Wait::from_status(status)?;
        if wait != Wait::Call {
            return Some((wait, None));
        }
        let word = self.callee.load(Ordering::Relaxed);
        let node = self.callee_node.load(Ordering::Relaxed);
        // A callee read while the process moved on to its next call is not this wait's.
        let same = self.status.load(Ordering::Acquire) == status;
        let callee = Pid::from_parts(node, (word >> 32) as u32, word as u32);
        Some((wait, (same && !callee.is_outside()).then_some(callee)))
    }
}

/// [`Process::note_wait`] for the current process, when the caller is the process itself
/// (a helper task runs beside it: the process's status is not its to write).
#[inline(always)]
pub(crate) fn note_current_wait(wait: Wait) {
    with_current_owner(|p| {
        if let Some(p) = p {
            p.note_wait(wait);
        }
    });
}

/// The calling process's pid (its owner's, in a helper task), or `None` outside a process;
/// the process itself (not a helper) records `callee` as the process it is about to call.
#[inline(always)]
pub(crate) fn calling(callee: Pid) -> Option<Pid> {
    super::current::with_raw(|c| {
        c.map(|(p, helper)| {
            if !helper {
                p.note_callee(callee);
            }
            p.pid
        })
    })
}

/// `future`, noting each time it is pending that the process waits for `wait` (around a wait
/// that does not note itself: a timer around a receive, a supervisor's reply channel).
pub(crate) async fn noting<F: Future>(wait: Wait, future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        let polled = future.as_mut().poll(cx);
        if polled.is_pending() {
            note_current_wait(wait);
        }
        polled
    })
    .await
}
