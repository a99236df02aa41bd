//! Mailboxes and receiving.
//!
//! A mailbox has two halves:
//!
//! - **incoming**: a queue that senders push to under a short lock. `send` never blocks on the
//!   receiver and never waits for space; pushing to a process that has exited fails, and the
//!   message is dropped (Erlang's "sending to a dead pid is a no-op").
//! - **saved**: the process's own queue of messages it has taken from incoming but not yet
//!   received, in arrival order. Selective receive scans it first, then moves incoming over a
//!   batch at a time.
//!
//! A receive future keeps nothing but a hint of how far it has scanned: every message stays in
//! the mailbox until the moment it is handed out, so dropping a receive future mid-scan (inside
//! `select!` or a timeout) loses and reorders nothing. The hint is discarded whenever another
//! receive has taken a message from `saved` since.
//!
//! The incoming lock also guards the process's links, monitors, name and pending exit
//! ([`Mailbox::state`]): one lock per process for everything others change in it, so that an
//! exit closes the mailbox and takes its links and monitors at once, and a `Down` is queued as
//! its monitor is forgotten.
//!
//! Exit signals travel through incoming too, so that the signals and messages sent by one
//! process to another are seen in the order they were sent. They are acted on when the owner
//! takes them from incoming, which the poll wrapper does at the start of a poll whenever one is
//! pending, whether or not the process is receiving.

use crate::process::{Wait, noting};
use crate::traced;
use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::Message;
use crate::heap::{Account, Charging};
use crate::process::{Process, State, current_process_for_receive};
use crate::signal::Signal;

/// What travels through a mailbox: a message, or an exit signal to act on.
pub(crate) enum Envelope {
    Message(Message),
    Signal(Box<Signal>),
}

/// A queue whose drop skips the element drops (two out-of-line calls, one per half of the
/// ring, even when empty) when it never allocated, as most processes' queues end (incoming,
/// the spare, and saved): such a queue holds nothing (its length is at most its capacity, 0)
/// and owns no memory.
struct Queue<T>(ManuallyDrop<VecDeque<T>>);

/// The queue of incoming envelopes (and its spare).
type EnvelopeQueue = Queue<Envelope>;

impl<T> Default for Queue<T> {
    #[inline]
    fn default() -> Queue<T> {
        Queue(ManuallyDrop::new(VecDeque::new()))
    }
}

impl<T> Deref for Queue<T> {
    type Target = VecDeque<T>;

    #[inline]
    fn deref(&self) -> &VecDeque<T> {
        &self.0
    }
}

impl<T> DerefMut for Queue<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut VecDeque<T> {
        &mut self.0
    }
}

impl<T> Drop for Queue<T> {
    #[inline]
    fn drop(&mut self) {
        if self.0.capacity() != 0 {
            // Dropped as any queue (what is left in its place is empty and owns nothing).
            drop(std::mem::take(&mut *self.0));
        }
    }
}

struct Incoming {
    queue: EnvelopeQueue,
    closed: bool,
    /// A receive waits, polled with this other waker (or with the task's, before the process
    /// kept it): the next push takes it and wakes it.
    waker: Option<Waker>,
    /// The owner's links, monitors, name and pending exit, under the same lock: an exit
    /// closes the mailbox and takes them in one critical section, and a monitor's `Down` is
    /// queued as the monitor is removed (see [`Mailbox::state`]).
    state: State,
}

/// What [`Mailbox::close`] hands back to the exiting owner, to drop or act on outside the lock.
pub(crate) struct Closed {
    /// What senders had queued (`None` when nothing).
    pub(crate) incoming: Option<VecDeque<Envelope>>,
    /// What the owner had saved (`None` when nothing).
    pub(crate) saved: Option<VecDeque<Message>>,
}

/// What [`Mailbox::push`] asks of its caller once the envelope is queued.
#[must_use = "a waiting receive must be woken"]
pub(crate) enum Pushed {
    /// Nothing: no receive waits with the task's waker.
    Queued,
    /// Wake the process's task (a receive of it waits).
    WakeTask,
}

/// The owner's half: messages taken from incoming but not yet received.
#[derive(Default)]
pub(crate) struct Saved {
    queue: Queue<Message>,
    /// Swapped with incoming's queue to take a batch, so that neither queue gives up its
    /// capacity (no allocation per batch).
    spare: EnvelopeQueue,
    /// How many messages receives have taken out of `queue`: a receive future's scan hint is
    /// valid only while this has not changed.
    removals: u64,
}

/// A process's mailbox. See the module documentation.
pub(crate) struct Mailbox {
    /// Queued by senders, with the owner's [`State`]. Both locks are `parking_lot`'s: no
    /// poisoning to check on every lock and unlock (each critical section is one push, pop or
    /// swap, or a few field updates, which a panic cannot leave half done), and an inlined
    /// fast path.
    incoming: Mutex<Incoming>,
    saved: Mutex<Saved>,
    /// `saved`'s length, written by the owner under the `saved` lock: a receive with nothing
    /// saved takes straight from incoming without that lock.
    saved_len: AtomicUsize,
    /// The next push wakes the process's task, by reference (the process keeps that waker for
    /// as long as it lives), so a receive polled by its own task clones no waker and a push
    /// drops none. Written only under the `incoming` lock: set by a receive of the process's
    /// task that found incoming empty, or that took its last message (so that the next
    /// receive, finding it still set, knows without the lock that nothing came since), and
    /// cleared by the push that wakes the task. See [`Mailbox::poll_take_front`].
    wake_task: AtomicBool,
}

/// Keeps `cx`'s waker to be woken by the next push: as a flag when it wakes the process's own
/// task (`own_task`, [`Process::owns_waker`]), else a clone. A different waker already kept
/// (another receive of the same process, polled under its own waker, as in
/// `FuturesUnordered`) is woken now rather than lost: a spurious wake, never a missed one.
#[inline]
fn register(incoming: &mut Incoming, wake_task: &AtomicBool, cx: &Context<'_>, own_task: bool) {
    if own_task {
        wake_task.store(true, Ordering::Relaxed);
        return;
    }
    match &incoming.waker {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => {
            if let Some(old) = incoming.waker.replace(cx.waker().clone()) {
                old.wake();
            }
        }
    }
}

impl Mailbox {
    /// An empty mailbox for an owner whose state starts as `state`. Every field written out,
    /// so that the process record is built in place.
    #[inline(always)]
    pub(crate) fn new(state: State) -> Mailbox {
        Mailbox {
            incoming: Mutex::new(Incoming {
                queue: EnvelopeQueue::default(),
                closed: false,
                waker: None,
                state,
            }),
            saved: Mutex::new(Saved::default()),
            saved_len: AtomicUsize::new(0),
            wake_task: AtomicBool::new(false),
        }
    }

    /// Queues an envelope; gives it back when the mailbox is closed (its process exited). The
    /// caller wakes the process's task when asked to ([`Process`] keeps that waker). A queue
    /// that grows for it is charged to `account` (the owner's heap account), if any.
    #[inline(always)]
    pub(crate) fn push(
        &self,
        env: Envelope,
        account: Option<&'static Account>,
    ) -> Result<Pushed, Envelope> {
        let incoming = self.incoming.lock();
        if incoming.closed {
            return Err(env);
        }
        self.push_locked(incoming, env, account)
    }

    /// Queues an envelope if `admit`, run on the owner's state under the mailbox's lock, says
    /// so (a monitor's `Down`, admitted as its monitor is removed: none arrives after
    /// `demonitor` returns); gives it back when not, or when the mailbox is closed.
    pub(crate) fn push_if(
        &self,
        env: Envelope,
        account: Option<&'static Account>,
        admit: impl FnOnce(&mut State) -> bool,
    ) -> Result<Pushed, Envelope> {
        let mut incoming = self.incoming.lock();
        if incoming.closed || !admit(&mut incoming.state) {
            return Err(env);
        }
        self.push_locked(incoming, env, account)
    }

    /// The owner's links, monitors, name and pending exit, under the mailbox's lock. Hold it
    /// briefly, and touch no mailbox (this one's lock is not reentrant) while holding it.
    #[inline]
    pub(crate) fn state(&self) -> MappedMutexGuard<'_, State> {
        MutexGuard::map(self.incoming.lock(), |incoming| &mut incoming.state)
    }

    /// The rest of a push, once the lock is held and the mailbox known open: a queue that
    /// grows is charged to `account`, if any (the thread's charge is switched only then: a
    /// push into room already there allocates nothing).
    #[inline(always)]
    fn push_locked(
        &self,
        mut incoming: MutexGuard<'_, Incoming>,
        env: Envelope,
        account: Option<&'static Account>,
    ) -> Result<Pushed, Envelope> {
        if incoming.queue.len() == incoming.queue.capacity() {
            std::hint::cold_path();
            let _charging = Charging::shared(account);
            incoming.queue.push_back(env);
        } else {
            incoming.queue.push_back(env);
        }
        // A load and a store rather than a swap: the lock orders them against the receiver's
        // writes.
        let wake_task = self.wake_task.load(Ordering::Relaxed);
        if wake_task {
            self.wake_task.store(false, Ordering::Relaxed);
        }
        let waker = incoming.waker.take();
        drop(incoming);
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(if wake_task {
            Pushed::WakeTask
        } else {
            Pushed::Queued
        })
    }

    /// Closes the mailbox and returns whatever it still held, for the caller to drop inside the
    /// exiting process (`None` for a queue that was empty: an exit with an empty mailbox
    /// moves and drops no queue). Later pushes fail. Called by the owner (its exit), which
    /// alone changes `saved`: when its own `saved_len` says nothing is saved, `saved` is left
    /// alone (a lock round trip fewer per exit). `on_state` runs on the owner's state in the
    /// same critical section (the exit takes its links and monitors there).
    pub(crate) fn close(&self, on_state: impl FnOnce(&mut State)) -> Closed {
        let incoming = {
            let mut incoming = self.incoming.lock();
            incoming.closed = true;
            self.wake_task.store(false, Ordering::Relaxed);
            incoming.waker = None;
            on_state(&mut incoming.state);
            (!incoming.queue.is_empty()).then(|| std::mem::take(&mut *incoming.queue))
        };
        let saved = if self.saved_len.load(Ordering::Relaxed) == 0 {
            None
        } else {
            let saved = std::mem::take(&mut *self.saved.lock().queue);
            self.saved_len.store(0, Ordering::Relaxed);
            Some(saved)
        };
        Closed { incoming, saved }
    }

    /// Messages waiting: queued by senders and saved by the owner.
    pub(crate) fn len(&self) -> usize {
        self.saved_len.load(Ordering::Relaxed) + self.incoming.lock().queue.len()
    }

    /// [`len`](Self::len) and whether senders have queued anything the owner has not looked
    /// at yet, under one lock.
    pub(crate) fn len_and_incoming(&self) -> (usize, bool) {
        let incoming = self.incoming.lock().queue.len();
        (
            self.saved_len.load(Ordering::Relaxed) + incoming,
            incoming > 0,
        )
    }

    /// What senders queued and the owner has not looked at yet: its [`State`], how many
    /// envelopes and the bytes they hold (the queue's buffer and each boxed envelope), read
    /// under the incoming lock, once. `read` must not touch a mailbox (the lock is held).
    pub(crate) fn inspect_incoming<R>(&self, read: impl FnOnce(&State) -> R) -> (R, usize, u64) {
        let incoming = self.incoming.lock();
        let queue = &*incoming.queue;
        let bytes = (queue.capacity() * size_of::<Envelope>()) as u64
            + queue
                .iter()
                .map(|env| match env {
                    Envelope::Message(m) => m.envelope_bytes() as u64,
                    Envelope::Signal(_) => size_of::<Signal>() as u64,
                })
                .sum::<u64>();
        (read(&incoming.state), queue.len(), bytes)
    }

    /// The messages the owner took from incoming but has not received yet, and the bytes they
    /// hold (as [`inspect_incoming`](Self::inspect_incoming)), under the owner's lock: briefly,
    /// and not at all when nothing is saved.
    pub(crate) fn inspect_saved(&self) -> (usize, u64) {
        if self.saved_len.load(Ordering::Relaxed) == 0 {
            return (0, 0);
        }
        let saved = self.saved.lock();
        let bytes = (saved.queue.capacity() * size_of::<Message>()) as u64
            + saved
                .queue
                .iter()
                .map(|m| m.envelope_bytes() as u64)
                .sum::<u64>();
        (saved.queue.len(), bytes)
    }

    /// Moves everything queued by senders into `saved`, acting on signals on the way.
    /// Returns whether a message was added to `saved`.
    pub(crate) fn drain_incoming(&self, process: &Process) -> bool {
        let mut saved = self.saved.lock();
        let Saved { queue, spare, .. } = &mut *saved;
        std::mem::swap(&mut self.incoming.lock().queue, spare);
        let before = queue.len();
        for env in spare.drain(..) {
            if let Some(msg) = process.ingest(env) {
                queue.push_back(msg);
            }
        }
        self.saved_len.store(queue.len(), Ordering::Relaxed);
        queue.len() != before
    }

    /// The common case of a receive's poll, inlined into it: nothing saved, so the oldest
    /// queued message is the first candidate. Ready with it if `matches` accepts it; Pending
    /// (with the waker kept) when nothing is queued; `None` for the general case
    /// ([`Mailbox::poll_take`]), with the message, if one was looked at, saved first.
    ///
    /// A receive polled by its process's task that takes the last queued message sets
    /// `wake_task`, as a receive that found nothing would: the next receive, typically that
    /// of a loop, then waits without taking the lock when the flag is still set. That is
    /// exact: the flag is set only under the lock with incoming empty, and the first push
    /// after that clears it under the lock and wakes the task. So a receive that reads it set
    /// either comes before that push, and nothing is queued, or races with it, and is woken.
    /// The read takes no lock, so a poll that the push's wake interrupts may still read the
    /// flag set; the poll that the wake causes cannot, because a wake happens-before the poll
    /// it causes, coalesced wakes included: `Waker`'s contract, which tokio's `wake_by_ref`
    /// keeps with a release write even when the task is already notified (tokio-rs/tokio#7622;
    /// the workspace requires tokio 1.54).
    /// A process that does not receive again is woken once by the next push, as any future
    /// may be woken for nothing.
    #[inline(always)]
    fn poll_take_front<F: FnMut(&Message) -> bool>(
        &self,
        process: &Process,
        matches: &mut F,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Message>> {
        if self.saved_len.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let own_task = || process.owns_waker(cx.waker());
        if self.wake_task.load(Ordering::Relaxed) && own_task() {
            process.note_wait(Wait::Receive);
            return Some(Poll::Pending);
        }
        let msg = {
            let mut incoming = self.incoming.lock();
            match incoming.queue.front() {
                None => {
                    register(&mut incoming, &self.wake_task, cx, own_task());
                    process.note_wait(Wait::Receive);
                    return Some(Poll::Pending);
                }
                Some(Envelope::Message(_)) => match incoming.queue.pop_front() {
                    Some(Envelope::Message(msg)) => {
                        if incoming.queue.is_empty() && own_task() {
                            self.wake_task.store(true, Ordering::Relaxed);
                        }
                        msg
                    }
                    _ => unreachable!("the front is a message"),
                },
                Some(Envelope::Signal(_)) => return None,
            }
        };
        // The matcher runs outside every lock; held so that a panicking matcher leaves the
        // message in the mailbox.
        let mut held = Held {
            mailbox: self,
            msg: Some(msg),
        };
        if held.msg.as_ref().is_some_and(&mut *matches) {
            return held.msg.take().map(Poll::Ready);
        }
        None
    }

    /// One poll of a selective receive: the first message, oldest first, that `matches`
    /// accepts. `hint` is the receive future's scan position.
    fn poll_take(
        &self,
        process: &Process,
        hint: &mut ScanHint,
        matches: &mut dyn FnMut(&Message) -> bool,
        cx: &mut Context<'_>,
    ) -> Poll<Message> {
        let mut saved = self.saved.lock();
        let Saved {
            queue,
            spare,
            removals,
        } = &mut *saved;
        let here = std::ptr::from_ref(self) as usize;
        if hint.removals != *removals || hint.mailbox != here {
            hint.removals = *removals;
            hint.mailbox = here;
            hint.checked = 0;
        }
        loop {
            let start = hint.checked.min(queue.len());
            if let Some(offset) = queue.range(start..).position(&mut *matches) {
                let msg = queue.remove(start + offset);
                self.saved_len.store(queue.len(), Ordering::Relaxed);
                *removals += 1;
                hint.removals = *removals;
                return Poll::Ready(msg.expect("position is in range"));
            }
            hint.checked = queue.len();
            // Nothing saved matches: move a batch over from incoming, or wait for one.
            {
                let mut incoming = self.incoming.lock();
                if incoming.queue.is_empty() {
                    register(
                        &mut incoming,
                        &self.wake_task,
                        cx,
                        process.owns_waker(cx.waker()),
                    );
                    process.note_wait(Wait::Receive);
                    return Poll::Pending;
                }
                std::mem::swap(&mut incoming.queue, spare);
            }
            for env in spare.drain(..) {
                if let Some(msg) = process.ingest(env) {
                    queue.push_back(msg);
                }
            }
            self.saved_len.store(queue.len(), Ordering::Relaxed);
            if process.exit_pending() {
                // A signal ended the process: the poll wrapper acts on it when this poll
                // returns.
                return Poll::Pending;
            }
        }
    }
}

/// A message taken from incoming while the matcher looks at it: saved (as the oldest, which it
/// is) unless taken out.
struct Held<'a> {
    mailbox: &'a Mailbox,
    msg: Option<Message>,
}

impl Drop for Held<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(msg) = self.msg.take() {
            self.mailbox.save_front(msg);
        }
    }
}

impl Mailbox {
    /// Saves `msg` as the oldest message (it was taken from incoming to be looked at).
    #[cold]
    #[inline(never)]
    fn save_front(&self, msg: Message) {
        let mut saved = self.saved.lock();
        saved.queue.push_front(msg);
        self.saved_len.store(saved.queue.len(), Ordering::Relaxed);
    }
}

#[derive(Default, Clone, Copy)]
struct ScanHint {
    checked: usize,
    removals: u64,
    /// The mailbox the hint is about (its address): a receive future moved to another process
    /// starts over.
    mailbox: usize,
}

/// The future of a selective receive; see [`receive_match`].
#[must_use = "a receive does nothing until awaited"]
pub struct ReceiveMatch<F> {
    matches: F,
    hint: ScanHint,
}

impl<F> std::fmt::Debug for ReceiveMatch<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiveMatch")
            .field("checked", &self.hint.checked)
            .finish_non_exhaustive()
    }
}

impl<F: FnMut(&Message) -> bool + Unpin> Future for ReceiveMatch<F> {
    type Output = Message;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Message> {
        self.get_mut().poll_inline(cx)
    }
}

impl<F: FnMut(&Message) -> bool + Unpin> ReceiveMatch<F> {
    /// [`Future::poll`], inlined into its caller: [`receive`] polls through it, so that its
    /// common case (a few loads and a lock, [`Mailbox::poll_take_front`]) runs in the receive's
    /// own frame, a call and a frame fewer per poll. Other receives keep the call (inlined
    /// into a large future's poll, such as a gen_server's loop, it costs more than it saves).
    #[inline(always)]
    fn poll_inline(&mut self, cx: &mut Context<'_>) -> Poll<Message> {
        let this = self;
        // Each pending path notes that the process waits for a message.
        current_process_for_receive(|process| {
            match process
                .mailbox
                .poll_take_front(process, &mut this.matches, cx)
            {
                Some(poll) => poll,
                None => process
                    .mailbox
                    .poll_take(process, &mut this.hint, &mut this.matches, cx),
            }
        })
    }
}

/// A receive whose polls are inlined into the future that awaits it ([`receive`]'s).
struct Inlined<F>(ReceiveMatch<F>);

impl<F: FnMut(&Message) -> bool + Unpin> Future for Inlined<F> {
    type Output = Message;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Message> {
        self.get_mut().0.poll_inline(cx)
    }
}

/// Receives the first message, oldest first, that `matches` accepts, leaving the others in the
/// mailbox in their order. Erlang's `receive Pattern -> ... end`.
///
/// Dropping the future before it completes loses nothing: every message stays in the mailbox
/// until the moment it is handed out, so a receive dropped mid-scan (inside `select!` or a
/// timeout) loses and reorders nothing.
///
/// # Panics
/// When polled outside a process (in a plain tokio task, or a helper of
/// [`spawn_task`](crate::spawn_task)): only a process has a mailbox.
pub fn receive_match<F: FnMut(&Message) -> bool + Unpin>(matches: F) -> ReceiveMatch<F> {
    ReceiveMatch {
        matches,
        hint: ScanHint::default(),
    }
}

/// Receives the oldest message of any type.
///
/// # Panics
/// When polled outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub async fn receive_any() -> Message {
    receive_match(|_| true).await
}

/// Receives the oldest message of type `T`, leaving messages of other types in the mailbox.
///
/// ```
/// use runtime::{Node, receive, self_pid, send};
///
/// let node = Node::new().unwrap();
/// let sum = node.run(async {
///     send(self_pid(), "skipped for now");
///     send(self_pid(), 40u32);
///     let n: u32 = receive().await;
///     let s: &str = receive().await;
///     n as usize + s.len()
/// });
/// assert_eq!(sum.unwrap(), 55);
/// ```
///
/// # Panics
/// When polled outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub async fn receive<T: Any + Send>() -> T {
    let msg = Inlined(receive_match(Message::is::<T>)).await;
    match msg.downcast::<T>() {
        Ok(value) => value,
        Err(_) => unreachable!("the receive matched on the type"),
    }
}

/// Receives the oldest message of type `T` for which `matches` is true.
///
/// # Panics
/// When polled outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub async fn receive_where<T, F>(mut matches: F) -> T
where
    T: Any + Send,
    F: FnMut(&T) -> bool + Unpin,
{
    let msg =
        receive_match(move |m: &Message| m.downcast_ref::<T>().is_some_and(&mut matches)).await;
    match msg.downcast::<T>() {
        Ok(value) => value,
        Err(_) => unreachable!("the receive matched on the type"),
    }
}

/// [`receive`] with a timeout: `None` when no message of type `T` arrived in time. Erlang's
/// `receive ... after`.
///
/// # Panics
/// When polled outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub async fn receive_timeout<T: Any + Send>(timeout: Duration) -> Option<T> {
    noting(
        Wait::ReceiveTimeout,
        tokio::time::timeout(timeout, receive::<T>()),
    )
    .await
    .ok()
}

/// [`receive_any`] with a timeout: `None` when the mailbox stayed empty.
///
/// # Panics
/// When polled outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub async fn receive_any_timeout(timeout: Duration) -> Option<Message> {
    noting(
        Wait::ReceiveTimeout,
        tokio::time::timeout(timeout, receive_any()),
    )
    .await
    .ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{Envelope, EnvelopeQueue};
    use crate::Message;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A queue that allocated drops what it holds, wrapped around its ring too; one that never
    /// allocated holds nothing to drop.
    #[test]
    fn an_envelope_queue_drops_what_it_holds() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut queue = EnvelopeQueue::default();
        assert_eq!(queue.capacity(), 0);
        for _ in 0..3 {
            queue.push_back(Envelope::Message(Message::new(Counted(Arc::clone(&drops)))));
        }
        drop(queue.pop_front());
        // Wraps around: both halves of the ring hold envelopes.
        for _ in 0..queue.capacity() - queue.len() {
            queue.push_back(Envelope::Message(Message::new(Counted(Arc::clone(&drops)))));
        }
        let held = queue.len();
        drop(queue);
        assert_eq!(drops.load(Ordering::SeqCst), held + 1);
        drop(EnvelopeQueue::default());
    }
}
