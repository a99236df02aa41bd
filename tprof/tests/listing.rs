//! Annotated source listings (`tprof::listing`): the figures of hand-built samples land on the
//! lines of a fixture file, a missing file is said so once, bad patterns are told, and a real
//! CPU-sampled busy loop lands on the lines of its function's body.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::samples::Build;
use tprof::Profile;
use tprof::listing::{Column, LineFigures, LineFrame, ListOptions, ListingError, SourceState};
use tprof::samples::{SampleFrame, SamplerKind};

/// The fixture file, relative to this package's folder.
const APP: &str = "tests/data/listing/app.rs";

fn here() -> ListOptions {
    ListOptions::new().source_root(env!("CARGO_MANIFEST_DIR"))
}

/// A traced frame of function `function` (an index into the function table), sampled at
/// `line`.
fn traced_at(b: &mut Build, function: u32, line: Option<u32>) -> u32 {
    b.frame(SampleFrame {
        function: Some(function),
        name: String::new(),
        file: None,
        line,
        address: 0,
    })
}

/// CPU samples at 100 Hz (10 ms each) in the fixture file's `serve` (defined on line 9):
/// 2 at line 10 (calling `parse`, on line 18), 5 at line 12 (calling `checksum`, native, on
/// line 24), 1 at line 14 itself, 1 without a line; and 1 elsewhere.
fn serve_profile(file: &str) -> Profile {
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, 1, 0.0);
    let t = b.thread(7, None);
    b.traced("serve", file, 9);
    b.traced("parse", file, 17);
    let serve = 0;
    let parse = 1;
    let serve_10 = traced_at(&mut b, serve, Some(10));
    let serve_12 = traced_at(&mut b, serve, Some(12));
    let serve_14 = traced_at(&mut b, serve, Some(14));
    let serve_nowhere = traced_at(&mut b, serve, None);
    let parse_18 = traced_at(&mut b, parse, Some(18));
    let checksum = b.native("app::checksum", Some((file, 24)), 0x40);
    let main = b.native("app::main", Some((file, 5)), 0x10);
    let p = Some("<0.5.0>");
    let s = b.stack(&[serve_10, parse_18]);
    b.cpu(p, t, s, 2.0);
    let s = b.stack(&[serve_12, checksum]);
    b.cpu(p, t, s, 5.0);
    let s = b.stack(&[serve_14]);
    b.cpu(p, t, s, 1.0);
    let s = b.stack(&[serve_nowhere]);
    b.cpu(p, t, s, 1.0);
    let s = b.stack(&[main]);
    b.cpu(None, t, s, 1.0);
    b.profile
}

#[test]
fn the_figures_land_on_the_lines_of_the_fixture_file() {
    let profile = serve_profile(APP);
    let listing = profile.listing_with("serve", &here()).unwrap();
    assert_eq!(
        listing.to_string(),
        "Total: 100ms\n\
         ROUTINE ======================== app::serve in tests/data/listing/app.rs\n      \
         20ms       90ms (flat, cum) 90.00% of Total\n \
         Note: 10ms of it came with no line of its own: shown on line 9, where it is defined\n      \
         10ms       10ms      9:fn serve() -> u64 {\n         \
         .       20ms     10:    let a = parse(1);\n         \
         .          .     11:    let b = parse(2);\n         \
         .       50ms     12:    let c = checksum(a, b);\n         \
         .          .     13:    log(c);\n      \
         10ms       10ms     14:    c\n         \
         .          .     15:}\n         \
         .          .     16:\n         \
         .          .     17:fn parse(n: u64) -> u64 {\n         \
         .          .     18:    n * 2\n         \
         .          .     19:}\n"
    );
    // A native function, from five lines before its line to the end of the file.
    let listing = profile.listing_with("checksum$", &here()).unwrap();
    let text = listing.to_string();
    assert!(
        text.contains(
            "ROUTINE ======================== app::checksum in tests/data/listing/app.rs\n      \
             50ms       50ms (flat, cum) 50.00% of Total\n         \
             .          .     19:}\n"
        ),
        "{text}"
    );
    assert!(text.contains("      50ms       50ms     24:        x = x.rotate_left(5) ^ i;\n"));
    assert!(
        text.ends_with("         .          .     29:fn log(_c: u64) {}\n"),
        "{text}"
    );
    // Several functions: by name.
    let both = profile.listing_with("serve|parse", &here()).unwrap();
    let names: Vec<&str> = both.routines.iter().map(|r| r.function.as_str()).collect();
    assert_eq!(names, ["app::parse", "app::serve"]);
    assert_eq!(both.routines[0].flat, [20e6]);
}

/// A stack that passes a line twice (recursion) counts once on it, and once in its
/// function's total.
#[test]
fn a_recursive_stack_counts_once_per_line() {
    let mut figures = LineFigures::new(vec![Column::count("samples"), Column::bytes("bytes")]);
    let at = |line| LineFrame {
        function: "app::walk".into(),
        file: Some(APP.into()),
        line: Some(line),
        start_line: None,
    };
    let (a, b) = (figures.frame(at(10)), figures.frame(at(12)));
    figures.add(&[a, b, a, b], &[1.0, 2048.0]);
    let listing = figures.listing("walk", &here()).unwrap();
    let routine = &listing.routines[0];
    assert_eq!(routine.cum, [1.0, 2048.0]);
    assert_eq!(routine.flat, [1.0, 2048.0]);
    let line = |n: u32| routine.lines.iter().find(|l| l.line == n).unwrap();
    assert_eq!(line(10).cum, [1.0, 2048.0]);
    assert_eq!(line(12).cum, [1.0, 2048.0]);
    assert_eq!(line(12).flat, [1.0, 2048.0]);
    assert_eq!(line(10).flat, [0.0, 0.0]);
    // Two columns side by side.
    let text = listing.to_string();
    assert!(text.starts_with("Total: 1 samples, 2kB bytes\n"), "{text}");
    assert!(
        text.contains("         1          1        2kB        2kB (flat, cum: samples, bytes)   100% of Total\n"),
        "{text}"
    );
    assert!(
        text.contains("         .          1          .        2kB     10:    let a = parse(1);\n"),
        "{text}"
    );
}

#[test]
fn a_missing_source_file_is_said_so_once_and_figures_go_by_line_number() {
    let profile = serve_profile("src/no_such_file.rs");
    let listing = profile.listing_with("serve|parse", &here()).unwrap();
    assert!(
        listing
            .routines
            .iter()
            .all(|r| matches!(r.source, SourceState::Missing(_)))
    );
    let text = listing.to_string();
    assert_eq!(
        text.matches("Source not found: src/no_such_file.rs: ")
            .count(),
        1,
        "{text}"
    );
    assert!(
        text.contains(
            "ROUTINE ======================== app::serve in src/no_such_file.rs\n      \
             20ms       90ms (flat, cum) 90.00% of Total\n"
        ),
        "{text}"
    );
    // Only the lines with figures, by number.
    assert!(
        text.ends_with(
            "      10ms       10ms      9\n         \
             .       20ms     10\n         \
             .       50ms     12\n      \
             10ms       10ms     14\n"
        ),
        "{text}"
    );
    assert!(text.contains("      20ms       20ms     18\n"), "{text}");
}

#[test]
fn a_bad_pattern_and_no_match_are_told_with_near_names() {
    let profile = serve_profile(APP);
    let bad = profile.listing("serve(").unwrap_err();
    assert!(matches!(bad, ListingError::BadPattern { .. }), "{bad:?}");
    assert!(
        bad.to_string()
            .starts_with("`serve(` is not a regular expression: "),
        "{bad}"
    );
    let none = profile.listing("Serve").unwrap_err();
    assert_eq!(
        none,
        ListingError::NoMatch {
            pattern: "Serve".into(),
            near: vec!["app::serve".into()],
        }
    );
    assert_eq!(
        none.to_string(),
        "no function with samples matches `Serve`; near: app::serve"
    );
    let far = profile.listing("nothing_like_it").unwrap_err();
    assert!(matches!(&far, ListingError::NoMatch { near, .. } if near.is_empty()));
    // A profile without samples (of the sampler asked for) has nothing to list.
    assert_eq!(
        Profile::empty(tprof::TraceType::CallTime).listing("x"),
        Err(ListingError::NoSamples)
    );
    assert_eq!(
        profile.listing_with("serve", &here().sampler(SamplerKind::Wall)),
        Err(ListingError::NoSamples)
    );
}

/// Spins: the lines of its body are what a CPU sample of it must land on.
const SPIN_END: u32 = line!() + 9;
#[runtime::traced]
fn spin(n: u64) -> u64 {
    let mut x = std::hint::black_box(n);
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        x ^= x >> 7;
    }
    std::hint::black_box(x)
}

#[cfg(target_os = "linux")]
#[test]
fn a_sampled_busy_loop_lands_on_the_lines_of_its_body() {
    use runtime::sample::SampleOptions;
    use tprof::ProfileOptions;
    let outcome = tprof::profile(
        || async {
            let mut total = 0;
            for _ in 0..2000 {
                total ^= spin(50_000);
                tokio::task::yield_now().await;
            }
            total
        },
        ProfileOptions::new()
            .sample(SampleOptions::new().hz(997))
            .device(std::io::sink()),
    )
    .expect("profiled");
    assert!(outcome.result.is_ok());
    let profile = &outcome.profile;
    let defined = profile
        .function_table
        .iter()
        .find(|f| f.name == "spin")
        .expect("spin in the function table")
        .line;
    assert_eq!(SPIN_END, defined + 7, "the markers are around spin");
    // The package's folder: the traced function's file is relative to the workspace.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let listing = profile
        .listing_with("^listing::spin$", &ListOptions::new().source_root(root))
        .unwrap();
    let routine = &listing.routines[0];
    assert_eq!(routine.source, SourceState::Read, "{listing}");
    let total = routine.cum[0];
    assert!(total > 0.0, "{listing}");
    let in_body: f64 = routine
        .lines
        .iter()
        .filter(|l| l.line > defined && l.line < SPIN_END)
        .map(|l| l.cum[0])
        .sum();
    // Samples taken as spin is entered or left, or whose native walk missed its frame, have
    // no line of their own (they go to its definition line): a few.
    assert!(
        in_body >= 0.5 * total,
        "{in_body} of {total} ns on the lines of spin's body:\n{listing}"
    );
    // The lines survive the archive.
    let mut bytes = Vec::new();
    tprof::archive::write(profile, &mut bytes).unwrap();
    let back = tprof::archive::read(&mut bytes.as_slice()).unwrap();
    assert_eq!(
        back.listing_with("^listing::spin$", &ListOptions::new().source_root(root)),
        Ok(listing.clone())
    );
    // And the lines carry their text.
    assert!(
        listing
            .to_string()
            .contains(":        x = x.wrapping_mul(6364136223846793005)"),
        "{listing}"
    );
}

/// A traced function sampled at several lines is still one frame, at its definition line, in
/// the report and in the exports that name frames (speedscope, chrome, html); pprof's
/// locations keep the lines.
#[test]
fn a_traced_function_sampled_at_several_lines_is_one_frame() {
    use tprof::export::{Format, to_string};
    let profile = serve_profile(APP);
    let pretty = to_string(Format::Pretty, &profile).unwrap();
    let tree = pretty.split("\n\n").next().unwrap();
    assert_eq!(
        tree.matches("tests/data/listing/app.rs:9; app::serve/0")
            .count(),
        1,
        "{pretty}"
    );
    let speedscope: serde_json::Value =
        serde_json::from_str(&to_string(Format::Speedscope, &profile).unwrap()).unwrap();
    let named = |frames: &serde_json::Value| {
        frames
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["name"] == "app::serve")
            .count()
    };
    assert_eq!(named(&speedscope["shared"]["frames"]), 1, "{speedscope}");
    let html = to_string(Format::Html, &profile).unwrap();
    assert_eq!(html.matches("\"mfa\":\"app::serve/0\"").count(), 1);
    // In chrome's timeline, the samples of serve follow one another: one slice.
    let chrome: serde_json::Value =
        serde_json::from_str(&to_string(Format::Chrome, &profile).unwrap()).unwrap();
    let events = chrome["traceEvents"].as_array().unwrap();
    let slices = events.iter().filter(|e| e["name"] == "app::serve").count();
    assert_eq!(slices, 1, "{chrome}");
}

/// The html viewer holds each function's listing, tied to its entry in the function list,
/// and the place and script that show it.
#[test]
fn the_html_viewer_holds_the_listings() {
    use tprof::export::{Format, to_string};
    // The page reads relative source paths from the current folder: this package's, here.
    let html = to_string(Format::Html, &serve_profile(APP)).unwrap();
    assert!(html.contains("<section id=\"listing-box\""));
    assert!(html.contains("function showListing(fn)"));
    let start = html.find("id=\"tprof-data\">").unwrap() + "id=\"tprof-data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
    let listings = &data["listings"];
    assert_eq!(listings["sampler"], "cpu");
    assert_eq!(listings["columns"][0]["unit"], "nanoseconds");
    assert_eq!(listings["totals"][0], 100e6);
    let routines = listings["routines"].as_array().unwrap();
    let mfa = |r: &serde_json::Value| {
        data["functions"][r["entry"].as_u64().unwrap() as usize]["mfa"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let serve = routines.iter().find(|r| mfa(r) == "app::serve/0").unwrap();
    assert_eq!(serve["file"], APP);
    assert_eq!(serve["source"]["state"], "read");
    assert_eq!(serve["cum"][0], 90e6);
    assert_eq!(serve["at_definition"][0], 9);
    // Each line: [line, flat, cum, text].
    let line = |n: u64| {
        serve["lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l[0] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(line(12)[2][0], 50e6);
    assert_eq!(line(12)[3], "    let c = checksum(a, b);");
    assert_eq!(line(14)[1][0], 10e6);
    assert_eq!(line(11)[2][0], 0.0);
    // The native function has its own, under its own name.
    assert!(routines.iter().any(|r| mfa(r) == "app::checksum"));
}

/// A native frame of a traced function, or of a closure in its body, in its file (by an
/// absolute path), lists with the traced function; one of a namesake elsewhere does not.
#[test]
fn native_frames_of_a_traced_function_list_with_it() {
    let mut profile = serve_profile(APP);
    let mut b = Build { profile };
    let absolute = format!("/home/someone/app/{APP}");
    let closure = b.native("app::serve::{{closure}}", Some((&absolute, 11)), 0x80);
    let entering = b.native("app::serve", Some((&absolute, 8)), 0x84);
    let namesake = b.native("app::serve", Some(("/elsewhere/app.rs", 3)), 0x88);
    for (frame, weight) in [(closure, 3.0), (entering, 1.0), (namesake, 4.0)] {
        let stack = b.stack(&[frame]);
        b.cpu(Some("<0.5.0>"), 0, stack, weight);
    }
    profile = b.profile;
    let listing = profile.listing_with("^app::serve$", &here()).unwrap();
    let files: Vec<Option<&str>> = listing.routines.iter().map(|r| r.file.as_deref()).collect();
    assert_eq!(files, [Some("/elsewhere/app.rs"), Some(APP)]);
    let serve = &listing.routines[1];
    assert_eq!(serve.cum, [130e6]);
    let line = |n: u32| serve.lines.iter().find(|l| l.line == n).unwrap();
    assert_eq!(line(11).flat, [30e6]);
    // Its attribute's line, before its definition, is shown.
    assert_eq!(serve.lines[0].line, 8);
    assert_eq!(line(8).flat, [10e6]);
}
