//! Folding a sample session's ended processes (see
//! [`SampleSession`](super::SampleSession#processes-that-end)): once a process is gone and
//! its samples are in the session's buffer, the trace session under it keeps of it only its
//! calls, summed with every ended process's, and a row naming it while the buffer holds
//! samples of it ([`crate::trace::fold_ended`]).
//!
//! The sampler's own thread asks for a fold, which runs when one is due: the drain thread
//! after each drain (CPU and allocation sessions, whose samples come through the threads'
//! rings: a fold drains them once it knows which processes ended, so every sample of those is
//! in the buffer first), and the wall sampler's thread between its ticks (it keeps its samples
//! itself, so none is on its way meanwhile).

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

use super::store::Store;
use crate::Pid;

/// Folds one sample session's ended processes.
pub(crate) struct Ended {
    /// The session's slot and generation.
    bit: u32,
    generation: u64,
    store: Arc<Store>,
    /// Whether its samples come through the threads' rings (CPU, allocation): drained first.
    rings: bool,
    /// The pids of the samples in the buffer, read so far.
    seen: Mutex<Seen>,
}

/// The pids of a buffer's samples, read so far: a buffer only grows until it is cleared, so
/// each sample is read once.
#[derive(Default)]
struct Seen {
    pids: HashSet<Pid>,
    /// The samples read.
    read: usize,
}

/// The sessions whose samples come through the rings, folded by the drain thread.
static OPEN: Mutex<Vec<Arc<Ended>>> = Mutex::new(Vec::new());

impl Ended {
    pub(crate) fn new(bit: u32, generation: u64, store: Arc<Store>, rings: bool) -> Arc<Ended> {
        let ended = Arc::new(Ended {
            bit,
            generation,
            store,
            rings,
            seen: Mutex::new(Seen::default()),
        });
        if rings {
            OPEN.lock().push(Arc::clone(&ended));
        }
        ended
    }

    /// Folds the session's ended processes, if a fold is due.
    pub(crate) fn fold(&self) {
        crate::heap::suppressed(|| {
            crate::trace::fold_ended(self.bit, self.generation, || {
                if self.rings {
                    super::store::drain();
                }
                let mut seen = self.seen.lock();
                {
                    let inner = self.store.inner.lock();
                    let seen = &mut *seen;
                    let fresh = inner.samples.get(seen.read..).unwrap_or_default();
                    seen.pids.extend(fresh.iter().filter_map(|s| s.pid));
                    seen.read = inner.samples.len();
                }
                move |pid| seen.pids.contains(&pid)
            })
        });
    }

    /// Runs `clear`, which empties the buffer, with the pids read forgotten.
    pub(crate) fn clear(&self, clear: impl FnOnce()) {
        let mut seen = self.seen.lock();
        clear();
        *seen = Seen::default();
    }

    /// Stops folding for the drain thread (the session is dropped).
    pub(crate) fn close(self: &Arc<Ended>) {
        OPEN.lock().retain(|e| !Arc::ptr_eq(e, self));
    }
}

/// Folds the ended processes of every CPU and allocation session for which a fold is due: the
/// drain thread's, after each drain.
pub(crate) fn fold_all() {
    let open: Vec<Arc<Ended>> = OPEN.lock().clone();
    for ended in open {
        ended.fold();
    }
}
