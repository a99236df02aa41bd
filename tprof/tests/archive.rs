//! Merging the runs of several profiles.

use runtime::Pid;
use runtime::trace::TracePattern;
use tprof::archive::{self, MergeError, Merger};
use tprof::{
    CallTree, Entry, Function, FunctionTrace, Group, Meta, PathEntry, PathNode, Percentiles,
    ProcessRecord, Profile, ProfileOptions, Report, Run, TraceType,
};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

#[runtime::traced(module = "archive_test")]
fn leaf(n: u64) -> Vec<u64> {
    (0..n).collect()
}

#[runtime::traced(module = "archive_test")]
fn branch(n: u64) -> usize {
    leaf(n).len() + leaf(n * 2).len()
}

/// A real profile of `trace_type` (call_time with percentiles): a process calling `branch`
/// three times.
fn real_profile(trace_type: TraceType) -> Profile {
    let outcome = tprof::profile(
        || async {
            let mut total = 0;
            for _ in 0..3 {
                total += branch(8);
            }
            total
        },
        ProfileOptions::new()
            .trace_type(trace_type)
            .percentiles(trace_type == TraceType::CallTime)
            .pattern(TracePattern::module("archive_test"))
            .report(Report::Return),
    )
    .expect("the profiled function runs");
    assert_eq!(outcome.result, Ok(72));
    outcome.profile
}

fn function(module: &str, name: &str, arity: u8, file: &str, line: u32) -> Function {
    Function {
        module: module.to_owned(),
        name: name.to_owned(),
        arity,
        file: file.to_owned(),
        line,
    }
}

fn entry(group: Group, calls: u64, measurement: u64) -> Entry {
    Entry {
        group,
        calls,
        measurement,
        bytes: 0,
        blocks: 0,
    }
}

fn process(pid: Pid, name: Option<&str>, run: u32) -> ProcessRecord {
    ProcessRecord {
        pid,
        name: name.map(str::to_owned),
        initial_call: "app::worker/1".to_owned(),
        run,
    }
}

fn path_entry(group: Group, node: u32, calls: u64, measurement: u64) -> PathEntry {
    PathEntry {
        group,
        node,
        calls,
        measurement,
        bytes: 0,
        blocks: 0,
    }
}

/// A profile with every part of the model, two runs, unicode names, and the largest values
/// the fields take.
fn fixture_profile() -> Profile {
    let p1 = Pid::from_parts(1, 0, 1);
    let p2 = Pid::from_parts(1, 2, 0);
    let p3 = Pid::from_parts(2, 1, 3);
    let parse = function("app::parse", "parse", 1, "src/parse.rs", 10);
    let handle = function("app", "<Handler as Service>::call", 2, "src/app.rs", 42);
    let unicode = function(
        "ünïcødé::модуль",
        "método_🚀",
        255,
        "src/日本語.rs",
        u32::MAX,
    );
    let only_in_tree = function("app", "helper", 0, "src/app.rs", 7);
    Profile {
        trace_type: TraceType::CallTime,
        functions: vec![
            FunctionTrace {
                function: handle.clone(),
                entries: vec![
                    entry(Group::Process(p1), 3, 3_000),
                    entry(Group::Process(p3), 1, 900),
                ],
            },
            FunctionTrace {
                function: parse.clone(),
                entries: vec![
                    entry(Group::Process(p1), 7, 70),
                    entry(Group::Process(p2), 1, u64::MAX),
                ],
            },
            FunctionTrace {
                function: unicode.clone(),
                entries: vec![entry(Group::Process(p2), 0, 0)],
            },
        ],
        percentiles: vec![
            Percentiles {
                function: handle.clone(),
                calls: 4,
                p50_ns: 700,
                p90_ns: 900,
                p99_ns: 990,
                max_ns: 1_000,
            },
            Percentiles {
                function: parse.clone(),
                calls: 8,
                p50_ns: 9,
                p90_ns: 10,
                p99_ns: 11,
                max_ns: u64::MAX,
            },
        ],
        processes: vec![
            process(p1, Some("worker"), 0),
            process(p2, None, 0),
            process(p3, Some("日本語の名前"), 1),
        ],
        function_table: vec![handle, parse, only_in_tree, unicode],
        call_tree: CallTree {
            nodes: vec![
                PathNode {
                    parent: None,
                    function: 0,
                },
                PathNode {
                    parent: Some(0),
                    function: 1,
                },
                PathNode {
                    parent: Some(1),
                    function: 2,
                },
                PathNode {
                    parent: None,
                    function: 3,
                },
            ],
            entries: vec![
                path_entry(Group::Process(p1), 0, 3, 2_930),
                path_entry(Group::Process(p1), 1, 7, 60),
                path_entry(Group::Process(p1), 2, 7, 10),
                path_entry(Group::Process(p2), 3, 1, 5),
            ],
        },
        meta: Meta {
            runs: vec![
                Run {
                    program: "demo --jobs 4".to_owned(),
                    started_unix_ms: 1_700_000_000_000,
                    duration_ns: 1_234_567_890,
                    nodes: vec![1],
                },
                Run {
                    program: "ünïcødé run".to_owned(),
                    started_unix_ms: 0,
                    duration_ns: 0,
                    nodes: vec![2, u32::MAX],
                },
            ],
        },
    }
}

// --- Merging ---

/// `profile` as a program that ran it alone would have it: its processes on node 1.
fn as_run_alone(mut profile: Profile) -> Profile {
    let alone = |pid: Pid| Pid::from_parts(1, pid.index(), pid.serial());
    for f in &mut profile.functions {
        for e in &mut f.entries {
            if let Group::Process(pid) = e.group {
                e.group = Group::Process(alone(pid));
            }
        }
    }
    for p in &mut profile.processes {
        p.pid = alone(p.pid);
    }
    profile
}

#[test]
fn two_call_time_runs_keep_their_processes_apart() {
    let a = as_run_alone(real_profile(TraceType::CallTime));
    let b = as_run_alone(real_profile(TraceType::CallTime));
    assert_eq!(a.pids(), b.pids(), "the runs' pids overlap");
    let merged = archive::merge(&[a.clone(), b.clone()]).unwrap();

    assert_eq!(merged.meta.runs.len(), 2);
    assert_eq!(
        merged.processes.len(),
        a.processes.len() + b.processes.len()
    );
    let runs: Vec<u32> = merged.processes.iter().map(|p| p.run).collect();
    assert!(runs.contains(&0) && runs.contains(&1), "{runs:?}");
    let pids = merged.pids();
    assert_eq!(pids.len(), a.pids().len() + b.pids().len(), "{pids:?}");
    for p in &merged.processes {
        assert_eq!(merged.meta.runs[p.run as usize].nodes, vec![p.pid.node()]);
    }
    assert_eq!(
        merged.meta.runs[0].nodes,
        vec![1],
        "the first run keeps its node"
    );
    assert_ne!(merged.meta.runs[1].nodes, vec![1]);

    // Each process's figures are its run's own.
    let leaf = merged.function("leaf").unwrap();
    assert_eq!(leaf.entries.len(), 2);
    assert!(leaf.entries.iter().all(|e| e.calls == 6), "{leaf:?}");
    assert_eq!(merged.total(), a.total() + b.total());
    assert_eq!(merged.percentiles.len(), a.percentiles.len());
    for p in &merged.percentiles {
        let calls = |profile: &Profile| {
            let q = profile
                .percentiles
                .iter()
                .find(|q| q.function == p.function);
            q.unwrap().calls
        };
        assert_eq!(p.calls, calls(&a) + calls(&b), "{p:?}");
    }
}

#[test]
fn call_count_sums_per_function_across_runs() {
    let a = real_profile(TraceType::CallCount);
    let b = real_profile(TraceType::CallCount);
    let merged = archive::merge(&[a, b]).unwrap();
    let calls = |name| {
        let f = merged.function(name).unwrap();
        assert_eq!(f.entries.len(), 1);
        assert_eq!(f.entries[0].group, Group::All);
        f.entries[0].calls
    };
    assert_eq!(calls("leaf"), 12);
    assert_eq!(calls("branch"), 6);
    assert_eq!(merged.meta.runs.len(), 2);
}

#[test]
fn mixed_trace_types_are_an_error_naming_both() {
    let count = Profile::empty(TraceType::CallCount);
    let time = Profile::empty(TraceType::CallTime);
    let err = archive::merge(&[count.clone(), count.clone(), time]).unwrap_err();
    assert_eq!(
        err,
        MergeError::MixedTypes {
            first: TraceType::CallCount,
            other: TraceType::CallTime,
            index: 2
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("call_count") && text.contains("call_time"),
        "{text}"
    );
    assert!(text.contains("input 3"), "{text}");
    assert_eq!(archive::merge(&[]).unwrap_err(), MergeError::Empty);
}

/// A call-time profile of one run, on node 1, with a call tree of `paths` (each a list of
/// function names, outermost first) in which process `<1.0.1>` spent `ns` on each.
fn tree_profile(table: &[&str], paths: &[&[&str]], ns: u64) -> Profile {
    let pid = Pid::from_parts(1, 0, 1);
    let function_table: Vec<Function> = table
        .iter()
        .map(|name| function("app", name, 0, "src/app.rs", 1))
        .collect();
    let mut nodes: Vec<PathNode> = Vec::new();
    let mut entries = Vec::new();
    for path in paths {
        let mut parent = None;
        for name in *path {
            let f = table
                .iter()
                .position(|n| n == name)
                .expect("a path names functions of the table") as u32;
            let at = match nodes
                .iter()
                .position(|n| n.parent == parent && n.function == f)
            {
                Some(at) => at,
                None => {
                    nodes.push(PathNode {
                        parent,
                        function: f,
                    });
                    nodes.len() - 1
                }
            };
            parent = Some(at as u32);
        }
        entries.push(path_entry(
            Group::Process(pid),
            parent.expect("a path is not empty"),
            1,
            ns,
        ));
    }
    let mut profile = Profile::empty(TraceType::CallTime);
    profile.function_table = function_table;
    profile.call_tree = CallTree { nodes, entries };
    profile.processes = vec![process(pid, None, 0)];
    profile
}

/// A call path as its functions' names, with its entries' (pid, ns).
type NamedPath = (Vec<String>, Vec<(Pid, u64)>);

/// Each path of `profile` as names, with its entries' (pid, ns).
fn paths(profile: &Profile) -> Vec<NamedPath> {
    let tree = &profile.call_tree;
    (0..tree.nodes.len() as u32)
        .map(|node| {
            let names = tree
                .stack(node)
                .into_iter()
                .map(|f| profile.function_table[f as usize].name.clone())
                .collect();
            let figures = tree
                .entries
                .iter()
                .filter(|e| e.node == node)
                .map(|e| match e.group {
                    Group::Process(pid) => (pid, e.measurement),
                    Group::All => panic!("call_time has no `all`"),
                })
                .collect();
            (names, figures)
        })
        .collect()
}

#[test]
fn call_paths_that_runs_share_are_one_node() {
    let a = tree_profile(&["main", "parse"], &[&["main", "parse"]], 10);
    let b = tree_profile(
        &["parse", "main", "write"],
        &[&["main", "parse"], &["main", "write"]],
        20,
    );
    let merged = archive::merge(&[a, b]).unwrap();
    let names: Vec<&str> = merged
        .function_table
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["main", "parse", "write"]);
    let first = Pid::from_parts(1, 0, 1);
    let second = merged.processes[1].pid;
    assert_ne!(first, second);
    assert_eq!(
        paths(&merged),
        vec![
            (vec!["main".to_owned()], vec![]),
            (
                vec!["main".to_owned(), "parse".to_owned()],
                vec![(first, 10), (second, 20)]
            ),
            (
                vec!["main".to_owned(), "write".to_owned()],
                vec![(second, 20)]
            ),
        ]
    );
    // Parents come before their children, and entries by process then path.
    let tree = &merged.call_tree;
    assert!(
        tree.nodes
            .iter()
            .enumerate()
            .all(|(i, n)| n.parent.is_none_or(|p| (p as usize) < i))
    );
    assert!(tree.entries.is_sorted_by_key(|e| (e.group, e.node)));
}

#[test]
fn percentiles_after_a_merge_are_a_calls_weighted_choice() {
    let f = function("app", "handle", 1, "src/app.rs", 3);
    let with = |calls, p50_ns, p90_ns, p99_ns, max_ns| {
        let mut p = Profile::empty(TraceType::CallTime);
        p.percentiles = vec![Percentiles {
            function: f.clone(),
            calls,
            p50_ns,
            p90_ns,
            p99_ns,
            max_ns,
        }];
        p
    };
    let merged = archive::merge(&[with(100, 10, 20, 30, 40), with(300, 50, 60, 70, 90)]).unwrap();
    assert_eq!(merged.percentiles.len(), 1);
    let p = &merged.percentiles[0];
    assert_eq!((p.calls, p.max_ns), (400, 90));
    assert_eq!((p.p50_ns, p.p90_ns, p.p99_ns), (50, 60, 70));

    let merged = archive::merge(&[with(900, 10, 20, 30, 40), with(100, 50, 60, 70, 90)]).unwrap();
    let p = &merged.percentiles[0];
    assert_eq!(
        (p.calls, p.p50_ns, p.p90_ns, p.p99_ns, p.max_ns),
        (1000, 10, 20, 70, 90)
    );
}

#[test]
fn merging_one_profile_returns_it_unchanged() {
    let profile = fixture_profile();
    assert_eq!(
        archive::merge(std::slice::from_ref(&profile)).unwrap(),
        profile
    );
    assert_eq!(Merger::new(profile.clone()).finish(), profile);
}

#[test]
fn a_merger_adds_one_input_at_a_time_and_goes_on_after_a_refused_one() {
    let input = |node: u32| {
        let mut p = fixture_profile();
        p.meta.runs.truncate(1);
        p.processes.retain(|r| r.run == 0);
        let pid = Pid::from_parts(node, 0, 1);
        p.processes[0].pid = pid;
        p
    };
    let all = [input(1), input(1), input(7)];
    let mut merger = Merger::new(all[0].clone());
    merger.add(all[1].clone()).unwrap();
    let mut bad = input(1);
    bad.processes[0].run = 4;
    let err = merger.add(bad).unwrap_err();
    assert!(
        matches!(&err, MergeError::Inconsistent { index: 2, what } if what.contains("run 4")),
        "{err}"
    );
    assert!(merger.add(Profile::empty(TraceType::CallMemory)).is_err());
    merger.add(all[2].clone()).unwrap();
    assert_eq!(merger.inputs(), 3);
    let merged = merger.finish();
    assert_eq!(merged, archive::merge(&all).unwrap());
    assert_eq!(merged.meta.runs.len(), 3);
    // Three runs, each on its own nodes: the first keeps 1 (and 2, which its pids name).
    let nodes: Vec<&Vec<u32>> = merged.meta.runs.iter().map(|r| &r.nodes).collect();
    assert_eq!(nodes[0], &vec![1, 2]);
    let mut every: Vec<u32> = nodes.iter().flat_map(|n| n.iter().copied()).collect();
    let len = every.len();
    every.sort_unstable();
    every.dedup();
    assert_eq!(every.len(), len, "no node is in two runs: {nodes:?}");
}

#[test]
fn inconsistent_inputs_are_refused_naming_what_is_wrong() {
    let mut p = fixture_profile();
    p.call_tree.nodes[1].function = 99;
    let err = archive::merge(&[fixture_profile(), p]).unwrap_err();
    assert!(
        matches!(&err, MergeError::Inconsistent { index: 1, what } if what.contains("function 99")),
        "{err}"
    );
    assert!(
        err.to_string().starts_with("cannot merge input 2:"),
        "{err}"
    );
}
