//! Exports read back: each format parsed by a real parser where one exists as a crate.

mod common;

use common::{Real, TYPES, real_profile, stack_names};
use tprof::export::{self, Format};
use tprof::{Profile, TraceType};

#[test]
fn format_names_parse_and_unknown_ones_list_the_choices() {
    for &f in Format::ALL {
        assert_eq!(f.name().parse::<Format>().unwrap(), f);
    }
    let err = "flame".parse::<Format>().unwrap_err();
    let text = err.to_string();
    assert!(text.contains("unknown format `flame`"), "{text}");
    assert!(text.contains("pretty") && text.contains("json"), "{text}");
}

#[test]
fn json_reads_back_as_the_same_profile() {
    for t in TYPES {
        let profile = real_profile(t, Real::FLAT);
        assert!(!profile.is_empty());
        let text = export::to_string(Format::Json, &profile).unwrap();
        let back: Profile = serde_json::from_str(&text).unwrap();
        assert_eq!(back, profile, "{t}");
    }
}

#[test]
fn pretty_is_the_tprof_report() {
    let profile = real_profile(TraceType::CallCount, Real::FLAT);
    let text = export::to_string(Format::Pretty, &profile).unwrap();
    let leaf = text.lines().find(|l| l.contains("leaf/1")).unwrap();
    let fields: Vec<&str> = leaf.split_whitespace().collect();
    assert_eq!(fields[0], "fixture::leaf/1");
    assert_eq!(fields[1], "6", "{text}");
    // call_count's totals row is OTP's: `[100.0]` alone, no total of calls (tprof.erl's
    // format_each prints `[" ", " ", "100.0"]` for call_count).
    let totals = text.lines().find(|l| l.ends_with("[100.0]")).unwrap();
    assert_eq!(
        totals.split_whitespace().collect::<Vec<_>>(),
        ["[100.0]"],
        "{text}"
    );
    // Only call_memory's report says its unit, words, against the exports' bytes.
    assert!(!text.contains("WORDS"), "{text}");
    let memory = export::to_string(
        Format::Pretty,
        &real_profile(TraceType::CallMemory, Real::FLAT),
    )
    .unwrap();
    assert!(
        memory.starts_with("Memory in WORDS, as tprof counts it")
            && memory
                .lines()
                .next()
                .unwrap()
                .contains("exports weigh bytes"),
        "{memory}"
    );
}

#[test]
fn call_tree_mode_gives_paths_that_sum_to_the_flat_figures() {
    let outcome = tprof::profile(
        || async {
            runtime::register("export_worker", runtime::self_pid()).unwrap();
            common::branches()
        },
        common::options(
            TraceType::CallMemory,
            Real {
                call_tree: true,
                ..Real::FLAT
            },
        ),
    )
    .unwrap();
    let profile = outcome.profile;
    assert_eq!(profile.call_tree.nodes.len(), 2, "{:?}", profile.call_tree);
    let stacks = export::stacks(&profile);
    assert_eq!(stack_names(&profile), ["branch", "branch;leaf"]);
    // branch allocates nothing of its own; leaf 8 + 16 words per branch call.
    assert_eq!((stacks[0].calls, stacks[0].measurement), (3, 0));
    assert_eq!((stacks[1].calls, stacks[1].measurement), (6, 3 * 24));
    let leaf = profile.function("leaf").unwrap();
    assert_eq!(leaf.entries[0].measurement, 72);
    assert_eq!(leaf.entries[0].calls, 6);
    // The process had ended when the profile was read: it keeps the name it had then.
    let process = &profile.processes[0];
    assert_eq!(process.name.as_deref(), Some("export_worker"));
    assert_eq!(
        profile.group_label(tprof::Group::Process(process.pid)),
        "export_worker"
    );
    assert!(
        process.initial_call.contains("call_tree_mode"),
        "{process:?}"
    );
    assert_eq!(profile.meta.runs.len(), 1);
}

#[test]
fn event_logs_come_with_the_profile_and_read_back_from_json() {
    let outcome = tprof::profile(
        || async { common::branches() },
        common::options(TraceType::CallTime, common::Real::FLAT).event_log(true),
    )
    .unwrap();
    let profile = outcome.profile;
    assert_eq!(profile.event_logs.len(), 1);
    let log = &profile.event_logs[0];
    let names: Vec<String> = log
        .events
        .iter()
        .map(|e| {
            let sign = if e.kind == tprof::EventKind::Enter {
                "+"
            } else {
                "-"
            };
            format!("{sign}{}", profile.function_table[e.function as usize].name)
        })
        .collect();
    // branches calls branch three times, each calling leaf twice.
    let one = ["+branch", "+leaf", "-leaf", "+leaf", "-leaf", "-branch"];
    assert_eq!(names, one.repeat(3));
    assert!(log.events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    let text = export::to_string(Format::Json, &profile).unwrap();
    let back: Profile = serde_json::from_str(&text).unwrap();
    assert_eq!(back.event_logs, profile.event_logs);
}

#[test]
fn figures_near_the_top_of_u64_export_without_panicking() {
    let function = tprof::Function {
        module: "big".to_owned(),
        name: "f".to_owned(),
        arity: 0,
        file: "big.rs".to_owned(),
        line: 1,
    };
    let entry = |pid| tprof::Entry {
        group: tprof::Group::Process(runtime::Pid::from_parts(1, pid, 1)),
        calls: 1 << 63,
        measurement: 1 << 63,
        bytes: 1 << 63,
        blocks: 1 << 63,
    };
    let profile = Profile::new(
        TraceType::CallMemory,
        vec![tprof::FunctionTrace {
            function,
            entries: vec![entry(1), entry(2)],
        }],
    );
    for &format in Format::ALL {
        let mut out = Vec::new();
        export::write(format, &profile, &mut out).unwrap();
        assert!(!out.is_empty(), "{format}");
    }
    let all = tprof::inspect(&profile, tprof::Aggregate::Total, tprof::SortBy::default());
    assert_eq!(all.all().unwrap().total, u64::MAX);
}

#[test]
fn json_of_an_older_tprof_reads_its_percentiles_as_every_process_together() {
    let old = r#"{"trace_type":"call_time","functions":[],"percentiles":[{"function":
        {"module":"app","name":"handle","arity":1,"file":"src/app.rs","line":3},
        "calls":4,"p50_ns":7,"p90_ns":8,"p99_ns":9,"max_ns":10}]}"#;
    let profile: Profile = serde_json::from_str(old).unwrap();
    assert_eq!(profile.percentiles[0].group, tprof::Group::All);
    assert_eq!(profile.percentiles[0].calls, 4);
}
