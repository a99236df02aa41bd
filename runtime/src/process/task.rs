//! The poll wrapper: how the runtime owns every poll of a process.
//!
//! Each poll makes the process current on the polling thread (moved in and out of the
//! thread-local, no reference counting), acts on pending exit signals or a kill before and
//! after polling the user's future, and catches a panic, which becomes
//! [`ExitReason::Panic`]. When the process ends for any reason, its future is dropped while
//! the process is still current, so destructors run inside it, and then the exit bookkeeping
//! runs ([`Process::finish`]). If the tokio runtime drops the task without finishing it (the
//! runtime shut down under it), the drop does the same with reason `Killed`.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::current::{Enter, with_current};
use super::{Process, STATUS_RUNNING, STATUS_WAITING};
use crate::exit::{ExitPayload, IntoExitReason, panic_message};
use crate::{ExitReason, trace};

pin_project! {
    /// A process's future as the tokio task runs it.
    pub(crate) struct ProcessTask<F> {
        #[pin]
        future: Option<F>,
        // `None` while a poll has moved it into the thread-local.
        process: Option<Arc<Process>>,
    }

    impl<F> PinnedDrop for ProcessTask<F> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if this.future.is_none() {
                return;
            }
            let Some(_enter) = Enter::new(this.process, false) else { return };
            with_current(|p| {
                if let Some(p) = p {
                    p.begin_exit(ExitReason::Killed);
                }
            });
            let _ = catch_unwind(AssertUnwindSafe(|| this.future.set(None)));
            // Not under the thread-local's borrow: the mailbox's messages are dropped in
            // there, and one may own a task of another process (a node's runtime, say).
            if let Some(p) = with_current(|p| p.cloned()) {
                p.finish(ExitReason::Killed);
            }
        }
    }
}

impl<F> ProcessTask<F> {
    pub(crate) fn new(future: F, process: Arc<Process>) -> ProcessTask<F> {
        ProcessTask {
            future: Some(future),
            process: Some(process),
        }
    }
}

/// At a poll boundary: the reason to end with, from pending signals or a heap limit.
#[inline(always)]
fn checkpoint(p: &Process) -> Option<ExitReason> {
    if p.has_flags() { p.take_exit() } else { None }
}

fn reason_of_panic(payload: Box<dyn std::any::Any + Send>) -> ExitReason {
    match payload.downcast::<ExitPayload>() {
        Ok(exit) => exit.0,
        Err(payload) => ExitReason::Panic(panic_message(&*payload)),
    }
}

impl<F> Future for ProcessTask<F>
where
    F: Future,
    F::Output: IntoExitReason,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let Some(enter) = Enter::new(this.process, false) else {
            return Poll::Ready(());
        };
        // Before the poll: keep the task's waker, mark running, act on pending signals, and
        // start measuring it for the sessions that do.
        let mut measured = 0;
        let before = with_current(|p| {
            let p = p?;
            p.task_waker.get_or_init(|| cx.waker().clone());
            p.status.store(STATUS_RUNNING, Ordering::Relaxed);
            let exit = checkpoint(p);
            measured = p.trace_flags.traced() & trace::measuring();
            if measured != 0 {
                // Only sessions open on this process's node (a flag may outlive its session).
                measured &= p.node.trace_sessions.load(Ordering::Relaxed);
            }
            if measured != 0 && exit.is_none() {
                trace::begin_poll(p, measured);
            } else {
                measured = 0;
            }
            exit
        });
        let reason = match before {
            Some(reason) => reason,
            None => {
                let polled = catch_unwind(AssertUnwindSafe(|| {
                    match this.future.as_mut().as_pin_mut() {
                        Some(future) => future.poll(cx).map(IntoExitReason::into_exit_reason),
                        None => Poll::Ready(ExitReason::Normal),
                    }
                }));
                if measured != 0 {
                    with_current(|p| {
                        if let Some(p) = p {
                            trace::end_poll(p);
                        }
                    });
                }
                match polled {
                    Ok(Poll::Ready(reason)) => reason,
                    // After a pending poll: act on signals that came during it, or suspend.
                    Ok(Poll::Pending) => match with_current(|p| {
                        let p = p?;
                        let exit = checkpoint(p);
                        if exit.is_none() {
                            p.status.store(STATUS_WAITING, Ordering::Relaxed);
                        }
                        exit
                    }) {
                        Some(reason) => reason,
                        None => return Poll::Pending,
                    },
                    Err(payload) => reason_of_panic(payload),
                }
            }
        };
        // Drop the future inside the process; a panicking destructor does not change why the
        // process ended.
        with_current(|p| {
            if let Some(p) = p {
                p.begin_exit(reason.clone());
            }
        });
        let _ = catch_unwind(AssertUnwindSafe(|| this.future.set(None)));
        // Not under the thread-local's borrow (see the drop above).
        if let Some(p) = with_current(|p| p.cloned()) {
            p.finish(reason);
        }
        drop(enter);
        Poll::Ready(())
    }
}

pin_project! {
    /// A helper task of [`spawn_task`](crate::spawn_task): runs with its owner as the current
    /// process (marked as a helper), so its work is the owner's.
    pub(crate) struct HelperTask<F> {
        #[pin]
        future: F,
        process: Option<Arc<Process>>,
    }
}

impl<F> HelperTask<F> {
    pub(crate) fn new(future: F, process: Arc<Process>) -> HelperTask<F> {
        HelperTask {
            future,
            process: Some(process),
        }
    }
}

impl<F: Future> Future for HelperTask<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _enter = Enter::new(this.process, true);
        this.future.poll(cx)
    }
}

/// Runs a blocking closure with `process` as its (helper) current process.
pub(crate) fn run_as_helper<R>(process: Arc<Process>, f: impl FnOnce() -> R) -> R {
    let mut slot = Some(process);
    let _enter = Enter::new(&mut slot, true);
    f()
}
