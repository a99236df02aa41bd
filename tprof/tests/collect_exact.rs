//! Collect of many processes × many functions (issue 22) gives exactly the figures made:
//! the fast path (figures read straight into the snapshot, entries kept in pid order without
//! being read again) against known call counts, and against a slow reference over a snapshot
//! whose processes come out of order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;

use runtime::trace::{
    ProcessSpec, Snapshot, SnapshotFigures, SnapshotFunction, SnapshotProcess, SnapshotTypes,
    TracePattern,
};
use runtime::{Node, Pid, receive, self_pid, send, traced};
use tprof::{Entry, Group, Profile, ServerOptions, Tprof, TraceType};

macro_rules! functions {
    ($($name:ident)*) => {
        $(
            #[traced]
            #[inline(never)]
            fn $name(x: u64) -> u64 {
                black_box(x).wrapping_mul(31)
            }
        )*
        /// The traced functions, and their names.
        const FUNCTIONS: &[(fn(u64) -> u64, &str)] = &[$(($name, stringify!($name))),*];
    };
}

functions!(f00 f01 f02 f03 f04 f05 f06 f07 f08 f09 f10 f11 f12 f13 f14 f15);

/// How many times process `i` calls function `j`: 0 to 3, so that some processes leave some
/// functions out.
fn calls(i: usize, j: usize) -> u64 {
    ((i * 7 + j * 3) % 4) as u64
}

#[test]
fn a_collect_of_many_processes_and_functions_has_each_call_once() {
    const PROCESSES: usize = 2_000;
    let node = Node::builder().worker_threads(1).build().unwrap();
    let tprof = node
        .block_on(Tprof::start(
            &node,
            ServerOptions::new().trace_type(TraceType::CallTime),
        ))
        .unwrap();
    node.block_on(tprof.set_pattern(TracePattern::module(module_path!())))
        .unwrap();
    node.block_on(tprof.enable_trace(ProcessSpec::New, true))
        .unwrap();
    let pids: Vec<Pid> = node
        .run(async move {
            let me = self_pid();
            let mut pids = Vec::new();
            for i in 0..PROCESSES {
                let pid = runtime::spawn(async move {
                    for (j, (f, _)) in FUNCTIONS.iter().enumerate() {
                        for k in 0..calls(i, j) {
                            black_box(f(k));
                        }
                    }
                    send(me, ());
                })
                .unwrap();
                pids.push(pid);
            }
            for _ in 0..PROCESSES {
                receive::<()>().await;
            }
            pids
        })
        .unwrap();
    let profile = node.block_on(tprof.collect()).unwrap();
    node.block_on(tprof.stop()).unwrap();
    let called: Vec<usize> = (0..PROCESSES)
        .filter(|&i| (0..FUNCTIONS.len()).any(|j| calls(i, j) > 0))
        .collect();
    assert_eq!(profile.processes.len(), called.len());
    assert!(profile.processes.is_sorted_by_key(|p| p.pid));
    assert_eq!(profile.functions.len(), FUNCTIONS.len());
    for (j, (_, name)) in FUNCTIONS.iter().enumerate() {
        let trace = profile.function(name).expect(name);
        // Pid order, each process once, with its calls.
        let want: Vec<(Group, u64)> = {
            let mut want: Vec<(Group, u64)> = (0..PROCESSES)
                .filter(|&i| calls(i, j) > 0)
                .map(|i| (Group::Process(pids[i]), calls(i, j)))
                .collect();
            want.sort();
            want
        };
        let got: Vec<(Group, u64)> = trace.entries.iter().map(|e| (e.group, e.calls)).collect();
        assert_eq!(got, want, "{name}");
    }
}

/// A snapshot of `processes` processes (listed out of pid order, some twice, and the threads
/// outside processes among them) that each called some of `functions` functions.
fn shuffled_snapshot(processes: u32, functions: u32) -> Snapshot {
    let process = |k: u32| {
        // Out of pid order: a multiplicative shuffle of 0..processes, then every 5th listed
        // twice (as the snapshots of an older runtime could).
        let index = (k * 7_919) % processes;
        let pid = if index.is_multiple_of(50) {
            format!("<0.{}.0>", 1 + index / 50) // a thread outside processes
        } else {
            format!("<0.{}.1>", 100 + index)
        };
        SnapshotProcess {
            pid,
            initial_call: "app::worker".to_owned(),
            registered_name: None,
            functions: (0..functions)
                .filter(|f| !(f + index).is_multiple_of(3))
                .map(|f| SnapshotFigures {
                    id: f,
                    calls: u64::from(f % 4 + 1),
                    time_ns: u64::from(index * 10 + f),
                    ..SnapshotFigures::default()
                })
                .collect(),
            paths: Vec::new(),
            events: Vec::new(),
            events_dropped: 0,
            percentiles: Vec::new(),
        }
    };
    let mut listed: Vec<SnapshotProcess> = (0..processes).map(process).collect();
    listed.extend((0..processes).step_by(5).map(process));
    Snapshot {
        types: SnapshotTypes {
            call_time: true,
            ..SnapshotTypes::default()
        },
        node: 0,
        functions: (0..functions)
            .map(|i| SnapshotFunction {
                module: "app".to_owned(),
                name: format!("f{i}"),
                arity: 1,
                file: "src/app.rs".to_owned(),
                line: i + 1,
            })
            .collect(),
        processes: listed,
        ..Snapshot::default()
    }
}

/// The entries of each function of `snapshot`, the slow way: every figure summed into a map
/// by pid (the calls outside processes of a node's threads kept apart, as call_time does).
fn reference(snapshot: &Snapshot) -> BTreeMap<String, Vec<Entry>> {
    let mut by_function: BTreeMap<String, BTreeMap<Pid, Entry>> = BTreeMap::new();
    for process in &snapshot.processes {
        let pid: Pid = process.pid.parse().unwrap();
        for f in &process.functions {
            let name = snapshot.functions[f.id as usize].name.clone();
            let entry = by_function
                .entry(name)
                .or_default()
                .entry(pid)
                .or_insert(Entry {
                    group: Group::Process(pid),
                    calls: 0,
                    measurement: 0,
                    bytes: 0,
                    blocks: 0,
                });
            entry.calls += f.calls;
            entry.measurement += f.time_ns;
        }
    }
    by_function
        .into_iter()
        .map(|(name, entries)| (name, entries.into_values().collect()))
        .collect()
}

#[test]
fn a_profile_of_processes_out_of_order_unites_and_sorts_each_function_s_entries() {
    let snapshot = shuffled_snapshot(1_000, 40);
    let profile = Profile::from_snapshot(&snapshot, TraceType::CallTime, &[]);
    let want = reference(&snapshot);
    let got: BTreeMap<String, Vec<Entry>> = profile
        .functions
        .iter()
        .map(|f| (f.function.name.clone(), f.entries.clone()))
        .collect();
    assert_eq!(got.len(), 40);
    assert_eq!(got, want);
    // Each process recorded once (some are listed twice), in pid order.
    let distinct: std::collections::BTreeSet<Pid> = snapshot
        .processes
        .iter()
        .map(|p| p.pid.parse().unwrap())
        .collect();
    let recorded: Vec<Pid> = profile.processes.iter().map(|p| p.pid).collect();
    assert_eq!(recorded, distinct.into_iter().collect::<Vec<_>>());
}

/// The count of figures per function a snapshot carries is only a hint for sizing: a lie
/// (far too many, none, or a list of the wrong length) changes no figure, and no function is
/// given room for more than one entry per process listed.
#[test]
fn a_wrong_count_of_figures_per_function_changes_nothing_but_room() {
    let truthful = shuffled_snapshot(1_000, 40);
    let want = reference(&truthful);
    for hint in [vec![u32::MAX; 40], vec![0; 40], vec![7; 3]] {
        let snapshot = Snapshot {
            figures_per_function: hint.clone(),
            ..truthful.clone()
        };
        let profile = Profile::from_snapshot(&snapshot, TraceType::CallTime, &[]);
        let got: BTreeMap<String, Vec<Entry>> = profile
            .functions
            .iter()
            .map(|f| (f.function.name.clone(), f.entries.clone()))
            .collect();
        assert_eq!(got, want, "hint {:?}", &hint[..3]);
        for f in &profile.functions {
            assert!(
                f.entries.capacity() <= snapshot.processes.len(),
                "{}: room for {} entries from a hint of {}",
                f.function.name,
                f.entries.capacity(),
                hint[0]
            );
        }
    }
}

/// A function whose every figure is zero (nothing to report) gets no trace, even where the
/// snapshot's count says figures name it.
#[test]
fn a_function_with_only_zero_figures_gets_no_trace_whatever_the_count_says() {
    let mut snapshot = shuffled_snapshot(100, 4);
    for process in &mut snapshot.processes {
        for f in process.functions.iter_mut().filter(|f| f.id == 2) {
            *f = SnapshotFigures {
                id: 2,
                ..SnapshotFigures::default()
            };
        }
    }
    snapshot.figures_per_function = vec![100; 4];
    let profile = Profile::from_snapshot(&snapshot, TraceType::CallTime, &[]);
    let names: Vec<&str> = profile.functions.iter().map(|f| f.function()).collect();
    assert_eq!(names, ["f0", "f1", "f3"]);
}

/// A snapshot counts, per function, the processes whose figures name it, as it is written.
#[test]
fn a_snapshot_counts_the_figures_of_each_function() {
    const PROCESSES: usize = 300;
    let node = Node::builder().worker_threads(1).build().unwrap();
    let session = node
        .handle()
        .trace_session_with(runtime::trace::TraceTypes::CALL_TIME)
        .unwrap();
    session
        .set_pattern(&TracePattern::module(module_path!()))
        .unwrap();
    session.enable_trace(ProcessSpec::New, true).unwrap();
    node.run(async move {
        let me = self_pid();
        for i in 0..PROCESSES {
            runtime::spawn(async move {
                for (j, (f, _)) in FUNCTIONS.iter().enumerate() {
                    for k in 0..calls(i, j) {
                        black_box(f(k));
                    }
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
    let snapshot = session.snapshot();
    assert_eq!(
        snapshot.figures_per_function.len(),
        snapshot.functions.len()
    );
    for (id, function) in snapshot.functions.iter().enumerate() {
        let j = FUNCTIONS
            .iter()
            .position(|(_, name)| *name == function.name)
            .expect("one of the test's functions");
        let want = (0..PROCESSES).filter(|&i| calls(i, j) > 0).count();
        let listed = snapshot
            .processes
            .iter()
            .filter(|p| p.functions.iter().any(|f| f.id as usize == id))
            .count();
        assert_eq!(listed, want, "{}", function.name);
        assert_eq!(
            snapshot.figures_per_function[id] as usize, want,
            "{}",
            function.name
        );
    }
}
