//! Reading an archive: the header, then section by section, each checked against its CRC
//! before its records are decoded into the profile being built.
//!
//! Nothing here trusts a number it reads: a count is never used to reserve memory (each record
//! takes at least one byte of a payload that is already in memory), an index is looked up with
//! `get`, and every arithmetic step on a read value is checked.

use std::fmt;
use std::io::{self, Read};

use crc32fast::Hasher;
use runtime::Pid;

use super::limits::{self, Depths, function_bytes};
use super::{ArchiveError, MAGIC, MAX_PATH_DEPTH, MAX_SECTION_LEN, VERSION, samples, tag};
use crate::{
    CallTree, Entry, Event, EventKind, EventLog, Function, FunctionTrace, Group, Meta, PathEntry,
    PathNode, Percentiles, ProcessRecord, Profile, Run, TraceType,
};

/// The input, with its offset and the checksums of what was read.
struct Input<'r> {
    inner: &'r mut dyn Read,
    /// Bytes read so far.
    at: u64,
    /// CRC of every byte read.
    file_crc: Hasher,
    /// CRC of the bytes read since the current section began.
    section_crc: Hasher,
}

impl Read for Input<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?.min(buf.len());
        let got = buf.get(..n).unwrap_or_default();
        self.file_crc.update(got);
        self.section_crc.update(got);
        self.at += n as u64;
        Ok(n)
    }
}

/// An error of reading at `at`: the input ended there, or reading failed.
fn cut(e: io::Error, at: u64, expected: &'static str) -> ArchiveError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        ArchiveError::Truncated { at, expected }
    } else {
        ArchiveError::Io(e)
    }
}

impl Input<'_> {
    /// Reads a varint from the input itself (a section's tag or length).
    fn varint(&mut self, expected: &'static str) -> Result<u64, ArchiveError> {
        let start = self.at;
        match leb128::read::unsigned(self) {
            Ok(v) => Ok(v),
            Err(leb128::read::Error::IoError(e)) => Err(cut(e, self.at, expected)),
            Err(leb128::read::Error::Overflow) => Err(ArchiveError::Corrupt {
                at: start,
                what: format!("{expected} does not fit in 64 bits"),
            }),
        }
    }

    /// Reads the CRC that ends the section `name` that began at `start`, and checks it.
    fn check_crc(&mut self, start: u64, name: &str) -> Result<(), ArchiveError> {
        let computed = std::mem::replace(&mut self.section_crc, Hasher::new()).finalize();
        let end = self.at;
        let mut stored = [0; 4];
        self.read_exact(&mut stored)
            .map_err(|e| cut(e, self.at, "a section's checksum"))?;
        if u32::from_le_bytes(stored) != computed {
            return Err(ArchiveError::Corrupt {
                at: start,
                what: format!(
                    "the checksum of the {name} section (bytes {start} to {end}) does not \
                     match: the section is damaged"
                ),
            });
        }
        Ok(())
    }
}

/// What should follow where the payload of a section of `tag` ends early.
fn rest_of(tag: u64) -> &'static str {
    match tag {
        tag::END => "the rest of the END section",
        tag::META => "the rest of the META section",
        tag::STRINGS => "the rest of a STRINGS section",
        tag::FUNCTIONS => "the rest of a FUNCTIONS section",
        tag::FUNCTION_TABLE => "the rest of a FUNCTION_TABLE section",
        tag::RUNS => "the rest of a RUNS section",
        tag::PROCESSES => "the rest of a PROCESSES section",
        tag::TRACES => "the rest of a TRACES section",
        tag::ENTRIES => "the rest of an ENTRIES section",
        tag::PERCENTILES => "the rest of a PERCENTILES section",
        tag::TREE_NODES => "the rest of a TREE_NODES section",
        tag::TREE_ENTRIES => "the rest of a TREE_ENTRIES section",
        tag::EVENT_LOGS => "the rest of an EVENT_LOGS section",
        tag::EVENTS => "the rest of an EVENTS section",
        tag::PROCESS_PERCENTILES => "the rest of a PROCESS_PERCENTILES section",
        tag::SAMPLE_SOURCES => "the rest of a SAMPLE_SOURCES section",
        tag::SAMPLE_FRAMES => "the rest of a SAMPLE_FRAMES section",
        tag::SAMPLE_STACKS => "the rest of a SAMPLE_STACKS section",
        tag::SAMPLE_THREADS => "the rest of a SAMPLE_THREADS section",
        tag::SAMPLE_MAPPINGS => "the rest of a SAMPLE_MAPPINGS section",
        tag::SAMPLES => "the rest of a SAMPLES section",
        tag::SAMPLE_LOST_FREES => "the rest of a SAMPLE_LOST_FREES section",
        tag::SAMPLE_CPU => "the rest of a SAMPLE_CPU section",
        tag::SAMPLE_CPU_THREADS => "the rest of a SAMPLE_CPU_THREADS section",
        tag::SAMPLE_CALLEES => "the rest of a SAMPLE_CALLEES section",
        tag::SAMPLE_CPU_ASIDE => "the rest of a SAMPLE_CPU_ASIDE section",
        tag::SAMPLE_BEFORE => "the rest of a SAMPLE_BEFORE section",
        tag::RUN_QUEUE => "the rest of a RUN_QUEUE section",
        _ => "the rest of a section of a kind this tprof does not know",
    }
}

/// Reads an archive: see the layout in [`super`].
pub(super) fn read(input: &mut dyn Read) -> Result<Profile, ArchiveError> {
    let mut input = Input {
        inner: input,
        at: 0,
        file_crc: Hasher::new(),
        section_crc: Hasher::new(),
    };
    let mut magic = Vec::with_capacity(MAGIC.len());
    (&mut input)
        .take(MAGIC.len() as u64)
        .read_to_end(&mut magic)?;
    if !MAGIC.starts_with(&magic) {
        return Err(ArchiveError::NotAnArchive { found: magic });
    }
    if magic.len() < MAGIC.len() {
        return Err(ArchiveError::Truncated {
            at: input.at,
            expected: "the .tprof magic number",
        });
    }
    let mut version = [0; 2];
    input
        .read_exact(&mut version)
        .map_err(|e| cut(e, input.at, "the format version"))?;
    let version = u16::from_le_bytes(version);
    if version == 0 || version > VERSION {
        return Err(ArchiveError::UnsupportedVersion {
            version,
            newest: VERSION,
        });
    }

    let mut state = State::default();
    let mut payload = Vec::new();
    loop {
        let start = input.at;
        let crc_before = input.file_crc.clone().finalize();
        input.section_crc = Hasher::new();
        let tag = input.varint("the next section")?;
        let len = input.varint("a section's length")?;
        let Some(name) = tag::name(tag) else {
            // A section of a later version: skip it, the compatibility rule.
            let skipped = io::copy(&mut (&mut input).take(len), &mut io::sink())?;
            if skipped < len {
                return Err(ArchiveError::Truncated {
                    at: input.at,
                    expected: rest_of(tag),
                });
            }
            input.check_crc(start, &format!("unknown (tag {tag})"))?;
            continue;
        };
        if len > MAX_SECTION_LEN {
            return Err(ArchiveError::Corrupt {
                at: start,
                what: format!(
                    "the {name} section says it holds {len} bytes, more than the \
                     {MAX_SECTION_LEN} a section may: its length is damaged"
                ),
            });
        }
        payload.clear();
        (&mut input).take(len).read_to_end(&mut payload)?;
        if (payload.len() as u64) < len {
            return Err(ArchiveError::Truncated {
                at: input.at,
                expected: rest_of(tag),
            });
        }
        let payload_at = input.at - len;
        input.check_crc(start, name)?;
        let mut p = Payload {
            bytes: &payload,
            pos: 0,
            at: payload_at,
            section: name,
        };
        if tag == tag::END {
            let stored =
                <[u8; 4]>::try_from(payload.as_slice()).map_err(|_| ArchiveError::Corrupt {
                    at: start,
                    what: format!("the END section holds {len} bytes instead of 4"),
                })?;
            if u32::from_le_bytes(stored) != crc_before {
                return Err(ArchiveError::Corrupt {
                    at: start,
                    what: "the checksum of the whole archive does not match: a section was \
                           lost, added or damaged"
                        .to_owned(),
                });
            }
            return state.finish(start);
        }
        while !p.is_empty() {
            state.record(tag, &mut p)?;
        }
    }
}

/// A section's payload being decoded.
pub(super) struct Payload<'b> {
    bytes: &'b [u8],
    pos: usize,
    /// The offset of `bytes[0]` in the archive.
    at: u64,
    /// The section's name.
    section: &'static str,
}

impl Payload<'_> {
    fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// The offset of the next byte in the archive.
    pub(super) fn offset(&self) -> u64 {
        self.at + self.pos as u64
    }

    pub(super) fn corrupt(&self, at: u64, what: impl fmt::Display) -> ArchiveError {
        ArchiveError::Corrupt {
            at,
            what: format!("{what} in the {} section", self.section),
        }
    }

    pub(super) fn varint(&mut self, what: &str) -> Result<u64, ArchiveError> {
        let start = self.offset();
        let mut rest = self.bytes.get(self.pos..).unwrap_or_default();
        match leb128::read::unsigned(&mut rest) {
            Ok(v) => {
                self.pos = self.bytes.len() - rest.len();
                Ok(v)
            }
            Err(leb128::read::Error::Overflow) => {
                Err(self.corrupt(start, format_args!("{what} does not fit in 64 bits")))
            }
            Err(leb128::read::Error::IoError(_)) => Err(self.corrupt(
                start,
                format_args!("{what} runs past the end of the records"),
            )),
        }
    }

    pub(super) fn u32(&mut self, what: &str) -> Result<u32, ArchiveError> {
        let start = self.offset();
        let v = self.varint(what)?;
        u32::try_from(v)
            .map_err(|_| self.corrupt(start, format_args!("{what} is {v}, more than 32 bits")))
    }

    fn u8(&mut self, what: &str) -> Result<u8, ArchiveError> {
        let start = self.offset();
        let v = self.varint(what)?;
        u8::try_from(v)
            .map_err(|_| self.corrupt(start, format_args!("{what} is {v}, more than 8 bits")))
    }

    /// An index into `table`, which holds the records (`of`) read so far: the record.
    fn lookup<'t, T>(
        &mut self,
        what: &str,
        table: &'t [T],
        of: &str,
    ) -> Result<&'t T, ArchiveError> {
        let start = self.offset();
        let v = self.varint(what)?;
        usize::try_from(v)
            .ok()
            .and_then(|i| table.get(i))
            .ok_or_else(|| {
                self.corrupt(
                    start,
                    format_args!(
                        "{what} is {of} {v}, but only {} come before it",
                        table.len()
                    ),
                )
            })
    }

    /// Eight bytes, as they are (the bits of an `f64`).
    pub(super) fn fixed(&mut self, what: &str) -> Result<[u8; 8], ArchiveError> {
        let start = self.offset();
        let bytes = self
            .bytes
            .get(self.pos..)
            .and_then(|rest| rest.first_chunk::<8>())
            .copied()
            .ok_or_else(|| {
                self.corrupt(
                    start,
                    format_args!("{what} runs past the end of the records"),
                )
            })?;
        self.pos += 8;
        Ok(bytes)
    }

    /// An index into a table of `len` records (`of`) read so far.
    pub(super) fn index(&mut self, what: &str, len: usize, of: &str) -> Result<u32, ArchiveError> {
        let start = self.offset();
        let v = self.varint(what)?;
        u32::try_from(v)
            .ok()
            .filter(|&i| (i as usize) < len)
            .ok_or_else(|| {
                self.corrupt(
                    start,
                    format_args!("{what} is {of} {v}, but only {len} come before it"),
                )
            })
    }

    /// A string index: the string.
    pub(super) fn string(
        &mut self,
        what: &str,
        strings: &[String],
    ) -> Result<String, ArchiveError> {
        self.lookup(what, strings, "string").cloned()
    }

    /// 0 for none, else a string index + 1: the string.
    pub(super) fn optional_string(
        &mut self,
        what: &str,
        strings: &[String],
    ) -> Result<Option<String>, ArchiveError> {
        let start = self.offset();
        match self.varint(what)? {
            0 => Ok(None),
            v => usize::try_from(v - 1)
                .ok()
                .and_then(|i| strings.get(i))
                .cloned()
                .map(Some)
                .ok_or_else(|| {
                    self.corrupt(
                        start,
                        format_args!(
                            "{what} is string {}, but only {} come before it",
                            v - 1,
                            strings.len()
                        ),
                    )
                }),
        }
    }

    /// A function index: the function.
    fn function(&mut self, what: &str, functions: &[Function]) -> Result<Function, ArchiveError> {
        self.lookup(what, functions, "function").cloned()
    }

    /// A group: 0 for all, else a pid.
    fn group(&mut self, what: &str) -> Result<Group, ArchiveError> {
        let start = self.offset();
        let g = self.varint(what)?;
        if g == 0 {
            return Ok(Group::All);
        }
        let node = u32::try_from(g - 1).map_err(|_| {
            self.corrupt(
                start,
                format_args!("{what} names node {}, more than 32 bits", g - 1),
            )
        })?;
        let index = self.u32("a pid's index")?;
        let serial = self.u32("a pid's serial")?;
        Ok(Group::Process(Pid::from_parts(node, index, serial)))
    }

    /// A record's calls, measurement, bytes and blocks.
    fn figures(&mut self) -> Result<[u64; 4], ArchiveError> {
        Ok([
            self.varint("calls")?,
            self.varint("a measurement")?,
            self.varint("bytes")?,
            self.varint("blocks")?,
        ])
    }
}

/// The profile being read.
#[derive(Default)]
struct State {
    trace_type: Option<TraceType>,
    strings: Vec<String>,
    functions: Vec<Function>,
    function_table: Vec<Function>,
    runs: Vec<Run>,
    processes: Vec<ProcessRecord>,
    traces: Vec<FunctionTrace>,
    /// The number of entries each trace announced.
    counts: Vec<u64>,
    /// The trace the next entry goes to (those before are full).
    filling: usize,
    percentiles: Vec<Percentiles>,
    nodes: Vec<PathNode>,
    tree_entries: Vec<PathEntry>,
    event_logs: Vec<EventLog>,
    /// The number of events each log announced.
    event_counts: Vec<u64>,
    /// The log the next event goes to (those before are full).
    event_filling: usize,
    /// Bytes of strings copied into records so far (a string is stored once and named by
    /// many records).
    copied: u64,
    /// The depth of each call path read so far.
    depths: Depths,
    /// Sample mode's records read so far.
    samples: samples::Reader,
}

impl State {
    /// Counts `bytes` more of strings copied into records, at offset `at`: an archive that
    /// names its strings so often that the profile would exhaust memory is refused
    /// ([`limits::check_named`]).
    fn copy(&mut self, bytes: u64, at: u64) -> Result<(), ArchiveError> {
        limits::check_named(&mut self.copied, bytes, at)
    }

    /// Decodes one record of a section of `tag` (a known tag other than END).
    fn record(&mut self, tag: u64, p: &mut Payload<'_>) -> Result<(), ArchiveError> {
        let start = p.offset();
        match tag {
            tag::META => {
                if self.trace_type.is_some() {
                    return Err(p.corrupt(start, "a second trace type"));
                }
                let code = p.varint("the trace type")?;
                self.trace_type = Some(match code {
                    0 => TraceType::CallCount,
                    1 => TraceType::CallTime,
                    2 => TraceType::CallMemory,
                    _ => {
                        return Err(
                            p.corrupt(start, format_args!("an unknown trace type, {code},"))
                        );
                    }
                });
            }
            tag::STRINGS => {
                let len = p.varint("a string's length")?;
                let (all, pos) = (p.bytes, p.pos);
                let bytes = usize::try_from(len)
                    .ok()
                    .and_then(|len| all.get(pos..pos.checked_add(len)?))
                    .ok_or_else(|| {
                        p.corrupt(
                            start,
                            format_args!(
                                "a string of {len} bytes runs past the end of the records"
                            ),
                        )
                    })?;
                let at = p.offset();
                let s = std::str::from_utf8(bytes).map_err(|e| {
                    p.corrupt(at + e.valid_up_to() as u64, "a string that is not UTF-8")
                })?;
                self.strings.push(s.to_owned());
                p.pos += bytes.len();
            }
            tag::FUNCTIONS => {
                let module = p.string("a function's module", &self.strings)?;
                let name = p.string("a function's name", &self.strings)?;
                let arity = p.u8("a function's arity")?;
                let file = p.string("a function's file", &self.strings)?;
                let line = p.u32("a function's line")?;
                self.copy((module.len() + name.len() + file.len()) as u64, p.offset())?;
                self.functions.push(Function {
                    module,
                    name,
                    arity,
                    file,
                    line,
                });
            }
            tag::FUNCTION_TABLE => {
                let f = p.function("a function table entry", &self.functions)?;
                self.copy(function_bytes(&f), p.offset())?;
                self.function_table.push(f);
            }
            tag::RUNS => {
                let program = p.string("a run's program", &self.strings)?;
                self.copy(program.len() as u64, p.offset())?;
                let started_unix_ms = p.varint("a run's start")?;
                let duration_ns = p.varint("a run's duration")?;
                let count = p.varint("a run's node count")?;
                let mut nodes = Vec::new();
                for _ in 0..count {
                    nodes.push(p.u32("a run's node")?);
                }
                self.runs.push(Run {
                    program,
                    started_unix_ms,
                    duration_ns,
                    nodes,
                    run_queue: None,
                });
            }
            tag::RUN_QUEUE => {
                let run = p.varint("a run-queue record's run")?;
                let ran_ns = p.varint("a run-queue record's time run")?;
                let waited_ns = p.varint("a run-queue record's time waited")?;
                let threads = p.u32("a run-queue record's thread count")?;
                let exited = p.u32("a run-queue record's exited threads")?;
                let known = self.runs.len();
                let Some(into) = usize::try_from(run).ok().and_then(|r| self.runs.get_mut(r))
                else {
                    return Err(p.corrupt(
                        start,
                        format_args!(
                            "a run-queue record of run {run}, but only {known} come before it"
                        ),
                    ));
                };
                if into.run_queue.is_some() {
                    return Err(p.corrupt(
                        start,
                        format_args!("a second run-queue record of run {run}"),
                    ));
                }
                into.run_queue = Some(runtime::trace::SnapshotRunQueue {
                    ran_ns,
                    waited_ns,
                    threads,
                    exited,
                });
            }
            tag::PROCESSES => {
                let Group::Process(pid) = p.group("a process's pid")? else {
                    return Err(p.corrupt(start, "a process without a pid"));
                };
                let name = p.optional_string("a process's name", &self.strings)?;
                let initial_call = p.string("a process's initial call", &self.strings)?;
                self.copy(
                    (initial_call.len() + name.as_ref().map_or(0, String::len)) as u64,
                    p.offset(),
                )?;
                let run = p.u32("a process's run")?;
                self.processes.push(ProcessRecord {
                    pid,
                    name,
                    initial_call,
                    run,
                });
            }
            tag::TRACES => {
                let function = p.function("a trace's function", &self.functions)?;
                self.copy(function_bytes(&function), p.offset())?;
                let count = p.varint("a trace's entry count")?;
                self.traces.push(FunctionTrace {
                    function,
                    entries: Vec::new(),
                });
                self.counts.push(count);
            }
            tag::ENTRIES => {
                let group = p.group("an entry's group")?;
                let [calls, measurement, bytes, blocks] = p.figures()?;
                loop {
                    let (Some(trace), Some(&count)) = (
                        self.traces.get_mut(self.filling),
                        self.counts.get(self.filling),
                    ) else {
                        return Err(p.corrupt(
                            start,
                            format_args!(
                                "an entry beyond the {} that the TRACES sections announce",
                                self.counts.iter().fold(0u64, |a, &c| a.saturating_add(c))
                            ),
                        ));
                    };
                    if (trace.entries.len() as u64) < count {
                        trace.entries.push(Entry {
                            group,
                            calls,
                            measurement,
                            bytes,
                            blocks,
                        });
                        break;
                    }
                    self.filling += 1;
                }
            }
            tag::PERCENTILES | tag::PROCESS_PERCENTILES => {
                let group = if tag == tag::PERCENTILES {
                    Group::All
                } else {
                    match p.group("a percentile's process")? {
                        // Those of every process together are PERCENTILES': a writer would
                        // move it there, so it would not read back where it was.
                        Group::All => {
                            return Err(p.corrupt(
                                start,
                                "a percentile of every process together (group 0), which \
                                 belongs in PERCENTILES,",
                            ));
                        }
                        group => group,
                    }
                };
                let function = p.function("a percentile's function", &self.functions)?;
                self.copy(function_bytes(&function), p.offset())?;
                let calls = p.varint("calls")?;
                let p50_ns = p.varint("p50")?;
                let p90_ns = p.varint("p90")?;
                let p99_ns = p.varint("p99")?;
                let max_ns = p.varint("max")?;
                self.percentiles.push(Percentiles {
                    group,
                    function,
                    calls,
                    p50_ns,
                    p90_ns,
                    p99_ns,
                    max_ns,
                });
            }
            tag::TREE_NODES => {
                let parent = match p.varint("a path's parent")? {
                    0 => None,
                    v => Some(u32::try_from(v - 1).map_err(|_| {
                        p.corrupt(
                            start,
                            format_args!("a path's parent is {}, more than 32 bits", v - 1),
                        )
                    })?),
                };
                let function = p.u32("a path's function")?;
                let depth = self.depths.push(parent);
                if depth > MAX_PATH_DEPTH {
                    return Err(p.corrupt(
                        start,
                        format_args!(
                            "call path {} is {depth} frames deep, more than the \
                             {MAX_PATH_DEPTH} an archive may hold (tprof writes no deeper path)",
                            self.nodes.len()
                        ),
                    ));
                }
                self.nodes.push(PathNode { parent, function });
            }
            tag::TREE_ENTRIES => {
                let group = p.group("a path entry's group")?;
                let node = p.u32("a path entry's node")?;
                let [calls, measurement, bytes, blocks] = p.figures()?;
                self.tree_entries.push(PathEntry {
                    group,
                    node,
                    calls,
                    measurement,
                    bytes,
                    blocks,
                });
            }
            tag::EVENT_LOGS => {
                let group = p.group("an event log's group")?;
                let dropped = p.varint("an event log's dropped count")?;
                let count = p.varint("an event log's event count")?;
                self.event_logs.push(EventLog {
                    group,
                    events: Vec::new(),
                    dropped,
                });
                self.event_counts.push(count);
            }
            tag::EVENTS => {
                let delta = p.varint("an event's time")?;
                let code_at = p.offset();
                let code = p.varint("an event's function")?;
                let function = u32::try_from(code >> 1).map_err(|_| {
                    p.corrupt(
                        code_at,
                        format_args!("an event's function is {}, more than 32 bits", code >> 1),
                    )
                })?;
                let kind = if code & 1 == 0 {
                    EventKind::Enter
                } else {
                    EventKind::Leave
                };
                loop {
                    let (Some(log), Some(&count)) = (
                        self.event_logs.get_mut(self.event_filling),
                        self.event_counts.get(self.event_filling),
                    ) else {
                        return Err(p.corrupt(
                            start,
                            format_args!(
                                "an event beyond the {} that the EVENT_LOGS sections announce",
                                self.event_counts
                                    .iter()
                                    .fold(0u64, |a, &c| a.saturating_add(c))
                            ),
                        ));
                    };
                    if (log.events.len() as u64) < count {
                        let previous = log.events.last().map_or(0, |e| e.ts_ns);
                        log.events.push(Event {
                            ts_ns: previous.wrapping_add(delta),
                            function,
                            kind,
                        });
                        break;
                    }
                    self.event_filling += 1;
                }
            }
            tag::SAMPLE_SOURCES
            | tag::SAMPLE_FRAMES
            | tag::SAMPLE_STACKS
            | tag::SAMPLE_THREADS
            | tag::SAMPLE_MAPPINGS
            | tag::SAMPLES
            | tag::SAMPLE_LOST_FREES
            | tag::SAMPLE_CPU
            | tag::SAMPLE_CPU_THREADS
            | tag::SAMPLE_CPU_ASIDE
            | tag::SAMPLE_CALLEES
            | tag::SAMPLE_BEFORE => {
                let cx = samples::Context {
                    strings: &self.strings,
                    functions: self.function_table.len(),
                    named: &mut self.copied,
                };
                self.samples.record(tag, p, cx)?;
            }
            _ => return Err(p.corrupt(start, format_args!("a record of unknown kind {tag}"))),
        }
        Ok(())
    }

    /// The profile, once END (at `end`) is read.
    fn finish(self, end: u64) -> Result<Profile, ArchiveError> {
        let Some(trace_type) = self.trace_type else {
            return Err(ArchiveError::Corrupt {
                at: end,
                what: "the archive has no META section".to_owned(),
            });
        };
        let missing = self
            .traces
            .iter()
            .zip(&self.counts)
            .fold(0u64, |sum, (t, &c)| {
                sum.saturating_add(c.saturating_sub(t.entries.len() as u64))
            });
        if missing > 0 {
            return Err(ArchiveError::Corrupt {
                at: end,
                what: format!(
                    "the TRACES sections announce {missing} entries more than the ENTRIES \
                     sections hold"
                ),
            });
        }
        let missing = self
            .event_logs
            .iter()
            .zip(&self.event_counts)
            .fold(0u64, |sum, (log, &c)| {
                sum.saturating_add(c.saturating_sub(log.events.len() as u64))
            });
        if missing > 0 {
            return Err(ArchiveError::Corrupt {
                at: end,
                what: format!(
                    "the EVENT_LOGS sections announce {missing} events more than the EVENTS \
                     sections hold"
                ),
            });
        }
        // Those of every process together first, then each process's, in the order read: the
        // order the writer writes them in (PERCENTILES before PROCESS_PERCENTILES), whatever
        // order the sections came in, so that what is read is written back as it was.
        let mut percentiles = self.percentiles;
        percentiles.sort_by_key(|p| p.group != Group::All);
        Ok(Profile {
            trace_type,
            functions: self.traces,
            percentiles,
            processes: self.processes,
            function_table: self.function_table,
            call_tree: CallTree {
                nodes: self.nodes,
                entries: self.tree_entries,
            },
            event_logs: self.event_logs,
            meta: Meta { runs: self.runs },
            // A view preference, not data: not kept in an archive.
            outside_in_tables: false,
            samples: self.samples.finish(end)?,
        })
    }
}
