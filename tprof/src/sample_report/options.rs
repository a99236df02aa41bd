//! How a sample report is laid out: Julia's `Profile.print` keywords, as [`PrintOptions`], and
//! the names each choice goes by on the command line.

use std::fmt;
use std::str::FromStr;

pub use crate::choice::OptionError;
use crate::choice::choose;
use crate::samples::SamplerKind;

/// Which tables a report prints (Julia's `format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReportFormat {
    /// The tree of stacks, indented (Julia's `:tree`, the default).
    #[default]
    Tree,
    /// One line per frame, wherever it was on the stack (Julia's `:flat`).
    Flat,
    /// The tree, then the flat list: the `pretty` export's.
    Both,
}

/// The order of the tree's siblings and of the flat list's lines (Julia's `sortedby`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SortedBy {
    /// By file, then function, then line; frames of no known place last (Julia's
    /// `:filefuncline`, the default).
    #[default]
    FileFuncLine,
    /// By function name, then file and line.
    Name,
    /// By count, ascending: the heaviest last, nearest the prompt, as Julia prints them.
    Count,
    /// By overhead (samples in the frame itself), ascending, as Julia.
    Overhead,
}

/// How samples are split into reports of their own (Julia's `groupby`; a process plays the
/// part of Julia's task).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GroupBy {
    /// One report of every sample (the default).
    #[default]
    None,
    /// One per process (and one for CPU time outside any process).
    Process,
    /// One per thread (CPU samples; wall samples have none).
    Thread,
    /// One per process, and within it one per thread.
    ProcessThread,
    /// One per thread, and within it one per process.
    ThreadProcess,
}

/// What the tree does with recursion (Julia's `recur`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Recur {
    /// The tree as the stacks are (the default).
    #[default]
    Off,
    /// A frame already on the stack above is folded into that line: the tree shows what the
    /// recursion would cost as a loop.
    Flat,
}

/// Which native frames (the untraced code CPU samples ran below their traced frames) a
/// report shows: Julia's `C` keyword, with a middle ground that is the default.
///
/// `From<bool>` keeps [`PrintOptions::native`]'s older spelling: `true` is [`Native::All`],
/// `false` [`Native::None`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Native {
    /// Every native frame (Julia's `C = true`).
    All,
    /// The user's code (the default): the frames of the *plumbing* — the runtime, tokio, the
    /// standard library, the profiler, and system libraries (see the `view` module) — are
    /// folded, each sample counted at the nearest frame above them that is shown, and the
    /// report says how many were.
    #[default]
    User,
    /// None (Julia's `C = false`): a sample counts at its innermost traced frame.
    None,
}

impl From<bool> for Native {
    fn from(all: bool) -> Native {
        if all { Native::All } else { Native::None }
    }
}

/// How [`print`](super::print) lays a sample report out: Julia's `Profile.print` keywords.
///
/// Counts are weights summed: timer periods for CPU samples, process-ticks for wall samples
/// (see [`crate::samples::SampleRecord::weight`]).
///
/// ```
/// use tprof::sample_report::{GroupBy, PrintOptions, ReportFormat};
///
/// let options = PrintOptions::new().format(ReportFormat::Flat).groupby(GroupBy::Process);
/// assert_eq!(options.mincount, 0.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PrintOptions {
    /// Tree, flat, or both (default: [`ReportFormat::Tree`]).
    pub format: ReportFormat,
    /// Which native frames show (Julia's `C`; default [`Native::User`]: the user's code, the
    /// plumbing of the runtime, tokio and std folded).
    pub native: Native,
    /// Frames of one function, file and line that differ only by their instruction address
    /// are one line (Julia's `combine`; default true). Off, each address is its own line,
    /// shown before the function's name.
    pub combine: bool,
    /// Lines deeper than this are left out of the tree; the outermost are at depth 0, so 0
    /// prints them alone (Julia's `maxdepth`; default: no limit).
    pub maxdepth: usize,
    /// Lines with a smaller count are left out, with what is below them (Julia's `mincount`;
    /// default 0).
    pub mincount: f64,
    /// A line of the tree with count `n` is left out (with what is below it) when
    /// `n <= noisefloor * √N`, `N` being the count of the line above it (Julia's `noisefloor`;
    /// 2.0 is a fair value to try; default 0: nothing left out). Lines at depth 0 are kept.
    pub noisefloor: f64,
    /// The order of siblings and of the flat list (default [`SortedBy::FileFuncLine`]).
    pub sortedby: SortedBy,
    /// How samples are split into reports (default [`GroupBy::None`]).
    pub groupby: GroupBy,
    /// Recursion in the tree (default [`Recur::Off`]); the flat list counts a frame once per
    /// sample however often it recurs.
    pub recur: Recur,
    /// Lines are cut to this many characters, the indentation shortened to `+n` past half of
    /// it (Julia's display width); 0 (the default) cuts nothing.
    pub width: usize,
    /// Only the samples of this sampler (default: each sampler the profile has, in a report of
    /// its own).
    pub sampler: Option<SamplerKind>,
    /// Rows of the wall summary's per-process table, at most (default 25): past it, unnamed
    /// processes are counted together by initial call, and the lightest rows in one line.
    pub rows: usize,
    /// Only the samples with a frame whose function or file this regular expression matches
    /// (pprof's `-focus`; default: every sample). Set it with [`focus`](Self::focus), which
    /// checks it.
    pub focus: Option<String>,
    /// Frames whose function or file this regular expression matches are left out of the
    /// stacks, their samples counted at the frame above (pprof's `-hide`; default: none). Set
    /// it with [`hide`](Self::hide), which checks it.
    pub hide: Option<String>,
    /// "Frames of my crates only": when not empty, only the frames (traced and native) of
    /// these crates show, the others folded as plumbing is (default: empty, every crate).
    /// A frame's crate is the first part of its path (`kvpool` of `kvpool::cache::get`), or
    /// of its file's crate when its name has no path (`@tokio-1.48.0/src/...`); a frame of
    /// no known crate is folded. Set it with [`crates`](Self::crates).
    pub crates: Vec<String>,
}

/// A `focus` or `hide` pattern that is not a regular expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    /// `focus` or `hide`.
    pub option: &'static str,
    /// The pattern given.
    pub pattern: String,
    /// Why the regex crate refused it.
    pub reason: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {} pattern `{}` is not a regular expression: {}",
            self.option, self.pattern, self.reason
        )
    }
}

impl std::error::Error for FilterError {}

/// `pattern` compiled, for `option`.
pub(crate) fn filter_regex(
    option: &'static str,
    pattern: &str,
) -> Result<regex::Regex, FilterError> {
    regex::Regex::new(pattern).map_err(|e| FilterError {
        option,
        pattern: pattern.to_owned(),
        reason: e.to_string(),
    })
}

impl Default for PrintOptions {
    fn default() -> Self {
        PrintOptions {
            format: ReportFormat::Tree,
            native: Native::User,
            combine: true,
            maxdepth: usize::MAX,
            mincount: 0.0,
            noisefloor: 0.0,
            sortedby: SortedBy::FileFuncLine,
            groupby: GroupBy::None,
            recur: Recur::Off,
            width: 0,
            sampler: None,
            rows: 25,
            focus: None,
            hide: None,
            crates: Vec::new(),
        }
    }
}

impl PrintOptions {
    /// The defaults, as Julia's: the tree, every sample together; native frames of the user's
    /// code shown, the plumbing's folded ([`Native::User`]).
    pub fn new() -> PrintOptions {
        PrintOptions::default()
    }

    /// Sets [`format`](Self::format).
    pub fn format(mut self, format: ReportFormat) -> PrintOptions {
        self.format = format;
        self
    }

    /// Sets [`native`](Self::native): a [`Native`], or `true` for every frame
    /// ([`Native::All`]) and `false` for none ([`Native::None`]).
    pub fn native(mut self, native: impl Into<Native>) -> PrintOptions {
        self.native = native.into();
        self
    }

    /// Sets [`crates`](Self::crates): only the frames of these crates show (none given:
    /// every crate's).
    pub fn crates<I, S>(mut self, crates: I) -> PrintOptions
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.crates = crates
            .into_iter()
            .map(|c| c.into().replace('-', "_"))
            .collect();
        self
    }

    /// Sets [`combine`](Self::combine).
    pub fn combine(mut self, combine: bool) -> PrintOptions {
        self.combine = combine;
        self
    }

    /// Sets [`rows`](Self::rows).
    pub fn rows(mut self, rows: usize) -> PrintOptions {
        self.rows = rows;
        self
    }

    /// Sets [`maxdepth`](Self::maxdepth).
    pub fn maxdepth(mut self, maxdepth: usize) -> PrintOptions {
        self.maxdepth = maxdepth;
        self
    }

    /// Sets [`mincount`](Self::mincount).
    pub fn mincount(mut self, mincount: f64) -> PrintOptions {
        self.mincount = mincount;
        self
    }

    /// Sets [`noisefloor`](Self::noisefloor).
    pub fn noisefloor(mut self, noisefloor: f64) -> PrintOptions {
        self.noisefloor = noisefloor;
        self
    }

    /// Sets [`sortedby`](Self::sortedby).
    pub fn sortedby(mut self, sortedby: SortedBy) -> PrintOptions {
        self.sortedby = sortedby;
        self
    }

    /// Sets [`groupby`](Self::groupby).
    pub fn groupby(mut self, groupby: GroupBy) -> PrintOptions {
        self.groupby = groupby;
        self
    }

    /// Sets [`recur`](Self::recur).
    pub fn recur(mut self, recur: Recur) -> PrintOptions {
        self.recur = recur;
        self
    }

    /// Sets [`width`](Self::width).
    pub fn width(mut self, width: usize) -> PrintOptions {
        self.width = width;
        self
    }

    /// Sets [`focus`](Self::focus): only the samples with a frame `pattern` matches.
    ///
    /// # Errors
    ///
    /// [`FilterError`] naming `pattern` when it is not a regular expression.
    pub fn focus(mut self, pattern: &str) -> Result<PrintOptions, FilterError> {
        filter_regex("focus", pattern)?;
        self.focus = Some(pattern.to_owned());
        Ok(self)
    }

    /// Sets [`hide`](Self::hide): frames `pattern` matches are left out of the stacks.
    ///
    /// # Errors
    ///
    /// [`FilterError`] naming `pattern` when it is not a regular expression.
    pub fn hide(mut self, pattern: &str) -> Result<PrintOptions, FilterError> {
        filter_regex("hide", pattern)?;
        self.hide = Some(pattern.to_owned());
        Ok(self)
    }

    /// The focus and hide patterns, compiled.
    pub(crate) fn filters(&self) -> Result<Filters, FilterError> {
        let compile = |option, pattern: &Option<String>| {
            pattern
                .as_deref()
                .map(|p| filter_regex(option, p))
                .transpose()
        };
        Ok(Filters {
            focus: compile("focus", &self.focus)?,
            hide: compile("hide", &self.hide)?,
        })
    }

    /// Sets [`sampler`](Self::sampler).
    pub fn sampler(mut self, sampler: Option<SamplerKind>) -> PrintOptions {
        self.sampler = sampler;
        self
    }
}

impl FromStr for ReportFormat {
    type Err = OptionError;
    /// `tree`, `flat` or `both`.
    fn from_str(s: &str) -> Result<ReportFormat, OptionError> {
        choose(
            s,
            "format",
            "tree, flat or both",
            &[
                ("tree", ReportFormat::Tree),
                ("flat", ReportFormat::Flat),
                ("both", ReportFormat::Both),
            ],
        )
    }
}

impl FromStr for SortedBy {
    type Err = OptionError;
    /// `filefuncline` (or `file`), `name`, `count` or `overhead`.
    fn from_str(s: &str) -> Result<SortedBy, OptionError> {
        choose(
            s,
            "sortedby",
            "filefuncline, name, count or overhead",
            &[
                ("filefuncline", SortedBy::FileFuncLine),
                ("file", SortedBy::FileFuncLine),
                ("name", SortedBy::Name),
                ("count", SortedBy::Count),
                ("overhead", SortedBy::Overhead),
            ],
        )
    }
}

impl FromStr for GroupBy {
    type Err = OptionError;
    /// `none`, `process`, `thread`, `process,thread` or `thread,process` (spaces and
    /// brackets allowed: `[process, thread]`).
    fn from_str(s: &str) -> Result<GroupBy, OptionError> {
        let words: String = s
            .chars()
            .filter(|c| !c.is_whitespace() && !matches!(c, '[' | ']' | ':'))
            .collect();
        choose(
            &words,
            "groupby",
            "none, process, thread, process,thread or thread,process",
            &[
                ("none", GroupBy::None),
                ("process", GroupBy::Process),
                ("thread", GroupBy::Thread),
                ("process,thread", GroupBy::ProcessThread),
                ("thread,process", GroupBy::ThreadProcess),
            ],
        )
        .map_err(|e| OptionError {
            input: s.to_owned(),
            ..e
        })
    }
}

impl FromStr for Native {
    type Err = OptionError;
    /// `all`, `user` or `none`.
    fn from_str(s: &str) -> Result<Native, OptionError> {
        choose(
            s,
            "native",
            "all, user or none",
            &[
                ("all", Native::All),
                ("user", Native::User),
                ("none", Native::None),
            ],
        )
    }
}

impl FromStr for Recur {
    type Err = OptionError;
    /// `off` or `flat`.
    fn from_str(s: &str) -> Result<Recur, OptionError> {
        choose(
            s,
            "recur",
            "off or flat",
            &[("off", Recur::Off), ("flat", Recur::Flat)],
        )
    }
}

/// [`PrintOptions`]'s focus and hide patterns, compiled.
#[derive(Default)]
pub(crate) struct Filters {
    pub(crate) focus: Option<regex::Regex>,
    pub(crate) hide: Option<regex::Regex>,
}
