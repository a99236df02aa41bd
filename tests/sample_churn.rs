//! A sample session stays bounded while processes come and go (issue 29, point 5): 100,000
//! short processes, each making traced calls (some spinning long enough to be sampled, most
//! not), pass through a CPU, wall or allocation session, and the heap in use afterwards is
//! within a bound per sample kept (none is alive then), not per process ever seen. Takes about
//! 15 to 25 seconds in a debug build on two busy cores.
//!
//! The heap in use is counted by this binary's allocator: the counting allocator over one that
//! adds up the bytes it holds, process-wide. Counts, never timing.
#![cfg(target_os = "linux")]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use runtime::sample::{SampleOptions, SampleSession, Sampler};
use runtime::trace::TracePattern;
use runtime::{Node, NodeHandle};

/// The system allocator, adding up the bytes it holds.
struct InUse;

static IN_USE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` with the caller's arguments; the count is an
// atomic that neither allocates nor has a destructor.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for InUse {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            IN_USE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            IN_USE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as given.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as given.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            IN_USE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOC: runtime::CountingAlloc<InUse> = runtime::CountingAlloc::new(InUse);

/// The bytes the program holds now.
fn in_use() -> isize {
    IN_USE.load(Ordering::Relaxed)
}

/// One sample session at a time in this binary: the heap in use is the whole program's, and
/// the CPU sampler has one rate per program.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Processes that pass through the session.
const PROCESSES: u64 = 100_000;
/// Processes spawned before the first is waited for.
const BATCH: u64 = 1_000;
/// The sample buffer's size: the samples kept are bounded by it, whatever the churn.
const BUFFER: usize = 1_000;

/// Spins for `n` rounds (untraced: inside a traced call, it is its time).
#[inline(never)]
fn spin(n: u64) -> u64 {
    let mut x = std::hint::black_box(n);
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// A request's work: one in a hundred spins long enough to be sampled now and then.
#[runtime::traced]
fn work(i: u64) -> u64 {
    if i.is_multiple_of(100) {
        spin(20_000)
    } else {
        i.wrapping_mul(3)
    }
}

/// A request: a process of its own, making two traced calls.
#[runtime::traced]
async fn request(i: u64) -> u64 {
    work(i).wrapping_add(work(i + 1))
}

/// Runs `count` requests from `first`, `BATCH` at a time, each batch waited for.
fn churn(node: &Node, first: u64, count: u64) {
    let handle: &NodeHandle = node.handle();
    let mut i = first;
    while i < first + count {
        let end = (i + BATCH).min(first + count);
        for j in i..end {
            handle
                .spawn(async move {
                    std::hint::black_box(request(j).await);
                })
                .expect("spawn");
        }
        while !handle.processes().is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        i = end;
    }
}

/// The heap in use once `session` is read as a profiler reads it (its samples drained, its
/// calls read; symbolizing the native stacks is left out: `backtrace` caches what it parses of
/// the binary's debug information, which grows with the code sampled, not with the processes),
/// and the samples it keeps.
fn read(session: &SampleSession) -> (isize, usize) {
    let samples = session.samples().samples.len();
    drop(session.trace().snapshot());
    (in_use(), samples)
}

/// Runs a warm-up through `session` (threads, rings and tables made once), measures, runs
/// [`PROCESSES`] requests, and measures again: asserts that the heap in use grew by a bound
/// per sample kept, not per process, that the session's calls are every call made, and that
/// it lists a bounded number of processes.
fn churn_through(what: &str, node: &Node, session: &SampleSession) {
    common::trace_new_processes(session.trace(), &TracePattern::module(module_path!()));
    const WARM_UP: u64 = 2_000;
    churn(node, 0, WARM_UP);
    let (before, _) = read(session);
    churn(node, WARM_UP, PROCESSES);
    let (after, samples) = read(session);
    assert_bounded(what, before, after, samples);

    // The calls of the processes that ended and were folded are in the call counts, the rest
    // in the processes' rows: every call made, once.
    let snapshot = session.trace().snapshot();
    let calls = |name: &str| common::snapshot_calls(&snapshot, name);
    let requests = WARM_UP + PROCESSES;
    assert_eq!(calls("request"), requests, "calls of request");
    assert_eq!(calls("work"), 2 * requests, "calls of work");
    // A row per process sampled, and per table not folded yet (about twice the live ones at
    // the last fold, and at least 1,024 before the first): none is alive now.
    let sampled: std::collections::HashSet<_> = session
        .samples()
        .samples
        .iter()
        .filter_map(|s| s.pid)
        .collect();
    assert!(
        snapshot.processes.len() <= sampled.len() + 4_096,
        "{} processes listed after {requests} came and went, {} of them sampled",
        snapshot.processes.len(),
        sampled.len()
    );
}

/// Asserts that the heap in use grew from `before` to `after` by at most `FIXED` bytes plus
/// `PER_SAMPLE` per sample kept (`samples`).
fn assert_bounded(what: &str, before: isize, after: isize, samples: usize) {
    /// What a session may keep whatever the churn: its aggregates and slack.
    const FIXED: isize = 3 << 20;
    /// What a sample kept may cost (its stacks, its process's name and initial call).
    const PER_SAMPLE: isize = 2 << 10;
    let grew = after - before;
    let bound = FIXED + PER_SAMPLE * samples as isize;
    eprintln!(
        "{what}: {PROCESSES} processes, {} samples kept: heap in use {} -> {} bytes ({:+} bytes, \
         {:.1} bytes per process; bound {bound})",
        samples,
        before,
        after,
        grew,
        grew as f64 / PROCESSES as f64
    );
    assert!(
        grew <= bound,
        "{what}: {PROCESSES} processes through the session left {grew} bytes more in use \
         ({:.0} per process; {} samples kept): over the bound of {bound}",
        grew as f64 / PROCESSES as f64,
        samples
    );
}

/// At the highest rate (the most samples). What a session keeps per process does not depend
/// on the rate: at 1,000 Hz as at 10,000 Hz, 760 bytes stayed per process before the fold.
#[test]
fn a_cpu_session_at_10000_hz_holds_its_memory_flat_through_100_000_processes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(SampleOptions::new().hz(10_000).n(BUFFER))
        .expect("cpu session");
    churn_through("cpu at 10000 Hz", &node, &session);
}

#[test]
fn a_wall_session_holds_its_memory_flat_through_100_000_processes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(
            SampleOptions::new()
                .sampler(Sampler::Wall)
                .hz(1_000)
                .n(BUFFER),
        )
        .expect("wall session");
    churn_through("wall at 1000 Hz", &node, &session);
}

#[test]
fn an_alloc_session_holds_its_memory_flat_through_100_000_processes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(SampleOptions::new().sampler(Sampler::Alloc).n(BUFFER))
        .expect("alloc session");
    churn_through("alloc", &node, &session);
}

/// A request that waits for a message, under a registered name.
#[runtime::traced]
async fn named_request() -> u64 {
    runtime::register("churn-named", runtime::self_pid()).expect("register");
    runtime::receive::<u64>().await
}

/// Runs batches of requests through `session` until `done` holds of its trace snapshot, for a
/// bounded number of them.
fn churn_until(
    node: &Node,
    session: &SampleSession,
    what: &str,
    done: impl Fn(&runtime::trace::Snapshot) -> bool,
) -> runtime::trace::Snapshot {
    const ROUNDS: u64 = 20;
    for round in 0..ROUNDS {
        let snapshot = session.trace().snapshot();
        if done(&snapshot) {
            return snapshot;
        }
        churn(node, round * BATCH, BATCH);
    }
    panic!("{what}: not after {} requests", ROUNDS * BATCH);
}

/// An ended process is folded: its calls join the session's sum; its row stays, naming it with
/// no figures, while the buffer holds samples of it, and goes once they are cleared.
#[test]
fn an_ended_process_keeps_its_name_while_the_buffer_holds_its_samples() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(
            SampleOptions::new()
                .sampler(Sampler::Wall)
                .hz(1_000)
                .n(100_000),
        )
        .expect("wall session");
    common::trace_new_processes(session.trace(), &TracePattern::module(module_path!()));
    let named = node
        .spawn(async {
            named_request().await;
        })
        .expect("spawn");
    // Sampled while it waits, then ended.
    while !session
        .samples()
        .samples
        .iter()
        .any(|s| s.pid == Some(named))
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    node.send(named, 1u64);
    while !node.handle().processes().is_empty() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let pid = named.to_string();
    let row = |s: &runtime::trace::Snapshot| s.processes.iter().find(|p| p.pid == pid).cloned();
    let named_calls = |s: &runtime::trace::Snapshot| -> u64 {
        let id = s
            .functions
            .iter()
            .position(|f| f.name == "named_request")
            .map(|i| i as u32);
        s.call_counts
            .iter()
            .filter(|c| Some(c.0) == id)
            .map(|c| c.1)
            .sum()
    };
    // Folded once enough processes have come and gone: its call in the session's sum, its
    // row without figures.
    let snapshot = churn_until(&node, &session, "folded", |s| named_calls(s) == 1);
    let row = row(&snapshot).expect("the row of a folded process with samples");
    assert_eq!(row.registered_name.as_deref(), Some("churn-named"));
    assert!(row.functions.is_empty(), "{row:?}");
    // Its samples cleared, its row goes at a later fold; its call stays in the sum.
    session.clear();
    let snapshot = churn_until(&node, &session, "row gone", |s| {
        s.processes.iter().all(|p| p.pid != pid)
    });
    assert_eq!(named_calls(&snapshot), 1);
}
