//! A node's profiling from the environment ([`crate::trace::env_run`] says what it reads and
//! writes): started as the node starts when [`ENV_TYPE`] is set, it opens the session, writes
//! the snapshots and the run file, and the heap snapshots.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::NodeHandle;
use crate::node::NodeInner;
use crate::trace::env_run::*;
use crate::trace::{ProcessSpec, SessionOptions, Snapshot, TracePattern, TraceSession, TraceTypes};
use crate::world::observe::NodeObserver;

#[cfg(unix)]
mod bare;
mod heap;
mod watch;

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
    if !crate::trace::INSTRUMENTED {
        let why = format!(
            "instrumentation is compiled out of this program. {}",
            crate::trace::COMPILED_OUT
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

/// The process layer starts this as a node starts, when [`ENV_TYPE`] is set.
// linkme's `link_section` static is flagged by `unsafe_code`; nothing here is unsafe.
#[allow(unsafe_code)]
#[linkme::distributed_slice(crate::world::observe::NODE_STARTED)]
static NODE_STARTED: fn(&NodeHandle) -> Option<Box<dyn NodeObserver>> =
    |node| start(node).map(|run| Box::new(run) as Box<dyn NodeObserver>);

impl NodeObserver for EnvRun {
    fn stopping(&self) {
        EnvRun::stopping(self);
    }

    fn finish(self: Box<Self>) {
        EnvRun::finish(*self);
    }
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
