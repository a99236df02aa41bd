//! Tab completion for `tprof attach`'s command language: command names, their keywords, the
//! program's modules and traced functions, and its registered names.
//!
//! [`complete`] finds the word under the cursor and what may stand there; it asks a
//! [`Vocabulary`] for the program's functions and names only when the word is one of those (the
//! prompt's vocabulary asks the endpoint: `functions`, `registered`).
//!
//! ```
//! use tprof::control::complete::{Vocabulary, complete};
//! use tprof::control::protocol::FunctionRow;
//!
//! struct Known;
//! impl Vocabulary for Known {
//!     fn functions(&mut self) -> Vec<FunctionRow> {
//!         vec![FunctionRow { module: "shop".into(), function: "checkout".into(), arity: 2 }]
//!     }
//!     fn names(&mut self) -> Vec<String> {
//!         vec!["cart".into(), "catalog".into()]
//!     }
//! }
//!
//! let done = complete("set_pattern shop che", 20, &mut Known);
//! assert_eq!((done.start, done.candidates), (17, vec!["checkout".to_owned()]));
//! let done = complete("enable_trace ca", 15, &mut Known);
//! assert_eq!(done.candidates, ["cart", "catalog"]);
//! ```

use super::protocol::FunctionRow;
use super::script::{COMMANDS, TRACE_TYPES};

/// What completion may ask of the program at the other end.
pub trait Vocabulary {
    /// Its traced functions.
    fn functions(&mut self) -> Vec<FunctionRow>;
    /// Its registered names.
    fn names(&mut self) -> Vec<String>;
}

/// The completions of one word.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// Where the word starts (a byte offset in the line); it ends at the cursor.
    pub start: usize,
    /// What may replace it, sorted, each once.
    pub candidates: Vec<String>,
}

/// The layouts `collect` takes.
const LAYOUTS: &[&str] = &[
    "process",
    "total",
    "pretty",
    "json",
    "folded",
    "speedscope",
    "chrome",
    "svg",
    "html",
];

/// The completions of the word that ends at `pos` (a byte offset) in `line`. The command is
/// the one the word is in, after the last `;` before it.
pub fn complete(line: &str, pos: usize, vocabulary: &mut dyn Vocabulary) -> Completion {
    let pos = floor_char_boundary(line, pos);
    let command_start = line[..pos].rfind(';').map_or(0, |i| i + 1);
    let before = &line[command_start..pos];
    let start = before
        .rfind(char::is_whitespace)
        .map_or(command_start, |i| command_start + i + 1);
    let prefix = &line[start..pos];
    let words: Vec<&str> = line[command_start..start].split_whitespace().collect();
    let candidates = candidates(&words, vocabulary);
    let mut candidates: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.starts_with(prefix))
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    Completion { start, candidates }
}

/// What may stand after `words`.
fn candidates(words: &[&str], vocabulary: &mut dyn Vocabulary) -> Vec<String> {
    let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let Some((&command, args)) = words.split_first() else {
        let mut all = owned(COMMANDS);
        all.extend(owned(&["quit", "exit"]));
        return all;
    };
    match (command, args) {
        ("help", []) => owned(COMMANDS),
        ("start", _) => {
            let mut all = owned(TRACE_TYPES);
            all.push("--call-tree".to_owned());
            all
        }
        ("set_pattern" | "clear_pattern", [..]) if args.len() < 3 => {
            let functions = vocabulary.functions();
            let module = args.first().copied();
            let function = args.get(1).copied();
            let mut all: Vec<String> = functions
                .iter()
                .filter(|f| module.is_none_or(|m| m == "_" || f.module == m))
                .filter(|f| function.is_none_or(|n| n == "_" || f.function == n))
                .map(|f| match args.len() {
                    0 => f.module.clone(),
                    1 => f.function.clone(),
                    _ => f.arity.to_string(),
                })
                .collect();
            all.push("_".to_owned());
            all
        }
        ("enable_trace" | "disable_trace", []) => {
            let mut all = owned(&["all", "new", "existing"]);
            all.extend(vocabulary.names());
            all
        }
        ("enable_trace", [_]) => owned(&["--no-spawn"]),
        ("collect", []) => owned(LAYOUTS),
        ("inspect" | "format", []) => owned(&["process", "total"]),
        ("inspect" | "format", [_]) => owned(&[
            "module",
            "function",
            "calls",
            "measurement",
            "measurement_per_call",
            "percent",
        ]),
        ("inspect" | "format", [_, _]) => owned(&["ascending", "descending"]),
        ("top", []) => super::top::SortKey::ALL
            .iter()
            .map(|k| k.name().to_owned())
            .collect(),
        ("sample", [_]) | ("prof", ["sample", _]) => owned(&["cpu", "wall"]),
        ("prof", []) => owned(&["sample", "trace"]),
        ("prof", ["trace"]) => owned(TRACE_TYPES),
        _ => Vec::new(),
    }
}

/// The largest char boundary at or before `pos` (at most the line's length).
fn floor_char_boundary(line: &str, pos: usize) -> usize {
    let mut pos = pos.min(line.len());
    while !line.is_char_boundary(pos) {
        pos -= 1;
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what it was asked, to show completion asks only when it needs to.
    #[derive(Default)]
    struct Counting {
        asked: usize,
    }

    impl Vocabulary for Counting {
        fn functions(&mut self) -> Vec<FunctionRow> {
            self.asked += 1;
            let row = |m: &str, f: &str, a| FunctionRow {
                module: m.into(),
                function: f.into(),
                arity: a,
            };
            vec![
                row("app::db", "get", 1),
                row("app::db", "get", 2),
                row("app::db", "put", 2),
                row("app::web", "get", 0),
            ]
        }
        fn names(&mut self) -> Vec<String> {
            self.asked += 1;
            vec!["db_pool".into(), "web".into()]
        }
    }

    fn done(line: &str) -> Vec<String> {
        complete(line, line.len(), &mut Counting::default()).candidates
    }

    #[test]
    fn each_word_completes_from_what_may_stand_there() {
        assert_eq!(done("pro"), ["processes", "prof"]);
        assert_eq!(done("set_pattern app::"), ["app::db", "app::web"]);
        assert_eq!(done("set_pattern app::db "), ["_", "get", "put"]);
        assert_eq!(done("set_pattern app::db get "), ["1", "2", "_"]);
        assert_eq!(done("set_pattern _ get "), ["0", "1", "2", "_"]);
        assert_eq!(done("enable_trace d"), ["db_pool"]);
        assert_eq!(done("enable_trace web --"), ["--no-spawn"]);
        assert_eq!(done("prof trace call_t"), ["call_time"]);
        assert_eq!(done("prof sample 2s w"), ["wall"]);
        assert_eq!(done("collect f"), ["folded"]);
        assert_eq!(done("top m"), ["mailbox"]);
        assert_eq!(done("inspect t"), ["total"]);
        assert_eq!(done("inspect total measurement_"), ["measurement_per_call"]);
        assert_eq!(done("format process calls d"), ["descending"]);
        assert_eq!(done("pe"), ["peek"]);
        assert_eq!(done("pause; res"), ["restart", "resume"]);
        assert!(done("set_pattern app::db get 1 ").is_empty());
        assert!(done("nonsense ").is_empty());
    }

    #[test]
    fn the_word_is_the_one_at_the_cursor_and_the_endpoint_is_asked_only_when_needed() {
        let mut vocabulary = Counting::default();
        let line = "enable_trace we; stop";
        let at = complete(line, 15, &mut vocabulary);
        assert_eq!((at.start, at.candidates), (13, vec!["web".to_owned()]));
        assert_eq!(vocabulary.asked, 1);
        complete("collect ", 8, &mut vocabulary);
        complete("st", 2, &mut vocabulary);
        assert_eq!(vocabulary.asked, 1, "commands and layouts need no endpoint");
        // A cursor inside a character or past the end stays in the line.
        assert_eq!(complete("é", 1, &mut vocabulary).start, 0);
        assert_eq!(
            complete("st", 99, &mut vocabulary).candidates,
            ["start", "stop"]
        );
    }
}
