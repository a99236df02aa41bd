//! Server-aided profiling: start, patterns, process flags, pause / resume / restart, collect.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{Node, Pid, receive, traced};
use tprof::{ProfileOptions, Report, ServerError, ServerOptions, Tprof, TraceType};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// Allocates `n` words.
#[traced]
fn work(n: usize) -> usize {
    std::hint::black_box(Vec::<u64>::with_capacity(n)).capacity()
}

#[traced]
fn other() -> u32 {
    7
}

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

fn here() -> TracePattern {
    TracePattern::module(module_path!())
}

/// Spawns a process that calls `work(n)` `times` times, and waits for it to end.
fn run_work(node: &Node, times: usize, n: usize) -> Pid {
    node.run(async move {
        for _ in 0..times {
            work(n);
        }
        runtime::self_pid()
    })
    .unwrap()
}

#[test]
fn one_default_server_per_node_and_named_ones_beside_it() {
    let node = node();
    let first = node
        .block_on(Tprof::start(&node, ServerOptions::new()))
        .unwrap();
    let second = node.block_on(Tprof::start(&node, ServerOptions::new()));
    match second {
        Err(ServerError::AlreadyStarted(running)) => assert_eq!(running, first),
        other => panic!("expected AlreadyStarted, got {other:?}"),
    }
    assert_eq!(
        Tprof::whereis(&node, tprof::DEFAULT_NAME),
        Some(first.clone())
    );
    let named = node
        .block_on(Tprof::start(&node, ServerOptions::new().name("mine")))
        .unwrap();
    assert_ne!(named.pid(), first.pid());
    node.block_on(first.stop()).unwrap();
    assert!(matches!(
        node.block_on(first.collect()),
        Err(ServerError::Call(_))
    ));
    // The named one still runs.
    node.block_on(named.set_pattern(here())).unwrap();
}

/// `stop` returns once the server has ended, as OTP's `gen_server:stop` does: its name is free
/// and its session closed, so a `start` right after it starts a new server. (It used to return
/// on the server's reply, while the server was still dropping its session — slow on a node of
/// many processes — and with its name still registered.)
#[test]
fn stop_returns_once_the_server_has_ended() {
    let node = node();
    // Many processes: closing a session visits each, which makes the stop take a while.
    let idle: Vec<Pid> = (0..20_000)
        .map(|_| node.spawn(async { receive::<()>().await }).unwrap())
        .collect();
    for round in 0..20 {
        let tprof = node
            .block_on(Tprof::start(&node, ServerOptions::new()))
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        node.block_on(tprof.set_pattern(here())).unwrap();
        node.block_on(tprof.stop()).unwrap();
        assert_eq!(node.whereis(tprof::DEFAULT_NAME), None, "round {round}");
        assert!(node.process_info(tprof.pid()).is_none(), "round {round}");
        assert!(
            matches!(node.block_on(tprof.stop()), Err(ServerError::Stop(_))),
            "round {round}"
        );
    }
    for pid in idle {
        node.send(pid, ());
    }
}

/// A gen_server that answers every call with its request.
struct Echo;

impl runtime::gen_server::GenServer for Echo {
    type Args = ();
    type Call = u32;
    type Reply = u32;
    type Cast = ();

    async fn init((): ()) -> Result<Echo, runtime::ExitReason> {
        Ok(Echo)
    }

    async fn handle_call(
        &mut self,
        request: u32,
        _from: &mut runtime::gen_server::Caller<u32>,
    ) -> runtime::gen_server::CallReply<u32> {
        runtime::gen_server::CallReply::Reply(request)
    }
}

/// A name taken by a process that is not a tprof server is not "a tprof server already runs":
/// the error says another process holds the name, and gives its pid.
#[test]
fn a_name_taken_by_another_process_is_not_a_running_tprof_server() {
    let node = node();
    let echo = node
        .block_on(runtime::gen_server::start_on::<Echo>(
            &node,
            (),
            runtime::gen_server::StartOptions::new().name("echo"),
        ))
        .unwrap()
        .pid();
    let started = node.block_on(Tprof::start(&node, ServerOptions::new().name("echo")));
    match started {
        Err(ServerError::NameTaken { ref name, pid }) => {
            assert_eq!(name, "echo");
            assert_eq!(pid, echo);
        }
        other => panic!("expected NameTaken, got {other:?}"),
    }
    let message = started.unwrap_err().to_string();
    assert!(message.contains(&echo.to_string()), "{message}");
    assert!(message.contains("not a tprof server"), "{message}");
    assert_eq!(Tprof::whereis(&node, "echo"), None);
}

#[test]
fn patterns_and_the_trace_map() {
    let node = node();
    let t = node
        .block_on(Tprof::start(&node, ServerOptions::new()))
        .unwrap();
    assert_eq!(node.block_on(t.set_pattern(here())).unwrap(), 2);
    let map = node.block_on(t.get_trace_map()).unwrap();
    assert_eq!(map.modules[module_path!()], vec![("other", 0), ("work", 1)]);
    assert_eq!(
        node.block_on(t.clear_pattern(TracePattern::function(module_path!(), "other")))
            .unwrap(),
        1
    );
    let err = node
        .block_on(t.set_pattern(TracePattern::function(module_path!(), "nope")))
        .unwrap_err();
    assert!(matches!(err, ServerError::Pattern(_)), "{err}");
    let err = node
        .block_on(t.clear_pattern(TracePattern::module("not::traced")))
        .unwrap_err();
    assert!(matches!(err, ServerError::Pattern(_)), "{err}");
}

#[test]
fn enable_trace_counts_and_failures_in_input_order() {
    let node = node();
    let t = node
        .block_on(Tprof::start(
            &node,
            ServerOptions::new().trace_type(TraceType::CallMemory),
        ))
        .unwrap();
    let alive = node
        .spawn(async {
            let () = receive().await;
        })
        .unwrap();
    node.register("alive", alive).unwrap();
    let dead = run_work(&node, 0, 0);
    let outcome = node
        .block_on(t.enable_trace(
            ProcessSpec::List(vec![
                ProcessSpec::Pid(dead),
                ProcessSpec::Name("alive".into()),
                ProcessSpec::Name("nobody".into()),
            ]),
            true,
        ))
        .unwrap();
    assert_eq!(outcome.count, 1);
    assert_eq!(outcome.failures.len(), 2);
    assert_eq!(outcome.failures[0].0, ProcessSpec::Pid(dead));
    assert_eq!(outcome.failures[1].0, ProcessSpec::Name("nobody".into()));
    node.send(alive, ());
}

#[test]
fn pause_keeps_collect_unchanged_and_restart_then_the_same_work_equals_the_first() {
    let node = node();
    let t = node
        .block_on(Tprof::start(
            &node,
            ServerOptions::new().trace_type(TraceType::CallMemory),
        ))
        .unwrap();
    node.block_on(t.set_pattern(here())).unwrap();
    node.block_on(t.enable_trace(ProcessSpec::New, true))
        .unwrap();
    run_work(&node, 3, 10);
    let first = node.block_on(t.collect()).unwrap();
    let f = first.function("work").unwrap();
    assert_eq!((f.entries[0].calls, f.entries[0].measurement), (3, 30));

    node.block_on(t.pause()).unwrap();
    assert!(matches!(
        node.block_on(t.pause()),
        Err(ServerError::NotRunning)
    ));
    run_work(&node, 5, 10);
    assert_eq!(
        node.block_on(t.collect()).unwrap(),
        first,
        "paused: unchanged"
    );
    node.block_on(t.resume()).unwrap();
    assert!(matches!(
        node.block_on(t.resume()),
        Err(ServerError::NotPaused)
    ));

    node.block_on(t.restart()).unwrap();
    assert!(
        node.block_on(t.collect())
            .unwrap()
            .functions
            .iter()
            .all(|f| f.entries.iter().all(|e| e.calls == 0))
    );
    let pid = run_work(&node, 3, 10);
    let again = node.block_on(t.collect()).unwrap();
    let f = again.function("work").unwrap();
    let e = f
        .entries
        .iter()
        .find(|e| e.group == tprof::Group::Process(pid))
        .unwrap();
    assert_eq!(
        (e.calls, e.measurement),
        (3, 30),
        "the same work, the same figures"
    );
}

#[test]
fn an_ad_hoc_run_during_a_server_run_leaves_its_data_alone() {
    let node = node();
    let t = node
        .block_on(Tprof::start(&node, ServerOptions::new()))
        .unwrap();
    // Sessions are independent but may overlap, as in OTP: a call both trace counts in both.
    // Here the server traces `work` and the ad-hoc run `other`.
    node.block_on(t.set_pattern(TracePattern::function(module_path!(), "work")))
        .unwrap();
    run_work(&node, 4, 1);
    let before = node.block_on(t.collect()).unwrap();
    assert_eq!(before.function("work").unwrap().entries[0].calls, 4);
    let adhoc = tprof::profile_on(
        &node,
        || async {
            for _ in 0..10 {
                other();
            }
        },
        ProfileOptions::new().pattern(here()).report(Report::Return),
    )
    .unwrap();
    assert_eq!(
        adhoc.profile.function("other").unwrap().entries[0].calls,
        10
    );
    assert!(adhoc.profile.function("work").is_none());
    let after = node.block_on(t.collect()).unwrap();
    assert_eq!(
        after, before,
        "the server's session saw nothing of the ad-hoc run"
    );
}

#[test]
fn collect_reads_while_processes_run() {
    let node = node();
    let t = node
        .block_on(Tprof::start(
            &node,
            ServerOptions::new().trace_type(TraceType::CallTime),
        ))
        .unwrap();
    node.block_on(t.set_pattern(here())).unwrap();
    node.block_on(t.enable_trace(ProcessSpec::New, true))
        .unwrap();
    let busy = node
        .spawn(async {
            loop {
                work(1);
                if runtime::receive_timeout::<()>(Duration::ZERO)
                    .await
                    .is_some()
                {
                    break;
                }
            }
        })
        .unwrap();
    let mut calls = 0;
    for _ in 0..2000 {
        calls = node
            .block_on(t.collect())
            .unwrap()
            .function("work")
            .map_or(0, |f| f.entries[0].calls);
        if calls >= 50 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(calls >= 50, "{calls}");
    node.send(busy, ());
}

#[test]
fn start_link_ties_the_server_to_its_caller() {
    let node = node();
    let ended = node.run(async {
        Tprof::start_link(ServerOptions::new().name("linked"))
            .await
            .unwrap();
        runtime::exit_self(runtime::ExitReason::custom("caller failed"))
    });
    assert_eq!(
        ended.unwrap_err(),
        runtime::ExitReason::custom("caller failed")
    );
    // The link takes the server down with its caller, and frees its name.
    let start = std::time::Instant::now();
    while Tprof::whereis(&node, "linked").is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the server outlived its caller"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    node.block_on(Tprof::start(&node, ServerOptions::new().name("linked")))
        .unwrap();
}

#[test]
fn a_server_records_percentiles_per_process_to_the_precision_asked_for() {
    let node = node();
    let wrong = node.block_on(Tprof::start(
        &node,
        ServerOptions::new()
            .trace_type(TraceType::CallTime)
            .percentiles(true)
            .percentile_precision(0),
    ));
    assert!(
        matches!(
            wrong,
            Err(ServerError::Session(
                runtime::trace::SessionError::HistogramPrecision {
                    significant_figures: 0
                }
            ))
        ),
        "{wrong:?}"
    );
    let tprof = node
        .block_on(Tprof::start(
            &node,
            ServerOptions::new()
                .name("precise")
                .trace_type(TraceType::CallTime)
                .percentiles(true)
                .percentile_precision(4),
        ))
        .unwrap();
    node.block_on(tprof.set_pattern(here())).unwrap();
    node.block_on(tprof.enable_trace(ProcessSpec::New, true))
        .unwrap();
    let a = run_work(&node, 3, 4);
    let b = run_work(&node, 2, 4);
    node.block_on(tprof.pause()).unwrap();
    let profile = node.block_on(tprof.collect()).unwrap();
    let calls: Vec<(tprof::Group, u64)> = profile
        .percentiles
        .iter()
        .filter(|p| p.function.name == "work")
        .map(|p| (p.group, p.calls))
        .collect();
    assert_eq!(
        calls,
        [(tprof::Group::Process(a), 3), (tprof::Group::Process(b), 2)]
    );
    node.block_on(tprof.stop()).unwrap();
}

/// The server measures calls made outside processes too (here in `block_on`, on this thread,
/// which belongs to the node meanwhile); its tables show them when started with
/// `outside_processes(true)`, and say what they leave out otherwise.
#[test]
fn a_server_measures_calls_outside_processes() {
    let node = node();
    for shown in [false, true] {
        let tprof = node
            .block_on(Tprof::start(
                &node,
                ServerOptions::new()
                    .trace_type(TraceType::CallMemory)
                    .outside_processes(shown),
            ))
            .unwrap();
        node.block_on(tprof.set_pattern(here())).unwrap();
        node.block_on(tprof.enable_trace(ProcessSpec::New, true))
            .unwrap();
        node.block_on(async { work(8) });
        run_work(&node, 1, 4);
        let profile = node.block_on(tprof.collect()).unwrap();
        assert_eq!(profile.outside_in_tables, shown);
        let entries = &profile.function("work").unwrap().entries;
        assert_eq!(entries.len(), 2, "{entries:?}");
        let text = tprof::format_to_string(&tprof::inspect(
            &profile,
            tprof::Aggregate::Process,
            tprof::SortBy::default(),
        ));
        assert!(text.contains("****** Process"), "{text}");
        assert_eq!(text.contains("****** (outside processes)"), shown, "{text}");
        assert_eq!(
            text.contains("1 call made outside any process"),
            !shown,
            "{text}"
        );
        node.block_on(tprof.stop()).unwrap();
    }
}

/// Apart from this module's other traced functions, which other tests count.
mod sampled {
    #[runtime::traced]
    pub(crate) async fn waits_here() {
        let _ = runtime::receive::<u64>().await;
    }
}

/// A server in sample mode (the wall sampler): collect gives the samples of the processes it
/// traces, pause makes them stable, restart forgets them, stop ends the sampler.
#[test]
fn a_sample_mode_server_collects_pauses_and_restarts_samples() {
    use runtime::sample::{SampleOptions, Sampler};
    let node = node();
    let tprof = node
        .block_on(Tprof::start(
            &node,
            ServerOptions::new()
                .name("sampler")
                .sample(SampleOptions::new().sampler(Sampler::Wall).hz(500)),
        ))
        .unwrap();
    node.block_on(tprof.set_pattern(TracePattern::module(format!("{}::sampled", module_path!()))))
        .unwrap();
    node.block_on(tprof.enable_trace(ProcessSpec::New, true))
        .unwrap();
    let idle = node.spawn(sampled::waits_here()).unwrap();
    let in_receive = |p: &tprof::Profile| {
        p.samples
            .samples
            .iter()
            .filter(|s| s.pid == Some(idle) && s.state == Some(tprof::samples::WaitState::Receive))
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let collected = loop {
        let p = node.block_on(tprof.collect()).unwrap();
        if in_receive(&p) >= 5 {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "no samples in 60 s");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        collected.samples.sources[0].sampler,
        tprof::samples::SamplerKind::Wall
    );
    // The path it waits in names the traced function.
    let set = &collected.samples;
    let waiting = set
        .samples
        .iter()
        .find(|s| s.pid == Some(idle) && s.stack.is_some())
        .expect("a sample with a path");
    let names: Vec<String> = set
        .frames_of(waiting.stack.unwrap())
        .into_iter()
        .map(|f| set.frame_name(&collected.function_table, f))
        .collect();
    assert_eq!(names, ["server::sampled::waits_here/0"]);

    node.block_on(tprof.pause()).unwrap();
    let a = node
        .block_on(tprof.collect())
        .unwrap()
        .samples
        .samples
        .len();
    std::thread::sleep(Duration::from_millis(100));
    let b = node
        .block_on(tprof.collect())
        .unwrap()
        .samples
        .samples
        .len();
    assert_eq!(a, b, "paused: no more samples");

    node.block_on(tprof.restart()).unwrap();
    let after = node.block_on(tprof.collect()).unwrap();
    assert!(
        after.samples.samples.len() < b,
        "restart forgets the samples"
    );
    node.block_on(tprof.stop()).unwrap();
    node.send(idle, 1u64);
}
