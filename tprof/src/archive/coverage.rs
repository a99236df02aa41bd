//! The CPU figures' sections (added to version 2 without a bump): what a CPU profile's
//! samples could see ([`SampleSource::cpu`](crate::samples::SampleSource::cpu)), written and
//! read. SAMPLE_CPU holds each source's mechanism and rate, SAMPLE_CPU_THREADS its threads'
//! rows, and SAMPLE_CPU_ASIDE what some rows add: samples of work the profile does not sample,
//! and the stalls of a thread's perf event. The layout is in [`super`].

use super::decode::Payload;
use super::encode::{Interner, Out, table, varint};
use super::samples::{Context, optional};
use super::{ArchiveError, limits, tag};
use crate::samples::{CpuCoverage, CpuSource, SampleSet, ThreadCoverage};

/// The CPU sampler's mechanisms, in the order of their codes (0 to 2) in SAMPLE_CPU.
const CPU_SOURCES: [CpuSource; 3] = [CpuSource::Auto, CpuSource::PerfEvents, CpuSource::Timers];

/// Added to a SAMPLE_CPU record's mechanism code: the perf events sampled kernel mode too
/// ([`CpuCoverage::kernel`]). Archives written before it have none: user mode only.
const CPU_KERNEL: u64 = 1 << 8;

/// A SAMPLE_CPU_THREADS row's flags: the thread fell back to a timer alone.
const THREAD_FALLBACK: u64 = 1;
/// The thread was never armed.
const THREAD_UNARMED: u64 = 1 << 1;

/// Whether `t` has figures SAMPLE_CPU_ASIDE holds: none of them is zero.
fn aside(t: &ThreadCoverage) -> bool {
    t.elsewhere != 0 || t.elsewhere_ns != 0 || t.stalls != 0 || t.stalled_ns != 0
}

/// Writes the CPU figures of `set`'s sources, whose fallbacks' reasons are in `strings`: no
/// section at all when no source has them, and no SAMPLE_CPU_ASIDE when no row has its
/// figures (so a profile without them is written byte for byte as before they were kept).
pub(super) fn write(
    out: &mut Out<'_>,
    set: &SampleSet,
    strings: &Interner<'_, str>,
) -> Result<(), ArchiveError> {
    let covered: Vec<(usize, &CpuCoverage)> = set
        .sources
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.cpu.as_ref()?)))
        .collect();
    table(out, tag::SAMPLE_CPU, &covered, |b, (i, c)| {
        varint(b, *i as u64);
        let code = CPU_SOURCES.iter().position(|k| *k == c.source).unwrap_or(0);
        varint(b, code as u64 | if c.kernel { CPU_KERNEL } else { 0 });
        optional(b, c.fallback.as_deref().map(|why| strings.at(why)));
        varint(b, c.hz.into());
        varint(b, c.threads.len() as u64);
    })?;
    let rows = || covered.iter().flat_map(|(_, c)| &c.threads);
    table(out, tag::SAMPLE_CPU_THREADS, rows(), |b, (thread, t)| {
        varint(b, (*thread).into());
        varint(b, t.cpu_ns);
        varint(b, t.sampled_ns);
        varint(b, t.samples);
        let flag = |on: bool, flag: u64| if on { flag } else { 0 };
        varint(
            b,
            flag(t.fallback, THREAD_FALLBACK) | flag(t.unarmed, THREAD_UNARMED),
        );
    })?;
    let aside_rows = rows().zip(0u64..).filter(|((_, t), _)| aside(t));
    table(
        out,
        tag::SAMPLE_CPU_ASIDE,
        aside_rows,
        |b, ((_, t), row)| {
            varint(b, row);
            varint(b, t.elsewhere);
            varint(b, t.elsewhere_ns);
            varint(b, t.stalls);
            varint(b, t.stalled_ns);
        },
    )
}

/// The CPU figures being read, beside the sample set they go to.
#[derive(Default)]
pub(super) struct Reader {
    /// The sources with CPU figures (SAMPLE_CPU), in order, each with the thread rows it
    /// announced.
    covered: Vec<(u32, u64)>,
    /// The SAMPLE_CPU record the next thread row goes to (those before are full).
    covering: usize,
    /// The thread rows read so far, of every source.
    rows: u64,
    /// The row the last SAMPLE_CPU_ASIDE record named, plus one: the least the next may name.
    aside_next: u64,
    /// The SAMPLE_CPU record of the row the last SAMPLE_CPU_ASIDE record named, and the rows
    /// of the records before it.
    aside_at: (usize, u64),
}

impl Reader {
    /// Decodes one record of a CPU figures section of `tag` into `set`.
    pub(super) fn record(
        &mut self,
        tag: u64,
        p: &mut Payload<'_>,
        set: &mut SampleSet,
        cx: Context<'_>,
    ) -> Result<(), ArchiveError> {
        match tag {
            tag::SAMPLE_CPU => self.source(p, set, cx),
            tag::SAMPLE_CPU_THREADS => self.row(p, set),
            _ => self.aside(p, set),
        }
    }

    /// Decodes a record of SAMPLE_CPU.
    fn source(
        &mut self,
        p: &mut Payload<'_>,
        set: &mut SampleSet,
        cx: Context<'_>,
    ) -> Result<(), ArchiveError> {
        let start = p.offset();
        let sources = set.sources.len();
        let source = p.index("a CPU figures record's source", sources, "source")?;
        if let Some(&(before, _)) = self.covered.last()
            && source <= before
        {
            return Err(p.corrupt(
                start,
                format_args!(
                    "CPU figures of source {source} after those of source {before} (each \
                     source has at most one, in source order)"
                ),
            ));
        }
        let code_at = p.offset();
        let code = p.varint("a CPU figures record's mechanism")?;
        let kernel = code & CPU_KERNEL != 0;
        let code = code & !CPU_KERNEL;
        let Some(&mechanism) = CPU_SOURCES.get(code as usize) else {
            return Err(p.corrupt(
                code_at,
                format_args!(
                    "an unknown CPU sampling mechanism {code} (0 is auto, 1 perf_events, 2 \
                     timers)"
                ),
            ));
        };
        let fallback = p.optional_string("why the CPU sampler fell back", cx.strings)?;
        limits::check_named(
            cx.named,
            fallback.as_ref().map_or(0, String::len) as u64,
            p.offset(),
        )?;
        let hz = p.u32("a CPU figures record's rate")?;
        let rows = p.varint("a CPU figures record's thread count")?;
        if let Some(s) = set.sources.get_mut(source as usize) {
            let mut cpu = CpuCoverage::new(mechanism, fallback, hz, Vec::new());
            cpu.kernel = kernel;
            s.cpu = Some(cpu);
        }
        self.covered.push((source, rows));
        Ok(())
    }

    /// Decodes a record of SAMPLE_CPU_THREADS.
    fn row(&mut self, p: &mut Payload<'_>, set: &mut SampleSet) -> Result<(), ArchiveError> {
        let start = p.offset();
        let thread = p.index("a CPU figures row's thread", set.threads.len(), "thread")?;
        let mut row = ThreadCoverage::new(
            p.varint("a thread's CPU time")?,
            p.varint("the CPU time a thread's samples stand for")?,
            p.varint("a thread's distinct samples")?,
        );
        let flags_at = p.offset();
        let flags = p.varint("a CPU figures row's flags")?;
        if flags & !(THREAD_FALLBACK | THREAD_UNARMED) != 0 {
            return Err(p.corrupt(
                flags_at,
                format_args!(
                    "a CPU figures row's flags, {flags:#b}, have bits of an unknown meaning (no \
                     tprof writes them)"
                ),
            ));
        }
        row.fallback = flags & THREAD_FALLBACK != 0;
        row.unarmed = flags & THREAD_UNARMED != 0;
        loop {
            let Some(&(source, count)) = self.covered.get(self.covering) else {
                let announced = self
                    .covered
                    .iter()
                    .fold(0u64, |a, &(_, c)| a.saturating_add(c));
                return Err(p.corrupt(
                    start,
                    format_args!(
                        "a CPU figures row beyond the {announced} that the SAMPLE_CPU sections \
                         announce"
                    ),
                ));
            };
            if let Some(cpu) = cpu_of(set, source)
                && (cpu.threads.len() as u64) < count
            {
                cpu.threads.push((thread, row));
                self.rows += 1;
                return Ok(());
            }
            self.covering += 1;
        }
    }

    /// Decodes a record of SAMPLE_CPU_ASIDE: the row it names is one read before it, after
    /// the one the record before named.
    fn aside(&mut self, p: &mut Payload<'_>, set: &mut SampleSet) -> Result<(), ArchiveError> {
        let start = p.offset();
        let row = p.varint("a CPU figures row's index")?;
        if row >= self.rows {
            return Err(p.corrupt(
                start,
                format_args!(
                    "samples aside of CPU figures row {row}, but only {} rows come before it",
                    self.rows
                ),
            ));
        }
        if row < self.aside_next {
            return Err(p.corrupt(
                start,
                format_args!(
                    "samples aside of CPU figures row {row} after those of row {} (each row \
                     has at most one record, in row order)",
                    self.aside_next - 1
                ),
            ));
        }
        let elsewhere = p.varint("a thread's samples elsewhere")?;
        let elsewhere_ns = p.varint("the CPU time of a thread's samples elsewhere")?;
        let stalls = p.varint("a thread's perf event's stalls")?;
        let stalled_ns = p.varint("the CPU time a thread's stalls left in no sample")?;
        self.aside_next = row + 1;
        // The rows before `row` are all read, so each record before the row's is full: walk
        // on from the last record's (the rows only go forward).
        let (mut at, mut before) = self.aside_at;
        loop {
            let Some(&(source, _)) = self.covered.get(at) else {
                // Unreachable: `row` is below the rows read, each in a record.
                return Err(p.corrupt(start, format_args!("CPU figures row {row} is in no source")));
            };
            let Some(cpu) = cpu_of(set, source) else {
                at += 1;
                continue;
            };
            let held = cpu.threads.len() as u64;
            if let Some((_, t)) = row
                .checked_sub(before)
                .filter(|&i| i < held)
                .and_then(|i| cpu.threads.get_mut(i as usize))
            {
                t.elsewhere = elsewhere;
                t.elsewhere_ns = elsewhere_ns;
                t.stalls = stalls;
                t.stalled_ns = stalled_ns;
                self.aside_at = (at, before);
                return Ok(());
            }
            before += held;
            at += 1;
        }
    }

    /// Checks, once END (at `end`) is read, that every thread row the SAMPLE_CPU records
    /// announce is in `set`.
    pub(super) fn finish(&self, set: &SampleSet, end: u64) -> Result<(), ArchiveError> {
        let missing = self.covered.iter().fold(0u64, |sum, &(source, count)| {
            let held = set
                .sources
                .get(source as usize)
                .and_then(|s| s.cpu.as_ref())
                .map_or(0, |c| c.threads.len() as u64);
            sum.saturating_add(count.saturating_sub(held))
        });
        if missing > 0 {
            return Err(ArchiveError::Corrupt {
                at: end,
                what: format!(
                    "the SAMPLE_CPU sections announce {missing} thread rows more than the \
                     SAMPLE_CPU_THREADS sections hold"
                ),
            });
        }
        Ok(())
    }
}

/// The CPU figures of source `source` of `set`, once its SAMPLE_CPU record is read.
fn cpu_of(set: &mut SampleSet, source: u32) -> Option<&mut CpuCoverage> {
    set.sources
        .get_mut(source as usize)
        .and_then(|s| s.cpu.as_mut())
}
