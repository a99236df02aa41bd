//! A coarse per-node deadline wheel for call timeouts.
//!
//! A tokio timer per call makes a request/reply round trip 1.6–3.7× slower (measured on this
//! project's 2-core machines), so calls register their deadline here instead: one push under a
//! per-thread shard lock, no clock read. One ticker task per node, running only while
//! deadlines are pending, wakes every [`TICK`], stamps the deadlines registered since its last
//! pass (so a deadline counts from no earlier than its registration: it may fire up to about
//! two ticks late, never early), and expires the due ones. A finished call's entry is only a
//! dead `Weak`, dropped on the next pass.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::node::NodeInner;

/// The wheel's resolution.
pub(crate) const TICK: Duration = Duration::from_millis(2);
const SHARDS: usize = 8;

/// Something a deadline can expire (a pending call's reply slot).
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
    ticker_running: AtomicBool,
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
            ticker_running: AtomicBool::new(false),
        }
    }

    /// Expires `target` once `after` has passed.
    pub(crate) fn insert(&self, node: &Arc<NodeInner>, target: Weak<dyn Expire>, after: Duration) {
        let ticks = after.as_nanos().div_ceil(TICK.as_nanos()) as u64;
        let shard = SHARD.with(|s| *s);
        lock(&self.shards[shard]).push(Entry {
            deadline: None,
            ticks,
            target,
        });
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
                let deadline = *e.deadline.get_or_insert(now + e.ticks);
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
        remaining
    }

    fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| lock(s).is_empty())
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
