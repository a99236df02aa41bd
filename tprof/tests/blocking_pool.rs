//! The blocking entry points (`profile`, `profile_on`, `allocations`, `allocations_with`) on
//! the threads of a tokio runtime: they run where tokio lets a thread block (its blocking pool:
//! `spawn_blocking`, `block_in_place`) and are refused, with the async form named, on the
//! threads that run async code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use runtime::trace::TracePattern;
use runtime::traced;
use tprof::{Outcome, ProfileError, ProfileOptions, Report};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

#[traced]
fn double(n: u64) -> u64 {
    n * 2
}

/// One allocation of 8 bytes.
#[traced]
fn boxed(n: u64) -> Box<u64> {
    Box::new(n)
}

fn count_doubles() -> ProfileOptions {
    ProfileOptions::new()
        .pattern(TracePattern::function(module_path!(), "double"))
        .report(Report::Return)
}

async fn ten_doubles() -> u64 {
    (0..10).map(double).sum()
}

fn profile_ten_doubles() -> Result<Outcome<u64>, ProfileError> {
    tprof::profile(ten_doubles, count_doubles())
}

#[track_caller]
fn assert_ten_doubles(outcome: Result<Outcome<u64>, ProfileError>) {
    let outcome = outcome.unwrap();
    assert_eq!(outcome.result, Ok(90));
    assert_eq!(
        outcome.profile.function("double").unwrap().entries[0].calls,
        10
    );
}

#[track_caller]
fn assert_refused(outcome: Result<Outcome<u64>, ProfileError>, function: &str) {
    match outcome {
        Err(err @ ProfileError::InAsyncContext { function: f, .. }) => {
            assert_eq!(f, function);
            let text = err.to_string();
            assert!(text.contains("tokio::task::spawn_blocking"), "{text}");
        }
        Err(other) => panic!("{function}: {other}"),
        Ok(_) => panic!("{function} ran on a thread that runs async code"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_runs_in_spawn_blocking_on_a_multi_thread_runtime() {
    let outcome = tokio::task::spawn_blocking(profile_ten_doubles)
        .await
        .unwrap();
    assert_ten_doubles(outcome);
}

#[tokio::test]
async fn profile_runs_in_spawn_blocking_on_a_current_thread_runtime() {
    let outcome = tokio::task::spawn_blocking(profile_ten_doubles)
        .await
        .unwrap();
    assert_ten_doubles(outcome);
}

#[test]
fn profile_runs_in_spawn_blocking_on_a_runtime_built_by_hand() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let outcome = rt.block_on(rt.spawn_blocking(profile_ten_doubles)).unwrap();
    assert_ten_doubles(outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_runs_in_block_in_place_on_a_worker() {
    let outcome = tokio::spawn(async { tokio::task::block_in_place(profile_ten_doubles) })
        .await
        .unwrap();
    assert_ten_doubles(outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_in_a_block_on_inside_spawn_blocking_never_panics() {
    // The thread is inside the runtime again (Handle::block_on), but it runs this one future
    // only: tprof blocks on a thread of its own, where tokio's nested-runtime check cannot
    // fire.
    let outcome = tokio::task::spawn_blocking(|| {
        tokio::runtime::Handle::current().block_on(async { profile_ten_doubles() })
    })
    .await
    .unwrap();
    assert_ten_doubles(outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_on_runs_in_spawn_blocking_on_its_own_node_and_on_the_tests_runtime() {
    let own = Arc::new(runtime::Node::builder().worker_threads(1).build().unwrap());
    let outcome =
        tokio::task::spawn_blocking(move || tprof::profile_on(&own, ten_doubles, count_doubles()))
            .await
            .unwrap();
    assert_ten_doubles(outcome);

    let here = runtime::Node::start_on(tokio::runtime::Handle::current());
    let outcome =
        tokio::task::spawn_blocking(move || tprof::profile_on(&here, ten_doubles, count_doubles()))
            .await
            .unwrap();
    assert_ten_doubles(outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocations_runs_in_spawn_blocking() {
    let report = tokio::task::spawn_blocking(|| tprof::allocations(|| async { boxed(7) }))
        .await
        .unwrap();
    assert_eq!(report.result.as_deref(), Ok(&7));
    report.function("boxed").calls(1).blocks(1).bytes(8);
}

#[tokio::test]
async fn allocations_with_runs_in_spawn_blocking_on_a_current_thread_runtime() {
    let report = tokio::task::spawn_blocking(|| {
        tprof::allocations_with(
            ProfileOptions::new().pattern(TracePattern::function(module_path!(), "boxed")),
            || async { (boxed(1), boxed(2)) },
        )
    })
    .await
    .unwrap();
    assert!(report.result.is_ok());
    report.function("boxed").calls(2).blocks(2).bytes(16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_thread_runtime_the_body_and_the_tasks_are_refused() {
    // The thread of the runtime's block_on (a #[tokio::main] body).
    assert_refused(profile_ten_doubles(), "tprof::profile");
    // A worker, in a task.
    let in_task = tokio::spawn(async { profile_ten_doubles() }).await.unwrap();
    assert_refused(in_task, "tprof::profile");
    let node = Arc::new(runtime::Node::builder().worker_threads(1).build().unwrap());
    let on = tokio::spawn(async move { tprof::profile_on(&node, ten_doubles, count_doubles()) })
        .await
        .unwrap();
    assert_refused(on, "tprof::profile_on");
}

#[tokio::test]
async fn on_a_current_thread_runtime_the_tasks_are_refused() {
    let in_task = tokio::spawn(async { profile_ten_doubles() }).await.unwrap();
    assert_refused(in_task, "tprof::profile");
}

#[tokio::test]
async fn allocations_in_a_task_still_panics_naming_the_async_form() {
    let failure = tokio::spawn(async { tprof::allocations(|| async { boxed(1) }) })
        .await
        .unwrap_err();
    let panic = failure.into_panic();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("call `tprof::allocations_async(..).await` there instead")
            && msg.contains("tokio::task::spawn_blocking"),
        "{msg}"
    );
}

#[test]
fn in_a_process_the_blocking_helper_of_the_runtime_may_profile() {
    let node = runtime::Node::builder().worker_threads(1).build().unwrap();
    let outcome = node
        .run(async {
            runtime::spawn_blocking(profile_ten_doubles)
                .unwrap()
                .await
                .unwrap()
        })
        .unwrap();
    assert_ten_doubles(outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_tokio_cannot_tell_that_blocking_is_allowed_it_is_refused() {
    // block_in_place from the block_on's own future (here, the test's body) looks like that
    // future to tokio's public API: refused, with spawn_blocking named as the way out.
    assert_refused(
        tokio::task::block_in_place(profile_ten_doubles),
        "tprof::profile",
    );
    // So does a bare Handle::enter guard, on a thread of the program's.
    let runtime = tokio::runtime::Handle::current();
    let entered = std::thread::Builder::new()
        .name("entered".to_owned())
        .spawn(move || {
            let _entered = runtime.enter();
            profile_ten_doubles()
        })
        .unwrap()
        .join()
        .unwrap();
    assert_refused(entered, "tprof::profile");
}
