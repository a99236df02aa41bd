//! The process table of a node.
//!
//! `slab` hands out slot indices under a lock taken only by spawn and exit. The slots
//! themselves live in an append-only [`Segmented`] array, each holding the current process (if
//! any) and the slot's serial. Resolving a pid takes no lock: it enters that one slot as a
//! reader (a compare-and-swap on the slot's reader count) and checks the pid, so a pid whose
//! process has gone resolves to nothing, even after its slot has been reused.
//!
//! A reader never waits. A process's exit takes it out of its slot, then waits until the
//! readers that may have read it are gone before its task may drop the process: readers count
//! in one of two epochs, and the exit flips the epoch after emptying the slot, then waits for
//! the old epoch's readers only, so a steady stream of new readers cannot hold it up. A reader
//! may resolve the same pid again while it holds its slot (nested [`ProcessTable::get`], as
//! when a message dropped inside a resolution sends to the same pid). The exit never waits
//! while holding the slab lock, and never runs inside a resolution of its own pid.
//!
//! Compared with an `ArcSwapOption` per slot, this spares spawn and exit arc-swap's `store`,
//! which visits every thread's debt list (`Debt::pay_all`) to settle loans of the old value,
//! and a resolution records its hold in the slot rather than in a thread-local debt slot. A
//! slot is 16 bytes.
//!
//! A slot holds no reference count of its own: the process's task does, and it takes the
//! process out of its slot before letting go of it ([`ProcessTable::remove`] at the end of
//! `Process::finish`, also when that unwinds; the spawner's `InSlot` until the task has it). Only
//! the process's single remover writes a filled slot, so taking it out is a load and a store,
//! not a compare-and-swap, and putting a process in a vacant slot is a plain release store.

use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};

use slab::Slab;

use super::Process;
use crate::Pid;
use crate::segmented::Segmented;

/// `Slot::readers`: the current epoch (see `Slot::remove`).
const EPOCH: u32 = 1 << 31;
/// `Slot::readers`: the readers that entered in epoch 0 (bits 0..16) and epoch 1 (16..31).
const READERS_0: u32 = 0xffff;
const READERS_1: u32 = 0x7fff << 16;

/// One slot of the table (16 bytes): its process, if any, and the readers that may hold it.
#[derive(Default)]
struct Slot {
    /// The epoch bit, and how many readers entered in each epoch and are still in.
    readers: AtomicU32,
    /// The serial of the last process spawned into this slot (written under the slab lock).
    serial: AtomicU32,
    /// The slot's process, or null. The slot owns no strong count: the process's task keeps it
    /// alive until it has taken it out of the slot (see the module documentation).
    process: AtomicPtr<Process>,
}

/// Spins, then yields.
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
    /// Enters the slot as a reader, counted in the current epoch, and reads its process. Never
    /// waits: a compare-and-swap that only fails when another reader or a writer changed the
    /// count meanwhile.
    #[inline]
    fn read(&self) -> SlotRead<'_> {
        let mut state = self.readers.load(Ordering::Relaxed);
        let unit = loop {
            let (unit, mask) = if state & EPOCH == 0 {
                (1, READERS_0)
            } else {
                (1 << 16, READERS_1)
            };
            assert!(state & mask != mask, "too many readers of one process slot");
            match self.readers.compare_exchange_weak(
                state,
                state + unit,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break unit,
                Err(now) => state = now,
            }
        };
        SlotRead {
            slot: self,
            unit,
            process: self.process.load(Ordering::SeqCst),
        }
    }

    /// Puts `process` in the slot, which must be empty (a vacant index: its last process has
    /// been removed and its readers drained). A release store: a reader that loads the pointer
    /// sees the record it points to.
    ///
    /// The pointer stored is `Arc::as_ptr`'s, which may reach the whole `Arc` allocation,
    /// reference counts included (what `SlotRead::to_arc` needs), where one made from a
    /// `&Process` may reach the `Process` only.
    fn put(&self, process: &Arc<Process>) {
        debug_assert!(
            self.process.load(Ordering::Relaxed).is_null(),
            "a vacant slot is empty"
        );
        self.process
            .store(Arc::as_ptr(process).cast_mut(), Ordering::Release);
    }

    /// Takes `process` out of the slot if it is the slot's process, once no reader can still
    /// hold it: returns whether it did.
    ///
    /// Readers never wait for this. The epoch bit flips after the process is taken out, so the
    /// readers that enter from then on count in the other epoch and cannot see it; this then
    /// waits until the readers of the old epoch, which may hold it, are gone. (Only one writer
    /// works on a slot at a time: a process takes itself out, once, and spawn reuses a slot
    /// only after that. So when the epoch flips, the readers of the new epoch are all gone
    /// already: the previous flip waited for them, and none entered that epoch since.)
    ///
    /// Being the slot's only writer while its process is in it (the process's own exit, the
    /// drop of its task, or its spawner before the task has it — on a refused name or a panic
    /// in spawn —, which never run at the same time), this takes it out with a load
    /// and a store rather than a compare-and-swap. The store needs no ordering of its own: a
    /// reader that enters after the flip synchronizes with the flip (a release read-modify-write
    /// after the store) when its compare-and-swap on the count reads it, so it sees the store;
    /// one that entered before is waited for.
    fn remove(&self, process: &Process) -> bool {
        let ptr = std::ptr::from_ref(process).cast_mut();
        if self.process.load(Ordering::Relaxed) != ptr {
            return false;
        }
        self.process.store(std::ptr::null_mut(), Ordering::Relaxed);
        let old = if self.readers.fetch_xor(EPOCH, Ordering::SeqCst) & EPOCH == 0 {
            READERS_0
        } else {
            READERS_1
        };
        let mut spins = 0;
        while self.readers.load(Ordering::SeqCst) & old != 0 {
            backoff(&mut spins);
        }
        true
    }
}

/// A reader's hold on a slot: the process it read, if any, alive until the hold is dropped.
pub(crate) struct SlotRead<'a> {
    slot: &'a Slot,
    unit: u32,
    process: *mut Process,
}

impl SlotRead<'_> {
    /// The process read, if any.
    #[inline]
    pub(crate) fn as_deref(&self) -> Option<&Process> {
        // SAFETY: a non-null pointer read from the slot was put there by `ProcessTable::insert`
        // from the `Arc` it returns. That process stays alive until its slot no longer holds it and
        // the readers that read it have left: its last strong count is dropped only after
        // `Slot::remove` took it out and waited for every reader counted in the epoch in which it
        // could be read (see `Slot::remove`), because the holder of the count taken at spawn (the
        // spawner until the task has it: `InSlot`; then the task, which runs `Process::finish`
        // before dropping it: its `LeaveTable`, also on unwind) removes it before dropping that
        // count, and every other count is taken from a live process while that one is held. This
        // reader is counted until it drops, and the reference is tied to `&self`, so it cannot
        // outlive the hold.
        #[allow(unsafe_code)]
        unsafe {
            self.process.cast_const().as_ref()
        }
    }

    /// A new reference to the process read, if any.
    fn to_arc(&self) -> Option<Arc<Process>> {
        // The pointer as the slot holds it (from `Arc::as_ptr`, see `Slot::put`), not one made
        // from `as_deref`'s reference, which may not reach the reference counts.
        let ptr = self.process.cast_const();
        if ptr.is_null() {
            return None;
        }
        // SAFETY: `ptr` is `Arc::as_ptr` of a process's `Arc` (put by `ProcessTable::insert`),
        // alive with a strong count held elsewhere while this hold lasts (see `as_deref`), so
        // adding one and taking it is sound.
        #[allow(unsafe_code)]
        unsafe {
            Arc::increment_strong_count(ptr);
            Some(Arc::from_raw(ptr))
        }
    }
}

impl Drop for SlotRead<'_> {
    #[inline]
    fn drop(&mut self) {
        self.slot.readers.fetch_sub(self.unit, Ordering::Release);
    }
}

/// A resolved pid: the slot's process, held (see the module documentation).
pub(crate) type Resolved<'a> = SlotRead<'a>;

/// The table of a node's live processes.
pub(crate) struct ProcessTable {
    node: u32,
    slots: Segmented<Slot>,
    /// What spawns and exits write, on cache lines of its own: pid resolution (every send)
    /// reads `slots` and never waits for a spawn's writes to these.
    written: Written,
}

/// [`ProcessTable`]'s fields written by spawns and exits.
#[repr(align(64))]
struct Written {
    indices: Mutex<Slab<()>>,
    live: AtomicUsize,
    /// How many [`ExitWatch`]es there are: an exit reports one only when some are. Raised
    /// under the `indices` lock, and read by `remove` under it, so that either the exit sees
    /// the watch or the watcher, once watching, sees the exit (no fence on the exit's path).
    watchers: AtomicUsize,
    /// See [`ProcessTable::high_water`]; raised under the `indices` lock.
    high_water: std::sync::atomic::AtomicU32,
}

/// A registration of interest in exits: while it lives, [`ProcessTable::remove`] says when a
/// process has left (see [`ProcessTable::watch_exits`]).
pub(crate) struct ExitWatch<'a>(&'a AtomicUsize);

impl Drop for ExitWatch<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
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
            written: Written {
                indices: Mutex::new(Slab::new()),
                live: AtomicUsize::new(0),
                watchers: AtomicUsize::new(0),
                high_water: std::sync::atomic::AtomicU32::new(0),
            },
        }
    }

    fn indices(&self) -> MutexGuard<'_, Slab<()>> {
        self.written.indices.lock()
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
        // Serial 0 is no process's: it names the calls made outside processes
        // (`Pid::outside`).
        let serial = slot.serial.load(Ordering::Relaxed).wrapping_add(1).max(1);
        slot.serial.store(serial, Ordering::Relaxed);
        let process = make(Pid::from_parts(self.node, index, serial));
        slot.put(&process);
        entry.insert(());
        if index >= self.written.high_water.load(Ordering::Relaxed) {
            self.written.high_water.store(index + 1, Ordering::Relaxed);
        }
        // Under the lock: a store, not a read-modify-write.
        self.written.live.store(indices.len(), Ordering::Relaxed);
        Ok(process)
    }

    /// The live process named by `pid`, held in its slot until the result drops; no lock is
    /// taken.
    #[inline]
    pub(crate) fn get(&self, pid: Pid) -> Option<Resolved<'_>> {
        let slot = self.slots.get(pid.index())?;
        let read = slot.read();
        match read.as_deref() {
            Some(p) if p.pid == pid => Some(read),
            _ => None,
        }
    }

    /// The live process `pid`, as a reference of its own.
    pub(crate) fn get_arc(&self, pid: Pid) -> Option<Arc<Process>> {
        self.get(pid)?.to_arc()
    }

    /// Frees the slot of an exited process (a no-op once done). Called by the holder of the
    /// count taken at spawn (the spawner or the process's task) before it drops that count,
    /// and by no one else while the process is in its slot (see `Slot::remove`).
    ///
    /// Returns whether an [`ExitWatch`] was registered before this removal: its holder may
    /// wait for the removal and must be told.
    pub(crate) fn remove(&self, process: &Process) -> bool {
        let Some(slot) = self.slots.get(process.pid.index()) else {
            return false;
        };
        if !slot.remove(process) {
            return false;
        }
        let mut indices = self.indices();
        indices.remove(process.pid.index() as usize);
        self.written.live.store(indices.len(), Ordering::Relaxed);
        self.written.watchers.load(Ordering::Relaxed) != 0
    }

    /// Registers interest in exits until the watch is dropped. Every removal ordered after
    /// this call (by the `indices` lock) returns true; every one before it is visible to the
    /// caller afterwards (the lock's acquisition follows that removal's release).
    pub(crate) fn watch_exits(&self) -> ExitWatch<'_> {
        let _indices = self.indices();
        self.written.watchers.fetch_add(1, Ordering::Relaxed);
        ExitWatch(&self.written.watchers)
    }

    /// How many processes are alive.
    pub(crate) fn len(&self) -> usize {
        self.written.live.load(Ordering::Relaxed)
    }

    /// One more than the highest slot index ever handed out: every live process's index is
    /// below it. Takes no lock.
    pub(crate) fn high_water(&self) -> u32 {
        self.written.high_water.load(Ordering::Relaxed)
    }

    /// The process in slot `index`, if any, held until the result drops; no lock is taken.
    pub(crate) fn at_index(&self, index: u32) -> Option<Resolved<'_>> {
        let read = self.slots.get(index)?.read();
        read.as_deref().is_some().then_some(read)
    }

    /// The live processes, in slot order.
    pub(crate) fn all(&self) -> Vec<Arc<Process>> {
        let indices = self.indices();
        indices
            .iter()
            .filter_map(|(i, ())| {
                let slot = self.slots.get(i as u32)?;
                slot.read().to_arc()
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

    /// A reader may resolve a pid again while it holds the pid's slot, even while the process's
    /// removal waits for that slot's readers (with a fair read-write lock, the nested read
    /// would queue behind the waiting writer, which waits for the outer read: a deadlock); the
    /// removal goes on once the reads are done, the process stays alive until then, and a
    /// stale pid then resolves to nothing, also after the slot is reused.
    #[test]
    fn nested_reads_do_not_wait_for_a_waiting_writer() {
        let node = Node::builder().current_thread().build().expect("node");
        let pid = node
            .spawn(async { std::future::pending::<()>().await })
            .expect("spawn");
        let inner = std::sync::Arc::clone(&node.handle().inner);
        let table = &inner.table;
        let outer = table.get(pid).expect("live");
        let process = table.all().pop().expect("live");
        let (removed_tx, removed_rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                table.remove(&process);
                removed_tx.send(()).expect("send");
            });
            // The removal waits now, or soon; it cannot finish while `outer` is held.
            assert!(removed_rx.recv_timeout(Duration::from_millis(50)).is_err());
            // Taken out of the slot already, or about to be: a new read finds it or nothing.
            if let Some(nested) = table.get(pid) {
                assert_eq!(nested.as_deref().map(|p| p.pid), Some(pid));
            }
            assert_eq!(
                outer.as_deref().map(|p| p.pid),
                Some(pid),
                "held: still alive"
            );
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

    /// A wait for exits misses none: each round, processes on two workers exit while a thread
    /// waits for the table to empty, registering its watch as they go (a wait whose last exit
    /// went unnoticed would wait until its timeout).
    #[test]
    fn a_wait_for_exits_sees_the_last_exit() {
        let node = Node::builder().worker_threads(2).build().expect("node");
        let inner = std::sync::Arc::clone(&node.handle().inner);
        for round in 0..50u32 {
            for i in 0..=round % 7 {
                node.spawn(async move {
                    for _ in 0..i {
                        tokio::task::yield_now().await;
                    }
                })
                .expect("spawn");
            }
            let waiter = std::thread::Builder::new()
                .name("exit-waiter".into())
                .spawn({
                    let inner = std::sync::Arc::clone(&inner);
                    move || {
                        let wait = inner.wait_until(|| inner.table.len() == 0);
                        inner.handle.block_on(async {
                            tokio::time::timeout(Duration::from_secs(30), wait).await
                        })
                    }
                });
            let waited = waiter
                .expect("the waiter's thread started")
                .join()
                .expect("the waiter ran");
            assert!(
                waited.is_ok(),
                "round {round}: the last exit went unnoticed"
            );
            assert_eq!(inner.table.len(), 0);
        }
    }
}
