//! Reading the source files a listing shows, each once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::SourceState;

/// The source files read so far: their lines, or why they could not be read.
pub(super) struct Sources {
    root: Option<PathBuf>,
    files: HashMap<String, Result<Vec<String>, String>>,
}

impl Sources {
    /// Reads relative paths from `root` (default: the current folder).
    pub(super) fn new(root: Option<PathBuf>) -> Sources {
        Sources {
            root,
            files: HashMap::new(),
        }
    }

    /// Whether `file` can be read (it is read the first time).
    pub(super) fn state(&mut self, file: &str) -> SourceState {
        let root = self.root.as_deref();
        match self
            .files
            .entry(file.to_owned())
            .or_insert_with(|| read(root, file))
        {
            Ok(_) => SourceState::Read,
            Err(reason) => SourceState::Missing(reason.clone()),
        }
    }

    /// The lines of `file`, once [`state`](Self::state) read it.
    pub(super) fn lines(&self, file: &str) -> Option<&[String]> {
        self.files.get(file)?.as_ref().ok().map(Vec::as_slice)
    }
}

/// The lines of `file` (relative to `root`, when it is relative and `root` is given), or why
/// it could not be read.
fn read(root: Option<&Path>, file: &str) -> Result<Vec<String>, String> {
    let path = match root {
        Some(root) if Path::new(file).is_relative() => root.join(file),
        _ => PathBuf::from(file),
    };
    let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(text.lines().map(str::to_owned).collect())
}
