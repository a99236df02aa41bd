//! Peek on a signal, against an example whose two workers are both stuck in loops: every
//! process is printed, the spinners running, the two processes that call each other as a
//! deadlock, and the second of samples finds the spinners in `spin`.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/examples.rs"]
mod examples;

use examples::example;

#[test]
fn peek_answers_while_every_worker_is_stuck() {
    let dir = std::env::temp_dir().join(format!("tprof-peek-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(example("peek_target"))
        .current_dir(&dir)
        .env("TPROF_PEEK", "1")
        .env("TPROF_PEEK_HEAP_SNAPSHOT", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    // SAFETY: kill has no memory preconditions; the pid is our child's, not yet waited for.
    #[allow(unsafe_code)]
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGUSR1) };
    assert_eq!(sent, 0);

    // Read stderr up to the report's last line on a thread, so that a hang fails the test
    // rather than blocking it.
    let mut err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::Builder::new().name("peek-stderr".into());
    let _reader = reader
        .spawn(move || {
            let mut text = String::new();
            let mut buf = [0u8; 4096];
            let deadline = Instant::now() + Duration::from_secs(120);
            while Instant::now() < deadline {
                match err.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        text.push_str(&String::from_utf8_lossy(&buf[..n]));
                        let _ = tx.send(text.clone());
                    }
                }
            }
        })
        .unwrap();
    let mut report = String::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !report.contains("==== end of peek ====") {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(text) => report = text,
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();

    assert!(report.contains("==== peek: node"), "{report}");
    let table: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("PID"))
        .take_while(|l| !l.starts_with('('))
        .collect();
    // The header, idle, the deadlocked pair and the two spinners: every process.
    assert_eq!(table.len(), 6, "{report}");
    // The pair that call each other is reported as a deadlock, at the top.
    let deadlock = report
        .lines()
        .skip_while(|l| !l.starts_with("==== peek: 1 deadlock:"))
        .nth(1)
        .unwrap_or_else(|| panic!("a deadlock reported: {report}"));
    assert!(
        deadlock.contains("(left) -> ") && deadlock.contains("(right) -> "),
        "{report}"
    );
    assert!(
        table
            .iter()
            .any(|l| l.contains(" left ") && l.contains(" call <")),
        "{report}"
    );
    let running = table.iter().filter(|l| l.contains(" running ")).count();
    assert_eq!(running, 2, "both spinners are being polled: {report}");
    let idle = table
        .iter()
        .find(|l| l.contains(" idle "))
        .expect("idle listed");
    assert!(!idle.contains(" running "), "{report}");
    // The next second's samples find both spinners in `spin`, although their polls began
    // before peek's session opened.
    let sampled = report.split("samples by process ====").nth(1).unwrap_or("");
    assert_eq!(sampled.matches("Process <").count(), 2, "{report}");
    assert!(sampled.contains("peek_target::spin"), "{report}");

    // TPROF_PEEK_HEAP_SNAPSHOT=1: a heap snapshot in the program's folder, named in the report.
    let named = report
        .lines()
        .find_map(|l| l.strip_prefix("==== peek: heap snapshot written to "))
        .and_then(|l| l.strip_suffix(" ===="))
        .unwrap_or_else(|| panic!("the snapshot is named: {report}"));
    let snapshot: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(named)).unwrap()).unwrap();
    let strings = snapshot["strings"].as_array().unwrap();
    assert!(
        strings.iter().any(|s| s == "idle"),
        "every process is there"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
