//! What a profile measures: [`TraceType`], tprof's `trace_type()` (call_count, call_time,
//! call_memory), the trace session types that gather each, and its name as tprof spells it,
//! parsed back with a [`TraceTypeError`] for any other.

use std::fmt;

use runtime::trace::TraceTypes;
use serde::{Deserialize, Serialize};

/// What to measure: tprof's `trace_type()`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum TraceType {
    /// Calls per function, across every process of the node (no per-process figures).
    #[default]
    CallCount,
    /// Calls and time per process per function, counted only while the process is polled
    /// (wall time within the poll: time the OS takes the worker thread away mid-poll counts
    /// too, which shows as a rare call far slower than the rest; see
    /// [call-time outliers](runtime::trace#call-time-outliers)).
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

    /// [`session_types`](TraceType::session_types), with call-tree mode and event logs when
    /// asked for (call_time and call_memory only: call_count has no per-process figures).
    pub fn session_types_with(
        self,
        percentiles: bool,
        call_tree: bool,
        event_log: bool,
    ) -> TraceTypes {
        let mut types = self.session_types(percentiles);
        if self != TraceType::CallCount {
            if call_tree {
                types = types | TraceTypes::CALL_TREE;
            }
            if event_log {
                types = types | TraceTypes::CALL_EVENTS;
            }
        }
        types
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

/// A trace type name that is not `call_count`, `call_time` or `call_memory`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceTypeError {
    /// What was given.
    pub input: String,
}

impl fmt::Display for TraceTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown trace type `{}`: expected call_count, call_time or call_memory",
            self.input
        )
    }
}

impl std::error::Error for TraceTypeError {}

impl std::str::FromStr for TraceType {
    type Err = TraceTypeError;

    fn from_str(s: &str) -> Result<TraceType, TraceTypeError> {
        [
            TraceType::CallCount,
            TraceType::CallTime,
            TraceType::CallMemory,
        ]
        .into_iter()
        .find(|t| t.name() == s.trim())
        .ok_or_else(|| TraceTypeError {
            input: s.to_owned(),
        })
    }
}

impl fmt::Display for TraceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
