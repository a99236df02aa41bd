//! `pretty`: tprof's text report, with what tprof's layout has no room for around it.
//!
//! Three parts, each left out when it would be empty:
//!
//! 1. **The processes**: per process of the report, in pid order, its pid, the name it was
//!    registered under when the profile was taken (`-` for none) and its initial call, in
//!    left-aligned columns as wide as their widest cell:
//!
//!    ```text
//!    PROCESS  NAME    INITIAL CALL
//!    <0.1.0>  worker  app::worker/0
//!    ```
//!
//! 2. **tprof's report**, byte for byte as [`format`](crate::format()) prints it: per process
//!    (call_count: all together), sorted by percent, ascending.
//!
//! 3. **The call tree** (when the profile has call paths): per process, a blank line, then
//!    `****** Call tree of process <N.I.S> NAME *** ` (no name: just the pid), a header and one
//!    row per call path, each path's function indented two spaces per level under the path
//!    it extends, children after their parent from the heaviest, then a totals row:
//!
//!    ```text
//!    FUNCTION          CALLS  WORDS  WITH CALLEES  [     %]
//!    app::main/0           1     10           100  [100.00]
//!      app::render/2       1     20            50  [ 50.00]
//!    ```
//!
//!    `CALLS` are the calls made on that path; the measurement (`WORDS`, or `TIME (us)` in
//!    whole microseconds rounded as tprof rounds them) is the path's own, exclusive of the
//!    traced calls below it, as in tprof's table, so a function's rows add up to its line
//!    there; `WITH CALLEES` adds the paths below it; `%` is that inclusive figure's share of
//!    the process's total. A path the process ran nothing of its own on (a caller outside
//!    the patterns) is shown with 0 calls, to hold its callees.
//!
//!    A row deeper than 32 levels is indented 32 levels and says its depth (`(40) app::f/0`),
//!    and a chain of more than 16 paths that only hold the one below them shows its first and
//!    last 8 and one row for the paths between them (`[1006 paths that only hold their
//!    callees]`): a process's tree takes a few rows for each path it measured, however deep.
//!
//! Each part is linear in the processes and paths, up to sorting: a process's tree is built
//! from the paths it measured and the paths where they branch (found once for the profile's
//! paths, in O(n log depth)), not from every caller of every path, so the trees take
//! O(e log e) for e entries however deep their paths are (20,000 processes each measuring a
//! path 1,024 calls deep: 20,000 small trees, not 20 million rows); its output is linear in
//! the entries of the profile.
//!
//! A call_memory report starts with a line saying that its figures are **words** (tprof's
//! unit: each allocation's bytes rounded up to 8-byte words), while the html, pprof,
//! speedscope, folded and svg exports weigh the same allocations in **bytes** (the `weight`
//! module): [`WORDS_NOTE`].
//!
//! A profile with samples (sample mode) starts with their report instead, Julia's tree then
//! flat list ([`crate::sample_report`], laid out as [`write_with`]'s options say); the three
//! parts above follow it, after a blank line, when the profile also counted calls.

mod lineage;
mod tree;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use super::ExportError;
use crate::format::{cut_pad, label, micros, push_cut_pad, right, two_decimals, width};
use crate::sample_report::{PrintOptions, ReportFormat};
use crate::{Aggregate, Group, PathEntry, ProcessRecord, Profile, SortBy, TraceType};
use lineage::Lineage;
use tree::{At, Tree};

/// Writes `profile` as the pretty report, its samples (if any) as Julia's tree and flat list.
pub(super) fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    let samples = PrintOptions::new().format(ReportFormat::Both);
    write_with(profile, &samples, out)
}

/// Writes `profile` as the pretty report, its samples (if any) laid out as `samples` say.
pub(super) fn write_with(
    profile: &Profile,
    samples: &PrintOptions,
    out: &mut dyn Write,
) -> Result<(), ExportError> {
    write_counted(profile, samples, out).map(|_| ())
}

/// As [`write_with`], and how many rows of paths the call trees were built with (the work
/// they took: a few per entry, whatever the depth of its path).
fn write_counted(
    profile: &Profile,
    samples: &PrintOptions,
    out: &mut dyn Write,
) -> Result<usize, ExportError> {
    if !profile.samples.is_empty() {
        crate::sample_report::print(out, profile, samples)?;
        if profile.functions.is_empty() {
            return Ok(0);
        }
        writeln!(out)?;
    }
    let aggregate = if profile.trace_type == TraceType::CallCount {
        Aggregate::Total
    } else {
        Aggregate::Process
    };
    if profile.trace_type == TraceType::CallMemory && !profile.functions.is_empty() {
        writeln!(out, "{WORDS_NOTE}")?;
    }
    let inspected = crate::inspect(profile, aggregate, SortBy::default());
    let trees = by_process(profile);
    let mut pids: BTreeSet<runtime::Pid> = trees.keys().copied().collect();
    pids.extend(inspected.groups.keys().filter_map(|g| match g {
        Group::Process(pid) => Some(*pid),
        Group::All => None,
    }));
    if !pids.is_empty() {
        legend(profile, &pids, out)?;
    }
    crate::format(out, &inspected)?;
    let records = crate::table::records(profile);
    let mut built = 0;
    if !trees.is_empty() {
        let lineage = Lineage::new(profile.call_tree.nodes.iter().map(|n| n.parent));
        for (pid, entries) in trees {
            let record = records.get(&pid).copied();
            built += call_tree(profile, &lineage, pid, record, &entries, out)?;
        }
    }
    Ok(built)
}

/// The first line of a call_memory report: its unit, and the exports' other one.
pub(crate) const WORDS_NOTE: &str = "Memory in WORDS, as tprof counts it (each allocation's \
    bytes rounded up to whole 8-byte words); the html, pprof, speedscope, folded and svg \
    exports weigh bytes.";

/// Lines of cells as left-aligned columns as wide as their widest cell, two spaces apart
/// (the last column not padded), laid out in one buffer.
fn columns<const N: usize>(rows: &[[&str; N]], out: &mut dyn Write) -> std::io::Result<()> {
    let mut w = [0usize; N];
    for row in rows {
        for (w, cell) in w.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let mut text = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == N {
                text.push_str(cell);
            } else {
                push_cut_pad(&mut text, cell, w[i]);
                text.push_str("  ");
            }
        }
        text.push('\n');
    }
    out.write_all(text.as_bytes())
}

/// Part 1: who each process of `pids` is.
fn legend(
    profile: &Profile,
    pids: &BTreeSet<runtime::Pid>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let records = crate::table::records(profile);
    let cells: Vec<(String, &str, &str)> = pids
        .iter()
        .map(|pid| {
            let record = records.get(pid);
            (
                pid.to_string(),
                record.and_then(|r| r.name.as_deref()).unwrap_or("-"),
                record
                    .map(|r| r.initial_call.as_str())
                    .filter(|c| !c.is_empty())
                    .unwrap_or("-"),
            )
        })
        .collect();
    let mut rows: Vec<[&str; 3]> = vec![["PROCESS", "NAME", "INITIAL CALL"]];
    rows.extend(cells.iter().map(|(a, b, c)| [a.as_str(), *b, *c]));
    columns(&rows, out)
}

/// The call tree's entries, by process.
fn by_process(profile: &Profile) -> BTreeMap<runtime::Pid, Vec<&PathEntry>> {
    let mut out: BTreeMap<runtime::Pid, Vec<&PathEntry>> = BTreeMap::new();
    for e in &profile.call_tree.entries {
        if let Group::Process(pid) = e.group {
            out.entry(pid).or_default().push(e);
        }
    }
    out
}

/// A chain of more paths than twice this that only hold the path below them (a deep caller
/// outside the patterns) is printed as its first and last this many, and one row for the
/// paths between them: a process's tree then takes at most a few rows per path it measured,
/// whatever the depth.
const CHAIN_ENDS: usize = 8;

/// The deepest level a row is indented to; a deeper one is indented as deep, and says its
/// depth (`(70) app::f/0`), so that a row stays short whatever the depth.
const MAX_INDENT: usize = 32;

/// The indentation of a row `depth` levels deep.
fn indent(depth: usize) -> String {
    use std::fmt::Write as _;
    let mut text = "  ".repeat(depth.min(MAX_INDENT));
    if depth > MAX_INDENT {
        let _ = write!(text, "({depth}) ");
    }
    text
}

/// The cells of one row of the tree: `name` indented `depth` levels, and its figures.
fn tree_row(name: &str, depth: usize, row: &Row, share: impl Fn(u64) -> f64) -> [String; 5] {
    [
        format!("{}{name}", indent(depth)),
        row.calls.to_string(),
        row.own.to_string(),
        row.inclusive.to_string(),
        two_decimals(share(row.inclusive)),
    ]
}

/// One path of a process's tree, as printed.
#[derive(Clone, Copy, Debug, Default)]
struct Row {
    /// Whether the process has figures of this path (else it holds its callees only).
    entered: bool,
    calls: u64,
    /// Its own figure, as printed (whole microseconds for call_time).
    own: u64,
    /// With the paths below it.
    inclusive: u64,
}

/// Part 3, for one process: its call tree, from its `entries`; how many rows of paths it
/// was built with.
///
/// The tree is built from the paths the process measured, the paths where they branch and
/// their outermost paths (found in `lineage`): a path between two of them only holds the one
/// below it, and has its figures (no calls, nothing of its own, the one below's inclusive
/// figure), so it is looked at only where it is printed.
fn call_tree(
    profile: &Profile,
    lineage: &Lineage,
    pid: runtime::Pid,
    record: Option<&ProcessRecord>,
    entries: &[&PathEntry],
    out: &mut dyn Write,
) -> std::io::Result<usize> {
    let time = profile.trace_type == TraceType::CallTime;
    let nodes = &profile.call_tree.nodes;
    let tree = Tree::of(
        lineage,
        entries.iter().filter_map(|e| {
            nodes.get(e.node as usize)?;
            let own = if time {
                micros(e.measurement)
            } else {
                e.measurement
            };
            Some((e.node, e.calls, own))
        }),
    );
    let total: u64 = tree
        .roots
        .iter()
        .fold(0, |sum, r| sum.saturating_add(tree.rows[r].inclusive));
    let name = |node: u32| {
        nodes
            .get(node as usize)
            .and_then(|n| profile.function_table.get(n.function as usize))
            .map_or_else(|| "?".to_owned(), |f| f.mfa())
    };
    // Heaviest first; ties by name, then path.
    let heaviest = |list: Vec<At>| {
        let mut keyed: Vec<(std::cmp::Reverse<u64>, String, u32, At)> = list
            .into_iter()
            .map(|at| {
                let node = tree.node(lineage, at);
                (
                    std::cmp::Reverse(tree.row(lineage, at).inclusive),
                    name(node),
                    node,
                    at,
                )
            })
            .collect();
        keyed.sort_unstable_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)));
        keyed.into_iter().map(|(.., at)| at)
    };
    // Depth first, in print order: (path, depth as printed).
    let mut cells: Vec<[String; 5]> = Vec::new();
    let share = |inclusive: u64| {
        if total == 0 {
            0.0
        } else {
            inclusive as f64 * 100.0 / total as f64
        }
    };
    let row_of = |at: At, depth: usize| {
        tree_row(
            &name(tree.node(lineage, at)),
            depth,
            &tree.row(lineage, at),
            share,
        )
    };
    let roots = tree.roots.iter().map(|&r| At {
        below: r,
        depth: lineage.depth(r),
    });
    let mut todo: Vec<(At, usize)> = heaviest(roots.collect()).rev().map(|at| (at, 0)).collect();
    while let Some((at, depth)) = todo.pop() {
        // A long chain of paths that only hold the one below them: its ends, and one row
        // for the paths between them.
        let end = tree.chain_end(at);
        let last = (lineage.depth(end) - at.depth) as usize;
        let (mut depth, mut at) = (depth, at);
        if last > 2 * CHAIN_ENDS {
            let on = move |i: usize| At {
                below: end,
                depth: at.depth + i as u32,
            };
            for i in 0..CHAIN_ENDS {
                cells.push(row_of(on(i), depth));
                depth += 1;
            }
            let hidden = last - 2 * CHAIN_ENDS;
            let between = tree.row(lineage, on(CHAIN_ENDS)).inclusive;
            cells.push([
                format!(
                    "{}[{hidden} paths that only hold their callees]",
                    indent(depth)
                ),
                "0".to_owned(),
                "0".to_owned(),
                between.to_string(),
                two_decimals(share(between)),
            ]);
            depth += 1;
            for i in last - CHAIN_ENDS..last {
                cells.push(row_of(on(i), depth));
                depth += 1;
            }
            at = on(last);
        }
        cells.push(row_of(at, depth));
        let below: Vec<At> = tree.children(lineage, at);
        todo.extend(heaviest(below).rev().map(|c| (c, depth + 1)));
    }
    let measurement = label(profile.trace_type);
    let inclusive = "WITH CALLEES";
    let total_text = total.to_string();
    let mut w = [
        width("FUNCTION"),
        5,
        width(measurement).max(width(&total_text)),
        width(inclusive),
        5,
    ];
    for row in &cells {
        for (w, cell) in w.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let line = |out: &mut dyn Write, c: [&str; 5]| {
        writeln!(
            out,
            "{}  {}  {}  {}  [{}]",
            cut_pad(c[0], w[0]),
            right(c[1], w[1]),
            right(c[2], w[2]),
            right(c[3], w[3]),
            right(c[4], w[4])
        )
    };
    match record.and_then(|r| r.name.as_deref()) {
        Some(name) => write!(out, "\n****** Call tree of process {pid} {name} *** \n")?,
        None => write!(out, "\n****** Call tree of process {pid} *** \n")?,
    }
    line(out, ["FUNCTION", "CALLS", measurement, inclusive, "%"])?;
    for c in &cells {
        line(out, [&c[0], &c[1], &c[2], &c[3], &c[4]])?;
    }
    line(out, [" ", " ", &total_text, " ", "100.0"])?;
    Ok(tree.rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallTree, Function, FunctionTrace, PathNode};

    /// `processes` processes, each with one entry on the deepest path of a chain `depth`
    /// calls deep, and a second on a path that branches off it halfway.
    fn deep_in_many(processes: u32, depth: u32) -> Profile {
        let table: Vec<Function> = (0..10)
            .map(|i| Function {
                module: "app".into(),
                name: format!("f{i}"),
                arity: 0,
                file: "app.rs".into(),
                line: i + 1,
            })
            .collect();
        let mut nodes: Vec<PathNode> = (0..depth)
            .map(|i| PathNode {
                parent: i.checked_sub(1),
                function: i % 10,
            })
            .collect();
        nodes.push(PathNode {
            parent: Some(depth / 2),
            function: 7,
        });
        let mut entries = Vec::new();
        for i in 0..processes {
            let group = Group::Process(runtime::Pid::from_parts(0, i + 1, 0));
            for (node, ns) in [(depth / 2 + 1, 3_000), (depth - 1, 5_000)] {
                entries.push(PathEntry {
                    group,
                    node,
                    calls: 1,
                    measurement: ns,
                    bytes: 0,
                    blocks: 0,
                });
            }
            // The branch's own path, one more entry.
            entries.push(PathEntry {
                group,
                node: depth,
                calls: 2,
                measurement: 1_000,
                bytes: 0,
                blocks: 0,
            });
        }
        entries.sort_by_key(|e| (e.group, e.node));
        let mut profile = Profile::new(TraceType::CallTime, Vec::<FunctionTrace>::new());
        profile.function_table = table;
        profile.call_tree = CallTree { nodes, entries };
        profile
    }

    /// The call trees are built from a few rows per entry, not from every caller of every
    /// path: entries × depth was 10 s of CPU for 20,000 processes at a depth of 1,024.
    #[test]
    fn the_call_trees_take_work_linear_in_the_entries_whatever_their_depth() {
        for depth in [64, 1_024] {
            let processes = 200;
            let profile = deep_in_many(processes, depth);
            let entries = profile.call_tree.entries.len();
            let mut out = Vec::new();
            let built = write_counted(&profile, &PrintOptions::new(), &mut out).unwrap();
            assert!(
                built <= 3 * entries,
                "depth {depth}: {built} rows built for {entries} entries"
            );
            let text = String::from_utf8(out).unwrap();
            assert_eq!(text.matches("****** Call tree of process").count(), 200);
        }
    }
}
