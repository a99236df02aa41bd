//! What a CPU profile could see: each sampled thread's CPU time beside the CPU time its samples
//! stand for, the distinct samples beside the rate asked, the mechanism that took them, and
//! the warnings when they fall short. Pure data and arithmetic: the runtime fills it for a
//! session ([`SampleData::cpu`](crate::sample::SampleData::cpu)), and `tprof` reads it back from an
//! archive and prints it in every report and export.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which mechanism drives the CPU sampler ([`SampleOptions::cpu_source`](crate::sample::SampleOptions::cpu_source)),
/// and which one took a profile's samples ([`CpuCoverage::source`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuSource {
    /// Perf events where the kernel allows them, else per-thread timers (and the profile says
    /// why). Options only: a profile names the mechanism taken.
    #[default]
    Auto,
    /// A perf event per thread on its task clock, driven by a high-resolution timer while the
    /// thread runs: every thread sampled wherever its CPU time falls, at the rate asked.
    PerfEvents,
    /// A POSIX CPU-time timer per thread (`timer_create`), which the kernel checks only at its
    /// scheduler tick (`CONFIG_HZ`, often 250): at most that many distinct samples per
    /// CPU-second, each weighted by the periods it stands for, and a thread whose time on the
    /// CPU falls between two ticks (it sleeps, yields, makes system calls or shares the CPU)
    /// is not sampled however much CPU it burns.
    Timers,
}

impl CpuSource {
    /// `auto`, `perf_events` or `timers`.
    pub fn name(self) -> &'static str {
        match self {
            CpuSource::Auto => "auto",
            CpuSource::PerfEvents => "perf_events",
            CpuSource::Timers => "timers",
        }
    }

    /// The source `name` names.
    pub fn from_name(name: &str) -> Option<CpuSource> {
        [CpuSource::Auto, CpuSource::PerfEvents, CpuSource::Timers]
            .into_iter()
            .find(|s| s.name() == name)
    }

    /// How a report says it: `perf events (task clock)` or `per-thread CPU timers (tick-bound)`.
    pub fn describe(self) -> &'static str {
        match self {
            CpuSource::Auto => "perf events where allowed, else per-thread CPU timers",
            CpuSource::PerfEvents => "perf events (each thread's task clock)",
            CpuSource::Timers => "per-thread CPU timers (checked at the kernel's tick)",
        }
    }
}

impl fmt::Display for CpuSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CpuSource {
    type Err = String;
    fn from_str(s: &str) -> Result<CpuSource, String> {
        CpuSource::from_name(s)
            .ok_or_else(|| format!("`{s}` is not a CPU source: auto, perf_events or timers"))
    }
}

/// One thread's share of a CPU profile's truth.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ThreadCoverage {
    /// The thread's CPU time while the session timed it, in nanoseconds: its CPU clock read
    /// when it was first timed and when the figures were taken (or when it exited), less the
    /// CPU time of its samples that are not the session's ([`elsewhere_ns`](Self::elsewhere_ns)).
    pub cpu_ns: u64,
    /// The CPU time its samples stand for, kept and dropped, in nanoseconds.
    pub sampled_ns: u64,
    /// Its distinct samples, kept and dropped.
    pub samples: u64,
    /// The CPU time its samples that are not the session's stand for, in nanoseconds: samples
    /// of another node's processes, of processes the session does not sample (or outside the
    /// measured part of their polls, once they have ended), or of its time outside processes
    /// when it is another node's thread. Out of the profile, and out of
    /// [`cpu_ns`](Self::cpu_ns): so the figures are those of the profile's samples.
    #[serde(default)]
    pub elsewhere_ns: u64,
    /// How many samples [`elsewhere_ns`](Self::elsewhere_ns) stands for.
    #[serde(default)]
    pub elsewhere: u64,
    /// Overflows of its perf event whose signal was lost (the event stopped sampling it) and
    /// that the drain re-armed, having seen its CPU clock run on while the event counted
    /// nothing.
    #[serde(default)]
    pub stalls: u64,
    /// The CPU time it used between its last sample before each lost overflow and the
    /// re-arming, in nanoseconds: in no sample (out of [`sampled_ns`](Self::sampled_ns)).
    #[serde(default)]
    pub stalled_ns: u64,
    /// Whether it could not get the session's mechanism and fell back to a per-thread timer
    /// alone (no free descriptor), or got neither (never armed).
    pub fallback: bool,
    /// Whether it was never armed: it ran while the session sampled, without a timer.
    pub unarmed: bool,
}

impl ThreadCoverage {
    /// A thread's figures, neither fallen back nor unarmed (for a reader rebuilding them: the
    /// struct is non-exhaustive).
    pub fn new(cpu_ns: u64, sampled_ns: u64, samples: u64) -> ThreadCoverage {
        ThreadCoverage {
            cpu_ns,
            sampled_ns,
            samples,
            elsewhere_ns: 0,
            elsewhere: 0,
            stalls: 0,
            stalled_ns: 0,
            fallback: false,
            unarmed: false,
        }
    }

    /// Its samples' CPU time over its CPU time (`None` without CPU time).
    pub fn captured(&self) -> Option<f64> {
        (self.cpu_ns > 0).then(|| self.sampled_ns as f64 / self.cpu_ns as f64)
    }
}

/// A CPU profile's truth: the mechanism that took its samples and, per sampled thread, its CPU
/// time against what its samples stand for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CpuCoverage {
    /// The mechanism that took the samples ([`CpuSource::PerfEvents`] or
    /// [`CpuSource::Timers`]).
    pub source: CpuSource,
    /// Why the session runs on its fallback, when it does (the option asked for timers, or
    /// perf events were refused, and why).
    pub fallback: Option<String>,
    /// The rate asked, in Hz.
    pub hz: u32,
    /// The threads the session timed, each with its thread's index in the profile's threads.
    pub threads: Vec<(u32, ThreadCoverage)>,
    /// Whether the perf events sampled kernel mode too (`perf_event_paranoid` 1 or less, or
    /// `CAP_PERFMON`). Without it (the usual default, 2, allows user mode only) an overflow
    /// while a thread runs a system call is no sample of its own: its CPU time goes to the
    /// thread's next sample, and kernel-heavy code (message passing's futex wakes) takes
    /// fewer distinct samples than the rate asked. False for timers.
    #[serde(default)]
    pub kernel: bool,
}

/// A thread that is busy enough for its coverage to be judged: 20 ms of CPU (and, at low
/// rates, [`JUDGED_PERIODS`] sampling periods of it: see [`CpuCoverage::judged_ns`]).
pub const BUSY_THREAD_NS: u64 = 20_000_000;

/// Sampling periods of CPU a thread needs for its own share to be judged. The CPU a thread
/// spends after its last sample is in no sample, whatever the mechanism: half a period on
/// average, up to one and a half with the period redrawn at random. A flawless sampler gives a
/// thread of two periods (20 ms at 99 Hz) 73 % on average, and one that ran 14 ms none at all;
/// at ten periods the tail is about 5 %.
pub const JUDGED_PERIODS: u64 = 10;

impl CpuCoverage {
    /// A profile's truth from its parts (for a reader rebuilding it: the struct is
    /// non-exhaustive).
    pub fn new(
        source: CpuSource,
        fallback: Option<String>,
        hz: u32,
        threads: Vec<(u32, ThreadCoverage)>,
    ) -> CpuCoverage {
        CpuCoverage {
            source,
            fallback,
            hz,
            threads,
            kernel: false,
        }
    }

    /// The threads' CPU time, in nanoseconds (saturating: figures read from a file may be
    /// anything).
    pub fn cpu_ns(&self) -> u64 {
        self.threads
            .iter()
            .fold(0, |sum, (_, t)| sum.saturating_add(t.cpu_ns))
    }

    /// The CPU time the samples stand for, in nanoseconds.
    pub fn sampled_ns(&self) -> u64 {
        self.threads
            .iter()
            .fold(0, |sum, (_, t)| sum.saturating_add(t.sampled_ns))
    }

    /// The distinct samples taken.
    pub fn samples(&self) -> u64 {
        self.threads
            .iter()
            .fold(0, |sum, (_, t)| sum.saturating_add(t.samples))
    }

    /// The threads' samples that are not the profile's, and the CPU time they stand for
    /// ([`ThreadCoverage::elsewhere_ns`]), in nanoseconds: left out of both figures.
    pub fn elsewhere(&self) -> (u64, u64) {
        self.threads.iter().fold((0, 0), |(n, ns), (_, t)| {
            (
                n.saturating_add(t.elsewhere),
                ns.saturating_add(t.elsewhere_ns),
            )
        })
    }

    /// The overflows the threads' perf events lost and the drain re-armed
    /// ([`ThreadCoverage::stalls`]), and the CPU time they left in no sample
    /// ([`ThreadCoverage::stalled_ns`]), in nanoseconds.
    pub fn stalls(&self) -> (u64, u64) {
        self.threads.iter().fold((0, 0), |(n, ns), (_, t)| {
            (n.saturating_add(t.stalls), ns.saturating_add(t.stalled_ns))
        })
    }

    /// The samples' CPU time over the threads' CPU time (`None` without CPU time).
    pub fn captured(&self) -> Option<f64> {
        let cpu = self.cpu_ns();
        (cpu > 0).then(|| self.sampled_ns() as f64 / cpu as f64)
    }

    /// Distinct samples per CPU-second: the rate taken, beside the rate asked ([`hz`](Self::hz)).
    pub fn samples_per_cpu_second(&self) -> Option<f64> {
        let cpu = self.cpu_ns();
        (cpu > 0).then(|| self.samples() as f64 / (cpu as f64 / 1e9))
    }

    /// Adds `other`'s threads (`offset` added to their indices): a merge of two sources'
    /// figures. The mechanism stays this one's, unless the two differ: then the fallback's
    /// (timers), and the reason says so.
    pub fn merge(&mut self, other: &CpuCoverage, offset: u32) {
        self.threads
            .extend(other.threads.iter().map(|(i, t)| (i + offset, t.clone())));
        if other.source != self.source {
            self.source = CpuSource::Timers;
        }
        self.kernel &= other.kernel;
        if self.fallback.is_none() {
            self.fallback.clone_from(&other.fallback);
        }
    }

    /// The one-line summary reports print: mechanism, captured share, distinct samples per
    /// CPU-second against the rate asked.
    pub fn summary(&self) -> String {
        let mut line = format!("CPU samples by {}", self.source.describe());
        if self.source == CpuSource::PerfEvents {
            // Its last character is the description's closing parenthesis.
            line.pop();
            line.push_str(if self.kernel {
                ", user and kernel mode)"
            } else {
                ", user mode only)"
            });
        }
        match (self.captured(), self.samples_per_cpu_second()) {
            (Some(captured), Some(rate)) => line.push_str(&format!(
                ": {:.1}% of the sampled threads' {} of CPU captured, {:.0} distinct samples per \
                 CPU-second at {} Hz asked",
                captured * 100.0,
                millis(self.cpu_ns()),
                rate,
                self.hz
            )),
            _ => line.push_str(&format!(
                ": the sampled threads used no CPU time ({} Hz asked)",
                self.hz
            )),
        }
        let (elsewhere, elsewhere_ns) = self.elsewhere();
        if elsewhere > 0 {
            line.push_str(&format!(
                "; {elsewhere} more sample(s) of these threads, {}, were of work this profile \
                 does not sample (other nodes' processes, unsampled processes, another node's \
                 thread outside processes) and are out of the profile and of these figures",
                millis(elsewhere_ns)
            ));
        }
        if let Some(why) = &self.fallback {
            line.push_str(&format!(" (fallback: {why})"));
        }
        line
    }

    /// What a reader must know before trusting the profile: the samples cover too little of
    /// the CPU time (under 90 %), a busy thread (20 ms of CPU or more) is under 50 % or has
    /// no sample, or the distinct samples come at under half the rate asked; each with its
    /// likely cause. `thread_name` names a thread by its index.
    pub fn warnings(&self, thread_name: &dyn Fn(u32) -> String) -> Vec<String> {
        let mut out = Vec::new();
        let cause = self.cause();
        if let Some(captured) = self.captured()
            && captured < 0.9
        {
            out.push(format!(
                "the samples stand for {:.1}% of the sampled threads' CPU time ({} of {}): \
                 {cause}",
                captured * 100.0,
                millis(self.sampled_ns()),
                millis(self.cpu_ns())
            ));
        }
        for (index, t) in &self.threads {
            if t.stalls > 0 {
                out.push(format!(
                    "thread {}'s perf event lost {} overflow signal(s) and stopped sampling it \
                     until the drain re-armed it: {} of its CPU time is in no sample",
                    thread_name(*index),
                    t.stalls,
                    millis(t.stalled_ns)
                ));
            }
        }
        let judged = self.judged_ns();
        for (index, t) in &self.threads {
            if t.cpu_ns < judged {
                continue;
            }
            let name = thread_name(*index);
            if t.unarmed {
                out.push(format!(
                    "thread {name} used {} of CPU and was never armed (no perf event, no \
                     timer): none of its CPU time is in the profile",
                    millis(t.cpu_ns)
                ));
            } else if t.samples == 0 {
                out.push(format!(
                    "thread {name} used {} of CPU and has no sample: {cause}",
                    millis(t.cpu_ns)
                ));
            } else if let Some(c) = t.captured()
                && c < 0.5
            {
                out.push(format!(
                    "thread {name}'s samples stand for {:.1}% of its {} of CPU: {cause}",
                    c * 100.0,
                    millis(t.cpu_ns)
                ));
            }
        }
        if let Some(rate) = self.samples_per_cpu_second()
            && self.cpu_ns() >= BUSY_THREAD_NS
            && rate < f64::from(self.hz) / 2.0
        {
            out.push(format!(
                "{rate:.0} distinct samples per CPU-second were taken at {} Hz asked: {cause}",
                self.hz
            ));
        }
        out
    }

    /// The CPU time a thread needs for its own share to be judged by
    /// [`warnings`](Self::warnings): [`BUSY_THREAD_NS`], or [`JUDGED_PERIODS`] periods of the
    /// rate asked when that is more (101 ms at 99 Hz).
    pub fn judged_ns(&self) -> u64 {
        let period = 1_000_000_000 / u64::from(self.hz.max(1));
        BUSY_THREAD_NS.max(period.saturating_mul(JUDGED_PERIODS))
    }

    /// The likely cause of a shortfall, as a warning names it.
    fn cause(&self) -> String {
        let fallen = self.threads.iter().filter(|(_, t)| t.fallback).count();
        match self.source {
            CpuSource::Timers => {
                let why = self
                    .fallback
                    .as_deref()
                    .map_or(String::new(), |why| format!(" ({why})"));
                format!(
                    "the CPU sampler ran on its fallback, per-thread CPU timers{why}, which the \
                     kernel checks only at its scheduler tick (CONFIG_HZ, often 250 or 100): at \
                     most that many distinct samples per CPU-second, and threads whose time on \
                     the CPU falls between ticks are missed"
                )
            }
            _ if fallen > 0 => format!(
                "{fallen} thread(s) could not get a perf event (no free file descriptor) and \
                 fell back to tick-bound timers"
            ),
            _ => {
                let mut cause = format!(
                    "perf events should see every thread's CPU time; the rest was lost to full \
                     rings or is the CPU each thread spent after its last sample (half a \
                     period, {}, on average per thread: {} threads here)",
                    millis(1_000_000_000 / u64::from(self.hz.max(1)) / 2),
                    self.threads.len()
                );
                if !self.kernel {
                    cause.push_str(
                        "; and the events sampled user mode only (kernel.perf_event_paranoid 2 \
                         or more): the CPU of an overflow in a system call goes to the next \
                         sample, so code that lives in system calls takes fewer distinct \
                         samples than the rate asked",
                    );
                }
                cause
            }
        }
    }
}

/// `12.3 ms`, `4.56 s`.
fn millis(ns: u64) -> String {
    if ns >= 10_000_000_000 {
        format!("{:.2} s", ns as f64 / 1e9)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(cpu_ms: u64, sampled_ms: u64, samples: u64) -> ThreadCoverage {
        ThreadCoverage {
            cpu_ns: cpu_ms * 1_000_000,
            sampled_ns: sampled_ms * 1_000_000,
            samples,
            ..ThreadCoverage::default()
        }
    }

    fn name(i: u32) -> String {
        format!("#{i}")
    }

    #[test]
    fn a_profile_that_saw_its_cpu_time_warns_of_nothing() {
        let c = CpuCoverage {
            kernel: false,
            source: CpuSource::PerfEvents,
            fallback: None,
            hz: 999,
            threads: vec![(0, thread(500, 490, 495)), (1, thread(5, 0, 0))],
        };
        assert!((c.captured().unwrap() - 490.0 / 505.0).abs() < 1e-9);
        assert!(c.warnings(&name).is_empty(), "{:?}", c.warnings(&name));
        assert!(c.summary().contains("97.0% of"), "{}", c.summary());
    }

    #[test]
    fn a_short_profile_names_each_shortfall_and_the_tick_bound_fallback() {
        let c = CpuCoverage {
            kernel: false,
            source: CpuSource::Timers,
            fallback: Some("asked for by the options".into()),
            hz: 999,
            threads: vec![
                (0, thread(400, 300, 75)),
                (1, thread(100, 0, 0)),
                (2, thread(50, 10, 3)),
            ],
        };
        let w = c.warnings(&name);
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(
            w[0].contains("56.4% of the sampled threads' CPU time"),
            "{}",
            w[0]
        );
        assert!(
            w[1].contains("thread #1") && w[1].contains("no sample"),
            "{}",
            w[1]
        );
        assert!(
            w[2].contains("thread #2") && w[2].contains("20.0%"),
            "{}",
            w[2]
        );
        assert!(w[3].contains("distinct samples per CPU-second"), "{}", w[3]);
        assert!(
            w.iter()
                .all(|w| w.contains("CONFIG_HZ") && w.contains("asked for by the options"))
        );
    }

    /// At a low rate a thread is judged on its own only past ten periods of CPU: the CPU after
    /// its last sample (up to a period and a half) is in no sample by nature, so a 30 ms
    /// thread at 99 Hz with one 10 ms sample is no fault, while a 150 ms thread with a third
    /// of its CPU sampled is.
    #[test]
    fn a_thread_is_judged_only_past_ten_periods_of_the_rate() {
        let c = CpuCoverage {
            kernel: false,
            source: CpuSource::PerfEvents,
            fallback: None,
            hz: 99,
            threads: vec![
                (0, thread(2000, 1990, 199)),
                (1, thread(30, 10, 1)),
                (2, thread(60, 0, 0)),
                (3, thread(150, 50, 5)),
            ],
        };
        assert_eq!(c.judged_ns(), 101_010_100);
        let w = c.warnings(&name);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("thread #3") && w[0].contains("33.3%"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("after its last sample"), "{}", w[0]);
        // At 999 Hz the 20 ms floor judges them all.
        let fast = CpuCoverage { hz: 999, ..c };
        assert_eq!(fast.judged_ns(), BUSY_THREAD_NS);
        assert_eq!(fast.warnings(&name).len(), 4, "{:?}", fast.warnings(&name));
    }

    /// A profile on perf events says whether they sampled kernel mode, and, short of the rate
    /// asked in user mode only, names that as a cause.
    #[test]
    fn a_profile_says_whether_kernel_mode_was_sampled() {
        let mut c = CpuCoverage::new(
            CpuSource::PerfEvents,
            None,
            999,
            vec![(0, thread(1000, 990, 400))],
        );
        assert!(
            c.summary().starts_with(
                "CPU samples by perf events (each thread's task clock, user mode only): "
            ),
            "{}",
            c.summary()
        );
        let w = c.warnings(&name);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("user mode only"), "{}", w[0]);
        c.kernel = true;
        assert!(
            c.summary().starts_with(
                "CPU samples by perf events (each thread's task clock, user and kernel mode): "
            ),
            "{}",
            c.summary()
        );
        assert!(!c.warnings(&name)[0].contains("user mode only"));
        // Merged with a profile that sampled user mode only, the merge did too.
        let user = CpuCoverage::new(CpuSource::PerfEvents, None, 999, Vec::new());
        c.merge(&user, 1);
        assert!(!c.kernel);
    }
}
