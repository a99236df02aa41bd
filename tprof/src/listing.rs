//! Annotated source listings, as `go tool pprof -list` prints them and as Julia's per-line
//! `.mem` files annotate a file: for each function whose name a regular expression matches,
//! its lines in its source file, each with its figures.
//!
//! # What is counted
//!
//! A listing reads [`LineFigures`]: stacks of places in the code ([`LineFrame`]: a function,
//! its file, a line in it), each with a value per named [`Column`] (the CPU time of a sample
//! profile's stacks; the bytes and objects of an allocation profile's). Per line of a listed
//! function, as pprof:
//!
//! - **flat**: the values of the stacks whose innermost frame is on that line;
//! - **cum**: the values of the stacks that pass through that line, each stack counted once
//!   per line however often it recurs there.
//!
//! A function's header gives its totals: flat, and cum counting each stack once for the
//! function (pprof adds its lines' cum up, which counts a recursive stack once per line).
//!
//! # Where the lines come from
//!
//! A native frame of a sample carries the line of its address (DWARF line tables, after
//! symbolization). A traced frame carries the line its sample was at in that function when
//! the sampler found the function's own native frame (CPU samples with native stacks, see
//! [`SampleFrame::line`](crate::samples::SampleFrame::line)); otherwise (wall samples, a
//! frame not found) only the line the function is defined on is known: its figures are
//! shown on that line, and the function's header says how much of it came so.
//!
//! # Layout
//!
//! ```text
//! Total: 3.20s
//! ROUTINE ======================== app::work in src/app.rs
//!      2.90s      3.10s (flat, cum) 96.88% of Total
//!          .          .      7:fn work() -> u64 {
//!      2.90s      3.10s      8:    spin(40_000)
//! ```
//!
//! Values are written as pprof writes them (`2.90s`, `10ms`, `1.50MB`, `3`), a zero as `.`.
//! The lines shown run from the function's definition line (else five lines before its first
//! line with figures) to five lines after its last. A native frame of a traced function, or
//! of a closure in its body (`module::name::{{closure}}`), in its file, lists with it: samples
//! taken as it is entered or left have one. A file that cannot be read is said so
//! once, and its functions' figures are then given by line number. Several columns are shown
//! side by side, a flat and a cum for each.
//!
//! Linear in the stacks' frames (each stack once, summed by stack first) and in the source
//! lines shown.
//!
//! # Examples
//!
//! ```
//! use tprof::listing::{Column, LineFigures, LineFrame, ListOptions};
//!
//! let mut figures = LineFigures::new(vec![Column::nanoseconds("cpu")]);
//! let frame = |line| LineFrame {
//!     function: "app::work".into(),
//!     file: Some("no/such/dir/app.rs".into()),
//!     line: Some(line),
//!     start_line: Some(7),
//! };
//! let (outer, inner) = (figures.frame(frame(8)), figures.frame(frame(9)));
//! figures.add(&[outer], &[2e9]);
//! figures.add(&[outer, inner], &[1e9]);
//! let listing = figures.listing("work", &ListOptions::new()).unwrap();
//! let text = listing.to_string();
//! assert!(text.starts_with("Total: 3s\nROUTINE ======================== app::work in no/such/dir/app.rs\n"));
//! assert!(text.contains("        2s         3s      8\n"));
//! assert!(text.contains("        1s         1s      9\n"));
//! ```

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use crate::functions::index32;
use crate::samples::SamplerKind;

mod routines;
mod samples;
mod source;
mod text;

pub(crate) use samples::{TracedByName, line_frame};
pub use text::scaled_label;

/// What a column's values measure, for writing them as pprof does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Unit {
    /// Nanoseconds (`10ms`, `2.90s`).
    Nanoseconds,
    /// Bytes (`512B`, `1.50MB`).
    Bytes,
    /// A plain count (`3`, `2.50`).
    Count,
}

/// A named column of values: `cpu` in nanoseconds; `alloc_space` in bytes, ...
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// What its values measure.
    pub unit: Unit,
}

impl Column {
    /// A column of nanoseconds.
    pub fn nanoseconds(name: impl Into<String>) -> Column {
        Column {
            name: name.into(),
            unit: Unit::Nanoseconds,
        }
    }

    /// A column of bytes.
    pub fn bytes(name: impl Into<String>) -> Column {
        Column {
            name: name.into(),
            unit: Unit::Bytes,
        }
    }

    /// A column of counts.
    pub fn count(name: impl Into<String>) -> Column {
        Column {
            name: name.into(),
            unit: Unit::Count,
        }
    }
}

/// A place in the code a stack names: a function, and where in its file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LineFrame {
    /// The function's name (the regular expression of a listing is matched against it).
    pub function: String,
    /// Its source file, when known.
    pub file: Option<String>,
    /// The line in it, when known.
    pub line: Option<u32>,
    /// The line the function is defined on, when known: where the listing starts, and where
    /// the figures of a frame without a line of its own are shown.
    pub start_line: Option<u32>,
}

/// Stacks of [`LineFrame`]s, each with a value per [`Column`]: what a listing is made from.
#[derive(Clone, Debug, Default)]
pub struct LineFigures {
    columns: Vec<Column>,
    frames: Vec<LineFrame>,
    frame_ids: HashMap<LineFrame, u32>,
    /// Each stack's frames (outermost first) and values, in the order added.
    stacks: Vec<(Vec<u32>, Vec<f64>)>,
}

impl LineFigures {
    /// No stacks yet, with values in `columns`.
    pub fn new(columns: Vec<Column>) -> LineFigures {
        LineFigures {
            columns,
            ..LineFigures::default()
        }
    }

    /// The columns.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The id of `frame`, for [`add`](Self::add): the same frame gets the same id.
    pub fn frame(&mut self, frame: LineFrame) -> u32 {
        if let Some(&id) = self.frame_ids.get(&frame) {
            return id;
        }
        let id = index32(self.frames.len());
        self.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        id
    }

    /// Adds a stack: its frames, outermost first (ids from [`frame`](Self::frame); an unknown
    /// id is left out), and a value per column (a missing one is 0, one too many is left
    /// out). Stacks may repeat: their values add up.
    pub fn add(&mut self, stack: &[u32], values: &[f64]) {
        let frames = stack
            .iter()
            .copied()
            .filter(|&f| (f as usize) < self.frames.len())
            .collect();
        let mut row = vec![0.0; self.columns.len()];
        for (slot, v) in row.iter_mut().zip(values) {
            *slot = *v;
        }
        self.stacks.push((frames, row));
    }

    /// The listing of the functions whose name `pattern` (a regular expression, matched
    /// anywhere in the name, as pprof's `-list`) matches.
    ///
    /// # Errors
    ///
    /// [`ListingError::BadPattern`] for a pattern that is not a regular expression,
    /// [`ListingError::NoMatch`] when no function with figures matches (with those whose
    /// names come near).
    pub fn listing(&self, pattern: &str, options: &ListOptions) -> Result<Listing, ListingError> {
        let regex = regex::Regex::new(pattern).map_err(|e| ListingError::BadPattern {
            pattern: pattern.to_owned(),
            reason: e.to_string(),
        })?;
        let mut by_name: HashMap<&str, bool> = HashMap::new();
        let matched: Vec<bool> = self
            .frames
            .iter()
            .map(|f| {
                *by_name
                    .entry(&f.function)
                    .or_insert_with(|| regex.is_match(&f.function))
            })
            .collect();
        if !matched.iter().any(|m| *m) {
            return Err(ListingError::NoMatch {
                pattern: pattern.to_owned(),
                near: self.near(pattern),
            });
        }
        Ok(self.listing_of(&matched, options))
    }

    /// The listing of every function (the html viewer's, one per function).
    pub fn listing_all(&self, options: &ListOptions) -> Listing {
        self.listing_of(&vec![true; self.frames.len()], options)
    }

    /// The names of functions that come near `pattern`: those it matches ignoring case, else
    /// those that contain one of its words (three letters or more), ignoring case; five at
    /// most, in name order.
    fn near(&self, pattern: &str) -> Vec<String> {
        let mut names: Vec<&str> = self.frames.iter().map(|f| f.function.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let caseless = regex::Regex::new(&format!("(?i){pattern}")).ok();
        let mut near: Vec<String> = names
            .iter()
            .filter(|n| caseless.as_ref().is_some_and(|r| r.is_match(n)))
            .map(|n| (*n).to_owned())
            .collect();
        if near.is_empty() {
            let words: Vec<String> = pattern
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| w.chars().count() >= 3)
                .map(str::to_lowercase)
                .collect();
            near = names
                .iter()
                .filter(|n| {
                    let n = n.to_lowercase();
                    words.iter().any(|w| n.contains(w.as_str()))
                })
                .map(|n| (*n).to_owned())
                .collect();
        }
        near.truncate(5);
        near
    }
}

/// How a listing is made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListOptions {
    /// The folder a relative source path is read from (default: the current one).
    pub source_root: Option<PathBuf>,
    /// For a profile's listing: the sampler whose samples are listed (default: CPU when the
    /// profile has CPU samples, else wall).
    pub sampler: Option<SamplerKind>,
}

impl ListOptions {
    /// The defaults.
    pub fn new() -> ListOptions {
        ListOptions::default()
    }

    /// Reads relative source paths from `root`.
    pub fn source_root(mut self, root: impl Into<PathBuf>) -> ListOptions {
        self.source_root = Some(root.into());
        self
    }

    /// Lists the samples of `sampler`.
    pub fn sampler(mut self, sampler: SamplerKind) -> ListOptions {
        self.sampler = Some(sampler);
        self
    }
}

/// An annotated listing: every function a pattern matched, each with its lines.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Listing {
    /// The columns of the values.
    pub columns: Vec<Column>,
    /// The values of every stack, per column (pprof's `Total`).
    pub totals: Vec<f64>,
    /// The functions, by name then file.
    pub routines: Vec<Routine>,
}

/// Flat and cum values, per column.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figures {
    /// Where the stacks ended.
    pub flat: Vec<f64>,
    /// Where the stacks passed.
    pub cum: Vec<f64>,
}

/// One function (in one file) of a listing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Routine {
    /// Its name.
    pub function: String,
    /// Its source file, when known.
    pub file: Option<String>,
    /// The values of the stacks that end in it, per column.
    pub flat: Vec<f64>,
    /// The values of the stacks that pass through it (each once), per column.
    pub cum: Vec<f64>,
    /// Whether its source could be read.
    pub source: SourceState,
    /// Its lines: those around its figures with their text when the source was read, else
    /// those with figures.
    pub lines: Vec<ListedLine>,
    /// The cum values (per column) of the frames that had no line of their own, shown on its
    /// definition line (the first element).
    pub at_definition: Option<(u32, Vec<f64>)>,
    /// The figures of the frames of which neither a line nor a definition line is known.
    pub no_line: Option<Figures>,
}

/// Whether a function's source could be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "reason")]
pub enum SourceState {
    /// It was.
    Read,
    /// It was not: why (the first function of that file in the listing says so).
    Missing(String),
    /// The frames name no file.
    NoFile,
}

/// One line of a listed function.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ListedLine {
    /// Its number, from 1.
    pub line: u32,
    /// Its text, when the source was read.
    pub text: Option<String>,
    /// The values of the stacks that end on it, per column.
    pub flat: Vec<f64>,
    /// The values of the stacks that pass through it, per column.
    pub cum: Vec<f64>,
}

/// Why a listing could not be made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListingError {
    /// The pattern is not a regular expression.
    BadPattern {
        /// The pattern.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No function with figures matches the pattern.
    NoMatch {
        /// The pattern.
        pattern: String,
        /// Functions whose names come near it.
        near: Vec<String>,
    },
    /// The profile has no samples to list.
    NoSamples,
}

impl fmt::Display for ListingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListingError::BadPattern { pattern, reason } => {
                write!(f, "`{pattern}` is not a regular expression: {reason}")
            }
            ListingError::NoMatch { pattern, near } if near.is_empty() => write!(
                f,
                "no function with samples matches `{pattern}` (a regular expression, matched \
                 anywhere in names such as `module::function`)"
            ),
            ListingError::NoMatch { pattern, near } => write!(
                f,
                "no function with samples matches `{pattern}`; near: {}",
                near.join(", ")
            ),
            ListingError::NoSamples => f.write_str(
                "the profile has no samples to list: listings are of sample profiles (tprof run \
                 --mode sample)",
            ),
        }
    }
}

impl std::error::Error for ListingError {}
