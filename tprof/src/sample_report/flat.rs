//! The flat list, laid out as Julia's `Profile.print(format = :flat)`: a line per frame
//! (per key: see [`super::frames`]), wherever it was on the stack.
//!
//! ```text
//!  Count  Overhead File        Line Function
//!  =====  ======== ====        ==== ========
//!      3         1 src/app.rs    12 app::parse/1
//! ```
//!
//! `Count` is the weight of the samples the frame was on the stack of (once per sample,
//! however often it recurs), `Overhead` of those it was the innermost shown frame of. The
//! columns are as wide as their widest cell (at least as wide as Julia's: 6, 9, 6 and 5);
//! with a [`width`](super::PrintOptions::width), file and function share what is left of it
//! (the file cut from the left, the function from the right).

use std::io::{self, Write};

use super::frames::{Keys, cut_left, cut_right, pointer};
use super::options::{PrintOptions, SortedBy};
use super::walk::FlatLine;
use super::{ndigits, rounded};

/// Prints `lines` as the flat list (its header included, not its totals).
pub(super) fn print(
    out: &mut dyn Write,
    lines: &[FlatLine],
    keys: &Keys<'_>,
    options: &PrintOptions,
) -> io::Result<()> {
    let mut lines: Vec<&FlatLine> = lines.iter().collect();
    lines.sort_by(|a, b| {
        let by = match options.sortedby {
            SortedBy::Count => a.count.total_cmp(&b.count),
            SortedBy::Overhead => a.overhead.total_cmp(&b.overhead),
            SortedBy::FileFuncLine | SortedBy::Name => std::cmp::Ordering::Equal,
        };
        by.then_with(|| keys.cmp(a.key, b.key, options.sortedby))
    });
    let wcount = ndigits(lines.iter().map(|l| rounded(l.count)).max().unwrap_or(0)).max(6);
    let wself = ndigits(lines.iter().map(|l| rounded(l.overhead)).max().unwrap_or(0)).max(9);
    let max_line = lines
        .iter()
        .filter_map(|l| keys.get(l.key).line)
        .max()
        .unwrap_or(0);
    let wline = ndigits(u64::from(max_line)).max(5);
    let file_of = |l: &FlatLine| keys.get(l.key).file.as_deref().unwrap_or("[unknown file]");
    let maxfile = lines
        .iter()
        .filter(|l| !keys.get(l.key).is_unknown() && !keys.get(l.key).note)
        .map(|l| file_of(l).chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let (wfile, wfunc) = if options.width == 0 {
        (maxfile, None)
    } else {
        let maxfunc = lines
            .iter()
            .map(|l| keys.get(l.key).shown_name().chars().count())
            .max()
            .unwrap_or(0)
            .max(10)
            + 25;
        let text = options
            .width
            .saturating_sub(wcount + wself + wline + 3)
            .max(20);
        if maxfile + maxfunc <= text {
            (maxfile, Some(text - maxfile))
        } else {
            (2 * text / 5, Some(3 * text / 5))
        }
    };
    writeln!(
        out,
        "{:>wcount$} {:>wself$} {:<wfile$} {:>wline$} Function",
        "Count", "Overhead", "File", "Line"
    )?;
    writeln!(
        out,
        "{:>wcount$} {:>wself$} {:<wfile$} {:>wline$} ========",
        "=====", "========", "====", "===="
    )?;
    for l in lines {
        if l.count < options.mincount {
            continue;
        }
        let key = keys.get(l.key);
        let text = if key.note {
            format!("{:<wfile$} {:>wline$} {}", "", "", key.name)
        } else if key.is_unknown() {
            match key.address {
                Some(address) => format!("@{}", pointer(address)),
                None => "[any unknown stackframes]".to_owned(),
            }
        } else {
            let line = key.line.map_or_else(|| "?".to_owned(), |l| l.to_string());
            let name = key.shown_name();
            let name = match wfunc {
                Some(w) => cut_right(&name, w).into_owned(),
                None => name.into_owned(),
            };
            format!(
                "{:<wfile$} {line:>wline$} {name}",
                cut_left(file_of(l), wfile)
            )
        };
        writeln!(
            out,
            "{:>wcount$} {:>wself$} {text}",
            rounded(l.count),
            rounded(l.overhead)
        )?;
    }
    Ok(())
}
