//! Where processes suspend: the traced path of a process's first pending frame in a poll,
//! interned, for the wall sampler.
//!
//! While a wall sample session measures a poll, the traced stack copies the path of the first
//! frame that returns `Pending` ([`capture`], from the stack's pending pop) into a per-thread
//! buffer, and the end of the poll interns it and stores its id in the process's heap account
//! ([`finish`]): one plain store, so the sampler thread reads where a process waits without
//! touching the process or its future, and without stopping anything. Interning takes a lock
//! only for a path the thread has not just interned (a server suspends in the same place poll
//! after poll).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::trace::STACK_CAPACITY;

/// The sessions that want suspended paths (wall sample sessions).
static WANTED: AtomicU64 = AtomicU64::new(0);

/// The sessions that want suspended paths.
#[inline(always)]
pub(crate) fn wanted() -> u64 {
    WANTED.load(Ordering::Relaxed)
}

pub(crate) fn want(bit: u32, on: bool) {
    if on {
        WANTED.fetch_or(1 << bit, Ordering::SeqCst);
    } else {
        WANTED.fetch_and(!(1 << bit), Ordering::SeqCst);
    }
}

/// Interned paths: id 0 is the empty path; ids are indices into `paths`.
struct Table {
    ids: HashMap<Box<[u32]>, u32>,
    paths: Vec<Box<[u32]>>,
}

/// Paths interned at most: a program with more distinct suspension paths than this gets the
/// later ones recorded as their innermost function alone.
const MAX_PATHS: usize = 1 << 20;

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// A path's callsite ids, outermost first, in cells: written and read one id at a time, so
/// that a path of a few frames costs a few stores, not a copy of the whole array.
type Ids = [Cell<u32>; STACK_CAPACITY];

thread_local! {
    /// The path captured in this poll (callsite ids, outermost first) and its length;
    /// `usize::MAX` when none was.
    static CAPTURED: Ids = const { [const { Cell::new(0) }; STACK_CAPACITY] };
    static CAPTURED_LEN: Cell<usize> = const { Cell::new(usize::MAX) };
    /// The last path this thread interned: its hash, id and length, and its ids.
    static LAST: Cell<(u64, u32, usize)> = const { Cell::new((0, 0, 0)) };
    static LAST_PATH: Ids = const { [const { Cell::new(0) }; STACK_CAPACITY] };
}

/// Clears this thread's capture, at the start of a poll.
pub(crate) fn begin() {
    CAPTURED_LEN.with(|c| c.set(usize::MAX));
}

/// Keeps `path` as where this poll suspends, unless a frame of this poll already did.
pub(crate) fn capture(path: impl Iterator<Item = u32>) {
    if CAPTURED_LEN.with(Cell::get) != usize::MAX {
        return;
    }
    let n = CAPTURED.with(|captured| {
        let mut n = 0;
        for (cell, id) in captured.iter().zip(path) {
            cell.set(id);
            n += 1;
        }
        n
    });
    CAPTURED_LEN.with(|c| c.set(n));
}

/// At the end of a poll: stores the captured path's id (0 for none) in `account`.
pub(crate) fn finish(account: &crate::heap::Account) {
    let n = CAPTURED_LEN.with(Cell::get);
    if n == usize::MAX {
        account.set_suspended_path(0);
        return;
    }
    let id = CAPTURED.with(|captured| intern_captured(&captured[..n]));
    account.set_suspended_path(id);
}

/// The id of the path in `cells` (0 for the empty path): [`intern`], read in place when it is
/// the path this thread interned last (a server suspends in the same place poll after poll).
fn intern_captured(cells: &[Cell<u32>]) -> u32 {
    if cells.is_empty() {
        return 0;
    }
    let h = hash(cells.iter().map(Cell::get));
    let (last_hash, last_id, last_len) = LAST.with(Cell::get);
    if last_hash == h
        && last_len == cells.len()
        && LAST_PATH.with(|last| last.iter().zip(cells).all(|(a, b)| a.get() == b.get()))
    {
        return last_id;
    }
    let mut buf = [0u32; STACK_CAPACITY];
    for (b, c) in buf.iter_mut().zip(cells) {
        *b = c.get();
    }
    intern(&buf[..cells.len()])
}

fn hash(path: impl Iterator<Item = u32>) -> u64 {
    // FNV-1a: a short path, hashed once per poll that suspends.
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for id in path {
        h ^= u64::from(id);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h | 1
}

/// The id of `path` (0 for the empty path).
pub(crate) fn intern(path: &[u32]) -> u32 {
    if path.is_empty() {
        return 0;
    }
    let h = hash(path.iter().copied());
    let (last_hash, last_id, last_len) = LAST.with(Cell::get);
    if last_hash == h
        && last_len == path.len()
        && LAST_PATH.with(|last| last.iter().zip(path).all(|(a, b)| a.get() == *b))
    {
        return last_id;
    }
    let id = crate::heap::suppressed(|| {
        let mut guard = TABLE.lock();
        let table = guard.get_or_insert_with(|| Table {
            ids: HashMap::new(),
            paths: vec![Box::from([])],
        });
        if let Some(id) = table.ids.get(path) {
            return *id;
        }
        if table.paths.len() >= MAX_PATHS {
            let innermost: Box<[u32]> = Box::from(&path[path.len() - 1..]);
            if let Some(id) = table.ids.get(&innermost) {
                return *id;
            }
            return 0;
        }
        let id = table.paths.len() as u32;
        let boxed: Box<[u32]> = Box::from(path);
        table.paths.push(boxed.clone());
        table.ids.insert(boxed, id);
        id
    });
    if path.len() <= STACK_CAPACITY {
        LAST_PATH.with(|last| {
            for (cell, id) in last.iter().zip(path) {
                cell.set(*id);
            }
        });
        LAST.with(|c| c.set((h, id, path.len())));
    }
    id
}

/// The path interned as `id`.
pub(crate) fn path_of(id: u32) -> Option<Box<[u32]>> {
    if id == 0 {
        return Some(Box::from([]));
    }
    let guard = TABLE.lock();
    guard
        .as_ref()
        .and_then(|t| t.paths.get(id as usize).cloned())
}

/// Holds the table's lock (tests: a handler that took it would deadlock).
#[cfg(test)]
pub(crate) fn lock_table_for_test() -> impl Drop {
    TABLE.lock()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_intern_to_one_id_each() {
        let a = intern(&[1, 2, 3]);
        let b = intern(&[1, 2, 4]);
        assert_ne!(a, b);
        assert_eq!(intern(&[1, 2, 3]), a);
        assert_eq!(intern(&[1, 2, 4]), b);
        assert_eq!(intern(&[]), 0);
        assert_eq!(path_of(a).as_deref(), Some(&[1u32, 2, 3][..]));
        assert_eq!(path_of(0).as_deref(), Some(&[][..]));
    }
}
