//! The process table of a node.
//!
//! `slab` hands out slot indices under a lock taken only by spawn and exit. The slots
//! themselves live in an append-only [`Segmented`] array, each holding the current process (if
//! any) behind an `ArcSwapOption` and the slot's serial. Resolving a pid reads the slot without
//! any lock and checks the serial: a pid whose process has gone resolves to nothing, even after
//! its slot has been reused.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwapOption, Guard};
use slab::Slab;

use super::Process;
use crate::Pid;
use crate::segmented::Segmented;

#[derive(Default)]
struct Slot {
    process: ArcSwapOption<Process>,
    /// The serial of the last process spawned into this slot.
    serial: AtomicU32,
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
        slot.process.store(Some(Arc::clone(&process)));
        entry.insert(());
        self.live.fetch_add(1, Ordering::Relaxed);
        Ok(process)
    }

    /// The live process named by `pid`, without taking any lock.
    #[inline]
    pub(crate) fn get(&self, pid: Pid) -> Option<Guard<Option<Arc<Process>>>> {
        let slot = self.slots.get(pid.index())?;
        let guard = slot.process.load();
        match &*guard {
            Some(p) if p.pid == pid => Some(guard),
            _ => None,
        }
    }

    /// Frees the slot of an exited process.
    pub(crate) fn remove(&self, pid: Pid) {
        let mut indices = self.indices();
        if let Some(slot) = self.slots.get(pid.index()) {
            let current = slot.process.load();
            if current.as_ref().is_some_and(|p| p.pid == pid) {
                slot.process.store(None);
                indices.remove(pid.index() as usize);
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
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
                slot.process.load_full()
            })
            .collect()
    }
}
