//! Many processes in one drawing (svg, speedscope): past [`MANY`] processes, each is shown
//! under its group, as the html viewer sums them — by initial call — rather than as a frame
//! or a profile of its own, which at 100,000 processes is narrower than a pixel (an svg
//! draws only `all`) or one profile among 100,000 (speedscope does not finish loading).
//!
//! A group is named `app::worker/1 (33,414 processes)`; a process that is alone in its group
//! keeps its own label. Everything here is linear in the processes.

use std::collections::HashMap;

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
    /// How many processes each group has.
    sizes: Vec<u64>,
}

impl Groups {
    /// The groups of `profile`'s processes, or `None` when they are at most [`MANY`].
    pub(super) fn of(profile: &Profile) -> Option<Groups> {
        if profile.processes.len() <= MANY {
            return None;
        }
        let labels = profile.labels();
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut keys: Vec<&str> = Vec::new();
        let mut sizes: Vec<u64> = Vec::new();
        let mut of = HashMap::with_capacity(profile.processes.len());
        let mut first: Vec<Pid> = Vec::new();
        for p in &profile.processes {
            let key = p.initial_call.as_str();
            let i = *index.entry(key).or_insert_with(|| {
                keys.push(key);
                sizes.push(0);
                first.push(p.pid);
                keys.len() - 1
            });
            sizes[i] += 1;
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

    /// How many processes group `i` has.
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
