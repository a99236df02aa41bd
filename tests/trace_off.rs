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

#[test]
fn set_pattern_says_when_instrumentation_is_compiled_out() {
    let node = runtime::Node::new().unwrap();
    let session = node.trace_session().unwrap();
    let pattern = runtime::trace::TracePattern::module(module_path!());
    let result = session.set_pattern(&pattern);
    if INSTRUMENTED {
        assert_eq!(result, Ok(2));
    } else {
        let err = result.unwrap_err();
        assert_eq!(err, runtime::trace::PatternError::CompiledOut { pattern });
        let text = err.to_string();
        assert!(
            text.contains("instrumentation is compiled out") && text.contains("runtime/no-trace"),
            "{text}"
        );
    }
}

/// The program `tprof run` profiles in the next test: this test binary, running this test
/// alone. Run with the others, it is a node that runs and stops.
#[test]
fn a_program_that_runs_a_node() {
    let node = runtime::Node::new().unwrap();
    assert_eq!(node.run(async { answer() }).unwrap(), 42);
}

#[test]
fn tprof_run_fails_on_a_build_without_instrumentation() {
    let out = std::env::temp_dir().join(format!("trace_off-{}.tprof", std::process::id()));
    let mut options = tprof::command::RunOptions::new(
        std::env::current_exe().unwrap(),
        ["a_program_that_runs_a_node", "--exact", "-q"]
            .map(Into::into)
            .to_vec(),
    );
    options.out = Some(out.clone());
    let ran = tprof::command::run(&options);
    let _ = std::fs::remove_file(&out);
    if INSTRUMENTED {
        let ran = ran.unwrap();
        assert!(ran.status.success());
        let answer = ran.profile.function("answer").unwrap();
        assert_eq!(answer.entries[0].calls, 1);
    } else {
        let err = ran.unwrap_err();
        assert_ne!(err.exit_code(), 0);
        let text = err.to_string();
        assert!(
            text.contains("instrumentation is compiled out") && text.contains("runtime/no-trace"),
            "{text}"
        );
    }
}
