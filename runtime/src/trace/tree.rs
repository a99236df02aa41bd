//! Call-tree mode ([`TraceTypes::CALL_TREE`](super::TraceTypes::CALL_TREE)): figures per call
//! path instead of per function.
//!
//! A session in call-tree mode interns each path it sees — (the path it extends, the callsite
//! called) — into a dense id in its [`PathTable`], and measures every frame into the
//! accumulator of its path rather than of its function: the traced stack, the touched list and
//! the flush of [`super::stack`] and [`super::measure`] are the same, with path ids where a
//! function session has callsite ids. The flat figures are the sum over paths by their last
//! function, computed when read, so the two views always agree.
//!
//! Each thread keeps, per session slot, a cache of the paths it has seen (so a push takes no
//! lock once a path is known), the parent of each, and one accumulator per path. The
//! accumulators live as long as the program (the traced stack holds `'static` references to
//! them during a poll) and are reused: by the next session in the slot on the same thread, and,
//! when the thread ends, by any thread ([`POOL`]). So the memory call-tree mode keeps is bounded
//! by the threads running at once times the paths each has seen, however many sessions and
//! threads (a node per profile) come and go: a profiler run again and again does not grow.
//!
//! Cost: a frame push in call-tree mode adds one thread-local access and one hash lookup (its
//! path, in this thread's cache) to the function mode's. The pop of a frame that one session
//! measures restores the path it extends from the frame, as it restores the accumulator; with
//! several sessions it looks the path's parent up here. `benches/traced_call.rs` has the rows
//! (`call_time_call_tree`, `call_memory_call_tree`, `nested_call_time_call_tree`).

use rustc_hash::{FxBuildHasher, FxHashMap};
use std::cell::RefCell;
use std::sync::Mutex;

use super::MAX_SESSIONS;
use super::stack::{Accumulator, NO_FUNCTION};

/// No path: the root, above the outermost frame.
pub(crate) const ROOT: u32 = NO_FUNCTION;

/// The call paths a session records. Past it, a new path is recorded as a call of its function
/// from the root (the tree is cut there; the flat figures, summed by last function, stay
/// whole), so that neither the session's table nor each thread's accumulators grow without
/// bound. (With several call-tree sessions measuring the same frame, the one cut short may
/// then charge the rest of its caller's time to the root.)
pub(crate) const MAX_PATHS: usize = 1 << 18;

/// A session's interned call paths.
#[derive(Default)]
pub(crate) struct PathTable {
    ids: FxHashMap<(u32, u32), u32>,
    /// Per path: (the path it extends or [`ROOT`], callsite id).
    pub(crate) nodes: Vec<(u32, u32)>,
}

impl PathTable {
    /// The id of the path that extends `parent` with a call of `callsite` (past [`MAX_PATHS`],
    /// of the call of `callsite` from the root).
    pub(crate) fn intern(&mut self, parent: u32, callsite: u32) -> u32 {
        if let Some(&id) = self.ids.get(&(parent, callsite)) {
            return id;
        }
        if self.nodes.len() >= MAX_PATHS && parent != ROOT {
            return self.intern(ROOT, callsite);
        }
        let id = self.nodes.len() as u32;
        self.ids.insert((parent, callsite), id);
        self.nodes.push((parent, callsite));
        id
    }
}

/// Accumulators of threads that have ended, zeroed, for the next thread that needs one.
static POOL: Mutex<Vec<&'static Accumulator>> = Mutex::new(Vec::new());

/// Accumulators ever made (not taken from the pool), for the tests.
#[cfg(test)]
pub(crate) static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// An accumulator for a new path: one a thread that ended left, or a new one. Made with
/// allocation charging suppressed (the profiler's own memory).
fn new_accumulator() -> &'static Accumulator {
    let pooled = POOL.lock().ok().and_then(|mut pool| pool.pop());
    pooled.unwrap_or_else(|| {
        #[cfg(test)]
        MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::leak(Box::default())
    })
}

/// One thread's view of one slot's call tree.
struct Scratch {
    /// The session whose paths `cache` and `parents` hold.
    generation: u64,
    cache: FxHashMap<(u32, u32), u32>,
    /// Per path id known here: the path it extends.
    parents: Vec<u32>,
    /// Per path id: its accumulator (kept across sessions, zeroed when drained).
    accs: Vec<&'static Accumulator>,
}

impl Scratch {
    const fn new() -> Scratch {
        Scratch {
            generation: 0,
            cache: FxHashMap::with_hasher(FxBuildHasher),
            parents: Vec::new(),
            accs: Vec::new(),
        }
    }
}

impl Drop for Scratch {
    /// At thread exit: its accumulators go back to the pool, zeroed.
    fn drop(&mut self) {
        crate::heap::suppressed(|| {
            for acc in &self.accs {
                acc.take();
            }
            if let Ok(mut pool) = POOL.lock() {
                pool.append(&mut self.accs);
            }
        });
    }
}

thread_local! {
    static SCRATCH: [RefCell<Scratch>; MAX_SESSIONS] =
        const { [const { RefCell::new(Scratch::new()) }; MAX_SESSIONS] };
}

/// Starts a poll measured by the call-tree session in slot `bit`, of `generation`.
pub(crate) fn begin_poll(bit: usize, generation: u64) {
    SCRATCH.with(|s| {
        let mut s = s[bit].borrow_mut();
        if s.generation != generation {
            crate::heap::suppressed(|| {
                s.cache.clear();
                s.parents.clear();
            });
            s.generation = generation;
        }
    });
}

/// The path extending `parent` with a call of `callsite` in slot `bit`'s session, and its
/// accumulator on this thread. Interns the path in the session's table the first time this
/// thread sees it.
pub(crate) fn enter(bit: usize, parent: u32, callsite: u32) -> (u32, &'static Accumulator) {
    SCRATCH.with(|s| {
        let mut s = s[bit].borrow_mut();
        let path = match s.cache.get(&(parent, callsite)) {
            Some(&p) => p,
            None => crate::heap::suppressed(|| learn(&mut s, bit, parent, callsite)),
        };
        (path, s.accs[path as usize])
    })
}

#[cold]
fn learn(s: &mut Scratch, bit: usize, parent: u32, callsite: u32) -> u32 {
    let Some(session) = super::session::session_in_slot(bit as u32)
        .filter(|session| session.generation() == s.generation)
    else {
        // The session is gone: its figures are dropped at the flush. Any accumulator will do,
        // and nothing is remembered for a session that may take the slot next.
        if s.accs.is_empty() {
            s.accs.push(new_accumulator());
        }
        return 0;
    };
    let (path, extends) = {
        let mut table = session.paths();
        let path = table.intern(parent, callsite);
        (path, table.nodes[path as usize].0)
    };
    s.cache.insert((parent, callsite), path);
    let at = path as usize;
    if s.parents.len() <= at {
        s.parents.resize(at + 1, ROOT);
    }
    s.parents[at] = extends;
    while s.accs.len() <= at {
        s.accs.push(new_accumulator());
    }
    path
}

/// The path `path` extends (on this thread, in slot `bit`), and its accumulator (`None` at
/// the root).
pub(crate) fn leave(bit: usize, path: u32) -> (u32, Option<&'static Accumulator>) {
    SCRATCH.with(|s| {
        let s = s[bit].borrow();
        let parent = s.parents.get(path as usize).copied().unwrap_or(ROOT);
        (parent, s.accs.get(parent as usize).copied())
    })
}

/// The accumulator of `path` in slot `bit` on this thread.
pub(crate) fn accumulator(bit: usize, path: u32) -> Option<&'static Accumulator> {
    SCRATCH.with(|s| s[bit].borrow().accs.get(path as usize).copied())
}

/// Hands every touched accumulator of slot `bit` to `f` as (path, accumulator).
pub(crate) fn for_each_touched(bit: usize, f: &mut dyn FnMut(u32, &'static Accumulator)) {
    SCRATCH.with(|s| {
        let s = s[bit].borrow();
        for (path, acc) in s.accs.iter().enumerate() {
            if acc.is_touched() {
                f(path as u32, acc);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_records_new_paths_from_the_root() {
        let mut table = PathTable::default();
        let mut parent = ROOT;
        for i in 0..MAX_PATHS as u32 {
            parent = table.intern(parent, i % 7);
        }
        assert_eq!(table.nodes.len(), MAX_PATHS);
        // Known paths are still found.
        assert_eq!(table.intern(ROOT, 0), 0);
        // A new deep path becomes its function's call from the root, made once.
        let cut = table.intern(parent, 9);
        assert_eq!(table.nodes[cut as usize], (ROOT, 9));
        assert_eq!(table.intern(parent, 9), cut);
        assert_eq!(table.intern(5, 9), cut);
        assert_eq!(table.nodes.len(), MAX_PATHS + 1);
    }
}
