//! Reading what the commands take: a profile file (a `.tprof` archive, a `json` export, or a
//! run file a profiled program wrote), a folder of run files, or standard input (`-`); and
//! saying what a file that is none of these looks like, and what reads it.

use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use runtime::trace::env_run::{self, RunFile};

use super::CommandError;
use crate::archive::{self, ArchiveError};
use crate::{Profile, Run, TraceType};

/// Whether `path` names standard input or output (`-`).
pub(super) fn is_std(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Reads a profile file: a `.tprof` archive, a profile exported as `json`, a run file a
/// program profiled through the `TPROF_RUN*` variables wrote ([`runtime::trace::env_run`]),
/// or a folder of such run files; `-` reads standard input. A pipe or a FIFO reads as a file.
///
/// # Errors
///
/// [`CommandError::Input`] naming the file and what is wrong (with the byte offset for a
/// damaged archive); for a file of another kind (a pprof, folded stacks, an SVG, …), what it
/// looks like and what reads it.
pub fn read_profile(path: &Path) -> Result<Profile, CommandError> {
    if !is_std(path) && path.is_dir() {
        return read_run_dir_of(path, None, None)
            .map(|runs| runs.profile)
            .map_err(|e| match e {
                CommandError::Program(why) => CommandError::input(
                    path,
                    format!("a folder, read as the run files (tprof-run-*.json) in it: {why}"),
                ),
                other => other,
            });
    }
    let source: Box<dyn Read> = if is_std(path) {
        Box::new(io::stdin().lock())
    } else {
        Box::new(fs::File::open(path).map_err(|e| CommandError::input(path, e))?)
    };
    let mut input = BufReader::with_capacity(64 << 10, source);
    let head = peek(&mut input, 4 << 10).map_err(|e| CommandError::input(path, e))?;
    if head.is_empty() {
        return Err(CommandError::input(
            path,
            "the file is empty: it holds no profile",
        ));
    }
    let is_archive = archive::MAGIC.starts_with(&head[..head.len().min(archive::MAGIC.len())]);
    if !is_archive {
        if head.trim_ascii_start().first() == Some(&b'{') {
            let mut text = head;
            input
                .read_to_end(&mut text)
                .map_err(|e| CommandError::input(path, e))?;
            return from_json(path, &text);
        }
        if let Some(other) = Other::sniff(&head) {
            return Err(CommandError::input(path, other));
        }
    }
    archive::read(&mut io::Cursor::new(head).chain(input)).map_err(|e| match e {
        ArchiveError::File { source, .. } => CommandError::input(path, source),
        other => CommandError::input(path, other),
    })
}

/// Up to `n` bytes from the start of `input`, which reads on from there when given them
/// back first (a pipe hands them out a few at a time).
fn peek(input: &mut impl Read, n: usize) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(n);
    input.take(n as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// A JSON file: a profile exported as `json`, or a run file.
fn from_json(path: &Path, text: &[u8]) -> Result<Profile, CommandError> {
    let profile_error = match serde_json::from_slice::<Profile>(text) {
        Ok(profile) => return Ok(profile),
        Err(e) => e,
    };
    if let Ok(run) = serde_json::from_slice::<RunFile>(text) {
        return from_run_files(vec![(path.to_owned(), run)], None).map(|r| r.profile);
    }
    if let Some(other) = Other::sniff(text) {
        return Err(CommandError::input(path, other));
    }
    Err(CommandError::input(
        path,
        format!("not a tprof json profile: {profile_error}"),
    ))
}

/// A kind of file that is not a profile tprof reads, but that people hand it: most often one
/// of its own exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Other {
    Pprof,
    Folded,
    Speedscope,
    Chrome,
    Svg,
    Html,
    Pretty,
}

impl Other {
    /// What the bytes at the start of a file look like, if one of these.
    fn sniff(head: &[u8]) -> Option<Other> {
        if head.starts_with(&[0x1f, 0x8b]) {
            // Gzip: what `-f pprof` writes.
            return Some(Other::Pprof);
        }
        let text = String::from_utf8_lossy(head);
        let trimmed = text.trim_start();
        let lower = trimmed
            .get(..trimmed.len().min(200))
            .unwrap_or_default()
            .to_ascii_lowercase();
        if lower.starts_with("<!doctype html") || lower.starts_with("<html") {
            return Some(Other::Html);
        }
        if lower.starts_with("<?xml") || lower.starts_with("<svg") || lower.contains("<svg") {
            return Some(Other::Svg);
        }
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            if text.contains("speedscope.app/file-format-schema") {
                return Some(Other::Speedscope);
            }
            if text.contains("\"traceEvents\"") || trimmed.starts_with('[') {
                return Some(Other::Chrome);
            }
            return None;
        }
        if text.contains("****** Process") || text.contains("FUNCTION ") {
            return Some(Other::Pretty);
        }
        // Folded stacks: every whole line `frame;frame;… count`.
        let whole = text.rsplit_once('\n').map_or(&*text, |(lines, _)| lines);
        let folded = |line: &str| {
            line.rsplit_once(' ').is_some_and(|(stack, count)| {
                !stack.is_empty() && !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit())
            })
        };
        if !whole.is_empty() && whole.lines().all(folded) {
            return Some(Other::Folded);
        }
        None
    }
}

impl std::fmt::Display for Other {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Other::Pprof => {
                "not a profile tprof reads: it looks like a pprof profile (gzipped protobuf, \
                 what `tprof report -f pprof` writes); read it with `go tool pprof`, or open it \
                 in speedscope"
            }
            Other::Folded => {
                "not a profile tprof reads: it looks like folded stacks (what `tprof report -f \
                 folded` writes); draw them with inferno-flamegraph or flamegraph.pl, or open \
                 them in speedscope"
            }
            Other::Speedscope => {
                "not a profile tprof reads: it is a speedscope file (what `tprof report -f \
                 speedscope` writes); open it in speedscope"
            }
            Other::Chrome => {
                "not a profile tprof reads: it looks like a Chrome trace (what `tprof report \
                 -f chrome` writes); open it in Perfetto or chrome://tracing"
            }
            Other::Svg => {
                "not a profile tprof reads: it is an SVG image (a flame graph, as `tprof report \
                 -f svg` draws); open it in a browser"
            }
            Other::Html => {
                "not a profile tprof reads: it is an HTML page (as `tprof view` and `tprof \
                 report -f html` write); open it in a browser"
            }
            Other::Pretty => {
                "not a profile tprof reads: it looks like a tprof text report (`tprof report`), \
                 which is for reading and cannot be read back; report the .tprof archive it \
                 came from"
            }
        })
    }
}

/// The run files of a run, read: the profile, and the files that are snapshots of a node
/// still running.
#[derive(Debug)]
pub(super) struct RunFiles {
    pub(super) profile: Profile,
    /// The run files read.
    pub(super) files: Vec<RunFile>,
}

/// Reads the run files a profiled program's nodes wrote into `dir` as one profile of
/// `trace_type` (the nodes' processes side by side).
///
/// # Errors
///
/// [`CommandError::Program`] when there is none; [`CommandError::Input`] for one that
/// cannot be read.
pub fn read_run_dir(dir: &Path, trace_type: TraceType) -> Result<Profile, CommandError> {
    read_run_dir_of(dir, Some(trace_type), None).map(|runs| runs.profile)
}

/// [`read_run_dir`], of the trace type the files name when `trace_type` is `None`, keeping
/// only the files OS process `os_pid` wrote (the program `run` started: programs it starts in
/// turn inherit the environment and write run files too, of their own nodes, whose pids would
/// collide with its own).
pub(super) fn read_run_dir_of(
    dir: &Path,
    trace_type: Option<TraceType>,
    os_pid: Option<u32>,
) -> Result<RunFiles, CommandError> {
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
    let mut runs = Vec::with_capacity(files.len());
    for file in files {
        let text = fs::read(&file).map_err(|e| CommandError::input(&file, e))?;
        let run: RunFile = serde_json::from_slice(&text)
            .map_err(|e| CommandError::input(&file, format!("not a run file: {e}")))?;
        runs.push((file, run));
    }
    from_run_files(runs, trace_type)
}

/// The profile of the run files `runs` (of one program): of `trace_type`, or the one the
/// first file names.
fn from_run_files(
    runs: Vec<(PathBuf, RunFile)>,
    trace_type: Option<TraceType>,
) -> Result<RunFiles, CommandError> {
    let mut snapshots = Vec::new();
    let mut errors: Vec<(String, Vec<u32>)> = Vec::new();
    let mut started = u64::MAX;
    let mut duration = 0;
    let mut kept = Vec::new();
    let mut trace_type = trace_type;
    let mut program = String::new();
    for (file, mut run) in runs {
        if run.version > env_run::RUN_FILE_VERSION {
            return Err(CommandError::input(
                &file,
                format!(
                    "run file version {} is newer than this tprof reads ({}): use the tprof \
                     of the program's runtime version",
                    run.version,
                    env_run::RUN_FILE_VERSION
                ),
            ));
        }
        // A sample run's trace part is its call counts.
        let this_type = if run.trace_type == "sample" {
            Ok(TraceType::CallCount)
        } else {
            run.trace_type.parse::<TraceType>()
        }
        .map_err(|e| CommandError::input(&file, format!("not a run file tprof reads: {e}")))?;
        if *trace_type.get_or_insert(this_type) != this_type {
            return Err(CommandError::input(
                &file,
                format!(
                    "a {this_type} run file among {} ones: the files of one run are of one \
                     trace type",
                    trace_type.unwrap_or_default()
                ),
            ));
        }
        if let Some(error) = run.error.take() {
            // Each distinct reason once, with the nodes it stopped.
            match errors.iter_mut().find(|(e, _)| *e == error) {
                Some((_, nodes)) => nodes.push(run.snapshot.node),
                None => errors.push((error, vec![run.snapshot.node])),
            }
            continue;
        }
        if program.is_empty() {
            program = run.program.join(" ");
        }
        started = started.min(run.started_unix_ms);
        duration = duration.max(run.duration_ns);
        snapshots.push(std::mem::take(&mut run.snapshot));
        run.snapshot.node = snapshots.last().map_or(0, |s| s.node);
        kept.push(run);
    }
    let errors: Vec<String> = errors
        .into_iter()
        .map(|(error, nodes)| {
            let nodes: Vec<String> = nodes.iter().map(u32::to_string).collect();
            let label = if nodes.len() == 1 { "node" } else { "nodes" };
            format!("{label} {}: {error}", nodes.join(", "))
        })
        .collect();
    if snapshots.is_empty() {
        return Err(CommandError::Program(format!(
            "the program could not be profiled: {}",
            errors.join("; ")
        )));
    }
    for error in &errors {
        eprintln!("tprof: not profiled: {error}");
    }
    let mut profile =
        Profile::from_snapshots(&snapshots, trace_type.unwrap_or_default(), &["tprof"]);
    let run_queue = profile.meta.runs.first().and_then(|r| r.run_queue);
    profile.meta.runs = vec![Run {
        program,
        started_unix_ms: if started == u64::MAX { 0 } else { started },
        duration_ns: duration,
        nodes: snapshots.iter().map(|s| s.node).collect(),
        run_queue,
    }];
    Ok(RunFiles {
        profile,
        files: kept,
    })
}
