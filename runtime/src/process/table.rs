//! The process table of a node.
//!
//! `slab` hands out slot indices under a lock taken only by spawn and exit. The slots
//! themselves live in an append-only [`Segmented`] array, each holding the current process (if
//! any) behind its own read-write lock, and the slot's serial. Resolving a pid takes no
//! node-wide lock: it read-locks that one slot and checks the pid, so a pid whose process has
//! gone resolves to nothing, even after its slot has been reused.
//!
//! The slot locks are only ever *tried* ([`RwLock::try_read`], [`RwLock::try_write`]) in a
//! spin, never waited on, so that readers do not queue behind a writer that waits: a reader
//! waits only while a writer holds the lock, which it does for the few instructions of
//! putting a process in or taking it out (nothing else runs under a slot's write lock), and a
//! reader may hold a slot while it resolves the same pid again (nested [`ProcessTable::get`]).
//! A writer waits until the readers of its slot are done. Its writers are spawn (a vacant slot:
//! only readers checking a stale pid touch it, for a compare) and the exit of the slot's process,
//! which is never run from inside a resolution of its own pid; neither holds the slab lock
//! while waiting on a slot with live readers.
//!
//! Compared with an `ArcSwapOption` per slot, this spares spawn and exit arc-swap's
//! `store`, which visits every thread's debt list (`Debt::pay_all`) to settle loans of the old
//! value, and makes a resolution a compare-and-swap on the slot rather than a loan recorded
//! in a thread-local debt slot.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

use slab::Slab;

use super::Process;
use crate::Pid;
use crate::segmented::Segmented;

#[derive(Default)]
struct Slot {
    process: RwLock<Option<Arc<Process>>>,
    /// The serial of the last process spawned into this slot.
    serial: AtomicU32,
}

/// A resolved pid: the slot's process, read-locked (see the module documentation).
pub(crate) type Resolved<'a> = RwLockReadGuard<'a, Option<Arc<Process>>>;

/// Spins (then yields) until `attempt` succeeds.
#[inline]
fn spin<G>(mut attempt: impl FnMut() -> Result<G, TryLockError<G>>) -> G {
    let mut spins = 0u32;
    loop {
        match attempt() {
            Ok(guard) => return guard,
            // The critical sections on a slot cannot panic halfway (an `Option` put or taken).
            Err(TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if spins < 64 {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

impl Slot {
    #[inline]
    fn read(&self) -> RwLockReadGuard<'_, Option<Arc<Process>>> {
        match self.process.try_read() {
            Ok(guard) => guard,
            Err(_) => spin(|| self.process.try_read()),
        }
    }

    fn write(&self) -> RwLockWriteGuard<'_, Option<Arc<Process>>> {
        spin(|| self.process.try_write())
    }
}

/// The table of a node's live processes.
pub(crate) struct ProcessTable {
    node: u32,
    slots: Segmented<Slot>,
    indices: Mutex<Slab<()>>,
    live: AtomicUsize,
}

/// Why a process could not get a slot.
#[derive(Debug)]
pub(crate) enum InsertError {
    /// No index left.
    Full,
    /// The node is stopping (checked under the table lock, so that a stop's snapshot of the
    /// table sees every process that got in).
    Stopping,
}

impl ProcessTable {
    pub(crate) fn new(node: u32) -> ProcessTable {
        ProcessTable {
            node,
            slots: Segmented::new(),
            indices: Mutex::new(Slab::new()),
            live: AtomicUsize::new(0),
        }
    }

    fn indices(&self) -> std::sync::MutexGuard<'_, Slab<()>> {
        self.indices.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives a new process a slot: `make` builds it from its pid.
    pub(crate) fn insert(
        &self,
        stopping: &std::sync::atomic::AtomicBool,
        make: impl FnOnce(Pid) -> Arc<Process>,
    ) -> Result<Arc<Process>, InsertError> {
        let mut indices = self.indices();
        if stopping.load(Ordering::Acquire) {
            return Err(InsertError::Stopping);
        }
        let entry = indices.vacant_entry();
        let index = u32::try_from(entry.key()).map_err(|_| InsertError::Full)?;
        let slot = self.slots.get_or_alloc(index);
        let serial = slot.serial.load(Ordering::Relaxed).wrapping_add(1);
        slot.serial.store(serial, Ordering::Relaxed);
        let process = make(Pid::from_parts(self.node, index, serial));
        *slot.write() = Some(Arc::clone(&process));
        entry.insert(());
        self.live.fetch_add(1, Ordering::Relaxed);
        Ok(process)
    }

    /// The live process named by `pid`, holding its slot read-locked (no node-wide lock).
    #[inline]
    pub(crate) fn get(&self, pid: Pid) -> Option<Resolved<'_>> {
        let slot = self.slots.get(pid.index())?;
        let guard = slot.read();
        match &*guard {
            Some(p) if p.pid == pid => Some(guard),
            _ => None,
        }
    }

    /// Frees the slot of an exited process.
    pub(crate) fn remove(&self, pid: Pid) {
        let Some(slot) = self.slots.get(pid.index()) else {
            return;
        };
        // Taken out before the slab lock is taken, and dropped after both are released.
        let removed = {
            let mut current = slot.write();
            match &*current {
                Some(p) if p.pid == pid => current.take(),
                _ => None,
            }
        };
        if removed.is_some() {
            self.indices().remove(pid.index() as usize);
            self.live.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// How many processes are alive.
    pub(crate) fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// The live processes, in slot order.
    pub(crate) fn all(&self) -> Vec<Arc<Process>> {
        let indices = self.indices();
        indices
            .iter()
            .filter_map(|(i, ())| {
                let slot = self.slots.get(i as u32)?;
                slot.read().clone()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::Node;

    /// A reader may resolve a pid again while it holds the pid's slot, even while a writer
    /// waits for that slot (a blocking read-write lock would queue the nested read behind the
    /// writer, which waits for the outer read: a deadlock); the writer goes on once the reads
    /// are done, and a stale pid then resolves to nothing, also after the slot is reused.
    #[test]
    fn nested_reads_do_not_wait_for_a_waiting_writer() {
        let node = Node::builder().current_thread().build().expect("node");
        let pid = node
            .spawn(async { std::future::pending::<()>().await })
            .expect("spawn");
        let inner = std::sync::Arc::clone(&node.handle().inner);
        let table = &inner.table;
        let outer = table.get(pid).expect("live");
        let (removed_tx, removed_rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                table.remove(pid);
                removed_tx.send(()).expect("send");
            });
            // The writer is waiting now, or soon; it cannot finish while `outer` is held.
            assert!(removed_rx.recv_timeout(Duration::from_millis(50)).is_err());
            let nested = table.get(pid).expect("still live while read");
            assert_eq!(nested.as_deref().map(|p| p.pid), Some(pid));
            drop(nested);
            drop(outer);
            removed_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the writer goes on once the reads are done");
        });
        assert!(table.get(pid).is_none());
        assert_eq!(table.len(), 0);
        let newer = node.spawn(async {}).expect("spawn");
        assert_eq!(newer.index(), pid.index(), "the slot is reused");
        assert_ne!(newer, pid);
        assert!(table.get(pid).is_none());
    }
}
