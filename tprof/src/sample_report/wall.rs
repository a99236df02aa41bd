//! Where processes wait: the summary a report of wall samples starts with.
//!
//! ```text
//! Where processes wait: 40 process-ticks of 2 processes (wall samples)
//! STATE    TICKS       %
//! receive     30   75.00
//! running     10   25.00
//!
//! PROCESS  NAME    TICKS  receive  running  MAILBOX
//! <0.5.0>  server     30    66.67    33.33        4
//! <0.6.0>  -          10   100.00        -        0
//! ```
//!
//! First the share of process-ticks in each state, most first; then, when processes waited
//! in calls, whom they waited on: each callee (the heaviest first), the process-ticks spent
//! waiting on it, their share of all ticks in `call`, and how many processes waited on it;
//! then each process (the heaviest first, then by pid), its ticks, the share of them in each
//! state (`-` for none), the longest mailbox its samples saw and, when it was in a call, the
//! callee it waited on longest (`WAITING ON`, with `+n` when it waited on n others too):
//!
//! ```text
//! WAITING ON        TICKS       %  CALLERS
//! <0.9.0> (oracle)     12  100.00        2
//! ``` Processes under
//! [`mincount`](super::PrintOptions::mincount) ticks are counted in a line of their own
//! rather than listed. When there are more processes than [`rows`](super::PrintOptions::rows),
//! those without a registered name are counted together by their initial call (`(1200
//! processes)` on one row), and past `rows` rows the rest is counted in one line: the summary
//! of 100,000 processes is a screen, not 100,000 lines. Linear in the samples, n log n in the
//! processes.

use std::collections::HashMap;
use std::io::{self, Write};

use runtime::Pid;

use super::rounded;
use crate::format::two_decimals;
use crate::profile::ProcessRecord;
use crate::samples::{SampleRecord, WaitState};

/// A row of the per-process table: a process, or the unnamed processes of one initial call.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Process(Option<Pid>),
    Initial(String),
}

/// One process's wall samples.
#[derive(Default)]
struct Waits {
    ticks: f64,
    by_state: HashMap<Option<WaitState>, f64>,
    mailbox: u32,
    /// Ticks in a call, per callee.
    callees: HashMap<Pid, f64>,
}

impl Waits {
    /// The callee waited on longest (the smallest pid of equals), and how many others.
    fn main_callee(&self) -> Option<(Pid, usize)> {
        let (&pid, _) = self
            .callees
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1).then_with(|| b.0.cmp(a.0)))?;
        Some((pid, self.callees.len() - 1))
    }
}

/// Prints the summary of `samples` (wall samples), then a blank line.
pub(super) fn print(
    out: &mut dyn Write,
    samples: &[&SampleRecord],
    records: &HashMap<Pid, &ProcessRecord>,
    mincount: f64,
    max_rows: usize,
) -> io::Result<()> {
    let mut total = 0.0;
    let mut by_state: HashMap<Option<WaitState>, f64> = HashMap::new();
    let mut by_process: HashMap<Option<Pid>, Waits> = HashMap::new();
    for s in samples {
        total += s.weight;
        *by_state.entry(s.state).or_default() += s.weight;
        let p = by_process.entry(s.pid).or_default();
        p.ticks += s.weight;
        *p.by_state.entry(s.state).or_default() += s.weight;
        p.mailbox = p.mailbox.max(s.mailbox_len);
        // Only ticks in `call` wait on the callee: a process woken in a call (its reply
        // arrived) still names it, but it waits for a thread, and is counted as runnable.
        if let (Some(callee), Some(WaitState::Call)) = (s.callee, s.state) {
            *p.callees.entry(callee).or_default() += s.weight;
        }
    }
    let mut states: Vec<(Option<WaitState>, f64)> = by_state.into_iter().collect();
    states.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(a.0.is_none().cmp(&b.0.is_none()))
            .then(a.0.cmp(&b.0))
    });
    let state_name = |s: Option<WaitState>| s.map_or("unknown", WaitState::name);
    writeln!(
        out,
        "Where processes wait: {} process-ticks of {} processes (wall samples)",
        rounded(total),
        by_process.len()
    )?;
    let share = |part: f64, whole: f64| {
        if whole > 0.0 {
            part * 100.0 / whole
        } else {
            0.0
        }
    };
    let mut rows: Vec<Vec<String>> = vec![vec!["STATE".into(), "TICKS".into(), "%".into()]];
    rows.extend(states.iter().map(|(s, w)| {
        vec![
            state_name(*s).to_owned(),
            rounded(*w).to_string(),
            two_decimals(share(*w, total)),
        ]
    }));
    table(out, &rows, 1)?;
    writeln!(out)?;

    let name_of = |pid: Option<Pid>| {
        pid.and_then(|p| records.get(&p))
            .and_then(|r| r.name.clone())
    };
    let callee_text = |pid: Pid| match name_of(Some(pid)) {
        Some(name) => format!("{pid} ({name})"),
        None => pid.to_string(),
    };
    waiting_on(
        out,
        &by_process,
        by_state_call(&states),
        max_rows,
        &callee_text,
    )?;
    // Many processes: the unnamed ones together, by initial call.
    let many = by_process.len() > max_rows;
    let mut rows_by_key: HashMap<Key, (Waits, usize)> = HashMap::new();
    for (pid, waits) in by_process {
        let key = match (many, name_of(pid)) {
            (true, None) => Key::Initial(
                pid.and_then(|p| records.get(&p))
                    .map(|r| r.initial_call.clone())
                    .filter(|c| !c.is_empty())
                    .unwrap_or_else(|| "-".to_owned()),
            ),
            _ => Key::Process(pid),
        };
        let row = rows_by_key.entry(key).or_default();
        row.0.ticks += waits.ticks;
        for (state, w) in waits.by_state {
            *row.0.by_state.entry(state).or_default() += w;
        }
        row.0.mailbox = row.0.mailbox.max(waits.mailbox);
        for (callee, w) in waits.callees {
            *row.0.callees.entry(callee).or_default() += w;
        }
        row.1 += 1;
    }
    let mut processes: Vec<(Key, (Waits, usize))> = rows_by_key.into_iter().collect();
    processes.sort_by(|a, b| {
        (b.1)
            .0
            .ticks
            .total_cmp(&(a.1).0.ticks)
            .then_with(|| a.0.cmp(&b.0))
    });
    let mut header: Vec<String> = vec!["PROCESS".into(), "NAME".into(), "TICKS".into()];
    header.extend(states.iter().map(|(s, _)| state_name(*s).to_owned()));
    header.push("MAILBOX".into());
    let any_callee = processes.iter().any(|(_, (w, _))| !w.callees.is_empty());
    if any_callee {
        header.push("WAITING ON".into());
    }
    let mut rows = vec![header];
    let mut left_out = 0usize;
    let mut past_rows = (0usize, 0usize, 0.0f64);
    for (key, (waits, count)) in &processes {
        if waits.ticks < mincount {
            left_out += count;
            continue;
        }
        if rows.len() > max_rows {
            past_rows.0 += 1;
            past_rows.1 += count;
            past_rows.2 += waits.ticks;
            continue;
        }
        let (process, name) = match key {
            Key::Process(pid) => (
                pid.map_or_else(|| "-".to_owned(), |p| p.to_string()),
                name_of(*pid).unwrap_or_else(|| "-".to_owned()),
            ),
            Key::Initial(call) => (format!("({})", processes_in_words(*count)), call.clone()),
        };
        let mut row = vec![process, name, rounded(waits.ticks).to_string()];
        row.extend(states.iter().map(|(s, _)| match waits.by_state.get(s) {
            Some(w) if *w > 0.0 => two_decimals(share(*w, waits.ticks)),
            _ => "-".to_owned(),
        }));
        row.push(waits.mailbox.to_string());
        if any_callee {
            row.push(match waits.main_callee() {
                Some((pid, 0)) => callee_text(pid),
                Some((pid, others)) => format!("{} +{others}", callee_text(pid)),
                None => "-".to_owned(),
            });
        }
        rows.push(row);
    }
    if rows.len() > 1 {
        table(out, &rows, 2)?;
    }
    if past_rows.0 > 0 {
        writeln!(
            out,
            "({} more {}: {} with {} process-ticks; raise `rows` to see them)",
            past_rows.0,
            if past_rows.0 == 1 { "row" } else { "rows" },
            processes_in_words(past_rows.1),
            rounded(past_rows.2)
        )?;
    }
    if left_out > 0 {
        writeln!(
            out,
            "({} with fewer than {mincount} process-ticks left out)",
            processes_in_words(left_out)
        )?;
    }
    writeln!(out)
}

/// The process-ticks in `call`.
fn by_state_call(states: &[(Option<WaitState>, f64)]) -> f64 {
    states
        .iter()
        .filter(|(s, _)| *s == Some(WaitState::Call))
        .map(|(_, w)| w)
        .sum()
}

/// The "waiting on" table: per callee, the ticks processes waited on it, their share of
/// `in_call` (the ticks in `call`), and how many processes waited; nothing when no sample
/// has a callee. At most `max_rows` rows, the rest counted in one line.
fn waiting_on(
    out: &mut dyn Write,
    by_process: &HashMap<Option<Pid>, Waits>,
    in_call: f64,
    max_rows: usize,
    callee_text: &dyn Fn(Pid) -> String,
) -> io::Result<()> {
    let mut by_callee: HashMap<Pid, (f64, usize)> = HashMap::new();
    for waits in by_process.values() {
        for (&callee, &w) in &waits.callees {
            let e = by_callee.entry(callee).or_default();
            e.0 += w;
            e.1 += 1;
        }
    }
    if by_callee.is_empty() {
        return Ok(());
    }
    let mut callees: Vec<(Pid, (f64, usize))> = by_callee.into_iter().collect();
    callees.sort_by(|a, b| (b.1).0.total_cmp(&(a.1).0).then(a.0.cmp(&b.0)));
    let mut rows: Vec<Vec<String>> = vec![vec![
        "WAITING ON".into(),
        "TICKS".into(),
        "%".into(),
        "CALLERS".into(),
    ]];
    let share = |w: f64| {
        if in_call > 0.0 {
            w * 100.0 / in_call
        } else {
            0.0
        }
    };
    for (callee, (ticks, callers)) in callees.iter().take(max_rows) {
        rows.push(vec![
            callee_text(*callee),
            rounded(*ticks).to_string(),
            two_decimals(share(*ticks)),
            callers.to_string(),
        ]);
    }
    table(out, &rows, 1)?;
    if callees.len() > max_rows {
        let rest = &callees[max_rows..];
        writeln!(
            out,
            "({} more callees with {} process-ticks; raise `rows` to see them)",
            rest.len(),
            rounded(rest.iter().map(|(_, (w, _))| w).sum())
        )?;
    }
    writeln!(out)
}

/// `n` processes, in words: `1 process`, `2 processes`.
fn processes_in_words(n: usize) -> String {
    match n {
        1 => "1 process".to_owned(),
        n => format!("{n} processes"),
    }
}

/// `rows` as columns two spaces apart, each as wide as its widest cell: the first `left`
/// left-aligned, the others right-aligned (the last column not padded when left-aligned).
fn table(out: &mut dyn Write, rows: &[Vec<String>], left: usize) -> io::Result<()> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let w = widths[c];
            if c < left {
                line.push_str(&format!("{cell:<w$}"));
            } else {
                line.push_str(&format!("{cell:>w$}"));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}
