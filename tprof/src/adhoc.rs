//! Ad-hoc profiling: `profile(fun, options)` runs `fun` in a new process under its own trace
//! session and reports what it did.

use std::fmt;
use std::future::Future;
use std::io::{self, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use runtime::trace::{
    PatternError, ProcessSpec, SessionError, SessionOptions, TracePattern, TraceSession,
};
use runtime::{ExitReason, Node, NodeError, NodeHandle, SpawnError, SpawnOptions};

use crate::format::format;
use crate::inspect::{Aggregate, SortBy, inspect};
use crate::profile::{Profile, TraceType};

pub use runtime::ProcessRef;

/// Extra processes to trace besides the profiled one (tprof's `rootset`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RootSet {
    /// None.
    #[default]
    None,
    /// These processes (a name that is not registered is skipped, as tprof skips it).
    Processes(Vec<ProcessRef>),
    /// Every process of the node, existing and new.
    All,
    /// Every process that exists when profiling starts.
    Existing,
    /// Every process spawned while profiling.
    New,
}

/// What `profile` does with the data (tprof's `report`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// Print per process, sorted (the default: by percent, ascending).
    Process(SortBy),
    /// Print all processes together, sorted.
    Total(SortBy),
    /// Print nothing: the raw profile is in the [`Outcome`].
    Return,
}

impl Default for Report {
    fn default() -> Report {
        Report::Process(SortBy::default())
    }
}

/// The options of [`profile`], with tprof's defaults: call_count, no timeout, every traced
/// function (`_, _, _`), `set_on_spawn`, no rootset, a per-process report on stdout.
pub struct ProfileOptions {
    trace_type: TraceType,
    timeout: Option<Duration>,
    patterns: Vec<TracePattern>,
    set_on_spawn: bool,
    rootset: RootSet,
    report: Report,
    device: Option<Box<dyn Write + Send>>,
    percentiles: bool,
    percentile_precision: u8,
    call_tree: bool,
    event_log: bool,
    outside_processes: bool,
    sample: Option<runtime::sample::SampleOptions>,
    sample_report: crate::sample_report::PrintOptions,
}

impl Default for ProfileOptions {
    fn default() -> ProfileOptions {
        ProfileOptions {
            trace_type: TraceType::CallCount,
            timeout: None,
            patterns: Vec::new(),
            set_on_spawn: true,
            rootset: RootSet::None,
            report: Report::default(),
            device: None,
            percentiles: false,
            percentile_precision: SessionOptions::DEFAULT_PRECISION,
            call_tree: false,
            event_log: false,
            outside_processes: false,
            sample: None,
            sample_report: crate::sample_report::PrintOptions::default(),
        }
    }
}

impl fmt::Debug for ProfileOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProfileOptions")
            .field("trace_type", &self.trace_type)
            .field("timeout", &self.timeout)
            .field("patterns", &self.patterns)
            .field("set_on_spawn", &self.set_on_spawn)
            .field("rootset", &self.rootset)
            .field("report", &self.report)
            .field("percentiles", &self.percentiles)
            .field("percentile_precision", &self.percentile_precision)
            .field("call_tree", &self.call_tree)
            .field("event_log", &self.event_log)
            .field("outside_processes", &self.outside_processes)
            .field("sample", &self.sample)
            .field("sample_report", &self.sample_report)
            .field(
                "device",
                &self.device.as_ref().map_or("stdout", |_| "custom"),
            )
            .finish()
    }
}

impl ProfileOptions {
    /// tprof's defaults.
    pub fn new() -> ProfileOptions {
        ProfileOptions::default()
    }

    /// What to measure.
    pub fn trace_type(mut self, trace_type: TraceType) -> ProfileOptions {
        self.trace_type = trace_type;
        self
    }

    /// Stops the profiled process (drops its future inside it) after `timeout`; the outcome
    /// says so and the data gathered until then is returned. A process is stopped at its next
    /// poll boundary: code that never yields cannot be stopped, and `profile` waits for it.
    pub fn timeout(mut self, timeout: Duration) -> ProfileOptions {
        self.timeout = Some(timeout);
        self
    }

    /// Traces the functions `pattern` matches (may be given several times); without any, every
    /// traced function.
    pub fn pattern(mut self, pattern: TracePattern) -> ProfileOptions {
        self.patterns.push(pattern);
        self
    }

    /// Whether processes spawned by traced processes are traced too (call_time, call_memory).
    pub fn set_on_spawn(mut self, on: bool) -> ProfileOptions {
        self.set_on_spawn = on;
        self
    }

    /// Extra processes to trace.
    pub fn rootset(mut self, rootset: RootSet) -> ProfileOptions {
        self.rootset = rootset;
        self
    }

    /// What to print, or [`Report::Return`] to print nothing.
    pub fn report(mut self, report: Report) -> ProfileOptions {
        self.report = report;
        self
    }

    /// With call_time, also records each call's own time — exclusive of traced callees, as
    /// the time column counts it —, for p50 / p90 / p99 / max per process and function
    /// ([`Profile::percentiles`], and the columns of [`rich_report`](crate::rich_report)).
    /// Off by default: it costs a few nanoseconds per call more, and a histogram per process
    /// and function called (a few KiB at the default precision).
    pub fn percentiles(mut self, on: bool) -> ProfileOptions {
        self.percentiles = on;
        self
    }

    /// With [`percentiles`](Self::percentiles), the significant figures each histogram keeps
    /// (hdrhistogram's precision): 1 to 5, default
    /// [2](runtime::trace::SessionOptions::DEFAULT_PRECISION), each duration read to within
    /// one part in 10^`significant_figures`. Each figure more makes the histograms about ten
    /// times larger. Out of range, [`profile`] fails with
    /// [`SessionError::HistogramPrecision`](runtime::trace::SessionError::HistogramPrecision).
    pub fn percentile_precision(mut self, significant_figures: u8) -> ProfileOptions {
        self.percentile_precision = significant_figures;
        self
    }

    /// With call_time or call_memory, also measures per traced call path
    /// ([`Profile::call_tree`]): what the stack-shaped exports (flame graphs, speedscope,
    /// pprof) draw. Off by default: it costs a hash lookup per traced call more.
    pub fn call_tree(mut self, on: bool) -> ProfileOptions {
        self.call_tree = on;
        self
    }

    /// With call_time or call_memory, also keeps each process's event log: every traced frame
    /// entered and left, with its time ([`Profile::event_logs`]), for timelines (the `chrome`
    /// and `html` exports). Off by default; bounded per process
    /// ([`EVENT_LOG_CAPACITY`](runtime::trace::EVENT_LOG_CAPACITY)).
    pub fn event_log(mut self, on: bool) -> ProfileOptions {
        self.event_log = on;
        self
    }

    /// Shows the traced calls made outside any process in tprof's per-process tables, as
    /// groups of their own ([`OUTSIDE_PROCESSES`](crate::OUTSIDE_PROCESSES)), and measures
    /// them on every thread, not only on the node's (`main`, the threads of a runtime the node
    /// does not own: [`TraceTypes::ANY_THREAD`](runtime::trace::TraceTypes::ANY_THREAD)).
    /// Off by default: the node's threads' calls outside processes are measured all the same
    /// — in the raw profile, the exports and [`rich_report`](crate::rich_report) — and
    /// tprof's tables, printed as OTP prints them, end with a line saying how many calls they
    /// leave out.
    pub fn outside_processes(mut self, on: bool) -> ProfileOptions {
        self.outside_processes = on;
        self
    }

    /// Sample mode instead of trace mode: a sample session with these options (the CPU
    /// sampler at 99 Hz by default, see [`runtime::sample`]) samples the profiled process and
    /// those it spawns; the profile holds the samples ([`Profile::samples`]) and the calls
    /// of each traced function (call_count), and the report is Julia's `Profile.print` tree
    /// ([`crate::sample_report`]). The trace type, percentiles, call tree and event log do
    /// not apply. A CPU profile carries what its samples could see
    /// ([`SampleSet::cpu_truth`](crate::samples::SampleSet::cpu_truth)); the report's header
    /// says it, and what they could not see is also told once on stderr.
    ///
    /// ```
    /// # #[cfg(target_os = "linux")] {
    /// use runtime::sample::SampleOptions;
    ///
    /// #[runtime::traced]
    /// fn busy(n: u64) -> u64 { (0..n).fold(0, |a, i| a ^ i.wrapping_mul(31)) }
    ///
    /// let outcome = tprof::profile(
    ///     || async { (0..200).map(|_| busy(50_000)).sum::<u64>() },
    ///     tprof::ProfileOptions::new()
    ///         .sample(SampleOptions::new().hz(999))
    ///         .report(tprof::Report::Return),
    /// )
    /// .unwrap();
    /// assert!(outcome.result.is_ok());
    /// assert_eq!(outcome.profile.samples.sources.len(), 1);
    /// # }
    /// ```
    pub fn sample(mut self, options: runtime::sample::SampleOptions) -> ProfileOptions {
        self.sample = Some(options);
        self
    }

    /// How the report of a profile in sample mode ([`sample`](Self::sample)) is laid out:
    /// Julia's `Profile.print` options (default: [`PrintOptions::default`], the tree of every
    /// sample).
    ///
    /// [`PrintOptions::default`]: crate::sample_report::PrintOptions
    pub fn sample_report(mut self, options: crate::sample_report::PrintOptions) -> ProfileOptions {
        self.sample_report = options;
        self
    }

    /// Where to print (default stdout).
    pub fn device(mut self, device: impl Write + Send + 'static) -> ProfileOptions {
        self.device = Some(Box::new(device));
        self
    }
}

/// Why the profiled function produced no result.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// It ran past the timeout and was stopped.
    Timeout(Duration),
    /// It panicked; the panic message.
    Panic(String),
    /// Its process was ended by an exit signal or a limit.
    Exit(ExitReason),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Timeout(d) => write!(f, "the profiled function timed out after {d:?}"),
            Failure::Panic(msg) => write!(f, "the profiled function panicked: {msg}"),
            Failure::Exit(reason) => write!(f, "the profiled process exited: {reason}"),
        }
    }
}

impl std::error::Error for Failure {}

/// What [`profile`] returns: the function's result (or why there is none) and the profile
/// gathered, whatever happened — also when the report could not be printed.
#[derive(Debug)]
pub struct Outcome<T> {
    /// The function's output, or why it has none.
    pub result: Result<T, Failure>,
    /// The raw profile (also when it was printed).
    pub profile: Profile,
    /// Why the report could not be printed (standard output closed, a pipe to `head` that
    /// has ended, a device that failed), if it could not; `None` when it was printed or
    /// [`Report::Return`] asked for none. The result and the profile are here all the same.
    pub print_error: Option<io::Error>,
}

/// Why profiling could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProfileError {
    /// No trace session could be opened (too many, or call_memory without the allocator).
    Session(SessionError),
    /// A pattern matched no traced function.
    Pattern(PatternError),
    /// The private node could not start.
    Node(NodeError),
    /// The profiled process could not be spawned.
    Spawn(SpawnError),
    /// The sample session could not open.
    Sample(runtime::sample::SampleError),
    /// A blocking entry point ([`profile`], [`profile_on`]) was called on a thread that runs
    /// async code (a tokio runtime's task or `block_on`, a process), where blocking the thread
    /// is not allowed: `instead` is the async entry point to await there. (A thread of tokio's
    /// blocking pool, [`tokio::task::spawn_blocking`], may block.)
    InAsyncContext {
        /// The blocking function called, e.g. `tprof::profile`.
        function: &'static str,
        /// What to call instead, e.g. `tprof::profile_async`.
        instead: &'static str,
    },
    /// [`profile_async`] was polled outside any process and outside any tokio runtime: there
    /// is nothing to run the function on.
    NoRuntime,
    /// On a thread of tokio's blocking pool, the thread a blocking entry point blocks on
    /// could not be started.
    Thread(io::Error),
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileError::Session(e) => write!(f, "cannot profile: {e}"),
            ProfileError::Pattern(e) => write!(f, "cannot profile: {e}"),
            ProfileError::Node(e) => write!(f, "cannot profile: {e}"),
            ProfileError::Spawn(e) => write!(f, "cannot profile: {e}"),
            ProfileError::Sample(e) => write!(f, "cannot profile: {e}"),
            ProfileError::InAsyncContext { function, instead } => write!(
                f,
                "{function} blocks this thread until the profile is done, so it cannot be \
                 called on a thread that runs async code (an async fn, #[tokio::main], \
                 #[tokio::test], a process of the runtime crate): call `{instead}(..).await` \
                 there instead, or call {function} in `tokio::task::spawn_blocking(..)`"
            ),
            ProfileError::Thread(e) => {
                write!(f, "cannot profile: cannot start a thread to wait on: {e}")
            }
            ProfileError::NoRuntime => write!(
                f,
                "tprof::profile_async runs the function on the current tokio runtime, and \
                 there is none: await it in #[tokio::main], #[tokio::test] or a process, or \
                 call tprof::profile from synchronous code"
            ),
        }
    }
}

impl std::error::Error for ProfileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProfileError::Session(e) => Some(e),
            ProfileError::Pattern(e) => Some(e),
            ProfileError::Node(e) => Some(e),
            ProfileError::Spawn(e) => Some(e),
            ProfileError::Sample(e) => Some(e),
            ProfileError::Thread(e) => Some(e),
            ProfileError::InAsyncContext { .. } | ProfileError::NoRuntime => None,
        }
    }
}

/// Profiles `fun` on a private node made for the call (so parallel tests never see each
/// other), blocking until it ends: tprof's `profile/2`. From async code, await
/// [`profile_async`] instead.
///
/// ```
/// use tprof::{ProfileOptions, Report, TraceType};
///
/// #[runtime::traced]
/// fn double(n: u64) -> u64 { n * 2 }
///
/// let outcome = tprof::profile(
///     || async { (0..10).map(double).sum::<u64>() },
///     ProfileOptions::new()
///         .pattern(runtime::trace::TracePattern::function(module_path!(), "double"))
///         .report(Report::Return),
/// )
/// .unwrap();
/// assert_eq!(outcome.result, Ok(90));
/// assert_eq!(outcome.profile.function("double").unwrap().entries[0].calls, 10);
/// ```
///
/// # Errors
/// [`ProfileError`] when profiling could not run; what the function did (a panic, a timeout)
/// is in the [`Outcome`], and so is a report that could not be printed
/// ([`Outcome::print_error`]). Called on a thread that runs async code — a task, the body of
/// `#[tokio::main]` or `#[tokio::test]`, a process —, where it would have to block a thread
/// the runtime drives, [`ProfileError::InAsyncContext`], which names [`profile_async`].
///
/// On a thread of tokio's blocking pool ([`tokio::task::spawn_blocking`], or a task's
/// [`tokio::task::block_in_place`]), blocking is what the thread is for, and it runs (on a
/// thread of its own, while this one waits). Two places where tokio allows blocking look like
/// async code to it, and are refused all the same: a bare `Handle::enter` guard, and a
/// `block_in_place` called from a `block_on`'s own future (a `#[tokio::test(flavor =
/// "multi_thread")]` body); `spawn_blocking` works there.
pub fn profile<F, Fut, T>(fun: F, options: ProfileOptions) -> Result<Outcome<T>, ProfileError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    profile_blocking(fun, options, "tprof::profile", "tprof::profile_async")
}

/// [`profile`], with the names a [`ProfileError::InAsyncContext`] error gives: the blocking
/// entry point called and the async one to call instead.
pub(crate) fn profile_blocking<F, Fut, T>(
    fun: F,
    options: ProfileOptions,
    function: &'static str,
    instead: &'static str,
) -> Result<Outcome<T>, ProfileError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    block_here(function, instead, move || {
        let node = Node::new().map_err(ProfileError::Node)?;
        let handle = node.handle().clone();
        node.block_on(profile_async_on(&handle, fun, options))
    })?
}

/// Profiles `fun` on `node`, blocking until it ends. Call it where [`profile`] runs: outside
/// any tokio runtime, or on a thread of a blocking pool (`tokio::task::spawn_blocking`, the
/// node's own runtime's included); from async code, await [`profile_async`] in a process of
/// the node.
///
/// # Errors
/// As [`profile`].
pub fn profile_on<F, Fut, T>(
    node: &Node,
    fun: F,
    options: ProfileOptions,
) -> Result<Outcome<T>, ProfileError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    block_here("tprof::profile_on", "tprof::profile_async", move || {
        node.block_on(profile_async_on(node.handle(), fun, options))
    })?
}

/// Runs `block`, which blocks this thread until a profile is done, where tokio lets a thread
/// block: outside any tokio runtime, here; on a thread of a runtime's blocking pool
/// ([`tokio::task::spawn_blocking`], or a worker inside [`tokio::task::block_in_place`]), on a
/// thread of its own. On a thread that runs async code, [`ProfileError::InAsyncContext`]:
/// blocking there would panic (tokio forbids starting or blocking on a runtime from a thread
/// that drives one) or stall the tasks of this runtime.
///
/// tokio has no public "may this thread block?", so it is read from two documented ones.
/// [`tokio::runtime::worker_index`] is `Some` on a thread that runs the runtime's tasks (a
/// multi-thread worker, or the thread of a current-thread runtime's `block_on`), and `None`
/// elsewhere, a worker inside `block_in_place` included; [`tokio::task::try_id`] is `Some`
/// while a task is polled, a blocking one included, and `None` in a `block_on`'s own future
/// (a `#[tokio::main]` body) or under a bare `Handle::enter`. So a thread with no worker index
/// that is running a task runs a blocking closure, and may block; a thread with a worker index
/// runs async tasks, and a thread in a runtime that runs no task is a `block_on`'s (or
/// entered by hand: tokio cannot tell, and that one is refused too).
///
/// A blocking closure can still be inside the runtime again, with its task's id showing: a
/// `Handle::block_on` it called, or a `LocalSet` task on a `block_on`'s thread. Blocking on the
/// node there would panic, so `block` runs on a thread of its own, outside every runtime, and
/// this one waits for it: a `Handle::block_on` runs only the future that called, which waits
/// anyway; a `LocalSet`'s other tasks wait too (the one stall left, and a rare place to
/// profile from).
fn block_here<R: Send>(
    function: &'static str,
    instead: &'static str,
    block: impl FnOnce() -> R + Send,
) -> Result<R, ProfileError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Ok(block());
    }
    let blocking_closure =
        tokio::runtime::worker_index().is_none() && tokio::task::try_id().is_some();
    if !blocking_closure {
        return Err(ProfileError::InAsyncContext { function, instead });
    }
    std::thread::scope(|scope| {
        let blocking = std::thread::Builder::new()
            .name("tprof-blocking".to_owned())
            .spawn_scoped(scope, block)
            .map_err(ProfileError::Thread)?;
        // `block` catches the profiled code's panics: one here is tprof's own, passed on.
        Ok(blocking
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

/// Profiles `fun` from async code: the entry point for `#[tokio::main]`, `#[tokio::test]`
/// and processes, where the blocking [`profile`] cannot run. Inside a process, it profiles
/// on that process's node (its registered servers can be in the rootset); elsewhere, on a
/// private node started on the current tokio runtime for the call (which must have its time
/// driver enabled, as `#[tokio::main]` and `#[tokio::test]` do), stopped when it returns.
/// Nothing the profiler does here shows in the profile.
///
/// ```
/// use tprof::{ProfileOptions, Report};
///
/// #[runtime::traced]
/// fn double(n: u64) -> u64 { n * 2 }
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() {
///     let outcome = tprof::profile_async(
///         || async { (0..10).map(double).sum::<u64>() },
///         ProfileOptions::new()
///             .pattern(runtime::trace::TracePattern::function(module_path!(), "double"))
///             .report(Report::Return),
///     )
///     .await
///     .unwrap();
///     assert_eq!(outcome.result, Ok(90));
///     assert_eq!(outcome.profile.function("double").unwrap().entries[0].calls, 10);
/// }
/// ```
///
/// # Errors
/// As [`profile`]; polled outside any process and any tokio runtime (by another executor),
/// [`ProfileError::NoRuntime`].
pub async fn profile_async<F, Fut, T>(
    fun: F,
    options: ProfileOptions,
) -> Result<Outcome<T>, ProfileError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    if let Some(node) = NodeHandle::current() {
        return profile_async_on(&node, fun, options).await;
    }
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| ProfileError::NoRuntime)?;
    // Dropped on return: it kills what the function left running, never blocking.
    let node = Node::start_on(runtime);
    let handle = node.handle().clone();
    profile_async_on(&handle, fun, options).await
}

/// How long a profile waits, at most, once the profiled function has ended, for measured polls
/// still running elsewhere (see [`runtime::trace::TraceSession::settle`]).
const SETTLE_AFTER_RUN: std::time::Duration = std::time::Duration::from_secs(2);

/// A future polled with every trace session looking away.
pub(crate) struct Unseen<F>(pub(crate) Pin<Box<F>>);

impl<F: Future> Future for Unseen<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let inner = self.0.as_mut();
        runtime::trace::without_tracing(|| inner.poll(cx))
    }
}

/// The session a run profiles with: a trace session, or a sample session (and its own).
enum Opened {
    Trace(TraceSession),
    Sample(runtime::sample::SampleSession),
}

impl Opened {
    fn trace(&self) -> &TraceSession {
        match self {
            Opened::Trace(session) => session,
            Opened::Sample(sampler) => sampler.trace(),
        }
    }
}

async fn profile_async_on<F, Fut, T>(
    node: &NodeHandle,
    fun: F,
    mut options: ProfileOptions,
) -> Result<Outcome<T>, ProfileError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let mut types = options.trace_type.session_types_with(
        options.percentiles,
        options.call_tree,
        options.event_log,
    );
    if options.outside_processes {
        types = types | runtime::trace::TraceTypes::ANY_THREAD;
    }
    let started = std::time::SystemTime::now();
    let clock = std::time::Instant::now();
    let session_options = SessionOptions::new().histogram_precision(options.percentile_precision);
    let opened = match &options.sample {
        Some(sample) => runtime::trace::without_tracing(|| node.sample_session(sample.clone()))
            .map(Opened::Sample)
            .map_err(ProfileError::Sample)?,
        None => runtime::trace::without_tracing(|| {
            node.trace_session_with_options(types, session_options)
        })
        .map(Opened::Trace)
        .map_err(ProfileError::Session)?,
    };
    let session = opened.trace();
    if options.patterns.is_empty() {
        options.patterns.push(TracePattern::all());
    }
    for pattern in &options.patterns {
        session
            .set_pattern(pattern)
            .map_err(ProfileError::Pattern)?;
    }
    let on_spawn = options.set_on_spawn;
    let rootset = match &options.rootset {
        RootSet::None => None,
        RootSet::All => Some(ProcessSpec::All),
        RootSet::Existing => Some(ProcessSpec::Existing),
        RootSet::New => Some(ProcessSpec::New),
        RootSet::Processes(list) => Some(ProcessSpec::List(
            list.iter().cloned().map(ProcessSpec::from).collect(),
        )),
    };
    if let Some(spec) = &rootset {
        // Failures (a process that ended, a name not registered) are skipped, as tprof does.
        let _ = session.enable_trace(spec.clone(), on_spawn);
    }
    let slot: Arc<Mutex<Option<T>>> = Arc::new(Mutex::new(None));
    let out = Arc::clone(&slot);
    let (pid, watch) = runtime::trace::without_tracing(|| {
        node.spawn_watched(
            async move {
                // A panic or an exit ends the process: its exit reason says which.
                let result = fun().await;
                *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            },
            SpawnOptions::new()
                .traced_by(session, on_spawn)
                .initial_call(std::any::type_name::<F>()),
        )
    })
    .map_err(ProfileError::Spawn)?;
    let mut timed_out = None;
    let reason = match options.timeout {
        None => Unseen(Box::pin(watch.wait())).await,
        Some(limit) => match tokio::time::timeout(limit, Unseen(Box::pin(watch.wait()))).await {
            Ok(reason) => reason,
            Err(_) => {
                // Its future is dropped inside it; what it gathered so far stays.
                timed_out = Some(limit);
                runtime::trace::without_tracing(|| node.exit(pid, ExitReason::Kill));
                Unseen(Box::pin(watch.wait())).await
            }
        },
    };
    if let Some(spec) = rootset {
        let _ = session.disable_trace(spec);
    }
    // The profiled process has ended, but a process it talked to may still be finishing the
    // poll that answered it (a server's poll sends the reply, then ends): wait for the polls
    // in flight, generously, so that the profile holds everything the function caused.
    session.settle(SETTLE_AFTER_RUN);
    let mut profile = match &opened {
        Opened::Trace(session) => Profile::from_session(session, options.trace_type, &["tprof"]),
        Opened::Sample(sampler) => {
            Profile::from_snapshot(&sampler.snapshot(), TraceType::CallCount, &["tprof"])
        }
    };
    profile.outside_in_tables = options.outside_processes;
    drop(opened);
    if let Some(p) = profile.processes.iter_mut().find(|p| p.pid == pid) {
        p.initial_call = std::any::type_name::<F>().to_owned();
    }
    let run_queue = profile.meta.runs.first().and_then(|r| r.run_queue);
    profile.meta.runs = vec![crate::Run {
        program: std::env::args().next().unwrap_or_default(),
        started_unix_ms: started
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        duration_ns: clock.elapsed().as_nanos() as u64,
        nodes: vec![node.id()],
        run_queue,
    }];
    let taken = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    let result = match (taken, timed_out, reason) {
        (Some(value), _, _) => Ok(value),
        (None, Some(limit), _) => Err(Failure::Timeout(limit)),
        (None, None, ExitReason::Panic(msg)) => Err(Failure::Panic(msg.to_string())),
        (None, None, reason) => Err(Failure::Exit(reason)),
    };
    let sort_and_aggregate = match options.report {
        Report::Return => None,
        Report::Process(sort) => Some((Aggregate::Process, sort)),
        Report::Total(sort) => Some((Aggregate::Total, sort)),
    };
    // A report that cannot be printed loses nothing: the error goes beside the outcome.
    let sampled = options.sample.is_some();
    // What the CPU samples could not see, told once (the report's header says it too).
    crate::samples::warn_once(&profile.samples);
    let print_error = sort_and_aggregate.and_then(|(aggregate, sort)| {
        let mut stdout;
        let device: &mut dyn Write = match options.device.as_mut() {
            Some(device) => device,
            None => {
                stdout = io::stdout().lock();
                &mut stdout
            }
        };
        if sampled {
            crate::sample_report::print(device, &profile, &options.sample_report)
        } else {
            format(device, &inspect(&profile, aggregate, sort))
        }
        .err()
    });
    Ok(Outcome {
        result,
        profile,
        print_error,
    })
}
