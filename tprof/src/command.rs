//! What the `tprof` command does, as a library: the binary (`src/bin/tprof/`) only parses its
//! arguments, calls these and maps their errors to exit codes.
//!
//! - [`run`]: runs a program built on the runtime with profiling switched on through the
//!   environment ([`runtime::trace::env_run`]); each node of the program writes what it
//!   gathered as it stops, and `run` reads that into one [`Profile`].
//! - [`report`]: reads a profile file and writes it in any [`Format`] ([`report_with`]: with
//!   the options that lay samples out in the `pretty` report).
//! - [`list`]: the annotated source listing of a profile file's functions (`report --list`).
//! - [`callers`]: who called a function in a profile file's samples (`report --callers`).
//! - [`merge`]: merges profile files of one trace type ([`crate::archive::merge`]).
//! - [`view`]: writes the HTML viewer of a profile file and opens it in a browser.
//!
//! A *profile file* is a `.tprof` archive, a profile exported as `json`, a run file a program
//! profiled through the `TPROF_RUN*` variables wrote, or a folder of run files; `-` reads
//! standard input, and an output `-` is standard output ([`read_profile`], [`write_output`]).

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{SystemTime, UNIX_EPOCH};

use runtime::trace::env_run;

use crate::archive::Merger;
use crate::export::Format;
use crate::listing::{ListOptions, ListingError};
use crate::sample_report::{Native, PrintOptions, ReportFormat};
use crate::{Profile, TraceType};

mod callers;
mod input;
mod output;

pub use callers::callers;

use input::{is_std, read_run_dir_of};
pub use input::{read_profile, read_run_dir};
pub use output::{Output, write_archive, write_export, write_output};

/// Why a command failed; [`exit_code`](CommandError::exit_code) tells the shell which kind.
#[derive(Debug)]
#[non_exhaustive]
pub enum CommandError {
    /// The command line asks for something it cannot do (exit code 2, as for a usage error).
    Usage(String),
    /// An input file is not a profile, or is damaged (exit code 3).
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An output could not be written (exit code 4).
    Output {
        /// The file, or `None` for standard output.
        path: Option<PathBuf>,
        /// Why.
        reason: String,
    },
    /// The program could not be run, or it wrote no profile (exit code 4).
    Program(String),
    /// Standard output was closed before all was written: its reader went away (`| head`).
    /// The command ends quietly, as Unix tools do: exit code 0, nothing said.
    BrokenPipe,
}

impl CommandError {
    /// The process exit code for this error: 2 bad usage, 3 bad input, 4 a failure to run or
    /// to write; 0 for a [`BrokenPipe`](CommandError::BrokenPipe).
    pub fn exit_code(&self) -> i32 {
        match self {
            CommandError::BrokenPipe => 0,
            CommandError::Usage(_) => 2,
            CommandError::Input { .. } => 3,
            CommandError::Output { .. } | CommandError::Program(_) => 4,
        }
    }

    fn input(path: &Path, reason: impl fmt::Display) -> CommandError {
        CommandError::Input {
            path: path.to_owned(),
            reason: reason.to_string(),
        }
    }

    fn output(path: Option<&Path>, reason: impl fmt::Display) -> CommandError {
        CommandError::Output {
            path: path.map(Path::to_owned),
            reason: reason.to_string(),
        }
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Usage(msg) | CommandError::Program(msg) => f.write_str(msg),
            CommandError::Input { path, reason } => write!(f, "{}: {reason}", path.display()),
            CommandError::Output {
                path: Some(path),
                reason,
            } => write!(f, "cannot write {}: {reason}", path.display()),
            CommandError::Output { path: None, reason } => {
                write!(f, "cannot write to standard output: {reason}")
            }
            CommandError::BrokenPipe => f.write_str("standard output was closed by its reader"),
        }
    }
}

impl std::error::Error for CommandError {}

/// How [`run`] profiles: sampling (the default, as Eta's `prof run`) or tracing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Sample mode ([`runtime::sample`]): what each process runs (the `cpu` sampler) or where
    /// it waits (`wall`), at `hz`, in a buffer of `n` samples; calls are counted too.
    Sample {
        /// The sampler.
        sampler: runtime::sample::Sampler,
        /// Samples per second asked (per CPU-second of each thread for `cpu`; ticks for
        /// `wall`).
        hz: u32,
        /// What drives the CPU sampler ([`runtime::sample::SampleOptions::cpu_source`]):
        /// perf events where allowed, else per-thread timers (`auto`, the default); or one of
        /// the two. The profile says which took its samples, and why.
        cpu_source: runtime::sample::CpuSource,
        /// The buffer's size, in samples.
        n: usize,
        /// The allocation sampler's rate (the `alloc` sampler).
        alloc_rate: runtime::sample::AllocRate,
    },
    /// Trace mode: [`RunOptions::trace_type`] and the options that go with it.
    Trace,
}

impl Mode {
    /// Sample mode with the defaults: the CPU sampler at 99 Hz, 100,000 samples.
    pub fn sample() -> Mode {
        let d = runtime::sample::SampleOptions::new();
        Mode::Sample {
            sampler: d.get_sampler(),
            hz: d.get_hz(),
            cpu_source: d.get_cpu_source(),
            n: d.get_n(),
            alloc_rate: d.get_alloc_rate(),
        }
    }

    /// `sample` or `trace`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sample { .. } => "sample",
            Mode::Trace => "trace",
        }
    }
}

/// What [`run`] runs and where its profile goes.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Sampling or tracing (default: sampling, with the CPU sampler at 99 Hz).
    pub mode: Mode,
    /// What to measure in trace mode (default call_count).
    pub trace_type: TraceType,
    /// Measure per call path too, for flame graphs (call_time and call_memory; default on).
    pub call_tree: bool,
    /// Record call durations for percentiles (call_time; default off).
    pub percentiles: bool,
    /// The significant figures of their histograms, 1 to 5 (default 2).
    pub percentile_precision: u8,
    /// Keep an event log per process, for timelines (call_time and call_memory; default off).
    pub events: bool,
    /// Where to write (`-`: standard output); its name's extension says the format when
    /// [`format`](RunOptions::format) is not set ([`Output::of_path`]). Default:
    /// `PROGRAM.tprof` in the current folder, or standard output for an export.
    pub out: Option<PathBuf>,
    /// Write this export instead of an archive.
    pub format: Option<Format>,
    /// How often each node of the program writes a snapshot of its profile, so that a program
    /// killed with SIGKILL leaves one at most this old (`None`: never; default 2 s).
    pub snapshot_every: Option<std::time::Duration>,
    /// What the program does on SIGINT and SIGTERM ([`env_run::ENV_SIGNALS`]).
    pub signals: env_run::Signals,
    /// Where to write a heap snapshot of the program's node ([`runtime::heap_snapshot`]),
    /// taken as it stops (or as SIGINT or SIGTERM arrives); a program of several nodes writes
    /// one per node, the others beside the first (`heap.heapsnapshot`, then
    /// `heap.node2.heapsnapshot`, ...; default: none).
    pub heap_snapshot: Option<PathBuf>,
    /// How the profile's samples are shown when it is written as the `pretty` report or as an
    /// export that chooses its frames ([`export::write_shown`](crate::export::write_shown):
    /// `--native`, `--crate`, `--focus`, `--hide`; default: [`PrintOptions::new`] with the
    /// tree and the flat list, as `tprof report` writes it).
    pub samples: PrintOptions,
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl RunOptions {
    /// Runs `program` with `args` in sample mode (the CPU sampler at 99 Hz), writing
    /// `PROGRAM.tprof`; in trace mode ([`Mode::Trace`]), call_count with the call tree on.
    pub fn new(program: impl Into<OsString>, args: Vec<OsString>) -> RunOptions {
        RunOptions {
            mode: Mode::sample(),
            trace_type: TraceType::CallCount,
            call_tree: true,
            percentiles: false,
            percentile_precision: runtime::trace::SessionOptions::DEFAULT_PRECISION,
            events: false,
            out: None,
            format: None,
            snapshot_every: Some(env_run::DEFAULT_SNAPSHOT_EVERY),
            signals: env_run::Signals::default(),
            heap_snapshot: None,
            samples: PrintOptions::new().format(ReportFormat::Both),
            program: program.into(),
            args,
        }
    }

    /// The options set that do nothing for this trace type, each with why: `--percentiles`
    /// without call_time, `--events` and `--flat` with call_count; the options of
    /// [`samples`](Self::samples) (`--focus`, ...) in trace mode, or for an output that does
    /// not show samples' frames by them (an archive, json).
    pub fn ignored(&self) -> Vec<String> {
        let mut ignored = Vec::new();
        let what = Output::resolve(
            self.format.map(Output::Export),
            self.out.as_deref(),
            Output::Archive,
        );
        for flag in sample_flags(&self.samples) {
            let why = match self.mode {
                Mode::Trace => Some(
                    " in trace mode: it chooses the frames of samples (--mode sample or alloc)"
                        .to_owned(),
                ),
                Mode::Sample { .. } => unused_flag(flag, what),
            };
            if let Some(why) = why {
                ignored.push(format!("{flag} does nothing{why}"));
            }
        }
        if let Mode::Sample { .. } = self.mode {
            let mut traced = Vec::new();
            if self.trace_type != TraceType::CallCount {
                traced.push("--type");
            }
            if self.percentiles {
                traced.push("--percentiles");
            }
            if self.events {
                traced.push("--events");
            }
            if !self.call_tree {
                traced.push("--flat");
            }
            for option in traced {
                ignored.push(format!(
                    "{option} does nothing in sample mode: it is a trace mode option (--mode trace)"
                ));
            }
            return ignored;
        }
        let t = self.trace_type;
        if self.percentiles && t != TraceType::CallTime {
            ignored.push(format!(
                "--percentiles does nothing with {t}: only call_time records call durations"
            ));
        }
        if t == TraceType::CallCount {
            if self.events {
                ignored.push(
                    "--events does nothing with call_count: it keeps no per-process figures"
                        .to_owned(),
                );
            }
            if !self.call_tree {
                ignored.push(
                    "--flat does nothing with call_count: it has no call tree to leave out"
                        .to_owned(),
                );
            }
        }
        ignored
    }
}

/// What [`run`] did.
#[derive(Debug)]
pub struct RunOutcome {
    /// How the program ended.
    pub status: ExitStatus,
    /// Where the profile went (`None`: standard output).
    pub written: Option<PathBuf>,
    /// The profile.
    pub profile: Profile,
    /// When the program ended before its nodes stopped (killed, or `std::process::exit`):
    /// how old the profile was then, the newest snapshot of each node being read.
    pub snapshot_age: Option<std::time::Duration>,
    /// The heap snapshots written ([`RunOptions::heap_snapshot`]), one per node, in node order.
    pub heap_snapshots: Vec<PathBuf>,
}

impl RunOutcome {
    /// What `tprof run` says once the profile is written, one line each: what was written
    /// where (when it went to a file), then for CPU samples what they could see — the
    /// mechanism (and why the fallback), the share of the sampled threads' CPU time captured,
    /// and the distinct samples per CPU-second beside the rate asked
    /// ([`SampleSet::cpu_truth`](crate::samples::SampleSet::cpu_truth)). The warnings are not
    /// among them: [`warn_once`] tells them.
    pub fn summary(&self) -> Vec<String> {
        let profile = &self.profile;
        let mut lines = Vec::new();
        if let Some(path) = &self.written {
            lines.push(if profile.samples.sources.is_empty() {
                format!(
                    "{} profile ({} functions) written to {}",
                    profile.trace_type,
                    profile.functions.len(),
                    path.display()
                )
            } else {
                format!(
                    "sample profile ({}) written to {}",
                    profile.samples.kept_and_dropped(),
                    path.display()
                )
            });
        }
        if let Some(truth) = profile.samples.cpu_truth() {
            lines.extend(truth.summary);
        }
        lines
    }
}

/// Tells on standard error, as `tprof: warning: ...` lines, what `profile`'s CPU samples
/// could not see ([`CpuTruth::warnings`](crate::samples::CpuTruth::warnings): too little of
/// the threads' CPU time captured, a busy thread under-sampled or without a sample, a rate
/// taken under half the rate asked; each with its likely cause), once per profile in this
/// process however many reports and exports are made of it. Returns whether it told them now.
/// [`report`], [`report_with`], [`list`] and [`view`] call it; `tprof run` calls it after
/// its summary.
pub fn warn_once(profile: &Profile) -> bool {
    crate::samples::warn_once(&profile.samples)
}

/// Runs a program built on the runtime with profiling switched on through the environment,
/// waits for it, and writes its profile (as [`RunOptions`] says). A program that fails still
/// has its profile written: what it gathered before is kept. A program killed by SIGINT or
/// SIGTERM writes what it gathered as the signal arrives; one killed by SIGKILL leaves the
/// snapshot its nodes wrote last, at most [`RunOptions::snapshot_every`] old, and `run` says
/// how old (on stderr, and in [`RunOutcome::snapshot_age`]).
///
/// # Errors
///
/// [`CommandError::Program`] when the program cannot be started or wrote no profile (it
/// started no node, or ended — by a signal, or `std::process::exit` — before its nodes
/// stopped and before their first snapshot); [`CommandError::Output`] when the profile cannot
/// be written.
pub fn run(options: &RunOptions) -> Result<RunOutcome, CommandError> {
    for ignored in options.ignored() {
        eprintln!("tprof: warning: {ignored}");
    }
    let what = Output::resolve(
        options.format.map(Output::Export),
        options.out.as_deref(),
        Output::Archive,
    );
    let written = match (&options.out, what) {
        (Some(out), _) if is_std(out) => None,
        (Some(out), _) => Some(out.clone()),
        (None, Output::Export(_)) => None,
        (None, Output::Archive) => {
            let stem = Path::new(&options.program)
                .file_stem()
                .map_or_else(|| "tprof".into(), |s| s.to_string_lossy().into_owned());
            Some(PathBuf::from(format!("{stem}.tprof")))
        }
    };
    let dir = scratch_dir("run")
        .map_err(|e| CommandError::Program(format!("cannot make a scratch folder: {e}")))?;
    let started = SystemTime::now();
    let flag = |on: bool| if on { "1" } else { "0" };
    let mut command = Command::new(&options.program);
    command
        .args(&options.args)
        .env(
            env_run::ENV_TYPE,
            match options.mode {
                Mode::Sample { .. } => "sample",
                Mode::Trace => options.trace_type.name(),
            },
        )
        .env(env_run::ENV_DIR, &dir)
        .env(env_run::ENV_CALL_TREE, flag(options.call_tree))
        .env(env_run::ENV_PERCENTILES, flag(options.percentiles))
        .env(env_run::ENV_QUIET, "1")
        .env(
            env_run::ENV_PERCENTILE_PRECISION,
            options.percentile_precision.to_string(),
        )
        .env(env_run::ENV_EVENTS, flag(options.events))
        .env(
            env_run::ENV_SNAPSHOT_EVERY,
            options
                .snapshot_every
                .map_or_else(|| "0".to_owned(), |d| d.as_secs_f64().to_string()),
        )
        .env(env_run::ENV_SIGNALS, options.signals.name())
        .env(
            env_run::ENV_HEAP_SNAPSHOT,
            flag(options.heap_snapshot.is_some()),
        );
    if let Mode::Sample {
        sampler,
        hz,
        cpu_source,
        n,
        alloc_rate,
    } = options.mode
    {
        command
            .env(env_run::ENV_SAMPLER, sampler.name())
            .env(env_run::ENV_HZ, hz.to_string())
            .env(env_run::ENV_CPU_SOURCE, cpu_source.name())
            .env(env_run::ENV_SAMPLE_N, n.to_string())
            .env_remove(env_run::ENV_ALLOC_RATE)
            .env_remove(env_run::ENV_SAMPLE_RATE);
        match alloc_rate {
            runtime::sample::AllocRate::Bytes(bytes) => {
                command.env(env_run::ENV_ALLOC_RATE, bytes.to_string())
            }
            runtime::sample::AllocRate::SampleRate(p) => {
                command.env(env_run::ENV_SAMPLE_RATE, p.to_string())
            }
        };
    }
    let trace_type = match options.mode {
        Mode::Sample { .. } => TraceType::CallCount,
        Mode::Trace => options.trace_type,
    };
    if written.is_none() {
        // The profile goes to standard output: the program's own output goes to stderr.
        command.stdout(std::process::Stdio::from(io::stderr()));
    }
    let status = command.spawn().and_then(|mut child| {
        let os_pid = child.id();
        child.wait().map(|status| (status, os_pid))
    });
    let ended = SystemTime::now();
    let runs = match &status {
        Ok((_, os_pid)) => read_run_dir_of(&dir, Some(trace_type), Some(*os_pid)),
        Err(_) => Err(CommandError::Program(String::new())),
    };
    let heap_snapshots = match (&options.heap_snapshot, &status) {
        (Some(to), Ok((_, os_pid))) => move_heap_snapshots(&dir, *os_pid, to),
        _ => Ok(Vec::new()),
    };
    let _ = fs::remove_dir_all(&dir);
    let heap_snapshots = heap_snapshots?;
    let (status, _) = status.map_err(|e| {
        CommandError::Program(format!(
            "cannot run {}: {e}",
            Path::new(&options.program).display()
        ))
    })?;
    let runs = runs.map_err(|e| match e {
        CommandError::Program(msg) => CommandError::Program(match ended_by(&status) {
            Some(signal) => format!(
                "the program was killed by {signal} before it wrote a profile: it writes one \
                 as its nodes stop, on SIGINT or SIGTERM, and every {} while it runs",
                options
                    .snapshot_every
                    .map_or_else(|| "(never: snapshots are off)".to_owned(), seconds)
            ),
            None if status.success() => msg,
            None => format!("{msg} (it ended with {status})"),
        }),
        other => other,
    })?;
    let snapshot_age = snapshot_age(&runs.files, ended);
    if let Some(age) = snapshot_age {
        let how = match ended_by(&status) {
            Some(signal) => format!("was killed by {signal}"),
            None => "ended before its nodes stopped (std::process::exit?)".to_owned(),
        };
        eprintln!(
            "tprof: the program {how}: its profile is the snapshot its nodes wrote {} before \
             it ended",
            seconds(age)
        );
    } else if let Some(signal) = ended_by(&status) {
        eprintln!("tprof: the program was killed by {signal}: its profile was written then");
    }
    let mut profile = runs.profile;
    let mut program = vec![options.program.to_string_lossy().into_owned()];
    program.extend(
        options
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned()),
    );
    if let Some(run) = profile.meta.runs.first_mut() {
        run.program = program.join(" ");
        if run.started_unix_ms == 0 {
            run.started_unix_ms = unix_ms(started);
        }
    }
    write_shown(&profile, what, written.as_deref(), &options.samples)?;
    Ok(RunOutcome {
        status,
        written,
        profile,
        snapshot_age,
        heap_snapshots,
    })
}

/// Where node `node`'s heap snapshot goes when the first node's goes to `to`:
/// `heap.heapsnapshot` -> `heap.node2.heapsnapshot` (`heap` -> `heap.node2`).
fn beside(to: &Path, node: u32) -> PathBuf {
    let stem = to.file_stem().unwrap_or_default().to_string_lossy();
    let name = match to.extension() {
        Some(ext) => format!("{stem}.node{node}.{}", ext.to_string_lossy()),
        None => format!("{stem}.node{node}"),
    };
    to.with_file_name(name)
}

/// Moves the heap snapshots the program `os_pid` wrote into `dir` to `to` (the first node's;
/// the others [`beside`] it), in node order; says on stderr when it wrote none.
fn move_heap_snapshots(dir: &Path, os_pid: u32, to: &Path) -> Result<Vec<PathBuf>, CommandError> {
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let node = env_run::heap_snapshot_node(e.file_name().to_str()?, os_pid)?;
                    Some((node, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    if found.is_empty() {
        eprintln!(
            "tprof: the program wrote no heap snapshot: its nodes write one as they stop or on \
             SIGINT or SIGTERM (a program killed otherwise, or one that starts no node, leaves none)"
        );
    }
    let mut moved = Vec::new();
    for (i, (node, from)) in found.into_iter().enumerate() {
        let dest = if i == 0 {
            to.to_path_buf()
        } else {
            beside(to, node)
        };
        // A rename fails across file systems (the scratch folder may be on another): copy.
        fs::rename(&from, &dest)
            .or_else(|_| fs::copy(&from, &dest).map(drop))
            .map_err(|e| CommandError::Output {
                path: Some(dest.clone()),
                reason: format!("cannot write the heap snapshot there: {e}"),
            })?;
        moved.push(dest);
    }
    Ok(moved)
}

/// How old the oldest snapshot among `files` was at `ended`, if any file is a snapshot of a
/// node still running (a file written as a signal arrived is not: it holds all there was).
fn snapshot_age(files: &[env_run::RunFile], ended: SystemTime) -> Option<std::time::Duration> {
    let oldest = files
        .iter()
        .filter(|f| f.partial && f.signal.is_none())
        .map(|f| f.written_unix_ms)
        .min()?;
    Some(std::time::Duration::from_millis(
        unix_ms(ended).saturating_sub(oldest),
    ))
}

/// `d` in seconds, to a tenth.
fn seconds(d: std::time::Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The signal that ended a program, as `signal 9 (SIGKILL)`, if one did.
fn ended_by(status: &ExitStatus) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        let signal = status.signal()?;
        Some(match env_run::signal_name(signal) {
            Some(name) => format!("signal {signal} ({name})"),
            None => format!("signal {signal}"),
        })
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

/// `tprof report`: reads the profile file `input` (`-`: standard input) and writes it to `out`
/// (standard output when `None` or `-`) in `format`, else in the format `out`'s name says
/// ([`Output::of_path`]: an archive for `.tprof`), else as the `pretty` report.
///
/// # Errors
///
/// As [`read_profile`] and [`write_output`].
pub fn report(
    input: &Path,
    format: Option<Format>,
    out: Option<&Path>,
) -> Result<(), CommandError> {
    let samples = PrintOptions::new().format(ReportFormat::Both);
    report_with(input, format, out, &samples)
}

/// `tprof report` with the options that lay a profile's samples out in the `pretty` report
/// (`--maxdepth`, `--groupby`, ...: [`PrintOptions`], whose
/// [`format`](PrintOptions::format) the report keeps). Options set that can do nothing are
/// warned of on stderr: in another format, or for a profile without samples.
///
/// # Errors
///
/// As [`report`].
pub fn report_with(
    input: &Path,
    format: Option<Format>,
    out: Option<&Path>,
    samples: &PrintOptions,
) -> Result<(), CommandError> {
    report_sampler(input, format, out, samples, None)
}

/// [`report_with`], of one sampler's samples only when `sampler` is given (`tprof report
/// --sampler cpu`): the other samplers' sources and samples are left out
/// ([`SampleSet::only`](crate::samples::SampleSet::only)), so that a merge of CPU, wall and
/// allocation samples can be drawn one unit at a time (folded, svg and html draw one).
///
/// # Errors
///
/// As [`report`]; [`CommandError::Usage`] when the profile has no sample of `sampler`.
pub fn report_sampler(
    input: &Path,
    format: Option<Format>,
    out: Option<&Path>,
    samples: &PrintOptions,
    sampler: Option<crate::samples::SamplerKind>,
) -> Result<(), CommandError> {
    let what = Output::resolve(
        format.map(Output::Export),
        out,
        Output::Export(Format::Pretty),
    );
    let mut profile = read_profile(input)?;
    if let Some(kind) = sampler {
        has_sampler(&profile, kind)?;
        profile.samples = profile.samples.only(kind);
    }
    warn_once(&profile);
    for flag in sample_flags(samples) {
        let why = match what {
            Output::Export(_)
                if profile.samples.is_empty() && unused_flag(flag, what).is_none() =>
            {
                Some(": the profile has no samples".to_owned())
            }
            _ => unused_flag(flag, what),
        };
        if let Some(why) = why {
            eprintln!("tprof: warning: {flag} does nothing{why}");
        }
    }
    write_shown(&profile, what, out, samples)
}

/// Refuses `--sampler kind` for a profile that has no samples of `kind`, naming those it has.
fn has_sampler(profile: &Profile, kind: crate::samples::SamplerKind) -> Result<(), CommandError> {
    let has = profile.samples.samplers();
    if has.contains(&kind) {
        return Ok(());
    }
    let names: Vec<&str> = has.iter().map(|k| k.name()).collect();
    Err(CommandError::Usage(if names.is_empty() {
        format!("--sampler {kind}: the profile has no samples")
    } else {
        format!(
            "--sampler {kind}: the profile has no {kind} samples (it has {})",
            names.join(", ")
        )
    }))
}

/// Writes `profile` as `what` to `out`, its samples shown as `samples` say in the exports
/// that choose what they show of them ([`export::write_shown`](crate::export::write_shown)).
fn write_shown(
    profile: &Profile,
    what: Output,
    out: Option<&Path>,
    samples: &PrintOptions,
) -> Result<(), CommandError> {
    match what {
        Output::Export(format) => output::write_shown(profile, format, samples, out),
        Output::Archive => write_output(profile, what, out),
    }
}

/// The sample options that choose frames, which every export of samples but json honours.
const FRAME_FLAGS: [&str; 5] = ["--native", "--no-native", "--crate", "--focus", "--hide"];

/// Why `flag` (one of [`sample_flags`]) does nothing when writing `what`, as the end of a
/// sentence (` with --format json: ...`), if it does nothing: only the pretty report lays
/// samples out; every export but json chooses the frames it shows. `None` when it does
/// something.
fn unused_flag(flag: &str, what: Output) -> Option<String> {
    let frames = FRAME_FLAGS.contains(&flag);
    match what {
        Output::Export(Format::Pretty) => None,
        Output::Export(Format::Json) if frames => Some(
            " with --format json: the json export is the profile itself, with every frame"
                .to_owned(),
        ),
        Output::Export(_) if frames => None,
        Output::Export(other) => Some(format!(
            " with --format {other}: only the pretty report lays samples out (the other \
             exports honour --native, --crate, --focus and --hide alone)"
        )),
        Output::Archive => Some(
            " when writing a .tprof archive: `tprof report` chooses the frames it shows and \
             lays samples out"
                .to_owned(),
        ),
    }
}

/// `tprof report --list PATTERN`: the annotated source listing of the profile file `input`'s
/// functions whose name `pattern` matches ([`Profile::listing_with`]), written to `out`
/// (standard output when `None` or `-`).
///
/// # Errors
///
/// As [`read_profile`]; [`CommandError::Usage`] for a pattern that is not a regular
/// expression or matches no function with samples (naming those that come near),
/// [`CommandError::Input`] for a profile without samples; [`CommandError::Output`] when
/// `out` cannot be written.
pub fn list(
    input: &Path,
    pattern: &str,
    options: &ListOptions,
    out: Option<&Path>,
) -> Result<(), CommandError> {
    let profile = read_profile(input)?;
    warn_once(&profile);
    let listing = profile
        .listing_with(pattern, options)
        .map_err(|e| match e {
            ListingError::NoSamples => CommandError::input(input, e),
            other => CommandError::Usage(other.to_string()),
        })?;
    let mut text = String::new();
    // A listing of CPU samples starts with what they could see, as every report does.
    if listing.columns.iter().any(|c| c.name == "cpu")
        && let Some(truth) = profile.samples.cpu_truth()
    {
        for line in truth.lines() {
            text.push_str(&line);
            text.push('\n');
        }
    }
    text.push_str(&listing.to_string());
    // In-use figures over-count by the frees the runtime lost: said under them.
    if listing.columns.iter().any(|c| c.name == "inuse_space")
        && let Some(note) = crate::alloc_sites::lost_frees_note(&profile.samples)
    {
        text.push_str(&note);
        text.push('\n');
    }
    output::write_text(&text, out)
}

/// The `tprof report` options set in `samples` (all but `--width`, which only fits the
/// report to a screen), as the command line spells them.
fn sample_flags(samples: &PrintOptions) -> Vec<&'static str> {
    let default = PrintOptions::new();
    [
        ("--maxdepth", samples.maxdepth != default.maxdepth),
        ("--mincount", samples.mincount != default.mincount),
        ("--noisefloor", samples.noisefloor != default.noisefloor),
        ("--sortedby", samples.sortedby != default.sortedby),
        ("--groupby", samples.groupby != default.groupby),
        ("--recur", samples.recur != default.recur),
        // `--no-native` is `--native none`.
        (
            if samples.native == Native::None {
                "--no-native"
            } else {
                "--native"
            },
            samples.native != default.native,
        ),
        ("--crate", samples.crates != default.crates),
        ("--no-combine", samples.combine != default.combine),
        ("--rows", samples.rows != default.rows),
        ("--focus", samples.focus != default.focus),
        ("--hide", samples.hide != default.hide),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(flag, _)| flag)
    .collect()
}

/// `tprof merge`: merges the profile files `inputs` (of one trace type; `-` once at most,
/// standard input) into `out` (`-`: standard output): an archive, or the export `out`'s name
/// says ([`Output::of_path`]); `progress` hears of each input as it is read, with its index.
///
/// # Errors
///
/// [`CommandError::Usage`] for no input, or `-` twice; [`CommandError::Input`] for an input
/// that cannot be read, or whose trace type differs from the first's; [`CommandError::Output`]
/// when `out` cannot be written.
pub fn merge(
    inputs: &[PathBuf],
    out: &Path,
    progress: &mut dyn FnMut(usize, &Path),
) -> Result<Profile, CommandError> {
    let Some((first, rest)) = inputs.split_first() else {
        return Err(CommandError::Usage(
            "merge needs at least one input".to_owned(),
        ));
    };
    if inputs.iter().filter(|p| is_std(p)).count() > 1 {
        return Err(CommandError::Usage(
            "standard input (-) can be merged once only".to_owned(),
        ));
    }
    let what = Output::resolve(None, Some(out), Output::Archive);
    progress(0, first);
    let mut merger = Merger::new(read_profile(first)?);
    for (i, input) in rest.iter().enumerate() {
        progress(i + 1, input);
        merger
            .add(read_profile(input)?)
            .map_err(|e| CommandError::input(input, e))?;
    }
    let merged = merger.finish();
    write_output(&merged, what, Some(out))?;
    Ok(merged)
}

/// Whether [`view`] got a browser to show the page.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Opened {
    /// The browser (or the system's opener) took the page: it ended successfully, or is still
    /// showing it.
    Yes,
    /// None did: why (no opener, or it failed).
    No(String),
    /// The page went to standard output (`-o -`): nothing to open.
    Written,
}

/// `tprof view`: writes the HTML viewer of the profile file `input` to `out` (default: a file
/// in the system's temporary folder; `-`: standard output) and opens it in a browser —
/// `$BROWSER`, else the system's opener. Returns the page's path (`None` on standard output)
/// and whether a browser showed it: one that fails within a few seconds (no display, say)
/// did not.
///
/// # Errors
///
/// As [`read_profile`] and [`write_export`].
pub fn view(input: &Path, out: Option<&Path>) -> Result<(Option<PathBuf>, Opened), CommandError> {
    let profile = read_profile(input)?;
    warn_once(&profile);
    if out.is_some_and(is_std) {
        write_export(&profile, Format::Html, None)?;
        return Ok((None, Opened::Written));
    }
    let page = match out {
        Some(out) => out.to_owned(),
        None => {
            let stem = Some(input)
                .filter(|p| !is_std(p))
                .and_then(Path::file_stem)
                .map_or_else(|| "profile".into(), |s| s.to_string_lossy().into_owned());
            std::env::temp_dir().join(format!("tprof-view-{stem}-{}.html", std::process::id()))
        }
    };
    write_export(&profile, Format::Html, Some(&page))?;
    let opened = open_in_browser(&page);
    Ok((Some(page), opened))
}

/// Starts a browser on `page`: `$BROWSER` if set, else `xdg-open` (`open` on macOS, `start`
/// on Windows), and waits a few seconds to see whether it fails (an opener with no browser or
/// no display ends with an error); one still running then is taken to show the page.
fn open_in_browser(page: &Path) -> Opened {
    let browser = std::env::var_os("BROWSER").filter(|b| !b.is_empty());
    let opener = browser.clone().unwrap_or_else(|| {
        if cfg!(target_os = "macos") {
            "open".into()
        } else if cfg!(windows) {
            "cmd".into()
        } else {
            "xdg-open".into()
        }
    });
    let mut command = Command::new(&opener);
    if browser.is_none() && cfg!(windows) {
        command.args(["/C", "start", ""]);
    }
    let started = command
        .arg(page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let name = Path::new(&opener).display().to_string();
    let mut child = match started {
        Ok(child) => child,
        Err(e) => return Opened::No(format!("cannot start {name}: {e}")),
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Opened::Yes,
            Ok(Some(status)) => return Opened::No(format!("{name} failed ({status})")),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            // Still running: a browser showing the page.
            Ok(None) => return Opened::Yes,
            Err(e) => return Opened::No(format!("cannot wait for {name}: {e}")),
        }
    }
}

/// A new empty folder under the system's temporary folder, made by this call alone.
fn scratch_dir(what: &str) -> io::Result<PathBuf> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut attempt = 0u32;
    loop {
        let dir = std::env::temp_dir().join(format!(
            "tprof-{what}-{}-{nanos:09}-{attempt}",
            std::process::id()
        ));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
