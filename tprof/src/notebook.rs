//! Profiles shown inline in a Rust Jupyter notebook, as Eta's `%%prof` shows a cell's.
//!
//! [evcxr](https://github.com/evcxr/evcxr)'s Jupyter kernel shows the value of a cell through
//! its display protocol: when the value has an `evcxr_display` method, the kernel calls it and
//! reads, from standard output, blocks of
//!
//! ```text
//! EVCXR_BEGIN_CONTENT text/plain
//! ...
//! EVCXR_END_CONTENT
//! ```
//!
//! one per MIME type. [`Profile`], [`Outcome`] and [`Inspected`] have that method (no
//! dependency on evcxr: the protocol is those lines). A profile shows as two blocks:
//! `text/plain`, the report [`profile`](crate::profile) prints (tprof's per-process tables, or
//! Julia's `Profile.print` tree for samples), and `text/html`, the same report followed by a
//! flame graph: a static SVG with no script, since JupyterLab runs no script in an output.
//!
//! # In a notebook
//!
//! One cell profiles a function and shows its report and flame graph, `%%prof` style — the
//! profile as the cell's value, with [`Report::Return`](crate::Report::Return) so that it is
//! not printed twice:
//!
//! ```text
//! :dep tprof
//! :dep runtime
//! tprof::profile(|| async { my_crate::work().await },
//!     tprof::ProfileOptions::new().report(tprof::Report::Return)).unwrap()
//! ```
//!
//! [`notebook_blocks`] gives the same text as a string, for other front ends:
//!
//! ```
//! use tprof::{ProfileOptions, Report};
//!
//! #[runtime::traced(module = "cell")]
//! fn work(n: u64) -> u64 {
//!     (1..=n).sum()
//! }
//!
//! let outcome = tprof::profile(
//!     || async { work(10) + work(20) },
//!     ProfileOptions::new().report(Report::Return),
//! )
//! .unwrap();
//! let shown = tprof::notebook_blocks(&outcome.profile);
//! assert!(shown.starts_with("EVCXR_BEGIN_CONTENT text/plain\n"));
//! assert!(shown.contains("cell::work/1"));
//! assert!(shown.contains("EVCXR_BEGIN_CONTENT text/html\n"));
//! assert!(shown.contains("<svg") && !shown.contains("<script"));
//! ```

use std::io::Write;

use crate::adhoc::Outcome;
use crate::export::{Scripts, escape_html as escape, flame_graph};
use crate::inspect::{Aggregate, Inspected, SortBy, inspect};
use crate::{Profile, format_to_string};

/// The evcxr display blocks of `profile`: its report as `text/plain`, and as `text/html` the
/// report and a static flame graph (none when nothing was measured, which the block says).
pub fn notebook_blocks(profile: &Profile) -> String {
    let text = report_text(profile);
    let mut html = String::from("<div class=\"tprof\">\n");
    html.push_str(&preformatted(&text));
    match static_flame_graph(profile) {
        Ok(svg) => html.push_str(&svg),
        Err(why) => {
            html.push_str("<p>No flame graph: ");
            html.push_str(&escape(&why));
            html.push_str("</p>\n");
        }
    }
    html.push_str("</div>\n");
    blocks(&text, &html)
}

/// The evcxr display blocks of an inspected profile's tables (no flame graph: the tables are
/// all it holds).
pub fn notebook_blocks_of_tables(inspected: &Inspected) -> String {
    let text = format_to_string(inspected);
    let html = format!("<div class=\"tprof\">\n{}</div>\n", preformatted(&text));
    blocks(&text, &html)
}

impl Profile {
    /// Shows the profile in an evcxr notebook: see [`notebook_blocks`].
    pub fn evcxr_display(&self) {
        emit(&notebook_blocks(self));
    }
}

impl<T> Outcome<T> {
    /// Shows the outcome's profile in an evcxr notebook (a cell ending in
    /// `tprof::profile(..).unwrap()`): see [`notebook_blocks`].
    pub fn evcxr_display(&self) {
        self.profile.evcxr_display();
    }
}

impl Inspected {
    /// Shows the tables in an evcxr notebook: see [`notebook_blocks_of_tables`].
    pub fn evcxr_display(&self) {
        emit(&notebook_blocks_of_tables(self));
    }
}

/// Writes the blocks to standard output, where the kernel reads them; a closed output (no
/// kernel reading) is not an error worth a panic in a notebook.
fn emit(blocks: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(blocks.as_bytes());
    let _ = out.flush();
}

/// The report [`profile`](crate::profile) prints by default for this profile.
fn report_text(profile: &Profile) -> String {
    if profile.samples.is_empty() {
        format_to_string(&inspect(profile, Aggregate::Process, SortBy::default()))
    } else {
        let mut out = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = crate::sample_report::print(&mut out, profile, &Default::default());
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// The flame graph with no script and no XML prologue (it goes inside an html block), or why
/// there is none.
fn static_flame_graph(profile: &Profile) -> Result<String, String> {
    let mut svg = Vec::new();
    flame_graph(profile, &mut svg, Scripts::None).map_err(|e| e.to_string())?;
    let svg = String::from_utf8_lossy(&svg);
    let start = svg
        .find("<svg")
        .ok_or("the flame graph has no <svg> element")?;
    Ok(svg[start..].to_owned())
}

/// The two MIME blocks of the protocol. A line of the content that reads exactly as the end
/// marker would end its block early; none of ours does (reports and markup never start a line
/// with `EVCXR_`), and the text is kept as it is.
fn blocks(text: &str, html: &str) -> String {
    let mut out = String::with_capacity(text.len() + html.len() + 128);
    for (mime, content) in [("text/plain", text), ("text/html", html)] {
        out.push_str("EVCXR_BEGIN_CONTENT ");
        out.push_str(mime);
        out.push('\n');
        out.push_str(content);
        if !content.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("EVCXR_END_CONTENT\n");
    }
    out
}

/// `text` in a `<pre>`, escaped.
fn preformatted(text: &str) -> String {
    format!("<pre>{}</pre>\n", escape(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_closed_and_escaped() {
        let shown = blocks("a < b", &preformatted("x <y> & \"z\""));
        assert_eq!(
            shown,
            "EVCXR_BEGIN_CONTENT text/plain\na < b\nEVCXR_END_CONTENT\n\
             EVCXR_BEGIN_CONTENT text/html\n<pre>x &lt;y&gt; &amp; &quot;z&quot;</pre>\n\
             EVCXR_END_CONTENT\n"
        );
    }
}
