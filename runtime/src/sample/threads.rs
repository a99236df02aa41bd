//! The threads the CPU sampler can sample: each with its stack bounds, its CPU clock and,
//! while a CPU sample session is open, its ring and timer.
//!
//! A thread registers itself: a node's worker threads as they start (the node's thread-start
//! hook: an entry, no ring, no timer), and any thread that polls a process while the sampler
//! runs (a node started on a runtime it does not own, a blocking-pool thread running a
//! helper). Registering takes the registry's lock; it never runs in a signal handler. A
//! thread's [`ThreadSlot`], read by the handler, is a `const` thread-local without a
//! destructor, and the registry keeps its address: arming a thread from another one gives the
//! thread its ring through it. A second thread-local, with a destructor, unregisters the
//! thread as it exits, under the registry's lock: its timer is deleted and its ring left to the
//! drain, which gives it back to the pool once emptied. So the registry writes a slot only
//! while its thread is alive.
//!
//! # Entries are reused
//!
//! A program whose blocking pool starts and retires threads all the time registers a thread
//! after another, so an entry is not kept per thread ever started: an entry whose thread has
//! exited and whose rings (the CPU sampler's and the allocation sampler's) the drain has both
//! emptied and given back is *vacated* ([`Registry::vacate_if_done`]) and taken by the next
//! registration, with its generation one higher. The registry thus holds as many entries as
//! threads were registered at once (counting exited ones whose rings still await the drain),
//! and the drain walks the occupied ones only ([`Registry::occupied`]).
//!
//! A sample names its thread by what the drain found on the entry of the ring it came from
//! ([`Identity`]: index, generation, tid, name), captured when it moves the ring's records into
//! the stores, not by the index later: the entry may by then be another thread's.
//!
//! Why reusing an entry never races with a signal handler or the allocator's hook: neither
//! reads the registry. Each reads only its own thread's [`THREAD`] slot, and a thread's slot is
//! written by the registry only while that thread is alive (`alive`, under the registry's
//! lock). An entry is vacated only once (1) its thread has run its unregistering destructor,
//! which, on that thread, deleted its timer (the kernel arms it no more; a SIGPROF of it
//! already queued may still come) and nulled both ring pointers of its slot (so neither its
//! handler nor its allocator hook, if a later destructor allocates, writes a ring again),
//! then set `alive`
//! false under the lock; and (2) the drain, holding the drain's lock (rings have one consumer
//! at a time), emptied both rings after seeing `alive` false under the registry's lock (so
//! after every record the thread wrote) and gave them back. Reusing the entry then writes the
//! entry (registry memory, under the lock) and the *new* thread's own slot, from that thread.
//! The handler and the hook take no lock and allocate nothing, as before: reuse changed only
//! what the registry does under its lock.

use std::sync::Arc;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, compiler_fence,
};

use parking_lot::Mutex;

use super::native::StackBounds;
use super::ring::Ring;
use super::truth::CpuSource;

/// The samplers that run, as bits ([`CPU`], [`ALLOC`]): each set and cleared under
/// [`REGISTRY`]'s lock by its sampler's start and stop, so that a poll asks whether any wants
/// its thread registered with one load.
use crate::world::observe::SAMPLERS_RUNNING as RUNNING;
/// The CPU sampler's bit in [`running`].
pub(crate) const CPU: u8 = 1;
/// The allocation sampler's bit in [`running`]: it wants to hear of every poll.
pub(crate) const ALLOC: u8 = crate::world::observe::EVERY_POLL;

/// Whether one of `samplers` (bits) runs.
#[inline(always)]
pub(crate) fn running(samplers: u8) -> bool {
    RUNNING.load(Ordering::Relaxed) & samplers != 0
}

/// Marks `sampler` (a bit) running or not; called with [`REGISTRY`]'s lock held.
pub(crate) fn set_running(sampler: u8, on: bool) {
    if on {
        RUNNING.fetch_or(sampler, Ordering::SeqCst);
    } else {
        RUNNING.fetch_and(!sampler, Ordering::SeqCst);
    }
}

/// What the signal handler reads of its thread.
pub(crate) struct ThreadSlot {
    /// The thread's ring; null while it has none (no CPU sampler has run since it registered,
    /// or it is exiting).
    pub(crate) ring: AtomicPtr<Ring>,
    /// The thread's allocation sampler ring; null while it has none.
    pub(crate) alloc_ring: AtomicPtr<Ring>,
    pub(crate) stack_lo: AtomicUsize,
    pub(crate) stack_hi: AtomicUsize,
    /// Its index in the registry, plus one (0: unregistered).
    pub(crate) index: AtomicU32,
    /// The node it works for, as registered (0: none known yet).
    pub(crate) node: AtomicU32,
    /// Whether it has polled processes of another node than `node` too.
    pub(crate) shared: AtomicBool,
    /// The thread's perf event descriptor while the CPU sampler times it with one
    /// ([`super::perf`]); -1 for none. Set before the event is enabled, cleared before it is
    /// closed, under the registry's lock.
    pub(crate) perf_fd: AtomicI32,
    /// The thread's CPU clock at its last sample, in nanoseconds (the handler's, which alone
    /// writes it while the event runs; set to the clock's reading as the event is armed).
    pub(crate) perf_last: AtomicU64,
    /// The handler's generator for the next period (xorshift state).
    pub(crate) perf_rng: AtomicU64,
    /// Tests: overflows whose re-arming the handler skips, as if their signal were lost.
    #[cfg(test)]
    pub(crate) skip_rearms: AtomicU32,
}

thread_local! {
    /// `const` and without a destructor: readable from a signal handler on this thread, and
    /// at a fixed address for the thread's whole life.
    pub(crate) static THREAD: ThreadSlot = const {
        ThreadSlot {
            ring: AtomicPtr::new(std::ptr::null_mut()),
            alloc_ring: AtomicPtr::new(std::ptr::null_mut()),
            stack_lo: AtomicUsize::new(0),
            stack_hi: AtomicUsize::new(0),
            index: AtomicU32::new(0),
            node: AtomicU32::new(0),
            shared: AtomicBool::new(false),
            perf_fd: AtomicI32::new(-1),
            perf_last: AtomicU64::new(0),
            perf_rng: AtomicU64::new(0),
            #[cfg(test)]
            skip_rearms: AtomicU32::new(0),
        }
    };
    /// Unregisters the thread when it exits (touched at registration).
    static UNREGISTER: Unregister = const { Unregister };
}

/// A registered thread, as the registry keeps it; or, vacated, an entry the next registration
/// takes.
pub(crate) struct ThreadEntry {
    /// Registrations that took this entry before the current one: with the index, which
    /// thread it is.
    pub(crate) generation: u64,
    /// Its position in [`Registry::occupied`] while occupied.
    at: u32,
    /// The OS thread id.
    pub(crate) tid: i32,
    /// The thread's name, if it has one.
    pub(crate) name: Option<Arc<str>>,
    /// The node it works for (0: none known yet): the first node it was registered for or
    /// polled a process of. Its samples outside any process are that node's.
    pub(crate) node: u32,
    /// Whether it has polled processes of another node than `node` too (a thread of a runtime
    /// several nodes share): timed while any CPU session runs.
    pub(crate) shared: bool,
    /// Its CPU-time clock.
    #[cfg(target_os = "linux")]
    pub(crate) clock: libc::clockid_t,
    /// Its [`ThreadSlot`], valid while `alive`.
    slot: *const ThreadSlot,
    /// Its ring (`None` before its first arming, and once emptied after the thread exited).
    pub(crate) ring: Option<&'static Ring>,
    /// Its allocation sampler ring (`None` before sampling allocations first ran while it
    /// lived, and once emptied after the thread exited).
    pub(crate) alloc_ring: Option<&'static Ring>,
    /// Its timer while the sampler runs on timers (or while it fell back to one alone).
    #[cfg(target_os = "linux")]
    pub(crate) timer: Option<libc::timer_t>,
    /// Its perf event's descriptor while the sampler runs on perf events.
    pub(crate) perf: Option<i32>,
    /// It could not get a perf event and was given a timer instead.
    pub(crate) fallback: bool,
    /// It was wanted and got neither a perf event nor a timer.
    pub(crate) unarmed: bool,
    /// The lost-overflow guard's last sight of its perf event counting: the event's count
    /// and the thread's CPU clock when the drain last saw the count move (or the event was
    /// armed). See [`super::cpu::guard`].
    pub(crate) guard: (u64, u64),
    /// Its CPU clock when it registered, in nanoseconds: where its CPU time starts for the
    /// sessions that open before it registers.
    pub(crate) cpu_registered: u64,
    /// Its CPU clock as it exited (0 while it runs).
    pub(crate) cpu_exited: u64,
    /// Whether the thread still runs.
    pub(crate) alive: bool,
}

/// Which thread wrote a ring's records, as the drain finds it on the ring's entry: the
/// entry's index and generation (unique to one registration) and the thread's OS id and name.
#[derive(Clone, Debug)]
pub(crate) struct Identity {
    pub(crate) index: u32,
    pub(crate) generation: u64,
    pub(crate) tid: i32,
    pub(crate) name: Option<Arc<str>>,
}

// The registry's `Mutex` needs `Send`.
#[allow(unsafe_code)]
// SAFETY: `timer_t` is an opaque id that the kernel interprets, valid from any thread of the
// process; `slot` points at a thread-local made of atomics, dereferenced only under the
// registry's lock while the thread is alive (its exit marks it dead under that lock first).
unsafe impl Send for ThreadEntry {}

impl ThreadEntry {
    /// Who the entry stands for now (its index given).
    pub(crate) fn identity(&self, index: u32) -> Identity {
        Identity {
            index,
            generation: self.generation,
            tid: self.tid,
            name: self.name.clone(),
        }
    }

    /// Whether the entry's thread has exited and the drain has given back both its rings.
    fn done(&self) -> bool {
        !self.alive && self.ring.is_none() && self.alloc_ring.is_none()
    }

    /// Gives the thread `ring`, or takes it away (null), through its slot.
    pub(crate) fn publish_ring(&self, ring: Option<&'static Ring>) {
        if !self.alive {
            return;
        }
        let ptr = ring.map_or(std::ptr::null_mut(), |r| std::ptr::from_ref(r).cast_mut());
        // SAFETY: `slot` is the address of the thread's `THREAD`, a thread-local without a
        // destructor that lives as long as the thread; the thread is alive (`alive`, set false
        // under the registry's lock, held by the caller, before the thread's storage goes).
        // Only atomics are touched.
        #[allow(unsafe_code)]
        let slot = unsafe { &*self.slot };
        slot.ring.store(ptr, Ordering::Release);
    }

    /// Gives the thread its perf event's descriptor (-1: none), through its slot; a new one's
    /// first sample counts the thread's CPU time from `cpu_ns` (its CPU clock, read as the
    /// event is armed), and its handler draws the periods after the first from `rng` (the
    /// generator the first was drawn from: see [`super::perf::period_seed`]).
    pub(crate) fn publish_perf(&self, fd: i32, cpu_ns: u64, rng: u64) {
        if !self.alive {
            return;
        }
        // SAFETY: as in `publish_ring`.
        #[allow(unsafe_code)]
        let slot = unsafe { &*self.slot };
        if fd >= 0 {
            slot.perf_last.store(cpu_ns, Ordering::Relaxed);
            slot.perf_rng.store(rng, Ordering::Relaxed);
        }
        // Release: the handler that reads the descriptor sees the resets above.
        slot.perf_fd.store(fd, Ordering::Release);
    }

    /// The thread's CPU clock at its last sample (or its event's arming), as the handler
    /// left it; 0 once it has exited.
    pub(crate) fn perf_last(&self) -> u64 {
        if !self.alive {
            return 0;
        }
        // SAFETY: as in `publish_ring`.
        #[allow(unsafe_code)]
        let slot = unsafe { &*self.slot };
        slot.perf_last.load(Ordering::Relaxed)
    }

    /// Moves the thread's last-sample clock from `last` to `now`, unless its handler moved it
    /// meanwhile (a sample came after all): whether it did. The next sample then stands for
    /// the CPU time from `now` on.
    pub(crate) fn restart_perf_last(&self, last: u64, now: u64) -> bool {
        if !self.alive {
            return false;
        }
        // SAFETY: as in `publish_ring`.
        #[allow(unsafe_code)]
        let slot = unsafe { &*self.slot };
        slot.perf_last
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// The thread's CPU time now, in nanoseconds: its CPU clock while it runs, the reading at
    /// its exit after.
    #[cfg(target_os = "linux")]
    pub(crate) fn cpu_now(&self) -> u64 {
        if !self.alive {
            return self.cpu_exited;
        }
        clock_ns(self.clock).unwrap_or(self.cpu_registered)
    }

    /// Gives the thread its allocation sampler ring, or takes it away (null).
    pub(crate) fn publish_alloc_ring(&self, ring: Option<&'static Ring>) {
        if !self.alive {
            return;
        }
        let ptr = ring.map_or(std::ptr::null_mut(), |r| std::ptr::from_ref(r).cast_mut());
        // SAFETY: as in `publish_ring`.
        #[allow(unsafe_code)]
        let slot = unsafe { &*self.slot };
        slot.alloc_ring.store(ptr, Ordering::Release);
    }
}

/// The registered threads' entries, by index; and rings ready for reuse (the CPU sampler's and
/// the allocation sampler's).
pub(crate) struct Registry {
    /// Every entry, occupied (its index in [`occupied`](Self::occupied)) or vacated (in
    /// `vacant`): as many as threads were registered at once, at most.
    pub(crate) threads: Vec<ThreadEntry>,
    /// The indices of the occupied entries, in no order: threads alive, and exited threads whose
    /// rings the drain has not given back yet. What the drain and the samplers walk.
    pub(crate) occupied: Vec<u32>,
    /// The indices of the vacated entries, the next registration's first.
    vacant: Vec<u32>,
    pub(crate) pool: Vec<&'static Ring>,
    pub(crate) alloc_pool: Vec<&'static Ring>,
    /// The nodes CPU sample sessions are open for, each with how many: which threads the CPU
    /// sampler times ([`super::cpu::wanted`]).
    pub(crate) cpu_nodes: Vec<(u32, u32)>,
    /// The CPU sampler's mechanism while it runs ([`CpuSource::PerfEvents`] or
    /// [`CpuSource::Timers`]; `Auto` while it does not run).
    pub(crate) cpu_source: CpuSource,
    /// Why the CPU sampler runs on timers, when it does.
    pub(crate) cpu_fallback: Option<String>,
}

pub(crate) static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    threads: Vec::new(),
    occupied: Vec::new(),
    vacant: Vec::new(),
    pool: Vec::new(),
    alloc_pool: Vec::new(),
    cpu_nodes: Vec::new(),
    cpu_source: CpuSource::Auto,
    cpu_fallback: None,
});

/// Entries whose thread has exited and whose rings the drain has not given back yet: while
/// there are some, the drain thread runs even with no session open.
static EXITED_UNDRAINED: AtomicUsize = AtomicUsize::new(0);

/// Whether an exited thread's entry waits for the drain to give back its rings.
pub(crate) fn exited_undrained() -> bool {
    EXITED_UNDRAINED.load(Ordering::Relaxed) != 0
}

impl Registry {
    /// Puts `entry` in a vacated entry (one generation later) or a new one; its index.
    #[cfg(target_os = "linux")]
    fn occupy(&mut self, mut entry: ThreadEntry) -> u32 {
        entry.at = self.occupied.len() as u32;
        let index = match self.vacant.pop() {
            Some(index) => {
                let old = &mut self.threads[index as usize];
                entry.generation = old.generation + 1;
                *old = entry;
                index
            }
            None => {
                self.threads.push(entry);
                self.threads.len() as u32 - 1
            }
        };
        self.occupied.push(index);
        index
    }

    /// Vacates entry `index` if its thread has exited and the drain has given back both its
    /// rings (see the module documentation for why no handler can see it then).
    pub(crate) fn vacate_if_done(&mut self, index: u32) {
        let entry = &mut self.threads[index as usize];
        if !entry.done() || self.occupied.get(entry.at as usize) != Some(&index) {
            return;
        }
        let at = entry.at;
        entry.name = None;
        self.occupied.swap_remove(at as usize);
        if let Some(&moved) = self.occupied.get(at as usize) {
            self.threads[moved as usize].at = at;
        }
        self.vacant.push(index);
        EXITED_UNDRAINED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Registers the calling thread for `node` (0 when not known), if it is not yet: it may run
/// that node's processes. A thread registered with node 0 takes the first node it names; one
/// registered with a node that names another becomes shared. Arms or disarms its timer as the
/// CPU sampler wants it ([`super::cpu::wanted`]).
#[cfg(target_os = "linux")]
#[inline]
pub(crate) fn register_current(node: u32) {
    // What every poll of a sampled process finds: the thread registered, with its node (or
    // shared).
    let done = THREAD.with(|t| {
        t.index.load(Ordering::Relaxed) != 0
            && (node == 0
                || t.node.load(Ordering::Relaxed) == node
                || t.shared.load(Ordering::Relaxed))
    });
    if !done {
        register_slow(node);
    }
}

/// [`register_current`] past its check.
#[cfg(target_os = "linux")]
#[cold]
#[inline(never)]
fn register_slow(node: u32) {
    if cfg!(miri) {
        // Miri runs no signal, timer or stack walk (nor the calls that read a thread's stack
        // bounds and clock): a thread stays unregistered, and unsampled, so that the rest of a
        // node runs under it.
        return;
    }
    let (index, known) = THREAD.with(|t| {
        (
            t.index.load(Ordering::Relaxed),
            t.node.load(Ordering::Relaxed),
        )
    });
    if index != 0 {
        // Here `node` is neither 0 nor the thread's: it learns its node, or is shared.
        let mut reg = REGISTRY.lock();
        let Registry {
            threads,
            pool,
            cpu_nodes,
            cpu_source,
            ..
        } = &mut *reg;
        let entry = &mut threads[index as usize - 1];
        if known == 0 {
            entry.node = node;
            THREAD.with(|t| t.node.store(node, Ordering::Relaxed));
            crate::world::observe::set_thread_known(node);
        } else {
            entry.shared = true;
            THREAD.with(|t| t.shared.store(true, Ordering::Relaxed));
            crate::world::observe::set_thread_known(crate::world::observe::EVERY_NODE);
        }
        super::cpu::fit(entry, pool, cpu_nodes, *cpu_source);
        return;
    }
    crate::heap::suppressed(|| {
        let bounds = super::native::current_stack_bounds().unwrap_or_default();
        // SAFETY: `gettid` and `pthread_self` have no preconditions; `pthread_getcpuclockid`
        // writes `clock` on success, which is checked (the thread is this one, alive).
        #[allow(unsafe_code)]
        let (tid, clock) = unsafe {
            let mut clock: libc::clockid_t = 0;
            let ok = libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) == 0;
            (libc::gettid(), ok.then_some(clock))
        };
        let Some(clock) = clock else {
            return;
        };
        // A thread whose thread-locals are being destroyed could not unregister: it stays
        // unregistered (and unsampled).
        if UNREGISTER.try_with(|_| {}).is_err() {
            return;
        }
        let slot = THREAD.with(std::ptr::from_ref);
        let name = std::thread::current().name().map(Arc::from);
        let cpu_registered = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0);
        let mut reg = REGISTRY.lock();
        let index = reg.occupy(ThreadEntry {
            generation: 0,
            at: 0,
            tid,
            name,
            node,
            shared: false,
            clock,
            slot,
            ring: None,
            alloc_ring: None,
            timer: None,
            perf: None,
            fallback: false,
            unarmed: false,
            guard: (0, 0),
            cpu_registered,
            cpu_exited: 0,
            alive: true,
        });
        THREAD.with(|t| {
            t.stack_lo.store(bounds.lo, Ordering::Relaxed);
            t.stack_hi.store(bounds.hi, Ordering::Relaxed);
            t.node.store(node, Ordering::Relaxed);
            t.index.store(index + 1, Ordering::Relaxed);
        });
        crate::world::observe::set_thread_known(node);
        let Registry {
            threads,
            pool,
            alloc_pool,
            cpu_nodes,
            cpu_source,
            ..
        } = &mut *reg;
        let entry = &mut threads[index as usize];
        super::cpu::fit(entry, pool, cpu_nodes, *cpu_source);
        if super::alloc::running() {
            super::alloc::arm(entry, alloc_pool);
        }
    });
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn register_current(_node: u32) {}

/// The time on clock `clock`, in nanoseconds (a thread's CPU clock may be read from any
/// thread of the process while the thread runs).
#[cfg(target_os = "linux")]
pub(crate) fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes `ts`, a plain struct on the stack.
    #[allow(unsafe_code)]
    let ok = unsafe { libc::clock_gettime(clock, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// A thread's stack bounds as registered.
pub(crate) fn bounds_in_signal(t: &ThreadSlot) -> StackBounds {
    StackBounds {
        lo: t.stack_lo.load(Ordering::Relaxed),
        hi: t.stack_hi.load(Ordering::Relaxed),
    }
}

struct Unregister;

impl Drop for Unregister {
    fn drop(&mut self) {
        let _ = THREAD.try_with(|t| {
            let index = t.index.load(Ordering::Relaxed);
            if index == 0 {
                return;
            }
            #[cfg(target_os = "linux")]
            let cpu = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
            let mut reg = REGISTRY.lock();
            // This thread's own entry: it stays occupied while the thread is alive.
            let entry = &mut reg.threads[index as usize - 1];
            #[cfg(target_os = "linux")]
            {
                entry.cpu_exited = cpu.unwrap_or(entry.cpu_registered);
                super::cpu::disarm(entry);
            }
            // The timer is deleted (a signal of it still queued may come, on older kernels,
            // and finds the ring or not); the handler sees no ring from here on, nor does the
            // allocator's hook.
            entry.publish_ring(None);
            entry.publish_alloc_ring(None);
            entry.alive = false;
            EXITED_UNDRAINED.fetch_add(1, Ordering::Relaxed);
            // Vacated now if it has no ring; else by the drain, once it has emptied them.
            reg.vacate_if_done(index - 1);
            compiler_fence(Ordering::SeqCst);
            t.index.store(0, Ordering::Relaxed);
            crate::world::observe::set_thread_known(0);
        });
    }
}
