//! The `tprof` command end to end: `run` profiles a real program built on the runtime (the
//! `cli_workload` example, which `cargo test` builds), and `report`, `merge` and `view` read
//! what it wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
#[path = "support/examples.rs"]
mod examples;

use common::stack_names;
use examples::{TPROF, example};
use prost::Message;
use tprof::samples::CpuSource;
use tprof::{Group, Profile, TraceType};

/// The workload example.
fn workload() -> PathBuf {
    example("cli_workload")
}

/// A fresh folder for one test, removed with everything in it when the test ends (passed or
/// failed).
struct Scratch(tempfile::TempDir);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.path().as_os_str()
    }
}

fn scratch(name: &str) -> Scratch {
    Scratch(
        tempfile::Builder::new()
            .prefix(&format!("tprof-cli-test-{name}-"))
            .tempdir()
            .unwrap(),
    )
}

fn tprof(dir: &Path, args: &[&str]) -> Output {
    Command::new(TPROF)
        .current_dir(dir)
        .args(args)
        .env_remove("BROWSER")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tprof run --type TYPE -o OUT -- workload ARGS`, which must succeed.
fn run(dir: &Path, trace_type: &str, out: &str, args: &[&str]) -> Profile {
    let program = workload();
    let mut argv = vec!["run", "--type", trace_type, "-o", out, "--"];
    argv.push(program.to_str().unwrap());
    argv.extend_from_slice(args);
    let o = tprof(dir, &argv);
    assert!(
        o.status.success(),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        text(&o.stdout).contains("total 29700"),
        "{}",
        text(&o.stdout)
    );
    tprof::archive::read_file(&dir.join(out)).unwrap()
}

#[test]
fn run_writes_an_archive_with_every_process_and_call_path() {
    let dir = scratch("run");
    let profile = run(&dir, "call_memory", "mem.tprof", &[]);
    assert_eq!(profile.trace_type, TraceType::CallMemory);
    // The summer parsed 100 lines: 100 calls, each a Vec of 3 u64 (+ growth) in one process
    // registered as `summer`.
    let parse = profile.function("parse").unwrap();
    assert_eq!(parse.entries.len(), 1);
    let entry = parse.entries[0];
    assert_eq!(entry.calls, 100);
    assert!(entry.measurement >= 300, "{entry:?}");
    let Group::Process(summer) = entry.group else {
        panic!("per process")
    };
    assert_eq!(profile.group_label(entry.group), "summer");
    assert!(
        profile
            .processes
            .iter()
            .any(|p| p.pid == summer && p.initial_call.contains("summer"))
    );
    // Call paths: parse called from summer, send from client.
    let stacks = stack_names(&profile);
    assert!(stacks.contains(&"summer;parse".to_owned()), "{stacks:?}");
    assert!(stacks.contains(&"client;send".to_owned()), "{stacks:?}");
    let run = &profile.meta.runs[0];
    assert!(run.program.contains("cli_workload"), "{run:?}");
    assert!(run.duration_ns > 0 && run.started_unix_ms > 0);
}

#[test]
fn run_reads_every_node_and_keeps_the_program_exit_code() {
    let dir = scratch("nodes");
    let program = workload();
    let o = tprof(
        &dir,
        &[
            "run",
            "-t",
            "call_count",
            "-o",
            "count.tprof",
            "--",
            program.to_str().unwrap(),
            "--two-nodes",
            "--fail",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let profile = tprof::archive::read_file(&dir.join("count.tprof")).unwrap();
    assert_eq!(profile.meta.runs.len(), 1);
    assert_eq!(profile.meta.runs[0].nodes.len(), 2);
    // Both nodes' calls counted together: 2 × 100 lines.
    assert_eq!(profile.function("parse").unwrap().entries[0].calls, 200);
    assert_eq!(profile.function("client").unwrap().entries[0].calls, 2);
}

#[test]
fn run_with_a_format_writes_the_export_to_stdout() {
    let dir = scratch("format");
    let program = workload();
    let o = tprof(
        &dir,
        &[
            "run",
            "--type",
            "call_time",
            "--format",
            "folded",
            "--",
            program.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    let folded: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(';') && l.rsplit_once(' ').is_some())
        .collect();
    assert!(
        folded
            .iter()
            .any(|l| l.starts_with("summer;") && l.contains("cli_workload::parse")),
        "{stdout}"
    );
    for line in folded {
        let (_, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<u64>().unwrap() > 0, "{line}");
    }
}

#[test]
fn report_writes_every_format_and_each_reads_back() {
    let dir = scratch("report");
    let profile = run(&dir, "call_time", "time.tprof", &[]);
    // The program's snapshot carried what its threads ran and waited on the OS's run queue
    // (where Linux keeps the figures), through the run file into the archive.
    assert!(
        profile
            .run_queue()
            .is_some_and(|q| q.threads >= 1 && q.ran_ns > 0)
            || !std::path::Path::new("/proc/self/schedstat").exists(),
        "{:?}",
        profile.meta.runs
    );
    let report = |format: &str| -> Vec<u8> {
        let out = format!("out.{format}");
        let o = tprof(&dir, &["report", "-f", format, "-o", &out, "time.tprof"]);
        assert!(o.status.success(), "{format}: {}", text(&o.stderr));
        std::fs::read(dir.join(out)).unwrap()
    };
    // pretty: the tprof report of the summer process.
    let o = tprof(&dir, &["report", "time.tprof"]);
    assert!(o.status.success());
    let pretty = text(&o.stdout);
    assert!(pretty.contains("cli_workload::parse/1"), "{pretty}");
    assert!(pretty.contains("TIME (us)"), "{pretty}");
    // json: the same profile.
    let back: Profile = serde_json::from_slice(&report("json")).unwrap();
    assert_eq!(back, profile);
    // speedscope and chrome: JSON with a profile / a track per process.
    let speedscope: serde_json::Value = serde_json::from_slice(&report("speedscope")).unwrap();
    assert_eq!(
        speedscope["profiles"].as_array().unwrap().len(),
        profile.pids().len()
    );
    let chrome: serde_json::Value = serde_json::from_slice(&report("chrome")).unwrap();
    assert!(
        chrome["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "process_name" && e["args"]["name"] == "summer")
    );
    // pprof: gzipped protobuf with a time sample type.
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(report("pprof").as_slice())
        .read_to_end(&mut raw)
        .unwrap();
    let pprof = tprof::export::pprof::Profile::decode(raw.as_slice()).unwrap();
    let types: Vec<&str> = pprof
        .sample_type
        .iter()
        .map(|t| pprof.string_table[t.r#type as usize].as_str())
        .collect();
    assert!(types.contains(&"time"), "{types:?}");
    // svg and html: documents naming the functions.
    assert!(text(&report("svg")).contains("cli_workload::parse"));
    let html = text(&report("html"));
    assert!(html.starts_with("<!DOCTYPE html>") || html.starts_with("<!doctype html>"));
    assert!(html.contains("cli_workload::parse") || html.contains("parse"));
}

#[test]
fn report_lays_samples_out_with_julia_s_options() {
    use tprof::export::{self, Format};
    use tprof::sample_report::{GroupBy, PrintOptions, Recur, ReportFormat, SortedBy};
    let dir = scratch("samples");
    let profile = common::samples::cpu_profile();
    std::fs::write(dir.join("s.json"), serde_json::to_vec(&profile).unwrap()).unwrap();
    // pretty, by default: the tree and the flat list.
    let o = tprof(&dir, &["report", "s.json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        export::to_string(Format::Pretty, &profile).unwrap()
    );
    assert!(text(&o.stdout).starts_with("Overhead ╎"));
    // Every option, as the library takes it.
    let o = tprof(
        &dir,
        &[
            "report",
            "-f",
            "pretty",
            "--maxdepth",
            "1",
            "--mincount",
            "2",
            "--noisefloor",
            "1.5",
            "--sortedby",
            "count",
            "--groupby",
            "process,thread",
            "--recur",
            "flat",
            "--no-native",
            "--no-combine",
            "--width",
            "60",
            "s.json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "");
    let options = PrintOptions::new()
        .format(ReportFormat::Both)
        .maxdepth(1)
        .mincount(2.0)
        .noisefloor(1.5)
        .sortedby(SortedBy::Count)
        .groupby(GroupBy::ProcessThread)
        .recur(Recur::Flat)
        .native(false)
        .combine(false)
        .width(60);
    let mut expected = Vec::new();
    export::write_pretty(&profile, &options, &mut expected).unwrap();
    assert_eq!(text(&o.stdout), text(&expected));
    assert!(text(&o.stdout).contains("Process <0.5.0> (server) Thread 101"));
    // A value that is not a choice is a usage error naming the choices.
    let o = tprof(&dir, &["report", "--groupby", "task", "s.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("none, process, thread, process,thread or thread,process"),
        "{}",
        text(&o.stderr)
    );
    // A filter that is not a regex is a usage error naming the pattern; a good one filters.
    let o = tprof(&dir, &["report", "--focus", "serve(", "s.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("the focus pattern `serve(` is not a regular expression"),
        "{}",
        text(&o.stderr)
    );
    let o = tprof(
        &dir,
        &["report", "--hide", "main", "--focus", "serve", "s.json"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        !text(&o.stdout).contains("app::main/0") && text(&o.stdout).contains("app::serve/0"),
        "{}",
        text(&o.stdout)
    );
    let o = tprof(&dir, &["report", "--noisefloor=-1", "s.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("`-1` is not a number (0 or more)"));
    // Options that lay samples out do nothing in another format, or without samples.
    let o = tprof(
        &dir,
        &["report", "-f", "folded", "--maxdepth", "2", "s.json"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("warning: --maxdepth does nothing with --format folded"),
        "{}",
        text(&o.stderr)
    );
    let mut traced = profile.clone();
    traced.samples = Default::default();
    std::fs::write(dir.join("t.json"), serde_json::to_vec(&traced).unwrap()).unwrap();
    let o = tprof(
        &dir,
        &["report", "--groupby", "thread", "--no-native", "t.json"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("warning: --groupby does nothing: the profile has no samples")
            && err.contains("warning: --no-native does nothing"),
        "{err}"
    );
}

/// `report --list REGEX`: the annotated listing of the functions it matches, its source read
/// from `--source-path`; a bad pattern or one matching nothing is a usage error (exit 2), a
/// profile without samples a bad input (exit 3).
#[test]
fn report_list_prints_the_annotated_source_of_the_functions_matched() {
    use tprof::listing::ListOptions;
    let dir = scratch("list");
    let profile = common::samples::cpu_profile_in("tests/data/listing/app.rs");
    std::fs::write(dir.join("s.json"), serde_json::to_vec(&profile).unwrap()).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let o = tprof(
        &dir,
        &["report", "--list", "serve", "--source-path", root, "s.json"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let expected = profile
        .listing_with("serve", &ListOptions::new().source_root(root))
        .unwrap()
        .to_string();
    assert_eq!(text(&o.stdout), expected);
    assert!(
        expected
            .contains("ROUTINE ======================== app::serve in tests/data/listing/app.rs\n"),
        "{expected}"
    );
    assert!(expected.contains(":fn serve() -> u64 {\n"), "{expected}");
    // To a file, with -o.
    let o = tprof(
        &dir,
        &[
            "report",
            "--list",
            "serve",
            "--source-path",
            root,
            "-o",
            "l.txt",
            "s.json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.join("l.txt")).unwrap(),
        expected
    );
    // Without --source-path, from here: the file is not found, and said so.
    let o = tprof(&dir, &["report", "--list", "serve", "s.json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(" Source not found: tests/data/listing/app.rs: "));
    for (pattern, says) in [
        ("serve(", "`serve(` is not a regular expression"),
        (
            "Serve",
            "no function with samples matches `Serve`; near: app::serve",
        ),
    ] {
        let o = tprof(&dir, &["report", "--list", pattern, "s.json"]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains(says), "{}", text(&o.stderr));
        assert!(o.stdout.is_empty());
    }
    let o = tprof(&dir, &["report", "--list", "serve", "-f", "json", "s.json"]);
    assert_eq!(o.status.code(), Some(2), "--list is a report of its own");
    // Wall samples, asked for: the profile has none; a profile of wall samples has them.
    let o = tprof(
        &dir,
        &[
            "report",
            "--list",
            "serve",
            "--list-sampler",
            "wall",
            "s.json",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let wall = common::samples::wall_profile(0.0);
    std::fs::write(dir.join("w.json"), serde_json::to_vec(&wall).unwrap()).unwrap();
    let o = tprof(
        &dir,
        &[
            "report",
            "--list",
            "handle",
            "--list-sampler",
            "wall",
            "w.json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        wall.listing_with("handle", &ListOptions::new().source_root(&*dir))
            .unwrap()
            .to_string(),
        "the default is wall when there is no CPU sample"
    );
    assert!(
        text(&o.stdout).contains("ROUTINE ======================== app::handle in src/server.rs\n")
    );
    let o = tprof(
        &dir,
        &[
            "report",
            "--list",
            "serve",
            "--list-sampler",
            "sundial",
            "s.json",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    // A sampler the profile has no samples of.
    let o = tprof(
        &dir,
        &[
            "report",
            "--list",
            "serve",
            "--list-sampler",
            "alloc",
            "s.json",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("no samples to list"));
    std::fs::write(
        dir.join("t.json"),
        serde_json::to_vec(&Profile::empty(TraceType::CallTime)).unwrap(),
    )
    .unwrap();
    let o = tprof(&dir, &["report", "--list", "serve", "t.json"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("no samples to list"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn merge_keeps_runs_apart_and_refuses_mixed_types() {
    let dir = scratch("merge");
    let a = run(&dir, "call_memory", "a.tprof", &[]);
    let b = run(&dir, "call_memory", "b.tprof", &[]);
    let o = tprof(&dir, &["merge", "-o", "ab.tprof", "a.tprof", "b.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let merged = tprof::archive::read_file(&dir.join("ab.tprof")).unwrap();
    assert_eq!(merged.meta.runs.len(), 2);
    assert_eq!(merged.pids().len(), a.pids().len() + b.pids().len());
    let calls = |p: &Profile| -> u64 {
        p.function("parse")
            .unwrap()
            .entries
            .iter()
            .map(|e| e.calls)
            .sum()
    };
    assert_eq!(calls(&merged), calls(&a) + calls(&b));

    run(&dir, "call_count", "c.tprof", &[]);
    let o = tprof(&dir, &["merge", "-o", "bad.tprof", "a.tprof", "c.tprof"]);
    assert_eq!(o.status.code(), Some(3));
    let err = text(&o.stderr);
    assert!(
        err.contains("c.tprof") && err.contains("call_count") && err.contains("call_memory"),
        "{err}"
    );
    assert!(!dir.join("bad.tprof").exists());
}

/// Archives of sample runs: `merge` keeps their samples, `report` carries them to JSON and
/// back to an archive, and the pretty report and `view` read them.
#[test]
fn merge_report_and_view_carry_samples() {
    let dir = scratch("samples");
    let a = common::sampled_profile(
        1,
        &[
            (0, &["app::main", "app::parse"], 1.0),
            (1, &["app::main", "memcpy"], 2.0),
        ],
    );
    let b = common::sampled_profile(1, &[(0, &["app::main", "app::parse"], 3.5)]);
    tprof::archive::write_file(&a, &dir.join("a.tprof")).unwrap();
    tprof::archive::write_file(&b, &dir.join("b.tprof")).unwrap();
    let o = tprof(&dir, &["merge", "-o", "ab.tprof", "a.tprof", "b.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let merged = tprof::archive::read_file(&dir.join("ab.tprof")).unwrap();
    assert_eq!(merged, tprof::archive::merge(&[a, b]).unwrap());
    assert_eq!(merged.samples.sources.len(), 2);
    assert_eq!(merged.samples.total_weight(), 6.5);

    let o = tprof(&dir, &["report", "-o", "ab.json", "ab.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: Profile =
        serde_json::from_slice(&std::fs::read(dir.join("ab.json")).unwrap()).unwrap();
    assert_eq!(json, merged);
    let o = tprof(&dir, &["report", "-o", "back.tprof", "ab.json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let back = tprof::archive::read_file(&dir.join("back.tprof")).unwrap();
    assert_eq!(back, merged);

    let o = tprof(&dir, &["report", "ab.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = tprof(&dir, &["view", "-o", "ab.html", "ab.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(dir.join("ab.html").exists());
}

#[test]
fn bad_input_names_the_file_and_the_offset_and_exits_3() {
    let dir = scratch("bad");
    run(&dir, "call_time", "good.tprof", &[]);
    let good = std::fs::read(dir.join("good.tprof")).unwrap();
    std::fs::write(dir.join("cut.tprof"), &good[..good.len() / 2]).unwrap();
    let o = tprof(&dir, &["report", "cut.tprof"]);
    assert_eq!(o.status.code(), Some(3));
    let err = text(&o.stderr);
    assert!(err.contains("cut.tprof") && err.contains("byte"), "{err}");

    let mut flipped = good.clone();
    let at = good.len() / 3;
    flipped[at] ^= 0x40;
    std::fs::write(dir.join("flipped.tprof"), &flipped).unwrap();
    let o = tprof(&dir, &["report", "flipped.tprof"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("flipped.tprof"));

    std::fs::write(dir.join("notes.txt"), "just text").unwrap();
    let o = tprof(&dir, &["report", "notes.txt"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("not a .tprof archive"));

    let o = tprof(&dir, &["report", "missing.tprof"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("missing.tprof"));
}

#[test]
fn bad_usage_exits_2_and_says_what_is_expected() {
    let dir = scratch("usage");
    let o = tprof(&dir, &["report", "-f", "flame", "x.tprof"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("expected one of pretty, json"));
    let o = tprof(&dir, &["run", "--type", "call_speed", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("call_count, call_time or call_memory"));
    let o = tprof(&dir, &["merge", "a.tprof"]);
    assert_eq!(o.status.code(), Some(2), "--out is required");
    let o = tprof(&dir, &["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    let o = tprof(
        &dir,
        &[
            "run",
            "-t",
            "call_time",
            "--percentiles",
            "--percentile-precision",
            "7",
            "--",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("1..=5"), "{}", text(&o.stderr));
    let o = tprof(&dir, &["run", "--percentile-precision", "3", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "only with --percentiles");
}

#[test]
fn run_with_percentiles_keeps_each_process_s_to_the_precision_asked_for() {
    let dir = scratch("percentiles");
    let workload = workload();
    let o = tprof(
        &dir,
        &[
            "run",
            "-t",
            "call_time",
            "--percentiles",
            "--percentile-precision",
            "3",
            "-o",
            "time.tprof",
            "--",
            workload.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let profile = tprof::archive::read_file(&dir.join("time.tprof")).unwrap();
    let summer = profile
        .processes
        .iter()
        .find(|p| p.name.as_deref() == Some("summer"))
        .unwrap();
    let parse = profile
        .percentiles
        .iter()
        .find(|p| p.function.name == "parse")
        .unwrap();
    assert_eq!(parse.group, tprof::Group::Process(summer.pid));
    assert_eq!(parse.calls, 100);
    // The precision reaches the program's session (out of range there, through the library).
    let options = tprof::command::RunOptions {
        mode: tprof::command::Mode::Trace,
        trace_type: TraceType::CallTime,
        percentiles: true,
        percentile_precision: 9,
        out: Some(dir.join("never.tprof")),
        ..tprof::command::RunOptions::new(workload.as_os_str(), Vec::new())
    };
    let err = tprof::command::run(&options).unwrap_err();
    assert!(
        err.to_string()
            .contains("keep 1 to 5 significant figures, not 9"),
        "{err}"
    );
}

#[test]
fn a_program_that_cannot_run_or_wrote_no_profile_exits_4() {
    let dir = scratch("program");
    let o = tprof(&dir, &["run", "--", "/nonexistent/program"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(text(&o.stderr).contains("/nonexistent/program"));
    // A program that starts no node writes nothing.
    let o = tprof(&dir, &["run", "--", "true"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(
        text(&o.stderr).contains("wrote no profile"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn view_writes_the_page_and_prints_its_path_without_a_browser() {
    let dir = scratch("view");
    run(&dir, "call_memory", "m.tprof", &[]);
    // No $BROWSER, and no opener on an empty PATH: the path is printed.
    let o = Command::new(TPROF)
        .current_dir(&dir)
        .args(["view", "-o", "page.html", "m.tprof"])
        .env_remove("BROWSER")
        .env("PATH", "")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "page.html");
    let page = std::fs::read_to_string(dir.join("page.html")).unwrap();
    assert!(page.contains("cli_workload::parse") || page.contains("parse"));
    // With a browser, it is opened with the page.
    let o = Command::new(TPROF)
        .current_dir(&dir)
        .args(["view", "-o", "page2.html", "m.tprof"])
        .env("BROWSER", "true")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        text(&o.stderr).contains("opened page2.html"),
        "{}",
        text(&o.stderr)
    );
    assert!(dir.join("page2.html").exists());
}

#[test]
fn a_wrong_environment_leaves_the_program_running_unprofiled() {
    let dir = scratch("env");
    let o = Command::new(workload())
        .current_dir(&dir)
        .env("TPROF_RUN", "call_speed")
        .env("TPROF_RUN_DIR", &dir)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(text(&o.stdout).contains("total 29700"));
    assert!(
        text(&o.stderr).contains("TPROF_RUN=call_speed is not a trace type"),
        "{}",
        text(&o.stderr)
    );
    let written = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(written, 0);
}

/// The two models of allocation sampling are never mixed: asking for both runs the program
/// unprofiled, saying why; so does a probability out of range.
#[test]
fn both_models_of_allocation_sampling_in_the_environment_are_refused() {
    let dir = scratch("env-alloc");
    let run = |vars: &[(&str, &str)]| {
        let mut command = Command::new(workload());
        command
            .current_dir(&dir)
            .env("TPROF_RUN", "sample")
            .env("TPROF_RUN_SAMPLER", "alloc")
            .env("TPROF_RUN_DIR", &dir);
        for (k, v) in vars {
            command.env(k, v);
        }
        command.output().unwrap()
    };
    let o = run(&[
        ("TPROF_RUN_ALLOC_RATE", "4096"),
        ("TPROF_RUN_SAMPLE_RATE", "0.5"),
    ]);
    assert!(o.status.success());
    assert!(text(&o.stdout).contains("total 29700"));
    let err = text(&o.stderr);
    assert!(err.contains("never mixed: set one of them"), "{err}");
    let o = run(&[("TPROF_RUN_SAMPLE_RATE", "2")]);
    assert!(o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("sample_rate from 0 to 1"), "{err}");
}

#[test]
fn an_export_on_stdout_is_not_mixed_with_the_program_output() {
    let dir = scratch("stdout");
    let program = workload();
    let o = tprof(
        &dir,
        &[
            "run",
            "-t",
            "call_time",
            "-f",
            "json",
            "--",
            program.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    // All of stdout is the profile; the program's own line went to stderr.
    let profile: Profile = serde_json::from_slice(&o.stdout).unwrap();
    assert!(profile.function("parse").is_some());
    assert!(text(&o.stderr).contains("total 29700"));
}

/// A program without the counting allocator cannot be profiled for call_memory: with three
/// nodes, that is said once, naming the nodes, not once per node by the program and again per
/// node by the command.
#[test]
fn a_missing_counting_allocator_is_reported_once_per_run() {
    let dir = scratch("no-allocator");
    let plain = example("plain_node");
    let o = tprof(
        &dir,
        &[
            "run",
            "-t",
            "call_memory",
            "-o",
            "memory.tprof",
            "--",
            plain.to_str().unwrap(),
            "--three-nodes",
        ],
    );
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert_eq!(stderr.matches("counting allocator").count(), 1, "{stderr}");
    assert!(stderr.contains("nodes "), "{stderr}");
    // Run by hand with the environment set, the program itself says it once.
    let o = Command::new(&plain)
        .arg("--three-nodes")
        .env("TPROF_RUN", "call_memory")
        .env("TPROF_RUN_DIR", &*dir)
        .output()
        .unwrap();
    assert!(o.status.success());
    let stderr = text(&o.stderr);
    assert_eq!(stderr.matches("counting allocator").count(), 1, "{stderr}");
}

#[test]
fn a_node_dropped_mid_poll_still_hands_over_that_poll() {
    let dir = scratch("drop");
    let plain = example("plain_node");
    let o = tprof(
        &dir,
        &[
            "run",
            "-t",
            "call_time",
            "-o",
            "drop.tprof",
            "--",
            plain.to_str().unwrap(),
            "--drop-while-running",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let profile = tprof::archive::read_file(&dir.join("drop.tprof")).unwrap();
    let spin = profile
        .function("spin")
        .expect("the spinning call is in the profile");
    assert_eq!(spin.entries[0].calls, 1);
    assert!(profile.function("work").unwrap().entries[0].calls > 0);
}

#[test]
fn the_event_logs_of_two_nodes_share_one_time_axis() {
    let dir = scratch("timeline");
    let program = workload();
    let o = tprof(
        &dir,
        &[
            "run",
            "-t",
            "call_time",
            "--events",
            "-o",
            "ev.tprof",
            "--",
            program.to_str().unwrap(),
            "--two-nodes",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let profile = tprof::archive::read_file(&dir.join("ev.tprof")).unwrap();
    // The times of the `client` calls on `node`.
    let span = |node: u32| {
        let times: Vec<u64> = profile
            .event_logs
            .iter()
            .filter(|l| matches!(l.group, Group::Process(p) if p.node() == node))
            .flat_map(|l| l.events.iter())
            .filter(|e| profile.function_table[e.function as usize].name == "client")
            .map(|e| e.ts_ns)
            .collect();
        assert!(!times.is_empty(), "node {node} has client events");
        (*times.iter().min().unwrap(), *times.iter().max().unwrap())
    };
    let nodes = &profile.meta.runs[0].nodes;
    assert_eq!(nodes.len(), 2);
    // The second node's client starts after the first's has returned (the program waits for
    // it before starting the second node).
    let (first, second) = (span(nodes[0]), span(nodes[1]));
    assert!(first.1 < second.0, "{first:?} then {second:?}");
}

// --- Outputs and inputs ---

/// `tprof ARGS` in `dir` with `input` on its standard input.
fn tprof_with_input(dir: &Path, args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(TPROF)
        .current_dir(dir)
        .args(args)
        .env_remove("BROWSER")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeding = std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let _ = stdin.write_all(&input);
        })
        .unwrap();
    let o = child.wait_with_output().unwrap();
    feeding.join().unwrap();
    o
}

#[test]
fn a_dash_writes_to_standard_output_and_reads_standard_input() {
    let dir = scratch("dash");
    let profile = run(&dir, "call_time", "t.tprof", &[]);
    // merge -o -: the archive on stdout.
    let o = tprof(&dir, &["merge", "-o", "-", "t.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!dir.join("-").exists());
    assert_eq!(
        tprof::archive::read(&mut o.stdout.as_slice()).unwrap(),
        profile
    );
    // report - reads it back from a pipe; so does merge.
    let o = tprof_with_input(&dir, &["report", "-f", "json", "-"], &o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        serde_json::from_slice::<Profile>(&o.stdout).unwrap(),
        profile
    );
    let o = tprof_with_input(&dir, &["merge", "-o", "m.tprof", "-", "t.tprof"], &o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        tprof::archive::read_file(&dir.join("m.tprof"))
            .unwrap()
            .meta
            .runs
            .len(),
        2
    );
    // run -o -: the archive on stdout, the program's own output on stderr.
    let program = workload();
    let o = tprof(&dir, &["run", "-o", "-", "--", program.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("total 29700"));
    let counted = tprof::archive::read(&mut o.stdout.as_slice()).unwrap();
    assert_eq!(counted.function("parse").unwrap().entries[0].calls, 100);
    // view -o -: the page on stdout.
    let o = tprof(&dir, &["view", "-o", "-", "t.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout)
            .to_ascii_lowercase()
            .starts_with("<!doctype html")
    );
}

#[cfg(unix)]
#[test]
fn an_output_that_is_a_device_or_a_symlink_is_written_in_place() {
    use std::os::unix::fs::symlink;
    let dir = scratch("device");
    run(&dir, "call_time", "t.tprof", &[]);
    symlink("/dev/full", dir.join("full.tprof")).unwrap();
    let o = tprof(&dir, &["merge", "-o", "full.tprof", "t.tprof"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("No space left"),
        "{}",
        text(&o.stderr)
    );
    let link = std::fs::symlink_metadata(dir.join("full.tprof")).unwrap();
    assert!(link.file_type().is_symlink());
}

#[test]
fn the_output_format_follows_the_file_name() {
    let dir = scratch("extension");
    let program = workload();
    let o = tprof(
        &dir,
        &[
            "run",
            "-t",
            "call_time",
            "-o",
            "x.speedscope.json",
            "--",
            program.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let speedscope: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("x.speedscope.json")).unwrap()).unwrap();
    assert!(
        speedscope["$schema"]
            .as_str()
            .is_some_and(|s| s.contains("speedscope")),
        "{speedscope}"
    );
    run(&dir, "call_time", "t.tprof", &[]);
    let o = tprof(&dir, &["report", "-o", "t.svg", "t.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&std::fs::read(dir.join("t.svg")).unwrap()).contains("<svg"));
    let o = tprof(&dir, &["merge", "-o", "m.folded", "t.tprof", "t.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let folded = text(&std::fs::read(dir.join("m.folded")).unwrap());
    assert!(
        folded.lines().any(|l| l.contains(";cli_workload::parse ")),
        "{folded}"
    );
    // An explicit format wins, with a warning.
    let o = tprof(&dir, &["report", "-f", "folded", "-o", "f.svg", "t.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
    assert!(!text(&std::fs::read(dir.join("f.svg")).unwrap()).contains("<svg"));
}

/// The run file the `TPROF_RUN` variables wrote into `dir`.
fn run_file(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a run file")
}

#[test]
fn the_files_tprof_run_variables_write_are_read_by_every_command() {
    let dir = scratch("runfiles");
    let o = Command::new(workload())
        .current_dir(&dir)
        .env("TPROF_RUN", "call_time")
        .env("TPROF_RUN_DIR", &dir)
        .env("TPROF_RUN_CALL_TREE", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let file = run_file(&dir);
    let file = file.to_str().unwrap();
    for input in [file, "."] {
        let o = tprof(&dir, &["report", "-f", "folded", input]);
        assert!(o.status.success(), "{input}: {}", text(&o.stderr));
        assert!(
            text(&o.stdout).contains("summer;cli_workload::parse "),
            "{input}"
        );
    }
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = tprof(&dir, &["report", "empty"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("tprof-run-"),
        "{}",
        text(&o.stderr)
    );
    let o = tprof(&dir, &["merge", "-o", "m.tprof", file, file]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let merged = tprof::archive::read_file(&dir.join("m.tprof")).unwrap();
    assert_eq!(merged.meta.runs.len(), 2);
    assert!(merged.meta.runs[0].program.contains("cli_workload"));
    let o = tprof(&dir, &["view", "-o", "p.html", file]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn view_says_opened_only_when_a_browser_took_the_page() {
    let dir = scratch("browser");
    run(&dir, "call_time", "t.tprof", &[]);
    let o = Command::new(TPROF)
        .current_dir(&dir)
        .args(["view", "-o", "page.html", "t.tprof"])
        .env("BROWSER", "false")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("opened"), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "page.html");
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let dir = scratch("pipe");
    // A report larger than a pipe holds, so tprof is still writing when the pipe closes.
    let mut profile = Profile::empty(TraceType::CallTime);
    let pid = runtime::Pid::from_parts(1, 0, 1);
    for i in 0..20_000 {
        profile.functions.push(tprof::FunctionTrace {
            function: common::function("app", &format!("function_{i}"), 1, i),
            entries: vec![common::entry(Group::Process(pid), 1, 1_000)],
        });
    }
    tprof::archive::write_file(&profile, &dir.join("t.tprof")).unwrap();
    let o = tprof(&dir, &["report", "-f", "folded", "t.tprof"]);
    assert!(o.stdout.len() > 1 << 18, "{}", o.stdout.len());
    let mut child = Command::new(TPROF)
        .current_dir(&*dir)
        .args(["report", "-f", "folded", "t.tprof"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "");
}

#[test]
fn options_that_do_nothing_in_a_mode_are_warned_of() {
    let dir = scratch("ignored");
    let program = workload();
    let o = tprof(
        &dir,
        &[
            "run",
            "-t",
            "call_count",
            "--percentiles",
            "--events",
            "--flat",
            "-o",
            "c.tprof",
            "--",
            program.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    for option in ["--percentiles", "--events", "--flat"] {
        assert!(
            err.lines()
                .any(|l| l.contains("warning") && l.contains(option)),
            "{option}: {err}"
        );
    }
}

#[test]
fn report_on_another_kind_of_file_says_what_it_is_and_what_reads_it() {
    let dir = scratch("kinds");
    run(&dir, "call_time", "t.tprof", &[]);
    for (format, says, reader) in [
        ("pprof", "pprof", "go tool pprof"),
        ("folded", "folded stacks", "inferno"),
        ("speedscope", "speedscope", "speedscope"),
        ("chrome", "Chrome trace", "Perfetto"),
        ("svg", "SVG", "browser"),
        ("html", "HTML", "browser"),
        ("pretty", "text report", ".tprof archive"),
    ] {
        let out = format!("out.{format}");
        let o = tprof(&dir, &["report", "-f", format, "-o", &out, "t.tprof"]);
        assert!(o.status.success(), "{format}: {}", text(&o.stderr));
        let o = tprof(&dir, &["report", &out]);
        assert_eq!(o.status.code(), Some(3), "{format}");
        let err = text(&o.stderr);
        assert!(err.contains(&out), "{format}: {err}");
        assert!(err.contains(says), "{format}: {err}");
        assert!(err.contains(reader), "{format}: {err}");
    }
}

// --- A program that does not stop its nodes ---

/// `tprof run ARGS -- workload --wait-for-signal` in `dir` (with `env`), once the program has
/// done its work: the running tprof and the program's OS pid.
fn run_until_ready(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
) -> (std::process::Child, String) {
    use std::io::BufRead;
    let program = workload();
    let mut command = Command::new(TPROF);
    command
        .current_dir(dir)
        .arg("run")
        .args(args)
        .args(["--", program.to_str().unwrap(), "--wait-for-signal"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let pid = loop {
        let line = lines.next().expect("the program says it is ready").unwrap();
        if let Some(pid) = line.strip_prefix("ready ") {
            break pid.to_owned();
        }
    };
    (child, pid)
}

fn kill(signal: &str, pid: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), pid])
        .status()
        .unwrap();
    assert!(status.success());
}

#[cfg(unix)]
#[test]
fn a_program_ended_by_sigterm_or_sigint_leaves_its_profile() {
    for signal in ["TERM", "INT"] {
        let dir = scratch("sigterm");
        let (child, pid) = run_until_ready(&dir, &["-o", "p.tprof"], &[]);
        kill(signal, &pid);
        let o = child.wait_with_output().unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("(SIG{signal})")), "{err}");
        assert!(!err.contains("process::exit"), "{err}");
        let profile = tprof::archive::read_file(&dir.join("p.tprof")).unwrap();
        assert_eq!(profile.function("parse").unwrap().entries[0].calls, 100);
    }
}

#[cfg(unix)]
#[test]
fn a_program_killed_by_sigkill_leaves_its_last_snapshot_and_tprof_says_how_old() {
    let dir = scratch("sigkill");
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let (child, pid) = run_until_ready(
        &dir,
        &["--snapshot-every", "0.1", "-o", "p.tprof"],
        &[("TMPDIR", &tmp)],
    );
    // Waits for a snapshot taken after the work was done (at most two minutes).
    let prefix = format!("tprof-run-{pid}-");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    'wait: loop {
        assert!(std::time::Instant::now() < deadline, "no snapshot");
        for scratch in std::fs::read_dir(&tmp).unwrap() {
            for file in std::fs::read_dir(scratch.unwrap().path()).unwrap() {
                let file = file.unwrap();
                let name = file.file_name().to_string_lossy().into_owned();
                if !name.starts_with(&prefix) {
                    continue;
                }
                let Ok(bytes) = std::fs::read(file.path()) else {
                    continue;
                };
                let run: runtime::trace::env_run::RunFile = serde_json::from_slice(&bytes).unwrap();
                // Sample mode (the default) counts calls per process.
                let counted = run.snapshot.call_counts.iter().any(|&(_, c)| c == 100)
                    || run
                        .snapshot
                        .processes
                        .iter()
                        .any(|p| p.functions.iter().any(|f| f.calls == 100));
                if run.partial && counted {
                    break 'wait;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    kill("KILL", &pid);
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("signal 9 (SIGKILL)"), "{err}");
    assert!(
        err.contains("snapshot") && err.contains(" s before"),
        "{err}"
    );
    let profile = tprof::archive::read_file(&dir.join("p.tprof")).unwrap();
    assert_eq!(profile.function("parse").unwrap().entries[0].calls, 100);
}

/// Waits up to two minutes for `child` to end: its output, or `None` (then it is killed).
fn wait_ended(mut child: std::process::Child) -> Option<Output> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while std::time::Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// `--signals keep` leaves SIGINT to the program: one without a handler of its own dies of
/// it, as it would without tprof (the runtime caught it, and the program ran on), its profile
/// written as the signal arrived.
#[cfg(unix)]
#[test]
fn with_signals_keep_sigint_ends_a_program_that_has_no_handler() {
    let dir = scratch("keep");
    let (child, pid) = run_until_ready(
        &dir,
        &[
            "--signals",
            "keep",
            "--snapshot-every",
            "0",
            "-o",
            "p.tprof",
        ],
        &[],
    );
    kill("INT", &pid);
    let o = wait_ended(child).expect("the program ends of SIGINT");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("(SIGINT)"), "{err}");
    let profile = tprof::archive::read_file(&dir.join("p.tprof")).unwrap();
    assert_eq!(profile.function("parse").unwrap().entries[0].calls, 100);
}

/// A program that opens a CPU session of its own at another rate than `tprof run`'s is
/// refused with a sentence that says how to get the rate (not the error's `Debug` form).
#[cfg(target_os = "linux")]
#[test]
fn a_program_sampling_at_another_rate_under_run_is_told_how_in_a_sentence() {
    let dir = scratch("rate-taken");
    let program = workload();
    let o = tprof(
        &dir,
        &[
            "run",
            "--sampler",
            "cpu",
            "--hz",
            "999",
            "-o",
            "p.tprof",
            "--",
            program.to_str().unwrap(),
            "--cpu-session",
            "4999",
        ],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`tprof run --hz 4999`") && err.contains("999 Hz"),
        "{err}"
    );
    assert!(!err.contains("RateTaken"), "{err}");
}

#[cfg(unix)]
#[test]
fn a_program_killed_before_any_snapshot_is_said_to_be_killed() {
    let dir = scratch("killed");
    let (child, pid) = run_until_ready(&dir, &["--snapshot-every", "0", "-o", "p.tprof"], &[]);
    kill("KILL", &pid);
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("killed by signal 9 (SIGKILL)"), "{err}");
    assert!(!err.contains("process::exit"), "{err}");
}

/// `tprof run` samples by default (as Eta's `prof run`), with the CPU sampler at the rate
/// asked for; `--sampler wall` samples processes; a trace option alone means trace mode.
#[test]
fn run_samples_by_default_and_traces_when_asked() {
    let dir = scratch("sample-mode");
    let program = workload();
    let json = |args: &[&str]| -> serde_json::Value {
        let mut argv = vec!["run"];
        argv.extend_from_slice(args);
        argv.extend(["-f", "json", "--", program.to_str().unwrap(), "--two-nodes"]);
        let o = tprof(&dir, &argv);
        assert!(o.status.success(), "{}", text(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let sampled = json(&["--hz", "999"]);
    let sources = &sampled["samples"]["sources"];
    assert_eq!(
        sources.as_array().map(Vec::len),
        Some(2),
        "one per node: {sources}"
    );
    assert_eq!(sources[0]["sampler"], "cpu");
    assert_eq!(sources[0]["hz"], 999);
    // Calls are counted in sample mode too: 2 nodes × 100 lines.
    let profile: Profile = serde_json::from_value(sampled).unwrap();
    assert_eq!(profile.function("parse").unwrap().entries[0].calls, 200);

    let wall = json(&["--sampler", "wall", "--hz", "200"]);
    assert_eq!(wall["samples"]["sources"][0]["sampler"], "wall");

    // --type alone means trace mode: no samples.
    let traced = json(&["--type", "call_time"]);
    assert!(traced.get("samples").is_none(), "{traced}");
    assert_eq!(traced["trace_type"], "call_time");

    // A sample option in trace mode is warned of.
    let o = tprof(
        &dir,
        &[
            "run",
            "--mode",
            "trace",
            "--hz",
            "5",
            "-f",
            "json",
            "--",
            program.to_str().unwrap(),
        ],
    );
    assert!(o.status.success());
    assert!(text(&o.stderr).contains("--hz"), "{}", text(&o.stderr));
}

/// `tprof run --cpu-source timers` takes the CPU samples on the fallback, and the profile says
/// so and why; `tprof run` says the figures once the profile is written, and `tprof report`
/// starts with them. So does `TPROF_RUN_CPU_SOURCE=timers` without `tprof run`. A source
/// that is none is refused, naming those there are.
#[test]
fn the_cpu_source_asked_for_is_taken_and_the_profile_says_why() {
    let dir = scratch("cpu-source");
    let program = workload();
    let program = program.to_str().unwrap();
    let o = tprof(
        &dir,
        &[
            "run",
            "--cpu-source",
            "timers",
            "-o",
            "t.tprof",
            "--",
            program,
        ],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let summary = "tprof: CPU samples by per-thread CPU timers (checked at the kernel's tick): ";
    assert_eq!(err.matches(summary).count(), 1, "{err}");
    assert!(err.contains("Hz asked (fallback: asked for ("), "{err}");
    let profile = tprof::archive::read_file(&dir.join("t.tprof")).unwrap();
    let cpu = profile.samples.sources[0]
        .cpu
        .as_ref()
        .expect("the figures");
    assert_eq!((cpu.source, cpu.hz), (CpuSource::Timers, 99));
    let why = cpu.fallback.as_deref().expect("why");
    assert!(why.contains("--cpu-source"), "{why}");
    assert!(!cpu.threads.is_empty(), "the threads timed: {cpu:?}");
    let o = tprof(&dir, &["report", "t.tprof"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("CPU samples by per-thread CPU timers"),
        "{}",
        text(&o.stdout)
    );

    let o = Command::new(program)
        .current_dir(&dir)
        .env("TPROF_RUN", "sample")
        .env("TPROF_RUN_CPU_SOURCE", "timers")
        .env("TPROF_RUN_DIR", &dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let file = run_file(&dir);
    let o = tprof(&dir, &["report", "-f", "json", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cpu = &json["samples"]["sources"][0]["cpu"];
    assert_eq!(cpu["source"], "timers", "{cpu}");
    assert!(
        cpu["fallback"]
            .as_str()
            .is_some_and(|why| why.contains("TPROF_RUN_CPU_SOURCE")),
        "{cpu}"
    );

    let o = tprof(&dir, &["run", "--cpu-source", "tick", "--", program]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("auto, perf_events or timers"), "{err}");
}

// --- Heap snapshots ---

/// A heap snapshot file, read back: its strings, and each node as (type, name, self size).
fn heap_nodes(path: &Path) -> Vec<(String, String, u64)> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let types = v["snapshot"]["meta"]["node_types"][0]
        .as_array()
        .unwrap()
        .clone();
    let strings = v["strings"].as_array().unwrap();
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(
        nodes.len() as u64,
        v["snapshot"]["node_count"].as_u64().unwrap() * 7
    );
    nodes
        .chunks(7)
        .map(|n| {
            let at = |i: usize| n[i].as_u64().unwrap() as usize;
            (
                types[at(0)].as_str().unwrap().to_owned(),
                strings[at(1)].as_str().unwrap().to_owned(),
                at(3) as u64,
            )
        })
        .collect()
}

/// The summer of `--keep`, as a heap snapshot shows it: its registered name, and a process
/// holding its 1 MiB table.
fn shows_the_summer(nodes: &[(String, String, u64)]) -> bool {
    nodes.iter().any(|(t, n, _)| t == "string" && n == "summer")
        && nodes
            .iter()
            .any(|(t, n, size)| t == "object" && n.contains("summer") && *size >= 1 << 20)
}

#[test]
fn run_with_heap_snapshot_writes_one_per_node_as_it_stops() {
    let dir = scratch("heap");
    let program = workload();
    let o = tprof(
        &dir,
        &[
            "run",
            "--heap-snapshot",
            "heap.heapsnapshot",
            "-o",
            "p.tprof",
            "--",
            program.to_str().unwrap(),
            "--keep",
            "--two-nodes",
        ],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("heap snapshot written to heap.heapsnapshot"),
        "{err}"
    );
    // Taken before the nodes stopped their processes: the summers are still there.
    let first = heap_nodes(&dir.join("heap.heapsnapshot"));
    assert!(shows_the_summer(&first), "{first:?}");
    let second: Vec<_> = std::fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("heap.node") && n.ends_with(".heapsnapshot"))
        .collect();
    assert_eq!(second.len(), 1, "{second:?}");
    assert!(shows_the_summer(&heap_nodes(&dir.join(&second[0]))));
    // And the profile as usual.
    let profile = tprof::archive::read_file(&dir.join("p.tprof")).unwrap();
    assert!(profile.function("parse").is_some());
}

#[cfg(unix)]
#[test]
fn a_program_ended_by_sigterm_leaves_its_heap_snapshot() {
    use std::io::BufRead;
    let dir = scratch("heap-sigterm");
    let mut child = Command::new(TPROF)
        .current_dir(&*dir)
        .args([
            "run",
            "--heap-snapshot",
            "h.heapsnapshot",
            "-o",
            "p.tprof",
            "--",
        ])
        .args([workload().to_str().unwrap(), "--keep", "--wait-for-signal"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let pid = loop {
        let line = lines.next().expect("the program says it is ready").unwrap();
        if let Some(pid) = line.strip_prefix("ready ") {
            break pid.to_owned();
        }
    };
    kill("TERM", &pid);
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(
        err.contains("heap snapshot written to h.heapsnapshot"),
        "{err}"
    );
    assert!(shows_the_summer(&heap_nodes(&dir.join("h.heapsnapshot"))));
}

/// `tprof run --mode alloc` samples allocations (each one with `--sample-rate 1`), in every
/// node; `--rate BYTES` alone means allocation mode too.
#[test]
fn run_mode_alloc_samples_allocations_at_the_rate_asked_for() {
    let dir = scratch("alloc-mode");
    let program = workload();
    let json = |args: &[&str]| -> serde_json::Value {
        let mut argv = vec!["run"];
        argv.extend_from_slice(args);
        argv.extend(["-f", "json", "--", program.to_str().unwrap(), "--two-nodes"]);
        let o = tprof(&dir, &argv);
        assert!(o.status.success(), "{}", text(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let every = json(&["--mode", "alloc", "--sample-rate", "1"]);
    let sources = every["samples"]["sources"].as_array().expect("sources");
    assert_eq!(sources.len(), 2, "one per node: {sources:?}");
    for source in sources {
        assert_eq!(source["sampler"], "alloc");
        assert_eq!(source["alloc_rate"]["sample_rate"], 1.0);
    }
    let profile: Profile = serde_json::from_value(every).unwrap();
    assert!(profile.samples.samples.iter().all(|s| s.size > 0));
    let parse = profile.sampled_allocations("parse", None);
    // Every allocation under parse, in both nodes: at least one per call.
    assert!(
        parse.objects >= 200.0 && parse.bytes >= parse.objects,
        "{parse:?}"
    );
    assert_eq!(
        parse.objects.fract(),
        0.0,
        "exact at sample_rate 1: {parse:?}"
    );

    let by_bytes = json(&["--rate", "4096"]);
    assert_eq!(by_bytes["samples"]["sources"][0]["sampler"], "alloc");
    assert_eq!(
        by_bytes["samples"]["sources"][0]["alloc_rate"]["bytes"],
        4096
    );

    let o = tprof(
        &dir,
        &["run", "--rate", "0", "--", program.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let o = tprof(
        &dir,
        &["run", "--sample-rate", "2", "--", program.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("not a probability"),
        "{}",
        text(&o.stderr)
    );
}

/// `tprof run` shows samples by the report's frame options (--native, --crate, --focus,
/// --hide) when it writes the pretty report or folded stacks, and says they do nothing
/// where it writes neither.
#[test]
fn run_shows_samples_by_the_report_s_frame_options() {
    let dir = scratch("run-filters");
    let program = workload();
    let run = |args: &[&str]| {
        let mut argv = vec!["run", "--sampler", "wall", "--hz", "200"];
        argv.extend_from_slice(args);
        argv.extend(["--", program.to_str().unwrap()]);
        let o = tprof(&dir, &argv);
        assert!(o.status.success(), "{}", text(&o.stderr));
        o
    };
    // A focus nothing matches keeps no sample.
    let o = run(&["-f", "pretty", "--focus", "^no_such_frame$"]);
    assert!(
        text(&o.stdout).contains("There were no samples collected"),
        "{}",
        text(&o.stdout)
    );
    assert!(
        !text(&o.stderr).contains("does nothing"),
        "{}",
        text(&o.stderr)
    );
    // Hidden frames leave the folded stacks; the others stay.
    let o = run(&["-f", "folded", "--hide", "parse", "--crate", "cli_workload"]);
    let folded = text(&o.stdout);
    assert!(!folded.contains("parse"), "{folded}");
    assert!(
        !text(&o.stderr).contains("does nothing"),
        "{}",
        text(&o.stderr)
    );
    // An archive keeps every frame: the options are warned of.
    let o = run(&["-o", "p.tprof", "--focus", "parse", "--native", "all"]);
    let err = text(&o.stderr);
    assert!(
        err.contains("warning: --focus does nothing when writing a .tprof archive")
            && err.contains("warning: --native does nothing when writing a .tprof archive"),
        "{err}"
    );
}

/// `tprof report` folds the plumbing by default, in the pretty report and folded stacks,
/// and `--native all` keeps every frame.
#[test]
fn report_folds_the_plumbing_unless_native_all() {
    let dir = scratch("report-native");
    let profile = common::samples::cpu_profile();
    let mut profile = profile;
    let set = &mut profile.samples;
    set.frames.push(tprof::samples::SampleFrame {
        function: None,
        name: "tokio::runtime::park::Inner::park".into(),
        file: None,
        line: None,
        address: 0x77,
    });
    set.stacks.push(tprof::samples::SampleStack {
        parent: None,
        frame: (set.frames.len() - 1) as u32,
    });
    let mut parked = set.samples[0].clone();
    parked.pid = None;
    parked.stack = Some((set.stacks.len() - 1) as u32);
    set.samples.push(parked);
    std::fs::write(dir.join("s.json"), serde_json::to_vec(&profile).unwrap()).unwrap();
    let report = |args: &[&str]| {
        let mut argv = vec!["report"];
        argv.extend_from_slice(args);
        argv.push("s.json");
        let o = tprof(&dir, &argv);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(text(&o.stderr), "");
        text(&o.stdout)
    };
    let pretty = report(&[]);
    assert!(
        !pretty.contains("tokio::") && pretty.contains("Folded: 1 frame of plumbing"),
        "{pretty}"
    );
    assert!(report(&["--native", "all"]).contains("tokio::runtime::park::Inner::park"));
    let folded = report(&["-f", "folded"]);
    assert!(!folded.contains("tokio::"), "{folded}");
    assert!(report(&["-f", "folded", "--native", "all"]).contains("tokio::runtime::park"));
    // Frames of my crates only: the unknown frame outside processes is folded too.
    let mine = report(&["--crate", "app"]);
    assert!(
        mine.contains("Folded: 2 frames of crates other than app") && !mine.contains("unknown"),
        "{mine}"
    );
    // A choice that is not one names them.
    let o = tprof(&dir, &["report", "--native", "some", "s.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("all, user or none"),
        "{}",
        text(&o.stderr)
    );
}

/// A folder holding the plumbed profile as `p.json`.
fn plumbed_file() -> Scratch {
    let dir = scratch("frames");
    let profile = common::samples::plumbed_profile();
    std::fs::write(dir.join("p.json"), serde_json::to_vec(&profile).unwrap()).unwrap();
    dir
}

/// `tprof report p.json ARGS`, which must succeed without a warning; its output, gunzipped
/// when it is gzip data (pprof).
fn report_of_plumbed(dir: &Path, args: &[&str]) -> String {
    let mut argv = vec!["report", "p.json"];
    argv.extend_from_slice(args);
    let o = tprof(dir, &argv);
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "", "{args:?}");
    if o.stdout.starts_with(b"\x1f\x8b") {
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&o.stdout[..]), &mut raw)
            .unwrap();
        return String::from_utf8_lossy(&raw).into_owned();
    }
    text(&o.stdout)
}

#[test]
fn every_drawn_export_takes_the_report_s_frame_options() {
    let dir = plumbed_file();
    let dir: &Path = &dir;
    for format in ["svg", "speedscope", "chrome"] {
        // The plumbing folded by default, as in the report.
        let shown = report_of_plumbed(dir, &["-f", format]);
        assert!(
            shown.contains("app::fnv_hash") && !shown.contains("tokio::runtime"),
            "{format}: {shown}"
        );
        let all = report_of_plumbed(dir, &["-f", format, "--native", "all"]);
        assert!(all.contains("tokio::runtime::park"), "{format}");
        let focused = report_of_plumbed(dir, &["-f", format, "--focus", "fnv"]);
        assert!(
            focused.contains("app::fnv_hash") && !focused.contains("outside"),
            "{format}: {focused}"
        );
        let hidden = report_of_plumbed(dir, &["-f", format, "--hide", "fnv_hash"]);
        assert!(
            hidden.contains("app::crunch") && !hidden.contains("fnv_hash"),
            "{format}: {hidden}"
        );
        let mine = report_of_plumbed(dir, &["-f", format, "--crate", "app,tokio"]);
        assert!(
            mine.contains("tokio::runtime::scheduler") && !mine.contains("core::iter"),
            "{format}: {mine}"
        );
    }
    // pprof keeps every frame unless asked: go tool pprof filters for itself.
    assert!(report_of_plumbed(dir, &["-f", "pprof"]).contains("tokio::runtime::park"));
    let user = report_of_plumbed(dir, &["-f", "pprof", "--native", "user"]);
    assert!(
        user.contains("app::fnv_hash") && !user.contains("tokio::runtime"),
        "{user}"
    );
    assert!(!report_of_plumbed(dir, &["-f", "pprof", "--hide", "fnv"]).contains("fnv_hash"));
    // The format an output's name says takes them too.
    let o = tprof(
        dir,
        &["report", "p.json", "-o", "p.svg", "--hide", "crunch"],
    );
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "{}",
        text(&o.stderr)
    );
    let svg = std::fs::read_to_string(dir.join("p.svg")).unwrap();
    assert!(svg.contains("app::fnv_hash") && !svg.contains("app::crunch"));
    // html sets its page's controls as asked.
    let html = report_of_plumbed(dir, &["-f", "html", "--focus", "fnv", "--native", "all"]);
    assert!(
        html.contains(r#""filters":{"focus":"fnv","hide":null,"plumbing":false}"#),
        "{html}"
    );
    // json is the profile itself: the options do nothing there, and it says so.
    let o = tprof(dir, &["report", "p.json", "-f", "json", "--focus", "fnv"]);
    assert!(
        text(&o.stderr).contains("warning: --focus does nothing with --format json"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn callers_on_the_command_line_see_through_the_plumbing() {
    let dir = plumbed_file();
    let dir: &Path = &dir;
    // fnv_hash is called through core's and tokio's frames: its caller is crunch.
    assert_eq!(
        report_of_plumbed(dir, &["--callers", "fnv_hash"]),
        "Callers of `fnv_hash` in the cpu samples (count: timer periods), the most first:\n\
         Count File:Line; Function\n\
         \x20   6 src/crunch.rs:3; app::crunch/0\n"
    );
    // Every frame: the innermost plumbing above it calls it, and so on outward.
    let all = report_of_plumbed(dir, &["--callers", "app::fnv_hash", "--native", "all"]);
    let chain: Vec<&str> = all.lines().skip(2).collect();
    assert_eq!(chain.len(), 7, "{all}");
    assert_eq!(
        [chain[0], chain[2], chain[6]],
        [
            "    6 @tokio-1.48.0/src/task/coop.rs:70; budget<F>",
            "    6   src/crunch.rs:3; app::crunch/0",
            "    6       start_thread",
        ],
        "{all}"
    );
    // A name no frame has is a usage error that says how frames are named.
    let o = tprof(dir, &["report", "p.json", "--callers", "no_such"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("no cpu sample has a caller of `no_such`"),
        "{}",
        text(&o.stderr)
    );
    // --callers and --format are two outputs: refused together.
    let o = tprof(dir, &["report", "p.json", "--callers", "x", "-f", "svg"]);
    assert_eq!(o.status.code(), Some(2));
}
