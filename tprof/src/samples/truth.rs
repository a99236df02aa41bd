//! What a profile's CPU samples could see ([`CpuTruth`]): per sampled thread its CPU time
//! against the CPU its samples stand for and its distinct samples, and per profile the share
//! captured, the distinct samples per CPU-second beside the rate asked, the mechanism, and
//! the warnings when they fall short.
//!
//! The figures are the runtime's ([`CpuCoverage`], one per CPU sample session, kept in
//! [`SampleSource::cpu`]); so are the arithmetic and the words
//! ([`CpuCoverage::summary`], [`CpuCoverage::warnings`]): this module only gathers a
//! profile's sources and names their threads, so that every report and export says the same.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use runtime::sample::{CpuCoverage, CpuSource};
use serde::Serialize;

use super::{SampleSet, SampleSource, SamplerKind};

/// The truth of a profile's CPU samples (or of some of its sources): what every report prints
/// in its header and every export carries.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuTruth {
    /// The figures: one per rate asked (a merge of profiles sampled at different rates has
    /// several), each the sum of the sources sampled at that rate.
    pub figures: Vec<CpuFigures>,
    /// One line per entry of [`figures`](Self::figures) ([`CpuCoverage::summary`]):
    /// `CPU samples by perf events (each thread's task clock): 97.0% of the sampled threads'
    /// 505.0 ms of CPU captured, 980 distinct samples per CPU-second at 999 Hz asked`.
    pub summary: Vec<String>,
    /// What a reader must know before trusting the profile ([`CpuCoverage::warnings`]), each
    /// with its likely cause; empty when the samples saw the CPU time.
    pub warnings: Vec<String>,
}

/// The figures of CPU samples taken at one rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuFigures {
    /// The mechanism that took the samples (`perf_events`, `timers`).
    pub mechanism: CpuSource,
    /// Why the samples were taken on the fallback, when they were.
    pub fallback: Option<String>,
    /// The rate asked, in Hz: never the rate taken.
    pub hz_asked: u32,
    /// The rate taken: distinct samples per CPU-second of the sampled threads.
    pub samples_per_cpu_second: Option<f64>,
    /// The CPU time the samples stand for over the sampled threads' CPU time.
    pub captured: Option<f64>,
    /// The sampled threads' CPU time, in nanoseconds.
    pub cpu_ns: u64,
    /// The CPU time the samples stand for (kept and dropped), in nanoseconds.
    pub sampled_ns: u64,
    /// The distinct samples taken (kept and dropped).
    pub samples: u64,
    /// The threads' samples of work the profile does not sample (other nodes' processes,
    /// unsampled processes, another node's thread outside processes), out of the profile and
    /// of these figures ([`CpuCoverage::elsewhere`]).
    pub elsewhere: u64,
    /// The CPU time they stand for, in nanoseconds.
    pub elsewhere_ns: u64,
    /// The overflows the threads' perf events lost, each re-armed by the drain.
    pub stalls: u64,
    /// The CPU time the stalls left in no sample, in nanoseconds.
    pub stalled_ns: u64,
    /// Each sampled thread's figures.
    pub threads: Vec<ThreadFigures>,
}

/// One sampled thread's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadFigures {
    /// The thread, as [`SampleSet::thread_name`] names it.
    pub thread: String,
    /// Its index in [`SampleSet::threads`].
    pub index: u32,
    /// Its CPU time over the session, in nanoseconds.
    pub cpu_ns: u64,
    /// The CPU time its samples stand for, in nanoseconds.
    pub sampled_ns: u64,
    /// Its distinct samples.
    pub samples: u64,
    /// Its samples of work the profile does not sample, out of its figures.
    pub elsewhere: u64,
    /// The CPU time they stand for, in nanoseconds.
    pub elsewhere_ns: u64,
    /// The overflows its perf event lost, each re-armed by the drain.
    pub stalls: u64,
    /// The CPU time they left in no sample, in nanoseconds.
    pub stalled_ns: u64,
    /// `sampled_ns / cpu_ns`, when it used CPU time.
    pub captured: Option<f64>,
    /// Whether it fell back to a per-thread timer alone.
    pub fallback: bool,
    /// Whether it was never armed.
    pub unarmed: bool,
}

impl SampleSet {
    /// How reports name thread `index` (of [`threads`](Self::threads)): `name/tid`, the tid
    /// alone, or the name alone for a row without a tid (the runtime's `(exited threads)`).
    pub fn thread_name(&self, index: u32) -> String {
        match self.threads.get(index as usize) {
            Some(t) => match (&t.name, t.tid) {
                (Some(name), 0) => name.clone(),
                (Some(name), tid) => format!("{name}/{tid}"),
                (None, tid) => tid.to_string(),
            },
            None => format!("#{index}"),
        }
    }

    /// The truth of every CPU source that carries its coverage ([`SampleSource::cpu`]);
    /// `None` when none does (a profile of another sampler, or one read from a file written
    /// before the coverage was kept).
    pub fn cpu_truth(&self) -> Option<CpuTruth> {
        let all: Vec<u32> = (0..self.sources.len() as u32).collect();
        self.cpu_truth_of(&all)
    }

    /// The truth of `sources` (indices into [`sources`](Self::sources)) that carry their
    /// coverage: those of one rate asked merged ([`CpuCoverage::merge`]; their thread
    /// indices are the set's already), each rate a line of its own.
    pub fn cpu_truth_of(&self, sources: &[u32]) -> Option<CpuTruth> {
        let mut merged: Vec<CpuCoverage> = Vec::new();
        let covered = sources
            .iter()
            .filter_map(|&i| self.sources.get(i as usize))
            .filter(|s| s.sampler == SamplerKind::Cpu)
            .filter_map(|s| s.cpu.as_ref());
        for cpu in covered {
            match merged.iter_mut().find(|m| m.hz == cpu.hz) {
                Some(m) => m.merge(cpu, 0),
                None => merged.push(cpu.clone()),
            }
        }
        if merged.is_empty() {
            return None;
        }
        let name = |i: u32| self.thread_name(i);
        Some(CpuTruth {
            summary: merged.iter().map(CpuCoverage::summary).collect(),
            warnings: merged.iter().flat_map(|c| c.warnings(&name)).collect(),
            figures: merged.iter().map(|c| self.figures(c)).collect(),
        })
    }

    fn figures(&self, c: &CpuCoverage) -> CpuFigures {
        let (elsewhere, elsewhere_ns) = c.elsewhere();
        let (stalls, stalled_ns) = c.stalls();
        CpuFigures {
            mechanism: c.source,
            fallback: c.fallback.clone(),
            hz_asked: c.hz,
            samples_per_cpu_second: c.samples_per_cpu_second(),
            captured: c.captured(),
            cpu_ns: c.cpu_ns(),
            sampled_ns: c.sampled_ns(),
            samples: c.samples(),
            elsewhere,
            elsewhere_ns,
            stalls,
            stalled_ns,
            threads: c
                .threads
                .iter()
                .map(|(i, t)| ThreadFigures {
                    thread: self.thread_name(*i),
                    index: *i,
                    cpu_ns: t.cpu_ns,
                    sampled_ns: t.sampled_ns,
                    samples: t.samples,
                    elsewhere: t.elsewhere,
                    elsewhere_ns: t.elsewhere_ns,
                    stalls: t.stalls,
                    stalled_ns: t.stalled_ns,
                    captured: t.captured(),
                    fallback: t.fallback,
                    unarmed: t.unarmed,
                })
                .collect(),
        }
    }
}

impl SampleSource {
    /// The rate taken, as titles print it beside the rate asked: the distinct samples per
    /// CPU-second of a CPU source that carries its coverage.
    pub fn samples_per_cpu_second(&self) -> Option<f64> {
        self.cpu
            .as_ref()
            .and_then(CpuCoverage::samples_per_cpu_second)
    }
}

impl CpuTruth {
    /// Its summary lines, then each warning as `Warning: ...`: the lines a report's header
    /// prints.
    pub fn lines(&self) -> Vec<String> {
        self.summary
            .iter()
            .cloned()
            .chain(self.warnings.iter().map(|w| format!("Warning: {w}")))
            .collect()
    }
}

/// The profiles whose warnings were told on stderr, by fingerprint.
static TOLD: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

/// Tells `set`'s CPU warnings on stderr, once per profile in this process (however many
/// reports and exports are made of it): `tprof: warning: ...`, one line each. Returns whether
/// it told them now.
pub(crate) fn warn_once(set: &SampleSet) -> bool {
    let Some(truth) = set.cpu_truth() else {
        return false;
    };
    if truth.warnings.is_empty() {
        return false;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for source in &set.sources {
        (source.run, source.node, source.duration_ns).hash(&mut hasher);
        format!("{:?}", source.cpu).hash(&mut hasher);
    }
    let fingerprint = hasher.finish();
    let mut told = TOLD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !told.get_or_insert_with(HashSet::new).insert(fingerprint) {
        return false;
    }
    drop(told);
    for w in &truth.warnings {
        eprintln!("tprof: warning: {w}");
    }
    true
}

#[cfg(test)]
mod tests {
    use runtime::sample::ThreadCoverage;

    use super::*;
    use crate::samples::SampleThread;

    fn source(hz: u32, threads: Vec<(u32, u64, u64, u64)>) -> SampleSource {
        let threads = threads
            .into_iter()
            .map(|(i, cpu_ms, sampled_ms, samples)| {
                let t = ThreadCoverage::new(cpu_ms * 1_000_000, sampled_ms * 1_000_000, samples);
                (i, t)
            })
            .collect();
        let cpu = CpuCoverage::new(
            CpuSource::Timers,
            Some("asked for by the options".into()),
            hz,
            threads,
        );
        SampleSource {
            run: 0,
            node: 1,
            sampler: SamplerKind::Cpu,
            hz,
            alloc_rate: None,
            dropped: 0.0,
            lost_frees: 0,
            before_sampling: 0,
            native_walked: false,
            duration_ns: 1_000_000_000,
            capacity: 100,
            cpu: Some(cpu),
        }
    }

    fn set(sources: Vec<SampleSource>) -> SampleSet {
        SampleSet {
            sources,
            threads: vec![
                SampleThread {
                    source: 0,
                    tid: 11,
                    name: Some("node-worker".into()),
                },
                SampleThread {
                    source: 0,
                    tid: 0,
                    name: Some("(exited threads)".into()),
                },
                SampleThread {
                    source: 1,
                    tid: 12,
                    name: None,
                },
            ],
            ..SampleSet::default()
        }
    }

    #[test]
    fn sources_of_one_rate_are_one_line_and_threads_are_named() {
        let set = set(vec![
            source(999, vec![(0, 400, 100, 25), (1, 5, 0, 0)]),
            source(999, vec![(2, 100, 0, 0)]),
        ]);
        let truth = set.cpu_truth().unwrap();
        assert_eq!(truth.summary.len(), 1, "{truth:?}");
        assert_eq!(truth.figures[0].cpu_ns, 505_000_000);
        assert_eq!(truth.figures[0].samples, 25);
        let names: Vec<&str> = truth.figures[0]
            .threads
            .iter()
            .map(|t| t.thread.as_str())
            .collect();
        assert_eq!(names, ["node-worker/11", "(exited threads)", "12"]);
        assert!(
            truth.warnings.iter().any(|w| w.contains("thread 12 used")),
            "{:?}",
            truth.warnings
        );
        assert!(
            truth
                .lines()
                .iter()
                .skip(1)
                .all(|l| l.starts_with("Warning: "))
        );
    }

    #[test]
    fn sources_of_two_rates_are_two_lines_and_none_without_coverage() {
        let set = set(vec![
            source(999, vec![(0, 10, 10, 10)]),
            source(99, vec![(2, 10, 10, 1)]),
        ]);
        let truth = set.cpu_truth().unwrap();
        assert_eq!(truth.summary.len(), 2);
        assert!(truth.summary[1].contains("at 99 Hz asked"), "{truth:?}");
        let mut plain = set.clone();
        for s in &mut plain.sources {
            s.cpu = None;
        }
        assert_eq!(plain.cpu_truth(), None);
        assert!(!warn_once(&plain));
    }

    #[test]
    fn warnings_are_told_once_per_profile() {
        let set = set(vec![source(999, vec![(0, 400, 10, 3)])]);
        assert!(warn_once(&set));
        assert!(!warn_once(&set));
        assert!(!warn_once(&set.clone()));
    }
}
