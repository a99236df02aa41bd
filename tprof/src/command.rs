//! What the `tprof` command does, as a library: the binary (`src/bin/tprof/`) only parses its
//! arguments, calls these and maps their errors to exit codes.
//!
//! - [`run`]: runs a program built on the runtime with profiling switched on through the
//!   environment ([`runtime::trace::env_run`]); each node of the program writes what it
//!   gathered as it stops, and `run` reads that into one [`Profile`].
//! - [`report`]: reads a profile file and writes it in any [`Format`].
//! - [`merge`]: merges profile files of one trace type ([`crate::archive::merge`]).
//! - [`view`]: writes the HTML viewer of a profile file and opens it in a browser.
//!
//! A *profile file* is a `.tprof` archive, or a profile exported as `json`.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{SystemTime, UNIX_EPOCH};

use runtime::trace::env_run::{self, RunFile};

use crate::archive::{self, ArchiveError, Merger};
use crate::export::{self, Format};
use crate::{Profile, Run, TraceType};

/// Why a command failed; [`exit_code`](CommandError::exit_code) tells the shell which kind.
#[derive(Debug)]
#[non_exhaustive]
pub enum CommandError {
    /// The command line asks for something it cannot do (exit code 2, as for a usage error).
    Usage(String),
    /// An input file is not a profile, or is damaged (exit code 3).
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An output could not be written (exit code 4).
    Output {
        /// The file, or `None` for standard output.
        path: Option<PathBuf>,
        /// Why.
        reason: String,
    },
    /// The program could not be run, or it wrote no profile (exit code 4).
    Program(String),
}

impl CommandError {
    /// The process exit code for this error: 2 bad usage, 3 bad input, 4 a failure to run or
    /// to write.
    pub fn exit_code(&self) -> i32 {
        match self {
            CommandError::Usage(_) => 2,
            CommandError::Input { .. } => 3,
            CommandError::Output { .. } | CommandError::Program(_) => 4,
        }
    }

    fn input(path: &Path, reason: impl fmt::Display) -> CommandError {
        CommandError::Input {
            path: path.to_owned(),
            reason: reason.to_string(),
        }
    }

    fn output(path: Option<&Path>, reason: impl fmt::Display) -> CommandError {
        CommandError::Output {
            path: path.map(Path::to_owned),
            reason: reason.to_string(),
        }
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Usage(msg) | CommandError::Program(msg) => f.write_str(msg),
            CommandError::Input { path, reason } => write!(f, "{}: {reason}", path.display()),
            CommandError::Output {
                path: Some(path),
                reason,
            } => write!(f, "cannot write {}: {reason}", path.display()),
            CommandError::Output { path: None, reason } => {
                write!(f, "cannot write to standard output: {reason}")
            }
        }
    }
}

impl std::error::Error for CommandError {}

/// What [`run`] runs and where its profile goes.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// What to measure (default call_count).
    pub trace_type: TraceType,
    /// Measure per call path too, for flame graphs (call_time and call_memory; default on).
    pub call_tree: bool,
    /// Record call durations for percentiles (call_time; default off).
    pub percentiles: bool,
    /// Keep an event log per process, for timelines (call_time and call_memory; default off).
    pub events: bool,
    /// Where to write: the archive, or the export when [`format`](RunOptions::format) is
    /// set (default: `PROGRAM.tprof` in the current folder, or standard output for an export).
    pub out: Option<PathBuf>,
    /// Write this export instead of an archive.
    pub format: Option<Format>,
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl RunOptions {
    /// Runs `program` with `args`, call_count, call tree on, writing `PROGRAM.tprof`.
    pub fn new(program: impl Into<OsString>, args: Vec<OsString>) -> RunOptions {
        RunOptions {
            trace_type: TraceType::CallCount,
            call_tree: true,
            percentiles: false,
            events: false,
            out: None,
            format: None,
            program: program.into(),
            args,
        }
    }
}

/// What [`run`] did.
#[derive(Debug)]
pub struct RunOutcome {
    /// How the program ended.
    pub status: ExitStatus,
    /// Where the profile went (`None`: standard output).
    pub written: Option<PathBuf>,
    /// The profile.
    pub profile: Profile,
}

/// Runs a program built on the runtime with profiling switched on through the environment,
/// waits for it, and writes its profile (as [`RunOptions`] says). A program that fails still
/// has its profile written: what it gathered before is kept.
///
/// # Errors
///
/// [`CommandError::Program`] when the program cannot be started or wrote no profile (it
/// started no node, or ended with `std::process::exit` before its nodes stopped);
/// [`CommandError::Output`] when the profile cannot be written.
pub fn run(options: &RunOptions) -> Result<RunOutcome, CommandError> {
    let dir = scratch_dir("run")
        .map_err(|e| CommandError::Program(format!("cannot make a scratch folder: {e}")))?;
    let started = SystemTime::now();
    let mut command = Command::new(&options.program);
    command
        .args(&options.args)
        .env(env_run::ENV_TYPE, options.trace_type.name())
        .env(env_run::ENV_DIR, &dir)
        .env(
            env_run::ENV_CALL_TREE,
            if options.call_tree { "1" } else { "0" },
        )
        .env(
            env_run::ENV_PERCENTILES,
            if options.percentiles { "1" } else { "0" },
        )
        .env(env_run::ENV_EVENTS, if options.events { "1" } else { "0" });
    if options.format.is_some() && options.out.is_none() {
        // The export goes to standard output: the program's own output goes to stderr.
        command.stdout(std::process::Stdio::from(io::stderr()));
    }
    let status = command.spawn().and_then(|mut child| {
        let os_pid = child.id();
        child.wait().map(|status| (status, os_pid))
    });
    let profile = match &status {
        Ok((_, os_pid)) => read_run_dir_of(&dir, options.trace_type, Some(*os_pid)),
        Err(_) => Err(CommandError::Program(String::new())),
    };
    let _ = fs::remove_dir_all(&dir);
    let (status, _) = status.map_err(|e| {
        CommandError::Program(format!(
            "cannot run {}: {e}",
            Path::new(&options.program).display()
        ))
    })?;
    let mut profile = profile.map_err(|e| match e {
        CommandError::Program(msg) => CommandError::Program(format!(
            "{msg}{}",
            if status.success() {
                String::new()
            } else {
                format!(" (it ended with {status})")
            }
        )),
        other => other,
    })?;
    let mut program = vec![options.program.to_string_lossy().into_owned()];
    program.extend(
        options
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned()),
    );
    if let Some(run) = profile.meta.runs.first_mut() {
        run.program = program.join(" ");
        if run.started_unix_ms == 0 {
            run.started_unix_ms = unix_ms(started);
        }
    }
    let written = match (&options.out, options.format) {
        (Some(out), _) => Some(out.clone()),
        (None, Some(_)) => None,
        (None, None) => {
            let stem = Path::new(&options.program)
                .file_stem()
                .map_or_else(|| "tprof".into(), |s| s.to_string_lossy().into_owned());
            Some(PathBuf::from(format!("{stem}.tprof")))
        }
    };
    match options.format {
        None => write_archive(
            &profile,
            written.as_deref().unwrap_or(Path::new("out.tprof")),
        )?,
        Some(format) => write_export(&profile, format, written.as_deref())?,
    }
    Ok(RunOutcome {
        status,
        written,
        profile,
    })
}

/// Reads the run files a profiled program's nodes wrote into `dir` as one profile of
/// `trace_type` (the nodes' processes side by side).
///
/// # Errors
///
/// [`CommandError::Program`] when there is none; [`CommandError::Input`] for one that
/// cannot be read.
pub fn read_run_dir(dir: &Path, trace_type: TraceType) -> Result<Profile, CommandError> {
    read_run_dir_of(dir, trace_type, None)
}

/// [`read_run_dir`], keeping only the files OS process `os_pid` wrote (the program `run`
/// started: programs it starts in turn inherit the environment and write run files too, of
/// their own nodes, whose pids would collide with its own).
fn read_run_dir_of(
    dir: &Path,
    trace_type: TraceType,
    os_pid: Option<u32>,
) -> Result<Profile, CommandError> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| CommandError::input(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("tprof-run-") && n.ends_with(".json"))
        })
        .collect();
    if let Some(os_pid) = os_pid {
        let prefix = format!("tprof-run-{os_pid}-");
        let before = files.len();
        files.retain(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        });
        if files.len() < before {
            eprintln!(
                "tprof: {} profile(s) of programs the program started were left out",
                before - files.len()
            );
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(CommandError::Program(
            "the program wrote no profile: it must start a runtime node (runtime::Node) and \
             let it stop — return from main, or call Node::stop — rather than end with \
             std::process::exit"
                .to_owned(),
        ));
    }
    let mut snapshots = Vec::new();
    let mut errors = Vec::new();
    let mut started = u64::MAX;
    let mut duration = 0;
    for file in &files {
        let text = fs::read(file).map_err(|e| CommandError::input(file, e))?;
        let run: RunFile = serde_json::from_slice(&text)
            .map_err(|e| CommandError::input(file, format!("not a run file: {e}")))?;
        if run.version > env_run::RUN_FILE_VERSION {
            return Err(CommandError::input(
                file,
                format!(
                    "run file version {} is newer than this tprof reads ({}): use the tprof \
                     of the program's runtime version",
                    run.version,
                    env_run::RUN_FILE_VERSION
                ),
            ));
        }
        if let Some(error) = run.error {
            errors.push(format!("node {}: {error}", run.snapshot.node));
            continue;
        }
        started = started.min(run.started_unix_ms);
        duration = duration.max(run.duration_ns);
        snapshots.push(run.snapshot);
    }
    if snapshots.is_empty() {
        return Err(CommandError::Program(format!(
            "the program could not be profiled: {}",
            errors.join("; ")
        )));
    }
    for error in &errors {
        eprintln!("tprof: not profiled: {error}");
    }
    let mut profile = Profile::from_snapshots(&snapshots, trace_type, &["tprof"]);
    profile.meta.runs = vec![Run {
        program: String::new(),
        started_unix_ms: if started == u64::MAX { 0 } else { started },
        duration_ns: duration,
        nodes: snapshots.iter().map(|s| s.node).collect(),
    }];
    Ok(profile)
}

/// Reads a profile file: a `.tprof` archive, or a profile exported as `json`.
///
/// # Errors
///
/// [`CommandError::Input`] naming the file and what is wrong (with the byte offset for a
/// damaged archive).
pub fn read_profile(path: &Path) -> Result<Profile, CommandError> {
    let mut file = fs::File::open(path).map_err(|e| CommandError::input(path, e))?;
    let mut head = [0u8; 1];
    let n = file
        .read(&mut head)
        .map_err(|e| CommandError::input(path, e))?;
    if n == 1 && (head[0] == b'{' || head[0].is_ascii_whitespace()) {
        let text = fs::read(path).map_err(|e| CommandError::input(path, e))?;
        return serde_json::from_slice(&text)
            .map_err(|e| CommandError::input(path, format!("not a tprof json profile: {e}")));
    }
    archive::read_file(path).map_err(|e| match e {
        ArchiveError::File { source, .. } => CommandError::input(path, source),
        other => CommandError::input(path, other),
    })
}

/// Writes `profile` in `format` to `out` (standard output when `None`).
///
/// # Errors
///
/// [`CommandError::Output`] when it cannot be written, or the format cannot show it.
pub fn write_export(
    profile: &Profile,
    format: Format,
    out: Option<&Path>,
) -> Result<(), CommandError> {
    let mut bytes = Vec::new();
    export::write(format, profile, &mut bytes).map_err(|e| CommandError::output(out, e))?;
    match out {
        Some(path) => fs::write(path, &bytes).map_err(|e| CommandError::output(Some(path), e)),
        None => {
            let mut stdout = io::stdout().lock();
            stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .map_err(|e| CommandError::output(None, e))
        }
    }
}

/// Writes `profile` as a `.tprof` archive at `path`.
///
/// # Errors
///
/// [`CommandError::Output`] when it cannot be written.
pub fn write_archive(profile: &Profile, path: &Path) -> Result<(), CommandError> {
    archive::write_file(profile, path).map_err(|e| match e {
        ArchiveError::File { source, .. } => CommandError::output(Some(path), source),
        other => CommandError::output(Some(path), other),
    })
}

/// `tprof report`: reads the profile file `input` and writes it in `format` to `out`
/// (standard output when `None`).
///
/// # Errors
///
/// As [`read_profile`] and [`write_export`].
pub fn report(input: &Path, format: Format, out: Option<&Path>) -> Result<(), CommandError> {
    let profile = read_profile(input)?;
    write_export(&profile, format, out)
}

/// `tprof merge`: merges the profile files `inputs` (of one trace type) into the archive
/// `out`; `progress` hears of each input as it is read, with its index.
///
/// # Errors
///
/// [`CommandError::Usage`] for no input; [`CommandError::Input`] for an input that cannot be
/// read, or whose trace type differs from the first's; [`CommandError::Output`] when `out`
/// cannot be written.
pub fn merge(
    inputs: &[PathBuf],
    out: &Path,
    progress: &mut dyn FnMut(usize, &Path),
) -> Result<Profile, CommandError> {
    let Some((first, rest)) = inputs.split_first() else {
        return Err(CommandError::Usage(
            "merge needs at least one input".to_owned(),
        ));
    };
    progress(0, first);
    let mut merger = Merger::new(read_profile(first)?);
    for (i, input) in rest.iter().enumerate() {
        progress(i + 1, input);
        merger
            .add(read_profile(input)?)
            .map_err(|e| CommandError::input(input, e))?;
    }
    let merged = merger.finish();
    write_archive(&merged, out)?;
    Ok(merged)
}

/// `tprof view`: writes the HTML viewer of the profile file `input` to `out` (default: a file
/// in the system's temporary folder) and opens it in a browser — `$BROWSER`, else the
/// system's opener. Returns the page's path and whether a browser was started.
///
/// # Errors
///
/// As [`read_profile`] and [`write_export`].
pub fn view(input: &Path, out: Option<&Path>) -> Result<(PathBuf, bool), CommandError> {
    let profile = read_profile(input)?;
    let page = match out {
        Some(out) => out.to_owned(),
        None => {
            let stem = input
                .file_stem()
                .map_or_else(|| "profile".into(), |s| s.to_string_lossy().into_owned());
            std::env::temp_dir().join(format!("tprof-view-{stem}-{}.html", std::process::id()))
        }
    };
    write_export(&profile, Format::Html, Some(&page))?;
    Ok((page.clone(), open_in_browser(&page)))
}

/// Starts a browser on `page`: `$BROWSER` if set, else `xdg-open` (`open` on macOS, `start`
/// on Windows). Whether one started.
fn open_in_browser(page: &Path) -> bool {
    let mut command = match std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        Some(browser) => Command::new(browser),
        None if cfg!(target_os = "macos") => Command::new("open"),
        None if cfg!(windows) => {
            let mut c = Command::new("cmd");
            c.args(["/C", "start", ""]);
            c
        }
        None => Command::new("xdg-open"),
    };
    command
        .arg(page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}

/// A new empty folder under the system's temporary folder, made by this call alone.
fn scratch_dir(what: &str) -> io::Result<PathBuf> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut attempt = 0u32;
    loop {
        let dir = std::env::temp_dir().join(format!(
            "tprof-{what}-{}-{nanos:09}-{attempt}",
            std::process::id()
        ));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
