//! The pull endpoint of a running example (`TPROF_PPROF_HTTP`), read as continuous profilers
//! read it: `go tool pprof -top http://.../debug/pprof/profile?seconds=1`, and the same URL
//! decoded here, its samples labelled with the pids of the example's processes.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tprof::export::pprof::Profile as Pprof;

#[path = "support/examples.rs"]
mod examples;

/// The example, serving the pull endpoint on a port it chose.
struct Target {
    child: Child,
    addr: String,
    /// The pull endpoint's token, from the file beside the control socket.
    token: String,
}

impl Target {
    fn start(test: &str) -> Target {
        let socket = std::env::temp_dir().join(format!(
            "tprof-pull-test-{}-{test}.sock",
            std::process::id()
        ));
        let mut child = Command::new(examples::example("pull_target"))
            .env("TPROF_CONTROL", &socket)
            .env("TPROF_PPROF_HTTP", "127.0.0.1:0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("http: ")
            .unwrap_or_else(|| panic!("the example says where it serves: {line:?}"))
            .to_owned();
        let token = std::fs::read_to_string(socket.with_extension("token"))
            .unwrap()
            .trim()
            .to_owned();
        Target { child, addr, token }
    }

    /// `target` with the token in its query.
    fn with_token(&self, target: &str) -> String {
        let joint = if target.contains('?') { '&' } else { '?' };
        format!("{target}{joint}token={}", self.token)
    }

    /// GET `target`: the status and the body.
    fn get(&self, target: &str) -> (u16, Vec<u8>) {
        let target = self.with_token(target);
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        write!(
            stream,
            "GET {target} HTTP/1.1\r\nHost: {}\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let end = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let status = String::from_utf8_lossy(&answer[9..12]).parse().unwrap();
        (status, answer[end + 4..].to_vec())
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The example's processes by registered name, from `goroutine?debug=2`.
fn registered(target: &Target) -> HashMap<String, String> {
    let (status, body) = target.get("/debug/pprof/goroutine?debug=2");
    assert_eq!(status, 200);
    String::from_utf8(body)
        .unwrap()
        .lines()
        .filter_map(|l| {
            // process <0.5.0> (name) [state, mailbox 0]:
            let rest = l.strip_prefix("process ")?;
            let (pid, rest) = rest.split_once(" (")?;
            let (name, _) = rest.split_once(')')?;
            Some((name.to_owned(), pid.to_owned()))
        })
        .collect()
}

#[test]
fn go_tool_pprof_reads_the_profile_and_its_samples_carry_the_examples_pids() {
    let target = Target::start("pprof");
    let names = registered(&target);
    for name in ["cruncher_a", "cruncher_b", "idle"] {
        assert!(names.contains_key(name), "{name}: {names:?}");
    }

    // Decoded here: CPU samples labelled with the crunchers' pids and names.
    let (status, body) = target.get("/debug/pprof/profile?seconds=1");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(body.as_slice())
        .read_to_end(&mut raw)
        .unwrap();
    let p = <Pprof as prost::Message>::decode(raw.as_slice()).unwrap();
    let mut cpu_by_process: HashMap<(String, String), usize> = HashMap::new();
    for sample in &p.sample {
        let label = |key: &str| {
            sample
                .label
                .iter()
                .find(|l| p.string(l.key) == key)
                .map(|l| p.string(l.str).to_owned())
        };
        if let (Some(process), Some(pid)) = (label("process"), label("pid")) {
            *cpu_by_process.entry((process, pid)).or_default() += 1;
        }
    }
    for name in ["cruncher_a", "cruncher_b"] {
        let key = (name.to_owned(), names[name].clone());
        assert!(
            cpu_by_process.contains_key(&key),
            "{key:?} among {cpu_by_process:?}"
        );
    }
    assert!(
        p.function
            .iter()
            .any(|f| p.string(f.name) == "pull_target::crunch"),
        "the traced function is in the stacks"
    );

    // And read by go tool pprof, as a continuous profiler or a person would.
    let go = ["/usr/bin/go", "/usr/local/go/bin/go"]
        .into_iter()
        .find(|g| std::path::Path::new(g).exists())
        .map(str::to_owned)
        .or_else(|| {
            let found = Command::new("sh")
                .args(["-c", "command -v go"])
                .output()
                .ok()?;
            let path = String::from_utf8(found.stdout).ok()?.trim().to_owned();
            (!path.is_empty()).then_some(path)
        });
    let Some(go) = go else {
        eprintln!("skipped go tool pprof: no `go` on this machine");
        return;
    };
    let home = tempfile::tempdir().unwrap();
    // Both workers are busy in the crunchers all along: each profile is read by go tool pprof.
    for (path, args, wanted) in [
        (
            "/debug/pprof/profile?seconds=1",
            &["-top", "-tagroot", "process"][..],
            "pull_target::crunch",
        ),
        (
            "/debug/pprof/heap?seconds=1",
            &["-top", "-sample_index", "alloc_space"][..],
            "pull_target::crunch",
        ),
        (
            "/debug/pprof/goroutine",
            &["-top", "-tagroot", "process"][..],
            "idle",
        ),
    ] {
        let url = format!("http://{}{}", target.addr, target.with_token(path));
        let out = Command::new(&go)
            .args(["tool", "pprof"])
            .args(args)
            .arg(&url)
            .env("HOME", home.path())
            .env("PPROF_TMPDIR", home.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{path}: {stderr}\n{stdout}");
        assert!(stdout.contains(wanted), "{path}: {stdout}\n{stderr}");
        if path.contains("profile") {
            // -tagroot puts each sample's process at the root of its stack.
            for name in ["cruncher_a", "cruncher_b"] {
                assert!(
                    stdout
                        .lines()
                        .any(|l| l.split_whitespace().last() == Some(name)),
                    "{name}: {stdout}"
                );
            }
        }
    }
}

/// Closing the example's standard input while a long profile is in progress ends the program:
/// the endpoint's close cuts the profile short instead of waiting for it.
#[test]
fn closing_stdin_during_a_long_profile_ends_the_program() {
    let mut target = Target::start("stdin");
    let addr = target.addr.clone();
    let url = target.with_token("/debug/pprof/profile?seconds=600");
    let asked = std::thread::Builder::new()
        .name("asks".into())
        .spawn(move || {
            let mut stream = TcpStream::connect(&addr).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(300)))
                .unwrap();
            write!(stream, "GET {url} HTTP/1.1\r\n\r\n").unwrap();
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer);
            answer
        })
        .unwrap();
    // The profile is under way once the program answers another request (served beside it).
    let (status, _) = target.get("/debug/pprof/goroutine?debug=1");
    assert_eq!(status, 200);
    drop(target.child.stdin.take());
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let exit = loop {
        if let Some(exit) = target.child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the program is still running 120 s after its stdin closed (a 600 s profile holds it)"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit:?}");
    // The close waits a few seconds for the request, which then answers with what it
    // gathered; a program that ends before the profile is written (its symbols looked up)
    // closes the connection instead: either way, no 600 s wait.
    let answer = asked.join().unwrap();
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 200 "),
        "the cut profile is answered or the connection closed: {:?}",
        String::from_utf8_lossy(&answer[..answer.len().min(200)])
    );
}
