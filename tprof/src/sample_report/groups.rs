//! A report's samples: those of one sampler (a *section*), split into groups (Julia's
//! `groupby`), each with its weight per stack, its total and its utilization, and the words
//! that introduce it. Linear in the samples (a hash insert each), plus sorting the groups.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use runtime::Pid;

use super::options::GroupBy;
use crate::profile::ProcessRecord;
use crate::samples::{SampleRecord, SampleSet, SamplerKind, WaitState};

/// The samples of one sampler.
pub(super) struct Section<'a> {
    /// The sampler.
    pub(super) kind: SamplerKind,
    /// Its sources (indices into [`SampleSet::sources`]).
    pub(super) sources: Vec<u32>,
    /// Its samples, in the set's order.
    pub(super) samples: Vec<&'a SampleRecord>,
}

/// What a group is keyed by, at one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Part {
    /// A process; `None` for CPU time outside any process.
    Process(Option<Pid>),
    /// A thread (an index into [`SampleSet::threads`]); `None` for samples of no thread.
    Thread(Option<u32>),
}

/// The samples of one group.
#[derive(Default)]
pub(super) struct Group {
    /// Its key: none, one part, or two nested.
    pub(super) parts: Vec<Part>,
    /// Weight per stack (`None`: the empty stack).
    pub(super) stacks: HashMap<Option<u32>, f64>,
    /// Its total weight (Julia's "total snapshots").
    pub(super) total: f64,
    /// Allocation samples: the allocations they stand for.
    pub(super) objects: f64,
    /// Wall samples: weight of the running ones.
    running: f64,
    /// CPU samples: the CPU time they stand for, in nanoseconds.
    cpu_ns: f64,
    /// The (source, thread) pairs of its samples.
    threads: HashSet<(u32, Option<u32>)>,
}

impl<'a> Section<'a> {
    /// The sections of `set`: one per sampler it has sources of (CPU first), or only
    /// `only`'s.
    pub(super) fn of(set: &'a SampleSet, only: Option<SamplerKind>) -> Vec<Section<'a>> {
        [SamplerKind::Cpu, SamplerKind::Wall, SamplerKind::Alloc]
            .into_iter()
            .filter(|k| only.is_none_or(|o| o == *k))
            .filter_map(|kind| {
                let sources: Vec<u32> = set
                    .sources
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.sampler == kind)
                    .map(|(i, _)| crate::functions::index32(i))
                    .collect();
                if sources.is_empty() {
                    return None;
                }
                let mine: HashSet<u32> = sources.iter().copied().collect();
                let samples = set
                    .samples
                    .iter()
                    .filter(|s| mine.contains(&s.source))
                    .collect();
                Some(Section {
                    kind,
                    sources,
                    samples,
                })
            })
            .collect()
    }

    /// Its samples in groups, as `groupby` splits them, in print order: processes by pid
    /// (outside processes last), threads by OS thread id.
    pub(super) fn groups(&self, set: &SampleSet, groupby: GroupBy) -> Vec<Group> {
        let parts = |s: &SampleRecord| -> [Option<Part>; 2] {
            let process = Some(Part::Process(s.pid));
            let thread = Some(Part::Thread(s.thread));
            match groupby {
                GroupBy::None => [None, None],
                GroupBy::Process => [process, None],
                GroupBy::Thread => [thread, None],
                GroupBy::ProcessThread => [process, thread],
                GroupBy::ThreadProcess => [thread, process],
            }
        };
        let mut index: HashMap<[Option<Part>; 2], usize> = HashMap::new();
        let mut groups: Vec<Group> = Vec::new();
        for s in &self.samples {
            let key = parts(s);
            let at = *index.entry(key).or_insert_with(|| {
                groups.push(Group {
                    parts: key.into_iter().flatten().collect(),
                    ..Group::default()
                });
                groups.len() - 1
            });
            let g = &mut groups[at];
            *g.stacks.entry(s.stack).or_default() += s.weight;
            g.total += s.weight;
            g.objects += s.objects();
            if s.state == Some(WaitState::Running) {
                g.running += s.weight;
            }
            let period = set
                .sources
                .get(s.source as usize)
                .map_or(0.0, |src| src.period_ns());
            g.cpu_ns += s.weight * period;
            g.threads.insert((s.source, s.thread));
        }
        groups.sort_by(|a, b| {
            a.parts
                .iter()
                .zip(&b.parts)
                .map(|(x, y)| x.cmp_in(y, set))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        });
        groups
    }
}

impl Group {
    /// Its utilization, in percent (Julia's: the share of its snapshots not sleeping). Wall
    /// samples: the share of its weight that was running. CPU samples: the CPU time its
    /// samples stand for over the time it could have run — each source's duration, once for
    /// a group of one process (it runs on one thread at a time), else once per thread its
    /// samples came from. 0 when there is no time to divide by.
    pub(super) fn utilization(&self, set: &SampleSet, kind: SamplerKind) -> f64 {
        let share = |part: f64, whole: f64| {
            if whole > 0.0 {
                part * 100.0 / whole
            } else {
                0.0
            }
        };
        match kind {
            SamplerKind::Wall => share(self.running, self.total),
            // Allocations take no time: their totals say bytes and allocations instead.
            SamplerKind::Alloc => 0.0,
            SamplerKind::Cpu => {
                let one_process = self
                    .parts
                    .iter()
                    .any(|p| matches!(p, Part::Process(Some(_))));
                let mut threads_per_source: HashMap<u32, f64> = HashMap::new();
                for (source, _) in &self.threads {
                    *threads_per_source.entry(*source).or_default() += 1.0;
                }
                let available: f64 = threads_per_source
                    .iter()
                    .map(|(source, threads)| {
                        let duration = set
                            .sources
                            .get(*source as usize)
                            .map_or(0.0, |s| s.duration_ns as f64);
                        duration * if one_process { 1.0 } else { *threads }
                    })
                    .sum();
                share(self.cpu_ns, available)
            }
        }
    }
}

impl Part {
    /// Print order: processes by pid, outside processes last; threads by OS thread id,
    /// samples of no thread last.
    fn cmp_in(&self, other: &Part, set: &SampleSet) -> Ordering {
        let tid = |t: &Option<u32>| {
            t.map(|i| {
                let tid = set
                    .threads
                    .get(i as usize)
                    .map_or(i64::MAX, |t| i64::from(t.tid));
                (tid, i)
            })
        };
        match (self, other) {
            (Part::Process(a), Part::Process(b)) => {
                a.is_none().cmp(&b.is_none()).then_with(|| a.cmp(b))
            }
            (Part::Thread(a), Part::Thread(b)) => a
                .is_none()
                .cmp(&b.is_none())
                .then_with(|| tid(a).cmp(&tid(b))),
            (Part::Process(_), Part::Thread(_)) => Ordering::Less,
            (Part::Thread(_), Part::Process(_)) => Ordering::Greater,
        }
    }

    /// How it is named before its totals: `Process <0.5.0>`, with its registered name after
    /// it (`Process <0.5.0> (worker)`), `Outside processes`; `Thread 1234`, with the thread's
    /// name after it, `No thread`.
    pub(super) fn label(&self, set: &SampleSet, records: &HashMap<Pid, &ProcessRecord>) -> String {
        match self {
            Part::Process(Some(pid)) => match records.get(pid).and_then(|r| r.name.as_deref()) {
                Some(name) => format!("Process {pid} ({name})"),
                None => format!("Process {pid}"),
            },
            Part::Process(None) => "Outside processes".to_owned(),
            Part::Thread(Some(i)) => match set.threads.get(*i as usize) {
                Some(t) => match &t.name {
                    Some(name) => format!("Thread {} ({name})", t.tid),
                    None => format!("Thread {}", t.tid),
                },
                None => format!("Thread #{i}"),
            },
            Part::Thread(None) => "No thread".to_owned(),
        }
    }
}
