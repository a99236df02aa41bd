//! The join of traced and native frames the way users build: `tests/join-crate` (a traced
//! `crunch` calling the untraced `fnv_hash` and `parse`, and allocating in its own body) built
//! in release with frame pointers at each debug level the docs mention, run under `TPROF_RUN`
//! as `tprof run` runs it, its run files read as `tprof report` reads them.
//!
//! At every level a CPU sample in `fnv_hash` goes straight from the traced `crunch` to
//! `fnv_hash` (the native stack cut at the traced frame, whatever names DWARF gives); with line
//! tables (every level but 0) `crunch`'s samples sit on the line that calls `fnv_hash`, and an
//! allocation in its body is sited at the line that allocated.
//!
//! Only the crate changes debug level (`--config profile.release.package.join-crate.debug`):
//! the levels share one target dir, the runtime and the other dependencies are built once (at
//! the crate manifest's `line-tables-only`, the level whose DWARF names no module) and each
//! level rebuilds the crate alone, in seconds.
//!
//! The dependencies are built without optimization (`profile.release.package."*".opt-level`):
//! their release build was most of this test's time (144 against 83 s of CPU), and what is
//! joined does not depend on it: the crate is optimized as users build it, and so is every
//! generic function it instantiates, the traced call's inline path (the macro's expansion),
//! tokio's task polls and the runtime's poll wrapper among them; the runtime's own functions
//! (the samplers, the allocator, the trace's out-of-line paths) keep their frames above the
//! traced frame, or inside the allocator's, where the join does not look.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tprof::Profile;

/// The debug levels the docs mention, as `debug = …` is written in a manifest.
const LEVELS: [&str; 4] = ["0", "\"line-tables-only\"", "\"limited\"", "\"full\""];

fn crate_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/join-crate")
}

/// The line of `crunch`'s source marked `marker`.
fn marked_line(marker: &str) -> u32 {
    let source = std::fs::read_to_string(crate_dir().join("src/main.rs")).unwrap();
    let at = source.lines().position(|l| l.ends_with(marker)).unwrap();
    at as u32 + 1
}

/// The crate's binary, built with `debug = level`, into a target dir beside this test's.
fn build(level: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<this test>
    let target = exe.ancestors().nth(3).unwrap().join("join-crate");
    let status = Command::new(env!("CARGO"))
        .current_dir(crate_dir())
        .args(["build", "--release", "--quiet"])
        .args([
            "--config",
            &format!("profile.release.package.join-crate.debug={level}"),
            "--config",
            "profile.release.package.\"*\".opt-level=0",
        ])
        .env("CARGO_TARGET_DIR", &target)
        .env("RUSTFLAGS", "-C force-frame-pointers=yes")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .unwrap();
    assert!(
        status.success(),
        "building the join crate at debug = {level}"
    );
    target.join("release/join-crate")
}

/// Runs `exe` (`batches` batches of 2,000 rounds) under `TPROF_RUN=sample` with `sampler`,
/// and reads what it wrote.
fn run(exe: &Path, sampler: &str, batches: u32, env: &[(&str, &str)]) -> Profile {
    let dir = std::env::temp_dir().join(format!(
        "tprof-join-{}-{sampler}-{}",
        std::process::id(),
        exe.metadata().unwrap().len()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let status = Command::new(exe)
        .arg(batches.to_string())
        .env("TPROF_RUN", "sample")
        .env("TPROF_RUN_SAMPLER", sampler)
        .env("TPROF_RUN_DIR", &dir)
        .env("TPROF_RUN_QUIET", "1")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let profile = tprof::command::read_profile(&dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    profile
}

/// Each sample's frame names, outermost first, with each frame's line.
fn stacks(profile: &Profile) -> Vec<Vec<(String, Option<u32>)>> {
    let set = &profile.samples;
    set.samples
        .iter()
        .filter_map(|s| s.stack)
        .map(|stack| {
            set.frames_of(stack)
                .into_iter()
                .map(|f| {
                    let frame = &set.frames[f as usize];
                    (set.frame_name(&profile.function_table, f), frame.line)
                })
                .collect()
        })
        .collect()
}

#[test]
fn traced_and_native_frames_join_at_every_debug_level_the_docs_mention() {
    let hot = marked_line("// HOT LINE");
    let alloc_line = marked_line("// ALLOC LINE");
    let mut seen = Vec::new();
    for level in LEVELS {
        let exe = build(level);
        let cpu = run(&exe, "cpu", 150, &[("TPROF_RUN_HZ", "999")]);
        let stacks = stacks(&cpu);
        // The samples in fnv_hash: what lies between crunch's traced frame and it.
        let mut between: HashMap<usize, usize> = HashMap::new();
        let mut crunch_lines: HashMap<Option<u32>, usize> = HashMap::new();
        for stack in &stacks {
            let Some(hash) = stack.iter().position(|(n, _)| n.ends_with("fnv_hash")) else {
                continue;
            };
            let crunch = stack
                .iter()
                .rposition(|(n, _)| n == "join_crate::crunch/1")
                .unwrap_or_else(|| panic!("debug = {level}: fnv_hash under crunch: {stack:?}"));
            *between.entry(hash - crunch - 1).or_default() += 1;
            *crunch_lines.entry(stack[crunch].1).or_default() += 1;
        }
        // A sample taken as fnv_hash is entered (before its prologue sets up its frame) or
        // left misses crunch's native frame: a few may keep more; the rest go straight on.
        let samples: usize = between.values().sum();
        let straight = between.get(&0).copied().unwrap_or(0);
        assert!(
            samples >= 10,
            "debug = {level}: {samples} samples in fnv_hash"
        );
        assert!(
            straight * 100 >= samples * 95,
            "debug = {level}: frames between crunch and fnv_hash (count: samples): {between:?}"
        );
        if level != "0" {
            let on_hot = crunch_lines.get(&Some(hot)).copied().unwrap_or(0);
            assert!(
                on_hot * 100 >= samples * 95,
                "debug = {level}: crunch's line in the samples in fnv_hash: {crunch_lines:?}"
            );
        }
        // A listing pattern with the module path finds the untraced helper too.
        let listing = cpu.listing("join_crate::fnv_hash");
        assert!(listing.is_ok(), "debug = {level}: {listing:?}");

        let alloc = run(&exe, "alloc", 10, &[("TPROF_RUN_SAMPLE_RATE", "1")]);
        let sites = tprof::alloc_sites::by_site(&alloc);
        let top = sites
            .iter()
            .find(|s| s.site == "join_crate::crunch/1")
            .unwrap_or_else(|| panic!("debug = {level}: crunch's site in {sites:#?}"));
        if level != "0" {
            assert_eq!(
                top.location.as_ref().map(|l| l.1),
                Some(alloc_line),
                "debug = {level}: {sites:#?}"
            );
        }
        seen.push(format!(
            "debug = {level}: {samples} samples in fnv_hash, frames between {between:?}, \
             crunch at {crunch_lines:?}, site {:?} ({} allocations)",
            top.location, top.figures.objects
        ));
    }
    println!("{}", seen.join("\n"));
}
