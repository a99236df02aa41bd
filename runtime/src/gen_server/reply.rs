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
//! - the call's deadline passed first: the caller closes the slot ([`ReplySlot::close`]),
//!   and the slot refuses the late reply ([`ReplyTo::reply`] returns false).
//!
//! # The protocol
//!
//! One writer (the `ReplyTo`) and one reader (the waiting call), as tokio's `oneshot`, with no
//! lock: the state word has three bits. The writer stores the outcome, then sets `SENT`; the
//! reader takes the outcome only once it sees `SENT`. The reader keeps its waker in the slot
//! and then sets `WAKER`; it changes the waker only after clearing `WAKER` and seeing that
//! `SENT` is still unset, and the writer reads the waker only when its own `SENT` update found
//! `WAKER` set. The reader gives up with `CLOSED`; a writer whose `SENT` update finds `CLOSED`
//! takes its outcome back (the late reply is refused), and a reader whose `CLOSED` update finds
//! `SENT` takes the outcome (a reply that came just now still counts).
//!
//! # Reuse
//!
//! A call that got its outcome gives its slot back to a per-thread spare when nothing else
//! holds it (the `ReplyTo` is gone: the strong count is 1), and the next call on that thread
//! with the same reply type takes it, keeping the waker it holds: a process making calls in a
//! loop allocates no slot and clones no waker per call.
//!
//! # Safety
//!
//! The `UnsafeCell`s are this file's `unsafe`. The contract, upheld by the protocol above:
//! `value` is written only by the one writer before it sets `SENT` (or after its `SENT` update
//! found `CLOSED`, when the reader has stopped reading), and read only by the reader after it
//! saw `SENT` and before it sets `CLOSED` (or after its `CLOSED` update found `SENT`); `waker`
//! is written only by the reader while `WAKER` is unset and `SENT` was unset after clearing it,
//! and read only by the writer when its `SENT` update found `WAKER` set. `value` is empty
//! whenever the writer writes it: a fresh slot's is, and a slot is reused only after its call
//! took the outcome or gave up before one was settled.
//!
//! A slot is reused only by the holder of its one strong reference: no `Weak` to a slot is ever
//! made, so a strong count of 1 means nobody else can reach it, and an acquire fence after
//! reading that count orders the reuse after everything the `ReplyTo` did before its release
//! decrement. Only then are `server` and `from` written (they are read by the `ReplyTo`, which
//! no longer exists) and the cells touched, and `timer` (never touched by the `ReplyTo`;
//! lent to the caller by `timer`, a borrow of the caller's `Arc` that ends before the slot can
//! be reused). This is `Arc::get_mut` without its compare-and-swap on the weak count, which
//! guards against `Weak`s a slot never has.
//!
//! The per-thread spare is an `Arc<dyn Any>` kept with the type id of the slot it holds, put
//! there by `recycle` from the slot's own type; `new` turns it back into a slot only when that
//! id is its own slot type's (`Arc::downcast`, with the id compared to a constant rather than
//! asked of the vtable).
#![allow(unsafe_code)]

use std::any::{Any, TypeId};
use std::cell::{Cell, UnsafeCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::task::{Context, Poll, Waker};

use crate::Pid;
use crate::process::{Process, with_current_owner};
use crate::timer::{CallTimer, Expire};

pub(crate) enum Outcome<R> {
    Replied(R),
    NoReply,
    Died(Arc<Process>),
    Expired,
}

/// The reader's waker is in the slot.
const WAKER: usize = 1;
/// The outcome is in the slot.
const SENT: usize = 2;
/// The reader gave up: no outcome is taken any more.
const CLOSED: usize = 4;

/// The slot, shared by the caller and the [`ReplyTo`] in the request. It also carries the two
/// pids of the call, so that the request itself is the request and one pointer (small requests
/// then travel inline in their [`Message`](crate::Message), allocating nothing more).
pub(crate) struct ReplySlot<R> {
    state: AtomicUsize,
    value: UnsafeCell<Option<Outcome<R>>>,
    waker: UnsafeCell<Option<Waker>>,
    /// Written only when the slot is reused (see the module's Safety section).
    server: UnsafeCell<Pid>,
    from: UnsafeCell<Option<Pid>>,
    /// The call timer of the last process that made a timed call with this slot, kept across
    /// reuses so that the same process's next call takes no count of it (see `new_for`).
    /// Written, as `server`, only while nobody else holds the slot.
    timer: UnsafeCell<Option<Arc<CallTimer>>>,
}

// SAFETY: the outcome moves from the writer's thread to the reader's (`R: Send`, and
// `Arc<Process>` is `Send + Sync`); the cells are only touched as the module's Safety section
// says, each access ordered against the other side's by the state word (release/acquire).
unsafe impl<R: Send> Send for ReplySlot<R> {}
// SAFETY: as for `Send`: no `&R` is ever shared, the outcome is moved out whole.
unsafe impl<R: Send> Sync for ReplySlot<R> {}

thread_local! {
    /// A finished call's slot, kept for the next call made on this thread.
    static SPARE: Cell<Option<(TypeId, Arc<dyn Any + Send + Sync>)>> = const { Cell::new(None) };
}

impl<R: Send + 'static> ReplySlot<R> {
    /// A slot for a call from `from` to `server` (this thread's spare one if it fits), and the
    /// right to answer it.
    #[inline]
    pub(crate) fn new(server: Pid, from: Option<Pid>) -> (Arc<ReplySlot<R>>, ReplyTo<R>) {
        Self::new_for(server, from, None)
    }

    /// As [`ReplySlot::new`], for a timed call of a process whose call timer is `timer`: the
    /// slot keeps it ([`ReplySlot::timer`] lends it to the call), taking a count of it only
    /// when it kept another process's (or none) before.
    #[inline]
    pub(crate) fn new_for(
        server: Pid,
        from: Option<Pid>,
        timer: Option<&Arc<CallTimer>>,
    ) -> (Arc<ReplySlot<R>>, ReplyTo<R>) {
        let spare = SPARE.try_with(Cell::take).ok().flatten();
        let slot = match spare {
            // The type id is a constant here: no call through `Any`'s vtable to compare it.
            Some((ty, spare)) if ty == TypeId::of::<ReplySlot<R>>() => {
                // SAFETY: the `Arc` holds a `ReplySlot<R>` (its type id, stored with it by
                // `recycle`, says so): this is `Arc::downcast` without asking the vtable.
                let spare = unsafe { Arc::from_raw(Arc::into_raw(spare).cast::<ReplySlot<R>>()) };
                if Arc::strong_count(&spare) == 1 {
                    fence(Ordering::Acquire);
                    // SAFETY: this is the only reference to the slot, and the fence orders
                    // this after everything its last `ReplyTo` did (see the module's Safety
                    // section).
                    unsafe { spare.reuse(server, from) };
                    spare
                } else {
                    Arc::new(ReplySlot::fresh(server, from))
                }
            }
            Some(other) => {
                // Another reply type's: left for its next call.
                let _ = SPARE.try_with(|s| s.set(Some(other)));
                Arc::new(ReplySlot::fresh(server, from))
            }
            None => Arc::new(ReplySlot::fresh(server, from)),
        };
        if let Some(timer) = timer {
            // SAFETY: `slot` is the only reference to the slot (fresh, or a spare whose count
            // was 1, fenced above), and no borrow of the cell is alive: one made by
            // `ReplySlot::timer` borrows the caller's `Arc`, which the borrow checker made it
            // give up before the slot could go back to the spare.
            let kept = unsafe { &mut *slot.timer.get() };
            if !kept.as_ref().is_some_and(|k| Arc::ptr_eq(k, timer)) {
                *kept = Some(Arc::clone(timer));
            }
        }
        let reply_to = ReplyTo {
            slot: Some(Arc::clone(&slot)),
        };
        (slot, reply_to)
    }

    /// Gives a slot whose call is over (its outcome taken, or never settled: its value cell is
    /// empty) back to this thread's spare, if nothing else holds it (`new` checks that again
    /// before reusing it).
    #[inline]
    pub(crate) fn recycle(slot: Arc<ReplySlot<R>>) {
        if Arc::strong_count(&slot) == 1 {
            let _ = SPARE.try_with(|s| s.set(Some((TypeId::of::<ReplySlot<R>>(), slot))));
        }
    }

    /// Readies a finished slot for a new call, keeping its waker, for a caller polled by the
    /// same task as before.
    ///
    /// # Safety
    /// The caller holds the only reference to the slot, and has fenced (acquire) after seeing
    /// that its strong count is 1.
    #[inline]
    unsafe fn reuse(&self, server: Pid, from: Option<Pid>) {
        // SAFETY: nobody else can reach the slot (the caller's contract), so these accesses
        // race with nothing.
        unsafe {
            let waker = if (*self.waker.get()).is_some() {
                WAKER
            } else {
                0
            };
            self.state.store(waker, Ordering::Relaxed);
            *self.server.get() = server;
            *self.from.get() = from;
        }
    }
}

impl<R> ReplySlot<R> {
    /// The server called.
    #[inline]
    fn server(&self) -> Pid {
        // SAFETY: written only while nobody else holds the slot (see `reuse`).
        unsafe { *self.server.get() }
    }

    /// The calling process, if the call came from a process.
    #[inline]
    fn from(&self) -> Option<Pid> {
        // SAFETY: as for `server`.
        unsafe { *self.from.get() }
    }

    /// The call timer the slot keeps (the one given to `new_for` when the slot was taken,
    /// or an earlier caller's when none was given), lent for as long as the slot is borrowed.
    #[inline]
    pub(crate) fn timer(&self) -> Option<&Arc<CallTimer>> {
        // SAFETY: written only in `new_for`, while nobody else holds the slot; the `ReplyTo`
        // never touches it. A write needs the slot's only `Arc`, which the borrow returned
        // here keeps borrowed.
        unsafe { (*self.timer.get()).as_ref() }
    }

    fn fresh(server: Pid, from: Option<Pid>) -> ReplySlot<R> {
        ReplySlot {
            state: AtomicUsize::new(0),
            value: UnsafeCell::new(None),
            waker: UnsafeCell::new(None),
            server: UnsafeCell::new(server),
            from: UnsafeCell::new(from),
            timer: UnsafeCell::new(None),
        }
    }

    /// Settles the slot unless the caller gave up; wakes the caller.
    fn settle(&self, outcome: Outcome<R>) -> Result<(), Outcome<R>> {
        if self.state.load(Ordering::Acquire) & CLOSED != 0 {
            return Err(outcome);
        }
        // SAFETY: the one writer (this `ReplyTo`, consumed by settling), before `SENT`; the
        // reader does not read before it sees `SENT`. Written over without a drop: the cell is
        // empty whenever a writer settles (a fresh slot's is, and a reused slot's outcome was
        // taken by its call, or never written: see `recycle`), so there is nothing to drop and
        // no test of what it held.
        unsafe { self.value.get().write(Some(outcome)) };
        // An add: `SENT` is set once, by the one writer, so adding it sets it, and the old
        // state comes back from one instruction (an `or` that returns the old word is a
        // compare-and-swap loop).
        let prev = self.state.fetch_add(SENT, Ordering::AcqRel);
        if prev & CLOSED != 0 {
            // SAFETY: the reader closed before `SENT` was set, so it never reads the value.
            let outcome = unsafe { (*self.value.get()).take() };
            return Err(outcome.expect("written just above"));
        }
        if prev & WAKER != 0 {
            // SAFETY: `WAKER` was set when `SENT` was: the reader no longer changes the waker.
            if let Some(w) = unsafe { &*self.waker.get() } {
                w.wake_by_ref();
            }
        }
        Ok(())
    }

    /// Takes the outcome the writer left (`SENT` was seen).
    fn take(&self) -> Outcome<R> {
        // SAFETY: `SENT` was seen (acquire): the writer is done with the value, and the reader
        // (the caller of this) takes it once.
        unsafe { (*self.value.get()).take() }.expect("SENT is set once the outcome is written")
    }

    /// The outcome, once the server settled it.
    #[inline]
    pub(crate) fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<Outcome<R>> {
        let mut state = self.state.load(Ordering::Acquire);
        if state & SENT != 0 {
            return Poll::Ready(self.take());
        }
        if state & WAKER != 0 {
            // SAFETY: read by the reader, the only one that writes it.
            let same = unsafe { &*self.waker.get() }
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()));
            if same {
                return Poll::Pending;
            }
            state = self.state.fetch_and(!WAKER, Ordering::AcqRel);
            if state & SENT != 0 {
                // The writer may be reading the waker: leave it as it is.
                return Poll::Ready(self.take());
            }
        }
        // SAFETY: `WAKER` is unset and `SENT` was unset after it was: the writer does not
        // read the waker.
        unsafe { *self.waker.get() = Some(cx.waker().clone()) };
        let state = self.state.fetch_or(WAKER, Ordering::AcqRel);
        if state & SENT != 0 {
            return Poll::Ready(self.take());
        }
        Poll::Pending
    }

    /// The call's deadline passed: refuses any later reply, and gives the outcome settled
    /// before that, if any, or [`Outcome::Expired`]. Called by the caller, once.
    pub(crate) fn close(&self) -> Outcome<R> {
        let prev = self.state.fetch_or(CLOSED, Ordering::AcqRel);
        if prev & SENT != 0 {
            self.take()
        } else {
            Outcome::Expired
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
            .field("server", &self.slot.as_ref().map(|s| s.server()))
            .field("answered", &self.slot.is_none())
            .finish()
    }
}

impl<R> ReplyTo<R> {
    /// The calling process, if the call came from a process.
    pub(crate) fn caller(&self) -> Option<Pid> {
        self.slot.as_ref().and_then(|s| s.from())
    }

    /// Answers the call. Returns false when the caller has stopped waiting (its timeout
    /// passed), as a late reply is then dropped.
    pub fn reply(self, reply: R) -> bool {
        // Consumed here: the slot is taken, so the drop's test for an unanswered call would
        // find nothing; it is not run.
        let mut this = std::mem::ManuallyDrop::new(self);
        match this.slot.take() {
            Some(slot) => slot.settle(Outcome::Replied(reply)).is_ok(),
            None => false,
        }
    }
}

impl<R> Drop for ReplyTo<R> {
    #[inline]
    fn drop(&mut self) {
        if self.slot.is_some() {
            self.unanswered();
        }
    }
}

impl<R> ReplyTo<R> {
    /// Dropped without a reply: tells the caller why.
    #[cold]
    #[inline(never)]
    fn unanswered(&mut self) {
        let Some(slot) = self.slot.take() else { return };
        // Dropped inside the server while it ends (its future or mailbox being dropped, or a
        // panic unwinding): the caller reads the exit reason from the server itself.
        let dying = with_current_owner(|c| {
            c.filter(|p| p.pid == slot.server() && (std::thread::panicking() || p.is_exiting()))
                .map(Arc::clone)
        });
        let outcome = match dying {
            Some(server) => Outcome::Died(server),
            None => Outcome::NoReply,
        };
        let _ = slot.settle(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    /// A waker that counts its wakes.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (Arc::clone(&count), Waker::from(Arc::clone(&count)))
    }

    fn pids() -> (Pid, Option<Pid>) {
        (Pid::from_parts(1, 2, 3), Some(Pid::from_parts(1, 4, 5)))
    }

    /// Counts its drops.
    struct Dropped(Arc<AtomicUsize>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_reply_wakes_the_last_waker_and_the_slot_is_reused() {
        let (server, from) = pids();
        let (slot, reply_to) = ReplySlot::<u64>::new(server, from);
        let (a, wa) = counter();
        let (b, wb) = counter();
        assert!(
            slot.poll_outcome(&mut Context::from_waker(&wa))
                .is_pending()
        );
        // Polled again with another waker: that one is woken, not the first.
        assert!(
            slot.poll_outcome(&mut Context::from_waker(&wb))
                .is_pending()
        );
        assert!(reply_to.reply(7));
        assert_eq!(a.0.load(Ordering::SeqCst), 0);
        assert_eq!(b.0.load(Ordering::SeqCst), 1);
        match slot.poll_outcome(&mut Context::from_waker(&wb)) {
            Poll::Ready(Outcome::Replied(7)) => {}
            _ => panic!("the reply is there"),
        }
        let first = Arc::as_ptr(&slot);
        ReplySlot::recycle(slot);
        // The next call of this thread with this reply type takes the same slot, waker kept.
        let (slot, reply_to) = ReplySlot::<u64>::new(server, None);
        assert_eq!(Arc::as_ptr(&slot), first);
        assert_eq!(reply_to.caller(), None);
        assert!(
            slot.poll_outcome(&mut Context::from_waker(&wb))
                .is_pending()
        );
        assert!(reply_to.reply(8));
        assert_eq!(b.0.load(Ordering::SeqCst), 2);
        assert!(matches!(slot.close(), Outcome::Replied(8)));
        ReplySlot::recycle(slot);
        // Another reply type gets a slot of its own, and leaves the spare to its type.
        let (other, _reply_to) = ReplySlot::<String>::new(server, from);
        assert_ne!(Arc::as_ptr(&other).cast::<()>(), first.cast::<()>());
        drop(other);
        let (again, _reply_to) = ReplySlot::<u64>::new(server, from);
        assert_eq!(Arc::as_ptr(&again), first);
    }

    /// A reused slot keeps the call timer it was given: the same process's next timed call
    /// takes no count of it, another process's replaces it, and an untimed call leaves it.
    #[test]
    fn a_reused_slot_keeps_its_callers_timer_and_changes_it_for_another() {
        let (server, from) = pids();
        let mine = Arc::new(CallTimer::new(None));
        let theirs = Arc::new(CallTimer::new(None));
        let answer = |slot: Arc<ReplySlot<i8>>, reply_to: ReplyTo<i8>| {
            assert!(reply_to.reply(1));
            assert!(matches!(slot.close(), Outcome::Replied(1)));
            ReplySlot::recycle(slot);
        };
        let (slot, reply_to) = ReplySlot::<i8>::new_for(server, from, Some(&mine));
        assert!(slot.timer().is_some_and(|t| Arc::ptr_eq(t, &mine)));
        assert_eq!(Arc::strong_count(&mine), 2, "kept by the slot");
        let first = Arc::as_ptr(&slot);
        answer(slot, reply_to);
        let (slot, reply_to) = ReplySlot::<i8>::new_for(server, from, Some(&mine));
        assert_eq!(Arc::as_ptr(&slot), first, "the spare, reused");
        assert_eq!(Arc::strong_count(&mine), 2, "no count taken again");
        answer(slot, reply_to);
        let (slot, reply_to) = ReplySlot::<i8>::new(server, from);
        assert!(slot.timer().is_some_and(|t| Arc::ptr_eq(t, &mine)));
        answer(slot, reply_to);
        let (slot, reply_to) = ReplySlot::<i8>::new_for(server, from, Some(&theirs));
        assert_eq!(Arc::as_ptr(&slot), first);
        assert!(slot.timer().is_some_and(|t| Arc::ptr_eq(t, &theirs)));
        assert_eq!(
            Arc::strong_count(&mine),
            1,
            "the other process's count let go"
        );
        assert_eq!(Arc::strong_count(&theirs), 2);
        answer(slot, reply_to);
        // The spare holds the last one until the thread's slot goes.
        let _ = SPARE.try_with(Cell::take);
        assert_eq!(Arc::strong_count(&theirs), 1);
    }

    /// The spare slot goes back only to a call with its own reply type, one whose reply owns
    /// memory here, and the slot of another type neither takes nor drops it.
    #[test]
    fn the_spare_slot_is_taken_only_by_a_call_of_its_reply_type() {
        let (server, from) = pids();
        let (slot, reply_to) = ReplySlot::<String>::new(server, from);
        assert!(reply_to.reply("first".to_owned()));
        assert!(matches!(slot.close(), Outcome::Replied(r) if r == "first"));
        let first = Arc::as_ptr(&slot);
        ReplySlot::recycle(slot);
        let (other, reply_to) = ReplySlot::<u64>::new(server, from);
        assert_ne!(Arc::as_ptr(&other).cast::<()>(), first.cast::<()>());
        assert!(reply_to.reply(3));
        assert!(matches!(other.close(), Outcome::Replied(3)));
        drop(other);
        let (again, reply_to) = ReplySlot::<String>::new(server, None);
        assert_eq!(Arc::as_ptr(&again), first);
        assert_eq!(reply_to.caller(), None);
        assert!(reply_to.reply("second".to_owned()));
        assert!(matches!(again.close(), Outcome::Replied(r) if r == "second"));
    }

    #[test]
    fn a_closed_slot_refuses_the_late_reply_and_is_not_reused_while_it_is_held() {
        let (server, from) = pids();
        let drops = Arc::new(AtomicUsize::new(0));
        let (slot, reply_to) = ReplySlot::<Dropped>::new(server, from);
        let (_, w) = counter();
        assert!(slot.poll_outcome(&mut Context::from_waker(&w)).is_pending());
        assert!(matches!(slot.close(), Outcome::Expired));
        let held = Arc::as_ptr(&slot);
        ReplySlot::recycle(slot);
        // The ReplyTo still holds the slot: a new call gets another one.
        let (fresh, fresh_reply) = ReplySlot::<Dropped>::new(server, from);
        assert_ne!(Arc::as_ptr(&fresh), held);
        // The late reply is refused and dropped, never seen.
        assert!(!reply_to.reply(Dropped(Arc::clone(&drops))));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // A ReplyTo dropped unanswered outside its server is NoReply.
        drop(fresh_reply);
        assert!(matches!(
            fresh.poll_outcome(&mut Context::from_waker(&w)),
            Poll::Ready(Outcome::NoReply)
        ));
    }

    #[test]
    fn a_reply_that_came_before_the_close_counts_and_an_untaken_one_is_dropped() {
        let (server, from) = pids();
        let drops = Arc::new(AtomicUsize::new(0));
        let (slot, reply_to) = ReplySlot::<Dropped>::new(server, from);
        assert!(reply_to.reply(Dropped(Arc::clone(&drops))));
        assert!(matches!(slot.close(), Outcome::Replied(_)));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // Replied to, never read: dropped with the slot.
        let (slot, reply_to) = ReplySlot::<Dropped>::new(server, from);
        assert!(reply_to.reply(Dropped(Arc::clone(&drops))));
        drop(slot);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    /// The writer on another thread, the reader re-polling with a fresh waker now and then:
    /// every reply arrives, and every pending poll is followed by a wake.
    #[test]
    fn replies_from_another_thread_always_wake_the_reader() {
        let (server, from) = pids();
        for i in 0..2_000u64 {
            let (slot, reply_to) = ReplySlot::<u64>::new(server, from);
            let writer = std::thread::Builder::new()
                .name("reply-writer".into())
                .spawn(move || reply_to.reply(i))
                .expect("spawned");
            let thread = std::thread::current();
            struct Unpark(std::thread::Thread);
            impl Wake for Unpark {
                fn wake(self: Arc<Self>) {
                    self.0.unpark();
                }
            }
            let mut polls = 0;
            let got = loop {
                let waker = Waker::from(Arc::new(Unpark(thread.clone())));
                if let Poll::Ready(outcome) = slot.poll_outcome(&mut Context::from_waker(&waker)) {
                    break outcome;
                }
                polls += 1;
                let parked = std::time::Instant::now();
                std::thread::park_timeout(std::time::Duration::from_secs(10));
                assert!(
                    polls < 1_000 && parked.elapsed() < std::time::Duration::from_secs(9),
                    "never woken"
                );
            };
            assert!(matches!(got, Outcome::Replied(n) if n == i));
            assert!(writer.join().unwrap());
            ReplySlot::recycle(slot);
        }
    }
}
