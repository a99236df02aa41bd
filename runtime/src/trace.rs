//! Traced functions: static callsites, the trace map's names, and trace patterns.
//!
//! `#[traced]` (re-exported as [`traced`](crate::traced)) gives each function a static
//! [`Callsite`] in the [`CALLSITES`] distributed slice, known before the function is ever
//! called, as `code:all_loaded()` knows a BEAM module's functions. A callsite names its
//! function as the trace map prints it, `module::path::function/arity`: methods of an `impl`
//! block are `Type::method`, trait methods `<Type as Trait>::method`, and the arity counts
//! `self`. A [`TracePattern`] selects callsites the way `erlang:trace_pattern` takes
//! `{Module, Function, Arity}` with `'_'` wildcards.
//!
//! # Cost
//!
//! A traced function that no trace session wants costs one relaxed load of its callsite's
//! session mask: [`enter`] and the first poll of [`Traced`] return at once when it is zero.
//! Measured with `cargo bench --bench traced_call` (a current-thread node, 2 busy cores):
//! 0.7–0.8 ns a call over the same function untraced (1.7–1.9 ns). Counting calls for one
//! session costs about 2 ns a call (a per-thread cache of the session's counters, checked
//! inline), more than the 1 ns aimed at; measuring a process costs about 18–25 ns a call for
//! call_time (two TSC reads are about 19 ns of it) and 6–11 ns for call_memory. In
//! instructions (callgrind, a current-thread node), an untraced call is 14, a disabled one 21,
//! call_count 35 (44 with two sessions), call_memory 99 and call_time 119 with its two TSC
//! reads; in call-tree mode, call_memory 292 and call_time 307. A helper task's poll that no
//! session measures costs one load more than an unmeasured one; a traced call outside any
//! process costs what it costs in a process for call_count (31 instructions), and for
//! call_time or call_memory about 700 instructions per outermost call (it is measured as a
//! poll of its own: begun, flushed and ended), nothing more per nested call.
//! A [`TraceSession`] sets its bit in the masks of the functions its patterns match, and counts
//! their calls.
//!
//! # Measuring processes: call_time and call_memory
//!
//! A session opened with [`TraceTypes::CALL_TIME`] or [`TraceTypes::CALL_MEMORY`]
//! ([`NodeHandle::trace_session_with`](crate::NodeHandle::trace_session_with)) measures the
//! processes it has a trace flag on ([`TraceSession::enable_trace`]), as tprof does:
//!
//! - time and memory go to the innermost traced function on the process's traced stack,
//!   exclusive of traced callees and inclusive of untraced ones; recursion is never counted
//!   twice;
//! - time counts only while the process is polled (not while it waits in `receive`, sleeps,
//!   or sits runnable in a queue), read from the TSC through `quanta` and kept in nanoseconds.
//!   It is wall time within the poll: if the OS takes the worker thread away in the middle of
//!   a poll, that time is counted too (see [call-time outliers](#call-time-outliers));
//! - memory is what the process allocates ([`crate::heap`]: words, bytes, blocks), so it needs
//!   [`CountingAlloc`](crate::CountingAlloc);
//! - every entry is a call; an `async fn` is entered at its first poll and left when it
//!   completes; a call already running when tracing starts is not counted;
//! - a panic unwinding through traced frames pops them, so the counts include the calls that
//!   panicked and the next process on that thread starts with an empty stack;
//! - a process's helper tasks ([`spawn_task`](crate::spawn_task),
//!   [`spawn_blocking`](crate::spawn_blocking)) work for it: their traced calls are measured
//!   into the process's figures, each of their polls (a blocking closure: its whole run) as
//!   one of the process's. They may run beside the process on other threads, so its time can
//!   add up to more than the wall time that passed; what they allocate is counted on their own
//!   thread (in a tally of that thread's, while a session measures them), never mixed with
//!   what the process allocates meanwhile.
//!
//! [`TraceSession::enable_trace`] is in effect once it returns: a poll decides as it begins
//! whom it is measured for, so the polls of the processes it traces that are running end
//! first, and every call they make afterwards is measured.
//! [`TraceSession::measurements`] reads the figures per process (ended ones included) while
//! processes run; [`TraceSession::pause`] makes them stable, keeping what was gathered
//! before it returns (a call made before `pause` in a poll that ends after it included).
//!
//! # Call-time outliers
//!
//! call_time reads the clock at each traced entry and exit during a poll, so a poll that the
//! OS preempts — more runnable threads than cores, another program, a page fault, a VM's host —
//! charges the time the thread was away to the function it was in: one call can show 12 ms
//! where its others take 38 µs. Such a call shows as a `max` far above `p99` in the
//! percentiles ([`TraceTypes::CALL_TIME_HISTOGRAMS`]) and as one long frame in an event log
//! ([`TraceTypes::CALL_EVENTS`]), and it raises the function's total and per-call figures in
//! proportion to how rare it is. Read totals of short runs with that in mind; profile on a
//! machine with a core per busy thread, or compare a function's median with its mean. The
//! runtime does not flag such polls: telling them apart needs the thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`, a system call of a few hundred nanoseconds) at both ends of
//! every poll, more than measuring the poll itself costs.
//!
//! # Outside processes
//!
//! Traced calls made outside any process — in `main`, in a plain tokio task, in
//! [`Node::block_on`](crate::Node::block_on) — are measured apart from the processes', so that
//! nothing a session wants is dropped silently: call_count counts them on their own
//! ([`TraceSession::outside_call_counts`]), and call_time and call_memory measure each
//! outermost traced call as a poll, in one entry per thread whose pid is
//! [`Pid::outside`](crate::Pid::outside). A thread of a node's own runtime (and one running
//! `Node::block_on`) belongs to the node; any other thread to the sessions opened with
//! [`TraceTypes::ANY_THREAD`], of any node. `outside.rs` has the details.
//!
//! ```
//! use runtime::Node;
//! use runtime::trace::{ProcessSpec, TracePattern, TraceTypes};
//!
//! #[runtime::traced]
//! fn parse(line: &str) -> usize { line.split(',').count() }
//!
//! let node = Node::new().unwrap();
//! let session = node.trace_session_with(TraceTypes::CALL_TIME).unwrap();
//! session.set_pattern(&TracePattern::function(module_path!(), "parse")).unwrap();
//! session.enable_trace(ProcessSpec::New, true).unwrap();
//! let pid = node.run(async { parse("a,b,c"); parse("d"); runtime::self_pid() }).unwrap();
//! let measured = session.measurements();
//! assert_eq!(measured[0].pid, pid);
//! assert_eq!(measured[0].functions[0].calls, 2);
//! ```

mod callsite;
pub mod env_run;
mod flags;
mod inflight;
mod measure;
mod outside;
pub(crate) mod paths;
mod pattern;
mod run_queue;
mod session;
mod sigcell;
mod snapshot;
mod stack;
mod tls;
pub(crate) mod tree;
pub(crate) mod unmeasured;

pub use callsite::{CALLSITES, Callsite, Frame, Traced, callsites, enter};
/// Traces a block as a call of its own, named by the string:
/// `traced!("parse_header", { .. })`, or `traced!("fetch", async { .. })` for an async block.
/// Its arity is 0.
pub use runtime_macros::traced_block as traced;

/// Runs `f` unseen by every trace session and with its allocations charged to no one: for a
/// profiler's own work done from inside a traced process (spawning the process it profiles,
/// say), so that it never shows in the profile.
pub fn without_tracing<R>(f: impl FnOnce() -> R) -> R {
    crate::heap::suppressed(|| crate::context::with_node_hidden(|| stack::with_measuring_off(f)))
}

/// Whether `#[traced]` instruments code in this build (false with the feature `no-trace`).
pub const INSTRUMENTED: bool = !cfg!(feature = "no-trace");
pub use flags::{FlagError, FlagOutcome, ProcessSpec};
pub(crate) use flags::{FlaggedProcess, TraceFlags, flags_at_spawn};
pub use measure::{
    CallEvent, CallEventKind, CallPath, CallPercentiles, CallTreeMeasurement, EVENT_LOG_CAPACITY,
    FunctionMeasurement, PathMeasurement, ProcessCallTree, ProcessEvents, ProcessMeasurement,
    TraceTypes,
};
pub(crate) use measure::{
    MEASURING_RESUMED, ProcTraceRef, Target, TracedProcess, begin_helper_poll, begin_poll,
    fold_ended, measuring, process_dropped, remember_name, sessions_measuring,
};
pub use pattern::{Part, TracePattern};
pub use run_queue::SnapshotRunQueue;
pub(crate) use session::{COMPILED_OUT, SessionNode, poll_measuring_on, record_call};
pub use session::{
    CallCount, MAX_SESSIONS, PatternError, SessionError, SessionOptions, TraceMap, TraceSession,
};
pub(crate) use snapshot::LIVE_NAME;
pub use snapshot::{
    Snapshot, SnapshotEvent, SnapshotFigures, SnapshotFunction, SnapshotPath, SnapshotPercentiles,
    SnapshotProcess, SnapshotTypes,
};
pub use stack::CAPACITY as STACK_CAPACITY;
pub(crate) use stack::{end_poll, read_in_signal};
