//! What the pull endpoint's URLs give: CPU and allocation samples of the next seconds, and
//! every process at its path, as pprof or as text.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use runtime::NodeHandle;
use runtime::sample::{
    OpenSampleSession, PollMeasuringSession, Sample, SampleOptions, SampleSession, Sampler,
};
use runtime::trace::{ProcessSpec, TracePattern};

use super::Answer;
use crate::export::{self, Format};
use crate::{Profile, TraceType};

/// The CPU sampler's rate (Go's is 100 Hz; 99 keeps off the beat of periodic work).
const CPU_HZ: u32 = 99;

/// CPU samples of every process for `seconds`, as gzipped pprof.
pub(super) fn cpu(
    node: &NodeHandle,
    seconds: f64,
    cut: &Arc<AtomicBool>,
) -> Result<Vec<u8>, Answer> {
    let options = SampleOptions::new().sampler(Sampler::Cpu).hz(CPU_HZ);
    sampled(node, seconds, options, cut)
}

/// Allocation samples for `seconds`, as gzipped pprof; `503` without the counting allocator.
pub(super) fn heap(
    node: &NodeHandle,
    seconds: f64,
    cut: &Arc<AtomicBool>,
) -> Result<Vec<u8>, Answer> {
    if !runtime::heap::installed() {
        return Err(Answer::text(
            503,
            "the heap profile samples allocations in the counting allocator, which this \
             program does not use: install it with #[global_allocator] static ALLOC: \
             runtime::CountingAlloc = runtime::CountingAlloc::new();",
        ));
    }
    sampled(
        node,
        seconds,
        SampleOptions::new().sampler(Sampler::Alloc),
        cut,
    )
}

/// The node sampled for `seconds` with `options` (or until `cut`: the endpoint closing), as
/// gzipped pprof; a sampler that cannot run is `503`.
fn sampled(
    node: &NodeHandle,
    seconds: f64,
    options: SampleOptions,
    cut: &Arc<AtomicBool>,
) -> Result<Vec<u8>, Answer> {
    let profile = super::super::serve::sample_profile(node, seconds, options, Some(cut))
        .map_err(|why| Answer::text(503, format!("cannot sample: {why}")))?;
    pprof(&profile)
}

fn pprof(profile: &Profile) -> Result<Vec<u8>, Answer> {
    let mut out = Vec::new();
    export::write(Format::Pprof, profile, &mut out)
        .map_err(|e| Answer::text(500, format!("cannot write the profile: {e}")))?;
    Ok(out)
}

/// A census session: every process of the node, with every traced function in its paths.
/// A wall session at 1 Hz: the census is read on demand, the ticks are not used.
fn census_session(node: &NodeHandle) -> Result<SampleSession, Answer> {
    let unavailable =
        |e: &dyn std::fmt::Display| Answer::text(503, format!("cannot read the processes: {e}"));
    let session = runtime::trace::without_tracing(|| {
        node.sample_session(SampleOptions::new().sampler(Sampler::Wall).hz(1))
    })
    .map_err(|e| unavailable(&e))?;
    session
        .trace()
        .set_pattern(&TracePattern::all())
        .map_err(|e| unavailable(&e))?;
    session
        .trace()
        .enable_trace(ProcessSpec::All, false)
        .map_err(|e| unavailable(&e))?;
    Ok(session)
}

/// Every process once, at the traced path it runs or waits in, as gzipped pprof (one sample
/// per process, labelled with its pid, name and state).
/// Comments name the sessions open on the node whose paths or functions it read, as
/// [`processes_text`]'s header does.
pub(super) fn processes(node: &NodeHandle) -> Result<Vec<u8>, Answer> {
    let open = node.open_sample_sessions();
    let measuring = node.poll_measuring_sessions();
    let snapshot = census_session(node)?.census_snapshot();
    let profile = Profile::from_snapshot(&snapshot, TraceType::CallCount, &["tprof"]);
    // Go's goroutine profile counts goroutines (`goroutine/count`), not wall time.
    let mut proto = export::pprof::goroutine_proto(&profile);
    for line in measured_by(&open)
        .into_iter()
        .chain(functions_by(&measuring))
    {
        proto.string_table.push(format!("tprof: {line}"));
        proto
            .comment
            .push(i64::try_from(proto.string_table.len() - 1).unwrap_or(i64::MAX));
    }
    let mut out = Vec::new();
    export::pprof::write_proto(&proto, &mut out)
        .map_err(|e| Answer::text(500, format!("cannot write the profile: {e}")))?;
    Ok(out)
}

/// The sample sessions `open` on the node, as the census names them (none: `None`).
fn measured_by(open: &[OpenSampleSession]) -> Option<String> {
    (!open.is_empty()).then(|| {
        format!(
            "traced paths as measured by the sample sessions open on this node: {}",
            open.iter()
                .map(|s| format!(
                    "{} (slot {}, open {:.1} s)",
                    s.sampler,
                    s.slot,
                    s.open_for.as_secs_f64()
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// The trace sessions `measuring` the node's polls, as the census names them (none: `None`):
/// a running process's function may be what they recorded.
fn functions_by(measuring: &[PollMeasuringSession]) -> Option<String> {
    (!measuring.is_empty()).then(|| {
        format!(
            "the function a running process is in as measured by the trace sessions open on \
             this node: {}",
            measuring
                .iter()
                .map(|s| format!("{} (slot {})", s.types, s.slot))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Every process as text, as Go's `goroutine?debug=1` (processes grouped by state and path,
/// most first) or `debug=2` (one block per process, by pid). Paths innermost first.
///
/// The census reads where each process runs or waits as the sessions measuring its polls
/// recorded it: when sample sessions are open on the node already (opened by the program, an
/// attached `tprof`, another request), those paths are theirs, and the header names them;
/// otherwise only the census's own session measures, from the request on. A call_time or
/// call_memory session open on the node records the function a running process is in, which
/// the census gives it: the header names those sessions too.
pub(super) fn processes_text(node: &NodeHandle, each: bool) -> Result<String, Answer> {
    let open = node.open_sample_sessions();
    let measuring = node.poll_measuring_sessions();
    let mut census = census_session(node)?.census();
    census.sort_by_key(|s| s.pid);
    let mut out = String::new();
    for line in measured_by(&open)
        .into_iter()
        .chain(functions_by(&measuring))
    {
        let _ = writeln!(out, "# {line}");
    }
    if each {
        for sample in &census {
            let pid = sample.pid.map(|p| p.to_string()).unwrap_or_default();
            let name = sample
                .registered_name
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "process {pid}{name} [{}, mailbox {}]:",
                state(sample),
                sample.mailbox_len
            );
            write_path(&mut out, sample, "");
            out.push('\n');
        }
        return Ok(out);
    }
    // (state, callsite ids, path unknown) -> (count, first sample of it); linear in the
    // processes.
    let mut groups: HashMap<(&str, Vec<usize>, bool), (usize, &Sample)> = HashMap::new();
    for sample in &census {
        let key = (
            state(sample),
            sample.traced.iter().map(|c| c.id()).collect::<Vec<_>>(),
            sample.before_sampling,
        );
        groups.entry(key).or_insert((0, sample)).0 += 1;
    }
    let mut groups: Vec<(usize, &Sample)> = groups.into_values().collect();
    groups.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.pid.cmp(&b.1.pid)));
    let _ = writeln!(out, "process profile: total {}", census.len());
    let unknown = census.iter().filter(|s| s.before_sampling).count();
    if unknown > 0 {
        let why = if open.is_empty() {
            BEFORE_SAMPLING
        } else {
            BEFORE_OPEN_SESSIONS
        };
        let _ = writeln!(
            out,
            "# {unknown} of them polled before sampling began: {why}"
        );
    }
    for (count, sample) in groups {
        let _ = writeln!(out, "{count} @ {}", state(sample));
        write_path(&mut out, sample, "#\t");
        out.push('\n');
    }
    Ok(out)
}

fn state(sample: &Sample) -> &'static str {
    sample.state.map_or("unknown", |s| s.name())
}

/// Why a process's traced path is unknown when its current or last poll began before the
/// census's session (or another wall sample session) sampled it.
const BEFORE_SAMPLING: &str = "their traced paths are unknown (a sample session records \
     where a process runs or waits from the first poll it measures; no sample session was open \
     on this node, so the census opened its own, and a process running one long poll, or \
     waiting since before, shows none unless a sample session was open when that poll began)";

/// Why a process's traced path is unknown when sample sessions were open on the node before
/// the census.
const BEFORE_OPEN_SESSIONS: &str = "their traced paths are unknown (their current or last \
     poll began before the sessions open on this node measured them: a process running one \
     long poll, or waiting since before, shows none until its next poll)";

/// The sample's traced path, innermost first: each function and, below it, where it is.
fn write_path(out: &mut String, sample: &Sample, prefix: &str) {
    if sample.traced.is_empty() {
        if sample.before_sampling {
            let _ = writeln!(
                out,
                "{prefix}(traced path unknown: polled before sampling began)"
            );
        } else {
            let _ = writeln!(out, "{prefix}(no traced path)");
        }
    }
    for c in sample.traced.iter().rev() {
        let _ = writeln!(
            out,
            "{prefix}{}::{}/{}\n{prefix}\t{}:{}",
            c.module(),
            c.written_name(),
            c.arity(),
            c.file(),
            c.line()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_without_the_counting_allocator_says_what_to_install() {
        // This test binary keeps the system allocator.
        assert!(!runtime::heap::installed());
        let node = runtime::Node::new().unwrap();
        let answer = heap(node.handle(), 1.0, &Arc::new(AtomicBool::new(false))).unwrap_err();
        assert_eq!(answer.status, 503);
        let text = String::from_utf8(answer.body).unwrap();
        assert!(text.contains("runtime::CountingAlloc"), "{text}");
    }
}
