//! The raw profile: what a trace session gathered, per function, per process (tprof's
//! `{Type, [trace_info()]}`).

use std::fmt;

use runtime::Pid;
use runtime::trace::{Callsite, TraceSession, TraceTypes};

/// What to measure: tprof's `trace_type()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TraceType {
    /// Calls per function, across every process of the node (no per-process figures).
    #[default]
    CallCount,
    /// Calls and time per process per function, counted only while the process is polled.
    CallTime,
    /// Calls and memory allocated per process per function: words (the measurement), bytes
    /// and blocks.
    CallMemory,
}

impl TraceType {
    /// The trace session types that gather this; with `percentiles`, call_time also records
    /// each call's duration in a histogram.
    pub fn session_types(self, percentiles: bool) -> TraceTypes {
        match self {
            TraceType::CallCount => TraceTypes::CALL_COUNT,
            TraceType::CallTime if percentiles => TraceTypes::CALL_TIME_HISTOGRAMS,
            TraceType::CallTime => TraceTypes::CALL_TIME,
            TraceType::CallMemory => TraceTypes::CALL_MEMORY,
        }
    }

    /// Its name, as tprof spells it.
    pub fn name(self) -> &'static str {
        match self {
            TraceType::CallCount => "call_count",
            TraceType::CallTime => "call_time",
            TraceType::CallMemory => "call_memory",
        }
    }
}

impl fmt::Display for TraceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whose figures an [`Entry`] holds: one process, or every process (call_count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    /// All processes together (tprof's `all`).
    All,
    /// One process.
    Process(Pid),
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Group::All => f.write_str("all"),
            Group::Process(pid) => write!(f, "{pid}"),
        }
    }
}

/// One function's figures for one process (or all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The process, or [`Group::All`] for call_count.
    pub group: Group,
    /// Calls.
    pub calls: u64,
    /// The measurement: calls (call_count), nanoseconds (call_time) or words (call_memory).
    pub measurement: u64,
    /// Bytes allocated (call_memory; 0 otherwise).
    pub bytes: u64,
    /// Allocations made (call_memory; 0 otherwise).
    pub blocks: u64,
}

/// One traced function and its figures per process (tprof's `trace_info()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionTrace {
    /// The function.
    pub callsite: &'static Callsite,
    /// Its figures, one entry per process that called it, in pid order.
    pub entries: Vec<Entry>,
}

impl FunctionTrace {
    /// The module path.
    pub fn module(&self) -> &'static str {
        self.callsite.module()
    }

    /// The function's name (`name`, `Type::method`, `<Type as Trait>::method`).
    pub fn function(&self) -> &'static str {
        self.callsite.function()
    }

    /// The number of parameters, `self` included.
    pub fn arity(&self) -> u8 {
        self.callsite.arity()
    }
}

/// A raw profile: the trace type and, per traced function that was called, its figures per
/// process. Unlike tprof's `collect`, a call_memory profile keeps functions that were called
/// and allocated nothing (0 words), so that a test can assert exactly that; [`inspect`]
/// leaves them out, as tprof does.
///
/// [`inspect`]: crate::inspect()
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// What was measured.
    pub trace_type: TraceType,
    /// The functions, in callsite order.
    pub functions: Vec<FunctionTrace>,
    /// Per function, the distribution of call durations over every process (call_time with
    /// [`ProfileOptions::percentiles`](crate::ProfileOptions::percentiles); empty otherwise).
    pub percentiles: Vec<runtime::trace::CallPercentiles>,
}

impl Profile {
    /// An empty profile of `trace_type`.
    pub fn empty(trace_type: TraceType) -> Profile {
        Profile::new(trace_type, Vec::new())
    }

    /// A profile of `trace_type` with these functions (and no percentiles).
    pub fn new(trace_type: TraceType, functions: Vec<FunctionTrace>) -> Profile {
        Profile {
            trace_type,
            functions,
            percentiles: Vec::new(),
        }
    }

    /// Reads what `session` gathered as a `trace_type` profile, leaving out functions of the
    /// modules in `exclude` (and their submodules).
    pub fn from_session(
        session: &TraceSession,
        trace_type: TraceType,
        exclude: &[&str],
    ) -> Profile {
        let excluded = |cs: &Callsite| {
            exclude.iter().any(|m| {
                cs.module() == *m
                    || cs
                        .module()
                        .strip_prefix(m)
                        .is_some_and(|rest| rest.starts_with("::"))
            })
        };
        let mut functions: Vec<FunctionTrace> = Vec::new();
        match trace_type {
            TraceType::CallCount => {
                for c in session.call_counts() {
                    if c.calls > 0 && !excluded(c.callsite) {
                        functions.push(FunctionTrace {
                            callsite: c.callsite,
                            entries: vec![Entry {
                                group: Group::All,
                                calls: c.calls,
                                measurement: c.calls,
                                bytes: 0,
                                blocks: 0,
                            }],
                        });
                    }
                }
            }
            TraceType::CallTime | TraceType::CallMemory => {
                let mut by_id: std::collections::BTreeMap<usize, FunctionTrace> =
                    std::collections::BTreeMap::new();
                for process in session.measurements() {
                    for f in &process.functions {
                        if excluded(f.callsite) || (f.calls == 0 && f.time_ns == 0 && f.words == 0)
                        {
                            continue;
                        }
                        let measurement = if trace_type == TraceType::CallTime {
                            f.time_ns
                        } else {
                            f.words
                        };
                        let (bytes, blocks) = if trace_type == TraceType::CallMemory {
                            (f.bytes, f.blocks)
                        } else {
                            (0, 0)
                        };
                        by_id
                            .entry(f.callsite.id())
                            .or_insert_with(|| FunctionTrace {
                                callsite: f.callsite,
                                entries: Vec::new(),
                            })
                            .entries
                            .push(Entry {
                                group: Group::Process(process.pid),
                                calls: f.calls,
                                measurement,
                                bytes,
                                blocks,
                            });
                    }
                }
                functions = by_id.into_values().collect();
            }
        }
        let percentiles = if trace_type == TraceType::CallTime {
            session
                .call_time_percentiles()
                .into_iter()
                .filter(|p| p.calls > 0 && !excluded(p.callsite))
                .collect()
        } else {
            Vec::new()
        };
        Profile {
            trace_type,
            functions,
            percentiles,
        }
    }

    /// The figures of the function named `function` (as [`Callsite::function`] gives it), in
    /// any module.
    pub fn function(&self, function: &str) -> Option<&FunctionTrace> {
        self.functions.iter().find(|f| f.function() == function)
    }

    /// The processes that have figures, in pid order.
    pub fn processes(&self) -> Vec<Pid> {
        let mut pids: Vec<Pid> = self
            .functions
            .iter()
            .flat_map(|f| f.entries.iter())
            .filter_map(|e| match e.group {
                Group::Process(pid) => Some(pid),
                Group::All => None,
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// The sum of every entry's measurement.
    pub fn total(&self) -> u64 {
        self.functions
            .iter()
            .flat_map(|f| f.entries.iter())
            .map(|e| e.measurement)
            .sum()
    }

    /// True when no function has figures.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }
}
