//! Peek's list of processes: every process, one line each, or, past a number of processes
//! ([`super::set_peek_fold_above`]), folded into groups (what they run, by registered-name
//! prefix or initial call, and their state) with counts, and the processes with the largest
//! mailboxes and heaps listed in full. Linear in the processes, but for the full list's sort
//! by pid.

use std::collections::HashMap;
use std::fmt::Write as _;

use runtime::sample::ProcessState;
use runtime::{NodeHandle, Pid};

/// The processes each top list shows in a folded listing.
const TOP: usize = 10;
/// The groups a folded listing shows, largest first.
const GROUPS: usize = 100;

/// How a process was seen by the census: its state, whom it calls, the traced path it runs or
/// is suspended in.
pub(super) struct Seen {
    pub(super) state: ProcessState,
    pub(super) callee: Option<Pid>,
    pub(super) path: Option<String>,
}

/// How the list is printed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Listing {
    /// Past this many processes, the list is folded.
    pub(super) fold_above: usize,
    /// Every process, however many.
    pub(super) full: bool,
}

/// One process's line.
struct Row {
    pid: Pid,
    name: Option<String>,
    state: Option<ProcessState>,
    callee: Option<Pid>,
    mailbox: usize,
    heap: Option<u64>,
    initial_call: String,
    path: String,
}

const HEADER: [&str; 7] = [
    "PID",
    "NAME",
    "STATE",
    "MAILBOX",
    "HEAP (bytes)",
    "INITIAL CALL",
    "IN (traced path)",
];

/// Every process of `node` with its state as `states` has it, listed or folded by `listing`.
pub(super) fn process_table(
    node: &NodeHandle,
    states: &HashMap<Pid, Seen>,
    listing: Listing,
) -> String {
    let mut rows = Vec::new();
    runtime::introspect::walk(node, |p| {
        let seen = states.get(&p.pid);
        rows.push(Row {
            pid: p.pid,
            name: p.registered_name.map(ToString::to_string),
            state: seen.map(|s| s.state),
            callee: seen.and_then(|s| s.callee),
            mailbox: p.message_queue_len,
            heap: p.heap.map(|h| h.live_bytes),
            initial_call: p.initial_call.to_owned(),
            // Else the function a call_time or call_memory session measures it in.
            path: seen
                .and_then(|s| s.path.clone())
                .or_else(|| {
                    p.current_function
                        .map(|c| format!("{}::{}", c.module(), c.written_name()))
                })
                .unwrap_or_default(),
        });
    });
    let names: HashMap<Pid, String> = rows
        .iter()
        .filter_map(|r| Some((r.pid, r.name.clone()?)))
        .collect();
    let count = rows.len();
    if listing.full || count <= listing.fold_above {
        rows.sort_unstable_by_key(|r| r.pid);
        let mut out = columns(&rows, &names);
        let _ = writeln!(out, "({count} processes)");
        return out;
    }
    folded(rows, &names, listing.fold_above)
}

/// The state as the list prints it: a call names its callee (and the callee's name).
fn state_text(row: &Row, names: &HashMap<Pid, String>) -> String {
    match (row.state, row.callee) {
        (None, _) => "-".to_owned(),
        (Some(ProcessState::Call), Some(callee)) => match names.get(&callee) {
            Some(name) => format!("call {callee} ({name})"),
            None => format!("call {callee}"),
        },
        (Some(state), _) => state.name().to_owned(),
    }
}

fn columns(rows: &[Row], names: &HashMap<Pid, String>) -> String {
    crate::table::plain_columns(
        HEADER,
        rows.iter().map(|r| {
            [
                r.pid.to_string(),
                r.name.clone().unwrap_or_default(),
                state_text(r, names),
                r.mailbox.to_string(),
                r.heap.map_or_else(|| "-".to_owned(), |h| h.to_string()),
                r.initial_call.clone(),
                r.path.clone(),
            ]
        }),
    )
}

/// What a process is grouped under: its registered name without a trailing number
/// (`worker_17` is `worker_*`), or its initial call.
fn group_of(row: &Row) -> String {
    match &row.name {
        Some(name) => {
            let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
            if prefix.len() < name.len() {
                format!("{prefix}*")
            } else {
                name.clone()
            }
        }
        None => row.initial_call.clone(),
    }
}

/// The folded list: groups with counts, then the largest mailboxes and heaps.
fn folded(mut rows: Vec<Row>, names: &HashMap<Pid, String>, fold_above: usize) -> String {
    let count = rows.len();
    let mut out = format!(
        "{count} processes, more than {fold_above}: grouped by what they run and their state \
         (tprof::peek::set_peek_full(true) or TPROF_PEEK_FULL=1 lists every one)\n"
    );
    let mut groups: HashMap<(String, &'static str), usize> = HashMap::new();
    for row in &rows {
        let state = row.state.map_or("-", ProcessState::name);
        *groups.entry((group_of(row), state)).or_default() += 1;
    }
    let mut groups: Vec<((String, &'static str), usize)> = groups.into_iter().collect();
    let shown = groups.len().min(GROUPS);
    if shown > 0 && shown < groups.len() {
        groups.select_nth_unstable_by(shown - 1, |a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }
    let rest: usize = groups[shown..].iter().map(|g| g.1).sum();
    let more = groups.len() - shown;
    groups.truncate(shown);
    groups.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out.push_str(&crate::table::plain_columns(
        ["PROCESSES", "STATE", "GROUP (NAME OR INITIAL CALL)"],
        groups
            .into_iter()
            .map(|((group, state), n)| [n.to_string(), state.to_owned(), group]),
    ));
    if more > 0 {
        let _ = writeln!(out, "... and {more} more groups of {rest} processes");
    }
    let mut listed = std::collections::HashSet::new();
    for (title, key) in [
        ("mailboxes", (|r: &Row| r.mailbox as u64) as fn(&Row) -> u64),
        ("heaps", |r: &Row| r.heap.unwrap_or(0)),
    ] {
        let top = largest(&mut rows, key);
        if top.is_empty() {
            continue;
        }
        listed.extend(top.iter().map(|r| r.pid));
        let _ = writeln!(out, "\nThe {} largest {title}:", top.len());
        out.push_str(&columns(&top, names));
        rows.extend(top);
    }
    let _ = writeln!(
        out,
        "({count} processes; {} listed, the others folded)",
        listed.len()
    );
    out
}

/// Takes out of `rows` the (at most [`TOP`]) rows whose `key` is largest and not zero,
/// largest first: one selection pass, not a sort of them all.
fn largest(rows: &mut Vec<Row>, key: fn(&Row) -> u64) -> Vec<Row> {
    let by = |a: &Row, b: &Row| key(b).cmp(&key(a)).then(a.pid.cmp(&b.pid));
    if rows.len() > TOP {
        rows.select_nth_unstable_by(TOP - 1, by);
    }
    let n = rows[..rows.len().min(TOP)]
        .iter()
        .filter(|r| key(r) > 0)
        .count();
    let mut top: Vec<Row> = rows.drain(..rows.len().min(TOP)).collect();
    top.sort_unstable_by(by);
    rows.extend(top.drain(n..));
    top
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use runtime::{Node, Pid, ProcessStatus};

    use super::Listing;

    /// 25 `worker_N` processes in `receive`, and three unnamed ones holding 1, 2 and 3
    /// messages they do not take.
    fn node_of_28() -> (Node, Vec<Pid>) {
        let node = Node::builder().worker_threads(2).build().unwrap();
        let mut all = Vec::new();
        for i in 0..25 {
            let pid = node
                .spawn(async {
                    let _: u64 = runtime::receive().await;
                })
                .unwrap();
            node.handle().register(format!("worker_{i}"), pid).unwrap();
            all.push(pid);
        }
        let mut holders = Vec::new();
        for held in 1..=3u64 {
            let pid = node
                .spawn(async {
                    let _: String = runtime::receive().await;
                })
                .unwrap();
            for n in 0..held {
                node.send(pid, n);
            }
            holders.push(pid);
            all.push(pid);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for &pid in &all {
            while node.process_info(pid).map(|i| i.status) != Some(ProcessStatus::Waiting) {
                assert!(Instant::now() < deadline, "{pid} never waited");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        (node, holders)
    }

    #[test]
    fn past_the_limit_processes_are_counted_by_group_and_the_largest_mailboxes_listed() {
        let (node, holders) = node_of_28();
        let folded = Listing {
            fold_above: 10,
            full: false,
        };
        let report = super::super::report(node.handle(), Duration::ZERO, folded);
        assert!(
            report.contains("28 processes, more than 10: grouped by what they run"),
            "{report}"
        );
        assert!(report.contains("TPROF_PEEK_FULL=1"), "{report}");
        let group = report
            .lines()
            .find(|l| l.ends_with("worker_*"))
            .unwrap_or_else(|| panic!("the workers' group: {report}"));
        let words: Vec<&str> = group.split_whitespace().collect();
        assert_eq!(words, ["25", "receive", "worker_*"], "{report}");
        // The three holders, largest mailbox first, and no other process listed.
        let top: Vec<&str> = report
            .lines()
            .skip_while(|l| !l.starts_with("The 3 largest mailboxes:"))
            .skip(2)
            .take_while(|l| l.starts_with('<'))
            .collect();
        let listed: Vec<String> = top
            .iter()
            .map(|l| l.split_whitespace().next().unwrap_or("").to_owned())
            .collect();
        let expected: Vec<String> = holders.iter().rev().map(ToString::to_string).collect();
        assert_eq!(listed, expected, "{report}");
        assert!(
            report.contains("(28 processes; 3 listed, the others folded)"),
            "{report}"
        );
        assert_eq!(report.lines().filter(|l| l.contains("worker_")).count(), 1);

        // Full: every process, one line each.
        let full = Listing {
            fold_above: 10,
            full: true,
        };
        let report = super::super::report(node.handle(), Duration::ZERO, full);
        assert_eq!(
            report.lines().filter(|l| l.contains(" worker_")).count(),
            25,
            "{report}"
        );
        assert!(report.contains("(28 processes)"), "{report}");
    }
}
