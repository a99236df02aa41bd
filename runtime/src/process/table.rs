//! The process table of a node.
//!
//! `slab` hands out slot indices under a lock taken only by spawn and exit. The slots
//! themselves live in an append-only [`Segmented`] array, each holding the current process (if
//! any) behind a small read-write lock of its own, and the slot's serial. Resolving a pid takes
//! no node-wide lock: it read-locks that one slot and checks the pid, so a pid whose process has
//! gone resolves to nothing, even after its slot has been reused.
//!
//! A slot's lock prefers readers: a reader waits only while a writer holds the lock, which a
//! writer does for the few instructions of putting a process in or taking it out (nothing else
//! runs under it); readers never queue behind a writer that waits for them. So a reader may
//! resolve the same pid again while it holds its slot (nested [`ProcessTable::get`], as when a
//! message dropped inside a resolution sends to the same pid), where a fair lock would
//! deadlock against a waiting writer. A writer waits until the slot's readers are done. The
//! writers are spawn (into a vacant slot, which readers only touch to compare a stale pid) and
//! the exit of the slot's own process (which never runs inside a resolution of its own pid);
//! neither waits on a slot while holding the slab lock, except spawn on a vacant slot.
//!
//! Compared with an `ArcSwapOption` per slot, this spares spawn and exit arc-swap's `store`,
//! which visits every thread's debt list (`Debt::pay_all`) to settle loans of the old value,
//! and makes a resolution a compare-and-swap on the slot rather than a loan recorded in a
//! thread-local debt slot. A slot stays 16 bytes.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use slab::Slab;

use super::Process;
use crate::Pid;
use crate::segmented::Segmented;

/// `Slot::lock` when a writer holds it; otherwise the lock is the number of readers.
const WRITER: u32 = 1 << 31;

/// One slot of the table: its process, under a reader-preferring lock of its own (see the module
/// documentation), and the serial of the last process spawned into it. 16 bytes.
#[derive(Default)]
struct Slot {
    lock: AtomicU32,
    /// The serial of the last process spawned into this slot (written under the slab lock).
    serial: AtomicU32,
    process: UnsafeCell<Option<Arc<Process>>>,
}

// SAFETY: `process` is only read through a `SlotRead`, which exists only while `lock` counts it
// as a reader (so no writer holds `lock`: a writer takes it only from 0 readers, and readers
// only enter while `WRITER` is clear), and only written in `Slot::replace_if`, while `lock` is
// `WRITER` (so no reader and no other writer is in). `Arc<Process>` is `Send + Sync`.
#[allow(unsafe_code)]
unsafe impl Sync for Slot {}

/// Spins, then yields, while the lock is not available.
#[inline]
fn backoff(spins: &mut u32) {
    if *spins < 64 {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

impl Slot {
    /// Read-locks the slot: waits only while a writer is putting a process in or taking one
    /// out, never for other readers, nor for a writer that waits for readers.
    #[inline]
    fn read(&self) -> SlotRead<'_> {
        let mut spins = 0;
        let mut state = self.lock.load(Ordering::Relaxed);
        loop {
            if state & WRITER == 0 {
                assert!(state + 1 < WRITER, "too many readers of one process slot");
                match self.lock.compare_exchange_weak(
                    state,
                    state + 1,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return SlotRead { slot: self },
                    Err(now) => state = now,
                }
            } else {
                backoff(&mut spins);
                state = self.lock.load(Ordering::Relaxed);
            }
        }
    }

    /// Puts `new` in the slot when `take` says so of its current content, and returns what it
    /// replaced; otherwise returns `None`. Waits until the slot has no reader.
    fn replace_if(
        &self,
        take: impl FnOnce(&Option<Arc<Process>>) -> bool,
        new: Option<Arc<Process>>,
    ) -> Option<Option<Arc<Process>>> {
        let mut spins = 0;
        while self
            .lock
            .compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            backoff(&mut spins);
        }
        // SAFETY: `lock` is `WRITER`, which this thread set from 0: no `SlotRead` exists (a
        // reader enters only while `WRITER` is clear, and there were none) and no other writer
        // is in, until the store below; nothing here can unwind (a comparison and a move).
        #[allow(unsafe_code)]
        let current = unsafe { &mut *self.process.get() };
        let replaced = take(current).then(|| std::mem::replace(current, new));
        self.lock.store(0, Ordering::Release);
        replaced
    }
}

/// A read lock on a slot; derefs to the slot's process, if any.
pub(crate) struct SlotRead<'a> {
    slot: &'a Slot,
}

impl std::ops::Deref for SlotRead<'_> {
    type Target = Option<Arc<Process>>;

    #[inline]
    fn deref(&self) -> &Option<Arc<Process>> {
        // SAFETY: this guard counts as a reader in `lock` until it drops, so no writer is in
        // (see `unsafe impl Sync for Slot`) and the content is not written meanwhile.
        #[allow(unsafe_code)]
        unsafe {
            &*self.slot.process.get()
        }
    }
}

impl Drop for SlotRead<'_> {
    #[inline]
    fn drop(&mut self) {
        self.slot.lock.fetch_sub(1, Ordering::Release);
    }
}

/// A resolved pid: the slot's process, read-locked (see the module documentation).
pub(crate) type Resolved<'a> = SlotRead<'a>;

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
        slot.replace_if(|_| true, Some(Arc::clone(&process)));
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
        let removed = slot
            .replace_if(
                |current| current.as_ref().is_some_and(|p| p.pid == pid),
                None,
            )
            .flatten();
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

    /// Readers on other threads resolve pids of slots that processes keep entering and leaving
    /// (the slot lock's reads and writes under contention): a resolution yields the process
    /// asked for, alive for as long as it is held, or nothing.
    #[test]
    fn resolutions_race_spawns_and_exits() {
        use std::sync::atomic::{AtomicBool, Ordering};

        let node = Node::builder().worker_threads(2).build().expect("node");
        let inner = std::sync::Arc::clone(&node.handle().inner);
        let table = &inner.table;
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut hits = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        for index in 0..4 {
                            for serial in 1..=64 {
                                let pid = crate::Pid::from_parts(inner.id, index, serial);
                                if let Some(guard) = table.get(pid) {
                                    let p = guard.as_deref().expect("resolved");
                                    assert_eq!(p.pid, pid);
                                    assert_eq!(p.node.id, inner.id);
                                    hits += 1;
                                }
                            }
                        }
                    }
                    std::hint::black_box(hits);
                });
            }
            for _ in 0..2_000 {
                node.spawn(async {}).expect("spawn");
                if table.len() > 8 {
                    std::thread::yield_now();
                }
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while table.len() != 0 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            done.store(true, Ordering::Relaxed);
        });
        assert_eq!(table.len(), 0, "every process exited");
    }

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
