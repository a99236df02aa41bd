//! `tprof top`'s table: the processes of a node, the busiest first, with the polls each made
//! since the previous refresh.
//!
//! [`snapshot`] is the endpoint's side (the `top` command): one walk of the node's processes
//! keeping each one's sort key, a selection of the first `rows` (`select_nth_unstable`: linear,
//! then `rows × log rows` to order them), and the full rows read for those alone; so a refresh
//! of 100,000 processes sends a screenful, not the whole table. The poll counts of each walk
//! are kept under the client's baseline number, for the next refresh's "polls since". [`render`]
//! is the client's side: the frame as text.
//!
//! ```
//! use tprof::control::top::{SortKey, render, snapshot};
//!
//! let node = runtime::Node::new().unwrap();
//! for queued in [3u32, 1, 2] {
//!     let pid = node
//!         .handle()
//!         .spawn(async { let _: String = runtime::receive().await; })
//!         .unwrap();
//!     for m in 0..queued {
//!         node.handle().send(pid, m);
//!     }
//! }
//! let frame = snapshot(node.handle(), SortKey::Mailbox, 2, 42);
//! assert_eq!(frame.total, 3);
//! let mailboxes: Vec<usize> = frame.rows.iter().map(|r| r.message_queue_len).collect();
//! assert_eq!(mailboxes, [3, 2]);
//! assert!(render(&frame).starts_with("3 processes"));
//! ```

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Mutex;

use runtime::sample::ProcessState;
use runtime::{Name, NodeHandle, Pid};
use serde::{Deserialize, Serialize};

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

/// One refresh: the first processes by a key, and how many there are in each state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopFrame {
    /// The node's processes.
    pub total: usize,
    /// How many are in each state (`running`, `runnable`, `receive`, `receive (timer)`,
    /// `call`, `waiting`, `exiting`), in that order.
    pub states: Vec<(String, usize)>,
    /// The key's name.
    pub sort: String,
    /// The first processes by the key; their `polls` are those since the previous refresh.
    pub rows: Vec<ProcessRow>,
    /// The node's processes (shown or not) that a session measures (a sample session,
    /// call_time or call_memory) but whose current poll (running) or last one (suspended)
    /// began before any did: what they run or
    /// wait in (the IN column) is unknown ([`ProcessRow::polled_before_sampling`]).
    #[serde(default)]
    pub before_sampling: usize,
}

/// `module::function/arity`, as the process lists name the function a process is in.
pub(crate) fn function_name(callsite: &runtime::trace::Callsite) -> String {
    format!(
        "{}::{}/{}",
        callsite.module(),
        callsite.written_name(),
        callsite.arity()
    )
}

/// The states [`TopFrame::states`] counts, in its order (the order a sort by state gives).
const STATES: [ProcessState; 7] = ProcessState::ALL;

/// One process as a walk read it, with what it may be sorted by.
#[derive(Clone, Debug)]
struct Ranked {
    pid: Pid,
    polls: u32,
    mailbox: usize,
    heap: Option<u64>,
    /// Its index in [`STATES`].
    state: usize,
    /// Whom it calls, in a call.
    callee: Option<Pid>,
    name: Option<Name>,
    /// Measured by a session from a poll begun before it ([`TopFrame::before_sampling`]).
    before_sampling: bool,
}

/// The poll counts of the last walks, by the client's baseline number, the most recent last.
static BASELINES: Mutex<Vec<(u64, HashMap<Pid, u32>)>> = Mutex::new(Vec::new());

/// How many baselines are kept (each holds a count per process).
const BASELINES_KEPT: usize = 4;

/// The first `rows` processes of `node` by `sort`, their polls counted since the previous
/// snapshot under `baseline` (since they started, for the first).
pub fn snapshot(node: &NodeHandle, sort: SortKey, rows: usize, baseline: u64) -> TopFrame {
    let before = {
        let mut kept = BASELINES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.iter()
            .position(|(id, _)| *id == baseline)
            .map(|at| kept.remove(at).1)
            .unwrap_or_default()
    };
    let mut now = HashMap::with_capacity(before.len());
    let mut ranked = Vec::with_capacity(before.len());
    let mut states = [0; STATES.len()];
    let mut before_sampling = 0;
    runtime::introspect::walk(node, |p| {
        before_sampling += usize::from(p.polled_before_sampling);
        now.insert(p.pid, p.polls);
        let state = STATES.iter().position(|s| *s == p.state).unwrap_or(0);
        states[state] += 1;
        ranked.push(Ranked {
            pid: p.pid,
            polls: before
                .get(&p.pid)
                .map_or(p.polls, |&b| p.polls.wrapping_sub(b)),
            mailbox: p.message_queue_len,
            heap: p.heap.map(|h| h.live_bytes),
            state,
            callee: p.callee,
            name: p.registered_name.cloned(),
            before_sampling: p.polled_before_sampling,
        });
    });
    {
        let mut kept = BASELINES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.push((baseline, now));
        if kept.len() > BASELINES_KEPT {
            kept.remove(0);
        }
    }
    let total = ranked.len();
    let first = select(ranked, sort, rows);
    TopFrame {
        total,
        states: STATES
            .iter()
            .zip(states)
            .map(|(s, n)| (s.name().to_owned(), n))
            .collect(),
        sort: sort.name().to_owned(),
        rows: first
            .into_iter()
            .filter_map(|r| {
                // Gone since the walk: left out.
                let info = node.process_info(r.pid)?;
                Some(ProcessRow {
                    pid: r.pid.to_string(),
                    name: r.name.map(|n| n.to_string()),
                    initial_call: info.initial_call.into_owned(),
                    message_queue_len: r.mailbox,
                    heap_bytes: r.heap,
                    state: STATES[r.state].name().to_owned(),
                    callee: r.callee.map(|c| c.to_string()),
                    callee_name: r
                        .callee
                        .and_then(|c| node.process_info(c)?.registered_name)
                        .map(|n| n.to_string()),
                    polls: r.polls,
                    current_function: info.current_function.map(function_name),
                    polled_before_sampling: r.before_sampling,
                })
            })
            .collect(),
        before_sampling,
    }
}

/// The first `rows` of `ranked` by `sort`, in order.
fn select(mut ranked: Vec<Ranked>, sort: SortKey, rows: usize) -> Vec<Ranked> {
    let shown = rows.min(ranked.len());
    let order = |a: &Ranked, b: &Ranked| compare(a, b, sort);
    if shown < ranked.len() && shown > 0 {
        ranked.select_nth_unstable_by(shown - 1, order);
    }
    ranked.truncate(shown);
    ranked.sort_unstable_by(order);
    ranked
}

/// `a` before `b` when it ranks higher by `sort`; ties by pid.
fn compare(a: &Ranked, b: &Ranked, sort: SortKey) -> Ordering {
    let by = match sort {
        SortKey::Polls => b.polls.cmp(&a.polls),
        SortKey::Mailbox => b.mailbox.cmp(&a.mailbox),
        SortKey::Heap => b.heap.cmp(&a.heap),
        SortKey::State => a.state.cmp(&b.state),
        // Named processes first (`None` sorts last), by name.
        SortKey::Name => match (&a.name, &b.name) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        },
        SortKey::Pid => Ordering::Equal,
    };
    by.then_with(|| a.pid.cmp(&b.pid))
}

/// The frame as `tprof top` prints it: a summary line, then the rows under their header.
pub fn render(frame: &TopFrame) -> String {
    let mut out = format!(
        "{} processes: {}; sorted by {}",
        frame.total,
        frame
            .states
            .iter()
            // Running and runnable always; the others when some process is in them.
            .filter(|(s, n)| *n > 0 || s == "running" || s == "runnable")
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", "),
        frame.sort
    );
    if frame.rows.len() < frame.total {
        let _ = write!(out, ", the first {}", frame.rows.len());
    }
    out.push('\n');
    out.push_str(&process_table(
        [
            ProcessColumn::Pid,
            ProcessColumn::Name,
            ProcessColumn::State,
            ProcessColumn::Mailbox,
            ProcessColumn::Heap,
            ProcessColumn::Polls,
            ProcessColumn::In,
            ProcessColumn::InitialCall,
        ],
        &frame.rows,
    ));
    if frame.before_sampling > 0 {
        let _ = writeln!(
            out,
            "{} {} sampled in a poll begun before sampling began: what {} or {} in (IN) \
             is unknown until {} next poll (open the session, sample, call_time or call_memory, \
             before the work begins to see a long loop's)",
            frame.before_sampling,
            if frame.before_sampling == 1 {
                "process"
            } else {
                "processes"
            },
            if frame.before_sampling == 1 {
                "it runs"
            } else {
                "they run"
            },
            if frame.before_sampling == 1 {
                "waits"
            } else {
                "wait"
            },
            if frame.before_sampling == 1 {
                "its"
            } else {
                "their"
            },
        );
    }
    out
}

/// The IN column of a process whose current or last poll began before sampling began.
const UNKNOWN_BEFORE_SAMPLING: &str = "? (polled before sampling)";

/// A column of the node's process tables (`tprof top`'s, and the `processes` reply's): its
/// header and what it shows of a row, defined once so that the tables agree on both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcessColumn {
    /// The pid.
    Pid,
    /// The registered name, if any.
    Name,
    /// The state, with whom it waits for ([`ProcessRow::state_text`]).
    State,
    /// The messages queued.
    Mailbox,
    /// The heap in bytes, `-` where unknown.
    Heap,
    /// The polls counted.
    Polls,
    /// The function it is in, if known; `?` with why when its poll began before sampling did.
    In,
    /// What it was spawned to run.
    InitialCall,
}

impl ProcessColumn {
    /// The column's header.
    fn header(self) -> &'static str {
        match self {
            ProcessColumn::Pid => "PID",
            ProcessColumn::Name => "NAME",
            ProcessColumn::State => "STATE",
            ProcessColumn::Mailbox => "MAILBOX",
            ProcessColumn::Heap => "HEAP (bytes)",
            ProcessColumn::Polls => "POLLS",
            ProcessColumn::In => "IN",
            ProcessColumn::InitialCall => "INITIAL CALL",
        }
    }

    /// What the column shows of `row`.
    fn cell(self, row: &ProcessRow) -> String {
        match self {
            ProcessColumn::Pid => row.pid.clone(),
            ProcessColumn::Name => row.name.clone().unwrap_or_default(),
            ProcessColumn::State => row.state_text(),
            ProcessColumn::Mailbox => row.message_queue_len.to_string(),
            ProcessColumn::Heap => row
                .heap_bytes
                .map_or_else(|| "-".to_owned(), |b| b.to_string()),
            ProcessColumn::Polls => row.polls.to_string(),
            ProcessColumn::In => match &row.current_function {
                Some(function) => function.clone(),
                None if row.polled_before_sampling => UNKNOWN_BEFORE_SAMPLING.to_owned(),
                None => String::new(),
            },
            ProcessColumn::InitialCall => row.initial_call.clone(),
        }
    }
}

/// `rows` as a plain table of `columns`, in that order.
pub(crate) fn process_table<const N: usize>(
    columns: [ProcessColumn; N],
    rows: &[ProcessRow],
) -> String {
    crate::table::plain_columns(
        columns.map(ProcessColumn::header),
        rows.iter().map(|row| columns.map(|c| c.cell(row))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(serial: u32) -> Ranked {
        Ranked {
            pid: format!("<0.{serial}.0>").parse().unwrap(),
            polls: (serial * 31) % 97,
            mailbox: (serial as usize * 7919) % 1000,
            heap: (!serial.is_multiple_of(3)).then_some(u64::from(serial % 17)),
            state: (serial % 3) as usize,
            callee: None,
            before_sampling: false,
            name: serial
                .is_multiple_of(100)
                .then(|| Name::from(format!("n{}", 1000 - serial))),
        }
    }

    #[test]
    fn the_first_rows_by_each_key_are_the_ones_a_full_sort_puts_first() {
        let all: Vec<Ranked> = (1..=1000).map(ranked).collect();
        for &key in SortKey::ALL {
            let first: Vec<Pid> = select(all.clone(), key, 10).iter().map(|r| r.pid).collect();
            let mut sorted = all.clone();
            sorted.sort_by(|a, b| compare(a, b, key));
            let expected: Vec<Pid> = sorted.iter().take(10).map(|r| r.pid).collect();
            assert_eq!(first, expected, "{key:?}");
        }
        let by_name = select(all.clone(), SortKey::Name, 2);
        assert_eq!(by_name[0].name.as_deref(), Some("n0"));
        assert_eq!(by_name[1].name.as_deref(), Some("n100"));
        assert_eq!(select(all.clone(), SortKey::Mailbox, 1)[0].mailbox, 999);
        assert_eq!(select(all, SortKey::Pid, 2000).len(), 1000);
        assert!("heap".parse::<SortKey>().is_ok());
        assert!("memory".parse::<SortKey>().unwrap_err().contains("mailbox"));
    }

    #[test]
    fn polls_are_counted_since_the_previous_snapshot_of_the_same_baseline() {
        let node = runtime::Node::new().unwrap();
        let echo = node
            .handle()
            .spawn(async {
                loop {
                    let (from, n): (Pid, u32) = runtime::receive().await;
                    runtime::send(from, n);
                }
            })
            .unwrap();
        let ping = |times: u32| {
            node.run(async move {
                for n in 0..times {
                    runtime::send(echo, (runtime::self_pid(), n));
                    let _: u32 = runtime::receive().await;
                }
            })
            .unwrap();
        };
        let polls = |frame: &TopFrame| {
            frame
                .rows
                .iter()
                .find(|r| r.pid == echo.to_string())
                .map(|r| r.polls)
        };
        ping(3);
        let first = snapshot(node.handle(), SortKey::Polls, 10, 7001);
        let first = polls(&first).unwrap_or_else(|| panic!("echo listed: {first:?}"));
        assert!(first >= 1, "since it started");
        ping(5);
        let second = snapshot(node.handle(), SortKey::Polls, 10, 7001);
        // At least one poll since the first snapshot, and at most one per message (a message
        // that arrives while the echo is being polled is taken in the same poll, so fewer is
        // possible; a wake while it runs may add one more poll).
        let since = polls(&second).unwrap();
        assert!((1..=6).contains(&since), "{second:?}");
        assert_eq!(second.rows[0].pid, echo.to_string(), "the busiest first");
        // Another baseline counts from its own start: everything before the first snapshot
        // and everything since it, which the first baseline no longer counts.
        let other = snapshot(node.handle(), SortKey::Polls, 10, 7002);
        let total = polls(&other).unwrap();
        assert!(
            total >= first + since,
            "{first} + {since} > {total}: {other:?}"
        );
        let text = render(&second);
        assert!(
            text.starts_with("1 processes: 0 running, 0 runnable, 1 receive"),
            "{text}"
        );
    }
}
