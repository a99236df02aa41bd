//! The stacks every stack-shaped export (folded, speedscope, pprof, flame graphs) draws: per
//! process, each call path and its exclusive figures.

use crate::{Function, Group, Profile};

/// One call path of one process and what was measured on it, exclusive of the traced calls
/// below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack<'a> {
    /// The process (or all, for call_count).
    pub group: Group,
    /// The functions on the path, outermost first.
    pub frames: Vec<&'a Function>,
    /// Calls made on this path.
    pub calls: u64,
    /// Nanoseconds (call_time), words (call_memory) or calls (call_count).
    pub measurement: u64,
    /// Bytes allocated (call_memory).
    pub bytes: u64,
    /// Allocations (call_memory).
    pub blocks: u64,
}

/// The stacks of `profile`, by process then path: its call tree's paths when it has one,
/// else each function as a stack of one frame.
pub fn stacks(profile: &Profile) -> Vec<Stack<'_>> {
    let mut out = Vec::new();
    if profile.call_tree.is_empty() {
        for f in &profile.functions {
            for e in &f.entries {
                out.push(Stack {
                    group: e.group,
                    frames: vec![&f.function],
                    calls: e.calls,
                    measurement: e.measurement,
                    bytes: e.bytes,
                    blocks: e.blocks,
                });
            }
        }
    } else {
        for e in &profile.call_tree.entries {
            let frames: Vec<&Function> = profile
                .call_tree
                .stack(e.node)
                .into_iter()
                .filter_map(|i| profile.function_table.get(i as usize))
                .collect();
            if frames.is_empty() {
                continue;
            }
            out.push(Stack {
                group: e.group,
                frames,
                calls: e.calls,
                measurement: e.measurement,
                bytes: e.bytes,
                blocks: e.blocks,
            });
        }
    }
    out.sort_by_key(|s| s.group);
    out
}
