//! `tprof report --callers FUNC`: the tree of a function's callers in a profile file's
//! samples ([`crate::sample_report::callers_tree`]; its first level is Julia's
//! `Profile.callers`), its frames shown as the report's options say.

use std::path::Path;

use super::{CommandError, has_sampler, output, read_profile, warn_once};
use crate::sample_report::{PrintOptions, callers_tree};
use crate::samples::SamplerKind;

/// `tprof report --callers FUNC`: the tree of the callers of `function` (named as the
/// report names frames: `module::name/arity`, `module::name` or `name`) in the samples of
/// the profile file `input`, outward, with counts, the most first, each caller followed by
/// its own callers one space further in; written to `out` (standard output when `None` or
/// `-`):
///
/// ```text
/// Callers of `parse` in the cpu samples (count: timer periods), the most first:
/// Count File:Line; Function
///     6 src/serve.rs:10; app::serve/0
///     6  src/main.rs:1; app::main/0
///     2 src/main.rs:1; app::main/0
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
    let who = callers_tree(&profile, function, &options);
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
    let counts: Vec<String> = who
        .iter()
        .map(|l| rounded(l.caller.count).to_string())
        .collect();
    let width = counts.iter().map(String::len).max().unwrap_or(0).max(5);
    for (l, count) in who.iter().zip(&counts) {
        let c = &l.caller;
        let place = match (&c.file, c.line) {
            (Some(file), Some(line)) => format!("{file}:{line}; "),
            (Some(file), None) => format!("{file}; "),
            (None, _) => String::new(),
        };
        let indent = " ".repeat(l.depth.saturating_sub(1));
        text.push_str(&format!("{count:>width$} {indent}{place}{}\n", c.function));
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
