//! Nodes: one runtime instance, the analogue of a BEAM node.
//!
//! A [`Node`] owns a process table, a name registry and a tokio runtime to run its processes
//! on: its own (multi-thread by default, current-thread on request), or one the program
//! already runs ([`Node::start_on`]). Several nodes may live in one OS process and never see
//! each other's names or processes, so parallel tests each get their own.
//!
//! [`Node`] is the owner; dropping it kills the node's processes and, if it owns its runtime,
//! shuts that down in the background: it never blocks. [`NodeHandle::shutdown`] is the orderly,
//! async stop: root supervisors first, last started first (each stops its children in reverse
//! start order), then every other process, and it returns when they are all gone. [`NodeHandle`] is a cheap clone that
//! processes and other tasks use to reach the node.

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;
use std::{fmt, io};

use arc_swap::ArcSwapOption;

use crate::exit::IntoExitReason;
use crate::process::{
    Helpers, Process, ProcessInfo, ProcessTable, SpawnError, SpawnOptions, Spawned, spawn_on_node,
    spawn_pid_on_node, with_current,
};
use crate::registry::{Name, Registry, RegistryError};
use crate::segmented::Segmented;
use crate::send::SendError;
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

/// The default time [`NodeHandle::shutdown`] gives processes to end after `Shutdown` before it
/// kills them.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

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
    stopping: AtomicBool,
    /// Notified at an exit while a `wait_until` watches (tokio's `notify_waiters` takes a lock
    /// shared by the whole node: see `ProcessTable::watch_exits`).
    exited: tokio::sync::Notify,
    shutdown_grace: Duration,
    /// The slots of the trace sessions open on this node: a process flag whose session is not
    /// here (dropped, or another node's session in a reused slot) counts for nothing.
    pub(crate) trace_sessions: AtomicU64,
    /// Profiling switched on from the environment, until the node stops.
    env_run: std::sync::Mutex<Option<crate::trace::env_run::EnvRun>>,
    /// The helper tasks of its processes, cancelled when the node is dropped.
    pub(crate) helpers: Helpers,
    /// Its supervisors in start order (those that have ended are pruned as it grows), so that
    /// shutdown stops the root ones last started first.
    supervisors: std::sync::Mutex<Vec<Pid>>,
}

impl NodeInner {
    fn new(handle: tokio::runtime::Handle, shutdown_grace: Duration) -> Arc<NodeInner> {
        crate::heap::warm_up();
        let id = NEXT_NODE.fetch_add(1, Ordering::Relaxed);
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

    /// Records `process` as a supervisor, started now (before its task exists).
    pub(crate) fn supervisor_started(&self, process: &Process) {
        process.mark_supervisor();
        let mut supervisors = self.supervisors.lock().unwrap_or_else(|e| e.into_inner());
        if supervisors.len() == supervisors.capacity() {
            supervisors.retain(|pid| self.table.get(*pid).is_some());
        }
        supervisors.push(process.pid);
    }

    async fn shutdown(self: Arc<Self>) {
        self.stopping.store(true, Ordering::Release);
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
            .filter(|p| p.is_supervisor() && !p.parent.is_some_and(is_live_supervisor))
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

    /// Writes the profile the environment asked for, once.
    fn finish_env_run(&self) {
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

/// Starts what the environment asks of a new node (profiling, for `tprof run`).
fn started(handle: NodeHandle) -> NodeHandle {
    if std::env::var_os(crate::trace::env_run::ENV_TYPE).is_some() {
        let run = crate::trace::env_run::start(&handle);
        *handle
            .inner
            .env_run
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = run;
    }
    handle
}

/// Why a node could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeError {
    /// tokio could not build the runtime (threads could not be started).
    Runtime(io::Error),
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::Runtime(e) => write!(f, "cannot start the node's tokio runtime: {e}"),
        }
    }
}

impl std::error::Error for NodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NodeError::Runtime(e) => Some(e),
        }
    }
}

/// Builds a [`Node`] with its own tokio runtime.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct NodeBuilder {
    current_thread: bool,
    worker_threads: Option<usize>,
    shutdown_grace: Duration,
}

impl NodeBuilder {
    /// Runs the node on a current-thread runtime: its processes run only while a thread is in
    /// [`Node::block_on`] or [`Node::run`].
    pub fn current_thread(mut self) -> NodeBuilder {
        self.current_thread = true;
        self
    }

    /// Runs the node on a multi-thread runtime with `n` workers (the default is one per core).
    pub fn worker_threads(mut self, n: usize) -> NodeBuilder {
        self.current_thread = false;
        self.worker_threads = Some(n.max(1));
        self
    }

    /// How long [`NodeHandle::shutdown`] lets processes end after `Shutdown` before killing
    /// them (default [`DEFAULT_SHUTDOWN_GRACE`]).
    pub fn shutdown_grace(mut self, grace: Duration) -> NodeBuilder {
        self.shutdown_grace = grace;
        self
    }

    /// Starts the node.
    ///
    /// # Errors
    /// [`NodeError::Runtime`] when tokio cannot start the runtime's threads.
    pub fn build(self) -> Result<Node, NodeError> {
        let mut builder = if self.current_thread {
            tokio::runtime::Builder::new_current_thread()
        } else {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            if let Some(n) = self.worker_threads {
                b.worker_threads(n);
            }
            b
        };
        let runtime = builder
            .enable_all()
            .thread_name("node-worker")
            .on_thread_start(crate::heap::warm_thread)
            .build()
            .map_err(NodeError::Runtime)?;
        let inner = NodeInner::new(runtime.handle().clone(), self.shutdown_grace);
        Ok(Node {
            handle: started(NodeHandle { inner }),
            runtime: Some(runtime),
        })
    }
}

/// One runtime instance: processes, names and the tokio runtime they run on.
///
/// ```
/// use runtime::{Node, receive, send};
///
/// let node = Node::new().unwrap();
/// let echo = node.spawn(async {
///     let (from, text): (runtime::Pid, String) = receive().await;
///     send(from, text.to_uppercase());
/// }).unwrap();
/// let reply = node.run(async move {
///     send(echo, (runtime::self_pid(), String::from("hello")));
///     receive::<String>().await
/// });
/// assert_eq!(reply.unwrap(), "HELLO");
/// ```
///
/// Dropping a `Node` kills its processes and never blocks; [`Node::stop`] (blocking) and
/// [`NodeHandle::shutdown`] (async) stop them in order and wait.
pub struct Node {
    handle: NodeHandle,
    runtime: Option<tokio::runtime::Runtime>,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.handle.id())
            .field("owns_runtime", &self.runtime.is_some())
            .finish()
    }
}

impl Node {
    /// Starts a node on a new multi-thread tokio runtime with one worker per core.
    ///
    /// # Errors
    /// [`NodeError::Runtime`] when tokio cannot start the runtime's threads.
    pub fn new() -> Result<Node, NodeError> {
        Node::builder().build()
    }

    /// A builder for a node with its own runtime (current-thread, worker count, shutdown
    /// grace).
    pub fn builder() -> NodeBuilder {
        NodeBuilder {
            current_thread: false,
            worker_threads: None,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }

    /// Starts a node on a tokio runtime the program already runs (an axum server, a
    /// `#[tokio::test]`). The runtime must have its time driver enabled.
    ///
    /// ```
    /// # let rt = tokio::runtime::Runtime::new().unwrap();
    /// # rt.block_on(async {
    /// let node = runtime::Node::start_on(tokio::runtime::Handle::current());
    /// let answer = node.run_async(async { 6 * 7 }).await.unwrap();
    /// assert_eq!(answer, 42);
    /// # });
    /// ```
    pub fn start_on(handle: tokio::runtime::Handle) -> Node {
        Node {
            handle: started(NodeHandle {
                inner: NodeInner::new(handle, DEFAULT_SHUTDOWN_GRACE),
            }),
            runtime: None,
        }
    }

    /// A cheap, cloneable handle to this node.
    pub fn handle(&self) -> &NodeHandle {
        &self.handle
    }

    /// Runs a future to completion on the node's runtime, blocking this thread. The future
    /// does not run in a process; use [`Node::run`] for that.
    ///
    /// # Panics
    /// When called from inside an async context (tokio forbids nested `block_on`).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        match &self.runtime {
            Some(rt) => rt.block_on(future),
            None => self.handle.inner.handle.block_on(future),
        }
    }

    /// Runs `future` in a new process and blocks until it ends: its output, or the reason it
    /// ended without one (a panic, a kill, an exit signal).
    ///
    /// # Errors
    /// The process's exit reason when it ended before producing its output.
    ///
    /// # Panics
    /// When called from inside an async context.
    pub fn run<F>(&self, future: F) -> Result<F::Output, ExitReason>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.block_on(self.handle.run_async(future))
    }

    /// Stops the node in order ([`NodeHandle::shutdown`]) and waits, blocking this thread. Root
    /// supervisors stop one after another, so this takes as long as all their stops together;
    /// to bound it, run `shutdown` under a timeout instead and then drop the node.
    ///
    /// # Panics
    /// When called from inside an async context.
    pub fn stop(self) {
        let handle = self.handle.clone();
        self.block_on(handle.shutdown());
    }
}

impl Deref for Node {
    type Target = NodeHandle;

    fn deref(&self) -> &NodeHandle {
        &self.handle
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let inner = &self.handle.inner;
        let profiling = inner
            .env_run
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        inner.stopping.store(true, Ordering::Release);
        for p in inner.table.all() {
            p.kill();
        }
        inner.helpers.cancel_all();
        if let Some(slot) = DIRECTORY.get(inner.id) {
            slot.store(None);
        }
        if let Some(rt) = self.runtime.take() {
            if profiling && tokio::runtime::Handle::try_current().is_err() {
                // Profiled from the environment (`tprof run`): the polls running now end (up
                // to the shutdown grace) and hand over their figures before the profile is
                // written. Otherwise a drop never blocks.
                rt.shutdown_timeout(inner.shutdown_grace);
            } else {
                rt.shutdown_background();
            }
        }
        inner.finish_env_run();
    }
}

/// Why a process spawned with [`NodeHandle::spawn_watched`] ended, once it has.
pub struct ExitWatch {
    process: Arc<Process>,
    node: NodeHandle,
}

impl fmt::Debug for ExitWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExitWatch")
            .field("pid", &self.process.pid)
            .finish_non_exhaustive()
    }
}

impl ExitWatch {
    /// The watched process.
    pub fn pid(&self) -> Pid {
        self.process.pid
    }

    /// Waits until the process has ended and its exit bookkeeping is done; returns why it
    /// ended. Not a process operation: it works from any async code.
    pub async fn wait(&self) -> ExitReason {
        let pid = self.process.pid;
        let inner = &self.node.inner;
        inner.wait_until(|| inner.table.get(pid).is_none()).await;
        self.process
            .exit_reason()
            .cloned()
            .unwrap_or(ExitReason::Normal)
    }
}

/// A cheap, cloneable reference to a [`Node`], for spawning, sending and introspection from
/// outside its processes (inside them, the free functions do the same on the current node).
#[derive(Clone)]
pub struct NodeHandle {
    pub(crate) inner: Arc<NodeInner>,
}

impl fmt::Debug for NodeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeHandle")
            .field("id", &self.id())
            .finish()
    }
}

impl NodeHandle {
    /// The node's number: the first part of its pids.
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// The handle of the tokio runtime the node's processes run on.
    pub fn tokio_handle(&self) -> &tokio::runtime::Handle {
        &self.inner.handle
    }

    /// The current process's node, if called from a process (or one of its helpers).
    pub fn current() -> Option<NodeHandle> {
        with_current(|c| {
            c.map(|p| NodeHandle {
                inner: Arc::clone(&p.node),
            })
        })
    }

    /// Spawns a process with no parent.
    ///
    /// # Errors
    /// [`SpawnError::NodeStopping`] while the node shuts down.
    pub fn spawn<F>(&self, future: F) -> Result<Pid, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: IntoExitReason,
    {
        self.spawn_opt(future, SpawnOptions::new()).map(|s| s.pid)
    }

    /// Spawns a process with options. From outside a process, link and monitor are refused
    /// ([`SpawnError::NotInProcess`]); from inside one of this node's processes, that process is
    /// the parent.
    ///
    /// # Errors
    /// [`SpawnError::NodeStopping`], [`SpawnError::Name`], [`SpawnError::NotInProcess`].
    pub fn spawn_opt<F>(&self, future: F, opts: SpawnOptions) -> Result<Spawned, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: IntoExitReason,
    {
        // The parent borrowed from the thread-local, not cloned: it is alive for the whole call.
        with_current(|c| {
            let parent = c.filter(|p| Arc::ptr_eq(&p.node, &self.inner));
            spawn_pid_on_node(&self.inner, parent, future, opts)
        })
    }

    /// Spawns a process as [`spawn_opt`](NodeHandle::spawn_opt) does and returns, with its pid,
    /// an [`ExitWatch`] that tells why it ended, however early that is: a monitor for code
    /// outside any process.
    ///
    /// # Errors
    /// As [`spawn_opt`](NodeHandle::spawn_opt).
    pub fn spawn_watched<F>(
        &self,
        future: F,
        opts: SpawnOptions,
    ) -> Result<(Pid, ExitWatch), SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: IntoExitReason,
    {
        let parent = with_current(|c| {
            c.filter(|p| Arc::ptr_eq(&p.node, &self.inner))
                .map(Arc::clone)
        });
        let (process, _) = spawn_on_node(&self.inner, parent.as_ref(), future, opts)?;
        Ok((
            process.pid,
            ExitWatch {
                process,
                node: self.clone(),
            },
        ))
    }

    /// Runs `future` in a new process and waits until the process has ended: its output, or
    /// the reason it ended without one.
    ///
    /// # Errors
    /// The process's exit reason when it ended before producing its output, or
    /// [`ExitReason::NoProc`] when the node is stopping.
    pub async fn run_async<F>(&self, future: F) -> Result<F::Output, ExitReason>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let parent = with_current(|c| {
            c.filter(|p| Arc::ptr_eq(&p.node, &self.inner))
                .map(Arc::clone)
        });
        let spawned = spawn_on_node(
            &self.inner,
            parent.as_ref(),
            async move {
                let _ = tx.send(future.await);
            },
            SpawnOptions::new().initial_call(std::any::type_name::<F>()),
        );
        let Ok((process, _)) = spawned else {
            return Err(ExitReason::NoProc);
        };
        match rx.await {
            Ok(out) => {
                // The output is sent from inside the process's last poll: wait until the
                // process has ended (its exit bookkeeping, and the end of that poll, done).
                let pid = process.pid;
                self.inner
                    .wait_until(|| self.inner.table.get(pid).is_none())
                    .await;
                Ok(out)
            }
            Err(_) => {
                // The future was dropped before it produced its output: the reason is
                // recorded right after.
                self.inner
                    .wait_until(|| process.exit_reason().is_some())
                    .await;
                Err(process.exit_reason().cloned().unwrap_or(ExitReason::Killed))
            }
        }
    }

    /// Sends `msg` to `pid` (on any node); a dead pid drops it, as in Erlang.
    pub fn send<M: std::any::Any + Send>(&self, pid: Pid, msg: M) {
        crate::send(pid, msg);
    }

    /// Sends `msg` to the process registered as `name` on this node.
    ///
    /// # Errors
    /// [`SendError::NotRegistered`] (with the message) when no process has that name.
    pub fn send_named<M: std::any::Any + Send>(
        &self,
        name: &str,
        msg: M,
    ) -> Result<(), SendError<M>> {
        match self.inner.registry.whereis(name) {
            Some(pid) => {
                crate::send(pid, msg);
                Ok(())
            }
            None => Err(SendError::NotRegistered {
                name: Arc::from(name),
                msg,
            }),
        }
    }

    /// Sends an exit signal to `pid` (see [`exit`](crate::exit)).
    pub fn exit(&self, pid: Pid, reason: ExitReason) {
        crate::exit(pid, reason);
    }

    /// Registers `pid` under `name` on this node.
    ///
    /// # Errors
    /// As [`register`](crate::register).
    pub fn register(&self, name: impl Into<Name>, pid: Pid) -> Result<(), RegistryError> {
        self.inner.register(&name.into(), pid)
    }

    /// Removes a registered name.
    ///
    /// # Errors
    /// [`RegistryError::NotRegistered`].
    pub fn unregister(&self, name: &str) -> Result<(), RegistryError> {
        self.inner.registry.unregister(&self.inner, name)
    }

    /// The process registered as `name`, if any.
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        self.inner.registry.whereis(name)
    }

    /// The registered names, sorted.
    pub fn registered(&self) -> Vec<Name> {
        self.inner.registry.registered()
    }

    /// The live processes, in slot order.
    pub fn processes(&self) -> Vec<Pid> {
        self.inner.processes()
    }

    /// A snapshot of process `pid`, if it is alive.
    pub fn process_info(&self, pid: Pid) -> Option<ProcessInfo> {
        crate::process_info(pid)
    }

    /// Whether the node has begun shutting down.
    pub fn is_stopping(&self) -> bool {
        self.inner.is_stopping()
    }

    /// Stops every process in order and returns when they are all gone: root supervisors
    /// first, one at a time, last started first (each is sent `Shutdown` and stops its
    /// children in reverse start order, bounded by their shutdown policies), then every other
    /// process is sent `Shutdown` and, after the grace period, killed. New spawns fail from
    /// the start. Safe to call from one of the node's own processes (the stop runs in a task
    /// of its own, and the caller is stopped with the rest).
    ///
    /// As in OTP, a supervisor acts on `Shutdown` only between its own steps: one still
    /// starting a child whose start never returns holds the stop up. To bound the stop in any
    /// case, wrap it in a timeout and then drop the [`Node`], which kills what is left.
    pub async fn shutdown(&self) {
        let inner = Arc::clone(&self.inner);
        let task = self.inner.handle.spawn(inner.shutdown());
        let _ = task.await;
    }

    #[doc(hidden)]
    /// Whether anything still refers to the node's internals besides `self` (for leak tests).
    pub fn __strong_count(&self) -> usize {
        Arc::strong_count(&self.inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::supervisor::{self, StartOptions, SupervisorFlags, SupervisorSpec};
    use crate::{Down, ExitReason, Node};

    #[test]
    fn the_supervisors_kept_for_shutdown_are_pruned_as_they_end() {
        let node = Node::builder().current_thread().build().expect("node");
        let inner = Arc::clone(&node.handle().inner);
        let kept = node
            .run(async move {
                for _ in 0..100 {
                    let spec = SupervisorSpec::new(SupervisorFlags::default());
                    let sup = supervisor::start(spec, StartOptions::new())
                        .await
                        .expect("started");
                    let mref = crate::monitor(sup).expect("in a process");
                    crate::exit(sup, ExitReason::Kill);
                    let _: Down = crate::receive_where(move |d: &Down| d.monitor_ref == mref).await;
                }
                let spec = SupervisorSpec::new(SupervisorFlags::default());
                let live = supervisor::start(spec, StartOptions::new())
                    .await
                    .expect("started");
                (live, inner.supervisors.lock().expect("lock").clone())
            })
            .expect("ran");
        let (live, kept) = kept;
        assert!(kept.len() <= 8, "{} supervisors kept", kept.len());
        assert_eq!(kept.last(), Some(&live));
    }
}
