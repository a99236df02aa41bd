//! What the stack-shaped exports (folded, speedscope) count for a stack, and the name a frame
//! goes by in every stack-shaped export.
//!
//! A stack weighs its measurement — calls (call_count) or nanoseconds (call_time) — except in
//! call_memory, where it weighs **bytes** rather than the words tprof's reports count: flame
//! graph and speedscope users read memory in bytes, and speedscope has a `bytes` unit but no
//! words. Bytes are what was asked of the allocator; words are bytes rounded up to 8 per
//! allocation, so the two can differ slightly.

use super::Stack;
use crate::{Function, TraceType};

/// The value `stack` weighs in a `trace_type` profile: calls, nanoseconds or bytes.
pub(super) fn weight(trace_type: TraceType, stack: &Stack<'_>) -> u64 {
    match trace_type {
        TraceType::CallCount | TraceType::CallTime => stack.measurement,
        TraceType::CallMemory => stack.bytes,
    }
}

/// speedscope's unit for [`weight`]: `none` (calls), `nanoseconds` or `bytes`.
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
