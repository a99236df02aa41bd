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
//! the label is tprof's, `TIME (us)`, in ASCII as OTP prints it. The totals row has the
//! measurement's total; call_count's has `[100.0]` alone, as OTP prints it (no total of calls).
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
    let mut out = String::with_capacity(w);
    push_cut_pad(&mut out, s, w);
    out
}

/// [`cut_pad`], onto `out`.
pub(crate) fn push_cut_pad(out: &mut String, s: &str, w: usize) {
    let mut n = 0;
    for c in s.chars().take(w) {
        out.push(c);
        n += 1;
    }
    pad(out, w - n);
}

/// `n` spaces onto `out`.
pub(crate) fn pad(out: &mut String, n: usize) {
    const SPACES: &str = "                                                                ";
    let mut n = n;
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// Right-aligned in at least `w` characters, as `~Ns`.
pub(crate) fn right(s: &str, w: usize) -> String {
    format!("{s:>w$}")
}

/// [`right`], onto `out`.
pub(crate) fn push_right(out: &mut String, s: &str, w: usize) {
    pad(out, w.saturating_sub(width(s)));
    out.push_str(s);
}

/// Two decimals, ties rounded away from zero, as Erlang's `float_to_list(X, [{decimals, 2}])`
/// prints them (Rust's `{:.2}` rounds ties to even).
pub(crate) fn two_decimals(x: f64) -> String {
    let mut out = String::new();
    push_two_decimals(&mut out, x);
    out
}

/// [`two_decimals`], onto `out`: without going through `{:.2}` (whose exact float formatting
/// took much of a report of a million lines) when `x` is a non-negative number of hundredths
/// a double holds exactly enough, which prints the same.
pub(crate) fn push_two_decimals(out: &mut String, x: f64) {
    use std::fmt::Write as _;
    let hundredths = (x * 100.0).round();
    // Below 2^50 hundredths, `hundredths / 100` is within a hundredth's rounding error of
    // the decimal, so `{:.2}` prints the digits of `hundredths` themselves.
    if x.is_sign_positive() && hundredths < (1u64 << 50) as f64 {
        let h = hundredths as u64;
        let _ = write!(out, "{}.{:02}", h / 100, h % 100);
    } else {
        let _ = write!(out, "{:.2}", hundredths / 100.0);
    }
}

/// How many digits `n` prints as.
pub(crate) fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
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
    if let Some(note) = inspected.run_queue.as_ref().and_then(run_queue_note) {
        write!(out, "\n{note}\n")?;
    }
    Ok(())
}

/// What a call_time report says of the waits on the OS's run queue while it was taken, when
/// they are at least [`RUN_QUEUE_NOTE_SHARE`](crate::RUN_QUEUE_NOTE_SHARE) of the threads'
/// ready time: call times are wall time while a process is polled, so they include them.
pub(crate) fn run_queue_note(q: &runtime::trace::SnapshotRunQueue) -> Option<String> {
    let share = q.waited_share();
    if share < crate::RUN_QUEUE_NOTE_SHARE {
        return None;
    }
    let seconds = |ns: u64| ns as f64 / 1e9;
    let threads = if q.threads == 1 { "thread" } else { "threads" };
    Some(format!(
        "Note: the OS kept the program's threads waiting to run for {}% of the time they were \
         ready to ({:.3} s waited, {:.3} s ran, {} {threads}): call times are wall time while a \
         process is polled, so they include waits of its worker; a CPU sample profile shows \
         CPU time alone.",
        two_decimals(share * 100.0),
        seconds(q.waited_ns),
        seconds(q.ran_ns),
        q.threads,
    ))
}

/// The header of a group of calls made outside processes ([`OUTSIDE_PROCESSES`]).
fn push_outside_header(out: &mut String, group: Group) {
    use std::fmt::Write as _;
    let _ = write!(out, "{OUTSIDE_PROCESSES} {group}");
}

/// Past this many bytes, the text laid out so far is written out.
const FLUSH_AT: usize = 1 << 16;

/// Writes `buf` to `out` once it holds [`FLUSH_AT`] bytes, and empties it.
fn flush_past(out: &mut dyn Write, buf: &mut String, at: usize) -> io::Result<()> {
    if buf.len() >= at {
        out.write_all(buf.as_bytes())?;
        buf.clear();
    }
    Ok(())
}

/// Lays every group out into one buffer, written out every [`FLUSH_AT`] bytes: linear in the
/// lines, with no allocation per line.
fn format_groups(out: &mut dyn Write, inspected: &Inspected) -> io::Result<()> {
    use std::fmt::Write as _;
    if inspected.groups.is_empty() {
        return out.write_all(b"Trace is empty\n");
    }
    let mut buf = String::with_capacity(2 * FLUSH_AT);
    let mut scratch = Scratch::default();
    if let Some(all) = inspected.groups.get(&Group::All) {
        group_into(&mut buf, &mut scratch, all, printed_total(all));
        // With `outside_in_tables`: the calls outside processes, apart from `all`.
        for (group, profile) in inspected
            .groups
            .iter()
            .filter(|(g, _)| inspected.outside.contains(g))
        {
            buf.push_str("\n****** ");
            push_outside_header(&mut buf, *group);
            buf.push_str(" *** \n");
            group_into(&mut buf, &mut scratch, profile, printed_total(profile));
            flush_past(out, &mut buf, FLUSH_AT)?;
        }
        return flush_past(out, &mut buf, 0);
    }
    let totals: Vec<u64> = inspected.groups.values().map(printed_total).collect();
    let grand = totals.iter().fold(0u64, |a, b| a.saturating_add(*b));
    for ((group, profile), &total) in inspected.groups.iter().zip(&totals) {
        let share = if grand == 0 {
            0.0
        } else {
            total as f64 * 100.0 / grand as f64
        };
        buf.push_str("\n****** ");
        if inspected.outside.contains(group) {
            push_outside_header(&mut buf, *group);
        } else {
            let _ = write!(buf, "Process {group}");
        }
        buf.push_str("  --  ");
        push_two_decimals(&mut buf, share);
        buf.push_str("% of total *** \n");
        group_into(&mut buf, &mut scratch, profile, total);
        flush_past(out, &mut buf, FLUSH_AT)?;
    }
    flush_past(out, &mut buf, 0)
}

/// The measurement of a line as printed: microseconds for call_time (each function's total
/// rounded, as tprof's call_time data is in whole microseconds), the value itself otherwise.
fn printed_value(trace_type: TraceType, measurement: u64) -> u64 {
    if trace_type == TraceType::CallTime {
        micros(measurement)
    } else {
        measurement
    }
}

/// The group's total as printed: the sum of its printed values.
fn printed_total(group: &GroupProfile) -> u64 {
    if group.trace_type == TraceType::CallTime {
        group.lines.iter().fold(0, |a, l| {
            a.saturating_add(printed_value(group.trace_type, l.measurement))
        })
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
    let mut buf = String::new();
    group_into(
        &mut buf,
        &mut Scratch::default(),
        group,
        printed_total(group),
    );
    out.write_all(buf.as_bytes())
}

/// The decimal cells of a group's lines, laid out once to measure them and copied from there:
/// reused from group to group.
#[derive(Default)]
struct Scratch {
    /// Per line, per call then percent, one after another.
    text: String,
    /// Where each cell of `text` ends.
    ends: Vec<usize>,
}

impl Scratch {
    fn push(&mut self, x: f64) -> usize {
        let start = self.text.len();
        push_two_decimals(&mut self.text, x);
        self.ends.push(self.text.len());
        self.text.len() - start
    }

    /// The `i`th cell.
    fn cell(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }
}

/// The width of a line's function as printed, `module::function/arity`.
fn name_width(line: &crate::inspect::Line) -> usize {
    width(&line.module) + 2 + width(&line.function) + 1 + digits(u64::from(line.arity))
}

/// Lays out one group, `total` its printed total, onto `buf`: [`format_group`].
fn group_into(buf: &mut String, scratch: &mut Scratch, group: &GroupProfile, total: u64) {
    use std::fmt::Write as _;
    scratch.text.clear();
    scratch.ends.clear();
    let count = group.trace_type == TraceType::CallCount;
    let time = group.trace_type == TraceType::CallTime;
    let label = if count {
        "CALLS"
    } else {
        label(group.trace_type)
    };
    // Columns: function, calls, the measurement (not for call_count), per call (not for
    // call_count), percent.
    let mut w = [0usize, 5, width(label).max(digits(total)), 8, 5];
    for l in &group.lines {
        let value = printed_value(group.trace_type, l.measurement);
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
        w[0] = w[0].max(name_width(l));
        w[1] = w[1].max(digits(l.calls));
        if !count {
            w[2] = w[2].max(digits(value));
            w[3] = w[3].max(scratch.push(per_call));
        }
        w[4] = w[4].max(scratch.push(percent));
    }
    let header = |buf: &mut String, cells: [&str; 5]| {
        push_cut_pad(buf, cells[0], w[0]);
        buf.push_str("  ");
        push_right(buf, cells[1], w[1]);
        if !count {
            buf.push_str("  ");
            push_right(buf, cells[2], w[2]);
            buf.push_str("  ");
            push_right(buf, cells[3], w[3]);
        }
        buf.push_str("  [");
        push_right(buf, cells[4], w[4]);
        buf.push_str("]\n");
    };
    header(buf, ["FUNCTION", "CALLS", label, "PER CALL", "%"]);
    let per_line = if count { 1 } else { 2 };
    for (i, l) in group.lines.iter().enumerate() {
        let start = buf.len();
        let _ = write!(buf, "{}::{}/{}", l.module, l.function, l.arity);
        pad(buf, w[0] - width(&buf[start..]));
        let _ = write!(buf, "  {:>w$}", l.calls, w = w[1]);
        if !count {
            let value = printed_value(group.trace_type, l.measurement);
            let _ = write!(buf, "  {:>w$}  ", value, w = w[2]);
            push_right(buf, scratch.cell(per_line * i), w[3]);
        }
        buf.push_str("  [");
        push_right(buf, scratch.cell(per_line * i + per_line - 1), w[4]);
        buf.push_str("]\n");
    }
    let total = total.to_string();
    header(buf, [" ", " ", &total, " ", "100.0"]);
}

/// [`format()`] into a `String`.
pub fn format_to_string(inspected: &Inspected) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = format(&mut out, inspected);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{digits, two_decimals};

    /// What [`two_decimals`] printed before it had a path of its own: `{:.2}` of the number
    /// rounded to hundredths.
    fn reference(x: f64) -> String {
        format!("{:.2}", (x * 100.0).round() / 100.0)
    }

    #[test]
    fn two_decimals_prints_what_the_float_formatting_prints() {
        let mut values = vec![
            0.0,
            -0.0,
            0.005,
            0.015,
            0.125,
            1.005,
            2.675,
            99.995,
            100.0,
            -1.5,
            f64::NAN,
            f64::INFINITY,
            1e12 + 0.005,
            1e14,
            1e300,
        ];
        // Shares and ratios of the kinds the reports print.
        for a in 1..400u64 {
            for b in 1..60u64 {
                values.push(a as f64 * 100.0 / (a + b) as f64);
                values.push(a as f64 * 1_000_003.0 / b as f64);
            }
        }
        for x in values {
            assert_eq!(two_decimals(x), reference(x), "{x}");
        }
    }

    #[test]
    fn digits_counts_the_digits_printed() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::MAX] {
            assert_eq!(digits(n), n.to_string().len(), "{n}");
        }
    }
}
