//! Heap accounts: one per process, in a table that is never freed, and the one thread-local the
//! allocator reads to find the account to charge.
//!
//! Who writes what:
//! - The *owner* fields (`words`, `bytes`, `blocks`, `held`, `peak`) are written only by the
//!   thread that is polling the process, with a plain load and store: a process is polled by
//!   one thread at a time and tokio orders one poll before the next, so no update is lost.
//!   `held` is what the owner allocated minus what it freed of its own blocks.
//! - `shared_*` take the allocations of code that acts for the process from other threads at
//!   the same time as it runs (its helper tasks, the spawner building it): an atomic add each.
//! - `remote` takes what other threads do to the process's live bytes: frees of its blocks,
//!   and message envelopes moved into it. It packs a 48-bit wrapping count above the low 16 bits
//!   of the account's generation, so an update meant for a process that is gone can never land
//!   in the account's next owner: it is a compare-and-swap that checks the generation.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use super::counts::{Counts, Tally, add};
use crate::segmented::Segmented;

/// The bits of `remote` below its count: the low bits of the generation.
const GEN_BITS: u32 = 16;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

/// Whom this thread's allocations are charged to: what the allocator reads.
#[derive(Clone, Copy)]
pub(super) enum Charge {
    /// No one: outside any process, or while the runtime or the profiler works for itself.
    None,
    /// The process this thread is polling.
    Owner(&'static Account),
    /// A process this thread acts for while the process itself may run elsewhere.
    Shared(&'static Account),
    /// Work this thread measures that is not a process's own poll: charged to the tally's
    /// account (shared) or to no one, and counted in the tally ([`super::counts`]).
    Tallied(&'static Tally),
}

thread_local! {
    /// A [`Charge`], encoded (see [`Charge::encode`]): always a pointer to a word that the
    /// allocator's free path compares with a block's tag, so that "this thread's owner frees
    /// its own block" is one comparison, and "the process this thread polls" is told from the
    /// rest by one test of the low bits.
    ///
    /// `const`-initialised and without a destructor: the allocator may run while this thread's
    /// destructors run, or before anything else of the thread is set up.
    static CURRENT: Cell<*const Account> = const { Cell::new(NOBODY_RAW) };
}

/// A word that equals no block's tag word: a block carries an account's tag (whose generation
/// is never 0) or [`Tag::NONE`]'s (zero), either perhaps with [`SAMPLED`]; this is generation
/// zero with slot one. What [`CURRENT`] points at for every charge but [`Charge::Owner`]
/// (whose pointer is the account's, at its `tag`).
const NOT_A_TAG: u64 = 1;
const _: () = assert!(NOT_A_TAG != Tag::NONE.pack() && NOT_A_TAG & SAMPLED == 0);

/// A word holding [`NOT_A_TAG`], never written: what a charge other than an owner's points at.
#[repr(transparent)]
pub(crate) struct NotATag(AtomicU64);

impl NotATag {
    /// [`NOT_A_TAG`].
    pub(crate) const fn new() -> NotATag {
        NotATag(AtomicU64::new(NOT_A_TAG))
    }
}

impl Default for NotATag {
    fn default() -> NotATag {
        NotATag::new()
    }
}

/// [`Charge::None`]'s word: the third of these (so that its address's low bits say `NONE`).
#[repr(C, align(64))]
struct Nobody([NotATag; 4]);

static NOBODY: Nobody = Nobody([const { NotATag::new() }; 4]);

/// [`Charge::None`], encoded: a pointer to a [`NOT_A_TAG`] word of [`NOBODY`].
const NOBODY_RAW: *const Account = (&raw const NOBODY.0[2]).cast::<Account>();

/// The low bits of [`CURRENT`] that say which [`Charge`] it holds; 0 for [`Charge::Owner`],
/// whose account pointer is then the whole value (an `Account` is 64-aligned). Each other
/// kind has a bit of its own, the place of its [`NotATag`] word in a 64-aligned record.
const KIND_MASK: usize = 63;
/// [`Charge::None`]: [`NOBODY_RAW`]'s bit.
const NONE: usize = 16;
/// [`Charge::Shared`]: the address of the account's `not_owner` word, whose bit this is.
const SHARED: usize = SHARED_AT % 64;
/// [`Charge::Tallied`]: the address of the tally's `not_owner` word, whose bit this is.
const TALLIED: usize = TALLIED_AT % 64;
// An account's address, and a tally's, leave the kind bits clear; each kind has its own bit.
const _: () = assert!(std::mem::align_of::<Account>() > KIND_MASK);
// Two cache lines: `path_poll` took the second line's padding.
const _: () = assert!(std::mem::size_of::<Account>() == 128);
const _: () = assert!(std::mem::align_of::<Tally>() > KIND_MASK);
const _: () = assert!(std::mem::align_of::<Nobody>() > KIND_MASK);
// An owner's charge is the account's own pointer, which `owner_tagged` reads as its tag word.
const _: () = assert!(std::mem::offset_of!(Account, tag) == 0);
const _: () = assert!(2 * std::mem::size_of::<NotATag>() == NONE);
const _: () = assert!(SHARED.is_power_of_two() && TALLIED.is_power_of_two());
const _: () = assert!(SHARED != NONE && TALLIED != NONE && SHARED != TALLIED);

impl Charge {
    #[inline(always)]
    pub(super) fn encode(self) -> *const Account {
        match self {
            Charge::None => NOBODY_RAW,
            Charge::Owner(account) => account,
            // Made from the whole record, not from the word (`&raw const account.not_owner`
            // would give a pointer allowed only the word's bytes, which `decode` could not go
            // back from: Miri's Stacked Borrows refuses the retag of the whole account).
            Charge::Shared(account) => after(account, SHARED_AT),
            Charge::Tallied(tally) => after(tally, TALLIED_AT),
        }
    }

    /// The charge `encode` made `raw` from.
    #[allow(unsafe_code)]
    #[inline(always)]
    fn decode(raw: *const Account) -> Charge {
        let kind = raw.addr() & KIND_MASK;
        if kind == 0 {
            // SAFETY: `raw` is `encode` of some charge (`set_charge` is the only writer of
            // CURRENT, and its initial value is NONE's); with clear kind bits it can only be an
            // owner's account pointer (the other kinds' words have their bit set).
            Charge::Owner(unsafe { deref(raw) })
        } else if kind == SHARED {
            // SAFETY: likewise, a value with the SHARED bits is `encode` of `Charge::Shared`:
            // a pointer to the account's `not_owner` word, made from the `&'static Account`,
            // which going back by the word's offset gives back.
            Charge::Shared(unsafe { deref(before::<Account>(raw, SHARED_AT)) })
        } else if kind == TALLIED {
            // SAFETY: likewise, a value with the TALLIED bits is `encode` of
            // `Charge::Tallied`: a pointer to a `&'static Tally`'s `not_owner` word, which
            // going back by the word's offset gives back.
            Charge::Tallied(unsafe { deref(before::<Tally>(raw, TALLIED_AT)) })
        } else {
            Charge::None
        }
    }
}

/// Where a charge's `not_owner` word lies in its account ([`Charge::Shared`]).
const SHARED_AT: usize = std::mem::offset_of!(Account, not_owner);
/// Where a charge's `not_owner` word lies in its tally ([`Charge::Tallied`]).
const TALLIED_AT: usize = std::mem::offset_of!(Tally, not_owner);

/// A pointer to the word at `offset` in `record`, with the whole record's provenance (so that
/// [`before`] gives the record back).
#[inline(always)]
fn after<T>(record: &'static T, offset: usize) -> *const Account {
    std::ptr::from_ref(record)
        .cast::<u8>()
        .wrapping_add(offset)
        .cast::<Account>()
}

/// The record of type `T` whose word at `offset` `raw` points at (keeping `raw`'s provenance).
#[inline(always)]
fn before<T>(raw: *const Account, offset: usize) -> *const T {
    raw.cast::<u8>().wrapping_sub(offset).cast::<T>()
}

/// # Safety
/// `raw` was made from a `&'static T` (an account or a tally, by [`Charge::encode`]).
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn deref<T>(raw: *const T) -> &'static T {
    // SAFETY: by the caller, `raw` is a `&'static T` turned into a pointer (with its
    // provenance: `cast` and `wrapping_sub` within the record keep it); accounts are never
    // freed, nor are tallies (they live in `'static` marks that are reused, never freed: see
    // `trace::inflight`).
    unsafe { &*raw }
}

/// The account this thread charges as the owner of the process it polls, if its tag word is
/// `tag` (a block's tag word): the allocator's free path for a block the owner allocated, one
/// thread-local read and one comparison, with no test of the charge's kind.
#[allow(unsafe_code)]
#[inline(always)]
pub(super) fn owner_tagged(tag: u64) -> Option<&'static Account> {
    let raw = CURRENT.with(Cell::get);
    // SAFETY: every value of CURRENT is `encode` of a charge (see `Charge::decode`): a pointer,
    // with the provenance of a `'static` record, to an `AtomicU64` in it (an account's `tag`)
    // or to a `NotATag` (`repr(transparent)` over an `AtomicU64`), read atomically here.
    let word = unsafe { &*raw.cast::<AtomicU64>() }.load(Ordering::Relaxed);
    if word == tag {
        // SAFETY: a `NotATag` holds `NOT_A_TAG`, which no block's tag word is: the word read
        // is an account's tag, so `raw` is `encode` of `Charge::Owner`, the account's pointer.
        Some(unsafe { deref(raw) })
    } else {
        None
    }
}

#[inline(always)]
pub(super) fn current_charge() -> Charge {
    Charge::decode(CURRENT.with(Cell::get))
}

#[inline(always)]
pub(super) fn set_charge(charge: Charge) -> Charge {
    Charge::decode(replace_raw(charge.encode()))
}

/// Sets this thread's charge to `raw`, an encoded [`Charge`] (or a value this returned),
/// and returns the one before, encoded.
#[inline(always)]
pub(super) fn replace_raw(raw: *const Account) -> *const Account {
    CURRENT.with(|c| c.replace(raw))
}

/// The account this thread charges as the owner of the process it polls, if any: the
/// allocator's fast path, one thread-local read and one test.
#[inline(always)]
pub(super) fn owner_of_thread() -> Result<&'static Account, *const Account> {
    let raw = CURRENT.with(Cell::get);
    if raw.addr() & KIND_MASK == 0 {
        // SAFETY: as in `Charge::decode`: a value of CURRENT with clear kind bits is `encode`
        // of `Charge::Owner`.
        #[allow(unsafe_code)]
        Ok(unsafe { deref(raw) })
    } else {
        Err(raw)
    }
}

/// Whether a value [`owner_of_thread`] gave back is [`Charge::None`].
#[inline(always)]
pub(super) fn is_none(raw: *const Account) -> bool {
    raw.addr() & NONE != 0
}

/// The [`Charge`] behind a value [`owner_of_thread`] gave back.
#[inline(always)]
pub(super) fn charge_of(raw: *const Account) -> Charge {
    Charge::decode(raw)
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
    pub(super) const fn pack(self) -> u64 {
        // `as`: widening, lossless (`From` is not `const`).
        ((self.generation as u64) << 32) | self.slot as u64
    }

    /// The tag of a block's tag word, without its [`SAMPLED`] mark.
    #[inline(always)]
    pub(super) fn unpack(word: u64) -> Tag {
        Tag {
            slot: word as u32 & !SAMPLED_SLOT,
            generation: (word >> 32) as u32,
        }
    }
}

/// A slot's top bit, which no slot has (there are fewer than 2<sup>31</sup> accounts:
/// [`Account::acquire`] refuses more): in a block's tag word it marks a block whose allocation
/// was sampled ([`super::sampling`]), so that only those blocks' frees are looked at. A marked
/// word equals no account's tag word, so the free of a marked block always takes the allocator's
/// out-of-line path, where the mark is read; [`Tag::unpack`] leaves it out.
const SAMPLED_SLOT: u32 = 1 << 31;
/// [`SAMPLED_SLOT`] in a tag word.
pub(super) const SAMPLED: u64 = SAMPLED_SLOT as u64;

/// One process's heap figures. The fields the allocator touches share one cache line.
#[derive(Default)]
#[repr(C, align(64))]
pub(crate) struct Account {
    /// The packed [`Tag`] of the process that owns it; generation 0 while free.
    tag: AtomicU64,
    /// What the owner allocated (while the process is polled).
    owner: Counts,
    /// Bytes the owner allocated minus bytes of its blocks the owner freed (wrapping: the
    /// owner may free blocks moved into it, which it did not allocate).
    held: AtomicU64,
    peak: AtomicU64,
    /// A 48-bit wrapping count of bytes others took from its live bytes (frees of its blocks,
    /// minus blocks moved in and shared allocations) over the low 16 bits of the generation.
    remote: AtomicU64,
    /// What `held` must go over for its live bytes to be over its peak, so that an owner's
    /// allocation checks its peak with one comparison: at most `peak + taken` (wrapping;
    /// `taken` being the count in `remote`). The owner raises it to exactly that, with a
    /// compare-and-swap, when `held` goes over it; other threads lower it by what they lower
    /// `taken` by (moving a block in, allocating for the process), after doing so. Frees by
    /// other threads raise `taken` and leave it alone: it is then lower than it could be, which
    /// only sends the owner's next allocation to the check that raises it.
    gate: AtomicU64,
    // The second line: written rarely, or by other threads.
    /// `max_heap_size` in live bytes; `u64::MAX` for none.
    limit: AtomicU64,
    /// What [`Charge::Shared`] of it points at (see [`CURRENT`]).
    not_owner: NotATag,
    slot: AtomicU32,
    /// The callsite id of the traced function the process runs or is suspended in
    /// (`u32::MAX` for none): kept here, in memory that outlives every process, so the traced
    /// stack can write it without holding the process.
    current_function: AtomicU32,
    /// The interned traced path the process last suspended in, while a wall sample session
    /// samples it ([`crate::sample`]; 0: none).
    suspended_path: AtomicU32,
    /// The number of the process's last poll a wall sample session measured (whose suspended
    /// path was recorded); 0 for none. A wall sample of the process running in another poll,
    /// or waiting after another, fell in a poll begun before sampling began. Written only by
    /// the thread polling the process, in such polls (it fills the line's padding: the
    /// account stays 128 bytes).
    path_poll: AtomicU32,
    shared_words: AtomicU64,
    shared_bytes: AtomicU64,
    shared_blocks: AtomicU64,
    over_limit: AtomicBool,
    /// While free: the slot plus one of the next free account below it in [`FREE`] (0: none).
    next_free: AtomicU32,
}

/// A process's heap account, if it has one yet: set at most once (then kept until the
/// process's record is dropped). A pointer, 8 bytes: a process record stays 464 bytes, whose
/// block packs with its task cell (see `benches/idle_memory.rs`).
pub(crate) struct AccountCell(AtomicPtr<Account>);

impl AccountCell {
    /// A cell holding `account`, or none.
    #[inline(always)]
    pub(crate) fn new(account: Option<&'static Account>) -> AccountCell {
        AccountCell(AtomicPtr::new(
            account.map_or(std::ptr::null_mut(), |a| std::ptr::from_ref(a).cast_mut()),
        ))
    }

    /// The account, if there is one.
    #[inline]
    pub(crate) fn get(&self) -> Option<&'static Account> {
        // Acquire: pairs with the release of `get_or_acquire`, so the account's fields as
        // `Account::acquire` left them are seen.
        let ptr = self.0.load(Ordering::Acquire);
        // SAFETY: the cell holds null or a pointer made from a `&'static Account` (`new`,
        // `get_or_acquire`), and accounts are never freed: a non-null one is valid for
        // `'static` and only ever read through shared references.
        #[allow(unsafe_code)]
        unsafe {
            ptr.cast_const().as_ref()
        }
    }

    /// The account, acquired now if there is none yet (a racing caller's account wins and
    /// this one's goes back).
    pub(crate) fn get_or_acquire(&self) -> &'static Account {
        if let Some(account) = self.get() {
            return account;
        }
        let account = Account::acquire();
        let ptr = std::ptr::from_ref(account).cast_mut();
        match self.0.compare_exchange(
            std::ptr::null_mut(),
            ptr,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => account,
            Err(_) => {
                account.release();
                self.get().expect("set by the winner")
            }
        }
    }
}

static ACCOUNTS: Segmented<Account> = Segmented::new();

/// Slots handed out so far (the next never-used slot).
static NEXT_SLOT: AtomicU32 = AtomicU32::new(0);

/// The last generation handed out; generations are unique per acquire (until they wrap).
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// The free accounts: a lock-free stack linked through [`Account::next_free`]. The low 32 bits
/// hold the top's slot plus one (0: empty), the high 32 bits a count of pushes and pops, so
/// that a pop that read a top and its link before the stack changed under it fails its
/// compare-and-swap even if the same slot is on top again (accounts are never freed, so
/// reading a stale link is harmless).
static FREE: AtomicU64 = AtomicU64::new(0);

/// `FREE`'s word with `slot` (or none: `u32::MAX`) on top, after `head`.
#[inline]
fn free_word(head: u64, top_plus_one: u32) -> u64 {
    (((head >> 32) + 1) << 32) | u64::from(top_plus_one)
}

/// The account at `slot`, if it was ever handed out.
#[inline]
pub(super) fn account_at(slot: u32) -> Option<&'static Account> {
    ACCOUNTS.get(slot)
}

/// Pops a free account's slot, if any.
#[inline]
fn pop_free() -> Option<(u32, &'static Account)> {
    // Acquire: the release of the account (its tag cleared, its link) happens before.
    let mut head = FREE.load(Ordering::Acquire);
    loop {
        let top = (head as u32).checked_sub(1)?;
        let account = ACCOUNTS.get(top).expect("a free slot was handed out");
        let next = account.next_free.load(Ordering::Relaxed);
        match FREE.compare_exchange_weak(
            head,
            free_word(head, next),
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => return Some((top, account)),
            Err(seen) => head = seen,
        }
    }
}

impl Account {
    /// Takes a free account for a new process; its figures start at zero.
    pub(crate) fn acquire() -> &'static Account {
        let (slot, account) = pop_free().unwrap_or_else(|| {
            let slot = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
            assert!(slot < SAMPLED_SLOT, "heap accounts exhausted");
            // A new segment of the table is the runtime's, not the current process's.
            (slot, super::suppressed(|| ACCOUNTS.get_or_alloc(slot)))
        });
        // Generations skip 0 (no one), also in their low 16 bits (the remote count's).
        let mut generation = GENERATION.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        while generation & 0xffff == 0 {
            generation = GENERATION.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        }
        account.owner.reset();
        for field in [
            &account.held,
            &account.peak,
            &account.gate,
            &account.shared_words,
            &account.shared_bytes,
            &account.shared_blocks,
        ] {
            field.store(0, Ordering::Relaxed);
        }
        account.limit.store(u64::MAX, Ordering::Relaxed);
        account.current_function.store(u32::MAX, Ordering::Relaxed);
        account.suspended_path.store(0, Ordering::Relaxed);
        account.path_poll.store(0, Ordering::Relaxed);
        account.over_limit.store(false, Ordering::Relaxed);
        account.slot.store(slot, Ordering::Relaxed);
        account
            .remote
            .store(u64::from(generation) & GEN_MASK, Ordering::Release);
        account
            .tag
            .store(Tag { slot, generation }.pack(), Ordering::Release);
        account
    }

    /// Gives the account back when its process is gone: later frees of its blocks are ignored.
    pub(crate) fn release(&'static self) {
        let slot = self.slot.load(Ordering::Relaxed);
        self.tag.store(Tag::NONE.pack(), Ordering::Release);
        // A free racing with this either landed before the store below or sees the new
        // generation bits and gives up.
        self.remote.store(0, Ordering::Release);
        let mut head = FREE.load(Ordering::Relaxed);
        loop {
            self.next_free.store(head as u32, Ordering::Relaxed);
            // Release: the next acquirer sees the stores above and the link.
            match FREE.compare_exchange_weak(
                head,
                free_word(head, slot + 1),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(seen) => head = seen,
            }
        }
    }

    #[inline(always)]
    pub(super) fn tag(&self) -> Tag {
        Tag::unpack(self.tag_word())
    }

    /// Its [`Tag`], packed.
    #[inline(always)]
    pub(super) fn tag_word(&self) -> u64 {
        self.tag.load(Ordering::Relaxed)
    }

    /// Where the traced stack records the traced function the process is in (`u32::MAX`:
    /// none), a relaxed store each time it changes.
    #[inline(always)]
    pub(crate) fn current_function_cell(&self) -> &AtomicU32 {
        &self.current_function
    }

    /// The traced function the process is in, if known.
    pub(crate) fn current_function(&self) -> Option<u32> {
        let id = self.current_function.load(Ordering::Relaxed);
        (id != u32::MAX).then_some(id)
    }

    /// The interned traced path the process last suspended in (0: none known).
    pub(crate) fn suspended_path(&self) -> u32 {
        self.suspended_path.load(Ordering::Relaxed)
    }

    /// Records the traced path the process suspended in.
    pub(crate) fn set_suspended_path(&self, path: u32) {
        self.suspended_path.store(path, Ordering::Relaxed);
    }

    /// The number of the process's last poll a wall sample session measured (0: none).
    pub(crate) fn path_poll(&self) -> u32 {
        self.path_poll.load(Ordering::Relaxed)
    }

    /// Records that the process's poll `poll` is measured by a wall sample session.
    pub(crate) fn set_path_poll(&self, poll: u32) {
        self.path_poll.store(poll, Ordering::Relaxed);
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

    /// Charges an allocation of `size` bytes, by the thread polling the process. Returns
    /// whether its live bytes went over its peak: [`new_peak`](Self::new_peak) is then due.
    #[inline(always)]
    #[must_use]
    pub(super) fn charge_owner(&self, size: u64) -> bool {
        self.owner.add(size);
        // An add to memory, then `held` read again for the comparison: one instruction fewer
        // than a load, an add and a store with the sum kept for it.
        add(&self.held, size);
        // `held - taken > peak`, as `gate` is at most `peak + taken`.
        self.held.load(Ordering::Relaxed) as i64 > self.gate.load(Ordering::Relaxed) as i64
    }

    /// What others took from its live bytes (the signed count in `remote`).
    #[inline(always)]
    fn taken(&self) -> u64 {
        ((self.remote.load(Ordering::Relaxed) as i64) >> GEN_BITS) as u64
    }

    /// Records its live bytes as its peak, by the thread polling the process, after
    /// [`charge_owner`](Self::charge_owner) said they went over.
    #[cold]
    #[inline(never)]
    pub(super) fn new_peak(&self) {
        let held = self.held.load(Ordering::Relaxed);
        // Acquire: whoever lowered the gate to what is read here lowered `taken` before, and
        // the load of `remote` below sees that.
        let mut gate = self.gate.load(Ordering::Acquire);
        loop {
            let taken = self.taken();
            let live = held.wrapping_sub(taken) as i64;
            let mut peak = self.peak.load(Ordering::Relaxed);
            if live > peak as i64 {
                peak = live as u64;
                self.peak.store(peak, Ordering::Relaxed);
                if peak > self.limit.load(Ordering::Relaxed) {
                    self.over_limit.store(true, Ordering::Relaxed);
                }
            }
            // Fails if another thread lowered the gate meanwhile: then `taken` is read again.
            match self.gate.compare_exchange_weak(
                gate,
                peak.wrapping_add(taken),
                Ordering::Relaxed,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(seen) => gate = seen,
            }
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
        add(&self.held, size.wrapping_neg());
    }

    /// Adjusts live bytes from any thread, if the account still belongs to generation
    /// `generation`: `delta` is added to what others took away (a free is `+size`, a block
    /// moved in is `-size`). Returns whether it applied.
    pub(super) fn adjust_remote(&self, generation: u32, delta: u64) -> bool {
        let want = u64::from(generation) & GEN_MASK;
        let mut current = self.remote.load(Ordering::Relaxed);
        loop {
            if current & GEN_MASK != want {
                return false;
            }
            let next = current.wrapping_add(delta << GEN_BITS);
            match self.remote.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if (delta as i64) < 0 {
                        // Live bytes went up: so does the chance of a new peak. Release: see
                        // `new_peak`.
                        self.gate.fetch_add(delta, Ordering::Release);
                    }
                    return true;
                }
                Err(seen) => current = seen,
            }
        }
    }

    /// Bytes allocated for it and not freed yet.
    #[inline(always)]
    pub(crate) fn live(&self) -> u64 {
        let live = self.held.load(Ordering::Relaxed).wrapping_sub(self.taken()) as i64;
        live.max(0) as u64
    }

    /// Words, bytes and blocks allocated while the process is polled (what call_memory
    /// measures between two points of a poll).
    #[inline(always)]
    pub(crate) fn owner_counts(&self) -> &Counts {
        &self.owner
    }

    /// Its slot in the table of accounts.
    pub(super) fn slot(&self) -> u32 {
        self.slot.load(Ordering::Relaxed)
    }

    /// Its figures now.
    pub(crate) fn stats(&self) -> super::HeapStats {
        let live = self.live();
        let [words, bytes, blocks] = self.owner.totals();
        super::HeapStats {
            words: words + self.shared_words.load(Ordering::Relaxed),
            bytes: bytes + self.shared_bytes.load(Ordering::Relaxed),
            blocks: blocks + self.shared_blocks.load(Ordering::Relaxed),
            live_bytes: live,
            peak_live_bytes: self.peak.load(Ordering::Relaxed).max(live),
        }
    }
}

/// Makes `account` the one this thread charges until the guard drops; `shared` when the thread
/// acts for the process beside it.
pub(crate) struct Charging {
    /// The thread's charge before, as [`CURRENT`] held it: put back as it was, never decoded
    /// (an enter and an exit per poll).
    prev: *const Account,
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
            prev: replace_raw(charge.encode()),
        }
    }

    /// As [`new`](Self::new) with `shared`; nothing without an account (a spawn takes one
    /// exactly when [`CountingAlloc`](crate::CountingAlloc), which alone reads the charge, is
    /// installed).
    #[inline]
    pub(crate) fn shared(account: Option<&'static Account>) -> Option<Charging> {
        account.map(|account| Charging::new(account, true))
    }
}

impl Drop for Charging {
    #[inline]
    fn drop(&mut self) {
        replace_raw(self.prev);
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

    /// Racing `get_or_acquire`s all get the one account the cell keeps (the losers' go
    /// back); a cell made with an account gives that one.
    #[test]
    fn an_account_cell_is_set_once() {
        let cell = AccountCell::new(None);
        assert!(cell.get().is_none());
        let got: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| std::ptr::from_ref(cell.get_or_acquire()).addr()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(got.iter().all(|&a| a == got[0]));
        let kept = cell.get().expect("set");
        assert_eq!(std::ptr::from_ref(kept).addr(), got[0]);
        assert_ne!(kept.tag(), Tag::NONE, "the kept account is acquired");
        kept.release();

        let account = Account::acquire();
        let cell = AccountCell::new(Some(account));
        assert!(std::ptr::eq(cell.get().expect("set"), account));
        assert!(std::ptr::eq(cell.get_or_acquire(), account));
        account.release();
    }

    #[test]
    fn the_remote_count_is_signed_and_keeps_the_generation() {
        let account = Account::acquire();
        let generation = account.tag().generation;
        assert!(account.adjust_remote(generation, 10u64.wrapping_neg()));
        assert_eq!(account.taken() as i64, -10);
        assert!(account.adjust_remote(generation, 25));
        assert_eq!(account.taken(), 15);
        assert_eq!(
            account.remote.load(Ordering::Relaxed) & GEN_MASK,
            u64::from(generation) & GEN_MASK
        );
        account.release();
    }

    /// The owner's side of a peak check: `charge_owner`, then `new_peak` when it says so.
    fn owner_alloc(account: &Account, size: u64) {
        if account.charge_owner(size) {
            account.new_peak();
        }
    }

    #[test]
    fn the_peak_counts_blocks_moved_in_and_frees_by_others() {
        let account = Account::acquire();
        let generation = account.tag().generation;
        owner_alloc(account, 100);
        assert_eq!(account.stats().peak_live_bytes, 100);
        // A block moved in (live 150), then a small allocation (160): a new peak.
        assert!(account.adjust_remote(generation, 50u64.wrapping_neg()));
        owner_alloc(account, 10);
        assert_eq!(account.peak.load(Ordering::Relaxed), 160);
        // Another thread frees 60 (live 100): allocations back up to the peak are no new peak,
        // the next byte over it is.
        assert!(account.adjust_remote(generation, 60));
        owner_alloc(account, 20);
        owner_alloc(account, 40);
        assert_eq!(account.peak.load(Ordering::Relaxed), 160);
        assert_eq!(account.live(), 160);
        owner_alloc(account, 1);
        assert_eq!(account.peak.load(Ordering::Relaxed), 161);
        // The owner frees its own blocks, and one moved in: live goes down, the peak stays.
        account.credit_owner(100);
        account.credit_owner(50);
        assert_eq!(account.live(), 11);
        owner_alloc(account, 150);
        assert_eq!(account.peak.load(Ordering::Relaxed), 161);
        owner_alloc(account, 1);
        assert_eq!(account.peak.load(Ordering::Relaxed), 162);
        account.release();
    }

    #[test]
    fn going_over_the_limit_sets_the_flag() {
        let account = Account::acquire();
        account.set_limit(1000);
        owner_alloc(account, 600);
        assert!(!account.over_limit());
        // A shared allocation takes live bytes to 900; the owner's next one goes over.
        account.charge_shared(300);
        assert!(!account.over_limit());
        owner_alloc(account, 200);
        assert!(account.over_limit());
        assert_eq!(account.stats().peak_live_bytes, 1100);
        account.release();
    }

    /// A charge of each kind.
    fn every_kind(account: &'static Account, tally: &'static Tally) -> [Charge; 4] {
        [
            Charge::None,
            Charge::Owner(account),
            Charge::Shared(account),
            Charge::Tallied(tally),
        ]
    }

    #[test]
    fn charges_round_trip_through_the_thread_local() {
        static TALLY: Tally = Tally::new();
        let account = Account::acquire();
        for charge in every_kind(account, &TALLY) {
            let prev = set_charge(charge);
            let seen = current_charge();
            set_charge(prev);
            let same = match (charge, seen) {
                (Charge::None, Charge::None) => true,
                (Charge::Owner(a), Charge::Owner(b)) | (Charge::Shared(a), Charge::Shared(b)) => {
                    std::ptr::eq(a, b)
                }
                (Charge::Tallied(a), Charge::Tallied(b)) => std::ptr::eq(a, b),
                _ => false,
            };
            assert!(same, "a charge came back as another");
        }
        let prev = set_charge(Charge::Owner(account));
        let fast = owner_of_thread().ok().map(|a| a as *const Account);
        set_charge(Charge::Shared(account));
        let shared = owner_of_thread().is_err();
        set_charge(prev);
        assert_eq!(fast, Some(account as *const Account));
        assert!(shared);
        account.release();
    }

    /// The free path's one comparison: only an owner's charge matches a block's tag word
    /// (its account's), and no charge matches a block charged to no one, or a sampled one.
    #[test]
    fn only_the_owners_charge_matches_its_blocks_tag() {
        static TALLY: Tally = Tally::new();
        let account = Account::acquire();
        let tag = account.tag_word();
        for charge in every_kind(account, &TALLY) {
            let prev = set_charge(charge);
            let own = owner_tagged(tag).map(std::ptr::from_ref);
            let none = owner_tagged(Tag::NONE.pack()).is_some();
            let sampled = owner_tagged(tag | SAMPLED).is_some();
            let kind_none = is_none(CURRENT.with(Cell::get));
            set_charge(prev);
            let is_owner = matches!(charge, Charge::Owner(_));
            assert_eq!(own, is_owner.then_some(std::ptr::from_ref(account)));
            assert!(
                !none && !sampled,
                "a charge matched a tag of no one's or a sampled one"
            );
            assert_eq!(kind_none, matches!(charge, Charge::None));
        }
        account.release();
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

    /// The free stack under contention: no account is ever held by two owners at once, and
    /// every acquire gets a generation of its own.
    #[test]
    fn concurrent_acquires_never_share_an_account() {
        use std::collections::HashSet;
        use std::sync::atomic::AtomicU64;
        static HELD: [AtomicU64; 1024] = [const { AtomicU64::new(0) }; 1024];
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::Builder::new()
                    .name("acquirer".into())
                    .spawn(|| {
                        let mut generations = Vec::new();
                        // Miri interleaves the threads at every atomic access: fewer rounds
                        // still race many times, within its time.
                        for _ in 0..if cfg!(miri) { 15 } else { 2_000 } {
                            let held: Vec<_> = (0..3).map(|_| Account::acquire()).collect();
                            for account in &held {
                                let tag = account.tag();
                                generations.push(tag.generation);
                                if let Some(flag) = HELD.get(tag.slot as usize) {
                                    assert_eq!(
                                        flag.swap(1, Ordering::Relaxed),
                                        0,
                                        "slot {} handed out twice",
                                        tag.slot
                                    );
                                }
                            }
                            for account in held {
                                if let Some(flag) = HELD.get(account.tag().slot as usize) {
                                    flag.store(0, Ordering::Relaxed);
                                }
                                account.release();
                            }
                        }
                        generations
                    })
                    .expect("spawn")
            })
            .collect();
        let mut seen = HashSet::new();
        for thread in threads {
            for generation in thread.join().expect("thread") {
                assert!(seen.insert(generation), "generation {generation} reused");
            }
        }
    }
}
