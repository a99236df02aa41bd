//! The evcxr display of profiles (a Rust Jupyter notebook's inline report and flame graph):
//! both MIME blocks, the report the library prints, and a valid SVG with no script.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::samples::cpu_profile;
use common::svg::svg_frames;
use common::{Real, real_profile};
use tprof::{Aggregate, Profile, SortBy, TraceType, format_to_string, inspect};

/// The blocks of the display protocol, in order: (MIME type, content).
fn parse_blocks(shown: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = shown.lines();
    while let Some(line) = lines.next() {
        let mime = line
            .strip_prefix("EVCXR_BEGIN_CONTENT ")
            .unwrap_or_else(|| panic!("a line outside a block: {line:?}"));
        let mut content = String::new();
        loop {
            let line = lines.next().expect("the block is closed");
            if line == "EVCXR_END_CONTENT" {
                break;
            }
            content.push_str(line);
            content.push('\n');
        }
        blocks.push((mime.to_owned(), content));
    }
    blocks
}

/// The `<svg>` element inside an html block.
fn svg_in(html: &str) -> &str {
    let start = html.find("<svg").expect("the html holds a flame graph");
    let end = html.rfind("</svg>").expect("the svg is closed") + "</svg>".len();
    &html[start..end]
}

#[test]
fn a_trace_profile_shows_its_tables_and_a_static_flame_graph() {
    let profile = real_profile(TraceType::CallCount, Real::FLAT);
    let blocks = parse_blocks(&tprof::notebook_blocks(&profile));
    let mimes: Vec<&str> = blocks.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(mimes, ["text/plain", "text/html"]);

    // The text is the report tprof::profile prints.
    let printed = format_to_string(&inspect(&profile, Aggregate::Process, SortBy::default()));
    assert_eq!(blocks[0].1, printed);
    assert!(printed.contains("fixture::leaf/1"), "{printed}");

    let html = &blocks[1].1;
    assert!(html.contains("fixture::leaf/1"), "the html shows the table");
    assert!(!html.to_ascii_lowercase().contains("<script"), "no script");
    let (frames, total) = svg_frames(svg_in(html));
    // branches(): 3 calls of branch, 6 of leaf, drawn by call count.
    assert!(
        frames.iter().any(|f| f.name == "fixture::leaf/1"),
        "{frames:?}"
    );
    assert_eq!(total, 9, "{frames:?}");
}

#[test]
fn a_sampled_profile_shows_julias_report() {
    let profile = cpu_profile();
    let blocks = parse_blocks(&tprof::notebook_blocks(&profile));
    assert_eq!(blocks.len(), 2);
    let mut printed = Vec::new();
    tprof::sample_report::print(&mut printed, &profile, &Default::default()).unwrap();
    assert_eq!(blocks[0].1, String::from_utf8(printed).unwrap());
    assert!(blocks[0].1.contains("Overhead"), "{}", blocks[0].1);
    let (frames, _) = svg_frames(svg_in(&blocks[1].1));
    assert!(
        frames.iter().any(|f| f.name == "app::checksum"),
        "{frames:?}"
    );
}

#[test]
fn an_empty_profile_says_why_it_has_no_flame_graph() {
    let profile = Profile::empty(TraceType::CallCount);
    let blocks = parse_blocks(&tprof::notebook_blocks(&profile));
    assert_eq!(blocks.len(), 2);
    assert!(!blocks[1].1.contains("<svg"));
    assert!(blocks[1].1.contains("No flame graph: "), "{}", blocks[1].1);
}

#[test]
fn inspected_tables_show_as_text_and_html() {
    let profile = real_profile(TraceType::CallCount, Real::FLAT);
    let inspected = inspect(&profile, Aggregate::Total, SortBy::default());
    let blocks = parse_blocks(&tprof::notebook_blocks_of_tables(&inspected));
    assert_eq!(blocks[0].1, format_to_string(&inspected));
    assert!(blocks[1].1.starts_with("<div class=\"tprof\">\n<pre>"));
}
