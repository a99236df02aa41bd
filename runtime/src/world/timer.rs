//! A coarse per-node deadline wheel for call timeouts.
//!
//! A tokio timer per call makes a request/reply round trip 1.6–3.7× slower (measured on this
//! project's 2-core machines), so calls register their deadline here instead, without reading
//! a clock. One ticker task per node, running only while deadlines are pending, wakes every
//! [`TICK`], stamps the deadlines registered since its last pass (so a deadline counts from no
//! earlier than its registration: it may fire up to about two ticks late, never early), and
//! expires the due ones.
//!
//! Two kinds of registration:
//!
//! - A process's calls re-arm the process's own [`CallTimer`], registered with the wheel once
//!   and kept while the process keeps calling: arming is a few plain stores (the ticker turns
//!   the timeout into ticks), nothing is allocated or freed per call, and a call polled by its
//!   process's own task registers no waker (the timer wakes that task when it fires).
//! - Anything else (a call from outside a process, from a helper task, or a second call a
//!   process makes while one is pending) pushes a one-off entry, a `Weak` to a deadline of its own,
//!   under a per-thread shard lock; a finished call's entry is a dead `Weak`, dropped on the
//!   next pass.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Context, Waker};
use std::time::Duration;

use crate::node::NodeInner;

/// The wheel's resolution.
pub(crate) const TICK: Duration = Duration::from_millis(2);
const SHARDS: usize = 8;

/// Something a deadline can expire (a pending call's one-off deadline).
pub(crate) trait Expire: Send + Sync {
    /// The deadline passed: fail the wait and wake the waiter.
    fn expire(&self);
}

struct Entry {
    /// In ticks since the wheel's origin; `None` until the ticker's first pass stamps it.
    deadline: Option<u64>,
    ticks: u64,
    target: Weak<dyn Expire>,
}

/// See the module documentation.
pub(crate) struct DeadlineWheel {
    shards: [Mutex<Vec<Entry>>; SHARDS],
    timers: Mutex<Vec<TimerEntry>>,
    ticker_running: AtomicBool,
}

/// How many passes a process's timer stays registered while no call arms it.
const IDLE_PASSES: u32 = 500;

/// A process's reusable call deadline (see the module documentation). Only the process
/// arms it; the ticker fires it.
pub(crate) struct CallTimer {
    /// The armed call's number, 0 when disarmed.
    armed: AtomicU64,
    /// The timeout of the armed call, in nanoseconds (saturated); written before `armed`.
    after: AtomicU64,
    /// The number of the last call that expired.
    fired: AtomicU64,
    /// The last number handed out (written by the owner only).
    last: AtomicU64,
    registered: AtomicBool,
    /// The owning process's task waker, which its calls are normally polled with: woken
    /// whenever the timer fires, so those calls register nothing. Set when the timer is made,
    /// or at the process's first suspension if it made its first call before that.
    task: OnceLock<Waker>,
    /// The last other waker (a call polled from inside a combinator with wakers of its own,
    /// or moved to another task).
    waker: Mutex<Option<Waker>>,
}

struct TimerEntry {
    timer: Arc<CallTimer>,
    seen: u64,
    deadline: u64,
    idle: u32,
}

impl CallTimer {
    /// A timer for the process whose task wakes with `task`.
    pub(crate) fn new(task: Option<Waker>) -> CallTimer {
        let cell = OnceLock::new();
        if let Some(task) = task {
            let _ = cell.set(task);
        }
        CallTimer {
            armed: AtomicU64::new(0),
            after: AtomicU64::new(0),
            fired: AtomicU64::new(0),
            last: AtomicU64::new(0),
            registered: AtomicBool::new(false),
            task: cell,
            waker: Mutex::new(None),
        }
    }

    /// Gives the timer its process's task waker, made before the process had one (the caller
    /// then fences before its next poll of a call, as `poll_fired_other` does: a firing that
    /// misses it wakes the waker the call registered meanwhile).
    pub(crate) fn set_task(&self, task: Waker) {
        let _ = self.task.set(task);
    }

    /// Arms the timer for a call that gives up after `after`; `None` when a call of this
    /// process is already armed (the caller then registers a one-off entry).
    #[inline]
    pub(crate) fn arm(
        self: &Arc<Self>,
        node: &Arc<NodeInner>,
        after: Duration,
    ) -> Option<Armed<'_>> {
        if self.armed.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let seq = self.last.load(Ordering::Relaxed) + 1;
        self.last.store(seq, Ordering::Relaxed);
        // The ticker turns it into ticks (no division on a call's path).
        self.after.store(nanos_of(after), Ordering::Relaxed);
        self.armed.store(seq, Ordering::SeqCst);
        if !self.registered.load(Ordering::SeqCst) {
            self.register(node);
        }
        Some(Armed { timer: self, seq })
    }

    #[cold]
    #[inline(never)]
    fn register(self: &Arc<Self>, node: &Arc<NodeInner>) {
        if self
            .registered
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            node.timers.register_timer(node, Arc::clone(self));
        }
    }

    /// Disarms call `seq` (it finished, or was dropped).
    ///
    /// A plain store, not a compare-and-swap: `armed` is `seq` here. Only the owning process
    /// writes `armed` (the ticker reads it), and it arms a call only while `armed` is 0, so
    /// from `arm` to this drop of the call's [`Armed`] no other call changes it, even if the
    /// call's future was moved to another task meanwhile.
    #[inline]
    fn disarm(&self, seq: u64) {
        debug_assert_eq!(self.armed.load(Ordering::Relaxed), seq);
        self.armed.store(0, Ordering::Release);
    }

    /// Whether call `seq` has expired; if not, the waker is kept to be woken when it does.
    #[inline]
    fn poll_fired(&self, seq: u64, cx: &mut Context<'_>) -> bool {
        if self.fired.load(Ordering::Acquire) == seq {
            return true;
        }
        // The process's own task: `fire` always wakes it, after storing `fired`.
        if self.task.get().is_some_and(|t| t.will_wake(cx.waker())) {
            return false;
        }
        self.poll_fired_other(seq, cx)
    }

    #[cold]
    #[inline(never)]
    fn poll_fired_other(&self, seq: u64, cx: &mut Context<'_>) -> bool {
        {
            let mut waker = self.waker.lock().unwrap_or_else(|e| e.into_inner());
            match &*waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *waker = Some(cx.waker().clone()),
            }
        }
        // The waker is registered before `fired` is read here, and the ticker stores `fired`
        // before it reads the wakers (a fence on each side): seen here, or woken.
        fence(Ordering::SeqCst);
        self.fired.load(Ordering::Acquire) == seq
    }

    /// Wakes both the task waker and the last other one (a spurious wake is harmless, and
    /// firing is rare).
    fn fire(&self, seq: u64) {
        self.fired.store(seq, Ordering::Release);
        fence(Ordering::SeqCst);
        if let Some(task) = self.task.get() {
            task.wake_by_ref();
        }
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A call's arming of its process's [`CallTimer`]; disarms when dropped.
///
/// It borrows the timer rather than holding a count of it (two read-modify-writes per timed
/// call): a call borrows it from its reply slot, which keeps the calling process's timer (see
/// `ReplySlot::new_for`) for as long as the call holds the slot.
pub(crate) struct Armed<'a> {
    timer: &'a CallTimer,
    seq: u64,
}

impl Armed<'_> {
    /// Whether the call's deadline passed; if not, the waker is kept to be woken when it
    /// does.
    #[inline]
    pub(crate) fn poll_fired(&self, cx: &mut Context<'_>) -> bool {
        self.timer.poll_fired(self.seq, cx)
    }
}

impl Drop for Armed<'_> {
    #[inline]
    fn drop(&mut self) {
        self.timer.disarm(self.seq);
    }
}

/// `after` in nanoseconds, saturated (about 584 years).
#[inline]
fn nanos_of(after: Duration) -> u64 {
    after
        .as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(after.subsec_nanos()))
}

/// Far enough from overflow that `now + ticks` never wraps.
fn ticks_of_nanos(nanos: u64) -> u64 {
    nanos.div_ceil(TICK.as_nanos() as u64).min(u64::MAX / 4)
}

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

fn lock(m: &Mutex<Vec<Entry>>) -> std::sync::MutexGuard<'_, Vec<Entry>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl DeadlineWheel {
    pub(crate) fn new() -> DeadlineWheel {
        DeadlineWheel {
            shards: std::array::from_fn(|_| Mutex::new(Vec::new())),
            timers: Mutex::new(Vec::new()),
            ticker_running: AtomicBool::new(false),
        }
    }

    /// Expires `target` once `after` has passed.
    pub(crate) fn insert(&self, node: &Arc<NodeInner>, target: Weak<dyn Expire>, after: Duration) {
        let shard = SHARD.with(|s| *s);
        lock(&self.shards[shard]).push(Entry {
            deadline: None,
            ticks: ticks_of_nanos(nanos_of(after)),
            target,
        });
        self.ensure_ticker(node);
    }

    fn register_timer(&self, node: &Arc<NodeInner>, timer: Arc<CallTimer>) {
        self.timers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(TimerEntry {
                timer,
                seen: 0,
                deadline: 0,
                idle: 0,
            });
        self.ensure_ticker(node);
    }

    fn ensure_ticker(&self, node: &Arc<NodeInner>) {
        if !self.ticker_running.load(Ordering::SeqCst)
            && self
                .ticker_running
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            node.handle.spawn(ticker(Arc::downgrade(node)));
        }
    }

    /// One pass: stamps new entries, expires due ones; returns how many remain.
    fn pass(&self, now: u64) -> usize {
        let mut due = Vec::new();
        let mut remaining = 0;
        for shard in &self.shards {
            let mut entries = lock(shard);
            entries.retain_mut(|e| {
                if e.target.strong_count() == 0 {
                    return false;
                }
                let deadline = *e.deadline.get_or_insert(now.saturating_add(e.ticks));
                if deadline <= now {
                    due.push(e.target.clone());
                    false
                } else {
                    true
                }
            });
            remaining += entries.len();
        }
        for target in due {
            if let Some(t) = target.upgrade() {
                t.expire();
            }
        }
        let mut fired = Vec::new();
        {
            let mut timers = self.timers.lock().unwrap_or_else(|e| e.into_inner());
            timers.retain_mut(|e| {
                let armed = e.timer.armed.load(Ordering::Acquire);
                if armed == 0 {
                    e.idle += 1;
                    if e.idle < IDLE_PASSES {
                        return true;
                    }
                    // Unregister, unless a call armed it meanwhile (then keep the entry, or
                    // drop it if that call registered a new one).
                    e.timer.registered.store(false, Ordering::SeqCst);
                    if e.timer.armed.load(Ordering::SeqCst) == 0 {
                        return false;
                    }
                    return e
                        .timer
                        .registered
                        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok();
                }
                e.idle = 0;
                if armed != e.seen {
                    e.seen = armed;
                    e.deadline =
                        now.saturating_add(ticks_of_nanos(e.timer.after.load(Ordering::Relaxed)));
                } else if e.deadline <= now && e.timer.fired.load(Ordering::Relaxed) != armed {
                    fired.push((Arc::clone(&e.timer), armed));
                }
                true
            });
            remaining += timers.len();
        }
        for (timer, seq) in fired {
            timer.fire(seq);
        }
        remaining
    }

    fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| lock(s).is_empty())
            && self
                .timers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
    }
}

async fn ticker(node: Weak<NodeInner>) {
    let origin = tokio::time::Instant::now();
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(node) = node.upgrade() else { return };
        let wheel = &node.timers;
        let now = (origin.elapsed().as_nanos() / TICK.as_nanos()) as u64;
        if wheel.pass(now) == 0 {
            wheel.ticker_running.store(false, Ordering::SeqCst);
            // An insert may have seen the flag still set just before we cleared it.
            if wheel.is_empty()
                || wheel
                    .ticker_running
                    .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
            {
                return;
            }
        }
    }
}
