//! The helper tasks of a node's processes ([`spawn_task`](crate::spawn_task)), kept so that
//! dropping the node cancels those still running.
//!
//! A helper belongs to its process but may outlive it, and it holds the process's record,
//! which holds the node's internals. On a runtime the node does not own (`Node::start_on`),
//! a helper left running would keep those alive after the node is gone. So each helper has an
//! entry here from before it is spawned until its task is dropped, and dropping the node takes
//! the entries and aborts their tasks. (`shutdown` leaves them: a helper may call it and go on
//! once it returns.)
//!
//! Keys are never reused (a `u64` serial): the abort handle is attached after the spawn, when
//! the helper may already have ended and left, and must not land in another helper's entry.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::task::AbortHandle;

/// The helper tasks of one node that have not ended.
#[derive(Default)]
pub(crate) struct Helpers {
    /// Each helper's entry, by key; its abort handle once the spawn has returned one.
    running: Mutex<Running>,
}

#[derive(Default)]
struct Running {
    next_key: u64,
    entries: HashMap<u64, Option<AbortHandle>>,
    /// Set by [`Helpers::cancel_all`]: no helper enters after it.
    closed: bool,
}

impl Helpers {
    fn running(&self) -> std::sync::MutexGuard<'_, Running> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An entry for a helper about to be spawned, or `None` once [`Helpers::cancel_all`] has
    /// run (the node is dropped): either this entry is made first, and `cancel_all` finds it,
    /// or this sees it closed.
    pub(crate) fn enter(&self) -> Option<u64> {
        let mut running = self.running();
        if running.closed {
            return None;
        }
        let key = running.next_key;
        running.next_key += 1;
        running.entries.insert(key, None);
        Some(key)
    }

    /// Attaches the abort handle of the helper spawned for `key`. If the entry is gone, the
    /// helper has ended (aborting it does nothing) or `cancel_all` took the entry before the
    /// handle was there: the helper is aborted now.
    pub(crate) fn attach(&self, key: u64, abort: AbortHandle) {
        let mut running = self.running();
        match running.entries.get_mut(&key) {
            Some(entry) => *entry = Some(abort),
            None => {
                drop(running);
                abort.abort();
            }
        }
    }

    /// Forgets the helper of `key`: its task is being dropped.
    pub(crate) fn leave(&self, key: u64) {
        self.running().entries.remove(&key);
    }

    /// How many helpers have not ended.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.running().entries.len()
    }

    /// Aborts every helper still running (their tasks are dropped on the runtime, and their
    /// `JoinHandle`s report cancellation), and lets no new one enter. The lock is not held
    /// while aborting.
    pub(crate) fn cancel_all(&self) {
        let taken = {
            let mut running = self.running();
            running.closed = true;
            std::mem::take(&mut running.entries)
        };
        for abort in taken.into_values().flatten() {
            abort.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Helpers;

    #[test]
    fn keys_are_not_reused_and_no_helper_enters_after_the_cancel() {
        let helpers = Helpers::default();
        let a = helpers.enter().expect("entered");
        helpers.leave(a);
        let b = helpers.enter().expect("entered");
        assert_ne!(a, b, "a key is never handed out twice");
        assert_eq!(helpers.len(), 1);
        helpers.cancel_all();
        assert_eq!(helpers.len(), 0);
        assert_eq!(helpers.enter(), None);
        assert_eq!(helpers.len(), 0);
    }

    #[test]
    fn a_handle_attached_after_the_entries_were_taken_aborts_its_task() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let helpers = Helpers::default();
        let key = helpers.enter().expect("entered");
        helpers.cancel_all();
        let task = rt.spawn(std::future::pending::<()>());
        helpers.attach(key, task.abort_handle());
        let joined = rt.block_on(task);
        assert!(joined.is_err_and(|e| e.is_cancelled()));
        assert_eq!(helpers.len(), 0);
    }
}
