//! The waker a process's future is polled with: it notes in the process record that the
//! process was woken, then wakes its task with the task's own waker. So a process that was
//! woken (by `yield_now`, a timer, a message, a reply) and waits in a worker's queue reads
//! "runnable", not "waiting", wherever its status is read (`process_info`, peek, top, the wall
//! sampler) until its next poll begins.
//!
//! The waker's data is the process record itself (the pointer of its `Arc`): the poll
//! wrapper lends it for a poll without touching the reference counts ([`Borrowed`]), and a
//! clone (a timer, a channel, another process's reply slot keeping the waker) holds one
//! **weak** count of the record: a wake upgrades it, and a waker kept after its process is
//! gone wakes nothing. A strong count would make a cycle wherever a process's waker is kept
//! by something the process keeps alive (a call's reply slot in a callee's mailbox, the
//! callee in the node's table, the node in the caller's record): AddressSanitizer's leak
//! check found such a node never freed. The task's waker it forwards to is the process's
//! `task_waker`, kept before the first poll.
//!
//! # Safety
//!
//! This file's `unsafe`: the vtable's four functions, and building a [`Waker`] from the raw
//! parts. Every raw waker of [`VTABLE`] has as its data the pointer of an `Arc<Process>`'s
//! allocation (from [`Arc::as_ptr`], the same pointer [`Weak::into_raw`] gives): either one
//! the caller of [`borrowed`] holds a strong count of for as long as the [`Borrowed`] lives
//! (which never runs the vtable's drop), or one weak count that `clone` took and that
//! `drop_waker` (or `wake`, which consumes) gives back. Either keeps the allocation, so a
//! `Weak` rebuilt from the pointer (inside `ManuallyDrop` where the count is not this code's
//! to give back) may be cloned or upgraded.

#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::{Arc, Weak};
use std::task::{RawWaker, RawWakerVTable, Waker};

use super::Process;

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

/// A process's waker lent for one poll: the borrow of its `Arc` keeps the record alive, and
/// no count is taken or given back.
pub(super) struct Borrowed<'a> {
    waker: ManuallyDrop<Waker>,
    _process: PhantomData<&'a Arc<Process>>,
}

impl Deref for Borrowed<'_> {
    type Target = Waker;

    #[inline(always)]
    fn deref(&self) -> &Waker {
        &self.waker
    }
}

/// The waker of `process`, for a poll of it: its task's waker must be kept already
/// ([`Process::keep_task_waker`]), or its wakes wake nothing.
#[inline(always)]
pub(super) fn borrowed(process: &Arc<Process>) -> Borrowed<'_> {
    let raw = RawWaker::new(Arc::as_ptr(process).cast(), &VTABLE);
    // SAFETY: the data is the pointer of the `Arc` borrowed for `'a`, so it stays valid while
    // the `Borrowed` lives; the vtable's functions keep the contract in the module docs, and
    // `ManuallyDrop` keeps the borrowed waker from giving back a count it never took.
    let waker = ManuallyDrop::new(unsafe { Waker::from_raw(raw) });
    Borrowed {
        waker,
        _process: PhantomData,
    }
}

/// Whether `waker` is a waker of `process` made here (the one its polls are given).
#[inline(always)]
pub(super) fn is_of(waker: &Waker, process: &Process) -> bool {
    std::ptr::eq(waker.vtable(), &VTABLE)
        && std::ptr::eq(waker.data(), (process as *const Process).cast())
}

/// The weak reference `data` stands for, not to be dropped (its count is not this code's).
///
/// # Safety
/// `data` is the pointer of an `Arc<Process>`'s allocation kept alive by a strong or a weak
/// count (see the module docs).
#[inline(always)]
unsafe fn weak(data: *const ()) -> ManuallyDrop<Weak<Process>> {
    // SAFETY: the pointer is the allocation's data pointer, as `Weak::into_raw` gives it, and
    // the allocation is alive (by the caller); `ManuallyDrop` never gives back a count.
    ManuallyDrop::new(unsafe { Weak::from_raw(data.cast::<Process>()) })
}

/// # Safety
/// `data` is the pointer of a live `Arc<Process>`'s allocation (see the module docs).
unsafe fn clone(data: *const ()) -> RawWaker {
    // SAFETY: as the caller promises. The weak count taken is the new waker's, given back by
    // its drop or its `wake`.
    let borrowed = unsafe { weak(data) };
    let clone = Weak::into_raw(Weak::clone(&borrowed));
    RawWaker::new(clone.cast(), &VTABLE)
}

/// # Safety
/// `data` is the pointer of an `Arc<Process>`'s allocation whose weak count this waker owns.
unsafe fn wake(data: *const ()) {
    // SAFETY: as the caller promises; `wake` consumes the waker, so its count is given back.
    unsafe {
        wake_by_ref(data);
        drop_waker(data);
    }
}

/// # Safety
/// `data` is the pointer of a live `Arc<Process>`'s allocation (see the module docs).
unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: the allocation lives while the waker does (module docs); a process already
    // dropped is woken no more.
    let Some(process) = unsafe { weak(data) }.upgrade() else {
        return;
    };
    process.note_woken();
    if let Some(task) = process.task_waker() {
        task.wake_by_ref();
    }
}

/// # Safety
/// `data` is the pointer of an `Arc<Process>`'s allocation whose weak count this waker owns.
unsafe fn drop_waker(data: *const ()) {
    // SAFETY: the count given back is the one `clone` took for this waker.
    drop(unsafe { Weak::from_raw(data.cast::<Process>()) });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::{Node, ProcessStatus};

    /// A process woken by a tokio `Notify` is queued, not polled, until the thread that woke
    /// it gives the worker back: read in between, it is runnable.
    #[test]
    fn a_woken_process_reads_runnable_until_polled() {
        let node = Node::builder().current_thread().build().unwrap();
        let notify = Arc::new(tokio::sync::Notify::new());
        let waits = notify.clone();
        let pid = node
            .spawn(async move {
                waits.notified().await;
            })
            .unwrap();
        node.block_on(async {
            let deadline = Instant::now() + Duration::from_secs(60);
            while node.process_info(pid).map(|i| i.status) != Some(ProcessStatus::Waiting) {
                assert!(Instant::now() < deadline, "the process never waited");
                tokio::task::yield_now().await;
            }
            notify.notify_one();
            // Nothing else runs on this one-thread runtime before this reads it.
            let status = node.process_info(pid).map(|i| i.status);
            assert_eq!(status, Some(ProcessStatus::Runnable));
        });
    }

    /// CPU-bound processes that yield, three on one worker thread: read from outside, some
    /// are seen runnable (before the fix none ever was: a yielded process read "waiting").
    #[test]
    fn yielding_workers_read_runnable() {
        let node = Node::builder().worker_threads(1).build().unwrap();
        let pids: Vec<_> = (0..3)
            .map(|_| {
                node.spawn(async {
                    loop {
                        std::hint::black_box((0..2_000u64).sum::<u64>());
                        tokio::task::yield_now().await;
                    }
                })
                .unwrap()
            })
            .collect();
        let (mut runnable, mut reads) = (0u32, 0u32);
        let deadline = Instant::now() + Duration::from_secs(60);
        while runnable < 20 {
            assert!(
                Instant::now() < deadline,
                "{runnable} runnable in {reads} reads of yielding workers"
            );
            for &pid in &pids {
                reads += 1;
                if node.process_info(pid).map(|i| i.status) == Some(ProcessStatus::Runnable) {
                    runnable += 1;
                }
            }
            std::thread::yield_now();
        }
        for pid in pids {
            node.handle().exit(pid, crate::ExitReason::Kill);
        }
    }
}
