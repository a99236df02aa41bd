//! Call-duration percentiles: each call's own time — exclusive of its traced callees, as the
//! time figure beside it is — per process and function, to the precision the session asks for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{YieldOnce, run_in_process};

use std::time::Duration;

use runtime::trace::{
    CallPercentiles, ProcessMeasurement, ProcessSpec, SessionError, SessionOptions, TracePattern,
    TraceSession, TraceTypes,
};
use runtime::{Node, Pid, traced};

#[traced]
fn leaf_sleeps(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Does nothing of its own but call [`leaf_sleeps`].
#[traced]
fn caller(ms: u64) {
    leaf_sleeps(ms);
}

/// Sleeps `ms` in each of its two polls.
#[traced]
async fn async_leaf(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
    YieldOnce(false).await;
    std::thread::sleep(Duration::from_millis(ms));
}

/// Does nothing of its own but await [`async_leaf`], over three polls.
#[traced]
async fn async_caller(ms: u64) {
    async_leaf(ms).await;
    YieldOnce(false).await;
}

fn session(node: &Node, options: SessionOptions) -> TraceSession {
    let s = node
        .trace_session_with_options(TraceTypes::CALL_TIME_HISTOGRAMS, options)
        .unwrap();
    s.set_pattern(&TracePattern::module(module_path!()))
        .unwrap();
    s.enable_trace(ProcessSpec::New, false).unwrap();
    s
}

/// The percentiles of `function` in `pid`.
fn of<'a>(p: &'a [CallPercentiles], pid: Pid, function: &str) -> &'a CallPercentiles {
    p.iter()
        .find(|c| c.pid == pid && c.callsite.function() == function)
        .unwrap_or_else(|| panic!("no percentiles of {function} in {pid}: {p:#?}"))
}

/// The time figure of `function` in `pid`: calls and nanoseconds.
fn time_of(m: &[ProcessMeasurement], pid: Pid, function: &str) -> (u64, u64) {
    let f = m
        .iter()
        .find(|p| p.pid == pid)
        .and_then(|p| {
            p.functions
                .iter()
                .find(|f| f.callsite.function() == function)
        })
        .unwrap_or_else(|| panic!("no figures of {function} in {pid}: {m:#?}"));
    (f.calls, f.time_ns)
}

#[test]
fn percentiles_are_each_calls_own_time_as_the_time_column_counts_it() {
    let node = Node::new().unwrap();
    let s = session(&node, SessionOptions::new());
    let (pid, _) = run_in_process(&node, async {
        for _ in 0..3 {
            caller(4);
        }
        for _ in 0..2 {
            async_caller(2).await;
        }
    });
    let m = s.measurements();
    let p = s.call_time_percentiles();
    for function in ["caller", "leaf_sleeps", "async_caller", "async_leaf"] {
        let c = of(&p, pid, function);
        let (calls, time_ns) = time_of(&m, pid, function);
        assert_eq!(c.calls, calls, "{function}");
        assert!(c.p50_ns <= c.p90_ns && c.p90_ns <= c.p99_ns && c.p99_ns <= c.max_ns);
        // No call's own time is more than all the calls' own time, the time column (the
        // histogram reads a duration to 1%, rounding up).
        assert!(
            c.max_ns <= time_ns + time_ns / 50 + 1,
            "{function}: a call of {} ns, in {time_ns} ns for {calls} calls",
            c.max_ns
        );
    }
    // The leaves' own time holds their sleeps: all of them, across polls for the async one.
    assert!(of(&p, pid, "leaf_sleeps").p50_ns >= 4_000_000);
    assert!(of(&p, pid, "async_leaf").p50_ns >= 4_000_000);
}

#[test]
fn percentiles_are_per_process() {
    let node = Node::new().unwrap();
    let s = session(&node, SessionOptions::new());
    let (short, _) = run_in_process(&node, async {
        for _ in 0..2 {
            caller(1);
        }
    });
    let (long, _) = run_in_process(&node, async {
        for _ in 0..3 {
            caller(6);
        }
    });
    let p = s.call_time_percentiles();
    let leaves: Vec<(Pid, u64)> = p
        .iter()
        .filter(|c| c.callsite.function() == "leaf_sleeps")
        .map(|c| (c.pid, c.calls))
        .collect();
    assert_eq!(leaves, [(short, 2), (long, 3)], "in pid order: {p:#?}");
    assert!(of(&p, long, "leaf_sleeps").p50_ns >= 6_000_000);
    // In the snapshot too, under each process.
    let snapshot = s.snapshot();
    for (pid, calls) in leaves {
        let process = snapshot
            .processes
            .iter()
            .find(|q| q.pid == pid.to_string())
            .unwrap();
        let leaf = process
            .percentiles
            .iter()
            .find(|q| snapshot.functions[q.function as usize].name == "leaf_sleeps")
            .unwrap();
        assert_eq!(leaf.calls, calls);
    }
    assert!(snapshot.percentiles.is_empty());
}

#[test]
fn histograms_keep_the_precision_the_session_asks_for() {
    let node = Node::new().unwrap();
    let s = session(&node, SessionOptions::new().histogram_precision(5));
    let (pid, _) = run_in_process(&node, async {
        leaf_sleeps(3);
    });
    let (_, time_ns) = time_of(&s.measurements(), pid, "leaf_sleeps");
    let max = of(&s.call_time_percentiles(), pid, "leaf_sleeps").max_ns;
    // The one call's own time is the time column's figure; five figures read it to 1 in 10^5.
    assert!(
        max >= time_ns && max - time_ns <= time_ns / 100_000,
        "{max} ns for {time_ns} ns"
    );
    for wrong in [0, 6, 200] {
        let err = node
            .trace_session_with_options(
                TraceTypes::CALL_TIME_HISTOGRAMS,
                SessionOptions::new().histogram_precision(wrong),
            )
            .unwrap_err();
        assert_eq!(
            err,
            SessionError::HistogramPrecision {
                significant_figures: wrong
            }
        );
        assert!(
            err.to_string().contains("1 to 5 significant figures"),
            "{err}"
        );
    }
}
