//! `tprof top`: a live program's processes, the busiest first, redrawn every interval.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tprof::control::protocol::{Command, Reply};
use tprof::control::top::{SortKey, Top};

/// What `tprof top` was asked.
pub(crate) struct TopOptions {
    /// Between two refreshes.
    pub(crate) interval: Duration,
    /// The column the rows are sorted by.
    pub(crate) sort: SortKey,
    /// How many frames before it ends (`None`: until interrupted).
    pub(crate) iterations: Option<u64>,
    /// How many rows (`None`: as many as the terminal fits, or 25).
    pub(crate) rows: Option<usize>,
}

/// Rows shown when the output is not a terminal and `--rows` is not given.
const ROWS_OFF_TERMINAL: usize = 25;

/// `tprof top TARGET`.
pub(crate) fn top(target: &str, options: &TopOptions) -> ExitCode {
    let mut client = match crate::attach::connect(target) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("tprof: {e}");
            return ExitCode::from(4);
        }
    };
    let terminal = std::io::stdout().is_terminal();
    let mut table = Top::new();
    let mut list = || match client.request(Command::Processes) {
        Ok(Reply::Processes { processes }) => Ok(processes),
        Ok(other) => Err(format!(
            "the endpoint answered {other:?}, not a process list"
        )),
        Err(e) => Err(e),
    };
    // The first list is the baseline of the first frame's polls.
    match list() {
        Ok(processes) => {
            table.frame(processes, options.sort, 0);
        }
        Err(e) => {
            eprintln!("tprof: {e}");
            return ExitCode::from(4);
        }
    }
    let mut frame = 0;
    while options.iterations.is_none_or(|n| frame < n) {
        std::thread::sleep(options.interval);
        let asked = Instant::now();
        let processes = match list() {
            Ok(processes) => processes,
            Err(e) => {
                eprintln!("tprof: {e}");
                return ExitCode::from(4);
            }
        };
        let rows = options.rows.unwrap_or_else(|| {
            terminal
                .then(|| console::Term::stdout().size_checked())
                .flatten()
                // The summary line, the header and the status line.
                .map_or(ROWS_OFF_TERMINAL, |(rows, _)| {
                    usize::from(rows).saturating_sub(3)
                })
        });
        let text = table.frame(processes, options.sort, rows);
        let took = asked.elapsed();
        let mut out = std::io::stdout().lock();
        let written = if terminal {
            // Home and clear, then the frame.
            write!(out, "\x1b[H\x1b[2J{text}")
        } else {
            write!(out, "{text}")
        }
        .and_then(|()| {
            writeln!(
                out,
                "(refresh {}: {} ms; every {} s)",
                frame + 1,
                took.as_millis(),
                options.interval.as_secs_f64()
            )
        })
        .and_then(|()| out.flush());
        if written.is_err() {
            // Standard output's reader went away (`| head`).
            return ExitCode::SUCCESS;
        }
        frame += 1;
    }
    ExitCode::SUCCESS
}
