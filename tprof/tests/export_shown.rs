//! Every export of a sampled profile shows its frames as the report does when asked
//! (`export::write_shown`, `tprof report -f F --focus ...`): the plumbing folded by default,
//! focus, hide and "frames of my crates only" as in the report; `export::write` keeps every
//! frame.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::samples::plumbed_profile;
use common::svg::svg_frames;
use serde_json::Value;
use tprof::export::{self, Format};
use tprof::sample_report::{Native, PrintOptions};
use tprof::{Profile, TraceType};

/// The formats `write_shown` filters, beside folded.
const DRAWN: [Format; 4] = [
    Format::Svg,
    Format::Speedscope,
    Format::Chrome,
    Format::Pprof,
];

/// `profile` in `format` as `options` show it (`None`: [`export::write`]).
fn exported(format: Format, profile: &Profile, options: Option<&PrintOptions>) -> Vec<u8> {
    let mut out = Vec::new();
    match options {
        Some(options) => export::write_shown(format, profile, options, &mut out),
        None => export::write(format, profile, &mut out),
    }
    .expect("exported");
    out
}

/// The frame names an export draws (speedscope's and pprof's: those a sample has on its
/// stack), and the total value of its samples.
fn drawn(format: Format, bytes: &[u8]) -> (BTreeSet<String>, u64) {
    let mut names = BTreeSet::new();
    let total = match format {
        Format::Svg => {
            let (frames, total) = svg_frames(std::str::from_utf8(bytes).unwrap());
            names.extend(frames.into_iter().map(|f| f.name));
            total
        }
        Format::Speedscope => {
            let file: Value = serde_json::from_slice(bytes).unwrap();
            let frames = file["shared"]["frames"].as_array().unwrap();
            // The first profile is every process together.
            let all = &file["profiles"][0];
            for sample in all["samples"].as_array().unwrap() {
                for i in sample.as_array().unwrap() {
                    let name = &frames[i.as_u64().unwrap() as usize]["name"];
                    names.insert(name.as_str().unwrap().to_owned());
                }
            }
            all["endValue"].as_u64().unwrap()
        }
        Format::Chrome => {
            // Slices are drawn over time: their total is not the samples'.
            let file: Value = serde_json::from_slice(bytes).unwrap();
            for e in file["traceEvents"].as_array().unwrap() {
                if e["ph"] == "X" {
                    names.insert(e["name"].as_str().unwrap().to_owned());
                }
            }
            0
        }
        Format::Pprof => {
            let mut raw = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut raw)
                .expect("gzip data");
            let p = <export::pprof::Profile as prost::Message>::decode(&raw[..]).unwrap();
            let function = |id: u64| p.function.iter().find(|f| f.id == id).unwrap();
            let mut total = 0;
            for s in &p.sample {
                total += s.value[1] as u64;
                for id in &s.location_id {
                    let location = p.location.iter().find(|l| l.id == *id).unwrap();
                    for line in &location.line {
                        names.insert(p.string(function(line.function_id).name).to_owned());
                    }
                }
            }
            total
        }
        other => panic!("{other} is not drawn here"),
    };
    (names, total)
}

fn any_of(names: &BTreeSet<String>, part: &str) -> bool {
    names.iter().any(|n| n.contains(part))
}

#[test]
fn every_drawn_export_folds_the_plumbing_by_default_and_keeps_the_total() {
    let profile = plumbed_profile();
    for format in DRAWN {
        let (all, all_total) = drawn(format, &exported(format, &profile, None));
        assert!(
            any_of(&all, "tokio::runtime") && any_of(&all, "budget<F>"),
            "{format}: {all:?}"
        );
        let (shown, total) = drawn(
            format,
            &exported(format, &profile, Some(&PrintOptions::new())),
        );
        assert!(
            any_of(&shown, "app::crunch") && any_of(&shown, "app::fnv_hash"),
            "{format}: {shown:?}"
        );
        for plumbing in [
            "tokio::",
            "budget<F>",
            "start_thread",
            "core::iter",
            "runtime::process",
        ] {
            assert!(
                !any_of(&shown, plumbing),
                "{format}: {plumbing} in {shown:?}"
            );
        }
        // Folding moves time to the frame above; it loses none.
        assert_eq!(total, all_total, "{format}");
        // Every frame, asked for, is what `write` writes.
        assert_eq!(
            exported(format, &profile, Some(&PrintOptions::new().native(true))),
            exported(format, &profile, None),
            "{format}"
        );
    }
}

#[test]
fn every_drawn_export_honours_focus_hide_and_crates() {
    let profile = plumbed_profile();
    for format in DRAWN {
        let focused = PrintOptions::new().focus("fnv_hash").unwrap();
        let (names, _) = drawn(format, &exported(format, &profile, Some(&focused)));
        assert!(any_of(&names, "app::fnv_hash"), "{format}: {names:?}");
        // The samples outside processes (tokio parked) have no frame the focus matches.
        assert!(!any_of(&names, "outside"), "{format}: {names:?}");
        let hidden = PrintOptions::new().hide("fnv").unwrap();
        let (names, _) = drawn(format, &exported(format, &profile, Some(&hidden)));
        assert!(
            any_of(&names, "app::crunch") && !any_of(&names, "fnv_hash"),
            "{format}: {names:?}"
        );
        // Frames of tokio and of the app only: tokio's show, std's and the runtime's fold.
        let crates = PrintOptions::new().crates(["app", "tokio"]);
        let (names, _) = drawn(format, &exported(format, &profile, Some(&crates)));
        assert!(
            any_of(&names, "tokio::runtime::scheduler")
                && any_of(&names, "app::fnv_hash")
                && !any_of(&names, "core::iter")
                && !any_of(&names, "runtime::process"),
            "{format}: {names:?}"
        );
        // Native frames none: a sample counts at its innermost traced frame.
        let traced = PrintOptions::new().native(Native::None);
        let (names, _) = drawn(format, &exported(format, &profile, Some(&traced)));
        assert!(
            any_of(&names, "app::crunch") && !any_of(&names, "fnv_hash"),
            "{format}: {names:?}"
        );
    }
}

#[test]
fn a_bad_pattern_is_an_error_naming_it_and_unsampled_profiles_are_as_written() {
    let profile = plumbed_profile();
    let mut options = PrintOptions::new();
    options.hide = Some("(".to_owned());
    let mut out = Vec::new();
    let e = export::write_shown(Format::Svg, &profile, &options, &mut out).unwrap_err();
    assert!(e.to_string().contains("the hide pattern `(`"), "{e}");
    // A profile of trace mode has no frames to choose: written as `write` writes it.
    let traced = Profile::new(
        TraceType::CallTime,
        vec![tprof::FunctionTrace {
            function: common::function("app", "serve", 1, 3),
            entries: vec![common::entry(
                tprof::Group::Process(common::pid("<0.5.0>")),
                2,
                1000,
            )],
        }],
    );
    for format in DRAWN {
        assert_eq!(
            exported(
                format,
                &traced,
                Some(&PrintOptions::new().focus("x").unwrap())
            ),
            exported(format, &traced, None),
            "{format}"
        );
    }
}

#[test]
fn pprof_keeps_every_frame_on_the_command_line_unless_asked() {
    assert_eq!(Format::Pprof.default_native(), Native::All);
    for format in [
        Format::Svg,
        Format::Speedscope,
        Format::Chrome,
        Format::Folded,
    ] {
        assert_eq!(format.default_native(), Native::User, "{format}");
    }
}
