//! One group's samples as the tree and the flat list print them, from one depth-first walk
//! of the stacks its samples name.
//!
//! The walk visits each stack of the group once (the stacks its samples end in, and the
//! stacks those extend), so it is linear in them (and n log n for ordering them), not in the
//! samples times their depth: a stack's *inclusive* weight — the weight of the samples whose
//! stack is it or extends it — is summed from the innermost stacks up, once.
//!
//! - The tree: each shown frame of a stack becomes a node under the node of the stack it
//!   extends (a hidden frame adds none: the stack is its parent's node). A node's count is the
//!   inclusive weight of the stacks that reach it, its overhead the weight of the samples
//!   whose stack ends at it. With [`Recur::Flat`], a frame whose key is already on the stack
//!   above goes back to that key's node instead (Julia's `recur = :flat`), and counts there
//!   once only.
//! - The folded frames met on the way are gathered, for the report to say how many it
//!   folded.
//! - The samples whose stack has frames but none shown (native frames hidden) count on a
//!   line of their own under the root, [`Keys::hidden`]'s, in the tree and the flat list.
//! - The flat list: a key counts the inclusive weight of each stack where it appears first on
//!   the path (a sample counts once, however often the key recurs in it); its overhead is the
//!   weight of the samples whose innermost shown frame it is.

use std::collections::{HashMap, HashSet};

use super::frames::Keys;
use super::options::Recur;
use crate::samples::SampleSet;

/// A node of the printed tree.
pub(super) struct Node {
    /// Its key (meaningless for the root).
    pub(super) key: u32,
    /// The weight of the samples through it.
    pub(super) count: f64,
    /// The weight of the samples that end at it (Julia's overhead).
    pub(super) overhead: f64,
    /// The nodes below it.
    pub(super) children: Vec<u32>,
}

/// A key's line of the flat list.
pub(super) struct FlatLine {
    /// The key.
    pub(super) key: u32,
    /// The weight of the samples it is on the stack of (once each).
    pub(super) count: f64,
    /// The weight of the samples it is the innermost shown frame of.
    pub(super) overhead: f64,
}

/// A group's tree and flat list.
pub(super) struct Walked {
    /// The tree's nodes; the first is the root, whose count is the group's total.
    pub(super) tree: Vec<Node>,
    /// The flat list, in no order.
    pub(super) flat: Vec<FlatLine>,
    /// The folded frames ([`Keys::folded`]) on the stacks walked (indices into
    /// [`SampleSet::frames`]).
    pub(super) folded: HashSet<u32>,
}

/// One step of the walk.
enum Step {
    /// Visit stack `stack`, below tree node `node`, `inner` being the innermost shown key
    /// above it.
    Enter {
        stack: u32,
        node: u32,
        inner: Option<u32>,
    },
    /// Leave a stack: its key is off the path again (and off the recursion path too when
    /// `recur` is set).
    Leave { key: Option<u32>, recur: bool },
}

/// Walks the stacks of one group: `stacks` is the weight of its samples per stack (`None`:
/// the empty stack).
pub(super) fn walk(
    set: &SampleSet,
    keys: &Keys<'_>,
    stacks: &HashMap<Option<u32>, f64>,
    recur: Recur,
) -> Walked {
    let parent_of = |s: u32| {
        set.stacks
            .get(s as usize)
            .and_then(|n| n.parent)
            .filter(|&p| p < s)
    };
    let mut root_own = 0.0;
    let mut own: HashMap<u32, f64> = HashMap::new();
    for (&stack, &w) in stacks {
        match stack.filter(|&s| (s as usize) < set.stacks.len()) {
            Some(s) => *own.entry(s).or_default() += w,
            None => root_own += w,
        }
    }
    // The stacks to visit: those samples end in, and those they extend.
    let mut touched: Vec<u32> = own.keys().copied().collect();
    let mut seen: HashSet<u32> = touched.iter().copied().collect();
    let mut i = 0;
    while i < touched.len() {
        if let Some(p) = parent_of(touched[i])
            && seen.insert(p)
        {
            touched.push(p);
        }
        i += 1;
    }
    // Inclusive weights, innermost first (a stack's parent has a smaller index).
    touched.sort_unstable_by(|a, b| b.cmp(a));
    let mut inclusive: HashMap<u32, f64> = touched
        .iter()
        .map(|s| (*s, own.get(s).copied().unwrap_or(0.0)))
        .collect();
    for &s in &touched {
        if let Some(p) = parent_of(s) {
            let w = inclusive.get(&s).copied().unwrap_or(0.0);
            if let Some(up) = inclusive.get_mut(&p) {
                *up += w;
            }
        }
    }
    let mut children: HashMap<Option<u32>, Vec<u32>> = HashMap::new();
    for &s in touched.iter().rev() {
        children.entry(parent_of(s)).or_default().push(s);
    }
    let total = root_own
        + children
            .get(&None)
            .map_or(0.0, |r| r.iter().filter_map(|s| inclusive.get(s)).sum());

    let mut tree = vec![Node {
        key: 0,
        count: total,
        overhead: root_own,
        children: Vec::new(),
    }];
    let mut node_of: HashMap<(u32, u32), u32> = HashMap::new();
    let mut flat: HashMap<u32, FlatLine> = HashMap::new();
    // Keys on the path (how often), and their nodes for recursion.
    let mut on_path: HashMap<u32, u32> = HashMap::new();
    let mut recur_node: HashMap<u32, u32> = HashMap::new();
    let mut hidden = 0.0;
    let mut folded: HashSet<u32> = HashSet::new();
    let mut todo: Vec<Step> = children
        .get(&None)
        .into_iter()
        .flatten()
        .rev()
        .map(|&stack| Step::Enter {
            stack,
            node: 0,
            inner: None,
        })
        .collect();
    while let Some(step) = todo.pop() {
        let (stack, above, inner) = match step {
            Step::Enter { stack, node, inner } => (stack, node, inner),
            Step::Leave { key, recur } => {
                if let Some(key) = key {
                    if let Some(n) = on_path.get_mut(&key) {
                        *n -= 1;
                        if *n == 0 {
                            on_path.remove(&key);
                        }
                    }
                    if recur {
                        recur_node.remove(&key);
                    }
                }
                continue;
            }
        };
        let weight = inclusive.get(&stack).copied().unwrap_or(0.0);
        let frame = set.stacks.get(stack as usize).map(|s| s.frame);
        let key = frame.and_then(|f| keys.of(f));
        if let Some(f) = frame.filter(|&f| keys.folded(f)) {
            folded.insert(f);
        }
        let (node, inner, leave) = match key {
            None => (
                above,
                inner,
                Step::Leave {
                    key: None,
                    recur: false,
                },
            ),
            Some(key) => {
                let seen = on_path.entry(key).or_insert(0);
                if *seen == 0 {
                    flat.entry(key)
                        .or_insert(FlatLine {
                            key,
                            count: 0.0,
                            overhead: 0.0,
                        })
                        .count += weight;
                }
                *seen += 1;
                let folded = match recur {
                    Recur::Flat => recur_node.get(&key).copied(),
                    Recur::Off => None,
                };
                match folded {
                    Some(node) => (
                        node,
                        Some(key),
                        Step::Leave {
                            key: Some(key),
                            recur: false,
                        },
                    ),
                    None => {
                        let next = crate::functions::index32(tree.len());
                        let node = *node_of.entry((above, key)).or_insert(next);
                        if node == next {
                            tree.push(Node {
                                key,
                                count: 0.0,
                                overhead: 0.0,
                                children: Vec::new(),
                            });
                            tree[above as usize].children.push(node);
                        }
                        tree[node as usize].count += weight;
                        let recur = recur == Recur::Flat;
                        if recur {
                            recur_node.insert(key, node);
                        }
                        (
                            node,
                            Some(key),
                            Step::Leave {
                                key: Some(key),
                                recur,
                            },
                        )
                    }
                }
            }
        };
        let own = own.get(&stack).copied().unwrap_or(0.0);
        // A stack whose frames are all hidden ends at the root: counted on a line of its own.
        if node == 0 {
            hidden += own;
        } else {
            tree[node as usize].overhead += own;
        }
        if let Some(line) = inner.and_then(|k| flat.get_mut(&k)) {
            line.overhead += own;
        }
        todo.push(leave);
        if let Some(below) = children.get(&Some(stack)) {
            todo.extend(
                below
                    .iter()
                    .rev()
                    .map(|&stack| Step::Enter { stack, node, inner }),
            );
        }
    }
    if hidden > 0.0 {
        let key = keys.hidden();
        let node = crate::functions::index32(tree.len());
        tree.push(Node {
            key,
            count: hidden,
            overhead: hidden,
            children: Vec::new(),
        });
        tree[0].children.push(node);
        flat.insert(
            key,
            FlatLine {
                key,
                count: hidden,
                overhead: hidden,
            },
        );
    }
    let mut flat: Vec<FlatLine> = flat.into_values().collect();
    flat.sort_unstable_by_key(|l| l.key);
    Walked { tree, flat, folded }
}
