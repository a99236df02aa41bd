//! Ad-hoc profiling: `tprof::profile` with each trace type, patterns, set_on_spawn, rootset,
//! timeouts, panics and reports.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use runtime::trace::TracePattern;
use runtime::{Down, receive, spawn_monitor, traced};
use tprof::{
    Aggregate, Column, Failure, Group, ProfileOptions, Report, RootSet, SortBy, TraceType,
};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// Allocates `n` blocks of 10 words, and a vec of `n` words to hold them.
#[traced]
#[allow(clippy::vec_box)]
fn seq_loop(n: usize) -> Vec<Box<[u64; 10]>> {
    (0..n).map(|i| Box::new([i as u64; 10])).collect()
}

#[traced]
async fn test_spawn() -> &'static str {
    let (pid, _) = spawn_monitor(async {
        seq_loop(9);
    })
    .unwrap();
    let down: Down = receive().await;
    assert_eq!(down.pid, pid);
    seq_loop(1);
    "done"
}

fn module() -> String {
    module_path!().to_owned()
}

fn only_here() -> TracePattern {
    TracePattern::module(module())
}

/// A `Write` that keeps what is written.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[test]
fn call_memory_per_process_with_exact_words() {
    let out = Capture::default();
    let outcome = tprof::profile(
        test_spawn,
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .device(out.clone()),
    )
    .unwrap();
    assert_eq!(outcome.result, Ok("done"));
    let pids = outcome.profile.pids();
    assert_eq!(pids.len(), 2, "the profiled process and its child");
    let seq = outcome.profile.function("seq_loop").unwrap();
    // Each block is 10 words; the vec holding n boxes is n words.
    let words: Vec<u64> = seq.entries.iter().map(|e| e.measurement).collect();
    assert!(
        words.contains(&(9 * 10 + 9)) && words.contains(&(10 + 1)),
        "{words:?}"
    );
    let text = out.text();
    assert!(text.contains("****** Process"), "{text}");
    assert!(text.contains("seq_loop/1"), "{text}");
    println!("{text}");
}

#[test]
fn call_count_counts_exact_calls_in_one_all_group() {
    let outcome = tprof::profile(
        || async {
            for _ in 0..7 {
                seq_loop(1);
            }
        },
        ProfileOptions::new()
            .pattern(TracePattern::function(module(), "seq_loop"))
            .report(Report::Return),
    )
    .unwrap();
    let f = outcome.profile.function("seq_loop").unwrap();
    assert_eq!(f.entries.len(), 1);
    assert_eq!(f.entries[0].group, Group::All);
    assert_eq!(f.entries[0].calls, 7);
    let inspected = tprof::inspect(&outcome.profile, Aggregate::Process, SortBy::default());
    assert_eq!(inspected.groups.len(), 1);
    assert_eq!(inspected.all().unwrap().total, 7);
}

#[test]
fn set_on_spawn_false_profiles_one_process() {
    let outcome = tprof::profile(
        test_spawn,
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .set_on_spawn(false)
            .report(Report::Return),
    )
    .unwrap();
    assert_eq!(outcome.profile.pids().len(), 1);
}

#[test]
fn a_timeout_stops_the_function_and_keeps_the_data() {
    let start = std::time::Instant::now();
    let outcome = tprof::profile(
        || async {
            seq_loop(3);
            tokio::time::sleep(Duration::from_secs(60)).await;
        },
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .timeout(Duration::from_millis(200))
            .report(Report::Return),
    )
    .unwrap();
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(
        outcome.result,
        Err(Failure::Timeout(Duration::from_millis(200)))
    );
    assert_eq!(
        outcome.profile.function("seq_loop").unwrap().entries[0].calls,
        1
    );
}

#[test]
fn a_panic_is_the_outcome_error_and_the_data_is_kept() {
    let outcome = tprof::profile(
        || async {
            seq_loop(2);
            panic!("profiled code failed");
        },
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .report(Report::Return),
    )
    .unwrap();
    assert_eq!(
        outcome.result,
        Err(Failure::Panic("profiled code failed".into()))
    );
    assert_eq!(
        outcome.profile.function("seq_loop").unwrap().entries[0].measurement,
        22
    );
}

#[test]
fn total_report_sorted_by_measurement_descending() {
    let out = Capture::default();
    tprof::profile(
        test_spawn,
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .report(Report::Total(SortBy::descending(Column::Measurement)))
            .device(out.clone()),
    )
    .unwrap();
    let text = out.text();
    assert!(!text.contains("****** Process"), "{text}");
    println!("{text}");
}

/// A registered server whose call handler allocates 5 words.
struct Store;

#[traced]
impl runtime::gen_server::GenServer for Store {
    type Args = ();
    type Call = u32;
    type Reply = usize;
    type Cast = ();

    #[traced(skip)]
    async fn init((): ()) -> Result<Self, runtime::ExitReason> {
        Ok(Store)
    }

    async fn handle_call(
        &mut self,
        n: u32,
        _from: &mut runtime::gen_server::Caller<usize>,
    ) -> runtime::gen_server::CallReply<usize> {
        let v: Vec<u64> = std::hint::black_box(vec![u64::from(n); 5]);
        runtime::gen_server::CallReply::Reply(v.len())
    }
}

#[test]
fn a_rootset_name_adds_a_registered_server() {
    let node = runtime::Node::builder().worker_threads(2).build().unwrap();
    node.run(async {
        runtime::gen_server::start::<Store>(
            (),
            runtime::gen_server::StartOptions::new().name("store"),
        )
        .await
        .unwrap();
    })
    .unwrap();
    let server = node.whereis("store").unwrap();
    let outcome = tprof::profile_on(
        &node,
        || async {
            runtime::gen_server::call::<Store>("store", 1, runtime::gen_server::Timeout::Infinity)
                .await
                .unwrap()
        },
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .rootset(RootSet::Processes(vec![
                "store".into(),
                "not_registered".into(),
            ]))
            .report(Report::Return),
    )
    .unwrap();
    assert_eq!(outcome.result, Ok(5));
    let handler = outcome
        .profile
        .function("<Store as runtime::gen_server::GenServer>::handle_call")
        .unwrap();
    assert_eq!(handler.entries.len(), 1);
    assert_eq!(handler.entries[0].group, Group::Process(server));
    assert_eq!(handler.entries[0].measurement, 5);
    // Without the rootset the server is not profiled.
    let outcome = tprof::profile_on(
        &node,
        || async {
            runtime::gen_server::call::<Store>("store", 1, runtime::gen_server::Timeout::Infinity)
                .await
                .unwrap()
        },
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .report(Report::Return),
    )
    .unwrap();
    assert!(!outcome.profile.pids().contains(&server));
}

#[test]
fn the_profiler_never_shows_itself() {
    for trace_type in [
        TraceType::CallCount,
        TraceType::CallTime,
        TraceType::CallMemory,
    ] {
        let outcome = tprof::profile(
            || async { 1 + 1 },
            ProfileOptions::new()
                .trace_type(trace_type)
                .report(Report::Return),
        )
        .unwrap();
        assert_eq!(outcome.result, Ok(2));
        assert!(
            outcome.profile.is_empty(),
            "{trace_type}: {:?}",
            outcome.profile
        );
    }
}

#[test]
fn a_pattern_restricts_the_profile() {
    let outcome = tprof::profile(
        test_spawn,
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(TracePattern::function(module(), "seq_loop"))
            .report(Report::Return),
    )
    .unwrap();
    assert_eq!(outcome.profile.functions.len(), 1);
    assert_eq!(outcome.profile.functions[0].function(), "seq_loop");
    let err = tprof::profile(
        || async {},
        ProfileOptions::new().pattern(TracePattern::function(module(), "no_such_function")),
    )
    .unwrap_err();
    assert!(err.to_string().contains("no_such_function"), "{err}");
}

#[test]
fn the_rich_report_lists_processes_and_their_functions_with_bytes_and_blocks() {
    let outcome = tprof::profile(
        test_spawn,
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .report(Report::Return),
    )
    .unwrap();
    let text = tprof::rich_report(&outcome.profile);
    assert!(text.starts_with("call_memory profile\n"), "{text}");
    for pid in outcome.profile.pids() {
        assert!(text.contains(&pid.to_string()), "{text}");
    }
    assert!(text.contains("adhoc::seq_loop/1"), "{text}");
    assert!(
        text.contains("bytes/call") && text.contains("blocks/call"),
        "{text}"
    );
    assert!(text.contains("live heap (bytes)"), "{text}");
    assert!(
        !text.contains("(ended)"),
        "the profiled processes have ended, and are named as the profile recorded them: {text}"
    );
    assert_eq!(
        tprof::rich_report(&tprof::Profile::empty(TraceType::CallTime)),
        "Trace is empty\n"
    );
}

#[traced]
fn spin(rounds: u64) -> u64 {
    (0..rounds).fold(0u64, |a, i| {
        a.wrapping_mul(31).wrapping_add(std::hint::black_box(i))
    })
}

#[test]
fn percentiles_are_opt_in_and_show_in_the_rich_report() {
    let run = |percentiles: bool| {
        tprof::profile(
            || async {
                for i in 0..200 {
                    spin(i % 50);
                }
            },
            ProfileOptions::new()
                .trace_type(TraceType::CallTime)
                .pattern(TracePattern::function(module(), "spin"))
                .percentiles(percentiles)
                .report(Report::Return),
        )
        .unwrap()
        .profile
    };
    assert!(run(false).percentiles.is_empty());
    let profile = run(true);
    let p = &profile.percentiles[0];
    assert_eq!(p.group, Group::Process(profile.pids()[0]), "per process");
    assert_eq!(p.calls, 200);
    assert!(p.p50_ns <= p.p90_ns && p.p90_ns <= p.p99_ns && p.p99_ns <= p.max_ns);
    let text = tprof::rich_report(&profile);
    // In the process's own table, beside its time per call.
    let table = text
        .split(&format!("\n{}", profile.pids()[0]))
        .nth(1)
        .unwrap();
    assert!(
        table.contains("per call (us)") && table.contains("p99 (us)"),
        "{text}"
    );
    assert!(table.contains("adhoc::spin/1"), "{text}");
    assert!(
        !text.contains("\nall processes\n"),
        "no table of every process: {text}"
    );
}

/// A call_time profile carries what the program's threads ran and waited on the OS's run queue
/// while it was taken (Linux's per-thread figures): the profiled process's spinning is in the
/// time run. Other trace types carry none.
#[test]
fn a_call_time_profile_says_what_the_threads_ran_and_waited() {
    let run = |trace_type: TraceType| {
        tprof::profile(
            || async {
                let start = std::time::Instant::now();
                // At least 20 ms of spinning on the profiled process's worker: running or,
                // on a loaded machine, waiting to run.
                while start.elapsed() < std::time::Duration::from_millis(20) {
                    spin(1_000);
                }
            },
            ProfileOptions::new()
                .trace_type(trace_type)
                .pattern(TracePattern::function(module(), "spin"))
                .report(Report::Return),
        )
        .unwrap()
        .profile
    };
    let profile = run(TraceType::CallTime);
    let Some(figures) = profile.run_queue() else {
        // No figures on this OS or kernel (no schedstat): the profile says nothing.
        assert!(
            !cfg!(target_os = "linux") || !std::path::Path::new("/proc/self/schedstat").exists()
        );
        return;
    };
    assert!(figures.threads >= 1, "{figures:?}");
    assert!(
        figures.ran_ns.saturating_add(figures.waited_ns) >= 20_000_000,
        "{figures:?}"
    );
    // Through the archive, unchanged.
    let mut bytes = Vec::new();
    tprof::archive::write(&profile, &mut bytes).unwrap();
    let read = tprof::archive::read(&mut bytes.as_slice()).unwrap();
    assert_eq!(read.run_queue(), Some(figures));
    assert_eq!(run(TraceType::CallCount).run_queue(), None);
}

/// Does nothing of its own but call [`sleeps`], `ms` long.
#[traced]
fn calls_a_sleeper(ms: u64) {
    sleeps(ms);
}

#[traced]
fn sleeps(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

#[test]
fn percentiles_measure_what_the_time_column_does_per_process() {
    let outcome = tprof::profile(
        || async {
            let (child, _) = spawn_monitor(async {
                calls_a_sleeper(1);
            })
            .unwrap();
            let _: Down = receive().await;
            for _ in 0..3 {
                calls_a_sleeper(3);
            }
            child
        },
        ProfileOptions::new()
            .trace_type(TraceType::CallTime)
            .pattern(only_here())
            .percentiles(true)
            .percentile_precision(3)
            .report(Report::Return),
    )
    .unwrap();
    let profile = outcome.profile;
    let child = Group::Process(outcome.result.unwrap());
    let parent = Group::Process(
        *profile
            .pids()
            .iter()
            .find(|p| Group::Process(**p) != child)
            .unwrap(),
    );
    for (group, calls) in [(parent, 3), (child, 1)] {
        for function in ["calls_a_sleeper", "sleeps"] {
            let p = profile
                .percentiles
                .iter()
                .find(|p| p.group == group && p.function.name == function)
                .unwrap_or_else(|| panic!("{function} in {group}: {:#?}", profile.percentiles));
            let entry = profile
                .function(function)
                .unwrap()
                .entries
                .iter()
                .find(|e| e.group == group)
                .unwrap();
            assert_eq!(p.calls, calls);
            assert_eq!(entry.calls, calls);
            // A call's own time is at most the time column's, all calls' (to 0.1%).
            assert!(
                p.max_ns <= entry.measurement + entry.measurement / 500 + 1,
                "{function} in {group}: {} ns in a call, {} ns in all",
                p.max_ns,
                entry.measurement
            );
        }
    }
}

#[test]
fn a_percentile_precision_out_of_range_is_an_error() {
    let err = tprof::profile(
        || async {},
        ProfileOptions::new()
            .trace_type(TraceType::CallTime)
            .percentiles(true)
            .percentile_precision(9),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            tprof::ProfileError::Session(runtime::trace::SessionError::HistogramPrecision {
                significant_figures: 9
            })
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("1 to 5 significant figures"),
        "{err}"
    );
}

#[test]
fn an_exit_is_the_outcome_error_with_its_reason() {
    let outcome = tprof::profile(
        || async {
            seq_loop(1);
            runtime::exit_self(runtime::ExitReason::custom("bye"))
        },
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .report(Report::Return),
    )
    .unwrap();
    assert_eq!(
        outcome.result,
        Err(Failure::Exit(runtime::ExitReason::custom("bye")))
    );
    assert_eq!(
        outcome.profile.function("seq_loop").unwrap().entries[0].calls,
        1
    );
}

#[test]
fn the_async_form_profiles_on_the_callers_node_and_never_shows_the_caller() {
    let node = runtime::Node::builder().worker_threads(2).build().unwrap();
    let (caller, outcome) = node
        .run(async {
            let outcome = tprof::profile_async(
                test_spawn,
                ProfileOptions::new()
                    .trace_type(TraceType::CallMemory)
                    .pattern(only_here())
                    .report(Report::Return),
            )
            .await
            .unwrap();
            (runtime::self_pid(), outcome)
        })
        .unwrap();
    assert_eq!(outcome.result, Ok("done"));
    let pids = outcome.profile.pids();
    assert_eq!(pids.len(), 2);
    assert!(
        pids.iter().all(|p| p.node() == node.id()),
        "on the caller's node"
    );
    assert!(
        !pids.contains(&caller),
        "the calling process is not profiled"
    );
    // From outside any process, on the node's runtime: a private node on that runtime.
    let outcome = node
        .block_on(tprof::profile_async(
            test_spawn,
            ProfileOptions::new()
                .trace_type(TraceType::CallMemory)
                .pattern(only_here())
                .report(Report::Return),
        ))
        .unwrap();
    assert_eq!(outcome.result, Ok("done"));
    let pids = outcome.profile.pids();
    assert_eq!(pids.len(), 2);
    assert!(
        pids.iter().all(|p| p.node() != node.id()),
        "on a node of its own"
    );
}

#[test]
fn the_profile_waits_for_a_spawned_process_still_finishing_its_poll() {
    // The child tells the profiled function it is done from inside a poll that then keeps
    // running (as a server's poll goes on after sending a reply); the function ends first.
    let (release, released) = std::sync::mpsc::channel::<()>();
    let releaser = std::thread::Builder::new()
        .name("releaser".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let _ = release.send(());
        })
        .unwrap();
    let outcome = tprof::profile(
        move || async move {
            let (told, heard) = std::sync::mpsc::channel();
            runtime::spawn(async move {
                seq_loop(3);
                told.send(()).unwrap();
                let _ = released.recv_timeout(Duration::from_secs(60));
            })
            .unwrap();
            // Woken from a blocking thread, this process runs on the other worker.
            runtime::spawn_blocking(move || heard.recv().unwrap())
                .unwrap()
                .await
                .unwrap();
        },
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .report(Report::Return),
    )
    .unwrap();
    releaser.join().unwrap();
    assert_eq!(outcome.result, Ok(()));
    let seq = outcome
        .profile
        .function("seq_loop")
        .expect("the child's figures, flushed after the function ended");
    assert_eq!(seq.entries.len(), 1);
    assert_eq!(seq.entries[0].calls, 1);
    assert_eq!(seq.entries[0].measurement, 3 * 10 + 3);
}

/// The checks of `call_memory_per_process_with_exact_words`, on an outcome of `test_spawn`.
fn assert_test_spawn_measured(outcome: &tprof::Outcome<&'static str>) {
    assert_eq!(outcome.result, Ok("done"));
    assert_eq!(outcome.profile.pids().len(), 2, "the process and its child");
    let words: Vec<u64> = (outcome.profile.function("seq_loop").unwrap().entries)
        .iter()
        .map(|e| e.measurement)
        .collect();
    assert!(
        words.contains(&(9 * 10 + 9)) && words.contains(&(10 + 1)),
        "{words:?}"
    );
}

fn measure_test_spawn() -> ProfileOptions {
    ProfileOptions::new()
        .trace_type(TraceType::CallMemory)
        .pattern(only_here())
        .report(Report::Return)
}

#[tokio::test]
async fn from_a_tokio_test_the_async_form_profiles_on_the_current_runtime() {
    let outcome = tprof::profile_async(test_spawn, measure_test_spawn())
        .await
        .unwrap();
    assert_test_spawn_measured(&outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_a_multi_thread_tokio_main_the_async_form_profiles_on_the_current_runtime() {
    let outcome = tprof::profile_async(test_spawn, measure_test_spawn())
        .await
        .unwrap();
    assert_test_spawn_measured(&outcome);
}

#[tokio::test]
async fn the_blocking_form_in_a_tokio_test_is_an_error_naming_the_async_form() {
    let err = tprof::profile(|| async { 1 }, ProfileOptions::new()).unwrap_err();
    assert!(
        matches!(
            err,
            tprof::ProfileError::InAsyncContext {
                function: "tprof::profile",
                instead: "tprof::profile_async",
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("call `tprof::profile_async(..).await` there instead"),
        "{text}"
    );
}

#[test]
fn the_blocking_forms_in_a_process_are_an_error_naming_the_async_form() {
    let node = runtime::Node::builder().worker_threads(1).build().unwrap();
    let runtime = node.tokio_handle().clone();
    let (profiled, profiled_on) = node
        .run(async move {
            let here = runtime::Node::start_on(runtime);
            (
                tprof::profile(|| async { 1 }, ProfileOptions::new()),
                tprof::profile_on(&here, || async { 1 }, ProfileOptions::new()),
            )
        })
        .unwrap();
    for (err, function) in [
        (profiled, "tprof::profile"),
        (profiled_on, "tprof::profile_on"),
    ] {
        match err {
            Err(tprof::ProfileError::InAsyncContext { function: f, .. }) => assert_eq!(f, function),
            other => panic!("{function}: {other:?}"),
        }
    }
}

#[test]
fn the_async_form_outside_any_runtime_says_there_is_none() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    // Polled by an executor that is not tokio, outside any process.
    let mut profiling = std::pin::pin!(tprof::profile_async(|| async { 1 }, ProfileOptions::new()));
    match profiling
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(Err(err @ tprof::ProfileError::NoRuntime)) => {
            assert!(
                err.to_string()
                    .contains("tprof::profile from synchronous code"),
                "{err}"
            );
        }
        Poll::Ready(other) => panic!("{other:?}"),
        Poll::Pending => panic!("it pends"),
    }
}

/// A device that is closed: every write fails, as on a stdout piped to a `head` that ended.
struct Closed;

impl std::io::Write for Closed {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_report_that_cannot_be_printed_keeps_the_result_and_the_profile() {
    let outcome = tprof::profile(
        || async { seq_loop(2).len() },
        ProfileOptions::new()
            .trace_type(TraceType::CallMemory)
            .pattern(only_here())
            .device(Closed),
    )
    .unwrap();
    assert_eq!(outcome.result, Ok(2));
    assert_eq!(
        outcome.profile.function("seq_loop").unwrap().entries[0].measurement,
        22
    );
    assert_eq!(
        outcome.print_error.map(|e| e.kind()),
        Some(std::io::ErrorKind::BrokenPipe)
    );
    // Printed, or not asked for: no error.
    let printed = tprof::profile(
        || async { seq_loop(1).len() },
        ProfileOptions::new()
            .pattern(only_here())
            .device(Capture::default()),
    )
    .unwrap();
    assert!(printed.print_error.is_none());
    let returned = tprof::profile(
        || async { seq_loop(1).len() },
        ProfileOptions::new()
            .pattern(only_here())
            .report(Report::Return),
    )
    .unwrap();
    assert!(returned.print_error.is_none());
}

/// A profiled function whose traced work runs in a plain tokio task, outside any process.
async fn works_in_a_plain_task() -> usize {
    tokio::spawn(async { seq_loop(3).len() }).await.unwrap()
}

/// Traced calls outside any process are measured under `(outside processes)`: in the raw
/// profile and every export; tprof's tables stay as OTP prints them and say what they leave
/// out (no more `Trace is empty` and nothing else), and `outside_processes(true)` puts them in
/// the tables.
#[test]
fn calls_outside_processes_are_measured_and_never_dropped_silently() {
    for trace_type in [
        TraceType::CallCount,
        TraceType::CallTime,
        TraceType::CallMemory,
    ] {
        let out = Capture::default();
        let outcome = tprof::profile(
            works_in_a_plain_task,
            ProfileOptions::new()
                .trace_type(trace_type)
                .pattern(only_here())
                .call_tree(true)
                .device(out.clone()),
        )
        .unwrap();
        assert_eq!(outcome.result, Ok(3));
        let profile = &outcome.profile;
        let seq = profile.function("seq_loop").expect("measured");
        assert_eq!(seq.entries.len(), 1, "{trace_type}: {seq:?}");
        let Group::Process(outside) = seq.entries[0].group else {
            panic!("{trace_type}: {seq:?}");
        };
        assert!(outside.is_outside(), "{trace_type}: {outside}");
        assert_eq!(seq.entries[0].calls, 1);
        if trace_type == TraceType::CallMemory {
            assert_eq!(seq.entries[0].measurement, 3 * 10 + 3);
        }
        let label = profile.group_label(seq.entries[0].group);
        assert!(label.starts_with(tprof::OUTSIDE_PROCESSES), "{label}");
        // The text: nothing of it in the tables, and a line saying so.
        let text = out.text();
        assert!(text.contains("Trace is empty"), "{trace_type}: {text}");
        assert!(
            text.contains(
                "(outside processes): 1 call made outside any process not in these tables"
            ),
            "{trace_type}: {text}"
        );
        // Every export shows it.
        // (Folded stacks spell spaces as underscores.)
        for (format, label) in [
            (tprof::export::Format::Folded, "(outside_processes)"),
            (tprof::export::Format::Json, tprof::OUTSIDE_PROCESSES),
            (tprof::export::Format::Speedscope, tprof::OUTSIDE_PROCESSES),
        ] {
            let mut exported = Vec::new();
            tprof::export::write(format, profile, &mut exported).unwrap();
            let exported = String::from_utf8(exported).unwrap();
            assert!(
                exported.contains(label) && exported.contains("seq_loop"),
                "{trace_type} {format:?}: {exported}"
            );
        }
        let rich = tprof::rich_report(profile);
        assert!(rich.contains(tprof::OUTSIDE_PROCESSES), "{rich}");
        // Its own table, headed by its pid and name, lists the call (call_count too).
        let heading = format!("\n{outside} {label}\n");
        let table = rich.split(&heading).nth(1).unwrap_or_default();
        assert!(table.contains("seq_loop/1"), "{trace_type}: {rich}");
        // Asked for, they are in the tables, as a group of their own.
        let out = Capture::default();
        tprof::profile(
            works_in_a_plain_task,
            ProfileOptions::new()
                .trace_type(trace_type)
                .pattern(only_here())
                .outside_processes(true)
                .device(out.clone()),
        )
        .unwrap();
        let text = out.text();
        assert!(
            text.contains("****** (outside processes) <"),
            "{trace_type}: {text}"
        );
        assert!(text.contains("seq_loop/1"), "{trace_type}: {text}");
        assert!(
            !text.contains("not in these tables"),
            "{trace_type}: {text}"
        );
    }
}

/// Call-time percentiles of calls outside processes are their thread's group's, as their
/// figures are: the rich report shows them beside them, and an archive keeps them.
#[test]
fn percentiles_of_calls_outside_processes_are_their_groups_and_archived() {
    let outcome = tprof::profile(
        works_in_a_plain_task,
        ProfileOptions::new()
            .trace_type(TraceType::CallTime)
            .pattern(only_here())
            .percentiles(true)
            .report(Report::Return),
    )
    .unwrap();
    let profile = &outcome.profile;
    let seq = profile.function("seq_loop").expect("measured");
    let group = seq.entries[0].group;
    let Group::Process(outside) = group else {
        panic!("{seq:?}");
    };
    assert!(outside.is_outside(), "{outside}");
    let p: Vec<_> = profile
        .percentiles
        .iter()
        .filter(|p| p.function.name == "seq_loop")
        .collect();
    assert_eq!(p.len(), 1, "{:?}", profile.percentiles);
    assert_eq!((p[0].group, p[0].calls), (group, 1));
    let rich = tprof::rich_report(profile);
    let table = rich
        .split(&format!("\n{outside} {}\n", profile.group_label(group)))
        .nth(1)
        .unwrap_or_default();
    assert!(table.contains("p99 (us)"), "{rich}");
    let mut bytes = Vec::new();
    tprof::archive::write(profile, &mut bytes).unwrap();
    assert_eq!(&tprof::archive::read(&mut &bytes[..]).unwrap(), profile);
}

/// Inside a `Runtime::block_on` of either flavour the blocking form would block the thread
/// that drives the block_on's future: it is refused, as the docs promise, and names the async
/// form.
#[test]
fn the_blocking_form_inside_a_runtime_block_on_is_an_error_naming_the_async_form() {
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (flavour, rt) in [("multi_thread", multi), ("current_thread", current)] {
        let got = rt.block_on(async { tprof::profile(|| async { 1 }, ProfileOptions::new()) });
        assert!(
            matches!(
                got,
                Err(tprof::ProfileError::InAsyncContext {
                    function: "tprof::profile",
                    ..
                })
            ),
            "{flavour}: {:?}",
            got.map(|o| o.result)
        );
    }
}
