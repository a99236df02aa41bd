//! A trace session's data as plain values: what `tprof` reads, in the same process
//! ([`TraceSession::snapshot`]) or from a file a profiled program wrote as it stopped
//! ([`super::env_run`]).
//!
//! Functions are given once, in [`Snapshot::functions`], and referred to by index, so that a
//! snapshot needs none of the program's static callsites to be read: another program (the
//! `tprof` command) can read it.

use serde::{Deserialize, Serialize};

use super::{Callsite, TraceSession, TraceTypes};

/// The name live process `pid` (of any node) is registered under: the process layer's,
/// filled at link time (this layer never names it).
// The `link_section` statics linkme makes are flagged by `unsafe_code` in the crate that
// defines the slice; nothing here is unsafe.
#[allow(unsafe_code)]
#[linkme::distributed_slice]
pub(crate) static LIVE_NAME: [fn(crate::Pid) -> Option<crate::Name>];

/// A traced function, as plain data.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SnapshotFunction {
    /// Its module path.
    pub module: String,
    /// Its name (`name`, `Type::method`, `<Type as Trait>::method`).
    pub name: String,
    /// Its parameters, `self` included.
    pub arity: u8,
    /// The file it is defined in.
    pub file: String,
    /// The line it is defined on.
    pub line: u32,
}

/// Figures of one function (or one call path) in one process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotFigures {
    /// The function (an index into [`Snapshot::functions`]), or the path (an index into
    /// [`Snapshot::paths`]).
    pub id: u32,
    /// Calls.
    pub calls: u64,
    /// Nanoseconds while polled (call_time).
    pub time_ns: u64,
    /// Words allocated (call_memory).
    pub words: u64,
    /// Bytes allocated (call_memory).
    pub bytes: u64,
    /// Allocations (call_memory).
    pub blocks: u64,
}

/// One measured process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotProcess {
    /// Its pid, as it prints (`<1.5.0>`).
    pub pid: String,
    /// What it was spawned to run.
    pub initial_call: String,
    /// Its registered name (now, or when it ended).
    pub registered_name: Option<String>,
    /// Per function it called.
    pub functions: Vec<SnapshotFigures>,
    /// Per call path it ran (call-tree mode).
    pub paths: Vec<SnapshotFigures>,
    /// Its event log (with an event log).
    #[serde(default)]
    pub events: Vec<SnapshotEvent>,
    /// Events its log could not keep.
    #[serde(default)]
    pub events_dropped: u64,
    /// Per function it called, the distribution of the calls' own time (call_time with
    /// histograms), in function order.
    #[serde(default)]
    pub percentiles: Vec<SnapshotPercentiles>,
}

/// One entry of a process's event log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotEvent {
    /// Nanoseconds since the session opened.
    pub ts_ns: u64,
    /// The function (an index into [`Snapshot::functions`]).
    pub function: u32,
    /// Entered (true) or left.
    pub enter: bool,
}

/// One call path: the path it extends and the function called last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPath {
    /// The path it extends (smaller than its own index), `None` for an outermost call.
    pub parent: Option<u32>,
    /// The function (an index into [`Snapshot::functions`]).
    pub function: u32,
}

/// One function's call-duration distribution in one process (call_time with histograms): each
/// call's own time, exclusive of traced callees, as the time figures are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPercentiles {
    /// The function (an index into [`Snapshot::functions`]).
    pub function: u32,
    /// Calls recorded.
    pub calls: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 90th percentile, ns.
    pub p90_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Longest, ns.
    pub max_ns: u64,
}

/// Everything a trace session gathered, as plain data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// What the session measures.
    pub types: SnapshotTypes,
    /// The node it belongs to.
    pub node: u32,
    /// The functions the rest refers to.
    pub functions: Vec<SnapshotFunction>,
    /// call_count: calls per function, every process of the node together (ids into
    /// `functions`). A sample session's: the calls its own polls counted per thread, and those
    /// of the sampled processes that have ended, which `processes` no longer lists, together
    /// (see [`SampleSession`](crate::sample::SampleSession#processes-that-end)); the profile's
    /// call counts are these plus those of `processes`.
    pub call_counts: Vec<(u32, u64)>,
    /// call_count: calls per function made outside any process (ids into `functions`).
    #[serde(default)]
    pub outside_call_counts: Vec<(u32, u64)>,
    /// call_time, call_memory: per process measured, in pid order; the calls made outside
    /// processes as one entry per thread, with a [`Pid::outside`](crate::Pid::outside) pid
    /// and the thread's name as its initial call. A sample session's: the processes it
    /// samples, but those it has folded once they ended, which are listed only while its
    /// samples name them, with no figures (their calls are in `call_counts`).
    pub processes: Vec<SnapshotProcess>,
    /// Call-tree mode: the paths seen; a parent comes before its children.
    pub paths: Vec<SnapshotPath>,
    /// Call-duration distributions per function over every process, as a runtime before
    /// per-process histograms wrote them (with callees' time included); empty now: each
    /// process has its own ([`SnapshotProcess::percentiles`]).
    #[serde(default)]
    pub percentiles: Vec<SnapshotPercentiles>,
    /// When the session was opened, in nanoseconds since the Unix epoch: event times count
    /// from then.
    #[serde(default)]
    pub opened_unix_ns: u64,
    /// A sample session's samples ([`crate::sample::SampleSession::snapshot`]); `None` for a
    /// trace session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<crate::sampled::SampleSnapshot>,
    /// Per function (an index into `functions`): how many processes' figures name it, as
    /// counted while the snapshot was written, so that a reader sizes its tables without a
    /// pass over every figure (a million of them for 10,000 processes of 100 functions). Only
    /// a hint: empty when not known (a snapshot of an older runtime, or one built by hand),
    /// and a reader must not trust it beyond sizing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub figures_per_function: Vec<u32>,
    /// call_time: how long the program's threads ran, and waited on the OS's run queue while
    /// ready to run, since the session opened (or last restarted). A call's time is wall time
    /// while its process is polled, so it includes what the OS made its worker wait: a large
    /// [`waited_share`](crate::trace::SnapshotRunQueue::waited_share) says the figures hold
    /// such waits.
    /// `None` for other sessions, where the OS gives no such figures (not Linux, no `/proc`),
    /// and in snapshots of older runtimes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue: Option<crate::trace::SnapshotRunQueue>,
}

/// What a session measured: its [`TraceTypes`], as plain data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotTypes {
    /// call_count.
    pub call_count: bool,
    /// call_time.
    pub call_time: bool,
    /// call_memory.
    pub call_memory: bool,
    /// Call-tree mode.
    pub call_tree: bool,
    /// An event log per process.
    #[serde(default)]
    pub call_events: bool,
}

impl From<TraceTypes> for SnapshotTypes {
    fn from(t: TraceTypes) -> SnapshotTypes {
        SnapshotTypes {
            call_count: t.contains(TraceTypes::CALL_COUNT),
            call_time: t.contains(TraceTypes::CALL_TIME),
            call_memory: t.contains(TraceTypes::CALL_MEMORY),
            call_tree: t.contains(TraceTypes::CALL_TREE),
            call_events: t.contains(TraceTypes::CALL_EVENTS),
        }
    }
}

/// Interns callsites into a snapshot's function list.
struct Functions {
    /// Per callsite (by its dense id), its index in `list`, `u32::MAX` until it has one: an
    /// index rather than a hash lookup, as a snapshot interns one per figure (millions).
    ids: Vec<u32>,
    list: Vec<SnapshotFunction>,
}

impl Default for Functions {
    fn default() -> Functions {
        Functions {
            ids: vec![u32::MAX; super::callsites().len()],
            list: Vec::new(),
        }
    }
}

impl Functions {
    /// The id of the callsite at index `at` of [`super::callsites`] (`None` for an unknown
    /// callsite): a figure's, read a million times, so a look at one slot when it has one.
    #[inline]
    fn id_of_index(&mut self, at: u32) -> Option<u32> {
        match self.ids.get(at as usize) {
            Some(&id) if id != u32::MAX => Some(id),
            _ => Some(self.id(super::callsites().get(at as usize)?)),
        }
    }

    fn id(&mut self, cs: &'static Callsite) -> u32 {
        let at = cs.id();
        if let Some(&id) = self.ids.get(at)
            && id != u32::MAX
        {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(SnapshotFunction {
            module: cs.module().to_owned(),
            name: cs.function().to_owned(),
            arity: cs.arity(),
            file: cs.file().to_owned(),
            line: cs.line(),
        });
        if let Some(slot) = self.ids.get_mut(at) {
            *slot = id;
        }
        id
    }
}

impl TraceSession {
    /// Everything this session has gathered, as plain data (processes still running are
    /// named as they are now), once the polls running when it was called have ended (see
    /// [`settle`](TraceSession::settle)). Never stops the processes it measures.
    pub fn snapshot(&self) -> Snapshot {
        crate::heap::suppressed(|| {
            let mut functions = Functions::default();
            let types = self.types();
            let mut counted = |counts: Vec<super::CallCount>| -> Vec<(u32, u64)> {
                if !types.contains(TraceTypes::CALL_COUNT) {
                    return Vec::new();
                }
                counts
                    .into_iter()
                    .filter(|c| c.calls > 0)
                    .map(|c| (functions.id(c.callsite), c.calls))
                    .collect()
            };
            let mut call_counts = counted(self.call_counts());
            let outside_call_counts = counted(self.outside_call_counts());
            // Read before the processes' rows, as call_count's counts are: a sample poll's
            // calls are counted as they are made, never moved into a row.
            let sampled: Vec<(u32, u64)> = if types.contains(TraceTypes::SAMPLE) {
                self.call_counts()
                    .iter()
                    .filter(|c| c.calls > 0)
                    .map(|c| (c.callsite.id() as u32, c.calls))
                    .collect()
            } else {
                Vec::new()
            };
            let all = super::callsites();
            // One walk over the processes for the figures per function and per path, each
            // function named by its id here as it is read (unknown callsites left out).
            let mut figures_per_function: Vec<u32> = Vec::new();
            let gathered = self.gathered(|cs| {
                let id = functions.id_of_index(cs)?;
                let at = id as usize;
                if at >= figures_per_function.len() {
                    figures_per_function.resize(at + 1, 0);
                }
                figures_per_function[at] += 1;
                Some(id)
            });
            // A sample session's calls not in its processes' rows, all together: those its
            // sample polls counted per thread, and those of the processes it folded once they
            // ended.
            if types.contains(TraceTypes::SAMPLE) && !types.contains(TraceTypes::CALL_COUNT) {
                call_counts = sampled
                    .iter()
                    .chain(&gathered.ended_calls)
                    .filter_map(|&(cs, calls)| Some((functions.id_of_index(cs)?, calls)))
                    .collect();
                call_counts.sort_unstable_by_key(|c| c.0);
                call_counts.dedup_by(|later, first| {
                    if later.0 == first.0 {
                        first.1 += later.1;
                        true
                    } else {
                        false
                    }
                });
            }
            // Each read visits every process measured: only those the session gathers.
            let logs = if types.contains(TraceTypes::CALL_EVENTS) {
                self.event_logs()
            } else {
                Vec::new()
            };
            let paths = gathered
                .paths
                .iter()
                .filter_map(|&(parent, cs)| {
                    Some(SnapshotPath {
                        parent: (parent != super::tree::ROOT).then_some(parent),
                        function: functions.id(all.get(cs as usize)?),
                    })
                })
                .collect();
            let mut processes: Vec<(crate::Pid, SnapshotProcess)> = gathered
                .processes
                .into_iter()
                .map(|(p, by_function, by_path)| {
                    // The untraced lookup: a snapshot taken in a traced process does not
                    // show up as its `process_info` calls.
                    let live_name = LIVE_NAME
                        .iter()
                        .find_map(|name_of| name_of(p.pid))
                        .map(|n| n.to_string());
                    let process = SnapshotProcess {
                        pid: p.pid.to_string(),
                        initial_call: p.initial_call.to_string(),
                        registered_name: live_name
                            .or_else(|| p.registered_name.map(|n| n.to_string())),
                        functions: by_function,
                        paths: by_path,
                        events: Vec::new(),
                        events_dropped: 0,
                        percentiles: Vec::new(),
                    };
                    (p.pid, process)
                })
                .collect();
            processes.sort_by_key(|p| p.0);
            // In pid order: a process is found by a binary search, with no table of a million
            // pids built for the logs and histograms most sessions do not gather.
            let index = |processes: &[(crate::Pid, SnapshotProcess)], pid: crate::Pid| {
                processes.binary_search_by_key(&pid, |p| p.0).ok()
            };
            for log in logs {
                if let Some(at) = index(&processes, log.pid) {
                    let p = &mut processes[at].1;
                    p.events_dropped = log.dropped;
                    p.events = log
                        .events
                        .iter()
                        .map(|e| SnapshotEvent {
                            ts_ns: e.ts_ns,
                            function: functions.id(e.callsite),
                            enter: e.kind == super::CallEventKind::Enter,
                        })
                        .collect();
                }
            }
            let percentiles = if types.contains(TraceTypes::CALL_TIME_HISTOGRAMS) {
                self.call_time_percentiles()
            } else {
                Vec::new()
            };
            for p in percentiles {
                let Some(at) = index(&processes, p.pid) else {
                    continue;
                };
                processes[at].1.percentiles.push(SnapshotPercentiles {
                    function: functions.id(p.callsite),
                    calls: p.calls,
                    p50_ns: p.p50_ns,
                    p90_ns: p.p90_ns,
                    p99_ns: p.p99_ns,
                    max_ns: p.max_ns,
                });
            }
            // Functions named only by paths, events or percentiles come after: no figures.
            figures_per_function.resize(functions.list.len(), 0);
            Snapshot {
                types: types.into(),
                node: self.node(),
                functions: functions.list,
                call_counts,
                outside_call_counts,
                processes: processes.into_iter().map(|(_, p)| p).collect(),
                paths,
                percentiles: Vec::new(),
                opened_unix_ns: self.opened_unix_ns(),
                samples: None,
                figures_per_function,
                run_queue: self.run_queue(),
            }
        })
    }
}
