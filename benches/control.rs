//! The control endpoint's cost (issue 21): idle, and while a collect goes through it.
//!
//! - `control_idle/on_vs_off`: an actor workload (8 processes, 20,000 messages; the one of
//!   `alloc_sampling`) on a node of 2 workers with the endpoint open and idle (its Unix socket,
//!   a TCP listener and the pull endpoint) in percent of the same without an endpoint, the two
//!   timed back to back in each sample, alternating which goes first; both sides open and
//!   close an endpoint untimed (the transient of opening one moves the next run by 10 to 20 %),
//!   so that they differ only in its being open during the timed run. The target: at most
//!   100.1 % (0.1 % of a worker). As that is far below the noise of a loaded machine, the
//!   endpoint threads' own CPU time (from `/proc/self/task/TID/schedstat`, in nanoseconds) over
//!   3 s of the workload with it open is printed after the row, as a fraction of one core: the
//!   idle endpoint's cost measured directly (and, as a check of that reading, what one request
//!   to `/debug/pprof/` then costs them).
//! - `control_pause/{without_collect,collect_100k}`: the longest gap, beyond its millisecond,
//!   between the wake-ups of heartbeat processes (two, one per worker, each waking every
//!   millisecond) over one `collect` of a call_time profile of 100,000 processes
//!   through the endpoint (tprof's tables by process, as `tprof attach` asks), and over the
//!   same span of time without a collect. Each row's figure is the mean over its samples of
//!   that longest gap.
//!
//! Run with `cargo bench --bench control -- 'control_' --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{Node, receive, receive_timeout, self_pid, send};
use tprof::control::protocol::{Command, Reply};
use tprof::control::{ControlClient, ControlEndpoint, ControlOptions};
use tprof::{ServerOptions, Tprof, TraceType};

#[path = "alloc_workload.rs"]
mod alloc_workload;
#[path = "ratio_measurement.rs"]
mod ratio_measurement;

/// An endpoint of `node` with all its listeners: the socket, TCP and the pull endpoint.
fn open_all(node: &Node, name: &str) -> ControlEndpoint {
    let path = std::env::temp_dir().join(format!("tprof-bench-{}-{name}.sock", std::process::id()));
    ControlEndpoint::open(
        node.handle(),
        ControlOptions::new()
            .path(path)
            .tcp("127.0.0.1:0")
            .http("127.0.0.1:0"),
    )
    .expect("the endpoint opens")
}

/// The CPU time, in nanoseconds, of this program's threads whose names start with one of the
/// endpoint's (`tprof-control`, `tprof-pprof`), from `/proc/self/task/*/schedstat`.
/// Also how many threads it read.
fn endpoint_cpu_ns() -> (u64, usize) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    let times: Vec<u64> = tasks
        .filter_map(Result::ok)
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|c| c.starts_with("tprof-control") || c.starts_with("tprof-pprof"))
        })
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .collect();
    (times.iter().sum(), times.len())
}

/// `control_idle/on_vs_off`, then the endpoint threads' CPU time over a few seconds of the
/// workload with the endpoint open.
fn idle(c: &mut Criterion<ratio_measurement::Ratio>) {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let run = |iters: u64| {
        let start = Instant::now();
        for _ in 0..iters {
            node.run(alloc_workload::workload())
                .expect("the workload ran");
        }
        start.elapsed()
    };
    // Both sides open and close an endpoint, untimed: opening one (threads spawned, files
    // written) changes the next run's time by far more than the cost looked for (by 10 to 20 %
    // on this machine, either way), so the only difference is whether it is open during the
    // timed run.
    let on = |iters: u64| {
        let endpoint = open_all(&node, "idle");
        let elapsed = run(iters);
        drop(endpoint);
        elapsed
    };
    let off = |iters: u64| {
        drop(open_all(&node, "idle"));
        run(iters)
    };
    let mut group = c.benchmark_group("control_idle");
    let on_first = std::cell::Cell::new(true);
    group.bench_function("on_vs_off", |b| {
        b.iter_custom(|iters| {
            let (on, off) = if on_first.replace(!on_first.get()) {
                let on = on(iters);
                (on, off(iters))
            } else {
                let off = off(iters);
                (on(iters), off)
            };
            100.0 * iters as f64 * on.as_secs_f64() / off.as_secs_f64().max(f64::MIN_POSITIVE)
        })
    });
    group.finish();

    let endpoint = open_all(&node, "idle_cpu");
    std::thread::sleep(Duration::from_millis(50));
    let (before, _) = endpoint_cpu_ns();
    let start = Instant::now();
    let mut runs = 0;
    while start.elapsed() < Duration::from_secs(3) {
        run(1);
        runs += 1;
    }
    let (after, threads) = endpoint_cpu_ns();
    let spent = after.saturating_sub(before);
    let span = start.elapsed();
    // The reading's check: one request to the pull endpoint's index shows in it.
    let addr = endpoint.http_addr().expect("the pull endpoint");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let token = endpoint.token().expect("the endpoint's token").as_str();
    let request = format!("GET /debug/pprof/?token={token} HTTP/1.1\r\n\r\n");
    std::io::Write::write_all(&mut stream, request.as_bytes()).expect("send");
    std::io::Read::read_to_end(&mut stream, &mut Vec::new()).expect("the index");
    let request = endpoint_cpu_ns().0.saturating_sub(after);
    drop(endpoint);
    eprintln!(
        "control_idle: over {span:.2?} ({runs} runs of the workload) the idle endpoint's \
         {threads} threads used {spent} ns of CPU: {:.6} % of one core (one request to \
         /debug/pprof/ then took {request} ns of theirs)",
        100.0 * spent as f64 / span.as_nanos().max(1) as f64
    );
}

/// Heartbeat processes, one per worker, each waking every millisecond; the longest gap
/// between two wake-ups of any of them, beyond the millisecond.
struct Heartbeats {
    longest_ns: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Heartbeats {
    fn start(node: &Node, count: usize) -> Heartbeats {
        let longest_ns = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..count {
            let (longest, stop) = (Arc::clone(&longest_ns), Arc::clone(&stop));
            node.spawn(async move {
                let period = Duration::from_millis(1);
                let mut last = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    receive_timeout::<()>(period).await;
                    let now = Instant::now();
                    let late = now.duration_since(last).saturating_sub(period);
                    longest.fetch_max(late.as_nanos() as u64, Ordering::Relaxed);
                    last = now;
                }
            })
            .expect("a heartbeat");
        }
        Heartbeats { longest_ns, stop }
    }

    /// The longest gap since the last call (or the start).
    fn take_longest(&self) -> Duration {
        Duration::from_nanos(self.longest_ns.swap(0, Ordering::Relaxed))
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The traced function each process of the profile calls.
#[runtime::traced]
#[inline(never)]
fn step(x: u64) -> u64 {
    black_box(x).wrapping_mul(31).rotate_left(7)
}

/// `control_pause/*`: a node of 2 workers whose 100,000 ended processes each called a traced
/// function under a call_time server, heartbeats on it, and a client of its endpoint.
fn pause(c: &mut Criterion) {
    const PROCESSES: u64 = 100_000;
    let node = Node::builder().worker_threads(2).build().expect("node");
    let tprof = node
        .block_on(Tprof::start(
            &node,
            ServerOptions::new().trace_type(TraceType::CallTime),
        ))
        .expect("server");
    node.block_on(tprof.set_pattern(TracePattern::module(module_path!())))
        .expect("pattern");
    node.block_on(tprof.enable_trace(ProcessSpec::New, true))
        .expect("flags");
    node.run(async {
        let me = self_pid();
        for i in 0..PROCESSES {
            runtime::spawn(async move {
                black_box(step(i));
                send(me, ());
            })
            .expect("spawn");
        }
        for _ in 0..PROCESSES {
            receive::<()>().await;
        }
    })
    .expect("the processes ran");
    let endpoint = open_all(&node, "pause");
    let mut client = ControlClient::connect(endpoint.path()).expect("a client");
    let mut collect = || {
        let reply = client
            .request(Command::Collect {
                format: "process".into(),
            })
            .expect("collect");
        let Reply::Text { text } = reply else {
            panic!("tables: {reply:?}")
        };
        black_box(text.len())
    };
    // How long a collect takes: the span the row without a collect waits for.
    let span = {
        let start = Instant::now();
        let bytes = collect();
        let span = start.elapsed();
        eprintln!("control_pause: a collect of {bytes} bytes of tables took {span:.2?}");
        span
    };
    let heartbeats = Heartbeats::start(&node, 2);
    std::thread::sleep(Duration::from_millis(20));
    let mut group = c.benchmark_group("control_pause");
    group.sample_size(10);
    let mut worst = [Duration::ZERO; 2];
    let row = |b: &mut criterion::Bencher<'_>, worst: &mut Duration, f: &mut dyn FnMut()| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                heartbeats.take_longest();
                f();
                let gap = heartbeats.take_longest();
                *worst = (*worst).max(gap);
                total += gap;
            }
            total
        })
    };
    group.bench_function("without_collect", |b| {
        row(b, &mut worst[0], &mut || std::thread::sleep(span))
    });
    group.bench_function("collect_100k", |b| {
        row(b, &mut worst[1], &mut || {
            collect();
        })
    });
    group.finish();
    eprintln!(
        "control_pause: the longest heartbeat gap of any sample: {:.2?} without a collect, \
         {:.2?} over a collect through the endpoint",
        worst[0], worst[1]
    );
}

criterion_group! {
    name = ratios;
    config = Criterion::default()
        .with_measurement(ratio_measurement::Ratio)
        .sample_size(10)
        .configure_from_args();
    targets = idle
}
criterion_group!(pauses, pause);
criterion_main!(ratios, pauses);
