//! The drain: moves the CPU sampler's and the allocation sampler's records from the threads'
//! rings into the stores of the sessions they belong to ([`drain`]), on a thread of its own
//! every [`DRAIN_EVERY`] while a CPU or allocation session is open and at every read of a
//! session's samples; decides whose each record is ([`sample_for`]); gives the rings of exited
//! threads back once emptied. It keeps the open sessions' stores. A child of `store`: it fills
//! the stores' insides (their samples, their CPU figures) as the store's own code does.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::{Sample, Sampler, Store, ThreadExit, ThreadKey};
use crate::Pid;
use crate::sample::ring::{NATIVE_TRUNCATED, Record, TRACED_TRUNCATED};
use crate::sample::threads::{Identity, REGISTRY};
use crate::trace::callsites;

/// How often the drain empties the rings.
pub(crate) const DRAIN_EVERY: Duration = Duration::from_millis(10);

/// One consumer of the rings at a time.
pub(super) static DRAIN: Mutex<()> = Mutex::new(());

/// The stores of the open CPU sample sessions.
static CPU_STORES: Mutex<Vec<Arc<Store>>> = Mutex::new(Vec::new());
/// The stores of the open allocation sample sessions.
static ALLOC_STORES: Mutex<Vec<Arc<Store>>> = Mutex::new(Vec::new());

/// The stores of the open sessions of `sampler` (CPU or allocation).
fn stores_of(sampler: Sampler) -> &'static Mutex<Vec<Arc<Store>>> {
    if sampler == Sampler::Alloc {
        &ALLOC_STORES
    } else {
        &CPU_STORES
    }
}

/// Adds a CPU or allocation session's store; starts the drain thread the first time.
pub(crate) fn add_store(store: Arc<Store>) {
    stores_of(store.sampler).lock().push(store);
    static STARTED: AtomicBool = AtomicBool::new(false);
    if !STARTED.swap(true, Ordering::SeqCst) {
        let spawned = std::thread::Builder::new()
            .name("tprof-sample-drain".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(DRAIN_EVERY);
                    // Also with no session open while an exited thread's rings wait: they
                    // are emptied (into no store) and its entry vacated.
                    if !CPU_STORES.lock().is_empty()
                        || !ALLOC_STORES.lock().is_empty()
                        || crate::sample::threads::exited_undrained()
                    {
                        drain();
                        crate::sample::ended::fold_all();
                    }
                }
            });
        if spawned.is_err() {
            // Reads drain too: samples are then moved only when read, and the rings keep
            // what they can meanwhile (a full ring counts its drops).
            STARTED.store(false, Ordering::SeqCst);
        }
    }
}

/// Removes a CPU or allocation session's store (after draining what is left for it); returns
/// how many stores of its sampler remain.
pub(crate) fn remove_store(store: &Arc<Store>) -> usize {
    drain();
    let mut stores = stores_of(store.sampler).lock();
    stores.retain(|s| !Arc::ptr_eq(s, store));
    stores.len()
}

/// Moves every record from the rings into the stores of the sessions they belong to, and
/// gives the rings of exited threads back to the pool once emptied (vacating their entries
/// once both are). Drains are serialized by [`DRAIN`]: a ring has one consumer at a time.
pub(crate) fn drain() {
    crate::heap::suppressed(|| {
        let _one = DRAIN.lock();
        drain_rings(false);
        #[cfg(target_os = "linux")]
        drain_rings(true);
    });
}

/// A ring [`drain_rings`] empties, and its thread's entry as the drain found it.
struct RingToDrain {
    ring: &'static crate::sample::ring::Ring,
    alive: bool,
    node: u32,
    shared: bool,
    /// The thread's CPU clock at its registration.
    registered: u64,
    /// Who wrote every record in the ring.
    thread: Identity,
    /// A live thread's CPU clock read before its (CPU sampler's) ring is drained, when an open
    /// session times it (a system call: not made for threads no figure reads).
    cpu_before: Option<u64>,
}

/// [`drain`] of the CPU sampler's rings, or the allocation sampler's (`alloc`).
fn drain_rings(alloc: bool) {
    let sampler = if alloc { Sampler::Alloc } else { Sampler::Cpu };
    let stores: Vec<(Arc<Store>, u64)> = stores_of(sampler)
        .lock()
        .iter()
        .map(|s| (Arc::clone(s), *s.started_ns.lock()))
        .collect();
    // The occupied entries with a ring, and who each ring's records are from: an entry keeps
    // its ring until the drain (this one, under `DRAIN`) takes it from an exited thread, so
    // the identity read now is that of every record in the ring, and the entry cannot be
    // vacated, and reused, before this drain gives the ring back.
    // And the threads whose perf event lost an overflow, re-armed now (CPU).
    let mut stalls: Vec<(ThreadKey, u32, bool, u64)> = Vec::new();
    let rings: Vec<RingToDrain> = {
        let mut reg = REGISTRY.lock();
        #[cfg(target_os = "linux")]
        if !alloc {
            let reg = &mut *reg;
            for &i in &reg.occupied {
                let e = &mut reg.threads[i as usize];
                if let Some(gap) = crate::sample::cpu::guard(e) {
                    stalls.push(((i, e.generation), e.node, e.shared, gap));
                }
            }
        }
        reg.occupied
            .iter()
            .filter_map(|&i| {
                let e = &reg.threads[i as usize];
                let ring = if alloc { e.alloc_ring } else { e.ring };
                ring.map(|ring| RingToDrain {
                    ring,
                    alive: e.alive,
                    node: e.node,
                    shared: e.shared,
                    registered: e.cpu_registered,
                    thread: e.identity(i),
                    #[cfg(target_os = "linux")]
                    cpu_before: (!alloc
                        && e.alive
                        && stores.iter().any(|(s, _)| s.times(e.node, e.shared)))
                    .then(|| e.cpu_now()),
                    #[cfg(not(target_os = "linux"))]
                    cpu_before: None,
                })
            })
            .collect()
    };
    for (key, node, shared, gap) in stalls {
        for (store, _) in &stores {
            if store.times(node, shared) {
                store.inner.lock().coverage.add_stall(key, gap);
            }
        }
    }
    // Allocation samples go in once every ring is drained, with the frees (see
    // `keep_allocations`).
    let mut fresh: Vec<Vec<(Sample, &Identity)>> = vec![Vec::new(); stores.len()];
    for RingToDrain {
        ring,
        alive,
        node,
        shared,
        registered,
        thread,
        cpu_before,
    } in &rings
    {
        let key = (thread.index, thread.generation);
        let mut last_at = 0;
        ring.drain(|r| {
            last_at = last_at.max(r.cpu_at);
            for (k, (store, started)) in stores.iter().enumerate() {
                if alloc {
                    if let Some(sample) = sample_for(store, *started, r, *node, 0) {
                        fresh[k].push((sample, thread));
                    }
                    continue;
                }
                let mut inner = store.inner.lock();
                // Only the CPU time since the session began counting the thread's.
                let Some(cpu_ns) = inner.coverage.share(key, *registered, r) else {
                    continue;
                };
                let sample = sample_for(store, *started, r, *node, cpu_ns);
                // A sample of a thread the session times counts for its coverage: as sampled
                // when it is the session's (kept, or dropped from a full buffer), else as CPU
                // time elsewhere, out of the thread's CPU time as it is out of the profile,
                // so that the figures are those of the profile's samples.
                if store.times(*node, *shared) {
                    if sample.is_some() {
                        inner.coverage.add(key, cpu_ns, 1);
                    } else {
                        inner.coverage.add_elsewhere(key, cpu_ns);
                    }
                }
                if let Some(sample) = sample {
                    store.keep_in(&mut inner, sample, Some(thread));
                }
            }
        });
        // The thread's CPU clock as its ring was emptied: read before the drain, or its last
        // sample's when the thread ran on past that reading (then every sample up to it was
        // drained), so that no sample drained stands for CPU after it and no CPU before it
        // waits for a sample but the one of the current period.
        if let Some(before) = cpu_before {
            let cpu = (*before).max(last_at);
            for (store, _) in &stores {
                if store.times(*node, *shared) {
                    store.inner.lock().coverage.drained(key, cpu);
                }
            }
        }
        let dropped = ring.take_dropped();
        let dropped_bytes = ring.take_dropped_bytes();
        let dropped_ns = ring.take_dropped_ns();
        if dropped > 0 {
            for (store, _) in &stores {
                if alloc {
                    store.drop_weight(dropped_bytes as f64);
                    continue;
                }
                let mut inner = store.inner.lock();
                if store.times(*node, *shared) {
                    inner.coverage.add(key, dropped_ns, dropped);
                }
                inner.dropped += store.periods(dropped_ns);
            }
        }
        if !alive {
            // Seen exited under the registry's lock: every record it wrote was drained above.
            let mut reg = REGISTRY.lock();
            let reg = &mut *reg;
            let entry = &mut reg.threads[thread.index as usize];
            debug_assert_eq!(
                entry.generation, thread.generation,
                "reused while it had a ring"
            );
            let (slot, pool) = if alloc {
                (&mut entry.alloc_ring, &mut reg.alloc_pool)
            } else {
                (&mut entry.ring, &mut reg.pool)
            };
            if slot.take().is_some() {
                ring.reset();
                pool.push(ring);
            }
            let exit = ThreadExit {
                cpu_registered: entry.cpu_registered,
                cpu_exited: entry.cpu_exited,
                fallback: entry.fallback,
                unarmed: entry.unarmed,
            };
            reg.vacate_if_done(thread.index);
            if !alloc {
                for (store, _) in &stores {
                    if store.times(*node, *shared) {
                        store.thread_exited(key, thread, &exit);
                    }
                }
            }
        }
    }
    #[cfg(target_os = "linux")]
    if alloc {
        let mut frees = Vec::new();
        crate::sample::alloc::take_frees(&mut frees);
        // A lost free may be of any session's block: each open session is told.
        let lost = crate::sample::alloc::take_dropped_frees();
        for ((store, started), samples) in stores.iter().zip(fresh) {
            store.keep_allocations(samples, &frees, *started, lost);
        }
    }
}

/// Whether `r`, a sample of a process, was taken in a poll that did not have `store`'s
/// session among its own: a poll that began before the session opened or flagged the process.
/// Such a sample is the session's when the session measures the process now
/// ([`measured_now`]), but its traced stack holds none of the session's frames.
fn began_before(store: &Store, r: &Record) -> bool {
    r.pid != 0 && r.active & (1u64 << store.bit) == 0
}

/// Whether the session of `bit` measures `pid` now, for a sample whose poll did not have the
/// session among its own: a poll that began before the session opened (a worker stuck in one
/// long poll, what peek is for) or before the process was flagged. Read on the drain thread.
fn measured_now(pid: Pid, bit: u64) -> bool {
    crate::node::NodeInner::with_process(pid, |p| crate::trace::sessions_measuring(p) & bit != 0)
        .unwrap_or(false)
}

/// The sample `r` is for `store`, if it is for it: a poll of a process the session samples
/// (its bit among the poll's sessions), or time outside any process on a thread of the
/// session's node. Its traced frames are those of functions the session traces now.
/// Its thread is named as the store keeps it ([`Store::keep_in`]); a CPU sample's weight is
/// `cpu_ns`, the CPU time of it the session counts ([`Coverage::share`](super::Coverage::share)).
fn sample_for(
    store: &Store,
    started: u64,
    r: &Record,
    thread_node: u32,
    cpu_ns: u64,
) -> Option<Sample> {
    let bit = 1u64 << store.bit;
    let pid = if r.pid != 0 {
        if r.node != store.node {
            return None;
        }
        let pid = Pid::from_parts(r.node, r.pid as u32, (r.pid >> 32) as u32);
        if began_before(store, r) && !measured_now(pid, bit) {
            return None;
        }
        Some(pid)
    } else {
        if thread_node != store.node {
            return None;
        }
        None
    };
    let all = callsites();
    let alloc = store.sampler == Sampler::Alloc;
    let traced = if pid.is_some() {
        r.traced()
            .iter()
            .filter_map(|id| all.get(*id as usize))
            .filter(|cs| cs.sessions() & bit != 0)
            .collect()
    } else {
        Vec::new()
    };
    let native = if alloc {
        alloc_native(r.native())
    } else {
        r.native().to_vec()
    };
    Some(Sample {
        pid,
        thread: None,
        time_ns: r.time_ns.saturating_sub(started),
        weight: if alloc {
            r.bytes
        } else {
            store.periods(cpu_ns)
        },
        traced,
        native,
        size: r.size,
        truncated: r.flags & (TRACED_TRUNCATED | NATIVE_TRUNCATED) != 0,
        address: r.addr,
        live: alloc,
        // The session is not among its poll's: its traced frames are unknown.
        before_sampling: pid.is_some() && began_before(store, r),
        state: None,
        mailbox_len: 0,
        registered_name: None,
        callee: None,
    })
}

/// An allocation record's native stack as samples keep it: the walk from inside the allocator
/// starts with no interrupted instruction (a 0) and return addresses; the first of those
/// becomes the sample's innermost address, one byte back into the call that made it (so it is
/// named as the call, as an interrupted instruction is).
fn alloc_native(walked: &[u64]) -> Vec<u64> {
    let mut native: Vec<u64> = walked.iter().skip(1).copied().collect();
    if let Some(first) = native.first_mut() {
        *first = first.saturating_sub(1);
    }
    native
}

/// Takes the first of `pending`'s frees of `addr` at or after `time`, if there is one: the
/// free of the block a sample at `time` allocated.
pub(super) fn take_free_after(
    pending: &mut HashMap<u64, Vec<(u64, u64)>>,
    addr: u64,
    time: u64,
) -> bool {
    let Some(frees) = pending.get_mut(&addr) else {
        return false;
    };
    let first = frees
        .iter()
        .enumerate()
        .filter(|(_, (t, _))| *t >= time)
        .min_by_key(|(_, (t, _))| *t)
        .map(|(i, _)| i);
    let Some(i) = first else {
        return false;
    };
    frees.swap_remove(i);
    if frees.is_empty() {
        pending.remove(&addr);
    }
    true
}

/// Holds the drain's lock (tests: a handler that took it would deadlock).
#[cfg(test)]
pub(crate) fn lock_drain_for_test() -> parking_lot::MutexGuard<'static, ()> {
    DRAIN.lock()
}

/// Holds the allocation stores' lock (tests).
#[cfg(test)]
pub(crate) fn lock_alloc_stores_for_test() -> parking_lot::MutexGuard<'static, Vec<Arc<Store>>> {
    ALLOC_STORES.lock()
}

/// Holds the stores' lock (tests).
#[cfg(test)]
pub(crate) fn lock_stores_for_test() -> parking_lot::MutexGuard<'static, Vec<Arc<Store>>> {
    CPU_STORES.lock()
}
