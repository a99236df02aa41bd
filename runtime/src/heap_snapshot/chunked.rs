//! An append-only vector kept in chunks of a fixed size: growing it never copies what it
//! holds, so it never needs twice its size at once (as a `Vec` does while it doubles), and a
//! snapshot's peak memory stays what its records take.

/// Items per chunk.
const CHUNK: usize = 4096;

/// An append-only vector in chunks of [`CHUNK`] items.
pub(super) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Chunked<T> {
    pub(super) fn new() -> Chunked<T> {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }

    pub(super) fn push(&mut self, item: T) {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        if let Some(last) = self.chunks.last_mut() {
            last.push(item);
            self.len += 1;
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Item `i`.
    ///
    /// # Panics
    /// When `i` is out of bounds, as a slice does.
    pub(super) fn get(&self, i: usize) -> &T {
        &self.chunks[i / CHUNK][i % CHUNK]
    }

    pub(super) fn get_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }

    /// Items `start..end`, in order.
    pub(super) fn range(&self, start: usize, end: usize) -> impl Iterator<Item = &T> {
        (start..end).map(|i| self.get(i))
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::{CHUNK, Chunked};

    #[test]
    fn items_are_kept_in_order_across_chunks() {
        let mut c = Chunked::new();
        let n = 2 * CHUNK + 5;
        for i in 0..n {
            c.push(i);
        }
        assert_eq!(c.len(), n);
        assert_eq!(*c.get(CHUNK), CHUNK);
        *c.get_mut(n - 1) = 0;
        assert_eq!(
            c.range(CHUNK - 1, CHUNK + 2).copied().collect::<Vec<_>>(),
            [CHUNK - 1, CHUNK, CHUNK + 1]
        );
        assert_eq!(c.iter().count(), n);
        assert_eq!(c.iter().last(), Some(&0));
    }
}
