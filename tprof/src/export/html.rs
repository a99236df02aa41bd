//! `html`: one self-contained page to explore a profile in a browser, offline.
//!
//! The page holds everything it shows: the data as JSON in a
//! `<script type="application/json" id="tprof-data">` element, and a viewer written for this
//! crate (`html/viewer.js`, `html/viewer.css`, included in the binary). It loads nothing: no
//! script, style sheet, font or image from a file or the network, and its Content Security
//! Policy forbids any such load. The viewer draws:
//!
//! - an icicle graph (a flame graph with the root on top) of every process or of one: click a
//!   frame to zoom into it, `Esc` or *Reset* to zoom out; hover a frame for its function,
//!   `file:line`, process, calls and value (inclusive and its own), with its share of the
//!   total;
//! - a search box: the frames whose function (or process) contains the text are highlighted,
//!   and the share of the total they cover is shown;
//! - for a sampled profile, filters of the flame graph as `tprof report` has them: *Focus*
//!   (only the samples with a frame whose function or file the regular expression matches,
//!   pprof's `-focus`), *Hide* (those frames left out, their time counted at the frame above,
//!   pprof's `-hide`), and *Fold plumbing* (on by default: the frames of the runtime, tokio,
//!   std and system libraries left out so, as the report's default
//!   [`Native::User`](crate::sample_report::Native::User) does; the page says how many). A
//!   link can set them: `page.html#focus=parse&hide=fmt&plumbing=0`, and so can the command
//!   (`tprof report -f html --focus parse --native all`: [`write_with`]). The per-process
//!   tables follow them as the flame graph does, and under a focus the header gives the
//!   samples it keeps beside them all (`3 of 9 samples shown`). The patterns are Rust's, as
//!   the report reads them, translated where JavaScript's differ (`(?i)` at the start becomes
//!   the `i` flag); one that cannot be translated is named, and filters nothing;
//! - per process, the table of its functions (calls, the value, per call, %, and words and
//!   blocks for call_memory), sorted by clicking a column's header; with percentiles
//!   (call_time), p50, p90, p99 and max of each function's time per call in that process;
//! - when the profile has event logs ([`Profile::event_logs`]), a timeline of each process
//!   that has one (of the one chosen, or of every one, on a shared time axis): its frames at
//!   the times they ran, nested, hover one for its function, start and duration; a log that
//!   could not keep every event says how many it lost.
//!
//! # The embedded JSON
//!
//! An object with `version` (2), `trace_type`, `unit` (`calls`, `ns` or `bytes`: the unit
//! every export weighs a trace type in, the `weight` module's),
//! `call_tree` (whether the stacks are call paths or one function each), `runs` (the
//! profile's [`Run`]s), `functions` (each `module`, `name`, `arity`, `file`,
//! `line`, `mfa`), `initial_calls` (each distinct initial call once), `processes` (each
//! `[id, label, name, initial_call, run]`: `id` the pid, or `all`; `label` null when it is
//! the id; `initial_call` an index into `initial_calls`; a sixth element, the number of
//! processes it stands for, on a sum of many: see below), `paths` (each distinct call path
//! once, as `[parent, function]`, `parent` -1 for an outermost frame), `stacks` (each
//! `[process, path, calls, value, bytes, blocks]` (`path` -1 for a stack of no frame), indices into the lists above, `value` in
//! `unit`, exclusive of the frames above it: [`stacks()`] of the profile), `rows` (the flat
//! figures per process and function, `[process, function, calls, value, words, bytes,
//! blocks]`, `words` tprof's measurement of call_memory, 0 for the other types),
//! `percentiles` (each `[process, function, calls, p50_ns, p90_ns, p99_ns, max_ns]`: the
//! calls' own time, as the time column), `aggregates` (the processes summed by registered
//! name, `by_name`, and by initial call, `by_initial_call`: each `[key, processes, calls,
//! value]`, `key` null for the processes without a registered name, largest value first),
//! `total` (the sum of the stacks' values) and `timelines`: per process with an event log,
//! `process`, `dropped` and `frames`,
//! each `[function, start_ns, end_ns, depth, cut_short]` (times since the profile's earliest
//! logged event, `cut_short` 1 for a frame still open where the log ends, else 0), in the
//! order they were entered, read as the `chrome` export reads them. Every `<`, `>` and `&` in
//! it is written as a `\u` escape, so no text in the profile (a function named `</script>`,
//! say) can end the element early.
//!
//! Many processes: the viewer draws a page of rows at a time (200), and sums the processes
//! by registered name or by initial call (a toggle) in its process table and its flame graph;
//! the flame graph merges the frames narrower than a pixel into one, as inferno's
//! `--minwidth` does. A process's own tables are drawn when it is chosen. Past 200 processes,
//! a trace profile's page keeps the 200 largest one by one and sums the others by registered
//! name and initial call (`app::worker/1 (99,521 processes)`, with their number as the
//! process's sixth element), so that the page stays a few hundred kilobytes at 100,000
//! processes; its totals, its sums by name and by initial call and its flame graph of every
//! process are the whole profile's, and `note` (a sentence its header shows) says what was
//! summed and which exports keep every process. A call_time page's `note` says too when the
//! program's threads waited long on the OS's run queue (as the text report does).
//!
//! # Sampled profiles
//!
//! A profile of samples ([`Profile::samples`]) is shown as its samples: the flame graph has a
//! frame per process (and `(outside processes)` for CPU time outside any process), then each
//! sampled stack (a wall sample's state as its last frame, `[receive]`), as wide as the
//! **nanoseconds** its samples stand for (CPU time; for wall samples, wall time summed over
//! processes); the tables list, per process, each frame with the samples that have it on
//! their stack, its own time (where it is innermost) and its total time (anywhere on the
//! stack, counted once per sample however often it recurs); the header says what was
//! sampled at which rate asked (and for CPU samples the distinct samples per CPU-second
//! taken), from how many samples, how many were dropped, and what the CPU samples could see
//! (the mechanism, the share captured, and each warning). In the embedded
//! JSON: `unit` is `ns`; `functions` also holds native frames and states (each with
//! `native: true`, `module` the path of its name, `file` empty and `line` 0 when unknown;
//! `plumbing: true` for a frame of the plumbing the viewer folds by default);
//! `processes` are the roots (`id` the pid, or `(outside processes)`; prefixed with the
//! sampler, `cpu: ` or `wall: `, when both are in the profile); `stacks` are the distinct
//! stacks of each root, `calls` counting samples and `value` their nanoseconds; `rows` have
//! `calls` (samples with the frame), `value` (own) and, after `blocks`, `total`; and `samples` says what was
//! sampled: `what`, `measure`, `count`, `dropped` (their weight, rounded), `dropped_ns`,
//! `dropped_note` and, when the CPU sources carry it, `cpu`
//! ([`CpuTruth`](crate::samples::CpuTruth): `figures`, `summary`, `warnings`).
//!
//! A sampled profile's page also holds the source listing of each of its functions (a
//! [`crate::listing`] of the CPU samples, else the wall samples; relative source paths read
//! from the current folder when the page is written): `listings` has `sampler`, `columns`,
//! `totals` and `routines`, each a [`crate::listing::Routine`] with `entry`, its index in
//! `functions`, its values rounded and each of its lines as `[line, flat, cum, text]`. Clicking a frame of the graph, or *source* beside a function in the tables,
//! shows it under the graph: each line of the function with its flat and cum time, the lines
//! with samples tinted, and a note when the file could not be read or some time had no line
//! of its own.

use std::borrow::Cow;
use std::io::Write;

use serde::Serialize;

use super::ExportError;
use super::flamegraph::duration;
use super::sampled::{describe, is_sampled};
use super::weight::unit;
use crate::sample_report::{FrameView, Native, PrintOptions};
use crate::{Function, Profile, Run, TraceType};

mod compact;
mod sampled;
mod summary;
mod traced;

/// The viewer's script.
const VIEWER_JS: &str = include_str!("html/viewer.js");
/// The viewer's style sheet.
const VIEWER_CSS: &str = include_str!("html/viewer.css");

/// What the page may do: run its own inline script and style, show `data:` images, and load
/// nothing else.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; \
                   style-src 'unsafe-inline'; img-src data:";

/// The header's summary in [`BODY`], which the script fills in.
const EMPTY_SUMMARY: &str = r#"<p id="summary"></p>"#;

/// The page's markup around the viewer; the script fills it in.
const BODY: &str = r#"<header>
  <h1 id="title">tprof</h1>
  <p id="summary"></p>
</header>
<section id="controls" aria-label="view">
  <label>Process <select id="process"></select></label>
  <button type="button" id="zoom-out" title="Zoom out one level">&#8593; Zoom out</button>
  <button type="button" id="reset" title="Show everything (Esc)">Reset zoom</button>
  <span id="zoomed"></span>
  <span class="spacer"></span>
  <input type="search" id="search" placeholder="Search functions (/)" aria-label="Search functions" autocomplete="off">
  <span id="matched"></span>
</section>
<section id="filters" aria-label="filters" hidden>
  <input type="search" id="focus" placeholder="Focus: frames matching (regex)" title="Only the samples with a frame whose function or file this regular expression matches" aria-label="Focus" autocomplete="off">
  <input type="search" id="hide" placeholder="Hide: frames matching (regex)" title="These frames left out, their time counted at the frame above" aria-label="Hide" autocomplete="off">
  <label id="plumbing-box"><input type="checkbox" id="plumbing"> Fold plumbing</label>
  <span id="filtered"></span>
</section>
<section id="graph-box" aria-label="flame graph">
  <div id="graph" role="tree"></div>
  <div id="detail" aria-live="polite"></div>
</section>
<section id="listing-box" aria-label="source listing" hidden></section>
<div id="tooltip" role="tooltip" hidden></div>
<section id="timeline-box" aria-label="timeline" hidden></section>
<section id="tables" aria-label="tables"></section>
<noscript><p>This viewer needs JavaScript. The data is in the element <code>tprof-data</code>
of this file, as JSON.</p></noscript>
"#;

/// A function as the viewer names it.
#[derive(Serialize)]
struct FunctionView<'a> {
    #[serde(flatten)]
    function: &'a Function,
    mfa: String,
}

/// An entry of the viewer's function list: a traced function, or (sampled profiles) a native
/// frame or a wall sample's state.
#[derive(Serialize)]
#[serde(untagged)]
enum FunctionEntry<'a> {
    Traced(FunctionView<'a>),
    Native(sampled::NativeView),
}

/// A process (or `all`) as the viewer names it. Written as an array by [`compact`].
struct ProcessView<'a> {
    id: Cow<'a, str>,
    label: Cow<'a, str>,
    name: Option<Cow<'a, str>>,
    initial_call: Cow<'a, str>,
    run: Option<u32>,
    /// How many of the profile's processes it stands for: 1, or a sum's ([`summary`]).
    members: u64,
}

/// One stack, or one flat row: indices into the function and process lists, and figures.
/// Written as an array (see the module's documentation), by [`compact`].
#[derive(Clone, Copy)]
struct Figures {
    process: usize,
    /// A stack's call path, an index into [`ViewData::paths`] (-1: no frame; rows: -1).
    path: i64,
    function: Option<usize>,
    calls: u64,
    /// In the page's unit: calls, nanoseconds or bytes.
    value: u64,
    /// Sampled profiles' rows: the nanoseconds of the samples whose stack has the frame
    /// (`value` is those where it is innermost; `calls` counts the samples).
    total: Option<u64>,
    /// tprof's measurement of call_memory (0 otherwise); on the flat rows only.
    words: Option<u64>,
    bytes: u64,
    blocks: u64,
}

/// One function's call durations in one process (or every process, in older profiles).
#[derive(Serialize)]
struct PercentilesView {
    process: usize,
    function: usize,
    calls: u64,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    max_ns: u64,
}

/// One process's event log, as frames.
#[derive(Serialize)]
struct TimelineView {
    process: usize,
    dropped: u64,
    /// `[function, start_ns, end_ns, depth, cut_short]`.
    frames: Vec<(usize, u64, u64, usize, u8)>,
}

/// The page's long lists, given one item at a time, in order, as often as asked (the
/// writer reads the processes, stacks and rows twice: to sum them, then to write them), so
/// that they need not be held whole.
trait Lists {
    fn processes(&self, each: &mut dyn FnMut(&ProcessView<'_>));
    fn stacks(&self, each: &mut dyn FnMut(&Figures));
    fn rows(&self, each: &mut dyn FnMut(&Figures));
    fn percentiles(&self, each: &mut dyn FnMut(&PercentilesView));
    fn timelines(&self, each: &mut dyn FnMut(&TimelineView));
}

/// Everything the viewer reads, before [`compact`] writes it.
struct ViewData<'a> {
    trace_type: TraceType,
    unit: &'static str,
    call_tree: bool,
    runs: &'a [Run],
    functions: Vec<FunctionEntry<'a>>,
    /// Each distinct call path of the stacks.
    paths: compact::Paths,
    /// The processes, stacks, flat rows, percentiles and timelines.
    lists: Box<dyn Lists + 'a>,
    /// What was sampled (sampled profiles).
    samples: Option<sampled::SamplesView>,
    /// The functions' source listings (sampled profiles).
    listings: Option<sampled::ListingsView>,
    /// What the page left out or summed, said in its header ([`summary`]).
    note: Option<String>,
}

/// The viewer's data for `profile`.
fn view_data(profile: &Profile) -> ViewData<'_> {
    if is_sampled(profile) {
        sampled::view_data(profile)
    } else {
        traced::view_data(profile)
    }
}

/// `text` safe inside an HTML element or a quoted attribute.
pub(crate) fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page's title: the trace type (or what was sampled), the unit and what ran.
fn title(profile: &Profile) -> String {
    let mut title = if is_sampled(profile) {
        let kinds = super::sampled::samplers(&profile.samples);
        let unit = super::sampled::unit_of_all(&kinds).1;
        format!("{} ({unit})", describe(&profile.samples))
    } else {
        format!(
            "{} profile ({})",
            profile.trace_type,
            unit(profile.trace_type)
        )
    };
    for run in &profile.meta.runs {
        if !run.program.is_empty() {
            title.push_str(" — ");
            title.push_str(&run.program);
        }
        if run.duration_ns > 0 {
            title.push_str(&format!(" ({})", duration(run.duration_ns)));
        }
    }
    title
}

/// Writes the viewer page for `profile`.
pub(super) fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    write_page(profile, None, None, out)
}

/// Writes the viewer page for `profile`, its samples' filters set as `options` say
/// ([`export::write_shown`](super::write_shown)): focus, hide and whether the plumbing is
/// folded ([`Native::User`] without [`crates`](PrintOptions::crates)) are the page's
/// controls, set so that one may change them (a link's `#focus=...` still overrides them);
/// what the page has no control for is left out of its data: native frames under
/// [`Native::None`], the frames of other crates than `crates`. Under a focus, the header says
/// how many of the samples it keeps (`3 of 9 samples shown`), written in the page as well as
/// by its script. The patterns are Rust's regular expressions, which the page translates
/// into JavaScript's where they differ (a leading `(?i)`, `(?s)` or `(?m)` becomes a flag,
/// `(?P<name>` is `(?<name>`, `\A` and `\z` are `^` and `$`); one it cannot translate (`(?x)`,
/// flags past the start) it names, and filters nothing by.
///
/// # Errors
///
/// As [`write`]; [`ExportError::Io`] (of kind `InvalidInput`) when focus or hide is not a
/// regular expression.
pub(super) fn write_with(
    profile: &Profile,
    options: &PrintOptions,
    out: &mut dyn Write,
) -> Result<(), ExportError> {
    if !is_sampled(profile) {
        return write(profile, out);
    }
    let invalid = |e| ExportError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e));
    options.filters().map_err(invalid)?;
    let kept = PrintOptions {
        native: match options.native {
            Native::None => Native::None,
            Native::User | Native::All => Native::All,
        },
        focus: None,
        hide: None,
        ..options.clone()
    };
    let shown = if kept.native == Native::All && kept.crates.is_empty() {
        Cow::Borrowed(profile)
    } else {
        Cow::Owned(
            FrameView::of(profile, &kept)
                .map_err(invalid)?
                .apply(profile),
        )
    };
    let summary = match &options.focus {
        Some(focus) => {
            let focused = PrintOptions::new()
                .native(Native::All)
                .focus(focus)
                .map_err(invalid)?;
            let view = FrameView::of(&shown, &focused).map_err(invalid)?;
            let samples = &shown.samples.samples;
            let kept = samples.iter().filter(|s| view.keeps(s.stack)).count();
            Some(format!(
                "{kept} of {} samples shown (those with a frame the focus `{focus}` matches)",
                samples.len()
            ))
        }
        None => None,
    };
    let filters = sampled::FiltersView {
        focus: options.focus.clone(),
        hide: options.hide.clone(),
        plumbing: options.native == Native::User && options.crates.is_empty(),
    };
    write_page(&shown, Some(filters), summary.as_deref(), out)
}

/// Writes the viewer page for `profile`, its filter controls set to `filters` when given, and
/// `summary` in its header until the script writes its own (what a reader without scripts
/// sees).
fn write_page(
    profile: &Profile,
    filters: Option<sampled::FiltersView>,
    summary: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), ExportError> {
    let mut data = view_data(profile);
    if let (Some(samples), Some(filters)) = (&mut data.samples, filters) {
        samples.filters = Some(filters);
    }
    let data = if is_sampled(profile) {
        data
    } else {
        let (mut data, note) = summary::summarise(data);
        // The header ends the note with a full stop.
        let waits = super::run_queue_note(profile).map(|n| n.trim_end_matches('.').to_owned());
        data.note = match (note, waits) {
            (Some(note), Some(waits)) => Some(format!("{note}. {waits}")),
            (note, waits) => note.or(waits),
        };
        data
    };
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"tprof\">\n\
         <title>{}</title>\n<style>\n{VIEWER_CSS}</style>\n</head>\n<body>\n{}\
         <script type=\"application/json\" id=\"tprof-data\">",
        escape_html(&title(profile)),
        match summary {
            Some(text) => Cow::Owned(BODY.replacen(
                EMPTY_SUMMARY,
                &format!("<p id=\"summary\">{}</p>", escape_html(text)),
                1
            )),
            None => Cow::Borrowed(BODY),
        },
    )?;
    compact::write(&data, out)?;
    write!(
        out,
        "</script>\n<script>\n{VIEWER_JS}</script>\n</body>\n</html>\n"
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_viewer_files_cannot_end_their_own_elements() {
        assert!(!VIEWER_JS.to_ascii_lowercase().contains("</script"));
        assert!(!VIEWER_CSS.to_ascii_lowercase().contains("</style"));
        assert!(!VIEWER_JS.contains("http://") && !VIEWER_JS.contains("https://"));
        assert!(!VIEWER_CSS.contains("url(") && !VIEWER_CSS.contains("@import"));
    }

    #[test]
    fn escapes_read_back_as_the_text() {
        let text = "</script><!-- & \"x\" 'y'";
        let json = serde_json::to_string(text).expect("a string serializes");
        let mut escaped = Vec::new();
        compact::Escaped(&mut escaped)
            .write_all(json.as_bytes())
            .expect("a Vec takes every write");
        let escaped = String::from_utf8(escaped).expect("UTF-8 in, UTF-8 out");
        assert!(
            !escaped.contains('<') && !escaped.contains('>'),
            "{escaped}"
        );
        let back: String = serde_json::from_str(&escaped).expect("still JSON");
        assert_eq!(back, text);
        assert_eq!(
            escape_html(text),
            "&lt;/script&gt;&lt;!-- &amp; &quot;x&quot; &#39;y&#39;"
        );
    }
}
