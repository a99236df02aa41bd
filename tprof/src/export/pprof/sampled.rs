//! The `pprof` message of a sampled profile (the mapping: the parent module's docs,
//! *Sampled profiles*).

use std::collections::HashMap;

use super::{Function, Label, Line, Location, Mapping, Profile, Sample, Strings, ValueType};
use crate::export::sampled::{self, NO_STACK, OUTSIDE, Root};
use crate::samples::{SampleFrame, SampleSet, SamplerKind, WaitState};

/// What one pprof sample gathers: the samples of one sampler, root, thread, state and stack.
type SampleKey = (
    SamplerKind,
    Root,
    Option<u32>,
    Option<WaitState>,
    Option<u32>,
);

/// Go's heap profile's sample types, in its order: what was allocated, what is still in use.
const HEAP_TYPES: [(&str, &str); 4] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
];

/// The frames a heap profile asks pprof to drop, with what they call: the standard library's
/// allocation entry points and raw vectors' growth.
const HEAP_DROP_FRAMES: &str =
    "<?alloc::(alloc|raw_vec)::.*|.*::(allocate|allocate_zeroed|grow|grow_zeroed)";

/// `profile`'s samples as a `perftools.profiles.Profile` message. A profile with allocation
/// samples is a heap profile, as Go writes one: its allocation samples only (a merge's other
/// samples are left out, and the comments say so), with Go's four sample types
/// ([`HEAP_TYPES`]), `inuse_space` by default (`alloc_space` when nothing is in use).
pub(super) fn to_proto(profile: &crate::Profile) -> Profile {
    let set = &profile.samples;
    let mut strings = Strings::new();
    let mut kinds = sampled::samplers(set);
    let heap = kinds.contains(&SamplerKind::Alloc);
    if heap {
        kinds = vec![SamplerKind::Alloc];
    }
    let mut sample_type = Vec::new();
    if heap {
        for (ty, unit) in HEAP_TYPES {
            sample_type.push(ValueType {
                r#type: strings.intern(ty),
                unit: strings.intern(unit),
            });
        }
    } else {
        sample_type.push(ValueType {
            r#type: strings.intern("samples"),
            unit: strings.intern("count"),
        });
        for kind in &kinds {
            sample_type.push(ValueType {
                r#type: strings.intern(kind.name()),
                unit: strings.intern("nanoseconds"),
            });
        }
    }
    // Go opens a heap profile on `inuse_space`; a profile in which nothing is in use (a
    // finished program freed everything) opens on `alloc_space` instead, not on a total of 0.
    let in_use = set
        .samples
        .iter()
        .any(|s| s.live && s.weight > 0.0 && sampled::sampler(set, s) == SamplerKind::Alloc);
    let main = if heap && in_use {
        sample_type[3].clone()
    } else if heap {
        sample_type[1].clone()
    } else {
        sample_type.get(1).unwrap_or(&sample_type[0]).clone()
    };
    let period_type = if heap {
        ValueType {
            r#type: strings.intern("space"),
            unit: strings.intern("bytes"),
        }
    } else {
        main.clone()
    };
    let period = kinds
        .first()
        .and_then(|kind| set.sources.iter().find(|s| s.sampler == *kind))
        .map_or(1, |s| match s.alloc_rate {
            Some(runtime::sample::AllocRate::Bytes(bytes)) => {
                i64::try_from(bytes).unwrap_or(i64::MAX)
            }
            Some(runtime::sample::AllocRate::SampleRate(_)) => 1,
            None => s.period_ns().round() as i64,
        });
    let names: HashMap<runtime::Pid, &str> = profile
        .processes
        .iter()
        .filter_map(|p| Some((p.pid, p.name.as_deref()?)))
        .collect();
    let keys = LabelKeys {
        process: strings.intern("process"),
        pid: strings.intern("pid"),
        thread: strings.intern("thread"),
        state: strings.intern("state"),
    };
    let mut locations = Locations::new(profile, &mut strings);
    let table = sampled::stack_frames(set);
    let mut index: HashMap<SampleKey, usize> = HashMap::new();
    // Each pprof sample and its values (summed as floats, rounded at the end).
    let mut samples: Vec<(Sample, Vec<f64>)> = Vec::new();
    for s in &set.samples {
        let kind = sampled::sampler(set, s);
        if heap && kind != SamplerKind::Alloc {
            continue;
        }
        let root = Root::of(s);
        let state = sampled::state_of(set, s);
        let key = (kind, root, s.thread, state, s.stack);
        let i = *index.entry(key).or_insert_with(|| {
            let location_id = match s.stack {
                // pprof leaves a sample of no location out of its totals.
                None => vec![locations.no_stack(&mut strings)],
                Some(_) => sampled::frames_of(&table, s.stack)
                    .iter()
                    .rev()
                    .map(|&frame| locations.of(frame, &mut strings))
                    .collect(),
            };
            let mut label = Vec::new();
            match root {
                Root::Process(pid) => {
                    let pid_text = pid.to_string();
                    let name = names.get(&pid).copied().unwrap_or(&pid_text);
                    label.push(text_label(keys.process, name, &mut strings));
                    label.push(text_label(keys.pid, &pid_text, &mut strings));
                }
                Root::Outside => label.push(text_label(keys.process, OUTSIDE, &mut strings)),
            }
            if let Some(thread) = sampled::thread_label(set, s) {
                label.push(text_label(keys.thread, &thread, &mut strings));
            }
            if let Some(state) = state {
                label.push(text_label(keys.state, state.name(), &mut strings));
            }
            let sample = Sample {
                location_id,
                value: vec![0; sample_type.len()],
                label,
            };
            samples.push((sample, vec![0.0; sample_type.len()]));
            samples.len() - 1
        });
        let values = &mut samples[i].1;
        if heap {
            let objects = s.objects();
            values[0] += objects;
            values[1] += s.weight;
            if s.live {
                values[2] += objects;
                values[3] += s.weight;
            }
        } else {
            let column = 1 + kinds.iter().position(|k| *k == kind).unwrap_or(0);
            values[0] += 1.0;
            values[column] += sampled::weight_ns(set, s);
        }
    }
    let sample = samples
        .into_iter()
        .map(|(mut sample, values)| {
            sample.value = values.iter().map(|v| v.round() as i64).collect();
            sample
        })
        .collect();

    let mut comment = vec![strings.intern(&format!("tprof {}", sampled::describe(set)))];
    if heap {
        comment.push(strings.intern(
            "alloc: estimated allocations and bytes (each sample's inverse probability); \
             inuse: those of the blocks not freed when the profile was taken",
        ));
        if let Some(note) = crate::alloc_sites::lost_frees_note(set) {
            comment.push(strings.intern(&note));
        }
        if set.sources.iter().any(|s| s.sampler != SamplerKind::Alloc) {
            comment.push(strings.intern(
                "CPU and wall samples of this profile are left out: export them with \
                 `tprof report --sampler cpu` (or wall)",
            ));
        }
    }
    for kind in kinds.iter().filter(|k| **k != SamplerKind::Alloc) {
        comment.push(strings.intern(&format!(
            "{}: nanoseconds of {} (each sample's weight times its period)",
            kind.name(),
            sampled::measure(*kind)
        )));
    }
    if let Some(note) = sampled::dropped_note(set) {
        comment.push(strings.intern(&note));
    }
    if !heap {
        // What the CPU samples could see: the mechanism, the share captured, the rate taken
        // beside the rate asked, and each warning.
        for line in sampled::truth_lines(set) {
            comment.push(strings.intern(&line));
        }
    }
    let drop_frames = if heap {
        strings.intern(HEAP_DROP_FRAMES)
    } else {
        0
    };
    let started_ms = profile.meta.runs.first().map_or(0, |r| r.started_unix_ms);
    let Locations {
        function,
        location,
        mapping,
        ..
    } = locations;
    Profile {
        default_sample_type: main.r#type,
        period_type: Some(period_type),
        period,
        sample_type,
        sample,
        mapping,
        location,
        function,
        string_table: strings.table,
        // The standard library's allocation machinery, below the code that allocated: pprof
        // leaves it out, so that `-top` names the allocating code.
        drop_frames,
        keep_frames: 0,
        time_nanos: i64::try_from(started_ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX),
        duration_nanos: i64::try_from(duration_ns(set)).unwrap_or(i64::MAX),
        comment,
    }
}

/// How long `set` sampled: per run, its longest source (a run's nodes sample side by side),
/// summed over the runs.
fn duration_ns(set: &SampleSet) -> u64 {
    let mut longest: HashMap<u32, u64> = HashMap::new();
    for s in &set.sources {
        let d = longest.entry(s.run).or_default();
        *d = (*d).max(s.duration_ns);
    }
    longest.values().fold(0u64, |sum, d| sum.saturating_add(*d))
}

/// The label keys (indices into the string table).
#[derive(Clone, Copy)]
struct LabelKeys {
    process: i64,
    pid: i64,
    thread: i64,
    state: i64,
}

/// A label of `key` with the text `value`.
fn text_label(key: i64, value: &str, strings: &mut Strings) -> Label {
    Label {
        key,
        str: strings.intern(value),
        num: 0,
        num_unit: 0,
    }
}

/// A function of the profile: a traced one (its index in the function table) or a native one
/// (its name and file).
#[derive(PartialEq, Eq, Hash)]
enum FunctionKey<'a> {
    Traced(u32),
    Native(&'a str, Option<&'a str>),
    /// A native frame with no name: its address.
    Unnamed(u64),
    /// What an empty stack is shown as.
    NoStack,
}

/// The locations, functions and mappings being built: a location per frame of the sample
/// set that some sample names, a function per traced function or native function name and
/// file, a mapping per distinct executable mapping.
struct Locations<'a> {
    profile: &'a crate::Profile,
    /// The location id of each frame, once made.
    of_frame: Vec<Option<u64>>,
    /// The location id of an empty stack, once made.
    no_stack: Option<u64>,
    functions: HashMap<FunctionKey<'a>, u64>,
    function: Vec<Function>,
    location: Vec<Location>,
    /// By start address, ids from 1.
    mapping: Vec<Mapping>,
}

impl<'a> Locations<'a> {
    /// Ready to make `profile`'s locations, its mappings made (each distinct one once).
    fn new(profile: &'a crate::Profile, strings: &mut Strings) -> Locations<'a> {
        let mut maps: Vec<_> = profile.samples.mappings.iter().collect();
        maps.sort_by(|a, b| {
            (a.start, a.limit, a.offset, &a.file).cmp(&(b.start, b.limit, b.offset, &b.file))
        });
        maps.dedup_by(|a, b| {
            (a.start, a.limit, a.offset, &a.file) == (b.start, b.limit, b.offset, &b.file)
        });
        let mapping = maps
            .into_iter()
            .enumerate()
            .map(|(i, m)| Mapping {
                id: i as u64 + 1,
                memory_start: m.start,
                memory_limit: m.limit,
                file_offset: m.offset,
                filename: strings.intern(&m.file),
                build_id: 0,
                // The frames come named: pprof need not look for the binaries.
                has_functions: true,
                has_filenames: true,
                has_line_numbers: true,
                has_inline_frames: false,
            })
            .collect();
        Locations {
            profile,
            of_frame: vec![None; profile.samples.frames.len()],
            no_stack: None,
            functions: HashMap::new(),
            function: Vec::new(),
            location: Vec::new(),
            mapping,
        }
    }

    /// The id of the mapping `address` is in, or 0: the last one starting at or before it, if
    /// it ends after it.
    fn mapping_of(&self, address: u64) -> u64 {
        let after = self.mapping.partition_point(|m| m.memory_start <= address);
        after
            .checked_sub(1)
            .map(|i| &self.mapping[i])
            .filter(|m| address < m.memory_limit)
            .map_or(0, |m| m.id)
    }

    /// The location id of `frame`, made at its first use.
    fn of(&mut self, frame: u32, strings: &mut Strings) -> u64 {
        if let Some(Some(id)) = self.of_frame.get(frame as usize) {
            return *id;
        }
        let profile = self.profile;
        let id = self.location.len() as u64 + 1;
        let location = match profile.samples.frames.get(frame as usize) {
            Some(SampleFrame {
                function: Some(f),
                line: sampled_line,
                ..
            }) => {
                let known = profile.function_table.get(*f as usize);
                let function_id = self.function(FunctionKey::Traced(*f), strings, |strings| {
                    let name = sampled::frame_name(profile, frame, false);
                    (
                        strings.intern(&name),
                        strings.intern(&known.map_or(name.clone(), crate::Function::mfa)),
                        strings.intern(known.map_or("", |k| k.file.as_str())),
                        known.map_or(0, |k| i64::from(k.line)),
                    )
                });
                Location {
                    id,
                    mapping_id: 0,
                    address: 0,
                    // The line the samples were at, else the function's own.
                    line: vec![Line {
                        function_id,
                        line: sampled_line.or(known.map(|k| k.line)).map_or(0, i64::from),
                    }],
                    is_folded: false,
                }
            }
            Some(native) => {
                let key = if native.name.is_empty() {
                    FunctionKey::Unnamed(native.address)
                } else {
                    FunctionKey::Native(native.name.as_str(), native.file.as_deref())
                };
                let function_id = self.function(key, strings, |strings| {
                    let name = strings.intern(&sampled::frame_name(profile, frame, false));
                    let file = strings.intern(native.file.as_deref().unwrap_or(""));
                    (name, name, file, 0)
                });
                Location {
                    id,
                    mapping_id: self.mapping_of(native.address),
                    address: native.address,
                    line: vec![Line {
                        function_id,
                        line: native.line.map_or(0, i64::from),
                    }],
                    is_folded: false,
                }
            }
            None => Location {
                id,
                mapping_id: 0,
                address: 0,
                line: Vec::new(),
                is_folded: false,
            },
        };
        self.location.push(location);
        if let Some(slot) = self.of_frame.get_mut(frame as usize) {
            *slot = Some(id);
        }
        id
    }

    /// The location id of an empty stack: one location, of a function named [`NO_STACK`].
    fn no_stack(&mut self, strings: &mut Strings) -> u64 {
        let function_id = self.function(FunctionKey::NoStack, strings, |strings| {
            let name = strings.intern(NO_STACK);
            (name, name, 0, 0)
        });
        if let Some(id) = self.no_stack {
            return id;
        }
        let id = self.location.len() as u64 + 1;
        self.no_stack = Some(id);
        self.location.push(Location {
            id,
            mapping_id: 0,
            address: 0,
            line: vec![Line {
                function_id,
                line: 0,
            }],
            is_folded: false,
        });
        id
    }

    /// The id of the function `key`, made by `make` (name, system name, file, start line) at
    /// its first use.
    fn function(
        &mut self,
        key: FunctionKey<'a>,
        strings: &mut Strings,
        make: impl FnOnce(&mut Strings) -> (i64, i64, i64, i64),
    ) -> u64 {
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.function.len() as u64 + 1;
        let (name, system_name, filename, start_line) = make(strings);
        self.function.push(Function {
            id,
            name,
            system_name,
            filename,
            start_line,
        });
        self.functions.insert(key, id);
        id
    }
}
