//! `svg`: a flame graph of every process, drawn by [`inferno`] from folded lines.
//!
//! The root frame (`all`) is the whole profile; above it, one frame per process (its
//! [label](Profile::labels): the registered name, with the pid where processes share it, else
//! the pid; `all processes` for call_count), and above each process its call paths as
//! [`stacks()`] gives them (a flat profile: one frame per function). A frame is as wide as the
//! weight of its path and everything called on it — calls, nanoseconds or bytes, as every
//! export weighs them (the `weight` module); the title names the trace type and the unit.
//!
//! Frame names are `module::name/arity`. The folded format inferno reads separates frames
//! with `;` and the count with a space, so names are made safe first: `;` becomes `；`
//! (U+FF1B), a space becomes a no-break space (U+00A0, drawn the same), and other control
//! characters (a newline, a tab) become their Rust escape (`\n`). Paths whose weight is
//! 0 take no width and are left out.
//!
//! # Sampled profiles
//!
//! A profile of samples ([`Profile::samples`]) is drawn from its samples' folded paths (as the
//! `folded` export writes them, but with names kept as above and traced functions as
//! `module::name/arity`): above `all`, one frame per process and one named
//! `(outside processes)` for CPU time outside any process, then each stack's frames, and a
//! wall sample's state innermost (`[receive]`); a frame is as wide as the **nanoseconds** its
//! samples stand for (CPU time, or for wall samples wall time summed over processes). The
//! title says which sampler and rate asked (and, for CPU samples, the distinct samples per
//! CPU-second taken); dropped samples are a frame of their own, `(dropped samples)`, and the
//! subtitle says how many. The subtitle also says what share of the sampled threads' CPU time
//! the CPU samples stand for and how many warnings there are (the one, when there is one);
//! the svg's notes (inferno's `NOTES:` comment) hold the summary lines and every warning.
//! Frames narrower than one pixel of the default 1200-pixel width are left out (inferno's
//! `min_width`), so the drawing stays bounded however many distinct stacks were sampled;
//! their time still counts in their parents' widths.
//!
//! # Many processes
//!
//! Past 50 processes, each process's frame is its group's, as the html viewer sums them: by
//! initial call, `app::worker/1 (33,414 processes)` (a process alone in its group keeps its
//! label); the groups narrower than a pixel are one frame, `(N small processes)`, rather
//! than left out. So a wall profile of 100,000 processes, each narrower than a pixel, draws
//! what they ran and where they waited, not an empty `all`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;

use runtime::Pid;

use inferno::flamegraph::{self, Options};

use super::stacks::Stacks;
use super::weight::{unit, weight};
use super::{ExportError, Format, grouped, sampled};
use crate::{Group, Profile};

/// The width inferno draws at when none is set, in pixels.
const IMAGE_WIDTH: f64 = 1200.0;

/// `name` made safe as one frame of a folded line (see the module docs).
pub(super) fn frame_name(name: &str) -> String {
    if name.is_empty() {
        return "(unnamed)".to_owned();
    }
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            ';' => out.push('\u{FF1B}'),
            ' ' => out.push('\u{A0}'),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// A duration in nanoseconds, in the largest unit that keeps it at least 1.
pub(super) fn duration(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// The folded lines of `profile`: per process, each path with a weight, process first.
pub(super) fn folded_lines(profile: &Profile) -> Vec<String> {
    if sampled::is_sampled(profile) {
        let paths = sampled::folded_paths(profile, true, frame_name);
        // As below: the sum must fit in inferno's counters.
        let total: u128 = paths.iter().map(|(_, ns)| u128::from(*ns)).sum();
        let divisor = total.div_ceil(1 << 53).max(1);
        return paths
            .into_iter()
            .filter_map(|(line, ns)| {
                let value = u128::from(ns) / divisor;
                (value > 0).then(|| format!("{line} {value}"))
            })
            .collect();
    }
    let stacks = Stacks::of(profile);
    let weigh = |s: &super::Stack<'_>| u128::from(weight(profile.trace_type, s));
    // inferno adds the values up in a `usize` and draws in `f64`: past 2^53 in all, every value
    // is divided by the same factor (widths keep their proportions) so that the sum fits.
    let mut total: u128 = 0;
    stacks.for_each(|s| total += weigh(s));
    let divisor = total.div_ceil(1 << 53).max(1);
    let labels = profile.labels();
    let mut lines = Vec::new();
    stacks.for_each(|stack| {
        let value = weigh(stack) / divisor;
        if value == 0 {
            return;
        }
        let mut line = frame_name(&labels.get(stack.group));
        for f in &stack.frames {
            line.push(';');
            line.push_str(&frame_name(&f.mfa()));
        }
        // Writing to a String cannot fail.
        let _ = write!(line, " {value}");
        lines.push(line);
    });
    lines
}

/// A root of the drawing, past [`grouped::MANY`] processes: a group of processes (an index
/// into [`grouped::Groups`]), the processes too small to draw, or another root
/// (`(outside processes)`, `(dropped samples)`, `all processes`) as it is.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Root {
    Group(usize),
    Small,
    Other(String),
}

/// `lines` (folded, each `root;frames value` with a process's label as its root) with their
/// processes grouped past [`grouped::MANY`], as the html viewer groups them (by initial call,
/// [`grouped::Groups`]): lines of one group and path summed; and the groups narrower than a
/// pixel, which inferno would leave out, summed into one root, `(N small processes)`, so
/// that what they weigh is drawn. At most [`grouped::MANY`] processes: `lines` unchanged.
/// Linear in the lines and the processes.
fn grouped(profile: &Profile, lines: Vec<String>) -> Vec<String> {
    let Some(groups) = grouped::Groups::of(profile) else {
        return lines;
    };
    let labels = profile.labels();
    let pid_of: HashMap<String, Pid> = profile
        .processes
        .iter()
        .map(|p| (frame_name(&labels.get(Group::Process(p.pid))), p.pid))
        .collect();
    // (root, path above it) -> value, in the order first seen.
    let mut index: HashMap<(Root, String), usize> = HashMap::new();
    let mut summed: Vec<((Root, String), u128)> = Vec::new();
    let mut totals: HashMap<Root, u128> = HashMap::new();
    let mut all: u128 = 0;
    let add = |index: &mut HashMap<(Root, String), usize>,
               summed: &mut Vec<((Root, String), u128)>,
               key: (Root, String),
               value: u128| {
        match index.get(&key) {
            Some(&i) => summed[i].1 += value,
            None => {
                index.insert(key.clone(), summed.len());
                summed.push((key, value));
            }
        }
    };
    for line in &lines {
        let Some((path, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<u128>() else {
            continue;
        };
        let (root, rest) = path.split_once(';').unwrap_or((path, ""));
        let root = match pid_of.get(root).and_then(|pid| groups.group(*pid)) {
            Some(group) => Root::Group(group),
            None => Root::Other(root.to_owned()),
        };
        *totals.entry(root.clone()).or_default() += value;
        all += value;
        add(&mut index, &mut summed, (root, rest.to_owned()), value);
    }
    // A pixel of the default width: inferno's `min_width` below.
    let small = |root: &Root| match root {
        Root::Group(_) => totals.get(root).copied().unwrap_or(0) as f64 * IMAGE_WIDTH < all as f64,
        _ => false,
    };
    let mut small_processes = 0u64;
    for group in 0..groups.len() {
        if small(&Root::Group(group)) {
            small_processes += groups.size(group);
        }
    }
    let mut index: HashMap<(Root, String), usize> = HashMap::new();
    let mut lines_of_roots: Vec<((Root, String), u128)> = Vec::new();
    for ((root, rest), value) in summed {
        let root = if small(&root) { Root::Small } else { root };
        add(&mut index, &mut lines_of_roots, (root, rest), value);
    }
    lines_of_roots
        .into_iter()
        .map(|((root, rest), value)| {
            let name = match root {
                Root::Group(group) => frame_name(groups.name(group)),
                Root::Small => frame_name(&grouped::small_processes(small_processes)),
                Root::Other(text) => text,
            };
            if rest.is_empty() {
                format!("{name} {value}")
            } else {
                format!("{name};{rest} {value}")
            }
        })
        .collect()
}

/// What the runs were, for the subtitle: each program and how long it ran.
fn runs(profile: &Profile) -> Option<String> {
    let runs: Vec<String> = profile
        .meta
        .runs
        .iter()
        .filter(|r| !r.program.is_empty() || r.duration_ns > 0)
        .map(|r| match (r.program.is_empty(), r.duration_ns) {
            (false, 0) => r.program.clone(),
            (true, d) => duration(d),
            (false, d) => format!("{} ({})", r.program, duration(d)),
        })
        .collect();
    (!runs.is_empty()).then(|| runs.join("; "))
}

/// Writes the flame graph of `profile` as SVG.
///
/// # Errors
///
/// [`ExportError::Unsupported`] when nothing was measured (no path weighs more than 0: there
/// is nothing to give a width; for samples, none was taken and none dropped),
/// [`ExportError::Io`] when writing fails.
pub(super) fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    write_drawing(profile, out, Scripts::Interactive)
}

/// Whether the drawing carries inferno's script (search, zoom on click) or is a static image.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scripts {
    /// The interactive flame graph of the `svg` export.
    Interactive,
    /// No script at all: for pages that run none (a notebook's output, JupyterLab's sanitizer).
    None,
}

/// The flame graph of [`write`], with or without its script.
///
/// # Errors
/// As [`write`].
pub(crate) fn write_drawing(
    profile: &Profile,
    out: &mut dyn Write,
    scripts: Scripts,
) -> Result<(), ExportError> {
    let lines = grouped(profile, folded_lines(profile));
    if lines.is_empty() {
        return Err(ExportError::Unsupported {
            format: Format::Svg,
            reason: if sampled::is_sampled(profile) {
                "no sample was taken: a flame graph needs a sample that weighs something"
            } else {
                "nothing was measured: a flame graph needs a measurement above 0"
            }
            .to_owned(),
        });
    }
    let mut options = Options::default();
    if sampled::is_sampled(profile) {
        let set = &profile.samples;
        let kinds = sampled::samplers(set);
        let unit = sampled::unit_of_all(&kinds).1;
        let measures: Vec<&str> = kinds.iter().map(|k| sampled::measure(*k)).collect();
        options.title = format!(
            "{} flame graph ({unit} of {})",
            sampled::describe(set),
            measures.join("; ")
        );
        let truth = set.cpu_truth();
        // What the CPU samples could see, in short: the share captured and how many warnings
        // (the drawing has one line for it); whole, in the notes (an XML comment).
        let short = truth.as_ref().and_then(|t| {
            let captured = t.figures.iter().map(|f| f.captured);
            let captured: Vec<String> = captured
                .flatten()
                .map(|c| format!("{:.1}%", c * 100.0))
                .collect();
            let mut text = (!captured.is_empty()).then(|| {
                format!(
                    "{} of the sampled threads' CPU captured",
                    captured.join(", ")
                )
            })?;
            match t.warnings.len() {
                0 => {}
                1 => text.push_str(&format!(" — Warning: {}", t.warnings[0])),
                n => text.push_str(&format!(
                    " — {n} warnings (in the notes, and `tprof report`)"
                )),
            }
            Some(text)
        });
        let notes: Vec<String> = runs(profile)
            .into_iter()
            .chain(sampled::dropped_note(set))
            .chain(short)
            .collect();
        options.subtitle = (!notes.is_empty()).then(|| notes.join(" — "));
        // A comment cannot hold `--`.
        options.notes = sampled::truth_lines(set).join("\n").replace("--", "- -");
        options.count_name = unit.to_owned();
    } else {
        let unit = unit(profile.trace_type);
        options.title = format!("{} flame graph ({unit})", profile.trace_type);
        options.subtitle = runs(profile);
        options.count_name = unit.to_owned();
    }
    // Bounded by what can be seen: frames under a pixel wide are left out (a percentage), as
    // inferno's `--minwidth` does, so that 100,000 processes make an svg of the few frames
    // wide enough to see, not of a million (their figures are in the other exports).
    options.min_width = 100.0 / IMAGE_WIDTH;
    // inferno's default palette (hot), and the same name gets the same colour in every export.
    options.hash = true;
    options.deterministic = true;
    // The document's title (what a browser's tab shows): the program, then what is drawn.
    let title = match profile.meta.runs.iter().find(|r| !r.program.is_empty()) {
        Some(run) => format!("{} — {}", run.program, options.title),
        None => options.title.clone(),
    };
    let mut svg = Vec::new();
    if scripts == Scripts::Interactive {
        flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)?;
        out.write_all(titled(&String::from_utf8_lossy(&svg), &title).as_bytes())?;
        return Ok(());
    }
    // A static image: a fixed width (a fluid drawing needs the script to place its labels),
    // and without inferno's script element and the `onload` that calls into it, which
    // `no_javascript` alone leaves.
    options.no_javascript = true;
    options.image_width = Some(IMAGE_WIDTH as usize);
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)?;
    let svg = without_script(&String::from_utf8_lossy(&svg));
    out.write_all(titled(&svg, &title).as_bytes())?;
    Ok(())
}

/// `svg` with a `<title>` of `title` as the first child of its root element (inferno writes
/// none: a browser showed the page untitled).
fn titled(svg: &str, title: &str) -> String {
    let Some(end) = svg
        .find("<svg")
        .and_then(|start| svg[start..].find('>').map(|end| start + end + 1))
    else {
        return svg.to_owned();
    };
    format!(
        "{}<title>{}</title>{}",
        &svg[..end],
        super::html::escape_html(title),
        &svg[end..]
    )
}

/// `svg` without its `<script>` elements and `onload` attributes.
fn without_script(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(start) = rest.find("<script") {
        out.push_str(&rest[..start]);
        rest = match rest[start..].find("</script>") {
            Some(end) => &rest[start + end + "</script>".len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out.replace(" onload=\"init(evt)\"", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_names_cannot_split_a_folded_line() {
        assert_eq!(frame_name("a;b c\nd"), "a\u{FF1B}b\u{A0}c\\nd");
        assert_eq!(frame_name("<T as Tr>::f/1"), "<T\u{A0}as\u{A0}Tr>::f/1");
        assert_eq!(frame_name(""), "(unnamed)");
        let odd = frame_name("x 12");
        assert!(!odd.contains(' ') && !odd.contains(';'), "{odd}");
    }

    #[test]
    fn a_static_drawing_has_no_script() {
        let svg = "<svg onload=\"init(evt)\" x=\"1\"><script type=\"t\"><![CDATA[var a;]]></script><g/></svg>";
        assert_eq!(without_script(svg), "<svg x=\"1\"><g/></svg>");
    }

    #[test]
    fn the_drawing_has_a_title_first() {
        let svg = "<?xml version=\"1.0\"?><svg x=\"1\"><g/></svg>";
        assert_eq!(
            titled(svg, "a <b> & c"),
            "<?xml version=\"1.0\"?><svg x=\"1\"><title>a &lt;b&gt; &amp; c</title><g/></svg>"
        );
        assert_eq!(titled("no drawing", "t"), "no drawing");
    }

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(duration(12), "12 ns");
        assert_eq!(duration(1_500), "1.500 µs");
        assert_eq!(duration(2_000_000), "2.000 ms");
        assert_eq!(duration(3_250_000_000), "3.250 s");
    }
}
