//! The allocation sampler: known allocation sites in two processes, one allocating ten times
//! what the other does, come out in that proportion under Poisson sampling by bytes, and
//! exactly with `sample_rate = 1`.
#![cfg(target_os = "linux")]

mod common;

use std::sync::mpsc;
use std::time::Duration;

use runtime::sample::{
    AllocRate, Sample, SampleData, SampleError, SampleOptions, SampleSession, Sampler,
};
use runtime::trace::TracePattern;
use runtime::{Node, Pid};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// One allocation sample session at a time in this binary: the allocator has one rate per
/// program.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// An allocation sample session on `node` at `rate` (keeping `n` samples, or the default),
/// tracing this file's functions in the processes spawned from now on.
fn alloc_session(node: &Node, rate: AllocRate, n: Option<usize>) -> SampleSession {
    let mut options = SampleOptions::new()
        .sampler(Sampler::Alloc)
        .alloc_rate(rate);
    if let Some(n) = n {
        options = options.n(n);
    }
    let session = node.sample_session(options).expect("alloc session");
    common::trace_new_processes(session.trace(), &TracePattern::module(module_path!()));
    session
}

/// Whether `s` is a block of [`allocate_known`].
fn is_known_block(s: &Sample) -> bool {
    s.size == 64 && s.traced.last().map(|cs| cs.function()) == Some("allocate_known")
}

/// Allocates and frees `n` blocks of `size` bytes: the little process's site.
#[runtime::traced]
fn allocate_little(n: usize, size: usize) {
    for _ in 0..n {
        std::hint::black_box(Vec::<u8>::with_capacity(size));
    }
}

/// The same, the much process's site.
#[runtime::traced]
fn allocate_much(n: usize, size: usize) {
    for _ in 0..n {
        std::hint::black_box(Vec::<u8>::with_capacity(size));
    }
}

/// Opens an allocation session at `rate` tracing this file's functions in new processes, runs
/// the little process (`n` blocks) and the much one (`10 n`), and gives their pids and the
/// samples.
fn run_two(rate: AllocRate, n: usize, size: usize) -> (Pid, Pid, SampleData) {
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = alloc_session(&node, rate, None);
    let (tx, rx) = mpsc::channel();
    let little = {
        let tx = tx.clone();
        node.spawn(async move {
            allocate_little(n, size);
            tx.send(()).expect("send");
        })
        .expect("spawn")
    };
    let much = node
        .spawn(async move {
            allocate_much(10 * n, size);
            tx.send(()).expect("send");
        })
        .expect("spawn");
    for _ in 0..2 {
        rx.recv_timeout(Duration::from_secs(120))
            .expect("the processes finished");
    }
    let data = session.samples();
    assert_eq!(data.sampler, Sampler::Alloc);
    assert_eq!(data.alloc_rate, Some(rate));
    (little, much, data)
}

/// The samples of `pid` whose innermost traced function is `site`.
fn at_site<'a>(data: &'a SampleData, pid: Pid, site: &str) -> Vec<&'a Sample> {
    data.samples
        .iter()
        .filter(|s| s.pid == Some(pid) && s.traced.last().map(|cs| cs.function()) == Some(site))
        .collect()
}

fn bytes(samples: &[&Sample]) -> f64 {
    samples.iter().map(|s| s.weight).sum()
}

fn objects(samples: &[&Sample]) -> f64 {
    samples.iter().map(|s| s.weight / s.size as f64).sum()
}

#[test]
fn every_allocation_is_counted_exactly_at_sample_rate_one() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (little, much, data) = run_two(AllocRate::SampleRate(1.0), 10, 1000);
    assert_eq!(data.dropped, 0.0);
    let l = at_site(&data, little, "allocate_little");
    let m = at_site(&data, much, "allocate_much");
    assert_eq!((objects(&l), bytes(&l)), (10.0, 10_000.0));
    assert_eq!((objects(&m), bytes(&m)), (100.0, 100_000.0));
    assert!(
        l.iter()
            .chain(&m)
            .all(|s| s.size == 1000 && s.weight == 1000.0)
    );
    // Each sample has a native stack, walked from the allocation: it names the site's function.
    let named = m
        .iter()
        .filter(|s| {
            s.native.iter().enumerate().any(|(i, a)| {
                runtime::sample::symbolize(*a, i > 0)
                    .iter()
                    .any(|f| f.function.contains("allocate_much"))
            })
        })
        .count();
    assert!(
        named >= 90,
        "{named} of 100 native stacks name allocate_much"
    );
    // The sites are the processes' own: no sample of one process is at the other's site.
    assert!(at_site(&data, little, "allocate_much").is_empty());
    assert!(at_site(&data, much, "allocate_little").is_empty());
}

#[test]
fn poisson_sampling_by_bytes_keeps_the_proportion_and_estimates_the_bytes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 25 MiB and 250 MiB in blocks of 4 KiB, one sample per 256 KiB: about 100 and 1,000
    // samples, so the bounds below are many standard deviations wide.
    let (n, size) = (6400, 4096);
    let (little, much, data) = run_two(AllocRate::Bytes(256 * 1024), n, size);
    let l = at_site(&data, little, "allocate_little");
    let m = at_site(&data, much, "allocate_much");
    assert!(
        l.len() >= 40 && m.len() >= 400,
        "{} and {} samples",
        l.len(),
        m.len()
    );
    let ratio = bytes(&m) / bytes(&l);
    assert!((6.0..=16.0).contains(&ratio), "much / little = {ratio}");
    let truth = (n * size) as f64;
    let estimate = bytes(&l) / truth;
    assert!(
        (0.6..=1.6).contains(&estimate),
        "little: {estimate} of the truth"
    );
    let estimate = bytes(&m) / (10.0 * truth);
    assert!(
        (0.8..=1.25).contains(&estimate),
        "much: {estimate} of the truth"
    );
    // Each small block stands for about the rate (it is sampled with probability size / rate).
    assert!(
        m.iter()
            .all(|s| s.size == size as u64 && s.weight > 256.0 * 1024.0)
    );
}

/// Allocates `n` blocks of `size` bytes and keeps them.
#[runtime::traced]
fn keep_blocks(n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| Vec::with_capacity(size)).collect()
}

/// A freed block leaves the live set; a kept one stays in it until it is freed.
#[test]
fn a_freed_block_leaves_the_live_set() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = alloc_session(&node, AllocRate::SampleRate(1.0), None);
    let (tx, rx) = mpsc::channel();
    let holder = node
        .spawn(async move {
            allocate_little(10, 1000);
            let kept = keep_blocks(10, 1000);
            tx.send(()).expect("send");
            // Frees what it kept when told to.
            runtime::receive::<()>().await;
            drop(kept);
            tx.send(()).expect("send");
            runtime::receive::<()>().await;
        })
        .expect("spawn");
    rx.recv_timeout(Duration::from_secs(120))
        .expect("allocated");
    let live_at = |data: &SampleData, site: &str| {
        at_site(data, holder, site)
            .into_iter()
            .filter(|s| s.size == 1000)
            .map(|s| s.live)
            .collect::<Vec<bool>>()
    };
    let data = session.samples();
    assert_eq!(live_at(&data, "allocate_little"), vec![false; 10]);
    assert_eq!(live_at(&data, "keep_blocks"), vec![true; 10]);
    let held: Vec<_> = session
        .live()
        .into_iter()
        .filter(|site| {
            site.pid == Some(holder)
                && site.traced.last().map(|cs| cs.function()) == Some("keep_blocks")
        })
        .collect();
    let bytes: f64 = held.iter().map(|site| site.bytes).sum();
    // The ten blocks, and the vector that holds them (10 x 24 bytes).
    assert_eq!(bytes, 10_240.0, "{held:?}");
    assert!(
        held.iter()
            .all(|site| site.objects >= 1.0 && site.samples >= 1)
    );
    // Named by site for a heap snapshot: the same bytes, under the process.
    let named = runtime::heap_snapshot::live_sites(&session);
    let kept: Vec<_> = named
        .iter()
        .filter(|s| s.pid == holder && s.site.contains("keep_blocks"))
        .collect();
    assert_eq!(
        kept.iter().map(|s| s.bytes).sum::<u64>(),
        10_240,
        "{named:?}"
    );
    let mut snapshot = Vec::new();
    runtime::heap_snapshot::HeapSnapshot::of(node.handle())
        .live_sites(&named)
        .write(&mut snapshot)
        .expect("snapshot");
    let snapshot = String::from_utf8(snapshot).expect("utf-8");
    assert!(
        snapshot.contains(&kept[0].site),
        "the site is in the snapshot"
    );
    node.send(holder, ());
    rx.recv_timeout(Duration::from_secs(120)).expect("freed");
    let data = session.samples();
    assert_eq!(live_at(&data, "keep_blocks"), vec![false; 10]);
    assert_eq!(data.lost_frees, 0, "every free fit in the queue");
    assert!(!session.live().iter().any(|site| site.pid == Some(holder)
        && site.traced.last().map(|cs| cs.function()) == Some("keep_blocks")));
    node.send(holder, ());
}

#[test]
fn rates_out_of_range_and_a_second_rate_are_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new().expect("node");
    let open = |rate| {
        node.sample_session(
            SampleOptions::new()
                .sampler(Sampler::Alloc)
                .alloc_rate(rate),
        )
    };
    for bad in [
        AllocRate::Bytes(0),
        AllocRate::SampleRate(1.5),
        AllocRate::SampleRate(-0.1),
        AllocRate::SampleRate(f64::NAN),
    ] {
        let err = open(bad).expect_err("out of range");
        assert!(matches!(err, SampleError::AllocRate { .. }), "{err:?}");
        assert!(err.to_string().contains("sample_rate from 0 to 1"), "{err}");
    }
    let first = open(AllocRate::SampleRate(0.5)).expect("first");
    let err = open(AllocRate::Bytes(1024)).expect_err("another rate");
    assert!(matches!(err, SampleError::AllocRateTaken { .. }), "{err}");
    let same = open(AllocRate::SampleRate(0.5)).expect("the same rate joins");
    drop((first, same));
    open(AllocRate::Bytes(1024)).expect("another rate once the others are gone");
}

/// Allocates `n` blocks of 64 bytes: the site of the rounds below.
#[runtime::traced]
fn allocate_known(n: usize) {
    for _ in 0..n {
        std::hint::black_box(Vec::<u8>::with_capacity(64));
    }
}

/// At `sample_rate` 1 every allocation of every process is sampled, however much threads
/// outside the node allocate meanwhile: 10 rounds of 300 processes, each allocating a known
/// number of blocks before and after a `yield_now`, while two plain threads allocate without
/// pause. (Issue 30: the worker's ring overflowed while the drain thread waited for a core, and
/// every process lost the samples of one of its two polls.)
#[test]
fn sample_rate_one_is_exact_while_plain_threads_allocate() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let noise: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("plain-allocator".into())
                .spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        for _ in 0..1000 {
                            std::hint::black_box(Vec::<u8>::with_capacity(32));
                        }
                    }
                })
                .expect("spawn")
        })
        .collect();
    let node = Node::builder().worker_threads(2).build().expect("node");
    let (mut processes, mut mismatched, mut halves) = (0, Vec::new(), 0);
    for round in 0..10 {
        let session = alloc_session(&node, AllocRate::SampleRate(1.0), Some(1 << 20));
        let (tx, rx) = mpsc::channel();
        let pids: Vec<(Pid, usize)> = (0..300usize)
            .map(|i| {
                let tx = tx.clone();
                let n = 20 + (i + round) % 40;
                let pid = node
                    .spawn(async move {
                        allocate_known(n);
                        tokio::task::yield_now().await;
                        allocate_known(n);
                        tx.send(()).expect("send");
                    })
                    .expect("spawn");
                (pid, 2 * n)
            })
            .collect();
        for _ in 0..pids.len() {
            rx.recv_timeout(Duration::from_secs(120))
                .expect("the processes finished");
        }
        let data = session.samples();
        let mut counts = std::collections::HashMap::<Pid, usize>::new();
        for s in &data.samples {
            if let Some(pid) = s.pid
                && is_known_block(s)
            {
                *counts.entry(pid).or_default() += 1;
            }
        }
        for (pid, want) in pids {
            processes += 1;
            let got = counts.get(&pid).copied().unwrap_or(0);
            if got != want {
                halves += usize::from(2 * got == want);
                mismatched.push((round, pid, got, want, data.dropped));
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in noise {
        t.join().expect("noise thread");
    }
    assert!(
        mismatched.is_empty(),
        "{} of {processes} processes mismatched ({halves} by exactly half); first: {:?}",
        mismatched.len(),
        &mismatched[..mismatched.len().min(5)]
    );
}

/// A session samples by its own rate from each thread's first allocation, whatever an earlier
/// session left: a worker that drew a countdown of about a gigabyte under a session sampling
/// by bytes, then a session at `sample_rate` 1, has every allocation of the second sampled.
/// (A countdown from an earlier session was redrawn only once it ran out: the second session
/// missed the worker's next gigabyte.)
#[test]
fn a_session_does_not_inherit_an_earlier_sessions_countdown() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // One worker: both sessions' processes allocate on the same thread.
    let node = Node::builder().worker_threads(1).build().expect("node");
    let run = |rate: AllocRate, n: usize| -> usize {
        let session = alloc_session(&node, rate, Some(1 << 16));
        let (tx, rx) = mpsc::channel();
        let pid = node
            .spawn(async move {
                allocate_known(n);
                tx.send(()).expect("send");
            })
            .expect("spawn");
        rx.recv_timeout(Duration::from_secs(120))
            .expect("the process finished");
        let data = session.samples();
        data.samples
            .iter()
            .filter(|s| s.pid == Some(pid) && is_known_block(s))
            .count()
    };
    // A countdown of ~1 GiB drawn on the worker; 64 KiB of it spent (almost surely no sample).
    let first = run(AllocRate::Bytes(1 << 30), 1_000);
    assert!(first <= 1, "{first}");
    assert_eq!(run(AllocRate::SampleRate(1.0), 50), 50);
}

/// Set in the child processes of [`two_runs_of_a_program_sample_different_allocations`].
const SEEDED_CHILD: &str = "SAMPLE_ALLOC_SEEDED_CHILD";

/// Allocates and frees `n` blocks of sizes 1,024 to 1,024 + `n` − 1 bytes, each size once:
/// a sampled block's size says which allocation it was.
#[runtime::traced]
fn allocate_numbered(n: usize) {
    for i in 0..n {
        std::hint::black_box(Vec::<u8>::with_capacity(1024 + i));
    }
}

/// Two runs of one deterministic program sample different allocations: each thread's draws are
/// seeded anew by each run (where the system lays out memory at random, as Linux does by
/// default), so two profiles of the same work are two estimates, not one twice. Before, the
/// n-th thread of every run drew the same numbers: a run sampled the very allocations the last
/// run had. Each run is a child process, which prints the sizes it sampled.
#[test]
fn two_runs_of_a_program_sample_different_allocations() {
    if std::env::var_os(SEEDED_CHILD).is_some() {
        let node = Node::builder().current_thread().build().expect("node");
        let session = alloc_session(&node, AllocRate::Bytes(256 * 1024), Some(1 << 16));
        let pid = node
            .run(async {
                let (pid, _) =
                    runtime::spawn_monitor(async { allocate_numbered(20_000) }).expect("spawn");
                let _: runtime::Down = runtime::receive().await;
                pid
            })
            .expect("run");
        let mut sizes: Vec<u64> = session
            .samples()
            .samples
            .iter()
            .filter(|s| {
                s.pid == Some(pid)
                    && s.traced.last().map(|cs| cs.function()) == Some("allocate_numbered")
            })
            .map(|s| s.size)
            .collect();
        sizes.sort_unstable();
        println!("sampled sizes: {sizes:?}");
        return;
    }
    // SAFETY: `personality(0xffffffff)` only reads this process's execution domain.
    #[allow(unsafe_code)]
    let persona = unsafe { libc::personality(0xffff_ffff) };
    if std::fs::read_to_string("/proc/sys/kernel/randomize_va_space").is_ok_and(|v| v.trim() == "0")
        || persona >= 0 && persona & libc::ADDR_NO_RANDOMIZE != 0
    {
        eprintln!("skipped: address space layout randomization is off here");
        return;
    }
    let run = || {
        let output = std::process::Command::new(std::env::current_exe().expect("this test binary"))
            .args([
                "--exact",
                "two_runs_of_a_program_sample_different_allocations",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(SEEDED_CHILD, "1")
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The harness prints the test's name on the line the sizes follow.
        stdout
            .lines()
            .find_map(|l| {
                l.split_once("sampled sizes: ")
                    .map(|(_, sizes)| sizes.to_owned())
            })
            .unwrap_or_else(|| panic!("no sizes printed: {stdout}"))
    };
    let (first, second) = (run(), run());
    // ~200 MiB in all at one sample per 256 KiB: some 800 samples a run.
    assert!(first.matches(',').count() > 100, "{first}");
    assert!(
        first != second,
        "two runs sampled the same {} allocations",
        first.matches(',').count() + 1
    );
}
