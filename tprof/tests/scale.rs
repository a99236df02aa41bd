//! The regression guard of issue 22: every step from collect to each report, export and
//! archive operation grows linearly with the number of processes.
//!
//! Each step runs over `N` processes and over `4 N`, best of three, and the ratio of the two
//! times must stay under 8: a linear step gives 4, a quadratic one 16. Ratios, not times, so
//! that it holds on a slow or busy machine; one test, so that no other test of this file runs
//! beside it and skews a ratio. The larger size runs again only while its best time is past
//! the limit: the verdict is that of the best of three, in about half the time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{Node, receive, self_pid, send, traced};
use tprof::export::{self, Format};
use tprof::{Aggregate, Profile, ServerOptions, SortBy, Tprof, TraceType, archive};

/// The smaller size: about 5,000 processes, as the issue asks, or `TPROF_SCALE_N`.
fn small_size() -> usize {
    std::env::var("TPROF_SCALE_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5_000)
}

/// The largest ratio of the time over `4 N` processes to the time over `N` a step may have.
const MAX_RATIO: f64 = 8.0;

#[traced]
fn leaf(i: u64) -> u64 {
    black_box(i.wrapping_mul(31))
}

#[traced]
fn handle(i: u64) -> u64 {
    leaf(i) ^ leaf(i + 1)
}

#[traced]
async fn serve(i: u64) -> u64 {
    handle(i).wrapping_add(leaf(i))
}

/// Spawns `count` processes that each make a few nested traced calls, and waits until they
/// all have.
fn spawn_workers(node: &Node, count: usize) {
    node.run(async move {
        let me = self_pid();
        for i in 0..count as u64 {
            runtime::spawn(async move {
                black_box(serve(i).await);
                send(me, ());
            })
            .unwrap();
        }
        for _ in 0..count {
            receive::<()>().await;
        }
    })
    .unwrap();
}

/// How long `step` takes.
fn time(step: impl FnOnce()) -> Duration {
    let start = Instant::now();
    step();
    start.elapsed()
}

/// The shortest of three runs of `step`.
fn best_of_three(mut step: impl FnMut()) -> Duration {
    (0..3).map(|_| time(&mut step)).min().expect("three runs")
}

/// The shortest of up to three runs of `step`, stopping at the first within `limit`: whether
/// the best of three is within it, sooner.
fn best_of_three_within(limit: Duration, mut step: impl FnMut()) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..3 {
        best = best.min(time(&mut step));
        if best <= limit {
            break;
        }
    }
    best
}

/// The limit on a step's time over `4 N` processes, given its time over `N`.
fn limit(small: Duration) -> Duration {
    small.max(Duration::from_micros(1)).mul_f64(MAX_RATIO)
}

/// A step of the walk from a profile to what a person reads.
type Step = (&'static str, Box<dyn Fn(&Profile)>);

fn steps() -> Vec<Step> {
    let mut steps: Vec<Step> = vec![
        (
            "inspect (per process)",
            Box::new(|p| {
                black_box(tprof::inspect(p, Aggregate::Process, SortBy::default()));
            }),
        ),
        (
            "inspect (total)",
            Box::new(|p| {
                black_box(tprof::inspect(p, Aggregate::Total, SortBy::default()));
            }),
        ),
        (
            "format",
            Box::new(|p| {
                let inspected = tprof::inspect(p, Aggregate::Process, SortBy::default());
                black_box(tprof::format_to_string(&inspected));
            }),
        ),
        (
            "rich_report",
            Box::new(|p| {
                black_box(tprof::rich_report(p));
            }),
        ),
        (
            "archive write",
            Box::new(|p| {
                let mut out = Vec::new();
                archive::write(p, &mut out).unwrap();
                black_box(out);
            }),
        ),
        (
            "archive write and read",
            Box::new(|p| {
                let mut out = Vec::new();
                archive::write(p, &mut out).unwrap();
                black_box(archive::read(&mut out.as_slice()).unwrap());
            }),
        ),
        (
            "merge",
            Box::new(|p| {
                black_box(archive::merge(&[p.clone(), p.clone()]).unwrap());
            }),
        ),
    ];
    for &format in Format::ALL {
        steps.push((
            format.name(),
            Box::new(move |p| {
                export::write(format, p, &mut std::io::sink()).unwrap();
            }),
        ));
    }
    steps
}

#[test]
fn every_step_grows_linearly_with_the_processes() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let options = ServerOptions::new()
        .trace_type(TraceType::CallTime)
        .call_tree(true)
        .event_log(true);
    let tprof = node.block_on(Tprof::start(&node, options)).unwrap();
    node.block_on(tprof.set_pattern(TracePattern::module(module_path!())))
        .unwrap();
    node.block_on(tprof.enable_trace(ProcessSpec::New, true))
        .unwrap();

    let n = small_size();
    let mut times: Vec<(&'static str, [Duration; 2])> = Vec::new();
    let mut profiles = Vec::new();
    for (i, more) in [n, 3 * n].into_iter().enumerate() {
        spawn_workers(&node, more);
        let mut profile = None;
        let collect = || profile = Some(node.block_on(tprof.collect()).unwrap());
        let collect = match times.first() {
            None => best_of_three(collect),
            Some((_, [small, _])) => best_of_three_within(limit(*small), collect),
        };
        let profile = profile.expect("collected");
        // Every worker, each with its three functions and three call paths.
        let processes = if i == 0 { n } else { 4 * n };
        assert_eq!(profile.pids().len(), processes);
        assert_eq!(profile.call_tree.entries.len(), 4 * processes);
        assert_eq!(profile.event_logs.len(), processes);
        if i == 0 {
            times.push(("collect", [collect, Duration::ZERO]));
        } else {
            times[0].1[1] = collect;
        }
        profiles.push(profile);
    }
    node.block_on(tprof.stop()).unwrap();

    for (name, step) in steps() {
        let small = best_of_three(|| step(&profiles[0]));
        let large = best_of_three_within(limit(small), || step(&profiles[1]));
        times.push((name, [small, large]));
    }

    let ratio = |[small, large]: [Duration; 2]| {
        large.as_secs_f64() / small.max(Duration::from_micros(1)).as_secs_f64()
    };
    let table: String = times
        .iter()
        .map(|(name, t)| {
            format!(
                "{name:>24}: {:>9.1?} at {n}, {:>9.1?} at {}, ratio {:.1}\n",
                t[0],
                t[1],
                4 * n,
                ratio(*t)
            )
        })
        .collect();
    let slow: Vec<&str> = times
        .iter()
        .filter(|(_, [small, large])| *large > limit(*small))
        .map(|(name, _)| *name)
        .collect();
    assert!(
        slow.is_empty(),
        "steps that grow faster than linearly: {slow:?}\n{table}"
    );
    println!("{table}");
}
