//! The counting global allocator: every block carries the tag of the account it was charged to.
//!
//! A block of alignment up to 16 gets its tag in a header just before it (8 bytes for
//! alignments up to 8, 16 for 16); a block of larger alignment gets it in a footer after its
//! last byte, rounded up to 8 (so a 128-aligned tokio task cell does not pay 128 bytes of
//! header). The allocator reads one thread-local, [`Charge`], and never allocates, locks or
//! unwinds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::account::{Account, Charge, Tag, account_at, current_charge};

/// A global allocator that charges each allocation to the process that makes it, so the
/// runtime can report per-process heap figures and `tprof` per-function memory (call_memory).
///
/// Install it with one line in the binary (or in each integration-test file, which is a binary
/// of its own):
///
/// ```
/// #[global_allocator]
/// static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
/// # fn main() { assert!(runtime::heap::installed()); }
/// ```
///
/// It wraps any [`GlobalAlloc`] ([`CountingAlloc::new`]) and adds at most 16 bytes to a block
/// (8 for the usual alignments of 8 or less). Allocations made outside any process are
/// charged to no one and cost one thread-local read more than the inner allocator's.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc<A = System> {
    inner: A,
}

impl CountingAlloc<System> {
    /// Counting over the system allocator.
    pub const fn system() -> CountingAlloc<System> {
        CountingAlloc { inner: System }
    }
}

impl<A> CountingAlloc<A> {
    /// Counting over `inner` (e.g. a jemalloc or mimalloc allocator).
    pub const fn new(inner: A) -> CountingAlloc<A> {
        CountingAlloc { inner }
    }

    /// The allocator it counts over.
    pub const fn inner(&self) -> &A {
        &self.inner
    }
}

/// The address the probe of [`installed`](super::installed) was handed.
pub(super) static PROBED: AtomicUsize = AtomicUsize::new(0);

/// Where a block's tag lives and what is asked of the inner allocator.
#[derive(Clone, Copy)]
pub(super) struct Plan {
    /// The inner allocation.
    outer: Layout,
    /// From the inner allocation's start to the block's.
    offset: usize,
    /// From the block's start to its tag (negative for a header).
    tag_at: isize,
}

impl Plan {
    /// The plan for a block of `layout`; `None` when the tagged block would be too large to
    /// describe.
    #[inline(always)]
    pub(super) fn of(layout: Layout) -> Option<Plan> {
        let align = layout.align();
        if align <= 16 {
            let header = align.max(8);
            if layout.size() > isize::MAX as usize - 64 {
                return None;
            }
            // SAFETY: `header` is 8 or 16, a power of two, and `size + header` rounded up to
            // it stays far below `isize::MAX` (checked just above).
            #[allow(unsafe_code)]
            let outer =
                unsafe { Layout::from_size_align_unchecked(layout.size() + header, header) };
            Some(Plan {
                outer,
                offset: header,
                tag_at: -8,
            })
        } else {
            let footer = layout.size().checked_next_multiple_of(8)?;
            let outer = Layout::from_size_align(footer.checked_add(8)?, align).ok()?;
            Some(Plan {
                outer,
                offset: 0,
                tag_at: footer as isize,
            })
        }
    }

    /// The tag's address for the block at `block`.
    #[inline(always)]
    pub(super) fn tag_ptr(self, block: *mut u8) -> *mut u64 {
        block.wrapping_offset(self.tag_at).cast::<u64>()
    }
}

/// Charges an allocation of `size` bytes to this thread's account; returns its tag.
#[inline(always)]
fn charge(size: usize) -> (Tag, bool) {
    match current_charge() {
        Charge::None => (Tag::NONE, false),
        Charge::Owner(account) => {
            account.charge_owner(size as u64);
            (account.tag(), false)
        }
        Charge::Shared(account) => {
            account.charge_shared(size as u64);
            (account.tag(), false)
        }
        Charge::Probe => (Tag::NONE, true),
    }
}

/// Credits the free of a block of `size` bytes tagged `tag` to its owner, if it still lives.
#[inline(always)]
pub(super) fn credit(tag: Tag, size: usize) {
    if tag.generation == 0 {
        return;
    }
    if let Charge::Owner(account) = current_charge()
        && account.tag() == tag
    {
        account.credit_owner(size as u64);
        return;
    }
    credit_remote(tag, size);
}

#[inline(never)]
fn credit_remote(tag: Tag, size: usize) {
    if let Some(account) = account_at(tag.slot) {
        // The full 32-bit generation first: the 16 bits packed with the remote count repeat
        // after 65,536 reuses of a slot. The compare-and-swap on those 16 bits then only has
        // to cover the moment the owner is released.
        if account.tag() == tag {
            account.adjust_remote(tag.generation, size as u64);
        }
    }
}

/// Moves a block of `size` bytes tagged `tag` into `to`'s account; returns the new tag.
pub(super) fn move_charge(tag: Tag, size: usize, to: &'static Account) -> Tag {
    let new = to.tag();
    if new == tag {
        return tag;
    }
    credit(tag, size);
    // Live bytes it did not allocate: "taken" goes down by the size.
    if to.adjust_remote(new.generation, (size as u64).wrapping_neg()) {
        new
    } else {
        Tag::NONE
    }
}

// Every block handed out is the inner allocator's block at
// `plan.offset` past its start, where `plan = Plan::of(layout)` for the caller's layout; the
// caller gives the same layout back on dealloc and realloc (GlobalAlloc's contract), so the
// plan, the inner block's start and the tag's place are recomputed exactly. The tag's 8 bytes
// lie inside the inner block, outside the caller's bytes (before them for a header, after the
// size rounded up to 8 for a footer), and are 8-aligned because the block's start is aligned
// to at least 8 and both offsets are multiples of 8. Nothing here allocates, locks or unwinds.
// SAFETY: see above.
#[allow(unsafe_code)]
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(plan) = Plan::of(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `plan.outer` has a non-zero size (it includes the tag).
        let base = unsafe { self.inner.alloc(plan.outer) };
        if base.is_null() {
            return base;
        }
        // SAFETY: see the impl.
        unsafe { finish_alloc(plan, base, layout.size()) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let Some(plan) = Plan::of(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: as in `alloc`.
        let base = unsafe { self.inner.alloc_zeroed(plan.outer) };
        if base.is_null() {
            return base;
        }
        // SAFETY: see the impl.
        unsafe { finish_alloc(plan, base, layout.size()) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(plan) = Plan::of(layout) else {
            return; // never handed out
        };
        // SAFETY: see the impl: the tag was written when the block was handed out.
        let tag = Tag::unpack(unsafe { plan.tag_ptr(ptr).read() });
        credit(tag, layout.size());
        // SAFETY: the inner block starts `offset` bytes before `ptr`, with layout `outer`.
        unsafe { self.inner.dealloc(ptr.sub(plan.offset), plan.outer) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (Some(plan), Ok(new_layout)) = (
            Plan::of(layout),
            Layout::from_size_align(new_size, layout.align()),
        ) else {
            return std::ptr::null_mut();
        };
        let Some(new_plan) = Plan::of(new_layout) else {
            return std::ptr::null_mut();
        };
        if plan.offset == 0 {
            // A footer moves with the size: allocate, copy, free.
            // SAFETY: `new_layout` is valid and non-zero-sized by GlobalAlloc's contract.
            let new = unsafe { self.alloc(new_layout) };
            if !new.is_null() {
                // SAFETY: both blocks are at least `min(old, new)` bytes and distinct.
                unsafe {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
            }
            return new;
        }
        // A header stays at the start: the inner realloc keeps it.
        // SAFETY: see the impl.
        let old_tag = Tag::unpack(unsafe { plan.tag_ptr(ptr).read() });
        // SAFETY: the inner block starts `offset` bytes before `ptr` with layout `outer`;
        // the new outer size is non-zero and was checked to make a valid layout.
        let base = unsafe {
            self.inner
                .realloc(ptr.sub(plan.offset), plan.outer, new_plan.outer.size())
        };
        if base.is_null() {
            return base; // the old block is untouched, tag included
        }
        credit(old_tag, layout.size());
        // SAFETY: see the impl.
        unsafe { finish_alloc(new_plan, base, new_size) }
    }
}

/// Charges and tags a fresh inner block; returns the caller's block.
///
/// # Safety
/// `base` is a live inner block of layout `plan.outer`.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn finish_alloc(plan: Plan, base: *mut u8, size: usize) -> *mut u8 {
    // SAFETY: `offset` is within the inner block (its header, or 0).
    let block = unsafe { base.add(plan.offset) };
    let (tag, probe) = charge(size);
    if probe {
        PROBED.store(block as usize, Ordering::Relaxed);
    }
    // SAFETY: the tag's place lies inside the inner block and is 8-aligned (see the impl).
    unsafe { plan.tag_ptr(block).write(tag.pack()) };
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_of_a_block_whose_owner_is_gone_never_reaches_the_slots_next_owner() {
        let old = Account::acquire();
        let old_tag = old.tag();
        old.release();
        // Reuse the slot until its generation matches the old one in the 16 bits packed with
        // the remote count.
        let mut found = None;
        for _ in 0..200_000 {
            let next = Account::acquire();
            let tag = next.tag();
            if tag.slot == old_tag.slot
                && tag.generation & 0xffff == old_tag.generation & 0xffff
                && tag.generation != old_tag.generation
            {
                found = Some(next);
                break;
            }
            next.release();
        }
        let next = found.expect("the slot came back with the same low 16 bits of generation");
        next.charge_shared(10_000);
        let live = next.live();
        credit(old_tag, 4096);
        assert_eq!(
            next.live(),
            live,
            "the old block's free was credited to the new owner"
        );
        next.release();
    }
}
