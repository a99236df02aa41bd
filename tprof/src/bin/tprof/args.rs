//! The command line: `tprof run | report | merge | view`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use runtime::trace::env_run::Signals;
use tprof::TraceType;
use tprof::export::Format;
use tprof::sample_report::{GroupBy, Native, PrintOptions, Recur, ReportFormat, SortedBy};

/// tprof: profile the processes of programs built on the actor runtime, and turn profiles into
/// reports, flame graphs and the files speedscope, Perfetto and `go tool pprof` read.
#[derive(Debug, Parser)]
#[command(name = "tprof", version, about, long_about = None)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// Run a program built on the runtime with profiling on (no code change), and write its
    /// profile: a .tprof archive, or an export with --format.
    ///
    /// Exit code: the program's own when it fails (its profile is written all the same).
    Run {
        /// sample (the default, unless a trace option is given): what each process runs
        /// (--sampler cpu) or where it waits (--sampler wall), at --hz; alloc: allocations,
        /// sampled in the counting allocator (--sampler alloc; --rate or --sample-rate); or
        /// trace: calls, time or memory per process and function, as --type says.
        #[arg(long, value_name = "MODE", value_parser = ["sample", "alloc", "trace"])]
        mode: Option<String>,
        /// Allocation mode: one sample per BYTES allocated on average, Poisson sampling by
        /// bytes (default 524288). Implies --mode alloc.
        #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
        rate: Option<u64>,
        /// Allocation mode: each allocation sampled with probability P, 0 to 1 (Julia's
        /// sample_rate; 1 records every one). Implies --mode alloc.
        #[arg(long = "sample-rate", value_name = "P", value_parser = parse_probability, conflicts_with = "rate")]
        sample_rate: Option<f64>,
        /// The sampler of sample mode: cpu (what each worker thread runs, on its CPU clock)
        /// or wall (every process, running or waiting).
        #[arg(long, value_parser = parse_sampler)]
        sampler: Option<runtime::sample::Sampler>,
        /// Samples per second asked in sample mode, 1 to 10000 (default 99); for the cpu
        /// sampler, per CPU-second of each thread. The profile says the rate taken beside it.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        hz: Option<u32>,
        /// What drives the cpu sampler: auto (the default: perf events where the kernel allows
        /// them, else per-thread CPU timers, and the profile says why), perf_events (a perf
        /// event on each thread's task clock: every thread sampled at the rate asked wherever
        /// its CPU time falls; refused where perf_event_paranoid or seccomp forbid it) or
        /// timers (per-thread CPU timers, which the kernel checks only at its scheduler tick:
        /// at most CONFIG_HZ, often 250, distinct samples per CPU-second, and a thread that
        /// runs between ticks is missed). Also TPROF_RUN_CPU_SOURCE in the environment of a
        /// program run without tprof run.
        #[arg(long, value_name = "SOURCE", value_parser = parse_cpu_source)]
        cpu_source: Option<runtime::sample::CpuSource>,
        /// The sample buffer's size, in samples (default 100000): when full, later samples are
        /// counted as dropped.
        #[arg(long = "sample-n", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        sample_n: Option<u64>,
        /// What to measure in trace mode: call_count, call_time or call_memory (which needs
        /// the program to install runtime::CountingAlloc). Implies --mode trace.
        #[arg(long = "type", short = 't', value_parser = parse_type)]
        trace_type: Option<TraceType>,
        /// Only per-function figures: no call paths (flame graphs show one frame per function).
        #[arg(long)]
        flat: bool,
        /// With call_time, record each call's own time for p50/p90/p99/max per process and
        /// function.
        #[arg(long)]
        percentiles: bool,
        /// With --percentiles, the significant figures each histogram keeps: 1 to 5 (each
        /// more makes them about ten times larger).
        #[arg(
            long,
            default_value_t = 2,
            requires = "percentiles",
            value_parser = clap::value_parser!(u8).range(1..=5)
        )]
        percentile_precision: u8,
        /// Keep an event log per process (each traced frame entered and left), for a real
        /// timeline in the chrome and html exports.
        #[arg(long)]
        events: bool,
        /// Where to write (default: PROGRAM.tprof; standard output for --format; `-`:
        /// standard output). Without --format, the name's extension says the format
        /// (`.speedscope.json`, `.svg`, ...; an archive for `.tprof` or another name).
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
        /// Write this export instead of an archive: pretty, json, speedscope, chrome, pprof,
        /// folded, svg or html.
        #[arg(long, short = 'f', value_parser = parse_format)]
        format: Option<Format>,
        /// Seconds between two snapshots of the profile while the program runs, so that one
        /// killed with SIGKILL leaves one at most this old (0: none).
        #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = parse_seconds)]
        snapshot_every: f64,
        /// On SIGINT and SIGTERM the profile is written, then: `exit` — the program dies of
        /// the signal; `keep` — the signal is left to the program's own handler (for a program
        /// that handles them to shut down gracefully); `off` — tprof installs no handler.
        #[arg(long, value_name = "MODE", default_value = "exit", value_parser = parse_signals)]
        signals: Signals,
        /// Also write a heap snapshot (Chrome DevTools' .heapsnapshot: processes, their heap,
        /// mailboxes, names, supervision, links and monitors) of the program's node to FILE, taken
        /// as it stops (before its processes are stopped) or as SIGINT or SIGTERM arrives; one
        /// per node: the others beside the first (heap.node2.heapsnapshot, ...).
        #[arg(long, value_name = "FILE")]
        heap_snapshot: Option<PathBuf>,
        /// With --format: which frames of the samples show.
        #[command(flatten)]
        filters: FilterArgs,
        /// The program, then its arguments (after `--`).
        #[arg(
            required = true,
            num_args = 1..,
            trailing_var_arg = true,
            value_name = "PROGRAM [ARGS]"
        )]
        command: Vec<OsString>,
    },
    /// Write a profile file (.tprof, a json export, or a run file or folder of them that
    /// TPROF_RUN wrote) in another format.
    ///
    /// The pretty report of a profile with samples (sample mode) is Julia's Profile.print:
    /// the tree of stacks, then the flat list of frames, each line's count being the samples
    /// through it (timer periods, or process-ticks for wall samples) and its overhead those
    /// that ended in it; wall samples start with where the processes wait. The options under
    /// "Sample reports" lay them out.
    Report {
        /// pretty, json, speedscope, chrome, pprof, folded, svg or html (default: what the
        /// --out name's extension says, else pretty).
        #[arg(long, short = 'f', value_parser = parse_format)]
        format: Option<Format>,
        /// Where to write (default, and `-`: standard output).
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
        /// The profile file (`-`: standard input).
        file: PathBuf,
        /// Instead of the report: the annotated source listing of the functions whose name
        /// (`module::function`) this regular expression matches, as `go tool pprof -list`
        /// prints it: each line of their source with its CPU (else wall) time, or its
        /// allocated and in-use bytes and allocations, flat and cum.
        #[arg(long, value_name = "REGEX", conflicts_with = "format")]
        list: Option<String>,
        /// Instead of the report: the tree of the callers of the function FUNC in the samples
        /// (`module::name/arity`, `module::name` or `name`), outward, with counts, the most
        /// first (its first level is Julia's Profile.callers): each the nearest frame above
        /// that --native, --crate and --hide show, in the samples --focus keeps, of
        /// --sampler's samples (default: the first of cpu, wall and alloc the profile has).
        #[arg(long, value_name = "FUNC", conflicts_with_all = ["format", "list"])]
        callers: Option<String>,
        /// With --list: the folder relative source paths are read from (default: the
        /// current one).
        #[arg(long, value_name = "DIR", requires = "list")]
        source_path: Option<PathBuf>,
        /// With --list: whose samples to list, cpu, wall or alloc (default: cpu when the
        /// profile has CPU samples, else wall, else alloc).
        #[arg(long = "list-sampler", value_name = "SAMPLER", requires = "list", value_parser = parse_sampler_kind)]
        list_sampler: Option<tprof::samples::SamplerKind>,
        /// Only the samples of this sampler: cpu, wall or alloc (a merge of several is drawn
        /// by folded, svg and html one sampler at a time).
        #[arg(long, value_name = "SAMPLER", conflicts_with = "list", value_parser = parse_sampler_kind)]
        sampler: Option<tprof::samples::SamplerKind>,
        /// How the pretty report lays samples out.
        #[command(flatten)]
        samples: SampleArgs,
    },
    /// Merge profile files of one trace type into one archive; the processes of each run
    /// stay apart.
    Merge {
        /// The archive to write (`-`: standard output), or the export its extension names.
        #[arg(long, short = 'o', required = true)]
        out: PathBuf,
        /// The profile files (`-`: standard input).
        #[arg(required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
    },
    /// Drive a live program's node through its control endpoint (a program that opened one:
    /// TPROF_CONTROL=1), as an Erlang shell drives tprof: start, set_pattern, enable_trace,
    /// collect, ... (`help` lists them); `prof sample 2s` or `prof trace call_time 2s`
    /// profiles the next seconds and prints the report. Without -c, a prompt with line
    /// editing, history (in $XDG_STATE_HOME/tprof) and Tab completion of commands, functions
    /// and registered names.
    ///
    /// A program that also sets TPROF_PPROF_HTTP=127.0.0.1:PORT serves /debug/pprof/ (profile,
    /// heap, goroutine) to `go tool pprof` and scrapers that show its token: `?token=TOKEN` in
    /// the URL or `Authorization: Bearer TOKEN`, the token being in the `.token` file beside
    /// the socket (0600); TPROF_PPROF_HTTP_OPEN=1 serves it to every local user without one.
    ///
    /// Exit code with -c: 1 when a command failed (the ones after it are not sent).
    Attach {
        /// The program's OS pid, its endpoint's socket path, or its TCP address (HOST:PORT).
        target: String,
        /// Commands to run, separated by `;` or newlines, instead of a prompt.
        #[arg(long, short = 'c')]
        commands: Option<String>,
        /// The token of a TCP endpoint.
        #[command(flatten)]
        auth: TokenArgs,
    },
    /// A live table of a program's processes (through its control endpoint): state, mailbox,
    /// heap, polls since the last refresh, the traced function each is in; the first rows by
    /// --sort, redrawn every --interval.
    Top {
        /// The program's OS pid, its endpoint's socket path, or its TCP address (HOST:PORT).
        target: String,
        /// The token of a TCP endpoint.
        #[command(flatten)]
        auth: TokenArgs,
        /// Seconds between two refreshes.
        #[arg(long, short = 'i', default_value = "1", value_parser = parse_interval)]
        interval: f64,
        /// What the rows are sorted by: polls, mailbox, heap, state, name or pid.
        #[arg(long, short = 's', default_value = "polls", value_parser = parse_sort_key)]
        sort: tprof::control::top::SortKey,
        /// Stop after N refreshes (default: until interrupted).
        #[arg(short = 'n', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        iterations: Option<u64>,
        /// One refresh, then stop (-n 1).
        #[arg(long, conflicts_with = "iterations")]
        once: bool,
        /// How many processes to show (default: what the terminal fits, else 25).
        #[arg(long, value_name = "N")]
        rows: Option<usize>,
    },
    /// Write a live program's heap snapshot (Chrome DevTools' .heapsnapshot: its processes,
    /// their heaps, mailboxes, names, supervision, links and monitors) through its control
    /// endpoint (TPROF_CONTROL=1). `tprof run --heap-snapshot` takes one as a program stops.
    Snapshot {
        /// The program's OS pid, its endpoint's socket path, or its TCP address (HOST:PORT).
        target: String,
        /// The token of a TCP endpoint.
        #[command(flatten)]
        auth: TokenArgs,
        /// Where to write it (`-`: standard output).
        #[arg(long, short = 'o', default_value = "heap.heapsnapshot")]
        out: PathBuf,
    },
    /// Write the HTML viewer of a profile file and open it in the browser (or print its path
    /// when there is none).
    View {
        /// Where to write the page (default: a file in the temporary folder; `-`: standard
        /// output, and no browser).
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
        /// The profile file (`-`: standard input).
        file: PathBuf,
    },
}

/// `tprof report`'s options for samples: Julia's `Profile.print` keywords.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Sample reports (pretty)")]
pub(crate) struct SampleArgs {
    /// Leave out the tree's lines deeper than N (the outermost are at depth 0).
    #[arg(long, value_name = "N")]
    pub(crate) maxdepth: Option<usize>,
    /// Leave out lines (and what is below them) counting fewer samples than N.
    #[arg(long, value_name = "N", value_parser = parse_amount)]
    pub(crate) mincount: Option<f64>,
    /// Leave out a line of the tree (and what is below it) whose count n is at most
    /// X × √N, N being the count of the line above it; 2.0 is a fair value to try.
    #[arg(long, value_name = "X", value_parser = parse_amount)]
    pub(crate) noisefloor: Option<f64>,
    /// The order of siblings and of the flat list: filefuncline (the default: file, function,
    /// line), name, count or overhead (both ascending: the heaviest last, as Julia).
    #[arg(long, value_name = "ORDER")]
    pub(crate) sortedby: Option<SortedBy>,
    /// A report per process, per thread, or nested: none (the default), process, thread,
    /// process,thread or thread,process.
    #[arg(long, value_name = "GROUPS")]
    pub(crate) groupby: Option<GroupBy>,
    /// Recursion in the tree: off (the default), or flat (a frame already on the stack
    /// above folds into that line).
    #[arg(long, value_name = "MODE")]
    pub(crate) recur: Option<Recur>,
    /// Hide native frames (the untraced code CPU samples ran): each sample counts at its
    /// innermost traced frame (--native none).
    #[arg(long, conflicts_with = "native")]
    pub(crate) no_native: bool,
    /// Show each instruction address of a line apart rather than as one line.
    #[arg(long)]
    pub(crate) no_combine: bool,
    /// Cut lines to N characters, deep indentation shortened to +n (default: the terminal's
    /// width on a terminal, else 0: no cut).
    #[arg(long, value_name = "N")]
    pub(crate) width: Option<usize>,
    /// Rows of the wall summary's per-process table (default 25): past it, unnamed processes
    /// are counted together by initial call.
    #[arg(long, value_name = "N")]
    pub(crate) rows: Option<usize>,
    /// Which frames show and which are folded (--native, --crate, --focus, --hide).
    #[command(flatten)]
    pub(crate) filters: FilterArgs,
}

/// The options that choose which frames of a sampled profile show: in the pretty report,
/// `--callers` and every export but json (folded, svg, speedscope, chrome, pprof; html sets
/// its page's controls) of `tprof report` and `tprof run`.
#[derive(Debug, Default, clap::Args)]
#[command(next_help_heading = "Frames of samples (the report, --callers, every export but json)")]
pub(crate) struct FilterArgs {
    /// Which native frames (the untraced code CPU samples ran) show: user (the user's code,
    /// the plumbing of the runtime, tokio, std and system libraries folded into the frame
    /// above, the report saying how many; the default but for pprof), all (the default for
    /// pprof, whose reader has filters of its own), or none (each sample counts at its
    /// innermost traced frame).
    #[arg(long, value_name = "WHICH")]
    pub(crate) native: Option<Native>,
    /// Frames of these crates only (pprof-like): the others are folded into the frame
    /// above. Repeat it, or separate names with commas: --crate kvpool,kvpool_proto.
    #[arg(long = "crate", value_name = "NAME", value_delimiter = ',')]
    pub(crate) crates: Vec<String>,
    /// Only the samples with a frame whose function or file REGEX matches (pprof's -focus).
    #[arg(long, value_name = "REGEX", value_parser = parse_focus)]
    pub(crate) focus: Option<String>,
    /// Leave the frames whose function or file REGEX matches out of the stacks, their
    /// samples counted at the frame above (pprof's -hide).
    #[arg(long, value_name = "REGEX", value_parser = parse_hide)]
    pub(crate) hide: Option<String>,
}

impl FilterArgs {
    /// `options` with these filters set, for an output in `format` (`None`: an archive, or
    /// the pretty report); `no_native` is `tprof report`'s --no-native. Without --native,
    /// the format's [`default_native`](Format::default_native).
    pub(crate) fn apply(
        &self,
        options: PrintOptions,
        no_native: bool,
        format: Option<Format>,
    ) -> PrintOptions {
        let native = if no_native {
            Native::None
        } else {
            self.native
                .unwrap_or_else(|| format.map_or_else(Native::default, Format::default_native))
        };
        let mut options = options.native(native).crates(self.crates.iter().cloned());
        options.focus = self.focus.clone();
        options.hide = self.hide.clone();
        options
    }
}

impl SampleArgs {
    /// The options asked for, for an output in `format` ([`FilterArgs::apply`]); `terminal`
    /// is the width of the terminal the report goes to, if it goes to one.
    pub(crate) fn options(&self, terminal: Option<usize>, format: Option<Format>) -> PrintOptions {
        let default = PrintOptions::new();
        let options = PrintOptions::new()
            .format(ReportFormat::Both)
            .maxdepth(self.maxdepth.unwrap_or(default.maxdepth))
            .mincount(self.mincount.unwrap_or(default.mincount))
            .noisefloor(self.noisefloor.unwrap_or(default.noisefloor))
            .sortedby(self.sortedby.unwrap_or(default.sortedby))
            .groupby(self.groupby.unwrap_or(default.groupby))
            .recur(self.recur.unwrap_or(default.recur))
            .combine(!self.no_combine)
            .width(self.width.or(terminal).unwrap_or(0))
            .rows(self.rows.unwrap_or(default.rows));
        self.filters.apply(options, self.no_native, format)
    }
}

/// The export a command writes: `format` if given, else the one `out`'s name says (`None`
/// for an archive or a name that says none), as [`tprof::command::report`] and
/// [`tprof::command::run`] choose it.
pub(crate) fn export_of(format: Option<Format>, out: Option<&std::path::Path>) -> Option<Format> {
    format.or_else(|| match out.and_then(tprof::command::Output::of_path) {
        Some(tprof::command::Output::Export(f)) => Some(f),
        _ => None,
    })
}

/// A `--focus` pattern, checked.
fn parse_focus(s: &str) -> Result<String, String> {
    PrintOptions::new()
        .focus(s)
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

/// A `--hide` pattern, checked.
fn parse_hide(s: &str) -> Result<String, String> {
    PrintOptions::new()
        .hide(s)
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

fn parse_amount(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number (0 or more)")),
    }
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
        .map_err(|e: tprof::export::FormatError| e.to_string())
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number of seconds (0 or more)")),
    }
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.01..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}` is not an interval: seconds, from 0.01 to 86400"
        )),
    }
}

fn parse_sort_key(s: &str) -> Result<tprof::control::top::SortKey, String> {
    s.parse()
}

fn parse_signals(s: &str) -> Result<Signals, String> {
    s.parse()
}

fn parse_probability(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("`{s}` is not a probability: a number from 0 to 1")),
    }
}

fn parse_cpu_source(s: &str) -> Result<runtime::sample::CpuSource, String> {
    s.parse()
}

fn parse_sampler(s: &str) -> Result<runtime::sample::Sampler, String> {
    s.parse()
}

fn parse_sampler_kind(s: &str) -> Result<tprof::samples::SamplerKind, String> {
    use tprof::samples::SamplerKind;
    [SamplerKind::Cpu, SamplerKind::Wall, SamplerKind::Alloc]
        .into_iter()
        .find(|k| k.name() == s)
        .ok_or_else(|| format!("`{s}` is not a sampler: cpu, wall or alloc"))
}

fn parse_type(s: &str) -> Result<TraceType, String> {
    s.parse().map_err(|e: tprof::TraceTypeError| e.to_string())
}

/// The token a TCP control endpoint asks for (by default, the one its program wrote beside its
/// socket, when it runs as this user on this host).
#[derive(Debug, clap::Args)]
pub(crate) struct TokenArgs {
    /// The endpoint's token.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    token: Option<String>,
    /// A file whose first line is the endpoint's token.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

impl TokenArgs {
    /// The token given, if any.
    pub(crate) fn token(&self) -> Result<Option<tprof::control::Token>, String> {
        match (&self.token, &self.token_file) {
            (Some(token), _) => tprof::control::Token::new(token.trim()).map(Some),
            (None, Some(file)) => tprof::control::Token::read_file(file).map(Some),
            (None, None) => Ok(None),
        }
    }
}
