//! A thread's sample ring: fixed-size records written by the thread's own signal handler and
//! read by the drain, one producer and one consumer, without locks or allocation.
//!
//! Every field is an atomic, written with relaxed stores: the handler writes a slot's words,
//! then publishes the slot by advancing `head` with a release store; the drain reads `head`
//! with an acquire load, reads the published slots, and gives them back by advancing `tail`
//! with a release store, which the handler reads with an acquire load before it reuses a slot.
//! So no slot is read while it is written, and no `unsafe` is needed: a torn record cannot be
//! made even by a misbehaving caller, only a wrong one.
//!
//! There is one producer per ring (the thread that owns it: a signal handler does not nest
//! with itself, SIGPROF being blocked while its handler runs) and one consumer at a time (the
//! [drain](fn@super::store::drain) holds its lock while it reads).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Traced frames a record keeps (the innermost ones when there are more).
pub(crate) const MAX_TRACED: usize = 64;
/// Native frames a record keeps (the innermost ones when there are more).
pub(crate) const MAX_NATIVE: usize = 96;
/// Records a ring holds; the drain empties it every few milliseconds.
pub(crate) const SLOTS: usize = 256;

/// Records an allocation sampler's ring holds: at `sample_rate = 1` a process may allocate
/// thousands of blocks between two drains.
pub(crate) const ALLOC_SLOTS: usize = 2048;

/// Header words: pid, node and flags, time, weight and lengths, active sessions; an
/// allocation's size, address and estimated bytes; a CPU sample's CPU time and its thread's
/// CPU clock.
const HEADER: usize = 10;
const TRACED_WORDS: usize = MAX_TRACED / 2;
const SLOT_WORDS: usize = HEADER + TRACED_WORDS + MAX_NATIVE;

/// The record's traced stack was deeper than [`MAX_TRACED`].
pub(crate) const TRACED_TRUNCATED: u32 = 1;
/// The record's native stack was deeper than [`MAX_NATIVE`].
pub(crate) const NATIVE_TRUNCATED: u32 = 2;

/// One sample as the handler takes it, on the handler's stack: a few hundred words, written
/// into a slot word by word.
#[derive(Clone, Copy)]
pub(crate) struct Record {
    /// The raw pid of the process being polled, 0 for none.
    pub(crate) pid: u64,
    /// Its node (0 for none).
    pub(crate) node: u32,
    /// [`TRACED_TRUNCATED`], [`NATIVE_TRUNCATED`].
    pub(crate) flags: u32,
    /// CLOCK_MONOTONIC, in nanoseconds.
    pub(crate) time_ns: u64,
    /// Samples this record counts for when a full ring drops it: 1.
    pub(crate) weight: u32,
    /// The CPU time a CPU sample stands for, in nanoseconds: what its thread's CPU clock
    /// counted since the thread's previous sample (perf events), or the timer's periods (1
    /// plus its overruns) for the fallback.
    pub(crate) cpu_ns: u64,
    /// A CPU sample's thread CPU clock as it was taken, in nanoseconds (0: not read): what
    /// the drain clips its `cpu_ns` with, so that a session counts no CPU time from before it
    /// began counting the thread's.
    pub(crate) cpu_at: u64,
    /// The trace sessions measuring the poll.
    pub(crate) active: u64,
    /// A sampled allocation's size, in bytes (0 for CPU samples).
    pub(crate) size: u64,
    /// A sampled allocation's block address.
    pub(crate) addr: u64,
    /// The bytes a sampled allocation stands for (its inverse probability times its size).
    pub(crate) bytes: f64,
    pub(crate) traced_len: usize,
    /// Callsite ids, outermost first.
    pub(crate) traced: [u32; MAX_TRACED],
    pub(crate) native_len: usize,
    /// Instruction addresses, innermost first (the interrupted one, then return addresses).
    pub(crate) native: [u64; MAX_NATIVE],
}

impl Record {
    /// An empty record.
    pub(crate) const fn new() -> Record {
        Record {
            pid: 0,
            node: 0,
            flags: 0,
            time_ns: 0,
            weight: 0,
            cpu_ns: 0,
            cpu_at: 0,
            active: 0,
            size: 0,
            addr: 0,
            bytes: 0.0,
            traced_len: 0,
            traced: [0; MAX_TRACED],
            native_len: 0,
            native: [0; MAX_NATIVE],
        }
    }

    /// Fills in what this thread runs now: the pid being polled (if any) and its traced
    /// stack. Async-signal-safe, and neither locks nor allocates: it reads the thread's
    /// current-process pointer and its traced stack's signal-readable copy
    /// ([`crate::process::pid_in_signal`], [`crate::trace::read_in_signal`]); for the SIGPROF
    /// handler and the allocation recorder.
    #[inline]
    pub(crate) fn fill_current(&mut self) {
        if let Some(pid) = crate::process::pid_in_signal() {
            self.pid = u64::from(pid.index()) | u64::from(pid.serial()) << 32;
            self.node = pid.node();
        }
        let (active, n, depth) = crate::trace::read_in_signal(&mut self.traced);
        self.active = active;
        self.traced_len = n;
        if depth > n {
            self.flags |= TRACED_TRUNCATED;
        }
    }

    /// The traced frames kept.
    pub(crate) fn traced(&self) -> &[u32] {
        &self.traced[..self.traced_len]
    }

    /// The native frames kept.
    pub(crate) fn native(&self) -> &[u64] {
        &self.native[..self.native_len]
    }
}

/// A thread's ring of [`SLOTS`] records (or another number: [`Ring::with_slots`]).
pub(crate) struct Ring {
    words: Box<[AtomicU64]>,
    slots: u64,
    /// Records written so far (the next slot is `head % SLOTS`); written by the producer.
    head: AtomicU64,
    /// Records read so far; written by the consumer.
    tail: AtomicU64,
    /// Samples (CPU samples, or allocations) that found the ring full.
    dropped: AtomicU64,
    /// The CPU time dropped CPU samples stood for, in nanoseconds.
    dropped_ns: AtomicU64,
    /// The bytes that dropped allocation samples stood for.
    dropped_bytes: AtomicU64,
    /// The OS thread id of the thread that owns it now (0 while in the pool).
    pub(crate) tid: AtomicU32,
    /// The owning thread's timer (a `timer_t`) plus one, for the handler's overrun count; 0
    /// for none.
    timer: AtomicUsize,
    /// Records pushed since the ring was last reset, kept or dropped (tests: the samples a
    /// thread took).
    #[cfg(test)]
    taken: AtomicU64,
}

impl Ring {
    /// An empty ring (allocates [`SLOTS`] records' worth of words).
    pub(crate) fn new() -> Ring {
        Ring::with_slots(SLOTS)
    }

    /// An empty ring of `slots` records (at least 1).
    pub(crate) fn with_slots(slots: usize) -> Ring {
        let slots = slots.max(1);
        Ring {
            words: (0..slots * SLOT_WORDS).map(|_| AtomicU64::new(0)).collect(),
            slots: slots as u64,
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            dropped_ns: AtomicU64::new(0),
            dropped_bytes: AtomicU64::new(0),
            tid: AtomicU32::new(0),
            timer: AtomicUsize::new(0),
            #[cfg(test)]
            taken: AtomicU64::new(0),
        }
    }

    /// The owning thread's timer id, if it has a timer.
    #[inline]
    pub(crate) fn timer(&self) -> Option<usize> {
        self.timer.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Records the owning thread's timer id (`None`: it has none), under the registry's lock.
    /// Kept plus one: glibc's `timer_t` is the kernel's id, and a process's first is 0.
    pub(crate) fn set_timer(&self, timer: Option<usize>) {
        self.timer
            .store(timer.map_or(0, |id| id.wrapping_add(1)), Ordering::Relaxed);
    }

    fn slot(&self, n: u64) -> &[AtomicU64] {
        let i = (n % self.slots) as usize * SLOT_WORDS;
        &self.words[i..i + SLOT_WORDS]
    }

    /// Writes `r` into the next slot, or counts its weight as dropped when the ring is full.
    /// Async-signal-safe: relaxed stores into memory allocated before, two atomic loads and a
    /// release store; no lock, no allocation, no call.
    #[inline]
    pub(crate) fn push(&self, r: &Record) {
        #[cfg(test)]
        self.taken.fetch_add(1, Ordering::Relaxed);
        let head = self.head.load(Ordering::Relaxed);
        if head - self.tail.load(Ordering::Acquire) >= self.slots {
            self.dropped
                .fetch_add(u64::from(r.weight.max(1)), Ordering::Relaxed);
            self.dropped_ns.fetch_add(r.cpu_ns, Ordering::Relaxed);
            self.dropped_bytes
                .fetch_add(r.bytes as u64, Ordering::Relaxed);
            return;
        }
        let w = self.slot(head);
        let st = |i: usize, v: u64| w[i].store(v, Ordering::Relaxed);
        st(0, r.pid);
        st(1, u64::from(r.node) | u64::from(r.flags) << 32);
        st(2, r.time_ns);
        let lens = r.traced_len as u64 | (r.native_len as u64) << 16;
        st(3, u64::from(r.weight) | lens << 32);
        st(4, r.active);
        st(5, r.size);
        st(6, r.addr);
        st(7, r.bytes.to_bits());
        st(8, r.cpu_ns);
        st(9, r.cpu_at);
        for (k, pair) in r.traced().chunks(2).enumerate() {
            let hi = pair.get(1).copied().unwrap_or(0);
            st(HEADER + k, u64::from(pair[0]) | u64::from(hi) << 32);
        }
        for (k, addr) in r.native().iter().enumerate() {
            st(HEADER + TRACED_WORDS + k, *addr);
        }
        self.head.store(head + 1, Ordering::Release);
    }

    /// Reads every record written and not yet read, oldest first, into `each`, and frees their
    /// slots. One consumer at a time (see the module documentation).
    pub(crate) fn drain(&self, mut each: impl FnMut(&Record)) {
        let head = self.head.load(Ordering::Acquire);
        let mut tail = self.tail.load(Ordering::Relaxed);
        let mut r = Record::new();
        while tail < head {
            let w = self.slot(tail);
            let ld = |i: usize| w[i].load(Ordering::Relaxed);
            r.pid = ld(0);
            let node_flags = ld(1);
            r.node = node_flags as u32;
            r.flags = (node_flags >> 32) as u32;
            r.time_ns = ld(2);
            let weight_lens = ld(3);
            r.weight = weight_lens as u32;
            r.traced_len = ((weight_lens >> 32) & 0xffff) as usize;
            r.native_len = ((weight_lens >> 48) & 0xffff) as usize;
            r.traced_len = r.traced_len.min(MAX_TRACED);
            r.native_len = r.native_len.min(MAX_NATIVE);
            r.active = ld(4);
            r.size = ld(5);
            r.addr = ld(6);
            r.bytes = f64::from_bits(ld(7));
            r.cpu_ns = ld(8);
            r.cpu_at = ld(9);
            for k in 0..r.traced_len.div_ceil(2) {
                let pair = ld(HEADER + k);
                r.traced[2 * k] = pair as u32;
                if 2 * k + 1 < MAX_TRACED {
                    r.traced[2 * k + 1] = (pair >> 32) as u32;
                }
            }
            for k in 0..r.native_len {
                r.native[k] = ld(HEADER + TRACED_WORDS + k);
            }
            each(&r);
            tail += 1;
            // Give the slot back before reading the next, so a busy producer can go on.
            self.tail.store(tail, Ordering::Release);
        }
    }

    /// Records written and not yet drained (the producer's view: racing the drain, it may
    /// count a few already taken).
    #[inline]
    pub(crate) fn pending(&self) -> u64 {
        self.head.load(Ordering::Relaxed) - self.tail.load(Ordering::Relaxed)
    }

    /// Records written so far, drained or not.
    #[cfg(test)]
    pub(crate) fn written(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// Records pushed since the ring was last reset, kept or dropped: the samples its owner
    /// took.
    #[cfg(test)]
    pub(crate) fn taken(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }

    /// Samples dropped because the ring was full, since the last call (which takes them).
    pub(crate) fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }

    /// The CPU time dropped CPU samples stood for, in nanoseconds, since the last call (which
    /// takes it).
    pub(crate) fn take_dropped_ns(&self) -> u64 {
        self.dropped_ns.swap(0, Ordering::Relaxed)
    }

    /// The bytes dropped allocation samples stood for, since the last call (which takes them).
    pub(crate) fn take_dropped_bytes(&self) -> u64 {
        self.dropped_bytes.swap(0, Ordering::Relaxed)
    }

    /// Forgets everything not yet read (for a ring going back to the pool). Consumer only.
    pub(crate) fn reset(&self) {
        let head = self.head.load(Ordering::Acquire);
        self.tail.store(head, Ordering::Release);
        self.dropped.store(0, Ordering::Relaxed);
        self.dropped_ns.store(0, Ordering::Relaxed);
        self.dropped_bytes.store(0, Ordering::Relaxed);
        self.timer.store(0, Ordering::Relaxed);
        self.tid.store(0, Ordering::Relaxed);
        #[cfg(test)]
        self.taken.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: u32, traced: usize, native: usize) -> Record {
        let mut r = Record::new();
        r.pid = u64::from(i) + 1;
        r.node = 7;
        r.flags = NATIVE_TRUNCATED;
        r.time_ns = u64::from(i) * 1000;
        r.weight = 1 + i % 3;
        r.active = 0b101;
        r.size = u64::from(i) * 8 + 1;
        r.addr = 0x7000_0000 + u64::from(i);
        r.bytes = f64::from(i) * 1.5;
        r.cpu_ns = (1 << 40) + u64::from(i) * 1_000_003;
        r.cpu_at = (1 << 41) + u64::from(i);
        r.traced_len = traced;
        for k in 0..traced {
            r.traced[k] = i * 100 + k as u32;
        }
        r.native_len = native;
        for k in 0..native {
            r.native[k] = 0x4000_0000 + u64::from(i) * 0x100 + k as u64;
        }
        r
    }

    /// Records come out as they went in, oldest first, odd and full lengths included.
    #[test]
    fn records_round_trip_in_order() {
        let ring = Ring::with_slots(8);
        let shapes = [(0, 0), (1, 1), (3, 2), (MAX_TRACED, MAX_NATIVE), (7, 0)];
        for (i, (t, n)) in shapes.iter().enumerate() {
            ring.push(&record(i as u32, *t, *n));
        }
        let mut seen = Vec::new();
        ring.drain(|r| {
            seen.push((
                r.pid,
                r.node,
                r.flags,
                r.time_ns,
                r.weight,
                r.active,
                r.traced().to_vec(),
                r.native().to_vec(),
                (r.size, r.addr, r.bytes, r.cpu_ns, r.cpu_at),
            ))
        });
        assert_eq!(seen.len(), shapes.len());
        for (i, (t, n)) in shapes.iter().enumerate() {
            let want = record(i as u32, *t, *n);
            let got = &seen[i];
            assert_eq!(got.0, want.pid);
            assert_eq!(got.1, 7);
            assert_eq!(got.2, NATIVE_TRUNCATED);
            assert_eq!(got.3, want.time_ns);
            assert_eq!(got.4, want.weight);
            assert_eq!(got.5, 0b101);
            assert_eq!(got.6, want.traced());
            assert_eq!(got.7, want.native());
            assert_eq!(
                got.8,
                (want.size, want.addr, want.bytes, want.cpu_ns, want.cpu_at)
            );
        }
        let mut again = 0;
        ring.drain(|_| again += 1);
        assert_eq!(again, 0, "a drained record is read once");
    }

    /// A full ring counts the weight of what it cannot keep, keeps what it has, and takes
    /// records again once drained.
    #[test]
    fn a_full_ring_counts_drops_and_recovers() {
        // A smaller ring under Miri: its words are most of the test's time there.
        let slots = if cfg!(miri) { 16 } else { SLOTS };
        let ring = Ring::with_slots(slots);
        for i in 0..slots as u32 + 5 {
            let mut r = record(i, 2, 2);
            r.weight = 2;
            r.cpu_ns = 1_000;
            ring.push(&r);
        }
        assert_eq!(ring.take_dropped(), 10);
        assert_eq!(ring.take_dropped(), 0);
        assert_eq!(
            ring.take_dropped_ns(),
            5_000,
            "the CPU time of the 5 dropped"
        );
        assert_eq!(ring.take_dropped_ns(), 0);
        let mut pids = Vec::new();
        ring.drain(|r| pids.push(r.pid));
        assert_eq!(pids, (1..=slots as u64).collect::<Vec<_>>());
        ring.push(&record(1000, 1, 1));
        let mut after = Vec::new();
        ring.drain(|r| after.push(r.pid));
        assert_eq!(after, vec![1001]);
    }

    /// A producer and a consumer on two threads: every record arrives once, whole, in order.
    #[test]
    fn one_producer_one_consumer_across_threads() {
        // Under Miri, a smaller ring, wrapped some twenty times.
        let (slots, total) = if cfg!(miri) {
            (16, 300u32)
        } else {
            (SLOTS, 20_000)
        };
        let ring = std::sync::Arc::new(Ring::with_slots(slots));
        let producer = {
            let ring = std::sync::Arc::clone(&ring);
            std::thread::Builder::new()
                .name("producer".into())
                .spawn(move || {
                    let mut i = 0;
                    while i < total {
                        ring.push(&record(i, (i % 9) as usize, (i % 13) as usize));
                        if ring.take_dropped() == 0 {
                            i += 1;
                        } else {
                            std::thread::yield_now();
                        }
                    }
                })
                .expect("spawn")
        };
        let mut next = 0u32;
        while next < total {
            ring.drain(|r| {
                let want = record(next, (next % 9) as usize, (next % 13) as usize);
                assert_eq!(r.pid, want.pid);
                assert_eq!(r.traced(), want.traced());
                assert_eq!(r.native(), want.native());
                next += 1;
            });
            std::thread::yield_now();
        }
        producer.join().expect("producer");
    }
}
