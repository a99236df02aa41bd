//! Many processes in one drawing (svg, speedscope): past [`MANY`] processes, each is shown
//! under its group, as the html viewer sums them — by initial call — rather than as a frame
//! or a profile of its own, which at 100,000 processes is narrower than a pixel (an svg
//! draws only `all`) or one profile among 100,000 (speedscope does not finish loading).
//!
//! A group is named `app::worker/1 (33,414 processes)`, counting the processes it draws: those
//! with a sample (sampled profiles) or a measured call (traced ones), not every process the
//! profile saw start (a sampler draws a few of many: `count_chunk (3,673 processes)` read as
//! 3,673 sampled when 120 were); a group of one such process keeps that process's label.
//! Everything here is linear in the processes (and the samples or entries).

use std::collections::{HashMap, HashSet};

use runtime::Pid;

use crate::samples::thousands;
use crate::{Group, Profile};

/// Past this many processes, they are grouped (the html viewer's limit too).
pub(super) const MANY: usize = 50;

/// Each process's group, by pid: its initial call, and how many processes share it.
#[derive(Debug)]
pub(super) struct Groups {
    /// The group of each process, as an index into `names`.
    of: HashMap<Pid, usize>,
    /// Each group's name, as drawn.
    names: Vec<String>,
    /// How many processes of each group are drawn (have samples or measured calls).
    sizes: Vec<u64>,
}

/// The processes `profile` has figures of: a sample, or a measured call (a function's entry, a
/// call path's).
fn measured(profile: &Profile) -> HashSet<Pid> {
    if !profile.samples.is_empty() {
        return profile
            .samples
            .samples
            .iter()
            .filter_map(|s| s.pid)
            .collect();
    }
    let function_entries = profile.functions.iter().flat_map(|f| &f.entries);
    function_entries
        .map(|e| e.group)
        .chain(profile.call_tree.entries.iter().map(|e| e.group))
        .filter_map(|g| match g {
            Group::Process(pid) => Some(pid),
            Group::All => None,
        })
        .collect()
}

impl Groups {
    /// The groups of `profile`'s processes, or `None` when they are at most [`MANY`].
    pub(super) fn of(profile: &Profile) -> Option<Groups> {
        if profile.processes.len() <= MANY {
            return None;
        }
        let labels = profile.labels();
        let drawn = measured(profile);
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut keys: Vec<&str> = Vec::new();
        let mut sizes: Vec<u64> = Vec::new();
        let mut of = HashMap::with_capacity(profile.processes.len());
        // Per group, its first drawn process (its first process while none is drawn).
        let mut first: Vec<Pid> = Vec::new();
        for p in &profile.processes {
            let key = p.initial_call.as_str();
            let i = *index.entry(key).or_insert_with(|| {
                keys.push(key);
                sizes.push(0);
                first.push(p.pid);
                keys.len() - 1
            });
            if drawn.contains(&p.pid) {
                if sizes[i] == 0 {
                    first[i] = p.pid;
                }
                sizes[i] += 1;
            }
            of.insert(p.pid, i);
        }
        let names = keys
            .iter()
            .zip(&sizes)
            .zip(&first)
            .map(|((key, &n), &pid)| match n {
                1 => labels.get(Group::Process(pid)).into_owned(),
                n => {
                    let key = if key.is_empty() {
                        "(no initial call)"
                    } else {
                        key
                    };
                    format!("{key} ({} processes)", thousands(n))
                }
            })
            .collect();
        Some(Groups { of, names, sizes })
    }

    /// The group of `pid` (an index), if it is one of the profile's processes.
    pub(super) fn group(&self, pid: Pid) -> Option<usize> {
        self.of.get(&pid).copied()
    }

    /// The name of group `i`.
    pub(super) fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// How many processes of group `i` are drawn (have samples or measured calls).
    pub(super) fn size(&self, i: usize) -> u64 {
        self.sizes[i]
    }

    /// How many groups there are.
    pub(super) fn len(&self) -> usize {
        self.names.len()
    }
}

/// The name of the root that stands for `n` processes too small to draw.
pub(super) fn small_processes(n: u64) -> String {
    format!("({} small processes)", thousands(n))
}

/// What a file's name says of `processes` grouped into `groups`: `; 99,721 processes, grouped
/// by initial call into 3 profiles (past 50 processes)`.
pub(super) fn note(processes: usize, groups: &Groups) -> String {
    format!(
        "; {} processes, grouped by initial call into {} (past {MANY} processes, as the html \
         viewer groups them)",
        thousands(processes as u64),
        match groups.len() {
            1 => "1 group".to_owned(),
            n => format!("{} groups", thousands(n as u64)),
        }
    )
}
