//! `tprof report --callers FUNC`: who called a function in a profile file's samples
//! ([`crate::sample_report::callers`], Julia's `Profile.callers`), its frames shown as the
//! report's options say.

use std::path::Path;

use super::{CommandError, has_sampler, output, read_profile, warn_once};
use crate::sample_report::{PrintOptions, callers as callers_of};
use crate::samples::SamplerKind;

/// `tprof report --callers FUNC`: who called `function` (named as the report names frames:
/// `module::name/arity`, `module::name` or `name`) in the samples of the profile file
/// `input`, with counts, the most first, written to `out` (standard output when `None` or
/// `-`):
///
/// ```text
/// Callers of `fnv_hash` in the cpu samples (count: timer periods), the most first:
/// Count File:Line; Function
///     6 src/crunch.rs:3; app::crunch/0
/// ```
///
/// A caller is the nearest frame above the function that `samples` show (by default the
/// plumbing of the runtime, tokio and std is folded, so a traced function calls the code it
/// runs, not tokio's frames between them); `--focus` counts only the samples with a frame it
/// matches, `--hide` and `--crate` fold frames as in the report. The samples of one sampler
/// are counted: [`sampler`](PrintOptions::sampler)'s, else the profile's first of CPU, wall
/// and allocation samples (their counts are of different units).
///
/// # Errors
///
/// As [`read_profile`]; [`CommandError::Input`] for a profile without samples;
/// [`CommandError::Usage`] for a focus or hide pattern that is not a regular expression, a
/// sampler the profile has no samples of, or when no sample has a caller of `function`
/// (a name no frame has, a frame only ever at the top of its stacks, or folded);
/// [`CommandError::Output`] when `out` cannot be written.
pub fn callers(
    input: &Path,
    function: &str,
    samples: &PrintOptions,
    out: Option<&Path>,
) -> Result<(), CommandError> {
    let profile = read_profile(input)?;
    let has = profile.samples.samplers();
    let Some(&first) = has.first() else {
        return Err(CommandError::input(
            input,
            "the profile has no samples: callers are counted in samples (`tprof run`'s \
             sample or alloc mode)",
        ));
    };
    let kind = samples.sampler.unwrap_or(first);
    has_sampler(&profile, kind)?;
    samples
        .filters()
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    warn_once(&profile);
    let options = samples.clone().sampler(Some(kind));
    let who = callers_of(&profile, function, &options);
    if who.is_empty() {
        return Err(CommandError::Usage(format!(
            "no {kind} sample has a caller of `{function}`: name a frame as the report does \
             (`module::name/arity`, `module::name` or `name`); a frame only ever at the top \
             of its stacks has none, and a folded one (see --native, --crate, --hide) shows \
             in none"
        )));
    }
    let mut text = format!(
        "Callers of `{function}` in the {kind} samples (count: {}), the most first:\n\
         Count File:Line; Function\n",
        unit(kind)
    );
    let counts: Vec<String> = who.iter().map(|c| rounded(c.count).to_string()).collect();
    let width = counts.iter().map(String::len).max().unwrap_or(0).max(5);
    for (c, count) in who.iter().zip(&counts) {
        let place = match (&c.file, c.line) {
            (Some(file), Some(line)) => format!("{file}:{line}; "),
            (Some(file), None) => format!("{file}; "),
            (None, _) => String::new(),
        };
        text.push_str(&format!("{count:>width$} {place}{}\n", c.function));
    }
    output::write_text(&text, out)
}

/// What a count of `kind`'s samples is, as the report says it.
fn unit(kind: SamplerKind) -> &'static str {
    match kind {
        SamplerKind::Cpu => "timer periods",
        SamplerKind::Wall => "process-ticks",
        SamplerKind::Alloc => "bytes, estimated",
    }
}

/// A weight as the report prints it: whole, ties to even; a negative or NaN one as 0.
fn rounded(weight: f64) -> u64 {
    weight.round_ties_even() as u64
}
