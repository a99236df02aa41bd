//! An append-only array whose elements never move: the storage under the process table and the
//! node directory.
//!
//! Segment `k` holds `BASE << k` elements and is allocated the first time an index in it is
//! asked for; once allocated it is never freed or moved, so a shared reference to an element is
//! valid for as long as the array lives, and reading takes no lock (a segment is published
//! through a [`OnceLock`]). Indices up to `u32::MAX` fit in [`SEGMENTS`] segments.

use std::sync::OnceLock;

const BASE_SHIFT: u32 = 5;
const BASE: usize = 1 << BASE_SHIFT;
/// How many segments cover every `u32` index.
const SEGMENTS: usize = 33 - BASE_SHIFT as usize;

/// An append-only, lock-free-to-read array of `T`, grown a segment at a time.
pub(crate) struct Segmented<T> {
    segments: [OnceLock<Box<[T]>>; SEGMENTS],
}

impl<T> std::fmt::Debug for Segmented<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let allocated = self.segments.iter().filter(|s| s.get().is_some()).count();
        f.debug_struct("Segmented")
            .field("segments_allocated", &allocated)
            .finish()
    }
}

/// Where index `i` lives: (segment, offset in the segment).
fn locate(i: u32) -> (usize, usize) {
    let j = (u64::from(i) >> BASE_SHIFT) + 1;
    let k = 63 - j.leading_zeros() as usize;
    let start = (BASE as u64) * ((1u64 << k) - 1);
    (k, (u64::from(i) - start) as usize)
}

impl<T: Default> Segmented<T> {
    /// An empty array; allocates nothing.
    pub(crate) const fn new() -> Self {
        Segmented {
            segments: [const { OnceLock::new() }; SEGMENTS],
        }
    }

    /// The element at `i`, if its segment has been allocated.
    #[inline]
    pub(crate) fn get(&self, i: u32) -> Option<&T> {
        let (k, off) = locate(i);
        self.segments[k].get().map(|seg| &seg[off])
    }

    /// The element at `i`, allocating its segment (filled with `T::default()`) if needed.
    pub(crate) fn get_or_alloc(&self, i: u32) -> &T {
        let (k, off) = locate(i);
        let seg = self.segments[k].get_or_init(|| {
            let len = BASE << k;
            (0..len).map(|_| T::default()).collect()
        });
        &seg[off]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn locate_covers_every_index_once() {
        let mut expected = (0usize, 0usize);
        // Segments 0 to 5 under Miri (its time), 0 to 8 else.
        for i in 0..if cfg!(miri) { 2_000u32 } else { 10_000 } {
            assert_eq!(locate(i), expected, "index {i}");
            expected.1 += 1;
            if expected.1 == BASE << expected.0 {
                expected = (expected.0 + 1, 0);
            }
        }
        let (k, off) = locate(u32::MAX);
        assert!(k < SEGMENTS);
        assert!(off < BASE << k);
    }

    #[test]
    fn elements_stay_put_and_unallocated_reads_are_none() {
        let arr: Segmented<AtomicU32> = Segmented::new();
        assert!(arr.get(0).is_none());
        // Under Miri, fewer segments (its time).
        let (at, len) = if cfg!(miri) {
            (1000, 1200)
        } else {
            (5000, 6000)
        };
        assert!(arr.get(at).is_none());
        arr.get_or_alloc(at).store(7, Ordering::Relaxed);
        let first = arr.get(at).unwrap() as *const AtomicU32;
        for i in 0..len {
            arr.get_or_alloc(i);
        }
        assert_eq!(arr.get(at).unwrap() as *const AtomicU32, first);
        assert_eq!(arr.get(at).unwrap().load(Ordering::Relaxed), 7);
    }
}
