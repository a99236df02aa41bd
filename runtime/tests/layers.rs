//! The runtime's layers (the crate docs' "Layers"): a file of one layer names no module of a
//! higher one, by any path — `crate::module`, a name the crate root re-exports from it, or
//! `super::` climbing to the crate root. Reads the sources, so it runs on a fresh checkout.
//!
//! A back-edge not listed in [`KNOWN`] fails, and so does a listed one that is gone (the list
//! only shrinks; it is empty).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and its layer, lowest first.
const LAYERS: &[(u32, &[&str])] = &[
    (1, &["pid", "exit", "name", "segmented", "sampled"]),
    (2, &["context"]),
    (3, &["heap", "message"]),
    (4, &["trace"]),
    (5, &["world"]),
    (6, &["sample", "introspect", "heap_snapshot", "run"]),
    (7, &["gen_server", "supervisor"]),
];

/// Back-edges allowed (file, module named): none. An entry here is a debt to pay, named in
/// the crate docs.
const KNOWN: &[(&str, &str)] = &[];

fn layer_of() -> HashMap<&'static str, u32> {
    LAYERS
        .iter()
        .flat_map(|(layer, modules)| modules.iter().map(move |m| (*m, *layer)))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text without `//` comments (doc links to higher layers are documentation).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segments of the crate-root paths in `code`: `crate::a`, each item of
/// `crate::{a, b::c, d::{e}}`, and `super::...` paths that climb `depth` levels or more (to
/// the root).
fn root_names(code: &str, depth: usize) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut level = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => level += 1,
                    '}' if level == 0 => break,
                    '}' => level -= 1,
                    ',' if level == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start && level == 0 => {
                        names.push(ident_at(&group[i..]).to_owned());
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            names.push(ident_at(rest).to_owned());
        }
    }
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        let mut tail = &rest[at..];
        let mut ups = 0;
        while let Some(t) = tail.strip_prefix("super::") {
            ups += 1;
            tail = t;
        }
        if ups >= depth {
            names.push(ident_at(tail).to_owned());
        }
        rest = &rest[at + "super::".len() * ups..];
    }
    names
}

/// What lib.rs re-exports (`pub use module::...`, `pub(crate) use module::{...}`): each name
/// and the module it comes from.
fn reexports(lib: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for stmt in lib.split(';') {
        let stmt = stmt.trim();
        let Some(at) = stmt.find("use ") else {
            continue;
        };
        if !stmt[..at].trim_start().starts_with("pub") {
            continue;
        }
        let path = stmt[at + 4..].trim();
        let top = ident_at(path).to_owned();
        let tail = &path[top.len()..];
        for name in tail.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !name.is_empty() {
                out.entry(name.to_owned()).or_insert_with(|| top.clone());
            }
        }
    }
    out
}

#[test]
fn no_file_of_a_lower_layer_names_a_higher_one() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers = layer_of();
    let lib = code(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    let reexported = reexports(&lib);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = BTreeSet::new();
    let mut unplaced = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
            .collect();
        if parts == ["lib"] {
            continue;
        }
        let top = parts[0].as_str();
        let Some(&own) = layers.get(top) else {
            unplaced.push(top.to_owned());
            continue;
        };
        let text = code(&std::fs::read_to_string(file).expect("a readable file"));
        for name in root_names(&text, parts.len()) {
            let module = if layers.contains_key(name.as_str()) {
                name.as_str()
            } else {
                match reexported.get(&name) {
                    Some(m) => m.as_str(),
                    None => continue,
                }
            };
            if layers.get(module).is_some_and(|&l| l > own) {
                found.insert((rel.to_string_lossy().replace('\\', "/"), module.to_owned()));
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules in no layer (add them to LAYERS and the crate docs): {unplaced:?}"
    );
    let known: BTreeSet<(String, String)> = KNOWN
        .iter()
        .map(|(f, m)| ((*f).to_owned(), (*m).to_owned()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(
        new.is_empty(),
        "files naming a higher layer (reach it through a hook at the lower layer instead, \
         see the crate docs' \"Layers\"): {new:?}"
    );
    assert!(
        gone.is_empty(),
        "back-edges listed in KNOWN that are gone: remove them from the list: {gone:?}"
    );
}

#[test]
fn the_scan_sees_each_kind_of_path() {
    let text = code(
        "use crate::{heap::A, world::{b, c}};\nlet x = crate::sample::f(); // crate::run\n\
         use super::super::trace::X;\nlet s = \"a // b\"; crate::gen_server::g();",
    );
    let names = root_names(&text, 2);
    for want in ["heap", "world", "sample", "trace", "gen_server"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    assert!(
        !names.iter().any(|n| n == "run"),
        "a comment is not code: {names:?}"
    );
    let lib = "pub use world::node::{Node, NodeHandle};\npub(crate) use world::{mailbox, node};";
    let map = reexports(lib);
    assert_eq!(map.get("NodeHandle").map(String::as_str), Some("world"));
    assert_eq!(map.get("mailbox").map(String::as_str), Some("world"));
}
