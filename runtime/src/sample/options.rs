//! What a sample session is asked for: the sampler ([`Sampler`]), its rate and buffer
//! ([`SampleOptions`], Julia's `Profile.init(n, delay)`), and what opening one can refuse
//! ([`SampleError`]). Plain settings: it uses the samplers' shared types (`crate::sampled`)
//! and the trace session's error, nothing of the samplers' machinery.

use std::fmt;

use super::{AllocRate, CpuSource};
use crate::trace::SessionError;

/// Which sampler a [`SampleSession`](super::SampleSession) runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Sampler {
    /// What each worker thread runs, on its CPU-time clock (Linux).
    #[default]
    Cpu,
    /// Every process, running or not: its state and where it waits.
    Wall,
    /// Allocations, in the counting allocator (Linux).
    Alloc,
}

impl Sampler {
    /// `cpu` or `wall`.
    pub fn name(self) -> &'static str {
        match self {
            Sampler::Cpu => "cpu",
            Sampler::Wall => "wall",
            Sampler::Alloc => "alloc",
        }
    }
}

impl fmt::Display for Sampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Sampler {
    type Err = String;
    fn from_str(s: &str) -> Result<Sampler, String> {
        match s {
            "cpu" => Ok(Sampler::Cpu),
            "wall" => Ok(Sampler::Wall),
            "alloc" => Ok(Sampler::Alloc),
            other => Err(format!("`{other}` is not a sampler: cpu, wall or alloc")),
        }
    }
}

/// The highest rate a sampler takes, in samples per second.
pub const MAX_HZ: u32 = 10_000;

/// How a [`SampleSession`](super::SampleSession) samples: Julia's `Profile.init(n, delay)`, and the sampler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleOptions {
    pub(super) sampler: Sampler,
    pub(super) hz: u32,
    pub(super) n: usize,
    pub(super) per_tick: usize,
    pub(super) alloc_rate: AllocRate,
    pub(super) cpu_source: CpuSource,
}

impl Default for SampleOptions {
    fn default() -> Self {
        SampleOptions::new()
    }
}

impl SampleOptions {
    /// The defaults: the CPU sampler at 99 Hz (not 100, to avoid running in lockstep with
    /// periodic work), a buffer of 100,000 samples, 32 processes per wall tick.
    pub fn new() -> SampleOptions {
        SampleOptions {
            sampler: Sampler::Cpu,
            hz: 99,
            n: 100_000,
            per_tick: 32,
            alloc_rate: AllocRate::default(),
            cpu_source: CpuSource::Auto,
        }
    }

    /// What drives the CPU sampler ([`Sampler::Cpu`]): [`CpuSource::Auto`] (the default)
    /// takes perf events on each thread's task clock where the kernel allows them and falls
    /// back to per-thread CPU timers where it does not; [`CpuSource::PerfEvents`] refuses to
    /// fall back ([`SampleError::PerfEvents`] says why they were refused);
    /// [`CpuSource::Timers`] takes the fallback. The profile says which one took its samples,
    /// and why ([`SampleData::cpu`](super::SampleData::cpu)).
    ///
    /// The fallback's limits: the kernel checks per-thread CPU timers only at its scheduler
    /// tick (`CONFIG_HZ`, often 250), so a thread gets at most that many distinct samples per
    /// CPU-second whatever the rate asked (each weighted by the periods it stands for), and a
    /// thread whose time on the CPU falls between two ticks (it sleeps, yields, makes system
    /// calls or shares the CPU) is never sampled.
    pub fn cpu_source(mut self, source: CpuSource) -> SampleOptions {
        self.cpu_source = source;
        self
    }

    /// The CPU sampler's mechanism asked for.
    pub fn get_cpu_source(&self) -> CpuSource {
        self.cpu_source
    }

    /// The allocation sampler's rate ([`Sampler::Alloc`]): [`AllocRate::Bytes`] (512 KiB by
    /// default) or Julia's [`AllocRate::SampleRate`].
    pub fn alloc_rate(mut self, rate: AllocRate) -> SampleOptions {
        self.alloc_rate = rate;
        self
    }

    /// The allocation sampler's rate chosen.
    pub fn get_alloc_rate(&self) -> AllocRate {
        self.alloc_rate
    }

    /// The sampler.
    pub fn sampler(mut self, sampler: Sampler) -> SampleOptions {
        self.sampler = sampler;
        self
    }

    /// Samples per second per thread (CPU) or ticks per second (wall): 1 to [`MAX_HZ`].
    ///
    /// What a CPU rate costs beside the samples' own handling: on perf events (the first
    /// mechanism, see [`cpu_source`](Self::cpu_source)) each thread's event runs on a
    /// high-resolution timer that the kernel stops and restarts at every context switch of the
    /// thread and that interrupts it once per period, which a program whose threads switch
    /// often (message passing, short blocking calls) pays for more the higher the rate. Measured
    /// on a 2-core virtual machine (no hardware counters; programming a timer traps to the
    /// hypervisor), `benches/sampling.rs`'s ping-pong of messages kept 98 % of its unprofiled
    /// work per CPU-second at 99 Hz and 90–94 % at 999 Hz: 3–4 points of that to the events
    /// counting with no signal sent, 1–2 to the signals with an empty handler, 1–2 at most to
    /// the profiler's own work. Shapes whose threads seldom switch (a compute loop, bursts, a
    /// mix of calls) kept 98.8–100 % at either rate; one that waits on blocking calls, 96.5–97 %
    /// at 999 Hz. 99 Hz, the default, is the rate for a program in production.
    ///
    /// A wall rate costs a wake of the wall sampler's thread per tick. On the same machine a
    /// thread that sleeps 1 ms and wakes, doing nothing else, used 17 µs of CPU per wake (29 µs
    /// with the CPUs otherwise idle), and the wall sampler's thread 14–16 ms of CPU per second
    /// at 999 Hz, nearly all of it those wakes (its ticks' own work, reading four processes,
    /// 1–2 ms); the ping-pong kept 97.4–99 % of its work per CPU-second at 99 Hz and
    /// 96–97 % at 999 Hz, the other shapes 99.6–99.8 % at 99 Hz and 98.7–99.2 % at 999 Hz.
    pub fn hz(mut self, hz: u32) -> SampleOptions {
        self.hz = hz;
        self
    }

    /// The time between samples, as Julia's `delay`: sets [`hz`](Self::hz) to its inverse.
    pub fn delay(mut self, delay: std::time::Duration) -> SampleOptions {
        let ns = delay.as_nanos().max(1);
        self.hz = u32::try_from(1_000_000_000 / ns).unwrap_or(u32::MAX);
        self
    }

    /// The buffer's size, in samples (Julia's `n`).
    pub fn n(mut self, n: usize) -> SampleOptions {
        self.n = n;
        self
    }

    /// Processes read per wall tick, at most (the wall sampler's cost per tick).
    pub fn per_tick(mut self, per_tick: usize) -> SampleOptions {
        self.per_tick = per_tick;
        self
    }

    /// The sampler chosen.
    pub fn get_sampler(&self) -> Sampler {
        self.sampler
    }

    /// The rate chosen, in Hz.
    pub fn get_hz(&self) -> u32 {
        self.hz
    }

    /// The buffer's size, in samples.
    pub fn get_n(&self) -> usize {
        self.n
    }
}

/// Why a sample session could not open.
#[derive(Debug)]
#[non_exhaustive]
pub enum SampleError {
    /// The rate is outside 1 to [`MAX_HZ`].
    Rate {
        /// The rate asked for.
        hz: u32,
    },
    /// A buffer of no samples.
    NoBuffer,
    /// Another handler of SIGPROF is installed (the program's own, or another profiler's).
    SignalTaken,
    /// A CPU sample session runs at another rate: the CPU sampler has one rate per OS process.
    RateTaken {
        /// The rate the open sessions run at.
        running_hz: u32,
        /// The rate asked for.
        asked_hz: u32,
        /// Whether the program runs under `tprof run` in sample mode
        /// ([`ENV_TYPE`](crate::trace::env_run::ENV_TYPE) is `sample`), whose own session
        /// is then the one running: the message says how to ask it for the rate.
        under_tprof_run: bool,
    },
    /// The CPU sampler needs Linux's per-thread CPU-time timers.
    Unsupported,
    /// A system call failed.
    Os {
        /// The call.
        what: &'static str,
        /// Its error.
        error: std::io::Error,
    },
    /// The trace session under the sample session could not open.
    Session(SessionError),
    /// An allocation rate of no bytes, or a `sample_rate` outside `[0, 1]`.
    AllocRate {
        /// The rate asked for.
        rate: AllocRate,
    },
    /// An allocation sample session runs at another rate: the allocator has one per program.
    AllocRateTaken {
        /// The rate the open sessions run at.
        running: AllocRate,
        /// The rate asked for.
        asked: AllocRate,
    },
    /// Perf events were asked for ([`CpuSource::PerfEvents`]) and the kernel refused them.
    PerfEvents {
        /// Why, in words.
        why: String,
    },
    /// A CPU sample session runs on another mechanism: the CPU sampler has one per program.
    SourceTaken {
        /// The mechanism the open sessions run on.
        running: CpuSource,
        /// The mechanism asked for.
        asked: CpuSource,
    },
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleError::Rate { hz } => write!(
                f,
                "a sampling rate of {hz} Hz is out of range: choose 1 to {MAX_HZ} Hz"
            ),
            SampleError::NoBuffer => {
                f.write_str("a sample buffer of 0 samples keeps nothing: choose n of 1 or more")
            }
            SampleError::SignalTaken => f.write_str(
                "SIGPROF already has a handler (the program's own, or another profiler's): \
                 the CPU sampler needs it; use the wall sampler, or remove the other handler",
            ),
            SampleError::RateTaken {
                running_hz,
                asked_hz,
                under_tprof_run: true,
            } => write!(
                f,
                "the program runs under `tprof run`, whose CPU sample session runs at \
                 {running_hz} Hz, and the CPU sampler has one rate per program: to sample at \
                 {asked_hz} Hz, run it with `tprof run --hz {asked_hz}` (or ask this session \
                 for {running_hz} Hz)"
            ),
            SampleError::RateTaken {
                running_hz,
                asked_hz,
                under_tprof_run: false,
            } => write!(
                f,
                "a CPU sample session already runs at {running_hz} Hz, and the CPU sampler has \
                 one rate per program: ask for {running_hz} Hz, or stop that session before \
                 sampling at {asked_hz} Hz"
            ),
            SampleError::Unsupported => f.write_str(
                "the CPU sampler needs Linux (per-thread CPU-time timers); use the wall sampler",
            ),
            SampleError::Os { what, error } => write!(f, "{what} failed: {error}"),
            SampleError::Session(e) => write!(f, "cannot open a sample session: {e}"),
            SampleError::AllocRate { rate } => write!(
                f,
                "an allocation sampling rate of {rate} is out of range: choose a rate of 1 byte \
                 or more, or a sample_rate from 0 to 1"
            ),
            SampleError::PerfEvents { why } => write!(
                f,
                "the CPU sampler cannot use perf events here: {why}; ask for CpuSource::Auto \
                 (or `--cpu-source auto`) to fall back to per-thread CPU timers, which are \
                 checked only at the kernel's tick"
            ),
            SampleError::SourceTaken { running, asked } => write!(
                f,
                "a CPU sample session already runs on {} and the CPU sampler has one mechanism \
                 per program: ask for {running} or auto, or stop that session before sampling \
                 with {asked}",
                running.describe()
            ),
            SampleError::AllocRateTaken { running, asked } => write!(
                f,
                "an allocation sample session already runs with {running}, and the allocator \
                 samples at one rate per program: ask for the same, or stop that session \
                 before sampling with {asked}"
            ),
        }
    }
}

impl std::error::Error for SampleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SampleError::Os { error, .. } => Some(error),
            SampleError::Session(e) => Some(e),
            _ => None,
        }
    }
}
