//! Whether CPU profiles tell the truth on every shape (issue #29): each of the six shapes
//! ([`super::shapes`]) under tprof on perf events, tprof on its fallback (per-thread CPU
//! timers) and pprof-rs, at 99 and 999 Hz, several runs per cell, against an unprofiled run of
//! the same shape; and what tprof's wall sample session at the same rate costs the shape
//! (`tprof wall`: its throughput alone, a wall profile's samples standing for no CPU). Per
//! cell it prints:
//!
//! - `captured`: the CPU time the samples stand for over the CPU time of all the threads that
//!   did the work (each thread's `schedstat`, read before and after the run), as the mean over
//!   the runs, and the lowest of any busy thread (20 ms of CPU or more, and ten sampling
//!   periods or more: 101 ms at 99 Hz) in any run (`-` when no thread did that much in any
//!   run: the work spread over many threads, as the blocking shape's pool may);
//! - `samples/cpu-s`: distinct samples per CPU-second of those threads (the rate taken, beside
//!   the rate asked);
//! - `A:B`: for the mixes, the CPU the samples give `shape_a` over `shape_b`, summed over the
//!   runs, against the truth (each call's CPU measured by its thread's CPU clock);
//! - `throughput`: units of work per CPU-second of the process, as a share of the unprofiled
//!   runs' taken in turn with the cell's own (an unprofiled run before each profiled one: a
//!   shape's unprofiled throughput drifts by a few points over minutes, as much as the 3 % a
//!   profiler may cost).
//!
//! tprof's figures are computed here from the samples, the same way as pprof-rs's, not taken
//! from the profile's own coverage (which is printed beside them, as `self`).
//!
//! Runs: `SAMPLING_REPS` (10) per cell, each `SAMPLING_RUN_MS` (1000) of wall time, but for the
//! mixes below [`LONG_UNDER_HZ`] when `SAMPLING_RUN_MS` is not set, which run [`LONG_RUNS`] times
//! as long: their A:B is judged on the samples of B, and ten 1-second runs at 99 Hz give B about
//! 500 of them, a ratio known to ~5 % (one error), so that "within 10 %" of the truth missed in
//! two sets of ten on noise alone (the jackknife errors printed beside the ratio said as much);
//! at 3 seconds the error is ~3 %;
//! `SAMPLING_SHAPES` (a comma-separated subset), `SAMPLING_HZ` (`99,999`) and `SAMPLING_PROFILERS`
//! (a subset of `perf,timers,pprof,wall`) narrow the table.
//! `SAMPLING_DEBUG` adds, under each cell, where a profiler's cost went: the throughput while
//! the shape ran (the fetch of the samples left out) and per CPU-second of the working threads
//! alone, and the CPU of the fetch and of the other threads; the mixes' A:B run by run; and
//! names each busy thread under 85 %. `SAMPLING_TRACED=none` opens tprof's sessions tracing no
//! function (the processes alone; `tprof run` traces every one): what the traced calls' frames
//! cost, told apart from what the session's polls and samples do.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use runtime::Node;
use runtime::sample::{CpuSource, SampleOptions, Sampler};
use runtime::trace::{ProcessSpec, TracePattern};

use super::shapes::{self, SHAPES, THREADS};

/// A thread with this much CPU in a run, and at least [`JUDGED_PERIODS`] sampling periods of
/// it, is judged on its own (`min/thr`).
const BUSY_NS: u64 = 20_000_000;

/// Periods of CPU a thread needs before its own share is judged: the CPU after a thread's last
/// sample is in no sample, whatever the mechanism (half a period on average, up to one and a
/// half with the period redrawn at random), so a thread of two periods (20 ms at 99 Hz) reads
/// 73 % on average from a flawless sampler. At ten periods that tail is about 5 %.
const JUDGED_PERIODS: f64 = 10.0;

/// The mixes sampled under this rate run [`LONG_RUNS`] times as long (see the module docs).
const LONG_UNDER_HZ: u32 = 300;

/// How many times as long the mixes run under [`LONG_UNDER_HZ`].
const LONG_RUNS: u32 = 3;

#[derive(Clone, Copy, PartialEq)]
enum Profiler {
    Unprofiled,
    Tprof(CpuSource),
    /// tprof's wall sampler: judged on its throughput alone.
    TprofWall,
    Pprof,
}

impl Profiler {
    /// Its name in `SAMPLING_PROFILERS`.
    fn key(self) -> &'static str {
        match self {
            Profiler::Unprofiled => "none",
            Profiler::Tprof(CpuSource::Timers) => "timers",
            Profiler::Tprof(_) => "perf",
            Profiler::TprofWall => "wall",
            Profiler::Pprof => "pprof",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Profiler::Unprofiled => "unprofiled",
            Profiler::Tprof(CpuSource::Timers) => "tprof timers",
            Profiler::Tprof(_) => "tprof perf",
            Profiler::TprofWall => "tprof wall",
            Profiler::Pprof => "pprof-rs",
        }
    }
}

/// One run's figures.
#[derive(Default)]
struct Run {
    captured: f64,
    /// The lowest share of a judged thread, `None` when no thread was busy enough to judge.
    min_thread: Option<f64>,
    samples_per_cpu_s: f64,
    a_sampled: f64,
    b_sampled: f64,
    a_true: f64,
    b_true: f64,
    throughput: f64,
    /// Units per CPU-second of the process while the shape ran (the fetch of the samples
    /// after it left out), of its working threads alone, and the CPU (ns) of the fetch and of
    /// the threads that did no work, while it ran: where a profiler's cost goes.
    throughput_running: f64,
    throughput_working: f64,
    fetch_ns: u64,
    others_ns: u64,
    /// The profile's own coverage (tprof): captured and samples per CPU-second.
    own: Option<(f64, f64)>,
}

/// This process's user and system CPU time, in nanoseconds.
fn process_cpu_ns() -> u64 {
    // SAFETY: `getrusage` writes the struct it is given, a zeroed plain struct on the stack.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Which of `shape_a` / `shape_b` a stack of names is in, innermost first.
fn a_or_b<'a>(names: impl Iterator<Item = &'a str>) -> Option<bool> {
    for name in names {
        if name.contains("shape_a") {
            return Some(true);
        }
        if name.contains("shape_b") {
            return Some(false);
        }
    }
    None
}

fn one_run(node: &Node, shape: &str, profiler: Profiler, hz: u32, run: Duration) -> Run {
    let period_ns = 1e9 / f64::from(hz);
    let cpu_before = shapes::threads_cpu();
    let process_before = process_cpu_ns();
    let mut session = None;
    let mut guard = None;
    match profiler {
        Profiler::Unprofiled => {}
        Profiler::Tprof(_) | Profiler::TprofWall => {
            let options = match profiler {
                Profiler::Tprof(source) => SampleOptions::new().cpu_source(source),
                _ => SampleOptions::new().sampler(Sampler::Wall),
            };
            let s = node
                .sample_session(options.hz(hz).n(10_000_000))
                .expect("sample session");
            // `SAMPLING_TRACED=none` traces no function (the processes alone): what the
            // traced calls' frames cost, told from what the session's polls and samples do.
            if std::env::var("SAMPLING_TRACED").as_deref() != Ok("none") {
                s.trace()
                    .set_pattern(&TracePattern::all())
                    .expect("pattern");
            }
            s.trace()
                .enable_trace(ProcessSpec::New, true)
                .expect("flags");
            session = Some(s);
        }
        Profiler::Pprof => {
            guard = Some(
                pprof::ProfilerGuardBuilder::default()
                    .frequency(hz as i32)
                    .blocklist(&["libc", "libgcc", "pthread", "vdso"])
                    .build()
                    .expect("pprof-rs"),
            );
        }
    }
    let work = shapes::run(node, shape, run);
    let process_ran = process_cpu_ns() - process_before;
    let cpu_ran = shapes::threads_cpu();
    // Sampled CPU by thread id, samples by thread id, and A / B.
    let mut sampled: HashMap<i32, f64> = HashMap::new();
    let mut samples: HashMap<i32, u64> = HashMap::new();
    let (mut a, mut b) = (0.0, 0.0);
    let mut own = None;
    // The profile's own figures per thread id (tprof): CPU, sampled CPU, samples.
    let mut own_threads: HashMap<i32, (u64, u64, u64)> = HashMap::new();
    if let Some(s) = session.take() {
        let data = s.samples();
        drop(s);
        // A wall profile's samples stand for wall time, not CPU: fetched (its cost counts),
        // not counted.
        let counted = if profiler == Profiler::TprofWall {
            &[][..]
        } else {
            &data.samples[..]
        };
        for sample in counted {
            let Some(tid) = sample
                .thread
                .and_then(|t| data.threads.iter().find(|th| th.index == t))
                .map(|th| th.tid)
            else {
                continue;
            };
            let ns = sample.weight * period_ns;
            *sampled.entry(tid).or_default() += ns;
            *samples.entry(tid).or_default() += 1;
            match a_or_b(sample.traced.iter().rev().map(|cs| cs.function())) {
                Some(true) => a += ns,
                Some(false) => b += ns,
                None => {}
            }
        }
        own = data
            .cpu
            .as_ref()
            .filter(|_| profiler != Profiler::TprofWall)
            .and_then(|c| Some((c.captured()?, c.samples_per_cpu_second()?)));
        for (index, t) in data.cpu.iter().flat_map(|c| &c.threads) {
            if let Some(th) = data.threads.iter().find(|th| th.index == *index) {
                own_threads.insert(th.tid, (t.cpu_ns, t.sampled_ns, t.samples));
            }
        }
    }
    if let Some(g) = guard.take() {
        let report = g.report().build().expect("pprof-rs report");
        drop(g);
        let tids: HashMap<u64, i32> = THREADS.lock().expect("threads").iter().copied().collect();
        for (frames, count) in &report.data {
            let Some(&tid) = tids.get(&frames.thread_id) else {
                continue;
            };
            let ns = *count as f64 * period_ns;
            *sampled.entry(tid).or_default() += ns;
            *samples.entry(tid).or_default() += *count as u64;
            let names: Vec<String> = frames
                .frames
                .iter()
                .flatten()
                .map(|symbol| symbol.name())
                .collect();
            match a_or_b(names.iter().map(String::as_str)) {
                Some(true) => a += ns,
                Some(false) => b += ns,
                None => {}
            }
        }
    }
    let process_cpu = process_cpu_ns() - process_before;
    let cpu_after = shapes::threads_cpu();
    let working: HashSet<i32> = THREADS
        .lock()
        .expect("threads")
        .iter()
        .map(|t| t.1)
        .collect();
    // The CPU the working threads (or the others) used while the shape ran.
    let cpu_while_running = |of_working: bool| {
        cpu_ran
            .iter()
            .filter(|(tid, _)| working.contains(tid) == of_working)
            .map(|(tid, ns)| ns.saturating_sub(cpu_before.get(tid).copied().unwrap_or(0)))
            .sum::<u64>()
    };
    let (working_ns, others_ns) = (cpu_while_running(true), cpu_while_running(false));
    let mut all_cpu = 0u64;
    let mut all_sampled = 0.0;
    let mut all_samples = 0u64;
    let mut min_thread = f64::INFINITY;
    for &tid in &working {
        let used = cpu_after
            .get(&tid)
            .copied()
            .unwrap_or(0)
            .saturating_sub(cpu_before.get(&tid).copied().unwrap_or(0));
        let got = sampled.get(&tid).copied().unwrap_or(0.0);
        // Every working thread counts in the sums; a busy one is judged on its own too.
        all_cpu += used;
        all_sampled += got;
        all_samples += samples.get(&tid).copied().unwrap_or(0);
        if used >= BUSY_NS
            && (got / used as f64) < 0.85
            && !matches!(profiler, Profiler::Unprofiled | Profiler::TprofWall)
            && std::env::var_os("SAMPLING_DEBUG").is_some()
        {
            // A thread under the target: the bench's figures beside the profile's own.
            eprintln!(
                "{shape} {hz} Hz {}: thread {tid} {:.1} ms of CPU, {:.1} ms sampled \
                 ({} samples); its own row (cpu, sampled, samples): {:?}",
                profiler.name(),
                used as f64 / 1e6,
                got / 1e6,
                samples.get(&tid).copied().unwrap_or(0),
                own_threads.get(&tid)
            );
        }
        if used >= BUSY_NS.max((JUDGED_PERIODS * period_ns) as u64) {
            min_thread = min_thread.min(got / used as f64);
        }
    }
    Run {
        captured: all_sampled / all_cpu.max(1) as f64,
        min_thread: min_thread.is_finite().then_some(min_thread),
        samples_per_cpu_s: all_samples as f64 / (all_cpu.max(1) as f64 / 1e9),
        a_sampled: a,
        b_sampled: b,
        a_true: work.a_ns as f64,
        b_true: work.b_ns as f64,
        throughput: work.units as f64 / (process_cpu.max(1) as f64 / 1e9),
        throughput_running: work.units as f64 / (process_ran.max(1) as f64 / 1e9),
        throughput_working: work.units as f64 / (working_ns.max(1) as f64 / 1e9),
        fetch_ns: process_cpu - process_ran,
        others_ns,
        own,
    }
}

fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Prints the table (see the module documentation).
pub(crate) fn table() {
    let reps: usize = std::env::var("SAMPLING_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let run_asked: Option<u64> = std::env::var("SAMPLING_RUN_MS")
        .ok()
        .and_then(|r| r.parse().ok());
    let run = Duration::from_millis(run_asked.unwrap_or(1000));
    // The mixes at a low rate run longer unless a run length is asked (see the module docs).
    let run_of = |shape: &str, hz: u32| {
        if run_asked.is_none() && shape.starts_with("mix") && hz < LONG_UNDER_HZ {
            run * LONG_RUNS
        } else {
            run
        }
    };
    let shapes_asked = env_list("SAMPLING_SHAPES", &SHAPES.join(","));
    let rates: Vec<u32> = env_list("SAMPLING_HZ", "99,999")
        .iter()
        .filter_map(|r| r.parse().ok())
        .collect();
    let profilers_asked = env_list("SAMPLING_PROFILERS", "perf,timers,pprof,wall");
    if let Some(unknown) = profilers_asked
        .iter()
        .find(|a| !["perf", "timers", "pprof", "wall"].contains(&a.as_str()))
    {
        eprintln!(
            "sampling/truth: SAMPLING_PROFILERS names `{unknown}`: perf, timers, pprof or wall"
        );
    }
    let perf_ok = node_probe();
    let node = Node::builder().worker_threads(2).build().expect("node");
    println!(
        "sampling/truth: {reps} runs of {} ms per cell ({} ms for the mixes under {LONG_UNDER_HZ} Hz), 2 workers{}",
        run.as_millis(),
        run_of("mix", 0).as_millis(),
        if perf_ok {
            ""
        } else {
            " (perf events refused here: tprof perf rows missing)"
        }
    );
    println!(
        "{:<9} {:>4} {:<12} {:>9} {:>9} {:>13} {:>22} {:>10} {:>15}",
        "shape",
        "hz",
        "profiler",
        "captured",
        "min/thr",
        "samples/cpu-s",
        "A:B (true)",
        "thruput",
        "self"
    );
    for shape in &shapes_asked {
        for &hz in &rates {
            let mut profilers = vec![Profiler::Tprof(CpuSource::Timers), Profiler::Pprof];
            if perf_ok {
                profilers.insert(0, Profiler::Tprof(CpuSource::PerfEvents));
            }
            profilers.push(Profiler::TprofWall);
            profilers.retain(|p| profilers_asked.iter().any(|a| a == p.key()));
            for profiler in profilers {
                // Each profiled run beside an unprofiled one just before it: its baseline.
                let (base, runs): (Vec<Run>, Vec<Run>) = (0..reps)
                    .map(|_| {
                        let run = run_of(shape, hz);
                        let unprofiled = one_run(&node, shape, Profiler::Unprofiled, 99, run);
                        (unprofiled, one_run(&node, shape, profiler, hz, run))
                    })
                    .unzip();
                let base_throughput = mean(base.iter().map(|r| r.throughput));
                let named_a = runs.iter().map(|r| r.a_sampled).sum::<f64>();
                let named_b = runs.iter().map(|r| r.b_sampled).sum::<f64>();
                let ab =
                    if runs.iter().any(|r| r.b_true > 0.0) && (named_a == 0.0 || named_b == 0.0) {
                        // pprof-rs's frames, as this bench resolves them, name one of the two
                        // functions or neither: no ratio rather than a ratio of nothing (it printed
                        // 10101010.10 once, B named in no sample).
                        "unnamed".to_owned()
                    } else if runs.iter().any(|r| r.b_true > 0.0) {
                        let sampled = named_a / named_b;
                        let truth = runs.iter().map(|r| r.a_true).sum::<f64>()
                            / runs.iter().map(|r| r.b_true).sum::<f64>().max(1.0);
                        format!(
                            "{sampled:.2}±{:.2} ({truth:.2})",
                            jackknife_error(&runs, |r| (r.a_sampled, r.b_sampled))
                        )
                    } else {
                        "-".to_owned()
                    };
                let own = if runs.iter().all(|r| r.own.is_some()) {
                    let c = mean(runs.iter().filter_map(|r| r.own).map(|o| o.0));
                    let s = mean(runs.iter().filter_map(|r| r.own).map(|o| o.1));
                    format!("{:.1}% {s:.0}/s", c * 100.0)
                } else {
                    "-".to_owned()
                };
                // Runs where no thread did ten periods of work judge no thread: `-` when
                // none did in any run, not a 0 % no thread had.
                let min_thread = runs
                    .iter()
                    .filter_map(|r| r.min_thread)
                    .reduce(f64::min)
                    .map_or_else(|| "-".to_owned(), |m| format!("{:.1}%", m * 100.0));
                let throughput = mean(runs.iter().map(|r| r.throughput)) / base_throughput * 100.0;
                if profiler == Profiler::TprofWall {
                    println!(
                        "{:<9} {:>4} {:<12} {:>9} {:>9} {:>13} {:>22} {throughput:>9.1}% {:>15}",
                        shape,
                        hz,
                        profiler.name(),
                        "-",
                        "-",
                        "-",
                        "-",
                        "-"
                    );
                } else {
                    println!(
                        "{:<9} {:>4} {:<12} {:>8.1}% {:>9} {:>13.0} {:>22} {:>9.1}% {:>15}",
                        shape,
                        hz,
                        profiler.name(),
                        mean(runs.iter().map(|r| r.captured)) * 100.0,
                        min_thread,
                        mean(runs.iter().map(|r| r.samples_per_cpu_s)),
                        ab,
                        throughput,
                        own
                    );
                }
                if std::env::var_os("SAMPLING_DEBUG").is_some() {
                    println!(
                        "{:<9} {:>4} {:<12} while running {:.1}%, working threads alone {:.1}%; \
                         CPU of the fetch {:.1} ms, of the other threads {:.1} ms (unprofiled \
                         {:.1} ms)",
                        "",
                        "",
                        "",
                        mean(runs.iter().map(|r| r.throughput_running))
                            / mean(base.iter().map(|r| r.throughput_running))
                            * 100.0,
                        mean(runs.iter().map(|r| r.throughput_working))
                            / mean(base.iter().map(|r| r.throughput_working))
                            * 100.0,
                        mean(runs.iter().map(|r| r.fetch_ns as f64)) / 1e6,
                        mean(runs.iter().map(|r| r.others_ns as f64)) / 1e6,
                        mean(base.iter().map(|r| r.others_ns as f64)) / 1e6,
                    );
                    if runs.iter().any(|r| r.b_true > 0.0) && named_a > 0.0 && named_b > 0.0 {
                        let each: Vec<String> = runs
                            .iter()
                            .map(|r| {
                                format!(
                                    "{:.2} ({:.2})",
                                    r.a_sampled / r.b_sampled.max(1.0),
                                    r.a_true / r.b_true.max(1.0)
                                )
                            })
                            .collect();
                        println!(
                            "{:<9} {:>4} {:<12} A:B run by run: {}",
                            "",
                            "",
                            "",
                            each.join(", ")
                        );
                    }
                }
            }
        }
    }
}

/// The standard error of the ratio of sums `Σa / Σb` over `runs` (`pick` gives a run's `a`
/// and `b`), by the jackknife: how far the ratio moves when one run is left out. What tells
/// a sampled A:B's noise from a bias: a ratio within two of these of the truth is noise.
fn jackknife_error(runs: &[Run], pick: impl Fn(&Run) -> (f64, f64)) -> f64 {
    let n = runs.len();
    if n < 2 {
        return 0.0;
    }
    let (a, b) = runs
        .iter()
        .map(&pick)
        .fold((0.0, 0.0), |(sa, sb), (x, y)| (sa + x, sb + y));
    let left_out: Vec<f64> = runs
        .iter()
        .map(|r| {
            let (x, y) = pick(r);
            (a - x) / (b - y).max(1.0)
        })
        .collect();
    let m = mean(left_out.iter().copied());
    let n = n as f64;
    ((n - 1.0) / n * left_out.iter().map(|r| (r - m).powi(2)).sum::<f64>()).sqrt()
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// Whether tprof can run on perf events here (a session asking for them opens).
fn node_probe() -> bool {
    let node = Node::builder().worker_threads(1).build().expect("node");
    node.sample_session(SampleOptions::new().cpu_source(CpuSource::PerfEvents))
        .is_ok()
}
