//! Where samples go: per sample session, a bounded store, with a CPU session's figures of
//! what its samples saw; and ([`drain`](mod@drain)) the drain that moves the CPU sampler's and
//! the allocation sampler's records from the threads' rings into the stores of the sessions
//! they belong to.
//!
//! The drain runs on a thread of its own every [`DRAIN_EVERY`](drain::DRAIN_EVERY) while a CPU
//! or allocation sample session is open, and at every read of a session's samples, so a read
//! sees every sample taken before it.
//! It runs with allocation charging suppressed, so it is never charged to a process.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::ring::Record;
use super::threads::{Identity, REGISTRY};
use super::truth::{BUSY_THREAD_NS, CpuCoverage, CpuSource, ThreadCoverage};
use super::{Sample, SampledThread, Sampler};

mod drain;
use drain::{DRAIN, take_free_after};
pub(crate) use drain::{add_store, drain, remove_store};
#[cfg(test)]
pub(crate) use drain::{lock_alloc_stores_for_test, lock_drain_for_test, lock_stores_for_test};

/// A sample session's samples, bounded by its capacity.
pub(crate) struct Store {
    /// The session's slot.
    pub(crate) bit: u32,
    /// Its node.
    pub(crate) node: u32,
    pub(crate) sampler: Sampler,
    /// Samples kept at most (Julia's `n`).
    pub(crate) capacity: usize,
    /// The rate asked, in Hz (CPU and wall samplers): a CPU sample's weight is its CPU time
    /// over `1 / hz`.
    pub(crate) hz: u32,
    /// CLOCK_MONOTONIC when the session opened (or was last cleared), in nanoseconds.
    pub(crate) started_ns: Mutex<u64>,
    pub(crate) inner: Mutex<StoreInner>,
}

/// What a [`Store`] holds.
#[derive(Default)]
pub(crate) struct StoreInner {
    pub(crate) samples: Vec<Sample>,
    /// Timer periods (CPU), process-samples (wall) or bytes (allocations) lost: the store or a
    /// ring was full.
    pub(crate) dropped: f64,
    /// Allocation samples: frees of sampled blocks dropped because the queue of frees was full
    /// (their blocks stay in the live set).
    pub(crate) lost_frees: u64,
    /// Samples kept of a process in a poll the session did not measure: one that began before
    /// the session opened (or before it flagged the process; wall samples: a poll no wall
    /// session measured, run now or suspended in). The traced frames the process had entered
    /// are unknown (a traced call pushes a frame only for the sessions measuring its poll, so
    /// that a call nothing traces costs no more): a CPU sample has its native frames alone
    /// ([`SampleData::before_sampling`](super::SampleData::before_sampling)).
    pub(crate) before_sampling: u64,
    /// Whether the full store has been reported.
    pub(crate) warned: bool,
    /// The threads the samples were taken on, as the drain found them: a sample's `thread` is
    /// an index into it.
    pub(crate) threads: Vec<SampledThread>,
    /// Each of `threads` by registry index and generation (one registration of a thread).
    thread_numbers: HashMap<(u32, u64), u32>,
    /// Allocation samples: the live ones, by block address (an index into `samples`).
    live: HashMap<u64, usize>,
    /// Allocation samples: frees of sampled blocks not matched yet (their allocation's record
    /// may come at the next drain), by address: each free's time (relative to the start) and
    /// drain pass. An address has as many as were freed since its samples last came: a block
    /// freed and allocated anew at one address, over and over, between a drain's pass over
    /// its thread's ring and its take of the frees, leaves one free per sample to come.
    pending_frees: HashMap<u64, Vec<(u64, u64)>>,
    /// Drain passes that brought frees.
    passes: u64,
    /// CPU samples: what each timed thread's CPU time counts from, and what its samples stand
    /// for.
    coverage: Coverage,
}

/// A registered thread, by registry index and generation (one registration).
type ThreadKey = (u32, u64);

/// What a CPU session knows of the threads it timed ([`Store::coverage`]).
#[derive(Default)]
struct Coverage {
    /// The mechanism and why it is the fallback, as the session found the sampler.
    source: CpuSource,
    fallback: Option<String>,
    /// Whether the perf events sample kernel mode too.
    kernel: bool,
    /// Each thread's CPU clock when the session began counting it (at its opening or last
    /// clear); a thread registered later counts from its registration.
    base: HashMap<ThreadKey, u64>,
    /// What the drain saw of each thread's samples, and of its exit.
    threads: HashMap<ThreadKey, Tally>,
    /// Exited threads with neither a sample kept nor [`BUSY_THREAD_NS`] of CPU, summed: one row,
    /// so that a program whose thread pool churns does not grow the session by a row a thread.
    exited: ThreadCoverage,
}

/// One thread's figures in a [`Coverage`].
#[derive(Default)]
struct Tally {
    sampled_ns: u64,
    samples: u64,
    /// Its samples that are not the session's (another node's process, a process the session
    /// does not sample, time outside processes on another node's thread), and the CPU time
    /// they stand for: left out of its CPU time, as out of the profile.
    elsewhere_ns: u64,
    elsewhere: u64,
    /// Overflows of its perf event lost and re-armed by the drain, and the CPU time in no
    /// sample because of them ([`super::cpu::guard`]).
    stalls: u64,
    stalled_ns: u64,
    /// Its CPU time from its base to its exit, once it has exited and been drained.
    exited_cpu: Option<u64>,
    /// Its CPU clock as the drain last emptied its ring (while it lived): the figures' "now"
    /// for it, so that its CPU time ends where its drained samples do, give or take the
    /// current period. Read any later (when the figures are taken), the CPU it used between
    /// the drain and that reading, which no drained sample can stand for yet, counted as
    /// missed: a reader descheduled for a time slice (~4 ms on a loaded 2-core machine)
    /// between the two made a 10 kHz profile of two spinning threads read 98.2 % captured.
    drained_cpu: Option<u64>,
    fallback: bool,
    unarmed: bool,
    /// Who it was, for a thread that has exited (its registry entry may be reused).
    identity: Option<Identity>,
}

/// Exited threads kept as rows of their own, at most, beyond which they are summed.
const EXITED_ROWS: usize = 4096;

impl Coverage {
    /// Counts a sample (or `samples` dropped ones) standing for `cpu_ns` on thread `key`.
    fn add(&mut self, key: ThreadKey, cpu_ns: u64, samples: u64) {
        let t = self.threads.entry(key).or_default();
        t.sampled_ns += cpu_ns;
        t.samples += samples;
    }

    /// Thread `key`'s CPU clock (`cpu`) as the drain emptied its ring.
    fn drained(&mut self, key: ThreadKey, cpu: u64) {
        self.threads.entry(key).or_default().drained_cpu = Some(cpu);
    }

    /// Counts a lost overflow of thread `key`'s perf event, re-armed after `gap_ns` of its
    /// CPU time in no sample.
    fn add_stall(&mut self, key: ThreadKey, gap_ns: u64) {
        let t = self.threads.entry(key).or_default();
        t.stalls += 1;
        t.stalled_ns += gap_ns;
    }

    /// Counts a sample of thread `key` standing for `cpu_ns` that is not the session's: its
    /// CPU time is left out of the thread's, as the sample is out of the profile.
    fn add_elsewhere(&mut self, key: ThreadKey, cpu_ns: u64) {
        let t = self.threads.entry(key).or_default();
        t.elsewhere_ns += cpu_ns;
        t.elsewhere += 1;
    }

    /// The CPU time of `r` (a sample of thread `key`, registered with its CPU clock at
    /// `registered`) that falls in the session: the CPU its thread's clock counted since its
    /// previous sample, but none from before the session began counting the thread (its
    /// base, read at the session's opening or last clear, else its registration). So the
    /// samples' CPU time and the thread's come from one origin, and a sample whose previous
    /// one came before the session (its thread armed earlier, by this session's arming or
    /// another session's) does not push the session's captured share past 100 %. `None` for
    /// a sample taken before the session began counting the thread.
    fn share(&self, key: ThreadKey, registered: u64, r: &Record) -> Option<u64> {
        if r.cpu_at == 0 {
            // The clock could not be read in the handler: the sample's own figure.
            return Some(r.cpu_ns);
        }
        let base = self.base.get(&key).copied().unwrap_or(registered);
        let since = r.cpu_at.checked_sub(base).filter(|&ns| ns > 0)?;
        Some(r.cpu_ns.min(since))
    }
}

impl StoreInner {
    /// `thread`'s index in [`threads`](Self::threads), added the first time.
    fn thread_number(&mut self, thread: &Identity) -> u32 {
        let threads = &mut self.threads;
        *self
            .thread_numbers
            .entry((thread.index, thread.generation))
            .or_insert_with(|| {
                let index = threads.len() as u32;
                threads.push(SampledThread {
                    index,
                    tid: thread.tid,
                    name: thread.name.as_deref().map(str::to_owned),
                });
                index
            })
    }
}

impl Store {
    pub(crate) fn new(bit: u32, node: u32, sampler: Sampler, capacity: usize, hz: u32) -> Store {
        Store {
            bit,
            node,
            sampler,
            capacity,
            hz,
            started_ns: Mutex::new(now_ns()),
            inner: Mutex::new(StoreInner::default()),
        }
    }

    /// Keeps `sample` (a wall sample), or counts it as dropped when the store is full (saying
    /// so on stderr the first time).
    pub(crate) fn keep(&self, sample: Sample) {
        self.keep_in(&mut self.inner.lock(), sample, None);
    }

    /// [`keep`](Self::keep) under the lock, naming the thread the sample was taken on (written
    /// in the sample as an index into the store's threads); the sample's index if kept. A kept
    /// sample taken in a poll begun before sampling began ([`Sample::before_sampling`]) is
    /// counted in [`StoreInner::before_sampling`], whatever the sampler.
    fn keep_in(
        &self,
        inner: &mut StoreInner,
        mut sample: Sample,
        thread: Option<&Identity>,
    ) -> Option<usize> {
        if inner.samples.len() < self.capacity {
            sample.thread = thread.map(|t| inner.thread_number(t));
            inner.before_sampling += u64::from(sample.before_sampling);
            inner.samples.push(sample);
            return Some(inner.samples.len() - 1);
        }
        self.drop_in(inner, sample.weight);
        None
    }

    /// Counts `weight` of samples the full buffer could not keep (saying so on stderr the
    /// first time).
    pub(crate) fn drop_full(&self, weight: f64) {
        self.drop_in(&mut self.inner.lock(), weight);
    }

    fn drop_in(&self, inner: &mut StoreInner, weight: f64) {
        inner.dropped += weight;
        if !inner.warned {
            inner.warned = true;
            eprintln!(
                "tprof: the sample buffer of node {}'s {} sample session is full ({} samples); \
                 later samples are dropped and counted. Raise the buffer's size \
                 (SampleOptions::n, or `tprof run --sample-n`, TPROF_RUN_SAMPLE_N), lower the rate, or \
                 read and clear the samples more often",
                self.node,
                self.sampler.name(),
                self.capacity
            );
        }
    }

    /// Takes in a drain's allocation samples and the frees of sampled blocks (address and
    /// absolute time), in time order: a free takes its block's sample out of the live set; a
    /// free seen before its block's sample waits two drains for it, and a sample that comes
    /// takes the first free of its address at or after it (each free frees one sample); a new
    /// sampled block at the address of a live one means that one was freed unseen. `lost` frees of sampled blocks
    /// found the queue full: counted, as their blocks stay in the live set.
    fn keep_allocations(
        &self,
        samples: Vec<(Sample, &Identity)>,
        frees: &[(u64, u64)],
        started: u64,
        lost: u64,
    ) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        inner.lost_frees += lost;
        inner.passes += 1;
        let pass = inner.passes;
        // (time, free first at a tie: the same address's block freed then allocated anew)
        let mut events: Vec<(u64, bool, usize)> = samples
            .iter()
            .enumerate()
            .map(|(i, (s, _))| (s.time_ns, false, i))
            .collect();
        events.extend(
            frees
                .iter()
                .enumerate()
                .filter(|(_, (_, t))| *t >= started)
                .map(|(i, (_, t))| (t - started, true, i)),
        );
        events.sort_unstable_by_key(|&(t, free, _)| (t, !free));
        let mut samples: Vec<Option<(Sample, &Identity)>> = samples.into_iter().map(Some).collect();
        for (time, free, i) in events {
            if free {
                let addr = frees[i].0;
                match inner.live.get(&addr) {
                    Some(&j) if inner.samples[j].time_ns <= time => {
                        inner.samples[j].live = false;
                        inner.live.remove(&addr);
                    }
                    _ => {
                        inner
                            .pending_frees
                            .entry(addr)
                            .or_default()
                            .push((time, pass));
                    }
                }
                continue;
            }
            let Some((mut sample, thread)) = samples[i].take() else {
                continue;
            };
            let addr = sample.address;
            let freed = take_free_after(&mut inner.pending_frees, addr, sample.time_ns);
            sample.live = !freed;
            if let Some(j) = self.keep_in(inner, sample, Some(thread))
                && !freed
                && let Some(old) = inner.live.insert(addr, j)
            {
                inner.samples[old].live = false;
            }
        }
        inner.pending_frees.retain(|_, frees| {
            frees.retain(|(_, seen)| pass.saturating_sub(*seen) < 2);
            !frees.is_empty()
        });
    }

    /// Whether the buffer is full (what comes now is dropped).
    pub(crate) fn is_full(&self) -> bool {
        self.inner.lock().samples.len() >= self.capacity
    }

    /// Counts `weight` as dropped.
    pub(crate) fn drop_weight(&self, weight: f64) {
        self.inner.lock().dropped += weight;
    }

    /// Forgets every sample and drop, and starts the clock again (Julia's `clear`).
    pub(crate) fn clear(&self) {
        *self.inner.lock() = StoreInner::default();
        *self.started_ns.lock() = now_ns();
    }

    /// CPU time as periods of the rate asked: a CPU sample's weight.
    fn periods(&self, cpu_ns: u64) -> f64 {
        cpu_ns as f64 * f64::from(self.hz.max(1)) / 1e9
    }

    /// Whether this (CPU) session times a thread registered for `node` (`shared` when it polls
    /// several nodes' processes): the CPU sampler times it while this session is open.
    fn times(&self, node: u32, shared: bool) -> bool {
        node == self.node || node == 0 || shared
    }

    /// A CPU session begins counting its threads' CPU time: each registered thread's CPU
    /// clock now, and the mechanism the sampler runs on. At its opening and at each clear.
    #[cfg(target_os = "linux")]
    pub(crate) fn begin_coverage(&self) {
        let reg = REGISTRY.lock();
        let base: HashMap<ThreadKey, u64> = reg
            .occupied
            .iter()
            .map(|&i| {
                let e = &reg.threads[i as usize];
                ((i, e.generation), e.cpu_now())
            })
            .collect();
        let mut inner = self.inner.lock();
        inner.coverage = Coverage {
            source: reg.cpu_source,
            fallback: reg.cpu_fallback.clone(),
            kernel: reg.cpu_source == CpuSource::PerfEvents && super::perf::kernel_sampled(),
            base,
            ..Coverage::default()
        };
    }

    /// The CPU session's coverage now: each thread it timed, its CPU time read now (or at its
    /// exit) against what its samples stand for. Adds the threads without a kept sample to the
    /// store's threads, so that every row names one.
    #[cfg(target_os = "linux")]
    pub(crate) fn coverage(&self) -> CpuCoverage {
        // No drain between the threads' figures: each thread's samples and its clock read at
        // their drain (`Tally::drained_cpu`) are of one drain.
        let _drains = DRAIN.lock();
        let reg = REGISTRY.lock();
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let mut rows = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for &i in &reg.occupied {
            let e = &reg.threads[i as usize];
            if !self.times(e.node, e.shared) {
                continue;
            }
            let key = (i, e.generation);
            seen.insert(key);
            let base = inner
                .coverage
                .base
                .get(&key)
                .copied()
                .unwrap_or(e.cpu_registered);
            let tally = inner.coverage.threads.get(&key);
            let elsewhere_ns = tally.map_or(0, |t| t.elsewhere_ns);
            let now = match tally.and_then(|t| t.drained_cpu) {
                Some(drained) if e.alive => drained,
                _ => e.cpu_now(),
            };
            let row = ThreadCoverage {
                cpu_ns: now.saturating_sub(base).saturating_sub(elsewhere_ns),
                sampled_ns: tally.map_or(0, |t| t.sampled_ns),
                samples: tally.map_or(0, |t| t.samples),
                elsewhere_ns,
                elsewhere: tally.map_or(0, |t| t.elsewhere),
                stalls: tally.map_or(0, |t| t.stalls),
                stalled_ns: tally.map_or(0, |t| t.stalled_ns),
                fallback: e.fallback,
                unarmed: e.unarmed,
            };
            let index = inner.thread_number(&e.identity(i));
            rows.push((index, row));
        }
        // Exited threads drained and vacated: their figures as the drain left them.
        let mut gone: Vec<(ThreadKey, ThreadCoverage, Identity)> = inner
            .coverage
            .threads
            .iter()
            .filter(|(key, _)| !seen.contains(key))
            .filter_map(|(key, t)| {
                Some((
                    *key,
                    ThreadCoverage {
                        cpu_ns: t.exited_cpu?,
                        sampled_ns: t.sampled_ns,
                        samples: t.samples,
                        elsewhere_ns: t.elsewhere_ns,
                        elsewhere: t.elsewhere,
                        stalls: t.stalls,
                        stalled_ns: t.stalled_ns,
                        fallback: t.fallback,
                        unarmed: t.unarmed,
                    },
                    t.identity.clone()?,
                ))
            })
            .collect();
        gone.sort_by_key(|(key, _, _)| *key);
        for (_, row, identity) in gone {
            let index = inner.thread_number(&identity);
            rows.push((index, row));
        }
        if inner.coverage.exited.cpu_ns > 0 || inner.coverage.exited.samples > 0 {
            let row = inner.coverage.exited.clone();
            let index = inner.thread_number(&Identity {
                index: u32::MAX,
                generation: 0,
                tid: 0,
                name: Some(std::sync::Arc::from("(exited threads)")),
            });
            rows.push((index, row));
        }
        rows.sort_by_key(|(index, _)| *index);
        CpuCoverage {
            source: inner.coverage.source,
            fallback: inner.coverage.fallback.clone(),
            hz: self.hz,
            threads: rows,
            kernel: inner.coverage.kernel,
        }
    }

    /// A thread this (CPU) session timed has exited and its ring is drained: its CPU time is
    /// final. Kept as a row when it has a sample kept or was busy, else summed with the other
    /// exited threads.
    fn thread_exited(&self, key: ThreadKey, identity: &Identity, entry: &ThreadExit) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let base = inner
            .coverage
            .base
            .remove(&key)
            .unwrap_or(entry.cpu_registered);
        let elsewhere_ns = inner
            .coverage
            .threads
            .get(&key)
            .map_or(0, |t| t.elsewhere_ns);
        let cpu = entry
            .cpu_exited
            .saturating_sub(base)
            .saturating_sub(elsewhere_ns);
        let kept = inner.thread_numbers.contains_key(&key);
        let rows = inner
            .coverage
            .threads
            .values()
            .filter(|t| t.exited_cpu.is_some())
            .count();
        if (kept || cpu >= BUSY_THREAD_NS) && rows < EXITED_ROWS {
            let t = inner.coverage.threads.entry(key).or_default();
            t.exited_cpu = Some(cpu);
            t.fallback = entry.fallback;
            t.unarmed = entry.unarmed;
            t.identity = Some(identity.clone());
        } else {
            let t = inner.coverage.threads.remove(&key).unwrap_or_default();
            let sum = &mut inner.coverage.exited;
            sum.cpu_ns += cpu;
            sum.sampled_ns += t.sampled_ns;
            sum.samples += t.samples;
            sum.elsewhere_ns += t.elsewhere_ns;
            sum.elsewhere += t.elsewhere;
            sum.stalls += t.stalls;
            sum.stalled_ns += t.stalled_ns;
            sum.fallback |= entry.fallback;
            sum.unarmed |= entry.unarmed && cpu >= BUSY_THREAD_NS;
        }
    }
}

/// What a thread left in its registry entry as it exited: what [`Store::thread_exited`] reads.
struct ThreadExit {
    cpu_registered: u64,
    cpu_exited: u64,
    fallback: bool,
    unarmed: bool,
}

/// CLOCK_MONOTONIC, in nanoseconds.
pub(crate) fn now_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        super::cpu::monotonic_ns()
    }
    #[cfg(not(target_os = "linux"))]
    {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An allocation sample of a block at `addr` at `time_ns`.
    fn allocation(addr: u64, time_ns: u64) -> Sample {
        Sample {
            pid: None,
            thread: None,
            time_ns,
            weight: 1000.0,
            traced: Vec::new(),
            native: Vec::new(),
            truncated: false,
            state: None,
            mailbox_len: 0,
            registered_name: None,
            callee: None,
            size: 1000,
            address: addr,
            live: true,
            before_sampling: false,
        }
    }

    /// A block allocated and freed at one address over and over, all between a drain's pass
    /// over the ring of the thread that allocated and the drain's take of the frees (the
    /// interleaving a loaded machine makes, or a worker draining its own ring at a poll
    /// start): the frees come a drain before their samples. Each sample is freed; the last
    /// read as still in use when a later free of the address replaced the earlier ones.
    #[test]
    fn frees_that_come_before_their_samples_free_each_its_own() {
        let store = Store::new(0, 0, Sampler::Alloc, 100, 0);
        let thread = Identity {
            index: 0,
            generation: 0,
            tid: 1,
            name: None,
        };
        const X: u64 = 0x1000;
        // Allocated at 10, 30, 50; freed at 20, 40, 60.
        let frees = [(X, 20), (X, 40), (X, 60)];
        store.keep_allocations(Vec::new(), &frees, 0, 0);
        let samples = [10, 30, 50]
            .into_iter()
            .map(|t| (allocation(X, t), &thread))
            .collect();
        store.keep_allocations(samples, &[], 0, 0);
        let inner = store.inner.lock();
        assert_eq!(inner.samples.len(), 3);
        assert!(
            inner.samples.iter().all(|s| !s.live),
            "every block was freed: {:?}",
            inner.samples.iter().map(|s| s.live).collect::<Vec<_>>()
        );
        assert!(inner.pending_frees.is_empty());
    }

    /// A free before a sample of its address frees a later sample only: a block allocated at
    /// 50 and still held is in use, though its address was freed at 20.
    #[test]
    fn a_free_before_a_sample_does_not_free_it() {
        let store = Store::new(0, 0, Sampler::Alloc, 100, 0);
        let thread = Identity {
            index: 0,
            generation: 0,
            tid: 1,
            name: None,
        };
        const X: u64 = 0x1000;
        store.keep_allocations(Vec::new(), &[(X, 20)], 0, 0);
        let samples = vec![(allocation(X, 10), &thread), (allocation(X, 50), &thread)];
        store.keep_allocations(samples, &[], 0, 0);
        let inner = store.inner.lock();
        let live: Vec<bool> = inner.samples.iter().map(|s| s.live).collect();
        assert_eq!(live, [false, true]);
    }
}
