//! The function whose calls the traced-call benches measure, twice: as it is (the baseline)
//! and `#[traced]`, the same body, so that a row's extra is the tracing alone. Written once for
//! `traced_call` (time) and `instructions` (instructions).

use std::hint::black_box;

use runtime::trace::TracePattern;

/// The baseline: no `#[traced]`.
#[inline(never)]
pub(crate) fn untraced(x: u64) -> u64 {
    black_box(x).wrapping_mul(31).rotate_left(7)
}

/// The same body, traced.
#[runtime::traced]
#[inline(never)]
pub(crate) fn traced_fn(x: u64) -> u64 {
    black_box(x).wrapping_mul(31).rotate_left(7)
}

/// The pattern that matches [`traced_fn`] (its module is this one, wherever it is included).
pub(crate) fn traced_fn_pattern() -> TracePattern {
    TracePattern::function(module_path!(), "traced_fn")
}
