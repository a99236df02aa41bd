//! `format`: tprof's text layout, byte for byte.
//!
//! Per process: a blank line, `****** Process <N.I.S>  --  PP.PP% of total *** ` (with the
//! trailing space), a header, one row per function and a totals row. Column widths are
//! computed from the cells as tprof computes them: the function column is as wide as the
//! longest function (the header is cut to that width when every name is shorter, as tprof's
//! `~.Nts` does), calls at least 5 wide, the measurement as wide as its label or the total,
//! per call at least 8, percent at least 5. Functions print as `module::path::function/arity`.
//! call_time prints whole microseconds, each function's rounded from the nanoseconds kept in
//! the raw data, and derives its total, per-call and percent columns from them as tprof does;
//! the label is tprof's, `TIME (us)`, in ASCII as OTP prints it.
//!
//! Calls made outside any process ([`OUTSIDE_PROCESSES`]) have no place in tprof's layout: when
//! the tables leave them out, a last line says how many; when a profile asks for them
//! ([`Profile::outside_in_tables`](crate::Profile::outside_in_tables)), each is a group headed
//! `****** (outside processes) <N.T.0>`.

use std::io::{self, Write};

use crate::inspect::{GroupProfile, Inspected};
use crate::profile::{Group, OUTSIDE_PROCESSES, TraceType};

/// The measurement column's label.
pub(crate) fn label(trace_type: TraceType) -> &'static str {
    match trace_type {
        TraceType::CallCount => "CALLS",
        TraceType::CallTime => "TIME (us)",
        TraceType::CallMemory => "WORDS",
    }
}

/// The width of `s` as tprof counts it: in characters.
pub(crate) fn width(s: &str) -> usize {
    s.chars().count()
}

/// Left-aligned in exactly `w` characters (cut when longer), as `~.Nts`.
pub(crate) fn cut_pad(s: &str, w: usize) -> String {
    let mut out: String = s.chars().take(w).collect();
    let n = width(&out);
    out.extend(std::iter::repeat_n(' ', w - n));
    out
}

/// Right-aligned in at least `w` characters, as `~Ns`.
pub(crate) fn right(s: &str, w: usize) -> String {
    format!("{s:>w$}")
}

/// Two decimals, ties rounded away from zero, as Erlang's `float_to_list(X, [{decimals, 2}])`
/// prints them (Rust's `{:.2}` rounds ties to even).
pub(crate) fn two_decimals(x: f64) -> String {
    format!("{:.2}", (x * 100.0).round() / 100.0)
}

/// Nanoseconds to the microseconds tprof prints (rounded half up).
pub(crate) fn micros(ns: u64) -> u64 {
    ns.saturating_add(500) / 1000
}

/// Prints `inspected` as tprof's `format/2` does.
///
/// # Errors
/// What writing to `out` returns.
pub fn format(out: &mut dyn Write, inspected: &Inspected) -> io::Result<()> {
    format_groups(out, inspected)?;
    if inspected.outside_left_out > 0 {
        // Nothing measured is left out silently.
        let n = inspected.outside_left_out;
        let calls = if n == 1 { "call" } else { "calls" };
        write!(
            out,
            "\n{OUTSIDE_PROCESSES}: {n} {calls} made outside any process not in these tables \
             (ProfileOptions::outside_processes or ServerOptions::outside_processes shows \
             them)\n"
        )?;
    }
    Ok(())
}

/// The header of a group of calls made outside processes ([`OUTSIDE_PROCESSES`]).
fn outside_header(group: Group) -> String {
    format!("{OUTSIDE_PROCESSES} {group}")
}

fn format_groups(out: &mut dyn Write, inspected: &Inspected) -> io::Result<()> {
    if inspected.groups.is_empty() {
        return out.write_all(b"Trace is empty\n");
    }
    if let Some(all) = inspected.groups.get(&Group::All) {
        format_group(out, all)?;
        // With `outside_in_tables`: the calls outside processes, apart from `all`.
        for (group, profile) in inspected
            .groups
            .iter()
            .filter(|(g, _)| inspected.outside.contains(g))
        {
            write!(out, "\n****** {} *** \n", outside_header(*group))?;
            format_group(out, profile)?;
        }
        return Ok(());
    }
    let grand: u64 = inspected
        .groups
        .values()
        .map(printed_total)
        .fold(0, u64::saturating_add);
    for (group, profile) in &inspected.groups {
        let total = printed_total(profile);
        let share = if grand == 0 {
            0.0
        } else {
            total as f64 * 100.0 / grand as f64
        };
        let share = two_decimals(share);
        let name = if inspected.outside.contains(group) {
            outside_header(*group)
        } else {
            format!("Process {group}")
        };
        write!(out, "\n****** {name}  --  {share}% of total *** \n")?;
        format_group(out, profile)?;
    }
    Ok(())
}

/// The measurement of each line as printed: microseconds for call_time (each function's total
/// rounded, as tprof's call_time data is in whole microseconds), the value itself otherwise.
fn printed_values(group: &GroupProfile) -> Vec<u64> {
    group
        .lines
        .iter()
        .map(|l| {
            if group.trace_type == TraceType::CallTime {
                micros(l.measurement)
            } else {
                l.measurement
            }
        })
        .collect()
}

/// The group's total as printed: the sum of its printed values.
fn printed_total(group: &GroupProfile) -> u64 {
    if group.trace_type == TraceType::CallTime {
        printed_values(group)
            .iter()
            .fold(0, |a, b| a.saturating_add(*b))
    } else {
        group.total
    }
}

/// Prints one group (a process, or `all`) as tprof's `format/1` of a `profile_result()`.
///
/// For call_time, as in tprof, the printed figures all follow from whole microseconds: each
/// function's time rounded to them, the total their sum, per call and percent computed from
/// them.
///
/// # Errors
/// What writing to `out` returns.
pub fn format_group(out: &mut dyn Write, group: &GroupProfile) -> io::Result<()> {
    let names: Vec<String> = group
        .lines
        .iter()
        .map(|l| format!("{}::{}/{}", l.module, l.function, l.arity))
        .collect();
    if group.trace_type == TraceType::CallCount {
        let rows: Vec<[String; 3]> = group
            .lines
            .iter()
            .zip(&names)
            .map(|(l, name)| [name.clone(), l.calls.to_string(), two_decimals(l.percent)])
            .collect();
        let mut w = [0usize, 5, 5];
        for row in &rows {
            for (w, cell) in w.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        let line = |out: &mut dyn Write, cells: [&str; 3]| {
            writeln!(
                out,
                "{}  {}  [{}]",
                cut_pad(cells[0], w[0]),
                right(cells[1], w[1]),
                right(cells[2], w[2])
            )
        };
        line(out, ["FUNCTION", "CALLS", "%"])?;
        for row in &rows {
            line(out, [&row[0], &row[1], &row[2]])?;
        }
        return line(out, [" ", " ", "100.0"]);
    }
    let time = group.trace_type == TraceType::CallTime;
    let label = label(group.trace_type);
    let values = printed_values(group);
    let total = printed_total(group);
    let rows: Vec<[String; 5]> = group
        .lines
        .iter()
        .zip(&names)
        .zip(&values)
        .map(|((l, name), &value)| {
            let (per_call, percent) = if time {
                let per_call = if l.calls == 0 {
                    0.0
                } else {
                    value as f64 / l.calls as f64
                };
                let percent = if total == 0 {
                    0.0
                } else {
                    value as f64 * 100.0 / total as f64
                };
                (per_call, percent)
            } else {
                (l.per_call, l.percent)
            };
            [
                name.clone(),
                l.calls.to_string(),
                value.to_string(),
                two_decimals(per_call),
                two_decimals(percent),
            ]
        })
        .collect();
    let mut w = [0usize, 5, width(label).max(width(&total.to_string())), 8, 5];
    for row in &rows {
        for (w, cell) in w.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let line = |out: &mut dyn Write, cells: [&str; 5]| {
        writeln!(
            out,
            "{}  {}  {}  {}  [{}]",
            cut_pad(cells[0], w[0]),
            right(cells[1], w[1]),
            right(cells[2], w[2]),
            right(cells[3], w[3]),
            right(cells[4], w[4])
        )
    };
    line(out, ["FUNCTION", "CALLS", label, "PER CALL", "%"])?;
    for row in &rows {
        line(out, [&row[0], &row[1], &row[2], &row[3], &row[4]])?;
    }
    line(out, [" ", " ", &total.to_string(), " ", "100.0"])
}

/// [`format()`] into a `String`.
pub fn format_to_string(inspected: &Inspected) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = format(&mut out, inspected);
    String::from_utf8_lossy(&out).into_owned()
}
