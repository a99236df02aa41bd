//! A sample session opened on a program already running (`attach`'s `sample`, `prof sample`):
//! a process deep in a long traced loop entered before the session began has no traced path
//! the session can see. Its samples (CPU, wall and allocation ones alike) still show under the
//! process, with their native frames, and the report says how many fell in frames entered
//! before sampling began, instead of "no samples collected".
//! The census views (the goroutine endpoint, `tprof top`) say which processes' paths are
//! unknown so, and how many.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use std::io::{Read as _, Write as _};

use runtime::sample::{AllocRate, SampleOptions, SampleSession, Sampler};
use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{Node, Pid};
use tprof::control::top::{SortKey, render, snapshot};
use tprof::control::{ControlEndpoint, ControlOptions};
use tprof::sample_report::{self, GroupBy, PrintOptions};
use tprof::{Profile, TraceType};

// Allocation samples need the counting allocator.
#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// An untraced helper the loop spends its time in.
#[inline(never)]
fn mix(x: u64) -> u64 {
    (0..64u64).fold(x, |a, i| {
        std::hint::black_box(a.rotate_left(5) ^ i.wrapping_mul(31))
    })
}

/// A traced loop that spins in one poll until `stop` is set, once `entered` says it began.
#[runtime::traced]
fn spin(entered: &AtomicBool, stop: &AtomicBool) -> u64 {
    entered.store(true, Ordering::SeqCst);
    let mut acc = 1;
    while !stop.load(Ordering::Relaxed) {
        acc = mix(acc);
    }
    acc
}

/// A traced loop that allocates a block a turn in one poll until `stop` is set, once
/// `entered` says it began.
#[runtime::traced]
fn churn(entered: &AtomicBool, stop: &AtomicBool) -> u64 {
    entered.store(true, Ordering::SeqCst);
    let mut acc = 1u64;
    while !stop.load(Ordering::Relaxed) {
        let block = std::hint::black_box(vec![acc as u8; 512]);
        acc = acc.wrapping_add(u64::from(block[511]) + 1);
    }
    acc
}

/// A node with a process spinning in [`spin`] (or [`churn`]); stopped when dropped.
struct Spinning {
    node: Node,
    pid: Pid,
    stop: &'static AtomicBool,
}

impl Spinning {
    /// Spawns the process on `node` and waits until it has entered [`spin`].
    fn start(node: Node) -> Spinning {
        Spinning::start_in(node, spin)
    }

    /// Spawns the process on `node` and waits until it has entered `body`.
    fn start_in(node: Node, body: fn(&AtomicBool, &AtomicBool) -> u64) -> Spinning {
        let entered: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let pid = node
            .spawn(async move {
                std::hint::black_box(body(entered, stop));
            })
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !entered.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the loop began within 60 s");
            std::thread::sleep(Duration::from_millis(1));
        }
        Spinning { node, pid, stop }
    }

    /// Waits until `session` holds `n` samples of the spinning process.
    fn sampled(&self, session: &SampleSession, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let data = session.samples();
            let of_it = data
                .samples
                .iter()
                .filter(|s| s.pid == Some(self.pid))
                .count();
            if of_it >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{of_it} samples of the spinning process within 60 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Spinning {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

/// A session of `sampler` on `node`, sampling every traced function and the processes of
/// `spec` (as `prof sample` opens one, with `ProcessSpec::All`).
fn open(node: &Node, sampler: Sampler, spec: ProcessSpec) -> SampleSession {
    let session = node
        .sample_session(SampleOptions::new().sampler(sampler).hz(997))
        .unwrap();
    session.trace().set_pattern(&TracePattern::all()).unwrap();
    session.trace().enable_trace(spec, true).unwrap();
    session
}

/// A session of `sampler` opened on a process already spinning, once it holds 20 samples of
/// it.
fn opened_on_the_loop(sampler: Sampler) -> (Spinning, SampleSession) {
    let spinning = Spinning::start(node());
    let session = open(&spinning.node, sampler, ProcessSpec::All);
    spinning.sampled(&session, 20);
    (spinning, session)
}

/// A session of `sampler` opened before the process began to spin, once it holds 20
/// samples of it.
fn opened_before_the_loop(sampler: Sampler) -> (Spinning, SampleSession) {
    let node = node();
    let session = open(&node, sampler, ProcessSpec::New);
    let spinning = Spinning::start(node);
    spinning.sampled(&session, 20);
    (spinning, session)
}

/// `session`'s profile and its report, grouped by process as `prof sample` prints it.
fn report(session: &SampleSession) -> (Profile, String) {
    let profile = runtime::trace::without_tracing(|| {
        Profile::from_snapshot(&session.snapshot(), TraceType::CallCount, &[])
    });
    let mut text = Vec::new();
    let options = PrintOptions::new().groupby(GroupBy::Process);
    sample_report::print(&mut text, &profile, &options).unwrap();
    (profile, String::from_utf8(text).unwrap())
}

/// The count the report gives of samples in frames entered before sampling began, and of
/// the samples it counts them among: `N of M samples fell in traced frames entered before
/// sampling began`.
fn before_sampling(text: &str) -> Option<(u64, u64)> {
    let line = text
        .lines()
        .find(|l| l.contains(" fell in polls begun before sampling began"))?;
    let mut words = line.split_whitespace();
    let n = words.find_map(|w| w.parse().ok())?;
    let m = words.find_map(|w| w.parse().ok())?;
    Some((n, m))
}

#[test]
fn a_cpu_session_opened_on_a_running_loop_shows_its_samples_and_says_why_untraced() {
    let (spinning, session) = opened_on_the_loop(Sampler::Cpu);
    let pid = spinning.pid;
    let (profile, text) = report(&session);
    drop(spinning);
    let set = &profile.samples;
    let of_it: Vec<_> = set.samples.iter().filter(|s| s.pid == Some(pid)).collect();
    assert!(of_it.len() >= 20, "{} samples: {text}", of_it.len());
    // They keep their native frames: the helper the loop runs.
    let in_mix = of_it
        .iter()
        .filter(|s| {
            s.stack.is_some_and(|stack| {
                set.frames_of(stack)
                    .iter()
                    .any(|&f| set.frames[f as usize].name.ends_with("sample_late::mix"))
            })
        })
        .count();
    assert!(in_mix > 0, "no sample names mix: {text}");
    assert!(!text.contains("no samples collected"), "{text}");
    let (n, m) = before_sampling(&text).unwrap_or_else(|| panic!("{text}"));
    assert!(n >= 20 && n <= m, "{n} of {m}: {text}");
    assert!(text.contains("sample_late::mix"), "{text}");
    // With traced frames alone, the process's samples still count, on a line of their own.
    let mut traced_only = Vec::new();
    let options = PrintOptions::new().groupby(GroupBy::Process).native(false);
    sample_report::print(&mut traced_only, &profile, &options).unwrap();
    let traced_only = String::from_utf8(traced_only).unwrap();
    assert!(
        !traced_only.contains("no samples collected"),
        "{traced_only}"
    );
    assert_eq!(before_sampling(&traced_only), Some((n, m)), "{traced_only}");
}

#[test]
fn a_wall_session_opened_on_a_running_loop_shows_its_samples_and_says_why_untraced() {
    let (spinning, session) = opened_on_the_loop(Sampler::Wall);
    let pid = spinning.pid;
    let (profile, text) = report(&session);
    drop(spinning);
    let of_it = profile
        .samples
        .samples
        .iter()
        .filter(|s| s.pid == Some(pid))
        .count();
    assert!(of_it >= 20, "{of_it} samples: {text}");
    assert!(!text.contains("no samples collected"), "{text}");
    let (n, m) = before_sampling(&text).unwrap_or_else(|| panic!("{text}"));
    assert!(n >= 20 && n <= m, "{n} of {m}: {text}");
    // The process's group says why it shows no frame.
    assert!(
        text.contains(" snapshots: a wall sample of a running process has no traced path"),
        "{text}"
    );
}

/// A session opened before the loop began sees its traced frames, and counts no sample as
/// begun before sampling: the count is of the samples whose traced frames are unknown.
#[test]
fn a_session_opened_before_the_loop_counts_none_begun_before_sampling() {
    for sampler in [Sampler::Cpu, Sampler::Wall] {
        let (spinning, session) = opened_before_the_loop(sampler);
        let data = session.samples();
        let pid = spinning.pid;
        let (profile, text) = report(&session);
        drop(spinning);
        assert_eq!(data.before_sampling, 0, "{sampler:?}: {text}");
        assert_eq!(before_sampling(&text), None, "{sampler:?}: {text}");
        assert!(!text.contains("no samples collected"), "{text}");
        if sampler == Sampler::Cpu {
            // The traced frame is there: spin, traced, above the helper.
            assert!(text.contains("sample_late::spin/2"), "{text}");
            let set = &profile.samples;
            assert!(
                set.samples
                    .iter()
                    .filter(|s| s.pid == Some(pid))
                    .any(|s| s.stack.is_some_and(|st| set
                        .frames_of(st)
                        .iter()
                        .any(|&f| set.frames[f as usize].function.is_some()))),
                "{text}"
            );
        }
    }
}

/// The body of `GET target` from the pull endpoint at `addr`, as text.
fn get(addr: std::net::SocketAddr, target: &str) -> String {
    String::from_utf8(get_bytes(addr, target)).unwrap()
}

/// The body of `GET target` from the pull endpoint at `addr`, which must answer 200.
fn get_bytes(addr: std::net::SocketAddr, target: &str) -> Vec<u8> {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    write!(stream, "GET {target} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let at = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    answer.split_off(at + 4)
}

/// What the census views say of `spinning`, with `session` (a wall session) open: top's
/// table and count, the goroutine endpoint's text, and the comments of the goroutine profile
/// of `session`'s census with the count of its source.
fn census_views(
    spinning: &Spinning,
    session: &SampleSession,
    test: &str,
) -> (tprof::control::top::TopFrame, String, Vec<String>, u64) {
    let census = runtime::trace::without_tracing(|| {
        Profile::from_snapshot(&session.census_snapshot(), TraceType::CallCount, &[])
    });
    let proto = tprof::export::pprof::goroutine_proto(&census);
    let comments = proto
        .comment
        .iter()
        .map(|&i| proto.string(i).to_owned())
        .collect();
    let count = census.samples.sources[0].before_sampling;
    let frame = snapshot(spinning.node.handle(), SortKey::Pid, 10, 0x5a4e);
    let [text] = goroutine_texts(spinning, test, [1]);
    (frame, text, comments, count)
}

/// A process in a loop entered before the wall session opened: top's IN column and the
/// goroutine endpoint say its path is unknown for that reason, and count it; a process
/// started after the session opened is not counted, and top names the function it runs.
#[test]
fn the_census_views_say_which_processes_polled_before_sampling() {
    let (spinning, session) = opened_on_the_loop(Sampler::Wall);
    let (frame, text, comments, count) = census_views(&spinning, &session, "on");
    assert_eq!(count, 1, "{comments:?}");
    assert!(
        comments
            .iter()
            .any(|c| c.contains("the traced path of 1 of these processes is unknown")),
        "{comments:?}"
    );
    let table = render(&frame);
    assert_eq!(frame.before_sampling, 1, "{table}");
    let row = frame
        .rows
        .iter()
        .find(|r| r.pid == spinning.pid.to_string())
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.polled_before_sampling, "{table}");
    assert!(table.contains("? (polled before sampling)"), "{table}");
    assert!(
        table.contains("1 process sampled in a poll begun before sampling began"),
        "{table}"
    );
    assert!(
        text.contains("# 1 of them polled before sampling began: their traced paths are unknown"),
        "{text}"
    );
    assert!(
        text.contains("(traced path unknown: polled before sampling began)"),
        "{text}"
    );
    drop(spinning);

    let (spinning, session) = opened_before_the_loop(Sampler::Wall);
    let (frame, text, comments, count) = census_views(&spinning, &session, "before");
    assert_eq!(count, 0, "{comments:?}");
    assert!(
        !comments.iter().any(|c| c.contains("unknown")),
        "{comments:?}"
    );
    let table = render(&frame);
    assert_eq!(frame.before_sampling, 0, "{table}");
    assert!(!table.contains("before sampling"), "{table}");
    // The sampled poll records the function it runs in.
    assert!(table.contains("sample_late::spin/2"), "{table}");
    assert!(!text.contains("before sampling"), "{text}");
}

/// An allocation session on `node` at one sample per MiB, sampling every traced function
/// and the processes of `spec`.
fn open_alloc(node: &Node, spec: ProcessSpec) -> SampleSession {
    let session = node
        .sample_session(
            SampleOptions::new()
                .sampler(Sampler::Alloc)
                .alloc_rate(AllocRate::Bytes(1 << 20)),
        )
        .unwrap();
    session.trace().set_pattern(&TracePattern::all()).unwrap();
    session.trace().enable_trace(spec, true).unwrap();
    session
}

/// Allocation samples of a loop entered before the session began are counted as the CPU and
/// wall ones are, per source, through the profile, the archive and a merge, and the report
/// says so; a session opened before the loop counts none and sites them under the traced
/// function.
#[test]
fn allocation_samples_in_a_poll_begun_before_sampling_are_counted_and_said() {
    // Opened on the running loop.
    let churning = Spinning::start_in(node(), churn);
    let session = open_alloc(&churning.node, ProcessSpec::All);
    churning.sampled(&session, 20);
    let (profile, text) = report(&session);
    drop(session);
    drop(churning);
    let set = &profile.samples;
    assert_eq!(set.sources.len(), 1, "{text}");
    let before = set.sources[0].before_sampling;
    assert!(before >= 20, "{before}: {text}");
    assert!(before <= set.samples.len() as u64, "{text}");
    let (n, m) = before_sampling(&text).unwrap_or_else(|| panic!("{text}"));
    assert_eq!(n, before, "{text}");
    assert!(n <= m, "{text}");
    assert!(
        text.contains("so they show under their process with their native frames alone"),
        "{text}"
    );
    // The allocation-site table says it too.
    let mut sites = Vec::new();
    tprof::alloc_sites::print(&mut sites, &profile, Some(10)).unwrap();
    let sites = String::from_utf8(sites).unwrap();
    assert!(
        sites.contains(&format!(
            "{before} allocation samples fell in polls begun before sampling began"
        )),
        "{sites}"
    );
    // Through the archive and a merge.
    let mut bytes = Vec::new();
    tprof::archive::write(&profile, &mut bytes).unwrap();
    let back = tprof::archive::read(&mut bytes.as_slice()).unwrap();
    assert_eq!(back.samples.sources[0].before_sampling, before);
    let merged = tprof::archive::merge(&[back.clone(), back]).unwrap();
    let counts: Vec<u64> = merged
        .samples
        .sources
        .iter()
        .map(|s| s.before_sampling)
        .collect();
    assert_eq!(counts, [before, before]);

    // Opened before the loop began: none, and the traced function is on the samples' stacks.
    let node = node();
    let session = open_alloc(&node, ProcessSpec::New);
    let churning = Spinning::start_in(node, churn);
    churning.sampled(&session, 20);
    let data = session.samples();
    let (_, text) = report(&session);
    drop(session);
    drop(churning);
    assert_eq!(data.before_sampling, 0, "{text}");
    assert_eq!(before_sampling(&text), None, "{text}");
    assert!(text.contains("sample_late::churn/2"), "{text}");
}

/// The pull endpoint on `spinning`'s node (a socket named after `test`), and the body of its
/// `/debug/pprof/goroutine?debug=N` for `levels`.
fn goroutine_texts<const N: usize>(
    spinning: &Spinning,
    test: &str,
    levels: [u8; N],
) -> [String; N] {
    let (_endpoint, addr) = pull_endpoint(spinning, test);
    levels.map(|level| get(addr, &format!("/debug/pprof/goroutine?debug={level}")))
}

/// The comments of the goroutine endpoint's profile (`debug=0`, gzipped pprof) of
/// `spinning`'s node.
fn goroutine_comments(spinning: &Spinning, test: &str) -> Vec<String> {
    let (_endpoint, addr) = pull_endpoint(spinning, &format!("{test}-pprof"));
    let body = get_bytes(addr, "/debug/pprof/goroutine");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(body.as_slice())
        .read_to_end(&mut raw)
        .unwrap();
    let proto = <tprof::export::pprof::Profile as prost::Message>::decode(raw.as_slice()).unwrap();
    proto
        .comment
        .iter()
        .map(|&c| proto.string(c).to_owned())
        .collect()
}

/// A control endpoint on `spinning`'s node with its pull endpoint open, and that address.
fn pull_endpoint(spinning: &Spinning, test: &str) -> (ControlEndpoint, std::net::SocketAddr) {
    let path = std::env::temp_dir().join(format!("tprof-late-{}-{test}.sock", std::process::id()));
    let endpoint = ControlEndpoint::open(
        spinning.node.handle(),
        ControlOptions::new()
            .path(path)
            .http("127.0.0.1:0")
            .http_open(true),
    )
    .unwrap();
    let addr = endpoint.http_addr().unwrap();
    (endpoint, addr)
}

/// The block of `pid` in a `goroutine?debug=2` text.
fn block_of(text: &str, pid: Pid) -> &str {
    let head = format!("process {pid}");
    let at = text
        .find(&head)
        .unwrap_or_else(|| panic!("no {head}: {text}"));
    let block = &text[at..];
    &block[..block.find("\n\n").unwrap_or(block.len())]
}

/// With a wall session open since before the loop began, the goroutine endpoint reads what
/// that session measured: the spinning process is in `spin`, and the header names the session
/// it read. With none open, it says why the loop's path is unknown, as before.
#[test]
fn the_goroutine_endpoint_reads_the_paths_of_a_wall_session_already_open() {
    let (spinning, session) = opened_before_the_loop(Sampler::Wall);
    let slot = session.trace().slot();
    let [each, grouped] = goroutine_texts(&spinning, "open-wall", [2, 1]);
    let block = block_of(&each, spinning.pid);
    assert!(block.contains("sample_late::spin/2"), "{each}");
    for text in [&each, &grouped] {
        assert!(
            text.contains(&format!(
                "# traced paths as measured by the sample sessions open on this node: wall (slot {slot}"
            )),
            "{text}"
        );
        assert!(!text.contains("before sampling"), "{text}");
    }
    assert!(grouped.contains("sample_late::spin/2"), "{grouped}");
    // The profile (`debug=0`) says it in a comment.
    let comments = goroutine_comments(&spinning, "open-wall");
    assert!(
        comments.iter().any(|c| c.starts_with(&format!(
            "tprof: traced paths as measured by the sample sessions open on this node: wall (slot {slot}"
        ))),
        "{comments:?}"
    );
    drop(session);
    drop(spinning);

    // None open: the endpoint's own session, which began after the loop did.
    let spinning = Spinning::start(node());
    let [each, grouped] = goroutine_texts(&spinning, "none-open", [2, 1]);
    let block = block_of(&each, spinning.pid);
    assert!(
        block.contains("(traced path unknown: polled before sampling began)"),
        "{each}"
    );
    assert!(
        grouped
            .contains("# 1 of them polled before sampling began: their traced paths are unknown"),
        "{grouped}"
    );
    assert!(
        !grouped.contains("# traced paths as measured by"),
        "{grouped}"
    );
    assert!(!grouped.contains("trace sessions open"), "{grouped}");
    let comments = goroutine_comments(&spinning, "none-open");
    assert!(
        !comments.iter().any(|c| c.contains("measured by")),
        "{comments:?}"
    );
}

/// With a call_time or call_memory session open since before the loop began, the goroutine
/// endpoint gives the running process the function that session's measured polls recorded,
/// and its header, text and profile, names the session it read.
#[test]
fn the_goroutine_endpoint_names_the_trace_sessions_whose_functions_it_read() {
    use runtime::trace::TraceTypes;
    for (kind, types) in [
        ("call_time", TraceTypes::CALL_TIME),
        ("call_memory", TraceTypes::CALL_MEMORY),
    ] {
        let node = node();
        let session = open_trace(&node, types);
        let slot = session.slot();
        let spinning = Spinning::start(node);
        let test = format!("trace-{kind}");
        let [each] = goroutine_texts(&spinning, &test, [2]);
        let line = format!(
            "the function a running process is in as measured by the trace sessions open on \
             this node: {kind} (slot {slot})"
        );
        assert!(each.starts_with(&format!("# {line}\n")), "{kind}: {each}");
        assert!(!each.contains("sample sessions open"), "{kind}: {each}");
        assert!(
            block_of(&each, spinning.pid).contains("sample_late::spin/2"),
            "{kind}: {each}"
        );
        let comments = goroutine_comments(&spinning, &test);
        assert!(
            comments.contains(&format!("tprof: {line}")),
            "{kind}: {comments:?}"
        );
        drop(session);
        drop(spinning);
    }
}

/// Opens a trace session of `types` on `node`, tracing every function and every process
/// (existing ones too).
fn open_trace(node: &Node, types: runtime::trace::TraceTypes) -> runtime::trace::TraceSession {
    let session = node.trace_session_with(types).unwrap();
    session.set_pattern(&TracePattern::all()).unwrap();
    session.enable_trace(ProcessSpec::All, true).unwrap();
    session
}

/// `tprof top`'s row of `spinning` and its table, and the count of processes it says polled
/// before sampling.
fn top_row(spinning: &Spinning) -> (tprof::control::protocol::ProcessRow, String, usize) {
    let frame = snapshot(spinning.node.handle(), SortKey::Pid, 10, 0x70b);
    let table = render(&frame);
    let row = frame
        .rows
        .iter()
        .find(|r| r.pid == spinning.pid.to_string())
        .unwrap_or_else(|| panic!("{table}"))
        .clone();
    (row, table, frame.before_sampling)
}

/// Under a call_time, call_memory or CPU session alone, `tprof top`'s IN column says that
/// it does not know what a loop entered before the session runs in, and why, and counts it;
/// under one opened before the loop began, it names the function.
#[test]
fn top_says_what_it_does_not_know_under_call_time_call_memory_and_cpu_sessions() {
    use runtime::trace::TraceTypes;
    // Each kind's session, kept open until dropped.
    type Opened = Box<dyn std::any::Any>;
    type Opener = fn(&Node) -> Opened;
    let kinds: [(&str, Opener); 3] = [
        ("call_time", |n| {
            Box::new(open_trace(n, TraceTypes::CALL_TIME))
        }),
        ("call_memory", |n| {
            Box::new(open_trace(n, TraceTypes::CALL_MEMORY))
        }),
        ("cpu", |n| Box::new(open(n, Sampler::Cpu, ProcessSpec::All))),
    ];
    for (kind, opener) in kinds {
        // Opened on the running loop.
        let spinning = Spinning::start(node());
        let session = opener(&spinning.node);
        let (row, table, before) = top_row(&spinning);
        assert_eq!(row.current_function, None, "{kind}: {table}");
        assert!(row.polled_before_sampling, "{kind}: {table}");
        assert!(
            table.contains("? (polled before sampling)"),
            "{kind}: {table}"
        );
        assert_eq!(before, 1, "{kind}: {table}");
        assert!(
            table.contains("(open the session, sample, call_time or call_memory, before"),
            "{kind}: {table}"
        );
        drop(session);
        drop(spinning);

        // Opened before the loop began.
        let node = node();
        let session = opener(&node);
        let spinning = Spinning::start(node);
        let (row, table, before) = top_row(&spinning);
        assert_eq!(
            row.current_function.as_deref(),
            Some("sample_late::spin/2"),
            "{kind}: {table}"
        );
        assert!(!row.polled_before_sampling, "{kind}: {table}");
        assert_eq!(before, 0, "{kind}: {table}");
        drop(session);
        drop(spinning);
    }
}
