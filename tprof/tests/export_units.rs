//! Every export of samples in its sampler's own unit (issue 31, *Units*): allocation samples
//! in bytes in the html viewer (read back in a browser where one is installed), drawn as
//! allocations in the Chrome trace, their dropped samples weighed in bytes, a merge of
//! samplers refused by the formats that draw one total, Go's default sample types (a heap
//! profile with nothing in use, a goroutine profile), and the wording of merges, full
//! buffers and the html's sample counts; and the svg and speedscope exports of 100,000
//! processes grouped as the html viewer groups them (issue 31, *At 100,000 processes*).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::browser::page_text;
use common::{embedded, sampled_profile};
use serde_json::Value;
use tprof::export::{self, ExportError, Format};
use tprof::samples::{AllocRate, SampleRecord, SamplerKind, WaitState};
use tprof::{Profile, TraceType};

/// An allocation profile at `sample_rate = 1` (every allocation recorded): for each
/// `(process index, stack, bytes)`, one allocation of that size, 1 ms after the one before,
/// standing for its own bytes; `dropped` bytes dropped.
fn alloc_profile(samples: &[(u32, &[&str], f64)], dropped: f64) -> Profile {
    let mut profile = sampled_profile(0, samples);
    let set = &mut profile.samples;
    set.sources[0].sampler = SamplerKind::Alloc;
    set.sources[0].hz = 0;
    set.sources[0].alloc_rate = Some(AllocRate::SampleRate(1.0));
    set.sources[0].dropped = dropped;
    set.threads.clear();
    set.mappings.clear();
    for s in &mut set.samples {
        s.size = s.weight as u64;
        s.thread = None;
    }
    profile
}

/// Two processes allocating: 3,000 bytes in `app::parse` (two blocks) and 500 in
/// `app::handle`, 28,232 bytes dropped.
fn allocations() -> Profile {
    alloc_profile(
        &[
            (1, &["app::main", "app::parse"], 1000.0),
            (1, &["app::main", "app::parse"], 2000.0),
            (2, &["app::main", "app::handle"], 500.0),
        ],
        28_232.0,
    )
}

/// `cpu` with the samples of `other` as its own, of a source of their own (a merge).
fn merged(mut cpu: Profile, other: &Profile) -> Profile {
    let source = cpu.samples.sources.len() as u32;
    let frames = cpu.samples.frames.len() as u32;
    let stacks = cpu.samples.stacks.len() as u32;
    let functions = cpu.function_table.len() as u32;
    let o = &other.samples;
    cpu.samples.sources.extend(o.sources.iter().cloned());
    cpu.function_table
        .extend(other.function_table.iter().cloned());
    cpu.samples.frames.extend(o.frames.iter().map(|f| {
        let mut f = f.clone();
        f.function = f.function.map(|i| i + functions);
        f
    }));
    cpu.samples
        .stacks
        .extend(o.stacks.iter().map(|s| tprof::samples::SampleStack {
            parent: s.parent.map(|p| p + stacks),
            frame: s.frame + frames,
        }));
    cpu.samples
        .samples
        .extend(o.samples.iter().map(|s| SampleRecord {
            source: s.source + source,
            stack: s.stack.map(|st| st + stacks),
            thread: None,
            ..s.clone()
        }));
    cpu
}

/// A CPU profile at 100 Hz: two samples (20 ms) of `app::main > app::work`.
fn cpu() -> Profile {
    sampled_profile(
        0,
        &[
            (1, &["app::main", "app::work"], 1.0),
            (1, &["app::main", "app::work"], 1.0),
        ],
    )
}

/// A wall profile at 100 Hz: `n` processes, each once in `receive` under `app::wait`, and
/// `dropped` process-ticks dropped.
fn wall(n: u32, dropped: f64) -> Profile {
    let stack: &[&str] = &["app::wait"];
    let samples: Vec<(u32, &[&str], f64)> = (1..=n).map(|i| (i, stack, 1.0)).collect();
    let mut profile = sampled_profile(0, &samples);
    let set = &mut profile.samples;
    set.sources[0].sampler = SamplerKind::Wall;
    set.sources[0].dropped = dropped;
    set.threads.clear();
    set.mappings.clear();
    for s in &mut set.samples {
        s.thread = None;
        s.state = Some(WaitState::Receive);
    }
    profile
}

// ---------------------------------------------------------------- html in bytes

#[test]
fn the_html_of_allocation_samples_shows_bytes_not_time() {
    let html = export::to_string(Format::Html, &allocations()).unwrap();
    let data = embedded(&html);
    assert_eq!(data["unit"], "bytes");
    assert_eq!(data["total"], 3500);
    assert!(
        data["samples"]["measure"]
            .as_str()
            .unwrap()
            .starts_with("bytes of allocations"),
        "{}",
        data["samples"]["measure"]
    );
    let Some(text) = page_text(&html) else {
        return;
    };
    // The header's total, the tables' columns: bytes, never a time.
    assert!(text.contains("Total 3,500 bytes"), "{text}");
    assert!(text.contains("own (bytes)"), "{text}");
    assert!(text.contains("total (bytes)"), "{text}");
    for time in ["(us)", " µs", "Total 3.500", "3,500 ms"] {
        assert!(!text.contains(time), "{time:?} in {text}");
    }
}

// ---------------------------------------------------------------- chrome as allocations

/// The trace's events of phase `ph`.
fn events<'a>(trace: &'a Value, ph: &str) -> Vec<&'a Value> {
    let all = trace["traceEvents"].as_array().unwrap();
    all.iter().filter(|e| e["ph"] == ph).collect()
}

#[test]
fn the_chrome_trace_of_allocation_samples_draws_allocations_and_counts_bytes() {
    let text = export::to_string(Format::Chrome, &allocations()).unwrap();
    let trace: Value = serde_json::from_str(&text).unwrap();
    // No time: no slice stands for an allocation, no thread says CPU or Hz.
    assert!(events(&trace, "X").is_empty(), "{text}");
    let threads: Vec<&str> = events(&trace, "M")
        .into_iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(threads.len(), 2, "{threads:?}");
    for name in &threads {
        assert!(name.starts_with("alloc samples"), "{name}");
        assert!(!name.contains("cpu") && !name.contains("Hz"), "{name}");
    }
    // An instant per allocation, with its size and its stack, innermost first.
    let instants = events(&trace, "i");
    let allocations: Vec<(&str, u64, u64, &str)> = instants
        .iter()
        .filter(|e| e["s"] == "t")
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["args"]["size"].as_u64().unwrap(),
                e["args"]["bytes"].as_u64().unwrap(),
                e["args"]["stack"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        allocations,
        [
            ("app::parse", 1000, 1000, "app::parse;app::main"),
            ("app::parse", 2000, 2000, "app::parse;app::main"),
            ("app::handle", 500, 500, "app::handle;app::main"),
        ]
    );
    // Each process's counter of bytes allocated so far ends at its total.
    let counters: Vec<(u64, u64)> = events(&trace, "C")
        .into_iter()
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let first = counters[0].0;
    let last_of = |pid| counters.iter().rev().find(|c| c.0 == pid).unwrap().1;
    assert_eq!(last_of(first), 3000);
    let other = counters.iter().find(|c| c.0 != first).unwrap().0;
    assert_eq!(last_of(other), 500);
    // What was dropped, in bytes.
    let samples = &trace["otherData"]["samples"];
    assert_eq!(samples["dropped_bytes"], 28_232);
    assert_eq!(samples["dropped_ns"], 0);
    let weight = samples["weight"].as_str().unwrap();
    assert!(
        weight.contains("args.size") && !weight.contains("CPU"),
        "{weight}"
    );
}

#[test]
fn the_chrome_trace_of_many_allocation_samples_is_bounded() {
    // 150,000 allocations of one stack: past 100,000, the lightest are left out.
    let stack: &[&str] = &["app::main", "app::parse"];
    let samples: Vec<(u32, &[&str], f64)> = (0..150_000u32)
        .map(|i| (1, stack, f64::from(1 + i % 1000)))
        .collect();
    let profile = alloc_profile(&samples, 0.0);
    let text = export::to_string(Format::Chrome, &profile).unwrap();
    let trace: Value = serde_json::from_str(&text).unwrap();
    let instants = events(&trace, "i").len();
    assert_eq!(instants, 100_000);
    let note = trace["otherData"]["samples"]["allocations_left_out"]
        .as_str()
        .unwrap();
    assert!(note.starts_with("50000 allocation samples"), "{note}");
    // The counter still sums every allocation.
    let total: f64 = profile.samples.samples.iter().map(|s| s.weight).sum();
    let last = events(&trace, "C").last().unwrap()["args"]["bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(last, total as u64);
    // About 300 bytes an allocation drawn (two events), not a slice per frame.
    assert!(text.len() < 100_000 * 400, "{} bytes", text.len());
}

// ---------------------------------------------------------------- dropped, in bytes

#[test]
fn dropped_allocation_samples_weigh_bytes_in_every_export() {
    let profile = allocations();
    let folded = export::to_string(Format::Folded, &profile).unwrap();
    assert!(
        folded.lines().any(|l| l == "(dropped_samples) 28232"),
        "{folded}"
    );
    let data = embedded(&export::to_string(Format::Html, &profile).unwrap());
    let note = data["samples"]["dropped_note"].as_str().unwrap();
    assert!(note.contains("about 28,232 bytes not shown"), "{note}");
    assert!(!note.contains(" s "), "{note}");
    // About 24 samples: 28,232 bytes over the mean sample's 1,167.
    assert!(note.starts_with("about 24 samples dropped"), "{note}");
    let speedscope: Value =
        serde_json::from_str(&export::to_string(Format::Speedscope, &profile).unwrap()).unwrap();
    let name = speedscope["name"].as_str().unwrap();
    assert!(name.contains("28,232 bytes"), "{name}");
    // The svg: the real bytes drawn beside what was dropped, which is not all of it.
    let svg = export::to_string(Format::Svg, &profile).unwrap();
    let (frames, total) = common::svg::svg_frames(&svg);
    assert_eq!(total, 3500 + 28_232);
    assert!(frames.iter().any(|f| f.name == "app::parse/0"), "{svg}");
}

// ---------------------------------------------------------------- one unit per view

#[test]
fn a_merge_of_samplers_is_refused_by_the_formats_of_one_total_naming_the_filter() {
    let mixed = merged(merged(cpu(), &wall(2, 0.0)), &allocations());
    for format in [Format::Folded, Format::Svg, Format::Html] {
        match export::to_string(format, &mixed) {
            Err(ExportError::Unsupported { reason, .. }) => {
                assert!(reason.contains("--sampler"), "{reason}");
                assert!(reason.contains("cpu, wall and alloc") || reason.contains("3 samplers"));
            }
            other => panic!("{format}: {:?}", other.map(|t| t.len())),
        }
    }
    // One sampler at a time, each in its unit.
    let only_alloc = Profile {
        samples: mixed.samples.only(SamplerKind::Alloc),
        ..mixed.clone()
    };
    let folded = export::to_string(Format::Folded, &only_alloc).unwrap();
    let sum: u64 = folded
        .lines()
        .filter(|l| !l.starts_with("(dropped"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, 3500, "{folded}");
    let only_cpu = Profile {
        samples: mixed.samples.only(SamplerKind::Cpu),
        ..mixed
    };
    let folded = export::to_string(Format::Folded, &only_cpu).unwrap();
    assert_eq!(folded.trim(), "<0.1.0>;app::main;app::work 20000000");
}

// ---------------------------------------------------------------- Go's sample types

/// The default sample type of `profile`'s pprof export.
fn default_type(profile: &Profile) -> String {
    let proto = common::decode_pprof(profile);
    proto.string_table[proto.default_sample_type as usize].clone()
}

#[test]
fn a_heap_profile_with_nothing_in_use_opens_on_what_was_allocated() {
    let mut profile = allocations();
    assert_eq!(default_type(&profile), "alloc_space");
    profile.samples.samples[0].live = true;
    assert_eq!(default_type(&profile), "inuse_space");
}

#[test]
fn the_goroutine_profile_counts_processes() {
    let proto = tprof::export::pprof::goroutine_proto(&wall(3, 0.0));
    let name = |i: i64| proto.string_table[i as usize].as_str();
    let types: Vec<(&str, &str)> = proto
        .sample_type
        .iter()
        .map(|t| (name(t.r#type), name(t.unit)))
        .collect();
    assert_eq!(types, [("goroutine", "count")]);
    assert_eq!(name(proto.default_sample_type), "goroutine");
    assert_eq!(proto.period, 1);
    let values: Vec<&[i64]> = proto.sample.iter().map(|s| &s.value[..]).collect();
    assert_eq!(values, [&[1][..], &[1], &[1]]);
    assert!(!proto.comment.iter().any(|c| name(*c).contains("wall time")));
}

// ---------------------------------------------------------------- wording

#[test]
fn merging_a_trace_profile_with_samples_names_what_each_is() {
    let trace = Profile::empty(TraceType::CallTime);
    let err = tprof::archive::merge(&[trace, cpu()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("input 2 is a cpu sample profile, but input 1 is a call_time trace profile"),
        "{err}"
    );
}

#[test]
fn a_full_wall_buffer_is_told_in_process_ticks_rounded() {
    let profile = wall(2, 3_678_036_680.156_25);
    let text = profile.samples.kept_and_dropped();
    assert_eq!(
        text,
        "2 samples, about 3,678,036,680 process-ticks dropped (the sample buffer was full)"
    );
}

#[test]
fn the_html_process_table_counts_each_sample_once() {
    // Three samples of two processes, each three frames deep: the rows count a sample once
    // per frame, the processes once.
    let stack: &[&str] = &["app::main", "app::handle", "app::parse"];
    let profile = sampled_profile(0, &[(1, stack, 1.0), (1, stack, 1.0), (2, stack, 1.0)]);
    let html = export::to_string(Format::Html, &profile).unwrap();
    let data = embedded(&html);
    assert_eq!(data["samples"]["count"], 3);
    let groups = data["aggregates"]["by_initial_call"].as_array().unwrap();
    let samples: u64 = groups.iter().map(|g| g[2].as_u64().unwrap()).sum();
    assert_eq!(samples, 3, "{groups:?}");
    let Some(text) = page_text(&html) else {
        return;
    };
    // The process table: `<0.1.0>` 2 samples, `<0.2.0>` 1.
    assert!(text.contains("<0.1.0> app::worker/1 1 2 "), "{text}");
    assert!(text.contains("<0.2.0> app::worker/1 1 1 "), "{text}");
}

// ---------------------------------------------------------------- many processes

#[test]
fn the_svg_of_100_000_processes_draws_them_grouped_by_initial_call() {
    let profile = wall(100_000, 0.0);
    let svg = export::to_string(Format::Svg, &profile).unwrap();
    let (frames, total) = common::svg::svg_frames(&svg);
    // 100,000 process-ticks of 10 ms.
    assert_eq!(total, 100_000 * 10_000_000);
    let names: Vec<&str> = frames.iter().map(|f| f.name.as_str()).collect();
    let group = "app::worker/1\u{a0}(100,000\u{a0}processes)";
    let drawn = frames.iter().find(|f| f.name == group);
    let drawn = drawn.unwrap_or_else(|| panic!("no {group:?} in {names:?}"));
    assert_eq!(drawn.units, total);
    assert!(
        names.contains(&"app::wait/0") && names.contains(&"[receive]"),
        "{names:?}"
    );
    // Bounded: a frame per group and path, not per process.
    assert!(svg.len() < 100_000, "{} bytes", svg.len());
}

#[test]
fn processes_narrower_than_a_pixel_are_one_frame_in_the_svg() {
    // 60 processes of initial calls of their own: one heavy, 59 narrower than a pixel.
    let stack: &[&str] = &["app::wait"];
    let mut samples: Vec<(u32, &[&str], f64)> = vec![(1, stack, 10_000.0)];
    samples.extend((2..=60).map(|i| (i, stack, 1.0)));
    let mut profile = sampled_profile(0, &samples);
    for (i, p) in profile.processes.iter_mut().enumerate() {
        p.initial_call = format!("app::job{i}/0");
    }
    let svg = export::to_string(Format::Svg, &profile).unwrap();
    let (frames, _) = common::svg::svg_frames(&svg);
    let small = frames
        .iter()
        .find(|f| f.name == "(59\u{a0}small\u{a0}processes)")
        .unwrap_or_else(|| panic!("{:?}", frames.iter().map(|f| &f.name).collect::<Vec<_>>()));
    assert_eq!(small.units, 59 * 10_000_000);
    assert!(frames.iter().any(|f| f.name == "<0.1.0>"));
}

/// The speedscope file of `profile`.
fn speedscope(profile: &Profile) -> Value {
    serde_json::from_str(&export::to_string(Format::Speedscope, profile).unwrap()).unwrap()
}

/// The names of a speedscope file's profiles.
fn profile_names(file: &Value) -> Vec<String> {
    file["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_group_counts_the_processes_it_draws_not_every_one_seen() {
    // 1,000 processes seen, all of one initial call; one in eight sampled.
    let mut profile = wall(1_000, 0.0);
    let mut i = 0;
    profile.samples.samples.retain(|_| {
        i += 1;
        i % 8 == 0
    });
    assert_eq!(profile.processes.len(), 1_000);
    let n = 125;
    let file = speedscope(&profile);
    assert_eq!(
        profile_names(&file),
        [
            "all processes".to_owned(),
            format!("app::worker/1 ({n} processes)")
        ]
    );
    let svg = export::to_string(Format::Svg, &profile).unwrap();
    let group = format!("app::worker/1\u{a0}({n}\u{a0}processes)");
    let (frames, _) = common::svg::svg_frames(&svg);
    assert!(frames.iter().any(|f| f.name == group), "{group}");
}

#[test]
fn speedscope_of_100_000_processes_has_a_profile_per_group_and_says_so() {
    let profile = wall(100_000, 0.0);
    let file = speedscope(&profile);
    let profiles = file["profiles"].as_array().unwrap();
    assert_eq!(
        profile_names(&file),
        ["all processes", "app::worker/1 (100,000 processes)"]
    );
    let weights: u64 = profiles[1]["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .sum();
    assert_eq!(weights, 100_000 * 10_000_000);
    let name = file["name"].as_str().unwrap();
    assert!(
        name.contains("100,000 processes, grouped by initial call into 1 group"),
        "{name}"
    );
    // A trace profile of many processes too.
    let mut traced = Profile::empty(TraceType::CallTime);
    traced.processes = profile.processes.clone();
    traced.function_table = vec![common::function("app", "wait", 0, 1)];
    traced.functions = vec![tprof::FunctionTrace {
        function: common::function("app", "wait", 0, 1),
        entries: profile
            .processes
            .iter()
            .map(|p| common::entry(tprof::Group::Process(p.pid), 1, 5))
            .collect(),
    }];
    let file: Value =
        serde_json::from_str(&export::to_string(Format::Speedscope, &traced).unwrap()).unwrap();
    let profiles = file["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 1, "{}", profiles.len());
    assert_eq!(profiles[0]["name"], "app::worker/1 (100,000 processes)");
    assert_eq!(profiles[0]["endValue"], 500_000);
}

/// A call_time profile whose program's threads waited long on the OS's run queue says so in
/// its pprof export's comments (`go tool pprof -comments`), as its text report does.
#[test]
fn a_call_time_pprof_says_when_the_os_made_the_threads_wait() {
    let comments = |waited_ns: u64| {
        let mut profile = Profile::empty(TraceType::CallTime);
        profile.meta.runs = vec![common::run_with_waits(1_000_000_000, waited_ns, 2)];
        let proto = common::decode_pprof(&profile);
        proto
            .comment
            .iter()
            .map(|c| proto.string_table[*c as usize].clone())
            .collect::<Vec<_>>()
    };
    let loaded = comments(1_000_000_000);
    assert_eq!(loaded.len(), 2, "{loaded:?}");
    assert_eq!(loaded[0], "tprof call_time");
    assert!(
        loaded[1].starts_with("Note: the OS kept the program's threads waiting to run for 50.00%"),
        "{loaded:?}"
    );
    assert_eq!(comments(1_000_000), ["tprof call_time"]);
}

/// The same note, where the other exports' readers look: speedscope's name, Chrome's
/// `otherData.run_queue` and the html page's header note; none when the waits were small.
#[test]
fn every_export_of_a_call_time_profile_says_when_the_os_made_the_threads_wait() {
    let exported = |waited_ns: u64| {
        let mut profile = Profile::empty(TraceType::CallTime);
        profile.meta.runs = vec![common::run_with_waits(1_000_000_000, waited_ns, 2)];
        let speedscope: Value =
            serde_json::from_str(&export::to_string(Format::Speedscope, &profile).unwrap())
                .unwrap();
        let chrome: Value =
            serde_json::from_str(&export::to_string(Format::Chrome, &profile).unwrap()).unwrap();
        let page = embedded(&export::to_string(Format::Html, &profile).unwrap());
        (
            speedscope["name"].as_str().unwrap().to_owned(),
            chrome["otherData"].get("run_queue").cloned(),
            page.get("note").cloned(),
        )
    };
    let waits = "Note: the OS kept the program's threads waiting to run for 50.00%";
    let (name, chrome, page) = exported(1_000_000_000);
    assert!(
        name.starts_with("tprof call_time — ") && name.contains(waits),
        "{name}"
    );
    let chrome = chrome.expect("otherData.run_queue");
    assert!(chrome.as_str().unwrap().starts_with(waits), "{chrome}");
    // The page's header adds the full stop after the note.
    let page = page.expect("the page's note");
    let page = page.as_str().unwrap();
    assert!(page.starts_with(waits) && !page.ends_with('.'), "{page}");
    let (name, chrome, page) = exported(1_000_000);
    assert_eq!(name, "tprof call_time");
    assert_eq!(chrome, None);
    assert!(page.as_ref().is_none_or(Value::is_null), "{page:?}");
}
