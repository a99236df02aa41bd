//! Benchmarks of the per-process heap (issue #3).
//!
//! - `allocator/<who>/<size>`: one allocation and its free, at 8, 64 and 512 bytes: `system`
//!   (the system allocator), `counting_outside` (the counting allocator outside any process:
//!   charged to no one) and `counting_in_process` (inside a process, charged to it: the usual
//!   case). The target is counting <= 1.25x system for the same size. The counting allocator
//!   is this binary's global allocator (the collect group runs with it too).
//! - `collect/10k_processes_x_100_functions`: `TraceSession::measurements` over 10,000 live
//!   processes that each called 100 traced functions under call_time, on a 2-worker node.
//!   After the group it prints the longest gap a heartbeat process saw between two of its polls
//!   while collect ran, against the same heartbeat with no collect.
//!
//! Run with `cargo bench --bench heap`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use runtime::trace::{ProcessSpec, TracePattern, TraceTypes};
use runtime::{CountingAlloc, Node, receive, self_pid, send};

/// Installed: the runtime charges a process's allocations only when the counting allocator is
/// the global one (`heap::installed`), so without this `counting_in_process` would measure
/// allocations charged to no one. The rows call it directly, as they call `System`.
#[global_allocator]
static COUNTING: CountingAlloc = CountingAlloc::system();

fn pairs<A: GlobalAlloc>(alloc: &A, layout: Layout, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        // SAFETY: `layout` has a non-zero size; the block is freed once, with the same layout,
        // by the allocator that made it.
        #[allow(unsafe_code)]
        unsafe {
            let p = alloc.alloc(layout);
            assert!(!p.is_null());
            black_box(p);
            alloc.dealloc(p, layout);
        }
    }
    start.elapsed()
}

fn bench_allocator(c: &mut Criterion) {
    assert!(
        runtime::heap::installed(),
        "counting_in_process needs the counting allocator installed"
    );
    let node = Node::builder().current_thread().build().expect("node");
    let mut group = c.benchmark_group("allocator");
    for size in [8usize, 64, 512] {
        let layout = Layout::from_size_align(size, 8).expect("layout");
        group.bench_with_input(BenchmarkId::new("system", size), &layout, |b, l| {
            b.iter_custom(|iters| pairs(&System, *l, iters))
        });
        group.bench_with_input(
            BenchmarkId::new("counting_outside", size),
            &layout,
            |b, l| b.iter_custom(|iters| pairs(&COUNTING, *l, iters)),
        );
        group.bench_with_input(
            BenchmarkId::new("counting_in_process", size),
            &layout,
            |b, l| {
                let l = *l;
                b.iter_custom(|iters| {
                    node.run(async move { pairs(&COUNTING, l, iters) })
                        .expect("the timing process ran")
                })
            },
        );
    }
    group.finish();
}

/// Defines 100 traced functions and a list of them.
macro_rules! functions {
    ($($name:ident)*) => {
        mod hundred {
            $(
                #[runtime::traced]
                #[inline(never)]
                pub(crate) fn $name(x: u64) -> u64 {
                    std::hint::black_box(x).wrapping_mul(31)
                }
            )*
            pub(crate) static ALL: &[fn(u64) -> u64] = &[$($name),*];
        }
    };
}

functions!(f00 f01 f02 f03 f04 f05 f06 f07 f08 f09 f10 f11 f12 f13 f14 f15 f16 f17 f18 f19 f20 f21 f22 f23 f24 f25 f26 f27 f28 f29 f30 f31 f32 f33 f34 f35 f36 f37 f38 f39 f40 f41 f42 f43 f44 f45 f46 f47 f48 f49 f50 f51 f52 f53 f54 f55 f56 f57 f58 f59 f60 f61 f62 f63 f64 f65 f66 f67 f68 f69 f70 f71 f72 f73 f74 f75 f76 f77 f78 f79 f80 f81 f82 f83 f84 f85 f86 f87 f88 f89 f90 f91 f92 f93 f94 f95 f96 f97 f98 f99);

/// Returns `Pending` once, waking itself.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Spawns a process that polls itself in a loop and records the longest gap between polls
/// (in ns) until `stop` is set.
fn heartbeat(node: &Node, stop: Arc<AtomicBool>, longest: Arc<AtomicU64>) {
    node.spawn(async move {
        let mut last = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            YieldOnce(false).await;
            let now = Instant::now();
            let gap = now.duration_since(last).as_nanos() as u64;
            longest.fetch_max(gap, Ordering::Relaxed);
            last = now;
        }
    })
    .expect("heartbeat");
}

fn longest_gap(node: &Node, during: impl FnOnce()) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let longest = Arc::new(AtomicU64::new(0));
    heartbeat(node, Arc::clone(&stop), Arc::clone(&longest));
    std::thread::sleep(Duration::from_millis(20));
    longest.store(0, Ordering::Relaxed);
    during();
    stop.store(true, Ordering::Relaxed);
    Duration::from_nanos(longest.load(Ordering::Relaxed))
}

fn bench_collect(c: &mut Criterion) {
    const PROCESSES: usize = 10_000;
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .trace_session_with(TraceTypes::CALL_TIME)
        .expect("session");
    session
        .set_pattern(&TracePattern::module(format!(
            "{}::hundred",
            module_path!()
        )))
        .expect("pattern");
    session
        .enable_trace(ProcessSpec::New, false)
        .expect("flags");
    let workers = node
        .run(async {
            let me = self_pid();
            let mut pids = Vec::with_capacity(PROCESSES);
            for _ in 0..PROCESSES {
                pids.push(
                    runtime::spawn(async move {
                        let mut acc = 0;
                        for f in hundred::ALL {
                            acc += f(acc);
                        }
                        black_box(acc);
                        send(me, ());
                        let () = receive().await; // stay alive until told
                    })
                    .expect("spawn"),
                );
            }
            for _ in 0..PROCESSES {
                let () = receive().await;
            }
            pids
        })
        .expect("processes ran");
    session.disable_trace(ProcessSpec::All).expect("flags off");
    let measured = session.measurements();
    assert_eq!(measured.len(), PROCESSES);
    assert!(measured.iter().all(|p| p.functions.len() == 100));
    let mut group = c.benchmark_group("collect");
    group.sample_size(10);
    group.bench_function("10k_processes_x_100_functions", |b| {
        b.iter(|| black_box(session.measurements().len()))
    });
    group.finish();
    let idle = longest_gap(&node, || std::thread::sleep(Duration::from_millis(300)));
    let collecting = longest_gap(&node, || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(300) {
            black_box(session.measurements().len());
        }
    });
    eprintln!(
        "collect: longest gap between two polls of a heartbeat process: {collecting:?} while \
         collecting in a loop, {idle:?} idle"
    );
    for pid in workers {
        node.send(pid, ());
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = bench_allocator, bench_collect
}
criterion_main!(benches);
