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
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::{fmt, io};

use crate::exit::IntoExitReason;
use crate::process::{
    Process, ProcessInfo, SpawnError, SpawnOptions, Spawned, spawn_on_node, spawn_pid_on_node,
    with_current,
};
use crate::registry::{Name, RegistryError};
use crate::send::SendError;
use crate::{ExitReason, Pid};

mod inner;
mod traced;

pub(crate) use inner::NodeInner;

/// The default time [`NodeHandle::shutdown`] gives processes to end after `Shutdown` before it
/// kills them.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Starts what the environment asks of a new node (profiling, for `tprof run`).
fn started(handle: NodeHandle) -> NodeHandle {
    if std::env::var_os(crate::trace::env_run::ENV_TYPE).is_some() {
        let run = super::observe::NODE_STARTED
            .iter()
            .find_map(|start| start(&handle));
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
        let id = NodeInner::next_id();
        let runtime = builder
            .enable_all()
            .thread_name("node-worker")
            .on_thread_start(move || {
                crate::heap::warm_thread();
                // Its traced calls outside any process are the node's.
                crate::process::set_thread_node(id);
                // A CPU sampler started later can time it.
                super::observe::thread_started(id);
            })
            .build()
            .map_err(NodeError::Runtime)?;
        let inner = NodeInner::new(id, runtime.handle().clone(), self.shutdown_grace);
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
                inner: NodeInner::new(NodeInner::next_id(), handle, DEFAULT_SHUTDOWN_GRACE),
            }),
            runtime: None,
        }
    }

    /// A cheap, cloneable handle to this node.
    pub fn handle(&self) -> &NodeHandle {
        &self.handle
    }

    /// Runs a future to completion on the node's runtime, blocking this thread. The future
    /// does not run in a process; use [`Node::run`] for that. Meanwhile the thread belongs to
    /// the node: the future's traced calls are the node's calls outside any process (see
    /// [`trace`](crate::trace#outside-processes)).
    ///
    /// # Panics
    /// When called from inside an async context (tokio forbids nested `block_on`).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let _node = crate::process::ThreadNode::set(self.handle.inner.id);
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
        if profiling {
            inner.env_run_stopping();
        }
        for p in inner.table.all() {
            p.kill();
        }
        inner.helpers.cancel_all();
        inner.leave_directory();
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

    /// Sends an exit signal to `pid` (see [`exit`](fn@crate::exit)).
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
