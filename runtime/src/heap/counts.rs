//! What call_memory reads: words, bytes and blocks allocated, counted by one thread at a time.
//!
//! A process's own allocations are counted in its account's [`Counts`], by the thread polling
//! it. Code that runs on a thread without being the process's own poll — a helper task of
//! [`spawn_task`](crate::spawn_task) or [`spawn_blocking`](crate::spawn_blocking), which may
//! run beside its process, or traced calls outside any process — is charged as before (shared
//! to the process, or to no one), and while a session measures it, its allocations are also
//! counted in a [`Tally`] that belongs to its thread: the thread's charge is then
//! [`Charge::Tallied`](super::account::Charge), which [`Tallying`] sets for the length of the
//! measured work and puts back after.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::account::{Account, Charge, NotATag, Tag, account_at, replace_raw};

/// Words (8 bytes, rounded up per allocation), bytes and blocks allocated. Written by one
/// thread at a time with a plain load and store each; read by others.
#[derive(Default)]
#[repr(C)]
pub(crate) struct Counts {
    words: AtomicU64,
    bytes: AtomicU64,
    blocks: AtomicU64,
}

/// A plain add by the only writer.
#[inline(always)]
pub(super) fn add(field: &AtomicU64, n: u64) {
    field.store(
        field.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

impl Counts {
    /// All zero.
    pub(crate) const fn new() -> Counts {
        Counts {
            words: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
        }
    }

    /// Counts an allocation of `size` bytes (by the only thread writing them).
    #[inline(always)]
    pub(super) fn add(&self, size: u64) {
        // `size` is at most `isize::MAX` (a `Layout`'s), so this does not overflow.
        add(&self.words, (size + 7) >> 3);
        add(&self.bytes, size);
        add(&self.blocks, 1);
    }

    /// Words, bytes and blocks.
    #[inline(always)]
    pub(crate) fn totals(&self) -> [u64; 3] {
        [
            self.words.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
            self.blocks.load(Ordering::Relaxed),
        ]
    }

    /// Blocks.
    #[inline(always)]
    pub(crate) fn blocks(&self) -> u64 {
        self.blocks.load(Ordering::Relaxed)
    }

    /// The counter [`blocks`](Self::blocks) reads, for the traced stack to keep during a poll.
    #[inline(always)]
    pub(crate) fn blocks_counter(&self) -> &AtomicU64 {
        &self.blocks
    }

    pub(super) fn reset(&self) {
        for field in [&self.words, &self.bytes, &self.blocks] {
            field.store(0, Ordering::Relaxed);
        }
    }
}

/// One thread's count of what it allocates for work it measures that is not a process's own
/// poll (see the module documentation). Aligned as an [`Account`] is, so that a pointer to it
/// leaves the charge's kind bits clear.
#[repr(C, align(64))]
pub(crate) struct Tally {
    /// The slot plus one of the account the allocations are charged to (shared), 0 for none.
    /// Written by its thread before it sets the charge, read by its allocations.
    pub(super) account: AtomicU32,
    counts: Counts,
    /// What [`Charge::Tallied`](super::account::Charge) of it points at (see the account
    /// module's `CURRENT`).
    pub(super) not_owner: NotATag,
}

impl Tally {
    /// A tally for a thread.
    pub(crate) const fn new() -> Tally {
        Tally {
            account: AtomicU32::new(0),
            counts: Counts::new(),
            not_owner: NotATag::new(),
        }
    }

    /// What it counted.
    pub(crate) fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Counts an allocation of `size` bytes and charges it to the tally's account, if any;
    /// returns the tag the block carries. The allocator's path for [`Charge::Tallied`].
    #[inline]
    pub(super) fn charge(&self, size: u64) -> u64 {
        self.counts.add(size);
        let account = self
            .account
            .load(Ordering::Relaxed)
            .checked_sub(1)
            .and_then(account_at);
        match account {
            Some(account) => {
                account.charge_shared(size);
                account.tag_word()
            }
            None => Tag::NONE.pack(),
        }
    }
}

/// Counts this thread's allocations in a [`Tally`] (charging them to an account, shared, or to
/// no one) until dropped, when the thread's charge before is put back. Without
/// [`CountingAlloc`](crate::CountingAlloc), which alone reads the charge, it does nothing.
#[must_use = "the tally counts until the guard is dropped"]
pub(crate) struct Tallying {
    /// The thread's charge before, encoded; `None` without the counting allocator.
    prev: Option<*const Account>,
}

impl Tallying {
    /// Counts in `tally`, charging `account` (shared) or no one.
    pub(crate) fn new(tally: &'static Tally, account: Option<&'static Account>) -> Tallying {
        if !super::installed() {
            return Tallying { prev: None };
        }
        let slot = account.map_or(0, |a| a.slot() + 1);
        tally.account.store(slot, Ordering::Relaxed);
        Tallying {
            prev: Some(replace_raw(Charge::Tallied(tally).encode())),
        }
    }
}

impl Drop for Tallying {
    fn drop(&mut self) {
        if let Some(prev) = self.prev {
            replace_raw(prev);
        }
    }
}
