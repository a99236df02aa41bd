//! Deep call paths (issue 22): an archive may hold a path 20,000 calls deep, and every export
//! of it must stay bounded by what it shows. A stack keeps at most `MAX_STACK_DEPTH` frames
//! (the outermost and innermost, `[truncated frames]` between them), so each export is
//! linear in the path's entries, whatever their depth.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{entry, function, path_entry, pid};
use tprof::export::{self, Format, MAX_STACK_DEPTH, OUTER_FRAMES, TRUNCATED};
use tprof::{
    CallTree, Event, EventKind, EventLog, FunctionTrace, Group, PathNode, Profile, TraceType,
};

const DEPTH: u32 = 20_000;
/// Every this many paths along the chain has figures (and the deepest has).
const EVERY: u32 = 10;

/// One process whose call tree is one path `DEPTH` calls deep through ten functions, every
/// `EVERY`th path of it measured.
fn deep() -> Profile {
    let table: Vec<_> = (0..10)
        .map(|i| function("app", &format!("f{i}"), 0, i + 1))
        .collect();
    let group = Group::Process(pid("<0.1.0>"));
    let nodes = (0..DEPTH)
        .map(|i| PathNode {
            parent: i.checked_sub(1),
            function: i % 10,
        })
        .collect();
    let measured: Vec<u32> = (0..DEPTH).filter(|i| (i + 1) % EVERY == 0).collect();
    let entries = measured
        .iter()
        .map(|&i| path_entry(group, i, 1, 1_000 + u64::from(i)))
        .collect();
    let functions = table
        .iter()
        .enumerate()
        .map(|(f, function)| FunctionTrace {
            function: function.clone(),
            entries: vec![entry(
                group,
                measured.len() as u64 / 10,
                1_000 * (f as u64 + 1),
            )],
        })
        .collect();
    let mut profile = Profile::new(TraceType::CallTime, functions);
    profile.function_table = table;
    profile.call_tree = CallTree { nodes, entries };
    profile
}

fn entries() -> usize {
    (DEPTH / EVERY) as usize
}

#[test]
fn a_deep_path_keeps_its_outermost_and_innermost_frames() {
    let profile = deep();
    let stacks = export::stacks(&profile);
    assert_eq!(stacks.len(), entries());
    assert!(stacks.iter().all(|s| s.frames.len() <= MAX_STACK_DEPTH));
    let deepest = stacks.iter().max_by_key(|s| s.measurement).unwrap();
    assert_eq!(deepest.frames.len(), MAX_STACK_DEPTH);
    assert_eq!(deepest.truncated, DEPTH as usize - (MAX_STACK_DEPTH - 1));
    assert!(std::ptr::eq(deepest.frames[OUTER_FRAMES], &*TRUNCATED));
    // The outermost from the root, the innermost down to the path's own function.
    assert_eq!(deepest.frames[0].name, "f0");
    assert_eq!(deepest.frames[OUTER_FRAMES - 1].name, "f3");
    assert_eq!(deepest.frames.last().unwrap().name, "f9");
    // A path within the limit is whole.
    let shallow = stacks.iter().find(|s| s.frames.len() == 10).unwrap();
    assert_eq!(shallow.truncated, 0);
    assert!(!shallow.frames.iter().any(|f| f.name == TRUNCATED.name));
}

#[test]
fn every_export_of_a_deep_path_is_bounded_by_its_entries() {
    let profile = deep();
    // What a line of at most `MAX_STACK_DEPTH` frames may take, generously.
    let bound = entries() * MAX_STACK_DEPTH * 64;

    let folded = export::to_string(Format::Folded, &profile).unwrap();
    assert_eq!(folded.lines().count(), entries());
    for line in folded.lines() {
        let (stack, _) = line.rsplit_once(' ').unwrap();
        // The process, then the frames.
        assert!(stack.split(';').count() <= MAX_STACK_DEPTH + 1, "{line}");
    }
    // Its space made safe, as folded lines make every frame.
    assert!(folded.contains(";[truncated_frames];"));
    assert!(folded.len() < bound, "{} bytes", folded.len());

    let proto = export::pprof::to_proto(&profile);
    assert_eq!(proto.sample.len(), entries());
    assert!(
        proto
            .sample
            .iter()
            .all(|s| s.location_id.len() <= MAX_STACK_DEPTH)
    );
    let strings = &proto.string_table;
    assert!(strings.iter().any(|s| s == "[truncated frames]"));

    let speedscope: serde_json::Value =
        serde_json::from_str(&export::to_string(Format::Speedscope, &profile).unwrap()).unwrap();
    let samples = speedscope["profiles"][0]["samples"].as_array().unwrap();
    assert_eq!(samples.len(), entries());
    assert!(
        samples
            .iter()
            .all(|s| s.as_array().unwrap().len() <= MAX_STACK_DEPTH)
    );

    let svg = export::to_string(Format::Svg, &profile).unwrap();
    assert!(svg.len() < bound, "{} bytes", svg.len());

    let chrome = export::to_string(Format::Chrome, &profile).unwrap();
    assert!(chrome.len() < bound, "{} bytes", chrome.len());
    let trace: serde_json::Value = serde_json::from_str(&chrome).unwrap();
    let slices: Vec<&serde_json::Value> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    assert!(slices.len() <= entries() * MAX_STACK_DEPTH);
    // Each slice names at most 32 functions of its path.
    for slice in slices {
        let path = slice["args"]["path"].as_str().unwrap();
        assert!(path.split(';').count() <= 33, "{path}");
    }
}

/// A process whose event log nests `DEPTH` frames deep through ten functions: entered and
/// never left when `leaves` is 0; else followed by `leaves` leaves of its functions, the
/// innermost first, round and round the ten (past `DEPTH`, leaves of nothing open).
fn deep_log(leaves: u32) -> Profile {
    let group = Group::Process(pid("<0.1.0>"));
    let enters = (0..DEPTH).map(|i| Event {
        ts_ns: u64::from(i),
        function: i % 10,
        kind: EventKind::Enter,
    });
    let leaves = (0..leaves).map(|i| Event {
        ts_ns: u64::from(DEPTH + i),
        function: (DEPTH - 1 - i % DEPTH) % 10,
        kind: EventKind::Leave,
    });
    let mut profile = Profile::new(TraceType::CallTime, Vec::new());
    profile.function_table = (0..10)
        .map(|i| function("app", &format!("f{i}"), 0, i + 1))
        .collect();
    profile.event_logs = vec![EventLog {
        group,
        events: enters.chain(leaves).collect(),
        dropped: 0,
    }];
    profile
}

/// The timeline frames of a chrome trace (its `X` events, each with its `duration_ns`) and of
/// an html page's data (`timelines[0].frames`, each `[function, start, end, depth, cut]`).
fn timeline_frames(profile: &Profile) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let chrome = export::to_string(Format::Chrome, profile).unwrap();
    let html = export::to_string(Format::Html, profile).unwrap();
    // What a frame may take in either, generously.
    let bound = DEPTH as usize * 400;
    assert!(chrome.len() < bound, "chrome: {} bytes", chrome.len());
    assert!(html.len() < bound + 200_000, "html: {} bytes", html.len());
    let trace: serde_json::Value = serde_json::from_str(&chrome).unwrap();
    let slices = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .cloned()
        .collect();
    let (_, data) = html.split_once("id=\"tprof-data\">").unwrap();
    let (data, _) = data.split_once("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(data).unwrap();
    let frames = data["timelines"][0]["frames"].as_array().unwrap().clone();
    (slices, frames)
}

#[test]
fn an_event_log_entered_deep_and_never_left_is_a_timeline_of_its_frames_cut_short() {
    let (slices, frames) = timeline_frames(&deep_log(0));
    assert_eq!(slices.len(), DEPTH as usize);
    assert!(slices.iter().all(|s| s["args"]["cut_short"] == true));
    assert_eq!(frames.len(), DEPTH as usize);
    // The innermost, 19,999 frames deep, entered last.
    assert_eq!(frames.last().unwrap()[3], DEPTH - 1);
    assert!(frames.iter().all(|f| f[4] == 1));
}

#[test]
fn deep_recursion_and_many_leaves_of_nothing_open_are_read_in_one_pass() {
    // Every frame left, innermost first; then 100,000 - DEPTH leaves of frames not open.
    let (slices, frames) = timeline_frames(&deep_log(100_000));
    assert_eq!(slices.len(), DEPTH as usize);
    assert!(slices.iter().all(|s| s["args"].get("cut_short").is_none()));
    assert_eq!(frames.len(), DEPTH as usize);
    // The outermost lasts until the last of its leaves: DEPTH + DEPTH - 1 ns from the first
    // event.
    assert_eq!(frames[0][2], 2 * u64::from(DEPTH) - 1);
    assert!(frames.iter().all(|f| f[4] == 0));
    // The innermost is left the moment after it is entered.
    let inner = frames.last().unwrap();
    assert_eq!(inner[2].as_u64().unwrap() - inner[1].as_u64().unwrap(), 1);
}

/// `PROCESSES` processes, each with one entry on the deepest path of a chain
/// `MAX_PATH_DEPTH` calls deep (what a 206 KB archive held with 20,000 of them).
fn deepest_in_many_processes(processes: u32) -> Profile {
    let depth = tprof::archive::MAX_PATH_DEPTH;
    let table: Vec<_> = (0..10)
        .map(|i| function("app", &format!("f{i}"), 0, i + 1))
        .collect();
    let nodes = (0..depth)
        .map(|i| PathNode {
            parent: i.checked_sub(1),
            function: i % 10,
        })
        .collect();
    let groups: Vec<Group> = (0..processes)
        .map(|i| Group::Process(pid(&format!("<0.{}.0>", i + 1))))
        .collect();
    let entries = groups
        .iter()
        .map(|&g| path_entry(g, depth - 1, 1, 5_000))
        .collect();
    let functions = vec![FunctionTrace {
        function: table[((depth - 1) % 10) as usize].clone(),
        entries: groups.iter().map(|&g| entry(g, 1, 5_000)).collect(),
    }];
    let mut profile = Profile::new(TraceType::CallTime, functions);
    profile.function_table = table;
    profile.call_tree = CallTree { nodes, entries };
    profile
}

/// The pretty report of a path as deep as an archive holds, in many processes, takes a few
/// short rows per process: it printed every caller of the path, indented two spaces a level
/// (a megabyte a process), and ran past 30 s of CPU for 20,000 of them.
#[test]
fn the_pretty_report_of_a_deep_path_in_many_processes_is_bounded_by_its_entries() {
    let processes = 100;
    let profile = deepest_in_many_processes(processes);
    let pretty = export::to_string(Format::Pretty, &profile).unwrap();
    let trees: Vec<&str> = pretty
        .split("****** Call tree of process")
        .skip(1)
        .collect();
    assert_eq!(trees.len(), processes as usize);
    for tree in &trees {
        let lines: Vec<&str> = tree.lines().filter(|l| !l.is_empty()).collect();
        // The title, the header, the outer and inner 8 callers, the row between, the path and
        // the totals.
        assert_eq!(lines.len(), 1 + 1 + 8 + 1 + 8 + 1 + 1, "{tree}");
        assert!(lines.iter().all(|l| l.len() < 300), "{tree}");
        assert!(
            tree.contains("[1007 paths that only hold their callees]"),
            "{tree}"
        );
        // The path itself, with its figures.
        let path = lines[lines.len() - 2];
        assert!(path.trim_start().starts_with("app::f3/0"), "{path}");
        assert!(path.contains("[100.00]"), "{path}");
    }
    assert!(
        pretty.len() < processes as usize * 30 * 300,
        "{} bytes",
        pretty.len()
    );
}
