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
/// else each function as a stack of one frame. `Stacks` gives them one at a time.
pub fn stacks(profile: &Profile) -> Vec<Stack<'_>> {
    let mut out = Vec::new();
    Stacks::of(profile).for_each(|s| out.push(s.clone()));
    out
}

/// The stacks of a profile, in the order [`stacks`] gives them, made one at a time: an export
/// that does not keep them reads them in the memory of one stack (and 8 bytes per stack for
/// their order), not of every stack's frame list.
pub(crate) struct Stacks<'a> {
    profile: &'a Profile,
    /// The stacks in order: (function, entry) of a flat profile, (entry, 0) of a call tree.
    order: Vec<(u32, u32)>,
    /// The call tree's depths (a profile with one).
    depths: Option<Depths<'a>>,
}

impl<'a> Stacks<'a> {
    /// The stacks of `profile`, put in order (by process, stably).
    pub(crate) fn of(profile: &'a Profile) -> Stacks<'a> {
        let index = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
        let (mut order, depths): (Vec<(u32, u32)>, _) = if profile.call_tree.is_empty() {
            let order =
                profile.functions.iter().enumerate().flat_map(|(f, trace)| {
                    (0..trace.entries.len()).map(move |e| (index(f), index(e)))
                });
            (order.collect(), None)
        } else {
            let entries = profile.call_tree.entries.len();
            let order = (0..entries).map(|e| (index(e), 0)).collect();
            (order, Some(Depths::of(profile)))
        };
        let stacks = Stacks {
            profile,
            order: Vec::new(),
            depths,
        };
        order.sort_by_key(|&at| stacks.group(at));
        Stacks { order, ..stacks }
    }

    /// The process of the stack at `at` in [`Stacks::order`].
    fn group(&self, (i, j): (u32, u32)) -> Group {
        let group = if self.depths.is_some() {
            self.profile
                .call_tree
                .entries
                .get(i as usize)
                .map(|e| e.group)
        } else {
            self.profile
                .functions
                .get(i as usize)
                .and_then(|f| f.entries.get(j as usize))
                .map(|e| e.group)
        };
        group.unwrap_or(Group::All)
    }

    /// Calls `each` with every stack, in order (the same [`Stack`], its frames refilled).
    pub(crate) fn for_each(&self, mut each: impl FnMut(&Stack<'a>)) {
        let profile = self.profile;
        let mut stack = Stack {
            group: Group::All,
            frames: Vec::new(),
            calls: 0,
            measurement: 0,
            bytes: 0,
            blocks: 0,
            truncated: 0,
        };
        let mut nodes = Vec::new();
        for &(i, j) in &self.order {
            let (group, calls, measurement, bytes, blocks);
            stack.frames.clear();
            if let Some(tree) = &self.depths {
                let Some(e) = profile.call_tree.entries.get(i as usize) else {
                    continue;
                };
                stack.truncated = tree.path(e.node, &mut nodes);
                stack.frames.extend(nodes.iter().filter_map(|&n| {
                    match n {
                        NONE => Some(&*TRUNCATED),
                        n => profile
                            .call_tree
                            .nodes
                            .get(n as usize)
                            .and_then(|p| profile.function_table.get(p.function as usize)),
                    }
                }));
                (group, calls, measurement, bytes, blocks) =
                    (e.group, e.calls, e.measurement, e.bytes, e.blocks);
            } else {
                let Some(f) = profile.functions.get(i as usize) else {
                    continue;
                };
                let Some(e) = f.entries.get(j as usize) else {
                    continue;
                };
                stack.truncated = 0;
                stack.frames.push(&f.function);
                (group, calls, measurement, bytes, blocks) =
                    (e.group, e.calls, e.measurement, e.bytes, e.blocks);
            }
            if stack.frames.is_empty() {
                continue;
            }
            stack.group = group;
            stack.calls = calls;
            stack.measurement = measurement;
            stack.bytes = bytes;
            stack.blocks = blocks;
            each(&stack);
        }
    }
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

    /// Appends up to `count` nodes from `n` up to `out`, outermost first.
    fn up(&self, n: u32, count: usize, out: &mut Vec<u32>) {
        let from = out.len();
        out.extend(std::iter::successors(Some(n), |&n| self.parent(n)).take(count));
        out[from..].reverse();
    }

    /// Sets `path` to the nodes of `node`'s path, outermost first, with [`NONE`] where
    /// frames were left out past [`MAX_STACK_DEPTH`]; returns how many.
    fn path(&self, node: u32, path: &mut Vec<u32>) -> usize {
        path.clear();
        let Some(&depth) = self.depth.get(node as usize) else {
            return 0;
        };
        let frames = depth as usize + 1;
        if frames <= MAX_STACK_DEPTH {
            self.up(node, frames, path);
            return 0;
        }
        let inner = MAX_STACK_DEPTH - 1 - OUTER_FRAMES;
        self.up(self.anchor[node as usize], OUTER_FRAMES, path);
        path.push(NONE);
        self.up(node, inner, path);
        frames - OUTER_FRAMES - inner
    }
}
