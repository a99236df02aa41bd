//! Supervisors: processes that start, watch and restart other processes, as OTP's
//! `supervisor`.
//!
//! # Model
//!
//! A supervisor is a process that traps exits. It starts its children one by one, in the order
//! of its [`ChildSpec`]s, each linked to it, and answers its starter once they are all running
//! (if one fails to start, the ones already started are stopped in reverse order and the start
//! fails with [`StartError::ChildFailed`] naming it). It then loops on its mailbox:
//!
//! - a child's [`Exit`] message: the child is restarted or not according to its [`Restart`]
//!   type, and then according to the supervisor's [`Strategy`];
//! - an [`Exit`] from its parent, or from itself (how [`NodeHandle::shutdown`] and
//!   `exit(sup, reason)` from outside a process reach it): it stops every child, last started
//!   first, and exits with that reason;
//! - a request ([`which_children`], [`count_children`], [`terminate_child`], [`restart_child`],
//!   [`delete_child`]), answered through a one-shot channel, so they work from a process or
//!   from any async code;
//! - anything else is dropped (OTP logs it as unexpected).
//!
//! ```text
//!  start ──► starting children ──(all up)──► supervising ◄──┐
//!                 │                            │  │  │       │ child exit: restart per
//!                 │ a child fails              │  │  └───────┘ Restart type and Strategy
//!                 ▼                            │  │ too many restarts
//!     stop started (reverse), exit             │  ▼
//!                                              │  stop all (reverse), exit
//!                                              │  `reached_max_restart_intensity`
//!                                              ▼ Exit from parent / itself
//!                                        stop all (reverse), exit with its reason
//! ```
//!
//! # Strategies
//!
//! When child C is to be restarted:
//!
//! | [`Strategy`]   | stopped first (reverse start order) | then started (start order) |
//! |----------------|-------------------------------------|----------------------------|
//! | `OneForOne`    | none                                | C                          |
//! | `OneForAll`    | every other running child           | every child                |
//! | `RestForOne`   | the children started after C        | C and the ones after it    |
//!
//! A temporary child stopped by a group restart is not started again; it leaves the list.
//!
//! # Restart types
//!
//! | [`Restart`]  | ends `Normal` or `Shutdown`              | ends any other way         |
//! |--------------|------------------------------------------|----------------------------|
//! | `Permanent`  | restarted                                | restarted                  |
//! | `Transient`  | not restarted; stays listed, not running | restarted                  |
//! | `Temporary`  | not restarted; leaves the list           | not restarted; leaves it   |
//!
//! ("Any other way" is [`ExitReason::is_abnormal`].)
//!
//! # Restart intensity
//!
//! At most [`SupervisorFlags::intensity`] restarts in any [`SupervisorFlags::period`] (OTP's
//! defaults: 1 in 5 s). The restart that would exceed it is refused: the supervisor stops every
//! child, last started first, and exits with [`reached_max_restart_intensity`], which its own
//! supervisor sees like any other crash. A child that fails to start when it is restarted is
//! retried (through a message the supervisor sends itself, so requests are still served), and
//! each retry counts as a restart.
//!
//! # Stopping a child
//!
//! The supervisor monitors the child, unlinks it, and then, by its [`Shutdown`] policy:
//!
//! | [`Shutdown`]   | what the supervisor does                                          |
//! |----------------|-------------------------------------------------------------------|
//! | `BrutalKill`   | sends [`ExitReason::Kill`]                                        |
//! | `Timeout(d)`   | sends [`ExitReason::Shutdown`]; after `d` without an exit, `Kill` |
//! | `Infinity`     | sends [`ExitReason::Shutdown`] and waits as long as it takes      |
//!
//! and waits for the monitor's [`Down`]. A child that does not trap exits dies of `Shutdown` at
//! once; one that traps exits receives `Exit { from: supervisor, reason: Shutdown }` and should
//! clean up and return (a [`gen_server`] started with
//! `StartOptions::trap_exit` runs its `terminate`). Workers default to `Timeout(5 s)`,
//! supervisors to `Infinity`, as in OTP.
//!
//! # Node shutdown
//!
//! A supervisor marks its process as one, so that [`NodeHandle::shutdown`] (and [`Node::stop`])
//! sends `Shutdown` to the root supervisors before anything else: each stops its children in
//! reverse start order, nested supervisors included, before the rest of the node is stopped.
//!
//! # Example
//!
//! ```
//! use runtime::supervisor::{self, ChildSpec, Strategy, SupervisorFlags, SupervisorSpec};
//! use runtime::{Node, receive};
//! use std::time::Duration;
//!
//! async fn worker() {
//!     let () = receive().await; // serve until told otherwise
//! }
//!
//! let node = Node::new().unwrap();
//! let ids = node.run(async {
//!     let spec = SupervisorSpec::new(SupervisorFlags::new(Strategy::RestForOne))
//!         .child(ChildSpec::worker("db", worker))
//!         .child(ChildSpec::worker("cache", worker));
//!     let sup = supervisor::start_link(spec, supervisor::StartOptions::new()).await.unwrap();
//!     let children = supervisor::which_children(sup, Duration::from_secs(5)).await.unwrap();
//!     children.into_iter().map(|c| c.id).collect::<Vec<_>>()
//! });
//! assert_eq!(ids.unwrap(), ["db", "cache"]);
//! ```
//!
//! # Differences from OTP
//!
//! - There is no callback module: the [`SupervisorSpec`] is given to `start*` directly.
//! - A supervisor that gives up exits with `Custom("reached_max_restart_intensity")`, which is
//!   abnormal, so a `Transient` parent restarts it (OTP's `{shutdown, ...}` would not be).
//! - A start function returns a pid or an error; there is no `ignore`.
//!
//! [`Exit`]: crate::Exit
//! [`Down`]: crate::Down
//! [`NodeHandle::shutdown`]: crate::NodeHandle::shutdown
//! [`Node::stop`]: crate::Node::stop

mod intensity;
mod strategy;

pub use strategy::Strategy;

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use self::intensity::{RestartIntensity, RestartVerdict};
use crate::exit::IntoExitReason;
use crate::gen_server::{self, GenServer, ServerRef, Timeout};
use crate::node::NodeInner;
use crate::process::{Process, SpawnError, SpawnOptions, spawn_on_node, with_current};
use crate::registry::{Name, RegistryError};
use crate::{Down, Exit, ExitReason, Message, NodeHandle, Pid};

/// The text of the reason a supervisor exits with when its children needed more restarts than
/// its intensity allows: see [`reached_max_restart_intensity`].
pub const REACHED_MAX_RESTART_INTENSITY: &str = "reached_max_restart_intensity";

/// OTP's default restart intensity: at most this many restarts per period.
pub const DEFAULT_INTENSITY: u32 = 1;

/// OTP's default restart period.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(5);

/// OTP's default time a worker is given to end after `Shutdown` before it is killed.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The reason a supervisor exits with when one restart too many was needed within its period:
/// `ExitReason::Custom("reached_max_restart_intensity")` (OTP's
/// `{shutdown, reached_max_restart_intensity}`).
///
/// ```
/// use runtime::supervisor::reached_max_restart_intensity;
/// assert_eq!(reached_max_restart_intensity().to_string(), "reached_max_restart_intensity");
/// ```
pub fn reached_max_restart_intensity() -> ExitReason {
    ExitReason::custom(REACHED_MAX_RESTART_INTENSITY)
}

/// A supervisor's restart strategy and restart intensity: OTP's `sup_flags()`.
///
/// ```
/// use runtime::supervisor::{Strategy, SupervisorFlags};
/// use std::time::Duration;
///
/// let flags = SupervisorFlags::new(Strategy::OneForAll).intensity(3).period(Duration::from_secs(10));
/// assert_eq!(flags.strategy, Strategy::OneForAll);
/// assert_eq!(SupervisorFlags::default().intensity, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SupervisorFlags {
    /// Which children are restarted when one is (default [`Strategy::OneForOne`]).
    pub strategy: Strategy,
    /// At most this many restarts in any `period`; one more stops the supervisor (default
    /// [`DEFAULT_INTENSITY`], 1). Zero: the first restart needed stops it.
    pub intensity: u32,
    /// The sliding window `intensity` counts restarts in (default [`DEFAULT_PERIOD`], 5 s).
    pub period: Duration,
}

impl Default for SupervisorFlags {
    fn default() -> SupervisorFlags {
        SupervisorFlags::new(Strategy::OneForOne)
    }
}

impl SupervisorFlags {
    /// `strategy` with OTP's default intensity: 1 restart in 5 seconds.
    pub fn new(strategy: Strategy) -> SupervisorFlags {
        SupervisorFlags {
            strategy,
            intensity: DEFAULT_INTENSITY,
            period: DEFAULT_PERIOD,
        }
    }

    /// Sets the maximum number of restarts per period.
    #[must_use]
    pub fn intensity(mut self, max_restarts: u32) -> SupervisorFlags {
        self.intensity = max_restarts;
        self
    }

    /// Sets the period the restarts are counted in.
    #[must_use]
    pub fn period(mut self, period: Duration) -> SupervisorFlags {
        self.period = period;
        self
    }
}

/// What a supervisor runs: its flags and its children, in start order (the `{SupFlags,
/// [ChildSpec]}` an OTP supervisor's `init/1` returns).
#[derive(Clone, Debug, Default)]
#[must_use = "a spec does nothing until passed to supervisor::start*"]
pub struct SupervisorSpec {
    /// The strategy and the restart intensity.
    pub flags: SupervisorFlags,
    /// The children, in start order. Ids must be unique.
    pub children: Vec<ChildSpec>,
}

impl SupervisorSpec {
    /// A supervisor with `flags` and no children yet.
    pub fn new(flags: SupervisorFlags) -> SupervisorSpec {
        SupervisorSpec {
            flags,
            children: Vec::new(),
        }
    }

    /// Adds a child, started after the ones added before it.
    pub fn child(mut self, child: ChildSpec) -> SupervisorSpec {
        self.children.push(child);
        self
    }

    /// Adds children, in order, after the ones added before.
    pub fn children(mut self, children: impl IntoIterator<Item = ChildSpec>) -> SupervisorSpec {
        self.children.extend(children);
        self
    }
}

/// Options for starting a supervisor.
#[derive(Clone, Debug, Default)]
#[must_use = "options do nothing until passed to supervisor::start*"]
pub struct StartOptions {
    name: Option<Name>,
}

impl StartOptions {
    /// No registered name.
    pub fn new() -> StartOptions {
        StartOptions::default()
    }

    /// Registers the supervisor under `name` before it starts its children; the start fails
    /// with [`StartError::AlreadyStarted`] if the name is taken.
    pub fn name(mut self, name: impl Into<Name>) -> StartOptions {
        self.name = Some(name.into());
        self
    }
}

/// When a child that ended is restarted: OTP's `restart` of a child spec. See the [module
/// table](self#restart-types).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Restart {
    /// Always restarted (the default).
    #[default]
    Permanent,
    /// Restarted only when it ends abnormally ([`ExitReason::is_abnormal`]: not `Normal`, not
    /// `Shutdown`).
    Transient,
    /// Never restarted; removed from the child list when it ends.
    Temporary,
}

/// How a supervisor stops a child: OTP's `shutdown` of a child spec. See the [module
/// table](self#stopping-a-child).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shutdown {
    /// Kill it at once ([`ExitReason::Kill`]): no cleanup runs.
    #[doc(alias = "brutal_kill")]
    BrutalKill,
    /// Send [`ExitReason::Shutdown`] and kill it if it has not ended after this long.
    Timeout(Duration),
    /// Send [`ExitReason::Shutdown`] and wait for ever (the default for supervisors, which
    /// take as long as their own children do).
    Infinity,
}

/// Whether a child is a worker or a supervisor: OTP's `type` of a child spec. It sets the
/// default [`Shutdown`] and is reported by [`which_children`] and [`count_children`].
#[doc(alias = "type")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ChildKind {
    /// Any process that is not a supervisor (the default).
    #[default]
    Worker,
    /// A supervisor.
    Supervisor,
}

/// The future a child's start function returns.
pub type StartFuture = Pin<Box<dyn Future<Output = Result<Pid, StartChildError>> + Send>>;

type StartFn = Arc<dyn Fn() -> StartFuture + Send + Sync>;

/// How to start, restart and stop one child: OTP's `child_spec()`.
///
/// The start function runs inside the supervisor's process, every time the child is
/// (re)started, and must start the child **linked** to the supervisor (with
/// [`spawn_link`](crate::spawn_link), [`gen_server::start_link`], [`start_link`]) and return
/// its pid: the link is how the supervisor learns that the child ended.
///
/// ```
/// use runtime::supervisor::{ChildSpec, Restart, Shutdown};
/// use std::time::Duration;
///
/// // The common case: a process running a fresh future per start.
/// let pinger = ChildSpec::worker("pinger", || async { /* ... */ })
///     .restart(Restart::Transient)
///     .shutdown(Shutdown::Timeout(Duration::from_millis(500)));
/// // Any start function: here the same, spelled out.
/// let ponger = ChildSpec::new("ponger", || async { runtime::spawn_link(async {}) });
/// assert_eq!(pinger.id(), "pinger");
/// # let _ = ponger;
/// ```
#[derive(Clone)]
#[must_use = "a child spec does nothing until given to a supervisor"]
pub struct ChildSpec {
    id: String,
    start: StartFn,
    restart: Restart,
    shutdown: Shutdown,
    kind: ChildKind,
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("id", &self.id)
            .field("restart", &self.restart)
            .field("shutdown", &self.shutdown)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl ChildSpec {
    /// A worker child started by `start`, which runs in the supervisor's process, must start
    /// the child linked to the supervisor and returns its pid (or why it could not). Permanent,
    /// stopped with `Timeout(5 s)`.
    ///
    /// The error may be anything convertible into [`StartChildError`]: a [`SpawnError`], a
    /// [`gen_server::StartError`], a supervisor [`StartError`], or a
    /// [`StartChildError::other`].
    pub fn new<F, Fut, E>(id: impl Into<String>, start: F) -> ChildSpec
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Pid, E>> + Send + 'static,
        E: Into<StartChildError>,
    {
        let start: StartFn = Arc::new(move || {
            let started = start();
            Box::pin(async move { started.await.map_err(Into::into) })
        });
        ChildSpec {
            id: id.into(),
            start,
            restart: Restart::Permanent,
            shutdown: Shutdown::Timeout(DEFAULT_SHUTDOWN_TIMEOUT),
            kind: ChildKind::Worker,
        }
    }

    /// A worker child that is a process running the future `body` returns, spawned linked to
    /// the supervisor; each (re)start calls `body` for a fresh future. The future's output is
    /// the child's exit reason ([`IntoExitReason`]).
    pub fn worker<F, Fut>(id: impl Into<String>, body: F) -> ChildSpec
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: IntoExitReason,
    {
        ChildSpec::new(id, move || std::future::ready(crate::spawn_link(body())))
    }

    /// A worker child that is a [`GenServer`] `S`, started with
    /// [`gen_server::start_link`]`::<S>(args.clone(), opts.clone())`. Give `opts`
    /// [`trap_exit`](gen_server::StartOptions::trap_exit) for the server's
    /// [`terminate`](GenServer::terminate) to run when the supervisor stops it.
    pub fn gen_server<S>(
        id: impl Into<String>,
        args: S::Args,
        opts: gen_server::StartOptions,
    ) -> ChildSpec
    where
        S: GenServer,
        S::Args: Clone + Sync,
    {
        ChildSpec::new(id, move || {
            let args = args.clone();
            let opts = opts.clone();
            async move {
                gen_server::start_link::<S>(args, opts)
                    .await
                    .map(|server| server.pid())
            }
        })
    }

    /// A child that is itself a supervisor running `spec`, started with [`start_link`]. Its
    /// kind is [`ChildKind::Supervisor`] and its shutdown [`Shutdown::Infinity`], as in OTP.
    pub fn supervisor(
        id: impl Into<String>,
        spec: SupervisorSpec,
        opts: StartOptions,
    ) -> ChildSpec {
        ChildSpec::new(id, move || start_link(spec.clone(), opts.clone()))
            .kind(ChildKind::Supervisor)
            .shutdown(Shutdown::Infinity)
    }

    /// Sets when the child is restarted (default [`Restart::Permanent`]).
    pub fn restart(mut self, restart: Restart) -> ChildSpec {
        self.restart = restart;
        self
    }

    /// Sets how the child is stopped (default `Timeout(5 s)` for a worker, `Infinity` for a
    /// supervisor made with [`ChildSpec::supervisor`]).
    pub fn shutdown(mut self, shutdown: Shutdown) -> ChildSpec {
        self.shutdown = shutdown;
        self
    }

    /// Sets the child's kind (default [`ChildKind::Worker`]). Changing it to
    /// [`ChildKind::Supervisor`] does not change the shutdown policy.
    pub fn kind(mut self, kind: ChildKind) -> ChildSpec {
        self.kind = kind;
        self
    }

    /// The child's id, unique among its supervisor's children.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// One child as [`which_children`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildInfo {
    /// The child's id.
    pub id: String,
    /// Its process, or `None` when it is not running (a transient child that ended normally,
    /// one stopped with [`terminate_child`], or one whose restart failed and is retried).
    pub pid: Option<Pid>,
    /// Worker or supervisor.
    pub kind: ChildKind,
    /// Its restart type.
    pub restart: Restart,
}

/// How many children a supervisor has, as [`count_children`] reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildCounts {
    /// Child specs, running or not.
    pub specs: usize,
    /// Children running now.
    pub active: usize,
    /// Child specs of kind [`ChildKind::Supervisor`].
    pub supervisors: usize,
    /// Child specs of kind [`ChildKind::Worker`].
    pub workers: usize,
}

/// Why a child's start function failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartChildError {
    /// Its process could not be spawned.
    Spawn(SpawnError),
    /// A gen_server child did not start.
    GenServer(gen_server::StartError),
    /// A supervisor child did not start.
    Supervisor(Box<StartError>),
    /// Any other reason a start function gives.
    Other(Arc<str>),
}

impl StartChildError {
    /// An application-defined start failure, described by `reason`.
    pub fn other(reason: impl fmt::Display) -> StartChildError {
        StartChildError::Other(reason.to_string().into())
    }
}

impl fmt::Display for StartChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartChildError::Spawn(e) => fmt::Display::fmt(e, f),
            StartChildError::GenServer(e) => fmt::Display::fmt(e, f),
            StartChildError::Supervisor(e) => fmt::Display::fmt(e, f),
            StartChildError::Other(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for StartChildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartChildError::Spawn(e) => Some(e),
            StartChildError::GenServer(e) => Some(e),
            StartChildError::Supervisor(e) => Some(&**e),
            StartChildError::Other(_) => None,
        }
    }
}

impl From<SpawnError> for StartChildError {
    fn from(e: SpawnError) -> StartChildError {
        StartChildError::Spawn(e)
    }
}

impl From<gen_server::StartError> for StartChildError {
    fn from(e: gen_server::StartError) -> StartChildError {
        StartChildError::GenServer(e)
    }
}

impl From<StartError> for StartChildError {
    fn from(e: StartError) -> StartChildError {
        StartChildError::Supervisor(Box::new(e))
    }
}

/// Why a supervisor did not start.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// The name in [`StartOptions::name`] is registered to another process.
    AlreadyStarted {
        /// The name asked for.
        name: Name,
        /// The process holding it.
        pid: Pid,
    },
    /// Two child specs have the same id.
    DuplicateChildId(String),
    /// A child failed to start; the children started before it were stopped, last first, and
    /// the supervisor exited.
    ChildFailed {
        /// The child's id.
        id: String,
        /// Why its start function failed.
        error: StartChildError,
    },
    /// The supervisor's process could not be spawned.
    Spawn(SpawnError),
    /// The supervisor's process ended (was killed) while starting its children.
    Exited(ExitReason),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::AlreadyStarted { name, pid } => write!(
                f,
                "cannot start the supervisor: `{name}` is already registered to {pid}"
            ),
            StartError::DuplicateChildId(id) => write!(
                f,
                "cannot start the supervisor: two child specs have the id `{id}`; child ids \
                 must be unique"
            ),
            StartError::ChildFailed { id, error } => write!(
                f,
                "the supervisor's child `{id}` failed to start: {error} (the children started \
                 before it were stopped)"
            ),
            StartError::Spawn(e) => write!(f, "cannot start the supervisor: {e}"),
            StartError::Exited(reason) => write!(
                f,
                "the supervisor exited while starting its children, with reason `{reason}`"
            ),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::ChildFailed { error, .. } => Some(error),
            StartError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a request to a supervisor ([`which_children`], [`count_children`]) got no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The supervisor was not alive (or the name not registered), or it exited before
    /// answering.
    NoProc(ServerRef),
    /// No answer came in time: the supervisor may be busy stopping or starting a child.
    Timeout {
        /// The supervisor asked.
        supervisor: ServerRef,
        /// The timeout that passed.
        after: Duration,
    },
    /// A name was used outside a process, where there is no current node: use the pid.
    NotInProcess(Name),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::NoProc(sup) => write!(
                f,
                "supervisor {sup} is not alive (or the name is not registered), or it exited \
                 before answering"
            ),
            CallError::Timeout { supervisor, after } => write!(
                f,
                "supervisor {supervisor} did not answer within {after:?}: it may be busy \
                 stopping or starting a child (or the process is not a supervisor)"
            ),
            CallError::NotInProcess(name) => write!(
                f,
                "cannot reach supervisor `{name}` by name outside a process: use its pid, or \
                 call from a process of its node"
            ),
        }
    }
}

impl std::error::Error for CallError {}

/// Why [`terminate_child`], [`restart_child`] or [`delete_child`] failed. Each names the child.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChildError {
    /// The supervisor has no child with this id.
    NotFound(String),
    /// The child is running: [`terminate_child`] it first.
    Running(String),
    /// The child's start function failed; it stays listed, not running.
    Start {
        /// The child's id.
        id: String,
        /// Why it failed.
        error: StartChildError,
    },
    /// The supervisor did not answer.
    Call(CallError),
}

impl fmt::Display for ChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildError::NotFound(id) => write!(f, "the supervisor has no child `{id}`"),
            ChildError::Running(id) => write!(
                f,
                "child `{id}` is running: stop it with terminate_child first"
            ),
            ChildError::Start { id, error } => write!(f, "child `{id}` failed to start: {error}"),
            ChildError::Call(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for ChildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ChildError::Start { error, .. } => Some(error),
            ChildError::Call(e) => Some(e),
            _ => None,
        }
    }
}

impl From<CallError> for ChildError {
    fn from(e: CallError) -> ChildError {
        ChildError::Call(e)
    }
}

/// Starts a supervisor linked to the calling process (its parent), and returns once all its
/// children have started, Erlang's `supervisor:start_link/2,3`.
///
/// If a child fails to start, the children started before it are stopped in reverse order,
/// the supervisor is unlinked from the caller (so the caller is not killed) and exits, and
/// the error, naming the child, is returned once the supervisor's process is gone (its name is
/// free again). When the caller exits, the supervisor stops its children and exits with the
/// caller's reason.
///
/// ```
/// use runtime::supervisor::{self, ChildSpec, StartOptions, SupervisorFlags, SupervisorSpec};
/// use runtime::{Node, receive, self_pid, send};
///
/// let node = Node::new().unwrap();
/// let restarted = node.run(async {
///     let me = self_pid();
///     let spec = SupervisorSpec::new(SupervisorFlags::default()).child(ChildSpec::worker(
///         "echo",
///         move || async move {
///             send(me, self_pid()); // tell the test who we are
///             let crash: &str = receive().await;
///             runtime::ExitReason::custom(crash)
///         },
///     ));
///     supervisor::start_link(spec, StartOptions::new().name("top")).await.unwrap();
///     let first: runtime::Pid = receive().await;
///     send(first, "boom");
///     let second: runtime::Pid = receive().await; // restarted by the supervisor
///     first != second
/// });
/// assert!(restarted.unwrap());
/// ```
///
/// # Errors
/// [`StartError::ChildFailed`], [`StartError::DuplicateChildId`],
/// [`StartError::AlreadyStarted`], [`StartError::Spawn`] (`NotInProcess` outside a process: use
/// [`start_on`] there), [`StartError::Exited`].
pub async fn start_link(spec: SupervisorSpec, opts: StartOptions) -> Result<Pid, StartError> {
    let parent =
        with_current(|c| c.map(Arc::clone)).ok_or(StartError::Spawn(SpawnError::NotInProcess))?;
    let node = Arc::clone(&parent.node);
    start_inner(&node, Some(&parent), spec, opts, true).await
}

/// As [`start_link`], without the link: the calling process is the supervisor's parent (an
/// `Exit` from it still stops the supervisor), but its death does not reach the supervisor.
///
/// # Errors
/// As [`start_link`].
pub async fn start(spec: SupervisorSpec, opts: StartOptions) -> Result<Pid, StartError> {
    let parent =
        with_current(|c| c.map(Arc::clone)).ok_or(StartError::Spawn(SpawnError::NotInProcess))?;
    let node = Arc::clone(&parent.node);
    start_inner(&node, Some(&parent), spec, opts, false).await
}

/// Starts a supervisor on `node` from outside any process (it has no parent; stop it with
/// `exit(pid, ExitReason::Shutdown)` or by shutting the node down). Returns once all its
/// children have started.
///
/// # Errors
/// As [`start_link`].
pub async fn start_on(
    node: &NodeHandle,
    spec: SupervisorSpec,
    opts: StartOptions,
) -> Result<Pid, StartError> {
    start_inner(&node.inner, None, spec, opts, false).await
}

/// The supervisor's children, in start order, Erlang's `supervisor:which_children/1`. Works
/// from a process or from any async code (a name needs a process, to know the node).
///
/// # Errors
/// [`CallError::NoProc`], [`CallError::Timeout`], [`CallError::NotInProcess`].
pub async fn which_children(
    supervisor: impl Into<ServerRef>,
    timeout: impl Into<Timeout>,
) -> Result<Vec<ChildInfo>, CallError> {
    request(supervisor.into(), timeout.into(), Request::WhichChildren).await
}

/// How many children the supervisor has, by kind and running, Erlang's
/// `supervisor:count_children/1`.
///
/// # Errors
/// As [`which_children`].
pub async fn count_children(
    supervisor: impl Into<ServerRef>,
    timeout: impl Into<Timeout>,
) -> Result<ChildCounts, CallError> {
    let children = which_children(supervisor, timeout).await?;
    let mut counts = ChildCounts {
        specs: children.len(),
        ..ChildCounts::default()
    };
    for child in &children {
        counts.active += usize::from(child.pid.is_some());
        match child.kind {
            ChildKind::Worker => counts.workers += 1,
            ChildKind::Supervisor => counts.supervisors += 1,
        }
    }
    Ok(counts)
}

/// Stops the child `id` by its [`Shutdown`] policy, without restarting it, Erlang's
/// `supervisor:terminate_child/2`. A temporary child leaves the list; any other stays listed,
/// not running, until [`restart_child`] or [`delete_child`]. Stopping a child that is not
/// running succeeds. Not counted as a restart.
///
/// # Errors
/// [`ChildError::NotFound`], [`ChildError::Call`].
pub async fn terminate_child(
    supervisor: impl Into<ServerRef>,
    id: &str,
    timeout: impl Into<Timeout>,
) -> Result<(), ChildError> {
    let id = id.to_owned();
    request(supervisor.into(), timeout.into(), |reply| {
        Request::TerminateChild(id, reply)
    })
    .await?
}

/// Starts the listed, not running child `id` again, Erlang's `supervisor:restart_child/2`.
/// Not counted as a restart.
///
/// # Errors
/// [`ChildError::NotFound`], [`ChildError::Running`], [`ChildError::Start`],
/// [`ChildError::Call`].
pub async fn restart_child(
    supervisor: impl Into<ServerRef>,
    id: &str,
    timeout: impl Into<Timeout>,
) -> Result<Pid, ChildError> {
    let id = id.to_owned();
    request(supervisor.into(), timeout.into(), |reply| {
        Request::RestartChild(id, reply)
    })
    .await?
}

/// Removes the not running child `id` from the list, Erlang's `supervisor:delete_child/2`.
///
/// # Errors
/// [`ChildError::NotFound`], [`ChildError::Running`], [`ChildError::Call`].
pub async fn delete_child(
    supervisor: impl Into<ServerRef>,
    id: &str,
    timeout: impl Into<Timeout>,
) -> Result<(), ChildError> {
    let id = id.to_owned();
    request(supervisor.into(), timeout.into(), |reply| {
        Request::DeleteChild(id, reply)
    })
    .await?
}

/// A request as it travels to a supervisor: a private type, so only this module's functions
/// can make one.
enum Request {
    WhichChildren(oneshot::Sender<Vec<ChildInfo>>),
    TerminateChild(String, oneshot::Sender<Result<(), ChildError>>),
    RestartChild(String, oneshot::Sender<Result<Pid, ChildError>>),
    DeleteChild(String, oneshot::Sender<Result<(), ChildError>>),
}

/// What a supervisor sends itself to retry a restart that failed to start a child.
struct RetryRestart(String);

const INITIAL_CALL: &str = "runtime::supervisor::init/1";

/// Sends a request built around a one-shot reply channel and waits for the answer. A dead
/// supervisor drops the request, and with it the sender: that is `NoProc`.
async fn request<R>(
    supervisor: ServerRef,
    timeout: Timeout,
    make: impl FnOnce(oneshot::Sender<R>) -> Request,
) -> Result<R, CallError> {
    let pid = match &supervisor {
        ServerRef::Pid(pid) => *pid,
        ServerRef::Name(name) => match with_current(|c| c.map(|p| p.node.registry.whereis(name))) {
            Some(Some(pid)) => pid,
            Some(None) => return Err(CallError::NoProc(supervisor)),
            None => return Err(CallError::NotInProcess(name.clone())),
        },
    };
    let (tx, rx) = oneshot::channel();
    let msg = Message::new(make(tx));
    let queued = NodeInner::with_process(pid, |p| p.try_push_message(msg).is_ok());
    if queued != Some(true) {
        return Err(CallError::NoProc(supervisor));
    }
    let answer = match timeout {
        Timeout::After(after) => match tokio::time::timeout(after, rx).await {
            Ok(answer) => answer,
            Err(_) => return Err(CallError::Timeout { supervisor, after }),
        },
        Timeout::Infinity => rx.await,
    };
    answer.map_err(|_| CallError::NoProc(supervisor))
}

async fn start_inner(
    node: &Arc<NodeInner>,
    parent: Option<&Arc<Process>>,
    spec: SupervisorSpec,
    opts: StartOptions,
    link: bool,
) -> Result<Pid, StartError> {
    for (i, child) in spec.children.iter().enumerate() {
        if spec.children[..i].iter().any(|c| c.id == child.id) {
            return Err(StartError::DuplicateChildId(child.id.clone()));
        }
    }
    let (ack_tx, ack_rx) = oneshot::channel();
    let parent_pid = parent.map(|p| p.pid);
    let mut spawn_opts = SpawnOptions::new()
        .trap_exit()
        .initial_call(Cow::Borrowed(INITIAL_CALL));
    if let Some(name) = opts.name {
        spawn_opts = spawn_opts.name(name);
    }
    if link {
        spawn_opts = spawn_opts.link();
    }
    let future = run(spec, parent_pid, link, ack_tx);
    let (process, _) = match spawn_on_node(node, parent, future, spawn_opts) {
        Ok(spawned) => spawned,
        Err(SpawnError::Name(RegistryError::NameTaken { name, holder })) => {
            return Err(StartError::AlreadyStarted { name, pid: holder });
        }
        Err(e) => return Err(StartError::Spawn(e)),
    };
    process.mark_supervisor();
    let outcome = match ack_rx.await {
        Ok(Ok(())) => return Ok(process.pid),
        Ok(Err(e)) => e,
        Err(_) => {
            node.wait_until(|| process.exit_reason().is_some()).await;
            StartError::Exited(process.exit_reason().cloned().unwrap_or(ExitReason::Killed))
        }
    };
    // As OTP's proc_lib does, return the failure only once the process is gone, so that its
    // name is free again for a retry.
    let pid = process.pid;
    drop(process);
    node.wait_until(|| NodeInner::with_process(pid, |_| ()).is_none())
        .await;
    Err(outcome)
}

/// The supervisor process: start the children, answer the starter, supervise.
async fn run(
    spec: SupervisorSpec,
    parent: Option<Pid>,
    linked: bool,
    ack: oneshot::Sender<Result<(), StartError>>,
) -> ExitReason {
    let mut sup = Supervisor {
        me: crate::self_pid(),
        parent,
        strategy: spec.flags.strategy,
        intensity: RestartIntensity::new(spec.flags.intensity, spec.flags.period),
        children: spec
            .children
            .into_iter()
            .map(|spec| Child {
                spec,
                pid: None,
                restarting: false,
            })
            .collect(),
    };
    if let Err((id, error)) = sup.start_all().await {
        if linked && let Some(parent) = parent {
            let _ = crate::unlink(parent);
        }
        let reason = ExitReason::custom(format!("failed_to_start_child `{id}`: {error}"));
        let _ = ack.send(Err(StartError::ChildFailed { id, error }));
        return reason;
    }
    let _ = ack.send(Ok(()));
    sup.serve().await
}

struct Child {
    spec: ChildSpec,
    /// The running process, if any.
    pid: Option<Pid>,
    /// A restart failed to start it; a [`RetryRestart`] is on its way.
    restarting: bool,
}

/// A supervisor's state, owned by its process.
struct Supervisor {
    me: Pid,
    parent: Option<Pid>,
    strategy: Strategy,
    intensity: RestartIntensity,
    /// In start order.
    children: Vec<Child>,
}

impl Supervisor {
    /// Starts every child in order; on a failure, stops the started ones in reverse.
    async fn start_all(&mut self) -> Result<(), (String, StartChildError)> {
        for i in 0..self.children.len() {
            if let Err(error) = self.start_child(i).await {
                self.stop_all().await;
                return Err((self.children[i].spec.id.clone(), error));
            }
        }
        Ok(())
    }

    /// Runs child `i`'s start function and records its pid.
    async fn start_child(&mut self, i: usize) -> Result<Pid, StartChildError> {
        let started = (self.children[i].spec.start)().await;
        if let Ok(pid) = started {
            let child = &mut self.children[i];
            child.pid = Some(pid);
            child.restarting = false;
        }
        started
    }

    /// Stops every running child, last started first.
    async fn stop_all(&mut self) {
        for i in (0..self.children.len()).rev() {
            self.stop_child(i).await;
        }
    }

    async fn stop_child(&mut self, i: usize) {
        if let Some(pid) = self.children[i].pid.take() {
            shutdown_child(pid, self.children[i].spec.shutdown).await;
        }
    }

    /// The receive loop; returns the reason to exit with.
    async fn serve(mut self) -> ExitReason {
        loop {
            let msg = crate::receive_any().await;
            let msg = match msg.downcast::<Exit>() {
                Ok(exit) => match self.handle_exit(exit).await {
                    Some(reason) => return reason,
                    None => continue,
                },
                Err(msg) => msg,
            };
            let msg = match msg.downcast::<Request>() {
                Ok(request) => {
                    self.handle_request(request).await;
                    continue;
                }
                Err(msg) => msg,
            };
            if let Ok(RetryRestart(id)) = msg.downcast::<RetryRestart>()
                && let Some(i) = self.index_of_id(&id)
                && self.children[i].restarting
                && self.children[i].pid.is_none()
                && let Some(reason) = self.restart(&id).await
            {
                return reason;
            }
            // Any other message is dropped, as OTP's supervisor drops (and logs) it.
        }
    }

    async fn handle_exit(&mut self, exit: Exit) -> Option<ExitReason> {
        if exit.from == self.me || Some(exit.from) == self.parent {
            self.stop_all().await;
            return Some(exit.reason);
        }
        // An exit of a process that is no longer a child (stopped and unlinked already) is
        // stale: ignore it.
        let i = self
            .children
            .iter()
            .position(|c| c.pid == Some(exit.from))?;
        let child = &mut self.children[i];
        child.pid = None;
        match child.spec.restart {
            Restart::Temporary => {
                self.children.remove(i);
                None
            }
            Restart::Transient if !exit.reason.is_abnormal() => None,
            Restart::Permanent | Restart::Transient => {
                let id = child.spec.id.clone();
                self.restart(&id).await
            }
        }
    }

    /// Restarts child `id` by the strategy, counting it against the intensity. Returns the
    /// reason to exit with when the intensity is exceeded.
    async fn restart(&mut self, id: &str) -> Option<ExitReason> {
        match self.intensity.record_restart(Instant::now()) {
            RestartVerdict::Allowed => {}
            RestartVerdict::Exceeded => {
                self.stop_all().await;
                return Some(reached_max_restart_intensity());
            }
        }
        let failed = self.index_of_id(id)?;
        let range = self.strategy.affected(failed, self.children.len());
        for i in range.clone().rev() {
            self.stop_child(i).await;
        }
        // Temporary children stopped for a group restart are not started again.
        let (start, mut end) = (range.start, range.end);
        let mut i = start;
        while i < end {
            if self.children[i].spec.restart == Restart::Temporary {
                self.children.remove(i);
                end -= 1;
            } else {
                i += 1;
            }
        }
        for i in start..end {
            if self.start_child(i).await.is_err() {
                // Retried through the mailbox, so that requests and exits are served
                // meanwhile; each retry counts against the intensity, as in OTP.
                let child = &mut self.children[i];
                child.restarting = true;
                crate::send(self.me, RetryRestart(child.spec.id.clone()));
                break;
            }
        }
        None
    }

    async fn handle_request(&mut self, request: Request) {
        match request {
            Request::WhichChildren(reply) => {
                let _ = reply.send(self.which_children());
            }
            Request::TerminateChild(id, reply) => {
                let answer = match self.index_of_id(&id) {
                    None => Err(ChildError::NotFound(id)),
                    Some(i) => {
                        self.stop_child(i).await;
                        self.children[i].restarting = false;
                        if self.children[i].spec.restart == Restart::Temporary {
                            self.children.remove(i);
                        }
                        Ok(())
                    }
                };
                let _ = reply.send(answer);
            }
            Request::RestartChild(id, reply) => {
                let answer = match self.index_of_id(&id) {
                    None => Err(ChildError::NotFound(id)),
                    Some(i) if self.children[i].pid.is_some() => Err(ChildError::Running(id)),
                    Some(i) => self
                        .start_child(i)
                        .await
                        .map_err(|error| ChildError::Start { id, error }),
                };
                let _ = reply.send(answer);
            }
            Request::DeleteChild(id, reply) => {
                let answer = match self.index_of_id(&id) {
                    None => Err(ChildError::NotFound(id)),
                    Some(i) if self.children[i].pid.is_some() => Err(ChildError::Running(id)),
                    Some(i) => {
                        self.children.remove(i);
                        Ok(())
                    }
                };
                let _ = reply.send(answer);
            }
        }
    }

    fn which_children(&self) -> Vec<ChildInfo> {
        self.children
            .iter()
            .map(|c| ChildInfo {
                id: c.spec.id.clone(),
                pid: c.pid,
                kind: c.spec.kind,
                restart: c.spec.restart,
            })
            .collect()
    }

    fn index_of_id(&self, id: &str) -> Option<usize> {
        self.children.iter().position(|c| c.spec.id == id)
    }
}

/// Stops `pid` by `policy` and waits until it has ended (see the [module
/// table](self#stopping-a-child)). Runs in the supervisor's process.
async fn shutdown_child(pid: Pid, policy: Shutdown) {
    let Ok(mref) = crate::monitor(pid) else {
        crate::exit(pid, ExitReason::Kill);
        return;
    };
    // From here no exit signal from the child's link is acted on; one it already turned into
    // a message is taken out, so the receive loop never sees it.
    let _ = crate::unlink(pid);
    let _ = take_now::<Exit, _>(move |e| e.from == pid).await;
    let down = move |d: &Down| d.monitor_ref == mref;
    match policy {
        Shutdown::BrutalKill => {
            crate::exit(pid, ExitReason::Kill);
            let _: Down = crate::receive_where(down).await;
        }
        Shutdown::Timeout(after) => {
            crate::exit(pid, ExitReason::Shutdown);
            if tokio::time::timeout(after, crate::receive_where(down))
                .await
                .is_err()
            {
                crate::exit(pid, ExitReason::Kill);
                let _: Down = crate::receive_where(down).await;
            }
        }
        Shutdown::Infinity => {
            crate::exit(pid, ExitReason::Shutdown);
            let _: Down = crate::receive_where(down).await;
        }
    }
}

/// Takes the first message of type `T` that `matches` accepts if one is already in the
/// mailbox, without waiting.
async fn take_now<T, F>(matches: F) -> Option<T>
where
    T: Any + Send,
    F: FnMut(&T) -> bool + Unpin,
{
    let mut receive = std::pin::pin!(crate::receive_where::<T, F>(matches));
    std::future::poll_fn(|cx| {
        Poll::Ready(match receive.as_mut().poll(cx) {
            Poll::Ready(msg) => Some(msg),
            Poll::Pending => None,
        })
    })
    .await
}
