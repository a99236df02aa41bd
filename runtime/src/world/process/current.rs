//! The current process of this thread.
//!
//! The thread-local is the thread's context ([`crate::context`]'s `CURRENT`), where the
//! process pointer is untyped, so that the layers below this one can tell whether a process
//! runs without naming it; this file alone stores it and reads it back as an `Arc<Process>`.
//!
//! The poll wrapper runs each poll inside [`enter`], which points the thread-local at the
//! process's `Arc` (kept in the task) for the length of the poll and puts the previous one back
//! when the poll returns or unwinds: no reference-count traffic, no borrow flag, no destructor
//! check per access. A helper task of [`spawn_task`](crate::spawn_task) enters its own clone of
//! its owner's `Arc`, marked as a helper: it acts for the owner but has no mailbox of its own
//! to receive from.
//!
//! # Safety
//!
//! The thread-local's pointer is this file's one `unsafe` (a dereference in `with_raw`, and in
//! `pid_in_signal`); nothing else in the crate stores to it. The contract: it is non-null only while an [`enter`] runs on this thread, and then points at the
//! `Arc` that innermost `enter` borrows; `enter` puts the previous pointer back before it
//! returns or unwinds, and no guard leaves it; a reference made from the pointer is handed only
//! to a closure that runs inside that `enter`.

use crate::traced;
use std::sync::Arc;
use std::sync::atomic::{Ordering, compiler_fence};

use super::Process;
use crate::Pid;
use crate::context::CURRENT;
use crate::heap::Charging;

/// Runs `f` with `process` as this thread's current process (a helper task of it when
/// `helper`), then puts back whichever was current before, on unwind too. Meanwhile the
/// thread's allocations are charged to it (see [`crate::heap`]).
///
/// The thread-local holds a plain pointer to `process`, valid because `process` is borrowed
/// for the whole call, and the pointer is replaced by the previous one before this returns or
/// unwinds: the thread-local always points at the `Arc` of the innermost `enter` still running
/// on this thread, or is null. No guard leaves this function, so none can be leaked or dropped
/// out of order.
#[inline]
pub(crate) fn enter<R>(process: &Arc<Process>, helper: bool, f: impl FnOnce() -> R) -> R {
    struct Restore {
        process: *const (),
        helper: bool,
        node: u32,
        // Dropped after `drop` below has put the previous process back.
        _charging: Option<Charging>,
    }
    impl Drop for Restore {
        #[inline]
        fn drop(&mut self) {
            CURRENT.with(|c| {
                c.process.store(self.process.cast_mut(), Ordering::Relaxed);
                c.helper.set(self.helper);
                c.node.set(self.node);
            });
            // Nothing after this (the `Arc` it pointed at may be dropped next) moves before
            // the store, as a signal handler on this thread sees it.
            compiler_fence(Ordering::SeqCst);
        }
    }
    let charging = process.heap_account().map(|a| Charging::new(a, helper));
    let _restore = CURRENT.with(|c| Restore {
        // A load and a store, not a swap (a locked instruction): only this thread writes it.
        process: {
            let previous = c.process.load(Ordering::Relaxed).cast_const();
            c.process.store(
                std::ptr::from_ref(process).cast_mut().cast(),
                Ordering::Relaxed,
            );
            previous
        },
        helper: c.helper.replace(helper),
        node: c.node.replace(process.node.id),
        _charging: charging,
    });
    f()
}

/// For the CPU sampler's signal handler, on this thread: the pid of the process being polled
/// (a helper task's owner included), or `None`.
///
/// Async-signal-safe: a relaxed load from a `const` thread-local without a destructor, and a
/// read of the pid (never written after spawn) of the process it points at. That pointer,
/// when not null, is the `Arc` borrowed by the innermost `enter` running on this thread (see
/// `enter`), which the interrupted code cannot have dropped: the handler runs while the
/// thread is stopped inside that `enter` (the store that puts the previous pointer back comes
/// before anything that follows it, see `Restore`). An `Arc` swapped in by `enter` is alive
/// before its pointer is stored.
pub(crate) fn pid_in_signal() -> Option<Pid> {
    let p = CURRENT
        .with(|c| c.process.load(Ordering::Relaxed))
        .cast::<Arc<Process>>();
    compiler_fence(Ordering::Acquire);
    // SAFETY: see above: a non-null pointer points at a live `Arc<Process>` for as long as the
    // handler runs.
    #[allow(unsafe_code)]
    let process = unsafe { p.as_ref() }?;
    Some(process.pid)
}

/// Runs `f` with the current process and whether it is a helper, if any.
#[inline(always)]
pub(super) fn with_raw<R>(f: impl FnOnce(Option<(&Arc<Process>, bool)>) -> R) -> R {
    let (p, helper) = CURRENT.with(|c| (c.process.load(Ordering::Relaxed), c.helper.get()));
    let p = p.cast::<Arc<Process>>();
    if p.is_null() {
        return f(None);
    }
    // SAFETY: a non-null pointer was stored by the innermost `enter` still running on this
    // thread (see `enter`), whose `process` borrow keeps the `Arc` alive and in place until that
    // `enter` returns, which is after `f` returns: `f` runs inside it, on this thread. `f` is
    // given the reference for a lifetime it cannot make outlive the call (its signature is
    // higher-ranked over it), and nothing can move or drop the `Arc` while it is borrowed.
    #[allow(unsafe_code)]
    let process = unsafe { &*p };
    f(Some((process, helper)))
}

/// Runs `f` with the current process, if any (helpers included).
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Arc<Process>>) -> R) -> R {
    with_raw(|c| f(c.map(|(p, _)| p)))
}

/// Runs `f` with the current process when the caller is the process itself (not a helper
/// task acting for it).
#[inline]
pub(crate) fn with_current_owner<R>(f: impl FnOnce(Option<&Arc<Process>>) -> R) -> R {
    with_raw(|c| f(c.and_then(|(p, helper)| (!helper).then_some(p))))
}

/// Runs `f` with the current process, for receiving.
///
/// # Panics
/// Outside a process, or in a helper task, which has no mailbox.
#[inline]
pub(crate) fn current_process_for_receive<R>(f: impl FnOnce(&Process) -> R) -> R {
    with_raw(|c| match c {
        Some((process, false)) => f(process),
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
#[inline]
pub fn try_self_pid() -> Option<Pid> {
    with_current(|c| c.map(|p| p.pid))
}

/// The pid of the calling process, Erlang's `self()`.
///
/// # Panics
/// Outside a process; [`try_self_pid`] returns `None` there instead.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn self_pid() -> Pid {
    try_self_pid().expect("self_pid called outside a process; use try_self_pid to check")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{OUTSIDE, current_node_id};
    use std::panic::{AssertUnwindSafe, catch_unwind};

    /// `enter` nests and puts back the outer process (and its helper flag) on return and on
    /// unwind; outside every `enter` the thread has no current process.
    #[test]
    fn enter_nests_and_restores_on_unwind() {
        assert!(with_current(|p| p.is_none()));
        assert_eq!(current_node_id(), OUTSIDE);
        let node = crate::Node::builder()
            .current_thread()
            .build()
            .expect("node");
        let me = node
            .run(async { with_current(|p| p.cloned()).expect("in a process") })
            .expect("ran");
        let other = Arc::clone(&me);
        assert!(with_current(|p| p.is_none()));
        enter(&me, false, || {
            assert!(with_current_owner(
                |p| p.is_some_and(|p| Arc::ptr_eq(p, &me))
            ));
            assert_eq!(current_node_id(), me.node.id);
            let caught = catch_unwind(AssertUnwindSafe(|| {
                enter(&other, true, || {
                    // A helper: current, but not the owner.
                    assert!(with_current(|p| p.is_some()));
                    assert!(with_current_owner(|p| p.is_none()));
                    panic!("unwinds through enter");
                })
            }));
            assert!(caught.is_err());
            assert!(with_current_owner(
                |p| p.is_some_and(|p| Arc::ptr_eq(p, &me))
            ));
            assert_eq!(enter(&other, true, || 7), 7);
            assert_eq!(current_process_for_receive(|p| p.pid), me.pid);
        });
        assert!(with_current(|p| p.is_none()));
        assert_eq!(current_node_id(), OUTSIDE);
    }
}
