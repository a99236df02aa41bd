//! What every export of a sampled profile ([`Profile::samples`]) shares: which profiles are
//! exported as samples, the root each sample goes under, what a sample weighs, its stack's
//! frames and their names, and how dropped samples are told.
//!
//! A profile that holds samples (sample mode: [`SampleSet::is_empty`] is false) is exported
//! as its samples by every stack-shaped and graphical export (speedscope, pprof, folded, svg,
//! chrome, html); the traced functions' call counts a sample session also keeps stay in the
//! `json` and `pretty` exports.
//!
//! - **Weight.** Every sample weighs **nanoseconds**: its weight (timer periods for CPU
//!   samples, process-ticks for wall samples) times its source's period (`1e9 / hz`). For a
//!   CPU sample that is CPU time; for a wall sample it is wall time summed over processes (a
//!   process drawn with probability `k / n` stands for `n / k` processes for one tick), so that
//!   samples of sources of different rates add up. Each export says which. An allocation
//!   sample weighs **bytes** instead: those it stands for (its weight); exports say so
//!   ([`unit_of`]), and pprof writes Go's heap profile.
//! - **Roots.** A sample is shown under its process (its label, [`Profile::labels`]), or under
//!   one root named [`OUTSIDE`] for CPU time outside any process (`pid` `None`). Processes
//!   come in pid order, then [`OUTSIDE`].
//! - **Samplers.** A profile whose samples come from several samplers (a merge of CPU, wall
//!   and allocation samples) keeps them apart where the format can (a sample type each in
//!   pprof, profiles of their own in speedscope, threads of their own in chrome); folded,
//!   svg and html, which draw every sample against one total, refuse it ([`one_sampler`]),
//!   naming `tprof report --sampler`, which exports one sampler at a time.
//! - **Dropped.** [`SampleSet::dropped`] is reported by every export, as the format allows
//!   ([`dropped_note`]), in its sampler's unit: the time dropped CPU and wall samples stood
//!   for, the bytes dropped allocation samples stood for (what the allocator's rings
//!   counted), never one as the other.
//!
//! Everything here is linear in the samples (plus n log n to sort) and in the stacks' frames.

use std::collections::{BTreeMap, HashMap};

use runtime::Pid;

use super::weight;
use crate::samples::{SampleFrame, SampleRecord, SampleSet, SamplerKind, WaitState};
use crate::{Group, Profile};

/// The root of the samples taken outside any process.
pub(super) const OUTSIDE: &str = "(outside processes)";

/// Whether `profile` is exported as its samples.
pub(super) fn is_sampled(profile: &Profile) -> bool {
    !profile.samples.is_empty()
}

/// What a sample is shown under: its process, or [`OUTSIDE`]. Processes order first, by
/// pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Root {
    /// A process.
    Process(Pid),
    /// CPU time outside any process.
    Outside,
}

impl Root {
    /// The root of `sample`.
    pub(super) fn of(sample: &SampleRecord) -> Root {
        sample.pid.map_or(Root::Outside, Root::Process)
    }

    /// Its name: the process's label, or [`OUTSIDE`].
    pub(super) fn label(self, labels: &crate::profile::Labels) -> String {
        match self {
            Root::Process(pid) => labels.get(Group::Process(pid)).into_owned(),
            Root::Outside => OUTSIDE.to_owned(),
        }
    }
}

/// The sampler of `sample`'s source (CPU for a source the set does not have).
pub(super) fn sampler(set: &SampleSet, sample: &SampleRecord) -> SamplerKind {
    set.sources
        .get(sample.source as usize)
        .map_or(SamplerKind::Cpu, |s| s.sampler)
}

/// The nanoseconds `sample` stands for: its weight times its source's period; for an
/// allocation sample, the bytes it stands for (its weight).
pub(super) fn weight_ns(set: &SampleSet, sample: &SampleRecord) -> f64 {
    let period = set.sources.get(sample.source as usize).map_or(0.0, |s| {
        if s.sampler == SamplerKind::Alloc {
            1.0
        } else {
            s.period_ns()
        }
    });
    sample.weight * period
}

/// The samplers `set`'s sources use, CPU first.
pub(super) fn samplers(set: &SampleSet) -> Vec<SamplerKind> {
    let mut kinds: Vec<SamplerKind> = Vec::new();
    for kind in [SamplerKind::Cpu, SamplerKind::Wall, SamplerKind::Alloc] {
        if set.sources.iter().any(|s| s.sampler == kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// What `kind`'s samples weigh, as exports describe it: `CPU time` or `wall time (summed over
/// processes)`.
pub(super) fn measure(kind: SamplerKind) -> &'static str {
    match kind {
        SamplerKind::Cpu => "CPU time",
        SamplerKind::Wall => "wall time, summed over processes",
        SamplerKind::Alloc => "allocations (estimated)",
    }
}

/// The unit `kind`'s samples weigh in every export: nanoseconds, or bytes for allocation
/// samples; (long, short).
pub(super) fn unit_of(kind: SamplerKind) -> (&'static str, &'static str) {
    match kind {
        SamplerKind::Alloc => ("bytes", "bytes"),
        SamplerKind::Cpu | SamplerKind::Wall => ("nanoseconds", "ns"),
    }
}

/// The unit of a profile whose samplers are `kinds` (their samples side by side, as svg and
/// html draw them): bytes when they are all allocation samples, else nanoseconds; (long,
/// short).
pub(super) fn unit_of_all(kinds: &[SamplerKind]) -> (&'static str, &'static str) {
    if !kinds.is_empty() && kinds.iter().all(|k| *k == SamplerKind::Alloc) {
        unit_of(SamplerKind::Alloc)
    } else {
        unit_of(SamplerKind::Cpu)
    }
}

/// Refuses `format` (folded, svg or html: each draws every sample against one total) for a
/// profile whose samples come from several samplers (a merge of CPU, wall and allocation
/// samples): their values are not of one measure (CPU time, wall time summed over processes,
/// bytes), and one total of them means nothing. The message names `tprof report --sampler`,
/// which exports one sampler at a time.
pub(super) fn one_sampler(
    profile: &Profile,
    format: super::Format,
) -> Result<(), super::ExportError> {
    let kinds = samplers(&profile.samples);
    if kinds.len() < 2 {
        return Ok(());
    }
    let what: Vec<String> = kinds
        .iter()
        .map(|k| format!("{k} ({} of {})", unit_of(*k).0, measure(*k)))
        .collect();
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    Err(super::ExportError::Unsupported {
        format,
        reason: format!(
            "the profile holds samples of {} samplers, {}, and a {format} export draws them \
             against one total; export one sampler at a time with `tprof report --sampler \
             {}` (or {}), or use speedscope, which keeps one profile per sampler",
            kinds.len(),
            what.join(", "),
            names[0],
            names[1..].join(", "),
        ),
    })
}

/// The samples of one sampler, root, stack and state, summed.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Summed {
    /// The sampler.
    pub(super) sampler: SamplerKind,
    /// The root.
    pub(super) root: Root,
    /// The stack (an index into [`SampleSet::stacks`]); `None` for an empty stack.
    pub(super) stack: Option<u32>,
    /// The processes' state (wall samples).
    pub(super) state: Option<WaitState>,
    /// How many samples.
    pub(super) samples: u64,
    /// Their weight, in nanoseconds ([`weight_ns`]).
    pub(super) ns: f64,
}

/// `set`'s samples summed by sampler, root, stack and state, in that order (stacks in index
/// order).
pub(super) fn summed(set: &SampleSet) -> Vec<Summed> {
    type Key = (SamplerKind, Root, Option<u32>, Option<WaitState>);
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut out: Vec<Summed> = Vec::new();
    for s in &set.samples {
        let sampler = sampler(set, s);
        let root = Root::of(s);
        let state = state_of(set, s);
        let i = *index
            .entry((sampler, root, s.stack, state))
            .or_insert_with(|| {
                out.push(Summed {
                    sampler,
                    root,
                    stack: s.stack,
                    state,
                    samples: 0,
                    ns: 0.0,
                });
                out.len() - 1
            });
        out[i].samples += 1;
        out[i].ns += weight_ns(set, s);
    }
    out.sort_by_key(|s| (s.sampler as u8, s.root, s.stack, s.state));
    out
}

/// The state of a wall sample (`None` for a CPU sample, whatever it holds).
pub(super) fn state_of(set: &SampleSet, sample: &SampleRecord) -> Option<WaitState> {
    match sampler(set, sample) {
        SamplerKind::Wall => sample.state,
        SamplerKind::Cpu | SamplerKind::Alloc => None,
    }
}

/// The frame a wall sample's state is shown as, innermost, in the exports that draw stacks
/// (folded, svg, speedscope, chrome, html): `[receive]`, `[running]`.
pub(super) fn state_frame(state: WaitState) -> String {
    format!("[{}]", state.name())
}

/// The frame a sample with an empty stack is shown as where a frame is needed (pprof, and
/// chrome slices).
pub(super) const NO_STACK: &str = "(no stack)";

/// The frame the dropped samples are shown as in folded stacks and flame graphs.
pub(super) const DROPPED_FRAME: &str = "(dropped samples)";

/// The folded paths of `profile`'s samples, in nanoseconds: per sampler (its name as a first
/// frame when the profile has several), root and path (its frames, then a wall sample's state
/// as [`state_frame`]), each frame's text made by `text` from its name ([`frame_name`], with
/// `mfa`), and joined by `;`. Paths of the same text are one; their nanoseconds are summed and
/// rounded, and a path that rounds to 0 is left out. Each sampler's dropped samples follow
/// its roots as one path, [`DROPPED_FRAME`], of the nanoseconds they stood for. In sampler,
/// root, then text order.
pub(super) fn folded_paths(
    profile: &Profile,
    mfa: bool,
    text: impl Fn(&str) -> String,
) -> Vec<(String, u64)> {
    let set = &profile.samples;
    let kinds = samplers(set);
    let prefix = |kind: SamplerKind| {
        if kinds.len() > 1 {
            format!("{};", text(kind.name()))
        } else {
            String::new()
        }
    };
    let labels = profile.labels();
    let table = stack_frames(set);
    let mut names: Vec<Option<String>> = vec![None; set.frames.len()];
    let mut roots: HashMap<Root, String> = HashMap::new();
    // (sampler, after the roots, root, text) -> nanoseconds
    let mut paths: BTreeMap<(bool, bool, Root, String), f64> = BTreeMap::new();
    for s in summed(set) {
        let mut line = prefix(s.sampler);
        line.push_str(
            roots
                .entry(s.root)
                .or_insert_with(|| text(&s.root.label(&labels))),
        );
        for &frame in frames_of(&table, s.stack) {
            line.push(';');
            match names.get_mut(frame as usize) {
                Some(name) => line
                    .push_str(name.get_or_insert_with(|| text(&frame_name(profile, frame, mfa)))),
                None => line.push_str(&text(&frame_name(profile, frame, mfa))),
            }
        }
        if let Some(state) = s.state {
            line.push(';');
            line.push_str(&text(&state_frame(state)));
        }
        *paths
            .entry((s.sampler == SamplerKind::Wall, false, s.root, line))
            .or_default() += s.ns;
    }
    for &kind in &kinds {
        let dropped = Dropped::of(set, Some(kind)).value(kind);
        if dropped > 0.0 {
            let line = prefix(kind) + &text(DROPPED_FRAME);
            paths.insert(
                (kind == SamplerKind::Wall, true, Root::Outside, line),
                dropped,
            );
        }
    }
    paths
        .into_iter()
        .map(|((_, _, _, line), ns)| (line, ns.round() as u64))
        .filter(|(_, ns)| *ns > 0)
        .collect()
}

/// The frames of every stack a sample has, outermost first, each computed once:
/// `table[stack]` (empty for the stacks no sample has). Linear in the samples and in those
/// stacks' frames; the stacks only passed through (a sampled stack's outer parts) take no
/// room.
pub(super) fn stack_frames(set: &SampleSet) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); set.stacks.len()];
    for stack in set.samples.iter().filter_map(|s| s.stack) {
        if let Some(frames) = out.get_mut(stack as usize)
            && frames.is_empty()
        {
            *frames = set.frames_of(stack);
        }
    }
    out
}

/// The frames of `stack` from [`stack_frames`]'s table (none for an empty stack).
pub(super) fn frames_of(table: &[Vec<u32>], stack: Option<u32>) -> &[u32] {
    stack
        .and_then(|s| table.get(s as usize))
        .map_or(&[], Vec::as_slice)
}

/// How a frame is named: a traced function as `module::name` (or `module::name/arity` with
/// `mfa`), a native one by its function, else its address (`0x5581e3a0`), else
/// `(unknown)`.
pub(super) fn frame_name(profile: &Profile, frame: u32, mfa: bool) -> String {
    match profile.samples.frames.get(frame as usize) {
        Some(SampleFrame {
            function: Some(f), ..
        }) => match profile.function_table.get(*f as usize) {
            Some(function) if mfa => function.mfa(),
            Some(function) => weight::frame_name(function),
            None => format!("(function {f})"),
        },
        Some(f) if !f.name.is_empty() => f.name.clone(),
        Some(f) if f.address != 0 => format!("{:#x}", f.address),
        _ => "(unknown)".to_owned(),
    }
}

/// The thread of `sample` as labels name it: `name/tid`, or the tid alone.
pub(super) fn thread_label(set: &SampleSet, sample: &SampleRecord) -> Option<String> {
    let thread = set.threads.get(sample.thread? as usize)?;
    Some(match &thread.name {
        Some(name) => format!("{name}/{}", thread.tid),
        None => thread.tid.to_string(),
    })
}

/// The samples dropped because the sample buffer was full, of every source or of one
/// sampler's, each weighed in its sampler's own unit: time for CPU and wall samples, bytes
/// for allocation samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Dropped {
    /// How many samples were dropped: the dropped weight (timer periods, process-ticks),
    /// rounded, plus, for allocation samples, an estimate (the bytes dropped over the mean
    /// bytes a kept sample stands for); at least 1 when anything was dropped.
    pub(super) count: u64,
    /// The nanoseconds the dropped CPU and wall samples stood for: each source's dropped
    /// weight times its period.
    pub(super) ns: f64,
    /// The bytes the dropped allocation samples stood for (what their sources counted).
    pub(super) bytes: f64,
}

impl Dropped {
    /// The samples dropped by `set`'s sources of `sampler` (of every source for `None`).
    pub(super) fn of(set: &SampleSet, sampler: Option<SamplerKind>) -> Dropped {
        let mut weight = 0.0;
        let mut ns = 0.0;
        let mut bytes = 0.0;
        for s in set
            .sources
            .iter()
            .filter(|s| sampler.is_none_or(|k| s.sampler == k))
        {
            if s.sampler == SamplerKind::Alloc {
                bytes += s.dropped;
            } else {
                weight += s.dropped;
                ns += s.dropped * s.period_ns();
            }
        }
        let mut count = weight;
        if bytes > 0.0 {
            count += bytes / mean_alloc_weight(set).max(1.0);
        }
        let count = if weight > 0.0 || bytes > 0.0 {
            (count.round() as u64).max(1)
        } else {
            0
        };
        Dropped { count, ns, bytes }
    }

    /// What they stood for in `kind`'s unit ([`unit_of`]): nanoseconds, or bytes.
    pub(super) fn value(self, kind: SamplerKind) -> f64 {
        match kind {
            SamplerKind::Alloc => self.bytes,
            SamplerKind::Cpu | SamplerKind::Wall => self.ns,
        }
    }

    /// The sentence every export that has room for text reports them with, or `None` when
    /// nothing was dropped: `12 samples dropped (the sample buffer was full): about 12.000 ms
    /// not shown`; for allocation samples, `about 25 samples dropped (the sample buffer was
    /// full): about 28,232 bytes not shown`.
    pub(super) fn note(self) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let mut lost: Vec<String> = Vec::new();
        if self.ns > 0.0 {
            lost.push(super::flamegraph::duration(self.ns.round() as u64));
        }
        if self.bytes > 0.0 {
            lost.push(format!(
                "{} bytes",
                crate::samples::thousands(self.bytes.round() as u64)
            ));
        }
        let about = if self.bytes > 0.0 { "about " } else { "" };
        Some(format!(
            "{about}{} samples dropped (the sample buffer was full): about {} not shown",
            self.count,
            lost.join(" and ")
        ))
    }
}

/// The mean bytes an allocation sample of `set` stands for (its weight), the estimate of
/// what a dropped one stood for; without a kept allocation sample, the bytes per sample of
/// the first source sampling by bytes, else 1.
fn mean_alloc_weight(set: &SampleSet) -> f64 {
    let (n, sum) = set
        .samples
        .iter()
        .filter(|s| sampler(set, s) == SamplerKind::Alloc)
        .fold((0u64, 0.0), |(n, sum), s| (n + 1, sum + s.weight));
    if n > 0 {
        return sum / n as f64;
    }
    set.sources
        .iter()
        .find_map(|s| match s.alloc_rate {
            Some(crate::samples::AllocRate::Bytes(b)) => Some(b as f64),
            _ => None,
        })
        .unwrap_or(1.0)
}

/// [`Dropped::note`] of every source of `set`.
pub(super) fn dropped_note(set: &SampleSet) -> Option<String> {
    Dropped::of(set, None).note()
}

/// What `set`'s CPU samples could see, as every export with room for text says it: the
/// summary lines, then each warning as `Warning: ...` ([`CpuTruth::lines`]); empty when no
/// source carries its coverage.
///
/// [`CpuTruth::lines`]: crate::samples::CpuTruth::lines
pub(super) fn truth_lines(set: &SampleSet) -> Vec<String> {
    set.cpu_truth().map(|t| t.lines()).unwrap_or_default()
}

/// What `profile`'s samples are, for titles: `cpu samples at 999 Hz asked (412 per
/// CPU-second taken)`, `wall samples at 99 Hz asked`, `cpu and wall samples at 99, 999 Hz
/// asked` (rates listed when they differ). The rate is the one asked, and says so: the rate
/// taken is the distinct CPU samples per CPU-second, known when the CPU sources carry their
/// coverage ([`SampleSet::cpu_truth`]).
pub(super) fn describe(set: &SampleSet) -> String {
    let kinds = samplers(set);
    let timed = set
        .sources
        .iter()
        .filter(|s| s.sampler != SamplerKind::Alloc);
    let mut rates: Vec<u32> = timed.map(|s| s.hz).collect();
    rates.sort_unstable();
    rates.dedup();
    let kinds_text = if kinds.is_empty() {
        "samples".to_owned()
    } else {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        format!("{} samples", names.join(" and "))
    };
    let mut text = match rates.as_slice() {
        [] => kinds_text,
        [hz] => format!("{kinds_text} at {hz} Hz asked"),
        many => {
            let list: Vec<String> = many.iter().map(u32::to_string).collect();
            format!("{kinds_text} at {} Hz asked", list.join(", "))
        }
    };
    let taken: Vec<String> = set
        .cpu_truth()
        .map(|t| t.figures)
        .unwrap_or_default()
        .iter()
        .filter_map(|f| f.samples_per_cpu_second)
        .map(|rate| format!("{rate:.0}"))
        .collect();
    if !taken.is_empty() {
        text.push_str(&format!(" ({} per CPU-second taken)", taken.join(", ")));
    }
    let mut models: Vec<String> = Vec::new();
    for rate in set.sources.iter().filter_map(|s| s.alloc_rate) {
        let model = rate.to_string();
        if !models.contains(&model) {
            models.push(model);
        }
    }
    if !models.is_empty() {
        text = format!("{text}, allocations at {}", models.join(" and "));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::{SampleSource, SampleStack};

    fn source(sampler: SamplerKind, hz: u32, dropped: f64) -> SampleSource {
        SampleSource {
            run: 0,
            node: 0,
            sampler,
            hz,
            alloc_rate: None,
            dropped,
            lost_frees: 0,
            before_sampling: 0,
            native_walked: true,
            duration_ns: 0,
            capacity: 0,
            cpu: None,
        }
    }

    #[test]
    fn stack_frames_follow_parents_outermost_first() {
        let sampled = |stack| SampleRecord {
            source: 0,
            pid: None,
            thread: None,
            time_ns: 0,
            weight: 1.0,
            stack: Some(stack),
            state: None,
            mailbox_len: 0,
            callee: None,
            size: 0,
            live: false,
        };
        let set = SampleSet {
            samples: vec![sampled(2), sampled(3), sampled(2)],
            stacks: vec![
                SampleStack {
                    parent: None,
                    frame: 4,
                },
                SampleStack {
                    parent: Some(0),
                    frame: 2,
                },
                SampleStack {
                    parent: Some(1),
                    frame: 7,
                },
                SampleStack {
                    parent: Some(0),
                    frame: 1,
                },
            ],
            ..SampleSet::default()
        };
        let table = stack_frames(&set);
        assert_eq!(frames_of(&table, Some(2)), [4, 2, 7]);
        assert_eq!(frames_of(&table, Some(3)), [4, 1]);
        assert_eq!(frames_of(&table, None), [] as [u32; 0]);
        // Stacks no sample has take no room.
        assert_eq!(frames_of(&table, Some(1)), [] as [u32; 0]);
    }

    #[test]
    fn descriptions_and_dropped_notes() {
        let mut set = SampleSet {
            sources: vec![source(SamplerKind::Cpu, 1000, 0.0)],
            ..SampleSet::default()
        };
        assert_eq!(describe(&set), "cpu samples at 1000 Hz asked");
        assert_eq!(dropped_note(&set), None);
        set.sources.push(source(SamplerKind::Wall, 100, 3.0));
        assert_eq!(describe(&set), "cpu and wall samples at 100, 1000 Hz asked");
        set.sources[0].cpu = Some(crate::samples::CpuCoverage::new(
            crate::samples::CpuSource::Timers,
            None,
            1000,
            vec![(
                0,
                crate::samples::ThreadCoverage::new(2_000_000_000, 1_000_000_000, 500),
            )],
        ));
        assert_eq!(
            describe(&set),
            "cpu and wall samples at 100, 1000 Hz asked (250 per CPU-second taken)"
        );
        assert_eq!(truth_lines(&set).len(), 3, "{:?}", truth_lines(&set));
        set.sources[0].cpu = None;
        assert_eq!(
            Dropped::of(&set, None),
            Dropped {
                count: 3,
                ns: 30_000_000.0,
                bytes: 0.0
            }
        );
        assert_eq!(Dropped::of(&set, Some(SamplerKind::Cpu)).note(), None);
        assert_eq!(
            dropped_note(&set).unwrap(),
            "3 samples dropped (the sample buffer was full): about 30.000 ms not shown"
        );
    }
}
