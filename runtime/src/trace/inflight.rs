//! Measured polls in flight, so that a reader can wait for the figures of polls that were
//! running when it asked.
//!
//! A measured poll's call_time and call_memory figures reach its process's table when the
//! poll ends. A reader that learns something happened (a reply arrived, a process exited) may
//! ask before the poll that did it has ended: a server's poll sends the reply, the client runs
//! on the other worker, ends, and the profiler collects while the server's poll is still
//! finishing. [`settle`] closes that gap: it waits until every poll measured by a session that
//! was running when it was called has ended and flushed.
//!
//! Each thread that runs measured polls owns a [`PollMark`]: a sequence number, odd while a
//! measured poll runs, and the sessions measuring it. Only its thread writes it, with plain
//! stores (no read-modify-write), so a poll pays two stores at each end. Marks are never freed:
//! a thread that ends leaves its mark even (idle), and a new thread takes a mark whose thread
//! has ended before it makes one.
//!
//! # Pausing: a cut between the polls kept and the polls dropped
//!
//! `pause` (and `restart`) must keep what was gathered before it returns and let nothing in
//! after. A poll's figures reach its process's table only when it ends, so a poll running when
//! `pause` is called ends after it began. [`keep_running`] marks every measured poll running
//! now (that `pause` can see) as *kept* for the pausing sessions — (its sequence number, the
//! sessions) in its mark's `kept` — before the sessions are marked paused; `pause` then waits
//! for those polls to end ([`wait`]). A flush that finds its session paused keeps its figures
//! only if its own poll is kept ([`kept`]): the polls `pause` waited for. A poll `pause` could
//! not see began after it looked, and gathered nothing from before it; one that outlives the
//! wait ([`TraceSession::SETTLE_LIMIT`](super::TraceSession::SETTLE_LIMIT): a process computing
//! without yielding) is let go ([`let_go`]) and loses what it gathers, so that once `pause`
//! returns nothing more lands. No cost on a poll's path: only a flush that finds its session
//! paused reads `kept`.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::heap::Tally;
use std::time::{Duration, Instant};

/// One thread's measured poll: whether one runs, and for which sessions.
pub(super) struct PollMark {
    /// Odd while a measured poll runs on the owning thread.
    seq: AtomicU64,
    /// The sessions measuring the running poll (0 between polls).
    sessions: AtomicU64,
    /// Whether a live thread owns this mark.
    owned: AtomicBool,
    /// The poll (its `seq`) whose figures the sessions here keep although they are paused:
    /// it was running when they paused (see the module documentation).
    kept: Mutex<(u64, u64)>,
    /// What the owning thread allocates in a measured poll that is not a process's own (a
    /// helper task's, or traced calls outside any process).
    tally: Tally,
    /// Where such a poll records the function it is in: read by no one (the process's own
    /// record is its own poll's).
    sink: AtomicU32,
}

impl PollMark {
    /// The tally of its thread's measured polls that are not a process's own.
    pub(super) fn tally(&'static self) -> &'static Tally {
        &self.tally
    }

    /// Where its thread's measured polls that are not a process's own record their current
    /// function.
    pub(super) fn sink(&'static self) -> &'static AtomicU32 {
        &self.sink
    }
}

/// This thread's mark, taken or made on first use; `None` while the thread's destructors run.
pub(super) fn this_thread() -> Option<&'static PollMark> {
    mark()
}

/// Every mark ever made (marks of ended threads are reused).
static MARKS: Mutex<Vec<&'static PollMark>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's mark, once it has run a measured poll.
    static MARK: Cell<Option<&'static PollMark>> = const { Cell::new(None) };
    /// Gives the mark back when the thread ends.
    static RELEASE: Release = const { Release };
}

/// Gives this thread's mark back for another thread to take, when the thread ends.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        if let Ok(Some(mark)) = MARK.try_with(|m| m.take()) {
            // A poll cannot be running while the thread's destructors run; leave it idle.
            let seq = mark.seq.load(Ordering::Relaxed);
            mark.sessions.store(0, Ordering::Relaxed);
            mark.seq.store((seq + 1) & !1, Ordering::Release);
            mark.owned.store(false, Ordering::Release);
        }
    }
}

/// This thread's mark, taken or made on first use.
#[inline]
fn mark() -> Option<&'static PollMark> {
    MARK.try_with(|m| match m.get() {
        Some(mark) => Some(mark),
        None => {
            let mark = take_mark()?;
            m.set(Some(mark));
            Some(mark)
        }
    })
    .ok()
    .flatten()
}

#[cold]
fn take_mark() -> Option<&'static PollMark> {
    // Without a destructor to give it back (this thread's are running), take none.
    RELEASE.try_with(|_| ()).ok()?;
    crate::heap::suppressed(|| {
        let mut marks = MARKS.lock().unwrap_or_else(|e| e.into_inner());
        let free = marks.iter().find(|m| {
            m.owned
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        });
        Some(match free {
            Some(mark) => *mark,
            None => {
                let mark: &'static PollMark = Box::leak(Box::new(PollMark {
                    seq: AtomicU64::new(0),
                    sessions: AtomicU64::new(0),
                    owned: AtomicBool::new(true),
                    kept: Mutex::new((0, 0)),
                    tally: Tally::new(),
                    sink: AtomicU32::new(u32::MAX),
                }));
                marks.push(mark);
                mark
            }
        })
    })
}

/// A measured poll for `sessions` begins on this thread.
#[inline]
pub(super) fn begin(sessions: u64) {
    if let Some(mark) = mark() {
        let seq = mark.seq.load(Ordering::Relaxed);
        mark.sessions.store(sessions, Ordering::Relaxed);
        // Whatever later tells a reader that this poll ran (a message it sent, say) is ordered
        // after these stores by the same thread, so a reader that has heard of it sees them.
        if seq & 1 == 0 {
            // Release: a waiter that reads this number, not the previous poll's end's, sees
            // what that poll flushed too (a plain store by the same thread does not carry the
            // end's release on to a reader of it).
            mark.seq.store(seq + 1, Ordering::Release);
        }
    }
}

/// The measured poll on this thread has ended and its figures are in its process's table.
#[inline]
pub(super) fn end() {
    if let Some(mark) = MARK.try_with(Cell::get).ok().flatten() {
        let seq = mark.seq.load(Ordering::Relaxed);
        // Release: a reader that finds no session here (`running`, which then leaves the mark
        // out) sees what the poll flushed before.
        mark.sessions.store(0, Ordering::Release);
        if seq & 1 == 1 {
            // Release: a reader that sees the poll ended sees what it flushed.
            mark.seq.store(seq + 1, Ordering::Release);
        }
    }
}

/// Polls measured by some sessions, running on other threads: each one's mark and sequence
/// number.
pub(super) type Running = Vec<(&'static PollMark, u64)>;

/// The polls measured by a session in `sessions` running on another thread now.
fn running(sessions: u64) -> Running {
    let own = MARK.try_with(Cell::get).ok().flatten();
    crate::heap::suppressed(|| {
        let marks = MARKS.lock().unwrap_or_else(|e| e.into_inner());
        marks
            .iter()
            .filter(|m| own.is_none_or(|own| !std::ptr::eq(own, **m)))
            .filter(|m| m.sessions.load(Ordering::Acquire) & sessions != 0)
            .map(|m| (*m, m.seq.load(Ordering::Acquire)))
            .filter(|(_, seq)| seq & 1 == 1)
            .collect()
    })
}

fn lock_kept(mark: &PollMark) -> std::sync::MutexGuard<'_, (u64, u64)> {
    mark.kept.lock().unwrap_or_else(|e| e.into_inner())
}

/// Marks every poll measured by a session in `sessions` that runs on another thread now as
/// kept for those sessions, and returns them: their figures reach the sessions even if they
/// end after the sessions are paused (see the module documentation).
pub(super) fn keep_running(sessions: u64) -> Running {
    let polls = running(sessions);
    for &(mark, seq) in &polls {
        let mut kept = lock_kept(mark);
        if kept.0 != seq {
            *kept = (seq, 0);
        }
        kept.1 |= sessions;
    }
    polls
}

/// Lets go of polls [`keep_running`] kept for `sessions`: what they gather from now on is
/// dropped if the sessions are paused.
pub(super) fn let_go(polls: &Running, sessions: u64) {
    for &(mark, seq) in polls {
        let mut kept = lock_kept(mark);
        if kept.0 == seq {
            kept.1 &= !sessions;
        }
    }
}

/// The paused sessions that keep the figures of the poll running on this thread (see
/// [`keep_running`]); 0 outside a measured poll.
#[cold]
pub(super) fn kept() -> u64 {
    let Some(mark) = MARK.try_with(Cell::get).ok().flatten() else {
        return 0;
    };
    let seq = mark.seq.load(Ordering::Relaxed);
    let kept = lock_kept(mark);
    if seq & 1 == 1 && kept.0 == seq {
        kept.1
    } else {
        0
    }
}

/// Waits until every poll measured by a session in `sessions` that was running on another
/// thread when this was called has ended, for at most `limit`. Returns how many were still
/// running when it gave up (0 when all ended). A poll running on the calling thread is not
/// waited for: it cannot end while its thread waits.
pub(crate) fn settle(sessions: u64, limit: Duration) -> usize {
    wait(running(sessions), limit).len()
}

/// Waits until each of `pending` has ended, for at most `limit`; returns those still running
/// when it gave up.
pub(super) fn wait(mut pending: Running, limit: Duration) -> Running {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        pending.retain(|(m, seq)| m.seq.load(Ordering::Acquire) == *seq);
        if pending.is_empty() || start.elapsed() >= limit {
            return pending;
        }
        backoff(&mut spins);
    }
}

/// Lets time pass before a wait for polls to end looks again (its `spins`-th time).
pub(super) fn backoff(spins: &mut u32) {
    // A poll usually ends within microseconds; one whose thread the OS has set aside takes a
    // time slice or more.
    *spins += 1;
    if *spins < 64 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::mpsc;

    #[test]
    fn settle_waits_for_a_poll_running_on_another_thread_and_only_for_its_sessions() {
        let (started_tx, started_rx) = mpsc::channel();
        let (finish_tx, finish_rx) = mpsc::channel::<()>();
        let ended = Arc::new(AtomicBool::new(false));
        let ended2 = Arc::clone(&ended);
        // Session bits 62 and 63: other tests' polls never use them.
        let worker = std::thread::Builder::new()
            .name("poll".into())
            .spawn(move || {
                begin(1 << 62);
                started_tx.send(()).unwrap();
                finish_rx.recv().unwrap();
                ended2.store(true, Ordering::SeqCst);
                end();
            })
            .unwrap();
        started_rx.recv().unwrap();
        // Not measured by session 63: nothing to wait for.
        assert_eq!(settle(1 << 63, Duration::from_secs(30)), 0);
        // Measured by 62 and still running: gives up after the limit.
        assert_eq!(settle(1 << 62, Duration::from_millis(1)), 1);
        let waiter = std::thread::Builder::new()
            .name("waiter".into())
            .spawn(move || settle(1 << 62, Duration::from_secs(60)))
            .unwrap();
        // Usually the waiter is waiting by now; whenever it started, it must not return
        // before the poll ended (checked through `ended`).
        std::thread::sleep(Duration::from_millis(20));
        finish_tx.send(()).unwrap();
        assert_eq!(waiter.join().unwrap(), 0);
        assert!(ended.load(Ordering::SeqCst));
        worker.join().unwrap();
        // The ended thread's mark is idle (and free for the next thread).
        assert_eq!(settle(1 << 62, Duration::from_secs(30)), 0);
    }

    /// A poll running when sessions pause is kept for them until let go; the thread's next
    /// poll is not.
    #[test]
    fn keep_running_keeps_the_polls_running_now_until_let_go() {
        let (step_tx, step_rx) = mpsc::channel::<()>();
        let (seen_tx, seen_rx) = mpsc::channel();
        // Session bits 59 and 60: other tests' polls never use them.
        let worker = std::thread::Builder::new()
            .name("kept".into())
            .spawn(move || {
                begin(1 << 60);
                for _ in 0..3 {
                    seen_tx.send(kept()).unwrap();
                    step_rx.recv().unwrap();
                }
                seen_tx.send(kept()).unwrap();
                end();
                begin(1 << 60);
                seen_tx.send(kept()).unwrap();
                end();
            })
            .unwrap();
        assert_eq!(seen_rx.recv().unwrap(), 0);
        assert_eq!(keep_running(1 << 59).len(), 0);
        let running = keep_running(1 << 60);
        assert_eq!(running.len(), 1);
        step_tx.send(()).unwrap();
        assert_eq!(seen_rx.recv().unwrap(), 1 << 60);
        let_go(&running, 1 << 60);
        step_tx.send(()).unwrap();
        assert_eq!(seen_rx.recv().unwrap(), 0);
        assert_eq!(keep_running(1 << 60).len(), 1);
        step_tx.send(()).unwrap();
        assert_eq!(seen_rx.recv().unwrap(), 1 << 60);
        assert_eq!(seen_rx.recv().unwrap(), 0, "the next poll is not kept");
        worker.join().unwrap();
    }

    #[test]
    fn a_poll_on_the_calling_thread_is_not_waited_for() {
        begin(1 << 61);
        assert_eq!(settle(1 << 61, Duration::from_secs(30)), 0);
        end();
    }
}
