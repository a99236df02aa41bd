//! Exports: a [`Profile`] written in the formats the viewers people use read.
//!
//! Every export reads the one [`Profile`] model. Each format is one module under `export/`:
//!
//! | [`Format`] | what it writes | read by |
//! | --- | --- | --- |
//! | `pretty` | tprof's text report, per process, with the processes named and the call tree; for samples, Julia's tree and flat list first | people |
//! | `json` | the [`Profile`] itself (serde; the schema is the model's field names) | scripts, [`Profile`]'s `Deserialize` |
//! | `speedscope` | speedscope's file format, one profile per process | <https://speedscope.app> |
//! | `chrome` | Chrome trace-event JSON, one track per process (a timeline where the process has an event log) | Perfetto, `chrome://tracing` |
//! | `pprof` | gzipped `profile.proto` | `go tool pprof` |
//! | `folded` | folded stacks, one line per path | flamegraph.pl, inferno |
//! | `svg` | a flame graph | any browser |
//! | `html` | a self-contained viewer: flame graph with zoom and search, per-process tables (and timelines, from event logs) | any browser, offline |
//!
//! A profile without call paths (taken without call-tree mode) exports each function as a
//! stack of one frame.
//!
//! A call path deeper than [`MAX_STACK_DEPTH`] (128) frames is exported as its outermost 64
//! and innermost 63 frames with [`TRUNCATED`] (`[truncated frames]`) between them: an
//! archive's path 20,000 calls deep costs each export no more than one 128 deep.
//!
//! Every format but `pretty` and `json` values a trace type in one unit, and labels it:
//! calls (call_count), nanoseconds (call_time) and **bytes** (call_memory), where tprof's
//! text report counts words. Processes go by their registered names, with the pid added where
//! several processes of the profile share a name ([`Profile::labels`]).
//!
//! # Sampled profiles
//!
//! A profile of samples ([`Profile::samples`], sample mode) is exported as its samples by
//! every format but `pretty` and `json` (which keep the profile as it is, samples included):
//!
//! | format | what a sample becomes |
//! | --- | --- |
//! | `speedscope` | sampled profiles in time order: every process together, then each |
//! | `chrome` | nested slices at the times sampled, on each process's track |
//! | `pprof` | `samples/count` and `cpu/nanoseconds` (or `wall/nanoseconds`), labelled `pid`, `process`, `thread`, `state`; native frames at their addresses in their mappings |
//! | `folded` | one line per distinct path, the process first |
//! | `svg` | a flame graph of those paths, frames under a pixel left out |
//! | `html` | the viewer's flame graph and, per process, a table of the frames sampled |
//!
//! Samples weigh **nanoseconds**: their weight times their source's period, that is CPU time
//! for CPU samples, and for wall samples wall time summed over processes; allocation samples
//! weigh **bytes** (the bytes each stands for), shown as bytes by every format (the chrome
//! export draws them as instants and a counter of bytes, not as slices of time). A profile
//! of several samplers (a merge) is refused by `folded`, `svg` and `html`, which draw one
//! total: `tprof report --sampler` exports one sampler at a time. CPU time outside any
//! process goes under one root, `(outside processes)`; a wall sample's state is its innermost
//! frame (`[receive]`) where stacks are drawn, and a label in pprof. Samples dropped because
//! the sample buffer was full are reported by each format as it can: a comment (pprof), the
//! file's and the profile's names (speedscope), `otherData` and an instant event (chrome), a
//! `(dropped samples)` path (folded, svg) and a subtitle (svg), the header (html). Every
//! export is linear in the samples, stacks and frames (plus sorting).

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use crate::Profile;

mod chrome;
mod flamegraph;
pub(crate) use flamegraph::{Scripts, write_drawing as flame_graph};
mod folded;
mod grouped;
mod html;
pub(crate) use html::escape_html;
mod json;
pub mod pprof;
mod pretty;
mod sampled;
mod speedscope;
mod stacks;
mod timeline;
mod weight;

pub use stacks::{MAX_STACK_DEPTH, OUTER_FRAMES, Stack, TRUNCATED, stacks};

/// A call_time profile's note of the waits on the OS's run queue while it was taken, when they
/// were large ([`Profile::run_queue`], [`crate::RUN_QUEUE_NOTE_SHARE`]): what its text report
/// says after its tables, and each export says where its readers look (pprof's comments,
/// speedscope's name, Chrome's `otherData`, the page's header).
fn run_queue_note(profile: &Profile) -> Option<String> {
    if profile.trace_type != crate::TraceType::CallTime {
        return None;
    }
    profile
        .run_queue()
        .as_ref()
        .and_then(crate::format::run_queue_note)
}

/// An export format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// tprof's text report ([`format`](crate::format())), per process, byte for byte, after
    /// a table naming the processes, and followed by the call tree when the profile has call
    /// paths. A profile with samples starts with their report: Julia's tree and flat list
    /// ([`crate::sample_report`]; [`write_pretty`] lays them out otherwise).
    Pretty,
    /// The profile as JSON.
    Json,
    /// speedscope's file format: one sampled profile per process, each call path weighing
    /// its own calls (unit `none`), nanoseconds, or bytes (call_memory). Samples: every
    /// process together, then each, in time order, in nanoseconds.
    Speedscope,
    /// Chrome trace-event JSON, for Perfetto and `chrome://tracing`: one track per process.
    /// A process with an event log ([`Profile::event_logs`]) is a real timeline: each traced
    /// frame (a call, or one poll of an async call) a slice at the time it ran, nested as the
    /// frames were, its log's dropped events noted. The other processes show their call tree
    /// as nested slices whose durations are the inclusive figures — polled time for
    /// call_time; for call_count and call_memory, 1 µs per call or per byte allocated.
    /// Samples: nested slices at the times they were taken, on each process's track. Past
    /// a million slices (of either), the shortest are left out, and `otherData` says how many.
    Chrome,
    /// Gzipped `profile.proto`, for `go tool pprof`: a sample per process and call path,
    /// labelled `process` and `pid` (the messages: [`pprof`]). Samples: `samples/count` and
    /// `cpu/nanoseconds` or `wall/nanoseconds`, labelled `thread` and `state` too.
    Pprof,
    /// Folded stacks, for flamegraph.pl and inferno: one line per process and call path, the
    /// process as the root frame, valued in calls, nanoseconds or bytes (call_memory).
    /// Samples: one line per distinct path, in nanoseconds.
    Folded,
    /// A flame graph of every process, as SVG (drawn by inferno), in calls, nanoseconds or
    /// bytes (call_memory), frames under a pixel wide left out. Samples: in nanoseconds.
    Svg,
    /// One self-contained HTML page: a flame graph with zoom and search, per-process
    /// tables, and per-process timelines when the profile has event logs
    /// ([`Profile::event_logs`]); it needs no network. Samples: their flame graph and, per
    /// process, a table of the frames sampled.
    Html,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: &'static [Format] = &[
        Format::Pretty,
        Format::Json,
        Format::Speedscope,
        Format::Chrome,
        Format::Pprof,
        Format::Folded,
        Format::Svg,
        Format::Html,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Pretty => "pretty",
            Format::Json => "json",
            Format::Speedscope => "speedscope",
            Format::Chrome => "chrome",
            Format::Pprof => "pprof",
            Format::Folded => "folded",
            Format::Svg => "svg",
            Format::Html => "html",
        }
    }

    /// Which native frames of a sampled profile the command shows in this format when
    /// `--native` is not given ([`write_shown`]): every frame ([`Native::All`]) in `pprof`,
    /// the user's code ([`Native::User`]: the plumbing of the runtime, tokio and std folded
    /// into the frame above) in every other.
    ///
    /// `pprof` keeps every frame because its reader filters for itself: `go tool pprof` has
    /// `-focus`, `-hide`, `-ignore` and `-show_from` (and its web view the same), its users
    /// expect the profile as taken, and its `-lines`, `-addresses` and `disasm` views want
    /// the frames at their addresses. The other formats are drawn by viewers with no notion
    /// of plumbing (a flame graph, speedscope, Perfetto), which would draw tokio's and std's
    /// forty frames between a traced function and the code it calls, as the report did
    /// before it folded them.
    ///
    /// [`Native::All`]: crate::sample_report::Native::All
    /// [`Native::User`]: crate::sample_report::Native::User
    pub fn default_native(self) -> crate::sample_report::Native {
        match self {
            Format::Pprof => crate::sample_report::Native::All,
            _ => crate::sample_report::Native::User,
        }
    }

    /// The file extension a file of this format usually has (without the leading dot).
    ///
    /// Chrome traces are `trace.json`, not `chrome.json`: speedscope opens `*.chrome.json`
    /// with its importer of DevTools recordings, which rejects plain trace events.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Pretty => "txt",
            Format::Json => "json",
            Format::Speedscope => "speedscope.json",
            Format::Chrome => "trace.json",
            Format::Pprof => "pb.gz",
            Format::Folded => "folded",
            Format::Svg => "svg",
            Format::Html => "html",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A format name that is not one of [`Format::ALL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    /// What was asked for.
    pub input: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown format `{}`: expected one of ", self.input)?;
        for (i, format) in Format::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(format.name())?;
        }
        Ok(())
    }
}

impl std::error::Error for FormatError {}

impl FromStr for Format {
    type Err = FormatError;

    fn from_str(s: &str) -> Result<Format, FormatError> {
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| FormatError {
                input: s.to_owned(),
            })
    }
}

/// Why an export failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ExportError {
    /// Writing failed.
    Io(io::Error),
    /// The profile cannot be shown in this format (the message says why).
    Unsupported {
        /// The format.
        format: Format,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Io(e) => write!(f, "cannot write the export: {e}"),
            ExportError::Unsupported { format, reason } => {
                write!(f, "cannot export as {format}: {reason}")
            }
        }
    }
}

impl std::error::Error for ExportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExportError::Io(e) => Some(e),
            ExportError::Unsupported { .. } => None,
        }
    }
}

impl From<io::Error> for ExportError {
    fn from(e: io::Error) -> ExportError {
        ExportError::Io(e)
    }
}

impl From<serde_json::Error> for ExportError {
    fn from(e: serde_json::Error) -> ExportError {
        ExportError::Io(e.into())
    }
}

/// Writes `profile` to `out` in `format`.
///
/// # Errors
///
/// [`ExportError::Io`] when writing fails; [`ExportError::Unsupported`] for an `svg` of a
/// profile in which nothing was measured (or, sampled, in which no sample was taken), and for
/// a `folded`, `svg` or `html` export of samples of several samplers (a merge of CPU, wall
/// or allocation samples: they weigh different things, and these formats draw one total).
///
/// # Examples
///
/// ```
/// use tprof::export::{self, Format};
/// use tprof::{Profile, TraceType};
///
/// let mut out = Vec::new();
/// export::write(Format::Pretty, &Profile::empty(TraceType::CallTime), &mut out).unwrap();
/// assert_eq!(out, b"Trace is empty\n");
/// ```
pub fn write(format: Format, profile: &Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    if matches!(format, Format::Folded | Format::Svg | Format::Html) {
        sampled::one_sampler(profile, format)?;
    }
    match format {
        Format::Pretty => pretty::write(profile, out),
        Format::Json => json::write(profile, out),
        Format::Speedscope => speedscope::write(profile, out),
        Format::Chrome => chrome::write(profile, out),
        Format::Pprof => pprof::write(profile, out),
        Format::Folded => folded::write(profile, out),
        Format::Svg => flamegraph::write(profile, out),
        Format::Html => html::write(profile, out),
    }
}

/// Writes `profile` as the `pretty` report, its samples laid out as `samples` say (what
/// `tprof report --maxdepth ...` writes); [`write()`] lays them out as
/// [`PrintOptions::new`](crate::sample_report::PrintOptions::new) with
/// [`ReportFormat::Both`](crate::sample_report::ReportFormat::Both).
///
/// # Errors
///
/// [`ExportError::Io`] when writing fails.
pub fn write_pretty(
    profile: &Profile,
    samples: &crate::sample_report::PrintOptions,
    out: &mut dyn Write,
) -> Result<(), ExportError> {
    pretty::write_with(profile, samples, out)
}

/// Writes `profile` as folded stacks, its samples' frames shown as `samples` say:
/// [`write_shown`] in [`Format::Folded`].
///
/// # Errors
///
/// As [`write_shown`].
pub fn write_folded(
    profile: &Profile,
    samples: &crate::sample_report::PrintOptions,
    out: &mut dyn Write,
) -> Result<(), ExportError> {
    write_shown(Format::Folded, profile, samples, out)
}

/// Writes `profile` to `out` in `format`, its samples' frames shown as `samples` say, as the
/// sample report shows them (what `tprof report --format F` and `tprof run --format F`
/// write): [`native`](crate::sample_report::PrintOptions::native) (by default the user's
/// code, the plumbing of the runtime, tokio and std folded, each sample counted at the frame
/// above: [`Native::User`](crate::sample_report::Native::User)),
/// [`crates`](crate::sample_report::PrintOptions::crates),
/// [`focus`](crate::sample_report::PrintOptions::focus) and
/// [`hide`](crate::sample_report::PrintOptions::hide). [`write()`] writes every frame.
///
/// - `folded`, `svg`, `speedscope`, `chrome` and `pprof` write the profile as the options
///   show it: the samples focus keeps, on stacks without the frames that do not show (one
///   filtering for all five). A sample none of whose frames shows is under its process
///   alone (pprof: at `(no stack)`).
/// - `pretty` lays the samples out as the report does ([`write_pretty`]: every option).
/// - `json` is the profile itself, every frame: it is what a profile file is read back from.
/// - `html` sets the page's own Focus and Hide boxes and its plumbing checkbox (folded for
///   [`Native::User`](crate::sample_report::Native::User) without `crates`), which the
///   reader may change; what the page has no control for (native frames none, other crates'
///   frames) is left out of its data.
/// - A profile without samples is written as [`write()`] writes it.
///
/// What each format shows when the options are not set is
/// [`Format::default_native`]'s choice on the command line.
///
/// # Errors
///
/// [`ExportError::Io`] when writing fails, or (of kind `InvalidInput`) when focus or hide is
/// not a regular expression; [`ExportError::Unsupported`] as [`write()`].
pub fn write_shown(
    format: Format,
    profile: &Profile,
    samples: &crate::sample_report::PrintOptions,
    out: &mut dyn Write,
) -> Result<(), ExportError> {
    match format {
        Format::Pretty => return pretty::write_with(profile, samples, out),
        Format::Json => return write(format, profile, out),
        Format::Html => {
            sampled::one_sampler(profile, format)?;
            return html::write_with(profile, samples, out);
        }
        Format::Folded | Format::Svg | Format::Speedscope | Format::Chrome | Format::Pprof => {}
    }
    if !sampled::is_sampled(profile) {
        return write(format, profile, out);
    }
    let view = crate::sample_report::FrameView::of(profile, samples)
        .map_err(|e| ExportError::Io(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
    write(format, &view.apply(profile), out)
}

/// Writes `profile` to a string in `format` (for the text formats: every format but `pprof`,
/// which is gzip data).
///
/// # Errors
///
/// As [`write()`].
pub fn to_string(format: Format, profile: &Profile) -> Result<String, ExportError> {
    let mut out = Vec::new();
    write(format, profile, &mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}
