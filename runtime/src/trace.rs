//! Traced functions: static callsites, the trace map's names, and trace patterns.
//!
//! `#[traced]` (re-exported as [`traced`](crate::traced)) gives each function a static
//! [`Callsite`] in the [`CALLSITES`] distributed slice, known before the function is ever
//! called, as `code:all_loaded()` knows a BEAM module's functions. A callsite names its
//! function as the trace map prints it, `module::path::function/arity`: methods of an `impl`
//! block are `Type::method`, trait methods `<Type as Trait>::method`, and the arity counts
//! `self`. A [`TracePattern`] selects callsites the way `erlang:trace_pattern` takes
//! `{Module, Function, Arity}` with `'_'` wildcards.
//!
//! # Cost
//!
//! A traced function that no trace session wants costs one relaxed load of its callsite's
//! session mask: [`enter`] and the first poll of [`Traced`] return at once when it is zero.
//! Measured with `cargo bench --bench traced_call` (a current-thread node, 2 cores): 0.6–0.9 ns
//! a call over the same function untraced (1.4–2.1 ns). Counting calls for one session costs
//! about 7–8 ns a call today (the per-thread shard lookup), more than the 1 ns aimed at.
//! A [`TraceSession`] sets its bit in the masks of the functions its patterns match, and counts
//! their calls.

mod callsite;
mod flags;
mod pattern;
mod session;

pub use callsite::{CALLSITES, Callsite, Frame, Traced, callsites, enter};
/// Traces a block as a call of its own, named by the string:
/// `traced!("parse_header", { .. })`, or `traced!("fetch", async { .. })` for an async block.
/// Its arity is 0.
pub use runtime_macros::traced_block as traced;

/// Whether `#[traced]` instruments code in this build (false with the feature `no-trace`).
pub const INSTRUMENTED: bool = !cfg!(feature = "no-trace");
pub use flags::{FlagError, FlagOutcome, ProcessSpec};
pub(crate) use flags::{TraceFlags, flags_at_spawn};
pub use pattern::{Part, TracePattern};
pub(crate) use session::record_call;
pub use session::{CallCount, MAX_SESSIONS, PatternError, SessionError, TraceMap, TraceSession};
