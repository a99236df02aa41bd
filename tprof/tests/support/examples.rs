//! The example programs the command's tests run, built beside the tprof binary. Included by
//! each test file that needs one (`#[path = "support/examples.rs"] mod examples;`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `tprof` binary under test.
pub(crate) const TPROF: &str = env!("CARGO_BIN_EXE_tprof");

/// The example program `name`, built beside the tprof binary.
pub(crate) fn example(name: &str) -> PathBuf {
    let bin = Path::new(TPROF);
    let path = bin
        .parent()
        .unwrap()
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    // Run alone (`cargo test --test cli`), cargo builds no example, and one built earlier may
    // be stale: build it once per test binary (a no-op when it is up to date). `--workspace`
    // resolves features as the README's `cargo test --workspace` does, so under it the build
    // is a no-op; `-p tprof` would resolve them for tprof alone and compile the dependency
    // graph again (serde, syn and tokio's features differ, and everything above them).
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !built.iter().any(|b| b == name) {
        let release = bin.parent().unwrap().ends_with("release");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--workspace", "--example", name])
            .args(release.then_some("--release"))
            .status()
            .unwrap();
        assert!(status.success());
        built.push(name.to_owned());
    }
    drop(built);
    assert!(path.exists(), "{}", path.display());
    path
}
