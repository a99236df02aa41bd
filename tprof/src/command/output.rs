//! Writing what the commands make: a `.tprof` archive or an export, to a file or to standard
//! output (`-`), in the format asked for or the one the file's name says.

use std::io::{self, IsTerminal, Write};
use std::path::Path;

use super::CommandError;
use super::input::is_std;
use crate::Profile;
use crate::archive::{self, ArchiveError};
use crate::export::{self, ExportError, Format};
use crate::sample_report::PrintOptions;

/// What a command writes: a `.tprof` archive, or an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A `.tprof` archive ([`crate::archive`]).
    Archive,
    /// An export.
    Export(Format),
}

impl Output {
    /// What a file's name asks for, by its extension: `.tprof` an archive, an export's
    /// [`Format::extension`] (and `.pprof`, `.pb`, `.collapsed`) that export; `None` for any
    /// other name.
    ///
    /// ```
    /// use std::path::Path;
    /// use tprof::command::Output;
    /// use tprof::export::Format;
    ///
    /// assert_eq!(Output::of_path(Path::new("a.speedscope.json")), Some(Output::Export(Format::Speedscope)));
    /// assert_eq!(Output::of_path(Path::new("a.json")), Some(Output::Export(Format::Json)));
    /// assert_eq!(Output::of_path(Path::new("run.tprof")), Some(Output::Archive));
    /// assert_eq!(Output::of_path(Path::new("run.bin")), None);
    /// ```
    pub fn of_path(path: &Path) -> Option<Output> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".tprof") {
            return Some(Output::Archive);
        }
        let aliases = [
            ("pprof", Format::Pprof),
            ("pb", Format::Pprof),
            ("collapsed", Format::Folded),
        ];
        // The longest extension that matches: `speedscope.json` before `json`.
        Format::ALL
            .iter()
            .map(|&f| (f.extension(), f))
            .chain(aliases)
            .filter(|(ext, _)| {
                name.strip_suffix(ext)
                    .is_some_and(|stem| stem.len() > 1 && stem.ends_with('.'))
            })
            .max_by_key(|(ext, _)| ext.len())
            .map(|(_, f)| Output::Export(f))
    }

    /// What to write to `out`: `asked` if given (with a warning on stderr when `out`'s name
    /// says another format), else what `out`'s name says, else `default`.
    pub(super) fn resolve(asked: Option<Output>, out: Option<&Path>, default: Output) -> Output {
        let named = out.and_then(Output::of_path);
        match (asked, named) {
            (Some(asked), Some(named)) if asked != named => {
                eprintln!(
                    "tprof: warning: {} is named as {}, but {} was asked for: writing {}",
                    out.map(Path::display)
                        .map_or_else(String::new, |d| d.to_string()),
                    named,
                    asked,
                    asked
                );
                asked
            }
            (Some(asked), _) => asked,
            (None, Some(named)) => named,
            (None, None) => default,
        }
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Archive => f.write_str("a .tprof archive"),
            Output::Export(format) => write!(f, "{format}"),
        }
    }
}

/// Writes `profile` as `what` to `out`: a file, or standard output for `None` or `-`.
///
/// # Errors
///
/// As [`write_export`] and [`write_archive`].
pub fn write_output(
    profile: &Profile,
    what: Output,
    out: Option<&Path>,
) -> Result<(), CommandError> {
    match what {
        Output::Archive => write_archive(profile, out.unwrap_or(Path::new("-"))),
        Output::Export(format) => write_export(profile, format, out),
    }
}

/// Writes `profile` in `format` to `out` (standard output when `None` or `-`).
///
/// # Errors
///
/// [`CommandError::Output`] when it cannot be written, or the format cannot show it;
/// [`CommandError::BrokenPipe`] when standard output's reader went away.
pub fn write_export(
    profile: &Profile,
    format: Format,
    out: Option<&Path>,
) -> Result<(), CommandError> {
    write_rendered(format, out, |w| export::write(format, profile, w))
}

/// Writes `profile` in `format`, its samples' frames shown as `samples` say
/// ([`export::write_shown`]: the pretty report lays them out, the drawn exports leave out the
/// frames and samples the options leave out), to `out` (standard output when `None` or `-`).
///
/// # Errors
///
/// As [`write_export`].
pub(super) fn write_shown(
    profile: &Profile,
    format: Format,
    samples: &PrintOptions,
    out: Option<&Path>,
) -> Result<(), CommandError> {
    write_rendered(format, out, |w| {
        export::write_shown(format, profile, samples, w)
    })
}

/// Writes `text` (a report) to `out`, standard output when `None` or `-`.
///
/// # Errors
///
/// As [`write_export`].
pub(super) fn write_text(text: &str, out: Option<&Path>) -> Result<(), CommandError> {
    write_rendered(Format::Pretty, out, |w| Ok(w.write_all(text.as_bytes())?))
}

/// Writes what `render` writes (an export in `format`) to `out`, standard output when `None`
/// or `-`.
fn write_rendered(
    format: Format,
    out: Option<&Path>,
    render: impl FnOnce(&mut dyn Write) -> Result<(), ExportError>,
) -> Result<(), CommandError> {
    match out.filter(|p| !is_std(p)) {
        Some(path) => {
            archive::write_file_as(path, render).map_err(|e| CommandError::output(Some(path), e))
        }
        None => {
            refuse_binary_on_terminal(format == Format::Pprof)?;
            let mut bytes = Vec::new();
            render(&mut bytes).map_err(|e: ExportError| CommandError::output(None, e))?;
            let mut stdout = io::stdout().lock();
            stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .map_err(stdout_error)
        }
    }
}

/// Writes `profile` as a `.tprof` archive at `path`, or to standard output for `-`. A device,
/// FIFO or symlink is written in place ([`archive::write_file`]).
///
/// # Errors
///
/// [`CommandError::Output`] when it cannot be written (or `-` is a terminal);
/// [`CommandError::BrokenPipe`] when standard output's reader went away.
pub fn write_archive(profile: &Profile, path: &Path) -> Result<(), CommandError> {
    if is_std(path) {
        refuse_binary_on_terminal(true)?;
        let mut stdout = io::BufWriter::new(io::stdout().lock());
        return archive::write(profile, &mut stdout).map_err(|e| match e {
            ArchiveError::Io(e) => stdout_error(e),
            other => CommandError::output(None, other),
        });
    }
    archive::write_file(profile, path).map_err(|e| match e {
        ArchiveError::File { source, .. } => CommandError::output(Some(path), source),
        other => CommandError::output(Some(path), other),
    })
}

/// Refuses to write binary bytes to a terminal.
fn refuse_binary_on_terminal(binary: bool) -> Result<(), CommandError> {
    if binary && io::stdout().is_terminal() {
        return Err(CommandError::Usage(
            "standard output is a terminal, and the output is binary: redirect it to a file \
             (`> run.tprof`) or a pipe, or name a file with -o"
                .to_owned(),
        ));
    }
    Ok(())
}

/// The error of writing to standard output.
fn stdout_error(e: io::Error) -> CommandError {
    if e.kind() == io::ErrorKind::BrokenPipe {
        CommandError::BrokenPipe
    } else {
        CommandError::output(None, e)
    }
}
