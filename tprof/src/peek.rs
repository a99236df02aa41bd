//! Peek: what every process is doing right now, on a signal, without stopping anything (Julia's
//! `Profile.peek_report`, for actors).
//!
//! After [`install`], `kill -USR1 <pid>` prints, on standard error, for each installed node:
//! the deadlocks first (cycles of processes blocked in `call` on each other, A calling B
//! while B calls A, or longer), then every process (pid, registered name, state — running,
//! runnable, in `receive`, in `receive (timer)`, in a `call` to whom, waiting elsewhere —
//! mailbox length, live heap, what it was spawned to run and the traced path it runs or is
//! suspended in: its innermost three frames as a wall sample session saw it suspend, else the
//! function a call_time or call_memory session measures it in; empty for a process that no
//! session traced when it suspended, as no path is kept for such a wait),
//! then profiles the next second ([`set_peek_duration`]) in sample mode — CPU samples of
//! every process and of the workers' native stacks — and prints Julia's report grouped by
//! process.
//!
//! Past 1,000 processes ([`set_peek_fold_above`]) the list is folded: processes are counted
//! by what they run (registered-name prefix or initial call) and state, and the largest
//! mailboxes and heaps are listed; [`set_peek_full`] (or `TPROF_PEEK_FULL=1`) lists every one.
//!
//! A deadlock is reported when the cycle is there both when peek starts and after its second
//! of samples: processes that merely call each other often are not caught between two
//! reads.
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

mod deadlock;
mod listing;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use runtime::sample::{ProcessState, Sample, SampleOptions, SampleSession, Sampler};
use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{NodeHandle, Pid};

use crate::sample_report::{GroupBy, PrintOptions};
use crate::{Profile, TraceType};
use listing::{Listing, Seen};

/// How long peek profiles after printing the process table, in milliseconds.
static DURATION_MS: AtomicU64 = AtomicU64::new(1000);

/// Past how many processes peek folds its list.
static FOLD_ABOVE: AtomicUsize = AtomicUsize::new(1000);

/// Whether peek lists every process, however many.
static FULL: AtomicBool = AtomicBool::new(false);

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

/// Sets past how many processes peek folds its list (default 1,000): it then counts the
/// processes by what they run and their state, and lists those with the largest mailboxes and
/// heaps.
pub fn set_peek_fold_above(processes: usize) {
    FOLD_ABOVE.store(processes, Ordering::Relaxed);
}

/// Makes peek list every process, however many (or fold them again past
/// [`set_peek_fold_above`]); `TPROF_PEEK_FULL=1` in the environment also lists them all.
pub fn set_peek_full(full: bool) {
    FULL.store(full, Ordering::Relaxed);
}

/// How peek lists processes now, by the settings and the environment.
fn listing() -> Listing {
    Listing {
        fold_above: FOLD_ABOVE.load(Ordering::Relaxed),
        full: FULL.load(Ordering::Relaxed)
            || std::env::var_os("TPROF_PEEK_FULL").is_some_and(|v| v == "1"),
    }
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

/// What peek prints for `node`: the deadlocks among its processes, its processes now, then
/// `duration` of samples by process.
pub fn peek_report(node: &NodeHandle, duration: Duration) -> String {
    report(node, duration, listing())
}

fn report(node: &NodeHandle, duration: Duration, listing: Listing) -> String {
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
            out.push_str(&listing::process_table(node, &HashMap::new(), listing));
            out.push_str("==== end of peek ====\n");
            return out;
        }
    };
    let _ = session.trace().set_pattern(&TracePattern::all());
    let _ = session.trace().enable_trace(ProcessSpec::All, true);
    let census = session.census();
    let calls = calls_of(&census);
    let names: HashMap<Pid, String> = census
        .iter()
        .filter_map(|s| Some((s.pid?, s.registered_name.as_ref()?.to_string())))
        .collect();
    let states: HashMap<Pid, Seen> = census
        .into_iter()
        .filter_map(|s| {
            let path = traced_path(&s.traced);
            Some((
                s.pid?,
                Seen {
                    state: s.state?,
                    callee: s.callee,
                    path,
                },
            ))
        })
        .collect();
    let table = listing::process_table(node, &states, listing);
    drop(states);
    std::thread::sleep(duration);
    let profile = Profile::from_snapshot(&session.snapshot(), TraceType::CallCount, &["tprof"]);
    let deadlocks = still_blocked(&session, deadlock::cycles(&calls));
    drop(session);
    out.push_str(&deadlock_section(&deadlocks, &names));
    out.push_str(&table);
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

/// The most frames of a traced path the list shows: the innermost, after `… > `.
const PATH_FRAMES: usize = 3;

/// A traced path as the list shows it, outermost first: `app::serve > app::handle >
/// runtime::receive`, or its innermost [`PATH_FRAMES`] after `… > `; `None` for no frame.
fn traced_path(frames: &[&'static runtime::trace::Callsite]) -> Option<String> {
    if frames.is_empty() {
        return None;
    }
    let shown = &frames[frames.len().saturating_sub(PATH_FRAMES)..];
    let mut text = String::new();
    if shown.len() < frames.len() {
        text.push_str("… > ");
    }
    for (i, c) in shown.iter().enumerate() {
        if i > 0 {
            text.push_str(" > ");
        }
        let _ = write!(text, "{}::{}", c.module(), c.written_name());
    }
    Some(text)
}

/// Each process of `census` waiting in a call, and the process it calls.
fn calls_of(census: &[Sample]) -> HashMap<Pid, Pid> {
    census
        .iter()
        .filter(|s| s.state == Some(ProcessState::Call))
        .filter_map(|s| Some((s.pid?, s.callee?)))
        .collect()
}

/// The `cycles` whose every call a second census still finds waiting.
fn still_blocked(session: &SampleSession, cycles: Vec<Vec<Pid>>) -> Vec<Vec<Pid>> {
    if cycles.is_empty() {
        return cycles;
    }
    let calls = calls_of(&session.census());
    cycles
        .into_iter()
        .filter(|cycle| {
            let next = cycle.iter().skip(1).chain(cycle.first());
            cycle
                .iter()
                .zip(next)
                .all(|(from, to)| calls.get(from) == Some(to))
        })
        .collect()
}

/// The deadlocks, one line each (`<1.5.0> (a) -> <1.6.0> (b) -> <1.5.0> (a)`); nothing when
/// there are none.
fn deadlock_section(cycles: &[Vec<Pid>], names: &HashMap<Pid, String>) -> String {
    if cycles.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "==== peek: {} deadlock{}: processes blocked in call on each other ====\n",
        cycles.len(),
        if cycles.len() == 1 { "" } else { "s" }
    );
    let named = |pid: &Pid| match names.get(pid) {
        Some(name) => format!("{pid} ({name})"),
        None => pid.to_string(),
    };
    for cycle in cycles {
        let line: Vec<String> = cycle.iter().chain(cycle.first()).map(named).collect();
        let _ = writeln!(out, "{}", line.join(" -> "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traced_path_shows_its_innermost_frames_outermost_first() {
        let all = runtime::trace::callsites();
        assert!(all.len() >= 5, "the runtime's own traced functions");
        let frames: Vec<&'static runtime::trace::Callsite> = all.iter().take(5).collect();
        let name = |c: &runtime::trace::Callsite| format!("{}::{}", c.module(), c.written_name());
        assert_eq!(traced_path(&[]), None);
        assert_eq!(traced_path(&frames[..1]), Some(name(frames[0])));
        assert_eq!(
            traced_path(&frames[..3]),
            Some(format!(
                "{} > {} > {}",
                name(frames[0]),
                name(frames[1]),
                name(frames[2])
            ))
        );
        assert_eq!(
            traced_path(&frames),
            Some(format!(
                "… > {} > {} > {}",
                name(frames[2]),
                name(frames[3]),
                name(frames[4])
            ))
        );
    }
}
