//! The reads of a session's figures: per process and function ([`SessionState::measurements`]),
//! per path in call-tree mode, event logs, call-duration percentiles, all of them in one walk
//! for a snapshot ([`Gathered`]), and their clearing.
//!
//! Uses the tables ([`super::ProcTrace`]), the folded ended processes ([`super::ended`]) and
//! the public types it fills ([`super::results`]).

use super::{
    Acc, CallEvent, CallEventKind, CallPath, CallPercentiles, CallTreeMeasurement,
    FunctionMeasurement, PathMeasurement, ProcTrace, ProcTraceRef, ProcessCallTree, ProcessEvents,
    ProcessMeasurement, SessionData, TraceTypes, lock,
};
use crate::trace::callsites;
use crate::trace::session::SessionState;
use crate::trace::snapshot::SnapshotFigures;

/// Figures in nanoseconds, as a [`PathMeasurement`] (`path` left 0).
fn measured(clock: Option<&quanta::Clock>, acc: &Acc) -> PathMeasurement {
    PathMeasurement {
        path: 0,
        calls: acc.calls,
        time_ns: match (clock, acc.ticks) {
            (_, 0) | (None, _) => 0,
            (Some(c), t) => c.delta_as_nanos(0, t),
        },
        words: acc.words,
        bytes: acc.bytes,
        blocks: acc.blocks,
    }
}

/// A process's figures per path summed by the path's last function (`path_callsites`: per
/// path, its callsite's id), in callsite order.
fn by_callsite(figures: &[(u32, Acc)], path_callsites: &[u32]) -> Vec<(u32, Acc)> {
    let mut by_callsite: Vec<(u32, Acc)> = figures
        .iter()
        .filter_map(|&(path, acc)| Some((*path_callsites.get(path as usize)?, acc)))
        .collect();
    by_callsite.sort_unstable_by_key(|f| f.0);
    by_callsite.dedup_by(|later, first| {
        if later.0 == first.0 {
            first.1 = first.1.plus(&later.1);
            true
        } else {
            false
        }
    });
    by_callsite
}

/// A session's figures read in one walk ([`SessionState::gathered`]).
pub(crate) struct Gathered {
    /// Per process measured, in pid order: the process (no functions), its figures per
    /// function (ids as `gathered` was told to give them) and per call path (the path's id).
    pub(crate) processes: Vec<(
        ProcessMeasurement,
        Vec<SnapshotFigures>,
        Vec<SnapshotFigures>,
    )>,
    /// The call paths: per path, its parent (or [`crate::trace::tree::ROOT`]) and callsite's
    /// id.
    pub(crate) paths: Vec<(u32, u32)>,
    /// A sample session's processes folded once they ended ([`ended`](super::ended)): their
    /// calls per callsite (id, calls), which their rows no longer hold.
    pub(crate) ended_calls: Vec<(u32, u64)>,
}

/// Per process, in pid order, what a read makes of its figures ([`SessionState::figures`]).
type Rows<T> = Vec<(ProcessMeasurement, T)>;

impl SessionState {
    /// This session's figures in `table`, a process's: `None` when the session measured it
    /// not (or an earlier session of the same slot did).
    fn data_in<'t>(&self, table: &'t ProcTrace) -> Option<&'t SessionData> {
        table
            .sessions
            .iter()
            .find(|d| d.bit == self.bit() && d.generation == self.generation())
    }

    /// Every table of this session, taken without holding the list's lock.
    pub(super) fn tables(&self) -> Vec<ProcTraceRef> {
        lock(&self.measured).clone()
    }

    /// Per process, what `convert` makes of its (callsite or path id, figures) for this
    /// session, in pid order. `convert` runs under the process's table lock, so the figures
    /// are read in place rather than copied first (collect over 10,000 processes is bound by
    /// memory traffic).
    fn figures<T>(&self, convert: impl FnMut(&[(u32, Acc)]) -> T) -> Rows<T> {
        self.figures_and_ended(convert).0
    }

    /// [`figures`](Self::figures), with the processes a sample session has folded
    /// ([`ended`](super::ended)): those that keep a row (they have samples) among the
    /// processes, with no figures, and the calls of them all per callsite (id, calls), read
    /// together — a fold moves a process's calls from its row to these as a whole, before or
    /// after this read.
    fn figures_and_ended<T>(
        &self,
        mut convert: impl FnMut(&[(u32, Acc)]) -> T,
    ) -> (Rows<T>, Vec<(u32, u64)>) {
        let folded = lock(&self.folded);
        let tables = self.tables();
        let mut out = Vec::with_capacity(tables.len() + folded.rows().len());
        for data in tables {
            let table = lock(&data);
            if let Some(d) = self.data_in(&table) {
                let process = ProcessMeasurement {
                    pid: table.pid_for(self.node()),
                    initial_call: table.initial_call.clone(),
                    registered_name: table.name.clone(),
                    functions: Vec::new(),
                };
                out.push((process, convert(&d.functions)));
            }
        }
        for row in folded.rows() {
            out.push((row.clone(), convert(&[])));
        }
        let ended_calls = folded.calls();
        drop(folded);
        // By key then moved once each: an entry is large, and a million of them are sorted.
        out.sort_by_cached_key(|p| p.0.pid);
        (out, ended_calls)
    }

    pub(crate) fn measurements(&self) -> Vec<ProcessMeasurement> {
        let clock = crate::trace::stack::clock_if_set();
        let function = |&(id, ref acc): &(u32, Acc)| {
            let callsite = callsites().get(id as usize)?;
            let m = measured(clock, acc);
            Some(FunctionMeasurement {
                callsite,
                calls: m.calls,
                time_ns: m.time_ns,
                words: m.words,
                bytes: m.bytes,
                blocks: m.blocks,
            })
        };
        if !self.types().contains(TraceTypes::CALL_TREE) {
            return self
                .figures(|figures| {
                    // Sized up front: a `filter_map` collect would grow it step by step.
                    let mut functions = Vec::with_capacity(figures.len());
                    functions.extend(figures.iter().filter_map(function));
                    functions
                })
                .into_iter()
                .map(|(mut process, functions)| {
                    process.functions = functions;
                    process
                })
                .collect();
        }
        // In call-tree mode the ids are paths: sum them by their last function. The figures
        // first, then the paths: paths only grow, so every path a figure names is among them.
        let figures = self.figures(<[(u32, Acc)]>::to_vec);
        let path_callsites: Vec<u32> = self.paths().nodes.iter().map(|&(_, cs)| cs).collect();
        figures
            .into_iter()
            .map(|(mut process, figures)| {
                let by_callsite = by_callsite(&figures, &path_callsites);
                process.functions = by_callsite.iter().filter_map(function).collect();
                process
            })
            .collect()
    }

    /// What [`measurements`](Self::measurements) and [`call_tree`](Self::call_tree) give,
    /// read in one walk over the processes (a snapshot needs both; each walk visits every
    /// process measured): per process in pid order, its figures per function (each with
    /// the id `function_id` gives its callsite's id, those it gives none left out, in the
    /// order `measurements` gives them) and per call path (call-tree mode; empty
    /// otherwise), and the paths' parents and callsites ids.
    pub(crate) fn gathered(&self, mut function_id: impl FnMut(u32) -> Option<u32>) -> Gathered {
        let clock = crate::trace::stack::clock_if_set();
        // Each figure is written once, as the snapshot holds it: a million of them are read
        // and written once, not copied again.
        let figures = |id: u32, acc: &Acc| {
            let m = measured(clock, acc);
            SnapshotFigures {
                id,
                calls: m.calls,
                time_ns: m.time_ns,
                words: m.words,
                bytes: m.bytes,
                blocks: m.blocks,
            }
        };
        if !self.types().contains(TraceTypes::CALL_TREE) {
            let (processes, ended_calls) = self.figures_and_ended(|all| {
                let mut functions = Vec::with_capacity(all.len());
                for (id, acc) in all {
                    if let Some(id) = function_id(*id) {
                        functions.push(figures(id, acc));
                    }
                }
                functions
            });
            let processes = processes
                .into_iter()
                .map(|(process, functions)| (process, functions, Vec::new()))
                .collect();
            let paths = self.paths().nodes.clone();
            return Gathered {
                processes,
                paths,
                ended_calls,
            };
        }
        // The figures first, then the paths: paths only grow, so every path a figure names
        // is among them.
        let by_path = self.figures(<[(u32, Acc)]>::to_vec);
        let paths = self.paths().nodes.clone();
        let path_callsites: Vec<u32> = paths.iter().map(|&(_, cs)| cs).collect();
        let processes = by_path
            .into_iter()
            .map(|(process, by_path)| {
                let functions = by_callsite(&by_path, &path_callsites)
                    .iter()
                    .filter_map(|(id, acc)| Some(figures(function_id(*id)?, acc)))
                    .collect();
                let paths = by_path.iter().map(|(p, acc)| figures(*p, acc)).collect();
                (process, functions, paths)
            })
            .collect();
        Gathered {
            processes,
            paths,
            ended_calls: Vec::new(),
        }
    }

    /// Per process measured, its event log (empty without [`TraceTypes::CALL_EVENTS`]).
    pub(crate) fn event_logs(&self) -> Vec<ProcessEvents> {
        let Some(clock) = crate::trace::stack::clock_if_set() else {
            return Vec::new();
        };
        let start = self.opened_ticks();
        let mut out = Vec::new();
        for data in self.tables() {
            let table = lock(&data);
            let Some(d) = self.data_in(&table) else {
                continue;
            };
            if d.events.is_empty() && d.dropped == 0 {
                continue;
            }
            out.push(ProcessEvents {
                pid: table.pid_for(self.node()),
                events: d
                    .events
                    .iter()
                    .filter_map(|&(ticks, id, entered)| {
                        Some(CallEvent {
                            ts_ns: clock.delta_as_nanos(start, ticks.max(start)),
                            callsite: callsites().get(id as usize)?,
                            kind: if entered {
                                CallEventKind::Enter
                            } else {
                                CallEventKind::Leave
                            },
                        })
                    })
                    .collect(),
                dropped: d.dropped,
            });
        }
        out.sort_by_key(|p| p.pid);
        out
    }

    /// Call-tree mode's paths, and per process the figures of each.
    pub(crate) fn call_tree(&self) -> CallTreeMeasurement {
        let clock = crate::trace::stack::clock_if_set();
        // The figures first, then the paths: paths only grow, so every path a figure names is
        // among them.
        let processes = if self.types().contains(TraceTypes::CALL_TREE) {
            self.figures(|figures| {
                figures
                    .iter()
                    .map(|(path, acc)| {
                        let mut m = measured(clock, acc);
                        m.path = *path;
                        m
                    })
                    .collect()
            })
            .into_iter()
            .map(|(process, paths)| ProcessCallTree {
                pid: process.pid,
                paths,
            })
            .collect()
        } else {
            Vec::new()
        };
        let paths = self
            .paths()
            .nodes
            .iter()
            .filter_map(|&(parent, cs)| {
                Some(CallPath {
                    parent: (parent != crate::trace::tree::ROOT).then_some(parent),
                    callsite: callsites().get(cs as usize)?,
                })
            })
            .collect();
        CallTreeMeasurement { paths, processes }
    }

    /// Per process and function, the distribution of call durations recorded so far, in pid
    /// order, then callsite order.
    pub(crate) fn percentiles(&self) -> Vec<CallPercentiles> {
        let mut out = Vec::new();
        for data in self.tables() {
            let table = lock(&data);
            let Some(d) = self.data_in(&table) else {
                continue;
            };
            out.extend(d.histograms.iter().filter_map(|(id, h)| {
                Some(CallPercentiles {
                    pid: table.pid_for(self.node()),
                    callsite: callsites().get(*id as usize)?,
                    calls: h.len(),
                    p50_ns: h.value_at_quantile(0.5),
                    p90_ns: h.value_at_quantile(0.9),
                    p99_ns: h.value_at_quantile(0.99),
                    max_ns: h.max(),
                })
            }));
        }
        // Each table's are in callsite order already; the sort is stable.
        out.sort_by_key(|p| p.pid);
        out
    }

    /// Zeroes every process's figures for this session (the calls of the processes it has
    /// folded too).
    pub(crate) fn clear_measurements(&self) {
        let (bit, generation) = (self.bit(), self.generation());
        let mut folded = lock(&self.folded);
        folded.clear_calls();
        for data in self.tables() {
            let mut table = lock(&data);
            for d in table.sessions.iter_mut() {
                if d.bit == bit && d.generation == generation {
                    d.functions.clear();
                    d.histograms.clear();
                    d.events.clear();
                    d.dropped = 0;
                }
            }
        }
    }
}
