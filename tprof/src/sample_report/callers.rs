//! Who called a function, with counts: Julia's `Profile.callers`.
//!
//! Each time the function is on a sample's stack, the frame just above it (the nearest shown
//! one, when native frames are hidden) counts the sample's weight: a function recurring in a
//! sample counts once per call, as Julia's does. Linear in the stacks: a stack's inclusive
//! weight (of the samples whose stack is it or extends it) is summed once, innermost first.

use std::collections::HashMap;

use super::frames::Keys;
use super::options::PrintOptions;
use crate::profile::Profile;

/// A caller of a function, as [`callers`] gives it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Caller {
    /// The weight of the samples in which it called the function (once per call on the
    /// stack): timer periods (CPU) or process-ticks (wall).
    pub count: f64,
    /// The caller, as the reports name it (`module::name/arity` for a traced function).
    pub function: String,
    /// Its file, when known.
    pub file: Option<String>,
    /// Its line, when known.
    pub line: Option<u32>,
    /// One of the frames it stands for: an index into
    /// [`SampleSet::frames`](crate::samples::SampleSet::frames).
    pub frame: u32,
}

/// Who called `function` in `profile`'s samples, with counts, the most first (Julia's
/// `Profile.callers`).
///
/// `function` names a frame as the reports do (`module::name/arity`), or without its arity
/// (`module::name`), or by its last part alone (`name`). `options` say which frames are one
/// ([`combine`](PrintOptions::combine)) and whether native ones count
/// ([`native`](PrintOptions::native)), and which sampler's samples to count
/// ([`sampler`](PrintOptions::sampler): with none, the weights of every sampler are added
/// up), and which frames and samples count as in the report: [`native`](PrintOptions::native)
/// (by default the plumbing is folded, and a function's caller is the nearest frame above
/// it that shows), [`crates`](PrintOptions::crates), [`hide`](PrintOptions::hide) and
/// [`focus`](PrintOptions::focus) (only the samples with a frame it matches). A frame at the
/// top of its stack has no caller and adds nothing. A focus or hide pattern that is not a
/// regular expression (set on the field, not through [`PrintOptions::focus`], which checks
/// it) filters nothing.
///
/// ```
/// use runtime::Pid;
/// use tprof::samples::{SampleFrame, SampleRecord, SampleSet, SampleStack};
/// use tprof::sample_report::{PrintOptions, callers};
/// use tprof::{Function, Profile, TraceType};
///
/// let f = |name: &str, line| Function {
///     module: "app".into(), name: name.into(), arity: 0, file: "src/app.rs".into(), line,
/// };
/// let mut profile = Profile::empty(TraceType::CallCount);
/// profile.function_table = vec![f("main", 1), f("serve", 10), f("parse", 20)];
/// let traced = |i| SampleFrame { function: Some(i), name: String::new(), file: None, line: None, address: 0 };
/// let set = &mut profile.samples;
/// set.frames = (0..3).map(traced).collect();
/// // main > parse, and main > serve > parse
/// set.stacks = vec![
///     SampleStack { parent: None, frame: 0 },
///     SampleStack { parent: Some(0), frame: 2 },
///     SampleStack { parent: Some(0), frame: 1 },
///     SampleStack { parent: Some(2), frame: 2 },
/// ];
/// let sample = |stack, weight| SampleRecord {
///     source: 0, pid: Some("<0.5.0>".parse::<Pid>().unwrap()), thread: None, time_ns: 0,
///     weight, stack: Some(stack), state: None, mailbox_len: 0, callee: None, size: 0, live: false,
/// };
/// set.samples = vec![sample(1, 2.0), sample(3, 5.0), sample(3, 1.0)];
///
/// let who = callers(&profile, "parse", &PrintOptions::default());
/// let counts: Vec<(f64, &str)> = who.iter().map(|c| (c.count, c.function.as_str())).collect();
/// assert_eq!(counts, [(6.0, "app::serve/0"), (2.0, "app::main/0")]);
///
/// // The tree: serve's callers under serve.
/// let tree = tprof::sample_report::callers_tree(&profile, "parse", &PrintOptions::default());
/// let lines: Vec<(usize, f64, &str)> =
///     tree.iter().map(|l| (l.depth, l.caller.count, l.caller.function.as_str())).collect();
/// assert_eq!(lines, [(1, 6.0, "app::serve/0"), (2, 6.0, "app::main/0"), (1, 2.0, "app::main/0")]);
/// ```
pub fn callers(profile: &Profile, function: &str, options: &PrintOptions) -> Vec<Caller> {
    let set = &profile.samples;
    let keys = Keys::new(set, &profile.function_table, options);
    let n = set.stacks.len();
    let parent_of = |s: usize| set.stacks[s].parent.map(|p| p as usize).filter(|&p| p < s);
    let mut inclusive = counted(profile, options);
    for s in (0..n).rev() {
        if let Some(p) = parent_of(s) {
            inclusive[p] += inclusive[s];
        }
    }
    let matches: Vec<bool> = (0..keys.len())
        .map(|k| names(&keys.get(crate::functions::index32(k)).name, function))
        .collect();
    // Per stack, the nearest stack at or above it whose frame is shown (parents first).
    let mut shown: Vec<Option<usize>> = vec![None; n];
    let mut counts = vec![0.0f64; keys.len()];
    for s in 0..n {
        let key = keys.of(set.stacks[s].frame);
        let above = parent_of(s).and_then(|p| shown[p]);
        shown[s] = if key.is_some() { Some(s) } else { above };
        let Some(key) = key else { continue };
        if !matches[key as usize] {
            continue;
        }
        if let Some(caller) = above.and_then(|a| keys.of(set.stacks[a].frame)) {
            counts[caller as usize] += inclusive[s];
        }
    }
    let mut out: Vec<Caller> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0.0)
        .map(|(k, &count)| {
            let key = keys.get(crate::functions::index32(k));
            Caller {
                count,
                function: key.shown_name().into_owned(),
                file: key.file.as_deref().map(str::to_owned),
                line: key.line,
                frame: key.frame,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.count
            .total_cmp(&a.count)
            .then_with(|| a.function.cmp(&b.function))
            .then_with(|| a.file.cmp(&b.file))
            .then_with(|| a.line.cmp(&b.line))
    });
    out
}

/// A line of [`callers_tree`]: a caller, at its depth in the tree of callers.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CallerLine {
    /// 1 for a caller of the function, 2 for a caller of that caller, ...
    pub depth: usize,
    /// The caller, and the weight of the samples in which the function was called through
    /// the callers above this line (once per call on the stack).
    pub caller: Caller,
}

/// The tree of `function`'s callers in `profile`'s samples, outward: its callers (the lines
/// of depth 1, as [`callers`] gives them), under each the callers of that caller on those
/// same stacks, and so on to the outermost frame; siblings the most first (then by name),
/// each line followed by its own callers. Which frames and samples count is as for
/// [`callers`]: by default the plumbing is folded, so a chain goes from a traced function
/// to the next frame of the user's code. Linear in the sampled stacks' frames (times the
/// times `function` recurs on one). [`callers`]' example shows one.
pub fn callers_tree(profile: &Profile, function: &str, options: &PrintOptions) -> Vec<CallerLine> {
    let set = &profile.samples;
    let keys = Keys::new(set, &profile.function_table, options);
    let own = counted(profile, options);
    let matches: Vec<bool> = (0..keys.len())
        .map(|k| names(&keys.get(crate::functions::index32(k)).name, function))
        .collect();
    // The tree: node 0 is the function; a node's children by key.
    let mut counts: Vec<f64> = vec![0.0];
    let mut key_of: Vec<u32> = vec![u32::MAX];
    let mut children: HashMap<(usize, u32), usize> = HashMap::new();
    for (stack, &weight) in own.iter().enumerate().filter(|(_, w)| **w > 0.0) {
        let shown: Vec<u32> = set
            .frames_of(crate::functions::index32(stack))
            .into_iter()
            .filter_map(|f| keys.of(f))
            .collect();
        for (i, key) in shown.iter().enumerate() {
            if !matches[*key as usize] {
                continue;
            }
            let mut node = 0;
            for &caller in shown[..i].iter().rev() {
                node = *children.entry((node, caller)).or_insert_with(|| {
                    counts.push(0.0);
                    key_of.push(caller);
                    counts.len() - 1
                });
                counts[node] += weight;
            }
        }
    }
    let mut under: Vec<Vec<usize>> = vec![Vec::new(); counts.len()];
    for (&(parent, _), &child) in &children {
        under[parent].push(child);
    }
    let line = |node: usize, depth: usize| {
        let key = keys.get(key_of[node]);
        CallerLine {
            depth,
            caller: Caller {
                count: counts[node],
                function: key.shown_name().into_owned(),
                file: key.file.as_deref().map(str::to_owned),
                line: key.line,
                frame: key.frame,
            },
        }
    };
    let order = |nodes: &mut Vec<usize>| {
        nodes.sort_by(|&a, &b| {
            counts[b].total_cmp(&counts[a]).then_with(|| {
                keys.get(key_of[a])
                    .shown_name()
                    .cmp(&keys.get(key_of[b]).shown_name())
            })
        });
    };
    let mut out = Vec::new();
    let mut todo: Vec<(usize, usize)> = Vec::new();
    let mut first = std::mem::take(&mut under[0]);
    order(&mut first);
    todo.extend(first.into_iter().rev().map(|n| (n, 1)));
    while let Some((node, depth)) = todo.pop() {
        out.push(line(node, depth));
        let mut next = std::mem::take(&mut under[node]);
        order(&mut next);
        todo.extend(next.into_iter().rev().map(|n| (n, depth + 1)));
    }
    out
}

/// Per stack, the weight of its samples that [`callers`] counts: of
/// [`sampler`](PrintOptions::sampler)'s sources (every source's without one), and kept by
/// [`focus`](PrintOptions::focus) (a pattern that is not a regular expression keeps every
/// one).
fn counted(profile: &Profile, options: &PrintOptions) -> Vec<f64> {
    let set = &profile.samples;
    let focus = options.filters().ok().and_then(|f| f.focus);
    let wanted = focus
        .as_ref()
        .map(|focus| super::view::focused(set, &profile.function_table, options, focus));
    let n = set.stacks.len();
    let mut weights = vec![0.0f64; n];
    for s in &set.samples {
        let wanted_sampler = options.sampler.is_none_or(|k| {
            set.sources
                .get(s.source as usize)
                .is_some_and(|src| src.sampler == k)
        });
        if let Some(stack) = s.stack.map(|s| s as usize).filter(|&s| s < n)
            && wanted_sampler
            && wanted_stacks(&wanted, stack)
        {
            weights[stack] += s.weight;
        }
    }
    weights
}

/// Whether focus keeps the samples of `stack` (`wanted`: per stack, `None` for no focus).
fn wanted_stacks(wanted: &Option<Vec<bool>>, stack: usize) -> bool {
    wanted
        .as_ref()
        .is_none_or(|w| w.get(stack).copied().unwrap_or(false))
}

/// Whether a frame named `name` is the function `wanted`: the whole name, the name without
/// its arity (`/N`), or its last `::` part without arity.
fn names(name: &str, wanted: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let without_arity = match name.rsplit_once('/') {
        Some((head, arity)) if !arity.is_empty() && arity.bytes().all(|b| b.is_ascii_digit()) => {
            head
        }
        _ => name,
    };
    let last = without_arity
        .rsplit_once("::")
        .map_or(without_arity, |(_, last)| last);
    name == wanted || without_arity == wanted || last == wanted
}
