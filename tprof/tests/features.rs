//! The library without the `tprof` command: its feature `cli` alone brings in the command's
//! dependencies, so a program that only calls `tprof::profile` never builds them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The command's own dependencies: argument parsing, progress bars, Ctrl-C handling, the
/// prompt's line editor and top's terminal handling.
const COMMAND_ONLY: [&str; 5] = ["clap", "indicatif", "ctrlc", "reedline", "crossterm"];

/// The names of the crates tprof depends on (normal edges only), as `cargo tree` lists them.
fn dependencies(features: &[&str]) -> Vec<String> {
    let output = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "-p", "tprof", "-e", "normal", "--prefix", "none"])
        .args(features)
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "cargo tree failed: {}{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn without_the_cli_feature_the_library_has_none_of_the_commands_dependencies() {
    let library = dependencies(&["--no-default-features"]);
    assert!(
        library.iter().any(|d| d == "comfy-table"),
        "the library's own dependencies are listed: {library:?}"
    );
    for name in COMMAND_ONLY {
        assert!(
            !library.iter().any(|d| d == name),
            "{name} is a dependency of the library without `cli`: {library:?}"
        );
    }
    let command = dependencies(&[]);
    for name in COMMAND_ONLY {
        assert!(
            command.iter().any(|d| d == name),
            "{name} is not a dependency of the default build: {command:?}"
        );
    }
}
