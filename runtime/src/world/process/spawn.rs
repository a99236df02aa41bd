//! Spawning processes and helper tasks.

use crate::traced;
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::task::{HelperTask, ProcessTask, run_as_helper};
use super::{InitialCall, InsertError, Process, Ties, with_current};
use crate::Pid;
use crate::exit::IntoExitReason;
use crate::heap::{Account, Charging};
use crate::node::NodeInner;
use crate::registry::{Name, RegistryError};
use crate::signal::MonitorRef;

/// Options for [`spawn_opt`] and [`NodeHandle::spawn_opt`](crate::NodeHandle::spawn_opt):
/// Erlang's `spawn_opt` options, plus a registered name and the initial call to report.
///
/// ```
/// use runtime::{Node, SpawnOptions, receive, whereis};
///
/// let node = Node::new().unwrap();
/// let spawned = node
///     .spawn_opt(async { let () = receive().await; }, SpawnOptions::new().name("worker"))
///     .unwrap();
/// assert_eq!(node.whereis("worker"), Some(spawned.pid));
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "options do nothing until passed to spawn_opt"]
pub struct SpawnOptions {
    name: Option<Name>,
    link: bool,
    monitor: bool,
    trap_exit: bool,
    initial_call: Option<Cow<'static, str>>,
    /// Trace sessions to trace the new process for: node, slot, generation, `set_on_spawn`.
    traced_by: Vec<(u32, u32, u64, bool)>,
    max_heap_size: Option<u64>,
    max_message_queue_len: Option<usize>,
    /// The process is a supervisor: recorded as one before it can run (see
    /// `NodeInner::supervisor_started`).
    supervisor: bool,
}

impl SpawnOptions {
    /// No name, no link, no monitor, not trapping exits; the initial call is taken from the
    /// future's type.
    pub fn new() -> SpawnOptions {
        SpawnOptions::default()
    }

    /// Registers the new process under `name` before it first runs.
    pub fn name(mut self, name: impl Into<Name>) -> SpawnOptions {
        self.name = Some(name.into());
        self
    }

    /// Links the new process with the caller (the caller must be a process).
    pub fn link(mut self) -> SpawnOptions {
        self.link = true;
        self
    }

    /// Makes the caller monitor the new process (the caller must be a process).
    pub fn monitor(mut self) -> SpawnOptions {
        self.monitor = true;
        self
    }

    /// Starts the new process trapping exits.
    pub fn trap_exit(mut self) -> SpawnOptions {
        self.trap_exit = true;
        self
    }

    /// Traces the new process for `session` from its first poll (with `set_on_spawn`, its
    /// children too). Ignored when spawning on another node than the session's.
    pub fn traced_by(
        mut self,
        session: &crate::trace::TraceSession,
        set_on_spawn: bool,
    ) -> SpawnOptions {
        self.traced_by.push((
            session.node(),
            session.slot(),
            session.generation(),
            set_on_spawn,
        ));
        self
    }

    /// Ends the process with [`ExitReason::MaxHeapSize`] once its live heap goes over `bytes`.
    ///
    /// A soft limit: the allocator cannot fail or unwind, so the process ends at its next
    /// checkpoint after going over (the end of its current poll, or a runtime call such as
    /// `send`), as Erlang checks `max_heap_size` at its next garbage collection. Needs
    /// [`CountingAlloc`](crate::CountingAlloc): without it, spawning fails with
    /// [`SpawnError::HeapLimit`] (the limit could never trigger).
    pub fn max_heap_size(mut self, bytes: u64) -> SpawnOptions {
        self.max_heap_size = Some(bytes);
        self
    }

    /// Ends the process with [`ExitReason::MaxMessageQueueLen`] once more than `len` messages
    /// wait in its mailbox (checked as each message is queued; the process ends at its next
    /// poll). A `len` of `u32::MAX` (over four billion) or more sets no limit.
    pub fn max_message_queue_len(mut self, len: usize) -> SpawnOptions {
        self.max_message_queue_len = Some(len);
        self
    }

    /// Marks the process as a supervisor (for `supervisor::start*`).
    pub(crate) fn supervisor(mut self) -> SpawnOptions {
        self.supervisor = true;
        self
    }

    /// The initial call `process_info` reports, such as `"kv::server/1"`. By default it is
    /// the type name of the process's future (for an `async fn`, its path).
    pub fn initial_call(mut self, call: impl Into<Cow<'static, str>>) -> SpawnOptions {
        self.initial_call = Some(call.into());
        self
    }
}

/// What [`spawn_opt`] returns: the pid, and the monitor if one was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spawned {
    /// The new process.
    pub pid: Pid,
    /// The caller's monitor on it, with [`SpawnOptions::monitor`].
    pub monitor: Option<MonitorRef>,
}

/// Why a process could not be spawned.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpawnError {
    /// A free spawn function was called outside a process, or link/monitor was asked for
    /// without a calling process.
    NotInProcess,
    /// The node is shutting down and takes no new processes.
    NodeStopping {
        /// The node's number.
        node: u32,
    },
    /// Link or monitor was asked for by a helper task ([`spawn_task`]) of a process that has
    /// ended: the new process would be tied to a pid that never signals it.
    CallerExited {
        /// The calling process, which has ended.
        pid: Pid,
    },
    /// The name in [`SpawnOptions::name`] could not be registered.
    Name(RegistryError),
    /// The node's process table has no free index left (over four billion live processes).
    TableFull,
    /// [`SpawnOptions::max_heap_size`] was given, but the limit needs the counting allocator
    /// ([`HeapError::NotInstalled`](crate::heap::HeapError::NotInstalled) says how to install
    /// it): without it the limit could never trigger.
    HeapLimit(crate::heap::HeapError),
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::NotInProcess => f.write_str(
                "spawn called outside a process (or link/monitor asked for without a calling \
                 process): use Node::spawn from outside, or call it from a process",
            ),
            SpawnError::NodeStopping { node } => {
                write!(f, "node {node} is shutting down and takes no new processes")
            }
            SpawnError::CallerExited { pid } => write!(
                f,
                "the calling process {pid} has exited: a task it left behind cannot spawn a \
                 process linked to or monitored by it"
            ),
            SpawnError::Name(e) => write!(f, "cannot spawn: {e}"),
            SpawnError::TableFull => f.write_str("the node's process table is full"),
            SpawnError::HeapLimit(e) => write!(f, "cannot spawn with max_heap_size: {e}"),
        }
    }
}

impl std::error::Error for SpawnError {}

/// The initial call of a process running a future of type `F`, when none is given.
pub(crate) fn default_initial_call<F>() -> Cow<'static, str> {
    Cow::Borrowed(initial_call_of(std::any::type_name::<F>()))
}

/// The function a future's type names: `app::worker` for an `async fn app::worker`'s future
/// (`app::worker::{{closure}}`), also when `#[traced]` wraps it (`runtime::...::Traced<...>`);
/// other types as they are named.
pub(super) fn initial_call_of(type_name: &str) -> &str {
    let mut name = type_name;
    while let Some(inner) = name
        .strip_prefix("runtime::trace::callsite::Traced<")
        .and_then(|rest| rest.strip_suffix('>'))
    {
        name = inner;
    }
    name.strip_suffix("::{{closure}}").unwrap_or(name)
}

/// Spawns `future` as a process on `node`, with `parent` (if any) as its spawning parent.
pub(crate) fn spawn_on_node<F>(
    node: &Arc<NodeInner>,
    parent: Option<&Arc<Process>>,
    future: F,
    opts: SpawnOptions,
) -> Result<(Arc<Process>, Option<MonitorRef>), SpawnError>
where
    F: Future + Send + 'static,
    F::Output: IntoExitReason,
{
    let started = spawn_process(node, parent, future, opts, true)?;
    let Some(process) = started.kept else {
        unreachable!("spawn_process keeps a reference when asked to")
    };
    Ok((process, started.monitor))
}

/// As [`spawn_on_node`], for callers that need only the pid: the new process's record goes to
/// its task without a reference kept (one reference count increment and decrement fewer).
pub(crate) fn spawn_pid_on_node<F>(
    node: &Arc<NodeInner>,
    parent: Option<&Arc<Process>>,
    future: F,
    opts: SpawnOptions,
) -> Result<Spawned, SpawnError>
where
    F: Future + Send + 'static,
    F::Output: IntoExitReason,
{
    let started = spawn_process(node, parent, future, opts, false)?;
    Ok(Spawned {
        pid: started.pid,
        monitor: started.monitor,
    })
}

/// What [`spawn_process`] gives back.
struct Started {
    pid: Pid,
    /// A reference to the process, when asked to keep one.
    kept: Option<Arc<Process>>,
    /// The parent's monitor on it, if one was asked for.
    monitor: Option<MonitorRef>,
}

/// Spawns the process, keeping a reference to it when `keep`.
#[inline(always)]
fn spawn_process<F>(
    node: &Arc<NodeInner>,
    parent: Option<&Arc<Process>>,
    future: F,
    opts: SpawnOptions,
    keep: bool,
) -> Result<Started, SpawnError>
where
    F: Future + Send + 'static,
    F::Output: IntoExitReason,
{
    if node.is_stopping() {
        return Err(SpawnError::NodeStopping { node: node.id });
    }
    if (opts.link || opts.monitor) && parent.is_none() {
        return Err(SpawnError::NotInProcess);
    }
    if opts.max_heap_size.is_some() && !crate::heap::installed() {
        return Err(SpawnError::HeapLimit(crate::heap::HeapError::NotInstalled));
    }
    let initial_call = match opts.initial_call {
        Some(call) => InitialCall::Given(call),
        None => InitialCall::Future(std::any::type_name::<F>()),
    };
    // Taken before the table's lock, so as not to hold that while taking the accounts' lock.
    // Only with the counting allocator (see `Process::account`).
    let account = crate::heap::installed().then(Account::acquire);
    // The table's own storage is the node's, not any process's.
    // The new process's side of its link and monitor: set as it is built.
    let monitor = match parent {
        Some(_) if opts.monitor => Some(node.next_monitor_ref()),
        _ => None,
    };
    let ties_parent = parent.map(|p| p.pid);
    let ties = match parent {
        Some(parent) => Ties {
            link: opts.link.then_some(parent.pid),
            monitored_by: monitor.map(|mref| (mref, parent.pid)),
        },
        None => Ties::default(),
    };
    let process = crate::heap::suppressed(|| {
        node.table.insert(node.stopping_flag(), |pid| {
            // The new process's record and mailbox are its own (charged as "shared": the
            // process may start running before the spawner is done).
            let _charging = Charging::shared(account);
            Process::new_arc(
                pid,
                Arc::clone(node),
                parent.map(|p| p.pid),
                initial_call,
                account,
                ties,
            )
        })
    })
    .map_err(|e| {
        if let Some(account) = account {
            account.release();
        }
        match e {
            InsertError::Full => SpawnError::TableFull,
            InsertError::Stopping => SpawnError::NodeStopping { node: node.id },
        }
    })?;
    // Until its task has it, this function holds the count that keeps the process in its slot
    // alive: a panic on the way takes it out of the slot before that count drops.
    let process = InSlot(Some(process));
    #[cfg(test)]
    after_insert::run();
    if let Some(name) = &opts.name
        && let Err(e) = node.registry.register(name, &process)
    {
        // It never was: its parent hears nothing of it (the parent's side of the link and
        // monitor is not set yet). A process that linked to or monitored the new pid in the
        // meantime (it was resolvable from the insert on) gets its exit signal or `Down`, with
        // reason `NoProc`, as for any pid that is gone.
        process.clear_ties_of(ties_parent, monitor);
        process.finish(ExitReason::NoProc);
        return Err(SpawnError::Name(e));
    }
    if opts.trap_exit {
        process.set_trap_exit(true);
    }
    if let Some(bytes) = opts.max_heap_size {
        process.set_heap_limit(bytes);
    }
    if let Some(len) = opts.max_message_queue_len {
        process.set_max_queue_len(len);
    }
    crate::trace::flags_at_spawn(
        &**node,
        parent.map(|p| &**p),
        &process.trace_flags,
        &opts.traced_by,
    );
    if let Some(parent) = parent {
        // The parent's side (the new process's was set as it was built). As `link` and
        // `monitor_with`, without resolving the pid: the new process has not run yet, so it is
        // alive. A parent that has ended (the spawner is a helper task it left behind) takes
        // no new tie, so the spawn is refused, as `link` and `monitor` refuse: the new process
        // would otherwise be linked to, or watched by, a pid that never signals it.
        let tied = (!opts.link || parent.add_link(process.pid))
            && monitor.is_none_or(|mref| parent.add_monitoring(mref, process.pid));
        if !tied {
            // Nothing to undo on the parent's side: it ended, and its exit took its links
            // (this one too if `add_link` came first, whose exit signal the `finish` below
            // discards with the mailbox).
            process.clear_ties_of(ties_parent, monitor);
            process.finish(ExitReason::NoProc);
            return Err(SpawnError::CallerExited { pid: parent.pid });
        }
    }
    if opts.supervisor {
        // Before it can run, so that the supervisors it starts are recorded after it.
        node.supervisor_started(&process);
    }
    let pid = process.pid;
    let kept = keep.then(|| Arc::clone(&process));
    {
        // Its task is its own too.
        let _charging = Charging::shared(account);
        node.handle
            .spawn(ProcessTask::new(future, process.into_inner()));
    }
    Ok(Started { pid, kept, monitor })
}

/// A process just put in its slot, held by its spawner until its task takes it: dropped (by a
/// panic before that, or a refused name), it takes the process out of its slot, as the table's
/// slots hold no count of their own (see `ProcessTable::remove`).
struct InSlot(Option<Arc<Process>>);

impl InSlot {
    /// The process, for its task, which takes it out of its slot from then on.
    #[inline(always)]
    fn into_inner(mut self) -> Arc<Process> {
        match self.0.take() {
            Some(process) => process,
            None => unreachable!("taken once"),
        }
    }
}

impl std::ops::Deref for InSlot {
    type Target = Arc<Process>;

    #[inline]
    fn deref(&self) -> &Arc<Process> {
        match &self.0 {
            Some(process) => process,
            None => unreachable!("taken once, by value"),
        }
    }
}

impl Drop for InSlot {
    /// A panic between the insert and the hand-over to the task: the process ends there, in
    /// full (its slot, its name, its ties, and the node's exit waiters, such as a shutdown
    /// waiting for the table to empty), so nothing is stranded.
    fn drop(&mut self) {
        if let Some(process) = &self.0 {
            process.finish(ExitReason::Killed);
        }
    }
}

use crate::ExitReason;

fn spawn_here<F>(future: F, opts: SpawnOptions) -> Result<Spawned, SpawnError>
where
    F: Future + Send + 'static,
    F::Output: IntoExitReason,
{
    // The parent borrowed from the thread-local, not cloned: it is alive for the whole call.
    with_current(|parent| match parent {
        Some(parent) => spawn_pid_on_node(&parent.node, Some(parent), future, opts),
        None => Err(SpawnError::NotInProcess),
    })
}

/// Spawns a process on the caller's node running `future`; the caller is its parent.
///
/// The future's output becomes the exit reason (see [`IntoExitReason`]).
///
/// # Errors
/// [`SpawnError::NotInProcess`] outside a process (use [`NodeHandle::spawn`](crate::NodeHandle::spawn)
/// there), [`SpawnError::NodeStopping`] while the node shuts down.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn spawn<F>(future: F) -> Result<Pid, SpawnError>
where
    F: Future + Send + 'static,
    F::Output: IntoExitReason,
{
    spawn_here(future, SpawnOptions::new()).map(|s| s.pid)
}

/// Spawns a process linked to the caller, atomically (Erlang's `spawn_link`).
///
/// # Errors
/// As [`spawn`], and [`SpawnError::CallerExited`] from a helper task of a process that has
/// ended (then no process runs).
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn spawn_link<F>(future: F) -> Result<Pid, SpawnError>
where
    F: Future + Send + 'static,
    F::Output: IntoExitReason,
{
    spawn_here(future, SpawnOptions::new().link()).map(|s| s.pid)
}

/// Spawns a process monitored by the caller, atomically (Erlang's `spawn_monitor`).
///
/// # Errors
/// As [`spawn`], and [`SpawnError::CallerExited`] from a helper task of a process that has
/// ended (then no process runs).
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn spawn_monitor<F>(future: F) -> Result<(Pid, MonitorRef), SpawnError>
where
    F: Future + Send + 'static,
    F::Output: IntoExitReason,
{
    let spawned = spawn_here(future, SpawnOptions::new().monitor())?;
    let mref = spawned.monitor.ok_or(SpawnError::NotInProcess)?;
    Ok((spawned.pid, mref))
}

/// Spawns a process with options (name, link, monitor, trap_exit, initial call).
///
/// # Errors
/// As [`spawn`], [`SpawnError::Name`] when the name cannot be registered, and
/// [`SpawnError::CallerExited`] when link or monitor is asked for from a helper task of a
/// process that has ended (in both cases no process runs).
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn spawn_opt<F>(future: F, opts: SpawnOptions) -> Result<Spawned, SpawnError>
where
    F: Future + Send + 'static,
    F::Output: IntoExitReason,
{
    spawn_here(future, opts)
}

/// Runs helper async work that belongs to the calling process: a tokio task whose polls run
/// with the caller as the current process, so that later profiling attributes its work to the
/// caller. It is not a process: it has no pid or mailbox of its own (receiving in it panics).
/// It keeps running if the caller exits, and after the node's
/// [`shutdown`](crate::NodeHandle::shutdown) (which stops processes, not helpers, so that a
/// helper may call it and go on), until it ends or the node is dropped: dropping the node
/// cancels the helpers still running, also on a runtime the node does not own (their
/// `JoinHandle`s then report cancellation).
///
/// # Errors
/// [`SpawnError::NotInProcess`] outside a process, [`SpawnError::NodeStopping`] once the node
/// is dropped.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn spawn_task<F>(future: F) -> Result<tokio::task::JoinHandle<F::Output>, SpawnError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let owner = with_current(|c| c.map(Arc::clone)).ok_or(SpawnError::NotInProcess)?;
    let node = Arc::clone(&owner.node);
    let key = node
        .helpers
        .enter()
        .ok_or(SpawnError::NodeStopping { node: node.id })?;
    let task = node.handle.spawn(HelperTask::new(future, owner, key));
    node.helpers.attach(key, task.abort_handle());
    Ok(task)
}

/// Runs blocking work on tokio's blocking pool, on behalf of the calling process (as
/// [`spawn_task`]). Blocking work cannot be cancelled once it runs: a node's stop does not
/// wait for it.
///
/// # Errors
/// [`SpawnError::NotInProcess`] outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn spawn_blocking<F, R>(f: F) -> Result<tokio::task::JoinHandle<R>, SpawnError>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let owner = with_current(|c| c.map(Arc::clone)).ok_or(SpawnError::NotInProcess)?;
    let handle = owner.node.handle.clone();
    Ok(handle.spawn_blocking(move || run_as_helper(owner, f)))
}

#[cfg(test)]
mod after_insert;

#[cfg(test)]
mod initial_call_tests {
    use super::initial_call_of;

    #[test]
    fn a_future_is_named_by_its_function() {
        assert_eq!(initial_call_of("app::worker::{{closure}}"), "app::worker");
        assert_eq!(
            initial_call_of("runtime::trace::callsite::Traced<app::count_chunk::{{closure}}>"),
            "app::count_chunk"
        );
        assert_eq!(
            initial_call_of("core::future::ready::Ready<u8>"),
            "core::future::ready::Ready<u8>"
        );
    }

    #[test]
    fn a_traced_async_fn_spawned_is_known_by_its_name() {
        #[allow(unsafe_code)]
        #[crate::traced(module = "app")]
        async fn worker() {}
        fn name_of<F>(_: &F) -> std::borrow::Cow<'static, str> {
            super::default_initial_call::<F>()
        }
        let name = name_of(&worker());
        assert!(name.ends_with("worker"), "{name}");
        assert!(!name.contains("Traced<"), "{name}");
    }
}
