//! tprof at scale (issue 22): collect, inspect, the reports and every export of a node of many
//! processes, at 1k, 10k and 100k processes (and 1M, opt-in: `TPROF_BENCH_1M=1`, as it takes
//! minutes and gigabytes).
//!
//! Each size is a node of one worker whose processes each made one call to each of 10 traced
//! functions, profiled by a tprof server with call_time; `10kx100` has 100 functions per
//! process. Rows, for `<size>` among `1k`, `10k`, `100k`, `1m`:
//!
//! - `scale/collect/<size>x10`, `scale/collect/10kx100`: `Tprof::collect` (targets: 100k × 10
//!   within 200 ms, 10k × 100 within 50 ms). After each collect row, the longest pause a
//!   heartbeat process (waking every millisecond on the node's one worker) saw during a
//!   collect is printed: collect runs off the workers, so it is the heartbeat's own jitter;
//! - `scale/inspect/<size>`: `tprof::inspect` per process;
//! - `scale/report/{format,rich_report}/<size>`: tprof's text report, the rich report;
//! - `scale/export/<format>/<size>`: each export, written to a sink;
//! - `scale/sample/collect/<size>`, `scale/sample/export/<format>/<size>`: sample mode, a
//!   node of `<size>` idle processes sampled by the wall sampler (every process each tick)
//!   until it holds about two samples per process, then paused: collect, and each export but
//!   html of that profile (the server stopped first, so that the sampler's thread does not
//!   tick meanwhile).
//!
//! After each row of a profile, the bench prints the peak memory one run of it allocated
//! beyond what was live before (what it returns included: the rich report's text), and that
//! as a multiple of the profile's size (what a clone of the profile allocates), measured by a
//! tracking global allocator.
//!
//! A size's node and profile are made only when a row of it runs (so a filter such as
//! `scale/collect` builds no profile it does not time). The log-log slope between two sizes
//! is `log(t2 / t1) / log(n2 / n1)`: 1.0 is linear.
//!
//! Run with `cargo bench --bench scale -- 'scale/collect' --warm-up-time 1 --measurement-time 3`.

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use runtime::sample::{SampleOptions, Sampler};
use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{Node, receive, receive_timeout, self_pid, send};
use tprof::export::{self, Format};
use tprof::{Aggregate, Profile, ServerOptions, SortBy, Tprof, TraceType};

#[path = "tracking_alloc.rs"]
mod tracking_alloc;
use tracking_alloc::ALLOC;

/// The peak memory `step` allocates beyond what was live before it, what it returns included.
fn extra_memory<R>(step: impl FnOnce() -> R) -> usize {
    let before = ALLOC.reset_peak();
    let made = step();
    let peak = ALLOC.peak();
    drop(made);
    peak.saturating_sub(before)
}

/// Benches `step` over `size`'s profile as row `id`; when it ran, prints the peak memory one
/// run allocates beyond what was live, against the profile's size.
fn row<T: Collect, R>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    size: &Size<T>,
    step: impl Fn(&Profile) -> R,
) {
    let mut ran = false;
    group.bench_function(id, |b| {
        ran = true;
        size.with(|_, p| b.iter(|| step(p)))
    });
    if ran {
        let (extra, bytes) = size.with(|_, p| (extra_memory(|| step(p)), ALLOC.bytes_of(p)));
        eprintln!(
            "{id}: extra memory {:.1} MB, {:.2} times the profile's {:.1} MB",
            extra as f64 / 1e6,
            extra as f64 / bytes.max(1) as f64,
            bytes as f64 / 1e6
        );
    }
}

macro_rules! functions {
    ($($name:ident)*) => {
        $(
            #[runtime::traced]
            #[inline(never)]
            fn $name(x: u64) -> u64 {
                black_box(x).wrapping_mul(31).rotate_left(7)
            }
        )*
        /// The traced functions a process calls, in order.
        const FUNCTIONS: &[fn(u64) -> u64] = &[$($name),*];
    };
}

functions!(
    f00 f01 f02 f03 f04 f05 f06 f07 f08 f09 f10 f11 f12 f13 f14 f15 f16 f17 f18 f19
    f20 f21 f22 f23 f24 f25 f26 f27 f28 f29 f30 f31 f32 f33 f34 f35 f36 f37 f38 f39
    f40 f41 f42 f43 f44 f45 f46 f47 f48 f49 f50 f51 f52 f53 f54 f55 f56 f57 f58 f59
    f60 f61 f62 f63 f64 f65 f66 f67 f68 f69 f70 f71 f72 f73 f74 f75 f76 f77 f78 f79
    f80 f81 f82 f83 f84 f85 f86 f87 f88 f89 f90 f91 f92 f93 f94 f95 f96 f97 f98 f99
);

/// A node of `processes` ended processes that each called the first `functions` of
/// [`FUNCTIONS`] once, and the tprof server (call_time) that measured them.
struct Profiled {
    node: Node,
    tprof: Tprof,
    processes: usize,
}

impl Profiled {
    fn new(processes: usize, functions: usize) -> Profiled {
        let node = Node::builder().worker_threads(1).build().expect("node");
        let options = ServerOptions::new().trace_type(TraceType::CallTime);
        let tprof = node.block_on(Tprof::start(&node, options)).expect("server");
        node.block_on(tprof.set_pattern(TracePattern::module(module_path!())))
            .expect("pattern");
        node.block_on(tprof.enable_trace(ProcessSpec::New, true))
            .expect("flags");
        let start = Instant::now();
        node.run(async move {
            let me = self_pid();
            for i in 0..processes as u64 {
                runtime::spawn(async move {
                    for f in &FUNCTIONS[..functions] {
                        black_box(f(i));
                    }
                    send(me, ());
                })
                .expect("spawn");
            }
            for _ in 0..processes {
                receive::<()>().await;
            }
        })
        .expect("the spawning process ran");
        eprintln!(
            "{processes} processes x {functions} functions spawned and run in {:.2?}",
            start.elapsed()
        );
        Profiled {
            node,
            tprof,
            processes,
        }
    }

    fn collect(&self) -> Profile {
        let profile = self.node.block_on(self.tprof.collect()).expect("collect");
        assert_eq!(profile.processes.len(), self.processes);
        profile
    }

    /// The longest gap between the wake-ups of a process that sleeps 1 ms at a time on the
    /// node, beyond the millisecond, over one collect.
    fn heartbeat_gap(&self) -> Duration {
        let longest = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (Arc::clone(&longest), Arc::clone(&stop));
        let beating = self
            .node
            .spawn(async move {
                let mut last = Instant::now();
                while !s.load(Ordering::Relaxed) {
                    receive_timeout::<()>(Duration::from_millis(1)).await;
                    let now = Instant::now();
                    let gap = now
                        .duration_since(last)
                        .saturating_sub(Duration::from_millis(1));
                    l.fetch_max(gap.as_nanos() as u64, Ordering::Relaxed);
                    last = now;
                }
            })
            .expect("heartbeat");
        std::thread::sleep(Duration::from_millis(20));
        longest.store(0, Ordering::Relaxed);
        black_box(self.collect());
        let gap = Duration::from_nanos(longest.load(Ordering::Relaxed));
        stop.store(true, Ordering::Relaxed);
        black_box(beating);
        gap
    }
}

/// A node whose profile can be collected.
trait Collect {
    fn collect(&self) -> Profile;
}

impl Collect for Profiled {
    fn collect(&self) -> Profile {
        Profiled::collect(self)
    }
}

/// A node of `processes` processes waiting in `receive`, sampled in sample mode by a tprof
/// server's wall sampler (every process each tick) until it holds about two samples per
/// process, then paused (so that each collect gives the same profile).
struct Sampled {
    node: Node,
    tprof: Tprof,
}

impl Sampled {
    fn new(processes: usize, _functions: usize) -> Sampled {
        let node = Node::builder().worker_threads(1).build().expect("node");
        let sampling = SampleOptions::new()
            .sampler(Sampler::Wall)
            .hz(50)
            .per_tick(processes)
            .n(4 * processes);
        let options = ServerOptions::new().sample(sampling);
        let tprof = node.block_on(Tprof::start(&node, options)).expect("server");
        node.block_on(tprof.set_pattern(TracePattern::module(module_path!())))
            .expect("pattern");
        node.block_on(tprof.enable_trace(ProcessSpec::New, true))
            .expect("flags");
        let start = Instant::now();
        node.run(async move {
            for _ in 0..processes {
                runtime::spawn(async {
                    receive::<()>().await;
                })
                .expect("spawn");
            }
        })
        .expect("the spawning process ran");
        let sampled = Sampled { node, tprof };
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let samples = sampled.collect().samples.samples.len();
            if samples >= 2 * processes || start.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        sampled
            .node
            .block_on(sampled.tprof.pause())
            .expect("paused");
        let samples = sampled.collect().samples.samples.len();
        eprintln!(
            "{processes} processes sampled ({samples} samples) in {:.2?}",
            start.elapsed()
        );
        sampled
    }
}

impl Sampled {
    /// Stops the server, and with it the sampler's thread (paused, it sleeps and takes no
    /// tick; stopped, nothing of the session is left to take the exports' time).
    fn stop(&self) {
        self.node.block_on(self.tprof.stop()).expect("stopped");
    }
}

impl Collect for Sampled {
    fn collect(&self) -> Profile {
        self.node.block_on(self.tprof.collect()).expect("collect")
    }
}

/// A size of node, made on first use: its node and its profile.
struct Size<T = Profiled> {
    name: &'static str,
    processes: usize,
    functions: usize,
    make: fn(usize, usize) -> T,
    made: RefCell<Option<(T, Profile)>>,
}

impl Size {
    fn new(name: &'static str, processes: usize, functions: usize) -> Size {
        Size::of(name, processes, functions, Profiled::new)
    }
}

impl<T: Collect> Size<T> {
    fn of(
        name: &'static str,
        processes: usize,
        functions: usize,
        make: fn(usize, usize) -> T,
    ) -> Size<T> {
        Size {
            name,
            processes,
            functions,
            make,
            made: RefCell::new(None),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&T, &Profile) -> R) -> R {
        let mut made = self.made.borrow_mut();
        let (node, profile) = made.get_or_insert_with(|| {
            let node = (self.make)(self.processes, self.functions);
            let profile = node.collect();
            (node, profile)
        });
        f(node, profile)
    }
}

fn scale(c: &mut Criterion) {
    let mut sizes = vec![
        Size::new("1k", 1_000, 10),
        Size::new("10k", 10_000, 10),
        Size::new("100k", 100_000, 10),
    ];
    if std::env::var_os("TPROF_BENCH_1M").is_some() {
        sizes.push(Size::new("1m", 1_000_000, 10));
    }
    let wide = Size::new("10k", 10_000, 100);
    let mut group = c.benchmark_group("scale");
    group.sample_size(10);
    for size in sizes.iter().chain([&wide]) {
        let id = format!("collect/{}x{}", size.name, size.functions);
        let mut ran = false;
        group.bench_function(&id, |b| {
            ran = true;
            size.with(|profiled, _| b.iter(|| profiled.collect()))
        });
        if ran {
            let gap = size.with(|profiled, _| profiled.heartbeat_gap());
            eprintln!("{id}: the longest heartbeat gap during a collect: {gap:.2?}");
        }
    }
    for size in &sizes {
        let name = size.name;
        row(&mut group, &format!("inspect/{name}"), size, |p| {
            tprof::inspect(p, Aggregate::Process, SortBy::default())
        });
        row(&mut group, &format!("report/format/{name}"), size, |p| {
            let inspected = tprof::inspect(p, Aggregate::Process, SortBy::default());
            tprof::format(&mut std::io::sink(), &inspected).expect("format")
        });
        row(
            &mut group,
            &format!("report/rich_report/{name}"),
            size,
            tprof::rich_report,
        );
        for &format in Format::ALL {
            row(
                &mut group,
                &format!("export/{}/{name}", format.name()),
                size,
                |p| export::write(format, p, &mut std::io::sink()).expect("export"),
            );
        }
    }
    // Sample mode: a wall sampler's samples of every process.
    let mut sampled = vec![
        Size::of("1k", 1_000, 0, Sampled::new),
        Size::of("10k", 10_000, 0, Sampled::new),
        Size::of("100k", 100_000, 0, Sampled::new),
    ];
    if std::env::var_os("TPROF_BENCH_1M").is_some() {
        sampled.push(Size::of("1m", 1_000_000, 0, Sampled::new));
    }
    for size in &sampled {
        let name = size.name;
        group.bench_function(format!("sample/collect/{name}"), |b| {
            size.with(|node, _| b.iter(|| node.collect()))
        });
        // The exports read the profile collected: the sampler is not needed past here.
        if size.made.borrow().is_some() {
            size.with(|node, _| node.stop());
        }
        for &format in Format::ALL.iter().filter(|&&f| f != Format::Html) {
            row(
                &mut group,
                &format!("sample/export/{}/{name}", format.name()),
                size,
                |p| export::write(format, p, &mut std::io::sink()).expect("export"),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, scale);
criterion_main!(benches);
