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
/// the handler ran many times and allocated nothing.
#[test]
fn the_handler_neither_locks_nor_allocates() {
    let _serial = SERIAL.lock();
    super::cpu::start(997).expect("start the sampler");
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
            let registry = super::threads::REGISTRY.lock();
            let drain = super::store::lock_drain_for_test();
            let stores = super::store::lock_stores_for_test();
            let paths = super::paths::lock_table_for_test();
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
    super::cpu::stop();
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
            let registry = super::threads::REGISTRY.lock();
            let drain = super::store::lock_drain_for_test();
            let stores = super::store::lock_stores_for_test();
            let alloc_stores = super::store::lock_alloc_stores_for_test();
            let paths = super::paths::lock_table_for_test();
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
fn another_sigprof_handler_is_refused_not_replaced() {
    let _serial = SERIAL.lock();
    // SAFETY: installs a handler that does nothing, then puts the default back; no other test
    // of this binary sends SIGPROF while `SERIAL` is held.
    #[allow(unsafe_code)]
    let set = |handler: libc::sighandler_t| unsafe {
        libc::signal(libc::SIGPROF, handler);
    };
    set(foreign as *const () as libc::sighandler_t);
    let refused = super::cpu::start(997);
    set(libc::SIG_DFL);
    assert!(
        matches!(refused, Err(super::SampleError::SignalTaken)),
        "{refused:?}"
    );
    super::cpu::start(997).expect("starts once the other handler is gone");
    super::cpu::stop();
}

/// Frees of sampled blocks that find the queue of frees full are lost (their blocks stay in
/// the live set), and the session says how many: every one the queue dropped. Here
/// the drain is held off while the queue is filled and overrun by a known number, so the count
/// does not depend on how fast the drain thread runs; frees that fit lose none.
#[test]
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
