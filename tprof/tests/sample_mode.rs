//! Sample mode through `tprof::profile`: the profile holds the samples, under the right
//! process and traced stack, and the report is Julia's tree.

use std::sync::{Arc, Mutex};

#[cfg(target_os = "linux")]
use runtime::sample::SampleOptions;
#[cfg(target_os = "linux")]
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

#[cfg(target_os = "linux")]
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
            // A sample with no frame at all (taken in the poll before its first traced call,
            // where the native walk found nothing either) is not in busy.
            let Some(stack) = s.stack else {
                return false;
            };
            let names: Vec<String> = set
                .frames_of(stack)
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
    // The report is Julia's tree, after what the CPU samples could see (the mechanism, the
    // share captured, the rate taken beside the rate asked) and any warning of it.
    let text = String::from_utf8(printed.0.lock().expect("buffer").clone()).expect("utf-8");
    assert!(text.starts_with("CPU samples by "), "{text}");
    assert!(
        text.contains("\nOverhead ╎ [+additional indent] Count File:Line; Function\n"),
        "{text}"
    );
    assert!(text.contains("sample_mode::busy/1"), "{text}");
    let _ = Report::Return;
}

#[test]
fn the_report_of_a_sampled_profile_is_laid_out_as_asked_and_matches_its_samples() {
    use tprof::sample_report::{self, GroupBy, PrintOptions, ReportFormat, callers};
    let printed = Buffer::default();
    let options = PrintOptions::new()
        .groupby(GroupBy::Process)
        .format(ReportFormat::Both)
        .native(false);
    let outcome = tprof::profile(
        || async { work().await },
        ProfileOptions::new()
            .sample(SampleOptions::new().hz(997))
            .sample_report(options.clone())
            .device(printed.clone()),
    )
    .expect("profiled");
    assert!(outcome.result.is_ok());
    let profile = &outcome.profile;
    let text = String::from_utf8(printed.0.lock().expect("buffer").clone()).expect("utf-8");
    // What was printed is the report of the profile returned.
    let mut again = Vec::new();
    sample_report::print(&mut again, profile, &options).expect("printed");
    assert_eq!(text, String::from_utf8(again).expect("utf-8"));
    // The profiled process's group counts its samples.
    let pid = profile.processes[0].pid;
    let weight: f64 = profile
        .samples
        .samples
        .iter()
        .filter(|s| s.pid == Some(pid))
        .map(|s| s.weight)
        .sum();
    let head = format!("Process {pid} Total snapshots: {}. ", weight.round());
    let at = text.find(&head).unwrap_or_else(|| panic!("{head}: {text}"));
    // Below it, work, then busy one level deeper; native frames hidden.
    let tree: Vec<&str> = text[at..]
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    let work = tree
        .iter()
        .position(|l| l.ends_with("; sample_mode::work/0"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        tree[work + 1..]
            .iter()
            .any(|l| l.contains("╎ ") && l.ends_with("; sample_mode::busy/1")),
        "{text}"
    );
    // Samples of the process outside its traced frames count on a line of their own.
    assert!(
        tree.iter()
            .all(|l| l.contains("sample_mode::") || l.ends_with("[hidden frames]")),
        "{text}"
    );
    // busy was called by work.
    let who = callers(profile, "busy", &options);
    assert_eq!(who[0].function, "sample_mode::work/0", "{who:?}");
}

/// A process seen only in wall samples is known by the registered name they saw.
#[test]
fn a_process_seen_only_in_wall_samples_is_known_by_its_name() {
    use runtime::sample::{SampleSnapshot, SnapshotSample};
    let sample = |pid: &str, name: Option<&str>| SnapshotSample {
        pid: Some(pid.to_owned()),
        thread: None,
        time_ns: 0,
        weight: 1.0,
        stack: None,
        state: Some("receive".to_owned()),
        mailbox_len: 0,
        registered_name: name.map(str::to_owned),
        callee: None,
        size: 0,
        live: false,
    };
    let snapshot = runtime::trace::Snapshot {
        node: 3,
        samples: Some(SampleSnapshot {
            sampler: "wall".to_owned(),
            hz: 10,
            samples: vec![sample("<3.1.1>", Some("cache")), sample("<3.2.1>", None)],
            ..SampleSnapshot::default()
        }),
        ..runtime::trace::Snapshot::default()
    };
    let profile = tprof::Profile::from_snapshot(&snapshot, tprof::TraceType::CallCount, &[]);
    let names: Vec<(String, Option<String>)> = profile
        .processes
        .iter()
        .map(|p| (p.pid.to_string(), p.name.clone()))
        .collect();
    assert_eq!(
        names,
        [
            ("<3.1.1>".to_owned(), Some("cache".to_owned())),
            ("<3.2.1>".to_owned(), None)
        ]
    );
}

/// A sample session folds the processes that have ended: their calls come as the snapshot's
/// call counts, and the rows of those its samples name stay, with no figures. The profile's
/// calls per function are the two together, and a folded process keeps its name.
#[test]
fn a_sample_profile_counts_the_calls_of_folded_processes_and_names_them() {
    use runtime::sample::{SampleSnapshot, SnapshotSample};
    use runtime::trace::{SnapshotFigures, SnapshotFunction, SnapshotProcess};
    let process = |pid: &str, name: Option<&str>, calls: u64| SnapshotProcess {
        pid: pid.to_owned(),
        initial_call: "handler".to_owned(),
        registered_name: name.map(str::to_owned),
        functions: if calls > 0 {
            vec![SnapshotFigures {
                id: 0,
                calls,
                ..SnapshotFigures::default()
            }]
        } else {
            Vec::new()
        },
        paths: Vec::new(),
        events: Vec::new(),
        events_dropped: 0,
        percentiles: Vec::new(),
    };
    let sample = |pid: &str| SnapshotSample {
        pid: Some(pid.to_owned()),
        thread: None,
        time_ns: 0,
        weight: 1.0,
        stack: None,
        state: None,
        mailbox_len: 0,
        registered_name: None,
        callee: None,
        size: 0,
        live: false,
    };
    let snapshot = runtime::trace::Snapshot {
        node: 3,
        functions: vec![SnapshotFunction {
            module: "app".to_owned(),
            name: "handle".to_owned(),
            arity: 1,
            file: "app.rs".to_owned(),
            line: 1,
        }],
        // Ended and folded: 1,000 calls, one of the processes sampled.
        call_counts: vec![(0, 1_000)],
        processes: vec![
            process("<3.1.1>", Some("cache"), 0),
            process("<3.2.1>", None, 7),
        ],
        samples: Some(SampleSnapshot {
            sampler: "cpu".to_owned(),
            hz: 99,
            samples: vec![sample("<3.1.1>"), sample("<3.2.1>")],
            ..SampleSnapshot::default()
        }),
        ..runtime::trace::Snapshot::default()
    };
    let profile = tprof::Profile::from_snapshot(&snapshot, tprof::TraceType::CallCount, &[]);
    let handle = profile.function("handle").expect("handle counted");
    let calls: u64 = handle.entries.iter().map(|e| e.calls).sum();
    assert_eq!(calls, 1_007);
    let names: Vec<(String, Option<String>, String)> = profile
        .processes
        .iter()
        .map(|p| (p.pid.to_string(), p.name.clone(), p.initial_call.clone()))
        .collect();
    assert_eq!(
        names,
        [
            (
                "<3.1.1>".to_owned(),
                Some("cache".to_owned()),
                "handler".to_owned()
            ),
            ("<3.2.1>".to_owned(), None, "handler".to_owned())
        ]
    );
}

#[runtime::traced]
async fn idles() {
    let _ = runtime::receive::<u64>().await;
}

/// A wall-sampled profile labels the processes it sampled with their registered names and
/// initial calls, children of the profiled function included.
#[test]
fn a_wall_profile_names_the_processes_and_their_initial_calls() {
    use runtime::sample::{SampleOptions, Sampler};
    let outcome = tprof::profile(
        || async {
            let child = runtime::spawn_opt(
                idles(),
                runtime::SpawnOptions::new()
                    .name("idler")
                    .initial_call("sample_mode::idles"),
            )
            .expect("spawn")
            .pid;
            // Long enough for many ticks at 500 Hz, however slow the machine.
            let _ = runtime::receive_timeout::<u64>(std::time::Duration::from_millis(300)).await;
            runtime::send(child, 1u64);
            child
        },
        tprof::ProfileOptions::new()
            .sample(SampleOptions::new().sampler(Sampler::Wall).hz(500))
            .report(tprof::Report::Return),
    )
    .expect("profiled");
    let child = outcome.result.expect("ran");
    let record = outcome
        .profile
        .processes
        .iter()
        .find(|p| p.pid == child)
        .expect("the child has a record");
    assert_eq!(record.name.as_deref(), Some("idler"));
    assert_eq!(record.initial_call, "sample_mode::idles");
    assert!(
        outcome
            .profile
            .samples
            .samples
            .iter()
            .any(|s| s.pid == Some(child)),
        "the child was sampled"
    );
}

/// The runtime's count of frees of sampled blocks it lost is the profile source's.
#[test]
fn a_snapshots_lost_frees_are_its_sources() {
    use runtime::sample::SampleSnapshot;
    let snapshot = runtime::trace::Snapshot {
        node: 2,
        samples: Some(SampleSnapshot {
            sampler: "alloc".to_owned(),
            lost_frees: 7,
            ..SampleSnapshot::default()
        }),
        ..runtime::trace::Snapshot::default()
    };
    let profile = tprof::Profile::from_snapshot(&snapshot, tprof::TraceType::CallCount, &[]);
    assert_eq!(profile.samples.sources.len(), 1);
    assert_eq!(profile.samples.sources[0].lost_frees, 7);
    assert_eq!(profile.samples.lost_frees(), 7);
}

/// A gen_server that sleeps on each call.
struct Oracle;

impl runtime::gen_server::GenServer for Oracle {
    type Args = ();
    type Call = ();
    type Reply = ();
    type Cast = ();

    async fn init((): ()) -> Result<Self, runtime::ExitReason> {
        Ok(Oracle)
    }

    async fn handle_call(
        &mut self,
        (): (),
        _: &mut runtime::gen_server::Caller<()>,
    ) -> runtime::gen_server::CallReply<()> {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        runtime::gen_server::CallReply::Reply(())
    }
}

/// A real process calling a gen_server that sleeps, sampled by the wall sampler: its samples
/// in `call` know the server as their callee, and the report's WAITING ON names it, by pid and
/// registered name, and on the caller's row.
#[test]
fn a_wall_report_of_a_live_call_names_the_server_waited_on() {
    use runtime::gen_server::{self, StartOptions};
    use runtime::sample::{SampleOptions, Sampler};
    use tprof::samples::WaitState;
    let outcome = tprof::profile(
        || async {
            let oracle = gen_server::start::<Oracle>((), StartOptions::new().name("oracle"))
                .await
                .expect("started");
            // 10 calls of 30 ms: many ticks in call at 500 Hz, however slow the machine.
            for _ in 0..10 {
                oracle
                    .call((), std::time::Duration::from_secs(30))
                    .await
                    .expect("answered");
            }
            (runtime::self_pid(), oracle.pid())
        },
        tprof::ProfileOptions::new()
            .sample(SampleOptions::new().sampler(Sampler::Wall).hz(500))
            .report(tprof::Report::Return),
    )
    .expect("profiled");
    let (caller, oracle) = outcome.result.expect("ran");
    let in_call: Vec<_> = outcome
        .profile
        .samples
        .samples
        .iter()
        .filter(|s| s.pid == Some(caller) && s.state == Some(WaitState::Call))
        .collect();
    assert!(!in_call.is_empty(), "the caller was sampled in its calls");
    assert!(
        in_call.iter().all(|s| s.callee == Some(oracle)),
        "every tick in call waits on the server: {:?}",
        in_call.iter().map(|s| s.callee).collect::<Vec<_>>()
    );
    let mut text = Vec::new();
    tprof::sample_report::print(
        &mut text,
        &outcome.profile,
        &tprof::sample_report::PrintOptions::new(),
    )
    .expect("printed");
    let text = String::from_utf8(text).expect("utf-8");
    let named = format!("{oracle} (oracle)");
    let waiting_on = text
        .lines()
        .skip_while(|l| !l.starts_with("WAITING ON"))
        .nth(1)
        .unwrap_or_else(|| panic!("no WAITING ON table in {text}"));
    assert!(waiting_on.starts_with(&named), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with(&caller.to_string()))
        .unwrap_or_else(|| panic!("no row of {caller} in {text}"));
    assert!(row.trim_end().ends_with(&named), "{text}");
}
