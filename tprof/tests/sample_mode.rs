//! Sample mode through `tprof::profile`: the profile holds the samples, under the right
//! process and traced stack, and the report is Julia's tree.
#![cfg(target_os = "linux")]

use std::sync::{Arc, Mutex};

use runtime::sample::SampleOptions;
use tprof::{ProfileOptions, Report};

#[runtime::traced]
fn busy(n: u64) -> u64 {
    (0..n).fold(0u64, |a, i| a.rotate_left(5) ^ i.wrapping_mul(31))
}

#[runtime::traced]
async fn work() -> u64 {
    let mut total = 0;
    for _ in 0..400 {
        total ^= busy(40_000);
        tokio::task::yield_now().await;
    }
    total
}

/// A shared buffer to print into.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_sampled_profile_names_the_process_and_its_traced_calls() {
    let printed = Buffer::default();
    let outcome = tprof::profile(
        || async { work().await },
        ProfileOptions::new()
            .sample(SampleOptions::new().hz(997))
            .device(printed.clone()),
    )
    .expect("profiled");
    assert!(outcome.result.is_ok());
    let profile = &outcome.profile;
    let set = &profile.samples;
    assert_eq!(set.sources.len(), 1);
    assert!(!set.samples.is_empty(), "samples were taken");
    // Most samples of the profiled process are inside busy, under work.
    let pid = profile.processes[0].pid;
    let of_it: Vec<_> = set.samples.iter().filter(|s| s.pid == Some(pid)).collect();
    let in_busy = of_it
        .iter()
        .filter(|s| {
            let names: Vec<String> = set
                .frames_of(s.stack.expect("a stack"))
                .into_iter()
                .filter(|f| set.frames[*f as usize].function.is_some())
                .map(|f| set.frame_name(&profile.function_table, f))
                .collect();
            names == ["sample_mode::work/0", "sample_mode::busy/1"]
        })
        .count();
    assert!(
        in_busy * 10 >= of_it.len() * 6,
        "{in_busy} of {} samples in work > busy",
        of_it.len()
    );
    // The call counts came along.
    let busy = profile.function("busy").expect("busy counted");
    assert_eq!(busy.entries[0].calls, 400);
    // The report is Julia's tree.
    let text = String::from_utf8(printed.0.lock().expect("buffer").clone()).expect("utf-8");
    assert!(
        text.starts_with("Overhead ╎ [+additional indent] Count File:Line; Function\n"),
        "{text}"
    );
    assert!(text.contains("sample_mode::busy/1"), "{text}");
    let _ = Report::Return;
}
