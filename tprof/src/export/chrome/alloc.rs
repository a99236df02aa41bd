//! The allocation samples of a Chrome trace, drawn as allocations rather than as time: on a
//! process's `alloc samples` thread, an instant event (`"ph": "i"`, scope `t`) per allocation
//! sampled, named by its innermost frame, with `args` `size` (the allocation's bytes),
//! `bytes` (the bytes it stands for, estimated), `live` (still allocated when the profile was
//! taken), `location` and `stack` (its innermost [`STACK_FRAMES`] frames, innermost first);
//! and a counter (`"ph": "C"`, named [`COUNTER`]) of the bytes the process allocated so far,
//! estimated, drawn by Perfetto as a counter track.
//!
//! Bounded: past [`MAX_ALLOCATIONS`] allocation samples in the profile, only the heaviest
//! (by the bytes they stand for) get an instant and a counter point (the counter still sums
//! every sample), and `otherData` says how many were left out.

use std::borrow::Cow;

use super::file::{Args, Cutoff, Event, Scale};
use crate::Profile;
use crate::export::sampled::{self, NO_STACK};
use crate::samples::{SampleRecord, SamplerKind};

/// The most allocation samples a trace draws.
pub(super) const MAX_ALLOCATIONS: usize = 100_000;

/// The frames of an allocation's stack its instant names, innermost first.
pub(super) const STACK_FRAMES: usize = 8;

/// The name of the counter of bytes allocated.
pub(super) const COUNTER: &str = "allocated bytes (estimated)";

/// The `args` of an allocation's instant.
#[derive(Debug, serde::Serialize)]
pub(super) struct AllocArgs<'a> {
    /// The allocation's size, in bytes.
    size: u64,
    /// The bytes it stands for (its weight: an estimate).
    bytes: u64,
    /// Whether its block was still allocated when the profile was taken.
    live: bool,
    /// Where its innermost frame is, `file:line`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<&'a str>,
    /// Its innermost frames, innermost first, `;`-separated (`…` after the last when cut).
    stack: String,
}

/// Which allocation samples get drawn: past [`MAX_ALLOCATIONS`], the heaviest; and how many
/// are left out.
pub(super) fn cutoff(profile: &Profile, max: usize) -> (Cutoff, usize) {
    let set = &profile.samples;
    let weights: Vec<f64> = set
        .samples
        .iter()
        .filter(|s| sampled::sampler(set, s) == SamplerKind::Alloc)
        .map(|s| s.weight)
        .collect();
    Cutoff::of(weights, max)
}

/// What `otherData` says of allocations left out, if any were.
pub(super) fn left_out_note(left_out: usize, max: usize) -> Option<String> {
    (left_out > 0).then(|| {
        format!(
            "{left_out} allocation samples lighter than the {max} drawn were left out (the \
             counter `{COUNTER}` still sums them)"
        )
    })
}

/// Draws one lane's allocation `samples` (in time order) as thread `tid` of process `pid`:
/// an instant per sample `keep` keeps, and the counter at each. `frame` names a frame and
/// gives its location.
pub(super) fn draw<'f>(
    table: &[Vec<u32>],
    samples: &[&SampleRecord],
    (pid, tid): (u32, u32),
    keep: &mut Cutoff,
    frame: &dyn Fn(u32) -> (Cow<'f, str>, Option<&'f str>),
    sink: &mut dyn FnMut(Event<'_>),
) {
    let scale = Scale::timeline();
    let mut allocated = 0.0f64;
    let last = samples.len().saturating_sub(1);
    for (i, s) in samples.iter().enumerate() {
        allocated += s.weight;
        let kept = keep.keeps(s.weight);
        if !kept && i != last {
            continue;
        }
        let ts = Some(scale.us(s.time_ns));
        if kept {
            let frames = sampled::frames_of(table, s.stack);
            let (name, location) = match frames.last() {
                Some(&f) => frame(f),
                None => (NO_STACK.into(), None),
            };
            let mut stack: Vec<Cow<'f, str>> = frames
                .iter()
                .rev()
                .take(STACK_FRAMES)
                .map(|&f| frame(f).0)
                .collect();
            if frames.len() > STACK_FRAMES {
                stack.push("…".into());
            }
            sink(Event {
                name,
                ph: "i",
                pid,
                tid,
                cat: Some("tprof"),
                ts,
                dur: None,
                s: Some("t"),
                args: Args::Allocation(AllocArgs {
                    size: s.size,
                    bytes: s.weight.round() as u64,
                    live: s.live,
                    location,
                    stack: stack.join(";"),
                }),
            });
        }
        sink(Event {
            name: COUNTER.into(),
            ph: "C",
            pid,
            tid,
            cat: Some("tprof"),
            ts,
            dur: None,
            s: None,
            args: Args::Counter {
                bytes: allocated.round() as u64,
            },
        });
    }
}
