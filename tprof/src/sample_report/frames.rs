//! Which frames print as one line, and how: frames of one function, file and line are one
//! *key* when [`combine`](super::PrintOptions::combine) is on (else each frame, address and
//! all, is its own), and the frames of one traced function are always one key, at its
//! definition line, whatever line in it each sample was at. A frame [`view`](super::view) does
//! not show has none: native frames when [`native`](super::PrintOptions::native) is
//! [`Native::None`](super::Native::None), so that a sample counts at its innermost traced frame,
//! and the frames it *folds* (plumbing, other crates), which it also marks, for the report to
//! count them. Each key has its text (name,
//! file, line) and its place in [`SortedBy`]'s orders. Linear in the frames.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashMap;

use super::options::{PrintOptions, SortedBy};
use super::view::{Fate, fate};
use crate::functions::Function;
use crate::samples::{SampleFrame, SampleSet};

/// The keys of a sample set's frames.
pub(super) struct Keys<'a> {
    /// Per frame, its key; `None` for a frame not shown.
    of_frame: Vec<Option<u32>>,
    /// Per key, what it prints as; the last is [`Keys::hidden`]'s.
    keys: Vec<Key<'a>>,
    /// Per frame, whether it is folded ([`Fate::Folded`]).
    folded: Vec<bool>,
}

/// What one key prints as.
pub(super) struct Key<'a> {
    /// One of its frames (an index into [`SampleSet::frames`]).
    pub(super) frame: u32,
    /// The function: `module::name/arity` for a traced one, the native name otherwise
    /// (empty when unknown).
    pub(super) name: Cow<'a, str>,
    /// Its file, when known, shortened as Julia shortens paths ([`short_path`]).
    pub(super) file: Option<Cow<'a, str>>,
    /// Its line, when known.
    pub(super) line: Option<u32>,
    /// The instruction address it is shown with (native frames, `combine` off).
    pub(super) address: Option<u64>,
    /// A line that stands for no frame of its own ([`Keys::hidden`]'s): `name` is all it
    /// prints.
    pub(super) note: bool,
}

/// The line of the samples none of whose frames are shown.
const HIDDEN: &str = "[hidden frames]";

impl<'a> Keys<'a> {
    /// The keys of `set`'s frames under `options`; `functions` is the profile's function
    /// table.
    pub(super) fn new(
        set: &'a SampleSet,
        functions: &'a [Function],
        options: &PrintOptions,
    ) -> Self {
        type Identity<'b> = (Option<u32>, &'b str, Option<&'b str>, Option<u32>);
        let mut by_identity: HashMap<Identity<'a>, u32> = HashMap::new();
        let mut keys: Vec<Key<'a>> = Vec::new();
        // A bad pattern was refused by `print`; here it hides nothing.
        let hide = options.filters().ok().and_then(|f| f.hide);
        let mut folded = vec![false; set.frames.len()];
        let of_frame = set
            .frames
            .iter()
            .enumerate()
            .map(|(i, frame)| {
                match fate(frame, functions, options) {
                    Fate::Shown => {}
                    Fate::Hidden => return None,
                    Fate::Folded => {
                        folded[i] = true;
                        return None;
                    }
                }
                let i = crate::functions::index32(i);
                let key = Key::of(i, frame, functions, options.combine);
                if hide.as_ref().is_some_and(|re| key.matches(re)) {
                    return None;
                }
                // A traced function is one key, whatever line each sample was at in it.
                if frame.function.is_none() && !options.combine {
                    keys.push(key);
                    return Some(crate::functions::index32(keys.len() - 1));
                }
                let identity = match frame.function {
                    Some(_) => (frame.function, "", None, None),
                    None => (
                        frame.function,
                        frame.name.as_str(),
                        frame.file.as_deref(),
                        frame.line,
                    ),
                };
                let next = crate::functions::index32(keys.len());
                let id = *by_identity.entry(identity).or_insert(next);
                if id == next {
                    keys.push(key);
                }
                Some(id)
            })
            .collect();
        keys.push(Key {
            frame: u32::MAX,
            name: Cow::Borrowed(HIDDEN),
            file: None,
            line: None,
            address: None,
            note: true,
        });
        Keys {
            of_frame,
            keys,
            folded,
        }
    }

    /// Whether `frame` is folded (plumbing, another crate's), rather than shown or hidden.
    pub(super) fn folded(&self, frame: u32) -> bool {
        self.folded.get(frame as usize).copied().unwrap_or(false)
    }

    /// The key of the line that counts the samples whose frames are all hidden or folded
    /// (native frames with [`native`](super::PrintOptions::native) none, plumbing: CPU time
    /// outside processes, a process without a traced frame), so that they show rather than
    /// vanish.
    pub(super) fn hidden(&self) -> u32 {
        crate::functions::index32(self.keys.len() - 1)
    }

    /// The key `frame` prints under; `None` when it is not shown (or not a frame).
    pub(super) fn of(&self, frame: u32) -> Option<u32> {
        self.of_frame.get(frame as usize).copied().flatten()
    }

    /// What `key` prints as.
    pub(super) fn get(&self, key: u32) -> &Key<'a> {
        &self.keys[key as usize]
    }

    /// How many keys there are.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// `a` against `b` in `order`'s sense, for the orders by place or name (the others fall
    /// back on the place); unknown frames, then the hidden frames' line, come last.
    pub(super) fn cmp(&self, a: u32, b: u32, order: SortedBy) -> Ordering {
        let (a, b) = (self.get(a), self.get(b));
        (a.note, a.is_unknown())
            .cmp(&(b.note, b.is_unknown()))
            .then_with(|| match order {
                SortedBy::Name => (&a.name, &a.file, a.line, a.address)
                    .cmp(&(&b.name, &b.file, b.line, b.address)),
                _ => (&a.file, &a.name, a.line, a.address)
                    .cmp(&(&b.file, &b.name, b.line, b.address)),
            })
            .then(a.frame.cmp(&b.frame))
    }
}

impl<'a> Key<'a> {
    fn of(
        frame_index: u32,
        frame: &'a SampleFrame,
        functions: &'a [Function],
        combine: bool,
    ) -> Self {
        match frame.function {
            Some(f) => {
                let function = functions.get(f as usize);
                Key {
                    frame: frame_index,
                    name: Cow::Owned(
                        function.map_or_else(|| format!("<function {f}>"), Function::mfa),
                    ),
                    file: function
                        .map(|f| f.file.as_str())
                        .filter(|f| !f.is_empty())
                        .map(short_path),
                    line: function.map(|f| f.line).filter(|&l| l > 0),
                    address: None,
                    note: false,
                }
            }
            None => Key {
                frame: frame_index,
                name: Cow::Borrowed(frame.name.as_str()),
                file: frame
                    .file
                    .as_deref()
                    .filter(|f| !f.is_empty())
                    .map(short_path),
                line: frame.line.filter(|&l| l > 0),
                address: (!combine).then_some(frame.address),
                note: false,
            },
        }
    }

    /// Whether `re` matches its function's name or its file (pprof's focus and hide).
    pub(super) fn matches(&self, re: &regex::Regex) -> bool {
        !self.note
            && (re.is_match(&self.name) || self.file.as_deref().is_some_and(|f| re.is_match(f)))
    }

    /// A frame of which nothing is known but, perhaps, its address.
    pub(super) fn is_unknown(&self) -> bool {
        self.name.is_empty() && self.file.is_none()
    }

    /// Its line as the tree prints it: `file:line; function`, the file cut to `wfile`
    /// characters from the left and the function to `wfunc` from the right (`None`: not
    /// cut).
    pub(super) fn tree_text(&self, cut: Option<(usize, usize)>) -> String {
        if self.note {
            return self.name.clone().into_owned();
        }
        if self.is_unknown() {
            return match self.address {
                Some(address) => format!("[unknown function] (pointer: {})", pointer(address)),
                None => "[unknown stackframe]".to_owned(),
            };
        }
        let file = self.file.as_deref().unwrap_or("[unknown file]");
        let line = self.line.map_or_else(|| "?".to_owned(), |l| l.to_string());
        let name = self.shown_name();
        match cut {
            None => format!("{file}:{line}; {name}"),
            Some((wfile, wfunc)) => format!(
                "{}:{line}; {}",
                cut_left(file, wfile),
                cut_right(&name, wfunc)
            ),
        }
    }

    /// Its function as printed: with its address first when it has one to show, and
    /// `[unknown function]` when it has no name.
    pub(super) fn shown_name(&self) -> Cow<'_, str> {
        let name: Cow<'_, str> = if self.name.is_empty() {
            Cow::Borrowed("[unknown function]")
        } else {
            Cow::Borrowed(&self.name)
        };
        match self.address {
            Some(address) => Cow::Owned(format!("{} {name}", pointer(address))),
            None => name,
        }
    }
}

/// `path` made short, as Julia's `short_path` names files by their package: a file of the
/// standard library (`/rustc/COMMIT/library/core/src/...`) as `@core/src/...`, a file of a
/// crate from a registry (`.../registry/src/INDEX/tokio-1.48.0/src/...`) as
/// `@tokio-1.48.0/src/...`; any other path as it is.
pub(super) fn short_path(path: &str) -> Cow<'_, str> {
    let library = path
        .strip_prefix("/rustc/")
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(_commit, rest)| rest.strip_prefix("library/"));
    let registry = || {
        let at = path.find("/registry/src/")?;
        let (_index, rest) = path[at + "/registry/src/".len()..].split_once('/')?;
        Some(rest)
    };
    match library.or_else(registry) {
        Some(rest) if !rest.is_empty() => Cow::Owned(format!("@{rest}")),
        _ => Cow::Borrowed(path),
    }
}

/// An address as Julia prints a pointer: `0x` and 16 hex digits.
pub(super) fn pointer(address: u64) -> String {
    format!("0x{address:016x}")
}

/// `s` in at most `w` characters, its start replaced by `...` when longer (Julia's
/// `rtruncto`, for file names, whose end says most).
pub(super) fn cut_left(s: &str, w: usize) -> Cow<'_, str> {
    let n = s.chars().count();
    if n <= w {
        return Cow::Borrowed(s);
    }
    let keep = w.saturating_sub(3);
    Cow::Owned(format!(
        "...{}",
        s.chars().skip(n - keep).collect::<String>()
    ))
}

/// `s` in at most `w` characters, its end replaced by `...` when longer (Julia's `ltruncto`).
pub(super) fn cut_right(s: &str, w: usize) -> Cow<'_, str> {
    if s.chars().count() <= w {
        return Cow::Borrowed(s);
    }
    let keep = w.saturating_sub(3);
    Cow::Owned(format!("{}...", s.chars().take(keep).collect::<String>()))
}
