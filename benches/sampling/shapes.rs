//! The six workload shapes of issue #29, each run for a while on a 2-worker node: what users
//! run, not only what a sampler serves best.
//!
//! - `spin`: four processes, each 1 ms of CPU then a yield;
//! - `burst`: four processes, each 1 ms of CPU then a tokio sleep of 0.5–2 ms;
//! - `pingpong`: two pairs of processes passing a message back and forth, ~2 µs of work each;
//! - `blocking`: four processes, each awaiting a 2 ms spin in `spawn_blocking`;
//! - `mix`: four processes calling traced `shape_a` and `shape_b` at a true 3:1 (A three times
//!   as often, burst lengths drawn at random), each call then a yield;
//! - `mixburst`: the same, each call then a sleep of 0.5–2 ms.
//!
//! Each shape counts its units of work, and the mixes the true CPU time of every call of A and
//! of B (the calling thread's CPU clock around it). Every thread that does the work notes its
//! `pthread_t` and kernel thread id once, so that pprof-rs's samples (which name the
//! `pthread_t`) can be matched with the threads' CPU time.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use runtime::{Node, receive, self_pid, send, spawn};

/// The shapes, by name.
pub(crate) const SHAPES: [&str; 6] = ["spin", "burst", "pingpong", "blocking", "mix", "mixburst"];

/// What a run of a shape did.
#[derive(Default)]
pub(crate) struct Work {
    /// Units of work done (chunks, round trips, blocking calls, calls of A or B).
    pub(crate) units: u64,
    /// The true CPU time of the calls of A and of B, in nanoseconds (the mixes).
    pub(crate) a_ns: u64,
    pub(crate) b_ns: u64,
}

/// The threads that did the work: `pthread_t` to kernel thread id.
pub(crate) static THREADS: Mutex<Vec<(u64, i32)>> = Mutex::new(Vec::new());

thread_local! {
    static NOTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Notes the calling thread (once).
fn note_thread() {
    if !NOTED.with(|n| n.replace(true)) {
        // SAFETY: `pthread_self` and `gettid` have no preconditions.
        #[allow(unsafe_code)]
        let ids = unsafe { (libc::pthread_self() as u64, libc::gettid()) };
        THREADS.lock().expect("threads").push(ids);
    }
}

/// The calling thread's CPU clock, in nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes `ts`, a plain struct on the stack.
    #[allow(unsafe_code)]
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts)
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Spins until the calling thread has used `ns` of CPU. The thread's CPU clock is a system
/// call: it is read every few microseconds of work only, so that the spin runs in user space
/// as a computation does (a sampler that skips samples in the kernel, and pprof-rs, which drops
/// those in libc, would otherwise see a shape no program has).
#[inline(never)]
fn spin_ns(ns: u64) -> u64 {
    let start = thread_cpu_ns();
    let mut x = black_box(ns);
    while thread_cpu_ns() - start < ns {
        for i in 0..4_000u64 {
            x = x.rotate_left(5) ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    black_box(x)
}

#[runtime::traced]
#[inline(never)]
fn shape_a(ns: u64) -> u64 {
    spin_ns(ns)
}

#[runtime::traced]
#[inline(never)]
fn shape_b(ns: u64) -> u64 {
    spin_ns(ns)
}

/// A small generator per process.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `[lo, hi)`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// Runs `shape` on `node` for `run` of wall time; what it did.
pub(crate) fn run(node: &Node, shape: &str, run: Duration) -> Work {
    let stop = Arc::new(AtomicBool::new(false));
    let units = Arc::new(AtomicU64::new(0));
    let a_ns = Arc::new(AtomicU64::new(0));
    let b_ns = Arc::new(AtomicU64::new(0));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let processes = |n: u64, body: &dyn Fn(u64) -> runtime::Pid| (0..n).map(body).count();
    let spawned = match shape {
        "spin" | "burst" | "blocking" | "mix" | "mixburst" => processes(4, &|seed| {
            let (stop, units, a_ns, b_ns, done) = (
                Arc::clone(&stop),
                Arc::clone(&units),
                Arc::clone(&a_ns),
                Arc::clone(&b_ns),
                done_tx.clone(),
            );
            let shape = shape.to_owned();
            node.spawn(async move {
                let mut rng = Rng(0x1234_5678 + seed * 7919);
                while !stop.load(Ordering::Relaxed) {
                    note_thread();
                    match shape.as_str() {
                        "spin" => {
                            spin_ns(1_000_000);
                            tokio::task::yield_now().await;
                        }
                        "burst" => {
                            spin_ns(1_000_000);
                            let sleep = rng.range(500, 2_000);
                            tokio::time::sleep(Duration::from_micros(sleep)).await;
                        }
                        "blocking" => {
                            let helper = runtime::spawn_blocking(|| {
                                note_thread();
                                spin_ns(2_000_000)
                            })
                            .expect("spawn_blocking");
                            black_box(helper.await.expect("joined"));
                        }
                        _ => {
                            let len = rng.range(200_000, 2_000_000);
                            let is_a = !rng.next().is_multiple_of(4);
                            let before = thread_cpu_ns();
                            if is_a {
                                shape_a(len);
                            } else {
                                shape_b(len);
                            }
                            let used = thread_cpu_ns() - before;
                            if is_a { &a_ns } else { &b_ns }.fetch_add(used, Ordering::Relaxed);
                            if shape == "mix" {
                                tokio::task::yield_now().await;
                            } else {
                                let sleep = rng.range(500, 2_000);
                                tokio::time::sleep(Duration::from_micros(sleep)).await;
                            }
                        }
                    }
                    units.fetch_add(1, Ordering::Relaxed);
                }
                let _ = done.send(());
            })
            .expect("spawn")
        }),
        "pingpong" => {
            for _ in 0..2 {
                let (stop, units, done) = (Arc::clone(&stop), Arc::clone(&units), done_tx.clone());
                node.spawn(async move {
                    let me = self_pid();
                    let echo = spawn(async move {
                        loop {
                            let (from, n): (runtime::Pid, u64) = receive().await;
                            note_thread();
                            spin_ns(2_000);
                            if n == 0 {
                                break;
                            }
                            send(from, n);
                        }
                    })
                    .expect("spawn");
                    let mut n = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        note_thread();
                        spin_ns(2_000);
                        send(echo, (me, n));
                        let _: u64 = receive().await;
                        units.fetch_add(1, Ordering::Relaxed);
                        n += 1;
                    }
                    send(echo, (me, 0u64));
                    let _ = done.send(());
                })
                .expect("spawn");
            }
            2
        }
        other => panic!("no shape {other}"),
    };
    drop(done_tx);
    let started = Instant::now();
    std::thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    for _ in 0..spawned {
        done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a process of the shape ended");
    }
    let _ = started;
    Work {
        units: units.load(Ordering::Relaxed),
        a_ns: a_ns.load(Ordering::Relaxed),
        b_ns: b_ns.load(Ordering::Relaxed),
    }
}

/// Every thread of this process's CPU time now, by kernel thread id, in nanoseconds (the
/// scheduler's own count, `/proc/self/task/*/schedstat`).
pub(crate) fn threads_cpu() -> HashMap<i32, u64> {
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let Some(tid) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(path.join("schedstat"))
            && let Some(ns) = stat.split_whitespace().next().and_then(|n| n.parse().ok())
        {
            out.insert(tid, ns);
        }
    }
    out
}
