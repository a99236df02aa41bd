//! The allocation sampler: what a sampled allocation records, from inside the allocator.
//!
//! The counting allocator decides which allocations are sampled (`crate::heap`'s sampling
//! hook: a per-thread countdown) and calls [`record`] for each one. [`record`] writes one
//! fixed-size record — size, block address, the bytes it stands for, the pid being polled, the
//! trace sessions measuring the poll and the traced stack, the native stack walked by frame
//! pointers, a timestamp — into the thread's own allocation ring, which the drain
//! ([`super::store`]) empties into the sessions' stores, as it does the CPU sampler's rings. A
//! full ring counts the allocation (and its bytes) as dropped.
//!
//! The live set: the allocator marks each sampled block, and the free of a marked block calls
//! [`freed`], which puts its address and the time into one queue of fixed slots shared by every
//! thread (frees of sampled blocks are as rare as samples, and may happen on any thread,
//! registered or not). The drain takes them out and, ordering frees and allocations by time,
//! marks the samples of freed blocks as no longer live ([`super::store`]). A full queue drops
//! the free and counts it: the block then stays in the live set until the next sampled block
//! at its address, and the count reaches every open allocation session as
//! [`SampleData::lost_frees`](super::SampleData::lost_frees) (the in-use figures may
//! over-count by as many blocks), and from there the profile, its reports and exports.
//!
//! # Never allocating, never locking
//!
//! [`record`] runs inside the allocator: it may not allocate, lock or unwind. It reads this
//! thread's [`ThreadSlot`](super::threads::ThreadSlot), the current pid
//! ([`crate::process::pid_in_signal`]) and the traced stack ([`crate::trace::read_in_signal`]),
//! all `const` thread-locals without destructors holding atomics (so reading them registers
//! nothing and allocates nothing); calls `clock_gettime` (a system call); walks frame pointers
//! inside the thread's stack ([`super::native::walk_here`]); and writes the record into the
//! ring ([`super::ring::Ring::push`]: relaxed stores into memory allocated beforehand, when the
//! thread was given the ring under the registry's lock, outside the allocator). The test
//! `the_alloc_sampler_neither_locks_nor_allocates` allocates through a counting allocator with
//! every allocation sampled while holding every lock the sampler's code takes, and checks that
//! records were written and that nothing was allocated through the global allocator.

#![cfg(target_os = "linux")]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::ring::{ALLOC_SLOTS, MAX_NATIVE, NATIVE_TRUNCATED, Record, Ring};
use super::threads::{REGISTRY, Registry, THREAD, ThreadEntry, bounds_in_signal};
use super::{AllocRate, SampleError};
use crate::heap::AllocModel;

/// Whether the allocation sampler runs.
#[inline(always)]
pub(crate) fn running() -> bool {
    super::threads::running(super::threads::ALLOC)
}

/// The allocator's model for `rate`.
fn model_of(rate: AllocRate) -> AllocModel {
    match rate {
        AllocRate::Bytes(bytes) => AllocModel::Bytes(bytes),
        AllocRate::SampleRate(p) => AllocModel::Probability(p),
    }
}

/// The rate the allocator runs with.
fn rate_of(model: AllocModel) -> AllocRate {
    match model {
        AllocModel::Bytes(bytes) => AllocRate::Bytes(bytes),
        AllocModel::Probability(p) => AllocRate::SampleRate(p),
    }
}

/// Starts sampling allocations at `rate`, giving every registered thread a ring; or joins the
/// sampler already running at that rate (one model per program: the allocator has one
/// countdown per thread).
pub(crate) fn start(rate: AllocRate) -> Result<(), SampleError> {
    let mut guard = REGISTRY.lock();
    if running() {
        let running = rate_of(crate::heap::alloc_sampling::model());
        if running != rate {
            return Err(SampleError::AllocRateTaken {
                running,
                asked: rate,
            });
        }
        return Ok(());
    }
    super::threads::set_running(super::threads::ALLOC, true);
    let Registry {
        threads,
        occupied,
        alloc_pool,
        ..
    } = &mut *guard;
    for &i in occupied.iter() {
        arm(&mut threads[i as usize], alloc_pool);
    }
    crate::heap::alloc_sampling::start(model_of(rate), record, freed);
    Ok(())
}

/// Stops sampling allocations. Threads keep their rings (for the next session).
pub(crate) fn stop() {
    let _reg = REGISTRY.lock();
    crate::heap::alloc_sampling::stop();
    super::threads::set_running(super::threads::ALLOC, false);
}

/// Gives `entry`'s thread an allocation ring (from `pool`, or a new one), under the registry's
/// lock.
pub(crate) fn arm(entry: &mut ThreadEntry, pool: &mut Vec<&'static Ring>) {
    if entry.alloc_ring.is_some() || !entry.alive {
        return;
    }
    let ring = pool.pop().unwrap_or_else(|| {
        crate::heap::suppressed(|| Box::leak(Box::new(Ring::with_slots(ALLOC_SLOTS))))
    });
    ring.tid.store(entry.tid as u32, Ordering::Relaxed);
    entry.alloc_ring = Some(ring);
    entry.publish_alloc_ring(Some(ring));
}

/// Records a sampled allocation of `size` bytes at `block`, standing for `bytes` bytes, into
/// this thread's ring (nothing when the thread has none). Called by the allocator: see the
/// module documentation for why it neither allocates nor locks.
pub(crate) fn record(block: *mut u8, size: usize, bytes: f64) {
    let _ = THREAD.try_with(|t| {
        let ring = t.alloc_ring.load(Ordering::Acquire);
        // SAFETY: a non-null ring pointer was made from a `&'static Ring` (rings are leaked
        // and pooled, never freed) by this thread's registration or the sampler's start.
        #[allow(unsafe_code)]
        let Some(ring) = (unsafe { ring.as_ref() }) else {
            return;
        };
        let mut r = Record::new();
        r.weight = 1;
        r.time_ns = super::cpu::monotonic_ns();
        r.size = size as u64;
        r.addr = block as u64;
        r.bytes = bytes;
        r.fill_current();
        let (len, more) = super::native::walk_here(bounds_in_signal(t), &mut r.native);
        r.native_len = len;
        if more {
            r.flags |= NATIVE_TRUNCATED;
        }
        debug_assert!(r.native_len <= MAX_NATIVE);
        ring.push(&r);
    });
}

/// Slots of the queue of frees of sampled blocks.
pub(crate) const FREE_SLOTS: usize = 4096;
/// A slot being written.
const BUSY: u64 = u64::MAX;
/// Each slot's block address (0: empty, [`BUSY`]: being written).
static FREE_ADDR: [AtomicU64; FREE_SLOTS] = [const { AtomicU64::new(0) }; FREE_SLOTS];
/// Each slot's time of the free (CLOCK_MONOTONIC, ns).
static FREE_TIME: [AtomicU64; FREE_SLOTS] = [const { AtomicU64::new(0) }; FREE_SLOTS];
/// Where the next free looks for an empty slot first.
static FREE_NEXT: AtomicUsize = AtomicUsize::new(0);
/// Frees that found no empty slot.
static FREE_DROPPED: AtomicU64 = AtomicU64::new(0);

/// Notes the free of sampled block `block`. Called by the allocator: atomics on static slots
/// and `clock_gettime` only, no lock, no allocation. A slot is claimed by a compare-and-swap from
/// empty to busy, so two threads never write one; after 8 busy slots the free is dropped.
pub(crate) fn freed(block: *mut u8) {
    let addr = block as u64;
    if addr == 0 || addr == BUSY {
        return;
    }
    let start = FREE_NEXT.fetch_add(1, Ordering::Relaxed);
    for k in 0..8 {
        let i = (start + k) % FREE_SLOTS;
        if FREE_ADDR[i]
            .compare_exchange(0, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            FREE_TIME[i].store(super::cpu::monotonic_ns(), Ordering::Relaxed);
            FREE_ADDR[i].store(addr, Ordering::Release);
            return;
        }
    }
    FREE_DROPPED.fetch_add(1, Ordering::Relaxed);
}

/// Takes every free noted so far, as (address, time), into `out`. The drain's, under its lock.
pub(crate) fn take_frees(out: &mut Vec<(u64, u64)>) {
    for (addr, time) in FREE_ADDR.iter().zip(&FREE_TIME) {
        let a = addr.load(Ordering::Acquire);
        if a == 0 || a == BUSY {
            continue;
        }
        let t = time.load(Ordering::Relaxed);
        addr.store(0, Ordering::Release);
        out.push((a, t));
    }
}

/// Frees of sampled blocks dropped because the queue was full, since the last call.
pub(crate) fn take_dropped_frees() -> u64 {
    FREE_DROPPED.swap(0, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queue of frees on its own, no sampler running: frees noted by several threads at
    /// once while the drain takes them each come out once, with times in the order each
    /// thread noted them; and once the queue is full, each free more is counted as dropped.
    /// Under Miri this checks the slots' protocol (claimed empty to busy, published, taken)
    /// between the threads.
    #[test]
    fn frees_noted_by_many_threads_come_out_once_each() {
        let _serial = super::super::tests::SERIAL.lock();
        // The drain's lock makes this test the queue's one consumer; another test's sampled
        // frees may still come in, hence addresses no block has.
        let _drain = super::super::store::lock_drain_for_test();
        take_frees(&mut Vec::new());
        take_dropped_frees();
        let ours = |addr: u64| (0xdead_0000_0000..0xdead_1000_0000).contains(&addr);
        let addr = |thread: u64, i: u64| 0xdead_0000_0000 + (thread << 20) + 16 * i;
        let (threads, each) = (3, if cfg!(miri) { 24 } else { 1_000 });
        let noters: Vec<_> = (0..threads)
            .map(|t| {
                std::thread::Builder::new()
                    .name("freer".into())
                    .spawn(move || {
                        for i in 0..each {
                            freed(addr(t, i) as *mut u8);
                        }
                    })
                    .expect("spawn")
            })
            .collect();
        let mut seen = Vec::new();
        while seen.len() < (threads * each) as usize {
            let mut taken = Vec::new();
            take_frees(&mut taken);
            seen.extend(taken.into_iter().filter(|&(a, _)| ours(a)));
            std::thread::yield_now();
        }
        for noter in noters {
            noter.join().expect("freer");
        }
        take_frees(&mut seen);
        seen.retain(|&(a, _)| ours(a));
        assert_eq!(
            take_dropped_frees(),
            0,
            "nothing dropped while the queue had room"
        );
        seen.sort_unstable();
        for t in 0..threads {
            let times: Vec<u64> = (0..each)
                .map(|i| {
                    let at = seen
                        .binary_search_by_key(&addr(t, i), |&(a, _)| a)
                        .expect("every free comes out");
                    seen[at].1
                })
                .collect();
            assert!(times.is_sorted(), "thread {t}'s frees out of order");
        }
        seen.dedup_by_key(|&mut (a, _)| a);
        assert_eq!(
            seen.len(),
            (threads * each) as usize,
            "a free came out twice"
        );

        // A full queue: each free more is dropped and counted. Not under Miri (its time: 4,096
        // frees), where the slots' protocol between threads above is what is checked.
        if cfg!(miri) {
            return;
        }
        for i in 0..FREE_SLOTS as u64 + 5 {
            freed(addr(0, i) as *mut u8);
        }
        assert!(take_dropped_frees() >= 5);
        let mut rest = Vec::new();
        take_frees(&mut rest);
        assert!(rest.len() <= FREE_SLOTS);
        assert!(rest.iter().filter(|&&(a, _)| ours(a)).count() >= FREE_SLOTS - 5);
    }
}
