//! The tree, laid out as Julia's `Profile.print` lays it out.
//!
//! Each line is the overhead (blank when 0) right-aligned in the width of the largest, `╎`,
//! the indentation, the count left-aligned in the width of the largest, a space and the
//! frame: `file:line; function`. The indentation of a line at depth `d` is `d` characters —
//! spaces with a `╎` guide every fifth — and, when [`width`](super::PrintOptions::width) is
//! set and `d` passes half of it, it stops there and `+n ` says how many more there would
//! have been; file and function are then cut to fit (the file from the left, the function
//! from the right). Siblings come in [`SortedBy`] order; a line is left out, with what is
//! below it, under `mincount` or `noisefloor`, and lines below `maxdepth` are not printed.

use std::cmp::Ordering;
use std::io::{self, Write};

use super::frames::Keys;
use super::options::{PrintOptions, SortedBy};
use super::walk::{Node, Walked};
use super::{ndigits, rounded};

/// Prints the lines of `walked`'s tree (not its header or totals).
pub(super) fn print(
    out: &mut dyn Write,
    walked: &Walked,
    keys: &Keys<'_>,
    options: &PrintOptions,
) -> io::Result<()> {
    let tree = &walked.tree;
    let widths = Widths {
        overhead: ndigits(tree.iter().map(|n| rounded(n.overhead)).max().unwrap_or(0)),
        count: ndigits(tree.iter().map(|n| rounded(n.count)).max().unwrap_or(0)),
    };
    // Depth first, in print order: (node, depth, the largest line number of its siblings).
    let mut todo: Vec<(u32, usize, u32)> = Vec::new();
    push_children(&mut todo, tree, 0, 0, keys, options, true);
    while let Some((node, depth, sibling_line)) = todo.pop() {
        let n = &tree[node as usize];
        writeln!(
            out,
            "{}",
            line(n, depth, sibling_line, widths, keys, options)
        )?;
        if depth < options.maxdepth {
            push_children(&mut todo, tree, node, depth + 1, keys, options, false);
        }
    }
    Ok(())
}

/// How wide the overhead and count columns are.
#[derive(Clone, Copy)]
struct Widths {
    overhead: usize,
    count: usize,
}

/// Pushes the children of `parent` that are printed onto `todo`, first to print last.
fn push_children(
    todo: &mut Vec<(u32, usize, u32)>,
    tree: &[Node],
    parent: u32,
    depth: usize,
    keys: &Keys<'_>,
    options: &PrintOptions,
    top: bool,
) {
    let up = &tree[parent as usize];
    let mut children = up.children.clone();
    let max_line = children
        .iter()
        .filter_map(|&c| keys.get(tree[c as usize].key).line)
        .max()
        .unwrap_or(0);
    let floor = (options.noisefloor > 0.0 && !top).then(|| options.noisefloor * up.count.sqrt());
    children.retain(|&c| {
        let n = tree[c as usize].count;
        n >= options.mincount && floor.is_none_or(|f| n > f)
    });
    children.sort_by(|&a, &b| order(&tree[a as usize], &tree[b as usize], keys, options.sortedby));
    todo.extend(children.into_iter().rev().map(|c| (c, depth, max_line)));
}

/// Siblings' order: ascending counts or overheads (the heaviest last, as Julia), else by
/// place or name.
fn order(a: &Node, b: &Node, keys: &Keys<'_>, sortedby: SortedBy) -> Ordering {
    let by = match sortedby {
        SortedBy::Count => a.count.total_cmp(&b.count),
        SortedBy::Overhead => a.overhead.total_cmp(&b.overhead),
        SortedBy::FileFuncLine | SortedBy::Name => Ordering::Equal,
    };
    by.then_with(|| keys.cmp(a.key, b.key, sortedby))
}

/// The line of node `n` at `depth`.
fn line(
    n: &Node,
    depth: usize,
    sibling_line: u32,
    widths: Widths,
    keys: &Keys<'_>,
    options: &PrintOptions,
) -> String {
    let overhead = rounded(n.overhead);
    let overhead = if overhead > 0 {
        overhead.to_string()
    } else {
        String::new()
    };
    let count = rounded(n.count).to_string();
    let cols = options.width;
    let mut shown = if cols == 0 {
        depth
    } else {
        depth.min(cols / 2)
    };
    let cut = (cols > 0).then(|| {
        let used = widths.overhead + shown + widths.count + ndigits(u64::from(sibling_line)) + 12;
        let text = cols.saturating_sub(used).max(30);
        (2 * text / 5, 3 * text / 5)
    });
    let mut more = String::new();
    if depth > shown {
        let extra = depth - shown;
        shown = shown.saturating_sub(ndigits(extra as u64) + 2);
        more = format!("+{extra} ");
    }
    let indent = if shown == 0 {
        String::new()
    } else {
        let mut s = guides(shown - 1);
        s.push(' ');
        s
    };
    format!(
        "{overhead:>wo$}╎{indent}{more}{count:<wc$} {}",
        keys.get(n.key).tree_text(cut),
        wo = widths.overhead,
        wc = widths.count,
    )
}

/// `n` characters of indentation: spaces, with a `╎` guide every fifth.
fn guides(n: usize) -> String {
    (1..=n)
        .map(|i| if i % 5 == 0 { '╎' } else { ' ' })
        .collect()
}
