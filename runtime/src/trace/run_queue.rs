//! The OS's run queue: how long the program's threads waited to run while they were ready to,
//! over a call_time session.
//!
//! call_time measures a call's time on the wall clock while its process is polled: when the OS
//! takes a worker thread away mid-poll (another program, or more runnable threads than cores),
//! the call's time includes the wait. Reading the thread's CPU clock at each transition would
//! leave it out, but that clock is a system call (hundreds of nanoseconds: several times the
//! traced call's own cost). So the session says instead how much of it there was: Linux counts,
//! per thread, the nanoseconds it ran and those it spent runnable on a run queue without running
//! (`/proc/<pid>/task/<tid>/schedstat`, its first two fields); the session reads every thread of
//! the program as it opens and as its snapshot is taken, and the snapshot carries the
//! difference ([`SnapshotRunQueue`]), which tprof's call_time report prints when it is large.
//!
//! A thread that started during the session counts from its start; one that exited during it
//! is counted as exited, its time since the first reading being lost (the kernel forgets it).
//! Elsewhere than on Linux, with no `/proc`, or under Miri, there is no reading.

use serde::{Deserialize, Serialize};

/// How long the program's threads ran and waited on the OS's run queue over a session: what
/// [`Snapshot::run_queue`](crate::trace::Snapshot::run_queue) holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRunQueue {
    /// Nanoseconds the threads ran, every thread together.
    pub ran_ns: u64,
    /// Nanoseconds the threads were runnable but waited for a CPU, every thread together.
    pub waited_ns: u64,
    /// The threads counted: alive at both readings, or started between them.
    pub threads: u32,
    /// Threads alive at the first reading and gone at the second: their time between the two
    /// is in neither figure.
    pub exited: u32,
}

impl SnapshotRunQueue {
    /// The share of the time the threads were ready to run that they spent waiting, from 0
    /// to 1 (0 when they were never ready).
    pub fn waited_share(&self) -> f64 {
        let ready = self.ran_ns.saturating_add(self.waited_ns);
        if ready == 0 {
            0.0
        } else {
            self.waited_ns as f64 / ready as f64
        }
    }
}

/// One reading of every thread of the program: `(tid, ran_ns, waited_ns)`, by tid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    threads: Vec<(i32, u64, u64)>,
}

impl Reading {
    /// Reads every thread of the program; `None` where the OS gives no such figures. What
    /// the reading allocates is the profiler's own work, charged to no process.
    pub(crate) fn now() -> Option<Reading> {
        if cfg!(miri) || !cfg!(target_os = "linux") {
            return None;
        }
        crate::heap::suppressed(Self::read)
    }

    /// [`now`](Self::now), past its checks.
    fn read() -> Option<Reading> {
        let mut threads = Vec::new();
        for entry in std::fs::read_dir("/proc/self/task").ok()? {
            let Ok(entry) = entry else { continue };
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            // A thread that exits between the listing and the read has no figures: left out,
            // as if it had exited before the listing.
            let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
                continue;
            };
            if let Some((ran, waited)) = parse_schedstat(&text) {
                threads.push((tid, ran, waited));
            }
        }
        if threads.is_empty() {
            // No thread had figures: the kernel keeps none (no `CONFIG_SCHED_INFO`).
            return None;
        }
        threads.sort_unstable_by_key(|t| t.0);
        Some(Reading { threads })
    }

    /// What the threads ran and waited between `earlier` and this reading. A thread whose
    /// figures went down since is a new thread that took an old one's id: counted from its
    /// start, and the old one as exited.
    pub(crate) fn since(&self, earlier: &Reading) -> SnapshotRunQueue {
        let mut out = SnapshotRunQueue::default();
        let mut old = earlier.threads.iter().peekable();
        for &(tid, ran, waited) in &self.threads {
            while old.next_if(|o| o.0 < tid).is_some() {
                out.exited += 1;
            }
            let (ran, waited) = match old.next_if(|o| o.0 == tid) {
                Some(&(_, r0, w0)) if r0 <= ran && w0 <= waited => (ran - r0, waited - w0),
                Some(_) => {
                    out.exited += 1;
                    (ran, waited)
                }
                None => (ran, waited),
            };
            out.ran_ns = out.ran_ns.saturating_add(ran);
            out.waited_ns = out.waited_ns.saturating_add(waited);
            out.threads += 1;
        }
        out.exited += old.count() as u32;
        out
    }
}

/// The nanoseconds run and waited in a `schedstat` file's text (`ran waited timeslices`).
fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_ascii_whitespace();
    let ran = fields.next()?.parse().ok()?;
    let waited = fields.next()?.parse().ok()?;
    Some((ran, waited))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(threads: &[(i32, u64, u64)]) -> Reading {
        Reading {
            threads: threads.to_vec(),
        }
    }

    #[test]
    fn a_schedstat_line_gives_the_time_run_and_waited() {
        assert_eq!(
            parse_schedstat("162036325 180185731 328\n"),
            Some((162_036_325, 180_185_731))
        );
        assert_eq!(parse_schedstat("12 x 3"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn threads_count_from_the_first_reading_or_their_start() {
        let first = reading(&[(10, 100, 50), (11, 1_000, 0), (12, 7, 7)]);
        // 10 ran 20 and waited 30 more; 11 exited; 12 is a new thread that took an old id
        // (its figures went down); 13 started.
        let second = reading(&[(10, 120, 80), (12, 5, 1), (13, 40, 60)]);
        assert_eq!(
            second.since(&first),
            SnapshotRunQueue {
                ran_ns: 20 + 5 + 40,
                waited_ns: 30 + 1 + 60,
                threads: 3,
                exited: 2,
            }
        );
        let share = second.since(&first).waited_share();
        assert!((share - 91.0 / 156.0).abs() < 1e-12, "{share}");
        assert_eq!(SnapshotRunQueue::default().waited_share(), 0.0);
    }

    #[test]
    fn the_programs_threads_are_read_and_a_busy_one_has_run() {
        if cfg!(miri) {
            return;
        }
        let Some(first) = Reading::now() else {
            // No figures on this kernel: nothing to check.
            return;
        };
        let me = current_tid();
        assert!(
            first.threads.iter().any(|t| t.0 == me),
            "{first:?} lacks {me}"
        );
        // Burn some CPU on this thread: at least the time burned is counted as run.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let second = Reading::now().expect("read once, read again");
        let figures = second.since(&first);
        assert!(figures.threads >= 1);
        // The 30 ms were spent running or waiting to run (on a loaded machine, mostly the
        // latter); the kernel's figures are in nanoseconds.
        assert!(
            figures.ran_ns + figures.waited_ns >= 25_000_000,
            "{figures:?}"
        );
    }

    /// The calling thread's id, from `/proc/thread-self`.
    fn current_tid() -> i32 {
        std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse().ok())
            .expect("/proc/thread-self names the thread")
    }
}
