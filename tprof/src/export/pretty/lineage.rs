//! The call tree's paths as a forest, prepared once for all the processes' trees: each path's
//! parent, depth, place in a depth-first walk, and ancestors at powers of two. With it a
//! process's tree is built from its own entries and the paths where they branch (at most
//! twice its entries, plus their outermost paths), each found in O(log depth), rather than
//! from every caller of every entry: the work of the trees is O(e log e) in their entries,
//! and O(n log depth) once for the n paths, however deep the paths are.

/// No path: the parent of an outermost path, an ancestor above it.
const NONE: u32 = u32::MAX;

/// The forest of the call tree's paths.
#[derive(Debug)]
pub(super) struct Lineage {
    /// Each path's parent ([`NONE`] for an outermost path, or a parent that does not come
    /// before it, which the tree treats as outermost).
    parent: Vec<u32>,
    /// How many paths are above each.
    depth: Vec<u32>,
    /// Each path's place in a depth-first walk of the forest.
    enter: Vec<u32>,
    /// The place after its last descendant's: `b` is below `a` when
    /// `enter[a] <= enter[b] < leave[a]`.
    leave: Vec<u32>,
    /// `up[k][i]`: the path 2^k levels above `i`, or [`NONE`].
    up: Vec<Vec<u32>>,
}

impl Lineage {
    /// The forest of paths whose parents are `parents` (each `None` or an index).
    pub(super) fn new(parents: impl ExactSizeIterator<Item = Option<u32>>) -> Lineage {
        let n = parents.len();
        let parent: Vec<u32> = parents
            .enumerate()
            .map(|(i, p)| match p {
                Some(p) if (p as usize) < i => p,
                _ => NONE,
            })
            .collect();
        // Parents come first: one pass in index order gives the depths, one back gives the
        // sizes of the subtrees.
        let mut depth = vec![0u32; n];
        for i in 0..n {
            if parent[i] != NONE {
                depth[i] = depth[parent[i] as usize] + 1;
            }
        }
        let mut size = vec![1u32; n];
        for i in (0..n).rev() {
            if parent[i] != NONE {
                size[parent[i] as usize] += size[i];
            }
        }
        // A depth-first walk: each path's first child starts right after it, each next child
        // after its elder sibling's subtree (children in index order).
        let mut enter = vec![0u32; n];
        let mut next = vec![0u32; n];
        let mut place = 0u32;
        for i in 0..n {
            let p = parent[i];
            enter[i] = if p == NONE {
                let at = place;
                place += size[i];
                at
            } else {
                let at = next[p as usize];
                next[p as usize] += size[i];
                at
            };
            next[i] = enter[i] + 1;
        }
        let leave: Vec<u32> = enter.iter().zip(&size).map(|(e, s)| e + s).collect();
        let deepest = depth.iter().copied().max().unwrap_or(0);
        let levels = (u32::BITS - deepest.leading_zeros()) as usize;
        let mut up: Vec<Vec<u32>> = Vec::with_capacity(levels);
        if levels > 0 {
            up.push(parent.clone());
        }
        for k in 1..levels {
            let below = &up[k - 1];
            let level = below
                .iter()
                .map(|&a| if a == NONE { NONE } else { below[a as usize] })
                .collect();
            up.push(level);
        }
        Lineage {
            parent,
            depth,
            enter,
            leave,
            up,
        }
    }

    /// How many paths are above `node`.
    pub(super) fn depth(&self, node: u32) -> u32 {
        self.depth[node as usize]
    }

    /// Where `node` comes in a depth-first walk (an ancestor before its descendants).
    pub(super) fn order(&self, node: u32) -> u32 {
        self.enter[node as usize]
    }

    /// Whether `below` is `above` or one of its descendants.
    pub(super) fn holds(&self, above: u32, below: u32) -> bool {
        let (a, b) = (above as usize, below as usize);
        self.enter[a] <= self.enter[b] && self.enter[b] < self.leave[a]
    }

    /// The ancestor of `node` with `depth` paths above it (`node` itself at its own depth).
    pub(super) fn ancestor(&self, node: u32, depth: u32) -> u32 {
        let mut at = node;
        let mut rise = self.depth(node).saturating_sub(depth);
        let mut k = 0;
        while rise > 0 {
            if rise & 1 == 1 {
                at = self.up[k][at as usize];
            }
            rise >>= 1;
            k += 1;
        }
        at
    }

    /// The deepest path that holds both `a` and `b`, if they are in one tree.
    pub(super) fn meet(&self, a: u32, b: u32) -> Option<u32> {
        if self.holds(a, b) {
            return Some(a);
        }
        if self.holds(b, a) {
            return Some(b);
        }
        let mut at = a;
        for level in self.up.iter().rev() {
            let above = level[at as usize];
            if above != NONE && !self.holds(above, b) {
                at = above;
            }
        }
        let p = self.parent[at as usize];
        (p != NONE).then_some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every query against the walk up the parents, on a forest of random shape.
    #[test]
    fn queries_agree_with_walking_up_the_parents() {
        let mut seed = 7u64;
        let mut next = move |m: u32| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) % u64::from(m)) as u32
        };
        let n = 400u32;
        let parents: Vec<Option<u32>> = (0..n)
            .map(|i| match next(10) {
                0 => None,
                // A parent that does not come first is read as none.
                1 => Some(i + next(5)),
                _ if i > 0 => Some(i - 1 - next(i.min(6))),
                _ => None,
            })
            .collect();
        let lineage = Lineage::new(parents.iter().copied());
        let chain = |mut i: u32| {
            let mut out = vec![i];
            while let Some(p) = parents[i as usize].filter(|&p| p < i) {
                out.push(p);
                i = p;
            }
            out.reverse();
            out
        };
        for a in 0..n {
            let ca = chain(a);
            assert_eq!(lineage.depth(a) as usize, ca.len() - 1);
            for (d, &x) in ca.iter().enumerate() {
                assert_eq!(lineage.ancestor(a, d as u32), x);
            }
            for b in (0..n).step_by(7) {
                let cb = chain(b);
                let common = ca.iter().zip(&cb).take_while(|(x, y)| x == y).count();
                let expected = common.checked_sub(1).map(|d| ca[d]);
                assert_eq!(lineage.meet(a, b), expected, "{a} {b}");
                assert_eq!(lineage.holds(a, b), cb.contains(&a));
                if lineage.holds(a, b) && a != b {
                    assert!(lineage.order(a) < lineage.order(b));
                }
            }
        }
    }
}
