//! `tprof attach` against a running example: a whole server-aided session from a `-c` script,
//! errors that stop a script, and a target that has no endpoint.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

#[path = "support/examples.rs"]
mod examples;

use examples::{TPROF, example};

/// The running example, its socket, and its standard input and output.
struct Target {
    child: Child,
    socket: String,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Target {
    fn start(name: &str) -> Target {
        let socket = std::env::temp_dir().join(format!(
            "tprof-attach-test-{}-{name}.sock",
            std::process::id()
        ));
        let mut child = Command::new(example("attach_target"))
            .env("TPROF_CONTROL", &socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        let socket = line
            .trim()
            .strip_prefix("control: ")
            .unwrap_or_else(|| panic!("the example says where it listens: {line:?}"))
            .to_owned();
        Target {
            child,
            socket,
            input,
            output,
        }
    }

    /// Has the counter count `n` messages; their total.
    fn work(&mut self, n: u64) -> u64 {
        writeln!(self.input, "work {n}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        line.trim().strip_prefix("done ").unwrap().parse().unwrap()
    }

    fn attach(&self, script: &str) -> Output {
        Command::new(TPROF)
            .args(["attach", &self.socket, "-c", script])
            .output()
            .unwrap()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_script_drives_a_whole_session_and_gets_tprofs_table() {
    let mut target = Target::start("session");
    let started =
        target.attach("start call_count; set_pattern attach_target _ _; enable_trace counter");
    assert!(started.status.success(), "{}", text(&started.stderr));
    // start says ok, set_pattern how many functions, enable_trace how many processes.
    assert_eq!(text(&started.stdout), "ok\n2\n1\n");

    // 1 + 2 + ... + 10, doubled by step.
    assert_eq!(target.work(10), 110);

    let collected = target.attach("pause; collect; processes; stop");
    assert!(collected.status.success(), "{}", text(&collected.stderr));
    let out = text(&collected.stdout);
    // tprof's call_count table, as the library prints it.
    assert!(
        out.contains(
            "ok\nFUNCTION                CALLS  [    %]\n\
             attach_target::step/1      10  [50.00]\n\
             attach_target::tally/2     10  [50.00]\n\
             \x20                              [100.0]\n"
        ),
        "{out}"
    );
    assert!(out.contains("counter"), "the process list: {out}");
    assert!(out.trim_end().ends_with("ok"), "{out}");
}

#[test]
fn a_failed_command_stops_the_script_with_its_reason() {
    let target = Target::start("failure");
    let out = target.attach("hello; pause; hello");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout).lines().count(),
        1,
        "only the first hello ran"
    );
    let error = text(&out.stderr);
    assert!(
        error.contains("pause") && error.contains("send start first"),
        "{error}"
    );

    let out = target.attach("launch");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not a command"));
}

#[test]
fn a_target_without_an_endpoint_is_named_with_the_way_to_open_one() {
    // An OS pid with no socket: the first pid past the ones a test machine uses.
    let out = Command::new(TPROF)
        .args(["attach", "4194000", "-c", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(
        text(&out.stderr).contains("TPROF_CONTROL=1"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_peer_of_another_user_is_refused() {
    // Needs root to act as another user; elsewhere the peer check's unit test stands alone.
    // SAFETY: geteuid has no preconditions.
    #[allow(unsafe_code)]
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = Path::new("/usr/bin/setpriv");
    if !root || !setpriv.exists() {
        eprintln!("skipped: not root, or no setpriv");
        return;
    }
    let mut target = Target::start("stranger");
    // Let anyone connect, so that only the credentials check stands in the way.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&target.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let out = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", TPROF])
        .args([
            "attach",
            &target.socket,
            "-c",
            "start; set_pattern attach_target",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stdout).is_empty());
    let error = text(&out.stderr);
    assert!(error.contains("refused"), "{error}");
    // Nothing was started for the stranger, and the owner is still served.
    let ours = target.attach("start");
    assert!(ours.status.success(), "{}", text(&ours.stderr));
    assert_eq!(target.work(3), 12);
}

#[test]
fn tprof_snapshot_writes_the_live_programs_heap_snapshot() {
    let mut target = Target::start("snapshot");
    assert_eq!(target.work(2), 6);
    let dir = std::env::temp_dir().join(format!("tprof-snapshot-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("h.heapsnapshot");
    let out = Command::new(TPROF)
        .args(["snapshot", &target.socket, "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("heap snapshot written to"));
    let snapshot: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let strings = snapshot["strings"].as_array().unwrap();
    assert!(
        strings.iter().any(|s| s == "counter"),
        "the registered name is there"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
