//! Reading an `html` export back as a browser shows it: the page's text after its viewer
//! ran, from headless Chromium's `--dump-dom`.
//!
//! Chromium is found as `$CHROMIUM`, else `chromium` on the `PATH`; without it, [`page_text`]
//! says so on stderr and returns `None`, and the tests check the embedded data alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

/// The browser, if one is installed.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file())
}

/// The text of `html` as headless Chromium shows it once its scripts ran (the DOM, with the
/// markup stripped and the scripts left out), or `None` without Chromium.
pub(crate) fn page_text(html: &str) -> Option<String> {
    page_text_at(html, "")
}

/// [`page_text`] of the page opened at `fragment` (`#focus=parse`; empty: none).
pub(crate) fn page_text_at(html: &str, fragment: &str) -> Option<String> {
    page_dom_at(html, fragment).map(|dom| text_of(&dom))
}

/// The DOM of `html` opened at `fragment` once its scripts ran, as headless Chromium's
/// `--dump-dom` writes it, or `None` without Chromium.
pub(crate) fn page_dom_at(html: &str, fragment: &str) -> Option<String> {
    let Some(browser) = chromium() else {
        eprintln!("no chromium: the page is not opened in a browser (set CHROMIUM)");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    std::fs::write(&page, html).unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}{fragment}", page.display()))
        .env("HOME", dir.path())
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "chromium failed: {out:?}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The text of `dom` outside its `<script>` and `<style>` elements, tags replaced by spaces,
/// runs of spaces made one, `&amp;`, `&lt;` and `&gt;` read back.
fn text_of(dom: &str) -> String {
    let mut out = String::new();
    let mut rest = dom;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        out.push(' ');
        let tag = &rest[open..];
        let skip_to = ["script", "style"]
            .iter()
            .find(|t| tag[1..].starts_with(*t))
            .map(|t| format!("</{t}>"));
        rest = match skip_to {
            Some(end) => match tag.find(&end) {
                Some(i) => &tag[i + end.len()..],
                None => "",
            },
            None => match tag.find('>') {
                Some(i) => &tag[i + 1..],
                None => "",
            },
        };
    }
    out.push_str(rest);
    let out = out
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", " ");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}
