//! What a supervisor is told to run: its flags, its children's specs, the options it is started
//! with, and what it reports about its children.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::{StartChildError, Strategy, start_link};
use crate::Pid;
use crate::exit::IntoExitReason;
use crate::gen_server::{self, GenServer};
use crate::name::Name;

/// OTP's default restart intensity: at most this many restarts per period.
pub const DEFAULT_INTENSITY: u32 = 1;

/// OTP's default restart period.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(5);

/// OTP's default time a worker is given to end after `Shutdown` before it is killed.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

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
    pub(super) name: Option<Name>,
}

impl StartOptions {
    /// No registered name.
    pub fn new() -> StartOptions {
        StartOptions::default()
    }

    /// Registers the supervisor under `name` before it starts its children; the start fails
    /// with [`StartError::AlreadyStarted`](super::StartError::AlreadyStarted) if the name is taken.
    pub fn name(mut self, name: impl Into<Name>) -> StartOptions {
        self.name = Some(name.into());
        self
    }
}

/// When a child that ended is restarted: OTP's `restart` of a child spec. See the [module
/// table](super#restart-types).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Restart {
    /// Always restarted (the default).
    #[default]
    Permanent,
    /// Restarted only when it ends abnormally
    /// ([`ExitReason::is_abnormal`](crate::ExitReason::is_abnormal): not `Normal`, not `Shutdown`).
    Transient,
    /// Never restarted; removed from the child list when it ends.
    Temporary,
}

/// How a supervisor stops a child: OTP's `shutdown` of a child spec. See the [module
/// table](super#stopping-a-child).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shutdown {
    /// Kill it at once ([`ExitReason::Kill`](crate::ExitReason::Kill)): no cleanup runs.
    #[doc(alias = "brutal_kill")]
    BrutalKill,
    /// Send [`ExitReason::Shutdown`](crate::ExitReason::Shutdown) and kill it if it has not ended
    /// after this long.
    Timeout(Duration),
    /// Send [`ExitReason::Shutdown`](crate::ExitReason::Shutdown) and wait for ever (the default
    /// for supervisors, which take as long as their own children do).
    Infinity,
}

/// Whether a child is a worker or a supervisor: OTP's `type` of a child spec. It sets the default
/// [`Shutdown`] and is reported by [`which_children`](super::which_children) and
/// [`count_children`](super::count_children).
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

pub(super) type StartFn = Arc<dyn Fn() -> StartFuture + Send + Sync>;

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
    pub(super) id: String,
    pub(super) start: StartFn,
    pub(super) restart: Restart,
    pub(super) shutdown: Shutdown,
    pub(super) kind: ChildKind,
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
    /// The error may be anything convertible into [`StartChildError`]: a
    /// [`SpawnError`](crate::SpawnError), a [`gen_server::StartError`], a supervisor
    /// [`StartError`](super::StartError), or a [`StartChildError::other`].
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
    ///
    /// Its initial call (`process_info`, top, peek, reports, heap snapshots) is the function
    /// whose future `body` returns (`app::worker` for `|| app::worker()`), as OTP names a
    /// process by the function it starts in; for an `async` block, which names no function
    /// (`app::run::{{closure}}::{{closure}}`), the spec's `id`.
    pub fn worker<F, Fut>(id: impl Into<String>, body: F) -> ChildSpec
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: IntoExitReason,
    {
        let id = id.into();
        let call = crate::process::default_initial_call::<Fut>();
        let call = if call.contains("{{closure}}") {
            Cow::Owned(id.clone())
        } else {
            call
        };
        ChildSpec::new(id, move || {
            let opts = crate::SpawnOptions::new().link().initial_call(call.clone());
            std::future::ready(crate::spawn_opt(body(), opts).map(|spawned| spawned.pid))
        })
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

/// One child as [`which_children`](super::which_children) reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildInfo {
    /// The child's id.
    pub id: String,
    /// Its process, or `None` when it is not running (a transient child that ended normally, one
    /// stopped with [`terminate_child`](super::terminate_child), or one whose restart failed and is
    /// retried).
    pub pid: Option<Pid>,
    /// Worker or supervisor.
    pub kind: ChildKind,
    /// Its restart type.
    pub restart: Restart,
}

/// How many children a supervisor has, as [`count_children`](super::count_children) reports.
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
