//! The poll wrapper: how the runtime owns every poll of a process.
//!
//! Each poll makes the process current on the polling thread (a pointer to it in the
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
use std::sync::atomic::{Ordering, compiler_fence};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::current::enter;
use super::{Process, STATUS_RUNNING};
use crate::exit::{ExitPayload, IntoExitReason, panic_message};
use crate::{ExitReason, trace};

pin_project! {
    /// A process's future as the tokio task runs it.
    pub(crate) struct ProcessTask<F> {
        #[pin]
        future: Option<F>,
        process: Arc<Process>,
    }

    impl<F> PinnedDrop for ProcessTask<F> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            // Through `as_pin_mut`, never `&Option<F>`: see `poll`.
            if this.future.as_mut().as_pin_mut().is_none() {
                return;
            }
            let process: &Arc<Process> = this.process;
            enter(process, false, || {
                process.begin_exit(ExitReason::Killed);
                let _ = catch_unwind(AssertUnwindSafe(|| this.future.set(None)));
                process.finish(ExitReason::Killed);
            });
        }
    }
}

impl<F> ProcessTask<F> {
    pub(crate) fn new(future: F, process: Arc<Process>) -> ProcessTask<F> {
        ProcessTask {
            future: Some(future),
            process,
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
        let this = self.project();
        let p: &Arc<Process> = this.process;
        let mut future = this.future;
        // Checked through a pinned `&mut`, not `future.is_none()`: that takes a shared
        // reference to the whole future, which under Stacked Borrows invalidates the pointers
        // a suspended `async` block keeps into itself (Miri reports the next poll through
        // them as undefined behaviour; see the test `a_self_borrowing_future_is_polled_in_place`).
        if future.as_mut().as_pin_mut().is_none() {
            return Poll::Ready(());
        }
        enter(p, false, || {
            // Before the poll: mark running, act on pending signals, and start measuring it
            // for the sessions that do.
            // (The store clears the "woken" bit too: see `waker`.)
            p.status.store(STATUS_RUNNING, Ordering::Relaxed);
            p.note_poll();
            // The task's waker, for the process's own to wake (see `waker`), kept before the
            // checkpoint below.
            if p.task_waker.get().is_none() {
                p.keep_task_waker(cx.waker());
            }
            // Both stored before the trace flags are read below, in program order (the
            // compiler fence keeps the compiler from moving them; it is no instruction).
            // `enable_trace` makes every thread pass a memory barrier once it has set a flag,
            // then waits for the polls it sees running: a poll that read the flags before the
            // flag was set is among them (see `trace::flags`).
            compiler_fence(Ordering::SeqCst);
            crate::world::observe::on_poll(p.node.id);
            let before = checkpoint(p);
            let mut measured = trace::sessions_measuring(&**p);
            if measured == 0 || before.is_some() || !trace::begin_poll(&**p, measured) {
                measured = 0;
            } else if measured & trace::paths::wanted() != 0 {
                // A wall session records where this poll suspends.
                p.note_path_poll();
            }
            let reason = match before {
                Some(reason) => reason,
                None => {
                    // Polled with the process's own waker: a wake notes that it is runnable.
                    let waker = super::waker::borrowed(p);
                    let mut own = Context::from_waker(&waker);
                    let polled =
                        catch_unwind(AssertUnwindSafe(|| match future.as_mut().as_pin_mut() {
                            Some(future) => {
                                future.poll(&mut own).map(IntoExitReason::into_exit_reason)
                            }
                            None => Poll::Ready(ExitReason::Normal),
                        }));
                    if measured != 0 {
                        trace::end_poll(&trace::Target::Process(&**p));
                    }
                    match polled {
                        Ok(Poll::Ready(reason)) => reason,
                        // After a pending poll: act on signals that came during it, or suspend.
                        Ok(Poll::Pending) => match checkpoint(p) {
                            Some(reason) => reason,
                            None => {
                                p.mark_waiting();
                                return Poll::Pending;
                            }
                        },
                        Err(payload) => reason_of_panic(payload),
                    }
                }
            };
            // Drop the future inside the process; a panicking destructor does not change why
            // the process ended.
            p.begin_exit(reason);
            let _ = catch_unwind(AssertUnwindSafe(|| future.set(None)));
            p.finish_begun();
            Poll::Ready(())
        })
    }
}

pin_project! {
    /// A helper task of [`spawn_task`](crate::spawn_task): runs with its owner as the current
    /// process (marked as a helper), so its work is the owner's. `key` is its entry in the
    /// node's helpers, left when the task is dropped (it ended or was cancelled).
    pub(crate) struct HelperTask<F> {
        #[pin]
        future: F,
        process: Arc<Process>,
        key: u64,
    }

    impl<F> PinnedDrop for HelperTask<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.process.node.helpers.leave(*this.key);
        }
    }
}

impl<F> HelperTask<F> {
    pub(crate) fn new(future: F, process: Arc<Process>, key: u64) -> HelperTask<F> {
        HelperTask {
            future,
            process,
            key,
        }
    }
}

impl<F: Future> Future for HelperTask<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let future = this.future;
        let process: &Arc<Process> = this.process;
        crate::world::observe::on_poll(process.node.id);
        // Measured as its process's work, by the sessions measuring the process: one load
        // when none does.
        match trace::sessions_measuring(&**process) {
            0 => enter(process, true, || future.poll(cx)),
            sessions => measured_helper(process, sessions, || future.poll(cx)),
        }
    }
}

/// Runs `f`, a poll of a helper of `process` (or its blocking closure), with the process as
/// its (helper) current process, measured for `sessions` as the process's work.
#[inline(never)]
fn measured_helper<R>(process: &Arc<Process>, sessions: u64, f: impl FnOnce() -> R) -> R {
    enter(process, true, || {
        let _measured = trace::begin_helper_poll(&**process, sessions);
        f()
    })
}

/// Runs a blocking closure with `process` as its (helper) current process, measured as one
/// poll of its process's work.
pub(crate) fn run_as_helper<R>(process: Arc<Process>, f: impl FnOnce() -> R) -> R {
    crate::world::observe::on_poll(process.node.id);
    match trace::sessions_measuring(&*process) {
        0 => enter(&process, true, f),
        sessions => measured_helper(&process, sessions, f),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::{Down, ExitReason, Node, receive, self_pid, spawn_monitor};

    /// A process's future that keeps a pointer into itself across a suspension (tokio's
    /// `yield_now` does: its closure borrows a local of its `async fn`) is polled and checked
    /// through a pinned `&mut` only. A shared reference to it, taken by the poll wrapper
    /// between two polls, would invalidate that pointer under Stacked Borrows: Miri
    /// reported the next poll as undefined behaviour before the wrapper stopped taking one.
    #[test]
    fn a_self_borrowing_future_is_polled_in_place() {
        let node = Node::builder().current_thread().build().expect("node");
        let polled = node.run(async {
            let mut resumed = 0u32;
            for _ in 0..3 {
                tokio::task::yield_now().await;
                resumed += 1;
            }
            resumed
        });
        assert_eq!(polled, Ok(3));
    }

    /// A kill that comes during a process's first poll ends it when that poll suspends (the
    /// poll wrapper's checkpoint after the poll sees the flag), from itself or from another
    /// thread. (The task's waker is kept before the first poll, for the process's own waker to
    /// wake: see `waker`.)
    #[test]
    fn a_kill_during_the_first_poll_ends_the_process_when_it_suspends() {
        let node = Node::builder().current_thread().build().expect("node");
        let down = node
            .run(async {
                let (_pid, _) = spawn_monitor(async {
                    crate::exit(self_pid(), ExitReason::Kill);
                    std::future::pending::<()>().await;
                })
                .expect("spawn");
                receive::<Down>().await
            })
            .expect("ran");
        assert_eq!(down.reason, ExitReason::Killed);

        let node = Node::builder().worker_threads(2).build().expect("node");
        let (polling_tx, polling_rx) = mpsc::channel();
        let (killed_tx, killed_rx) = mpsc::channel::<()>();
        let (down_tx, down_rx) = mpsc::channel();
        let watcher = node
            .spawn(async move {
                let (pid, _) = spawn_monitor(async move {
                    polling_tx.send(self_pid()).expect("send");
                    // Blocks the first poll until the kill is in.
                    killed_rx.recv().expect("killed");
                    std::future::pending::<()>().await;
                })
                .expect("spawn");
                let down: Down = receive().await;
                down_tx.send((pid, down)).expect("send");
            })
            .expect("spawn");
        let pid = polling_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("first poll");
        node.exit(pid, ExitReason::Kill);
        killed_tx.send(()).expect("send");
        let (dead, down) = down_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the killed process ended");
        assert_eq!(dead, pid);
        assert_eq!(down.reason, ExitReason::Killed);
        let _ = watcher;
    }
}
