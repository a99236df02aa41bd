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

use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicUsize, Ordering, compiler_fence};

use parking_lot::Mutex;

use super::native::StackBounds;
use super::ring::Ring;

/// The samplers that run, as bits ([`CPU`], [`ALLOC`]): each set and cleared under
/// [`REGISTRY`]'s lock by its sampler's start and stop, so that a poll asks whether any wants
/// its thread registered with one load.
static RUNNING: AtomicU8 = AtomicU8::new(0);
/// The CPU sampler's bit in [`running`].
pub(crate) const CPU: u8 = 1;
/// The allocation sampler's bit in [`running`].
pub(crate) const ALLOC: u8 = 2;

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
        }
    };
    /// Unregisters the thread when it exits (touched at registration).
    static UNREGISTER: Unregister = const { Unregister };
}

/// A registered thread, as the registry keeps it.
pub(crate) struct ThreadEntry {
    /// The OS thread id.
    pub(crate) tid: i32,
    /// The thread's name, if it has one.
    pub(crate) name: Option<String>,
    /// The node it works for (0: none known yet).
    pub(crate) node: u32,
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
    /// Its timer while the sampler runs.
    #[cfg(target_os = "linux")]
    pub(crate) timer: Option<libc::timer_t>,
    /// Whether the thread still runs.
    pub(crate) alive: bool,
}

// The registry's `Mutex` needs `Send`.
#[allow(unsafe_code)]
// SAFETY: `timer_t` is an opaque id that the kernel interprets, valid from any thread of the
// process; `slot` points at a thread-local made of atomics, dereferenced only under the
// registry's lock while the thread is alive (its exit marks it dead under that lock first).
unsafe impl Send for ThreadEntry {}

impl ThreadEntry {
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

/// Every thread registered so far, by index; and rings ready for reuse (the CPU sampler's and
/// the allocation sampler's).
pub(crate) struct Registry {
    pub(crate) threads: Vec<ThreadEntry>,
    pub(crate) pool: Vec<&'static Ring>,
    pub(crate) alloc_pool: Vec<&'static Ring>,
}

pub(crate) static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    threads: Vec::new(),
    pool: Vec::new(),
    alloc_pool: Vec::new(),
});

/// Registers the calling thread for `node` (0 when not known), if it is not yet; a thread
/// registered with node 0 takes the first node it names. Arms its timer when the CPU sampler
/// runs.
#[cfg(target_os = "linux")]
#[inline]
pub(crate) fn register_current(node: u32) {
    // What every poll of a sampled process finds: the thread registered, with its node.
    let done = THREAD.with(|t| {
        t.index.load(Ordering::Relaxed) != 0 && (node == 0 || t.node.load(Ordering::Relaxed) != 0)
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
    let (index, known) = THREAD.with(|t| {
        (
            t.index.load(Ordering::Relaxed),
            t.node.load(Ordering::Relaxed),
        )
    });
    if index != 0 {
        if node != 0 && known == 0 {
            REGISTRY.lock().threads[index as usize - 1].node = node;
            THREAD.with(|t| t.node.store(node, Ordering::Relaxed));
        }
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
        let mut reg = REGISTRY.lock();
        let index = reg.threads.len() as u32 + 1;
        let slot = THREAD.with(|t| {
            t.stack_lo.store(bounds.lo, Ordering::Relaxed);
            t.stack_hi.store(bounds.hi, Ordering::Relaxed);
            t.node.store(node, Ordering::Relaxed);
            t.index.store(index, Ordering::Relaxed);
            std::ptr::from_ref(t)
        });
        reg.threads.push(ThreadEntry {
            tid,
            name: std::thread::current().name().map(str::to_owned),
            node,
            clock,
            slot,
            ring: None,
            alloc_ring: None,
            timer: None,
            alive: true,
        });
        UNREGISTER.with(|_| {});
        let Registry {
            threads,
            pool,
            alloc_pool,
        } = &mut *reg;
        let entry = threads.last_mut().expect("just pushed");
        if super::cpu::running() {
            super::cpu::arm(entry, pool);
        }
        if super::alloc::running() {
            super::alloc::arm(entry, alloc_pool);
        }
    });
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn register_current(_node: u32) {}

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
            let mut reg = REGISTRY.lock();
            let entry = &mut reg.threads[index as usize - 1];
            #[cfg(target_os = "linux")]
            super::cpu::disarm(entry);
            // No signal of this thread's timer comes after the delete above; the handler
            // sees no ring from here on.
            entry.publish_ring(None);
            entry.publish_alloc_ring(None);
            entry.alive = false;
            compiler_fence(Ordering::SeqCst);
            t.index.store(0, Ordering::Relaxed);
        });
    }
}

/// The thread with registry index `index` (from a sample): its OS id, name and node.
pub(crate) fn describe(index: u32) -> Option<(i32, Option<String>, u32)> {
    let reg = REGISTRY.lock();
    reg.threads
        .get(index as usize)
        .map(|e| (e.tid, e.name.clone(), e.node))
}
