//! Sample mode's data in the profile: the samples of CPU, wall or allocation sample sessions,
//! each with its process, thread, time, weight and stack.
//!
//! An allocation sample ([`SamplerKind::Alloc`]) is one allocation: its
//! [`size`](SampleRecord::size), and as its weight the bytes it stands for (its inverse
//! probability times its size, so weights sum to an unbiased estimate of the bytes allocated;
//! [`SampleRecord::objects`] the allocations). Its source says with which model it was taken
//! ([`SampleSource::alloc_rate`]: bytes per sample, or Julia's `sample_rate`); each sample's
//! weight is already that model's estimate, so sources of either model add up without ever
//! mixing the two in one estimate.
//!
//! Stacks are stored once each, as a tree of (parent, frame) nodes ([`SampleStack`]), and
//! frames once each ([`SampleFrame`]): a traced function (an index into
//! [`Profile::function_table`](crate::Profile::function_table), and the line in it the sample
//! was at, when known) or a native frame (function, file, line, address). A sample's stack is its traced frames, outermost first, then the native
//! frames of the untraced code it ran below its innermost traced call
//! ([`runtime::sample::SampleSnapshot`] says which). Every report and export of samples reads
//! this.
//!
//! A CPU sample session also says what its samples could see ([`SampleSource::cpu`]): per
//! thread it timed, its CPU time against the CPU its samples stand for and its distinct
//! samples, and the mechanism that took them. [`SampleSet::cpu_truth`] gathers a profile's
//! sources into the figures, summary lines and warnings every report's header and every
//! export carry ([`CpuTruth`]).

use std::collections::HashMap;
use std::fmt;

use runtime::Pid;
pub use runtime::sample::AllocRate;
use runtime::sample::SampleSnapshot;
pub use runtime::sample::{CpuCoverage, CpuSource, ThreadCoverage};
use serde::{Deserialize, Serialize};

use crate::functions::{Function, TreeTable, index32};

mod truth;

pub(crate) use truth::warn_once;
pub use truth::{CpuFigures, CpuTruth, ThreadFigures};

/// Which sampler took a run's samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplerKind {
    /// What each worker thread ran, on its CPU-time clock.
    #[default]
    Cpu,
    /// Every process, running or waiting, on the wall clock.
    Wall,
    /// Allocations, in the counting allocator.
    Alloc,
}

impl SamplerKind {
    /// `cpu`, `wall` or `alloc`.
    pub fn name(self) -> &'static str {
        match self {
            SamplerKind::Cpu => "cpu",
            SamplerKind::Wall => "wall",
            SamplerKind::Alloc => "alloc",
        }
    }

    /// The sampler `name` names (`cpu`, `wall`, `alloc`).
    pub fn from_name(name: &str) -> Option<SamplerKind> {
        [SamplerKind::Cpu, SamplerKind::Wall, SamplerKind::Alloc]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

impl fmt::Display for SamplerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One frame of a sampled stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SampleFrame {
    /// A traced function: an index into [`Profile::function_table`](crate::Profile::function_table);
    /// `None` for a native frame.
    pub function: Option<u32>,
    /// A native frame's function (demangled, without hash); empty for a traced frame.
    #[serde(default)]
    pub name: String,
    /// A native frame's source file, when known.
    #[serde(default)]
    pub file: Option<String>,
    /// The line, when known: a native frame's; for a traced frame, the line in its function
    /// the sample was at (of the sampled instruction, or of the call it was in), when its
    /// native frame was found (CPU samples with native stacks), else `None` (the function's
    /// definition line, [`Function::line`], is all that is known).
    #[serde(default)]
    pub line: Option<u32>,
    /// A native frame's instruction address (0 for a traced frame, and when not kept).
    #[serde(default)]
    pub address: u64,
}

/// One node of the stack tree: a stack, as its innermost frame and the stack it extends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleStack {
    /// The stack it extends (a smaller index); `None` for a stack of one frame.
    pub parent: Option<u32>,
    /// Its innermost frame: an index into [`SampleSet::frames`].
    pub frame: u32,
}

/// What a process was doing when a wall sample was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitState {
    /// Being polled.
    Running,
    /// Not polled, with work waiting for it.
    Runnable,
    /// Suspended in `receive`.
    Receive,
    /// Suspended in `receive_timeout`.
    ReceiveTimeout,
    /// Suspended in a call, waiting for the reply.
    Call,
    /// Suspended elsewhere.
    Waiting,
    /// Ending.
    Exiting,
}

impl WaitState {
    /// As reports print it: `running`, `runnable`, `receive`, `receive (timer)`, `call`,
    /// `waiting`, `exiting`.
    pub fn name(self) -> &'static str {
        match self {
            WaitState::Running => "running",
            WaitState::Runnable => "runnable",
            WaitState::Receive => "receive",
            WaitState::ReceiveTimeout => "receive (timer)",
            WaitState::Call => "call",
            WaitState::Waiting => "waiting",
            WaitState::Exiting => "exiting",
        }
    }

    /// Every state, in the order above (the `.tprof` archive codes them in this order: it is
    /// fixed).
    pub const ALL: [WaitState; 7] = [
        WaitState::Running,
        WaitState::Runnable,
        WaitState::Receive,
        WaitState::ReceiveTimeout,
        WaitState::Call,
        WaitState::Waiting,
        WaitState::Exiting,
    ];

    /// The state `name` prints as, if any.
    pub fn from_name(name: &str) -> Option<WaitState> {
        WaitState::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for WaitState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleRecord {
    /// The sample session (node and run) it came from: an index into [`SampleSet::sources`].
    pub source: u32,
    /// The process (after a merge, renumbered as the profile's processes are); `None` for CPU
    /// time outside any process.
    #[serde(with = "opt_pid_text", default)]
    pub pid: Option<Pid>,
    /// The thread (CPU samples): an index into [`SampleSet::threads`].
    #[serde(default)]
    pub thread: Option<u32>,
    /// Nanoseconds since its source started sampling.
    pub time_ns: u64,
    /// What it stands for: periods of the rate asked (CPU: the CPU time it stands for over
    /// `1 / hz`, fractional with perf events, `1 + overruns` on the timers' fallback),
    /// processes (wall: a process drawn with probability `k / n` stands for `n / k`), or bytes
    /// (allocation samples).
    pub weight: f64,
    /// Its stack: an index into [`SampleSet::stacks`]; `None` for an empty stack.
    #[serde(default)]
    pub stack: Option<u32>,
    /// The process's state (wall samples).
    #[serde(default)]
    pub state: Option<WaitState>,
    /// Messages in its mailbox (wall samples).
    #[serde(default)]
    pub mailbox_len: u32,
    /// The process it waits for a reply from, when its state is [`WaitState::Call`] (wall
    /// samples; renumbered by a merge as `pid` is).
    #[serde(with = "opt_pid_text", default)]
    pub callee: Option<Pid>,
    /// The allocation's size in bytes (allocation samples, whose weight is the bytes they
    /// stand for); 0 for other samples.
    #[serde(default)]
    pub size: u64,
    /// Whether an allocation sample's block was still allocated when the profile was taken
    /// (it is in the live set: "in use").
    #[serde(default)]
    pub live: bool,
}

impl SampleRecord {
    /// The allocations an allocation sample stands for (its weight over its size); 0 for
    /// other samples.
    pub fn objects(&self) -> f64 {
        if self.size > 0 {
            self.weight / self.size as f64
        } else {
            0.0
        }
    }
}

/// A thread CPU samples were taken on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleThread {
    /// The source it belongs to: an index into [`SampleSet::sources`].
    pub source: u32,
    /// The OS thread id.
    pub tid: i32,
    /// Its name, if any (`node-worker` for a node's workers).
    pub name: Option<String>,
}

/// An executable mapping that sampled addresses fall in (for pprof's mappings).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleMapping {
    /// The source whose addresses it maps: an index into [`SampleSet::sources`].
    pub source: u32,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub limit: u64,
    /// The file offset `start` maps.
    pub offset: u64,
    /// The file.
    pub file: String,
}

/// One sample session's settings and totals: a node of a run (several after a merge).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleSource {
    /// The run it belongs to: an index into [`Meta::runs`](crate::Meta::runs).
    pub run: u32,
    /// The node it sampled.
    pub node: u32,
    /// Its sampler.
    pub sampler: SamplerKind,
    /// Its rate, in Hz (CPU and wall samplers).
    pub hz: u32,
    /// The allocation sampler's model and rate (allocation samples).
    #[serde(default)]
    pub alloc_rate: Option<AllocRate>,
    /// Weight dropped: samples that found the buffer (or a thread's ring) full (bytes, for
    /// allocation samples).
    pub dropped: f64,
    /// Allocation samples: frees of sampled blocks the runtime lost (its queue of frees was
    /// full). Their blocks stay in the live set, so the in-use figures may over-count by as
    /// many blocks. 0 in archives written before it was kept.
    #[serde(default)]
    pub lost_frees: u64,
    /// Samples of processes taken in a poll that began before sampling began (a session
    /// started on a running program: the long loops it finds), counted among the source's
    /// samples: the traced frames they fell in are unknown, so a CPU sample shows under its
    /// process with its native frames alone
    /// ([`SampleData::before_sampling`](runtime::sample::SampleData::before_sampling)). 0 in
    /// archives written before it was kept, and for allocation samples.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub before_sampling: u64,
    /// Whether native stacks were walked past the interrupted instruction (frame pointers).
    pub native_walked: bool,
    /// How long it sampled, in nanoseconds.
    pub duration_ns: u64,
    /// Its buffer's size, in samples.
    pub capacity: u64,
    /// CPU samples: what they could see ([`CpuCoverage`]): the mechanism that took them (and
    /// why the fallback, when it did), the rate asked, and per thread the session timed, its
    /// CPU time against the CPU its samples stand for and its distinct samples. Its thread
    /// indices are [`SampleSet::threads`]' (which list the threads timed without a sample
    /// kept too). `None` for other samplers, and in profiles written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuCoverage>,
}

impl SampleSource {
    /// The time one unit of weight stands for, in nanoseconds: a timer period (CPU) or a tick
    /// (wall).
    pub fn period_ns(&self) -> f64 {
        1e9 / f64::from(self.hz.max(1))
    }
}

/// Sample mode's data: empty for a profile of trace mode only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleSet {
    /// The sample sessions the samples came from.
    pub sources: Vec<SampleSource>,
    /// The frames stacks name.
    pub frames: Vec<SampleFrame>,
    /// The stacks; a parent comes before its children.
    pub stacks: Vec<SampleStack>,
    /// The samples, each source's oldest first.
    pub samples: Vec<SampleRecord>,
    /// The threads CPU samples name, and those a CPU session timed without a sample kept
    /// ([`SampleSource::cpu`] names them all).
    pub threads: Vec<SampleThread>,
    /// The executable mappings native addresses fall in.
    pub mappings: Vec<SampleMapping>,
}

impl SampleSet {
    /// Whether it holds nothing: no source, frame, stack, sample, thread or mapping (a profile
    /// of trace mode only).
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
            && self.frames.is_empty()
            && self.stacks.is_empty()
            && self.samples.is_empty()
            && self.threads.is_empty()
            && self.mappings.is_empty()
    }

    /// The frames of stack `stack`, outermost first (indices into [`Self::frames`]).
    pub fn frames_of(&self, stack: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = Some(stack);
        while let Some(s) = at {
            let Some(node) = self.stacks.get(s as usize) else {
                break;
            };
            out.push(node.frame);
            at = node.parent.filter(|p| *p < s);
        }
        out.reverse();
        out
    }

    /// Each frame's representative where a traced function is shown once, whatever line it
    /// was sampled at (the reports, speedscope, chrome and html): for a traced frame, the first
    /// frame of its function; for a native frame, itself. Linear in the frames.
    pub fn function_frames(&self) -> Vec<u32> {
        let mut first: HashMap<u32, u32> = HashMap::new();
        self.frames
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let i = index32(i);
                match f.function {
                    Some(function) => *first.entry(function).or_insert(i),
                    None => i,
                }
            })
            .collect()
    }

    /// Total weight of the samples.
    pub fn total_weight(&self) -> f64 {
        self.samples.iter().map(|s| s.weight).sum()
    }

    /// Total weight dropped by every source.
    pub fn dropped(&self) -> f64 {
        self.sources.iter().map(|s| s.dropped).sum()
    }

    /// The samplers its sources use, in the order cpu, wall, alloc.
    pub fn samplers(&self) -> Vec<SamplerKind> {
        [SamplerKind::Cpu, SamplerKind::Wall, SamplerKind::Alloc]
            .into_iter()
            .filter(|k| self.sources.iter().any(|s| s.sampler == *k))
            .collect()
    }

    /// The set with only `sampler`'s sources and their samples, threads and mappings (what
    /// `tprof report --sampler` exports); frames and stacks are kept as they are (those no
    /// sample has are never shown). Linear in the set.
    pub fn only(&self, sampler: SamplerKind) -> SampleSet {
        let mut renumbered: Vec<Option<u32>> = Vec::with_capacity(self.sources.len());
        let mut sources = Vec::new();
        for source in &self.sources {
            renumbered.push((source.sampler == sampler).then(|| index32(sources.len())));
            if source.sampler == sampler {
                sources.push(source.clone());
            }
        }
        let new = |source: u32| renumbered.get(source as usize).copied().flatten();
        let mut thread_index: Vec<Option<u32>> = Vec::with_capacity(self.threads.len());
        let mut threads = Vec::new();
        for thread in &self.threads {
            let kept = new(thread.source).map(|source| {
                threads.push(SampleThread {
                    source,
                    ..thread.clone()
                });
                index32(threads.len() - 1)
            });
            thread_index.push(kept);
        }
        let samples = self
            .samples
            .iter()
            .filter_map(|s| {
                Some(SampleRecord {
                    source: new(s.source)?,
                    thread: s
                        .thread
                        .and_then(|t| thread_index.get(t as usize).copied().flatten()),
                    ..s.clone()
                })
            })
            .collect();
        let mappings = self
            .mappings
            .iter()
            .filter_map(|m| {
                Some(SampleMapping {
                    source: new(m.source)?,
                    ..m.clone()
                })
            })
            .collect();
        SampleSet {
            sources,
            frames: self.frames.clone(),
            stacks: self.stacks.clone(),
            samples,
            threads,
            mappings,
        }
    }

    /// What a report of the run says it kept and dropped: `100000 samples, about 3,678,036,680
    /// process-ticks dropped (the sample buffer was full)`, per sampler, in its unit (timer
    /// periods for CPU samples, process-ticks for wall samples, bytes for allocation
    /// samples); `12 samples` when none was dropped.
    pub fn kept_and_dropped(&self) -> String {
        let mut text = format!("{} samples", self.samples.len());
        let mut lost: Vec<String> = Vec::new();
        for kind in self.samplers() {
            let dropped: f64 = self
                .sources
                .iter()
                .filter(|s| s.sampler == kind)
                .map(|s| s.dropped)
                .sum();
            if dropped > 0.0 {
                let what = match kind {
                    SamplerKind::Cpu => "CPU timer periods",
                    SamplerKind::Wall => "process-ticks",
                    SamplerKind::Alloc => "bytes of allocation samples",
                };
                lost.push(format!(
                    "about {} {what}",
                    thousands(dropped.round() as u64)
                ));
            }
        }
        if !lost.is_empty() {
            text.push_str(&format!(
                ", {} dropped (the sample buffer was full)",
                lost.join(" and ")
            ));
        }
        text
    }

    /// Frees of sampled blocks lost by every source ([`SampleSource::lost_frees`]): the
    /// in-use figures may over-count by as many blocks.
    pub fn lost_frees(&self) -> u64 {
        self.sources
            .iter()
            .fold(0u64, |n, s| n.saturating_add(s.lost_frees))
    }

    /// How `frame` is named in reports: a traced function as `module::name/arity` (from
    /// `functions`, the profile's function table), a native one by its function name.
    pub fn frame_name(&self, functions: &[Function], frame: u32) -> String {
        match self.frames.get(frame as usize) {
            Some(SampleFrame {
                function: Some(f), ..
            }) => functions
                .get(*f as usize)
                .map_or_else(|| format!("<function {f}>"), Function::mfa),
            Some(f) => f.name.clone(),
            None => format!("<frame {frame}>"),
        }
    }

    /// Where `frame` is in the source, `file:line`, when known.
    pub fn frame_location(&self, functions: &[Function], frame: u32) -> Option<(String, u32)> {
        match self.frames.get(frame as usize)? {
            SampleFrame {
                function: Some(f), ..
            } => functions.get(*f as usize).map(|f| (f.file.clone(), f.line)),
            SampleFrame {
                file: Some(file),
                line,
                ..
            } => Some((file.clone(), line.unwrap_or(0))),
            _ => None,
        }
    }
}

/// Whether `n` is 0 (a count serde leaves out).
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `n` with its thousands separated by commas: `28,232`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Builds a [`SampleSet`] from the sample snapshots of a run's nodes, or from the sample sets
/// of profiles being merged: each frame and each stack once.
#[derive(Debug, Default)]
pub(crate) struct SampleBuilder {
    set: SampleSet,
    frames: HashMap<SampleFrame, u32>,
    stacks: HashMap<(Option<u32>, u32), u32>,
    /// Registered names wall samples saw, by process (the last one seen).
    names: HashMap<Pid, String>,
}

impl SampleBuilder {
    /// Adds one node's samples: its traced functions are `functions` (the snapshot's list),
    /// put in the profile's function table through `tree`.
    pub(crate) fn add(
        &mut self,
        node: u32,
        samples: &SampleSnapshot,
        functions: &[runtime::trace::SnapshotFunction],
        tree: &mut TreeTable,
    ) {
        let source = index32(self.set.sources.len());
        self.set.sources.push(SampleSource {
            run: 0,
            node,
            sampler: SamplerKind::from_name(&samples.sampler).unwrap_or_default(),
            hz: samples.hz,
            alloc_rate: samples.alloc_rate,
            dropped: samples.dropped,
            lost_frees: samples.lost_frees,
            before_sampling: samples.before_sampling,
            native_walked: samples.native_walked,
            duration_ns: samples.duration_ns,
            capacity: samples.capacity,
            cpu: None,
        });
        // Frames of this snapshot, as the set's frames.
        let frame_ids: Vec<u32> = samples
            .frames
            .iter()
            .map(|f| {
                let function = f
                    .function
                    .and_then(|i| functions.get(i as usize))
                    .map(|sf| {
                        tree.function(&Function {
                            module: sf.module.clone(),
                            name: sf.name.clone(),
                            arity: sf.arity,
                            file: sf.file.clone(),
                            line: sf.line,
                        })
                    });
                self.frame(SampleFrame {
                    function,
                    name: if function.is_some() {
                        String::new()
                    } else {
                        f.name.clone()
                    },
                    file: f.file.clone(),
                    line: f.line,
                    address: f.address,
                })
            })
            .collect();
        // Stacks, parents first (as the snapshot gives them).
        let mut stack_ids: Vec<u32> = Vec::with_capacity(samples.stacks.len());
        for s in &samples.stacks {
            let parent = s.parent.and_then(|p| stack_ids.get(p as usize).copied());
            let frame = frame_ids.get(s.frame as usize).copied().unwrap_or(0);
            let id = self.stack(parent, frame);
            stack_ids.push(id);
        }
        let thread_base = index32(self.set.threads.len());
        self.set.sources[source as usize].cpu =
            samples.cpu.as_ref().map(|cpu| shifted(cpu, thread_base));
        for t in &samples.threads {
            self.set.threads.push(SampleThread {
                source,
                tid: t.tid,
                name: t.name.clone(),
            });
        }
        for m in &samples.mappings {
            self.set.mappings.push(SampleMapping {
                source,
                start: m.start,
                limit: m.limit,
                offset: m.offset,
                file: m.file.clone(),
            });
        }
        for s in &samples.samples {
            let pid: Option<Pid> = s.pid.as_deref().and_then(|p| p.parse().ok());
            if let (Some(pid), Some(name)) = (pid, &s.registered_name) {
                self.names.insert(pid, name.clone());
            }
            self.set.samples.push(SampleRecord {
                source,
                pid,
                thread: s.thread.map(|t| thread_base + t),
                time_ns: s.time_ns,
                weight: s.weight,
                stack: s.stack.and_then(|st| stack_ids.get(st as usize).copied()),
                state: s.state.as_deref().and_then(WaitState::from_name),
                mailbox_len: s.mailbox_len,
                callee: s.callee.as_deref().and_then(|p| p.parse().ok()),
                size: s.size,
                live: s.live,
            });
        }
    }

    /// Adds the samples of a profile being merged, `set`, which was checked (its references
    /// point at what is there, a stack's parent comes before it): its sources' runs come after
    /// `runs` others, its frames' function indices are mapped through `functions` (its index
    /// in the merged function table of each of its profile's), and its node numbers and pids are
    /// renumbered by `node` and `pid`. Its frames and stacks are united with those added before.
    pub(crate) fn add_set(
        &mut self,
        set: &SampleSet,
        runs: u32,
        functions: &[u32],
        node: &dyn Fn(u32) -> u32,
        pid: &dyn Fn(Pid) -> Pid,
    ) {
        let source_base = index32(self.set.sources.len());
        let thread_base = index32(self.set.threads.len());
        let source = |s: u32| s.saturating_add(source_base);
        self.set
            .sources
            .extend(set.sources.iter().map(|s| SampleSource {
                run: s.run.saturating_add(runs),
                node: node(s.node),
                // Each source keeps its own figures, its threads renumbered as theirs are.
                cpu: s.cpu.as_ref().map(|cpu| shifted(cpu, thread_base)),
                ..s.clone()
            }));
        let frame_ids: Vec<u32> = set
            .frames
            .iter()
            .map(|f| {
                self.frame(SampleFrame {
                    function: f.function.map(|i| functions[i as usize]),
                    ..f.clone()
                })
            })
            .collect();
        let mut stack_ids: Vec<u32> = Vec::with_capacity(set.stacks.len());
        for s in &set.stacks {
            let parent = s.parent.map(|p| stack_ids[p as usize]);
            let id = self.stack(parent, frame_ids[s.frame as usize]);
            stack_ids.push(id);
        }
        self.set
            .threads
            .extend(set.threads.iter().map(|t| SampleThread {
                source: source(t.source),
                ..t.clone()
            }));
        self.set
            .mappings
            .extend(set.mappings.iter().map(|m| SampleMapping {
                source: source(m.source),
                ..m.clone()
            }));
        self.set
            .samples
            .extend(set.samples.iter().map(|s| SampleRecord {
                source: source(s.source),
                pid: s.pid.map(pid),
                callee: s.callee.map(pid),
                thread: s.thread.map(|t| t.saturating_add(thread_base)),
                stack: s.stack.map(|st| stack_ids[st as usize]),
                ..s.clone()
            }));
    }

    fn frame(&mut self, frame: SampleFrame) -> u32 {
        if let Some(&id) = self.frames.get(&frame) {
            return id;
        }
        let id = index32(self.set.frames.len());
        self.set.frames.push(frame.clone());
        self.frames.insert(frame, id);
        id
    }

    fn stack(&mut self, parent: Option<u32>, frame: u32) -> u32 {
        let next = index32(self.set.stacks.len());
        let id = *self.stacks.entry((parent, frame)).or_insert(next);
        if id == next {
            self.set.stacks.push(SampleStack { parent, frame });
        }
        id
    }

    /// The set built, and the registered names its wall samples saw.
    pub(crate) fn finish(self) -> (SampleSet, HashMap<Pid, String>) {
        (self.set, self.names)
    }
}

/// Serde for an optional pid as the text it prints as.
mod opt_pid_text {
    use runtime::Pid;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(pid: &Option<Pid>, s: S) -> Result<S::Ok, S::Error> {
        match pid {
            Some(pid) => s.collect_str(pid),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Pid>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// `cpu` with its thread indices moved up by `base`: the threads they name appended to a set
/// that holds `base` threads before them.
fn shifted(cpu: &CpuCoverage, base: u32) -> CpuCoverage {
    let mut cpu = cpu.clone();
    for (i, _) in &mut cpu.threads {
        *i = i.saturating_add(base);
    }
    cpu
}
