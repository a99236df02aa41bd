//! `tprof attach` against a running example: a whole server-aided session from a `-c` script,
//! errors that stop a script, a target that has no endpoint, `prof sample` and `prof trace`
//! (the next seconds' report), `tprof top`, and the prompt as a person uses it (in tmux).

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

#[path = "support/examples.rs"]
mod examples;

use examples::TPROF;

#[path = "support/target.rs"]
mod target;

use target::Target;

impl Target {
    fn start(name: &str) -> Target {
        let socket = std::env::temp_dir().join(format!(
            "tprof-attach-test-{}-{name}.sock",
            std::process::id()
        ));
        Target::start_at(&socket, &[])
    }

    fn attach(&self, script: &str) -> Output {
        Command::new(TPROF)
            .args(["attach", &self.socket, "-c", script])
            .output()
            .unwrap()
    }

    /// Runs `script` while the counter works, `work 10` after `work 10`, until it ends.
    fn attach_while_working(&mut self, script: &str) -> Output {
        let child = Command::new(TPROF)
            .args(["attach", &self.socket, "-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let done = std::thread::Builder::new()
            .name("attach-waiter".into())
            .spawn(move || child.wait_with_output().unwrap())
            .unwrap();
        while !done.is_finished() {
            self.work(10);
        }
        done.join().unwrap()
    }

    /// Spawns `n` idle processes, the `i`th with `i % 10` messages queued.
    fn park(&mut self, n: u64) {
        writeln!(self.input, "park {n}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), format!("parked {n}"));
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

/// `inspect` groups and sorts as tprof's `inspect/3` (`format` is the same command), and
/// `peek` lists every process with its state, then samples.
#[test]
fn inspect_sorts_as_tprof_and_peek_lists_every_process() {
    let mut target = Target::start("inspect");
    let started =
        target.attach("start call_count; set_pattern attach_target _ _; enable_trace counter");
    assert!(started.status.success(), "{}", text(&started.stderr));
    assert_eq!(target.work(4), 20);

    let out = target.attach("pause; inspect total function descending; format total function");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = text(&out.stdout);
    let tables: Vec<&str> = out.split("FUNCTION ").skip(1).collect();
    assert_eq!(tables.len(), 2, "{out}");
    let order = |table: &str| {
        let at = |f: &str| table.find(f).unwrap_or_else(|| panic!("{f} in {table}"));
        at("attach_target::step/1") < at("attach_target::tally/2")
    };
    assert!(
        !order(tables[0]),
        "descending by function: tally first: {out}"
    );
    assert!(order(tables[1]), "ascending by function: step first: {out}");

    let bad = target.attach("inspect total callz");
    assert_eq!(bad.status.code(), Some(1));
    let told = text(&bad.stderr);
    assert!(
        told.contains("measurement_per_call"),
        "the columns are listed: {told}"
    );

    let out = target.attach("peek 0.2; stop");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = text(&out.stdout);
    assert!(out.contains("==== peek: node "), "{out}");
    assert!(out.contains("==== end of peek ===="), "{out}");
    let counter = out
        .lines()
        .find(|l| l.starts_with('<') && l.contains(" counter "))
        .unwrap_or_else(|| panic!("the counter is listed: {out}"));
    assert!(counter.contains(" receive "), "{counter}");
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

/// The calls of `function` in a call_count table's line for it.
fn calls(table: &str, function: &str) -> u64 {
    let line = table
        .lines()
        .find(|l| l.starts_with(function))
        .unwrap_or_else(|| panic!("no line for {function}:\n{table}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn prof_trace_reports_the_calls_of_the_next_seconds() {
    let mut target = Target::start("prof-trace");
    let out = target.attach_while_working("prof trace call_count 1s");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    // Each tally calls step once: whatever the seconds caught, the two counts agree.
    let tallies = calls(&table, "attach_target::tally/2");
    assert!(tallies > 0, "{table}");
    assert_eq!(calls(&table, "attach_target::step/1"), tallies, "{table}");
    assert!(table.starts_with("FUNCTION"), "tprof's table: {table}");

    let out = target.attach_while_working("prof trace call_time 1s");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("TIME (us)"), "{table}");
    assert!(table.contains("attach_target::tally/2"), "{table}");

    // No server of the user's was started, or left behind.
    let out = target.attach("collect");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("send start first"));
}

#[test]
fn prof_sample_reports_the_next_seconds_by_process() {
    let target = Target::start("prof-sample");
    let out = target.attach("prof sample 0.5s wall 200");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("Where processes wait"), "{report}");
    assert!(report.contains("(counter)"), "grouped by process: {report}");

    let out = target.attach("prof sample");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("how many seconds?"));
    let out = target.attach("prof trace call_time 0");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("0 to 600 seconds"));
}

/// Each frame of `tprof top`'s output: its summary line and its rows' columns.
fn frames(out: &str) -> Vec<(String, Vec<Vec<String>>)> {
    let mut frames = Vec::new();
    let mut lines = out.lines().peekable();
    while let Some(summary) = lines.next() {
        assert!(
            summary.contains("processes"),
            "a summary line: {summary:?}\n{out}"
        );
        let header = lines.next().unwrap();
        assert!(header.starts_with("PID"), "{out}");
        let mut rows = Vec::new();
        while let Some(line) = lines.next_if(|l| l.starts_with('<')) {
            rows.push(line.split_whitespace().map(str::to_owned).collect());
        }
        let status = lines.next().unwrap();
        assert!(status.starts_with("(refresh "), "{out}");
        frames.push((summary.to_owned(), rows));
    }
    frames
}

#[test]
fn top_shows_the_processes_sorted_by_the_asked_key() {
    let mut target = Target::start("top");
    target.park(30);
    let out = Command::new(TPROF)
        .args(["top", &target.socket, "-n", "2", "--interval", "0.2"])
        .args(["--sort", "mailbox", "--rows", "12"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = text(&out.stdout);
    let shown = frames(&out);
    assert_eq!(shown.len(), 2, "{out}");
    for (summary, rows) in &shown {
        // The counter, the 30 parked processes, and perhaps the endpoint's request process.
        let total: usize = summary.split_whitespace().next().unwrap().parse().unwrap();
        assert!((31..=33).contains(&total), "{summary}");
        assert!(
            summary.contains("sorted by mailbox, the first 12"),
            "{summary}"
        );
        assert_eq!(rows.len(), 12, "{out}");
        // No name, so MAILBOX is the third column: three 9s, three 8s, ...
        let mailboxes: Vec<usize> = rows.iter().map(|r| r[2].parse().unwrap()).collect();
        assert_eq!(mailboxes, [9, 9, 9, 8, 8, 8, 7, 7, 7, 6, 6, 6], "{out}");
    }

    let out = Command::new(TPROF)
        .args([
            "top",
            &target.socket,
            "--once",
            "--sort",
            "name",
            "--rows",
            "1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = text(&out.stdout);
    assert!(
        frames(&out)[0].1[0].contains(&"counter".to_owned()),
        "{out}"
    );

    let out = Command::new(TPROF)
        .args(["top", &target.socket, "--sort", "memory"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("mailbox"), "the keys are listed");
}

/// A tmux server of the test's own, with one session, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Whether tmux is there; if not, says the test is skipped.
    fn installed() -> bool {
        let there = Command::new("tmux").arg("-V").output().is_ok();
        if !there {
            // .ci/run installs tmux; only a machine without it and without apt gets here.
            eprintln!("skipped: no tmux (the test drives a terminal through it)");
        }
        there
    }

    /// Runs `command` in a 150x50 terminal.
    fn start(test: &str, command: &[&str]) -> Tmux {
        let tmux = Tmux {
            socket: format!("tprof-test-{}-{test}", std::process::id()),
        };
        let size = ["new-session", "-d", "-s", "prompt", "-x", "150", "-y", "50"];
        let out = tmux.cmd(&[&size[..], &["env", "TERM=xterm"], command].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        tmux
    }

    fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap()
    }

    fn keys(&self, keys: &[&str]) {
        let out = self.cmd(&[&["send-keys", "-t", "prompt"], keys].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
    }

    fn screen(&self) -> String {
        text(
            &self
                .cmd(&["capture-pane", "-p", "-J", "-t", "prompt", "-S", "-200"])
                .stdout,
        )
    }

    /// Waits (up to a minute) until the screen satisfies `ok`; the screen then.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "waited a minute for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

#[test]
fn the_prompt_completes_with_tab_recalls_with_up_and_keeps_its_history() {
    if Command::new("tmux").arg("-V").output().is_err() {
        // .ci/run installs tmux; only a machine without it and without apt gets here.
        eprintln!("skipped: no tmux (the prompt test drives a terminal through it)");
        return;
    }
    let target = Target::start("prompt");
    let state = tempfile::tempdir().unwrap();
    let tmux = Tmux {
        socket: format!("tprof-test-{}", std::process::id()),
    };
    let state_home = format!("XDG_STATE_HOME={}", state.path().display());
    let out = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "prompt",
        "-x",
        "150",
        "-y",
        "50",
        "env",
        "TERM=xterm",
        &state_home,
        TPROF,
        "attach",
        &target.socket,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    tmux.wait_for("the prompt", |s| s.contains("tprof> "));

    // A command name completed with Tab, and its table.
    tmux.keys(&["proc", "Tab"]);
    tmux.wait_for("processes completed", |s| s.contains("tprof> processes"));
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the process table", |s| {
        s.lines()
            .any(|l| l.starts_with("PID") && l.contains("MAILBOX"))
            && s.contains("counter")
    });
    assert!(screen.contains("attach_target::main"), "{screen}");

    // A module and a function completed from the endpoint's list.
    tmux.keys(&["start", "Enter"]);
    tmux.wait_for("start's ok", |s| s.lines().any(|l| l == "ok"));
    tmux.keys(&["set_pattern attach_t", "Tab"]);
    tmux.wait_for("the module completed", |s| {
        s.contains("tprof> set_pattern attach_target ")
    });
    tmux.keys(&["st", "Tab"]);
    let typed = "tprof> set_pattern attach_target step";
    tmux.wait_for("the function completed", |s| s.contains(typed));
    tmux.keys(&["Enter"]);
    tmux.wait_for("one function matched", |s| s.lines().any(|l| l == "1"));

    // Up recalls it; Enter runs it again.
    tmux.keys(&["Up"]);
    tmux.wait_for("the line recalled", |s| {
        s.lines().filter(|l| l.trim_end() == typed).count() == 2
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for("the second run", |s| {
        s.lines().filter(|l| *l == "1").count() == 2
    });

    // Names complete too; help is there; quit leaves, and the history is kept in a file.
    tmux.keys(&["enable_trace cou", "Tab"]);
    tmux.wait_for("the name completed", |s| {
        s.contains("tprof> enable_trace counter")
    });
    tmux.keys(&["C-u", "help", "Enter"]);
    tmux.wait_for("help", |s| {
        s.contains("prof trace [call_count|call_time|call_memory]")
    });
    tmux.keys(&["quit", "Enter"]);
    let history = state.path().join("tprof/attach_history");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let kept = loop {
        let kept = std::fs::read_to_string(&history).unwrap_or_default();
        if kept.contains("quit") || std::time::Instant::now() > deadline {
            break kept;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // (A completed word keeps the space Tab put after it.)
    assert!(
        kept.lines()
            .any(|l| l.trim_end() == "set_pattern attach_target step"),
        "{}: {kept:?}",
        history.display()
    );
    assert!(
        kept.lines().any(|l| l.trim_end() == "processes"),
        "{kept:?}"
    );
}

#[test]
fn top_on_a_terminal_changes_its_sort_with_a_key_and_quits_with_q() {
    if !Tmux::installed() {
        return;
    }
    let mut target = Target::start("top-keys");
    target.park(20);
    let tmux = Tmux::start("top", &[TPROF, "top", &target.socket, "-i", "0.2"]);
    tmux.wait_for("the first frame", |s| {
        s.contains("sorted by polls") && s.contains("keys: p polls")
    });
    tmux.keys(&["m"]);
    // A whole frame sorted by mailbox: its first row has the 9 messages of the fullest.
    tmux.wait_for("the sort by mailbox", |s| {
        s.contains("sorted by mailbox")
            && s.lines()
                .find(|l| l.starts_with('<'))
                .is_some_and(|first| first.split_whitespace().nth(2) == Some("9"))
    });
    tmux.keys(&["q"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while tmux.cmd(&["has-session", "-t", "prompt"]).status.success() {
        assert!(std::time::Instant::now() < deadline, "q did not end top");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn functions_and_registered_list_what_completion_offers() {
    let target = Target::start("lists");
    let out = target.attach("functions; registered; help enable_trace");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = text(&out.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let step = lines.iter().position(|l| *l == "attach_target::step/1");
    let tally = lines.iter().position(|l| *l == "attach_target::tally/2");
    assert!(step.is_some() && step < tally, "sorted: {out}");
    assert!(lines.contains(&"runtime::receive/0"), "{out}");
    assert!(lines.contains(&"counter"), "the registered name: {out}");
    assert!(
        out.trim_end()
            .ends_with("trace processes (and their children)"),
        "{out}"
    );
}

#[test]
fn top_at_the_prompt_prints_one_frame() {
    let mut target = Target::start("top-command");
    target.park(12);
    let out = target.attach("top mailbox 4");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = text(&out.stdout);
    assert!(out.starts_with("13 processes: "), "{out}");
    assert!(out.contains("sorted by mailbox, the first 4"), "{out}");
    let mailboxes: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with('<'))
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(mailboxes, ["9", "8", "7", "6"], "{out}");
}
