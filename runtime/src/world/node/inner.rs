//! A node's internals, [`NodeInner`]: what its processes, pids and calls reach (the process
//! table, the name registry, the deadline wheel, the helpers of its processes), the directory
//! of the live nodes of the OS process, monitor references, and the orderly stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;

use crate::process::{Helpers, Process, ProcessTable, with_current};
use crate::registry::{Name, Registry, RegistryError};
use crate::segmented::Segmented;
use crate::signal::{MonitorRef, send_exit_signal};
use crate::timer::DeadlineWheel;
use crate::{ExitReason, Pid};

/// Every live node of this OS process, by number, for resolving pids of other nodes.
static DIRECTORY: Segmented<ArcSwapOption<NodeInner>> = Segmented::new();
static NEXT_NODE: AtomicU32 = AtomicU32::new(1);

/// The next block of monitor references: one counter for all the nodes of the OS process, so
/// that a reference is unique among them all. 64 bits: it never wraps in practice (centuries
/// at a billion references a second).
static NEXT_REF: AtomicU64 = AtomicU64::new(1);

/// How many monitor references a thread takes from [`NEXT_REF`] at a time.
const REF_BLOCK: u64 = 64;

thread_local! {
    /// The block of monitor references this thread took last: the next reference and the end
    /// of the block.
    static REFS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Aligned to a cache line so that, under its `Arc`, the reference count (written by every
/// spawn and exit: each process holds the node) has a line of its own, apart from the fields
/// every send reads.
#[repr(align(64))]
pub(crate) struct NodeInner {
    pub(crate) id: u32,
    pub(crate) table: ProcessTable,
    pub(crate) registry: Registry,
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) timers: DeadlineWheel,
    pub(super) stopping: AtomicBool,
    /// Notified at an exit while a `wait_until` watches (tokio's `notify_waiters` takes a lock
    /// shared by the whole node: see `ProcessTable::watch_exits`).
    exited: tokio::sync::Notify,
    pub(super) shutdown_grace: Duration,
    /// The slots of the trace sessions open on this node: a process flag whose session is not
    /// here (dropped, or another node's session in a reused slot) counts for nothing.
    pub(crate) trace_sessions: AtomicU64,
    /// Profiling switched on from the environment, until the node stops.
    pub(super) env_run: std::sync::Mutex<Option<Box<dyn crate::world::observe::NodeObserver>>>,
    /// The helper tasks of its processes, cancelled when the node is dropped.
    pub(crate) helpers: Helpers,
    /// Its supervisors in start order (those that have ended are pruned as it grows), so that
    /// shutdown stops the root ones last started first.
    pub(crate) supervisors: std::sync::Mutex<Vec<Pid>>,
}

impl NodeInner {
    /// The number of the next node: taken before the node's runtime starts, so that its threads
    /// know their node from their first instruction.
    pub(super) fn next_id() -> u32 {
        NEXT_NODE.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn new(
        id: u32,
        handle: tokio::runtime::Handle,
        shutdown_grace: Duration,
    ) -> Arc<NodeInner> {
        crate::heap::warm_up();
        let inner = Arc::new(NodeInner {
            id,
            table: ProcessTable::new(id),
            registry: Registry::default(),
            timers: DeadlineWheel::new(),
            handle,
            stopping: AtomicBool::new(false),
            exited: tokio::sync::Notify::new(),
            shutdown_grace,
            trace_sessions: AtomicU64::new(0),
            env_run: std::sync::Mutex::new(None),
            helpers: Helpers::default(),
            supervisors: std::sync::Mutex::new(Vec::new()),
        });
        DIRECTORY.get_or_alloc(id).store(Some(Arc::clone(&inner)));
        inner
    }

    pub(crate) fn stopping_flag(&self) -> &AtomicBool {
        &self.stopping
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// A monitor reference, unique among all the nodes of the OS process. A thread takes them
    /// from one counter a block at a time ([`REF_BLOCK`]), so that a `spawn_monitor` or
    /// `monitor` costs no atomic read-modify-write on a line every thread writes.
    #[inline]
    pub(crate) fn next_monitor_ref(&self) -> MonitorRef {
        let n = REFS
            .try_with(|cache| {
                let (next, end) = cache.get();
                if next < end {
                    cache.set((next + 1, end));
                    next
                } else {
                    let base = NEXT_REF.fetch_add(REF_BLOCK, Ordering::Relaxed);
                    cache.set((base + 1, base + REF_BLOCK));
                    base
                }
            })
            .unwrap_or_else(|_| NEXT_REF.fetch_add(1, Ordering::Relaxed));
        MonitorRef(n)
    }

    /// Frees the slot of `process`, which has done everything else an exit does, and wakes
    /// the `wait_until`s that watch exits.
    pub(crate) fn process_exited(&self, process: &Process) {
        if self.table.remove(process) {
            self.exited.notify_waiters();
        }
    }

    /// Runs `f` on the live process `pid`, on whichever node of this OS process it lives; no
    /// lock is taken. `None` when the pid names no live process.
    #[inline]
    pub(crate) fn with_process<R>(pid: Pid, f: impl FnOnce(&Process) -> R) -> Option<R> {
        with_current(|current| {
            if let Some(p) = current
                && p.node.id == pid.node()
            {
                let guard = p.node.table.get(pid)?;
                return guard.as_deref().map(f);
            }
            let node = DIRECTORY.get(pid.node())?.load();
            let guard = node.as_deref()?.table.get(pid)?;
            guard.as_deref().map(f)
        })
    }

    /// The live process `pid`, on whichever node of this OS process it lives, as a reference
    /// of its own (kept after it exits: its exit reason, its node).
    pub(crate) fn process(pid: Pid) -> Option<Arc<Process>> {
        let node = DIRECTORY.get(pid.node())?.load_full()?;
        node.table.get_arc(pid)
    }

    /// As [`NodeInner::with_process`], from a caller that knows its node (an exiting process
    /// telling its links and monitors): a pid of this node is resolved in its table without
    /// looking up the thread's current process.
    #[inline]
    pub(crate) fn with_process_near<R>(
        &self,
        pid: Pid,
        f: impl FnOnce(&Process) -> R,
    ) -> Option<R> {
        if pid.node() == self.id {
            let guard = self.table.get(pid)?;
            guard.as_deref().map(f)
        } else {
            NodeInner::with_process(pid, f)
        }
    }

    pub(crate) fn register(&self, name: &Name, pid: Pid) -> Result<(), RegistryError> {
        let guard = self.table.get(pid).ok_or(RegistryError::NoProc(pid))?;
        let process = guard.as_deref().ok_or(RegistryError::NoProc(pid))?;
        self.registry.register(name, process)
    }

    pub(crate) fn processes(&self) -> Vec<Pid> {
        self.table.all().iter().map(|p| p.pid).collect()
    }

    /// Waits until `done` holds, re-checking after each process exit.
    ///
    /// `done` must depend only on what exits change before they leave the process table (all
    /// of an exit but its notification does): an exit after the watch is taken notifies, and
    /// one before it is visible to `done` (see `ProcessTable::watch_exits`). A notification
    /// between `notified()` and `done()` is kept by the `Notified` future, made first.
    pub(crate) async fn wait_until(&self, mut done: impl FnMut() -> bool) {
        let _watch = self.table.watch_exits();
        loop {
            let notified = self.exited.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done() {
                return;
            }
            notified.await;
        }
    }

    /// Takes the node out of the directory: pids of it no longer resolve from other nodes.
    pub(super) fn leave_directory(&self) {
        if let Some(slot) = DIRECTORY.get(self.id) {
            slot.store(None);
        }
    }

    /// Records `process` as a supervisor, started now (before its task exists).
    pub(crate) fn supervisor_started(&self, process: &Process) {
        process.mark_supervisor();
        let mut supervisors = self.supervisors.lock().unwrap_or_else(|e| e.into_inner());
        if supervisors.len() == supervisors.capacity() {
            supervisors.retain(|pid| self.table.get(*pid).is_some());
        }
        supervisors.push(process.pid);
    }

    pub(super) async fn shutdown(self: Arc<Self>) {
        self.stopping.store(true, Ordering::Release);
        self.env_run_stopping();
        let grace = self.shutdown_grace;
        // Supervisors first, as OTP stops applications: the root ones one at a time, last
        // started first, each stopping its children in reverse start order.
        let started = self
            .supervisors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let is_live_supervisor = |pid: Pid| {
            self.table
                .get(pid)
                .and_then(|g| g.as_deref().map(Process::is_supervisor))
                .unwrap_or(false)
        };
        let mut roots: Vec<Arc<Process>> = self
            .table
            .all()
            .into_iter()
            .filter(|p| p.is_supervisor() && !p.parent().is_some_and(is_live_supervisor))
            .collect();
        let order: std::collections::HashMap<Pid, usize> = started
            .iter()
            .enumerate()
            .map(|(i, pid)| (*pid, i))
            .collect();
        // Last started first (one missing from the list, which cannot happen, first of all).
        roots.sort_by_key(|p| std::cmp::Reverse(order.get(&p.pid).copied().unwrap_or(usize::MAX)));
        for sup in roots {
            send_exit_signal(&sup, sup.pid, ExitReason::Shutdown, false);
            // Each supervisor bounds its own children's stop by their shutdown policies.
            let pid = sup.pid;
            drop(sup);
            self.wait_until(|| self.table.get(pid).is_none()).await;
        }
        // Then everything else: an orderly `Shutdown`, and a kill after the grace period.
        for p in self.table.all() {
            send_exit_signal(&p, p.pid, ExitReason::Shutdown, false);
        }
        let _ = tokio::time::timeout(grace, self.wait_until(|| self.table.len() == 0)).await;
        for p in self.table.all() {
            p.kill();
        }
        self.wait_until(|| self.table.len() == 0).await;
        self.finish_env_run();
    }

    /// Tells the profiling the environment asked for that the node starts to stop, its
    /// processes still alive (for its heap snapshot).
    pub(super) fn env_run_stopping(&self) {
        if let Some(run) = self
            .env_run
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            run.stopping();
        }
    }

    /// Writes the profile the environment asked for, once.
    pub(super) fn finish_env_run(&self) {
        let run = self
            .env_run
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(run) = run {
            run.finish();
        }
    }
}
