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

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Snapshot;

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
/// ([`SessionOptions::histogram_precision`](super::SessionOptions::histogram_precision)).
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

/// The name of the heap snapshot of node `node` of OS process `os_pid` in the run folder.
pub fn heap_snapshot_file(os_pid: u32, node: u32) -> String {
    format!("tprof-heap-{os_pid}-node{node}.heapsnapshot")
}

/// The node of a heap snapshot file of OS process `os_pid` in the run folder, if `name` is one.
pub fn heap_snapshot_node(name: &str, os_pid: u32) -> Option<u32> {
    name.strip_prefix(&format!("tprof-heap-{os_pid}-node"))?
        .strip_suffix(".heapsnapshot")?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::{heap_snapshot_file, heap_snapshot_node};

    #[test]
    fn a_heap_snapshot_file_names_its_node() {
        let name = heap_snapshot_file(42, 7);
        assert_eq!(heap_snapshot_node(&name, 42), Some(7));
        assert_eq!(heap_snapshot_node(&name, 43), None);
        assert_eq!(heap_snapshot_node("tprof-run-42-node7.json", 42), None);
    }
}
