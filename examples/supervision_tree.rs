//! The demo workload: a supervised word-count service driven by thousands of short-lived
//! worker processes.
//!
//! ```text
//!            app_sup (one_for_one)
//!           /        |          \
//!      kv (gen_server)  pg (gen_server)  dispatcher (process)
//!                                             |  spawn_monitor, 64 at a time
//!                                   worker, worker, worker ... (one per chunk of text)
//! ```
//!
//! Each worker joins the `workers` process group in `pg`, counts the words of its chunk and adds
//! the counts to the `kv` store with calls, then exits; one chunk in a hundred holds a "bug" that
//! makes its worker panic. Half-way, the demo crashes `kv` on purpose: its supervisor restarts
//! it and the service goes on. At the end the node stops the tree in reverse start order.
//!
//! Run it with `cargo run --release --example supervision_tree`. It runs the workload three
//! times, each on a fresh node under `tprof::profile` with one trace type (call_count,
//! call_time, call_memory), and prints tprof's reports: every traced function of this example
//! and of the runtime's API in total, then the registered processes one by one. Then (on
//! Linux) twice in sample mode: the CPU sampler, printed as Julia's `Profile.print` tree, and
//! the wall sampler, which says where the processes wait.
//!
//! With `-- --html DIR`, it also writes each run's profile as tprof's html viewer into `DIR`
//! (`call_count.html`, `call_time.html`, `call_memory.html`, `sample_cpu.html`,
//! `sample_wall.html`), pages to open in a browser.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use runtime::gen_server::{self, CallReply, Caller, GenServer, Next, StartOptions};
use runtime::supervisor::{self, ChildSpec, Strategy, SupervisorFlags, SupervisorSpec};
use runtime::trace::TracePattern;
use runtime::{
    Down, ExitReason, Message, Node, Pid, receive, self_pid, send, spawn_monitor, traced,
};
use tprof::{Aggregate, Column, Group, Inspected, ProfileOptions, Report, SortBy, TraceType};

/// Every allocation is charged to the process (and traced function) that makes it.
#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

const CALL_TIMEOUT: Duration = Duration::from_secs(5);
const CHUNKS: usize = 4_000;
const WORDS_PER_CHUNK: usize = 40;
const IN_FLIGHT: usize = 64;

// ---------------------------------------------------------------------------------------------
// kv: a key-value store of word counts.

struct WordCounts {
    counts: HashMap<String, u64>,
    generation: u32,
}

enum KvCall {
    Add(Vec<(String, u64)>),
    Top(usize),
    Len,
    /// Crashes the server (the demo's injected fault).
    Poison,
}

enum KvReply {
    Added,
    Top(Vec<(String, u64)>),
    Len(usize),
}

#[traced]
impl GenServer for WordCounts {
    type Args = ();
    type Call = KvCall;
    type Reply = KvReply;
    type Cast = ();

    async fn init((): ()) -> Result<Self, ExitReason> {
        static STARTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let generation = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        println!("  kv: init (start #{generation}) as {}", self_pid());
        Ok(WordCounts {
            counts: HashMap::new(),
            generation,
        })
    }

    async fn handle_call(&mut self, call: KvCall, _: &mut Caller<KvReply>) -> CallReply<KvReply> {
        match call {
            KvCall::Add(words) => {
                for (word, n) in words {
                    *self.counts.entry(word).or_default() += n;
                }
                CallReply::Reply(KvReply::Added)
            }
            KvCall::Top(n) => {
                let mut all: Vec<(String, u64)> =
                    self.counts.iter().map(|(w, c)| (w.clone(), *c)).collect();
                all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                all.truncate(n);
                CallReply::Reply(KvReply::Top(all))
            }
            KvCall::Len => CallReply::Reply(KvReply::Len(self.counts.len())),
            KvCall::Poison => panic!("kv poisoned on purpose (start #{})", self.generation),
        }
    }

    async fn terminate(&mut self, reason: &ExitReason) {
        println!("  kv: terminate({reason}) with {} words", self.counts.len());
    }
}

// ---------------------------------------------------------------------------------------------
// pg: process groups, as OTP's `pg`: members are monitored and leave when they die.

#[derive(Default)]
struct ProcessGroups {
    groups: BTreeMap<String, Vec<Pid>>,
    peak: usize,
    joins: u64,
}

enum PgCall {
    Join(String, Pid),
    Members(String),
    Stats,
}

enum PgReply {
    Joined,
    Members(Vec<Pid>),
    Stats { joins: u64, peak: usize },
}

#[traced]
impl GenServer for ProcessGroups {
    type Args = ();
    type Call = PgCall;
    type Reply = PgReply;
    type Cast = ();

    async fn init((): ()) -> Result<Self, ExitReason> {
        println!("  pg: init as {}", self_pid());
        Ok(ProcessGroups::default())
    }

    async fn handle_call(&mut self, call: PgCall, _: &mut Caller<PgReply>) -> CallReply<PgReply> {
        match call {
            PgCall::Join(group, pid) => {
                // A member that is already gone gets a `Down` at once and is removed below.
                let _ = runtime::monitor(pid);
                let members = self.groups.entry(group).or_default();
                members.push(pid);
                self.peak = self.peak.max(members.len());
                self.joins += 1;
                CallReply::Reply(PgReply::Joined)
            }
            PgCall::Members(group) => CallReply::Reply(PgReply::Members(
                self.groups.get(&group).cloned().unwrap_or_default(),
            )),
            PgCall::Stats => CallReply::Reply(PgReply::Stats {
                joins: self.joins,
                peak: self.peak,
            }),
        }
    }

    async fn handle_info(&mut self, msg: Message) -> Next {
        if let Ok(down) = msg.downcast::<Down>() {
            for members in self.groups.values_mut() {
                members.retain(|p| *p != down.pid);
            }
        }
        Next::Continue
    }

    async fn terminate(&mut self, reason: &ExitReason) {
        println!("  pg: terminate({reason}) after {} joins", self.joins);
    }
}

// ---------------------------------------------------------------------------------------------
// The dispatcher and its short-lived workers.

/// A batch of text to count, and who to tell when it is done.
struct Job {
    chunks: Vec<Vec<String>>,
    reply_to: Pid,
}

/// What a job did.
#[derive(Debug, Default)]
struct JobReport {
    workers: usize,
    crashed: usize,
    words: usize,
}

#[traced]
async fn dispatcher() {
    loop {
        let job: Job = receive().await;
        let mut report = JobReport::default();
        let mut pending = job.chunks.into_iter();
        let mut in_flight = 0;
        loop {
            while in_flight < IN_FLIGHT {
                let Some(chunk) = pending.next() else { break };
                report.workers += 1;
                report.words += chunk.len();
                spawn_monitor(count_chunk(chunk)).expect("the node is running");
                in_flight += 1;
            }
            if in_flight == 0 {
                break;
            }
            let down: Down = receive().await;
            in_flight -= 1;
            if down.reason.is_abnormal() {
                report.crashed += 1;
            }
        }
        send(job.reply_to, report);
    }
}

/// One short-lived worker: joins `workers`, counts its chunk, adds the counts to `kv`.
#[traced]
async fn count_chunk(chunk: Vec<String>) {
    let join = PgCall::Join("workers".into(), self_pid());
    gen_server::call::<ProcessGroups>("pg", join, CALL_TIMEOUT)
        .await
        .expect("pg is up");
    let mut counts: HashMap<String, u64> = HashMap::new();
    for word in chunk {
        if word == "bug" {
            panic!("a worker met a bug");
        }
        *counts.entry(word).or_default() += 1;
    }
    // kv may be restarting after the demo's injected crash: retry briefly, as a client of a
    // supervised service does.
    let words: Vec<(String, u64)> = counts.into_iter().collect();
    for _ in 0..50 {
        match gen_server::call::<WordCounts>("kv", KvCall::Add(words.clone()), CALL_TIMEOUT).await {
            Ok(_) => return,
            Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
    panic!("kv stayed down");
}

// ---------------------------------------------------------------------------------------------

/// Deterministic text: `chunks` chunks of words from a small vocabulary, with a "bug" in one
/// chunk of a hundred.
fn text(chunks: usize, seed: u64) -> Vec<Vec<String>> {
    const VOCABULARY: &[&str] = &[
        "actor",
        "process",
        "message",
        "mailbox",
        "link",
        "monitor",
        "supervisor",
        "restart",
        "node",
        "pid",
        "call",
        "cast",
        "reply",
        "timeout",
        "trace",
        "profile",
        "heap",
        "word",
        "signal",
        "exit",
        "name",
        "registry",
        "tokio",
        "future",
        "poll",
        "worker",
        "group",
    ];
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    (0..chunks)
        .map(|i| {
            let mut chunk: Vec<String> = (0..WORDS_PER_CHUNK)
                .map(|_| {
                    // Skewed: low indices are much more frequent.
                    let a = next() % VOCABULARY.len();
                    let b = next() % VOCABULARY.len();
                    VOCABULARY[a.min(b)].to_string()
                })
                .collect();
            if i % 100 == 99 {
                chunk[WORDS_PER_CHUNK / 2] = "bug".into();
            }
            chunk
        })
        .collect()
}

#[traced]
async fn run_job(chunks: Vec<Vec<String>>) -> JobReport {
    let job = Job {
        chunks,
        reply_to: self_pid(),
    };
    runtime::send_named("dispatcher", job).unwrap_or_else(|e| panic!("{e}"));
    receive().await
}

async fn print_children(verbose: bool, title: &str) {
    if !verbose {
        return;
    }
    println!("{title}");
    let children = supervisor::which_children("app_sup", CALL_TIMEOUT)
        .await
        .expect("app_sup answers");
    for child in children {
        let pid = child.pid.map_or_else(|| "-".to_string(), |p| p.to_string());
        println!("  {:<11} {:<12} {:?}", child.id, pid, child.kind);
    }
}

/// A process's panic is its exit reason, which its monitor and supervisor see; keep the
/// expected crashes of the demo out of the terminal and print the others in one line.
fn quiet_expected_crashes() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if msg != "a worker met a bug" {
            eprintln!("  crash in {:?}: {msg}", runtime::try_self_pid());
        }
    }));
}

/// The workload: start the tree, run a job, crash kv, run another job, print what kv and pg
/// hold. With `verbose`, it tells what happens as it goes.
async fn story(verbose: bool) {
    macro_rules! say {
        ($($arg:tt)*) => { if verbose { println!($($arg)*); } };
    }
    let spec = SupervisorSpec::new(
        SupervisorFlags::new(Strategy::OneForOne)
            .intensity(5)
            .period(Duration::from_secs(10)),
    )
    .child(ChildSpec::gen_server::<WordCounts>(
        "kv",
        (),
        StartOptions::new().name("kv").trap_exit(),
    ))
    .child(ChildSpec::gen_server::<ProcessGroups>(
        "pg",
        (),
        StartOptions::new().name("pg").trap_exit(),
    ))
    // Registered as it is spawned, so a job can be sent the moment the tree is up.
    .child(ChildSpec::new("dispatcher", || {
        std::future::ready(
            runtime::spawn_opt(
                dispatcher(),
                runtime::SpawnOptions::new().link().name("dispatcher"),
            )
            .map(|s| s.pid),
        )
    }));
    say!("starting the supervision tree");
    // Not linked to this short-lived driver process: the tree lives until the node stops.
    supervisor::start(spec, supervisor::StartOptions::new().name("app_sup"))
        .await
        .expect("the tree starts");
    print_children(verbose, "app_sup's children:").await;

    let first = run_job(text(CHUNKS / 2, 1)).await;
    say!(
        "job 1: {} workers counted {} words; {} crashed on a bug",
        first.workers,
        first.words,
        first.crashed
    );

    say!("crashing kv on purpose");
    let err = gen_server::call::<WordCounts>("kv", KvCall::Poison, CALL_TIMEOUT)
        .await
        .err()
        .expect("kv crashes");
    say!("  the call failed: {err}");
    while runtime::whereis("kv").is_none() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    print_children(verbose, "app_sup's children after the restart:").await;

    let second = run_job(text(CHUNKS / 2, 2)).await;
    say!(
        "job 2: {} workers counted {} words; {} crashed on a bug",
        second.workers,
        second.words,
        second.crashed
    );

    let Ok(KvReply::Top(top)) =
        gen_server::call::<WordCounts>("kv", KvCall::Top(5), CALL_TIMEOUT).await
    else {
        panic!("kv answers Top");
    };
    let Ok(KvReply::Len(len)) =
        gen_server::call::<WordCounts>("kv", KvCall::Len, CALL_TIMEOUT).await
    else {
        panic!("kv answers Len");
    };
    say!("kv (since its restart) holds {len} distinct words; the top five:");
    for (word, count) in top {
        say!("  {word:<10} {count}");
    }
    let Ok(PgReply::Stats { joins, peak }) =
        gen_server::call::<ProcessGroups>("pg", PgCall::Stats, CALL_TIMEOUT).await
    else {
        panic!("pg answers Stats");
    };
    let Ok(PgReply::Members(now)) =
        gen_server::call::<ProcessGroups>("pg", PgCall::Members("workers".into()), CALL_TIMEOUT)
            .await
    else {
        panic!("pg answers Members");
    };
    say!(
        "pg: {joins} joins to `workers`, at most {peak} members at once, {} now",
        now.len()
    );
    say!("{} processes alive", runtime::processes().len());
}

/// Keeps the groups of registered processes (the tree's servers), named in the headers.
fn registered_only(inspected: &Inspected) -> Inspected {
    let mut kept = Inspected::default();
    for (group, profile) in &inspected.groups {
        if let Group::Process(pid) = group
            && runtime::process_info(*pid).is_some_and(|i| i.registered_name.is_some())
        {
            kept.groups.insert(*group, profile.clone());
        }
    }
    kept
}

/// The folder `--html DIR` names, if given (an error for any other argument).
fn html_dir() -> Result<Option<std::path::PathBuf>, String> {
    let mut args = std::env::args_os().skip(1);
    let Some(flag) = args.next() else {
        return Ok(None);
    };
    let usage = "usage: supervision_tree [--html DIR]";
    match (flag.to_str(), args.next(), args.next()) {
        (Some("--html"), Some(dir), None) => {
            let dir = std::path::PathBuf::from(dir);
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
            Ok(Some(dir))
        }
        _ => Err(usage.to_string()),
    }
}

/// Writes `profile` as tprof's html viewer to `DIR/NAME.html`, when `--html DIR` was given.
fn write_html(
    dir: Option<&std::path::Path>,
    name: &str,
    profile: &tprof::Profile,
) -> Result<(), Box<dyn std::error::Error>> {
    let Some(dir) = dir else {
        return Ok(());
    };
    let path = dir.join(format!("{name}.html"));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
    tprof::export::write(tprof::export::Format::Html, profile, &mut out)?;
    std::io::Write::flush(&mut out)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Runs the demo; an error is printed as its message (a sentence), not as its `Debug` form.
fn main() -> std::process::ExitCode {
    match demo() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn demo() -> Result<(), Box<dyn std::error::Error>> {
    let html = html_dir()?;
    quiet_expected_crashes();
    let patterns = [
        TracePattern::module(module_path!()),
        TracePattern::module("runtime"),
        TracePattern::module("runtime::gen_server"),
    ];
    for (i, trace_type) in [
        TraceType::CallCount,
        TraceType::CallTime,
        TraceType::CallMemory,
    ]
    .into_iter()
    .enumerate()
    {
        let node = Node::new()?;
        println!(
            "\n==== {trace_type}: the workload on node {} ====",
            node.id()
        );
        let started = Instant::now();
        let mut options = ProfileOptions::new()
            .trace_type(trace_type)
            .report(Report::Return);
        for p in &patterns {
            options = options.pattern(p.clone());
        }
        let outcome = tprof::profile_on(&node, move || story(i == 0), options)?;
        outcome.result?;
        println!("ran for {:.0?}", started.elapsed());
        write_html(html.as_deref(), &trace_type.to_string(), &outcome.profile)?;
        let by_measurement = SortBy::descending(Column::Measurement);
        println!("\n-- {trace_type}, all processes together:");
        let total = tprof::inspect(&outcome.profile, Aggregate::Total, by_measurement);
        tprof::format(&mut std::io::stdout(), &total)?;
        if trace_type != TraceType::CallCount {
            println!("\n-- {trace_type}, the registered processes:");
            let each = tprof::inspect(&outcome.profile, Aggregate::Process, by_measurement);
            tprof::format(&mut std::io::stdout(), &registered_only(&each))?;
        }
        node.stop();
    }
    sampled(&patterns, html.as_deref())?;
    Ok(())
}

/// The workload twice more in sample mode (Linux): the CPU sampler, whose samples name the
/// untraced code each process ran too, printed as Julia's `Profile.print` tree (traced frames
/// only here, so that it fits a screen); then the wall
/// sampler, which says where the processes wait.
fn sampled(
    patterns: &[TracePattern],
    html: Option<&std::path::Path>,
) -> Result<(), Box<dyn std::error::Error>> {
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    use runtime::sample::{SampleOptions, Sampler};
    use tprof::sample_report::{GroupBy, PrintOptions};
    for (sampler, hz, report) in [
        (
            Sampler::Cpu,
            4999,
            PrintOptions::new().native(false).maxdepth(6),
        ),
        (
            Sampler::Wall,
            200,
            PrintOptions::new()
                .groupby(GroupBy::None)
                .noisefloor(2.0)
                .maxdepth(4),
        ),
    ] {
        let node = Node::new()?;
        println!(
            "\n==== sample ({sampler} sampler, {hz} Hz asked): the workload on node {} ====",
            node.id()
        );
        let options = |hz: u32| {
            let mut options = ProfileOptions::new()
                .sample(SampleOptions::new().sampler(sampler).hz(hz))
                .sample_report(report.clone());
            for p in patterns {
                options = options.pattern(p.clone());
            }
            options
        };
        let outcome = match tprof::profile_on(&node, || story(false), options(hz)) {
            // Under `tprof run --sampler cpu`, its session has the CPU sampler at its rate.
            Err(tprof::ProfileError::Sample(runtime::sample::SampleError::RateTaken {
                running_hz,
                under_tprof_run: true,
                ..
            })) => {
                println!("(tprof run samples at {running_hz} Hz: so does the demo)");
                tprof::profile_on(&node, || story(false), options(running_hz))?
            }
            outcome => outcome?,
        };
        outcome.result?;
        write_html(html, &format!("sample_{sampler}"), &outcome.profile)?;
        node.stop();
    }
    Ok(())
}
