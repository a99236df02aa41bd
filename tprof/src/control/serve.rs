//! What the endpoint does with each request: the tprof server's API, run in a short process of
//! the node (the server is called as the Erlang shell calls it), and the answers as text.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{NodeHandle, Pid};

use super::protocol::{Command, FunctionRow, ProcessRow, Reply};
use crate::export::{self, Format};
use crate::inspect::{Aggregate, Column, Direction, SortBy, inspect};
use crate::{DEFAULT_NAME, Profile, ServerOptions, Tprof, TraceType, format_to_string};

/// How long a request may take in the node before its connection gets an error: a collect of a
/// large profile, or a sample of up to 600 s plus its collect.
const REQUEST_LIMIT: Duration = Duration::from_secs(900);

/// Carries out `command` on `node`; the error is a sentence for the person at the other end.
/// A profile of the next seconds (`sample`, `trace`) is cut short once `cut` is set (the
/// endpoint closing), and answers with what it gathered, saying so.
pub(super) fn handle(
    node: &NodeHandle,
    command: Command,
    cut: &Arc<AtomicBool>,
) -> Result<Reply, String> {
    match command {
        Command::Hello { .. } => Ok(Reply::Hello {
            program: std::env::args().next().unwrap_or_default(),
            os_pid: std::process::id(),
            node: node.id(),
            protocol: super::protocol::VERSION,
        }),
        Command::Processes => Ok(Reply::Processes {
            processes: processes(node),
        }),
        Command::Top {
            sort,
            rows,
            baseline,
        } => {
            let sort = sort.parse::<super::top::SortKey>()?;
            Ok(Reply::Top {
                frame: super::top::snapshot(node, sort, rows, baseline),
            })
        }
        Command::Registered => Ok(Reply::Names {
            names: node.registered().iter().map(ToString::to_string).collect(),
        }),
        Command::Functions => Ok(Reply::Functions {
            functions: functions(),
        }),
        Command::Start {
            trace_type,
            call_tree,
        } => {
            let trace_type = TraceType::from_str(&trace_type).map_err(|e| e.to_string())?;
            let options = ServerOptions::new()
                .trace_type(trace_type)
                .call_tree(call_tree);
            let handle = node.clone();
            in_process(node, async move {
                Tprof::start(&handle, options)
                    .await
                    .map(|_| Reply::Ok)
                    .map_err(|e| e.to_string())
            })
        }
        Command::Stop => with_server(node, |t| async move { t.stop().await.map(|()| Reply::Ok) }),
        Command::SetPattern {
            module,
            function,
            arity,
        } => {
            let pattern = pattern(module, function, arity)?;
            with_server(node, |t| async move {
                t.set_pattern(pattern).await.map(matched)
            })
        }
        Command::ClearPattern {
            module,
            function,
            arity,
        } => {
            let pattern = pattern(module, function, arity)?;
            with_server(node, |t| async move {
                t.clear_pattern(pattern).await.map(matched)
            })
        }
        Command::EnableTrace {
            processes,
            set_on_spawn,
        } => {
            let spec = process_spec(&processes)?;
            with_server(node, move |t| async move {
                t.enable_trace(spec, set_on_spawn)
                    .await
                    .map(|o| Reply::Matched { count: o.count })
            })
        }
        Command::DisableTrace { processes } => {
            let spec = process_spec(&processes)?;
            with_server(node, move |t| async move {
                t.disable_trace(spec)
                    .await
                    .map(|o| Reply::Matched { count: o.count })
            })
        }
        Command::Pause => with_server(node, |t| async move { t.pause().await.map(|()| Reply::Ok) }),
        Command::Resume => with_server(
            node,
            |t| async move { t.resume().await.map(|()| Reply::Ok) },
        ),
        Command::Restart => with_server(
            node,
            |t| async move { t.restart().await.map(|()| Reply::Ok) },
        ),
        Command::Collect { format } => {
            let layout = Layout::parse(&format)?;
            let profile =
                with_server_value(node, DEFAULT_NAME, |t| async move { t.collect().await })?;
            layout.text(&profile).map(|text| Reply::Text { text })
        }
        Command::Inspect {
            group_by,
            column,
            direction,
        } => {
            let aggregate = group_by.parse::<Aggregate>().map_err(|e| e.to_string())?;
            let sort = SortBy {
                column: column.parse::<Column>().map_err(|e| e.to_string())?,
                direction: direction.parse::<Direction>().map_err(|e| e.to_string())?,
            };
            let profile =
                with_server_value(node, DEFAULT_NAME, |t| async move { t.collect().await })?;
            Ok(Reply::Text {
                text: format_to_string(&inspect(&profile, aggregate, sort)),
            })
        }
        Command::Peek { seconds } => {
            let duration = match seconds {
                None => crate::peek::peek_duration(),
                Some(s) if (0.0..=MAX_SAMPLE_SECONDS).contains(&s) => Duration::from_secs_f64(s),
                Some(s) => {
                    return Err(format!(
                        "peek samples for 0 to {MAX_SAMPLE_SECONDS} seconds, not {s}"
                    ));
                }
            };
            Ok(Reply::Text {
                text: crate::peek::peek_report(node, duration),
            })
        }
        Command::HeapSnapshot => {
            let mut out = Vec::new();
            crate::heap_snapshot(node, &mut out).map_err(|e| e.to_string())?;
            Ok(Reply::Text {
                text: String::from_utf8_lossy(&out).into_owned(),
            })
        }
        Command::Sample {
            seconds,
            sampler,
            hz,
        } => sample(node, seconds, &sampler, hz, cut),
        Command::Trace {
            trace_type,
            seconds,
        } => trace(node, seconds, &trace_type, cut),
    }
}

/// How many functions a pattern matched.
fn matched(count: usize) -> Reply {
    Reply::Matched { count }
}

/// What `collect` lays the profile out as.
enum Layout {
    /// tprof's tables, per process or all together.
    Tables(Aggregate),
    /// A text export.
    Export(Format),
}

impl Layout {
    fn parse(text: &str) -> Result<Layout, String> {
        match text {
            "process" | "" => Ok(Layout::Tables(Aggregate::Process)),
            "total" => Ok(Layout::Tables(Aggregate::Total)),
            other => match Format::from_str(other) {
                Ok(Format::Pprof) => Err(
                    "pprof is binary: collect gives text (process, total, pretty, json, folded, \
                     speedscope, chrome, svg, html)"
                        .to_owned(),
                ),
                Ok(format) => Ok(Layout::Export(format)),
                Err(e) => Err(format!("{e}; or process, total")),
            },
        }
    }

    fn text(&self, profile: &Profile) -> Result<String, String> {
        match self {
            Layout::Tables(aggregate) => Ok(format_to_string(&inspect(
                profile,
                *aggregate,
                SortBy::default(),
            ))),
            Layout::Export(format) => {
                export::to_string(*format, profile).map_err(|e| e.to_string())
            }
        }
    }
}

/// The node's processes, by pid: one walk of its table (a call's callee named from the same
/// walk).
fn processes(node: &NodeHandle) -> Vec<ProcessRow> {
    let mut rows: Vec<(Pid, Option<Pid>, ProcessRow)> = Vec::new();
    let mut names: HashMap<Pid, String> = HashMap::new();
    runtime::introspect::walk(node, |p| {
        let name = p.registered_name.map(ToString::to_string);
        if let Some(name) = &name {
            names.insert(p.pid, name.clone());
        }
        rows.push((
            p.pid,
            p.callee,
            ProcessRow {
                pid: p.pid.to_string(),
                name,
                initial_call: p.initial_call.to_owned(),
                message_queue_len: p.message_queue_len,
                heap_bytes: p.heap.map(|h| h.live_bytes),
                state: p.state.name().to_owned(),
                callee: p.callee.map(|c| c.to_string()),
                callee_name: None,
                polls: p.polls,
                current_function: p.current_function.map(super::top::function_name),
                polled_before_sampling: p.polled_before_sampling,
            },
        ));
    });
    rows.sort_unstable_by_key(|(pid, ..)| *pid);
    rows.into_iter()
        .map(|(_, callee, mut row)| {
            row.callee_name = callee.and_then(|c| names.get(&c).cloned());
            row
        })
        .collect()
}

/// The program's traced functions, sorted, each once.
fn functions() -> Vec<FunctionRow> {
    let mut rows: Vec<FunctionRow> = runtime::trace::callsites()
        .iter()
        .map(|c| FunctionRow {
            module: c.module().to_owned(),
            function: c.written_name().to_owned(),
            arity: c.arity(),
        })
        .collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// tprof's `{Module, Function, Arity}`, `None` for `_`.
fn pattern(
    module: Option<String>,
    function: Option<String>,
    arity: Option<u8>,
) -> Result<TracePattern, String> {
    match (module, function, arity) {
        (None, None, None) => Ok(TracePattern::all()),
        (Some(m), None, None) => Ok(TracePattern::module(m)),
        (Some(m), Some(f), None) => Ok(TracePattern::function(m, f)),
        (Some(m), Some(f), Some(a)) => Ok(TracePattern::mfa(m, f, a)),
        (None, ..) => {
            Err("a function or an arity needs its module (or `_ _ _` for all)".to_owned())
        }
        (Some(_), None, Some(_)) => Err("an arity needs its function".to_owned()),
    }
}

/// `all`, `new`, `existing`, a pid or a registered name.
fn process_spec(text: &str) -> Result<ProcessSpec, String> {
    match text.trim() {
        "" => Err("name the processes: all, new, existing, a pid or a registered name".to_owned()),
        "all" => Ok(ProcessSpec::All),
        "new" => Ok(ProcessSpec::New),
        "existing" => Ok(ProcessSpec::Existing),
        pid if pid.starts_with('<') => pid
            .parse::<Pid>()
            .map(ProcessSpec::Pid)
            .map_err(|e| format!("{pid}: {e}")),
        name => Ok(ProcessSpec::Name(name.into())),
    }
}

/// Runs `f` on the server registered as `tprof`.
fn with_server<F, Fut>(node: &NodeHandle, f: F) -> Result<Reply, String>
where
    F: FnOnce(Tprof) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Reply, crate::ServerError>> + Send + 'static,
{
    with_server_value(node, DEFAULT_NAME, f)
}

/// Runs `f` on the server registered as `name`, in a process of the node.
fn with_server_value<F, Fut, T>(node: &NodeHandle, name: &'static str, f: F) -> Result<T, String>
where
    F: FnOnce(Tprof) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, crate::ServerError>> + Send + 'static,
    T: Send + 'static,
{
    let server = Tprof::whereis(node, name)
        .ok_or_else(|| format!("no tprof server runs as `{name}`: send start first"))?;
    in_process(
        node,
        async move { f(server).await.map_err(|e| e.to_string()) },
    )
}

/// How long a request's process may wait for its first poll before the request is given up:
/// longer means the node's workers are all held by processes that do not yield.
const START_LIMIT: Duration = Duration::from_secs(10);

/// A request's process: not yet run, running (it will answer), or given up on.
const WAITING: u8 = 0;
const STARTED: u8 = 1;
const ABANDONED: u8 = 2;

/// Runs `future` in a new process of `node` and waits for its answer. The process must start
/// within [`START_LIMIT`] (else the request is given up, and the process, if it runs later,
/// does nothing) and answer within [`REQUEST_LIMIT`].
fn in_process<T: Send + 'static>(
    node: &NodeHandle,
    future: impl Future<Output = Result<T, String>> + Send + 'static,
) -> Result<T, String> {
    in_process_within(node, future, START_LIMIT)
}

/// As [`in_process`], with the start bound `start`.
fn in_process_within<T: Send + 'static>(
    node: &NodeHandle,
    future: impl Future<Output = Result<T, String>> + Send + 'static,
    start: Duration,
) -> Result<T, String> {
    let (tx, rx) = mpsc::sync_channel(1);
    let state = Arc::new(std::sync::atomic::AtomicU8::new(WAITING));
    let theirs = Arc::clone(&state);
    node.spawn(async move {
        if theirs
            .compare_exchange(WAITING, STARTED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let _ = tx.send(future.await);
        }
    })
    .map_err(|e| format!("the node cannot run the request: {e}"))?;
    let answer = match rx.recv_timeout(start) {
        Err(mpsc::RecvTimeoutError::Timeout)
            if state
                .compare_exchange(WAITING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok() =>
        {
            return Err(format!(
                "the node's workers did not run the request's process within {} s: each of \
                 them is held by a process that does not yield (a long computation or a \
                 blocking call in a process); the request was given up",
                start.as_secs_f64()
            ));
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            rx.recv_timeout(REQUEST_LIMIT.saturating_sub(start))
        }
        done => done,
    };
    answer.unwrap_or_else(|e| match e {
        mpsc::RecvTimeoutError::Timeout => Err(format!(
            "no answer within {} s: the node's workers may be busy",
            REQUEST_LIMIT.as_secs()
        )),
        mpsc::RecvTimeoutError::Disconnected => {
            Err("the request's process ended without an answer (the node is stopping?)".to_owned())
        }
    })
}

/// Samples every process of the node for `seconds` (or until `cut`) through a session of its
/// own, and returns Julia's report grouped by process.
fn sample(
    node: &NodeHandle,
    seconds: f64,
    sampler: &str,
    hz: u32,
    cut: &Arc<AtomicBool>,
) -> Result<Reply, String> {
    let sampler = runtime::sample::Sampler::from_str(sampler).map_err(|e| e.to_string())?;
    let options = runtime::sample::SampleOptions::new()
        .sampler(sampler)
        .hz(hz);
    let (mut profile, waited) = profile_for(node, seconds, Gather::Sample(options), Some(cut))?;
    name_sampled(node, &mut profile);
    let mut text = Vec::new();
    let options =
        crate::sample_report::PrintOptions::new().groupby(crate::sample_report::GroupBy::Process);
    crate::sample_report::print(&mut text, &profile, &options).map_err(|e| e.to_string())?;
    Ok(Reply::Text {
        text: cut_short(seconds, waited) + &String::from_utf8_lossy(&text),
    })
}

/// The line that starts a profile's text when it was cut short after `waited` of `seconds`
/// (else nothing).
fn cut_short(seconds: f64, waited: Waited) -> String {
    match waited {
        Waited::Whole => String::new(),
        Waited::Cut(waited) => format!(
            "(cut short after {:.1} s of {seconds} s: the endpoint is closing; what was \
             gathered until then)\n",
            waited.as_secs_f64()
        ),
    }
}

/// The longest a sample may run, in seconds.
pub(super) const MAX_SAMPLE_SECONDS: f64 = 600.0;

/// The profile of every process of the node sampled for `seconds` through a session of its
/// own, on the calling thread ([`profile_for`]); cut short once `cut` is set (the endpoint
/// closing).
pub(super) fn sample_profile(
    node: &NodeHandle,
    seconds: f64,
    options: runtime::sample::SampleOptions,
    cut: Option<&Arc<AtomicBool>>,
) -> Result<Profile, String> {
    let (mut profile, _) = profile_for(node, seconds, Gather::Sample(options), cut)?;
    name_sampled(node, &mut profile);
    Ok(profile)
}

/// Gives the sampled processes the profile has no name for (those that called no traced
/// function: the trace session records only those) their registered names and initial calls,
/// as they are now. Linear in the samples.
fn name_sampled(node: &NodeHandle, profile: &mut Profile) {
    let named: HashSet<Pid> = profile
        .processes
        .iter()
        .filter(|p| p.name.is_some())
        .map(|p| p.pid)
        .collect();
    // Each pid looked up once: its name, if any, and its initial call; `None` when it is gone.
    let mut looked: HashMap<Pid, Option<(Option<String>, String)>> = HashMap::new();
    for pid in profile.samples.samples.iter().filter_map(|s| s.pid) {
        if !named.contains(&pid) {
            looked.entry(pid).or_insert_with(|| {
                let info = node.process_info(pid)?;
                Some((
                    info.registered_name.map(|n| n.to_string()),
                    info.initial_call.into_owned(),
                ))
            });
        }
    }
    for record in &mut profile.processes {
        if let Some(Some((name, _))) = looked.remove(&record.pid) {
            record.name = name;
        }
    }
    let before = profile.processes.len();
    profile
        .processes
        .extend(looked.into_iter().filter_map(|(pid, info)| {
            let (name, initial_call) = info?;
            Some(crate::ProcessRecord {
                pid,
                name,
                initial_call,
                run: 0,
            })
        }));
    if profile.processes.len() > before {
        profile.processes.sort_by_key(|p| p.pid);
    }
}

/// Traces every function of every process for `seconds` (or until `cut`) through a session
/// of its own, and returns tprof's table per process.
fn trace(
    node: &NodeHandle,
    seconds: f64,
    trace_type: &str,
    cut: &Arc<AtomicBool>,
) -> Result<Reply, String> {
    let trace_type = TraceType::from_str(trace_type).map_err(|e| e.to_string())?;
    let (profile, waited) = profile_for(node, seconds, Gather::Trace(trace_type), Some(cut))?;
    Layout::Tables(Aggregate::Process)
        .text(&profile)
        .map(|text| Reply::Text {
            text: cut_short(seconds, waited) + &text,
        })
}

/// What a profile of the next seconds gathers: samples, or traced calls of a trace type.
enum Gather {
    Sample(runtime::sample::SampleOptions),
    Trace(TraceType),
}

/// Profiles every process of the node for `seconds` through a session of its own, opened,
/// waited out and collected on the calling thread (the endpoint's, never a worker): the
/// node's workers need not run anything for it, so it answers a node whose workers are all
/// busy. Once `cut` is set the wait ends early (looked at every [`CUT_CHECK`]), and what was
/// gathered so far is collected.
fn profile_for(
    node: &NodeHandle,
    seconds: f64,
    gather: Gather,
    cut: Option<&Arc<AtomicBool>>,
) -> Result<(Profile, Waited), String> {
    if !(seconds > 0.0 && seconds <= MAX_SAMPLE_SECONDS) {
        return Err(format!(
            "profile for 0 to {MAX_SAMPLE_SECONDS} seconds, not {seconds}"
        ));
    }
    enum Open {
        Sample(runtime::sample::SampleSession),
        Trace(runtime::trace::TraceSession, TraceType),
    }
    let opened = runtime::trace::without_tracing(|| match gather {
        Gather::Sample(options) => node
            .sample_session(options)
            .map(Open::Sample)
            .map_err(|e| e.to_string()),
        Gather::Trace(trace_type) => node
            .trace_session_with_options(
                trace_type.session_types_with(false, false, false),
                runtime::trace::SessionOptions::new(),
            )
            .map(|s| Open::Trace(s, trace_type))
            .map_err(|e| e.to_string()),
    })?;
    let trace = match &opened {
        Open::Sample(s) => s.trace(),
        Open::Trace(s, _) => s,
    };
    trace
        .set_pattern(&TracePattern::all())
        .map_err(|e| e.to_string())?;
    trace
        .enable_trace(ProcessSpec::All, true)
        .map_err(|e| e.to_string())?;
    let waited = wait_out(Duration::from_secs_f64(seconds), cut.map(|c| &**c));
    let profile = runtime::trace::without_tracing(|| match &opened {
        Open::Sample(s) => Profile::from_snapshot(&s.snapshot(), TraceType::CallCount, &[]),
        Open::Trace(s, trace_type) => Profile::from_session(s, *trace_type, &[]),
    });
    Ok((profile, waited))
}

/// How long a profile's wait lasted: its whole time, or cut short after this long.
#[derive(Clone, Copy, Debug)]
enum Waited {
    Whole,
    Cut(Duration),
}

/// How often a profile's wait looks whether it is cut short.
const CUT_CHECK: Duration = Duration::from_millis(100);

/// Sleeps `time` on this thread, or until `cut` is set.
fn wait_out(time: Duration, cut: Option<&AtomicBool>) -> Waited {
    let start = std::time::Instant::now();
    loop {
        if cut.is_some_and(|c| c.load(Ordering::SeqCst)) {
            return Waited::Cut(start.elapsed());
        }
        let left = time.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Waited::Whole;
        }
        std::thread::sleep(left.min(CUT_CHECK));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_specs_read_as_tprofs() {
        assert!(pattern(None, None, None).is_ok());
        assert!(pattern(Some("app".into()), Some("f".into()), Some(2)).is_ok());
        assert!(pattern(None, Some("f".into()), None).is_err());
        assert!(pattern(Some("app".into()), None, Some(1)).is_err());
        assert!(matches!(process_spec("all"), Ok(ProcessSpec::All)));
        assert!(matches!(process_spec("<0.5.0>"), Ok(ProcessSpec::Pid(_))));
        assert!(process_spec("<0.x>").is_err());
        assert!(matches!(process_spec("kv"), Ok(ProcessSpec::Name(_))));
        assert!(Layout::parse("pprof").is_err());
        assert!(Layout::parse("folded").is_ok());
        assert!(Layout::parse("nonsense").is_err());
    }

    /// A node of one worker, held by a process that blocks until the sender is used.
    fn held_node() -> (runtime::Node, mpsc::Sender<()>) {
        let node = runtime::Node::builder().worker_threads(1).build().unwrap();
        let (release, held) = mpsc::channel::<()>();
        let (holding, is_held) = mpsc::channel::<()>();
        node.spawn(async move {
            holding.send(()).unwrap();
            let _ = held.recv();
        })
        .unwrap();
        is_held.recv().unwrap();
        (node, release)
    }

    /// A request whose process the node's workers do not run (the only worker is held by a
    /// process that blocks) gets an error that says why within its start bound, not after
    /// the request limit; the process, when it runs at last, does nothing.
    #[test]
    fn a_request_the_workers_do_not_run_is_given_up_with_a_reason() {
        let (node, release) = held_node();
        let ran = Arc::new(AtomicBool::new(false));
        let theirs = Arc::clone(&ran);
        let answer = in_process_within(
            node.handle(),
            async move {
                theirs.store(true, Ordering::SeqCst);
                Ok(())
            },
            Duration::from_millis(200),
        );
        let why = answer.unwrap_err();
        assert!(why.contains("did not run the request's process"), "{why}");
        release.send(()).unwrap();
        // The worker is free again: a new request runs, the given-up one did nothing.
        assert_eq!(in_process(node.handle(), async { Ok(7) }), Ok(7));
        assert!(!ran.load(Ordering::SeqCst));
    }

    /// A profile of the next seconds is gathered on the calling thread: it answers while the
    /// node's only worker is held by a process that never yields.
    #[test]
    fn a_profile_needs_no_worker() {
        let (node, release) = held_node();
        let options = runtime::sample::SampleOptions::new()
            .sampler(runtime::sample::Sampler::Wall)
            .hz(50);
        let profile = sample_profile(node.handle(), 0.3, options, None);
        release.send(()).unwrap();
        let profile = profile.unwrap();
        assert!(
            !profile.samples.samples.is_empty(),
            "the held process was sampled"
        );
        let traced = trace(node.handle(), 0.1, "call_count", &Arc::default());
        assert!(traced.is_ok(), "{traced:?}");
    }
}
