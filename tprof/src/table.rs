//! A richer view than tprof's text: comfy-table tables of the processes and their functions,
//! with bytes and blocks for call_memory.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use runtime::Pid;

use crate::inspect::{Aggregate, SortBy, inspect_keeping_zeros};
use crate::profile::{Group, Profile, TraceType};

fn new_table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header(header.iter().copied());
    for i in 1..header.len() {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

fn process_name(pid: Pid) -> String {
    match runtime::process_info(pid) {
        Some(info) => info
            .registered_name
            .map(|n| n.to_string())
            .unwrap_or_else(|| info.initial_call.into_owned()),
        None => "(ended)".to_owned(),
    }
}

fn live_heap(pid: Pid) -> String {
    runtime::heap::process_heap(pid).map_or_else(|_| "-".to_owned(), |h| h.live_bytes.to_string())
}

/// Per process: its name (registered name, or initial call while alive), calls, the
/// measurement, bytes and blocks (call_memory), and its live heap now.
pub fn process_summary(profile: &Profile) -> Table {
    let memory = profile.trace_type == TraceType::CallMemory;
    let measurement = match profile.trace_type {
        TraceType::CallCount => "calls",
        TraceType::CallTime => "time (us)",
        TraceType::CallMemory => "words",
    };
    let mut header = vec!["process", "name", "calls", measurement];
    if memory {
        header.extend(["bytes", "blocks"]);
    }
    header.push("live heap (bytes)");
    let mut table = new_table(&header);
    let mut groups: std::collections::BTreeMap<Group, [u64; 4]> = Default::default();
    for f in &profile.functions {
        for e in &f.entries {
            let sums = groups.entry(e.group).or_default();
            sums[0] = sums[0].saturating_add(e.calls);
            sums[1] = sums[1].saturating_add(e.measurement);
            sums[2] = sums[2].saturating_add(e.bytes);
            sums[3] = sums[3].saturating_add(e.blocks);
        }
    }
    for (group, [calls, value, bytes, blocks]) in groups {
        let value = if profile.trace_type == TraceType::CallTime {
            format!("{:.1}", value as f64 / 1000.0)
        } else {
            value.to_string()
        };
        let (name, live) = match group {
            Group::Process(pid) => (process_name(pid), live_heap(pid)),
            Group::All => ("(all processes)".to_owned(), "-".to_owned()),
        };
        let mut row = vec![group.to_string(), name, calls.to_string(), value];
        if memory {
            row.extend([bytes.to_string(), blocks.to_string()]);
        }
        row.push(live);
        table.add_row(row);
    }
    table
}

/// The functions of one group (a process, or all together), sorted: calls, the measurement,
/// per call and percent, and bytes and blocks (with per call) for call_memory. Unlike tprof's
/// text, functions that allocated nothing are listed too.
pub fn function_table(profile: &Profile, group: Group, sort: SortBy) -> Table {
    let aggregate = match group {
        Group::All => Aggregate::Total,
        Group::Process(_) => Aggregate::Process,
    };
    let memory = profile.trace_type == TraceType::CallMemory;
    let time = profile.trace_type == TraceType::CallTime;
    let measurement = match profile.trace_type {
        TraceType::CallCount => "calls",
        TraceType::CallTime => "time (us)",
        TraceType::CallMemory => "words",
    };
    let mut header = vec!["function", "calls", measurement, "per call", "%"];
    if memory {
        header.extend(["bytes", "bytes/call", "blocks", "blocks/call"]);
    }
    // Percentiles are per function over all processes: shown in the `all` table.
    let percentiles = time && group == Group::All && !profile.percentiles.is_empty();
    if percentiles {
        header.extend(["p50 (us)", "p90 (us)", "p99 (us)", "max (us)"]);
    }
    let mut table = new_table(&header);
    let inspected = inspect_keeping_zeros(profile, aggregate, sort);
    let Some(lines) = inspected.groups.get(&group) else {
        return table;
    };
    for line in &lines.lines {
        let (value, per_call) = if time {
            (
                format!("{:.1}", line.measurement as f64 / 1000.0),
                format!("{:.2}", line.per_call / 1000.0),
            )
        } else {
            (
                line.measurement.to_string(),
                format!("{:.2}", line.per_call),
            )
        };
        let mut row = vec![
            format!("{}::{}/{}", line.module, line.function, line.arity),
            line.calls.to_string(),
            value,
            per_call,
            format!("{:.2}", line.percent),
        ];
        if memory {
            let (bytes, blocks) = profile
                .functions
                .iter()
                .filter(|f| {
                    f.module() == line.module
                        && f.function() == line.function
                        && f.arity() == line.arity
                })
                .flat_map(|f| f.entries.iter())
                .filter(|e| group == Group::All || e.group == group)
                .fold((0u64, 0u64), |(b, k), e| {
                    (b.saturating_add(e.bytes), k.saturating_add(e.blocks))
                });
            let per = |n: u64| {
                if line.calls == 0 {
                    "0.00".to_owned()
                } else {
                    format!("{:.2}", n as f64 / line.calls as f64)
                }
            };
            row.extend([
                bytes.to_string(),
                per(bytes),
                blocks.to_string(),
                per(blocks),
            ]);
        }
        if percentiles {
            let found = profile.percentiles.iter().find(|p| {
                p.function.module == line.module
                    && p.function.name == line.function
                    && p.function.arity == line.arity
            });
            let us = |ns: u64| format!("{:.2}", ns as f64 / 1000.0);
            match found {
                Some(p) => row.extend([us(p.p50_ns), us(p.p90_ns), us(p.p99_ns), us(p.max_ns)]),
                None => row.extend(std::iter::repeat_n("-".to_owned(), 4)),
            }
        }
        table.add_row(row);
    }
    table
}

/// The process summary, then each process's functions (or all together for call_count),
/// sorted by measurement, largest first.
pub fn rich_report(profile: &Profile) -> String {
    if profile.is_empty() {
        return "Trace is empty\n".to_owned();
    }
    let sort = SortBy::descending(crate::Column::Measurement);
    let mut out = format!(
        "{} profile\n{}\n",
        profile.trace_type,
        process_summary(profile)
    );
    let mut groups: Vec<Group> = if profile.trace_type == TraceType::CallCount {
        vec![Group::All]
    } else {
        profile.pids().into_iter().map(Group::Process).collect()
    };
    if !profile.percentiles.is_empty() {
        groups.insert(0, Group::All);
    }
    for group in groups {
        out.push_str(&format!(
            "\n{group}\n{}\n",
            function_table(profile, group, sort)
        ));
    }
    out
}
