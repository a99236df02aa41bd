//! Sample mode's text reports, on hand-built sample sets: Julia's `Profile.print` tree and
//! flat list, each option's effect, `callers`, the wall summary, dropped and missing samples.
//! Every expected text is the whole report, line for line.

mod common;

use common::samples::{Build, cpu_profile, plumbed_profile, wall_profile};
use tprof::sample_report::{self, GroupBy, PrintOptions, Recur, ReportFormat, SortedBy, callers};
use tprof::samples::{SamplerKind, WaitState};
use tprof::{Profile, TraceType};

/// CPU samples of one process over `seconds` on one thread at 100 Hz: of traced functions
/// `app::NAME/0`, each in `NAME.rs` at line 1, on `stacks` (indices into `names`, outermost
/// first), each with its weight.
fn paths(seconds: u64, names: &[&str], stacks: &[(&[usize], f64)]) -> Profile {
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, seconds, 0.0);
    let t = b.thread(1, None);
    let frames: Vec<u32> = names
        .iter()
        .map(|n| b.traced(n, &format!("{n}.rs"), 1))
        .collect();
    for (path, weight) in stacks {
        let path: Vec<u32> = path.iter().map(|&i| frames[i]).collect();
        let s = b.stack(&path);
        b.cpu(Some("<0.5.0>"), t, s, *weight);
    }
    b.profile
}

fn report(profile: &Profile, options: &PrintOptions) -> String {
    let mut out = Vec::new();
    sample_report::print(&mut out, profile, options).expect("printed");
    String::from_utf8(out).expect("utf-8")
}

/// Lines of text, each ended by a newline.
fn lines(lines: &[&str]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn the_tree_is_julia_s_with_overhead_guides_and_totals() {
    let text = report(&cpu_profile(), &PrintOptions::default());
    // 12 periods of 10 ms over 1 s on 2 threads: 6%.
    assert_eq!(
        text,
        lines(&[
            "Overhead ╎ [+additional indent] Count File:Line; Function",
            "=========================================================",
            "1╎10 src/main.rs:1; app::main/0",
            "2╎ 2  src/parse.rs:20; app::parse/0",
            "1╎ 7  src/serve.rs:10; app::serve/0",
            "2╎  6  src/parse.rs:20; app::parse/0",
            "4╎   4  src/sum.rs:5; app::checksum",
            "2╎2  [unknown stackframe]",
            "Total snapshots: 12. Utilization: 6% across all threads and processes. Use the \
             `groupby` option to break down by thread and/or process.",
        ])
    );
}

#[test]
fn the_flat_list_is_julia_s_counting_each_frame_once_per_sample() {
    let text = report(
        &cpu_profile(),
        &PrintOptions::new().format(ReportFormat::Flat),
    );
    assert_eq!(
        text,
        lines(&[
            " Count  Overhead File          Line Function",
            " =====  ======== ====          ==== ========",
            "    10         1 src/main.rs      1 app::main/0",
            "     8         4 src/parse.rs    20 app::parse/0",
            "     7         1 src/serve.rs    10 app::serve/0",
            "     4         4 src/sum.rs       5 app::checksum",
            "     2         2 [any unknown stackframes]",
            "Total snapshots: 12. Utilization: 6% across all threads and processes. Use the \
             `groupby` option to break down by thread and/or process.",
        ])
    );
}

const ACROSS: &str = "across all threads and processes. Use the `groupby` option to break down \
                      by thread and/or process.";

#[test]
fn maxdepth_leaves_out_lines_deeper_than_it_the_outermost_being_at_depth_0() {
    let profile = cpu_profile();
    let text = report(&profile, &PrintOptions::new().maxdepth(0));
    assert_eq!(
        text,
        lines(&[
            "Overhead ╎ [+additional indent] Count File:Line; Function",
            "=========================================================",
            "1╎10 src/main.rs:1; app::main/0",
            "2╎2  [unknown stackframe]",
            &format!("Total snapshots: 12. Utilization: 6% {ACROSS}"),
        ])
    );
    let text = report(&profile, &PrintOptions::new().maxdepth(1));
    assert_eq!(
        text.lines().skip(2).collect::<Vec<_>>(),
        [
            "1╎10 src/main.rs:1; app::main/0",
            "2╎ 2  src/parse.rs:20; app::parse/0",
            "1╎ 7  src/serve.rs:10; app::serve/0",
            "2╎2  [unknown stackframe]",
            &format!("Total snapshots: 12. Utilization: 6% {ACROSS}"),
        ]
    );
}

#[test]
fn mincount_leaves_out_lightter_lines_and_what_is_below_them() {
    let profile = cpu_profile();
    let text = report(&profile, &PrintOptions::new().mincount(3.0));
    assert_eq!(
        text.lines().skip(2).collect::<Vec<_>>(),
        [
            "1╎10 src/main.rs:1; app::main/0",
            "1╎ 7  src/serve.rs:10; app::serve/0",
            "2╎  6  src/parse.rs:20; app::parse/0",
            "4╎   4  src/sum.rs:5; app::checksum",
            &format!("Total snapshots: 12. Utilization: 6% {ACROSS}"),
        ]
    );
    let text = report(
        &profile,
        &PrintOptions::new().format(ReportFormat::Flat).mincount(5.0),
    );
    assert_eq!(
        text.lines().skip(2).collect::<Vec<_>>(),
        [
            "    10         1 src/main.rs      1 app::main/0",
            "     8         4 src/parse.rs    20 app::parse/0",
            "     7         1 src/serve.rs    10 app::serve/0",
            &format!("Total snapshots: 12. Utilization: 6% {ACROSS}"),
        ]
    );
}

/// a (100) calls b (20), c (21) and d (59); d calls f (15) and g (16); e (1) runs alone.
fn noisy_profile() -> Profile {
    paths(
        10,
        &["a", "b", "c", "d", "e", "f", "g"],
        &[
            (&[0, 1], 20.0),
            (&[0, 2], 21.0),
            (&[0, 3], 28.0),
            (&[0, 3, 5], 15.0),
            (&[0, 3, 6], 16.0),
            (&[4], 1.0),
        ],
    )
}

#[test]
fn noisefloor_hides_a_line_of_n_when_n_is_at_most_noisefloor_times_the_root_of_its_parent_s() {
    let profile = noisy_profile();
    let all = report(&profile, &PrintOptions::new());
    assert_eq!(
        all.lines().skip(2).collect::<Vec<_>>(),
        [
            "  ╎100 a.rs:1; app::a/0",
            "20╎ 20  b.rs:1; app::b/0",
            "21╎ 21  c.rs:1; app::c/0",
            "28╎ 59  d.rs:1; app::d/0",
            "15╎  15  f.rs:1; app::f/0",
            "16╎  16  g.rs:1; app::g/0",
            " 1╎1   e.rs:1; app::e/0",
            "Total snapshots: 101. Utilization: 10% across all threads and processes. Use the \
             `groupby` option to break down by thread and/or process.",
        ]
    );
    // Under a (100): 2 × √100 = 20 hides b (20), keeps c (21). Under d (59): 2 × √59 = 15.4
    // hides f (15), keeps g (16). e (1) is at depth 0: kept.
    let floored = report(&profile, &PrintOptions::new().noisefloor(2.0));
    assert_eq!(
        floored.lines().skip(2).collect::<Vec<_>>(),
        [
            "  ╎100 a.rs:1; app::a/0",
            "21╎ 21  c.rs:1; app::c/0",
            "28╎ 59  d.rs:1; app::d/0",
            "16╎  16  g.rs:1; app::g/0",
            " 1╎1   e.rs:1; app::e/0",
            "Total snapshots: 101. Utilization: 10% across all threads and processes. Use the \
             `groupby` option to break down by thread and/or process.",
        ]
    );
}

#[test]
fn sortedby_orders_siblings_and_the_flat_list_the_heaviest_last_as_julia() {
    let profile = cpu_profile();
    let text = report(&profile, &PrintOptions::new().sortedby(SortedBy::Count));
    assert_eq!(
        text.lines().skip(2).take(6).collect::<Vec<_>>(),
        [
            "2╎2  [unknown stackframe]",
            "1╎10 src/main.rs:1; app::main/0",
            "2╎ 2  src/parse.rs:20; app::parse/0",
            "1╎ 7  src/serve.rs:10; app::serve/0",
            "2╎  6  src/parse.rs:20; app::parse/0",
            "4╎   4  src/sum.rs:5; app::checksum",
        ]
    );
    let text = report(&profile, &PrintOptions::new().sortedby(SortedBy::Overhead));
    assert_eq!(
        text.lines().skip(2).take(6).collect::<Vec<_>>(),
        [
            "1╎10 src/main.rs:1; app::main/0",
            "1╎ 7  src/serve.rs:10; app::serve/0",
            "2╎  6  src/parse.rs:20; app::parse/0",
            "4╎   4  src/sum.rs:5; app::checksum",
            "2╎ 2  src/parse.rs:20; app::parse/0",
            "2╎2  [unknown stackframe]",
        ]
    );
    let flat = PrintOptions::new().format(ReportFormat::Flat);
    let text = report(&profile, &flat.clone().sortedby(SortedBy::Count));
    assert_eq!(
        text.lines().skip(2).take(5).collect::<Vec<_>>(),
        [
            "     2         2 [any unknown stackframes]",
            "     4         4 src/sum.rs       5 app::checksum",
            "     7         1 src/serve.rs    10 app::serve/0",
            "     8         4 src/parse.rs    20 app::parse/0",
            "    10         1 src/main.rs      1 app::main/0",
        ]
    );
    // By name rather than by file: zeta (in a.rs) and alpha (in b.rs) swap.
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, 1, 0.0);
    let t = b.thread(1, None);
    let zeta = b.traced("zeta", "a.rs", 1);
    let alpha = b.traced("alpha", "b.rs", 1);
    for f in [zeta, alpha] {
        let s = b.stack(&[f]);
        b.cpu(Some("<0.5.0>"), t, s, 1.0);
    }
    let names = |sortedby| -> Vec<String> {
        report(&b.profile, &flat.clone().sortedby(sortedby))
            .lines()
            .skip(2)
            .take(2)
            .map(|l| l.split(' ').next_back().unwrap_or("").to_owned())
            .collect()
    };
    assert_eq!(
        names(SortedBy::FileFuncLine),
        ["app::zeta/0", "app::alpha/0"]
    );
    assert_eq!(names(SortedBy::Name), ["app::alpha/0", "app::zeta/0"]);
}

#[test]
fn groupby_thread_prints_each_thread_s_tree_under_its_totals() {
    let text = report(
        &cpu_profile(),
        &PrintOptions::new().groupby(GroupBy::Thread),
    );
    // Thread 101: 9 periods of 10 ms in 1 s; thread 102: 3.
    assert_eq!(
        text,
        lines(&[
            "Overhead ╎ [+additional indent] Count File:Line; Function",
            "=========================================================",
            "Thread 101 (node-worker) Total snapshots: 9. Utilization: 9%",
            "1╎9 src/main.rs:1; app::main/0",
            "2╎ 2 src/parse.rs:20; app::parse/0",
            " ╎ 6 src/serve.rs:10; app::serve/0",
            "2╎  6 src/parse.rs:20; app::parse/0",
            "4╎   4 src/sum.rs:5; app::checksum",
            "",
            "Thread 102 (node-worker) Total snapshots: 3. Utilization: 3%",
            " ╎1 src/main.rs:1; app::main/0",
            "1╎ 1 src/serve.rs:10; app::serve/0",
            "2╎2 [unknown stackframe]",
            "",
        ])
    );
}

#[test]
fn groupby_process_prints_each_process_and_the_time_outside_processes() {
    let text = report(
        &cpu_profile(),
        &PrintOptions::new().groupby(GroupBy::Process),
    );
    let heads: Vec<&str> = text.lines().filter(|l| !l.contains('╎')).collect();
    assert_eq!(
        heads,
        [
            "=========================================================",
            "Process <0.5.0> (server) Total snapshots: 9. Utilization: 9%",
            "",
            "Process <0.6.0> Total snapshots: 1. Utilization: 1%",
            "",
            "Outside processes Total snapshots: 2. Utilization: 2%",
            "",
        ]
    );
    let process = lines(&[
        "Process <0.6.0> Total snapshots: 1. Utilization: 1%",
        " ╎1 src/main.rs:1; app::main/0",
        "1╎ 1 src/serve.rs:10; app::serve/0",
        "",
    ]);
    assert!(text.contains(&process), "{text}");
}

#[test]
fn nested_groups_share_a_line_or_sit_under_their_outer_group() {
    let profile = cpu_profile();
    let text = report(
        &profile,
        &PrintOptions::new().groupby(GroupBy::ProcessThread),
    );
    let heads: Vec<&str> = text.lines().filter(|l| !l.contains('╎')).collect();
    assert_eq!(
        heads[1..],
        [
            "Process <0.5.0> (server) Thread 101 (node-worker) Total snapshots: 9. Utilization: 9%",
            "",
            "Process <0.6.0> Thread 102 (node-worker) Total snapshots: 1. Utilization: 1%",
            "",
            "Outside processes Thread 102 (node-worker) Total snapshots: 2. Utilization: 2%",
            "",
        ]
    );
    let text = report(
        &profile,
        &PrintOptions::new().groupby(GroupBy::ThreadProcess),
    );
    let heads: Vec<&str> = text.lines().filter(|l| !l.contains('╎')).collect();
    assert_eq!(
        heads[1..],
        [
            "Thread 101 (node-worker) Process <0.5.0> (server) Total snapshots: 9. Utilization: 9%",
            "",
            "Thread 102 (node-worker)",
            " Process <0.6.0> Total snapshots: 1. Utilization: 1%",
            "",
            " Outside processes Total snapshots: 2. Utilization: 2%",
            "",
        ]
    );
}

/// a > b > a > b > c (3), a > b > a (2), a (1).
fn recursive_profile() -> Profile {
    paths(
        1,
        &["a", "b", "c"],
        &[(&[0, 1, 0, 1, 2], 3.0), (&[0, 1, 0], 2.0), (&[0], 1.0)],
    )
}

#[test]
fn recur_flat_folds_a_recursive_stack_into_the_frames_above() {
    let profile = recursive_profile();
    let off = report(&profile, &PrintOptions::new());
    assert_eq!(
        off.lines().skip(2).collect::<Vec<_>>(),
        [
            "1╎6 a.rs:1; app::a/0",
            " ╎ 5 b.rs:1; app::b/0",
            "2╎  5 a.rs:1; app::a/0",
            " ╎   3 b.rs:1; app::b/0",
            "3╎    3 c.rs:1; app::c/0",
            &format!("Total snapshots: 6. Utilization: 6% {ACROSS}"),
        ]
    );
    // a counts each sample once; the second a's samples end in the first a.
    let flat = report(&profile, &PrintOptions::new().recur(Recur::Flat));
    assert_eq!(
        flat.lines().skip(2).collect::<Vec<_>>(),
        [
            "3╎6 a.rs:1; app::a/0",
            " ╎ 5 b.rs:1; app::b/0",
            "3╎  3 c.rs:1; app::c/0",
            &format!("Total snapshots: 6. Utilization: 6% {ACROSS}"),
        ]
    );
    // The flat list counts a recurring frame once per sample, recur or not.
    let list = report(&profile, &PrintOptions::new().format(ReportFormat::Flat));
    assert_eq!(
        list.lines().skip(2).take(3).collect::<Vec<_>>(),
        [
            "     6         3 a.rs       1 app::a/0",
            "     5         0 b.rs       1 app::b/0",
            "     3         3 c.rs       1 app::c/0",
        ]
    );
}

#[test]
fn combine_off_shows_each_address_apart() {
    let text = report(&cpu_profile(), &PrintOptions::new().combine(false));
    assert_eq!(
        text.lines().skip(2).take(8).collect::<Vec<_>>(),
        [
            "1╎10 src/main.rs:1; app::main/0",
            "2╎ 2  src/parse.rs:20; app::parse/0",
            "1╎ 7  src/serve.rs:10; app::serve/0",
            "2╎  6  src/parse.rs:20; app::parse/0",
            "3╎   3  src/sum.rs:5; 0x0000000000000010 app::checksum",
            "1╎   1  src/sum.rs:5; 0x0000000000000014 app::checksum",
            "2╎2  [unknown function] (pointer: 0x0000000000000099)",
            &format!("Total snapshots: 12. Utilization: 6% {ACROSS}"),
        ]
    );
    let flat = report(
        &cpu_profile(),
        &PrintOptions::new()
            .combine(false)
            .format(ReportFormat::Flat),
    );
    assert!(
        flat.contains("     1         1 src/sum.rs       5 0x0000000000000014 app::checksum\n")
            && flat.contains("     2         2 @0x0000000000000099\n"),
        "{flat}"
    );
}

#[test]
fn native_off_counts_samples_at_their_innermost_traced_frame() {
    let profile = cpu_profile();
    let text = report(&profile, &PrintOptions::new().native(false));
    assert_eq!(
        text.lines().skip(2).collect::<Vec<_>>(),
        [
            "1╎10 src/main.rs:1; app::main/0",
            "2╎ 2  src/parse.rs:20; app::parse/0",
            "1╎ 7  src/serve.rs:10; app::serve/0",
            "6╎  6  src/parse.rs:20; app::parse/0",
            // The 2 samples outside processes ran no traced frame.
            "2╎2  [hidden frames]",
            &format!("Total snapshots: 12. Utilization: 6% {ACROSS}"),
        ]
    );
    let flat = report(
        &profile,
        &PrintOptions::new().native(false).format(ReportFormat::Flat),
    );
    assert_eq!(
        flat.lines().skip(2).collect::<Vec<_>>(),
        [
            "    10         1 src/main.rs      1 app::main/0",
            "     8         8 src/parse.rs    20 app::parse/0",
            "     7         1 src/serve.rs    10 app::serve/0",
            "     2         2                    [hidden frames]",
            &format!("Total snapshots: 12. Utilization: 6% {ACROSS}"),
        ]
    );
    // Grouped, the time outside processes has no traced frame to show: its samples count on
    // a line of their own (they printed nothing, under a warning that none were collected).
    let grouped = report(
        &profile,
        &PrintOptions::new().native(false).groupby(GroupBy::Process),
    );
    assert!(
        grouped.ends_with(
            "Outside processes Total snapshots: 2. Utilization: 2%\n\
             2╎2 [hidden frames]\n\n"
        ),
        "{grouped}"
    );
    assert!(!grouped.contains("Warning"), "{grouped}");
}

#[test]
fn a_width_cuts_deep_indentation_to_plus_n_and_long_names() {
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, 1, 0.0);
    let t = b.thread(1, None);
    let mut path = vec![b.traced(
        "a_function_with_a_very_long_name",
        "src/a/very/long/path/to/f.rs",
        1,
    )];
    for i in 1..8 {
        path.push(b.traced(&format!("f{i}"), "f.rs", i + 1));
    }
    let s = b.stack(&path);
    b.cpu(Some("<0.5.0>"), t, s, 1.0);
    let text = report(&b.profile, &PrintOptions::new().width(10));
    assert_eq!(
        text.lines().skip(2).take(8).collect::<Vec<_>>(),
        [
            " ╎1 ...h/to/f.rs:1; app::a_function...",
            " ╎ 1 f.rs:2; app::f1/0",
            " ╎  1 f.rs:3; app::f2/0",
            " ╎   1 f.rs:4; app::f3/0",
            " ╎    1 f.rs:5; app::f4/0",
            " ╎     1 f.rs:6; app::f5/0",
            " ╎  +1 1 f.rs:7; app::f6/0",
            "1╎  +2 1 f.rs:8; app::f7/0",
        ]
    );
    // No width: nothing cut.
    let text = report(&b.profile, &PrintOptions::new());
    assert!(
        text.contains(
            " ╎1 src/a/very/long/path/to/f.rs:1; app::a_function_with_a_very_long_name/0\n"
        )
    );
    assert!(text.contains("1╎    ╎  1 f.rs:8; app::f7/0\n"), "{text}");
}

#[test]
fn callers_counts_who_called_a_function_once_per_call() {
    let profile = cpu_profile();
    let who = |name: &str, options: &PrintOptions| -> Vec<(f64, String)> {
        callers(&profile, name, options)
            .into_iter()
            .map(|c| (c.count, c.function))
            .collect()
    };
    let all = PrintOptions::new();
    assert_eq!(
        who("parse", &all),
        [
            (6.0, "app::serve/0".to_owned()),
            (2.0, "app::main/0".to_owned())
        ]
    );
    assert_eq!(who("app::parse/0", &all), who("app::parse", &all));
    assert_eq!(who("checksum", &all), [(4.0, "app::parse/0".to_owned())]);
    assert_eq!(who("main", &all), []);
    assert_eq!(who("checksum", &PrintOptions::new().native(false)), []);
    // In a recursion, each call counts: b is called by a twice in the 3 samples of the
    // deepest stack.
    let profile = recursive_profile();
    let counts: Vec<(f64, String)> = callers(&profile, "b", &all)
        .into_iter()
        .map(|c| (c.count, c.function))
        .collect();
    assert_eq!(counts, [(8.0, "app::a/0".to_owned())]);
    let c = &callers(&profile, "a", &all)[0];
    assert_eq!(
        (c.count, c.file.as_deref(), c.line),
        (5.0, Some("b.rs"), Some(1))
    );
}

#[test]
fn a_wall_report_starts_with_where_processes_wait() {
    let text = report(&wall_profile(0.0), &PrintOptions::new());
    // Utilization: running 2 of 11 process-ticks.
    assert_eq!(
        text,
        lines(&[
            "Where processes wait: 11 process-ticks of 3 processes (wall samples)",
            "STATE    TICKS      %",
            "receive      8  72.73",
            "running      2  18.18",
            "call         1   9.09",
            "",
            "PROCESS  NAME    TICKS  receive  running    call  MAILBOX",
            "<0.5.0>  server      8    75.00    25.00       -        4",
            "<0.6.0>  -           2   100.00        -       -        0",
            "<0.7.0>  -           1        -        -  100.00        0",
            "",
            "Overhead ╎ [+additional indent] Count File:Line; Function",
            "=========================================================",
            "1╎1  src/client.rs:1; app::client/0",
            "2╎2  src/idle.rs:1; app::idle/0",
            "6╎8  src/server.rs:1; app::server_loop/0",
            "2╎ 2  src/server.rs:9; app::handle/0",
            &format!("Total snapshots: 11. Utilization: 18% {ACROSS}"),
        ])
    );
    // Per process, utilization is its running share; mincount leaves light processes out of
    // the summary too.
    let text = report(
        &wall_profile(0.0),
        &PrintOptions::new()
            .groupby(GroupBy::Process)
            .mincount(2.0)
            .format(ReportFormat::Flat),
    );
    assert!(
        text.contains(&lines(&[
            "<0.6.0>  -           2   100.00        -     -        0",
            "(1 process with fewer than 2 process-ticks left out)",
            "",
        ])),
        "{text}"
    );
    assert!(
        text.contains(&lines(&[
            "Process <0.5.0> (server) Total snapshots: 8. Utilization: 25%",
            " Count  Overhead File           Line Function",
            " =====  ======== ====           ==== ========",
            "     2         2 src/server.rs     9 app::handle/0",
            "     8         6 src/server.rs     1 app::server_loop/0",
            "",
            "Process <0.6.0> Total snapshots: 2. Utilization: 0%",
        ])),
        "{text}"
    );
}

#[test]
fn a_wall_report_says_whom_processes_in_a_call_wait_on() {
    // The client <0.7.0> waits on the server <0.5.0>, and a second client <0.8.0> (3 ticks)
    // on it and, once, on <0.6.0>.
    let mut profile = wall_profile(0.0);
    let server: runtime::Pid = "<0.5.0>".parse().unwrap();
    let idle: runtime::Pid = "<0.6.0>".parse().unwrap();
    let mut call = profile.samples.samples[3].clone();
    profile.samples.samples[3].callee = Some(server);
    call.pid = Some("<0.8.0>".parse().unwrap());
    for (callee, weight) in [(server, 2.0), (idle, 1.0)] {
        profile.samples.samples.push(tprof::samples::SampleRecord {
            callee: Some(callee),
            weight,
            ..call.clone()
        });
    }
    let text = report(&profile, &PrintOptions::new());
    assert!(
        text.starts_with(&lines(&[
            "Where processes wait: 14 process-ticks of 4 processes (wall samples)",
            "STATE    TICKS      %",
            "receive      8  57.14",
            "call         4  28.57",
            "running      2  14.29",
            "",
            "WAITING ON        TICKS      %  CALLERS",
            "<0.5.0> (server)      3  75.00        2",
            "<0.6.0>               1  25.00        1",
            "",
            "PROCESS  NAME    TICKS  receive    call  running  MAILBOX           WAITING ON",
            "<0.5.0>  server      8    75.00       -    25.00        4                    -",
            "<0.8.0>  -           3        -  100.00        -        0  <0.5.0> (server) +1",
            "<0.6.0>  -           2   100.00       -        -        0                    -",
            "<0.7.0>  -           1        -  100.00        -        0     <0.5.0> (server)",
            "",
        ])),
        "{text}"
    );
    // The archive keeps whom they waited on.
    let mut bytes = Vec::new();
    tprof::archive::write(&profile, &mut bytes).unwrap();
    let read = tprof::archive::read(&mut bytes.as_slice()).unwrap();
    assert_eq!(read.samples.samples, profile.samples.samples);
}

#[test]
fn a_wall_report_counts_only_ticks_in_call_as_waiting_on_a_callee() {
    // <0.7.0> waits in a call on the server for 1 tick, then is runnable for 3 ticks with its
    // call's callee still recorded (the reply arrived; it waits for a thread, not the server):
    // those ticks are runnable, not waiting on the server, and the shares stay within 100%.
    let mut profile = wall_profile(0.0);
    let server: runtime::Pid = "<0.5.0>".parse().unwrap();
    profile.samples.samples[3].callee = Some(server);
    let woken = tprof::samples::SampleRecord {
        state: Some(tprof::samples::WaitState::Runnable),
        weight: 3.0,
        ..profile.samples.samples[3].clone()
    };
    profile.samples.samples.push(woken);
    let text = report(&profile, &PrintOptions::new());
    assert!(
        text.contains(&lines(&[
            "WAITING ON        TICKS       %  CALLERS",
            "<0.5.0> (server)      1  100.00        1",
            "",
        ])),
        "{text}"
    );
}

#[test]
fn every_report_says_how_many_samples_were_dropped_and_what_to_raise() {
    let dropped = "Warning: 5 samples were dropped: the sample buffer (1000 samples) was full. \
                   Raise SampleOptions::n to keep them.\n";
    for format in [ReportFormat::Tree, ReportFormat::Flat, ReportFormat::Both] {
        let text = report(&wall_profile(5.0), &PrintOptions::new().format(format));
        assert!(text.ends_with(dropped), "{text}");
        assert_eq!(text.matches("dropped").count(), 1, "{text}");
        let text = report(&wall_profile(0.0), &PrintOptions::new().format(format));
        assert!(!text.contains("dropped"), "{text}");
    }
    // Every sample dropped: the report says both.
    let mut profile = wall_profile(5.0);
    profile.samples.samples.clear();
    assert_eq!(
        report(&profile, &PrintOptions::new()),
        format!(
            "Warning: There were no samples collected.\n\
             Run your program longer (perhaps by running it multiple times),\n\
             or raise the sampling rate with `SampleOptions::hz`.\n{dropped}"
        )
    );
}

#[test]
fn an_empty_sample_set_says_so_plainly() {
    let empty = lines(&[
        "Warning: There were no samples collected.",
        "Run your program longer (perhaps by running it multiple times),",
        "or raise the sampling rate with `SampleOptions::hz`.",
    ]);
    let profile = Profile::empty(TraceType::CallCount);
    for format in [ReportFormat::Tree, ReportFormat::Flat] {
        assert_eq!(report(&profile, &PrintOptions::new().format(format)), empty);
    }
    // Samples of the other sampler only.
    let text = report(
        &cpu_profile(),
        &PrintOptions::new().sampler(Some(SamplerKind::Wall)),
    );
    assert_eq!(text, empty);
}

#[test]
fn samples_of_hidden_frames_only_count_on_a_line_of_their_own() {
    // Only native frames, hidden: the samples were collected, and say so.
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, 1, 0.0);
    let t = b.thread(1, None);
    let f = b.native("tokio::park", None, 1);
    let s = b.stack(&[f]);
    b.cpu(None, t, s, 3.0);
    let both = PrintOptions::new().native(false).format(ReportFormat::Both);
    assert_eq!(
        report(&b.profile, &both),
        lines(&[
            "Overhead ╎ [+additional indent] Count File:Line; Function",
            "=========================================================",
            "3╎3 [hidden frames]",
            &format!("Total snapshots: 3. Utilization: 3% {ACROSS}"),
            "",
            " Count  Overhead File    Line Function",
            " =====  ======== ====    ==== ========",
            "     3         3              [hidden frames]",
            &format!("Total snapshots: 3. Utilization: 3% {ACROSS}"),
        ])
    );
}

#[test]
fn cpu_and_wall_samples_are_reported_apart() {
    let mut profile = cpu_profile();
    let wall = wall_profile(0.0);
    let base_frames = profile.samples.frames.len() as u32;
    let base_functions = profile.function_table.len() as u32;
    let base_stacks = profile.samples.stacks.len() as u32;
    profile.function_table.extend(wall.function_table);
    let set = &mut profile.samples;
    set.sources.extend(wall.samples.sources);
    set.frames
        .extend(wall.samples.frames.into_iter().map(|mut f| {
            f.function = f.function.map(|i| i + base_functions);
            f
        }));
    set.stacks
        .extend(wall.samples.stacks.into_iter().map(|mut s| {
            s.parent = s.parent.map(|p| p + base_stacks);
            s.frame += base_frames;
            s
        }));
    set.samples
        .extend(wall.samples.samples.into_iter().map(|mut s| {
            s.source = 1;
            s.stack = s.stack.map(|st| st + base_stacks);
            s
        }));
    let both = report(&profile, &PrintOptions::new());
    let cpu = report(&cpu_profile(), &PrintOptions::new());
    let wall = report(&wall_profile(0.0), &PrintOptions::new());
    assert_eq!(
        both,
        format!("CPU samples:\n\n{cpu}\nWall samples:\n\n{wall}")
    );
    assert_eq!(
        report(
            &profile,
            &PrintOptions::new().sampler(Some(SamplerKind::Wall))
        ),
        wall
    );
}

#[test]
fn both_prints_the_tree_then_the_flat_list() {
    let profile = cpu_profile();
    let tree = report(&profile, &PrintOptions::new());
    let flat = report(&profile, &PrintOptions::new().format(ReportFormat::Flat));
    assert_eq!(
        report(&profile, &PrintOptions::new().format(ReportFormat::Both)),
        format!("{tree}\n{flat}")
    );
}

#[test]
fn option_names_parse_as_julia_s_and_a_wrong_one_lists_the_choices() {
    assert_eq!("process,thread".parse(), Ok(GroupBy::ProcessThread));
    assert_eq!("[thread, process]".parse(), Ok(GroupBy::ThreadProcess));
    assert_eq!(":process".parse(), Ok(GroupBy::Process));
    assert_eq!("none".parse(), Ok(GroupBy::None));
    assert_eq!("count".parse(), Ok(SortedBy::Count));
    assert_eq!(":filefuncline".parse(), Ok(SortedBy::FileFuncLine));
    assert_eq!("Overhead".parse(), Ok(SortedBy::Overhead));
    assert_eq!("flat".parse(), Ok(Recur::Flat));
    assert_eq!("both".parse(), Ok(ReportFormat::Both));
    let e = "task".parse::<GroupBy>().unwrap_err();
    assert_eq!(
        e.to_string(),
        "`task` is not a groupby choice: expected none, process, thread, process,thread or \
         thread,process"
    );
    assert_eq!(
        "flatc".parse::<Recur>().unwrap_err().to_string(),
        "`flatc` is not a recur choice: expected off or flat"
    );
}

#[test]
fn the_pretty_export_of_samples_is_the_tree_and_the_flat_list() {
    use tprof::export::{self, Format};
    let mut profile = cpu_profile();
    let both = report(&profile, &PrintOptions::new().format(ReportFormat::Both));
    assert_eq!(export::to_string(Format::Pretty, &profile).unwrap(), both);
    // The calls the sample session counted follow, as tprof's report of a trace profile.
    let pid = common::pid("<0.5.0>");
    profile.functions.push(tprof::FunctionTrace {
        function: common::function("app", "main", 0, 1),
        entries: vec![common::entry(tprof::Group::Process(pid), 1, 1)],
    });
    let trace = {
        let mut trace_only = profile.clone();
        trace_only.samples = Default::default();
        export::to_string(Format::Pretty, &trace_only).unwrap()
    };
    assert!(trace.contains("app::main/0"), "{trace}");
    assert_eq!(
        export::to_string(Format::Pretty, &profile).unwrap(),
        format!("{both}\n{trace}")
    );
    // With options.
    let mut out = Vec::new();
    export::write_pretty(
        &cpu_profile(),
        &PrintOptions::new().format(ReportFormat::Tree).maxdepth(0),
        &mut out,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        report(&cpu_profile(), &PrintOptions::new().maxdepth(0))
    );
}

#[test]
fn files_of_the_standard_library_and_of_crates_are_shortened_as_julia_s() {
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, 1, 0.0);
    let t = b.thread(1, None);
    let std = b.native(
        "core::iter::traits::iterator::Iterator::fold",
        Some((
            "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/iter/traits/iterator.rs",
            2646,
        )),
        1,
    );
    let tokio = b.native(
        "tokio::runtime::park::Inner::park",
        Some((
            "/home/me/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-1.48.0/src/runtime/park.rs",
            120,
        )),
        2,
    );
    let own = b.native("app::spin", Some(("/home/me/app/src/spin.rs", 3)), 3);
    let s = b.stack(&[tokio, std, own]);
    b.cpu(None, t, s, 1.0);
    // Every frame: by default, std's and tokio's are folded.
    let text = report(&b.profile, &PrintOptions::new().native(true));
    assert_eq!(
        text.lines().skip(2).take(3).collect::<Vec<_>>(),
        [
            " ╎1 @tokio-1.48.0/src/runtime/park.rs:120; tokio::runtime::park::Inner::park",
            " ╎ 1 @core/src/iter/traits/iterator.rs:2646; core::iter::traits::iterator::Iterator::fold",
            "1╎  1 /home/me/app/src/spin.rs:3; app::spin",
        ]
    );
}

/// Counts the lines written to it.
#[derive(Default)]
struct LineCount(usize);

impl std::io::Write for LineCount {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.iter().filter(|&&c| c == b'\n').count();
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_million_samples_of_100_000_processes_are_reported_in_one_pass_each() {
    const PROCESSES: u32 = 100_000;
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, 1, 0.0);
    let t = b.thread(1, None);
    let roots: Vec<u32> = (0..10)
        .map(|i| b.traced(&format!("f{i}"), "f.rs", i + 1))
        .collect();
    let leaf = b.native("leaf", Some(("l.rs", 1)), 1);
    let stacks: Vec<u32> = (0..10)
        .map(|i| b.stack(&[roots[i], roots[(i + 1) % 10], leaf]))
        .collect();
    let set = &mut b.profile.samples;
    for p in 0..PROCESSES {
        let pid: runtime::Pid = format!("<0.{}.0>", p + 1).parse().unwrap();
        for i in 0..10 {
            set.samples.push(tprof::samples::SampleRecord {
                source: 0,
                pid: Some(pid),
                thread: Some(t),
                time_ns: 0,
                weight: 1.0,
                // Each process in one stack only, so its tree has 3 lines.
                stack: Some(stacks[(p % 10) as usize]),
                state: None,
                mailbox_len: i,
                callee: None,
                size: 0,
                live: false,
            });
        }
    }
    // All together: 10 stacks of 3 frames, 30 lines, the header and the totals.
    let mut lines = LineCount::default();
    sample_report::print(&mut lines, &b.profile, &PrintOptions::new()).unwrap();
    assert_eq!(lines.0, 2 + 30 + 1);
    // Per process: its totals, 3 lines, a blank line.
    let mut lines = LineCount::default();
    let options = PrintOptions::new().groupby(GroupBy::Process);
    sample_report::print(&mut lines, &b.profile, &options).unwrap();
    assert_eq!(lines.0, 2 + PROCESSES as usize * 5);
    let who = callers(&b.profile, "leaf", &options);
    assert_eq!(who.len(), 10);
    assert!(who.iter().all(|c| c.count == f64::from(PROCESSES)));
}

/// More processes than the summary has rows: the unnamed ones are counted together by their
/// initial call, named ones keep a row each, and rows past the limit are counted in one line.
#[test]
fn a_wall_summary_of_many_processes_counts_the_unnamed_together() {
    use tprof::ProcessRecord;
    let mut b = common::samples::Build::new();
    let source = b.source(SamplerKind::Wall, 10, 1, 0.0);
    let idle = b.traced("idle", "src/idle.rs", 1);
    let s_idle = b.stack(&[idle]);
    b.sample(
        source,
        Some("<0.5.0>"),
        None,
        Some(s_idle),
        3.0,
        Some(WaitState::Receive),
    );
    b.named("<0.5.0>", "server");
    for i in 0..31u32 {
        let pid = format!("<0.{}.0>", 100 + i);
        b.sample(
            source,
            Some(&pid),
            None,
            Some(s_idle),
            1.0,
            Some(WaitState::Receive),
        );
        b.profile.processes.push(ProcessRecord {
            pid: pid.parse().expect("pid"),
            name: None,
            initial_call: match i {
                0..20 => "app::worker",
                20..30 => "app::helper",
                _ => "app::lonely",
            }
            .to_owned(),
            run: 0,
        });
    }
    let text = report(&b.profile, &PrintOptions::new().maxdepth(0));
    assert!(
        text.contains(&lines(&[
            "PROCESS         NAME         TICKS  receive  MAILBOX",
            "(20 processes)  app::worker     20   100.00        0",
            "(10 processes)  app::helper     10   100.00        0",
            "<0.5.0>         server           3   100.00        0",
            "(1 process)     app::lonely      1   100.00        0",
            "",
        ])),
        "{text}"
    );
    let text = report(&b.profile, &PrintOptions::new().maxdepth(0).rows(1));
    assert!(
        text.contains(&lines(&[
            "(20 processes)  app::worker     20   100.00        0",
            "(3 more rows: 12 processes with 14 process-ticks; raise `rows` to see them)",
        ])),
        "{text}"
    );
}

#[test]
fn focus_keeps_the_samples_through_a_frame_and_hide_leaves_frames_out() {
    let profile = cpu_profile();
    // Focus on serve: the 7 samples whose stack goes through it (not main's own, nor
    // main -> parse, nor the time outside processes).
    let text = report(&profile, &PrintOptions::new().focus("serve").unwrap());
    assert_eq!(
        text.lines().skip(2).collect::<Vec<_>>(),
        [
            " ╎7 src/main.rs:1; app::main/0",
            "1╎ 7 src/serve.rs:10; app::serve/0",
            "2╎  6 src/parse.rs:20; app::parse/0",
            "4╎   4 src/sum.rs:5; app::checksum",
            &format!("Total snapshots: 7. Utilization: 4% {ACROSS}"),
        ]
    );
    // Hide serve, by file: its samples count at main, parse hangs from main.
    let text = report(&profile, &PrintOptions::new().hide(r"serve\.rs$").unwrap());
    assert_eq!(
        text.lines().skip(2).collect::<Vec<_>>(),
        [
            "2╎10 src/main.rs:1; app::main/0",
            "4╎ 8  src/parse.rs:20; app::parse/0",
            "4╎  4  src/sum.rs:5; app::checksum",
            "2╎2  [unknown stackframe]",
            &format!("Total snapshots: 12. Utilization: 6% {ACROSS}"),
        ]
    );
}

#[test]
fn a_filter_that_is_not_a_regex_is_a_typed_error_naming_it() {
    let err = PrintOptions::new().focus("serve(").unwrap_err();
    assert_eq!((err.option, err.pattern.as_str()), ("focus", "serve("));
    assert!(
        err.to_string()
            .starts_with("the focus pattern `serve(` is not a regular expression: "),
        "{err}"
    );
    let err = PrintOptions::new().hide("[a-").unwrap_err();
    assert_eq!((err.option, err.pattern.as_str()), ("hide", "[a-"));
    // Set directly, the report refuses it.
    let mut options = PrintOptions::new();
    options.hide = Some("[a-".into());
    let mut out = Vec::new();
    let err = sample_report::print(&mut out, &cpu_profile(), &options).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("`[a-`"), "{err}");
}

#[test]
fn the_default_report_folds_the_plumbing_and_says_how_many_frames() {
    let profile = plumbed_profile();
    let text = report(&profile, &PrintOptions::new().format(ReportFormat::Both));
    assert_eq!(
        text,
        lines(&[
            "Overhead ╎ [+additional indent] Count File:Line; Function",
            "=========================================================",
            "2╎8  src/crunch.rs:3; app::crunch/0",
            "6╎ 6  /home/me/app/src/hash.rs:9; app::fnv_hash",
            "3╎3  [hidden frames]",
            &format!("Total snapshots: 11. Utilization: 11% {ACROSS}"),
            "",
            " Count  Overhead File                      Line Function",
            " =====  ======== ====                      ==== ========",
            "     6         6 /home/me/app/src/hash.rs     9 app::fnv_hash",
            "     8         2 src/crunch.rs                3 app::crunch/0",
            "     3         3                                [hidden frames]",
            &format!("Total snapshots: 11. Utilization: 11% {ACROSS}"),
            "Folded: 7 frames of plumbing (the runtime, tokio, the standard library, system \
             libraries), their samples counted at the frame above; `--native all` \
             (PrintOptions::native(true)) shows every frame.",
        ])
    );
    // native(true) keeps every frame, and folds nothing.
    let all = report(&profile, &PrintOptions::new().native(true));
    assert_eq!(all.lines().count(), 2 + 9 + 1, "{all}");
    assert!(!all.contains("Folded"), "{all}");
    assert!(
        all.contains("@tokio-1.48.0/src/task/coop.rs:70; budget<F>"),
        "{all}"
    );
    // Grouped, the note comes once, after every group.
    let grouped = report(&profile, &PrintOptions::new().groupby(GroupBy::Process));
    assert_eq!(grouped.matches("Folded: 7 frames").count(), 1, "{grouped}");
    assert!(grouped.ends_with("shows every frame.\n"), "{grouped}");
}

#[test]
fn frames_of_my_crates_only_fold_every_other_crate_s() {
    let mut profile = plumbed_profile();
    // A traced function of another crate, called by crunch: 1 sample in it.
    profile.function_table.push(tprof::Function {
        module: "kvproto::codec".into(),
        name: "decode".into(),
        arity: 1,
        file: "src/codec.rs".into(),
        line: 4,
    });
    let set = &mut profile.samples;
    set.frames.push(tprof::samples::SampleFrame {
        function: Some(1),
        name: String::new(),
        file: None,
        line: None,
        address: 0,
    });
    let decode = (set.frames.len() - 1) as u32;
    let crunch = set
        .stacks
        .iter()
        .position(|s| set.frames[s.frame as usize].function == Some(0))
        .expect("crunch's stack") as u32;
    set.stacks.push(tprof::samples::SampleStack {
        parent: Some(crunch),
        frame: decode,
    });
    let mut sample = set.samples[0].clone();
    sample.stack = Some((set.stacks.len() - 1) as u32);
    sample.weight = 1.0;
    set.samples.push(sample);
    let options = PrintOptions::new().crates(["app"]);
    let text = report(&profile, &options);
    assert_eq!(
        text.lines().skip(2).collect::<Vec<_>>(),
        [
            "3╎9  src/crunch.rs:3; app::crunch/0",
            "6╎ 6  /home/me/app/src/hash.rs:9; app::fnv_hash",
            "3╎3  [hidden frames]",
            &format!("Total snapshots: 12. Utilization: 12% {ACROSS}"),
            "Folded: 8 frames of crates other than app, their samples counted at the frame \
             above; without `--crate` (PrintOptions::crates) every crate's frames show.",
        ]
    );
    // The crates asked show, plumbing or not: tokio's frames, named by path or by file.
    let text = report(&profile, &PrintOptions::new().crates(["app", "tokio"]));
    assert!(
        text.contains("tokio::runtime::scheduler::multi_thread::worker::run")
            && text.contains("budget<F>")
            && !text.contains("runtime::process::Process::poll"),
        "{text}"
    );
    // Callers see through the folded frames to the nearest shown caller.
    let who = callers(&profile, "fnv_hash", &options);
    assert_eq!(
        who.iter()
            .map(|c| (c.count, c.function.as_str()))
            .collect::<Vec<_>>(),
        [(6.0, "app::crunch/0")]
    );
}

#[test]
fn folded_stacks_of_the_report_s_options_fold_the_plumbing_too() {
    let profile = plumbed_profile();
    let folded = |options: &PrintOptions| {
        let mut out = Vec::new();
        tprof::export::write_folded(&profile, options, &mut out).expect("written");
        String::from_utf8(out).expect("utf-8")
    };
    assert_eq!(
        folded(&PrintOptions::new()),
        "<0.5.0>;app::crunch 20000000\n\
         <0.5.0>;app::crunch;app::fnv_hash 60000000\n\
         (outside_processes) 30000000\n"
    );
    // Focus and hide as in the report; native(true) is the export of every frame.
    assert_eq!(
        folded(&PrintOptions::new().focus("fnv").unwrap()),
        "<0.5.0>;app::crunch;app::fnv_hash 60000000\n"
    );
    assert_eq!(
        folded(&PrintOptions::new().native(true)),
        tprof::export::to_string(tprof::export::Format::Folded, &profile).unwrap()
    );
}

/// Samples of a process taken in polls begun before sampling began are counted before the
/// tree, of the samples of processes; and a group whose samples have no frame to show says
/// so, and why, where it said that no sample was collected (issue 30).
#[test]
fn samples_begun_before_sampling_are_counted_and_a_group_without_frames_says_why() {
    let mut b = Build::new();
    let wall = b.source(SamplerKind::Wall, 100, 1, 0.0);
    b.profile.samples.sources[wall as usize].before_sampling = 3;
    for _ in 0..4 {
        b.sample(
            wall,
            Some("<0.5.0>"),
            None,
            None,
            1.0,
            Some(WaitState::Running),
        );
    }
    let grouped = report(&b.profile, &PrintOptions::new().groupby(GroupBy::Process));
    assert!(
        grouped.starts_with(
            "Note: 3 of 4 samples of processes fell in polls begun before sampling began: the \
             traced frames they were in are unknown, so they show under their process with no \
             traced path"
        ),
        "{grouped}"
    );
    assert!(!grouped.contains("no samples collected"), "{grouped}");
    let why = "No frame to show for these 4 snapshots: a wall sample of a running process \
               has no traced path";
    let group = grouped
        .lines()
        .position(|l| l.starts_with("Process <0.5.0> Total snapshots: 4."))
        .unwrap_or_else(|| panic!("{grouped}"));
    assert!(
        grouped
            .lines()
            .nth(group + 1)
            .is_some_and(|l| l.starts_with(why)),
        "{grouped}"
    );
    // Ungrouped, the same line stands for the tree.
    let whole = report(&b.profile, &PrintOptions::new());
    assert!(!whole.contains("no samples collected"), "{whole}");
    assert!(whole.contains(why), "{whole}");
    // Without the count, no note.
    b.profile.samples.sources[wall as usize].before_sampling = 0;
    let text = report(&b.profile, &PrintOptions::new());
    assert!(!text.contains("before sampling began:"), "{text}");
}
