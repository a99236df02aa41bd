//! The speedscope file of a sampled profile (the mapping: the parent module's docs,
//! *Sampled profiles*).

use std::collections::{BTreeMap, HashMap};

use super::{File, Frame, SampledProfile};
use crate::Profile;
use crate::export::grouped;
use crate::export::sampled::{self, Dropped, Root};
use crate::samples::{SampleFrame, WaitState};

/// `profile`'s samples as a speedscope file.
pub(super) fn file(profile: &Profile) -> File {
    let set = &profile.samples;
    let kinds = sampled::samplers(set);
    let labels = profile.labels();
    let table = sampled::stack_frames(set);
    let mut frames = Frames::new(profile);
    // Samples in time order: by run (a merge's runs have clocks of their own), then time.
    let mut order: Vec<usize> = (0..set.samples.len()).collect();
    order.sort_by_key(|&i| {
        let s = &set.samples[i];
        let run = set.sources.get(s.source as usize).map_or(0, |src| src.run);
        (run, s.time_ns)
    });
    // Past `grouped::MANY` processes, a profile per group of processes (by initial call).
    let groups = grouped::Groups::of(profile);
    let lane_of = |root: Root| match (root, &groups) {
        (Root::Process(pid), Some(groups)) => {
            groups.group(pid).map_or(Lane::Root(root), Lane::Group)
        }
        _ => Lane::Root(root),
    };
    let lane_name = |lane: Lane| match (lane, &groups) {
        (Lane::Group(g), Some(groups)) => groups.name(g).to_owned(),
        (Lane::Root(root), _) => root.label(&labels),
        (Lane::Group(_), None) => String::new(),
    };
    let mut profiles = Vec::new();
    for &kind in &kinds {
        let dropped = Dropped::of(set, Some(kind)).note();
        let prefix = if kinds.len() > 1 {
            format!("{kind}: ")
        } else {
            String::new()
        };
        let unit = sampled::unit_of(kind).0;
        let mut all = Run::new(
            unit,
            format!(
                "{prefix}all processes{}",
                dropped
                    .as_ref()
                    .map_or(String::new(), |d| format!(" ({d})"))
            ),
        );
        let mut per_root: BTreeMap<Lane, Run> = BTreeMap::new();
        for &i in &order {
            let s = &set.samples[i];
            if sampled::sampler(set, s) != kind {
                continue;
            }
            let lane = lane_of(Root::of(s));
            let stack = sampled::frames_of(&table, s.stack);
            let state = sampled::state_of(set, s);
            let ns = sampled::weight_ns(set, s);
            let root_frame = frames.named(&lane_name(lane));
            all.add((Some(lane), s.stack, state), ns, || {
                let mut path = vec![root_frame];
                frames.path(stack, state, &mut path);
                path
            });
            per_root
                .entry(lane)
                .or_insert_with(|| Run::new(unit, format!("{prefix}{}", lane_name(lane))))
                .add((None, s.stack, state), ns, || {
                    let mut path = Vec::new();
                    frames.path(stack, state, &mut path);
                    path
                });
        }
        profiles.push(all.finish());
        profiles.extend(per_root.into_values().map(Run::finish));
    }
    let mut name = format!("tprof {}", sampled::describe(set));
    if let Some(run) = profile.meta.runs.first().filter(|r| !r.program.is_empty()) {
        name.push_str(" of ");
        name.push_str(&run.program);
    }
    if let Some(dropped) = sampled::dropped_note(set) {
        name.push_str("; ");
        name.push_str(&dropped);
    }
    if let Some(groups) = &groups {
        name.push_str(&grouped::note(profile.processes.len(), groups));
    }
    let truth = set.cpu_truth();
    for warning in truth.iter().flat_map(|t| &t.warnings) {
        name.push_str("; Warning: ");
        name.push_str(warning);
    }
    let mut file = File::new(frames.list, profiles, name);
    file.tprof = truth.map(|cpu| super::Metadata { cpu });
    file
}

/// What a profile of one root is of: a root (a process, or CPU time outside any process), or
/// past [`grouped::MANY`] processes, a group of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Root(Root),
    Group(usize),
}

/// What consecutive samples must share to be one: process or group (in the profile of every
/// process), stack and state.
type Key = (Option<Lane>, Option<u32>, Option<WaitState>);

/// One profile being built: its samples, consecutive ones of the same [`Key`] merged.
struct Run {
    profile: SampledProfile,
    last: Option<Key>,
    /// The weight of the last sample, not rounded yet.
    pending: f64,
}

impl Run {
    /// An empty profile named `name`, its values in `unit`.
    fn new(unit: &'static str, name: String) -> Run {
        Run {
            profile: SampledProfile {
                kind: "sampled",
                name,
                unit,
                start_value: 0,
                end_value: 0,
                samples: Vec::new(),
                weights: Vec::new(),
            },
            last: None,
            pending: 0.0,
        }
    }

    /// Adds a sample of `key` weighing `ns`, whose frames `path` gives when it starts a new
    /// sample.
    fn add(&mut self, key: Key, ns: f64, path: impl FnOnce() -> Vec<usize>) {
        if self.last != Some(key) {
            self.flush();
            self.profile.samples.push(path());
            self.last = Some(key);
        }
        self.pending += ns;
    }

    /// Writes the last sample's weight.
    fn flush(&mut self) {
        if self.last.is_some() {
            let weight = self.pending.round() as u64;
            self.profile.weights.push(weight);
            self.profile.end_value = self.profile.end_value.saturating_add(weight);
        }
        self.pending = 0.0;
    }

    fn finish(mut self) -> SampledProfile {
        self.flush();
        self.profile
    }
}

/// The shared frames being made: each sample frame once, each made-up frame (a process, a
/// state) once.
struct Frames<'a> {
    profile: &'a Profile,
    list: Vec<Frame>,
    of_frame: Vec<Option<usize>>,
    /// [`SampleSet::function_frames`](crate::samples::SampleSet::function_frames): a traced
    /// function is one frame.
    function_frames: Vec<u32>,
    named: HashMap<String, usize>,
}

impl<'a> Frames<'a> {
    fn new(profile: &'a Profile) -> Frames<'a> {
        Frames {
            profile,
            list: Vec::new(),
            of_frame: vec![None; profile.samples.frames.len()],
            function_frames: profile.samples.function_frames(),
            named: HashMap::new(),
        }
    }

    /// Pushes the indices of `stack`'s frames, and of `state`'s frame, onto `path`.
    fn path(&mut self, stack: &[u32], state: Option<WaitState>, path: &mut Vec<usize>) {
        path.extend(stack.iter().map(|&f| self.frame(f)));
        if let Some(state) = state {
            path.push(self.named(&sampled::state_frame(state)));
        }
    }

    /// The index of sample frame `frame`.
    fn frame(&mut self, frame: u32) -> usize {
        let frame = self
            .function_frames
            .get(frame as usize)
            .copied()
            .unwrap_or(frame);
        if let Some(Some(i)) = self.of_frame.get(frame as usize) {
            return *i;
        }
        let profile = self.profile;
        let (file, line) = match profile.samples.frames.get(frame as usize) {
            Some(SampleFrame {
                function: Some(_), ..
            }) => match profile
                .samples
                .frame_location(&profile.function_table, frame)
            {
                Some((file, line)) => (Some(file), Some(line)),
                None => (None, None),
            },
            Some(native) => (native.file.clone(), native.line),
            None => (None, None),
        };
        self.list.push(Frame {
            name: sampled::frame_name(profile, frame, false),
            file: file.filter(|f| !f.is_empty()),
            line: line.filter(|&l| l > 0),
        });
        let i = self.list.len() - 1;
        if let Some(slot) = self.of_frame.get_mut(frame as usize) {
            *slot = Some(i);
        }
        i
    }

    /// The index of a made-up frame named `name`.
    fn named(&mut self, name: &str) -> usize {
        if let Some(&i) = self.named.get(name) {
            return i;
        }
        self.list.push(Frame {
            name: name.to_owned(),
            file: None,
            line: None,
        });
        self.named.insert(name.to_owned(), self.list.len() - 1);
        self.list.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_samples_of_one_key_are_one() {
        let mut run = Run::new("nanoseconds", "p".to_owned());
        let a = (None, Some(1), None);
        let b = (None, Some(2), None);
        run.add(a, 1.4, || vec![0]);
        run.add(a, 1.4, || unreachable!("merged"));
        run.add(b, 2.0, || vec![1]);
        run.add(a, 0.4, || vec![0]);
        let p = run.finish();
        assert_eq!(p.samples, [vec![0], vec![1], vec![0]]);
        assert_eq!(p.weights, [3, 2, 0]);
        assert_eq!(p.end_value, 5);
    }
}
