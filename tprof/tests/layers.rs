//! tprof's layers (the crate docs' map): each top-level module of `tprof/src` belongs to one
//! layer, and a file of a module names (`crate::m`, or a name the crate root re-exports from
//! `m`) only modules of its own layer or those below, with no circle among them — checked
//! here on the sources themselves, so that a fresh checkout keeps the layering without the
//! workspace's `cycles.py`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use regex::Regex;

/// The layers, lowest first, and the top-level modules of each: as the crate docs lay them.
const LAYERS: &[(&str, &[&str])] = &[
    ("data", &["functions", "samples", "profile"]),
    (
        "reports",
        &[
            "choice",
            "inspect",
            "format",
            "table",
            "sample_report",
            "alloc_sites",
            "listing",
        ],
    ),
    ("exports", &["export", "archive"]),
    (
        "command",
        &[
            "adhoc", "server", "assert", "notebook", "peek", "control", "command",
        ],
    ),
];

/// Folders of `src` that are not modules of the library (the binary is its own crate).
const NOT_MODULES: &[&str] = &["bin"];

/// What is wrong with the layering of the crate whose sources are in `src`, one line each.
fn problems(src: &Path, layers: &[(&str, &[&str])]) -> Vec<String> {
    let layer_of: HashMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, (_, mods))| mods.iter().map(move |m| (*m, i)))
        .collect();
    let mut out = Vec::new();
    let mut modules = BTreeSet::new();
    for entry in fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let module = match name.strip_suffix(".rs") {
            Some("lib" | "main") => continue,
            Some(m) => m.to_owned(),
            None if path.is_dir() && !NOT_MODULES.contains(&name.as_str()) => name,
            None => continue,
        };
        if !layer_of.contains_key(module.as_str()) {
            out.push(format!(
                "module `{module}` is in no layer: add it to LAYERS in tprof/tests/layers.rs \
                 and to the crate docs' map"
            ));
        }
        modules.insert(module);
    }
    for declared in layer_of.keys() {
        if !modules.contains(*declared) {
            out.push(format!(
                "LAYERS names `{declared}`, which is not a module of src"
            ));
        }
    }

    let reexports = reexports(&fs::read_to_string(src.join("lib.rs")).unwrap_or_default());
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    for module in &modules {
        rust_files(&src.join(format!("{module}.rs")), &mut files, module);
        rust_files(&src.join(module), &mut files, module);
    }
    for (file, module) in files {
        let text = fs::read_to_string(&file).unwrap();
        for named in named_modules(&text) {
            // A module's own name first: `crate::profile` is the module, not the function
            // the root re-exports under that name.
            let named = match reexports.get(&named) {
                Some(module) if !modules.contains(&named) => module.clone(),
                _ => named,
            };
            if named == module || !modules.contains(&named) {
                continue;
            }
            let (from, to) = (layer_of.get(module.as_str()), layer_of.get(named.as_str()));
            if let (Some(&from), Some(&to)) = (from, to)
                && to > from
            {
                out.push(format!(
                    "{}: `{module}` ({}) names `{named}` ({}): a module uses only those of its \
                     layer and below",
                    file.strip_prefix(src).unwrap_or(&file).display(),
                    layers[from].0,
                    layers[to].0,
                ));
            }
            edges.entry(module.clone()).or_default().insert(named);
        }
    }
    if let Some(circle) = circle(&edges) {
        out.push(format!(
            "the modules form a circle: {}",
            circle.join(" -> ")
        ));
    }
    out
}

/// The `.rs` files at `path` (a file, or a folder walked down), each with `module`.
fn rust_files(path: &Path, out: &mut Vec<(PathBuf, String)>, module: &str) {
    if path.is_dir() {
        for entry in fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out, module);
        }
    } else if path.extension().is_some_and(|e| e == "rs") && path.is_file() {
        out.push((path.to_owned(), module.to_owned()));
    }
}

/// The code of `text` without its `//` comments (doc comments included: a doc link is no
/// dependency).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment of every `crate::` path in `text`: `crate::a::b`, and each item of
/// `crate::{a, b::c, d::{e, f}}`.
fn named_modules(text: &str) -> Vec<String> {
    let text = code(text);
    let path = Regex::new(r"crate::([A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let group = Regex::new(r"crate::\{((?:[^{}]|\{[^{}]*\})*)\}").unwrap();
    let nested = Regex::new(r"\{[^{}]*\}").unwrap();
    let item = Regex::new(r"(?:^|,)\s*([A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let mut names: Vec<String> = path.captures_iter(&text).map(|c| c[1].to_owned()).collect();
    for g in group.captures_iter(&text) {
        let flat = nested.replace_all(&g[1], "");
        names.extend(item.captures_iter(&flat).map(|c| c[1].to_owned()));
    }
    names
}

/// The names the crate root re-exports (`pub use module::{a, b};`), each with its module:
/// a name taken through the root counts as its module.
fn reexports(lib: &str) -> HashMap<String, String> {
    let lib = code(lib);
    let public_use = Regex::new(r"pub(?:\([^)]*\))?\s+use\s+([a-z_][a-z0-9_]*)::([^;]*);").unwrap();
    let last = Regex::new(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:,|\}|$)").unwrap();
    let mut out = HashMap::new();
    for m in public_use.captures_iter(&lib) {
        let (mut top, mut rest) = (m[1].to_owned(), m[2].to_owned());
        if top == "self" || top == "crate" {
            let (first, tail) = rest.split_once("::").unwrap_or((rest.as_str(), ""));
            (top, rest) = (first.to_owned(), tail.to_owned());
        }
        for name in last.captures_iter(&rest) {
            out.entry(name[1].to_owned()).or_insert_with(|| top.clone());
        }
    }
    out
}

/// A circle in `edges`, as the modules on it (the first repeated at the end), if any.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // 0: not seen, 1: on the current path, 2: done.
    fn visit<'a>(
        at: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut HashMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(at, 1);
        path.push(at);
        for next in edges.get(at).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|m| m == next).unwrap();
                    let mut circle: Vec<String> =
                        path[from..].iter().map(|m| (*m).to_owned()).collect();
                    circle.push(next.clone());
                    return Some(circle);
                }
                0 => {
                    if let Some(found) = visit(next, edges, state, path) {
                        return Some(found);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(at, 2);
        None
    }
    let mut state = HashMap::new();
    for start in edges.keys() {
        if !state.contains_key(start.as_str())
            && let Some(found) = visit(start, edges, &mut state, &mut Vec::new())
        {
            return Some(found);
        }
    }
    None
}

#[test]
fn tprof_src_uses_only_its_own_layer_and_those_below_with_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = problems(&src, LAYERS);
    assert!(
        found.is_empty(),
        "tprof/src's layering:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_layer_check_finds_an_upward_name_a_circle_and_a_module_in_no_layer() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod data;\nmod report;\npub use report::{Table, print};\n",
    );
    // A sound crate first: the report uses the data, and doc links and comments are no names.
    write(
        "data.rs",
        "//! See [`crate::report`].\npub struct Row; // crate::report\n",
    );
    write(
        "report.rs",
        "use crate::data::Row;\npub struct Table(Row);\n",
    );
    write("report/print.rs", "pub fn print(_: &crate::data::Row) {}\n");
    let layers: &[(&str, &[&str])] = &[("data", &["data"]), ("reports", &["report"])];
    assert_eq!(problems(src, layers), Vec::<String>::new());

    // The data names a report's type through the crate root, and a report file names the data
    // in a group: an upward name, and a circle.
    write(
        "data.rs",
        "pub struct Row(pub Option<Box<crate::Table>>);\n",
    );
    write("report/print.rs", "use crate::{data::Row, report};\n");
    let found = problems(src, layers);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].starts_with("data.rs: `data` (data) names `report` (reports)"),
        "{found:#?}"
    );
    assert!(
        found[1].contains("circle: data -> report -> data"),
        "{found:#?}"
    );

    // A new module nobody placed, and a placed one that is gone.
    fs::remove_file(src.join("data.rs")).unwrap();
    write("export.rs", "");
    let mut found = problems(src, layers);
    found.sort();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("LAYERS names `data`"), "{found:#?}");
    assert!(
        found[1].starts_with("module `export` is in no layer"),
        "{found:#?}"
    );
}
