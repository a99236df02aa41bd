//! The counting global allocator: every block carries the tag of the account it was charged to.
//!
//! A block of alignment up to 16 gets its tag in a header just before it (8 bytes for
//! alignments up to 8, 16 for 16); a block of larger alignment gets it in a footer after its
//! last byte, rounded up to 8 (so a 128-aligned tokio task cell does not pay 128 bytes of
//! header). The allocator reads one thread-local, [`Charge`], and never allocates, locks or
//! unwinds.
//!
//! Alignments up to 8 (nearly every block) take a fast path: the 8-byte header is inlined,
//! an owner's allocation is four plain adds and one comparison against its peak gate (see
//! `Account::gate`), an owner's free of its own block one compare and one subtraction, and
//! every other case is a tail call out of line.
//!
//! Allocation sampling ([`super::sampling`]) adds one load and a branch to each allocation
//! while off, a subtraction and a branch more while on.
//!
//! # Whose pointer reaches the tag
//!
//! A block handed out through `#[global_allocator]` is, to the program and to the compiler, a
//! fresh allocation of exactly the size asked: `__rust_alloc` carries LLVM's allocator
//! attributes (`allockind`, `allocsize`, a `noalias` return), and Rust's rules give the
//! program's pointer the provenance of those bytes only. The tag lies outside them, so the
//! allocator may never reach it, nor the inner block, through a pointer the program gives back
//! (to `dealloc`, `realloc`, or [`move_box`](super::move_box)): `ptr.sub(8)` of such a pointer
//! is out of its bounds, which is undefined behaviour. It was not theoretical: with the free
//! path inlined into a program's drop glue (`__rust_dealloc` is defined in the program's own
//! crate, so it inlines), LLVM saw a block come from `__rust_alloc` and its header read 8 bytes
//! before it, concluded that every path freeing the block was unreachable, and deleted them: a
//! function that built a `Vec<String>` and compared it compiled to a trap, and an `assert_eq!`
//! of two equal values to an unconditional failure (issue 28).
//!
//! So every inner block's provenance is exposed when it is handed out ([`expose`]), and a
//! pointer given back is turned into the allocator's own pointer to the same address
//! ([`reclaim`]), which takes that exposed provenance: the header, the footer and the inner
//! block are then reached through the inner allocator's provenance, never the program's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::account::{Account, Charge, SAMPLED, Tag, account_at};

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

/// The address of the last block handed out for [`PROBE`]: what the probe of
/// [`installed`](super::installed) looks for.
pub(super) static PROBED: AtomicUsize = AtomicUsize::new(0);

/// The layout the probe of [`installed`](super::installed) allocates: an alignment over 16, so
/// that only the allocator's out-of-line path, which is rare (a program's blocks are aligned to
/// 16 or less but for a few, such as tokio's task cells at 128), compares a layout with it. A
/// program that allocates this layout itself only records its block's address there, which the
/// probe never mistakes for its own.
pub(super) const PROBE: Layout = match Layout::from_size_align(24, 4096) {
    Ok(layout) => layout,
    Err(_) => panic!("a valid layout"),
};

/// Gives up the provenance of an inner block the allocator is handing out, so that
/// [`reclaim`] can take it again from an address: the program's pointer to the block will not
/// carry it (see the module documentation).
#[inline(always)]
fn expose(base: *mut u8) {
    let _ = base.expose_provenance();
}

/// The allocator's own pointer to `addr`, a place in an inner block it handed out (and
/// [`expose`]d) outside the caller's bytes (the inner block's start, a tag): a pointer the
/// program gives back has the provenance of the caller's bytes only (see the module
/// documentation), so the allocator computes such an address as an integer, from the
/// program's pointer's address, and reaches it through this.
///
/// Never with the program's pointer's own address: LLVM folds `inttoptr(ptrtoint(p))` back
/// into `p`, which keeps the program's provenance (rust-lang/rust#156622), and the arithmetic
/// would then be done on `p` again. An address moved by the header's or the tag's offset is
/// not folded.
#[inline(always)]
fn reclaim(addr: usize) -> *mut u8 {
    std::ptr::with_exposed_provenance_mut(addr)
}

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
            if layout.size() > MAX_HEADED {
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

    /// The tag's address for the block at `block`, a pointer of the allocator's.
    #[inline(always)]
    pub(super) fn tag_ptr(self, block: *mut u8) -> *mut u64 {
        block.wrapping_offset(self.tag_at).cast::<u64>()
    }

    /// The allocator's own pointers to the tag and to the inner block's start of the block
    /// at `addr`, the address of a pointer the program gave back ([`reclaim`]: the tag's
    /// offset is never 0, so the address reclaimed is never the program's pointer's own).
    #[inline(always)]
    pub(super) fn reclaim(self, addr: usize) -> (*mut u64, *mut u8) {
        let tag = reclaim(addr.wrapping_add_signed(self.tag_at));
        let base = tag.wrapping_offset(-(self.tag_at + self.offset as isize));
        (tag.cast::<u64>(), base)
    }
}

/// The largest size a block of alignment up to 16 may have: with its header, rounded up to
/// its alignment, it stays a valid `Layout` (at most `isize::MAX`).
const MAX_HEADED: usize = isize::MAX as usize - 64;

/// The inner layout of a block of `size` bytes with a header of `H` bytes (8 for alignments
/// up to 8, 16 for 16), its tag in the header's last 8: what [`Plan::of`] plans for them.
///
/// # Safety
/// `size <= MAX_HEADED`, and `H` is 8 or 16.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn headed<const H: usize>(size: usize) -> Layout {
    // SAFETY: `H` is a power of two (by the caller), and `size + H` rounded up to `H` stays
    // below `isize::MAX` since `size <= MAX_HEADED` (by the caller).
    unsafe { Layout::from_size_align_unchecked(size + H, H) }
}

/// The largest size `alloc`'s inlined path takes, under 2 GiB: one comparison with an
/// immediate (larger blocks take `alloc_large`, the same path out of line).
const FAST_MAX: usize = i32::MAX as usize;
const _: () = assert!(FAST_MAX <= MAX_HEADED);

/// Charges an allocation of `size` bytes to this thread's account; returns its packed tag.
#[inline(always)]
fn charge(size: usize) -> u64 {
    match super::account::owner_of_thread() {
        Ok(account) => {
            if account.charge_owner(size as u64) {
                account.new_peak();
            }
            account.tag_word()
        }
        Err(raw) if super::account::is_none(raw) => Tag::NONE.pack(),
        Err(raw) => charge_other(raw, size),
    }
}

/// [`charge`] for a helper's allocation, or a tallied one: `raw` is the thread-local's value.
#[inline(never)]
fn charge_other(raw: *const Account, size: usize) -> u64 {
    match super::account::charge_of(raw) {
        Charge::Shared(account) => {
            account.charge_shared(size as u64);
            account.tag_word()
        }
        Charge::Tallied(tally) => tally.charge(size as u64),
        Charge::Owner(account) => {
            if account.charge_owner(size as u64) {
                account.new_peak();
            }
            account.tag_word()
        }
        Charge::None => Tag::NONE.pack(),
    }
}

/// Charges and tags a block with an `H`-byte header whose inner block starts at `base`;
/// returns the caller's block. The same as [`charge`] and a write of the tag, arranged so that
/// the common cases keep few registers live across calls: the rare ones are tail calls.
///
/// # Safety
/// `base` is a live inner block of layout `headed::<H>(size)`.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn finish_headed<const H: usize>(base: *mut u8, size: usize) -> *mut u8 {
    // SAFETY: the header is the first `H` bytes of the inner block, which is `H`-aligned;
    // the tag is its last 8.
    unsafe {
        let block = base.add(H);
        let tag = block.sub(8).cast::<u64>();
        match super::account::owner_of_thread() {
            Ok(account) => {
                tag.write(account.tag_word());
                if account.charge_owner(size as u64) {
                    return new_peak(account, block);
                }
                block
            }
            Err(raw) if super::account::is_none(raw) => {
                tag.write(Tag::NONE.pack());
                block
            }
            Err(raw) => finish_other(raw, size, block),
        }
    }
}

/// [`Account::new_peak`], passing `block` through (a tail call for [`finish_headed`]).
#[cold]
#[inline(never)]
fn new_peak(account: &Account, block: *mut u8) -> *mut u8 {
    account.new_peak();
    block
}

/// [`finish_headed`] for a helper's allocation, or a tallied one.
///
/// # Safety
/// As [`finish_headed`]'s, `block` being the header's size into the inner block.
#[allow(unsafe_code)]
#[inline(never)]
unsafe fn finish_other(raw: *const Account, size: usize, block: *mut u8) -> *mut u8 {
    let tag = charge_other(raw, size);
    // SAFETY: the tag is the 8 bytes before `block`, in the header (by the caller).
    unsafe { block.sub(8).cast::<u64>().write(tag) };
    block
}

/// Credits the free of a block of `size` bytes tagged `tag` to its owner, if it still lives.
#[inline(always)]
pub(super) fn credit(tag: Tag, size: usize) {
    credit_word(tag.pack(), size);
}

/// [`credit`] for a packed tag: the allocator's free path.
#[inline(always)]
fn credit_word(tag: u64, size: usize) {
    if !credit_own(tag, size) && tag != Tag::NONE.pack() {
        credit_remote(Tag::unpack(tag), size);
    }
}

/// Whether the free of a block tagged `tag` is this thread's owner freeing its own block;
/// then credits it (`size` bytes). The owner's tag is never [`Tag::NONE`]'s: an account
/// charged as an owner belongs to a live process.
#[inline(always)]
fn credit_own(tag: u64, size: usize) -> bool {
    if let Some(account) = super::account::owner_tagged(tag) {
        account.credit_owner(size as u64);
        true
    } else {
        false
    }
}

#[inline(never)]
fn credit_remote(tag: Tag, size: usize) {
    if tag.generation == 0 {
        return;
    }
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

// Every block handed out is the inner allocator's block at `plan.offset` past its start, where
// `plan = Plan::of(layout)` for the caller's layout (for alignments up to 16, the header paths
// below inline that plan: an `H`-byte header, `H` being 8 up to alignment 8 and 16 for 16, the
// inner layout `headed::<H>(size)`, the tag in the header's last 8 bytes, and sizes over
// `MAX_HEADED` refused as `Plan::of` refuses them); the caller gives the same layout back on
// dealloc and realloc (GlobalAlloc's contract), so the plan, the inner block's start and the
// tag's place are recomputed exactly (and a size given back was accepted once, so it is at
// most `MAX_HEADED`). The tag's 8 bytes lie inside the inner block, outside the caller's bytes
// (before them for a header, after the size rounded up to 8 for a footer), and are 8-aligned
// because the block's start is aligned to at least 8 and both offsets are multiples of 8.
// Every inner block is exposed before its block is handed out, and every pointer the caller
// gives back is reclaimed before anything outside the caller's bytes is reached through it, or
// it is given to the inner allocator: the tag and the inner block are reached with the inner
// block's provenance (see "Whose pointer reaches the tag" above).
// Nothing here allocates, locks or unwinds.
// SAFETY: see above.
#[allow(unsafe_code)]
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() > 8 {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.alloc_aligned(layout, false) };
        }
        if layout.size() > FAST_MAX {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.alloc_large(layout.size()) };
        }
        // SAFETY: the caller's contract, passed on; the alignment is at most 8.
        unsafe { self.alloc_headed::<8>(layout.size(), false) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() > 8 {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.alloc_aligned(layout, true) };
        }
        // SAFETY: the caller's contract, passed on; the alignment is at most 8.
        unsafe { self.alloc_headed::<8>(layout.size(), true) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.align() > 8 {
            // SAFETY: the caller's contract, passed on.
            return unsafe { Self::dealloc_aligned(ptr, layout.size(), layout.align(), self) };
        }
        // SAFETY: the caller's contract, passed on; the alignment is at most 8.
        unsafe { Self::dealloc_small(ptr, layout.size(), self) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() > 8 {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.realloc_aligned(ptr, layout, new_size) };
        }
        // SAFETY: the caller's contract, passed on; the alignment is at most 8.
        unsafe { self.realloc_headed::<8>(ptr, layout.size(), new_size) }
    }
}

#[allow(unsafe_code)]
impl<A: GlobalAlloc> CountingAlloc<A> {
    /// `alloc` (or `alloc_zeroed`) of a block of `size` bytes with an `H`-byte header.
    ///
    /// # Safety
    /// GlobalAlloc's `alloc`; `H` is 8 for alignments up to 8, 16 for 16.
    #[inline(always)]
    unsafe fn alloc_headed<const H: usize>(&self, size: usize, zeroed: bool) -> *mut u8 {
        if size > MAX_HEADED {
            return std::ptr::null_mut();
        }
        // SAFETY: `size <= MAX_HEADED`; the inner layout is not zero-sized.
        let base = unsafe {
            if zeroed {
                self.inner.alloc_zeroed(headed::<H>(size))
            } else {
                self.inner.alloc(headed::<H>(size))
            }
        };
        if base.is_null() {
            return base;
        }
        expose(base);
        // SAFETY: see the impl.
        let block = unsafe { finish_headed::<H>(base, size) };
        if super::sampling::on_alloc(block, size) {
            // SAFETY: the tag is the 8 bytes before the block, in its header (see the impl).
            unsafe { mark_sampled(block.sub(8).cast::<u64>()) };
        }
        block
    }

    /// `alloc` of a block of 2 GiB or more aligned to 8 or less: out of line, so that the
    /// inlined path compares the size with an immediate ([`FAST_MAX`]) rather than with
    /// `MAX_HEADED`, which takes loading a 64-bit constant.
    ///
    /// # Safety
    /// GlobalAlloc's `alloc`, of a layout aligned to 8 or less.
    #[cold]
    #[inline(never)]
    unsafe fn alloc_large(&self, size: usize) -> *mut u8 {
        // SAFETY: by the caller.
        unsafe { self.alloc_headed::<8>(size, false) }
    }

    /// `dealloc` of a block of `size` bytes with an `H`-byte header.
    ///
    /// # Safety
    /// GlobalAlloc's `dealloc`; `H` as in [`alloc_headed`](Self::alloc_headed).
    #[inline(always)]
    unsafe fn dealloc_headed<const H: usize>(&self, ptr: *mut u8, size: usize) {
        // SAFETY: see the impl: the block was handed out by `alloc_headed::<H>` with this size,
        // so it is at most `MAX_HEADED`, the inner block of layout `headed::<H>(size)` starts
        // `H` bytes before it, and the tag is the 8 bytes just before it; `base`, reclaimed from
        // that address, reaches them with the inner block's provenance.
        unsafe {
            let base = reclaim(ptr.addr() - H);
            let tag = base.add(H - 8).cast::<u64>().read();
            if !credit_own(tag, size) && tag != Tag::NONE.pack() {
                // A tail call: the common cases keep nothing live across a call.
                return self.dealloc_credit::<H>(base, size, tag);
            }
            self.inner.dealloc(base, headed::<H>(size));
        }
    }

    /// `dealloc` of a block of `size` bytes aligned to 8 or less, out of line: inlined into a
    /// large caller (the program's drop glue), the thread-local read of the charge was left a
    /// call of its own (std's accessor, 9 instructions where 2 do), so the free is a call of
    /// ours instead, the same call the system allocator's free is (`__rdl_dealloc`).
    ///
    /// The allocator comes last, so that the caller's pointer and size stay in the registers
    /// they arrive in (`__rust_dealloc`'s first two) and the pointer becomes the inner free's
    /// argument in place: no moves in the shim, nor here.
    ///
    /// # Safety
    /// GlobalAlloc's `dealloc`, of a layout aligned to 8 or less.
    #[inline(never)]
    unsafe fn dealloc_small(ptr: *mut u8, size: usize, this: &Self) {
        // SAFETY: by the caller.
        unsafe { this.dealloc_headed::<8>(ptr, size) }
    }

    /// `realloc` of a block of `size` bytes with an `H`-byte header.
    ///
    /// # Safety
    /// GlobalAlloc's `realloc`; `H` as in [`alloc_headed`](Self::alloc_headed).
    #[inline(always)]
    unsafe fn realloc_headed<const H: usize>(
        &self,
        ptr: *mut u8,
        size: usize,
        new_size: usize,
    ) -> *mut u8 {
        if new_size > MAX_HEADED {
            return std::ptr::null_mut(); // the old block is untouched
        }
        // SAFETY: as in `dealloc_headed`; `new_size <= MAX_HEADED` makes
        // `headed::<H>(new_size)` valid, and the inner realloc keeps the header's place. The
        // inner block it gives is exposed before its block is handed out.
        unsafe {
            let old = reclaim(ptr.addr() - H);
            let tag = old.add(H - 8).cast::<u64>().read();
            let base = self.inner.realloc(old, headed::<H>(size), new_size + H);
            if base.is_null() {
                return base; // the old block is untouched, tag included
            }
            expose(base);
            if tag & SAMPLED != 0 {
                super::sampling::on_free(ptr);
            }
            credit_word(tag, size);
            let block = finish_headed::<H>(base, new_size);
            if super::sampling::on_alloc(block, new_size) {
                mark_sampled(block.sub(8).cast::<u64>());
            }
            block
        }
    }

    /// The rest of `dealloc_headed` for a block that another thread allocated: credits its
    /// owner, if it still lives, and frees it.
    ///
    /// # Safety
    /// `base` is a live inner block of layout `headed::<H>(size)`.
    #[inline(never)]
    unsafe fn dealloc_credit<const H: usize>(&self, base: *mut u8, size: usize, tag: u64) {
        if tag & SAMPLED != 0 {
            super::sampling::on_free(base.wrapping_add(H));
        }
        credit_remote(Tag::unpack(tag), size);
        // SAFETY: by the caller.
        unsafe { self.inner.dealloc(base, headed::<H>(size)) }
    }

    /// `alloc` or `alloc_zeroed` of a layout aligned to more than 8.
    ///
    /// # Safety
    /// GlobalAlloc's `alloc`.
    #[inline(never)]
    unsafe fn alloc_aligned(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if layout.align() == 16 {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.alloc_headed::<16>(layout.size(), zeroed) };
        }
        let Some(plan) = Plan::of(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `plan.outer` has a non-zero size (it includes the tag).
        let base = unsafe {
            if zeroed {
                self.inner.alloc_zeroed(plan.outer)
            } else {
                self.inner.alloc(plan.outer)
            }
        };
        if base.is_null() {
            return base;
        }
        expose(base);
        if layout == PROBE {
            return probed(plan, base);
        }
        // SAFETY: see the impl.
        let block = unsafe { finish_planned(plan, base, layout.size()) };
        if super::sampling::on_alloc(block, layout.size()) {
            // SAFETY: as in `finish_planned`.
            unsafe { mark_sampled(plan.tag_ptr(block)) };
        }
        block
    }

    /// `dealloc` of a layout of `size` and `align`, aligned to more than 8. Its arguments come
    /// in `__rust_dealloc`'s order, the allocator last (as
    /// [`dealloc_small`](Self::dealloc_small)'s), so that the shim passes them on where they
    /// are.
    ///
    /// # Safety
    /// GlobalAlloc's `dealloc`, `size` and `align` making the block's layout.
    #[inline(never)]
    unsafe fn dealloc_aligned(ptr: *mut u8, size: usize, align: usize, this: &Self) {
        // SAFETY: the block's layout (by the caller), valid since it was handed out with it.
        let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
        if layout.align() == 16 {
            // SAFETY: the caller's contract, passed on.
            return unsafe { this.dealloc_headed::<16>(ptr, layout.size()) };
        }
        let Some(plan) = Plan::of(layout) else {
            return; // never handed out
        };
        let (tag_ptr, base) = plan.reclaim(ptr.addr());
        // SAFETY: see the impl: the tag was written when the block was handed out.
        let tag = unsafe { tag_ptr.read() };
        if tag & SAMPLED != 0 {
            super::sampling::on_free(ptr);
        }
        credit_word(tag, layout.size());
        // SAFETY: the inner block starts `offset` bytes before `ptr`, with layout `outer`.
        unsafe { this.inner.dealloc(base, plan.outer) }
    }

    /// `realloc` of a layout aligned to more than 8.
    ///
    /// # Safety
    /// GlobalAlloc's `realloc`.
    #[inline(never)]
    unsafe fn realloc_aligned(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() == 16 {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.realloc_headed::<16>(ptr, layout.size(), new_size) };
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // Over 16, the tag is a footer, which moves with the size: allocate, copy, free.
        // SAFETY: `new_layout` is valid and non-zero-sized by GlobalAlloc's contract.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are at least `min(old, new)` bytes and distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

/// Marks the block whose tag is at `tag` as sampled ([`SAMPLED`]).
///
/// # Safety
/// `tag` is the tag's place of a live block this allocator handed out.
#[allow(unsafe_code)]
#[cold]
#[inline(never)]
unsafe fn mark_sampled(tag: *mut u64) {
    // SAFETY: by the caller.
    unsafe { tag.write(tag.read() | SAMPLED) };
}

/// Tags the probe's block as no one's (it is charged to no one) and records its address for
/// the probe of [`installed`](super::installed); returns the caller's block.
#[cold]
#[inline(never)]
fn probed(plan: Plan, base: *mut u8) -> *mut u8 {
    let block = base.wrapping_add(plan.offset);
    // SAFETY: `base` is a live inner block of layout `plan.outer` (by the caller, which got it
    // for `PROBE`'s plan); the tag's place lies inside it and is 8-aligned (see the impl).
    #[allow(unsafe_code)]
    unsafe {
        plan.tag_ptr(block).write(Tag::NONE.pack())
    };
    PROBED.store(block.addr(), Ordering::Relaxed);
    block
}

/// Charges and tags a fresh inner block; returns the caller's block.
///
/// # Safety
/// `base` is a live inner block of layout `plan.outer`.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn finish_planned(plan: Plan, base: *mut u8, size: usize) -> *mut u8 {
    // SAFETY: `offset` is within the inner block (its header, or 0).
    let block = unsafe { base.add(plan.offset) };
    let tag = charge(size);
    // SAFETY: the tag's place lies inside the inner block and is 8-aligned (see the impl).
    unsafe { plan.tag_ptr(block).write(tag) };
    block
}

#[cfg(test)]
mod tests {
    use super::super::HeapStats;
    use super::super::account::set_charge;
    use super::super::counts::Tally;
    use super::*;

    /// Writes `size` bytes of a pattern of `seed` at `block`.
    ///
    /// # Safety
    /// `block` is a live block of at least `size` bytes.
    #[allow(unsafe_code)]
    unsafe fn fill(block: *mut u8, size: usize, seed: u8) {
        for i in 0..size {
            // SAFETY: `i < size`, inside the block (by the caller).
            unsafe { block.add(i).write(seed.wrapping_add(i as u8)) };
        }
    }

    /// Whether the first `size` bytes at `block` are [`fill`]'s pattern of `seed`.
    ///
    /// # Safety
    /// `block` is a live block of at least `size` bytes, all written.
    #[allow(unsafe_code)]
    unsafe fn filled(block: *const u8, size: usize, seed: u8) -> bool {
        // SAFETY: `i < size`, inside the block (by the caller).
        (0..size).all(|i| unsafe { block.add(i).read() } == seed.wrapping_add(i as u8))
    }

    /// What an account's figures must read after allocations of `sizes` (freed or not) of
    /// which `live` bytes are not freed, with a peak of `peak`.
    fn figures(sizes: &[usize], live: usize, peak: usize) -> HeapStats {
        HeapStats {
            words: sizes.iter().map(|s| s.div_ceil(8) as u64).sum(),
            bytes: sizes.iter().map(|&s| s as u64).sum(),
            blocks: sizes.len() as u64,
            live_bytes: live as u64,
            peak_live_bytes: peak as u64,
        }
    }

    /// A `CountingAlloc` driven as a plain value (not the global allocator: this test binary
    /// has another) through each of its entry points, for every alignment from 1 to 64 (the
    /// 8-byte header, the 16-byte one, footers) and sizes on either side of the header's and
    /// the footer's rounding: every byte asked for is usable, kept across a realloc that grows
    /// or shrinks the block, zeroed when asked; and the account charged reads exact figures,
    /// whether the thread charges it as the owner, shares it, tallies for it or charges no one,
    /// and whoever frees the block. Under Miri this checks the header and footer arithmetic,
    /// and that the tag and the inner block are reached through the inner block's exposed
    /// provenance (a wrong offset, or a tag inside the caller's bytes, is an out-of-bounds
    /// access or a figure that comes out wrong).
    #[test]
    #[allow(unsafe_code)]
    fn a_counting_alloc_keeps_exact_figures_at_every_alignment() {
        static TALLY: Tally = Tally::new();
        let alloc = CountingAlloc::system();
        let layout = |size: usize, align: usize| {
            Layout::from_size_align(size, align).expect("a valid layout")
        };
        for align in [1, 2, 4, 8, 16, 32, 64] {
            // Fewer and smaller under Miri (its time), on both sides of 8 and 16 still.
            let sizes: &[usize] = if cfg!(miri) {
                &[1, 7, 8, 9, 16, 17, 33]
            } else {
                &[1, 7, 8, 9, 16, 17, 31, 64, 100]
            };
            for &size in sizes {
                let account = Account::acquire();
                let before = set_charge(Charge::Owner(account));
                let grown = size * 3 + 5;
                let shrunk = size.div_ceil(2);
                // SAFETY: every layout has a non-zero size; each block is used inside its size
                // and given back once with the layout it has then (GlobalAlloc's contract).
                unsafe {
                    // The owner allocates, grows, shrinks and frees its own block.
                    let block = alloc.alloc(layout(size, align));
                    assert!(!block.is_null());
                    assert_eq!(block.addr() % align, 0, "align {align} size {size}");
                    fill(block, size, 1);
                    assert_eq!(account.stats(), figures(&[size], size, size));
                    let block = alloc.realloc(block, layout(size, align), grown);
                    assert!(!block.is_null());
                    assert_eq!(block.addr() % align, 0);
                    assert!(filled(block, size, 1), "align {align} size {size}: grown");
                    fill(block, grown, 2);
                    // Over 16, a realloc allocates the new block before it frees the old one.
                    let peak = if align > 16 { size + grown } else { grown };
                    assert_eq!(account.stats(), figures(&[size, grown], grown, peak));
                    let block = alloc.realloc(block, layout(grown, align), shrunk);
                    assert!(!block.is_null());
                    assert!(
                        filled(block, shrunk, 2),
                        "align {align} size {size}: shrunk"
                    );
                    let sizes = [size, grown, shrunk];
                    assert_eq!(account.stats(), figures(&sizes, shrunk, peak));
                    alloc.dealloc(block, layout(shrunk, align));
                    assert_eq!(account.stats(), figures(&sizes, 0, peak));

                    // A zeroed block, freed by a thread that charges no one: its owner is
                    // credited from afar.
                    let zeroed = alloc.alloc_zeroed(layout(size, align));
                    assert!(!zeroed.is_null());
                    assert!((0..size).all(|i| zeroed.add(i).read() == 0));
                    fill(zeroed, size, 3);
                    let sizes = [size, grown, shrunk, size];
                    assert_eq!(account.stats(), figures(&sizes, size, peak));
                    set_charge(Charge::None);
                    alloc.dealloc(zeroed, layout(size, align));
                    assert_eq!(account.stats(), figures(&sizes, 0, peak));

                    // A block charged to no one: freeing it, by the owner too, credits no one.
                    let nobody = alloc.alloc(layout(size, align));
                    fill(nobody, size, 4);
                    set_charge(Charge::Owner(account));
                    alloc.dealloc(nobody, layout(size, align));
                    assert_eq!(account.stats(), figures(&sizes, 0, peak));

                    // Shared: allocated for the process by another thread, freed by the owner.
                    set_charge(Charge::Shared(account));
                    let shared = alloc.alloc(layout(size, align));
                    fill(shared, size, 5);
                    let sizes = [size, grown, shrunk, size, size];
                    assert_eq!(account.stats().bytes, figures(&sizes, 0, 0).bytes);
                    assert_eq!(account.stats().live_bytes, size as u64);
                    set_charge(Charge::Owner(account));
                    alloc.dealloc(shared, layout(size, align));
                    assert_eq!(account.stats().live_bytes, 0);

                    // Tallied for the process: counted in the tally and charged shared.
                    let tallied_before = TALLY.counts().totals();
                    TALLY.account.store(account.slot() + 1, Ordering::Relaxed);
                    set_charge(Charge::Tallied(&TALLY));
                    let tallied = alloc.alloc(layout(size, align));
                    fill(tallied, size, 6);
                    let counted = TALLY.counts().totals();
                    assert_eq!(counted[1] - tallied_before[1], size as u64);
                    assert_eq!(counted[2] - tallied_before[2], 1);
                    assert_eq!(account.stats().live_bytes, size as u64);
                    TALLY.account.store(0, Ordering::Relaxed);

                    // Freed after its owner is gone: nothing is credited to anyone.
                    set_charge(Charge::None);
                    account.release();
                    let next = Account::acquire();
                    alloc.dealloc(tallied, layout(size, align));
                    assert_eq!(next.stats(), HeapStats::default());
                    next.release();
                }
                set_charge(before);
            }
        }
    }

    /// An inner allocator that refuses every block and records the last layout it was asked.
    #[derive(Default)]
    struct Refusing {
        size: AtomicUsize,
        align: AtomicUsize,
    }

    // SAFETY: it never hands out a block.
    #[allow(unsafe_code)]
    unsafe impl GlobalAlloc for Refusing {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            self.size.store(layout.size(), Ordering::Relaxed);
            self.align.store(layout.align(), Ordering::Relaxed);
            std::ptr::null_mut()
        }

        unsafe fn dealloc(&self, _: *mut u8, _: Layout) {
            unreachable!("no block was handed out");
        }
    }

    /// A block of 2 GiB or more (past the inlined path's immediate) still gets its 8-byte
    /// header from the inner allocator, and a failure is passed on; a size whose header would
    /// make the layout invalid is refused without asking.
    #[test]
    #[allow(unsafe_code)]
    fn a_large_block_takes_the_header_path_out_of_line() {
        let alloc = CountingAlloc::new(Refusing::default());
        let large = Layout::from_size_align(FAST_MAX + 1, 8).expect("a valid layout");
        // SAFETY: a non-zero size; the inner allocator hands out nothing.
        assert!(unsafe { alloc.alloc(large) }.is_null());
        assert_eq!(alloc.inner().size.load(Ordering::Relaxed), FAST_MAX + 9);
        assert_eq!(alloc.inner().align.load(Ordering::Relaxed), 8);
        let too_large = Layout::from_size_align(MAX_HEADED + 1, 1).expect("a valid layout");
        // SAFETY: as above.
        assert!(unsafe { alloc.alloc(too_large) }.is_null());
        assert_eq!(alloc.inner().size.load(Ordering::Relaxed), FAST_MAX + 9);
    }

    /// A block tagged by an earlier owner of a slot whose generation shares its low 16 bits
    /// (those packed with the remote count) with the slot's current owner's. The stale tag is
    /// built rather than waited for: reusing one slot 65,536 times is at the mercy of every
    /// other test acquiring accounts meanwhile.
    #[test]
    fn a_free_of_a_block_whose_owner_is_gone_never_reaches_the_slots_next_owner() {
        let next = Account::acquire();
        let tag = next.tag();
        let old_tag = Tag {
            slot: tag.slot,
            generation: tag.generation.wrapping_sub(0x1_0000),
        };
        assert_ne!(old_tag.generation, tag.generation);
        assert_eq!(old_tag.generation & 0xffff, tag.generation & 0xffff);
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
