//! Sample mode's sections (format version 2): a profile's [`SampleSet`] written and read.
//!
//! The layout is in [`super`]; this module holds both directions, so that each field's coding
//! is in one place: the flags of a sample, the numbers that may be fractional (weights), the
//! time deltas, and what a sample set must not contradict. The CPU figures' sections are
//! [`super::coverage`]'s.

use runtime::Pid;

use super::decode::Payload;
use super::encode::{Interner, Out, table, varint};
use super::limits::{self, Depths};
use super::{ArchiveError, MAX_PATH_DEPTH, coverage, tag};
use crate::samples::{
    AllocRate, SampleFrame, SampleMapping, SampleRecord, SampleSet, SampleSource, SampleStack,
    SampleThread, SamplerKind, WaitState,
};

/// A sample's flags: the low three bits are its state (0 none, else [`STATES`]`[s - 1]`).
const STATE: u64 = 0b111;
/// A process follows.
const PID: u64 = 1 << 3;
/// A thread follows.
const THREAD: u64 = 1 << 4;
/// A stack follows.
const STACK: u64 = 1 << 5;
/// A mailbox length follows (else 0).
const MAILBOX: u64 = 1 << 6;
/// A weight follows (else the sample before's).
const WEIGHT: u64 = 1 << 7;
/// A source follows (else the sample before's).
const SOURCE: u64 = 1 << 8;
/// An allocation's size follows (allocation samples; else 0).
const SIZE: u64 = 1 << 9;
/// An allocation sample's block was live.
const LIVE: u64 = 1 << 10;
/// Every flag a writer of this version sets.
const KNOWN: u64 = (LIVE << 1) - 1;

/// The samplers, in the order of their codes (0 to 2).
const SAMPLERS: [SamplerKind; 3] = [SamplerKind::Cpu, SamplerKind::Wall, SamplerKind::Alloc];

/// The wait states, in the order of their codes (1 to 7). The v2 fixture holds every one, so
/// a change of this order fails its test.
const STATES: [WaitState; 7] = WaitState::ALL;

/// The largest whole number below which every whole `f64` is exact: 2<sup>53</sup>.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// `v` as a whole number, if it is one in `0..2^53` (and not -0.0): it reads back from that.
fn whole(v: f64) -> Option<u64> {
    if !(0.0..EXACT).contains(&v) || v.fract() != 0.0 {
        return None;
    }
    let n = v as u64;
    ((n as f64).to_bits() == v.to_bits()).then_some(n)
}

/// `d` zigzag-coded: small magnitudes, of either sign, are small numbers.
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)).cast_unsigned()
}

/// The inverse of [`zigzag`].
fn unzigzag(z: u64) -> i64 {
    (z >> 1).cast_signed() ^ -((z & 1).cast_signed())
}

/// The source, time and weight of the sample before, which the next one's are coded against;
/// before the first sample, source 0, time 0 and weight 1.
#[derive(Clone, Copy)]
struct Previous {
    source: u32,
    time_ns: u64,
    weight: f64,
}

impl Default for Previous {
    fn default() -> Self {
        Previous {
            source: 0,
            time_ns: 0,
            weight: 1.0,
        }
    }
}

/// The strings the records of `set` name (a frame's name and file, a thread's name, a
/// mapping's file), each as often as it is named.
pub(super) fn strings(set: &SampleSet) -> impl Iterator<Item = &str> {
    let frames = set
        .frames
        .iter()
        .flat_map(|f| std::iter::once(f.name.as_str()).chain(f.file.as_deref()));
    let threads = set.threads.iter().filter_map(|t| t.name.as_deref());
    let mappings = set.mappings.iter().map(|m| m.file.as_str());
    let fallbacks = set
        .sources
        .iter()
        .filter_map(|s| s.cpu.as_ref()?.fallback.as_deref());
    frames.chain(threads).chain(mappings).chain(fallbacks)
}

/// What in `set` contradicts itself, in a profile whose function table has `functions`
/// functions: a reference to a record that is not there, or a stack that extends one that does
/// not come before it. The archive's reader refuses such records, so the writer must not write
/// them, and merging relies on their absence.
pub(super) fn contradiction(set: &SampleSet, functions: usize) -> Option<String> {
    let sources = set.sources.len();
    let within = |i: u32, len: usize| (i as usize) < len;
    for (i, f) in set.frames.iter().enumerate() {
        if let Some(function) = f.function
            && !within(function, functions)
        {
            return Some(format!(
                "frame {i} names function {function}, but the function table has {functions}"
            ));
        }
    }
    for (i, s) in set.stacks.iter().enumerate() {
        if let Some(parent) = s.parent
            && !within(parent, i)
        {
            return Some(format!(
                "stack {i} extends stack {parent}, which does not come before it"
            ));
        }
        if !within(s.frame, set.frames.len()) {
            return Some(format!(
                "stack {i} names frame {}, but there are {} frames",
                s.frame,
                set.frames.len()
            ));
        }
    }
    let threads = set
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| ("thread", i, t.source));
    let mappings = set
        .mappings
        .iter()
        .enumerate()
        .map(|(i, m)| ("mapping", i, m.source));
    for (what, i, source) in threads.chain(mappings) {
        if !within(source, sources) {
            return Some(format!(
                "{what} {i} names source {source}, but there are {sources} sources"
            ));
        }
    }
    for (i, s) in set.sources.iter().enumerate() {
        let rows = s.cpu.iter().flat_map(|c| &c.threads);
        if let Some((thread, _)) = rows
            .into_iter()
            .find(|(t, _)| !within(*t, set.threads.len()))
        {
            return Some(format!(
                "source {i}'s CPU figures name thread {thread}, but there are {} threads",
                set.threads.len()
            ));
        }
    }
    for (i, s) in set.samples.iter().enumerate() {
        let refs = [
            ("source", Some(s.source), sources),
            ("thread", s.thread, set.threads.len()),
            ("stack", s.stack, set.stacks.len()),
        ];
        for (what, at, len) in refs {
            if let Some(at) = at
                && !within(at, len)
            {
                return Some(format!(
                    "sample {i} names {what} {at}, but there are {len} {what}s"
                ));
            }
        }
    }
    None
}

// --- Writing ---

/// Appends `v`: `n << 1` for a whole number `n` below 2<sup>53</sup> (a CPU sample's weight
/// takes a byte), else 1 and the 8 bytes of the `f64`, little-endian.
fn float(buf: &mut Vec<u8>, v: f64) {
    match whole(v) {
        Some(n) => varint(buf, n << 1),
        None => {
            varint(buf, 1);
            buf.extend_from_slice(&v.to_bits().to_le_bytes());
        }
    }
}

/// Appends an optional index: 0 for none, `i + 1` for `i`.
pub(super) fn optional(buf: &mut Vec<u8>, v: Option<u64>) {
    varint(buf, v.map_or(0, |v| v + 1));
}

/// Writes the sample sections of `set` (checked by [`contradiction`], and for depth by
/// [`limits`]), whose strings are in `strings`.
pub(super) fn write(
    out: &mut Out<'_>,
    set: &SampleSet,
    strings: &Interner<'_, str>,
) -> Result<(), ArchiveError> {
    table(out, tag::SAMPLE_SOURCES, &set.sources, |b, s| {
        varint(b, s.run.into());
        varint(b, s.node.into());
        let code = SAMPLERS.iter().position(|k| *k == s.sampler).unwrap_or(0);
        varint(b, code as u64);
        varint(b, s.hz.into());
        float(b, s.dropped);
        varint(b, s.native_walked.into());
        varint(b, s.duration_ns);
        varint(b, s.capacity);
        if s.sampler == SamplerKind::Alloc {
            // The model: 0 and bytes per sample, or 1 and the probability.
            match s.alloc_rate.unwrap_or_default() {
                AllocRate::Bytes(bytes) => {
                    varint(b, 0);
                    varint(b, bytes);
                }
                AllocRate::SampleRate(p) => {
                    varint(b, 1);
                    float(b, p);
                }
            }
        }
    })?;
    table(out, tag::SAMPLE_FRAMES, &set.frames, |b, f| {
        optional(b, f.function.map(u64::from));
        varint(b, strings.at(&f.name));
        optional(b, f.file.as_deref().map(|file| strings.at(file)));
        optional(b, f.line.map(u64::from));
        varint(b, f.address);
    })?;
    let stacks = set.stacks.iter().zip(0u64..);
    table(out, tag::SAMPLE_STACKS, stacks, |b, (s, i)| {
        // How many stacks before it its parent is: 1 for the one just before.
        varint(b, s.parent.map_or(0, |p| i.saturating_sub(p.into())));
        varint(b, s.frame.into());
    })?;
    table(out, tag::SAMPLE_THREADS, &set.threads, |b, t| {
        varint(b, t.source.into());
        varint(b, t.tid.cast_unsigned().into());
        optional(b, t.name.as_deref().map(|name| strings.at(name)));
    })?;
    table(out, tag::SAMPLE_MAPPINGS, &set.mappings, |b, m| {
        varint(b, m.source.into());
        varint(b, m.start);
        varint(b, m.limit);
        varint(b, m.offset);
        varint(b, strings.at(&m.file));
    })?;
    let mut previous = Previous::default();
    table(out, tag::SAMPLES, &set.samples, |b, s| {
        let state = s
            .state
            .and_then(|st| STATES.iter().position(|&x| x == st))
            .map_or(0, |i| i as u64 + 1);
        let flag = |on: bool, flag: u64| if on { flag } else { 0 };
        let weight = s.weight.to_bits() != previous.weight.to_bits();
        let flags = state
            | flag(s.pid.is_some(), PID)
            | flag(s.thread.is_some(), THREAD)
            | flag(s.stack.is_some(), STACK)
            | flag(s.mailbox_len != 0, MAILBOX)
            | flag(weight, WEIGHT)
            | flag(s.source != previous.source, SOURCE)
            | flag(s.size != 0, SIZE)
            | flag(s.live, LIVE);
        varint(b, flags);
        if flags & SOURCE != 0 {
            varint(b, s.source.into());
        }
        if let Some(pid) = s.pid {
            varint(b, pid.node().into());
            varint(b, pid.index().into());
            varint(b, pid.serial().into());
        }
        if let Some(thread) = s.thread {
            varint(b, thread.into());
        }
        varint(
            b,
            zigzag(s.time_ns.wrapping_sub(previous.time_ns).cast_signed()),
        );
        if weight {
            float(b, s.weight);
        }
        if let Some(stack) = s.stack {
            varint(b, stack.into());
        }
        if s.mailbox_len != 0 {
            varint(b, s.mailbox_len.into());
        }
        if s.size != 0 {
            varint(b, s.size);
        }
        previous = Previous {
            source: s.source,
            time_ns: s.time_ns,
            weight: s.weight,
        };
    })?;
    let lost = set
        .sources
        .iter()
        .enumerate()
        .filter(|(_, s)| s.lost_frees > 0);
    table(out, tag::SAMPLE_LOST_FREES, lost, |b, (i, s)| {
        varint(b, i as u64);
        varint(b, s.lost_frees);
    })?;
    let callees = set
        .samples
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.callee?)));
    table(out, tag::SAMPLE_CALLEES, callees, |b, (i, callee)| {
        varint(b, i as u64);
        varint(b, callee.node().into());
        varint(b, callee.index().into());
        varint(b, callee.serial().into());
    })?;
    super::coverage::write(out, set, strings)?;
    let before = set
        .sources
        .iter()
        .enumerate()
        .filter(|(_, s)| s.before_sampling > 0);
    table(out, tag::SAMPLE_BEFORE, before, |b, (i, s)| {
        varint(b, i as u64);
        varint(b, s.before_sampling);
    })
}

// --- Reading ---

/// The sample set being read.
#[derive(Default)]
pub(super) struct Reader {
    set: SampleSet,
    /// The depth of each stack read so far.
    depths: Depths,
    previous: Previous,
    /// The CPU figures read so far.
    cpu: coverage::Reader,
}

/// What a sample record refers to outside the sample sections: the strings and the number of
/// functions in the function table read so far, and the bytes of strings the records read so
/// far name ([`limits::check_named`]).
pub(super) struct Context<'s> {
    pub(super) strings: &'s [String],
    pub(super) functions: usize,
    pub(super) named: &'s mut u64,
}

impl Reader {
    /// Decodes one record of a sample section of `tag`.
    pub(super) fn record(
        &mut self,
        tag: u64,
        p: &mut Payload<'_>,
        cx: Context<'_>,
    ) -> Result<(), ArchiveError> {
        let start = p.offset();
        let set = &mut self.set;
        match tag {
            tag::SAMPLE_SOURCES => {
                let run = p.u32("a source's run")?;
                let node = p.u32("a source's node")?;
                let code = p.varint("a source's sampler")?;
                let Some(&sampler) = SAMPLERS.get(code as usize) else {
                    return Err(p.corrupt(
                        start,
                        format_args!("an unknown sampler {code} (0 is cpu, 1 wall, 2 alloc)"),
                    ));
                };
                let hz = p.u32("a source's rate")?;
                let dropped = float_of(p, "a source's dropped weight")?;
                let walked_at = p.offset();
                let native_walked = match p.varint("whether native stacks were walked")? {
                    0 => false,
                    1 => true,
                    v => {
                        return Err(p.corrupt(
                            walked_at,
                            format_args!(
                                "a source says whether native stacks were walked with {v}, not \
                                 0 (no) or 1 (yes)"
                            ),
                        ));
                    }
                };
                let duration_ns = p.varint("a source's duration")?;
                let capacity = p.varint("a source's capacity")?;
                let alloc_rate = if sampler == SamplerKind::Alloc {
                    let model_at = p.offset();
                    Some(match p.varint("an allocation source's model")? {
                        0 => AllocRate::Bytes(p.varint("an allocation source's rate")?),
                        1 => AllocRate::SampleRate(float_of(p, "an allocation source's rate")?),
                        v => {
                            return Err(p.corrupt(
                                model_at,
                                format_args!(
                                    "an allocation source's model is {v}, not 0 (bytes per \
                                     sample) or 1 (sample_rate)"
                                ),
                            ));
                        }
                    })
                } else {
                    None
                };
                set.sources.push(SampleSource {
                    run,
                    node,
                    sampler,
                    hz,
                    alloc_rate,
                    dropped,
                    lost_frees: 0,
                    before_sampling: 0,
                    native_walked,
                    duration_ns,
                    capacity,
                    cpu: None,
                });
            }
            tag::SAMPLE_FRAMES => {
                let function = match p.varint("a frame's function")? {
                    0 => None,
                    v if v - 1 < cx.functions as u64 => Some((v - 1) as u32),
                    v => {
                        return Err(p.corrupt(
                            start,
                            format_args!(
                                "a frame's function is function {}, but the function table has \
                                 {}",
                                v - 1,
                                cx.functions
                            ),
                        ));
                    }
                };
                let name = p.string("a frame's name", cx.strings)?;
                let file = p.optional_string("a frame's file", cx.strings)?;
                let named = name.len() + file.as_ref().map_or(0, String::len);
                limits::check_named(cx.named, named as u64, p.offset())?;
                let line = match p.varint("a frame's line")? {
                    0 => None,
                    v => Some(u32::try_from(v - 1).map_err(|_| {
                        p.corrupt(
                            start,
                            format_args!("a frame's line is {}, more than 32 bits", v - 1),
                        )
                    })?),
                };
                set.frames.push(SampleFrame {
                    function,
                    name,
                    file,
                    line,
                    address: p.varint("a frame's address")?,
                });
            }
            tag::SAMPLE_STACKS => {
                let own = set.stacks.len();
                let parent = match p.varint("a stack's parent")? {
                    0 => None,
                    d if d <= own as u64 => Some((own as u64 - d) as u32),
                    d => {
                        return Err(p.corrupt(
                            start,
                            format_args!(
                                "a stack's parent is {d} stacks before it, but only {own} come \
                                 before it"
                            ),
                        ));
                    }
                };
                let frame = p.index("a stack's frame", set.frames.len(), "frame")?;
                let depth = self.depths.push(parent);
                if depth > MAX_PATH_DEPTH {
                    return Err(p.corrupt(
                        start,
                        format_args!(
                            "sampled stack {own} is {depth} frames deep, more than the \
                             {MAX_PATH_DEPTH} an archive may hold (tprof writes no deeper stack)"
                        ),
                    ));
                }
                set.stacks.push(SampleStack { parent, frame });
            }
            tag::SAMPLE_THREADS => {
                let source = p.index("a thread's source", set.sources.len(), "source")?;
                let tid = p.u32("a thread's id")?.cast_signed();
                let name = p.optional_string("a thread's name", cx.strings)?;
                let named = name.as_ref().map_or(0, String::len);
                limits::check_named(cx.named, named as u64, p.offset())?;
                set.threads.push(SampleThread { source, tid, name });
            }
            tag::SAMPLE_MAPPINGS => {
                let source = p.index("a mapping's source", set.sources.len(), "source")?;
                let start = p.varint("a mapping's start")?;
                let limit = p.varint("a mapping's limit")?;
                let offset = p.varint("a mapping's offset")?;
                let file = p.string("a mapping's file", cx.strings)?;
                limits::check_named(cx.named, file.len() as u64, p.offset())?;
                set.mappings.push(SampleMapping {
                    source,
                    start,
                    limit,
                    offset,
                    file,
                });
            }
            tag::SAMPLES => {
                let sample = self.sample(p)?;
                self.previous = Previous {
                    source: sample.source,
                    time_ns: sample.time_ns,
                    weight: sample.weight,
                };
                self.set.samples.push(sample);
            }
            tag::SAMPLE_CALLEES => {
                let samples = set.samples.len();
                let sample = p.index("a callee record's sample", samples, "sample")?;
                let node = p.u32("a callee's node")?;
                let index = p.u32("a callee's index")?;
                let serial = p.u32("a callee's serial")?;
                if let Some(s) = set.samples.get_mut(sample as usize) {
                    s.callee = Some(Pid::from_parts(node, index, serial));
                }
            }
            tag::SAMPLE_BEFORE => {
                let sources = set.sources.len();
                let source = p.index("a before-sampling record's source", sources, "source")?;
                let count = p.varint("a source's samples begun before sampling")?;
                if let Some(s) = set.sources.get_mut(source as usize) {
                    s.before_sampling = count;
                }
            }
            tag::SAMPLE_LOST_FREES => {
                let sources = set.sources.len();
                let source = p.index("a lost-frees record's source", sources, "source")?;
                let count = p.varint("a source's lost frees")?;
                if let Some(s) = set.sources.get_mut(source as usize) {
                    s.lost_frees = count;
                }
            }
            tag::SAMPLE_CPU | tag::SAMPLE_CPU_THREADS | tag::SAMPLE_CPU_ASIDE => {
                self.cpu.record(tag, p, set, cx)?;
            }
            _ => return Err(p.corrupt(start, format_args!("a record of unknown kind {tag}"))),
        }
        Ok(())
    }

    /// Decodes a record of SAMPLES.
    fn sample(&self, p: &mut Payload<'_>) -> Result<SampleRecord, ArchiveError> {
        let start = p.offset();
        let set = &self.set;
        let flags = p.varint("a sample's flags")?;
        if flags & !KNOWN != 0 {
            return Err(p.corrupt(
                start,
                format_args!(
                    "a sample's flags, {flags:#b}, have bits of an unknown meaning (no tprof \
                     writes them)"
                ),
            ));
        }
        let sources = set.sources.len();
        let source = if flags & SOURCE != 0 {
            p.index("a sample's source", sources, "source")?
        } else if (self.previous.source as usize) < sources {
            self.previous.source
        } else {
            return Err(p.corrupt(
                start,
                format_args!(
                    "a sample's source is source {}, but only {sources} come before it",
                    self.previous.source
                ),
            ));
        };
        let pid = if flags & PID != 0 {
            let node = p.u32("a sample's node")?;
            let index = p.u32("a pid's index")?;
            let serial = p.u32("a pid's serial")?;
            Some(Pid::from_parts(node, index, serial))
        } else {
            None
        };
        let thread = if flags & THREAD != 0 {
            Some(p.index("a sample's thread", set.threads.len(), "thread")?)
        } else {
            None
        };
        let delta = unzigzag(p.varint("a sample's time")?);
        let time_ns = self.previous.time_ns.wrapping_add(delta.cast_unsigned());
        let weight = if flags & WEIGHT != 0 {
            float_of(p, "a sample's weight")?
        } else {
            self.previous.weight
        };
        let stack = if flags & STACK != 0 {
            Some(p.index("a sample's stack", set.stacks.len(), "stack")?)
        } else {
            None
        };
        let mailbox_len = if flags & MAILBOX != 0 {
            p.u32("a sample's mailbox length")?
        } else {
            0
        };
        let size = if flags & SIZE != 0 {
            p.varint("an allocation sample's size")?
        } else {
            0
        };
        let state = match flags & STATE {
            0 => None,
            s => STATES.get(s as usize - 1).copied(),
        };
        Ok(SampleRecord {
            source,
            pid,
            thread,
            time_ns,
            weight,
            stack,
            state,
            mailbox_len,
            // SAMPLE_CALLEES, after this section, sets it.
            callee: None,
            size,
            live: flags & LIVE != 0,
        })
    }

    /// The sample set read, once END (at `end`) is: every thread row the SAMPLE_CPU records
    /// announce must be there.
    pub(super) fn finish(self, end: u64) -> Result<SampleSet, ArchiveError> {
        self.cpu.finish(&self.set, end)?;
        Ok(self.set)
    }
}

/// Reads a number written by [`float`].
fn float_of(p: &mut Payload<'_>, what: &str) -> Result<f64, ArchiveError> {
    let start = p.offset();
    match p.varint(what)? {
        code if code & 1 == 0 => Ok((code >> 1) as f64),
        1 => Ok(f64::from_bits(u64::from_le_bytes(p.fixed(what)?))),
        code => Err(p.corrupt(
            start,
            format_args!(
                "{what} is coded as {code}, which no tprof writes (an even number is a whole \
                 one, 1 is followed by 8 bytes)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_below_2_to_the_53_are_whole_and_nothing_else() {
        assert_eq!(whole(0.0), Some(0));
        assert_eq!(whole(1.0), Some(1));
        assert_eq!(whole(EXACT - 1.0), Some((1 << 53) - 1));
        for v in [-0.0, -1.0, 0.5, EXACT, f64::INFINITY, f64::NAN, 1e300] {
            assert_eq!(whole(v), None, "{v}");
        }
    }

    #[test]
    fn zigzag_reads_back_every_difference() {
        for d in [0, 1, -1, 2, -2, i64::MAX, i64::MIN, 1_000_000, -1_000_000] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
        assert_eq!([0, -1, 1, -2].map(zigzag), [0, 1, 2, 3]);
    }
}
