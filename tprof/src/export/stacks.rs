//! The stacks every stack-shaped export (folded, speedscope, pprof, flame graphs) draws: per
//! process, each call path and its exclusive figures.
//!
//! A path deeper than [`MAX_STACK_DEPTH`] frames (perf's own default, 127, rounded up) keeps
//! its outermost [`OUTER_FRAMES`] and innermost frames, with one frame between them,
//! [`TRUNCATED`] (`[truncated frames]`), standing for the frames left out
//! ([`Stack::truncated`] says how many): an archive of a path 20,000 calls deep exports in
//! time and space linear in its entries, not in entries times depth.

use std::sync::LazyLock;

use crate::{Function, Group, Profile};

/// The most frames a [`Stack`] has: past it, [`stacks`] leaves out the middle of the path.
pub const MAX_STACK_DEPTH: usize = 128;

/// The outermost frames a truncated [`Stack`] keeps (the innermost:
/// [`MAX_STACK_DEPTH`] - 1 - this).
pub const OUTER_FRAMES: usize = 64;

/// The frame standing for the frames a truncated [`Stack`] leaves out: named
/// `[truncated frames]`, of no module.
pub static TRUNCATED: LazyLock<Function> = LazyLock::new(|| Function {
    module: String::new(),
    name: "[truncated frames]".to_owned(),
    arity: 0,
    file: String::new(),
    line: 0,
});

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
    /// How many frames of the path were left out, where [`TRUNCATED`] stands (0: none).
    pub truncated: usize,
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
                    truncated: 0,
                });
            }
        }
    } else {
        let tree = Depths::of(profile);
        for e in &profile.call_tree.entries {
            let (nodes, truncated) = tree.path(e.node);
            let frames: Vec<&Function> = nodes
                .into_iter()
                .filter_map(|n| match n {
                    NONE => Some(&*TRUNCATED),
                    n => profile
                        .call_tree
                        .nodes
                        .get(n as usize)
                        .and_then(|p| profile.function_table.get(p.function as usize)),
                })
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
                truncated,
            });
        }
    }
    out.sort_by_key(|s| s.group);
    out
}

/// No node: where a path's frames were left out.
const NONE: u32 = u32::MAX;

/// The depth of each path of a profile's call tree, and the ancestor a truncated path's
/// outer frames end at: found once, so that each entry's path costs at most
/// [`MAX_STACK_DEPTH`] steps, however deep.
struct Depths<'a> {
    nodes: &'a [crate::PathNode],
    /// Per node: how many paths it extends.
    depth: Vec<u32>,
    /// Per node at least [`OUTER_FRAMES`] deep: its ancestor [`OUTER_FRAMES`] - 1 deep.
    anchor: Vec<u32>,
}

impl<'a> Depths<'a> {
    fn of(profile: &'a Profile) -> Depths<'a> {
        let nodes = &profile.call_tree.nodes[..];
        let mut depth = vec![0u32; nodes.len()];
        let mut anchor = vec![NONE; nodes.len()];
        for (n, node) in nodes.iter().enumerate() {
            // A parent that does not come first is ignored, as `CallTree::stack` does.
            if let Some(p) = node.parent.map(|p| p as usize).filter(|&p| p < n) {
                depth[n] = depth[p].saturating_add(1);
                anchor[n] = anchor[p];
            }
            if depth[n] as usize == OUTER_FRAMES - 1 {
                anchor[n] = n as u32;
            }
        }
        Depths {
            nodes,
            depth,
            anchor,
        }
    }

    /// The parent of `n`, as [`Depths::of`] took it.
    fn parent(&self, n: u32) -> Option<u32> {
        self.nodes.get(n as usize)?.parent.filter(|&p| p < n)
    }

    /// Up to `count` nodes from `n` up, outermost first.
    fn up(&self, n: u32, count: usize) -> Vec<u32> {
        let mut out: Vec<u32> = std::iter::successors(Some(n), |&n| self.parent(n))
            .take(count)
            .collect();
        out.reverse();
        out
    }

    /// The nodes of `node`'s path, outermost first, with [`NONE`] where frames were left
    /// out past [`MAX_STACK_DEPTH`], and how many.
    fn path(&self, node: u32) -> (Vec<u32>, usize) {
        let Some(&depth) = self.depth.get(node as usize) else {
            return (Vec::new(), 0);
        };
        let frames = depth as usize + 1;
        if frames <= MAX_STACK_DEPTH {
            return (self.up(node, frames), 0);
        }
        let inner = MAX_STACK_DEPTH - 1 - OUTER_FRAMES;
        let mut path = self.up(self.anchor[node as usize], OUTER_FRAMES);
        path.push(NONE);
        path.extend(self.up(node, inner));
        (path, frames - OUTER_FRAMES - inner)
    }
}
