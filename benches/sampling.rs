//! Sample mode's costs and fidelity (issue #19), each against a baseline measured in the same
//! run: a CPU-bound actor workload on a 2-worker node, unprofiled, under tprof's CPU sampler
//! and under pprof-rs at the same rates; and the wall sampler over 100,000 processes.
//!
//! Criterion rows:
//!
//! - `sampling/overhead/{unprofiled, tprof_99hz, tprof_999hz, pprof_99hz, pprof_999hz}`: one
//!   run of the workload (16 processes spinning in chunks, yielding between them). The overhead
//!   of a row is its time over `unprofiled`'s. Targets: tprof ≤ 1 % at 99 Hz, ≤ 3 % at 999 Hz.
//! - `sampling/census/100000`: one full census of a node's 100,000 idle processes (target
//!   ≤ 20 ms).
//!
//! Then figures criterion cannot express, printed as `sampling/<figure>: ...` lines:
//!
//! - `captured`: the CPU time the samples account for (`samples × period`, weights included)
//!   over the process's CPU time in the same interval (`getrusage`), at 999 Hz, for tprof and
//!   for pprof-rs (target for tprof: ≥ 95 %);
//! - `wall_sampler`: the wall sampler at 99 Hz over 100,000 processes for a few seconds: its
//!   thread's CPU time over the wall time (target ≤ 1 % of a core), and the longest gap a
//!   heartbeat process on the node saw between two wake-ups of 1 ms timers, with the sampler on
//!   and off.
//!
//! - `truth`: whether CPU profiles tell the truth on the six shapes users run (issue #29): tprof
//!   on perf events, tprof on its fallback and pprof-rs, at 99 and 999 Hz, against unprofiled
//!   runs: captured share (mean, and the lowest busy thread), distinct samples per CPU-second,
//!   A:B against the truth, throughput ([`truth`]'s documentation says how each is measured).
//!
//! Run with `cargo bench --bench sampling` (Linux); `cargo bench --bench sampling --
//! sampling/truth` for the truth table alone.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};

#[path = "sampling/shapes.rs"]
mod shapes;
#[path = "sampling/truth.rs"]
mod truth;
use runtime::sample::{SampleOptions, Sampler};
use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{Node, Pid, receive};

/// Chunks each process computes (a chunk is a few hundred microseconds).
const CHUNKS: u32 = 40;
/// Processes in the workload.
const PROCESSES: usize = 16;

#[runtime::traced]
#[inline(never)]
fn chunk(seed: u64) -> u64 {
    let mut x = black_box(seed);
    for i in 0..100_000u64 {
        x = x.rotate_left(5) ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    x
}

#[runtime::traced]
async fn worker(seed: u64) -> u64 {
    let mut acc = seed;
    for _ in 0..CHUNKS {
        acc ^= chunk(acc);
        tokio::task::yield_now().await;
    }
    acc
}

/// One run of the workload on `node`: `PROCESSES` workers, waited for.
fn workload(node: &Node) {
    let acc = node
        .run(async {
            let me = runtime::self_pid();
            for i in 0..PROCESSES as u64 {
                runtime::spawn(async move {
                    let v = worker(i).await;
                    runtime::send(me, v);
                })
                .expect("spawn");
            }
            let mut acc = 0u64;
            for _ in 0..PROCESSES {
                acc ^= receive::<u64>().await;
            }
            acc
        })
        .expect("ran");
    black_box(acc);
}

fn tprof_session(node: &Node, hz: u32) -> runtime::sample::SampleSession {
    let session = node
        .sample_session(SampleOptions::new().hz(hz).n(10_000_000))
        .expect("sample session");
    session
        .trace()
        .set_pattern(&TracePattern::all())
        .expect("pattern");
    session
        .trace()
        .enable_trace(ProcessSpec::New, true)
        .expect("flags");
    session
}

fn pprof_guard(hz: i32) -> pprof::ProfilerGuard<'static> {
    pprof::ProfilerGuardBuilder::default()
        .frequency(hz)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .expect("pprof-rs")
}

fn overhead(c: &mut Criterion) {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let mut group = c.benchmark_group("sampling/overhead");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("unprofiled", |b| b.iter(|| workload(&node)));
    for hz in [99, 999] {
        let session = tprof_session(&node, hz);
        group.bench_function(format!("tprof_{hz}hz"), |b| b.iter(|| workload(&node)));
        session.clear();
        drop(session);
    }
    // pprof-rs last: it takes SIGPROF over, and tprof refuses to share it.
    for hz in [99, 999] {
        let guard = pprof_guard(hz);
        group.bench_function(format!("pprof_{hz}hz"), |b| b.iter(|| workload(&node)));
        drop(guard);
    }
    group.finish();
}

/// Idle processes waiting in `receive`, `n` of them.
fn idle(node: &Node, n: usize) -> Vec<Pid> {
    (0..n)
        .map(|_| {
            node.spawn(async {
                receive::<u64>().await;
            })
            .expect("spawn")
        })
        .collect()
}

fn census(c: &mut Criterion) {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(SampleOptions::new().sampler(Sampler::Wall).hz(1))
        .expect("wall session");
    session
        .trace()
        .set_pattern(&TracePattern::all())
        .expect("pattern");
    session
        .trace()
        .enable_trace(ProcessSpec::New, true)
        .expect("flags");
    let pids = idle(&node, 100_000);
    let mut group = c.benchmark_group("sampling/census");
    group.sample_size(10);
    group.bench_function("100000", |b| {
        b.iter(|| {
            let census = session.census();
            assert_eq!(census.len(), 100_000);
            black_box(census.len())
        })
    });
    group.finish();
    for pid in pids {
        node.send(pid, 0u64);
    }
}

/// This process's user + system CPU time.
fn rusage_cpu() -> Duration {
    // SAFETY: `getrusage` writes the struct it is given, a zeroed plain struct on the stack.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The CPU time tprof's samples account for at 999 Hz, over the process's.
fn captured_tprof(node: &Node) -> f64 {
    let session = tprof_session(node, 999);
    let before = rusage_cpu();
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        workload(node);
    }
    let cpu = rusage_cpu() - before;
    let data = session.samples();
    let sampled: f64 = data.samples.iter().map(|s| s.weight).sum::<f64>() + data.dropped;
    sampled * 1e9 / 999.0 / cpu.as_nanos() as f64
}

/// The same for pprof-rs.
fn captured_pprof(node: &Node) -> f64 {
    let guard = pprof_guard(999);
    let before = rusage_cpu();
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        workload(node);
    }
    let cpu = rusage_cpu() - before;
    let report = guard.report().build().expect("pprof-rs report");
    let samples: isize = report.data.values().sum();
    samples as f64 * 1e9 / 999.0 / cpu.as_nanos() as f64
}

/// A thread's CPU time, by its name (`/proc/self/task/*/comm`), in nanoseconds from its
/// `schedstat` (the scheduler's own count, not the 10 ms ticks of `stat`).
fn thread_cpu(name: &str) -> Option<Duration> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).ok()?;
        if comm.trim() == name {
            let stat = std::fs::read_to_string(path.join("schedstat")).ok()?;
            let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
            return Some(Duration::from_nanos(ns));
        }
    }
    None
}

/// The longest gap a heartbeat process sees between wake-ups of 1 ms timers, over `run`.
fn heartbeat_gap(node: &Node, run: Duration) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let (tx, rx) = std::sync::mpsc::channel();
    node.spawn(async move {
        let mut last = Instant::now();
        let mut longest = Duration::ZERO;
        while !flag.load(Ordering::Relaxed) {
            let _ = runtime::receive_timeout::<()>(Duration::from_millis(1)).await;
            let now = Instant::now();
            longest = longest.max(now - last);
            last = now;
        }
        let _ = tx.send(longest);
    })
    .expect("heartbeat");
    std::thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    rx.recv_timeout(Duration::from_secs(10))
        .expect("heartbeat ended")
}

fn figures() {
    let node = Node::builder().worker_threads(2).build().expect("node");
    workload(&node);
    let tprof = captured_tprof(&node);
    let pprof = captured_pprof(&node);
    println!(
        "sampling/captured at 999 Hz: tprof {:.1} %, pprof-rs {:.1} % of the process's CPU time",
        tprof * 100.0,
        pprof * 100.0
    );

    let wall_node = Node::builder().worker_threads(2).build().expect("node");
    let pids = idle(&wall_node, 100_000);
    let run = Duration::from_secs(5);
    let gap_off = heartbeat_gap(&wall_node, run);
    let session = wall_node
        .sample_session(SampleOptions::new().sampler(Sampler::Wall).hz(99))
        .expect("wall session");
    session
        .trace()
        .set_pattern(&TracePattern::all())
        .expect("pattern");
    session
        .trace()
        .enable_trace(ProcessSpec::All, true)
        .expect("flags");
    let name = format!("tprof-wall-{}", wall_node.id());
    let cpu_before = thread_cpu(&name).unwrap_or_default();
    let started = Instant::now();
    let gap_on = heartbeat_gap(&wall_node, run);
    let wall = started.elapsed();
    let cpu = thread_cpu(&name).unwrap_or_default() - cpu_before;
    let data = session.samples();
    println!(
        "sampling/wall_sampler at 99 Hz over 100000 processes: its thread used {:.3} % of a core \
         ({} µs in {} ms, {} samples); longest heartbeat gap {} µs with it, {} µs without",
        cpu.as_secs_f64() * 100.0 / wall.as_secs_f64(),
        cpu.as_micros(),
        wall.as_millis(),
        data.samples.len(),
        gap_on.as_micros(),
        gap_off.as_micros()
    );
    drop(session);
    for pid in pids {
        wall_node.send(pid, 0u64);
    }
}

criterion_group!(benches, overhead, census);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !filtered_out(&args, "sampling/truth") && filtered_out(&args, "sampling/figures") {
        // The truth table alone: criterion's rows would only be filtered out.
        truth::table();
        return;
    }
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
    // Criterion's own filter does not reach these: skip them when a filter names another row.
    if !filtered_out(&args, "sampling/figures") {
        figures();
    }
    if !filtered_out(&args, "sampling/truth") {
        truth::table();
    }
}

/// Criterion's options that take a value (`--warm-up-time 1`): the value is no row filter.
const VALUED: &[&str] = &[
    "--warm-up-time",
    "--measurement-time",
    "--sample-size",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--nresamples",
    "--save-baseline",
    "--baseline",
    "--load-baseline",
    "--profile-time",
    "--output-format",
    "--color",
    "--format",
    "--plotting-backend",
];

/// Whether `args` hold a row filter that `row` does not match.
fn filtered_out(args: &[String], row: &str) -> bool {
    let mut previous: Option<&str> = None;
    args.iter().any(|a| {
        let value = previous.is_some_and(|p| VALUED.contains(&p));
        previous = Some(a.as_str());
        !value && !a.starts_with('-') && !row.contains(a.as_str())
    })
}
