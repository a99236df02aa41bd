//! `tprof attach HOST:PORT` against an example that listens on TCP (`TPROF_CONTROL_TCP`): it
//! finds the token beside the endpoint's socket, or takes `--token`/`--token-file`; a wrong
//! token is refused and the program's work goes on.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

#[path = "support/examples.rs"]
mod examples;

use examples::{TPROF, example};

/// The attach example, listening on a TCP port it chose, its socket in `runtime_dir`.
struct Target {
    child: Child,
    socket: PathBuf,
    addr: String,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Target {
    fn start(name: &str) -> Target {
        let socket = tprof::control::runtime_dir().join(format!(
            "tprof-attach-tcp-test-{}-{name}.sock",
            std::process::id()
        ));
        let mut child = Command::new(example("attach_target"))
            .env("TPROF_CONTROL", &socket)
            .env("TPROF_CONTROL_TCP", "127.0.0.1:0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        assert!(line.starts_with("control: "), "{line:?}");
        // Written before the endpoint's `open` returned, so before the line above.
        let addr = std::fs::read_to_string(socket.with_extension("tcp"))
            .unwrap()
            .trim()
            .to_owned();
        Target {
            child,
            socket,
            addr,
            input,
            output,
        }
    }

    fn work(&mut self, n: u64) -> u64 {
        writeln!(self.input, "work {n}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        line.trim().strip_prefix("done ").unwrap().parse().unwrap()
    }

    fn attach(&self, extra: &[&str], script: &str) -> Output {
        Command::new(TPROF)
            .args(["attach", &self.addr, "-c", script])
            .args(extra)
            .output()
            .unwrap()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for ext in ["sock", "tcp", "token"] {
            let _ = std::fs::remove_file(self.socket.with_extension(ext));
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn attach_over_tcp_finds_or_takes_the_token_and_a_wrong_one_is_refused() {
    let mut target = Target::start("session");
    assert!(target.addr.starts_with("127.0.0.1:"), "{}", target.addr);

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
    let token_file = target.socket.with_extension("token");
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
