//! Sample mode's text reports, as Julia's `Profile.print` prints them: the tree of stacks and
//! the flat list of frames, with Julia's options ([`PrintOptions`]), and who called a
//! function ([`callers`]).
//!
//! # What is counted
//!
//! A count is a weight summed ([`SampleRecord::weight`](crate::samples::SampleRecord::weight)):
//! timer periods for CPU samples, process-ticks for wall samples; it prints rounded (ties to
//! even, as Julia rounds). A line's *count* is the weight of the samples whose stack went
//! through it, its *overhead* the weight of those whose stack ended there (the frame itself
//! was running). A sample's stack is its traced frames, outermost first, then the native
//! frames of the untraced code it ran below them (CPU samples; see
//! [`crate::samples`]). CPU and wall samples are reported apart (under `CPU samples:` and
//! `Wall samples:` when a profile has both): their units differ. Allocation samples weigh
//! the bytes they stand for (see [`crate::samples`]): their counts are bytes, and their
//! totals `Total bytes: N. Allocations: M`, estimated.
//!
//! # Which frames show
//!
//! As Julia's `Profile.print` hides C frames by default, a report shows the user's code by
//! default ([`Native::User`]): the frames of the *plumbing* — the runtime, tokio, the
//! standard library, the profiler and system libraries ([`PLUMBING`]) — are folded, each
//! sample counted at the nearest frame above them that shows, so that a traced function's
//! line is followed by the code it calls rather than by tokio's and std's frames between
//! them. The report ends with how many it folded:
//!
//! ```text
//! Folded: 38 frames of plumbing (the runtime, tokio, the standard library, system libraries), their samples counted at the frame above; `--native all` (PrintOptions::native(true)) shows every frame.
//! ```
//!
//! [`native(true)`](PrintOptions::native) ([`Native::All`]) shows every frame, `native(false)`
//! ([`Native::None`]) only traced ones. [`crates`](PrintOptions::crates) keeps only the
//! frames of some crates ("frames of my crates only"), folding the others the same way;
//! [`focus`](PrintOptions::focus) and [`hide`](PrintOptions::hide) filter as pprof's
//! `-focus` and `-hide` do. Samples none of whose frames show count on a `[hidden frames]`
//! line of their own. [`callers`] and the exports of
//! [`export::write_shown`](crate::export::write_shown) (folded stacks, svg, speedscope,
//! chrome, pprof) see the frames the same way.
//!
//! # The tree
//!
//! ```text
//! Overhead ╎ [+additional indent] Count File:Line; Function
//! =========================================================
//!  ╎10 src/app.rs:3; app::main/0
//!  ╎ 10 src/app.rs:9; app::serve/0
//! 4╎  4  src/app.rs:20; app::parse/1
//! 6╎  6  src/app.rs:30; app::reply/1
//! Total snapshots: 10. Utilization: 50% across all threads and processes. Use the `groupby` option to break down by thread and/or process.
//! ```
//!
//! Lines are laid out as Julia's (see the `tree` module's notes: the overhead column, the `╎`
//! guides every fifth level of indentation, `+n` for indentation cut at half the
//! [`width`](PrintOptions::width)). Files are shortened as Julia shortens them: the standard
//! library's as `@core/src/...`, a registry crate's as `@tokio-1.48.0/src/...`. With [`groupby`](PrintOptions::groupby), the header is
//! printed once, then each group: its name and totals on one line
//! (`Process <0.5.0> (server) Total snapshots: 10. Utilization: 50%`), its tree, a blank line;
//! a group nested in another (`process,thread`) follows its outer group's name on the line,
//! or under it, one space in, when the outer group has several.
//!
//! *Utilization* is Julia's share of snapshots not sleeping: for wall samples, the share of
//! process-ticks in which the process was running; for CPU samples, the CPU time the samples
//! stand for (weight × the timer's period) over the time the group could have run — the
//! sampling's duration, once for a process (it runs on one thread at a time), else once per
//! thread its samples came from.
//!
//! # The flat list
//!
//! A line per frame, wherever it was on the stack: see the `flat` module's notes. It comes
//! after the totals of its group in a grouped report, before them otherwise, as Julia's.
//!
//! # Wall samples
//!
//! A report of wall samples (their stacks are the paths processes wait in) starts with where
//! the processes wait: the share of process-ticks in each state (running, runnable, receive,
//! call, ...), then each process's states and longest mailbox (see the `wall` module's
//! notes).
//!
//! # What the CPU samples could see
//!
//! A report of CPU samples whose sources carry their coverage
//! ([`SampleSource::cpu`](crate::samples::SampleSource::cpu): every profile the runtime takes
//! now) starts with it ([`SampleSet::cpu_truth`]): one line with the mechanism that took them,
//! the share of the sampled threads' CPU time the samples stand for, and the distinct samples
//! per CPU-second beside the rate asked; then a `Warning:` line for each shortfall (under
//! 90 % captured, a thread with 20 ms of CPU or more under 50 % or without a sample, under
//! half the rate asked), naming its likely cause:
//!
//! ```text
//! CPU samples by per-thread CPU timers (checked at the kernel's tick): 56.4% of the sampled threads' 550.0 ms of CPU captured, 142 distinct samples per CPU-second at 999 Hz asked (fallback: asked for by the options)
//! Warning: the samples stand for 56.4% of the sampled threads' CPU time (310.0 ms of 550.0 ms): the CPU sampler ran on its fallback, per-thread CPU timers (asked for by the options), which the kernel checks only at its scheduler tick (CONFIG_HZ, often 250 or 100): at most that many distinct samples per CPU-second, and threads whose time on the CPU falls between ticks are missed
//! Overhead ╎ [+additional indent] Count File:Line; Function
//! ```
//!
//! A profile read from a file written before the coverage was kept has none, and its report
//! starts with the tree as before.
//!
//! # Dropped and missing samples
//!
//! Samples dropped because the buffer was full are counted in every report, with the setting
//! to raise ([`SampleOptions::n`](runtime::sample::SampleOptions::n)).
//!
//! A session started on a running program (`attach`'s `sample`, `prof sample`) finds
//! processes in polls that began before it: the traced frames they had entered then are
//! unknown (a traced call keeps its frame only for the sessions measuring its poll, so that a
//! call nothing traces costs nothing more). Their samples count under their process, CPU
//! samples with their native frames, and the report says how many there are
//! ([`SampleSource::before_sampling`](crate::samples::SampleSource::before_sampling)) before
//! its tree:
//!
//! ```text
//! Note: 250 of 256 samples of processes fell in polls begun before sampling began: the traced frames they were in are unknown, so they show under their process with their native frames alone (open the session before the work begins, or keep one open from the program's start).
//! ```
//!
//! A group whose samples have no frame to show (wall samples of running processes, which
//! carry no traced path; CPU samples with neither a traced frame nor a native stack) says so
//! under its totals, with the likely cause, rather than that nothing was collected. A report
//! with nothing to show says so, in Julia's words:
//!
//! ```text
//! Warning: There were no samples collected.
//! Run your program longer (perhaps by running it multiple times),
//! or raise the sampling rate with `SampleOptions::hz`.
//! ```
//!
//! # Cost
//!
//! Linear in the samples (each goes into its group's weight per stack), and in each group's
//! stacks and frames (one walk of the stack tree: see the `walk` module), n log n for sorting
//! the groups and each line's siblings. 100,000 processes grouped by process make 100,000
//! trees, each as large as its own stacks.
//!
//! # Examples
//!
//! ```
//! use runtime::Pid;
//! use tprof::samples::{SampleFrame, SampleRecord, SampleSource, SampleStack, SamplerKind};
//! use tprof::sample_report::{self, PrintOptions};
//! use tprof::{Function, Profile, TraceType};
//!
//! let mut profile = Profile::empty(TraceType::CallCount);
//! profile.function_table = vec![Function {
//!     module: "app".into(), name: "work".into(), arity: 0, file: "src/app.rs".into(), line: 7,
//! }];
//! let set = &mut profile.samples;
//! set.sources = vec![SampleSource {
//!     run: 0, node: 0, sampler: SamplerKind::Cpu, hz: 100, alloc_rate: None, dropped: 0.0,
//!     native_walked: true, duration_ns: 1_000_000_000, capacity: 1000, lost_frees: 0,
//!     before_sampling: 0,
//!     cpu: None,
//! }];
//! set.frames = vec![
//!     SampleFrame { function: Some(0), name: String::new(), file: None, line: None, address: 0 },
//!     SampleFrame {
//!         function: None, name: "app::checksum".into(), file: Some("src/sum.rs".into()),
//!         line: Some(3), address: 0x1000,
//!     },
//! ];
//! set.stacks = vec![
//!     SampleStack { parent: None, frame: 0 },
//!     SampleStack { parent: Some(0), frame: 1 },
//! ];
//! let pid: Pid = "<0.5.0>".parse().unwrap();
//! let sample = |stack, weight| SampleRecord {
//!     source: 0, pid: Some(pid), thread: None, time_ns: 0, weight, stack: Some(stack),
//!     state: None, mailbox_len: 0, callee: None, size: 0, live: false,
//! };
//! set.samples = vec![sample(0, 2.0), sample(1, 6.0)];
//!
//! let mut out = Vec::new();
//! sample_report::print(&mut out, &profile, &PrintOptions::default()).unwrap();
//! assert_eq!(
//!     String::from_utf8(out).unwrap(),
//!     "Overhead ╎ [+additional indent] Count File:Line; Function\n\
//!      =========================================================\n\
//!      2╎8 src/app.rs:7; app::work/0\n\
//!      6╎ 6 src/sum.rs:3; app::checksum\n\
//!      Total snapshots: 8. Utilization: 8% across all threads and processes. \
//!      Use the `groupby` option to break down by thread and/or process.\n",
//! );
//! ```

use std::collections::HashMap;
use std::io::{self, Write};

use runtime::Pid;

use crate::profile::{ProcessRecord, Profile};
use crate::samples::{SampleSet, SamplerKind};

mod callers;
mod flat;
mod frames;
mod groups;
pub(crate) mod options;
mod tree;
pub(crate) mod view;
mod walk;
mod wall;

pub use callers::{Caller, CallerLine, callers, callers_tree};
pub use options::{
    FilterError, GroupBy, Native, OptionError, PrintOptions, Recur, ReportFormat, SortedBy,
};
pub(crate) use view::FrameView;
pub use view::PLUMBING;
use view::focused;

use frames::Keys;
use groups::{Group, Section};
use walk::Walked;

/// The tree's header: Julia's.
const HEADER: &str = "Overhead ╎ [+additional indent] Count File:Line; Function\n\
                      =========================================================";

/// What follows the totals of an ungrouped report.
const ACROSS: &str = "across all threads and processes. \
                      Use the `groupby` option to break down by thread and/or process.";

/// Prints `profile`'s samples as `options` say: the tree, the flat list or both, of each
/// sampler's samples, after where processes wait for wall samples, with dropped samples
/// counted.
///
/// # Errors
///
/// Those of `out`; a [`FilterError`] (of kind `InvalidInput`) when
/// [`focus`](PrintOptions::focus) or [`hide`](PrintOptions::hide) is not a regular
/// expression.
pub fn print(out: &mut dyn Write, profile: &Profile, options: &PrintOptions) -> io::Result<()> {
    let set = &profile.samples;
    let filters = options
        .filters()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut sections = Section::of(set, options.sampler);
    if let Some(focus) = &filters.focus {
        let wanted = focused(set, &profile.function_table, options, focus);
        for section in &mut sections {
            section.samples.retain(|s| {
                s.stack
                    .is_some_and(|st| wanted.get(st as usize) == Some(&true))
            });
        }
    }
    if sections.is_empty() {
        return warning_empty(out, false);
    }
    let keys = Keys::new(set, &profile.function_table, options);
    let records = crate::table::records(profile);
    let several = sections.len() > 1;
    for (i, section) in sections.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        if several {
            let title = match section.kind {
                SamplerKind::Cpu => "CPU samples:",
                SamplerKind::Wall => "Wall samples:",
                SamplerKind::Alloc => "Allocation samples:",
            };
            writeln!(out, "{title}\n")?;
        }
        print_section(out, set, section, &keys, &records, options)?;
        if section.kind == SamplerKind::Alloc && !section.samples.is_empty() {
            writeln!(out)?;
            crate::alloc_sites::print(out, profile, Some(options.rows))?;
        }
    }
    Ok(())
}

/// One sampler's report.
fn print_section(
    out: &mut dyn Write,
    set: &SampleSet,
    section: &Section<'_>,
    keys: &Keys<'_>,
    records: &HashMap<Pid, &ProcessRecord>,
    options: &PrintOptions,
) -> io::Result<()> {
    if section.kind == SamplerKind::Cpu
        && let Some(truth) = set.cpu_truth_of(&section.sources)
    {
        for line in truth.lines() {
            writeln!(out, "{line}")?;
        }
    }
    before_sampling(out, set, section)?;
    if section.samples.is_empty() {
        warning_empty(out, false)?;
    } else {
        if section.kind == SamplerKind::Wall {
            wall::print(
                out,
                &section.samples,
                records,
                options.mincount,
                options.rows,
            )?;
        }
        let groups = section.groups(set, options.groupby);
        let walked: Vec<Walked> = groups
            .iter()
            .map(|g| walk::walk(set, keys, &g.stacks, options.recur))
            .collect();
        let report = Report {
            set,
            kind: section.kind,
            groups: &groups,
            walked: &walked,
            keys,
            records,
            options,
        };
        match options.format {
            ReportFormat::Tree => report.print(out, Table::Tree)?,
            ReportFormat::Flat => report.print(out, Table::Flat)?,
            ReportFormat::Both => {
                report.print(out, Table::Tree)?;
                writeln!(out)?;
                report.print(out, Table::Flat)?;
            }
        }
        folded_note(out, set, &walked, options)?;
    }
    dropped(out, set, section)
}

/// The line saying how many frames the report folded (plumbing, other crates: see the
/// `view` module) and how to see them, if it folded any: distinct functions (by name and
/// file), over every group.
fn folded_note(
    out: &mut dyn Write,
    set: &SampleSet,
    walked: &[Walked],
    options: &PrintOptions,
) -> io::Result<()> {
    type Identity<'a> = (Option<u32>, &'a str, Option<&'a str>, u64);
    let mut functions: std::collections::HashSet<Identity<'_>> = Default::default();
    for &f in walked.iter().flat_map(|w| &w.folded) {
        if let Some(frame) = set.frames.get(f as usize) {
            let unnamed = frame.function.is_none() && frame.name.is_empty();
            functions.insert((
                frame.function,
                &frame.name,
                frame.file.as_deref(),
                if unnamed { frame.address } else { 0 },
            ));
        }
    }
    let n = functions.len();
    if n == 0 {
        return Ok(());
    }
    let frames = if n == 1 { "frame" } else { "frames" };
    if options.crates.is_empty() {
        writeln!(
            out,
            "Folded: {n} {frames} of plumbing (the runtime, tokio, the standard library, system \
             libraries), their samples counted at the frame above; `--native all` \
             (PrintOptions::native(true)) shows every frame."
        )
    } else {
        writeln!(
            out,
            "Folded: {n} {frames} of crates other than {}, their samples counted at the frame \
             above; without `--crate` (PrintOptions::crates) every crate's frames show.",
            options.crates.join(", ")
        )
    }
}

/// The tree or the flat list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Table {
    Tree,
    Flat,
}

/// One sampler's groups, walked.
struct Report<'a> {
    set: &'a SampleSet,
    kind: SamplerKind,
    groups: &'a [Group],
    walked: &'a [Walked],
    keys: &'a Keys<'a>,
    records: &'a HashMap<Pid, &'a ProcessRecord>,
    options: &'a PrintOptions,
}

impl Report<'_> {
    /// Prints `table` of every group, with their headers and totals.
    fn print(&self, out: &mut dyn Write, table: Table) -> io::Result<()> {
        let grouped = self.options.groupby != GroupBy::None;
        if !grouped {
            let (Some(group), Some(walked)) = (self.groups.first(), self.walked.first()) else {
                return warning_empty(out, false);
            };
            if is_empty(walked, table) {
                return self.empty(out, group, false);
            }
            if table == Table::Tree {
                writeln!(out, "{HEADER}")?;
            }
            self.table(out, walked, table)?;
            return writeln!(out, "{} {ACROSS}", self.totals(group));
        }
        if table == Table::Tree {
            writeln!(out, "{HEADER}")?;
        }
        let mut any_empty = false;
        for (i, (group, walked)) in self.groups.iter().zip(self.walked).enumerate() {
            let label = |at: usize| {
                group
                    .parts
                    .get(at)
                    .map_or_else(String::new, |p| p.label(self.set, self.records))
            };
            let outer_of = |g: &Group| g.parts.first().copied();
            let mut name = label(0);
            if group.parts.len() > 1 {
                let first = i == 0 || outer_of(&self.groups[i - 1]) != outer_of(group);
                let alone = first
                    && self
                        .groups
                        .get(i + 1)
                        .is_none_or(|next| outer_of(next) != outer_of(group));
                if alone {
                    name = format!("{name} {}", label(1));
                } else {
                    if first {
                        writeln!(out, "{name}")?;
                    }
                    name = format!(" {}", label(1));
                }
            }
            writeln!(out, "{name} {}", self.totals(group))?;
            if is_empty(walked, table) {
                any_empty |= group.total <= 0.0;
                self.empty(out, group, true)?;
            } else {
                self.table(out, walked, table)?;
            }
            writeln!(out)?;
        }
        if any_empty {
            warning_empty(out, true)?;
        }
        Ok(())
    }

    /// What stands for the lines of `group`, which has none: that its samples have no frame
    /// to show, and why, when it has samples; else, ungrouped, Julia's warning (a group
    /// without samples is counted in one warning after the groups).
    fn empty(&self, out: &mut dyn Write, group: &Group, grouped: bool) -> io::Result<()> {
        if group.total <= 0.0 {
            return if grouped {
                Ok(())
            } else {
                warning_empty(out, false)
            };
        }
        let why = match self.kind {
            SamplerKind::Wall => {
                "a wall sample of a running process has no traced path (the wall sampler reads \
                 where processes wait; a CPU session shows what they run), nor has one of a \
                 process waiting outside traced frames or since before sampling began"
            }
            _ => {
                "taken outside traced frames (or in a poll begun before sampling began) where \
                 no native stack was walked (a build without frame pointers), or `focus` and \
                 `hide` left none"
            }
        };
        let (total, unit) = if self.kind == SamplerKind::Alloc {
            (rounded(group.objects), "allocations")
        } else {
            (rounded(group.total), "snapshots")
        };
        writeln!(out, "No frame to show for these {total} {unit}: {why}.")
    }

    /// `table`'s lines of one group.
    fn table(&self, out: &mut dyn Write, walked: &Walked, table: Table) -> io::Result<()> {
        match table {
            Table::Tree => tree::print(out, walked, self.keys, self.options),
            Table::Flat => flat::print(out, &walked.flat, self.keys, self.options),
        }
    }

    /// `Total snapshots: N. Utilization: P%`; for allocation samples, `Total bytes: N.
    /// Allocations: M` (estimated).
    fn totals(&self, group: &Group) -> String {
        if self.kind == SamplerKind::Alloc {
            return format!(
                "Total bytes: {}. Allocations: {}",
                rounded(group.total),
                rounded(group.objects)
            );
        }
        format!(
            "Total snapshots: {}. Utilization: {}%",
            rounded(group.total),
            rounded(group.utilization(self.set, self.kind))
        )
    }
}

/// Whether `table` of a group has no line.
fn is_empty(walked: &Walked, table: Table) -> bool {
    match table {
        Table::Tree => walked
            .tree
            .first()
            .is_none_or(|root| root.children.is_empty()),
        Table::Flat => walked.flat.is_empty(),
    }
}

/// Julia's `warning_empty`, adapted.
fn warning_empty(out: &mut dyn Write, in_groups: bool) -> io::Result<()> {
    writeln!(
        out,
        "Warning: There were no samples collected{}.\n\
         Run your program longer (perhaps by running it multiple times),\n\
         or raise the sampling rate with `SampleOptions::hz`.",
        if in_groups {
            " in one or more groups"
        } else {
            ""
        }
    )
}

/// The line saying how many samples of `section`'s processes fell in polls begun before
/// sampling began ([`SampleSource::before_sampling`](crate::samples::SampleSource::before_sampling)),
/// whose traced frames are unknown, if any did: of how many samples of processes.
fn before_sampling(out: &mut dyn Write, set: &SampleSet, section: &Section<'_>) -> io::Result<()> {
    let before = section
        .sources
        .iter()
        .filter_map(|&s| set.sources.get(s as usize))
        .fold(0u64, |n, s| n.saturating_add(s.before_sampling));
    if before == 0 {
        return Ok(());
    }
    let of = set
        .samples
        .iter()
        .filter(|s| s.pid.is_some() && section.sources.contains(&s.source))
        .count();
    let shown = if section.kind == SamplerKind::Wall {
        "so they show under their process with no traced path"
    } else {
        // CPU and allocation samples keep their native stacks.
        "so they show under their process with their native frames alone"
    };
    writeln!(
        out,
        "Note: {before} of {of} samples of processes fell in polls begun before sampling began: \
         the traced frames they were in are unknown, {shown} (open the session before the work \
         begins, or keep one open from the program's start)."
    )
}

/// The line saying how many samples of `section` were dropped, if any were.
fn dropped(out: &mut dyn Write, set: &SampleSet, section: &Section<'_>) -> io::Result<()> {
    let sources = section
        .sources
        .iter()
        .filter_map(|&s| set.sources.get(s as usize));
    let (dropped, capacity) = sources
        .filter(|s| s.dropped > 0.0)
        .fold((0.0, 0), |(d, c), s| (d + s.dropped, s.capacity.max(c)));
    if dropped > 0.0 && section.kind == SamplerKind::Alloc {
        writeln!(
            out,
            "Warning: allocation samples standing for {} bytes were dropped: a thread's ring \
             or the sample buffer ({capacity} samples) was full. Raise SampleOptions::n, or \
             sample fewer allocations (a larger rate in bytes, a smaller sample_rate).",
            rounded(dropped)
        )?;
    } else if dropped > 0.0 {
        writeln!(
            out,
            "Warning: {} samples were dropped: the sample buffer ({capacity} samples) was full. \
             Raise SampleOptions::n to keep them.",
            rounded(dropped)
        )?;
    }
    Ok(())
}

/// A weight as printed: rounded to a whole number, ties to even (as Julia's `round`).
fn rounded(weight: f64) -> u64 {
    // A negative or NaN weight (a damaged profile) prints as 0.
    weight.round_ties_even() as u64
}

/// How many digits `n` prints with (1 for 0).
fn ndigits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}
