//! Server-aided profiling: a tprof server (a gen_server of the node) that holds a trace
//! session, takes patterns and process flags while the system runs, and hands out what it
//! gathered.

use std::fmt;
use std::sync::Arc;

use runtime::gen_server::{
    self, CallError, CallReply, Caller, GenServer, Server, StartError, StartOptions, StopError,
    Timeout,
};
use runtime::trace::{
    FlagError, FlagOutcome, PatternError, ProcessSpec, SessionError, SessionOptions, TraceMap,
    TracePattern, TraceSession, TraceTypes,
};
use runtime::{ExitReason, NodeHandle, Pid};

use crate::profile::{Profile, TraceType};

/// The name the default server registers.
pub const DEFAULT_NAME: &str = "tprof";

/// How to start a server: what it measures and the name it registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    trace_type: TraceType,
    name: String,
    percentiles: bool,
    percentile_precision: u8,
    call_tree: bool,
    event_log: bool,
    outside_processes: bool,
    sample: Option<runtime::sample::SampleOptions>,
}

impl Default for ServerOptions {
    fn default() -> ServerOptions {
        ServerOptions {
            trace_type: TraceType::CallCount,
            name: DEFAULT_NAME.to_owned(),
            percentiles: false,
            percentile_precision: SessionOptions::DEFAULT_PRECISION,
            call_tree: false,
            event_log: false,
            outside_processes: false,
            sample: None,
        }
    }
}

impl ServerOptions {
    /// call_count, registered as [`DEFAULT_NAME`].
    pub fn new() -> ServerOptions {
        ServerOptions::default()
    }

    /// What to measure.
    pub fn trace_type(mut self, trace_type: TraceType) -> ServerOptions {
        self.trace_type = trace_type;
        self
    }

    /// With call_time, also records each call's own time, exclusive of traced callees as
    /// the time column counts it (p50 / p90 / p99 / max per process and function in
    /// [`Profile::percentiles`]).
    pub fn percentiles(mut self, on: bool) -> ServerOptions {
        self.percentiles = on;
        self
    }

    /// With [`percentiles`](Self::percentiles), the significant figures each histogram keeps:
    /// 1 to 5, default 2 (as
    /// [`ProfileOptions::percentile_precision`](crate::ProfileOptions::percentile_precision)).
    pub fn percentile_precision(mut self, significant_figures: u8) -> ServerOptions {
        self.percentile_precision = significant_figures;
        self
    }

    /// With call_time or call_memory, also measures per traced call path
    /// ([`Profile::call_tree`]), for the stack-shaped exports.
    pub fn call_tree(mut self, on: bool) -> ServerOptions {
        self.call_tree = on;
        self
    }

    /// With call_time or call_memory, also keeps each process's event log
    /// ([`Profile::event_logs`]), for timelines.
    pub fn event_log(mut self, on: bool) -> ServerOptions {
        self.event_log = on;
        self
    }

    /// As [`ProfileOptions::outside_processes`](crate::ProfileOptions::outside_processes): the
    /// profiles [`Tprof::collect`] returns show the traced calls made outside any process in
    /// tprof's tables, and they are measured on every thread, not only on the node's.
    pub fn outside_processes(mut self, on: bool) -> ServerOptions {
        self.outside_processes = on;
        self
    }

    /// Registers the server under `name` instead of the default, so it can run beside it.
    pub fn name(mut self, name: impl Into<String>) -> ServerOptions {
        self.name = name.into();
        self
    }
}

impl ServerOptions {
    /// Sample mode: the server runs a sample session with these options ([`runtime::sample`]:
    /// the CPU sampler by default, or the wall sampler) instead of a trace session. Patterns
    /// and process flags select what is sampled, `pause`, `resume` and `restart` act on the
    /// samples too (`restart` forgets them), and [`collect`](Tprof::collect) gives a profile
    /// with its samples ([`Profile::samples`]) and the calls counted per function. The trace
    /// type and its options do not apply.
    pub fn sample(mut self, options: runtime::sample::SampleOptions) -> ServerOptions {
        self.sample = Some(options);
        self
    }
}

impl ServerOptions {
    fn session_types(&self) -> TraceTypes {
        let types =
            self.trace_type
                .session_types_with(self.percentiles, self.call_tree, self.event_log);
        if self.outside_processes {
            types | TraceTypes::ANY_THREAD
        } else {
            types
        }
    }

    /// The session's options, or why they cannot be.
    fn session_options(&self) -> Result<SessionOptions, ServerError> {
        if !SessionOptions::PRECISIONS.contains(&self.percentile_precision) {
            return Err(ServerError::Session(SessionError::HistogramPrecision {
                significant_figures: self.percentile_precision,
            }));
        }
        Ok(SessionOptions::new().histogram_precision(self.percentile_precision))
    }
}

/// Why a server request failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerError {
    /// A server with that name already runs: here it is.
    AlreadyStarted(Tprof),
    /// The name is registered to a process that is not a tprof server.
    NameTaken {
        /// The name asked for.
        name: String,
        /// The process that holds it.
        pid: Pid,
    },
    /// The server could not start.
    Start(StartError),
    /// Its trace session could not be opened.
    Session(SessionError),
    /// `pause` while paused (tprof's `not_running`).
    NotRunning,
    /// `resume` while running (tprof's `not_paused`).
    NotPaused,
    /// A pattern matched nothing, or cleared a module not traced.
    Pattern(PatternError),
    /// A process to trace was not found.
    Flags(FlagError),
    /// The server could not be reached (it stopped, or never ran).
    Call(CallError),
    /// The server could not be stopped (it had stopped already, or never ran).
    Stop(StopError),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::AlreadyStarted(t) => {
                write!(
                    f,
                    "a tprof server named `{}` already runs as {}",
                    t.name, t.pid
                )
            }
            ServerError::NameTaken { name, pid } => write!(
                f,
                "cannot start a tprof server named `{name}`: the name is taken by {pid}, which \
                 is not a tprof server; choose another name (ServerOptions::name)"
            ),
            ServerError::Start(e) => write!(f, "cannot start the tprof server: {e}"),
            ServerError::Session(e) => write!(f, "cannot start the tprof server: {e}"),
            ServerError::NotRunning => f.write_str("tprof is paused already (not running)"),
            ServerError::NotPaused => f.write_str("tprof is not paused"),
            ServerError::Pattern(e) => write!(f, "{e}"),
            ServerError::Flags(e) => write!(f, "{e}"),
            ServerError::Call(e) => write!(f, "the tprof server did not answer: {e}"),
            ServerError::Stop(e) => write!(f, "cannot stop the tprof server: {e}"),
        }
    }
}

impl std::error::Error for ServerError {}

enum Request {
    SetPattern(TracePattern),
    ClearPattern(TracePattern),
    TraceMap,
    EnableTrace(ProcessSpec, bool),
    DisableTrace(ProcessSpec),
    Pause,
    Resume,
    Restart,
    Collect,
}

enum Reply {
    Matched(Result<usize, PatternError>),
    Map(TraceMap),
    Flags(Result<FlagOutcome, FlagError>),
    Done(Result<(), ServerError>),
    Profile(Box<Profile>),
}

/// The server's session: a trace session, or a sample session (and the trace session under
/// it). Shared with the blocking thread a collect runs on.
#[derive(Clone)]
enum Session {
    Trace(Arc<TraceSession>),
    Sample(Arc<runtime::sample::SampleSession>),
}

impl Session {
    /// What the session gathered, as a profile of `trace_type`.
    fn collect(&self, trace_type: TraceType) -> Profile {
        let mut profile = match self {
            Session::Trace(session) => Profile::from_session(session, trace_type, &[]),
            Session::Sample(sampler) => {
                Profile::from_snapshot(&sampler.snapshot(), TraceType::CallCount, &[])
            }
        };
        let trace = match self {
            Session::Trace(s) => s,
            Session::Sample(s) => s.trace(),
        };
        profile.outside_in_tables = trace.types().contains(TraceTypes::ANY_THREAD);
        profile
    }
}

/// The server process's state.
struct TprofServer {
    session: Session,
    trace_type: TraceType,
    paused: bool,
}

/// What a server starts with: its trace type, session types and options, and the sample
/// options in sample mode.
type ServerArgs = (
    TraceType,
    TraceTypes,
    SessionOptions,
    Option<runtime::sample::SampleOptions>,
);

impl TprofServer {
    /// The trace session: the server's own, or its sample session's.
    fn trace(&self) -> &TraceSession {
        match &self.session {
            Session::Trace(s) => s,
            Session::Sample(s) => s.trace(),
        }
    }
}

impl GenServer for TprofServer {
    type Args = ServerArgs;
    type Call = Request;
    type Reply = Reply;
    type Cast = ();

    async fn init((trace_type, types, options, sample): ServerArgs) -> Result<Self, ExitReason> {
        let node = NodeHandle::current().ok_or(ExitReason::NoProc)?;
        let session = match sample {
            Some(sample) => node
                .sample_session(sample)
                .map(|s| Session::Sample(Arc::new(s)))
                .map_err(|e| ExitReason::custom(e.to_string()))?,
            None => node
                .trace_session_with_options(types, options)
                .map(|s| Session::Trace(Arc::new(s)))
                .map_err(|e| ExitReason::custom(e.to_string()))?,
        };
        Ok(TprofServer {
            session,
            trace_type,
            paused: false,
        })
    }

    async fn handle_call(
        &mut self,
        request: Request,
        _from: &mut Caller<Reply>,
    ) -> CallReply<Reply> {
        let reply = match request {
            Request::SetPattern(p) => Reply::Matched(self.trace().set_pattern(&p)),
            Request::ClearPattern(p) => Reply::Matched(self.trace().clear_pattern(&p)),
            Request::TraceMap => Reply::Map(self.trace().trace_map()),
            Request::EnableTrace(spec, on_spawn) => {
                Reply::Flags(self.trace().enable_trace(spec, on_spawn))
            }
            Request::DisableTrace(spec) => Reply::Flags(self.trace().disable_trace(spec)),
            Request::Pause => Reply::Done(if self.paused {
                Err(ServerError::NotRunning)
            } else {
                self.trace().pause();
                self.paused = true;
                Ok(())
            }),
            Request::Resume => Reply::Done(if self.paused {
                self.trace().resume();
                self.paused = false;
                Ok(())
            } else {
                Err(ServerError::NotPaused)
            }),
            Request::Restart => {
                self.trace().restart();
                if let Session::Sample(sampler) = &self.session {
                    sampler.clear();
                }
                self.paused = false;
                Reply::Done(Ok(()))
            }
            Request::Collect => {
                // On a blocking thread: a collect of many processes takes a while, and would
                // take one of the node's workers away from its processes for that long. The
                // server waits for it, so requests are still handled one at a time.
                let (session, trace_type) = (self.session.clone(), self.trace_type);
                let collect = tokio::task::spawn_blocking(move || {
                    runtime::trace::without_tracing(|| session.collect(trace_type))
                });
                match collect.await {
                    Ok(profile) => Reply::Profile(Box::new(profile)),
                    // A panic while collecting is the server's, as when it ran here.
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(_) => return CallReply::Stop(ExitReason::Shutdown, None),
                }
            }
        };
        CallReply::Reply(reply)
    }
}

/// Whether `pid` runs a tprof server (a gen_server's initial call is its type).
fn is_tprof_server(pid: Pid) -> bool {
    runtime::process_info(pid)
        .is_some_and(|info| info.initial_call == std::any::type_name::<TprofServer>())
}

/// A running tprof server: tprof's server-aided API.
///
/// Its methods call the server (a gen_server), so they are async; from a plain thread use
/// [`Node::block_on`](runtime::Node::block_on).
///
/// ```
/// use runtime::Node;
/// use runtime::trace::{ProcessSpec, TracePattern};
/// use tprof::{ServerOptions, Tprof, TraceType};
///
/// #[runtime::traced]
/// fn work(n: u64) -> u64 { n + 1 }
///
/// let node = Node::new().unwrap();
/// let tprof = node.block_on(Tprof::start(&node, ServerOptions::new())).unwrap();
/// node.block_on(tprof.set_pattern(TracePattern::function(module_path!(), "work"))).unwrap();
/// node.run(async { (0..5).map(work).sum::<u64>() }).unwrap();
/// let profile = node.block_on(tprof.collect()).unwrap();
/// assert_eq!(profile.function("work").unwrap().entries[0].calls, 5);
/// node.block_on(tprof.stop()).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tprof {
    pid: Pid,
    name: String,
}

impl Tprof {
    /// Starts a server on `node` (not linked to anything), registered under the options'
    /// name. tprof's `start/1`.
    ///
    /// # Errors
    /// [`ServerError::AlreadyStarted`] with the running server when one has that name;
    /// [`ServerError::Start`] when it could not start (call_memory without the allocator);
    /// [`ServerError::Session`] for a percentile precision out of range.
    pub async fn start(node: &NodeHandle, options: ServerOptions) -> Result<Tprof, ServerError> {
        let started = gen_server::start_on::<TprofServer>(
            node,
            (
                options.trace_type,
                options.session_types(),
                options.session_options()?,
                options.sample.clone(),
            ),
            StartOptions::new().name(options.name.as_str()),
        )
        .await;
        Tprof::started(started, options.name)
    }

    /// Starts a server linked to the calling process. tprof's `start_link/1`.
    ///
    /// # Errors
    /// As [`Tprof::start`].
    pub async fn start_link(options: ServerOptions) -> Result<Tprof, ServerError> {
        let started = gen_server::start_link::<TprofServer>(
            (
                options.trace_type,
                options.session_types(),
                options.session_options()?,
                options.sample.clone(),
            ),
            StartOptions::new().name(options.name.as_str()),
        )
        .await;
        Tprof::started(started, options.name)
    }

    fn started(
        started: Result<Server<TprofServer>, StartError>,
        name: String,
    ) -> Result<Tprof, ServerError> {
        match started {
            Ok(server) => Ok(Tprof {
                pid: server.pid(),
                name,
            }),
            Err(StartError::AlreadyStarted { pid, .. }) if is_tprof_server(pid) => {
                Err(ServerError::AlreadyStarted(Tprof { pid, name }))
            }
            Err(StartError::AlreadyStarted { pid, .. }) => {
                Err(ServerError::NameTaken { name, pid })
            }
            Err(e) => Err(ServerError::Start(e)),
        }
    }

    /// The tprof server registered as `name` on `node`, if one runs (the default server:
    /// [`DEFAULT_NAME`]); `None` when no process, or a process that is not a tprof server,
    /// has that name.
    pub fn whereis(node: &NodeHandle, name: &str) -> Option<Tprof> {
        node.whereis(name)
            .filter(|pid| is_tprof_server(*pid))
            .map(|pid| Tprof {
                pid,
                name: name.to_owned(),
            })
    }

    /// The server's process.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Calls the server, unseen by every trace session: the profiler's own calls never show
    /// in a profile.
    async fn call(&self, request: Request) -> Result<Reply, ServerError> {
        let call = gen_server::call::<TprofServer>(self.pid, request, Timeout::Infinity);
        crate::adhoc::Unseen(Box::pin(call))
            .await
            .map_err(ServerError::Call)
    }

    async fn done(&self, request: Request) -> Result<(), ServerError> {
        match self.call(request).await? {
            Reply::Done(done) => done,
            _ => unreachable!("the server answers this request with Done"),
        }
    }

    /// Traces the functions `pattern` matches; returns how many it matched.
    ///
    /// # Errors
    /// [`ServerError::Pattern`] when it matches nothing.
    pub async fn set_pattern(&self, pattern: TracePattern) -> Result<usize, ServerError> {
        match self.call(Request::SetPattern(pattern)).await? {
            Reply::Matched(r) => r.map_err(ServerError::Pattern),
            _ => unreachable!("the server answers set_pattern with Matched"),
        }
    }

    /// Stops tracing the functions `pattern` matches; returns how many.
    ///
    /// # Errors
    /// [`ServerError::Pattern`] when the module is not traced.
    pub async fn clear_pattern(&self, pattern: TracePattern) -> Result<usize, ServerError> {
        match self.call(Request::ClearPattern(pattern)).await? {
            Reply::Matched(r) => r.map_err(ServerError::Pattern),
            _ => unreachable!("the server answers clear_pattern with Matched"),
        }
    }

    /// The traced functions by module.
    ///
    /// # Errors
    /// [`ServerError::Call`] when the server is gone.
    pub async fn get_trace_map(&self) -> Result<TraceMap, ServerError> {
        match self.call(Request::TraceMap).await? {
            Reply::Map(m) => Ok(m),
            _ => unreachable!("the server answers get_trace_map with Map"),
        }
    }

    /// Traces the processes `spec` names (call_time, call_memory); with `set_on_spawn`, their
    /// children too. Returns the count, and for lists the failures in input order. Every call
    /// they make once it has returned is measured: polls of theirs running when it was asked
    /// end first ([`TraceSession::enable_trace`]).
    ///
    /// # Errors
    /// [`ServerError::Flags`] for a single pid or name that is not alive.
    pub async fn enable_trace(
        &self,
        spec: impl Into<ProcessSpec>,
        set_on_spawn: bool,
    ) -> Result<FlagOutcome, ServerError> {
        match self
            .call(Request::EnableTrace(spec.into(), set_on_spawn))
            .await?
        {
            Reply::Flags(r) => r.map_err(ServerError::Flags),
            _ => unreachable!("the server answers enable_trace with Flags"),
        }
    }

    /// Stops tracing the processes `spec` names; what they gathered is kept.
    ///
    /// # Errors
    /// As [`Tprof::enable_trace`].
    pub async fn disable_trace(
        &self,
        spec: impl Into<ProcessSpec>,
    ) -> Result<FlagOutcome, ServerError> {
        match self.call(Request::DisableTrace(spec.into())).await? {
            Reply::Flags(r) => r.map_err(ServerError::Flags),
            _ => unreachable!("the server answers disable_trace with Flags"),
        }
    }

    /// Stops gathering, keeping the data; once it returns, [`Tprof::collect`] is stable.
    ///
    /// # Errors
    /// [`ServerError::NotRunning`] when already paused.
    pub async fn pause(&self) -> Result<(), ServerError> {
        self.done(Request::Pause).await
    }

    /// Gathers again after [`Tprof::pause`], keeping the data (tprof's `continue`).
    ///
    /// # Errors
    /// [`ServerError::NotPaused`] when not paused.
    #[doc(alias = "continue")]
    pub async fn resume(&self) -> Result<(), ServerError> {
        self.done(Request::Resume).await
    }

    /// Clears the data and gathers (also after a pause).
    ///
    /// # Errors
    /// [`ServerError::Call`] when the server is gone.
    pub async fn restart(&self) -> Result<(), ServerError> {
        self.done(Request::Restart).await
    }

    /// What the server gathered so far, as a raw profile. Never stops the processes.
    ///
    /// # Errors
    /// [`ServerError::Call`] when the server is gone.
    pub async fn collect(&self) -> Result<Profile, ServerError> {
        match self.call(Request::Collect).await? {
            Reply::Profile(p) => Ok(*p),
            _ => unreachable!("the server answers collect with Profile"),
        }
    }

    /// Stops the server and returns once it has ended, as tprof's `stop/0` (`gen_server:stop`):
    /// its session is closed, tracing it enabled is switched off, its data is dropped and its
    /// name is free, so a [`Tprof::start`] right after it starts a new server.
    ///
    /// # Errors
    /// [`ServerError::Stop`] when the server is gone already.
    pub async fn stop(&self) -> Result<(), ServerError> {
        let stop = gen_server::stop(self.pid, ExitReason::Normal, Timeout::Infinity);
        crate::adhoc::Unseen(Box::pin(stop))
            .await
            .map_err(ServerError::Stop)
    }
}
