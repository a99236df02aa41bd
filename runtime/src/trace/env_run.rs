//! Profiling switched on from the environment, with no change to the program: what
//! `tprof run` uses.
//!
//! When [`ENV_TYPE`] is set as a node starts, the node opens a trace session of that type
//! (call_count, call_time or call_memory) or, for `sample`, a sample session
//! ([`crate::sample`]: the CPU sampler, or the wall sampler with [`ENV_SAMPLER`]), traces (or
//! samples) every function of every process it will run,
//! and when it stops — [`NodeHandle::shutdown`](crate::NodeHandle::shutdown),
//! [`Node::stop`](crate::Node::stop) or dropping the [`Node`](crate::Node) — writes what the
//! session gathered as a [`RunFile`] (JSON) into the folder [`ENV_DIR`] names, one file per
//! node (`tprof-run-<os pid>-node<node>.json`; `tprof report`, `merge` and `view` read such a
//! file, or the folder).
//!
//! | variable | value |
//! | --- | --- |
//! | `TPROF_RUN` | `sample`, `call_count`, `call_time` or `call_memory` |
//! | `TPROF_RUN_SAMPLER` | `cpu` (default), `wall` or `alloc` (sample) |
//! | `TPROF_RUN_ALLOC_RATE` | the allocation sampler's bytes per sample (alloc; default 524288) |
//! | `TPROF_RUN_SAMPLE_RATE` | or Julia's `sample_rate`, each allocation's probability, 0 to 1 (alloc) |
//! | `TPROF_RUN_HZ` | samples per second, 1 to 10000 (sample; default 99) |
//! | `TPROF_RUN_CPU_SOURCE` | the CPU sampler's mechanism: `auto` (default), `perf_events` or `timers` (cpu) |
//! | `TPROF_RUN_SAMPLE_N` | the sample buffer's size, in samples (sample; default 100000) |
//! | `TPROF_RUN_DIR` | the folder to write into (default: the current folder) |
//! | `TPROF_RUN_CALL_TREE` | `1`: call-tree mode too (call_time, call_memory) |
//! | `TPROF_RUN_PERCENTILES` | `1`: call-duration histograms too (call_time) |
//! | `TPROF_RUN_PERCENTILE_PRECISION` | their significant figures, 1 to 5 (default 2) |
//! | `TPROF_RUN_EVENTS` | `1`: an event log per process too (call_time, call_memory) |
//! | `TPROF_RUN_SNAPSHOT_EVERY` | seconds between snapshots (default 2; `0`: none) |
//! | `TPROF_RUN_SIGNALS` | `exit` (default), `keep` or `off`: what SIGINT and SIGTERM do |
//! | `TPROF_RUN_HEAP_SNAPSHOT` | `1`: a heap snapshot of each node too (see below) |
//!
//! A wrong value is reported on stderr and the program runs unprofiled (or, for the last two,
//! with the default): profiling never stops a program from running. A node that cannot be
//! profiled (call_memory without the counting allocator, say) says why on stderr once per
//! program, not once per node, and in its run file; with `TPROF_RUN_QUIET` set
//! ([`ENV_QUIET`], as `tprof run` sets it), in its run file only.
//!
//! With [`ENV_HEAP_SNAPSHOT`], each node also writes a heap snapshot
//! ([`crate::heap_snapshot`]) into the same folder, as `tprof-heap-<os pid>-node<node>.heapsnapshot`
//! ([`heap_snapshot_file`]): as it starts to stop, before its processes are stopped (as
//! [`NodeHandle::shutdown`](crate::NodeHandle::shutdown) or [`Node::stop`](crate::Node::stop)
//! begins, or as the [`Node`](crate::Node) is dropped), and as SIGINT or SIGTERM arrives (after
//! the run file); never with the periodic snapshots, as it reads every process. From a live
//! program, `tprof snapshot PID` takes one through its control endpoint, and tprof's peek takes
//! one with each peek under `TPROF_PEEK_HEAP_SNAPSHOT=1`.
//!
//! A program built without instrumentation (the feature `runtime/no-trace`,
//! [`INSTRUMENTED`](super::INSTRUMENTED) false) runs unprofiled too; its node writes a
//! [`RunFile`] whose `error` says so (and stderr, as above), and `tprof run` fails with that reason rather than write
//! an empty profile.
//!
//! # A program that does not stop its nodes
//!
//! A program can end before its nodes stop, and so before they write their profile: killed
//! by a signal, or ending with `std::process::exit`. So that it still leaves a profile:
//!
//! - **Snapshots.** While a node runs, a thread writes its run file often enough that the
//!   newest is at most [`ENV_SNAPSHOT_EVERY`] seconds old (it starts the next one earlier by
//!   twice the time the last few took to write; when writing one takes more than half that
//!   time, the bound cannot hold and snapshots take at most half of that thread's time),
//!   marked [`RunFile::partial`] with the time it was written.
//!   A program killed by SIGKILL, or ending with `std::process::exit`, leaves the last one:
//!   `tprof run` reads it and says how old it was.
//! - **SIGINT and SIGTERM** (Unix). The node installs, through the `signal-hook` crate, a
//!   handler that only wakes a thread (a self-pipe: the handler takes no lock and never
//!   allocates); that thread writes every node's run file (marked with the signal) and then,
//!   by default ([`Signals::Exit`]), raises the signal again with its default action, so the
//!   program dies of it as it would have without tprof.
//!
//! ## A program with signal handlers of its own
//!
//! The handler is installed when the first profiled node starts, and only then: a program run
//! without `TPROF_RUN` is not touched. `signal-hook` keeps the handlers a program installed
//! before that and calls them too, and those a program installs later through `signal-hook`
//! or a crate built on it (`tokio::signal`, `ctrlc`) run beside tprof's. But with
//! [`Signals::Exit`], once the profile is written the program dies of the signal, whatever its
//! own handler meant to do: a program that handles SIGINT or SIGTERM itself, to shut down
//! gracefully, should be run with [`Signals::Keep`] (`TPROF_RUN_SIGNALS=keep`, `tprof run
//! --signals keep`): the profile is still written as each signal arrives, the signal is left to
//! the program, and its nodes write the whole profile as they stop; a signal the program has
//! no handler of when its first node starts gets tprof's own handler instead of
//! `signal-hook`'s, and once the profile is written the program dies of it as without tprof,
//! unless it installed a handler of its own since. [`Signals::Off`] installs
//! nothing. A program that installs a handler with `sigaction` itself after its node started
//! replaces tprof's: the snapshots still hold what it gathered up to the last one.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{ProcessSpec, SessionOptions, Snapshot, TracePattern, TraceSession, TraceTypes};
use crate::NodeHandle;
use crate::node::NodeInner;

#[cfg(unix)]
mod bare;
mod heap;
mod watch;

pub use heap::{heap_snapshot_file, heap_snapshot_node};

/// The trace type to measure: `call_count`, `call_time` or `call_memory`; or `sample`.
pub const ENV_TYPE: &str = "TPROF_RUN";
/// The sampler of `TPROF_RUN=sample`: `cpu` or `wall`.
pub const ENV_SAMPLER: &str = "TPROF_RUN_SAMPLER";
/// The allocation sampler's rate ([`crate::sample::AllocRate::Bytes`]), in bytes per sample.
pub const ENV_ALLOC_RATE: &str = "TPROF_RUN_ALLOC_RATE";
/// Or its `sample_rate` ([`crate::sample::AllocRate::SampleRate`]), in `[0, 1]`.
pub const ENV_SAMPLE_RATE: &str = "TPROF_RUN_SAMPLE_RATE";
/// The sampling rate of `TPROF_RUN=sample`, in Hz.
pub const ENV_HZ: &str = "TPROF_RUN_HZ";
/// The CPU sampler's mechanism of `TPROF_RUN=sample`: a
/// [`CpuSource`](crate::sample::CpuSource) name (`auto`, `perf_events` or `timers`).
pub const ENV_CPU_SOURCE: &str = "TPROF_RUN_CPU_SOURCE";
/// The sample buffer's size of `TPROF_RUN=sample`, in samples.
pub const ENV_SAMPLE_N: &str = "TPROF_RUN_SAMPLE_N";
/// The folder the node writes its [`RunFile`] into.
pub const ENV_DIR: &str = "TPROF_RUN_DIR";
/// `1` for call-tree mode.
pub const ENV_CALL_TREE: &str = "TPROF_RUN_CALL_TREE";
/// `1` for call-duration histograms.
pub const ENV_PERCENTILES: &str = "TPROF_RUN_PERCENTILES";
/// The significant figures of call-duration histograms
/// ([`SessionOptions::histogram_precision`]).
pub const ENV_PERCENTILE_PRECISION: &str = "TPROF_RUN_PERCENTILE_PRECISION";
/// `1` for an event log per process.
pub const ENV_EVENTS: &str = "TPROF_RUN_EVENTS";
/// The seconds between two snapshots of a running node (a decimal; `0`: none).
pub const ENV_SNAPSHOT_EVERY: &str = "TPROF_RUN_SNAPSHOT_EVERY";
/// What SIGINT and SIGTERM do: a [`Signals`] name.
pub const ENV_SIGNALS: &str = "TPROF_RUN_SIGNALS";
/// `1` for a heap snapshot of each node as it stops and as a signal arrives.
pub const ENV_HEAP_SNAPSHOT: &str = "TPROF_RUN_HEAP_SNAPSHOT";

/// The time between two snapshots of a running node when [`ENV_SNAPSHOT_EVERY`] is not set.
pub const DEFAULT_SNAPSHOT_EVERY: Duration = Duration::from_secs(2);

/// What a profiled program does on SIGINT and SIGTERM ([`ENV_SIGNALS`]); see "A program with
/// signal handlers of its own" in the [module docs](self).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Signals {
    /// Write every node's profile, then die of the signal, as without tprof (`exit`).
    #[default]
    Exit,
    /// Write every node's profile and leave the signal to the program's own handler
    /// (`keep`): for a program that handles SIGINT or SIGTERM itself.
    Keep,
    /// Install no handler (`off`).
    Off,
}

impl Signals {
    /// Its name in [`ENV_SIGNALS`]: `exit`, `keep` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            Signals::Exit => "exit",
            Signals::Keep => "keep",
            Signals::Off => "off",
        }
    }
}

impl std::str::FromStr for Signals {
    type Err = String;

    fn from_str(s: &str) -> Result<Signals, String> {
        [Signals::Exit, Signals::Keep, Signals::Off]
            .into_iter()
            .find(|m| m.name() == s.trim())
            .ok_or_else(|| format!("`{s}` is not one of exit, keep or off"))
    }
}

/// The name of signal `signal` (`SIGKILL`), if it is one this platform names.
pub fn signal_name(signal: i32) -> Option<&'static str> {
    #[cfg(unix)]
    {
        signal_hook::low_level::signal_name(signal)
    }
    #[cfg(not(unix))]
    {
        let _ = signal;
        None
    }
}

/// Set (by `tprof run`, which reports the reasons from the run files itself): a node that
/// cannot be profiled says why in its run file only, not on stderr.
pub const ENV_QUIET: &str = "TPROF_RUN_QUIET";

/// The version of [`RunFile`] this runtime writes.
pub const RUN_FILE_VERSION: u32 = 1;

/// What one node of a program profiled from the environment wrote as it stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    /// [`RUN_FILE_VERSION`] when written.
    pub version: u32,
    /// The trace type asked for (the value of [`ENV_TYPE`]).
    pub trace_type: String,
    /// The program's command line.
    pub program: Vec<String>,
    /// The OS process id.
    pub os_pid: u32,
    /// When the node started, in milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// How long the node ran, in nanoseconds.
    pub duration_ns: u64,
    /// What the session gathered.
    pub snapshot: Snapshot,
    /// Why the node could not be profiled (the snapshot is then empty).
    #[serde(default)]
    pub error: Option<String>,
    /// Whether the node was still running when this was written: a periodic snapshot, or one
    /// written as a signal arrived (`false`: written as the node stopped).
    #[serde(default)]
    pub partial: bool,
    /// The signal arriving as this was written (`SIGINT`, `SIGTERM`), if one was.
    #[serde(default)]
    pub signal: Option<String>,
    /// When this was written, in milliseconds since the Unix epoch (0 in the files of a
    /// runtime that predates the field).
    #[serde(default)]
    pub written_unix_ms: u64,
}

/// A node's profiling from the environment, until it stops.
pub(crate) struct EnvRun(Arc<Profiled>);

/// The session a node is profiled with.
enum Session {
    Trace(TraceSession),
    Sample(crate::sample::SampleSession),
}

impl Session {
    fn trace(&self) -> &TraceSession {
        match self {
            Session::Trace(s) => s,
            Session::Sample(s) => s.trace(),
        }
    }

    fn snapshot(&self) -> Snapshot {
        match self {
            Session::Trace(s) => s.snapshot(),
            Session::Sample(s) => s.snapshot(),
        }
    }
}

/// A node being profiled, shared with the threads that write its snapshots ([`watch`]).
struct Profiled {
    session: Session,
    trace_type: String,
    dir: PathBuf,
    started: SystemTime,
    clock: Instant,
    /// Held while the node's run file is written; `true` once it was written as the node
    /// stopped (no snapshot may replace it then).
    stopped: Mutex<bool>,
    /// The node, when heap snapshots are asked for ([`ENV_HEAP_SNAPSHOT`]): weak, as the node
    /// holds this.
    heap_snapshot: Option<std::sync::Weak<NodeInner>>,
}

/// Why a run file is written.
#[derive(Clone, Copy, Debug)]
enum Moment {
    /// The node stopped: the whole profile.
    Stopped,
    /// A periodic snapshot.
    Snapshot,
    /// The signal named is arriving.
    Signal(&'static str),
}

impl Profiled {
    /// Writes the node's run file as of `moment`, unless it was written as the node stopped.
    fn write(&self, moment: Moment) {
        let mut stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        if *stopped {
            return;
        }
        let run = RunFile {
            version: RUN_FILE_VERSION,
            trace_type: self.trace_type.clone(),
            program: std::env::args().collect(),
            os_pid: std::process::id(),
            started_unix_ms: unix_ms(self.started),
            duration_ns: self.clock.elapsed().as_nanos() as u64,
            snapshot: self.session.snapshot(),
            error: None,
            partial: !matches!(moment, Moment::Stopped),
            signal: match moment {
                Moment::Signal(name) => Some(name.to_owned()),
                Moment::Stopped | Moment::Snapshot => None,
            },
            written_unix_ms: unix_ms(SystemTime::now()),
        };
        write_run_file(&self.dir, &run);
        *stopped = matches!(moment, Moment::Stopped);
        drop(stopped);
        if let Moment::Signal(_) = moment {
            self.write_heap_snapshot();
        }
    }

    /// Writes the node's heap snapshot, if asked for and the node is still there.
    fn write_heap_snapshot(&self) {
        if let Some(inner) = self
            .heap_snapshot
            .as_ref()
            .and_then(std::sync::Weak::upgrade)
        {
            // With allocation sampling, what the samples say is still live, by site.
            let sites = match &self.session {
                Session::Sample(s) => crate::heap_snapshot::live_sites(s),
                Session::Trace(_) => Vec::new(),
            };
            heap::write(&self.dir, &NodeHandle { inner }, &sites);
        }
    }
}

/// Starts profiling `node` if the environment asks for it.
pub(crate) fn start(node: &NodeHandle) -> Option<EnvRun> {
    let trace_type = std::env::var(ENV_TYPE).ok()?;
    let flag = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
    let mut types = match trace_type.as_str() {
        "sample" => TraceTypes::SAMPLE,
        "call_count" => TraceTypes::CALL_COUNT,
        "call_time" if flag(ENV_PERCENTILES) => TraceTypes::CALL_TIME_HISTOGRAMS,
        "call_time" => TraceTypes::CALL_TIME,
        "call_memory" => TraceTypes::CALL_MEMORY,
        other => {
            eprintln!(
                "tprof: {ENV_TYPE}={other} is not a trace type (sample, call_count, call_time \
                 or call_memory); node {} runs unprofiled",
                node.id()
            );
            return None;
        }
    };
    let per_process = trace_type != "call_count" && trace_type != "sample";
    if flag(ENV_CALL_TREE) && per_process {
        types = types | TraceTypes::CALL_TREE;
    }
    if flag(ENV_EVENTS) && per_process {
        types = types | TraceTypes::CALL_EVENTS;
    }
    let mut options = SessionOptions::new();
    if let Ok(precision) = std::env::var(ENV_PERCENTILE_PRECISION) {
        match precision.trim().parse::<u8>() {
            Ok(p) => options = options.histogram_precision(p),
            Err(_) => {
                eprintln!(
                    "tprof: {ENV_PERCENTILE_PRECISION}={precision} is not a number of \
                     significant figures (1 to 5); node {} runs unprofiled",
                    node.id()
                );
                return None;
            }
        }
    }
    let dir = std::env::var_os(ENV_DIR).map_or_else(|| PathBuf::from("."), PathBuf::from);
    if !super::INSTRUMENTED {
        let why = format!(
            "instrumentation is compiled out of this program. {}",
            super::session::COMPILED_OUT
        );
        write_failure(node, &dir, trace_type, why);
        return None;
    }
    let opened = if types == TraceTypes::SAMPLE {
        let sample = match sample_options() {
            Ok(o) => o,
            Err(why) => {
                write_failure(node, &dir, trace_type, why);
                return None;
            }
        };
        node.sample_session(sample)
            .map(Session::Sample)
            .map_err(|e| e.to_string())
    } else {
        node.trace_session_with_options(types, options)
            .map(Session::Trace)
            .map_err(|e| e.to_string())
    };
    let session = match opened {
        Ok(s) => s,
        Err(e) => {
            write_failure(node, &dir, trace_type, e);
            return None;
        }
    };
    if let Err(e) = session.trace().set_pattern(&TracePattern::all()) {
        eprintln!("tprof: node {} has no traced function: {e}", node.id());
    }
    let _ = session.trace().enable_trace(ProcessSpec::New, true);
    let profiled = Arc::new(Profiled {
        session,
        trace_type,
        dir,
        started: SystemTime::now(),
        clock: Instant::now(),
        stopped: Mutex::new(false),
        heap_snapshot: flag(ENV_HEAP_SNAPSHOT).then(|| Arc::downgrade(&node.inner)),
    });
    watch::add(&profiled);
    Some(EnvRun(profiled))
}

/// The sample options [`ENV_SAMPLER`], [`ENV_HZ`], [`ENV_CPU_SOURCE`], [`ENV_SAMPLE_N`] and
/// the allocation rates ask for, or why they cannot be read.
fn sample_options() -> Result<crate::sample::SampleOptions, String> {
    let mut options = crate::sample::SampleOptions::new();
    if let Ok(sampler) = std::env::var(ENV_SAMPLER) {
        options = options.sampler(
            sampler
                .trim()
                .parse()
                .map_err(|e| format!("{ENV_SAMPLER}={sampler}: {e}"))?,
        );
    }
    if let Ok(hz) = std::env::var(ENV_HZ) {
        options = options.hz(hz.trim().parse().map_err(|_| {
            format!(
                "{ENV_HZ}={hz} is not a rate: a whole number of samples per second, 1 to {}",
                crate::sample::MAX_HZ
            )
        })?);
    }
    if let Ok(source) = std::env::var(ENV_CPU_SOURCE) {
        options = options.cpu_source(
            source
                .trim()
                .parse()
                .map_err(|e| format!("{ENV_CPU_SOURCE}={source}: {e}"))?,
        );
    }
    if let Ok(n) = std::env::var(ENV_SAMPLE_N) {
        options = options
            .n(n.trim()
                .parse()
                .map_err(|_| format!("{ENV_SAMPLE_N}={n} is not a number of samples"))?);
    }
    match (
        std::env::var(ENV_ALLOC_RATE),
        std::env::var(ENV_SAMPLE_RATE),
    ) {
        (Ok(_), Ok(_)) => {
            return Err(format!(
                "{ENV_ALLOC_RATE} and {ENV_SAMPLE_RATE} are two models of allocation sampling, \
                 which are never mixed: set one of them"
            ));
        }
        (Ok(bytes), _) => {
            let bytes: u64 = bytes.trim().parse().map_err(|_| {
                format!("{ENV_ALLOC_RATE}={bytes} is not a number of bytes per sample")
            })?;
            options = options.alloc_rate(crate::sample::AllocRate::Bytes(bytes));
        }
        (_, Ok(p)) => {
            let p: f64 = p.trim().parse().map_err(|_| {
                format!("{ENV_SAMPLE_RATE}={p} is not a probability: a number from 0 to 1")
            })?;
            options = options.alloc_rate(crate::sample::AllocRate::SampleRate(p));
        }
        _ => {}
    }
    Ok(options)
}

impl EnvRun {
    /// The node starts to stop, its processes still alive: its heap snapshot, if asked for.
    pub(crate) fn stopping(&self) {
        self.0.write_heap_snapshot();
    }

    /// Writes what the session gathered into the run folder (errors go to stderr).
    pub(crate) fn finish(self) {
        self.0.write(Moment::Stopped);
        watch::remove(&self.0);
    }
}

/// Says why `node` is not profiled: on stderr once per run, not per node (every node of the
/// program fails the same way), and not at all under `tprof run` ([`ENV_QUIET`]), which
/// reports the run files' reasons itself; and to `tprof run`, so that it can say more than
/// "no profile": a run file with an empty snapshot and the reason.
fn write_failure(node: &NodeHandle, dir: &std::path::Path, trace_type: String, why: String) {
    if std::env::var_os(ENV_QUIET).is_none() && first_time(&why) {
        eprintln!(
            "tprof: cannot profile node {} (nor any other node of this program failing the \
             same way): {why}",
            node.id()
        );
    }
    let failed = RunFile {
        version: RUN_FILE_VERSION,
        trace_type,
        program: std::env::args().collect(),
        os_pid: std::process::id(),
        started_unix_ms: unix_ms(SystemTime::now()),
        duration_ns: 0,
        snapshot: Snapshot {
            node: node.id(),
            ..Snapshot::default()
        },
        error: Some(why),
        partial: false,
        signal: None,
        written_unix_ms: unix_ms(SystemTime::now()),
    };
    write_run_file(dir, &failed);
}

/// Whether `message` is reported for the first time in this OS process.
fn first_time(message: &str) -> bool {
    static REPORTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    if reported.iter().any(|m| m == message) {
        return false;
    }
    reported.push(message.to_owned());
    true
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Writes `run` into `dir` as `tprof-run-<os pid>-node<node>.json`, whole or not at all
/// (errors go to stderr).
fn write_run_file(dir: &std::path::Path, run: &RunFile) {
    let node = run.snapshot.node;
    let name = format!("tprof-run-{}-node{node}.json", run.os_pid);
    let path = dir.join(&name);
    let partial = dir.join(format!(".{name}.partial"));
    let written = crate::heap::suppressed(|| {
        std::fs::File::create(&partial)
            .and_then(|f| encode(run, f))
            .and_then(|()| std::fs::rename(&partial, &path))
    });
    if let Err(e) = written {
        eprintln!(
            "tprof: cannot write the profile of node {node} to {}: {e}",
            path.display()
        );
    }
}

/// Writes `run` as JSON to `out`, through a buffer: serde_json writes token by token, and a
/// file written unbuffered takes one system call per token (millions for a call tree).
fn encode(run: &RunFile, out: impl Write) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, out);
    serde_json::to_writer(&mut out, run)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{SnapshotFigures, SnapshotProcess};

    /// A writer that counts the calls made to it.
    #[derive(Default)]
    struct Counting {
        writes: usize,
        bytes: usize,
    }

    impl Write for Counting {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.writes += 1;
            self.bytes += buf.len();
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_run_file_is_written_in_a_few_large_writes() {
        let figures = |id| SnapshotFigures {
            id,
            calls: 3,
            time_ns: 12_345,
            ..SnapshotFigures::default()
        };
        let processes = (0..2_000)
            .map(|i| SnapshotProcess {
                pid: format!("<0.{i}.0>"),
                initial_call: "app::worker/1".to_owned(),
                registered_name: None,
                functions: (0..5).map(figures).collect(),
                paths: (0..5).map(figures).collect(),
                events: Vec::new(),
                events_dropped: 0,
                percentiles: Vec::new(),
            })
            .collect();
        let run = RunFile {
            version: RUN_FILE_VERSION,
            trace_type: "call_time".to_owned(),
            program: vec!["app".to_owned()],
            os_pid: 1,
            started_unix_ms: 0,
            duration_ns: 0,
            snapshot: Snapshot {
                processes,
                ..Snapshot::default()
            },
            error: None,
            partial: false,
            signal: None,
            written_unix_ms: 0,
        };
        let mut out = Counting::default();
        encode(&run, &mut out).unwrap();
        assert!(out.bytes > 1 << 20, "{} bytes", out.bytes);
        // One write per 64 KiB or so, not one per JSON token.
        assert!(
            out.writes <= out.bytes / (32 << 10) + 2,
            "{} writes for {} bytes",
            out.writes,
            out.bytes
        );
    }
}
