//! The CPU sampler on a 2-worker node: each sample is labelled with the process being polled
//! and its traced stack, and the native stack names untraced code.
#![cfg(target_os = "linux")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use runtime::sample::{SampleData, SampleOptions, Sampler, symbolize};
use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{Node, Pid};

/// One CPU sample session at a time in this binary: the CPU sampler has one rate per program.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[inline(never)]
fn spin_untraced(n: u64) -> u64 {
    let mut x = std::hint::black_box(n);
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// Spins inside a traced function (the spinning itself untraced, inlined or not).
#[runtime::traced]
fn spin_traced(n: u64) -> u64 {
    let mut x = std::hint::black_box(n);
    for i in 0..n {
        x = x.wrapping_add(i).rotate_left(7) ^ 0x9e37;
    }
    std::hint::black_box(x)
}

#[runtime::traced]
async fn traced_worker(stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        spin_traced(200_000);
        tokio::task::yield_now().await;
    }
}

#[runtime::traced]
async fn untraced_worker(stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        spin_untraced(200_000);
        tokio::task::yield_now().await;
    }
}

fn count(data: &SampleData, pid: Pid) -> usize {
    data.samples.iter().filter(|s| s.pid == Some(pid)).count()
}

/// Samples until each of `pids` has `at_least` samples, or fails after a generous bound.
fn sample_until(
    session: &runtime::sample::SampleSession,
    pids: &[Pid],
    at_least: usize,
) -> SampleData {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let data = session.samples();
        if pids.iter().all(|p| count(&data, *p) >= at_least) {
            return data;
        }
        assert!(
            Instant::now() < deadline,
            "too few samples after 120 s: {:?}",
            pids.iter().map(|p| count(&data, *p)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn samples_name_the_process_its_traced_stack_and_untraced_code() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(SampleOptions::new().hz(499))
        .expect("sample session");
    session
        .trace()
        .set_pattern(&TracePattern::module(module_path!()))
        .expect("pattern");
    session
        .trace()
        .enable_trace(ProcessSpec::New, true)
        .expect("flags");
    let stop = Arc::new(AtomicBool::new(false));
    let traced = node.spawn(traced_worker(Arc::clone(&stop))).expect("spawn");
    let untraced = node
        .spawn(untraced_worker(Arc::clone(&stop)))
        .expect("spawn");
    let data = sample_until(&session, &[traced, untraced], 50);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(data.sampler, Sampler::Cpu);
    assert!(
        data.native_walked,
        "this workspace builds with frame pointers"
    );

    // The traced worker's samples: mostly inside spin_traced, under traced_worker.
    let of_traced: Vec<_> = data
        .samples
        .iter()
        .filter(|s| s.pid == Some(traced))
        .collect();
    let in_spin = of_traced
        .iter()
        .filter(|s| {
            let names: Vec<&str> = s.traced.iter().map(|cs| cs.function()).collect();
            names == ["traced_worker", "spin_traced"]
        })
        .count();
    assert!(
        in_spin * 10 >= of_traced.len() * 7,
        "{in_spin} of {} samples of the traced worker in traced_worker > spin_traced",
        of_traced.len()
    );

    // The untraced worker's samples: traced stack [untraced_worker], native leaf in
    // spin_untraced.
    let of_untraced: Vec<_> = data
        .samples
        .iter()
        .filter(|s| s.pid == Some(untraced))
        .collect();
    let named = of_untraced
        .iter()
        .filter(|s| {
            let traced_ok =
                s.traced.iter().map(|cs| cs.function()).collect::<Vec<_>>() == ["untraced_worker"];
            // The leaf, or (in a debug build, whose arithmetic and iterators are calls) a
            // caller just above it.
            let near_leaf = s
                .native
                .iter()
                .take(5)
                .enumerate()
                .flat_map(|(i, a)| symbolize(*a, i > 0))
                .collect::<Vec<_>>();
            traced_ok
                && near_leaf
                    .iter()
                    .any(|f| f.function.contains("spin_untraced"))
        })
        .count();
    assert!(
        named * 10 >= of_untraced.len() * 7,
        "{named} of {} samples of the untraced worker in spin_untraced under untraced_worker",
        of_untraced.len()
    );

    // Native stacks are walked: a sample in spin_untraced has its callers too.
    let deep = of_untraced.iter().filter(|s| s.native.len() >= 3).count();
    assert!(
        deep * 2 >= of_untraced.len(),
        "{deep} of {} walked",
        of_untraced.len()
    );

    // Every sample has a thread the data describes, and weights of at least one period.
    for s in &data.samples {
        let t = s.thread.expect("a CPU sample has a thread");
        assert!(data.threads.iter().any(|th| th.index == t));
        assert!(s.weight >= 1.0);
    }
}

/// Processes the session does not trace are not sampled for it, and a cleared session starts
/// again from nothing.
#[test]
fn only_traced_processes_are_sampled_and_clear_forgets() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(SampleOptions::new().hz(499))
        .expect("sample session");
    session
        .trace()
        .set_pattern(&TracePattern::module(module_path!()))
        .expect("pattern");
    let stop = Arc::new(AtomicBool::new(false));
    // Spawned before any flag: not sampled.
    let unflagged = node
        .spawn(untraced_worker(Arc::clone(&stop)))
        .expect("spawn");
    session
        .trace()
        .enable_trace(ProcessSpec::New, true)
        .expect("flags");
    let flagged = node.spawn(traced_worker(Arc::clone(&stop))).expect("spawn");
    let data = sample_until(&session, &[flagged], 30);
    assert_eq!(
        count(&data, unflagged),
        0,
        "an untraced process is never sampled"
    );
    session.clear();
    let after = session.samples();
    assert!(
        after.samples.len() < data.samples.len(),
        "clear forgets what was taken"
    );
    stop.store(true, Ordering::Relaxed);
}

/// A buffer of a few samples fills, says so, counts what it drops, and the program runs on.
#[test]
fn a_full_buffer_counts_drops_and_the_program_runs_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::builder().worker_threads(2).build().expect("node");
    let session = node
        .sample_session(SampleOptions::new().hz(499).n(5))
        .expect("sample session");
    session
        .trace()
        .set_pattern(&TracePattern::module(module_path!()))
        .expect("pattern");
    session
        .trace()
        .enable_trace(ProcessSpec::New, true)
        .expect("flags");
    let stop = Arc::new(AtomicBool::new(false));
    let worker = node.spawn(traced_worker(Arc::clone(&stop))).expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(120);
    let data = loop {
        let data = session.samples();
        if data.dropped >= 10.0 {
            break data;
        }
        assert!(
            Instant::now() < deadline,
            "nothing dropped: {}",
            data.dropped
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(data.samples.len(), 5);
    assert_eq!(data.capacity, 5);
    // Still running: it answers.
    assert!(node.process_info(worker).is_some());
    stop.store(true, Ordering::Relaxed);
}

/// Options out of range are refused with a message that says the range.
#[test]
fn bad_options_are_refused() {
    let node = Node::builder().current_thread().build().expect("node");
    let e = node
        .sample_session(SampleOptions::new().hz(20_000))
        .expect_err("too fast");
    assert!(e.to_string().contains("1 to 10000 Hz"), "{e}");
    let e = node
        .sample_session(SampleOptions::new().n(0))
        .expect_err("no buffer");
    assert!(e.to_string().contains("n of 1 or more"), "{e}");
}
