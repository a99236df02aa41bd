//! `tprof attach HOST:PORT` against an example that listens on TCP (`TPROF_CONTROL_TCP`): it
//! finds the token beside the endpoint's socket, or takes `--token`/`--token-file`; a wrong
//! token is refused and the program's work goes on.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

#[path = "support/examples.rs"]
mod examples;

use examples::TPROF;

#[path = "support/target.rs"]
mod target;

use target::Target;

impl Target {
    /// The attach example, listening on a TCP port it chose too, its socket in the runtime
    /// directory.
    fn start(name: &str) -> Target {
        let socket = tprof::control::runtime_dir().join(format!(
            "tprof-attach-tcp-test-{}-{name}.sock",
            std::process::id()
        ));
        Target::start_at(&socket, &[("TPROF_CONTROL_TCP", "127.0.0.1:0")])
    }

    /// The TCP address it listens on: written before the endpoint's `open` returned, so
    /// before the line `start` waited for.
    fn addr(&self) -> String {
        std::fs::read_to_string(self.beside("tcp"))
            .unwrap()
            .trim()
            .to_owned()
    }

    fn attach(&self, extra: &[&str], script: &str) -> Output {
        Command::new(TPROF)
            .args(["attach", &self.addr(), "-c", script])
            .args(extra)
            .output()
            .unwrap()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn attach_over_tcp_finds_or_takes_the_token_and_a_wrong_one_is_refused() {
    let mut target = Target::start("session");
    let addr = target.addr();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    // The token found beside the socket: a whole session.
    let out = target.attach(
        &[],
        "start call_count; set_pattern attach_target; enable_trace counter",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(target.work(10), 110);
    let out = target.attach(&[], "collect total");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("attach_target::tally/2"), "{table}");
    assert!(table.contains("attach_target::step/1"), "{table}");

    // Given as a file, or on the command line.
    let token_file = target.beside("token");
    let out = target.attach(&["--token-file", token_file.to_str().unwrap()], "hello");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("protocol 1"),
        "{}",
        text(&out.stdout)
    );
    let token = std::fs::read_to_string(&token_file).unwrap();
    let out = target.attach(&["--token", token.trim()], "processes");
    assert!(
        text(&out.stdout).contains("counter"),
        "{}",
        text(&out.stdout)
    );

    // A wrong token: refused, nothing run; the work goes on.
    let wrong = "f".repeat(64);
    let out = target.attach(&["--token", &wrong], "stop");
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("refused") && err.contains("token"), "{err}");
    let out = target.attach(&["--token", "short"], "hello");
    assert_eq!(out.status.code(), Some(4));
    assert!(
        text(&out.stderr).contains("characters"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(target.work(4), 110 + 20);
    // The session the wrong token tried to stop is still there.
    let out = target.attach(&[], "stop");
    assert!(out.status.success(), "{}", text(&out.stderr));
}
