//! The CPU sampler's handler, checked where only the crate can reach: with every lock the
//! sampler has held by the sampled thread, and every allocation of that thread counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

/// Counts each thread's allocations (a `const` thread-local without a destructor: safe in an
/// allocator).
struct CountingPerThread;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to `System` with the caller's arguments; the count is a
// thread-local cell that neither allocates nor has a destructor.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingPerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded as given.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as given.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded as given.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: CountingPerThread = CountingPerThread;

/// One CPU sampler at a time among this binary's tests (it has one rate per program).
pub(super) static SERIAL: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

#[inline(never)]
fn spin(n: u64) -> u64 {
    let mut x = std::hint::black_box(n);
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// A thread sampled while it holds every lock the sampler's code takes (the registry, the
/// drain, the stores, the path table, the allocator's none): a handler that took one would
/// deadlock, and the test would fail at its bound. Meanwhile its own allocations are counted:
/// the handler ran many times and allocated nothing. On the fallback's timers.
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn the_handler_neither_locks_nor_allocates() {
    handler_neither_locks_nor_allocates(super::CpuSource::Timers);
}

/// The same on perf events, whose handler also reads the thread's CPU clock and re-arms the
/// event (`clock_gettime`, two `ioctl`s). Where the kernel refuses perf events, says so and
/// checks nothing more (the fallback is checked above).
#[test]
fn the_handler_neither_locks_nor_allocates_on_perf_events() {
    if perf_events_refused() {
        return;
    }
    handler_neither_locks_nor_allocates(super::CpuSource::PerfEvents);
}

/// Whether the kernel refuses perf events here (the test then skips, and says so).
fn perf_events_refused() -> bool {
    match super::perf::probe() {
        Ok(_) => false,
        Err(e) => {
            eprintln!(
                "skipped: perf events are refused here: {}",
                super::perf::refusal_text(&e)
            );
            true
        }
    }
}

fn handler_neither_locks_nor_allocates(source: super::CpuSource) {
    let _serial = SERIAL.lock();
    super::cpu::start(997, 0, source).expect("start the sampler");
    let (done_tx, done_rx) = mpsc::channel();
    let sampled = std::thread::Builder::new()
        .name("sampled".into())
        .spawn(move || {
            super::threads::register_current(0);
            let ring = super::threads::THREAD
                .with(|t| t.ring.load(Ordering::Acquire))
                .cast_const();
            // SAFETY: rings are leaked, never freed; this thread's was just published.
            #[allow(unsafe_code)]
            let ring = unsafe { ring.as_ref() }.expect("a ring while the sampler runs");
            let before_records = ring.written();
            // In the order the drain takes them (the drain, the stores, the registry): the
            // drain thread may run a drain meanwhile (an exited thread's rings wait).
            let drain = super::store::lock_drain_for_test();
            let stores = super::store::lock_stores_for_test();
            let registry = super::threads::REGISTRY.lock();
            let paths = crate::trace::paths::lock_table_for_test();
            let before = ALLOCATIONS.with(Cell::get);
            let mut rounds = 0u64;
            while ring.written() < before_records + 20 && rounds < 200_000 {
                spin(100_000);
                rounds += 1;
            }
            let allocated = ALLOCATIONS.with(Cell::get) - before;
            let records = ring.written() - before_records;
            drop((registry, drain, stores, paths));
            done_tx.send((records, allocated)).expect("send");
        })
        .expect("spawn");
    let outcome = done_rx.recv_timeout(Duration::from_secs(120));
    super::cpu::stop(0);
    let (records, allocated) = outcome.expect("the sampled thread finished: no handler deadlocked");
    sampled.join().expect("joined");
    assert!(records >= 20, "the handler ran ({records} records)");
    assert_eq!(allocated, 0, "the handler allocated");
}

/// A thread allocating through a counting allocator with every allocation sampled, while it
/// holds every lock the sampler's code takes (the registry, the drain, the stores, the path
/// table): a recorder that took one would deadlock. Its allocations through the global
/// allocator are counted: the recorder wrote a record per allocation and allocated nothing.
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn the_alloc_sampler_neither_locks_nor_allocates() {
    let _serial = SERIAL.lock();
    super::alloc::start(super::AllocRate::SampleRate(1.0)).expect("start the sampler");
    let (done_tx, done_rx) = mpsc::channel();
    let sampled = std::thread::Builder::new()
        .name("alloc-sampled".into())
        .spawn(move || {
            super::threads::register_current(0);
            let ring = super::threads::THREAD
                .with(|t| t.alloc_ring.load(Ordering::Acquire))
                .cast_const();
            // SAFETY: rings are leaked, never freed; this thread's was just published.
            #[allow(unsafe_code)]
            let ring = unsafe { ring.as_ref() }.expect("a ring while the sampler runs");
            // Charged to a process's account: the sampler skips what is charged to no one.
            let account = crate::heap::Account::acquire();
            let charging = crate::heap::Charging::new(account, false);
            let counting = crate::CountingAlloc::system();
            let layout = Layout::from_size_align(64, 8).expect("layout");
            let before_records = ring.written();
            // In the order the drain takes them (see the CPU sampler's test above).
            let drain = super::store::lock_drain_for_test();
            let stores = super::store::lock_stores_for_test();
            let alloc_stores = super::store::lock_alloc_stores_for_test();
            let registry = super::threads::REGISTRY.lock();
            let paths = crate::trace::paths::lock_table_for_test();
            let before = ALLOCATIONS.with(Cell::get);
            for _ in 0..100 {
                // SAFETY: a valid non-zero layout; the block is freed with the same layout.
                #[allow(unsafe_code)]
                unsafe {
                    let block = counting.alloc(layout);
                    assert!(!block.is_null());
                    counting.dealloc(block, layout);
                }
            }
            let allocated = ALLOCATIONS.with(Cell::get) - before;
            let records = ring.written() - before_records;
            drop((registry, drain, stores, alloc_stores, paths));
            drop(charging);
            account.release();
            done_tx.send((records, allocated)).expect("send");
        })
        .expect("spawn");
    let outcome = done_rx.recv_timeout(Duration::from_secs(120));
    super::alloc::stop();
    let (records, allocated) = outcome.expect("the thread finished: no recorder deadlocked");
    sampled.join().expect("joined");
    assert_eq!(records, 100, "one record per allocation at sample_rate 1");
    assert_eq!(allocated, 0, "the recorder allocated");
}

extern "C" fn foreign(_: libc::c_int) {}

/// Another handler of SIGPROF (a program's own, another profiler's) is never replaced: the
/// sampler refuses to start, and starts again once it is gone.
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn another_sigprof_handler_is_refused_not_replaced() {
    let _serial = SERIAL.lock();
    // SAFETY: installs a handler that does nothing, then puts the default back; no other test
    // of this binary sends SIGPROF while `SERIAL` is held.
    #[allow(unsafe_code)]
    let set = |handler: libc::sighandler_t| unsafe {
        libc::signal(libc::SIGPROF, handler);
    };
    set(foreign as *const () as libc::sighandler_t);
    let refused = super::cpu::start(997, 0, super::CpuSource::Auto);
    set(libc::SIG_DFL);
    assert!(
        matches!(refused, Err(super::SampleError::SignalTaken)),
        "{refused:?}"
    );
    super::cpu::start(997, 0, super::CpuSource::Auto)
        .expect("starts once the other handler is gone");
    super::cpu::stop(0);
}

/// Frees of sampled blocks that find the queue of frees full are lost (their blocks stay in
/// the live set), and the session says how many: every one the queue dropped. Here
/// the drain is held off while the queue is filled and overrun by a known number, so the count
/// does not depend on how fast the drain thread runs; frees that fit lose none.
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn frees_lost_to_a_full_queue_are_reported() {
    use super::alloc::{FREE_SLOTS, freed, take_dropped_frees, take_frees};
    let _serial = SERIAL.lock();
    let node = crate::Node::builder()
        .worker_threads(1)
        .build()
        .expect("node");
    let session = node
        .sample_session(
            super::SampleOptions::new()
                .sampler(super::Sampler::Alloc)
                .alloc_rate(super::AllocRate::SampleRate(1.0)),
        )
        .expect("alloc session");
    // Blocks no sample names: their frees wait in the store for a sample that never comes.
    let block = |i: usize| (0x1000_0000 + 16 * i) as *mut u8;
    for i in 0..10 {
        freed(block(i));
    }
    assert_eq!(session.samples().lost_frees, 0, "ten frees fit");

    let overrun = 37;
    {
        let _drain = super::store::lock_drain_for_test();
        // An empty queue to start from (the session has taken what came before).
        take_frees(&mut Vec::new());
        assert_eq!(take_dropped_frees(), 0);
        for i in 0..FREE_SLOTS + overrun {
            freed(block(i));
        }
    }
    // At least the overrun: the session samples every process's allocations in this test
    // binary (rate 1), so a free of another test's sampled block that came while the queue was
    // full was lost too, and counted.
    let lost = session.samples().lost_frees;
    assert!(lost >= overrun as u64, "{lost} lost, {overrun} overrun");
    assert!(
        lost < FREE_SLOTS as u64,
        "{lost} lost: the queue's own frees counted"
    );
    assert_eq!(session.samples().lost_frees, lost, "counted once, kept");
    session.clear();
    assert_eq!(session.samples().lost_frees, 0, "cleared with the samples");
}

/// The calling thread's registry index (0 when unregistered: the slot keeps index + 1).
fn own_index() -> u32 {
    super::threads::THREAD.with(|t| t.index.load(Ordering::Relaxed))
}

/// Spins until the CPU sampler has written a record into this thread's ring (bounded).
fn spin_until_sampled() -> bool {
    let ring = super::threads::THREAD
        .with(|t| t.ring.load(Ordering::Acquire))
        .cast_const();
    // SAFETY: rings are leaked, never freed; this thread's was published at its registration.
    #[allow(unsafe_code)]
    let Some(ring) = (unsafe { ring.as_ref() }) else {
        return false;
    };
    let before = ring.written();
    let mut rounds = 0u64;
    while ring.written() == before && rounds < 200_000 {
        spin(100_000);
        rounds += 1;
    }
    ring.written() > before
}

/// Threads started and retired one after another (a blocking pool's churn), each registered
/// while both samplers run and so given a ring of each: the registry keeps an entry per thread
/// alive at once (plus exited ones whose rings the drain has not emptied yet), not one per
/// thread ever started. Other tests of this binary register their nodes' threads meanwhile,
/// hence a margin; one entry per thread started would exceed it by far.
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn the_registry_stays_bounded_as_threads_come_and_go() {
    const THREADS: usize = 200;
    let _serial = SERIAL.lock();
    super::cpu::start(997, 0, super::CpuSource::Auto).expect("start the CPU sampler");
    super::alloc::start(super::AllocRate::default()).expect("start the allocation sampler");
    let before = super::threads::REGISTRY.lock().threads.len();
    let mut registered = 0;
    for i in 0..THREADS {
        let had_rings = std::thread::Builder::new()
            .name(format!("churn-{i}"))
            .spawn(|| {
                super::threads::register_current(0);
                super::threads::THREAD.with(|t| {
                    own_index() != 0
                        && !t.ring.load(Ordering::Acquire).is_null()
                        && !t.alloc_ring.load(Ordering::Acquire).is_null()
                })
            })
            .expect("spawn")
            .join()
            .expect("joined");
        registered += usize::from(had_rings);
        super::store::drain();
    }
    let after = super::threads::REGISTRY.lock().threads.len();
    super::alloc::stop();
    super::cpu::stop(0);
    eprintln!("registry entries: {before} before {THREADS} threads, {after} after");
    assert_eq!(
        registered, THREADS,
        "every thread registered with both rings"
    );
    assert!(
        after <= before + 64,
        "{after} entries after {THREADS} threads came and went ({before} before)"
    );
}

/// The drain walks the occupied entries: threads registered at once are all among them while
/// they live, and none is once they have exited and the drain has given back their rings,
/// though the registry keeps their entries (vacated, for the next threads). Other tests'
/// threads may take the vacated entries meanwhile: a registration is told by its index and
/// generation.
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn the_drain_walks_the_occupied_entries_only() {
    const THREADS: usize = 32;
    let _serial = SERIAL.lock();
    super::cpu::start(997, 0, super::CpuSource::Auto).expect("start the CPU sampler");
    let registered = std::sync::Arc::new(std::sync::Barrier::new(THREADS + 1));
    let checked = std::sync::Arc::new(std::sync::Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let (registered, checked) = (registered.clone(), checked.clone());
            std::thread::Builder::new()
                .name(format!("at-once-{i}"))
                .spawn(move || {
                    super::threads::register_current(0);
                    let index = own_index() - 1;
                    let generation =
                        super::threads::REGISTRY.lock().threads[index as usize].generation;
                    registered.wait();
                    checked.wait();
                    (index, generation)
                })
                .expect("spawn")
        })
        .collect();
    registered.wait();
    let occupied = |mine: &[(u32, u64)]| {
        let reg = super::threads::REGISTRY.lock();
        reg.occupied
            .iter()
            .filter(|&&i| mine.contains(&(i, reg.threads[i as usize].generation)))
            .count()
    };
    // Each thread's own registration, read from the registry by the thread itself.
    let live: Vec<(u32, u64)> = {
        let reg = super::threads::REGISTRY.lock();
        reg.occupied
            .iter()
            .map(|&i| (i, reg.threads[i as usize].generation))
            .collect()
    };
    checked.wait();
    let mine: Vec<(u32, u64)> = threads
        .into_iter()
        .map(|t| t.join().expect("joined"))
        .collect();
    super::store::drain();
    let left = occupied(&mine);
    super::cpu::stop(0);
    assert!(
        mine.iter().all(|m| live.contains(m)),
        "every live thread's entry is occupied"
    );
    assert_eq!(left, 0, "exited and drained: none occupied");
}

/// A thread sampled, then gone, its entry reused by a thread of another name: its samples
/// still name it (its tid and name, as when it was sampled), and the new thread's name its
/// own.
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn a_reused_entry_does_not_rename_the_samples_of_the_thread_before() {
    let _serial = SERIAL.lock();
    let node = crate::Node::builder()
        .worker_threads(1)
        .build()
        .expect("node");
    let id = node.id();
    let session = node
        .sample_session(super::SampleOptions::new().hz(997))
        .expect("CPU session");
    let tid = || {
        // SAFETY: `gettid` has no preconditions.
        #[allow(unsafe_code)]
        unsafe {
            libc::gettid()
        }
    };
    let (first_index, first_tid) = std::thread::Builder::new()
        .name("first".into())
        .spawn(move || {
            super::threads::register_current(id);
            assert!(spin_until_sampled(), "the first thread was sampled");
            (own_index(), tid())
        })
        .expect("spawn")
        .join()
        .expect("joined");
    assert_ne!(first_index, 0, "the first thread registered");
    // Its ring emptied and given back: its entry is free. Another thread may take it first
    // (another test's); then this one tries again. A try that took another entry stays parked,
    // holding that entry, until the end: the next try cannot take the same one again (vacated
    // entries are taken last in, first out), and, blocked, it is not sampled.
    let mut second = None;
    let mut parked = Vec::new();
    for _ in 0..200 {
        super::store::drain();
        let (release, wait) = mpsc::channel::<()>();
        let (told, told_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("second".into())
            .spawn(move || {
                super::threads::register_current(id);
                let index = own_index();
                if index == first_index {
                    assert!(spin_until_sampled(), "the second thread was sampled");
                    told.send((index, tid())).expect("send");
                } else {
                    told.send((index, tid())).expect("send");
                    let _ = wait.recv();
                }
            })
            .expect("spawn");
        let (index, second_tid) = told_rx.recv().expect("the try says which entry it took");
        if index == first_index {
            thread.join().expect("joined");
            second = Some(second_tid);
            break;
        }
        parked.push((release, thread));
    }
    for (release, thread) in parked {
        drop(release);
        thread.join().expect("joined");
    }
    let second_tid = second.expect("the second thread took the first one's entry");
    let data = session.samples();
    let first: Vec<_> = data
        .threads
        .iter()
        .filter(|t| t.name.as_deref() == Some("first"))
        .map(|t| (t.index, t.tid))
        .collect();
    assert_eq!(first.len(), 1, "one thread named first: {:?}", data.threads);
    assert_eq!(first[0].1, first_tid, "the first thread's tid");
    // By its tid: a parked try, named the same, may have been sampled too.
    let second: Vec<_> = data
        .threads
        .iter()
        .filter(|t| t.tid == second_tid)
        .map(|t| (t.index, t.tid))
        .collect();
    assert_eq!(second.len(), 1, "the second thread: {:?}", data.threads);
    assert!(
        data.threads
            .iter()
            .any(|t| t.tid == second_tid && t.name.as_deref() == Some("second")),
        "the second thread keeps its name: {:?}",
        data.threads
    );
    assert_ne!(first[0].0, second[0].0, "two threads, two indices");
    for (index, _) in [first[0], second[0]] {
        assert!(
            data.samples.iter().any(|s| s.thread == Some(index)),
            "samples name thread {index}"
        );
    }
}

/// The samples this thread has taken with its current ring (0 without one).
fn own_taken() -> u64 {
    let ring = super::threads::THREAD
        .with(|t| t.ring.load(Ordering::Acquire))
        .cast_const();
    // SAFETY: rings are leaked, never freed; this thread's was published by its arming.
    #[allow(unsafe_code)]
    unsafe { ring.as_ref() }.map_or(0, super::ring::Ring::taken)
}

/// CPU time of the clock `clock`, in nanoseconds.
fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes `ts`, a plain struct on the stack; `clock` is this
    // thread's clock or that of a live registered thread (read under the registry's lock).
    #[allow(unsafe_code)]
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Spins on this thread until it has used `ns` more of CPU time.
fn spin_cpu(ns: u64) {
    let start = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    while cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - start < ns {
        spin(10_000);
    }
}

/// A node's worker threads as the registry has them now: tid, samples taken, CPU time (ns).
fn workers(node: u32) -> Vec<(i32, u64, u64)> {
    let reg = super::threads::REGISTRY.lock();
    reg.occupied
        .iter()
        .map(|&i| &reg.threads[i as usize])
        .filter(|e| e.alive && e.node == node && e.name.as_deref() == Some("node-worker"))
        .map(|e| {
            (
                e.tid,
                e.ring.map_or(0, super::ring::Ring::taken),
                cpu_ns(e.clock),
            )
        })
        .collect()
}

/// Samples taken and CPU time used by a node's workers since `base` (each thread's own
/// counts: a thread not in `base` counts from 0); and the samples per thread.
fn since(node: u32, base: &[(i32, u64, u64)]) -> (u64, u64, Vec<(i32, u64)>) {
    let mut taken = 0;
    let mut cpu = 0;
    let mut each = Vec::new();
    for (tid, t, c) in workers(node) {
        let (t0, c0) = base
            .iter()
            .find(|b| b.0 == tid)
            .map_or((0, 0), |b| (b.1, b.2));
        taken += t - t0;
        cpu += c - c0;
        each.push((tid, t - t0));
    }
    (taken, cpu, each)
}

/// Waits (bounded) until `done` holds for a node's workers' counts since `base`.
fn wait_for(
    what: &str,
    node: u32,
    base: &[(i32, u64, u64)],
    done: impl Fn(u64, u64) -> bool,
) -> (u64, u64, Vec<(i32, u64)>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let now = since(node, base);
        if done(now.0, now.1) {
            return now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not in time ({} samples, {} ms of CPU)",
            now.0,
            now.1 / 1_000_000
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A process that spins until told to stop, yielding between rounds.
async fn spinner(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        spin(200_000);
        tokio::task::yield_now().await;
    }
}

/// CPU time the test waits for on a node's threads before it says they took no samples: at
/// 997 Hz, about 200 samples had their timers run.
const UNSAMPLED_CPU_NS: u64 = 200_000_000;

/// Two nodes, both busy: the CPU sampler times the threads of the nodes a CPU session is open
/// for, and no other node's. A session on A: A's workers take samples, B's none (their CPU
/// time is counted meanwhile: timers would have fired); a session on B too: B's take some;
/// A's closed: A's take none more while B's go on.
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn only_the_threads_of_sampled_nodes_take_cpu_samples() {
    let _serial = SERIAL.lock();
    let build = || {
        crate::Node::builder()
            .worker_threads(2)
            .build()
            .expect("node")
    };
    let (a, b) = (build(), build());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for node in [&a, &b] {
        for _ in 0..2 {
            let stop = stop.clone();
            node.spawn(spinner(stop)).expect("spawn");
        }
    }
    let base_a = workers(a.id());
    let base_b = workers(b.id());
    let session_a = a
        .sample_session(super::SampleOptions::new().hz(997))
        .expect("CPU session on A");
    let on_a = wait_for("A's workers sampled", a.id(), &base_a, |taken, _| {
        taken >= 20
    });
    let (b_taken, b_cpu, b_each) = wait_for("B's workers busy", b.id(), &base_b, |_, cpu| {
        cpu >= UNSAMPLED_CPU_NS
    });
    eprintln!(
        "session on A: A's workers took {:?}; B's {:?} in {} ms of CPU",
        on_a.2,
        b_each,
        b_cpu / 1_000_000
    );
    assert_eq!(b_taken, 0, "B's workers took samples for A's session");

    let base_b = workers(b.id());
    let session_b = b
        .sample_session(super::SampleOptions::new().hz(997))
        .expect("CPU session on B");
    let on_b = wait_for("B's workers sampled", b.id(), &base_b, |taken, _| {
        taken >= 20
    });
    eprintln!("sessions on A and B: B's workers took {:?}", on_b.2);

    drop(session_a);
    // A signal generated before A's timers went is delivered at once: let it come.
    let settle = workers(a.id());
    wait_for("A's workers busy", a.id(), &settle, |_, cpu| {
        cpu >= 20_000_000
    });
    let base_a = workers(a.id());
    let base_b = workers(b.id());
    let (a_taken, a_cpu, a_each) = wait_for("A's workers busy", a.id(), &base_a, |_, cpu| {
        cpu >= UNSAMPLED_CPU_NS
    });
    let on_b = wait_for("B's workers sampled", b.id(), &base_b, |taken, _| {
        taken >= 20
    });
    eprintln!(
        "session on B only: A's workers took {:?} in {} ms of CPU; B's {:?}",
        a_each,
        a_cpu / 1_000_000,
        on_b.2
    );
    assert_eq!(
        a_taken, 0,
        "A's workers took samples after A's session closed"
    );
    stop.store(true, Ordering::Relaxed);
    drop(session_b);
}

/// A thread of no node yet (registered with node 0) is timed while any CPU session runs, and
/// keeps its timer when it then polls a process of the sampled node: its samples are that
/// process's, in the session. A thread that first polls a process of a node no session
/// samples loses its timer, and gets it back when it polls a process of the sampled node (a
/// thread of a runtime two nodes share).
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn a_thread_of_no_node_or_of_two_is_sampled_for_the_sampled_node() {
    let _serial = SERIAL.lock();
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    };
    let (rt_a, rt_b) = (runtime(), runtime());
    let a = crate::Node::start_on(rt_a.handle().clone());
    let b = crate::Node::start_on(rt_b.handle().clone());
    let session = a
        .sample_session(super::SampleOptions::new().hz(997))
        .expect("CPU session on A");
    session
        .trace()
        .enable_trace(crate::trace::ProcessSpec::New, true)
        .expect("sample A's new processes");
    // Spins in a process until this thread has taken `n` more samples (bounded by CPU time).
    let sampled_in_a_process = |n: u64| {
        rt_a.block_on(a.run_async(async move {
            let before = own_taken();
            let start = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
            while own_taken() < before + n
                && cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - start < 60_000_000_000
            {
                spin(10_000);
            }
            (crate::self_pid(), own_taken() - before)
        }))
        .expect("the process ran")
    };
    // One after the other: a current-thread runtime runs its tasks on the thread that drives it.
    let (first, second) = std::thread::scope(|s| {
        let first = std::thread::Builder::new()
            .name("node-0-then-a".into())
            .spawn_scoped(s, || {
                super::threads::register_current(0);
                assert!(spin_until_sampled(), "timed while its node is unknown");
                let (pid, taken) = sampled_in_a_process(20);
                let node = super::threads::REGISTRY.lock().threads[own_index() as usize - 1].node;
                (pid, taken, node)
            })
            .expect("spawn")
            .join()
            .expect("joined");
        let second = std::thread::Builder::new()
            .name("node-0-then-b-then-a".into())
            .spawn_scoped(s, || {
                super::threads::register_current(0);
                assert!(spin_until_sampled(), "timed while its node is unknown");
                let on_b = rt_b
                    .block_on(b.run_async(async {
                        // A signal generated before its timer went is delivered at once.
                        spin_cpu(10_000_000);
                        let before = own_taken();
                        spin_cpu(UNSAMPLED_CPU_NS);
                        own_taken() - before
                    }))
                    .expect("the process ran");
                let (pid, taken) = sampled_in_a_process(20);
                (on_b, pid, taken)
            })
            .expect("spawn")
            .join()
            .expect("joined");
        (first, second)
    });
    let (first_pid, first_taken, first_node) = first;
    let (on_b, second_pid, second_taken) = second;
    eprintln!(
        "node 0 then A: {first_taken} samples in A's process; node 0 then B then A: {on_b} in \
         B's process, {second_taken} in A's"
    );
    assert_eq!(
        first_node,
        a.id(),
        "the thread took the node of its first process"
    );
    assert!(first_taken >= 20, "sampled in A's process: {first_taken}");
    assert_eq!(on_b, 0, "sampled in B's process, which no session samples");
    assert!(
        second_taken >= 20,
        "sampled in A's process again: {second_taken}"
    );
    let data = session.samples();
    for (pid, name) in [
        (first_pid, "node-0-then-a"),
        (second_pid, "node-0-then-b-then-a"),
    ] {
        let thread = data
            .threads
            .iter()
            .find(|t| t.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("a thread named {name}: {:?}", data.threads))
            .index;
        assert!(
            data.samples
                .iter()
                .any(|s| s.pid == Some(pid) && s.thread == Some(thread)),
            "A's session has samples of {pid} on {name}"
        );
    }
}

/// An overflow of a thread's perf event whose re-arming never happens (as if its signal were
/// lost: the test skips the handler's re-arming once) would stop sampling the thread for good.
/// The drain sees the thread's CPU clock run on while its event counts nothing, re-arms it,
/// and the session's figures say so: the thread is sampled again, and its row counts the lost
/// overflow and the CPU time in no sample because of it, and a warning names it.
#[test]
#[cfg_attr(
    miri,
    ignore = "signals, timers or a thread's stack bounds: FFI Miri cannot run"
)]
fn a_lost_overflow_is_re_armed_and_its_gap_reported() {
    if perf_events_refused() {
        return;
    }
    let _serial = SERIAL.lock();
    let node = crate::Node::builder()
        .worker_threads(1)
        .build()
        .expect("node");
    let session = node
        .sample_session(
            super::SampleOptions::new()
                .hz(499)
                .cpu_source(super::CpuSource::PerfEvents),
        )
        .expect("CPU session");
    let id = node.id();
    let (tid, after) = std::thread::Builder::new()
        .name("loses-one".into())
        .spawn(move || {
            super::threads::register_current(id);
            super::threads::THREAD.with(|t| t.skip_rearms.store(1, Ordering::Relaxed));
            assert!(spin_until_sampled(), "the first sample comes");
            let lost = own_taken();
            // Up to 20 s of CPU (at 499 Hz, 10,000 periods; the drain looks every 10 ms):
            // sampled again, or never.
            let start = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
            while own_taken() < lost + 5
                && cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - start < 20_000_000_000
            {
                spin_cpu(1_000_000);
            }
            // SAFETY: `gettid` has no preconditions.
            #[allow(unsafe_code)]
            let tid = unsafe { libc::gettid() };
            (tid, own_taken() - lost)
        })
        .expect("spawn")
        .join()
        .expect("joined");
    assert!(after >= 5, "sampled again after the lost overflow: {after}");
    let data = session.samples();
    let cpu = data.cpu.expect("coverage");
    let row = cpu
        .threads
        .iter()
        .find(|(i, _)| data.threads.iter().any(|t| t.index == *i && t.tid == tid))
        .map(|(_, t)| t.clone())
        .expect("the thread's row");
    assert_eq!(row.stalls, 1, "{row:?}");
    assert!(row.stalled_ns > 0, "{row:?}");
    let warnings = cpu.warnings(&|i| i.to_string());
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("lost 1 overflow signal(s)")),
        "{warnings:?}"
    );
}
