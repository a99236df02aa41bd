//! `tprof top`: a live program's processes, the busiest first, redrawn every interval. On a
//! terminal it takes the screen (the alternate one, given back at the end) and keys change
//! the sort; elsewhere it writes one frame after another.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use tprof::control::ControlClient;
use tprof::control::protocol::{Command, Reply};
use tprof::control::top::{SortKey, TopFrame, render};

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

/// The keys, as the status line lists them.
const KEYS: &str = "p polls  m mailbox  h heap  s state  n name  i pid  q quit";

/// `tprof top TARGET`.
pub(crate) fn top(target: &str, auth: &crate::args::TokenArgs, options: &TopOptions) -> ExitCode {
    let mut client = match crate::attach::connect(target, auth) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("tprof: {e}");
            return ExitCode::from(4);
        }
    };
    // The endpoint keeps each refresh's poll counts under this number for the next one.
    let baseline = {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    // The first snapshot is the baseline of the first frame's polls.
    if let Err(e) = snapshot(&mut client, options.sort, 0, baseline) {
        eprintln!("tprof: {e}");
        return ExitCode::from(4);
    }
    let interactive = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let screen = if interactive {
        match Screen::take() {
            Ok(screen) => Some(screen),
            Err(e) => {
                eprintln!("tprof: keys will not work ({e})");
                None
            }
        }
    } else {
        None
    };
    let outcome = refresh(&mut client, baseline, options, screen.as_ref());
    drop(screen);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tprof: {e}");
            ExitCode::from(4)
        }
    }
}

/// The first `rows` processes by `sort`, their polls since the last snapshot of `baseline`.
fn snapshot(
    client: &mut ControlClient,
    sort: SortKey,
    rows: usize,
    baseline: u64,
) -> Result<TopFrame, String> {
    let command = Command::Top {
        sort: sort.name().to_owned(),
        rows,
        baseline,
    };
    match client.request(command)? {
        Reply::Top { frame } => Ok(frame),
        other => Err(format!("the endpoint answered {other:?}, not a frame")),
    }
}

/// Waits, lists, draws, as often as asked.
fn refresh(
    client: &mut ControlClient,
    baseline: u64,
    options: &TopOptions,
    screen: Option<&Screen>,
) -> Result<(), String> {
    let terminal = std::io::stdout().is_terminal();
    let mut sort = options.sort;
    let mut frame = 0;
    while options.iterations.is_none_or(|n| frame < n) {
        match screen {
            Some(screen) => match screen.wait(options.interval) {
                Asked::Quit => return Ok(()),
                Asked::Sort(key) => sort = key,
                Asked::Nothing => {}
            },
            None => std::thread::sleep(options.interval),
        }
        let asked = Instant::now();
        let rows = options.rows.unwrap_or_else(|| {
            terminal
                .then(|| console::Term::stdout().size_checked())
                .flatten()
                // The summary line, the header and the status line.
                .map_or(ROWS_OFF_TERMINAL, |(rows, _)| {
                    usize::from(rows).saturating_sub(3)
                })
        });
        let mut text = render(&snapshot(client, sort, rows, baseline)?);
        text.push_str(&format!(
            "(refresh {}: {} ms; every {} s)",
            frame + 1,
            asked.elapsed().as_millis(),
            options.interval.as_secs_f64()
        ));
        if screen.is_some() {
            text.push_str(&format!("  keys: {KEYS}"));
        }
        text.push('\n');
        let mut out = std::io::stdout().lock();
        let written = match screen {
            // Raw mode: each line returns the carriage itself.
            Some(_) => write!(out, "\x1b[H\x1b[2J{}", text.replace('\n', "\r\n")),
            None if terminal => write!(out, "\x1b[H\x1b[2J{text}"),
            None => out.write_all(text.as_bytes()),
        }
        .and_then(|()| out.flush());
        if written.is_err() {
            // Standard output's reader went away (`| head`).
            return Ok(());
        }
        frame += 1;
    }
    Ok(())
}

/// What a key asked for.
enum Asked {
    Nothing,
    Sort(SortKey),
    Quit,
}

/// The terminal in raw mode on its alternate screen, the cursor hidden, for as long as it is
/// held.
struct Screen;

impl Screen {
    fn take() -> io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let screen = Screen;
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(screen)
    }

    /// Waits out `interval`, or until a key asks for something.
    fn wait(&self, interval: Duration) -> Asked {
        let deadline = Instant::now() + interval;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Asked::Nothing;
            }
            match event::poll(left) {
                Ok(true) => {}
                Ok(false) => return Asked::Nothing,
                // No events to read: the interval is waited out all the same.
                Err(_) => {
                    std::thread::sleep(left);
                    return Asked::Nothing;
                }
            }
            let Ok(Event::Key(key)) = event::read() else {
                continue;
            };
            if key.kind == KeyEventKind::Release {
                continue;
            }
            let asked = match key.code {
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Asked::Quit,
                KeyCode::Char('q') | KeyCode::Esc => Asked::Quit,
                KeyCode::Char('p') => Asked::Sort(SortKey::Polls),
                KeyCode::Char('m') => Asked::Sort(SortKey::Mailbox),
                KeyCode::Char('h') => Asked::Sort(SortKey::Heap),
                KeyCode::Char('s') => Asked::Sort(SortKey::State),
                KeyCode::Char('n') => Asked::Sort(SortKey::Name),
                KeyCode::Char('i') => Asked::Sort(SortKey::Pid),
                _ => continue,
            };
            return asked;
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(io::stdout(), cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}
