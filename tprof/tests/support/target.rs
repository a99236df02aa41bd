//! The attach example (`attach_target`) running under a test: its control socket, and its
//! standard input and output to make it work. Included by the attach tests beside
//! `support/examples.rs` (`#[path = "support/target.rs"] mod target;`), which each add the
//! `tprof` invocations they need in an `impl Target` of their own.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use super::examples::example;

/// The running example, where it listens, and its standard input and output.
pub(crate) struct Target {
    pub(crate) child: Child,
    /// The control endpoint's socket, as the example printed it.
    pub(crate) socket: String,
    pub(crate) input: ChildStdin,
    pub(crate) output: BufReader<ChildStdout>,
}

impl Target {
    /// Starts the example with its endpoint at `socket` and the environment `env` (say, a TCP
    /// address to listen on too), and waits until it says where it listens.
    pub(crate) fn start_at(socket: &Path, env: &[(&str, &str)]) -> Target {
        let mut child = Command::new(example("attach_target"))
            .env("TPROF_CONTROL", socket)
            .envs(env.iter().copied())
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

    /// The file beside the socket with extension `ext` (`tcp`, `token`).
    pub(crate) fn beside(&self, ext: &str) -> PathBuf {
        Path::new(&self.socket).with_extension(ext)
    }

    /// Has the counter count `n` messages; their total.
    pub(crate) fn work(&mut self, n: u64) -> u64 {
        writeln!(self.input, "work {n}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        line.trim().strip_prefix("done ").unwrap().parse().unwrap()
    }
}

impl Drop for Target {
    /// Kills the example, and removes what it leaves beside its socket.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for ext in ["sock", "tcp", "token"] {
            let _ = std::fs::remove_file(self.beside(ext));
        }
    }
}
