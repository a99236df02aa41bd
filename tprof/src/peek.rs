//! Peek: what every process is doing right now, on a signal, without stopping anything (Julia's
//! `Profile.peek_report`, for actors).
//!
//! After [`install`], `kill -USR1 <pid>` prints, on standard error, for each installed node:
//! every process (pid, registered name, state, mailbox length, live heap, what it was spawned
//! to run and the traced function it is in), then profiles the next second
//! ([`set_peek_duration`]) in sample mode — CPU samples of every process and of the workers'
//! native stacks — and prints Julia's report grouped by process.
//!
//! The signal handler only wakes a thread outside the runtime (signal-hook's self-pipe: no
//! lock, no allocation in the handler); that thread reads the process table and runs the
//! sampler, neither of which needs a worker, so peek answers while every worker is stuck in a
//! loop. It is off unless the program installs it ([`install`]) or the environment asks
//! ([`install_from_env`]: `TPROF_PEEK=1`), so a program that uses SIGUSR1 itself keeps it.
//!
//! [`peek_report`] does the same work on demand, without a signal.
//!
//! ```
//! let node = runtime::Node::new().unwrap();
//! let idle = node
//!     .handle()
//!     .spawn(async { let _: u8 = runtime::receive().await; })
//!     .unwrap();
//! node.handle().register("idle", idle).unwrap();
//! let report = tprof::peek::peek_report(node.handle(), std::time::Duration::from_millis(50));
//! assert!(report.contains("idle"));
//! assert!(report.contains(&idle.to_string()));
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use runtime::sample::{ProcessState, SampleOptions, Sampler};
use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{NodeHandle, Pid};

use crate::sample_report::{GroupBy, PrintOptions};
use crate::{Profile, TraceType};

/// How long peek profiles after printing the process table, in milliseconds.
static DURATION_MS: AtomicU64 = AtomicU64::new(1000);

/// The nodes peek reports on, and whether its thread runs.
static NODES: OnceLock<Mutex<Vec<NodeHandle>>> = OnceLock::new();

/// Why peek could not be installed.
#[derive(Debug)]
#[non_exhaustive]
pub enum PeekError {
    /// SIGUSR1's handler could not be installed.
    Signal(std::io::Error),
}

impl std::fmt::Display for PeekError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeekError::Signal(e) => write!(f, "cannot install peek's SIGUSR1 handler: {e}"),
        }
    }
}

impl std::error::Error for PeekError {}

/// Sets how long peek profiles after its process table (Julia's `set_peek_duration`; default
/// one second).
pub fn set_peek_duration(duration: Duration) {
    DURATION_MS.store(
        u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

/// How long peek profiles.
pub fn peek_duration() -> Duration {
    Duration::from_millis(DURATION_MS.load(Ordering::Relaxed))
}

/// Makes SIGUSR1 print [`peek_report`] of `node` (and of every other node installed) on
/// standard error.
///
/// # Errors
/// [`PeekError::Signal`] when the handler cannot be installed.
pub fn install(node: &NodeHandle) -> Result<(), PeekError> {
    let nodes = NODES.get_or_init(|| Mutex::new(Vec::new()));
    let mut list = nodes.lock().unwrap_or_else(|e| e.into_inner());
    let first = list.is_empty();
    if !list.iter().any(|n| n.id() == node.id()) {
        list.push(node.clone());
    }
    drop(list);
    if first {
        let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGUSR1])
            .map_err(PeekError::Signal)?;
        std::thread::Builder::new()
            .name("tprof-peek".into())
            .spawn(move || {
                for _ in signals.forever() {
                    peek_all();
                }
            })
            .map_err(PeekError::Signal)?;
    }
    Ok(())
}

/// [`install`] when the environment says `TPROF_PEEK=1`; whether it did.
///
/// # Errors
/// As [`install`].
pub fn install_from_env(node: &NodeHandle) -> Result<bool, PeekError> {
    if std::env::var_os("TPROF_PEEK").is_some_and(|v| v == "1") {
        install(node).map(|()| true)
    } else {
        Ok(false)
    }
}

/// One peek of every installed node, on standard error.
fn peek_all() {
    let nodes: Vec<NodeHandle> = NODES
        .get()
        .map(|n| n.lock().unwrap_or_else(|e| e.into_inner()).clone())
        .unwrap_or_default();
    let heap = std::env::var_os("TPROF_PEEK_HEAP_SNAPSHOT").is_some_and(|v| v == "1");
    for node in nodes.iter().filter(|n| !n.is_stopping()) {
        if heap {
            let said = heap_snapshot_file(node);
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{said}");
        }
        let report = peek_report(node, peek_duration());
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(report.as_bytes());
        let _ = err.flush();
    }
}

/// Writes `node`'s heap snapshot into the current folder, as Julia's peek does with
/// `Profile.take_heap_snapshot`: `tprof-peek-<ospid>-node<N>-<n>.heapsnapshot`, `n` counting
/// the peeks. Says where, or why not.
fn heap_snapshot_file(node: &NodeHandle) -> String {
    static TAKEN: AtomicU64 = AtomicU64::new(0);
    let n = TAKEN.fetch_add(1, Ordering::Relaxed) + 1;
    let name = format!(
        "tprof-peek-{}-node{}-{n}.heapsnapshot",
        std::process::id(),
        node.id()
    );
    let written = std::fs::File::create(&name)
        .map(std::io::BufWriter::new)
        .and_then(|mut file| {
            crate::heap_snapshot(node, &mut file)?;
            file.flush()
        });
    match written {
        Ok(()) => format!("==== peek: heap snapshot written to {name} ===="),
        Err(e) => format!("==== peek: cannot write the heap snapshot {name}: {e} ===="),
    }
}

/// What peek prints for `node`: its processes now, then `duration` of samples by process.
pub fn peek_report(node: &NodeHandle, duration: Duration) -> String {
    let mut out = format!(
        "==== peek: node {} of {} (OS pid {}) ====\n",
        node.id(),
        std::env::args().next().unwrap_or_default(),
        std::process::id()
    );
    // The CPU sampler when it can run (it needs SIGPROF), else the wall sampler.
    let opened = runtime::trace::without_tracing(|| {
        node.sample_session(SampleOptions::new().sampler(Sampler::Cpu))
            .or_else(|_| node.sample_session(SampleOptions::new().sampler(Sampler::Wall)))
    });
    let session = match opened {
        Ok(session) => session,
        Err(e) => {
            let _ = writeln!(out, "cannot sample: {e}");
            out.push_str(&process_table(node, &HashMap::new()));
            out.push_str("==== end of peek ====\n");
            return out;
        }
    };
    let _ = session.trace().set_pattern(&TracePattern::all());
    let _ = session.trace().enable_trace(ProcessSpec::All, true);
    let states: HashMap<Pid, (ProcessState, Option<String>)> = session
        .census()
        .into_iter()
        .filter_map(|s| {
            let innermost = s
                .traced
                .last()
                .map(|c| format!("{}::{}", c.module(), c.written_name()));
            Some((s.pid?, (s.state?, innermost)))
        })
        .collect();
    out.push_str(&process_table(node, &states));
    std::thread::sleep(duration);
    let profile = Profile::from_snapshot(&session.snapshot(), TraceType::CallCount, &["tprof"]);
    drop(session);
    let _ = writeln!(
        out,
        "\n==== peek: {} ms of {} samples by process ====",
        duration.as_millis(),
        profile
            .samples
            .sources
            .first()
            .map_or_else(|| "no".to_owned(), |s| s.sampler.to_string())
    );
    let mut report = Vec::new();
    let options = PrintOptions::new().groupby(GroupBy::Process);
    if crate::sample_report::print(&mut report, &profile, &options).is_ok() {
        out.push_str(&String::from_utf8_lossy(&report));
    }
    out.push_str("==== end of peek ====\n");
    out
}

/// Every process of `node`, by pid: its state as the census read it.
fn process_table(
    node: &NodeHandle,
    states: &HashMap<Pid, (ProcessState, Option<String>)>,
) -> String {
    let mut rows = Vec::new();
    runtime::introspect::walk(node, |p| {
        let (state, function) = states
            .get(&p.pid)
            .map_or(("-", None), |(s, f)| (s.name(), f.as_deref()));
        rows.push([
            p.pid.to_string(),
            p.registered_name
                .map(ToString::to_string)
                .unwrap_or_default(),
            state.to_owned(),
            p.message_queue_len.to_string(),
            p.heap
                .map_or_else(|| "-".to_owned(), |h| h.live_bytes.to_string()),
            p.initial_call.to_owned(),
            function.unwrap_or("").to_owned(),
        ]);
    });
    rows.sort_by_key(|r| r[0].parse::<Pid>().ok());
    let count = rows.len();
    let mut out = crate::table::plain_columns(
        [
            "PID",
            "NAME",
            "STATE",
            "MAILBOX",
            "HEAP (bytes)",
            "INITIAL CALL",
            "IN",
        ],
        rows,
    );
    let _ = writeln!(out, "({count} processes)");
    out
}
