//! Where processes suspend: the traced path of a process's first pending frame in a poll,
//! interned, for the wall sampler.
//!
//! While a wall sample session measures a poll, the traced stack's first pending pop finds the
//! id of the path of the frame it pops ([`capture`]: read in place on the stack, and looked up
//! among the few paths the thread interned last, as a server and its clients suspend in the
//! same few places poll after poll), and the end of the poll stores it in the process's heap
//! account ([`finish`]): one plain store, so the sampler thread reads where a process waits
//! without touching the process or its future, and without stopping anything. Interning takes
//! a lock only for a path that is not among those the thread interned last.

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

/// [`CAPTURED`] when no path was captured in this poll.
const NONE: u32 = u32::MAX;

/// The paths a thread interned last: per entry its length (0: none), id and ids, and the
/// entry the next one replaces. One thread-local, found once per lookup.
struct Recent {
    lens: [Cell<usize>; RECENT],
    ids: [Cell<u32>; RECENT],
    paths: [Ids; RECENT],
    next: Cell<usize>,
}

thread_local! {
    /// The id of the path captured in this poll, [`NONE`] when none was.
    static CAPTURED: Cell<u32> = const { Cell::new(NONE) };
    static RECENT_PATHS: Recent = const {
        Recent {
            lens: [const { Cell::new(0) }; RECENT],
            ids: [const { Cell::new(0) }; RECENT],
            paths: [const { [const { Cell::new(0) }; STACK_CAPACITY] }; RECENT],
            next: Cell::new(0),
        }
    };
}

/// Paths each thread keeps of those it interned last: a server and its clients polled on one
/// thread suspend in a few places, poll after poll, each found here without the table's lock.
const RECENT: usize = 4;

/// The id of the path of `len` ids (`at(k)`: the `k`th, outermost first), if this thread
/// interned it among its last [`RECENT`] paths: compared id by id (a path is a few ids).
#[inline]
fn recent(len: usize, at: impl Fn(usize) -> u32) -> Option<u32> {
    // Inlined into the capture: `LocalKey::with` left it a call of its own, with the
    // thread-local's accessor called through a pointer.
    super::tls::with_local(&RECENT_PATHS, |r| {
        (0..RECENT).find_map(|i| {
            (len != 0
                && r.lens[i].get() == len
                && r.paths[i][..len]
                    .iter()
                    .enumerate()
                    .all(|(k, c)| c.get() == at(k)))
            .then(|| r.ids[i].get())
        })
    })
}

/// Keeps `path` as interned to `id`, in place of the oldest kept path.
fn remember(id: u32, path: &[u32]) {
    if path.is_empty() || path.len() > STACK_CAPACITY {
        return;
    }
    RECENT_PATHS.with(|r| {
        let i = r.next.get();
        r.next.set((i + 1) % RECENT);
        for (cell, id) in r.paths[i].iter().zip(path) {
            cell.set(*id);
        }
        r.ids[i].set(id);
        r.lens[i].set(path.len());
    });
}

/// Clears this thread's capture, at the start of a poll.
pub(crate) fn begin() {
    CAPTURED.with(|c| c.set(NONE));
}

/// Keeps the path of `len` ids (`at(k)`: the `k`th, outermost first; at most
/// [`STACK_CAPACITY`]) as where this poll suspends, unless a frame of this poll already did:
/// its id, found among the paths this thread interned last, or interned.
#[inline]
pub(crate) fn capture(len: usize, at: impl Fn(usize) -> u32) {
    super::tls::with_local(&CAPTURED, |captured| {
        if captured.get() != NONE {
            return;
        }
        let id = match recent(len, &at) {
            Some(id) => id,
            None => intern_new(len, &at),
        };
        captured.set(id);
    });
}

/// [`capture`]'s path when this thread did not intern it lately: copied, and interned.
#[cold]
#[inline(never)]
fn intern_new(len: usize, at: &impl Fn(usize) -> u32) -> u32 {
    let len = len.min(STACK_CAPACITY);
    let mut buf = [0u32; STACK_CAPACITY];
    for (k, b) in buf[..len].iter_mut().enumerate() {
        *b = at(k);
    }
    intern(&buf[..len])
}

/// At the end of a poll: stores the captured path's id (0 for none) in `account`.
pub(crate) fn finish(account: &crate::heap::Account) {
    let id = CAPTURED.with(|c| c.replace(NONE));
    account.set_suspended_path(if id == NONE { 0 } else { id });
}

/// The id of `path` (0 for the empty path).
pub(crate) fn intern(path: &[u32]) -> u32 {
    if path.is_empty() {
        return 0;
    }
    if let Some(id) = recent(path.len(), |k| path[k]) {
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
    remember(id, path);
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
