//! Where processes suspend: the traced path of a process's first pending frame in a poll,
//! interned, for the wall sampler.
//!
//! While a wall sample session measures a poll, the traced stack copies the path of the first
//! frame that returns `Pending` ([`capture`], from the stack's pending pop) into a per-thread
//! buffer, and the end of the poll interns it and stores its id in the process's heap account
//! ([`finish`]): one plain store, so the sampler thread reads where a process waits without
//! touching the process or its future, and without stopping anything. Interning takes a lock
//! only for a path that is not among the few the thread interned last (a server and its
//! clients suspend in the same few places poll after poll).

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
    /// The last [`RECENT`] paths this thread interned: per entry its hash (0 for none), id and
    /// length ...
    static RECENT_KEYS: [Cell<(u64, u32, usize)>; RECENT] =
        const { [const { Cell::new((0, 0, 0)) }; RECENT] };
    /// ... its ids ...
    static RECENT_PATHS: [Ids; RECENT] =
        const { [const { [const { Cell::new(0) }; STACK_CAPACITY] }; RECENT] };
    /// ... and the entry the next one replaces.
    static RECENT_NEXT: Cell<usize> = const { Cell::new(0) };
}

/// Paths each thread keeps of those it interned last: a server and its clients polled on one
/// thread suspend in a few places, poll after poll, each found here without the table's lock.
const RECENT: usize = 4;

/// The id of the path of `len` ids whose hash is `h`, if this thread interned it among its
/// last [`RECENT`] paths; `same` tells whether a kept path's ids are the path's.
#[inline]
fn recent(h: u64, len: usize, same: impl Fn(&Ids) -> bool) -> Option<u32> {
    RECENT_KEYS.with(|keys| {
        keys.iter().enumerate().find_map(|(i, key)| {
            let (kept, id, kept_len) = key.get();
            (kept == h && kept_len == len && RECENT_PATHS.with(|paths| same(&paths[i])))
                .then_some(id)
        })
    })
}

/// Keeps `path`, whose hash is `h`, as interned to `id`, in place of the oldest kept path.
fn remember(h: u64, id: u32, path: &[u32]) {
    if path.len() > STACK_CAPACITY {
        return;
    }
    let i = RECENT_NEXT.with(|next| {
        let i = next.get();
        next.set((i + 1) % RECENT);
        i
    });
    RECENT_PATHS.with(|paths| {
        for (cell, id) in paths[i].iter().zip(path) {
            cell.set(*id);
        }
    });
    RECENT_KEYS.with(|keys| keys[i].set((h, id, path.len())));
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
    if let Some(id) = recent(h, cells.len(), |kept| {
        kept.iter().zip(cells).all(|(a, b)| a.get() == b.get())
    }) {
        return id;
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
    if let Some(id) = recent(h, path.len(), |kept| {
        kept.iter().zip(path).all(|(a, b)| a.get() == *b)
    }) {
        return id;
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
    remember(h, id, path);
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

    /// Paths a thread interned among its last few are found again without the table's lock,
    /// however they alternate (a server and its client suspending on one thread), each with
    /// the id it was given.
    #[test]
    fn the_last_paths_interned_are_found_without_the_lock() {
        use std::sync::mpsc;
        let (interned_tx, interned_rx) = mpsc::channel();
        let (locked_tx, locked_rx) = mpsc::channel::<()>();
        let (again_tx, again_rx) = mpsc::channel();
        let paths: Vec<Vec<u32>> = (0..RECENT as u32).map(|i| vec![7, 70 + i]).collect();
        let worker = std::thread::Builder::new()
            .name("recent-paths".into())
            .spawn(move || {
                let ids: Vec<u32> = paths.iter().map(|p| intern(p)).collect();
                interned_tx.send(()).expect("interned");
                locked_rx.recv().expect("locked");
                // The table's lock is held by the test's thread now.
                let again: Vec<u32> = (0..3 * RECENT)
                    .map(|k| intern(&paths[(k * 3) % RECENT]))
                    .collect();
                again_tx.send(()).expect("again");
                (ids, again, paths)
            })
            .expect("spawn");
        interned_rx.recv().expect("the worker interned its paths");
        let lock = lock_table_for_test();
        locked_tx.send(()).expect("the worker waits");
        let found = again_rx.recv_timeout(std::time::Duration::from_secs(60));
        drop(lock);
        let (ids, again, _) = worker.join().expect("worker");
        assert!(
            found.is_ok(),
            "the recent paths were interned again under the lock"
        );
        for (k, id) in again.iter().enumerate() {
            assert_eq!(*id, ids[(k * 3) % RECENT]);
        }
    }
}
