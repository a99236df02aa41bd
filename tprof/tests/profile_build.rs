//! A profile built from several snapshots whose processes do not come in pid order (the
//! nodes given last first) has each function's entries in pid order, each process once, with
//! the figures the snapshots give.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use runtime::trace::{Snapshot, SnapshotFigures, SnapshotFunction, SnapshotProcess, SnapshotTypes};
use tprof::{Group, Profile, TraceType};

const FUNCTIONS: u32 = 20;
const PROCESSES: u32 = 50;

/// A call_time snapshot of node `node`: process `k` calls the functions `i` with
/// `i % (k % 4 + 1) == 0`, each `k + i + 1` times.
fn snapshot(node: u32) -> Snapshot {
    let function = |i: u32| SnapshotFunction {
        module: "app".to_owned(),
        name: format!("f{i}"),
        arity: 0,
        file: "src/app.rs".to_owned(),
        line: i + 1,
    };
    let process = |k: u32| SnapshotProcess {
        pid: format!("<{node}.{}.0>", 100 + k),
        initial_call: "app::worker".to_owned(),
        registered_name: None,
        functions: (0..FUNCTIONS)
            .filter(|i| i % (k % 4 + 1) == 0)
            .map(|i| SnapshotFigures {
                id: i,
                calls: u64::from(k + i + 1),
                time_ns: u64::from(node * 1000 + k * 10 + i),
                ..SnapshotFigures::default()
            })
            .collect(),
        paths: Vec::new(),
        events: Vec::new(),
        events_dropped: 0,
        percentiles: Vec::new(),
    };
    Snapshot {
        types: SnapshotTypes {
            call_time: true,
            ..SnapshotTypes::default()
        },
        node,
        functions: (0..FUNCTIONS).map(function).collect(),
        processes: (0..PROCESSES).map(process).collect(),
        ..Snapshot::default()
    }
}

#[test]
fn the_entries_of_snapshots_given_out_of_pid_order_come_in_pid_order_each_process_once() {
    // Node 3 first: its pids sort after node 1's and node 2's.
    let snapshots = [snapshot(3), snapshot(1), snapshot(2), snapshot(1)];
    let profile = Profile::from_snapshots(&snapshots, TraceType::CallTime, &[]);
    // What the snapshots give, per (function, pid): calls and ns summed.
    let mut want: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for s in &snapshots {
        for p in &s.processes {
            for f in &p.functions {
                let name = s.functions[f.id as usize].name.clone();
                let e = want.entry((name, p.pid.clone())).or_default();
                e.0 += f.calls;
                e.1 += f.time_ns;
            }
        }
    }
    let mut got: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    assert_eq!(profile.functions.len(), FUNCTIONS as usize);
    for f in &profile.functions {
        let groups: Vec<Group> = f.entries.iter().map(|e| e.group).collect();
        assert!(
            groups.windows(2).all(|w| w[0] < w[1]),
            "{}: entries in group order, each once: {groups:?}",
            f.function.name
        );
        for e in &f.entries {
            let Group::Process(pid) = e.group else {
                panic!("a process's entry: {:?}", e.group);
            };
            let key = (f.function.name.clone(), pid.to_string());
            assert!(got.insert(key, (e.calls, e.measurement)).is_none());
        }
    }
    assert_eq!(got, want);
}
