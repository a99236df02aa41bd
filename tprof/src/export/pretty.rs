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
//! Each part is linear in the processes and paths (the tree sorts each node's children), and
//! its output in the entries of the profile.
//!
//! A profile with samples (sample mode) starts with their report instead, Julia's tree then
//! flat list ([`crate::sample_report`], laid out as [`write_with`]'s options say); the three
//! parts above follow it, after a blank line, when the profile also counted calls.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;

use super::ExportError;
use crate::format::{cut_pad, label, micros, push_cut_pad, right, two_decimals, width};
use crate::sample_report::{PrintOptions, ReportFormat};
use crate::{Aggregate, Group, PathEntry, ProcessRecord, Profile, SortBy, TraceType};

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
    if !profile.samples.is_empty() {
        crate::sample_report::print(out, profile, samples)?;
        if profile.functions.is_empty() {
            return Ok(());
        }
        writeln!(out)?;
    }
    let aggregate = if profile.trace_type == TraceType::CallCount {
        Aggregate::Total
    } else {
        Aggregate::Process
    };
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
    for (pid, entries) in trees {
        call_tree(profile, pid, records.get(&pid).copied(), &entries, out)?;
    }
    Ok(())
}

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
#[derive(Debug, Default)]
struct Row {
    /// Whether the process has figures of this path (else it holds its callees only).
    entered: bool,
    calls: u64,
    /// Its own figure, as printed (whole microseconds for call_time).
    own: u64,
    /// With the paths below it.
    inclusive: u64,
}

/// Part 3, for one process: its call tree, from its `entries`.
fn call_tree(
    profile: &Profile,
    pid: runtime::Pid,
    record: Option<&ProcessRecord>,
    entries: &[&PathEntry],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let time = profile.trace_type == TraceType::CallTime;
    let nodes = &profile.call_tree.nodes;
    // The parent of `node`, if it is a path of the tree that comes before it.
    let parent = |node: u32| {
        nodes
            .get(node as usize)
            .and_then(|n| n.parent)
            .filter(|&p| p < node)
    };
    let mut rows: HashMap<u32, Row> = HashMap::new();
    for e in entries {
        if nodes.get(e.node as usize).is_none() {
            continue;
        }
        let row = rows.entry(e.node).or_default();
        row.entered = true;
        row.calls = row.calls.saturating_add(e.calls);
        let own = if time {
            micros(e.measurement)
        } else {
            e.measurement
        };
        row.own = row.own.saturating_add(own);
        // The paths it extends, up to one already here.
        let mut at = e.node;
        while let Some(p) = parent(at) {
            if rows.contains_key(&p) {
                break;
            }
            rows.insert(p, Row::default());
            at = p;
        }
    }
    // Children after their parents: from the last path back, each adds to its parent.
    let mut order: Vec<u32> = rows.keys().copied().collect();
    order.sort_unstable_by(|a, b| b.cmp(a));
    let mut roots = Vec::new();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for &node in &order {
        let Some(row) = rows.get_mut(&node) else {
            continue;
        };
        row.inclusive = row.inclusive.saturating_add(row.own);
        let inclusive = row.inclusive;
        match parent(node).and_then(|p| Some((p, rows.get_mut(&p)?))) {
            Some((p, up)) => {
                up.inclusive = up.inclusive.saturating_add(inclusive);
                children.entry(p).or_default().push(node);
            }
            None => roots.push(node),
        }
    }
    let total: u64 = roots
        .iter()
        .fold(0, |sum, r| sum.saturating_add(rows[r].inclusive));
    let name = |node: u32| {
        nodes
            .get(node as usize)
            .and_then(|n| profile.function_table.get(n.function as usize))
            .map_or_else(|| "?".to_owned(), |f| f.mfa())
    };
    // Heaviest first; ties by name, then path.
    let heaviest = |list: &mut Vec<u32>| {
        let mut keyed: Vec<(std::cmp::Reverse<u64>, String, u32)> = list
            .iter()
            .map(|&n| (std::cmp::Reverse(rows[&n].inclusive), name(n), n))
            .collect();
        keyed.sort();
        *list = keyed.into_iter().map(|(_, _, n)| n).collect();
    };
    heaviest(&mut roots);
    // Depth first, in print order: (node, depth).
    let mut cells: Vec<[String; 5]> = Vec::with_capacity(rows.len());
    let share = |inclusive: u64| {
        if total == 0 {
            0.0
        } else {
            inclusive as f64 * 100.0 / total as f64
        }
    };
    let mut todo: Vec<(u32, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some((node, depth)) = todo.pop() {
        // A long chain of paths that only hold the one below them: its ends, and one row
        // for the paths between them.
        let mut chain = vec![node];
        let mut at = node;
        while let Some([only]) = children.get(&at).map(Vec::as_slice)
            && !rows[&at].entered
        {
            at = *only;
            chain.push(at);
        }
        let last = chain.len() - 1;
        let (mut depth, mut node) = (depth, node);
        if last > 2 * CHAIN_ENDS {
            for &n in &chain[..CHAIN_ENDS] {
                cells.push(tree_row(&name(n), depth, &rows[&n], share));
                depth += 1;
            }
            let hidden = last - 2 * CHAIN_ENDS;
            let between = &rows[&chain[CHAIN_ENDS]];
            let inclusive = between.inclusive.to_string();
            cells.push([
                format!(
                    "{}[{hidden} paths that only hold their callees]",
                    indent(depth)
                ),
                "0".to_owned(),
                "0".to_owned(),
                inclusive,
                two_decimals(share(between.inclusive)),
            ]);
            depth += 1;
            for &n in &chain[last - CHAIN_ENDS..last] {
                cells.push(tree_row(&name(n), depth, &rows[&n], share));
                depth += 1;
            }
            node = chain[last];
        }
        let mut below = children.remove(&node).unwrap_or_default();
        heaviest(&mut below);
        cells.push(tree_row(&name(node), depth, &rows[&node], share));
        todo.extend(below.into_iter().rev().map(|c| (c, depth + 1)));
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
    line(out, [" ", " ", &total_text, " ", "100.0"])
}
