//! `folded`: folded stacks ("collapsed" stacks), the input of flamegraph.pl, inferno and
//! speedscope's collapsed-stack importer.
//!
//! # Mapping
//!
//! One line per process and call path, from [`stacks()`]:
//!
//! ```text
//! worker;app::handle;app::parse 1200
//! ```
//!
//! - The first frame is the process: its registered name (followed by its pid where other
//!   processes of the profile share the name: `worker_<1.5.0>`), else its pid
//!   ([`Profile::labels`]); `all_processes` for call_count, which has no per-process
//!   figures. Flame graphs thus split by process at their root.
//! - Then the path's functions, outermost first, each `module::name`. A profile without call
//!   paths gives each function as a path of one.
//! - The value is the path's own (exclusive) figure: calls (call_count), nanoseconds
//!   (call_time) or **bytes** (call_memory, not words: see the `weight` module). A line whose
//!   value is 0 is left out; every value is a positive integer, so a path's figure is the sum
//!   of its lines' values and a process's total is the sum over its lines.
//! - Frame names are made safe for the format: `;` (the frame separator) becomes `,`, and
//!   whitespace and control characters (a space separates the value; a newline ends the line)
//!   become `_`, so `<Parser as Iterator>::next` is written `<Parser_as_Iterator>::next`.
//!
//! An empty profile writes nothing.
//!
//! # Sampled profiles
//!
//! A profile of samples ([`Profile::samples`]) is written as its samples (the `sampled`
//! module): one line per distinct path of a root, its summed weight in **nanoseconds** (CPU
//! time for CPU samples; for wall samples, wall time summed over processes), rounded.
//!
//! ```text
//! worker;app::handle;app::parse;core::str::from_utf8 3003003
//! worker;app::serve;[receive] 10010010
//! (outside_processes);std::sys::pal::unix::thread::Thread::new::thread_start;tokio::runtime::park 1001001
//! (dropped_samples) 2002002
//! ```
//!
//! - The first frame is the process ([`Profile::labels`]), or `(outside_processes)` for CPU
//!   time outside any process; then the stack's frames, outermost first: traced functions as
//!   `module::name`, native frames by their function (else their address); a wall sample
//!   ends with its process's state in brackets (`[receive]`, `[running]`).
//! - Samples dropped because the sample buffer was full are one line,
//!   `(dropped_samples)`, of the nanoseconds they stood for: the format has no comments, and
//!   a flame graph then shows what share was lost.
//! - A profile with both CPU and wall samples starts each line with `cpu` or `wall`.
//! - What the CPU samples could see (the share of the sampled threads' CPU time they stand
//!   for, the rate taken, the warnings:
//!   [`SampleSet::cpu_truth`](crate::samples::SampleSet::cpu_truth)) has no place here: the
//!   format has no comments, and a line of CPU time no sample saw would be drawn as a frame
//!   that ran. `tprof report` and every other export say it.
//! - [`write_shown`](super::write_shown) (what `tprof report --format folded` and `tprof run
//!   --format folded` write) leaves out the frames and samples the sample report's options
//!   leave out ([`PrintOptions`](crate::sample_report::PrintOptions): by default the
//!   plumbing of the runtime, tokio and std is folded, each line counting at the frame
//!   above); [`write`](super::write) writes every frame.
//! - Lines come by root (in pid order, then outside processes, then the dropped samples), then
//!   in text order; paths with the same text (native frames of the same name at different
//!   addresses) are one line.

use std::collections::BTreeMap;
use std::io::Write;

use super::stacks::Stacks;
use super::weight::{frame_name, weight};
use super::{ExportError, sampled};
use crate::{Group, Profile};

/// Writes `profile` as folded stacks.
pub(super) fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    if sampled::is_sampled(profile) {
        let mut text = String::new();
        for (line, ns) in sampled::folded_paths(profile, false, frame_text) {
            text.push_str(&line);
            text.push(' ');
            text.push_str(&ns.to_string());
            text.push('\n');
        }
        out.write_all(text.as_bytes())?;
        return Ok(());
    }
    let names = profile.labels();
    let mut labels: BTreeMap<Group, String> = BTreeMap::new();
    let mut text = String::new();
    Stacks::of(profile).for_each(|stack| {
        let value = weight(profile.trace_type, stack);
        if value == 0 {
            return;
        }
        let label = labels
            .entry(stack.group)
            .or_insert_with(|| frame_text(&names.get(stack.group)));
        text.push_str(label);
        for function in &stack.frames {
            text.push(';');
            text.push_str(&frame_text(&frame_name(function)));
        }
        text.push(' ');
        text.push_str(&value.to_string());
        text.push('\n');
    });
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// `name` made safe as one frame of a folded line (see the module docs); never empty.
fn frame_text(name: &str) -> String {
    let text: String = name
        .chars()
        .map(|c| match c {
            ';' => ',',
            c if c.is_whitespace() || c.is_control() => '_',
            c => c,
        })
        .collect();
    if text.is_empty() {
        "_".to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::frame_text;

    #[test]
    fn frame_names_lose_separators_and_whitespace() {
        assert_eq!(frame_text("m::<T as Tr>::f"), "m::<T_as_Tr>::f");
        assert_eq!(frame_text("<[u8; 4] as A>::b"), "<[u8,_4]_as_A>::b");
        assert_eq!(frame_text("a\nb\tc\r"), "a_b_c_");
        assert_eq!(frame_text(""), "_");
        assert_eq!(frame_text("<1.5.0>"), "<1.5.0>");
    }
}
