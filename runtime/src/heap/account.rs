//! Heap accounts: one per process, in a table that is never freed, and the one thread-local the
//! allocator reads to find the account to charge.
//!
//! Who writes what:
//! - The *owner* fields (`words`, `bytes`, `blocks`, `freed`, `peak`) are written only by the
//!   thread that is polling the process, with a plain load and store: a process is polled by
//!   one thread at a time and tokio orders one poll before the next, so no update is lost.
//! - `shared_*` take the allocations of code that acts for the process from other threads at
//!   the same time as it runs (its helper tasks, the spawner building it): an atomic add each.
//! - `remote` takes what other threads do to the process's live bytes: frees of its blocks,
//!   and message envelopes moved into it. It packs the low 16 bits of the account's generation
//!   above a 48-bit wrapping count, so an update meant for a process that is gone can never land
//!   in the account's next owner: it is a compare-and-swap that checks the generation.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::segmented::Segmented;

/// The bits of `remote` that hold the count.
const COUNT_BITS: u32 = 48;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

/// Whom this thread's allocations are charged to: what the allocator reads.
#[derive(Clone, Copy)]
pub(super) enum Charge {
    /// No one: outside any process, or while the runtime or the profiler works for itself.
    None,
    /// The process this thread is polling.
    Owner(&'static Account),
    /// A process this thread acts for while the process itself may run elsewhere.
    Shared(&'static Account),
    /// The probe of [`installed`](super::installed) is allocating.
    Probe,
}

thread_local! {
    /// `const`-initialised and without a destructor: the allocator may run while this thread's
    /// destructors run, or before anything else of the thread is set up.
    static CURRENT: Cell<Charge> = const { Cell::new(Charge::None) };
}

#[inline(always)]
pub(super) fn current_charge() -> Charge {
    CURRENT.with(Cell::get)
}

#[inline(always)]
pub(super) fn set_charge(charge: Charge) -> Charge {
    CURRENT.with(|c| c.replace(charge))
}

/// The tag an allocation carries: the account it was charged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tag {
    pub(super) slot: u32,
    pub(super) generation: u32,
}

impl Tag {
    /// Charged to no one; generation 0 is never an account's.
    pub(super) const NONE: Tag = Tag {
        slot: 0,
        generation: 0,
    };

    #[inline(always)]
    pub(super) fn pack(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.slot)
    }

    #[inline(always)]
    pub(super) fn unpack(word: u64) -> Tag {
        Tag {
            slot: word as u32,
            generation: (word >> 32) as u32,
        }
    }
}

/// One process's heap figures. The fields the allocator touches share one cache line.
#[derive(Default)]
#[repr(C, align(64))]
pub(crate) struct Account {
    /// The packed [`Tag`] of the process that owns it; generation 0 while free.
    tag: AtomicU64,
    words: AtomicU64,
    bytes: AtomicU64,
    blocks: AtomicU64,
    freed: AtomicU64,
    peak: AtomicU64,
    /// Generation bits over a 48-bit count of bytes others took from its live bytes (frees
    /// of its blocks, minus blocks moved in and shared allocations).
    remote: AtomicU64,
    /// `max_heap_size` in live bytes; `u64::MAX` for none.
    limit: AtomicU64,
    // The second line: written rarely, or by other threads.
    slot: AtomicU32,
    /// The callsite id of the traced function the process runs or is suspended in
    /// (`u32::MAX` for none): kept here, in memory that outlives every process, so the traced
    /// stack can write it without holding the process.
    current_function: AtomicU32,
    shared_words: AtomicU64,
    shared_bytes: AtomicU64,
    shared_blocks: AtomicU64,
    over_limit: AtomicBool,
}

static ACCOUNTS: Segmented<Account> = Segmented::new();

struct Slots {
    /// Slots handed out so far.
    next: u32,
    free: Vec<u32>,
    generation: u32,
}

static SLOTS: Mutex<Slots> = Mutex::new(Slots {
    next: 0,
    free: Vec::new(),
    generation: 0,
});

/// The account at `slot`, if it was ever handed out.
#[inline]
pub(super) fn account_at(slot: u32) -> Option<&'static Account> {
    ACCOUNTS.get(slot)
}

/// Sign-extends a 48-bit count.
#[inline(always)]
fn signed48(count: u64) -> i64 {
    ((count << (64 - COUNT_BITS)) as i64) >> (64 - COUNT_BITS)
}

impl Account {
    /// Takes a free account for a new process; its figures start at zero.
    pub(crate) fn acquire() -> &'static Account {
        super::suppressed(|| {
            let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
            let slot = slots.free.pop().unwrap_or_else(|| {
                slots.next += 1;
                slots.next - 1
            });
            // Generations skip 0 (no one), also in their low 16 bits (the remote count's).
            slots.generation = slots.generation.wrapping_add(1);
            if slots.generation & 0xffff == 0 {
                slots.generation = slots.generation.wrapping_add(1);
            }
            let generation = slots.generation;
            drop(slots);
            let account = ACCOUNTS.get_or_alloc(slot);
            for field in [
                &account.words,
                &account.bytes,
                &account.blocks,
                &account.freed,
                &account.peak,
                &account.shared_words,
                &account.shared_bytes,
                &account.shared_blocks,
            ] {
                field.store(0, Ordering::Relaxed);
            }
            account.limit.store(u64::MAX, Ordering::Relaxed);
            account.current_function.store(u32::MAX, Ordering::Relaxed);
            account.over_limit.store(false, Ordering::Relaxed);
            account.slot.store(slot, Ordering::Relaxed);
            account.remote.store(
                u64::from(generation & 0xffff) << COUNT_BITS,
                Ordering::Release,
            );
            account
                .tag
                .store(Tag { slot, generation }.pack(), Ordering::Release);
            account
        })
    }

    /// Gives the account back when its process is gone: later frees of its blocks are ignored.
    pub(crate) fn release(&'static self) {
        let slot = self.slot.load(Ordering::Relaxed);
        self.tag.store(Tag::NONE.pack(), Ordering::Release);
        // A free racing with this either landed before the store below or sees the new
        // generation bits and gives up.
        self.remote.store(0, Ordering::Release);
        super::suppressed(|| {
            SLOTS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .free
                .push(slot);
        });
    }

    #[inline(always)]
    pub(super) fn tag(&self) -> Tag {
        Tag::unpack(self.tag.load(Ordering::Relaxed))
    }

    /// Records the traced function the process is in (`u32::MAX`: none).
    #[inline(always)]
    pub(crate) fn set_current_function(&self, id: u32) {
        self.current_function.store(id, Ordering::Relaxed);
    }

    /// The traced function the process is in, if known.
    pub(crate) fn current_function(&self) -> Option<u32> {
        let id = self.current_function.load(Ordering::Relaxed);
        (id != u32::MAX).then_some(id)
    }

    /// Sets `max_heap_size` (live bytes).
    pub(crate) fn set_limit(&self, bytes: u64) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// Whether live bytes went over `max_heap_size` (checked at the next checkpoint).
    #[inline]
    pub(crate) fn over_limit(&self) -> bool {
        self.over_limit.load(Ordering::Relaxed)
    }

    /// Charges an allocation of `size` bytes, by the thread polling the process.
    #[inline(always)]
    pub(super) fn charge_owner(&self, size: u64) {
        add(&self.words, size.div_ceil(8));
        add(&self.bytes, size);
        add(&self.blocks, 1);
        let live = self.live();
        if live > self.peak.load(Ordering::Relaxed) {
            self.new_peak(live);
        }
    }

    #[inline(never)]
    fn new_peak(&self, live: u64) {
        self.peak.store(live, Ordering::Relaxed);
        if live > self.limit.load(Ordering::Relaxed) {
            self.over_limit.store(true, Ordering::Relaxed);
        }
    }

    /// Charges an allocation made for the process by another thread while it may run.
    #[inline]
    pub(super) fn charge_shared(&self, size: u64) {
        self.shared_words
            .fetch_add(size.div_ceil(8), Ordering::Relaxed);
        self.shared_bytes.fetch_add(size, Ordering::Relaxed);
        self.shared_blocks.fetch_add(1, Ordering::Relaxed);
        // Live bytes it holds without having allocated them as the owner.
        self.adjust_remote(self.tag().generation, size.wrapping_neg());
    }

    /// Credits a free of one of its blocks, by the thread polling the process.
    #[inline(always)]
    pub(super) fn credit_owner(&self, size: u64) {
        add(&self.freed, size);
    }

    /// Adjusts live bytes from any thread, if the account still belongs to generation
    /// `generation`: `delta` is added to what others took away (a free is `+size`, a block
    /// moved in is `-size`). Returns whether it applied.
    pub(super) fn adjust_remote(&self, generation: u32, delta: u64) -> bool {
        let want = u64::from(generation & 0xffff);
        let mut current = self.remote.load(Ordering::Relaxed);
        loop {
            if current >> COUNT_BITS != want {
                return false;
            }
            let next = (current & !COUNT_MASK) | (current.wrapping_add(delta) & COUNT_MASK);
            match self.remote.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(seen) => current = seen,
            }
        }
    }

    /// Bytes allocated for it and not freed yet.
    #[inline(always)]
    pub(crate) fn live(&self) -> u64 {
        let allocated = self.bytes.load(Ordering::Relaxed);
        let taken = self.freed.load(Ordering::Relaxed) as i64
            + signed48(self.remote.load(Ordering::Relaxed) & COUNT_MASK);
        (allocated as i64 - taken).max(0) as u64
    }

    /// Words, bytes and blocks allocated while the process is polled (what call_memory
    /// measures between two points of a poll).
    #[inline(always)]
    pub(crate) fn owner_totals(&self) -> [u64; 3] {
        [
            self.words.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
            self.blocks.load(Ordering::Relaxed),
        ]
    }

    /// Blocks allocated while the process is polled.
    #[inline(always)]
    pub(crate) fn owner_blocks(&self) -> u64 {
        self.blocks.load(Ordering::Relaxed)
    }

    /// Its figures now.
    pub(crate) fn stats(&self) -> super::HeapStats {
        let live = self.live();
        super::HeapStats {
            words: self.words.load(Ordering::Relaxed) + self.shared_words.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed) + self.shared_bytes.load(Ordering::Relaxed),
            blocks: self.blocks.load(Ordering::Relaxed)
                + self.shared_blocks.load(Ordering::Relaxed),
            live_bytes: live,
            peak_live_bytes: self.peak.load(Ordering::Relaxed).max(live),
        }
    }
}

/// A plain add by the only writer.
#[inline(always)]
fn add(field: &AtomicU64, n: u64) {
    field.store(
        field.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Makes `account` the one this thread charges until the guard drops; `shared` when the thread
/// acts for the process beside it.
pub(crate) struct Charging {
    prev: Charge,
}

impl Charging {
    #[inline]
    pub(crate) fn new(account: &'static Account, shared: bool) -> Charging {
        let charge = if shared {
            Charge::Shared(account)
        } else {
            Charge::Owner(account)
        };
        Charging {
            prev: set_charge(charge),
        }
    }
}

impl Drop for Charging {
    #[inline]
    fn drop(&mut self) {
        set_charge(self.prev);
    }
}

/// The account of the process this thread is polling, if any.
#[inline(always)]
pub(crate) fn current_owner_account() -> Option<&'static Account> {
    match current_charge() {
        Charge::Owner(account) => Some(account),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed48_sign_extends() {
        assert_eq!(signed48(5), 5);
        assert_eq!(signed48(COUNT_MASK), -1);
        assert_eq!(signed48(0u64.wrapping_sub(10) & COUNT_MASK), -10);
    }

    #[test]
    fn tags_pack_and_unpack() {
        let tag = Tag {
            slot: 7,
            generation: 0xdead_beef,
        };
        assert_eq!(Tag::unpack(tag.pack()), tag);
    }

    #[test]
    fn remote_updates_check_the_generation() {
        let account = Account::acquire();
        let generation = account.tag().generation;
        assert!(account.adjust_remote(generation, 100));
        assert!(!account.adjust_remote(generation.wrapping_add(1), 100));
        account.release();
        assert!(!account.adjust_remote(generation, 100));
    }
}
