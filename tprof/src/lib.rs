//! tprof for the actor runtime: OTP's process profiler, in Rust.
//!
//! (The manual is written below as the crate grows.)

mod adhoc;
mod assert;
mod format;
mod inspect;
mod profile;
mod server;
mod table;

pub use adhoc::{
    Failure, Outcome, ProcessRef, ProfileError, ProfileOptions, Report, RootSet, profile,
    profile_async, profile_on,
};
pub use assert::{Allocated, Allocations, FunctionCheck, allocations, allocations_with};
pub use comfy_table;
pub use format::{format, format_group, format_to_string};
pub use inspect::{
    Aggregate, Column, Direction, GroupProfile, Inspected, Line, SortBy, inspect, sort_lines,
};
pub use profile::{Entry, FunctionTrace, Group, Profile, TraceType};
pub use server::{DEFAULT_NAME, ServerError, ServerOptions, Tprof};
pub use table::{function_table, process_summary, rich_report};
