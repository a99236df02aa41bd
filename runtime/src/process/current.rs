//! The current process of this thread.
//!
//! The poll wrapper moves the process's `Arc` into the thread-local for the length of one poll
//! and moves it back when the poll returns or unwinds (no reference-count traffic per poll).
//! A helper task of [`spawn_task`](crate::spawn_task) installs a clone of its owner's `Arc`,
//! marked as a helper: it acts for the owner but has no mailbox of its own to receive from.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use super::Process;
use crate::Pid;
use crate::heap::Charging;

pub(crate) struct Current {
    pub(crate) process: Arc<Process>,
    pub(crate) helper: bool,
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
    /// The node of the current process, 0 when none: read by the trace machinery on every
    /// traced call, so kept apart from `CURRENT` in a plain `Cell`.
    static CURRENT_NODE: Cell<u32> = const { Cell::new(0) };
}

/// The node of this thread's current process, 0 outside any process.
#[inline(always)]
pub(crate) fn current_node_id() -> u32 {
    CURRENT_NODE.with(Cell::get)
}

/// Runs `f` as if outside any node for the trace machinery (its calls are counted by no
/// session), restoring the node afterwards, on unwind too.
pub(crate) fn with_node_hidden<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT_NODE.with(|n| n.set(self.0));
        }
    }
    let _restore = Restore(CURRENT_NODE.with(|n| n.replace(0)));
    f()
}

/// Makes `current` this thread's current process until the guard drops, which puts back the
/// previous one and hands `current` back through `slot`. Meanwhile the thread's allocations are
/// charged to it (see [`crate::heap`]).
pub(crate) struct Enter<'a> {
    slot: &'a mut Option<Arc<Process>>,
    prev: Option<Current>,
    prev_node: u32,
    // Dropped after `drop` below has put the previous process back.
    _charging: Option<Charging>,
}

impl<'a> Enter<'a> {
    /// Moves the `Arc` out of `slot` into the thread-local; the guard moves it back.
    pub(crate) fn new(slot: &'a mut Option<Arc<Process>>, helper: bool) -> Option<Enter<'a>> {
        let process = slot.take()?;
        let charging = crate::heap::installed().then(|| Charging::new(process.account, helper));
        let prev_node = CURRENT_NODE.with(|n| n.replace(process.node.id));
        let prev = CURRENT.with(|c| c.replace(Some(Current { process, helper })));
        Some(Enter {
            slot,
            prev,
            prev_node,
            _charging: charging,
        })
    }
}

impl Drop for Enter<'_> {
    fn drop(&mut self) {
        let mine = CURRENT.with(|c| c.replace(self.prev.take()));
        CURRENT_NODE.with(|n| n.set(self.prev_node));
        *self.slot = mine.map(|c| c.process);
    }
}

/// Runs `f` with the current process, if any (helpers included).
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Arc<Process>>) -> R) -> R {
    CURRENT.with(|c| f(c.borrow().as_ref().map(|c| &c.process)))
}

/// Runs `f` with the current process when the caller is the process itself (not a helper
/// task acting for it).
#[inline]
pub(crate) fn with_current_owner<R>(f: impl FnOnce(Option<&Arc<Process>>) -> R) -> R {
    CURRENT.with(|c| {
        f(c.borrow()
            .as_ref()
            .filter(|c| !c.helper)
            .map(|c| &c.process))
    })
}

/// Runs `f` with the current process, for receiving.
///
/// # Panics
/// Outside a process, or in a helper task, which has no mailbox.
#[inline]
pub(crate) fn current_process_for_receive<R>(f: impl FnOnce(&Process) -> R) -> R {
    CURRENT.with(|c| match c.borrow().as_ref() {
        Some(Current {
            process,
            helper: false,
        }) => f(process),
        Some(_) => panic!(
            "receive polled in a helper task of spawn_task/spawn_blocking: only the process itself \
             receives from its mailbox; send the result to it instead"
        ),
        None => panic!(
            "receive polled outside a process: run the code in a process (Node::spawn, \
             Node::run, runtime::spawn)"
        ),
    })
}

/// The pid of the calling process, or `None` outside a process. In a helper task of
/// [`spawn_task`](crate::spawn_task), the pid of the process it belongs to.
pub fn try_self_pid() -> Option<Pid> {
    with_current(|c| c.map(|p| p.pid))
}

/// The pid of the calling process, Erlang's `self()`.
///
/// # Panics
/// Outside a process; [`try_self_pid`] returns `None` there instead.
pub fn self_pid() -> Pid {
    try_self_pid().expect("self_pid called outside a process; use try_self_pid to check")
}
