//! `tprof attach`: commands sent one by one to a live program's control endpoint, from a `-c`
//! script or a prompt (line editing, history in a file, tab completion), and each reply printed
//! as tprof prints it.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use reedline::{
    ColumnarMenu, Completer, CompletionResult, Emacs, FileBackedHistory, KeyCode, KeyModifiers,
    MenuBuilder, Prompt, PromptEditMode, PromptHistorySearch, Reedline, ReedlineEvent,
    ReedlineMenu, Signal, Span, Suggestion, default_emacs_keybindings,
};
use tprof::control::ControlClient;
use tprof::control::complete::{Vocabulary, complete};
use tprof::control::protocol::{Command, FunctionRow, Reply};
use tprof::control::script::{help, is_help, parse_line, render, script_lines};

/// The connection, shared by the prompt's loop and its completer.
type Shared = Arc<Mutex<ControlClient>>;

/// How many lines the history file keeps.
const HISTORY_LINES: usize = 1000;

/// Connects to the endpoint `target` names (an OS pid, a socket path, or a TCP address with
/// the token `auth` gives or the one its program wrote beside its socket).
pub(crate) fn connect(
    target: &str,
    auth: &crate::args::TokenArgs,
) -> Result<ControlClient, String> {
    auth.token()
        .and_then(|token| tprof::control::connect_target(target, token))
}

/// `tprof attach TARGET [-c SCRIPT]`.
pub(crate) fn attach(
    target: &str,
    script: Option<&str>,
    auth: &crate::args::TokenArgs,
) -> ExitCode {
    let client = match connect(target, auth) {
        Ok(client) => Arc::new(Mutex::new(client)),
        Err(e) => {
            eprintln!("tprof: {e}");
            return ExitCode::from(4);
        }
    };
    if let Some(script) = script {
        for line in script_lines(script) {
            if let Err(e) = run(&client, line) {
                eprintln!("tprof: {line}: {e}");
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    }
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        prompt(&client)
    } else {
        lines(&client)
    }
}

/// Runs one line: `help`, or a command whose reply is printed.
fn run(client: &Shared, line: &str) -> Result<(), String> {
    if is_help(line) {
        print!("{}", help(line));
        return Ok(());
    }
    let Some(mut command) = parse_line(line)? else {
        return Ok(());
    };
    if let Command::Top { baseline, .. } = &mut command {
        // This process's own: polls since its previous top.
        *baseline = u64::from(std::process::id());
    }
    let reply = request(client, command)?;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(render(&reply).as_bytes());
    let _ = stdout.flush();
    Ok(())
}

fn request(client: &Shared, command: Command) -> Result<Reply, String> {
    client
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .request(command)
}

fn is_quit(line: &str) -> bool {
    matches!(line.trim(), "quit" | "exit" | "q")
}

/// Commands from standard input that is not a terminal, one per line.
fn lines(client: &Shared) -> ExitCode {
    let mut line = String::new();
    loop {
        line.clear();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => return ExitCode::SUCCESS,
            Ok(_) => {}
        }
        if is_quit(&line) {
            return ExitCode::SUCCESS;
        }
        if let Err(e) = run(client, line.trim()) {
            eprintln!("error: {e}");
        }
    }
}

/// The interactive prompt.
fn prompt(client: &Shared) -> ExitCode {
    let mut keybindings = default_emacs_keybindings();
    keybindings.add_binding(
        KeyModifiers::NONE,
        KeyCode::Tab,
        ReedlineEvent::UntilFound(vec![
            ReedlineEvent::Menu("completion_menu".to_owned()),
            ReedlineEvent::MenuNext,
        ]),
    );
    let mut editor = Reedline::create()
        .with_completer(Box::new(EndpointCompleter {
            client: client.clone(),
            functions: None,
        }))
        .with_quick_completions(true)
        .with_partial_completions(true)
        .with_menu(ReedlineMenu::EngineCompleter(Box::new(
            ColumnarMenu::default().with_name("completion_menu"),
        )))
        .with_edit_mode(Box::new(Emacs::new(keybindings)));
    let file = history_file();
    match FileBackedHistory::with_file(HISTORY_LINES, file.clone()) {
        Ok(history) => editor = editor.with_history(Box::new(history)),
        Err(e) => eprintln!(
            "tprof: no history across sessions ({}: {e})",
            file.display()
        ),
    }
    println!("tprof attach: `help` lists the commands; Tab completes; Ctrl-D leaves.");
    loop {
        match editor.read_line(&TprofPrompt) {
            Ok(Signal::Success(line)) => {
                if is_quit(&line) {
                    return ExitCode::SUCCESS;
                }
                if let Err(e) = run(client, line.trim()) {
                    eprintln!("error: {e}");
                }
            }
            // Ctrl-C drops the line being typed, as a shell does.
            Ok(Signal::CtrlC) => {}
            Ok(_) => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("tprof: the prompt failed: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
}

/// `$XDG_STATE_HOME/tprof/attach_history`, else `~/.local/state/tprof/...`, else the temp
/// dir's.
fn history_file() -> PathBuf {
    let absolute = |var| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local/state")))
        .unwrap_or_else(std::env::temp_dir)
        .join("tprof")
        .join("attach_history")
}

/// `tprof> `.
struct TprofPrompt;

impl Prompt for TprofPrompt {
    fn render_prompt_left(&self) -> Cow<'_, str> {
        Cow::Borrowed("tprof")
    }

    fn render_prompt_right(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_indicator(&self, _mode: PromptEditMode) -> Cow<'_, str> {
        Cow::Borrowed("> ")
    }

    fn render_prompt_multiline_indicator(&self) -> Cow<'_, str> {
        Cow::Borrowed("... ")
    }

    fn render_prompt_history_search_indicator(&self, search: PromptHistorySearch) -> Cow<'_, str> {
        Cow::Owned(format!("(search: {}) ", search.term))
    }
}

/// Completes from the command language and what the endpoint knows: its traced functions
/// (asked once: they are the program's, fixed) and its registered names (asked at each Tab).
struct EndpointCompleter {
    client: Shared,
    functions: Option<Vec<FunctionRow>>,
}

impl Vocabulary for EndpointCompleter {
    fn functions(&mut self) -> Vec<FunctionRow> {
        if self.functions.is_none()
            && let Ok(Reply::Functions { functions }) = request(&self.client, Command::Functions)
        {
            self.functions = Some(functions);
        }
        self.functions.clone().unwrap_or_default()
    }

    fn names(&mut self) -> Vec<String> {
        match request(&self.client, Command::Registered) {
            Ok(Reply::Names { names }) => names,
            _ => Vec::new(),
        }
    }
}

impl Completer for EndpointCompleter {
    fn complete(&mut self, line: &str, pos: usize) -> CompletionResult {
        let done = complete(line, pos, self);
        let span = Span::new(done.start, pos.max(done.start).min(line.len()));
        CompletionResult::fresh(
            done.candidates
                .into_iter()
                .map(|value| Suggestion {
                    value,
                    span,
                    append_whitespace: true,
                    ..Suggestion::default()
                })
                .collect::<Vec<_>>(),
        )
    }
}
