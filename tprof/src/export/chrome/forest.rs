//! The call trees of a trace profile's tracks, built from its stacks ([`Forest`], in one
//! arena), the functions numbered and named once for every slice ([`Names`]), and a node's
//! path as a slice's `args.path` writes it ([`PathOf`]).

use std::collections::HashMap;

use serde::Serialize;

use super::super::Stack;
use crate::TraceType;
use crate::export::weight::{frame_name, weight};
use crate::functions::Function;

/// No node.
pub(super) const NONE: u32 = u32::MAX;

/// One node of a process's call tree, built from its stacks: 64 bytes, its links indices
/// into [`Forest::nodes`] ([`NONE`] for none).
#[derive(Debug)]
pub(super) struct Node {
    /// Its function, as [`Names`] numbers it.
    pub(super) function: u32,
    /// The node it extends.
    parent: u32,
    /// Its first and last child, and the next child of its parent: children in the order
    /// they were first seen.
    pub(super) first_child: u32,
    last_child: u32,
    next_sibling: u32,
    pub(super) calls: u64,
    /// Its own figure, in the export's unit.
    pub(super) own: u64,
    /// Its own measurement (call_memory: words).
    pub(super) measurement: u64,
    pub(super) bytes: u64,
    pub(super) blocks: u64,
    /// Own figure plus the children's inclusive ones.
    pub(super) inclusive: u64,
}

/// The call trees of every process, in one arena: a child always after its parent.
#[derive(Debug, Default)]
pub(super) struct Forest {
    pub(super) nodes: Vec<Node>,
    /// Each node by its track, its parent ([`NONE`] for a root) and its function: finding
    /// a child is a lookup, not a scan of the siblings (a node may have thousands).
    index: HashMap<(u32, u32, u32), u32>,
}

/// A track's roots in the [`Forest`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Roots {
    pub(super) first: u32,
    pub(super) last: u32,
}

impl Default for Roots {
    fn default() -> Roots {
        Roots {
            first: NONE,
            last: NONE,
        }
    }
}

impl Forest {
    /// Adds `stack`'s figures (of a `trace_type` profile) at its path in track `track`,
    /// creating the path's nodes as needed.
    pub(super) fn add<'a>(
        &mut self,
        track: u32,
        roots: &mut Roots,
        trace_type: TraceType,
        stack: &Stack<'a>,
        names: &mut Names<'a>,
    ) {
        let mut at = NONE;
        for &function in &stack.frames {
            let function = names.intern(function);
            let next = u32::try_from(self.nodes.len()).unwrap_or(NONE);
            let index = *self.index.entry((track, at, function)).or_insert(next);
            if index == next {
                self.nodes.push(Node {
                    function,
                    parent: at,
                    first_child: NONE,
                    last_child: NONE,
                    next_sibling: NONE,
                    calls: 0,
                    own: 0,
                    measurement: 0,
                    bytes: 0,
                    blocks: 0,
                    inclusive: 0,
                });
                let (first, last) = match self.nodes.get_mut(at as usize) {
                    Some(parent) => (&mut parent.first_child, &mut parent.last_child),
                    None => (&mut roots.first, &mut roots.last),
                };
                let before = *last;
                *last = index;
                if before == NONE {
                    *first = index;
                } else {
                    self.nodes[before as usize].next_sibling = index;
                }
            }
            at = index;
        }
        if let Some(node) = self.nodes.get_mut(at as usize) {
            node.calls = node.calls.saturating_add(stack.calls);
            node.own = node.own.saturating_add(weight(trace_type, stack));
            node.measurement = node.measurement.saturating_add(stack.measurement);
            node.bytes = node.bytes.saturating_add(stack.bytes);
            node.blocks = node.blocks.saturating_add(stack.blocks);
        }
    }

    /// Sets every node's inclusive figure (children come after their parent, so a pass
    /// from the back sees every child before its parent).
    pub(super) fn sum(&mut self) {
        for i in (0..self.nodes.len()).rev() {
            let node = &mut self.nodes[i];
            node.inclusive = node.inclusive.saturating_add(node.own);
            let (parent, inclusive) = (node.parent, node.inclusive);
            if let Some(parent) = self.nodes.get_mut(parent as usize) {
                parent.inclusive = parent.inclusive.saturating_add(inclusive);
            }
        }
    }

    /// The children of `first`'s parent from `first` on, in order.
    pub(super) fn siblings(&self, first: u32) -> impl Iterator<Item = u32> {
        std::iter::successors(Some(first).filter(|&n| n != NONE), |&n| {
            Some(self.nodes[n as usize].next_sibling).filter(|&n| n != NONE)
        })
    }
}

/// The functions of a profile, numbered, and their names as slices show them: made once per
/// function, not per slice. A function is found by its address first (the stacks and logs
/// point into the profile), and by its value the first time an address is seen.
#[derive(Debug, Default)]
pub(super) struct Names<'a> {
    pub(super) by_address: HashMap<*const Function, u32>,
    by_value: HashMap<&'a Function, u32>,
    names: Vec<String>,
}

impl<'a> Names<'a> {
    /// The number of `function`, given it if it has none.
    pub(super) fn intern(&mut self, function: &'a Function) -> u32 {
        if let Some(&id) = self.by_address.get(&std::ptr::from_ref(function)) {
            return id;
        }
        let next = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        let id = *self.by_value.entry(function).or_insert(next);
        if id == next {
            self.names.push(frame_name(function));
        }
        self.by_address.insert(std::ptr::from_ref(function), id);
        id
    }

    /// The name of function number `id`.
    pub(super) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("?", String::as_str)
    }
}

/// The most functions a slice's `args.path` names: a deeper path names its innermost, after
/// `…;` (each slice's path is written in full otherwise, and a trace of deep paths would
/// grow with the square of their depth).
pub(super) const PATH_FUNCTIONS: usize = 32;

/// A node's path, as `args.path` writes it: the functions from the root, `;`-separated, or
/// past [`PATH_FUNCTIONS`] the innermost (written out as the file is, not kept per slice).
#[derive(Debug)]
pub(super) struct PathOf<'a> {
    pub(super) forest: &'a Forest,
    pub(super) names: &'a Names<'a>,
    pub(super) node: u32,
}

impl std::fmt::Display for PathOf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes = &self.forest.nodes;
        let mut path: Vec<u32> = std::iter::successors(Some(self.node), |&n| {
            nodes
                .get(n as usize)
                .map(|n| n.parent)
                .filter(|&p| p != NONE)
        })
        .take(PATH_FUNCTIONS + 1)
        .collect();
        if path.len() > PATH_FUNCTIONS {
            path.truncate(PATH_FUNCTIONS);
            f.write_str("…;")?;
        }
        for (i, &node) in path.iter().rev().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            f.write_str(self.names.name(nodes[node as usize].function))?;
        }
        Ok(())
    }
}

impl Serialize for PathOf<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
