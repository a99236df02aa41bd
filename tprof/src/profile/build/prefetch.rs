//! Asking the CPU for the memory a list's next push will write, ahead of the push.
//!
//! A profile is built by a walk over processes that appends to one list per function in turn
//! (a million entries spread over a hundred lists for 10,000 processes of 100 functions). The
//! CPU's own prefetchers follow a few sequential streams, not a hundred: without a hint, every
//! new cache line of every list is a store that waits for memory, and collect spent half its
//! time there. A prefetch issued after a push has the whole walk over the other functions to
//! arrive before the next push to the same list.

/// Hints that the slot `entries` will be pushed into next (the one at its length, within its
/// capacity) is about to be written. Nothing happens when there is no room (the push would
/// move the list) or on targets without a prefetch instruction here.
#[inline(always)]
pub(super) fn next_slot<T>(entries: &Vec<T>) {
    if entries.len() >= entries.capacity() || std::mem::size_of::<T>() == 0 {
        return;
    }
    let first = entries.as_ptr().wrapping_add(entries.len()).cast::<u8>();
    let last = first.wrapping_add(std::mem::size_of::<T>() - 1);
    hint(first);
    hint(last);
}

/// Asks for the cache line holding `byte`.
#[inline(always)]
fn hint(byte: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is unsafe only because it takes a raw pointer; it never reads
    // the memory into a value and never faults, whatever the address (an unmapped one is
    // ignored), so no address can make it unsound. SSE, the feature it needs, is part of every
    // x86_64 target. `byte` itself was computed with `wrapping_add`, which is defined for any
    // offset.
    #[allow(unsafe_code)]
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(byte.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}

#[cfg(test)]
mod tests {
    use super::next_slot;

    /// Hints at every length from empty to full capacity (the last one past the list's room,
    /// where nothing may be asked), and on a list of zero-sized values, leave the lists as
    /// pushed. It exercises the `unsafe` hint; what it can catch is the arithmetic around it:
    /// without the zero-size guard, `size_of - 1` overflows and the test panics.
    #[test]
    fn hinting_the_next_slot_leaves_the_list_as_pushed() {
        let mut entries: Vec<[u64; 6]> = Vec::with_capacity(5);
        next_slot(&entries);
        for i in 0..8u64 {
            entries.push([i; 6]);
            next_slot(&entries);
        }
        let zero_sized: Vec<()> = vec![(); 3];
        next_slot(&zero_sized);
        assert_eq!(entries.len(), 8);
        assert!(entries.iter().enumerate().all(|(i, e)| *e == [i as u64; 6]));
    }
}
