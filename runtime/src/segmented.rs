//! An append-only array whose elements never move: the storage under the process table, the
//! heap accounts and the node directory.
//!
//! Segments are allocated the first time an index in them is asked for; once allocated a
//! segment is never freed or moved, so a shared reference to an element is valid for as long as
//! the array lives, and reading takes no lock (a segment is published through a [`OnceLock`]).
//! Indices up to `u32::MAX` fit in `SEGMENTS` segments.
//!
//! The segments come in groups: group `g` holds `2^SPLIT` segments of `BASE << g` elements
//! each, so the capacity doubles from one group to the next. With `SPLIT = 0` (one segment per
//! group) an array of `n` elements allocates up to twice `n`, on average a third more; each
//! split halves that (`SPLIT = 2`: up to a quarter more, on average about a tenth), at the cost
//! of a few more instructions to locate an index. The heap accounts (128 bytes each, one per
//! process) use `SPLIT = 2`: at 100,000 processes they take 147 bytes per process in place of
//! 168. The process table's 16-byte slots, read by every `send`, keep `SPLIT = 0`.

use std::sync::OnceLock;

const BASE_SHIFT: u32 = 5;
const BASE: usize = 1 << BASE_SHIFT;

/// How many segments cover every `u32` index when each group has `2^split` segments.
pub(crate) const fn segments(split: u32) -> usize {
    locate(u32::MAX, split).0 + 1
}

/// An append-only, lock-free-to-read array of `T`, grown a segment at a time, with `2^SPLIT`
/// segments per doubling of its capacity; `SEGMENTS` must be [`segments`]`(SPLIT)`.
pub(crate) struct Segmented<T, const SPLIT: u32 = 0, const SEGMENTS: usize = { segments(0) }> {
    segments: [OnceLock<Box<[T]>>; SEGMENTS],
}

impl<T, const SPLIT: u32, const SEGMENTS: usize> std::fmt::Debug for Segmented<T, SPLIT, SEGMENTS> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let allocated = self.segments.iter().filter(|s| s.get().is_some()).count();
        f.debug_struct("Segmented")
            .field("segments_allocated", &allocated)
            .finish()
    }
}

/// Where index `i` lives with `2^split` segments per group: (segment, offset in the segment).
#[inline(always)]
const fn locate(i: u32, split: u32) -> (usize, usize) {
    let i = i as u64;
    if split == 0 {
        // The same with one segment per group, in fewer instructions (pid resolution).
        let k = 63 - ((i >> BASE_SHIFT) + 1).leading_zeros() as usize;
        return (k, (i - (BASE as u64) * ((1u64 << k) - 1)) as usize);
    }
    let group = 63 - ((i >> (BASE_SHIFT + split)) + 1).leading_zeros();
    // The groups before `group` hold `(BASE << split) * (2^group - 1)` elements.
    let rel = i - (((BASE as u64) << split) * ((1u64 << group) - 1));
    let segment = ((group as usize) << split) + (rel >> (BASE_SHIFT + group)) as usize;
    (
        segment,
        (rel & ((BASE as u64) << group).wrapping_sub(1)) as usize,
    )
}

/// How many elements segment `k` holds with `2^split` segments per group.
fn segment_len(k: usize, split: u32) -> usize {
    BASE << (k >> split)
}

impl<T: Default, const SPLIT: u32, const SEGMENTS: usize> Segmented<T, SPLIT, SEGMENTS> {
    /// An empty array; allocates nothing.
    pub(crate) const fn new() -> Self {
        const { assert!(SEGMENTS == segments(SPLIT)) };
        Segmented {
            segments: [const { OnceLock::new() }; SEGMENTS],
        }
    }

    /// The element at `i`, if its segment has been allocated.
    #[inline]
    pub(crate) fn get(&self, i: u32) -> Option<&T> {
        let (k, off) = locate(i, SPLIT);
        self.segments[k].get().map(|seg| &seg[off])
    }

    /// The element at `i`, allocating its segment (filled with `T::default()`) if needed.
    pub(crate) fn get_or_alloc(&self, i: u32) -> &T {
        let (k, off) = locate(i, SPLIT);
        let seg = self.segments[k]
            .get_or_init(|| (0..segment_len(k, SPLIT)).map(|_| T::default()).collect());
        &seg[off]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn locate_covers_every_index_once() {
        assert_eq!(segments(0), 28);
        for split in 0..=2 {
            let mut expected = (0usize, 0usize);
            for i in 0..100_000u32 {
                assert_eq!(locate(i, split), expected, "index {i}, split {split}");
                expected.1 += 1;
                if expected.1 == segment_len(expected.0, split) {
                    expected = (expected.0 + 1, 0);
                }
            }
            for i in [u32::MAX - 1, u32::MAX] {
                let (k, off) = locate(i, split);
                assert!(k < segments(split), "split {split}");
                assert!(off < segment_len(k, split));
            }
        }
    }

    #[test]
    fn split_segments_stay_put() {
        let arr: Segmented<AtomicU32, 2, { segments(2) }> = Segmented::new();
        assert!(arr.get(0).is_none());
        arr.get_or_alloc(100_000).store(7, Ordering::Relaxed);
        let first = arr.get(100_000).unwrap() as *const AtomicU32;
        for i in 0..120_000 {
            arr.get_or_alloc(i);
        }
        assert_eq!(arr.get(100_000).unwrap() as *const AtomicU32, first);
        assert_eq!(arr.get(100_000).unwrap().load(Ordering::Relaxed), 7);
    }

    #[test]
    fn elements_stay_put_and_unallocated_reads_are_none() {
        let arr: Segmented<AtomicU32> = Segmented::new();
        assert!(arr.get(0).is_none());
        assert!(arr.get(5000).is_none());
        arr.get_or_alloc(5000).store(7, Ordering::Relaxed);
        let first = arr.get(5000).unwrap() as *const AtomicU32;
        for i in 0..6000 {
            arr.get_or_alloc(i);
        }
        assert_eq!(arr.get(5000).unwrap() as *const AtomicU32, first);
        assert_eq!(arr.get(5000).unwrap().load(Ordering::Relaxed), 7);
    }
}
