//! Whose code a frame is, and so whether a report shows it ([`Native`], [`crates`]); which
//! samples [`focus`](super::PrintOptions::focus) keeps; and both, as a [`FrameView`], for
//! the exports that show what the report shows.
//!
//! A frame's *crate* is the first part of its path: a traced function's module
//! (`kvpool::cache` → `kvpool`), a native frame's demangled name (`tokio::runtime::park`,
//! `<alloc::boxed::Box<F> as core::ops::FnOnce>::call_once` → `alloc`, the type's crate
//! for a trait method). A name without a path (DWARF of `debug = "line-tables-only"` where
//! the symbol table had none) takes its file's crate when the file says it: a file of the
//! standard library (`/rustc/COMMIT/library/core/...`) or of a registry crate
//! (`.../registry/src/INDEX/tokio-1.48.0/...`).
//!
//! The *plumbing* [`Native::User`] folds is the frames of [`PLUMBING`]'s crates, and native
//! frames named without a path and without a file of Rust: system libraries' (`start_thread`,
//! `clone3`, `__libc_start_main`, glibc's `memcpy` in
//! `./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S`). A frame of which
//! nothing is known (no name, no file) stays: it may be the user's code in a binary without
//! symbols.
//!
//! [`crates`]: super::PrintOptions::crates

use std::borrow::Cow;
use std::collections::HashMap;

use super::frames::Keys;
use super::options::{FilterError, Native, PrintOptions};
use crate::functions::Function;
use crate::profile::Profile;
use crate::samples::{SampleFrame, SampleRecord, SampleSet, SampleStack};

/// The crates whose frames are plumbing: the standard library's, the async runtime's, the
/// actor runtime's and the profiler's, and the crates they run on.
pub const PLUMBING: &[&str] = &[
    "std",
    "core",
    "alloc",
    "tokio",
    "mio",
    "runtime",
    "runtime_macros",
    "tprof",
    "futures",
    "futures_core",
    "futures_util",
    "futures_executor",
    "parking_lot",
    "parking_lot_core",
    "crossbeam_channel",
    "crossbeam_deque",
    "crossbeam_epoch",
    "crossbeam_utils",
];

/// What a report does with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// It shows.
    Shown,
    /// It is left out silently (native frames under [`Native::None`]).
    Hidden,
    /// It is folded, and the report counts it: plumbing under [`Native::User`], a frame of
    /// another crate than [`crates`](super::PrintOptions::crates)'.
    Folded,
}

/// What `options` do with `frame` (`functions` being the profile's function table), before
/// [`hide`](super::PrintOptions::hide), which the report applies to what shows.
pub(crate) fn fate(frame: &SampleFrame, functions: &[Function], options: &PrintOptions) -> Fate {
    let native = frame.function.is_none();
    if native && options.native == Native::None {
        return Fate::Hidden;
    }
    if !options.crates.is_empty() {
        let mine = crate_of(frame, functions)
            .is_some_and(|c| options.crates.iter().any(|wanted| *wanted == c));
        return if mine { Fate::Shown } else { Fate::Folded };
    }
    if native && options.native == Native::User && is_plumbing(frame, functions) {
        return Fate::Folded;
    }
    Fate::Shown
}

/// Whether `frame` is plumbing (see the module docs).
pub(crate) fn is_plumbing(frame: &SampleFrame, functions: &[Function]) -> bool {
    match crate_of(frame, functions) {
        Some(name) => PLUMBING.contains(&name.as_ref()),
        None => {
            frame.function.is_none()
                && !frame.name.is_empty()
                && frame.file.as_deref().is_none_or(|f| !f.ends_with(".rs"))
        }
    }
}

/// The crate of `frame`, with `-` as `_`, when its name or file says it.
pub(crate) fn crate_of<'a>(
    frame: &'a SampleFrame,
    functions: &'a [Function],
) -> Option<Cow<'a, str>> {
    if let Some(f) = frame.function {
        let module = &functions.get(f as usize)?.module;
        let head = module.split("::").next().unwrap_or(module);
        return (!head.is_empty()).then_some(Cow::Borrowed(head));
    }
    if let Some(head) = crate_of_name(&frame.name) {
        return Some(Cow::Borrowed(head));
    }
    crate_of_file(frame.file.as_deref()?)
}

/// The first part of a demangled name's path: `tokio` of `tokio::runtime::park`, `alloc` of
/// `<alloc::boxed::Box<F> as core::ops::FnOnce>::call_once`; `None` for a name without one.
fn crate_of_name(name: &str) -> Option<&str> {
    let mut s = name;
    loop {
        let t = s.trim_start_matches(['<', '&', '(', '[', '*', ' ']);
        let t = ["mut ", "const ", "dyn ", "impl "]
            .iter()
            .find_map(|p| t.strip_prefix(p))
            .unwrap_or(t);
        if t.len() == s.len() {
            break;
        }
        s = t;
    }
    let (head, _) = s.split_once("::")?;
    let word = !head.is_empty() && head.chars().all(|c| c.is_alphanumeric() || c == '_');
    word.then_some(head)
}

/// The crate a file belongs to when its path says it: the standard library's
/// (`/rustc/COMMIT/library/core/src/...` → `core`), a registry crate's
/// (`.../registry/src/INDEX/tokio-1.48.0/src/...` → `tokio`).
fn crate_of_file(path: &str) -> Option<Cow<'_, str>> {
    let short = super::frames::short_path(path);
    let Cow::Owned(short) = short else {
        return None;
    };
    let package = short.strip_prefix('@')?.split('/').next()?;
    // `tokio-1.48.0` → `tokio`, `futures-util-0.3.31` → `futures_util`.
    let name = match package.rfind('-') {
        Some(at) if package[at + 1..].starts_with(|c: char| c.is_ascii_digit()) => &package[..at],
        _ => package,
    };
    (!name.is_empty()).then(|| Cow::Owned(name.replace('-', "_")))
}

/// What `options` show of a profile's samples, for the exports that honour them
/// ([`apply`](Self::apply)): per frame whether it shows, per stack whether focus keeps its
/// samples.
#[derive(Debug)]
pub(crate) struct FrameView {
    /// Per frame of [`SampleSet::frames`], whether it shows.
    pub(crate) shown: Vec<bool>,
    /// Per stack of [`SampleSet::stacks`], whether [`focus`](PrintOptions::focus) keeps its
    /// samples (`None`: every sample kept).
    pub(crate) wanted: Option<Vec<bool>>,
}

impl FrameView {
    /// The view `options` give of `profile`'s samples.
    ///
    /// # Errors
    ///
    /// A [`FilterError`] when [`focus`](PrintOptions::focus) or [`hide`](PrintOptions::hide)
    /// is not a regular expression.
    pub(crate) fn of(profile: &Profile, options: &PrintOptions) -> Result<FrameView, FilterError> {
        let filters = options.filters()?;
        let set = &profile.samples;
        let keys = Keys::new(set, &profile.function_table, options);
        let shown = (0..set.frames.len())
            .map(|f| keys.of(crate::functions::index32(f)).is_some())
            .collect();
        let wanted = filters
            .focus
            .as_ref()
            .map(|focus| focused(set, &profile.function_table, options, focus));
        Ok(FrameView { shown, wanted })
    }

    /// Whether focus keeps the samples of `stack`.
    pub(crate) fn keeps(&self, stack: Option<u32>) -> bool {
        match (&self.wanted, stack) {
            (None, _) => true,
            (Some(wanted), Some(s)) => wanted.get(s as usize) == Some(&true),
            (Some(_), None) => false,
        }
    }

    /// Whether `frame` shows.
    pub(crate) fn shows(&self, frame: u32) -> bool {
        self.shown.get(frame as usize).copied().unwrap_or(true)
    }

    /// `profile` as this view shows it: the samples focus keeps, each on its stack without
    /// the frames that do not show (a sample counts at the nearest frame above them that
    /// does; a sample none of whose frames shows has an empty stack, under its process
    /// alone); everything else as it is. This is the one filtering every export of samples
    /// that honours [`PrintOptions`] goes through
    /// ([`export::write_shown`](crate::export::write_shown)). Linear in the stacks and
    /// samples.
    pub(crate) fn apply(&self, profile: &Profile) -> Profile {
        Profile {
            trace_type: profile.trace_type,
            functions: profile.functions.clone(),
            percentiles: profile.percentiles.clone(),
            processes: profile.processes.clone(),
            function_table: profile.function_table.clone(),
            call_tree: profile.call_tree.clone(),
            event_logs: profile.event_logs.clone(),
            meta: profile.meta.clone(),
            outside_in_tables: profile.outside_in_tables,
            samples: self.apply_to(&profile.samples),
        }
    }

    /// `set` as [`apply`](Self::apply) shows it.
    fn apply_to(&self, set: &SampleSet) -> SampleSet {
        // Per stack of `set`, the stack it becomes (`None`: empty); a parent comes before its
        // children, so each is known when its children come.
        let mut to: Vec<Option<u32>> = Vec::with_capacity(set.stacks.len());
        let mut made: HashMap<(Option<u32>, u32), u32> = HashMap::new();
        let mut stacks: Vec<SampleStack> = Vec::new();
        for (i, s) in set.stacks.iter().enumerate() {
            let parent = s
                .parent
                .filter(|&p| (p as usize) < i)
                .and_then(|p| to[p as usize]);
            to.push(if self.shows(s.frame) {
                Some(*made.entry((parent, s.frame)).or_insert_with(|| {
                    stacks.push(SampleStack {
                        parent,
                        frame: s.frame,
                    });
                    crate::functions::index32(stacks.len() - 1)
                }))
            } else {
                parent
            });
        }
        let samples = set
            .samples
            .iter()
            .filter(|s| self.keeps(s.stack))
            .map(|s| SampleRecord {
                stack: s
                    .stack
                    .and_then(|st| to.get(st as usize).copied().flatten()),
                ..s.clone()
            })
            .collect();
        SampleSet {
            sources: set.sources.clone(),
            frames: set.frames.clone(),
            stacks,
            samples,
            threads: set.threads.clone(),
            mappings: set.mappings.clone(),
        }
    }
}

/// Per stack, whether a frame on it is one `focus` matches (pprof's `-focus`). Linear in the
/// stacks (a stack's parent comes before it).
pub(super) fn focused(
    set: &SampleSet,
    functions: &[crate::functions::Function],
    options: &PrintOptions,
    focus: &regex::Regex,
) -> Vec<bool> {
    let all = PrintOptions {
        native: Native::All,
        hide: None,
        crates: Vec::new(),
        ..options.clone()
    };
    let keys = Keys::new(set, functions, &all);
    let mut wanted: Vec<bool> = Vec::with_capacity(set.stacks.len());
    for s in &set.stacks {
        let above = s
            .parent
            .and_then(|p| wanted.get(p as usize).copied())
            .unwrap_or(false);
        let here = keys.of(s.frame).is_some_and(|k| keys.get(k).matches(focus));
        wanted.push(above || here);
    }
    wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(name: &str, file: Option<&str>) -> SampleFrame {
        SampleFrame {
            function: None,
            name: name.into(),
            file: file.map(str::to_owned),
            line: None,
            address: 1,
        }
    }

    #[test]
    fn a_frame_s_crate_comes_from_its_path_else_its_file() {
        let of = |name, file| crate_of(&native(name, file), &[]).map(Cow::into_owned);
        assert_eq!(
            of("tokio::runtime::park::Inner::park", None).as_deref(),
            Some("tokio")
        );
        assert_eq!(
            of(
                "<alloc::boxed::Box<F,A> as core::ops::function::FnOnce<Args>>::call_once",
                None
            )
            .as_deref(),
            Some("alloc")
        );
        assert_eq!(
            of("<&mut app::Cache as runtime::Server>::call", None).as_deref(),
            Some("app")
        );
        assert_eq!(of("app::main::{{closure}}", None).as_deref(), Some("app"));
        assert_eq!(
            of(
                "poll<F>",
                Some("/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/futures-util-0.3.31/src/x.rs")
            )
            .as_deref(),
            Some("futures_util")
        );
        assert_eq!(
            of(
                "fold<I>",
                Some("/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/iter.rs")
            )
            .as_deref(),
            Some("core")
        );
        assert_eq!(of("crunch", Some("/home/u/kvpool/src/lib.rs")), None);
        assert_eq!(of("<T as core::fmt::Debug>::fmt", None), None);
        let traced = SampleFrame {
            function: Some(0),
            ..native("", None)
        };
        let table = [Function {
            module: "kvpool::cache".into(),
            name: "get".into(),
            arity: 1,
            file: "src/cache.rs".into(),
            line: 3,
        }];
        assert_eq!(crate_of(&traced, &table).as_deref(), Some("kvpool"));
    }

    #[test]
    fn plumbing_is_std_tokio_the_runtime_and_system_libraries() {
        let plumbing = |name, file| is_plumbing(&native(name, file), &[]);
        assert!(plumbing("std::thread::Builder::spawn_unchecked_", None));
        assert!(plumbing(
            "tokio::runtime::scheduler::multi_thread::worker::run",
            None
        ));
        assert!(plumbing("runtime::process::poll", None));
        assert!(plumbing("start_thread", None));
        assert!(plumbing(
            "memcpy",
            Some("./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S")
        ));
        assert!(!plumbing("app::crunch", None));
        assert!(!plumbing("crunch", Some("/home/u/app/src/lib.rs")));
        // Nothing known: perhaps the user's, in a binary without symbols.
        assert!(!plumbing("", None));
    }
}
