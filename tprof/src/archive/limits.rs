//! What an archive may hold, checked alike by the writer (which refuses a profile over a limit,
//! writing nothing) and by the reader (which refuses such a file at the offset where it goes
//! over), so that every archive the writer writes reads back.

use super::{ArchiveError, MAX_NAMED_BYTES, MAX_PATH_DEPTH, samples};
use crate::{Function, Profile};

/// The bytes of strings a function holds.
pub(super) fn function_bytes(f: &Function) -> u64 {
    (f.module.len() + f.name.len() + f.file.len()) as u64
}

/// The bytes of strings the records of `profile`'s archive name (each record holds a copy once
/// read): what the reader counts as it reads them.
fn named_bytes<'p>(profile: &'p Profile, distinct_functions: &[&'p Function]) -> u64 {
    let functions = distinct_functions
        .iter()
        .copied()
        .chain(&profile.function_table)
        .chain(profile.functions.iter().map(|t| &t.function))
        .chain(profile.percentiles.iter().map(|p| &p.function))
        .map(function_bytes);
    let runs = profile.meta.runs.iter().map(|r| r.program.len() as u64);
    let processes = profile
        .processes
        .iter()
        .map(|p| (p.initial_call.len() + p.name.as_ref().map_or(0, String::len)) as u64);
    let sampled = samples::strings(&profile.samples).map(|s| s.len() as u64);
    functions
        .chain(runs)
        .chain(processes)
        .chain(sampled)
        .fold(0u64, u64::saturating_add)
}

/// Checks, before anything is written, that `profile` holds no more than an archive may.
pub(super) fn check_writable<'p>(
    profile: &'p Profile,
    distinct_functions: &[&'p Function],
) -> Result<(), ArchiveError> {
    let paths = too_deep(profile.call_tree.nodes.iter().map(|n| n.parent))
        .map(|(i, depth)| (format!("call path {i}"), depth));
    let stacks = || {
        too_deep(profile.samples.stacks.iter().map(|s| s.parent))
            .map(|(i, depth)| (format!("sampled stack {i}"), depth))
    };
    if let Some((path, depth)) = paths.or_else(stacks) {
        return Err(ArchiveError::TooLarge {
            what: format!(
                "{path} is {depth} frames deep, more than the {MAX_PATH_DEPTH} an archive may \
                 hold"
            ),
            len: depth.into(),
            limit: MAX_PATH_DEPTH.into(),
        });
    }
    let named = named_bytes(profile, distinct_functions);
    if named > MAX_NAMED_BYTES {
        return Err(ArchiveError::TooLarge {
            what: format!(
                "its records name {named} bytes of strings (a function's module, name and \
                 file count once per record naming it), more than the {MAX_NAMED_BYTES} an \
                 archive may"
            ),
            len: named,
            limit: MAX_NAMED_BYTES,
        });
    }
    Ok(())
}

/// The first of the paths whose parents are `parents` that is deeper than [`MAX_PATH_DEPTH`],
/// as its index and depth.
fn too_deep(parents: impl Iterator<Item = Option<u32>>) -> Option<(usize, u32)> {
    let mut depths = Depths::default();
    parents
        .enumerate()
        .map(|(i, parent)| (i, depths.push(parent)))
        .find(|&(_, depth)| depth > MAX_PATH_DEPTH)
}

/// The depth of each call path (or sampled stack) so far, as
/// [`CallTree::stack`](crate::CallTree::stack) walks it: a path whose parent does not come
/// before it starts a stack.
#[derive(Default)]
pub(super) struct Depths(Vec<u32>);

impl Depths {
    /// Adds the next path, whose parent is `parent`: its depth, in frames.
    pub(super) fn push(&mut self, parent: Option<u32>) -> u32 {
        let depth = parent
            .and_then(|p| self.0.get(p as usize))
            .map_or(1, |d| d.saturating_add(1));
        self.0.push(depth);
        depth
    }
}

/// Counts `bytes` more of strings named, `named` in all so far, at offset `at`: refused past
/// [`MAX_NAMED_BYTES`] or 64 times the bytes read, whichever is more.
pub(super) fn check_named(named: &mut u64, bytes: u64, at: u64) -> Result<(), ArchiveError> {
    *named = named.saturating_add(bytes);
    if *named > at.saturating_mul(64).max(MAX_NAMED_BYTES) {
        return Err(ArchiveError::Corrupt {
            at,
            what: format!(
                "its records name {named} bytes of strings, more than the {MAX_NAMED_BYTES} \
                 and 64 times the archive's size that a reader accepts: tprof writes no such \
                 file"
            ),
        });
    }
    Ok(())
}
