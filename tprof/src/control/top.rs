//! `tprof top`'s table: the processes of a node, the busiest first, with the polls each made
//! since the previous refresh.
//!
//! [`Top`] keeps each process's poll count from one process list (`processes` through the
//! endpoint) to the next and lays out the first rows by a [`SortKey`]. Its cost is linear in
//! the processes, plus `rows × log rows` for the shown rows: the top rows are selected
//! (`select_nth_unstable`), not the whole list sorted, so that a refresh of 100,000 processes
//! stays quick.
//!
//! ```
//! use tprof::control::protocol::ProcessRow;
//! use tprof::control::top::{SortKey, Top};
//!
//! let row = |pid: &str, mailbox, polls| ProcessRow {
//!     pid: pid.into(),
//!     name: None,
//!     initial_call: "app::worker".into(),
//!     message_queue_len: mailbox,
//!     heap_bytes: None,
//!     state: "waiting".into(),
//!     polls,
//!     current_function: None,
//! };
//! let mut top = Top::new();
//! top.frame(vec![row("<0.1.0>", 0, 10), row("<0.2.0>", 5, 10)], SortKey::Polls, 10);
//! let frame = top.frame(vec![row("<0.1.0>", 0, 13), row("<0.2.0>", 5, 11)], SortKey::Polls, 10);
//! // Polls since the last frame: 3 and 1, the busiest first.
//! let lines: Vec<&str> = frame.lines().collect();
//! assert!(lines[2].starts_with("<0.1.0>") && lines[2].contains(" 3 "), "{frame}");
//! assert!(lines[3].starts_with("<0.2.0>"));
//! ```

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::str::FromStr;

use runtime::Pid;

use super::protocol::ProcessRow;

/// What the table is sorted by: the largest first, but `pid` and `name` in ascending order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SortKey {
    /// Polls since the previous refresh (the default).
    #[default]
    Polls,
    /// Messages waiting.
    Mailbox,
    /// Live heap bytes.
    Heap,
    /// Running, then runnable, then the others.
    State,
    /// Registered names first, by name.
    Name,
    /// By pid.
    Pid,
}

impl SortKey {
    /// Every key, in the order `tprof top`'s help lists them.
    pub const ALL: &'static [SortKey] = &[
        SortKey::Polls,
        SortKey::Mailbox,
        SortKey::Heap,
        SortKey::State,
        SortKey::Name,
        SortKey::Pid,
    ];

    /// Its name: `polls`, `mailbox`, `heap`, `state`, `name` or `pid`.
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Polls => "polls",
            SortKey::Mailbox => "mailbox",
            SortKey::Heap => "heap",
            SortKey::State => "state",
            SortKey::Name => "name",
            SortKey::Pid => "pid",
        }
    }
}

impl FromStr for SortKey {
    type Err = String;

    fn from_str(text: &str) -> Result<SortKey, String> {
        SortKey::ALL
            .iter()
            .copied()
            .find(|k| k.name() == text)
            .ok_or_else(|| {
                format!(
                    "{text:?} is not a sort key: {}",
                    SortKey::ALL
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }
}

/// The table's state from one refresh to the next: each process's polls at the last one.
#[derive(Debug, Default)]
pub struct Top {
    polls: HashMap<String, u32>,
}

/// One row with what it is sorted by.
struct Ranked {
    row: ProcessRow,
    pid: Option<Pid>,
    polls: u32,
}

impl Top {
    /// A table with no previous refresh: the first frame's polls are each process's polls so
    /// far.
    pub fn new() -> Top {
        Top::default()
    }

    /// Takes a process list in, and lays out a summary line and the first `rows` processes by
    /// `sort`, with their polls since the previous list.
    pub fn frame(&mut self, processes: Vec<ProcessRow>, sort: SortKey, rows: usize) -> String {
        let mut polls = HashMap::with_capacity(processes.len());
        let mut states: Vec<(&'static str, usize)> = ["running", "runnable", "waiting"]
            .into_iter()
            .map(|s| (s, 0))
            .collect();
        let mut ranked: Vec<Ranked> = processes
            .into_iter()
            .map(|row| {
                let since = self
                    .polls
                    .get(&row.pid)
                    .map_or(row.polls, |&before| row.polls.wrapping_sub(before));
                if let Some(count) = states.iter_mut().find(|(s, _)| *s == row.state) {
                    count.1 += 1;
                }
                polls.insert(row.pid.clone(), row.polls);
                Ranked {
                    pid: row.pid.parse().ok(),
                    row,
                    polls: since,
                }
            })
            .collect();
        self.polls = polls;
        let total = ranked.len();
        let shown = rows.min(total);
        let order = |a: &Ranked, b: &Ranked| compare(a, b, sort);
        if shown < total && shown > 0 {
            ranked.select_nth_unstable_by(shown - 1, order);
        }
        ranked.truncate(shown);
        ranked.sort_unstable_by(order);

        let mut out = format!(
            "{total} processes: {}; sorted by {}",
            states
                .iter()
                .map(|(s, n)| format!("{n} {s}"))
                .collect::<Vec<_>>()
                .join(", "),
            sort.name()
        );
        if shown < total {
            let _ = write!(out, ", the first {shown}");
        }
        out.push('\n');
        out.push_str(&crate::table::plain_columns(
            [
                "PID",
                "NAME",
                "STATE",
                "MAILBOX",
                "HEAP (bytes)",
                "POLLS",
                "IN",
                "INITIAL CALL",
            ],
            ranked.into_iter().map(|r| {
                [
                    r.row.pid,
                    r.row.name.unwrap_or_default(),
                    r.row.state,
                    r.row.message_queue_len.to_string(),
                    r.row
                        .heap_bytes
                        .map_or_else(|| "-".to_owned(), |b| b.to_string()),
                    r.polls.to_string(),
                    r.row.current_function.unwrap_or_default(),
                    r.row.initial_call,
                ]
            }),
        ));
        out
    }
}

/// `a` before `b` when it ranks higher by `sort`; ties by pid.
fn compare(a: &Ranked, b: &Ranked, sort: SortKey) -> Ordering {
    let state_rank = |r: &Ranked| match r.row.state.as_str() {
        "running" => 0,
        "runnable" => 1,
        _ => 2,
    };
    let by = match sort {
        SortKey::Polls => b.polls.cmp(&a.polls),
        SortKey::Mailbox => b.row.message_queue_len.cmp(&a.row.message_queue_len),
        SortKey::Heap => b.row.heap_bytes.cmp(&a.row.heap_bytes),
        SortKey::State => state_rank(a).cmp(&state_rank(b)),
        // Named processes first (`None` sorts last), by name.
        SortKey::Name => match (&a.row.name, &b.row.name) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        },
        SortKey::Pid => Ordering::Equal,
    };
    by.then_with(|| a.pid.cmp(&b.pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(serial: u32, mailbox: usize, heap: Option<u64>, name: Option<&str>) -> ProcessRow {
        ProcessRow {
            pid: format!("<0.{serial}.0>"),
            name: name.map(Into::into),
            initial_call: "w".into(),
            message_queue_len: mailbox,
            heap_bytes: heap,
            state: if serial.is_multiple_of(2) {
                "running"
            } else {
                "waiting"
            }
            .into(),
            polls: serial,
            current_function: None,
        }
    }

    /// The pids of a frame's rows, in order.
    fn pids(frame: &str) -> Vec<String> {
        frame
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
            .collect()
    }

    #[test]
    fn the_first_rows_by_each_key_are_the_ones_a_full_sort_puts_first() {
        let list: Vec<ProcessRow> = (1..=1000)
            .map(|i| {
                row(
                    i,
                    (i as usize * 7919) % 1000,
                    (!i.is_multiple_of(3)).then_some(u64::from(i % 17)),
                    i.is_multiple_of(100)
                        .then(|| format!("n{}", 1000 - i))
                        .as_deref(),
                )
            })
            .collect();
        for &key in SortKey::ALL {
            let frame = Top::new().frame(list.clone(), key, 10);
            let mut all: Vec<Ranked> = list
                .iter()
                .map(|r| Ranked {
                    row: r.clone(),
                    pid: r.pid.parse().ok(),
                    polls: r.polls,
                })
                .collect();
            all.sort_by(|a, b| compare(a, b, key));
            let expected: Vec<String> = all.iter().take(10).map(|r| r.row.pid.clone()).collect();
            assert_eq!(pids(&frame), expected, "{key:?}\n{frame}");
            assert!(frame.starts_with("1000 processes: 500 running"), "{frame}");
            assert!(frame.contains("the first 10"), "{frame}");
        }
        let by_mailbox = Top::new().frame(list.clone(), SortKey::Mailbox, 3);
        assert!(
            by_mailbox.lines().nth(2).unwrap().contains(" 999 "),
            "{by_mailbox}"
        );
        let by_name = Top::new().frame(list, SortKey::Name, 2);
        assert_eq!(pids(&by_name), ["<0.1000.0>", "<0.900.0>"], "n0, then n100");
    }

    #[test]
    fn polls_are_counted_since_the_previous_frame_and_wrap() {
        let mut top = Top::new();
        let mut a = row(1, 0, None, None);
        a.polls = u32::MAX - 1;
        top.frame(vec![a.clone()], SortKey::Polls, 5);
        a.polls = 3;
        let frame = top.frame(vec![a, row(2, 0, None, None)], SortKey::Polls, 5);
        // <0.1.0>: 5 polls across the wrap; <0.2.0>, new: its 2.
        assert_eq!(pids(&frame), ["<0.1.0>", "<0.2.0>"]);
        assert!(frame.lines().nth(2).unwrap().contains(" 5 "), "{frame}");
        assert!("heap".parse::<SortKey>().is_ok());
        assert!("memory".parse::<SortKey>().unwrap_err().contains("mailbox"));
    }
}
