//! The README's demo runs to the end and prints a report for each trace type. `cargo test`
//! builds the examples; this runs the one it built.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/demo-<hash> -> target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

#[test]
fn the_supervision_tree_demo_profiles_its_workload_three_ways() {
    let path = example("supervision_tree");
    assert!(
        path.exists(),
        "cargo test builds the examples: {}",
        path.display()
    );
    // With `--html DIR`, as the README says: the html viewer of each of its five runs.
    let pages = std::env::temp_dir().join(format!("demo-pages-{}", std::process::id()));
    let out = Command::new(&path)
        .arg("--html")
        .arg(&pages)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the demo failed:\n{stdout}\n{stderr}");
    for trace_type in ["call_count", "call_time", "call_memory"] {
        assert!(
            stdout.contains(&format!("==== {trace_type}: the workload")),
            "{trace_type} run missing:\n{stdout}"
        );
    }
    assert!(stdout.contains("job 2: 2000 workers counted 80000 words; 20 crashed on a bug"));
    assert!(stdout.contains("FUNCTION") && stdout.contains("[100.0]"));
    // The registered processes (app_sup, kv, pg, dispatcher) under call_time and call_memory.
    assert!(stdout.matches("****** Process <").count() >= 6, "{stdout}");
    assert!(stdout.contains("supervision_tree::count_chunk/1"));
    let mut names = vec!["call_count", "call_time", "call_memory"];
    if cfg!(target_os = "linux") {
        names.extend(["sample_cpu", "sample_wall"]);
    }
    for name in names {
        let page = pages.join(format!("{name}.html"));
        assert!(
            stdout.contains(&format!("wrote {}", page.display())),
            "{stdout}"
        );
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(
            html.starts_with("<!DOCTYPE html>"),
            "{name}: {}",
            &html[..80]
        );
        assert!(html.trim_end().ends_with("</html>"), "{name}");
        if !name.starts_with("sample") {
            assert!(html.contains("count_chunk"), "{name}: the demo's functions");
        }
    }
    std::fs::remove_dir_all(&pages).unwrap();
}

#[test]
fn the_demo_refuses_arguments_it_does_not_know() {
    let out = Command::new(example("supervision_tree"))
        .arg("--htm")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("usage: supervision_tree [--html DIR]"),
        "{stderr}"
    );
}
