//! The `.tprof` archive: a [`Profile`] in a compact, versioned, checksummed binary file, read
//! back exactly, and [`merge`] to combine the profiles of several runs.
//!
//! ```
//! use tprof::{Profile, TraceType, archive};
//!
//! let profile = Profile::empty(TraceType::CallTime);
//! let mut bytes = Vec::new();
//! archive::write(&profile, &mut bytes).unwrap();
//! assert!(bytes.starts_with(archive::MAGIC));
//! assert_eq!(archive::read(&mut bytes.as_slice()).unwrap(), profile);
//! ```
//!
//! # Byte layout (version 2)
//!
//! An archive is a header and a sequence of sections; the last section is END.
//!
//! | bytes | field |
//! | --- | --- |
//! | 10 | the magic, [`MAGIC`]: `89 54 50 52 4F 46 0D 0A 1A 0A` (`\x89TPROF\r\n\x1a\n`; the high byte and the line ends catch a file mangled as text) |
//! | 2 | the format version, a little-endian `u16`: 1 for a profile without samples, 2 ([`VERSION`]) for one with samples |
//! | … | sections |
//!
//! Every section is framed the same way:
//!
//! | bytes | field |
//! | --- | --- |
//! | varint | tag (the table below) |
//! | varint | payload length `n`, in bytes |
//! | `n` | payload |
//! | 4 | CRC-32 (IEEE) of the tag, length and payload bytes, little-endian |
//!
//! A *varint* is an unsigned LEB128 integer (7 bits a byte, low bits first). A payload is a
//! sequence of records back to back, with no count: the records run to the end of the payload.
//! A table may span several consecutive sections of its tag (the writer starts a new one after
//! about 64 KiB), whose records append. A record only refers to records read before it.
//!
//! | tag | section | each record | refers to |
//! | --- | --- | --- | --- |
//! | 0 | END | the CRC-32 of every byte of the archive before this section's tag, 4 bytes little-endian (the only record; payload length 4) | |
//! | 1 | META | the trace type: varint 0 call_count, 1 call_time, 2 call_memory (exactly one META, one record) | |
//! | 2 | STRINGS | varint byte length, UTF-8 bytes: each distinct string once | |
//! | 3 | FUNCTIONS | module, name (string indices), arity, file (string index), line | STRINGS |
//! | 4 | FUNCTION_TABLE | a function index: [`Profile::function_table`], in order | FUNCTIONS |
//! | 5 | RUNS | program (string index), started_unix_ms, duration_ns, node count, nodes | STRINGS |
//! | 6 | PROCESSES | pid (*group*, below), name (0 none, `i + 1` string `i`), initial_call (string index), run | STRINGS |
//! | 7 | TRACES | a function index, its entry count: [`Profile::functions`], in order | FUNCTIONS |
//! | 8 | ENTRIES | group, calls, measurement, bytes, blocks: the entries of the TRACES, in order (the first trace's `count` entries, then the next trace's, …) | TRACES |
//! | 9 | PERCENTILES | a function index, calls, p50_ns, p90_ns, p99_ns, max_ns: the [`Profile::percentiles`] of every process together ([`Group::All`](crate::Group::All)), as older tprofs took them | FUNCTIONS |
//! | 10 | TREE_NODES | parent (0 none, `i + 1` node `i`), function (an index into the function table) | |
//! | 11 | TREE_ENTRIES | group, node, calls, measurement, bytes, blocks | |
//! | 16 | EVENT_LOGS | group, dropped, event count: [`Profile::event_logs`], in order | |
//! | 17 | EVENTS | time delta, function and kind: the events of the EVENT_LOGS, in order (the first log's `count` events, then the next log's, …) | EVENT_LOGS |
//! | 18 | PROCESS_PERCENTILES | group (a pid: 0 is refused, those of every process together being PERCENTILES'), a function index, calls, p50_ns, p90_ns, p99_ns, max_ns: the [`Profile::percentiles`] of each process, in order (a reader puts them after those of PERCENTILES, whatever the order of the sections) | FUNCTIONS |
//! | 12 | SAMPLE_SOURCES | run, node, sampler (0 cpu, 1 wall), hz, dropped (*float*), native_walked (0 or 1), duration_ns, capacity: the [`SampleSet::sources`](crate::samples::SampleSet::sources), in order | |
//! | 19 | SAMPLE_FRAMES | function (0 native, `i + 1` entry `i` of the function table), name (string index), file (0 none, `i + 1` string `i`), line (0 none, `l + 1` line `l`), address | FUNCTION_TABLE, STRINGS |
//! | 20 | SAMPLE_STACKS | parent (0 none, `d` the stack `d` before this one), frame (an index into the SAMPLE_FRAMES) | SAMPLE_FRAMES, SAMPLE_STACKS |
//! | 21 | SAMPLE_THREADS | source (an index into the SAMPLE_SOURCES), tid (its 32 bits), name (0 none, `i + 1` string `i`) | SAMPLE_SOURCES, STRINGS |
//! | 22 | SAMPLE_MAPPINGS | source, start, limit, offset, file (string index) | SAMPLE_SOURCES, STRINGS |
//! | 23 | SAMPLES | *flags*, then the fields they announce (below): [`SampleSet::samples`](crate::samples::SampleSet::samples), in order | SAMPLE_SOURCES, SAMPLE_THREADS, SAMPLE_STACKS |
//! | 24 | SAMPLE_LOST_FREES | source (an index into the SAMPLE_SOURCES), count: [`SampleSource::lost_frees`](crate::samples::SampleSource::lost_frees) of each source that lost any, in source order; a source without a record lost none | SAMPLE_SOURCES |
//! | 25 | SAMPLE_CPU | source (an index into the SAMPLE_SOURCES), mechanism (0 auto, 1 perf_events, 2 timers), fallback (0 none, `i + 1` string `i`: why), hz (the rate asked), thread count: [`SampleSource::cpu`](crate::samples::SampleSource::cpu) of each source that has it, in source order (each source at most once); a source without a record has none | SAMPLE_SOURCES, STRINGS |
//! | 26 | SAMPLE_CPU_THREADS | thread (an index into the SAMPLE_THREADS), cpu_ns, sampled_ns, samples, flags (bit 0 fallback, bit 1 unarmed; any other bit is an error): the rows of the SAMPLE_CPU records, in order (the first record's `count` rows, then the next one's, …) | SAMPLE_CPU, SAMPLE_THREADS |
//! | 27 | SAMPLE_CALLEES | sample (an index into the SAMPLES), node, index, serial: [`SampleRecord::callee`](crate::samples::SampleRecord::callee), the process a wall sample's process waited on in a call, of each sample that has one, in sample order | SAMPLES |
//! | 28 | SAMPLE_CPU_ASIDE | row (an index into the SAMPLE_CPU_THREADS rows of every record, in order), elsewhere, elsewhere_ns, stalls, stalled_ns: what [`ThreadCoverage`](crate::samples::ThreadCoverage) adds to a row — the samples of its thread that are of work the profile does not sample and the CPU time they stand for, the overflows its perf event lost and the CPU time they left in no sample — for each row where any of them is not zero, in row order (each row at most once); a row without a record has none of them | SAMPLE_CPU_THREADS |
//! | 29 | SAMPLE_BEFORE | source (an index into the SAMPLE_SOURCES), count: [`SampleSource::before_sampling`](crate::samples::SampleSource::before_sampling) of each source that has any, in source order; a source without a record has none | SAMPLE_SOURCES |
//! | 30 | RUN_QUEUE | run (an index into the RUNS), ran_ns, waited_ns, threads, exited: [`Run::run_queue`](crate::Run::run_queue) of each run that has it, in run order (each run at most once); a run without a record has none | RUNS |
//!
//! Every number is a varint (but the 8 bytes of a fractional *float*, under Samples); a
//! *string index* is an index into the STRINGS read so far, a
//! *function index* one into the FUNCTIONS read so far. A *group* is one varint `g`: 0 for
//! [`Group::All`](crate::Group::All), else a pid, `g - 1` being its node and two more varints
//! its index and serial. Tree nodes and tree entries are stored as the model holds them: the
//! archive does not check that a parent comes before its child, nor that a function or node
//! index is in range (the model's readers look them up with `get`).
//!
//! An event ([`Event`](crate::Event)) is two varints, usually 2 to 4 bytes in all:
//!
//! - the *time delta*: its `ts_ns` minus that of the event before it in its log (the first
//!   event of a log: minus 0), modulo 2<sup>64</sup> — a log is oldest first, so the delta is
//!   small; a log whose times go back still reads back exactly (that event costs 10 bytes);
//! - `function << 1 | kind`: its `function` (an index into [`Profile::function_table`], not
//!   checked, like a tree node's) shifted left by one, the low bit 0 for
//!   [`EventKind::Enter`](crate::EventKind::Enter) and 1 for
//!   [`EventKind::Leave`](crate::EventKind::Leave).
//!
//! ## Samples
//!
//! Sample mode's data ([`Profile::samples`]) takes the sample sections (tags 12 and 19 to
//! 28). A stack is stored once, as its innermost frame and the stack it extends (which comes
//! before it), and a frame once, so a sample names its whole stack with one index. Unlike the call tree's, every
//! reference of these sections is checked as it is read: an index must point at a record read
//! before it (a frame's function at an entry of the FUNCTION_TABLE), a stack is at most
//! [`MAX_PATH_DEPTH`] frames deep, and the strings they name count towards
//! [`MAX_NAMED_BYTES`]. The writer refuses a sample set that breaks them with
//! [`ArchiveError::Inconsistent`] or [`ArchiveError::TooLarge`], writing nothing.
//!
//! A *float* (a weight) is one varint `c`: an even `c` is the whole number `c >> 1` (so a CPU
//! sample's weight of 1 takes a byte); `c = 1` is followed by the 8 bytes of the IEEE 754
//! double, little-endian (any value, NaN and -0.0 included, reads back bit for bit).
//!
//! A sample is coded against the sample before it in the archive (before the first: source 0,
//! time 0, weight 1), usually in 8 to 12 bytes. Its *flags* are a varint: bits 0 to 2 its
//! [`WaitState`](crate::samples::WaitState) (0 none; 1 running, 2 runnable, 3 receive, 4
//! receive (timer), 5 call, 6 waiting, 7 exiting), and each bit above announces a field,
//! which follow in this order:
//!
//! | bit | field | without the bit |
//! | --- | --- | --- |
//! | 8 | source: an index into the SAMPLE_SOURCES | the source of the sample before |
//! | 3 | pid: node, index, serial | no process |
//! | 4 | thread: an index into the SAMPLE_THREADS | no thread |
//! | — | time: its `time_ns` minus the sample before's, modulo 2<sup>64</sup>, zigzag-coded (`d` as `2d` when positive, `-2d - 1` when negative), always there | |
//! | 7 | weight: a float | the weight of the sample before |
//! | 5 | stack: an index into the SAMPLE_STACKS | no stack |
//! | 6 | mailbox length | 0 |
//!
//! Any other bit set is an error: a later version that needs one bumps the version.
//!
//! The writer writes the sections in the order of the table (META first, END last) and leaves
//! out a table that has no record; a table that is absent is empty.
//!
//! ## Reading, and the compatibility rule
//!
//! [`read`] reads the sections as they come, checks each one's CRC before it decodes it, and
//! stops after END (it never reads past it). It holds at most one section's payload at a time;
//! a known section longer than 16 MiB is refused as corrupt without reading it, so a damaged
//! length never makes it allocate more than the input holds.
//!
//! Nor can a small file make the profile it reads, or the exports drawn from it, huge: the
//! reader refuses (as corrupt, at the offset where it goes over) a call path or sampled stack
//! deeper than [`MAX_PATH_DEPTH`] frames, and records that name more than [`MAX_NAMED_BYTES`]
//! (or 64 times the archive's size) of strings. The writer checks the same limits before it writes a byte
//! and refuses such a profile with [`ArchiveError::TooLarge`], so every archive it writes
//! reads back. Every other count in the format (a run's nodes, a trace's entries, a log's
//! events) is one of records that each take at least a byte of the file, and is never used
//! to reserve memory; a sample takes two bytes at least.
//!
//! **A reader skips every section whose tag it does not know** (it checks the CRC and goes
//! on). So a later version can add data in new sections without a format break: version 1
//! readers read a newer file that only adds sections, and ignore what they cannot show. Tags
//! 13 to 15 are kept for the data planned next — allocation samples, per-process runnable
//! wait and per-message queue wait (12, kept for the samples of a sampling mode, is now
//! theirs). The event logs (tags 16 and 17) came that way, without a version bump: a reader that predates them skips them and
//! reads the profile without its timelines, its flat figures and call tree intact, which is
//! all it could show anyway. A change that old readers
//! must not ignore — a field's meaning changes, a record gains a field, data without which the
//! rest would be misread — bumps [`VERSION`], and old readers refuse the file with
//! [`ArchiveError::UnsupportedVersion`]. Samples did: a profile of sample mode read without
//! its samples would be misread as one in which nothing ran. The writer writes the oldest
//! version that holds the profile, so a profile without samples is still a version-1 file,
//! byte for byte as before, which every tprof reads.
//!
//! ## Version history
//!
//! | version | change |
//! | --- | --- |
//! | 1 | The first format: the sections above but EVENT_LOGS and EVENTS. |
//! | 1 | EVENT_LOGS and EVENTS (tags 16 and 17) added, for [`Profile::event_logs`]: a new kind of section, which older version-1 readers skip, so the version stays 1; a profile without event logs is written byte for byte as before. |
//! | 1 | PROCESS_PERCENTILES (tag 18) added, for percentiles per process (those of every process together stay in PERCENTILES): a new kind of section, which older version-1 readers skip — they read the profile without its percentiles —, so the version stays 1; a profile without per-process percentiles is written byte for byte as before. |
//! | 2 | The sample sections (tags 12 and 19 to 23), for [`Profile::samples`]: a profile with samples is written as version 2, which version-1 readers refuse (they would show a sampled profile as empty); one without is written as version 1, byte for byte as before. Version 2 is version 1 and the sample sections. |
//! | 2 | SAMPLE_LOST_FREES (tag 24) added, for [`SampleSource::lost_frees`](crate::samples::SampleSource::lost_frees) (frees of sampled blocks the runtime lost, so that the in-use figures may over-count): a new kind of section, which older version-2 readers skip — they read every source as having lost none —, so the version stays 2; a profile that lost no free is written byte for byte as before. |
//! | 2 | SAMPLE_CPU and SAMPLE_CPU_THREADS (tags 25 and 26) added, for [`SampleSource::cpu`](crate::samples::SampleSource::cpu) (what a CPU profile's samples could see: the mechanism, and per thread its CPU time against the CPU its samples stand for): new kinds of section, which older version-2 readers skip — they read the samples without their coverage, and report them as they did before it was kept —, so the version stays 2; a profile without coverage is written byte for byte as before, and this reader reads an older archive's sources with none. |
//! | 2 | SAMPLE_CALLEES (tag 27) added, for [`SampleRecord::callee`](crate::samples::SampleRecord::callee) (whom a process in a call waits on): a new kind of section, which older version-2 readers skip — they read wall samples without their callees, as before they were kept —, so the version stays 2; a profile without callees is written byte for byte as before. |
//! | 2 | SAMPLE_CPU_ASIDE (tag 28) added, for [`ThreadCoverage`](crate::samples::ThreadCoverage)'s samples elsewhere (a sampled thread's samples of work the profile does not sample, left out of its figures) and its perf event's stalls (overflows lost and re-armed, whose CPU time is in no sample): a new kind of section, which older version-2 readers skip — they read the CPU figures without them, and say neither the summary's sentence on them nor the stall's warning —, so the version stays 2; a profile whose rows have none of them is written byte for byte as before, and this reader reads an older archive's rows with none. |
//! | 1 | RUN_QUEUE (tag 30) added, for [`Run::run_queue`](crate::Run::run_queue) (how long the program's threads ran and waited on the OS's run queue while a call_time profile was taken): a new kind of section, which older readers skip — they read the runs without it, and print no note on the waits —, so the version stays 1 (2 with samples); a profile without it is written byte for byte as before. |
//! | 2 | SAMPLE_BEFORE (tag 29) added, for [`SampleSource::before_sampling`](crate::samples::SampleSource::before_sampling) (samples taken in polls begun before sampling began, whose traced frames are unknown): a new kind of section, which older version-2 readers skip — they read every source as having none, and report the samples as before it was kept —, so the version stays 2; a profile without such samples is written byte for byte as before. |
//!
//! ## Adding a fixture when the version is bumped
//!
//! `tests/data/v<N>.tprof` (at the workspace root) holds the bytes a version-`N` writer wrote
//! for a fixed profile of `tprof/tests/archive.rs` — `fixture_profile()` for version 1,
//! `fixture_profile_with_samples()` (it and samples of every kind) for version 2 — and a test
//! reads each fixture and compares it with that profile, so a change that breaks old files
//! fails; the writer must still write each, byte for byte. When you bump [`VERSION`]:
//!
//! 1. add a line to the version history above;
//! 2. extend `fixture_profile()` with the new data if you like (the old fixtures must still
//!    read as the profile *without* it: give their tests the old form);
//! 3. run `cargo test -p tprof --test archive -- --ignored write_fixture` to write
//!    `tests/data/v<VERSION>.tprof`, and commit it beside the older ones;
//! 4. add a test that reads the new fixture, keep the ones for the older versions, and point
//!    the test that compares the writer's bytes with the newest fixture at the new file.
//!
//! Sections added without a bump get a fixture of their own beside the version's:
//! `tests/data/v1-events.tprof` holds `fixture_profile_with_events()` (the fixture profile
//! with event logs), written once by `cargo test -p tprof --test archive -- --ignored
//! write_events_fixture`; its tests check that it reads back, that the writer still writes
//! it, and that without its EVENT_LOGS and EVENTS sections it is `v1.tprof` byte for byte
//! (what a reader that predates them reads). `tests/data/v1-process-percentiles.tprof`
//! holds `fixture_profile_with_process_percentiles()` likewise, for PROCESS_PERCENTILES
//! (written by `write_process_percentiles_fixture`), and `tests/data/v2-lost-frees.tprof`
//! `fixture_profile_with_lost_frees()`, for SAMPLE_LOST_FREES (written by
//! `write_lost_frees_fixture`), and `tests/data/v2-cpu-coverage.tprof`
//! `fixture_profile_with_cpu_coverage()`, for SAMPLE_CPU and SAMPLE_CPU_THREADS (written by
//! `write_cpu_coverage_fixture`), and `tests/data/v2-cpu-aside.tprof`
//! `fixture_profile_with_cpu_aside()`, for SAMPLE_CPU_ASIDE (written by
//! `write_cpu_aside_fixture`), and `tests/data/v2-before-sampling.tprof`
//! `fixture_profile_with_before_sampling()`, for SAMPLE_BEFORE (written by
//! `write_before_sampling_fixture`).
//!
//! # Merging
//!
//! [`merge`] (or a [`Merger`], one input at a time) combines profiles of one trace type, each
//! holding one run or several, into one that holds all their runs; see [`merge`] for what is
//! summed and what is kept apart.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::{Profile, TraceType};

mod coverage;
mod decode;
mod encode;
mod limits;
mod merge;
mod samples;

pub use merge::{Merger, merge};

/// The bytes every archive starts with.
pub const MAGIC: &[u8] = b"\x89TPROF\r\n\x1a\n";

/// The newest format version: [`read`] reads versions 1 to this one, and [`write()`] writes
/// the oldest that holds the profile (1 for a profile without samples, so that a tprof that
/// predates samples reads it; this one for a profile with samples).
pub const VERSION: u16 = 2;

/// The format version an archive of `profile` is written in: the oldest that holds it.
fn version_for(profile: &Profile) -> u16 {
    if profile.samples.is_empty() { 1 } else { 2 }
}

/// The deepest call path an archive may hold, in frames: eight times the deepest the runtime
/// keeps ([`runtime::trace::STACK_CAPACITY`]). Every stack-shaped export draws each path whole, so
/// a deeper one would make them run out of memory.
pub const MAX_PATH_DEPTH: u32 = 1024;

/// The bytes of strings an archive's records may name in all, however short the archive: a
/// string is stored once and named by many records, each of which holds a copy once read. A
/// reader refuses an archive whose records name more than this or 64 times its size, whichever
/// is more (so a small crafted file cannot exhaust memory); the writer refuses a profile whose
/// records would name more than this, so that every archive it writes reads back.
pub const MAX_NAMED_BYTES: u64 = 1 << 30;

/// The longest payload of a known section a reader accepts, in bytes.
const MAX_SECTION_LEN: u64 = 16 << 20;

/// The payload size after which the writer starts a new section of the same table.
const CHUNK: usize = 64 << 10;

/// Section tags.
mod tag {
    pub(super) const END: u64 = 0;
    pub(super) const META: u64 = 1;
    pub(super) const STRINGS: u64 = 2;
    pub(super) const FUNCTIONS: u64 = 3;
    pub(super) const FUNCTION_TABLE: u64 = 4;
    pub(super) const RUNS: u64 = 5;
    pub(super) const PROCESSES: u64 = 6;
    pub(super) const TRACES: u64 = 7;
    pub(super) const ENTRIES: u64 = 8;
    pub(super) const PERCENTILES: u64 = 9;
    pub(super) const TREE_NODES: u64 = 10;
    pub(super) const TREE_ENTRIES: u64 = 11;
    // 13 to 15 are kept for the data planned next (see the compatibility rule).
    pub(super) const EVENT_LOGS: u64 = 16;
    pub(super) const EVENTS: u64 = 17;
    pub(super) const PROCESS_PERCENTILES: u64 = 18;
    // Sample mode's (version 2): 12 was kept for them; the tables they need took 19 to 23.
    pub(super) const SAMPLE_SOURCES: u64 = 12;
    pub(super) const SAMPLE_FRAMES: u64 = 19;
    pub(super) const SAMPLE_STACKS: u64 = 20;
    pub(super) const SAMPLE_THREADS: u64 = 21;
    pub(super) const SAMPLE_MAPPINGS: u64 = 22;
    pub(super) const SAMPLES: u64 = 23;
    // Added to version 2 without a bump (older readers skip it).
    pub(super) const SAMPLE_LOST_FREES: u64 = 24;
    pub(super) const SAMPLE_CPU: u64 = 25;
    pub(super) const SAMPLE_CPU_THREADS: u64 = 26;
    pub(super) const SAMPLE_CALLEES: u64 = 27;
    pub(super) const SAMPLE_CPU_ASIDE: u64 = 28;
    pub(super) const SAMPLE_BEFORE: u64 = 29;
    // Added to version 1 without a bump (older readers skip it).
    pub(super) const RUN_QUEUE: u64 = 30;

    /// The name of a known section, for messages.
    pub(super) fn name(tag: u64) -> Option<&'static str> {
        Some(match tag {
            END => "END",
            META => "META",
            STRINGS => "STRINGS",
            FUNCTIONS => "FUNCTIONS",
            FUNCTION_TABLE => "FUNCTION_TABLE",
            RUNS => "RUNS",
            PROCESSES => "PROCESSES",
            TRACES => "TRACES",
            ENTRIES => "ENTRIES",
            PERCENTILES => "PERCENTILES",
            TREE_NODES => "TREE_NODES",
            TREE_ENTRIES => "TREE_ENTRIES",
            EVENT_LOGS => "EVENT_LOGS",
            EVENTS => "EVENTS",
            PROCESS_PERCENTILES => "PROCESS_PERCENTILES",
            SAMPLE_SOURCES => "SAMPLE_SOURCES",
            SAMPLE_FRAMES => "SAMPLE_FRAMES",
            SAMPLE_STACKS => "SAMPLE_STACKS",
            SAMPLE_THREADS => "SAMPLE_THREADS",
            SAMPLE_MAPPINGS => "SAMPLE_MAPPINGS",
            SAMPLES => "SAMPLES",
            SAMPLE_LOST_FREES => "SAMPLE_LOST_FREES",
            SAMPLE_CPU => "SAMPLE_CPU",
            SAMPLE_CPU_THREADS => "SAMPLE_CPU_THREADS",
            SAMPLE_CALLEES => "SAMPLE_CALLEES",
            SAMPLE_CPU_ASIDE => "SAMPLE_CPU_ASIDE",
            SAMPLE_BEFORE => "SAMPLE_BEFORE",
            RUN_QUEUE => "RUN_QUEUE",
            _ => return None,
        })
    }
}

/// The code of a trace type in META.
fn trace_type_code(t: TraceType) -> u64 {
    match t {
        TraceType::CallCount => 0,
        TraceType::CallTime => 1,
        TraceType::CallMemory => 2,
    }
}

/// Why an archive could not be written or read.
#[derive(Debug)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The input does not start with [`MAGIC`]: it is some other kind of file.
    NotAnArchive {
        /// The bytes it starts with (at most as many as [`MAGIC`] has).
        found: Vec<u8>,
    },
    /// The archive is of a format version this reader does not know.
    UnsupportedVersion {
        /// The version the archive says it is.
        version: u16,
        /// The newest version this reader reads ([`VERSION`]).
        newest: u16,
    },
    /// The input ends before the archive does.
    Truncated {
        /// The offset, in bytes from the start, where the input ends.
        at: u64,
        /// What should have come there.
        expected: &'static str,
    },
    /// The archive is damaged: a checksum does not match, or what is there makes no sense.
    Corrupt {
        /// The offset, in bytes from the start, of the bad byte, or of the section whose
        /// checksum does not match.
        at: u64,
        /// What is wrong.
        what: String,
    },
    /// The profile holds more than an archive may: a record too large for a section (a
    /// string of more than 16 MiB), a call path deeper than [`MAX_PATH_DEPTH`], records that
    /// name more than [`MAX_NAMED_BYTES`] of strings.
    TooLarge {
        /// What is too large, and by how much.
        what: String,
        /// Its size (bytes, or frames for a path).
        len: u64,
        /// The most an archive may hold of it.
        limit: u64,
    },
    /// The profile contradicts itself where the archive relies on it, so it cannot be
    /// written: a sample of a stack the profile does not have, a stack that extends one that
    /// does not come before it, a frame of a function its table does not have, and so on.
    Inconsistent {
        /// What is wrong.
        what: String,
    },
    /// Reading or writing failed.
    Io(io::Error),
    /// [`read_file`] or [`write_file`] failed on this file.
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<ArchiveError>,
    },
}

impl ArchiveError {
    /// The offset in the archive the error is about, for [`Truncated`](Self::Truncated) and
    /// [`Corrupt`](Self::Corrupt) (also inside [`File`](Self::File)).
    pub fn offset(&self) -> Option<u64> {
        match self {
            ArchiveError::Truncated { at, .. } | ArchiveError::Corrupt { at, .. } => Some(*at),
            ArchiveError::File { source, .. } => source.offset(),
            _ => None,
        }
    }

    /// A [`File`](Self::File) error naming `path`.
    fn in_file(self, path: &Path) -> ArchiveError {
        ArchiveError::File {
            path: path.to_owned(),
            source: Box::new(self),
        }
    }
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchiveError::NotAnArchive { found } => write!(
                f,
                "not a .tprof archive: it starts with `{}`, where an archive starts with `{}`",
                found.escape_ascii(),
                MAGIC.escape_ascii()
            ),
            ArchiveError::UnsupportedVersion { version, newest } if version > newest => write!(
                f,
                "the archive is in format version {version}, and this tprof reads versions 1 \
                 to {newest}: read it with a newer tprof"
            ),
            ArchiveError::UnsupportedVersion { version, .. } => write!(
                f,
                "the archive says it is in format version {version}, which no tprof writes \
                 (versions start at 1): the file is damaged"
            ),
            ArchiveError::Truncated { at, expected } => write!(
                f,
                "the archive is cut short: it ends at byte {at}, where {expected} should \
                 follow (was it written completely?)"
            ),
            ArchiveError::Corrupt { at, what } => {
                write!(f, "the archive is damaged at byte {at}: {what}")
            }
            ArchiveError::TooLarge { what, .. } => {
                write!(f, "cannot archive the profile: {what}")
            }
            ArchiveError::Inconsistent { what } => {
                write!(
                    f,
                    "cannot archive the profile, which contradicts itself: {what}"
                )
            }
            ArchiveError::Io(e) => write!(f, "input/output error: {e}"),
            ArchiveError::File { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for ArchiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ArchiveError::Io(e) => Some(e),
            ArchiveError::File { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

impl From<io::Error> for ArchiveError {
    fn from(e: io::Error) -> ArchiveError {
        ArchiveError::Io(e)
    }
}

/// Why profiles could not be merged.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MergeError {
    /// There was no profile to merge.
    Empty,
    /// The profiles are not all of one trace type.
    MixedTypes {
        /// The trace type of the first profile.
        first: TraceType,
        /// The other trace type.
        other: TraceType,
        /// The index, from 0, of the first profile of the other type.
        index: usize,
        /// What the first profile is, as the message names it ([`profile_kind`]): `a
        /// call_time trace profile`, `a cpu sample profile`.
        first_kind: String,
        /// What the other profile is.
        other_kind: String,
    },
    /// A profile contradicts itself, so it cannot be merged: a process of a run it does not
    /// have, a call path of a function it does not list, and so on.
    Inconsistent {
        /// The index, from 0, of the profile.
        index: usize,
        /// What is wrong.
        what: String,
    },
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::Empty => f.write_str("nothing to merge: give at least one profile"),
            MergeError::MixedTypes {
                index,
                first_kind,
                other_kind,
                ..
            } => write!(
                f,
                "input {} is {other_kind}, but input 1 is {first_kind}: only profiles of one \
                 kind (one trace type, or samples) can be merged",
                index + 1
            ),
            MergeError::Inconsistent { index, what } => {
                write!(f, "cannot merge input {}: {what}", index + 1)
            }
        }
    }
}

impl std::error::Error for MergeError {}

/// What `profile` is, as a merge's error names it: `a cpu sample profile` (`a cpu and wall
/// sample profile`) for a profile with samples, else `a call_time trace profile`.
pub fn profile_kind(profile: &Profile) -> String {
    let samplers = profile.samples.samplers();
    if samplers.is_empty() {
        format!("a {} trace profile", profile.trace_type)
    } else {
        let names: Vec<&str> = samplers.iter().map(|k| k.name()).collect();
        format!("a {} sample profile", names.join(" and "))
    }
}

/// Writes `profile` to `out` as an archive of version [`VERSION`].
///
/// It writes as it goes, one section (at most about 64 KiB) at a time; pass a buffered writer
/// for a file.
///
/// # Errors
///
/// [`ArchiveError::Io`] when writing fails, [`ArchiveError::TooLarge`] for a profile that holds
/// more than an archive may (a string of more than 16 MiB, a path deeper than
/// [`MAX_PATH_DEPTH`], more than [`MAX_NAMED_BYTES`] of strings named): then nothing is written.
///
/// # Examples
///
/// ```
/// use tprof::archive;
/// use tprof::{Entry, Function, FunctionTrace, Group, Profile, TraceType};
///
/// let profile = Profile::new(
///     TraceType::CallCount,
///     vec![FunctionTrace {
///         function: Function {
///             module: "app".into(),
///             name: "handle".into(),
///             arity: 1,
///             file: "src/app.rs".into(),
///             line: 12,
///         },
///         entries: vec![Entry { group: Group::All, calls: 3, measurement: 3, bytes: 0, blocks: 0 }],
///     }],
/// );
/// let mut bytes = Vec::new();
/// archive::write(&profile, &mut bytes).unwrap();
/// assert_eq!(&bytes[..archive::MAGIC.len()], archive::MAGIC);
/// assert_eq!(archive::read(&mut bytes.as_slice()).unwrap(), profile);
/// ```
pub fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), ArchiveError> {
    encode::write(profile, out)
}

/// Reads an archive from `input`, up to and including its END section.
///
/// It reads the sections as they come, holding one section's payload at a time, and checks
/// each section's checksum and then the whole archive's. It does not buffer: pass a buffered
/// reader for a file. It never panics, whatever the input.
///
/// # Errors
///
/// [`ArchiveError::NotAnArchive`] when the input is not an archive,
/// [`ArchiveError::UnsupportedVersion`] when it is of a newer version,
/// [`ArchiveError::Truncated`] when it ends early, [`ArchiveError::Corrupt`] (with the offset)
/// when it is damaged, [`ArchiveError::Io`] when reading fails.
///
/// # Examples
///
/// ```
/// use tprof::{Profile, TraceType, archive};
///
/// let mut bytes = Vec::new();
/// archive::write(&Profile::empty(TraceType::CallMemory), &mut bytes).unwrap();
/// let profile = archive::read(&mut bytes.as_slice()).unwrap();
/// assert_eq!(profile.trace_type, TraceType::CallMemory);
///
/// // A damaged archive is an error that says where.
/// let last = bytes.len() - 1;
/// bytes[last] ^= 1;
/// let err = archive::read(&mut bytes.as_slice()).unwrap_err();
/// assert!(err.to_string().starts_with("the archive is damaged at byte"), "{err}");
///
/// let err = archive::read(&mut &b"{\"trace_type\": \"call_time\"}"[..]).unwrap_err();
/// assert!(err.to_string().starts_with("not a .tprof archive"), "{err}");
/// ```
pub fn read(input: &mut dyn Read) -> Result<Profile, ArchiveError> {
    decode::read(input)
}

/// Reads the archive in the file at `path`.
///
/// # Errors
///
/// As [`read`], and when the file cannot be opened; each error is an
/// [`ArchiveError::File`] that names the file.
pub fn read_file(path: &Path) -> Result<Profile, ArchiveError> {
    let file = File::open(path).map_err(|e| ArchiveError::Io(e).in_file(path))?;
    read(&mut BufReader::new(file)).map_err(|e| e.in_file(path))
}

/// Writes `profile` as an archive to the file at `path`.
///
/// A regular file (or none) is written beside it and renamed over it, so a failed write
/// leaves a file that was there as it was; a symlink is followed, the file it points to
/// written so and the link kept. Anything else — a device, a FIFO, a terminal — is written in
/// place, as any program writes to it, and stays what it is.
///
/// # Errors
///
/// As [`write()`], and when the file cannot be created or written (a full device:
/// `ENOSPC`); each error is an [`ArchiveError::File`] that names the file.
pub fn write_file(profile: &Profile, path: &Path) -> Result<(), ArchiveError> {
    write_file_as(path, |out| write(profile, out)).map_err(|e| e.in_file(path))
}

/// Writes the file at `path` with `write`, as [`write_file`] says: a regular file (or none,
/// or one a symlink points to) through a rename, anything else in place.
pub(crate) fn write_file_as<E: From<io::Error>>(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
        }
        _ => path.to_owned(),
    };
    let regular = match std::fs::metadata(&target) {
        Ok(m) => m.is_file(),
        Err(_) => true,
    };
    if !regular {
        let file = std::fs::OpenOptions::new().write(true).open(&target)?;
        let mut out = BufWriter::new(file);
        write(&mut out)?;
        return Ok(out.flush()?);
    }
    // Written beside it and renamed over it: a failed write leaves an existing file as it was.
    let mut partial = target.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let run = || -> Result<(), E> {
        let mut out = BufWriter::new(File::create(&partial)?);
        write(&mut out)?;
        out.into_inner().map_err(io::IntoInnerError::into_error)?;
        std::fs::rename(&partial, &target)?;
        Ok(())
    };
    run().inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })
}
