//! `pprof`: gzipped `profile.proto` (`perftools.profiles.Profile`), read by `go tool pprof`,
//! pprof's web UI, speedscope and most continuous profilers.
//!
//! The messages are written by hand here, as plain structs with `prost` derives that mirror
//! `profile.proto` field for field (tag numbers included): no `protoc`, no build script. They
//! are public so that a program can decode an export again
//! (`Profile::decode(gunzipped_bytes)`).
//!
//! # Mapping
//!
//! - `sample_type`: `calls/count` first, then for call_time `time/nanoseconds`, for
//!   call_memory `alloc_space/bytes` and `alloc_objects/count` (allocations).
//!   `default_sample_type` and `period_type` (with `period` 1) are the type the trace type
//!   measures: `time`, `alloc_space`, or `calls` for call_count.
//! - `sample`: one per process and call path (from [`stacks()`](crate::export::stacks())), with the
//!   path's own (exclusive) figures as `value`, one per sample type, and its `location_id`s
//!   **leaf first** (pprof's order: the path's last function first). Labels: `process`, the
//!   registered name else the pid (the name alone, even where processes share it, so that
//!   `-tagfocus process=worker` keeps every worker), and `pid`, the pid as it
//!   prints (`<1.5.0>`; none for call_count's group of all processes). `go tool pprof
//!   -tagfocus process=worker` keeps one process, `-tagroot process` splits by process.
//!   Samples whose values are all 0 are left out. A profile without call paths gives each
//!   function as a path of one.
//! - `function`: one per function, ids from 1: `name` is `module::name`, `system_name`
//!   `module::name/arity` (tprof's MFA), `filename` and `start_line` where it is defined.
//! - `location`: one per function, with the same id, and one `line` naming that function
//!   and its definition's line (the profile does not know the lines of the calls).
//! - `mapping`: none (the functions are not addresses in a binary).
//! - `string_table[0]` is `""`, as the format requires; `time_nanos` is when the (first) run
//!   started, `duration_nanos` how long profiling ran (the runs' sum), when known; a
//!   `comment` says what was measured and, for call_time, what [`crate::format()`] says of the
//!   waits on the OS's run queue when they were large ([`crate::Profile::run_queue`]).
//!
//! # Sampled profiles
//!
//! A profile of samples ([`crate::Profile::samples`]) is written as its samples, as `go tool
//! pprof` reads CPU profiles:
//!
//! - `sample_type`: `samples/count` (how many samples were taken), then `cpu/nanoseconds`
//!   for CPU samples (CPU time: each sample's weight, `1 + timer overruns`, times the timer's
//!   period) and `wall/nanoseconds` for wall samples (wall time summed over processes: each
//!   sample's weight, the processes it stands for, times the tick). A profile of one sampler
//!   has one of the two; a merge of both has both, each sample valued in its own.
//!   `default_sample_type` and `period_type` are that nanoseconds type, `period` the first
//!   source's period in nanoseconds.
//! - `sample`: one per sampler, process, thread, state and stack, the samples of each summed
//!   (linear in the samples). `location_id`s leaf first. Labels: `process` (the registered
//!   name, else the pid; `(outside processes)` for CPU time outside any process), `pid` (none
//!   outside processes), `thread` (`node-worker/4242`: the name and the OS thread id, or the
//!   id alone; CPU samples) and `state` (wall samples: `running`, `receive`, ...). So
//!   `-tagfocus process=worker`, `-tagroot process` and `-tags` work as for trace profiles.
//! - `location`: one per frame some sample names, ids from 1. A traced frame has no address
//!   and no mapping, and one `line`: its function at the line the samples were at in it
//!   ([`SampleFrame::line`](crate::samples::SampleFrame::line)), else at the line it is
//!   defined on; so `go tool pprof -list` puts them on their lines. A native frame
//!   has its instruction `address`, the [`Mapping`] that address falls in (or 0), and one
//!   `line`: its function at its line (0 when unknown). A sample with no frame at all has one
//!   location, `(no stack)` (pprof leaves samples without locations out of its totals).
//! - `function`: one per traced function (`name` `module::name`, `system_name`
//!   `module::name/arity`, `filename`, `start_line`), and one per native function name and
//!   file (`start_line` 0: unknown; a frame with no name is named by its address).
//! - `mapping`: each executable mapping of the sample set once, by start address, with
//!   `memory_start`, `memory_limit`, `file_offset` and `filename`, marked as having functions,
//!   file names and line numbers (pprof need not find the binary to name them).
//! - `duration_nanos`: how long the sources sampled, on the wall clock (per run, its longest
//!   source; summed over runs), so that pprof's `Total samples = X (Y%)` is the CPU time the
//!   samples stand for over that; `time_nanos` when the first run started; `comment`s say what
//!   was sampled at which rate asked (and, for CPU samples, the distinct samples per
//!   CPU-second taken), what each type weighs, how many samples were dropped because the
//!   sample buffer was full, and what the CPU samples could see: the mechanism, the share of
//!   the sampled threads' CPU time captured, and each warning ([`SampleSet::cpu_truth`]:
//!   `go tool pprof -comments` prints them).
//!
//! [`SampleSet::cpu_truth`]: crate::samples::SampleSet::cpu_truth

use std::collections::HashMap;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;

use super::ExportError;
use super::stacks::Stacks;
use super::weight::frame_name;
use crate::{Group, TraceType};

mod sampled;

/// `perftools.profiles.Profile`: the whole profile.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// What each sample's values are, in order.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples: a call path and its values.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// Binaries the locations are in (none here).
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// Locations, referred to by samples by id.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions, referred to by locations by id.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string the profile uses; the other fields hold indices into it. Index 0 is `""`.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Frames to drop (a regular expression; index into the string table).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Frames to keep (a regular expression; index into the string table).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the profile was taken, in nanoseconds since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long profiling ran, in nanoseconds.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What was sampled.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// The sampling period, in `period_type` units.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form comments (indices into the string table).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type to show by default (index into the string table: its `type`).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `ValueType`: what a value is, and in which unit.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// The name (index into the string table), e.g. `time`.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// The unit (index into the string table), e.g. `nanoseconds`.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`: one call path and what was measured on it.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// The path's locations, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per [`Profile::sample_type`].
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels: `process` and `pid`; for samples, `thread` and `state` too.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Label`: a key with a string or a number.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// The key (index into the string table).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// A string value (index into the string table), or 0.
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// A numeric value, when `str` is 0.
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// The unit of `num` (index into the string table).
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// `Mapping`: a binary the addresses are in.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// Its id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Where it starts in memory.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// Where it ends in memory.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// Where in the file it was mapped from.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// The binary's path (index into the string table).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// The binary's build id (index into the string table).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Whether its functions are known.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// Whether its file names are known.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Whether its line numbers are known.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Whether its inlined frames are known.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// `Location`: a place in the code, as the functions (inlined ones first) and lines there.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Its id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The [`Mapping`] it is in, or 0.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// Its address, or 0.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// The functions and lines at it.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    /// Whether it stands for several addresses.
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// `Line`: a function and a line in it.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// The [`Function`]'s id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// The line in the source file.
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// `Function`: a function.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Its id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its name as people read it (index into the string table).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Its name as the system knows it (index into the string table).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Its source file (index into the string table).
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// The line it starts on.
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

impl Profile {
    /// The string at index `i` of the string table (`""` when out of range).
    pub fn string(&self, i: i64) -> &str {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.string_table.get(i))
            .map_or("", String::as_str)
    }
}

/// The string table being built: each string once, `""` at 0.
#[derive(Debug)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut strings = Strings {
            table: Vec::new(),
            index: HashMap::new(),
        };
        strings.intern("");
        strings
    }

    /// The index of `s`, adding it if new.
    fn intern(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = i64::try_from(self.table.len()).unwrap_or(i64::MAX);
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// `profile` as a `perftools.profiles.Profile` message (see the module docs for the mapping).
pub fn to_proto(profile: &crate::Profile) -> Profile {
    if super::sampled::is_sampled(profile) {
        return sampled::to_proto(profile);
    }
    let mut samples = Vec::new();
    let mut proto = build(profile, &mut |sample| samples.push(sample.clone()));
    proto.sample = samples;
    proto
}

/// The profile of a trace profile, but its samples, each given to `each` as it is made (one
/// `Sample` reused: no allocation per sample).
fn build(profile: &crate::Profile, each: &mut dyn FnMut(&Sample)) -> Profile {
    let mut strings = Strings::new();
    let mut sample_type = vec![ValueType {
        r#type: strings.intern("calls"),
        unit: strings.intern("count"),
    }];
    match profile.trace_type {
        TraceType::CallCount => {}
        TraceType::CallTime => sample_type.push(ValueType {
            r#type: strings.intern("time"),
            unit: strings.intern("nanoseconds"),
        }),
        TraceType::CallMemory => {
            sample_type.push(ValueType {
                r#type: strings.intern("alloc_space"),
                unit: strings.intern("bytes"),
            });
            sample_type.push(ValueType {
                r#type: strings.intern("alloc_objects"),
                unit: strings.intern("count"),
            });
        }
    }
    let main = match profile.trace_type {
        TraceType::CallCount => sample_type[0].clone(),
        TraceType::CallTime | TraceType::CallMemory => sample_type[1].clone(),
    };
    let process_key = strings.intern("process");
    let pid_key = strings.intern("pid");

    let mut functions: Vec<Function> = Vec::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut ids: HashMap<&crate::Function, u64> = HashMap::new();
    let mut labels: HashMap<Group, Vec<Label>> = HashMap::new();
    let names: HashMap<runtime::Pid, &str> = profile
        .processes
        .iter()
        .filter_map(|p| Some((p.pid, p.name.as_deref()?)))
        .collect();
    let mut sample = Sample::default();
    Stacks::of(profile).for_each(|stack| {
        let value = match profile.trace_type {
            TraceType::CallCount => &[stack.measurement][..],
            TraceType::CallTime => &[stack.calls, stack.measurement],
            TraceType::CallMemory => &[stack.calls, stack.bytes, stack.blocks],
        };
        if value.iter().all(|&v| v == 0) {
            return;
        }
        sample.value.clear();
        sample
            .value
            .extend(value.iter().map(|&v| i64::try_from(v).unwrap_or(i64::MAX)));
        sample.location_id.clear();
        let location_id = stack.frames.iter().rev().map(|&f| {
            *ids.entry(f).or_insert_with(|| {
                let id = functions.len() as u64 + 1;
                functions.push(Function {
                    id,
                    name: strings.intern(&frame_name(f)),
                    system_name: strings.intern(&f.mfa()),
                    filename: strings.intern(&f.file),
                    start_line: i64::from(f.line),
                });
                locations.push(Location {
                    id,
                    mapping_id: 0,
                    address: 0,
                    line: vec![Line {
                        function_id: id,
                        line: i64::from(f.line),
                    }],
                    is_folded: false,
                });
                id
            })
        });
        sample.location_id.extend(location_id);
        let label = labels.entry(stack.group).or_insert_with(|| {
            let name = match stack.group {
                Group::All => crate::profile::ALL_PROCESSES.to_owned(),
                Group::Process(pid) => names
                    .get(&pid)
                    .map_or_else(|| pid.to_string(), |n| (*n).to_owned()),
            };
            let mut label = vec![Label {
                key: process_key,
                str: strings.intern(&name),
                num: 0,
                num_unit: 0,
            }];
            if let Group::Process(pid) = stack.group {
                label.push(Label {
                    key: pid_key,
                    str: strings.intern(&pid.to_string()),
                    num: 0,
                    num_unit: 0,
                });
            }
            label
        });
        sample.label.clear();
        sample.label.extend_from_slice(label);
        each(&sample);
    });
    let mut comment = vec![strings.intern(&format!("tprof {}", profile.trace_type))];
    if let Some(note) = super::run_queue_note(profile) {
        comment.push(strings.intern(&note));
    }
    let started_ms = profile.meta.runs.first().map_or(0, |r| r.started_unix_ms);
    let duration_ns = profile
        .meta
        .runs
        .iter()
        .fold(0u64, |sum, r| sum.saturating_add(r.duration_ns));
    Profile {
        default_sample_type: main.r#type,
        period_type: Some(main),
        period: 1,
        sample_type,
        sample: Vec::new(),
        mapping: Vec::new(),
        location: locations,
        function: functions,
        string_table: strings.table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: i64::try_from(started_ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX),
        duration_nanos: i64::try_from(duration_ns).unwrap_or(i64::MAX),
        comment,
    }
}

/// `profile`'s samples as Go's goroutine profile (what `/debug/pprof/goroutine` serves): one
/// sample type, `goroutine/count`, each sample counting the processes at its path and state
/// (labels as [`to_proto`] gives them), a period of 1 goroutine. For a census: every process
/// sampled once.
pub fn goroutine_proto(profile: &crate::Profile) -> Profile {
    let mut proto = to_proto(profile);
    let mut intern = |text: &str| -> i64 {
        match proto.string_table.iter().position(|s| s == text) {
            Some(i) => i64::try_from(i).unwrap_or(i64::MAX),
            None => {
                proto.string_table.push(text.to_owned());
                i64::try_from(proto.string_table.len() - 1).unwrap_or(i64::MAX)
            }
        }
    };
    let count = ValueType {
        r#type: intern("goroutine"),
        unit: intern("count"),
    };
    let comment = intern(
        "tprof: every process once, at the traced path it runs or waits in (goroutine/count: \
         processes; the state is a label)",
    );
    // The first value of a sampled profile's samples is how many it gathers.
    for sample in &mut proto.sample {
        sample.value.truncate(1);
    }
    proto.default_sample_type = count.r#type;
    proto.sample_type = vec![count.clone()];
    proto.period_type = Some(count);
    proto.period = 1;
    proto.comment = vec![comment];
    let unknown: u64 = profile
        .samples
        .sources
        .iter()
        .map(|s| s.before_sampling)
        .sum();
    if unknown > 0 {
        let note = intern(&format!(
            "tprof: the traced path of {unknown} of these processes is unknown: their current or \
             last poll began before sampling began (a wall sample session records where a \
             process runs or waits from the first poll it measures)"
        ));
        proto.comment.push(note);
    }
    proto
}

/// Writes `proto` gzipped, as [`write`] writes a profile.
///
/// # Errors
///
/// [`ExportError::Io`] when writing fails.
pub fn write_proto(proto: &Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    let mut gz = GzEncoder::new(out, Compression::fast());
    gz.write_all(&proto.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}

/// Writes `profile` as gzipped `profile.proto`: a trace profile's samples encoded as they are
/// made, in their place among the fields (after `sample_type`), the bytes [`to_proto`]'s
/// encoding gives.
pub(super) fn write(profile: &crate::Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    // The fastest level, as Go's own profile writer uses: at 100,000 processes the default
    // level took half the export's time.
    let mut gz = GzEncoder::new(out, Compression::fast());
    if super::sampled::is_sampled(profile) {
        gz.write_all(&to_proto(profile).encode_to_vec())?;
    } else {
        let mut samples = Vec::new();
        let mut rest = build(profile, &mut |sample| {
            prost::encoding::message::encode(2, sample, &mut samples);
        });
        // Field 1, then the samples (field 2), then the others: a message's fields in the
        // order of their numbers, as prost encodes them.
        let first = Profile {
            sample_type: std::mem::take(&mut rest.sample_type),
            ..Profile::default()
        };
        gz.write_all(&first.encode_to_vec())?;
        gz.write_all(&samples)?;
        gz.write_all(&rest.encode_to_vec())?;
    }
    gz.finish()?;
    Ok(())
}
