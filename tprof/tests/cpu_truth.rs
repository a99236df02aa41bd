//! What a CPU profile's samples could see (issue 29, point 3), built by hand with the
//! runtime's [`CpuCoverage`]: a profile whose samples stand for too little of its threads'
//! CPU time says so, with the likely cause, in the report's header, once on stderr, and in
//! every export read back; one whose samples saw its CPU time gives the figures and no
//! warning; one without the figures (written before they were kept) says nothing of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

mod common;

use common::{decode_pprof, embedded};
use serde_json::Value;
use tprof::Profile;
use tprof::export::{self, Format};
use tprof::samples::{CpuCoverage, CpuSource, SampleThread, ThreadCoverage};

const MS: u64 = 1_000_000;

/// Why the hand-built profile's samples were taken on the fallback.
const REFUSED: &str = "perf_event_open was refused (perf_event_paranoid is 3)";

/// The shared CPU profile (100 Hz: 12 periods, 120 ms, in 7 samples on threads 101 and 102)
/// with a third thread the session timed without a sample, and `threads` as its figures:
/// `(thread, cpu ms, sampled ms, samples)`, taken by the tick-bound timers.
fn with_figures(threads: &[(u32, u64, u64, u64)]) -> Profile {
    let mut profile = common::samples::cpu_profile();
    profile.samples.threads.push(SampleThread {
        source: 0,
        tid: 103,
        name: Some("node-worker".to_owned()),
    });
    let rows = threads
        .iter()
        .map(|&(t, cpu, sampled, samples)| {
            (t, ThreadCoverage::new(cpu * MS, sampled * MS, samples))
        })
        .collect();
    profile.samples.sources[0].cpu = Some(CpuCoverage::new(
        CpuSource::Timers,
        Some(REFUSED.to_owned()),
        100,
        rows,
    ));
    profile
}

/// Samples that stand for 120 ms of the threads' 600 ms, 7 of them in 0.6 CPU-seconds, and
/// a busy thread (103: 100 ms: ten periods at 100 Hz, so judged on its own) without one.
fn short() -> Profile {
    with_figures(&[(0, 400, 90, 5), (1, 100, 30, 2), (2, 100, 0, 0)])
}

/// Samples that stand for 119 ms of the threads' 122 ms (97.5 %), 12 of them (98 per
/// CPU-second at 100 Hz asked); thread 103 idle.
fn full() -> Profile {
    with_figures(&[(0, 100, 97, 10), (1, 20, 20, 2), (2, 2, 2, 0)])
}

/// The summary line of [`short`].
const SHORT_SUMMARY: &str = "CPU samples by per-thread CPU timers (checked at the kernel's \
     tick): 20.0% of the sampled threads' 600.0 ms of CPU captured, 12 distinct samples per \
     CPU-second at 100 Hz asked (fallback: perf_event_open was refused (perf_event_paranoid \
     is 3))";

/// The start of each warning of [`short`] (each goes on with the likely cause).
const SHORT_WARNINGS: [&str; 5] = [
    "the samples stand for 20.0% of the sampled threads' CPU time (120.0 ms of 600.0 ms): ",
    "thread node-worker/101's samples stand for 22.5% of its 400.0 ms of CPU: ",
    "thread node-worker/102's samples stand for 30.0% of its 100.0 ms of CPU: ",
    "thread node-worker/103 used 100.0 ms of CPU and has no sample: ",
    "12 distinct samples per CPU-second were taken at 100 Hz asked: ",
];

/// The cause every warning of [`short`] names.
const CAUSE: &str = "the CPU sampler ran on its fallback, per-thread CPU timers \
     (perf_event_open was refused (perf_event_paranoid is 3)), which the kernel checks only at \
     its scheduler tick (CONFIG_HZ";

/// Whether `warnings` are [`short`]'s, in order, each naming the cause.
fn are_short_warnings(warnings: &[String]) -> bool {
    warnings.len() == SHORT_WARNINGS.len()
        && warnings
            .iter()
            .zip(SHORT_WARNINGS)
            .all(|(w, start)| w.starts_with(start) && w.contains(CAUSE))
}

/// `profile` exported as text.
fn text_of(format: Format, profile: &Profile) -> String {
    export::to_string(format, profile).unwrap()
}

/// A JSON export read back.
fn json_of(format: Format, profile: &Profile) -> Value {
    serde_json::from_str(&text_of(format, profile)).unwrap()
}

/// The strings of a JSON array.
fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("an array: {value}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_figures_and_warnings_are_the_runtime_s_with_the_threads_named() {
    let truth = short().samples.cpu_truth().expect("figures");
    assert_eq!(truth.summary, [SHORT_SUMMARY]);
    assert!(are_short_warnings(&truth.warnings), "{:#?}", truth.warnings);
    let f = &truth.figures[0];
    assert_eq!(
        (f.mechanism, f.hz_asked, f.cpu_ns, f.sampled_ns, f.samples),
        (CpuSource::Timers, 100, 600 * MS, 120 * MS, 7)
    );
    assert_eq!(f.fallback.as_deref(), Some(REFUSED));
    let names: Vec<&str> = f.threads.iter().map(|t| t.thread.as_str()).collect();
    assert_eq!(
        names,
        ["node-worker/101", "node-worker/102", "node-worker/103"]
    );

    let full = full().samples.cpu_truth().expect("figures");
    assert!(full.warnings.is_empty(), "{:#?}", full.warnings);
    assert!(
        full.summary[0].contains("97.5% of the sampled threads' 122.0 ms of CPU captured, 98 distinct samples per CPU-second at 100 Hz asked"),
        "{}",
        full.summary[0]
    );
    assert_eq!(common::samples::cpu_profile().samples.cpu_truth(), None);
}

#[test]
fn the_report_header_gives_the_figures_then_each_warning() {
    let mut out = Vec::new();
    tprof::sample_report::print(
        &mut out,
        &short(),
        &tprof::sample_report::PrintOptions::new(),
    )
    .unwrap();
    let report = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines[0], SHORT_SUMMARY, "{report}");
    let warnings: Vec<String> = lines[1..=5]
        .iter()
        .map(|l| l.strip_prefix("Warning: ").expect(l).to_owned())
        .collect();
    assert!(are_short_warnings(&warnings), "{report}");
    assert!(
        lines[6].starts_with("Overhead"),
        "the tree follows: {report}"
    );

    // Figures without a shortfall: the summary line alone.
    let mut out = Vec::new();
    let options = tprof::sample_report::PrintOptions::new();
    tprof::sample_report::print(&mut out, &full(), &options).unwrap();
    let report = String::from_utf8(out).unwrap();
    assert!(report.starts_with("CPU samples by "), "{report}");
    assert!(!report.contains("Warning"), "{report}");

    // No figures (an older profile): the report as before.
    let mut out = Vec::new();
    let plain = common::samples::cpu_profile();
    tprof::sample_report::print(&mut out, &plain, &options).unwrap();
    let report = String::from_utf8(out).unwrap();
    assert!(report.starts_with("Overhead"), "{report}");
}

#[test]
fn every_export_read_back_carries_the_figures_and_the_warnings() {
    let profile = short();
    let truth = profile.samples.cpu_truth().unwrap();
    let warned: Vec<String> = truth
        .warnings
        .iter()
        .map(|w| format!("Warning: {w}"))
        .collect();

    // pprof: a comment per line (`go tool pprof -comments`).
    let p = decode_pprof(&profile);
    let comments: Vec<&str> = p.comment.iter().map(|c| p.string(*c)).collect();
    assert_eq!(
        comments[0],
        "tprof cpu samples at 100 Hz asked (12 per CPU-second taken)"
    );
    let tail = &comments[comments.len() - 6..];
    assert_eq!(tail[0], SHORT_SUMMARY, "{comments:#?}");
    assert_eq!(tail[1..], warned[..], "{comments:#?}");

    // speedscope: the figures in `tprof.cpu`, and the warnings in the name speedscope shows.
    let file = json_of(Format::Speedscope, &profile);
    let cpu = &file["tprof"]["cpu"];
    assert!(are_short_warnings(&strings(&cpu["warnings"])), "{cpu}");
    assert_eq!(strings(&cpu["summary"]), [SHORT_SUMMARY]);
    assert_eq!(cpu["figures"][0]["mechanism"], "timers");
    assert_eq!(cpu["figures"][0]["hz_asked"], 100);
    assert_eq!(cpu["figures"][0]["cpu_ns"], 600 * MS);
    let name = file["name"].as_str().unwrap();
    assert!(
        name.starts_with("tprof cpu samples at 100 Hz asked (12 per CPU-second taken)"),
        "{name}"
    );
    assert!(warned.iter().all(|w| name.contains(w.as_str())), "{name}");

    // chrome: the figures in `otherData`, each warning an instant at the start.
    let file = json_of(Format::Chrome, &profile);
    let cpu = &file["otherData"]["samples"]["cpu"];
    assert!(are_short_warnings(&strings(&cpu["warnings"])), "{cpu}");
    let instants: Vec<String> = file["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "i" && e["args"]["warning"] == "cpu coverage")
        .map(|e| {
            assert_eq!((e["s"].as_str(), e["ts"].as_f64()), (Some("g"), Some(0.0)));
            e["name"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(instants, warned);

    // html: the header's data.
    let data = embedded(&text_of(Format::Html, &profile));
    let cpu = &data["samples"]["cpu"];
    assert!(are_short_warnings(&strings(&cpu["warnings"])), "{cpu}");
    assert_eq!(strings(&cpu["summary"]), [SHORT_SUMMARY]);
    assert_eq!(
        data["samples"]["what"],
        "cpu samples at 100 Hz asked (12 per CPU-second taken)"
    );

    // svg: the share and the count in the subtitle, every line in the notes.
    let svg = text_of(Format::Svg, &profile).replace("&apos;", "'");
    assert!(
        svg.contains("20.0% of the sampled threads' CPU captured — 5 warnings"),
        "{svg}"
    );
    let notes = &svg[svg.find("NOTES:").expect("the notes")..];
    let notes = &notes[..notes.find("-->").unwrap()];
    assert!(
        notes.contains("12 distinct samples per CPU-second"),
        "{notes}"
    );
    assert!(
        warned
            .iter()
            .all(|w| notes.contains(&w.replace("--", "- -")[..60])),
        "{notes}"
    );

    // The profile's own JSON and the archive keep the figures themselves.
    let json: Profile = serde_json::from_str(&text_of(Format::Json, &profile)).unwrap();
    assert_eq!(json.samples, profile.samples);
    let mut bytes = Vec::new();
    tprof::archive::write(&profile, &mut bytes).unwrap();
    let read = tprof::archive::read(&mut &bytes[..]).unwrap();
    assert_eq!(read.samples.cpu_truth(), Some(truth));
}

#[test]
fn exports_of_figures_without_a_shortfall_or_of_none_warn_of_nothing() {
    for (profile, figures) in [(full(), true), (common::samples::cpu_profile(), false)] {
        let p = decode_pprof(&profile);
        let comments: Vec<&str> = p.comment.iter().map(|c| p.string(*c)).collect();
        assert_eq!(
            comments.iter().any(|c| c.starts_with("CPU samples by ")),
            figures,
            "{comments:#?}"
        );
        assert!(
            !comments.iter().any(|c| c.contains("Warning")),
            "{comments:#?}"
        );
        let file = json_of(Format::Speedscope, &profile);
        assert_eq!(file.get("tprof").is_some(), figures, "{}", file["name"]);
        assert!(!file["name"].as_str().unwrap().contains("Warning"));
        let file = json_of(Format::Chrome, &profile);
        let instants = file["traceEvents"].as_array().unwrap().iter();
        assert!(!instants.clone().any(|e| e["args"]["warning"].is_string()));
        assert_eq!(file["otherData"]["samples"].get("cpu").is_some(), figures);
        let data = embedded(&text_of(Format::Html, &profile));
        assert_eq!(data["samples"].get("cpu").is_some(), figures);
        assert!(!text_of(Format::Svg, &profile).contains("Warning"));
    }
}

/// `tprof report` of an archive: the warnings in the header, and once on stderr.
#[test]
fn tprof_report_warns_once_on_stderr_and_in_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.tprof");
    tprof::archive::write_file(&short(), &path).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tprof"))
        .arg("report")
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success());
    let (out, err) = (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    );
    for start in SHORT_WARNINGS {
        assert_eq!(
            err.matches(&format!("tprof: warning: {start}")).count(),
            1,
            "{err}"
        );
        assert!(out.contains(&format!("Warning: {start}")), "{out}");
    }
    assert_eq!(out.matches(SHORT_SUMMARY).count(), 1, "{out}");
}

/// Writes every export of [`short`] and [`full`] to `$TPROF_EXPORT_DIR` (default:
/// `tprof-exports` in the temp dir), for the real tools and the format validators.
#[test]
#[ignore = "writes files for the real tools to check by hand"]
fn write_truth_files() {
    let dir = std::env::var_os("TPROF_EXPORT_DIR")
        .map_or_else(|| std::env::temp_dir().join("tprof-exports"), Into::into);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, profile) in [("truth-short", short()), ("truth-full", full())] {
        for &f in Format::ALL {
            let path = dir.join(format!("{name}.{}", f.extension()));
            let mut out = Vec::new();
            export::write(f, &profile, &mut out).unwrap();
            std::fs::write(&path, out).unwrap();
            println!("{}", path.display());
        }
    }
}

/// [`full`] on perf events, whose thread 101 took 3 samples (30 ms) of work the profile does
/// not sample, and whose thread 102's event lost 2 overflow signals, leaving 15 ms of its CPU
/// in no sample until the drain re-armed it.
fn aside() -> Profile {
    let mut profile = full();
    let cpu = profile.samples.sources[0].cpu.as_mut().unwrap();
    cpu.source = CpuSource::PerfEvents;
    cpu.fallback = None;
    let elsewhere = &mut cpu.threads[0].1;
    elsewhere.elsewhere = 3;
    elsewhere.elsewhere_ns = 30 * MS;
    let stalled = &mut cpu.threads[1].1;
    stalled.stalls = 2;
    stalled.stalled_ns = 15 * MS;
    profile
}

/// The sentence of [`aside`]'s summary on the samples left out of the profile.
const ASIDE_SENTENCE: &str = "; 3 more sample(s) of these threads, 30.0 ms, were of work this \
     profile does not sample (other nodes' processes, unsampled processes, another node's thread \
     outside processes) and are out of the profile and of these figures";

/// The warning of [`aside`]'s stalled thread.
const STALL_WARNING: &str = "thread node-worker/102's perf event lost 2 overflow signal(s) and \
     stopped sampling it until the drain re-armed it: 15.0 ms of its CPU time is in no sample";

/// `profile`'s sample report.
fn report_of(profile: &Profile) -> String {
    let mut out = Vec::new();
    let options = tprof::sample_report::PrintOptions::new();
    tprof::sample_report::print(&mut out, profile, &options).unwrap();
    String::from_utf8(out).unwrap()
}

/// The samples a profile's threads took of work it does not sample, and its perf events'
/// stalls, survive the archive: the profile read back says them as the live one does, in the
/// report's header and in each export.
#[test]
fn samples_elsewhere_and_stalls_survive_the_archive() {
    let live = aside();
    let truth = live.samples.cpu_truth().unwrap();
    assert!(truth.summary[0].ends_with(ASIDE_SENTENCE), "{truth:#?}");
    assert_eq!(truth.warnings, [STALL_WARNING]);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aside.tprof");
    tprof::archive::write_file(&live, &path).unwrap();
    let read = tprof::archive::read_file(&path).unwrap();
    assert_eq!(read.samples, live.samples);
    assert_eq!(read.samples.cpu_truth(), Some(truth.clone()));
    let f = &truth.figures[0];
    assert_eq!(
        (f.elsewhere, f.elsewhere_ns, f.stalls, f.stalled_ns),
        (3, 30 * MS, 2, 15 * MS)
    );

    let report = report_of(&read);
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines[0], truth.summary[0], "{report}");
    assert_eq!(lines[1], format!("Warning: {STALL_WARNING}"), "{report}");

    let p = decode_pprof(&read);
    let comments: Vec<&str> = p.comment.iter().map(|c| p.string(*c)).collect();
    assert_eq!(
        comments[comments.len() - 2..],
        [
            truth.summary[0].clone(),
            format!("Warning: {STALL_WARNING}")
        ],
        "{comments:#?}"
    );
    let speedscope = json_of(Format::Speedscope, &read);
    let chrome = json_of(Format::Chrome, &read);
    let html = embedded(&text_of(Format::Html, &read));
    for cpu in [
        &speedscope["tprof"]["cpu"],
        &chrome["otherData"]["samples"]["cpu"],
        &html["samples"]["cpu"],
    ] {
        assert_eq!(strings(&cpu["summary"]), truth.summary, "{cpu}");
        assert_eq!(strings(&cpu["warnings"]), [STALL_WARNING], "{cpu}");
    }
}

/// Merged, two such profiles sum what their threads took elsewhere, and each stalled thread
/// keeps its warning; the merge reads back as it was written.
#[test]
fn a_merge_sums_the_samples_elsewhere_and_the_stalls() {
    let merged = tprof::archive::merge(&[aside(), aside()]).unwrap();
    let truth = merged.samples.cpu_truth().unwrap();
    assert_eq!(truth.summary.len(), 1, "{truth:#?}");
    assert!(
        truth.summary[0].contains(
            "; 6 more sample(s) of these threads, 60.0 ms, were of work this profile does not \
             sample"
        ),
        "{}",
        truth.summary[0]
    );
    assert_eq!(truth.warnings, [STALL_WARNING, STALL_WARNING]);
    let f = &truth.figures[0];
    assert_eq!(
        (f.elsewhere, f.elsewhere_ns, f.stalls, f.stalled_ns),
        (6, 60 * MS, 4, 30 * MS)
    );
    let mut bytes = Vec::new();
    tprof::archive::write(&merged, &mut bytes).unwrap();
    let read = tprof::archive::read(&mut &bytes[..]).unwrap();
    assert_eq!(read.samples, merged.samples);
    assert_eq!(read.samples.cpu_truth(), Some(truth));
}
