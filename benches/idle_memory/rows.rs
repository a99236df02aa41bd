//! The idle-memory bench's rows, counting allocator and driver, shared by `idle_memory`
//! (no `runtime::CountingAlloc`) and `idle_memory_accounts` (with it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::Instant;

use runtime::gen_server::{self, CallReply, Caller, GenServer, StartOptions};
use runtime::{ExitReason, Node, receive};

// ---------------------------------------------------------------------------------------------
// The counting allocator.

/// Forwards to [`System`] and keeps the live requested bytes and blocks.
pub(crate) struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static LIVE_BLOCKS: AtomicIsize = AtomicIsize::new(0);

#[inline]
fn add(bytes: usize, blocks: isize) {
    LIVE_BYTES.fetch_add(bytes as isize, Ordering::Relaxed);
    LIVE_BLOCKS.fetch_add(blocks, Ordering::Relaxed);
}

#[inline]
fn sub(bytes: usize, blocks: isize) {
    LIVE_BYTES.fetch_sub(bytes as isize, Ordering::Relaxed);
    LIVE_BLOCKS.fetch_sub(blocks, Ordering::Relaxed);
}

#[allow(unsafe_code)]
// SAFETY: every method forwards to `System` with the arguments it was given, so the
// allocator contract is `System`'s; the bookkeeping only touches atomics and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller guarantees `layout` has a non-zero size, as `System.alloc` needs.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            add(layout.size(), 1);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            add(layout.size(), 1);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` was allocated by this allocator (hence by
        // `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size(), 1);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr` came from this allocator (hence `System`) with
        // `layout`, and that `new_size` is non-zero and does not overflow when rounded.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            add(new_size, 0);
            sub(layout.size(), 0);
        }
        new
    }
}

// ---------------------------------------------------------------------------------------------
// Measuring.

#[derive(Clone, Copy)]
struct Snapshot {
    bytes: isize,
    blocks: isize,
    rss: u64,
}

/// Resident set size in bytes, from `VmRSS` in `/proc/self/status`.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn snapshot() -> Snapshot {
    Snapshot {
        bytes: LIVE_BYTES.load(Ordering::Relaxed),
        blocks: LIVE_BLOCKS.load(Ordering::Relaxed),
        rss: rss(),
    }
}

/// Processes that have been polled once and are about to wait for a message.
static READY: AtomicUsize = AtomicUsize::new(0);

/// Yields until `n` processes have reported ready (no allocation, unlike a timer).
async fn wait_ready(n: usize) {
    while READY.load(Ordering::Relaxed) < n {
        tokio::task::yield_now().await;
    }
}

// ---------------------------------------------------------------------------------------------
// What each row spawns.

/// A gen_server with unit state.
struct Unit;

impl GenServer for Unit {
    type Args = ();
    type Call = ();
    type Reply = ();
    type Cast = ();

    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Unit)
    }

    async fn handle_call(&mut self, (): (), _from: &mut Caller<()>) -> CallReply<()> {
        CallReply::Reply(())
    }
}

struct RactorUnit;

impl ractor::Actor for RactorUnit {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<()>,
        (): (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }
}

struct KameoUnit;

impl kameo::Actor for KameoUnit {
    type Args = Self;
    type Error = kameo::error::Infallible;

    async fn on_start(
        args: Self,
        _: kameo::actor::ActorRef<Self>,
    ) -> Result<Self, kameo::error::Infallible> {
        Ok(args)
    }
}

/// Every row.
pub(crate) const ROWS: [&str; 6] = [
    "runtime_receive",
    "runtime_gen_server",
    "tokio_mpsc",
    "ractor",
    "kameo_unbounded",
    "kameo_bounded64",
];
const SCHEDS: [&str; 2] = ["current_thread", "2_workers"];

fn tokio_runtime(sched: &str) -> tokio::runtime::Runtime {
    let mut builder = if sched == "current_thread" {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(2);
        b
    };
    builder
        .enable_all()
        .build()
        .expect("cannot build the tokio runtime")
}

/// The child: spawns `n` idle processes of `row` and prints one result line.
fn child(row: &str, sched: &str, n: usize) {
    let node = || {
        let b = if sched == "current_thread" {
            Node::builder().current_thread()
        } else {
            Node::builder().worker_threads(2)
        };
        b.build().expect("cannot start the node")
    };
    let started = Instant::now();
    let (before, after) = match row {
        "runtime_receive" => {
            let node = node();
            node.run(async move {
                let before = snapshot();
                for _ in 0..n {
                    runtime::spawn(async {
                        READY.fetch_add(1, Ordering::Relaxed);
                        loop {
                            let _: u64 = receive().await;
                        }
                    })
                    .expect("spawn");
                }
                wait_ready(n).await;
                (before, snapshot())
            })
            .expect("the measuring process failed")
        }
        "runtime_gen_server" => {
            let node = node();
            node.run(async move {
                let before = snapshot();
                for _ in 0..n {
                    gen_server::start::<Unit>((), StartOptions::new())
                        .await
                        .expect("start");
                }
                (before, snapshot())
            })
            .expect("the measuring process failed")
        }
        "tokio_mpsc" => {
            let rt = tokio_runtime(sched);
            let task = rt.spawn(async move {
                let mut senders = Vec::with_capacity(n);
                let before = snapshot();
                for _ in 0..n {
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
                    tokio::spawn(async move {
                        READY.fetch_add(1, Ordering::Relaxed);
                        while rx.recv().await.is_some() {}
                    });
                    senders.push(tx);
                }
                wait_ready(n).await;
                let after = snapshot();
                std::mem::forget(senders);
                (before, after)
            });
            rt.block_on(task).expect("the measuring task panicked")
        }
        "ractor" => {
            let rt = tokio_runtime(sched);
            let task = rt.spawn(async move {
                let mut actors = Vec::with_capacity(n);
                let before = snapshot();
                for _ in 0..n {
                    // `spawn` returns once the actor has started.
                    let (actor, _handle) = ractor::Actor::spawn(None, RactorUnit, ())
                        .await
                        .expect("spawn");
                    actors.push(actor);
                }
                let after = snapshot();
                std::mem::forget(actors);
                (before, after)
            });
            rt.block_on(task).expect("the measuring task panicked")
        }
        "kameo_unbounded" | "kameo_bounded64" => {
            use kameo::actor::Spawn as _;
            let bounded = row == "kameo_bounded64";
            let rt = tokio_runtime(sched);
            let task = rt.spawn(async move {
                let mut actors = Vec::with_capacity(n);
                let before = snapshot();
                for _ in 0..n {
                    let mailbox = if bounded {
                        kameo::mailbox::bounded(64)
                    } else {
                        kameo::mailbox::unbounded()
                    };
                    actors.push(KameoUnit::spawn_with_mailbox(KameoUnit, mailbox));
                }
                for a in &actors {
                    a.wait_for_startup().await;
                }
                let after = snapshot();
                std::mem::forget(actors);
                (before, after)
            });
            rt.block_on(task).expect("the measuring task panicked")
        }
        other => panic!("unknown row {other}"),
    };
    let per = |d: f64| d / n as f64;
    println!(
        "RESULT {row} {sched} {n} {:.1} {:.2} {:.1} {:.3}",
        per((after.bytes - before.bytes) as f64),
        per((after.blocks - before.blocks) as f64),
        per(after.rss as f64 - before.rss as f64),
        started.elapsed().as_secs_f64(),
    );
    // Skip tearing down the idle processes.
    std::process::exit(0);
}

/// The bench's `main`: with `--child ROW SCHED N`, measures one row; otherwise runs each of
/// `rows` (as the command line filters them) in a fresh OS process and prints the table.
pub(crate) fn main(rows: &[&str]) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let [_, row, sched, n] = &args[..] else {
            eprintln!("usage: idle_memory --child ROW SCHED N");
            return ExitCode::FAILURE;
        };
        child(row, sched, n.parse().expect("N is a number"));
        return ExitCode::SUCCESS;
    }
    let benching = args.iter().any(|a| a == "--bench");
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let n: usize = if benching {
        std::env::var("IDLE_MEMORY_PROCESSES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100_000)
    } else {
        1_000
    };
    let exe = std::env::current_exe().expect("cannot find this executable");
    println!("idle memory per process, {n} idle processes per row, each row in a fresh OS process");
    println!(
        "{:<20} {:<15} {:>16} {:>12} {:>14} {:>9}",
        "row", "scheduler", "requested B/proc", "blocks/proc", "RSS B/proc", "spawn s"
    );
    let mut ok = true;
    for &row in rows {
        for sched in SCHEDS {
            let name = format!("{row}/{sched}");
            if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
                continue;
            }
            let out = Command::new(&exe)
                .args(["--child", row, sched, &n.to_string()])
                .output()
                .expect("cannot run the child");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let line = stdout.lines().find_map(|l| l.strip_prefix("RESULT "));
            match (out.status.success(), line) {
                (true, Some(line)) => {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    println!(
                        "{:<20} {:<15} {:>16} {:>12} {:>14} {:>9}",
                        f[0], f[1], f[3], f[4], f[5], f[6]
                    );
                }
                _ => {
                    ok = false;
                    println!(
                        "{row:<20} {sched:<15} failed: {}\n{}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
