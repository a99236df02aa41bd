//! The reports of our own, beside tprof's text: the `pretty` export (tprof's report, with the
//! processes named and the call tree) and [`tprof::rich_report`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{entry, function, path_entry, pid, process};
use tprof::export::{self, Format};
use tprof::{
    Aggregate, CallTree, FunctionTrace, Group, PathNode, Profile, SortBy, TraceType,
    format_to_string, inspect,
};

/// A call_memory profile with call paths, built by hand.
///
/// `worker` (`<0.1.0>`): main 10 words; main → parse 40 (2 calls); main → render 20;
/// main → render → parse 30. `<0.2.0>` (no name): parse 5, with no path.
fn tree() -> Profile {
    let table = vec![
        function("app", "main", 0, 1),
        function("app", "parse", 1, 2),
        function("app", "render", 2, 3),
    ];
    let (w, o) = (pid("<0.1.0>"), pid("<0.2.0>"));
    let node = |parent, function| PathNode { parent, function };
    let call_tree = CallTree {
        nodes: vec![
            node(None, 0),
            node(Some(0), 1),
            node(Some(0), 2),
            node(Some(2), 1),
        ],
        entries: vec![
            path_entry(Group::Process(w), 0, 1, 10),
            path_entry(Group::Process(w), 1, 2, 40),
            path_entry(Group::Process(w), 2, 1, 20),
            path_entry(Group::Process(w), 3, 1, 30),
        ],
    };
    let functions = vec![
        FunctionTrace {
            function: table[0].clone(),
            entries: vec![entry(Group::Process(w), 1, 10)],
        },
        FunctionTrace {
            function: table[1].clone(),
            entries: vec![
                entry(Group::Process(w), 3, 70),
                entry(Group::Process(o), 1, 5),
            ],
        },
        FunctionTrace {
            function: table[2].clone(),
            entries: vec![entry(Group::Process(w), 1, 20)],
        },
    ];
    let mut profile = Profile::new(TraceType::CallMemory, functions);
    profile.function_table = table;
    profile.call_tree = call_tree;
    profile.processes = vec![
        process(w, Some("worker"), "app::worker/0", 0),
        process(o, None, "app::helper/0", 0),
    ];
    profile
}

#[test]
fn pretty_names_the_processes_then_prints_tprofs_report_and_the_call_tree() {
    let profile = tree();
    let text = export::to_string(Format::Pretty, &profile).unwrap();
    let tprof = format_to_string(&inspect(&profile, Aggregate::Process, SortBy::default()));
    let legend = "\
PROCESS  NAME    INITIAL CALL
<0.1.0>  worker  app::worker/0
<0.2.0>  -       app::helper/0
";
    let tree = "
****** Call tree of process <0.1.0> worker *** 
FUNCTION          CALLS  WORDS  WITH CALLEES  [     %]
app::main/0           1     10           100  [100.00]
  app::render/2       1     20            50  [ 50.00]
    app::parse/1      1     30            30  [ 30.00]
  app::parse/1        2     40            40  [ 40.00]
                           100                [ 100.0]
";
    // call_memory's report first says its unit: words, where the exports weigh bytes.
    let unit = "Memory in WORDS, as tprof counts it (each allocation's bytes rounded up to \
                whole 8-byte words); the html, pprof, speedscope, folded and svg exports weigh \
                bytes.\n";
    assert_eq!(text, format!("{unit}{legend}{tprof}{tree}"));
    // tprof's own layout, byte for byte, in the middle.
    assert!(
        tprof.starts_with("\n****** Process <0.1.0>  --  "),
        "{tprof}"
    );
}

#[test]
fn pretty_of_call_time_prints_the_tree_in_microseconds() {
    let mut profile = tree();
    profile.trace_type = TraceType::CallTime;
    for e in &mut profile.call_tree.entries {
        e.measurement *= 1000; // ns: 10 µs, 40 µs, ...
        e.measurement += 400; // rounded down to whole µs as the flat table rounds
    }
    let text = export::to_string(Format::Pretty, &profile).unwrap();
    let tree = text.split("****** Call tree").nth(1).unwrap();
    assert!(
        tree.contains("FUNCTION          CALLS  TIME (us)  WITH CALLEES  [     %]\n"),
        "{tree}"
    );
    assert!(
        tree.contains("  app::render/2       1         20            50  [ 50.00]\n"),
        "{tree}"
    );
}

#[test]
fn pretty_of_call_count_is_tprofs_report_alone() {
    let mut profile = tree();
    profile.trace_type = TraceType::CallCount;
    profile.call_tree = CallTree::default();
    profile.processes.clear();
    for f in &mut profile.functions {
        f.entries = vec![entry(Group::All, 2, 2)];
    }
    let text = export::to_string(Format::Pretty, &profile).unwrap();
    assert_eq!(
        text,
        format_to_string(&inspect(&profile, Aggregate::Total, SortBy::default()))
    );
}

#[test]
fn rich_report_names_processes_as_the_profile_recorded_them() {
    // The processes are long gone (no node 0 runs here): their names come from the profile.
    let text = tprof::rich_report(&tree());
    assert!(!text.contains("(ended)"), "{text}");
    let summary = text.lines().find(|l| l.contains("<0.1.0>")).unwrap();
    assert!(summary.contains("worker"), "{summary}");
    assert!(summary.contains("app::worker/0"), "{summary}");
    let helper = text.lines().find(|l| l.contains("<0.2.0>")).unwrap();
    assert!(helper.contains("app::helper/0"), "{helper}");
    // Each process's table is headed by its pid and name.
    assert!(
        text.lines().any(|l| l == "<0.1.0> worker (app::worker/0)"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l == "<0.2.0> (app::helper/0)"),
        "{text}"
    );
}

/// The rich report drawn as comfy-table draws its tables: the process summary, then each
/// process's table under its heading (what `rich_report` wrote before it drew them itself).
fn rich_report_through_comfy_table(profile: &Profile) -> String {
    let sort = SortBy::descending(tprof::Column::Measurement);
    let mut out = format!(
        "{} profile\n{}\n",
        profile.trace_type,
        tprof::process_summary(profile)
    );
    let mut groups: Vec<Group> = profile.pids().into_iter().map(Group::Process).collect();
    if profile.trace_type == TraceType::CallCount
        || profile.percentiles.iter().any(|p| p.group == Group::All)
    {
        groups.insert(0, Group::All);
    }
    for group in groups {
        let heading = match group {
            Group::All => "all processes".to_owned(),
            Group::Process(pid) => {
                let record = profile.processes.iter().find(|p| p.pid == pid).unwrap();
                let name = record.name.as_ref().map(|n| format!(" {n}"));
                format!(
                    "{pid}{} ({})",
                    name.unwrap_or_default(),
                    record.initial_call
                )
            }
        };
        let table = tprof::function_table(profile, group, sort);
        out.push_str(&format!("\n{heading}\n{table}\n"));
    }
    out
}

#[test]
fn rich_report_draws_its_tables_as_comfy_table_does() {
    let memory = tree();
    let mut time = tree();
    time.trace_type = TraceType::CallTime;
    // A name wider in bytes than in columns, and percentiles of one function.
    time.processes[0].name = Some("wörker→日本".to_owned());
    time.percentiles = vec![tprof::Percentiles {
        group: Group::Process(pid("<0.1.0>")),
        function: function("app", "parse", 1, 2),
        calls: 3,
        p50_ns: 1_500,
        p90_ns: 12_345,
        p99_ns: 99_999,
        max_ns: 1_000_001,
    }];
    let mut count = tree();
    count.trace_type = TraceType::CallCount;
    for f in &mut count.functions {
        for e in &mut f.entries {
            e.group = Group::All;
        }
    }
    for profile in [memory, time, count] {
        let text = tprof::rich_report(&profile);
        assert_eq!(text, rich_report_through_comfy_table(&profile), "{text}");
    }
}
