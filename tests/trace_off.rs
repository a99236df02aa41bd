//! The feature `runtime/no-trace` compiles all instrumentation away. CI runs this file twice:
//! with the default features (instrumented) and with `--features runtime/no-trace`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use runtime::trace::{INSTRUMENTED, callsites};

#[runtime::traced]
fn answer() -> u32 {
    42
}

#[test]
fn instrumentation_is_there_exactly_when_the_build_wants_it() {
    assert_eq!(answer(), 42);
    assert_eq!(runtime::trace::traced!("block", { 1 + 1 }), 2);
    let mine = callsites()
        .iter()
        .filter(|c| c.module() == module_path!())
        .count();
    if INSTRUMENTED {
        assert_eq!(mine, 2);
        assert!(callsites().iter().any(|c| c.module() == "runtime"));
    } else {
        assert_eq!(mine, 0);
        assert!(callsites().is_empty(), "{:?}", callsites());
    }
}
