//! What every stack-shaped and graphical export (folded, speedscope, pprof, svg, html, chrome)
//! counts for a stack, its unit, and the name a frame goes by.
//!
//! One unit per trace type, in every export: **calls** (call_count), **nanoseconds**
//! (call_time) and **bytes** (call_memory). call_memory weighs bytes rather than the words
//! tprof's text report counts: flame graph, speedscope and pprof users read memory in bytes,
//! and speedscope and pprof have a bytes unit but no words. Bytes are what was asked of the
//! allocator; words are bytes rounded up to 8 per allocation, so the two can differ slightly.
//! Only the text report (`pretty`), which is tprof's, counts words.

use super::Stack;
use crate::{Function, TraceType};

/// The value `stack` weighs in a `trace_type` profile: calls, nanoseconds or bytes.
pub(super) fn weight(trace_type: TraceType, stack: &Stack<'_>) -> u64 {
    match trace_type {
        TraceType::CallCount | TraceType::CallTime => stack.measurement,
        TraceType::CallMemory => stack.bytes,
    }
}

/// The unit of [`weight`], as the exports label it: `calls`, `ns` or `bytes`.
pub(super) fn unit(trace_type: TraceType) -> &'static str {
    match trace_type {
        TraceType::CallCount => "calls",
        TraceType::CallTime => "ns",
        TraceType::CallMemory => "bytes",
    }
}

/// speedscope's name for the unit of [`weight`]: `none` (calls), `nanoseconds` or `bytes`.
pub(super) fn speedscope_unit(trace_type: TraceType) -> &'static str {
    match trace_type {
        TraceType::CallCount => "none",
        TraceType::CallTime => "nanoseconds",
        TraceType::CallMemory => "bytes",
    }
}

/// The name of a frame: `module::name` (`module::<Type as Trait>::method`).
pub(super) fn frame_name(function: &Function) -> String {
    if function.module.is_empty() {
        function.name.clone()
    } else {
        format!("{}::{}", function.module, function.name)
    }
}
