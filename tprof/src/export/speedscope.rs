//! `speedscope`: speedscope's own file format
//! (<https://www.speedscope.app/file-format-schema.json>), opened by dropping the file on
//! <https://speedscope.app> or with the `speedscope` command.
//!
//! # Mapping
//!
//! - `shared.frames`: every function on some path, once: `name` is `module::name`, `file` and
//!   `line` where it is defined (left out when unknown).
//! - `profiles`: one `"sampled"` profile per process, named by its registered name (with its
//!   pid where other processes share the name), else its pid ([`Profile::labels`];
//!   `all processes` for call_count), in pid order. Its
//!   `samples` are the process's call paths (from [`stacks()`]) as frame indices,
//!   outermost first as speedscope wants them; `weights` the path's own (exclusive) figure:
//!   calls (unit `none`, call_count), nanoseconds (`nanoseconds`, call_time) or bytes
//!   (`bytes`, call_memory; not words: see the `weight` module). Paths weighing 0 are left
//!   out. `startValue` is 0 and `endValue` the sum of the weights, the process's total.
//!   A profile without call paths gives each function as a path of one.
//! - `name` says what was measured (and of which program, when the profile knows), and for
//!   call_time the note of the threads' waits on the OS's run queue when they were large
//!   (`Note: the OS kept the program's threads waiting to run for ...`, as the text report
//!   says it), `exporter` is `tprof` and its version, `activeProfileIndex` 0: the first
//!   process.
//!
//! A process whose paths all weigh 0 has no profile, so an empty trace gives an empty
//! `profiles` list (which speedscope refuses to open: there is nothing to show).
//!
//! # Sampled profiles
//!
//! A profile of samples ([`Profile::samples`]) is written as its samples, in time order, so
//! that speedscope's *Time Order* view shows them as they were taken and its *Left Heavy* and
//! *Sandwich* views sum them:
//!
//! - `profiles`: first one `"sampled"` profile of every process, `all processes`, whose
//!   samples start with their process as a frame (its label; `(outside processes)` for CPU
//!   time outside any process); then one per process (and one for `(outside processes)`),
//!   in pid order, named by its label. A profile with both CPU and wall samples has these
//!   for each sampler, CPU first, named with the sampler (`cpu: all processes`).
//! - `samples`: each sample's stack as frame indices, outermost first (traced functions
//!   `module::name` with their file and line, native frames by their function with their file
//!   and line when known), and for a wall sample its process's state as a last frame
//!   (`[receive]`). Consecutive samples with the same stack (and state, and process) are one:
//!   their weights summed, so the file stays as small as the changes it shows.
//! - `weights` and `unit`: **nanoseconds**: CPU time for CPU samples (the CPU time each
//!   stands for: its weight times the period asked), and for wall samples wall time summed
//!   over processes (a process-tick times the tick), rounded. `endValue` is their sum.
//! - `name` says what was sampled at which rate asked, and for CPU samples the distinct
//!   samples per CPU-second taken (`tprof cpu samples at 999 Hz asked (412 per CPU-second
//!   taken)`), of which program, how many samples were dropped because the sample buffer was
//!   full (the `all processes` profile's name says it too), and each warning of what the CPU
//!   samples could not see (`Warning: ...`).
//! - `tprof.cpu` (a field speedscope ignores; the schema allows it): what the CPU samples
//!   could see ([`CpuTruth`](crate::samples::CpuTruth)): per rate asked the mechanism, why
//!   the fallback, the share captured, the distinct samples per CPU-second, and each sampled
//!   thread's CPU time, the CPU its samples stand for and its samples; the summary lines and
//!   the warnings. Left out when the sources carry no coverage.

use std::collections::HashMap;
use std::io::Write;

use serde::Serialize;

use super::ExportError;
use super::stacks::Stacks;
use super::weight::{frame_name, speedscope_unit, weight};
use crate::{Function, Group, Profile};

mod sampled;

/// The `$schema` every speedscope file names.
const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// A speedscope file.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct File {
    #[serde(rename = "$schema")]
    schema: &'static str,
    shared: Shared,
    profiles: Vec<SampledProfile>,
    name: String,
    active_profile_index: usize,
    exporter: String,
    /// tprof's own metadata: what the CPU samples could see.
    #[serde(skip_serializing_if = "Option::is_none")]
    tprof: Option<Metadata>,
}

/// What a speedscope file says beyond speedscope's fields.
#[derive(Debug, Serialize)]
struct Metadata {
    cpu: crate::samples::CpuTruth,
}

/// What the profiles share: the frames.
#[derive(Debug, Serialize)]
struct Shared {
    frames: Vec<Frame>,
}

/// One frame: a function.
#[derive(Debug, Serialize)]
struct Frame {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

/// One process's paths.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SampledProfile {
    #[serde(rename = "type")]
    kind: &'static str,
    name: String,
    unit: &'static str,
    start_value: u64,
    end_value: u64,
    samples: Vec<Vec<usize>>,
    weights: Vec<u64>,
}

/// Writes `profile` as a speedscope file.
pub(super) fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    if super::sampled::is_sampled(profile) {
        return write_file(out, &sampled::file(profile));
    }
    let unit = speedscope_unit(profile.trace_type);
    let mut frames: Vec<Frame> = Vec::new();
    let mut frame_index: HashMap<&Function, usize> = HashMap::new();
    let mut profiles: Vec<SampledProfile> = Vec::new();
    // The profile of each process, or past `grouped::MANY` processes, of each group of them
    // (by initial call): an index into `profiles`.
    let mut profile_of: HashMap<Result<usize, Group>, usize> = HashMap::new();
    let groups = super::grouped::Groups::of(profile);
    let labels = profile.labels();
    Stacks::of(profile).for_each(|stack| {
        let value = weight(profile.trace_type, stack);
        if value == 0 {
            return;
        }
        let sample: Vec<usize> = stack
            .frames
            .iter()
            .map(|&function| {
                *frame_index.entry(function).or_insert_with(|| {
                    frames.push(Frame {
                        name: frame_name(function),
                        file: Some(function.file.clone()).filter(|f| !f.is_empty()),
                        line: Some(function.line).filter(|&l| l > 0),
                    });
                    frames.len() - 1
                })
            })
            .collect();
        let lane = match (stack.group, &groups) {
            (Group::Process(pid), Some(groups)) => groups.group(pid).ok_or(stack.group),
            (group, _) => Err(group),
        };
        let i = *profile_of.entry(lane).or_insert_with(|| {
            let name = match (lane, &groups) {
                (Ok(g), Some(groups)) => groups.name(g).to_owned(),
                (Err(group), _) => labels.get(group).into_owned(),
                (Ok(_), None) => String::new(),
            };
            profiles.push(SampledProfile {
                kind: "sampled",
                name,
                unit,
                start_value: 0,
                end_value: 0,
                samples: Vec::new(),
                weights: Vec::new(),
            });
            profiles.len() - 1
        });
        if let Some(p) = profiles.get_mut(i) {
            p.samples.push(sample);
            p.weights.push(value);
            p.end_value = p.end_value.saturating_add(value);
        }
    });
    let mut name = format!("tprof {}", profile.trace_type);
    if let Some(run) = profile.meta.runs.first().filter(|r| !r.program.is_empty()) {
        name.push_str(" of ");
        name.push_str(&run.program);
    }
    if let Some(groups) = &groups {
        name.push_str(&super::grouped::note(profile.processes.len(), groups));
    }
    if let Some(note) = super::run_queue_note(profile) {
        name.push_str(" — ");
        name.push_str(&note);
    }
    let file = File::new(frames, profiles, name);
    write_file(out, &file)
}

impl File {
    /// A file of these frames and profiles, named `name`, showing the first profile.
    fn new(frames: Vec<Frame>, profiles: Vec<SampledProfile>, name: String) -> File {
        File {
            schema: SCHEMA,
            shared: Shared { frames },
            profiles,
            name,
            active_profile_index: 0,
            exporter: format!("tprof {}", env!("CARGO_PKG_VERSION")),
            tprof: None,
        }
    }
}

/// Writes `file` as JSON, and a newline.
fn write_file(out: &mut dyn Write, file: &File) -> Result<(), ExportError> {
    serde_json::to_writer(&mut *out, file)?;
    out.write_all(b"\n")?;
    Ok(())
}
