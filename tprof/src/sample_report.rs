//! Sample mode's text report, as Julia's `Profile.print` prints it: a tree of stacks with
//! counts, or a flat list of frames.
//!
//! Counts are samples' weights summed: timer periods for CPU samples, process-ticks for wall
//! samples. Each process is its own tree's root (`groupby = process`) unless asked otherwise.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::profile::Profile;
use crate::samples::SampleSet;

/// How [`print`] lays a sample report out: Julia's `Profile.print` keywords.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PrintOptions {
    /// Deepest tree level printed (Julia's `maxdepth`).
    pub maxdepth: usize,
    /// Lines with fewer samples are left out (Julia's `mincount`).
    pub mincount: f64,
}

impl Default for PrintOptions {
    fn default() -> Self {
        PrintOptions {
            maxdepth: usize::MAX,
            mincount: 0.0,
        }
    }
}

/// A node of the printed tree: its count and its children by frame.
#[derive(Default)]
struct Node {
    count: f64,
    children: BTreeMap<u32, Node>,
}

/// Prints `profile`'s samples as a tree, one per process.
///
/// # Errors
/// Those of `out`.
pub fn print(out: &mut dyn Write, profile: &Profile, options: &PrintOptions) -> io::Result<()> {
    let set: &SampleSet = &profile.samples;
    writeln!(
        out,
        "Overhead ╎ [+additional indent] Count File:Line; Function"
    )?;
    writeln!(
        out,
        "========================================================="
    )?;
    let mut by_process: BTreeMap<Option<runtime::Pid>, Node> = BTreeMap::new();
    for s in &set.samples {
        let root = by_process.entry(s.pid).or_default();
        root.count += s.weight;
        let mut at = root;
        if let Some(stack) = s.stack {
            for frame in set.frames_of(stack) {
                at = at.children.entry(frame).or_default();
                at.count += s.weight;
            }
        }
    }
    for (pid, root) in &by_process {
        let label = match pid {
            Some(pid) => profile.group_label(crate::Group::Process(*pid)),
            None => "(outside processes)".to_owned(),
        };
        writeln!(
            out,
            "Process {label} Total snapshots: {}",
            root.count.round() as u64
        )?;
        print_children(out, profile, root, 0, options)?;
        writeln!(out)?;
    }
    Ok(())
}

fn print_children(
    out: &mut dyn Write,
    profile: &Profile,
    node: &Node,
    depth: usize,
    options: &PrintOptions,
) -> io::Result<()> {
    if depth >= options.maxdepth {
        return Ok(());
    }
    let set = &profile.samples;
    let mut children: Vec<(&u32, &Node)> = node.children.iter().collect();
    children.sort_by(|a, b| b.1.count.total_cmp(&a.1.count));
    for (frame, child) in children {
        if child.count < options.mincount {
            continue;
        }
        let own = child.count - child.children.values().map(|c| c.count).sum::<f64>();
        let location = set
            .frame_location(&profile.function_table, *frame)
            .map_or_else(|| "unknown".to_owned(), |(f, l)| format!("{f}:{l}"));
        writeln!(
            out,
            "{:>8} ╎{}{} {location}; {}",
            own.round() as u64,
            " ".repeat(depth),
            child.count.round() as u64,
            set.frame_name(&profile.function_table, *frame)
        )?;
        print_children(out, profile, child, depth + 1, options)?;
    }
    Ok(())
}
