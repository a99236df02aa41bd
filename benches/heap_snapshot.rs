//! Benchmarks of heap snapshots (issue #20): a node of 100,000 processes.
//!
//! - `heap_snapshot/walk_100k`: `introspect::walk` over the node, visiting each process and
//!   doing nothing else: the baseline, what reading the processes costs.
//! - `heap_snapshot/write_100k`: `heap_snapshot` of the node into a sink that counts bytes.
//!
//! The node: 10 supervisors of 10,000 workers each; every worker holds a 256-byte `Vec`,
//! every tenth has a message queued and every hundredth a registered name. After the group,
//! the bench prints the snapshot's size, nodes and edges, and the peak memory the snapshot
//! allocated beyond what was live before it (a tracking allocator around the counting one),
//! against the size of what it wrote: streamed, it must stay well below one copy of the
//! output.
//!
//! Run with `cargo bench --bench heap_snapshot -- 'heap_snapshot/'`; with
//! `HEAP_SNAPSHOT_OUT=FILE`, the 100,000-process snapshot is also written to FILE.

use std::hint::black_box;
use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use runtime::supervisor::{
    self, ChildSpec, StartOptions, Strategy, SupervisorFlags, SupervisorSpec,
};
use runtime::{Node, introspect, receive};

#[path = "tracking_alloc.rs"]
mod tracking_alloc;
use tracking_alloc::ALLOC;

const SUPERVISORS: usize = 10;
const WORKERS: usize = 10_000;

/// A writer that keeps nothing and counts what it is given.
#[derive(Default)]
struct Counted(usize);

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The node of 100,000 workers under 10 supervisors.
fn populated() -> Node {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let (tx, rx) = mpsc::channel::<runtime::Pid>();
    for _ in 0..SUPERVISORS {
        let children = (0..WORKERS).map(|w| {
            let tx = tx.clone();
            ChildSpec::worker(format!("w{w}"), move || {
                let tx = tx.clone();
                async move {
                    let held = vec![0u8; 256];
                    tx.send(runtime::self_pid()).expect("ready");
                    let () = receive().await;
                    drop(held);
                }
            })
        });
        let spec =
            SupervisorSpec::new(SupervisorFlags::new(Strategy::OneForOne)).children(children);
        let sup = node
            .block_on(supervisor::start_on(&node, spec, StartOptions::new()))
            .expect("supervisor");
        black_box(sup);
    }
    for i in 0..SUPERVISORS * WORKERS {
        let pid = rx
            .recv_timeout(Duration::from_secs(600))
            .expect("workers start");
        if i % 10 == 0 {
            node.send(pid, [i as u64; 4]);
        }
        if i % 100 == 0 {
            node.register(format!("worker_{i}"), pid).expect("register");
        }
    }
    node
}

fn bench_heap_snapshot(c: &mut Criterion) {
    assert!(
        runtime::heap::installed(),
        "processes need their heap figures"
    );
    let node = populated();
    let mut group = c.benchmark_group("heap_snapshot");
    group.sample_size(10);
    group.bench_function("walk_100k", |b| {
        b.iter(|| {
            let mut bytes = 0u64;
            introspect::walk(&node, |p| bytes += p.mailbox_bytes + p.links.len() as u64);
            black_box(bytes)
        })
    });
    group.bench_function("write_100k", |b| {
        b.iter(|| {
            let mut out = Counted::default();
            runtime::heap_snapshot::heap_snapshot(&node, &mut out).expect("written");
            black_box(out.0)
        })
    });
    group.finish();

    let before = ALLOC.reset_peak();
    let mut out = Counted::default();
    let summary = runtime::heap_snapshot::heap_snapshot(&node, &mut out).expect("written");
    let extra = ALLOC.peak() - before;
    let mb = |b: usize| b as f64 / (1 << 20) as f64;
    eprintln!(
        "heap_snapshot: {} processes, {} nodes, {} edges, {:.1} MB written; peak extra memory \
         {:.2} MB ({:.0} bytes per process, {:.1}% of the output)",
        summary.processes,
        summary.nodes,
        summary.edges,
        mb(out.0),
        mb(extra),
        extra as f64 / summary.processes as f64,
        100.0 * extra as f64 / out.0 as f64,
    );
    if let Some(path) = std::env::var_os("HEAP_SNAPSHOT_OUT") {
        // To check by hand with the real tools (`../shared/validators/check.sh FILE`).
        let mut file = std::fs::File::create(path).expect("create HEAP_SNAPSHOT_OUT");
        runtime::heap_snapshot::heap_snapshot(&node, &mut file).expect("written");
    }
    drop(node);
}

criterion_group!(benches, bench_heap_snapshot);
criterion_main!(benches);
