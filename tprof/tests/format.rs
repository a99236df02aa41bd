//! `inspect` and `format`: tprof's lines, sorting and text layout, pinned by golden text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{entry, pid};
use runtime::trace::{Callsite, callsites};
use runtime::traced;
use tprof::{
    Aggregate, Column, Direction, FunctionTrace, Group, Profile, SortBy, TraceType,
    format_to_string, inspect,
};

#[traced]
fn spawn_monitor(_f: u8) {}
#[traced]
fn spawn_opt(_a: u8, _b: u8, _c: u8, _d: u8) {}
#[traced]
fn test_spawn() {}
#[traced]
fn apply(_a: u8, _b: u8) {}
#[traced]
fn seq_loop(_a: u8, _b: u8, _c: u8) {}
#[traced]
fn f() {}

fn cs(name: &str) -> &'static Callsite {
    callsites()
        .iter()
        .find(|c| c.module() == "format" && c.function() == name)
        .unwrap()
}

/// tprof's `test:test_spawn/0` example, as call_memory.
fn memory_profile() -> Profile {
    let a = Group::Process(pid("<0.176.0>"));
    let b = Group::Process(pid("<0.177.0>"));
    Profile::new(
        TraceType::CallMemory,
        vec![
            FunctionTrace {
                function: cs("spawn_monitor").into(),
                entries: vec![entry(a, 1, 2)],
            },
            FunctionTrace {
                function: cs("spawn_opt").into(),
                entries: vec![entry(a, 1, 6)],
            },
            FunctionTrace {
                function: cs("test_spawn").into(),
                entries: vec![entry(a, 1, 14)],
            },
            FunctionTrace {
                function: cs("apply").into(),
                entries: vec![entry(b, 1, 7)],
            },
            FunctionTrace {
                function: cs("seq_loop").into(),
                entries: vec![entry(b, 9, 64), entry(a, 3, 0)],
            },
        ],
    )
}

#[test]
fn per_process_memory_report_is_tprofs_layout() {
    let text = format_to_string(&inspect(
        &memory_profile(),
        Aggregate::Process,
        SortBy::default(),
    ));
    let expected = "
****** Process <0.176.0>  --  23.66% of total *** 
FUNCTION                 CALLS  WORDS  PER CALL  [    %]
format::spawn_monitor/1      1      2      2.00  [ 9.09]
format::spawn_opt/4          1      6      6.00  [27.27]
format::test_spawn/0         1     14     14.00  [63.64]
                                   22            [100.0]

****** Process <0.177.0>  --  76.34% of total *** 
FUNCTION            CALLS  WORDS  PER CALL  [    %]
format::apply/2         1      7      7.00  [ 9.86]
format::seq_loop/3      9     64      7.11  [90.14]
                              71            [100.0]
";
    assert_eq!(text, expected);
}

#[test]
fn total_report_sorted_by_measurement_descending() {
    let text = format_to_string(&inspect(
        &memory_profile(),
        Aggregate::Total,
        SortBy::descending(Column::Measurement),
    ));
    let expected = "\
FUNCTION                 CALLS  WORDS  PER CALL  [    %]
format::seq_loop/3           9     64      7.11  [68.82]
format::test_spawn/0         1     14     14.00  [15.05]
format::apply/2              1      7      7.00  [ 7.53]
format::spawn_opt/4          1      6      6.00  [ 6.45]
format::spawn_monitor/1      1      2      2.00  [ 2.15]
                                   93            [100.0]
";
    assert_eq!(text, expected);
}

#[test]
fn a_single_function_widens_percent_and_cuts_nothing() {
    let p = Profile::new(
        TraceType::CallMemory,
        vec![FunctionTrace {
            function: cs("seq_loop").into(),
            entries: vec![entry(Group::Process(pid("<0.92.0>")), 5, 32)],
        }],
    );
    let expected = "
****** Process <0.92.0>  --  100.00% of total *** 
FUNCTION            CALLS  WORDS  PER CALL  [     %]
format::seq_loop/3      5     32      6.40  [100.00]
                              32            [ 100.0]
";
    assert_eq!(
        format_to_string(&inspect(&p, Aggregate::Process, SortBy::default())),
        expected
    );
}

#[test]
fn call_count_has_one_group_and_no_value_columns() {
    let p = Profile::new(
        TraceType::CallCount,
        vec![
            FunctionTrace {
                function: cs("f").into(),
                entries: vec![entry(Group::All, 3, 3)],
            },
            FunctionTrace {
                function: cs("apply").into(),
                entries: vec![entry(Group::All, 1, 1)],
            },
        ],
    );
    let expected = "\
FUNCTION         CALLS  [    %]
format::apply/2      1  [25.00]
format::f/0          3  [75.00]
                        [100.0]
";
    assert_eq!(
        format_to_string(&inspect(&p, Aggregate::Process, SortBy::default())),
        expected
    );
}

#[test]
fn a_function_column_narrower_than_its_header_cuts_the_header_as_tprof_does() {
    // tprof prints the header with `~.Nts`, N the widest function: "FUNCTION" is cut to it.
    let group = tprof::GroupProfile {
        trace_type: TraceType::CallCount,
        total: 1,
        lines: vec![tprof::Line {
            module: "m".to_owned(),
            function: "f".to_owned(),
            arity: 0,
            calls: 1,
            measurement: 1,
            per_call: 1.0,
            percent: 100.0,
        }],
    };
    let mut out = Vec::new();
    tprof::format_group(&mut out, &group).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "FUNCTI  CALLS  [     %]\nm::f/0      1  [100.00]\n               [ 100.0]\n"
    );
}

#[test]
fn call_time_prints_microseconds_rounded_from_nanoseconds() {
    let p = Profile::new(
        TraceType::CallTime,
        vec![
            FunctionTrace {
                function: cs("f").into(),
                entries: vec![entry(Group::Process(pid("<0.1.0>")), 2, 1_499)],
            },
            FunctionTrace {
                function: cs("apply").into(),
                entries: vec![entry(Group::Process(pid("<0.1.0>")), 4, 1_000_500)],
            },
        ],
    );
    let expected = "
****** Process <0.1.0>  --  100.00% of total *** 
FUNCTION         CALLS  TIME (us)  PER CALL  [    %]
format::f/0          2          1      0.50  [ 0.10]
format::apply/2      4       1001    250.25  [99.90]
                             1002            [100.0]
";
    assert_eq!(
        format_to_string(&inspect(&p, Aggregate::Process, SortBy::default())),
        expected
    );
    // The raw data keeps nanoseconds.
    let inspected = inspect(&p, Aggregate::Process, SortBy::default());
    assert_eq!(inspected.groups.values().next().unwrap().total, 1_001_999);
}

/// A call_time report says after its tables that its times include the OS's waits when the
/// program's threads waited on the run queue for a large share of their ready time; below
/// [`tprof::RUN_QUEUE_NOTE_SHARE`], and for other trace types, it says nothing.
#[test]
fn call_time_says_when_the_os_made_the_threads_wait() {
    let profile = |trace_type: TraceType, waited_ns: u64| {
        let mut p = Profile::new(
            trace_type,
            vec![FunctionTrace {
                function: cs("f").into(),
                entries: vec![entry(Group::Process(pid("<0.1.0>")), 2, 1_500)],
            }],
        );
        p.meta.runs = vec![common::run_with_waits(6_000_000_000, waited_ns, 3)];
        format_to_string(&inspect(&p, Aggregate::Process, SortBy::default()))
    };
    let text = profile(TraceType::CallTime, 4_000_000_000);
    let note = "\nNote: the OS kept the program's threads waiting to run for 40.00% of the time \
                they were ready to (4.000 s waited, 6.000 s ran, 3 threads): call times are wall \
                time while a process is polled, so they include waits of its worker; a CPU \
                sample profile shows CPU time alone.\n";
    assert!(text.ends_with(note), "{text}");
    assert!(
        text.starts_with("\n****** Process <0.1.0>"),
        "the tables first: {text}"
    );
    // 4.76 % waited: under the line, no note.
    let quiet = profile(TraceType::CallTime, 300_000_000);
    assert!(!quiet.contains("Note:"), "{quiet}");
    assert!(!profile(TraceType::CallMemory, 4_000_000_000).contains("Note:"));
}

#[test]
fn an_empty_profile_prints_trace_is_empty() {
    let p = Profile::empty(TraceType::CallTime);
    assert_eq!(
        format_to_string(&inspect(&p, Aggregate::Process, SortBy::default())),
        "Trace is empty\n"
    );
}

#[test]
fn zero_divisors_give_zero_and_zero_word_functions_are_left_out() {
    let g = Group::Process(pid("<0.1.0>"));
    let p = Profile::new(
        TraceType::CallTime,
        vec![FunctionTrace {
            function: cs("f").into(),
            entries: vec![entry(g, 0, 0)],
        }],
    );
    let line = &inspect(&p, Aggregate::Process, SortBy::default()).groups[&g].lines[0];
    assert_eq!((line.per_call, line.percent), (0.0, 0.0));
    let memory = memory_profile();
    let a = inspect(&memory, Aggregate::Process, SortBy::default());
    let first = &a.groups[&Group::Process(pid("<0.176.0>"))];
    assert!(
        first.lines.iter().all(|l| l.function != "seq_loop"),
        "0 words: left out"
    );
    assert!(
        memory
            .function("seq_loop")
            .unwrap()
            .entries
            .iter()
            .any(|e| e.measurement == 0)
    );
}

#[test]
fn sorting_by_any_column_either_way() {
    let memory = memory_profile();
    for column in [
        Column::Module,
        Column::Function,
        Column::Calls,
        Column::Measurement,
        Column::MeasurementPerCall,
        Column::Percent,
    ] {
        for direction in [Direction::Ascending, Direction::Descending] {
            let sort = SortBy { column, direction };
            let inspected = inspect(&memory, Aggregate::Total, sort);
            let lines = &inspected.all().unwrap().lines;
            for w in lines.windows(2) {
                let ord = match column {
                    Column::Module => w[0].module.cmp(&w[1].module),
                    Column::Function => {
                        (&w[0].function, w[0].arity).cmp(&(&w[1].function, w[1].arity))
                    }
                    Column::Calls => w[0].calls.cmp(&w[1].calls),
                    Column::Measurement => w[0].measurement.cmp(&w[1].measurement),
                    Column::MeasurementPerCall => w[0].per_call.total_cmp(&w[1].per_call),
                    Column::Percent => w[0].percent.total_cmp(&w[1].percent),
                };
                match direction {
                    Direction::Ascending => assert!(ord.is_le(), "{sort:?}"),
                    Direction::Descending => assert!(ord.is_ge(), "{sort:?}"),
                }
            }
        }
    }
}

#[test]
fn call_time_totals_per_call_and_percent_follow_from_the_printed_microseconds() {
    let g = Group::Process(pid("<0.1.0>"));
    let p = Profile::new(
        TraceType::CallTime,
        vec![
            FunctionTrace {
                function: cs("f").into(),
                entries: vec![entry(g, 1, 1_400)],
            },
            FunctionTrace {
                function: cs("apply").into(),
                entries: vec![entry(g, 1, 1_400)],
            },
        ],
    );
    // Each rounds to 1 us: the total is their sum, 2 (not 2.8 rounded to 3), per call 1.00.
    let expected = "
****** Process <0.1.0>  --  100.00% of total *** 
FUNCTION         CALLS  TIME (us)  PER CALL  [    %]
format::f/0          1          1      1.00  [50.00]
format::apply/2      1          1      1.00  [50.00]
                                2            [100.0]
";
    assert_eq!(
        format_to_string(&inspect(&p, Aggregate::Process, SortBy::default())),
        expected
    );
}
