//! Allocation mode through `tprof::profile`: two processes with known allocation sites, one
//! allocating ten times what the other does, in the profile (exactly, at `sample_rate = 1`),
//! in its reports (by stack, process and site), its pprof heap profile, the archive and a merge.
#![cfg(target_os = "linux")]

use std::sync::{Arc, Mutex};

use runtime::Pid;
use runtime::sample::{AllocRate, SampleOptions, Sampler};
use runtime::trace::TracePattern;
use tprof::samples::SamplerKind;
use tprof::{Profile, ProfileOptions};

// Installs the counting allocator.
mod common;

/// One allocation session at a time in this binary: the allocator has one rate per program.
static SERIAL: Mutex<()> = Mutex::new(());

/// Allocates `n` blocks of `size` bytes, freed at once.
#[runtime::traced]
fn allocate_little(n: usize, size: usize) {
    for _ in 0..n {
        std::hint::black_box(Vec::<u8>::with_capacity(size));
    }
}

/// The same, at another site.
#[runtime::traced]
fn allocate_much(n: usize, size: usize) {
    for _ in 0..n {
        std::hint::black_box(Vec::<u8>::with_capacity(size));
    }
}

/// Allocates `n` blocks of `size` bytes and keeps them.
#[runtime::traced]
fn keep_blocks(n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| Vec::with_capacity(size)).collect()
}

/// A shared buffer to print into.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Spawns the little process (`n` blocks of 1000 bytes, and 5 kept) and the much one (`10 n`
/// blocks), waits for both, and returns their pids.
async fn two_processes(n: usize) -> (Pid, Pid) {
    let parent = runtime::self_pid();
    let little = runtime::spawn(async move {
        allocate_little(n, 1000);
        let kept = keep_blocks(5, 1000);
        runtime::send(parent, 1u8);
        // Holds its blocks until the profile is taken.
        runtime::receive::<()>().await;
        drop(kept);
    })
    .expect("spawn");
    let much = runtime::spawn(async move {
        allocate_much(10 * n, 1000);
        runtime::send(parent, 2u8);
    })
    .expect("spawn");
    for _ in 0..2 {
        runtime::receive::<u8>().await;
    }
    (little, much)
}

/// A profile of [`two_processes`] at `rate`, and what it printed.
fn profiled(rate: AllocRate, n: usize) -> (Profile, Pid, Pid, String) {
    let printed = Buffer::default();
    let outcome = tprof::profile(
        move || two_processes(n),
        ProfileOptions::new()
            .pattern(TracePattern::module(module_path!()))
            .sample(
                SampleOptions::new()
                    .sampler(Sampler::Alloc)
                    .alloc_rate(rate),
            )
            .device(printed.clone()),
    )
    .expect("profiled");
    let (little, much) = outcome.result.expect("ran");
    let text = String::from_utf8(printed.0.lock().expect("buffer").clone()).expect("utf-8");
    (outcome.profile, little, much, text)
}

#[test]
fn sampled_sites_come_out_exactly_at_sample_rate_one_in_the_profile_and_its_report() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (profile, little, much, text) = profiled(AllocRate::SampleRate(1.0), 10);
    let set = &profile.samples;
    assert_eq!(set.sources.len(), 1);
    assert_eq!(set.sources[0].sampler, SamplerKind::Alloc);
    assert_eq!(set.sources[0].alloc_rate, Some(AllocRate::SampleRate(1.0)));

    let l = profile.sampled_allocations("allocate_little", Some(little));
    let m = profile.sampled_allocations("allocate_much", Some(much));
    assert_eq!((l.objects, l.bytes, l.samples), (10.0, 10_000.0, 10));
    assert_eq!((m.objects, m.bytes, m.samples), (100.0, 100_000.0, 100));
    assert_eq!((l.inuse_bytes, m.inuse_bytes), (0.0, 0.0), "freed at once");
    // Kept: the five blocks and the vector holding them, still live when the profile was taken.
    let kept = profile.sampled_allocations("keep_blocks", Some(little));
    assert_eq!(
        (kept.inuse_objects, kept.inuse_bytes),
        (6.0, 5_000.0 + 5.0 * 24.0)
    );
    assert_eq!(
        profile.sampled_allocations("allocate_much", Some(little)),
        Default::default(),
        "a site of the other process"
    );

    // By site: each process's own site, with its bytes.
    let sites = tprof::alloc_sites::by_site(&profile);
    let site = |name: &str, pid: Pid| {
        sites
            .iter()
            .find(|s| s.site == name && s.pid == Some(pid))
            .unwrap_or_else(|| panic!("no site {name} of {pid} in {sites:#?}"))
            .figures
    };
    assert_eq!(site("alloc_mode::allocate_much/2", much).bytes, 100_000.0);
    assert_eq!(
        site("alloc_mode::allocate_little/2", little).bytes,
        10_000.0
    );
    // Sited at the line that allocated (two below the function's name), not at the `fn` line.
    let much_fn = profile
        .lookup("allocate_much")
        .expect("traced")
        .function
        .clone();
    let much_site = sites
        .iter()
        .find(|s| s.site == "alloc_mode::allocate_much/2")
        .expect("the site");
    assert_eq!(
        much_site.location,
        Some((much_fn.file.clone(), much_fn.line + 2)),
        "{sites:#?}"
    );

    // The report: Julia's tree in bytes, the totals in bytes and allocations, the sites.
    assert!(
        text.starts_with("Overhead ╎ [+additional indent] Count File:Line; Function\n"),
        "{text}"
    );
    assert!(text.contains("Total bytes: "), "{text}");
    assert!(text.contains("Allocation sites (estimated):"), "{text}");
    let much_line = text
        .lines()
        .find(|l| l.ends_with("alloc_mode::allocate_much/2") || l.contains("allocate_much/2 ("))
        .filter(|l| l.contains("100000"))
        .is_some();
    assert!(much_line, "{text}");
}

#[test]
fn poisson_sampling_keeps_the_proportion_between_the_processes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 400 KB and 4 MB at one sample per 4 KiB: about 100 and 1,000 samples.
    let (profile, little, much, _) = profiled(AllocRate::Bytes(4096), 400);
    let l = profile.sampled_allocations("allocate_little", Some(little));
    let m = profile.sampled_allocations("allocate_much", Some(much));
    assert!(l.samples >= 40 && m.samples >= 400, "{l:?} {m:?}");
    let ratio = m.bytes / l.bytes;
    assert!((6.0..=16.0).contains(&ratio), "much / little = {ratio}");
    assert!((0.8..=1.25).contains(&(m.bytes / 4e6)), "{m:?}");
}

#[test]
fn an_allocation_profile_survives_the_archive_and_merges() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (profile, little, much, _) = profiled(AllocRate::SampleRate(1.0), 10);
    let mut bytes = Vec::new();
    tprof::archive::write(&profile, &mut bytes).expect("written");
    let read = tprof::archive::read(&mut &bytes[..]).expect("read back");
    assert_eq!(read.samples, profile.samples);

    let merged = tprof::archive::merge(&[profile.clone(), read]).expect("merged");
    assert_eq!(merged.samples.sources.len(), 2);
    assert!(
        merged
            .samples
            .sources
            .iter()
            .all(|s| s.alloc_rate == Some(AllocRate::SampleRate(1.0)))
    );
    let total = |p: &Profile, f| p.sampled_allocations(f, None).bytes;
    assert_eq!(total(&merged, "allocate_much"), 200_000.0);
    assert_eq!(total(&merged, "allocate_little"), 20_000.0);
    let _ = (little, much);
}

#[test]
fn pprof_of_an_allocation_profile_is_a_heap_profile_with_pid_labels() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (profile, little, much, _) = profiled(AllocRate::SampleRate(1.0), 10);
    let p = common::decode_pprof(&profile);
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (p.string(t.r#type), p.string(t.unit)))
        .collect();
    assert_eq!(
        types,
        [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes")
        ]
    );
    assert_eq!(p.string(p.default_sample_type), "inuse_space");
    assert!(
        p.string(p.drop_frames)
            .starts_with("<?alloc::(alloc|raw_vec)::.*")
    );
    // Per process: the values of the samples labelled with its pid that pass through a site.
    let of = |pid: Pid, site: &str| -> Vec<i64> {
        let mut sum = vec![0i64; 4];
        for s in &p.sample {
            let labelled = s
                .label
                .iter()
                .any(|l| p.string(l.key) == "pid" && p.string(l.str) == pid.to_string());
            let through = s.location_id.iter().any(|id| {
                let loc = &p.location[*id as usize - 1];
                loc.line.iter().any(|line| {
                    let f = &p.function[line.function_id as usize - 1];
                    p.string(f.name).contains(site)
                })
            });
            if labelled && through {
                for (t, v) in sum.iter_mut().zip(&s.value) {
                    *t += v;
                }
            }
        }
        sum
    };
    assert_eq!(of(much, "allocate_much"), [100, 100_000, 0, 0]);
    assert_eq!(of(little, "allocate_little"), [10, 10_000, 0, 0]);
    assert_eq!(of(little, "keep_blocks"), [6, 5_120, 6, 5_120]);
}

#[test]
fn every_other_export_of_an_allocation_profile_weighs_bytes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (profile, _, much, _) = profiled(AllocRate::SampleRate(1.0), 10);
    let folded = tprof::export::to_string(tprof::export::Format::Folded, &profile).expect("folded");
    let much_bytes: u64 = folded
        .lines()
        .filter(|l| l.contains(&much.to_string()) && l.contains("allocate_much"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    assert_eq!(much_bytes, 100_000, "{folded}");
    let speedscope =
        tprof::export::to_string(tprof::export::Format::Speedscope, &profile).expect("speedscope");
    let speedscope: serde_json::Value = serde_json::from_str(&speedscope).expect("JSON");
    let units: Vec<&str> = speedscope["profiles"]
        .as_array()
        .expect("profiles")
        .iter()
        .map(|p| p["unit"].as_str().expect("a unit"))
        .collect();
    assert!(
        !units.is_empty() && units.iter().all(|u| *u == "bytes"),
        "{units:?}"
    );
    let svg = tprof::export::to_string(tprof::export::Format::Svg, &profile).expect("svg");
    assert!(
        svg.contains("bytes of allocations (estimated)"),
        "the title says bytes"
    );
    let html = tprof::export::to_string(tprof::export::Format::Html, &profile).expect("html");
    assert!(
        html.contains("sample_rate 1 (bytes)"),
        "the page's title says bytes"
    );
    for format in [
        tprof::export::Format::Json,
        tprof::export::Format::Speedscope,
        tprof::export::Format::Svg,
        tprof::export::Format::Html,
    ] {
        let text = tprof::export::to_string(format, &profile).expect("exported");
        assert!(text.contains("allocate_much"), "{}", format.name());
    }
}

#[test]
fn an_allocation_profile_lists_its_bytes_on_the_lines_that_allocated() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (profile, _, _, _) = profiled(AllocRate::SampleRate(1.0), 10);
    let listing = profile
        .listing("allocate_much")
        .expect("a listing")
        .to_string();
    // The line of allocate_much's `Vec::with_capacity`, found in this file.
    let source = include_str!("alloc_mode.rs");
    let from = source
        .lines()
        .position(|l| l.starts_with("fn allocate_much"))
        .expect("the function");
    let line = from
        + 1
        + source
            .lines()
            .skip(from)
            .position(|l| l.contains("with_capacity"))
            .expect("its allocation");
    assert!(
        listing.starts_with("Total: ")
            && listing.contains("alloc_space, alloc_objects, inuse_space, inuse_objects"),
        "{listing}"
    );
    // 100 blocks of 1000 bytes there, none still allocated (cum columns: 97.66kB, 100, 0, 0).
    // The row of that line: its number, then its source (the file is found wherever the test
    // runs from), or its number alone where the source cannot be read.
    let row = listing
        .lines()
        .find(|l| {
            let l = l.trim_end();
            l.ends_with(&format!(" {line}")) || l.contains(&format!(" {line}:"))
        })
        .unwrap_or_else(|| panic!("line {line} is listed: {listing}"));
    assert!(row.contains("with_capacity"), "its source is shown: {row}");
    let cells: Vec<&str> = row.split_whitespace().take(9).collect();
    assert_eq!(
        cells,
        [
            ".",
            "97.66kB",
            ".",
            "100",
            ".",
            ".",
            ".",
            ".",
            &format!("{line}:")
        ]
    );
}

/// Frees of sampled blocks the runtime lost (its queue of frees was full; the runtime's own
/// test `frees_lost_to_a_full_queue_are_reported` drives that) are told wherever in-use
/// figures are: the report's sites, pprof's comments, json; the archive keeps the count and a
/// merge adds it up. A run that lost none says nothing.
#[test]
fn lost_frees_are_told_beside_the_in_use_figures() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut profile, _, _, text) = profiled(AllocRate::SampleRate(1.0), 10);
    let said = |text: &str| text.contains("lost (queue full)");
    let comments = |p: &Profile| {
        let p = common::decode_pprof(p);
        p.comment
            .iter()
            .map(|c| p.string(*c).to_owned())
            .collect::<Vec<String>>()
    };
    assert_eq!(profile.samples.lost_frees(), 0, "a normal run loses none");
    assert!(!said(&text), "{text}");
    assert!(!comments(&profile).iter().any(|c| said(c)));

    profile.samples.sources[0].lost_frees = 42;
    let note = "42 frees of sampled blocks were lost (queue full): in-use figures may over-count";
    let mut report = Vec::new();
    tprof::sample_report::print(&mut report, &profile, &Default::default()).expect("printed");
    let report = String::from_utf8(report).expect("utf-8");
    let sites = report
        .find("Allocation sites (estimated):")
        .expect("the sites");
    assert!(report[sites..].contains(&format!("\n{note}\n")), "{report}");
    assert!(comments(&profile).iter().any(|c| c == note));
    let json = tprof::export::to_string(tprof::export::Format::Json, &profile).expect("json");
    assert!(json.contains("\"lost_frees\": 42"), "{json}");

    let mut bytes = Vec::new();
    tprof::archive::write(&profile, &mut bytes).expect("written");
    let read = tprof::archive::read(&mut &bytes[..]).expect("read back");
    assert_eq!(read.samples.sources[0].lost_frees, 42);
    let merged = tprof::archive::merge(&[profile, read]).expect("merged");
    assert_eq!(merged.samples.lost_frees(), 84, "summed");

    // `tprof report --list` of the allocation samples, under their in-use columns.
    let dir = std::env::temp_dir();
    let file = dir.join(format!("tprof-lost-frees-{}.tprof", std::process::id()));
    let listed = dir.join(format!("tprof-lost-frees-{}.txt", std::process::id()));
    tprof::archive::write_file(&merged, &file).expect("written");
    let options = tprof::listing::ListOptions::default();
    tprof::command::list(&file, "allocate_much", &options, Some(&listed)).expect("listed");
    let listing = std::fs::read_to_string(&listed).expect("the listing");
    let _ = (std::fs::remove_file(&file), std::fs::remove_file(&listed));
    assert!(listing.contains("inuse_space"), "{listing}");
    assert!(
        listing.ends_with(
            "\n84 frees of sampled blocks were lost (queue full): in-use figures may over-count\n"
        ),
        "{listing}"
    );
}
