//! What a sample session gives back: each [`Sample`] (a process's state, its traced and
//! native stacks), the threads they name, and [`SampleData`], a session's samples with what
//! they mean (rate, drops, the CPU figures). Plain data: it uses the sampled types shared with
//! tprof (`crate::sampled`), pids, names and callsites, nothing of the samplers' machinery.

use std::fmt;

use super::{AllocRate, CpuCoverage, Sampler};
use crate::Pid;
use crate::name::Name;
use crate::trace::Callsite;

/// What a sampled process was doing (wall samples).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProcessState {
    /// Being polled.
    Running,
    /// Not polled, with a message or signal waiting for it, or not polled yet.
    Runnable,
    /// Suspended in `receive` (any form without a timeout).
    Receive,
    /// Suspended in `receive_timeout`: waiting for a message or its timer.
    ReceiveTimeout,
    /// Suspended in a `gen_server` or supervisor call, waiting for the reply.
    Call,
    /// Suspended elsewhere (an untraced future, a traced function that is none of the above).
    Waiting,
    /// Ending.
    Exiting,
}

impl ProcessState {
    /// The state as reports print it: `running`, `runnable`, `receive`, `receive (timer)`,
    /// `call`, `waiting`, `exiting`.
    pub fn name(self) -> &'static str {
        match self {
            ProcessState::Running => "running",
            ProcessState::Runnable => "runnable",
            ProcessState::Receive => "receive",
            ProcessState::ReceiveTimeout => "receive (timer)",
            ProcessState::Call => "call",
            ProcessState::Waiting => "waiting",
            ProcessState::Exiting => "exiting",
        }
    }

    /// The state of a process whose status is `status` and whose last suspension noted
    /// `waiting` (see `process::wait`); a process waiting on something its wait did not note
    /// is told by the innermost traced function it suspended in, when one is known.
    pub(crate) fn of(
        status: crate::ProcessStatus,
        waiting: Option<(crate::process::Wait, Option<crate::Pid>)>,
        innermost: Option<&'static crate::trace::Callsite>,
    ) -> ProcessState {
        use crate::ProcessStatus as S;
        use crate::process::Wait;
        match status {
            S::Running => ProcessState::Running,
            S::Runnable => ProcessState::Runnable,
            S::Exiting => ProcessState::Exiting,
            _ => match waiting {
                Some((Wait::Receive, _)) => ProcessState::Receive,
                Some((Wait::ReceiveTimeout, _)) => ProcessState::ReceiveTimeout,
                Some((Wait::Call, _)) => ProcessState::Call,
                None => ProcessState::waiting_in(innermost),
            },
        }
    }

    /// What a waiting process waits for, from the innermost traced function it suspended in.
    fn waiting_in(innermost: Option<&'static crate::trace::Callsite>) -> ProcessState {
        let Some(cs) = innermost else {
            return ProcessState::Waiting;
        };
        match (cs.module(), cs.written_name()) {
            ("runtime", "receive_timeout" | "receive_any_timeout") => ProcessState::ReceiveTimeout,
            ("runtime", name) if name.starts_with("receive") => ProcessState::Receive,
            ("runtime::gen_server", "call") | ("runtime::supervisor", _) => ProcessState::Call,
            _ => ProcessState::Waiting,
        }
    }

    /// Every state, in the order above.
    pub const ALL: [ProcessState; 7] = [
        ProcessState::Running,
        ProcessState::Runnable,
        ProcessState::Receive,
        ProcessState::ReceiveTimeout,
        ProcessState::Call,
        ProcessState::Waiting,
        ProcessState::Exiting,
    ];
}

impl fmt::Display for ProcessState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One sample.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// The process sampled (CPU: the one being polled), or `None` for CPU time outside any
    /// process.
    pub pid: Option<Pid>,
    /// The thread it was taken on (CPU and allocation samples; `None` for wall samples): an
    /// index into [`SampleData::threads`].
    pub thread: Option<u32>,
    /// When, in nanoseconds since the session opened (or was last cleared).
    pub time_ns: u64,
    /// What it stands for: periods of the rate asked (CPU: the CPU time it stands for, over
    /// `1 / hz`; the CPU time its thread's clock counted since its previous sample, or the
    /// fallback's `1 + overruns` timer periods), processes (wall: a process drawn with
    /// probability `k / n` stands for `n / k`), or bytes (allocations).
    pub weight: f64,
    /// The traced stack, outermost first: the traced calls the process was in (CPU), or the
    /// path it last suspended in (wall).
    pub traced: Vec<&'static Callsite>,
    /// The native stack (CPU), innermost first: the interrupted instruction's address, then
    /// return addresses. Name them with [`symbolize`](super::symbolize).
    pub native: Vec<u64>,
    /// A stack was deeper than a sample keeps (its innermost frames are kept).
    pub truncated: bool,
    /// The process's state (wall samples).
    pub state: Option<ProcessState>,
    /// Messages in its mailbox (wall samples).
    pub mailbox_len: u32,
    /// Its registered name (wall samples).
    pub registered_name: Option<Name>,
    /// The process it calls, when its state is [`ProcessState::Call`] (wall samples).
    pub callee: Option<Pid>,
    /// The allocation's size in bytes (allocation samples; 0 otherwise). [`weight`](Self::weight)
    /// is then the bytes it stands for, and `weight / size` the allocations.
    pub size: u64,
    /// The block's address (allocation samples).
    pub address: u64,
    /// Whether the block is still allocated, as of the read (allocation samples): the
    /// sampled blocks that are live, the *live set*, estimate what each process and site holds
    /// now ([`SampleSession::live`](super::SampleSession::live)).
    pub live: bool,
    /// Whether it was taken of a process in a poll that began before sampling began (for a
    /// wall sample or a census: a poll no wall session measured, run now or suspended in), so
    /// that the traced frames the process had entered, or the path it waits in, are unknown
    /// ([`SampleData::before_sampling`] counts them). Not kept in snapshots: their sources
    /// carry the count.
    pub before_sampling: bool,
}

/// What a process holds, allocated at one stack: a summary of the live set
/// ([`SampleSession::live`](super::SampleSession::live)).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LiveSite {
    /// The process that allocated the blocks (their owner when sampled); `None` outside any
    /// process.
    pub pid: Option<Pid>,
    /// The traced stack, outermost first.
    pub traced: Vec<&'static Callsite>,
    /// The native stack, innermost first (name it with [`symbolize`](super::symbolize)).
    pub native: Vec<u64>,
    /// The bytes still allocated, estimated (the live samples' weights summed).
    pub bytes: f64,
    /// The blocks still allocated, estimated.
    pub objects: f64,
    /// The live samples behind the estimate.
    pub samples: u64,
}

/// A live site's key: the process, its traced stack (callsite ids) and its native stack.
type SiteKey<'a> = (Option<Pid>, Vec<usize>, &'a [u64]);

/// The live samples of `samples`, summed per process and stack, in the order first seen.
pub(super) fn live_sites(samples: &[Sample]) -> Vec<LiveSite> {
    let mut index: std::collections::HashMap<SiteKey<'_>, usize> = std::collections::HashMap::new();
    let mut out: Vec<LiveSite> = Vec::new();
    for s in samples.iter().filter(|s| s.live && s.size > 0) {
        let traced: Vec<usize> = s.traced.iter().map(|cs| cs.id()).collect();
        let at = *index.entry((s.pid, traced, &s.native)).or_insert_with(|| {
            out.push(LiveSite {
                pid: s.pid,
                traced: s.traced.clone(),
                native: s.native.clone(),
                bytes: 0.0,
                objects: 0.0,
                samples: 0,
            });
            out.len() - 1
        });
        let site = &mut out[at];
        site.bytes += s.weight;
        site.objects += s.weight / s.size as f64;
        site.samples += 1;
    }
    out
}

/// A thread samples were taken on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampledThread {
    /// Its index, as [`Sample::thread`] gives it: its place in [`SampleData::threads`].
    pub index: u32,
    /// The OS thread id.
    pub tid: i32,
    /// Its name (`node-worker` for a node's workers).
    pub name: Option<String>,
}

/// A sample session's samples and what they mean, as [`SampleSession::samples`](super::SampleSession::samples) copies them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SampleData {
    /// The sampler.
    pub sampler: Sampler,
    /// The rate, in Hz (CPU and wall samplers).
    pub hz: u32,
    /// The allocation sampler's rate (allocation samples).
    pub alloc_rate: Option<AllocRate>,
    /// The samples, oldest first (per thread; wall ticks in order).
    pub samples: Vec<Sample>,
    /// Weight dropped: samples that found the buffer (or a thread's ring) full.
    pub dropped: f64,
    /// Allocation samples: frees of sampled blocks lost because the queue of frees was full.
    /// Each such block stays in the live set, so the in-use figures may over-count by as many
    /// blocks (0 for other samplers).
    pub lost_frees: u64,
    /// Samples of processes taken in a poll that began before sampling began (before the
    /// session opened or flagged the process; for wall samples, a poll no wall session
    /// measured, running or suspended in): a session started on a running program finds long
    /// loops there. A traced call pushes a frame only for the sessions measuring its poll (so
    /// a call no session traces costs no more), so the traced frames such a sample fell in
    /// are unknown: it is kept, under its process (a CPU or allocation sample with its native
    /// frames alone), and counted here, among [`samples`](Self::samples) (each such sample has
    /// [`Sample::before_sampling`] set). In a [census](super::SampleSession::census_snapshot):
    /// the processes whose path is unknown so.
    pub before_sampling: u64,
    /// The threads the samples name.
    pub threads: Vec<SampledThread>,
    /// Whether native stacks were walked past the interrupted instruction (built with frame
    /// pointers).
    pub native_walked: bool,
    /// How long the session has sampled, in nanoseconds.
    pub duration_ns: u64,
    /// The buffer's size, in samples.
    pub capacity: usize,
    /// CPU samples: the mechanism that took them, and per thread it timed, its CPU time
    /// against the CPU time its samples stand for ([`CpuCoverage::captured`],
    /// [`CpuCoverage::warnings`]). Its thread indices are [`threads`](Self::threads)', which
    /// then also lists the threads that were timed but have no sample kept (and, as one row,
    /// exited threads with neither a sample kept nor 20 ms of CPU).
    pub cpu: Option<CpuCoverage>,
}
