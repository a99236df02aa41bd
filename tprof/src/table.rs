//! A richer view than tprof's text: comfy-table tables of the processes and their functions,
//! with bytes and blocks for call_memory and, for call_time with percentiles, the distribution
//! of each function's time per call.
//!
//! Processes are named as the profile recorded them (the name each was registered under and
//! its initial call, [`Profile::processes`]): a table drawn long after the processes ended, or
//! from an archive on another machine, names them all the same. Only the live heap column is
//! read at drawing time, from the processes still running.
//!
//! Everything is linear in the processes and functions: a report of 100,000 processes
//! inspects the profile once and looks each figure up by hash.

use std::collections::{HashMap, HashSet};

use comfy_table::Table;
use runtime::Pid;

use crate::inspect::{Aggregate, Borrowed, LineOf, SortBy, inspect_keeping_zeros};
use crate::profile::{Group, OUTSIDE_PROCESSES, Percentiles, ProcessRecord, Profile, TraceType};

mod grid;
use grid::Grid;

/// `rows` under `header` as plain columns (no borders), each line trimmed: the process lists
/// of `tprof attach` and peek. The first column must not be empty (lines are trimmed on both
/// sides).
pub(crate) fn plain_columns<const N: usize>(
    header: [&str; N],
    rows: impl IntoIterator<Item = [String; N]>,
) -> String {
    let mut table = Table::new();
    table.load_style(comfy_table::presets::NOTHING);
    table.set_header(header);
    for row in rows {
        table.add_row(row);
    }
    let mut out = String::new();
    for line in table.to_string().lines() {
        out.push_str(line.trim());
        out.push('\n');
    }
    out
}

/// The measurement's column title in the rich tables.
fn measurement_title(trace_type: TraceType) -> &'static str {
    match trace_type {
        TraceType::CallCount => "calls",
        TraceType::CallTime => "time (us)",
        TraceType::CallMemory => "words",
    }
}

/// How a process's table is headed: its pid, then the name it was registered under and its
/// initial call, as the profile recorded them (`<0.5.1> worker (app::worker/1)`).
pub(crate) fn heading(group: Group, record: Option<&ProcessRecord>) -> String {
    let mut out = match group {
        Group::All => return crate::profile::ALL_PROCESSES.to_owned(),
        Group::Process(pid) => pid.to_string(),
    };
    let Some(record) = record else {
        return out;
    };
    if let Some(name) = &record.name {
        out.push(' ');
        out.push_str(name);
    }
    // Calls outside processes: the name says so already.
    if !record.initial_call.is_empty() && record.initial_call != OUTSIDE_PROCESSES {
        out.push_str(&format!(" ({})", record.initial_call));
    }
    out
}

/// Per process: its pid, the name it was registered under (`-` for none) and its initial
/// call, as the profile recorded them; calls, the measurement, bytes and blocks
/// (call_memory); and its live heap now (`-` once it has ended).
pub fn process_summary(profile: &Profile) -> Table {
    summary_grid(profile).to_table()
}

/// The cells of [`process_summary`].
fn summary_grid(profile: &Profile) -> Grid<'static> {
    use std::fmt::Write as _;
    let memory = profile.trace_type == TraceType::CallMemory;
    let mut header = vec![
        "process",
        "name",
        "initial call",
        "calls",
        measurement_title(profile.trace_type),
    ];
    if memory {
        header.extend(["bytes", "blocks"]);
    }
    header.push("live heap (bytes)");
    let mut grid = Grid::new(header);
    grid.left(1);
    grid.left(2);
    let mut groups: HashMap<Group, [u64; 4]> = HashMap::new();
    let outside = profile.outside_pids();
    for f in &profile.functions {
        for e in &f.entries {
            let sums = groups.entry(e.group).or_default();
            sums[0] = sums[0].saturating_add(e.calls);
            sums[1] = sums[1].saturating_add(e.measurement);
            sums[2] = sums[2].saturating_add(e.bytes);
            sums[3] = sums[3].saturating_add(e.blocks);
        }
    }
    let mut groups: Vec<(Group, [u64; 4])> = groups.into_iter().collect();
    groups.sort_unstable_by_key(|(g, _)| *g);
    let records = records(profile);
    for (group, [calls, value, bytes, blocks]) in groups {
        let _ = write!(grid.text(), "{group}");
        grid.end_cell();
        match group {
            Group::Process(pid) => {
                let record = records.get(&pid);
                grid.cell(record.and_then(|r| r.name.as_deref()).unwrap_or("-"));
                grid.cell(record.map_or("-", |r| r.initial_call.as_str()));
            }
            Group::All => {
                let _ = write!(grid.text(), "({})", crate::profile::ALL_PROCESSES);
                grid.end_cell();
                grid.cell("-");
            }
        }
        let _ = write!(grid.text(), "{calls}");
        grid.end_cell();
        if profile.trace_type == TraceType::CallTime {
            let _ = write!(grid.text(), "{:.1}", value as f64 / 1000.0);
        } else {
            let _ = write!(grid.text(), "{value}");
        }
        grid.end_cell();
        if memory {
            let _ = write!(grid.text(), "{bytes}");
            grid.end_cell();
            let _ = write!(grid.text(), "{blocks}");
            grid.end_cell();
        }
        match group {
            // Calls outside processes have no heap of their own.
            Group::Process(pid) if !outside.contains(&pid) => {
                match runtime::heap::process_heap(pid) {
                    Ok(h) => {
                        let _ = write!(grid.text(), "{}", h.live_bytes);
                        grid.end_cell();
                    }
                    Err(_) => grid.cell("-"),
                }
            }
            _ => grid.cell("-"),
        }
    }
    grid
}

/// The functions of one group (a process, or all together), sorted: calls, the measurement,
/// per call and percent, bytes and blocks (with per call) for call_memory, and for call_time
/// with percentiles p50, p90, p99 and max of the time per call — the calls' own time,
/// exclusive of traced callees, as the time and per-call columns count it. Unlike tprof's
/// text, functions that allocated nothing are listed too.
///
/// Each call reads the whole profile: to draw the tables of many processes, use
/// [`rich_report`].
pub fn function_table(profile: &Profile, group: Group, sort: SortBy) -> Table {
    Tables::new(profile, sort).table(group)
}

/// The process summary, then each process's functions (or all together for call_count),
/// sorted by measurement, largest first, each headed by the process's pid, name and initial
/// call.
pub fn rich_report(profile: &Profile) -> String {
    if profile.is_empty() {
        return "Trace is empty\n".to_owned();
    }
    let tables = Tables::new(profile, SortBy::descending(crate::Column::Measurement));
    let mut out = format!("{} profile\n", profile.trace_type);
    summary_grid(profile).draw(&mut out);
    out.push('\n');
    let mut groups: Vec<Group> = if profile.trace_type == TraceType::CallCount {
        // The calls made outside processes, apart from `all`.
        std::iter::once(Group::All)
            .chain(profile.pids().into_iter().map(Group::Process))
            .collect()
    } else {
        profile.pids().into_iter().map(Group::Process).collect()
    };
    // Percentiles of every process together (a profile of an older tprof) get that table.
    if groups.first() != Some(&Group::All)
        && profile.percentiles.iter().any(|p| p.group == Group::All)
    {
        groups.insert(0, Group::All);
    }
    let records = records(profile);
    for group in groups {
        let record = match group {
            Group::Process(pid) => records.get(&pid).copied(),
            Group::All => None,
        };
        out.push('\n');
        out.push_str(&heading(group, record));
        out.push('\n');
        tables.grid(group).draw(&mut out);
        out.push('\n');
    }
    out
}

/// The records of `profile`'s processes, by pid.
pub(crate) fn records(profile: &Profile) -> HashMap<Pid, &ProcessRecord> {
    profile.processes.iter().map(|p| (p.pid, p)).collect()
}

/// A function as the tables' lines name it: module, name, arity.
type Key<'a> = (Group, &'a str, &'a str, u8);

/// The function tables of a profile, drawn from one inspection and indexed figures, so that
/// the tables of every process together cost one pass over the profile.
pub(crate) struct Tables<'a> {
    profile: &'a Profile,
    sort: SortBy,
    /// The per-process inspection, calls outside processes included (for call_count: `all`
    /// and the groups of calls outside processes).
    processes: Borrowed<'a>,
    /// Bytes and blocks per process and function (call_memory).
    sums: HashMap<Key<'a>, (u64, u64)>,
    /// Percentiles per process (or all) and function (call_time with percentiles).
    percentiles: HashMap<Key<'a>, &'a Percentiles>,
    /// The groups that have percentiles.
    with_percentiles: HashSet<Group>,
}

impl<'a> Tables<'a> {
    pub(crate) fn new(profile: &'a Profile, sort: SortBy) -> Tables<'a> {
        let processes = inspect_keeping_zeros(profile, Aggregate::Process, sort);
        let mut sums: HashMap<Key<'a>, (u64, u64)> = HashMap::new();
        if profile.trace_type == TraceType::CallMemory {
            for f in &profile.functions {
                let (module, name, arity) = (f.module(), f.function(), f.arity());
                for e in &f.entries {
                    for group in [e.group, Group::All] {
                        let sum = sums.entry((group, module, name, arity)).or_default();
                        sum.0 = sum.0.saturating_add(e.bytes);
                        sum.1 = sum.1.saturating_add(e.blocks);
                    }
                }
            }
        }
        let percentiles = profile
            .percentiles
            .iter()
            .map(|p| {
                let f = &p.function;
                ((p.group, f.module.as_str(), f.name.as_str(), f.arity), p)
            })
            .collect();
        Tables {
            profile,
            sort,
            processes,
            sums,
            percentiles,
            with_percentiles: profile.percentiles.iter().map(|p| p.group).collect(),
        }
    }

    /// The table of `group`: see [`function_table`].
    pub(crate) fn table(&self, group: Group) -> Table {
        self.grid(group).to_table()
    }

    /// The cells of [`Tables::table`].
    pub(crate) fn grid(&self, group: Group) -> Grid<'static> {
        let profile = self.profile;
        let memory = profile.trace_type == TraceType::CallMemory;
        let time = profile.trace_type == TraceType::CallTime;
        let mut header = vec![
            "function",
            "calls",
            measurement_title(profile.trace_type),
            if time { "per call (us)" } else { "per call" },
            "%",
        ];
        if memory {
            header.extend(["bytes", "bytes/call", "blocks", "blocks/call"]);
        }
        let percentiles = time && self.with_percentiles.contains(&group);
        if percentiles {
            header.extend(["p50 (us)", "p90 (us)", "p99 (us)", "max (us)"]);
        }
        let mut grid = Grid::new(header);
        let total;
        let lines = match group {
            // call_count's inspection is of `all` already.
            Group::All if profile.trace_type != TraceType::CallCount => {
                total = inspect_keeping_zeros(profile, Aggregate::Total, self.sort);
                total.groups.get(&Group::All)
            }
            _ => self.processes.groups.get(&group),
        };
        for line in lines.iter().flat_map(|l| &l.lines) {
            self.row(&mut grid, group, line, memory, time, percentiles);
        }
        grid
    }

    fn row(
        &self,
        grid: &mut Grid<'_>,
        group: Group,
        line: &LineOf<'_>,
        memory: bool,
        time: bool,
        pct: bool,
    ) {
        use std::fmt::Write as _;
        let cell = |grid: &mut Grid<'_>, args: std::fmt::Arguments<'_>| {
            let _ = grid.text().write_fmt(args);
            grid.end_cell();
        };
        let f = line.function;
        let (module, function, arity) = (f.module(), f.function(), f.arity());
        cell(grid, format_args!("{module}::{function}/{arity}"));
        cell(grid, format_args!("{}", line.calls));
        if time {
            cell(
                grid,
                format_args!("{:.1}", line.measurement as f64 / 1000.0),
            );
            cell(grid, format_args!("{:.2}", line.per_call / 1000.0));
        } else {
            cell(grid, format_args!("{}", line.measurement));
            cell(grid, format_args!("{:.2}", line.per_call));
        }
        cell(grid, format_args!("{:.2}", line.percent));
        let key = (group, module, function, arity);
        if memory {
            let (bytes, blocks) = self.sums.get(&key).copied().unwrap_or_default();
            for n in [bytes, blocks] {
                cell(grid, format_args!("{n}"));
                if line.calls == 0 {
                    grid.cell("0.00");
                } else {
                    cell(grid, format_args!("{:.2}", n as f64 / line.calls as f64));
                }
            }
        }
        if pct {
            match self.percentiles.get(&key) {
                Some(p) => {
                    for ns in [p.p50_ns, p.p90_ns, p.p99_ns, p.max_ns] {
                        cell(grid, format_args!("{:.2}", ns as f64 / 1000.0));
                    }
                }
                None => {
                    for _ in 0..4 {
                        grid.cell("-");
                    }
                }
            }
        }
    }
}
