//! One process's call tree, as the pretty report prints it, built from the paths it measured,
//! the paths where they branch, and their outermost paths: the tree's own paths. Every other
//! path of the process's tree lies between two of them and only holds the one below it, so it
//! is a place ([`At`]) named when printed, never a row built.

use std::collections::HashMap;

use super::Row;
use super::lineage::Lineage;

/// A path of a process's tree: the one `depth` levels deep on the way to the tree's own path
/// `below` (that path itself at its own depth).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct At {
    /// A path of the tree's own, at or below this one.
    pub(super) below: u32,
    /// How many paths are above this one.
    pub(super) depth: u32,
}

/// A process's call tree.
#[derive(Debug)]
pub(super) struct Tree {
    /// The figures of its own paths.
    pub(super) rows: HashMap<u32, Row>,
    /// Its outermost paths.
    pub(super) roots: Vec<u32>,
    /// Each own path's own paths below it, nearest first (no own path between).
    children: HashMap<u32, Vec<u32>>,
}

impl Tree {
    /// The tree of `entries` (each a path, its calls and its own figure, as printed): in
    /// O(e log e) for e entries, whatever their depth.
    pub(super) fn of(lineage: &Lineage, entries: impl Iterator<Item = (u32, u64, u64)>) -> Tree {
        let mut rows: HashMap<u32, Row> = HashMap::new();
        for (node, calls, own) in entries {
            let row = rows.entry(node).or_default();
            row.entered = true;
            row.calls = row.calls.saturating_add(calls);
            row.own = row.own.saturating_add(own);
        }
        // The measured paths, their outermost paths, and where two neighbours of a
        // depth-first walk meet: every path where the tree branches.
        let mut own: Vec<u32> = rows.keys().copied().collect();
        let outermost: Vec<u32> = own.iter().map(|&n| lineage.ancestor(n, 0)).collect();
        own.extend(outermost);
        let walk = |list: &mut Vec<u32>| {
            list.sort_unstable_by_key(|&n| lineage.order(n));
            list.dedup();
        };
        walk(&mut own);
        let meets: Vec<u32> = own
            .windows(2)
            .filter_map(|w| lineage.meet(w[0], w[1]))
            .collect();
        own.extend(meets);
        walk(&mut own);
        // Each one's parent in the tree: the nearest of those above it in the walk that holds
        // it.
        let mut holding: Vec<u32> = Vec::new();
        let mut parents: Vec<(u32, Option<u32>)> = Vec::with_capacity(own.len());
        for &node in &own {
            rows.entry(node).or_default();
            while holding.last().is_some_and(|&h| !lineage.holds(h, node)) {
                holding.pop();
            }
            parents.push((node, holding.last().copied()));
            holding.push(node);
        }
        // Children after their parents: from the last back, each adds to its parent.
        let mut roots = Vec::new();
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for &(node, parent) in parents.iter().rev() {
            let Some(row) = rows.get_mut(&node) else {
                continue;
            };
            row.inclusive = row.inclusive.saturating_add(row.own);
            let inclusive = row.inclusive;
            match parent.and_then(|p| Some((p, rows.get_mut(&p)?))) {
                Some((p, up)) => {
                    up.inclusive = up.inclusive.saturating_add(inclusive);
                    children.entry(p).or_default().push(node);
                }
                None => roots.push(node),
            }
        }
        Tree {
            rows,
            roots,
            children,
        }
    }

    /// The path at `at`.
    pub(super) fn node(&self, lineage: &Lineage, at: At) -> u32 {
        lineage.ancestor(at.below, at.depth)
    }

    /// Whether `at` is one of the tree's own paths (else it lies above one).
    fn is_own(&self, lineage: &Lineage, at: At) -> bool {
        at.depth >= lineage.depth(at.below)
    }

    /// The figures of the path at `at`: a path between the tree's own has no calls and
    /// nothing of its own, and the inclusive figure of the one below it.
    pub(super) fn row(&self, lineage: &Lineage, at: At) -> Row {
        let below = self.rows.get(&at.below).copied().unwrap_or_default();
        if self.is_own(lineage, at) {
            below
        } else {
            Row {
                inclusive: below.inclusive,
                ..Row::default()
            }
        }
    }

    /// The paths right below `at`.
    pub(super) fn children(&self, lineage: &Lineage, at: At) -> Vec<At> {
        if !self.is_own(lineage, at) {
            return vec![At {
                below: at.below,
                depth: at.depth + 1,
            }];
        }
        self.children.get(&at.below).map_or_else(Vec::new, |list| {
            list.iter()
                .map(|&below| At {
                    below,
                    depth: at.depth + 1,
                })
                .collect()
        })
    }

    /// The last path of the chain that starts at `at` and goes down through the paths that
    /// only hold the one below them (measured nothing, and hold one path): `at`'s own path
    /// when it is not one of those.
    pub(super) fn chain_end(&self, at: At) -> u32 {
        let mut below = at.below;
        loop {
            let entered = self.rows.get(&below).is_some_and(|r| r.entered);
            match self.children.get(&below).map(Vec::as_slice) {
                Some(&[only]) if !entered => below = only,
                _ => return below,
            }
        }
    }
}
