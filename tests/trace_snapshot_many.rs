//! A snapshot of many processes, each with many functions and paths, gives the figures that
//! `measurements` and `call_tree` give (the snapshot reads both in one walk over the
//! processes: this checks that walk against the two reads it stands for).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use runtime::trace::{ProcessSpec, Snapshot, TracePattern, TraceSession, TraceTypes};
use runtime::{Node, receive, self_pid, send, traced};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

const PROCESSES: u64 = 300;

#[traced]
fn leaf(i: u64) -> u64 {
    std::hint::black_box(vec![0u8; 8 * (i as usize % 5 + 1)]).len() as u64
}

#[traced]
fn branch(i: u64) -> u64 {
    leaf(i) + if i.is_multiple_of(3) { leaf(i + 1) } else { 0 }
}

#[traced]
fn deep(depth: u64) -> u64 {
    if depth == 0 {
        leaf(depth)
    } else {
        deep(depth - 1) + 1
    }
}

#[traced]
fn top(i: u64) -> u64 {
    branch(i) + deep(i % 4)
}

/// Runs `PROCESSES` processes, each calling a mix of the functions that depends on its
/// index (so that processes differ in functions, paths and figures), under `types`.
fn session(types: TraceTypes) -> (Node, TraceSession) {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let s = node.trace_session_with(types).unwrap();
    s.set_pattern(&TracePattern::module(module_path!()))
        .unwrap();
    s.enable_trace(ProcessSpec::New, true).unwrap();
    node.run(async move {
        let me = self_pid();
        for i in 0..PROCESSES {
            runtime::spawn(async move {
                if i % 7 != 0 {
                    std::hint::black_box(top(i));
                }
                if i.is_multiple_of(2) {
                    std::hint::black_box(branch(i));
                }
                if i % 5 == 1 {
                    std::hint::black_box(leaf(i));
                }
                send(me, ());
            })
            .unwrap();
        }
        for _ in 0..PROCESSES {
            receive::<()>().await;
        }
    })
    .unwrap();
    (node, s)
}

/// Per process (pid as it prints): per function (name, figures) in the snapshot's order, and
/// per path (its functions from the outermost, figures) in the snapshot's order.
type Figures = (u64, u64, u64, u64, u64);
type PerProcess = Vec<(String, Vec<(String, Figures)>, Vec<(Vec<String>, Figures)>)>;

fn from_snapshot(s: &Snapshot) -> PerProcess {
    let name = |id: u32| s.functions[id as usize].name.clone();
    let stack = |mut at: Option<u32>| {
        let mut out = Vec::new();
        while let Some(p) = at {
            let path = s.paths[p as usize];
            out.push(name(path.function));
            at = path.parent;
        }
        out.reverse();
        out
    };
    s.processes
        .iter()
        .map(|p| {
            let figures = |f: &runtime::trace::SnapshotFigures| {
                (f.calls, f.time_ns, f.words, f.bytes, f.blocks)
            };
            (
                p.pid.clone(),
                p.functions
                    .iter()
                    .map(|f| (name(f.id), figures(f)))
                    .collect(),
                p.paths
                    .iter()
                    .map(|f| (stack(Some(f.id)), figures(f)))
                    .collect(),
            )
        })
        .collect()
}

/// The same, read the way snapshots were built before: `measurements`, then `call_tree`.
fn reference(s: &TraceSession) -> PerProcess {
    let tree = s.call_tree();
    let mut processes: Vec<_> = s.measurements();
    processes.sort_by_key(|p| p.pid);
    processes
        .iter()
        .map(|p| {
            let paths = tree
                .processes
                .iter()
                .find(|t| t.pid == p.pid)
                .map(|t| {
                    t.paths
                        .iter()
                        .map(|m| {
                            let stack = tree.stack(m.path);
                            (
                                stack.iter().map(|c| c.function().to_owned()).collect(),
                                (m.calls, m.time_ns, m.words, m.bytes, m.blocks),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            (
                p.pid.to_string(),
                p.functions
                    .iter()
                    .map(|f| {
                        (
                            f.callsite.function().to_owned(),
                            (f.calls, f.time_ns, f.words, f.bytes, f.blocks),
                        )
                    })
                    .collect(),
                paths,
            )
        })
        .collect()
}

fn assert_snapshot_matches(types: TraceTypes) {
    let (_node, s) = session(types);
    let snapshot = s.snapshot();
    let got = from_snapshot(&snapshot);
    let want = reference(&s);
    // Those that made a traced call (the spawner makes none).
    let calling = (0..PROCESSES)
        .filter(|i| i % 7 != 0 || i.is_multiple_of(2) || i % 5 == 1)
        .count();
    assert_eq!(got.len(), calling);
    let functions: usize = got.iter().map(|p| p.1.len()).sum();
    assert!(functions > 2 * PROCESSES as usize, "{functions} functions");
    if types.contains(TraceTypes::CALL_TREE) {
        let paths: usize = got.iter().map(|p| p.2.len()).sum();
        assert!(paths > functions, "{paths} paths, {functions} functions");
        assert!(
            got.iter()
                .any(|p| p.2.iter().any(|(stack, _)| stack.len() >= 5))
        );
    } else {
        assert!(got.iter().all(|p| p.2.is_empty()));
    }
    assert_eq!(got, want);
}

#[test]
fn a_call_tree_snapshot_of_many_processes_gives_the_measured_figures() {
    assert_snapshot_matches(
        TraceTypes::CALL_MEMORY | TraceTypes::CALL_TIME | TraceTypes::CALL_TREE,
    );
}

#[test]
fn a_flat_snapshot_of_many_processes_gives_the_measured_figures() {
    assert_snapshot_matches(TraceTypes::CALL_MEMORY | TraceTypes::CALL_TIME);
}
