//! The live set of an allocation sample session, as the sites a heap snapshot shows under
//! their processes.

use std::collections::HashMap;

use super::LiveSite;
use crate::sample::{NativeFrame, SampleSession, allocator_frames, is_own_frame, symbolize};
use crate::trace::Callsite;

/// The sampled live allocations of `session` (an allocation sample session; empty for
/// others), named and summed per process and site: a site is the innermost native function
/// outside the allocator and the standard library, else the innermost traced function, else
/// `(unknown site)`. Blocks allocated outside any process are left out. Sorted by process,
/// then by bytes, largest first.
///
/// Where the debug info names functions without their module (DWARF of `debug =
/// "line-tables-only"`, the level the docs recommend, for a function inlined into another:
/// `{closure#0}`, `with_capacity<u8>`), the standard library's frames are told by their files,
/// the allocator's by its entry points (as a profile's stacks are cut: a bare `{closure#0}` of
/// the allocator's own was every site's name), and a frame of a traced function on the
/// site's stack (its own, or a closure in its lines) is named by that function:
/// `app::keep_blocks::{closure#0}`, not a bare `{closure#0}` that every closure of the
/// program would share; a bare frame outside any traced function says its file
/// (`{closure#0} in src/jobs.rs`).
pub fn live_sites(session: &SampleSession) -> Vec<LiveSite> {
    // Read once: bare names' files are shown relative to it.
    let here = std::env::current_dir().ok();
    let mut symbols: HashMap<(u64, bool), Vec<NativeFrame>> = HashMap::new();
    let mut sums: HashMap<(crate::Pid, String), (f64, f64)> = HashMap::new();
    for site in session.live() {
        let Some(pid) = site.pid else { continue };
        for (i, addr) in site.native.iter().enumerate() {
            symbols
                .entry((*addr, i > 0))
                .or_insert_with(|| symbolize(*addr, i > 0));
        }
        // Native frames, innermost (most inlined) first, as a profile's stacks take them.
        let native = site
            .native
            .iter()
            .enumerate()
            .flat_map(|(i, addr)| symbols[&(*addr, i > 0)].iter().rev());
        let native = site_of(native, &site.traced, here.as_deref());
        let name = native
            .or_else(|| {
                site.traced
                    .last()
                    .map(|cs| format!("{}::{}", cs.module(), cs.written_name()))
            })
            .unwrap_or_else(|| "(unknown site)".to_owned());
        let sum = sums.entry((pid, name)).or_default();
        sum.0 += site.bytes;
        sum.1 += site.objects;
    }
    let mut out: Vec<LiveSite> = sums
        .into_iter()
        .map(|((pid, site), (bytes, objects))| LiveSite {
            pid,
            site,
            bytes: bytes.round() as u64,
            objects: objects.round() as u64,
        })
        .collect();
    out.sort_by(|a, b| {
        a.pid
            .cmp(&b.pid)
            .then(b.bytes.cmp(&a.bytes))
            .then(a.site.cmp(&b.site))
    });
    out
}

/// The site of an allocation whose native frames (innermost first) are `native` and traced
/// stack `traced`: the allocator's frames passed over by its entry points, which the symbol
/// table names whatever the debug level (its inlined helpers may have bare names), then the
/// first frame that is the program's.
fn site_of<'a>(
    native: impl Iterator<Item = &'a NativeFrame> + Clone,
    traced: &[&'static Callsite],
    here: Option<&std::path::Path>,
) -> Option<String> {
    let skip = allocator_frames(native.clone());
    native
        .skip(skip)
        .find(|f| !is_library(f))
        .map(|f| site_name(f, traced, here))
}

/// The name of site `frame` (the program's innermost frame of an allocation whose traced
/// stack is `traced`, outermost first): its own name when the debug info qualifies it; a bare
/// name that is a traced function's own frame (innermost first) qualified by that function;
/// any other bare name with the file it is in (`{closure#0} in src/jobs.rs`), relative to the
/// working directory `here` when under it, so that two closures of different files stay apart
/// and say where they are.
fn site_name(
    frame: &NativeFrame,
    traced: &[&'static Callsite],
    here: Option<&std::path::Path>,
) -> String {
    if !is_bare(&frame.function) {
        return frame.function.clone();
    }
    match traced.iter().rev().find(|cs| is_own_frame(frame, cs)) {
        Some(cs) => {
            let own = format!("{}::{}", cs.module(), cs.written_name());
            let bare = frame.function.split('<').next().unwrap_or_default();
            if own.rsplit("::").next() == Some(bare) {
                own
            } else {
                format!("{own}::{bare}")
            }
        }
        None => match &frame.file {
            Some(file) => {
                let relative =
                    here.and_then(|dir| std::path::Path::new(file).strip_prefix(dir).ok());
                match relative {
                    Some(path) => format!("{} in {}", frame.function, path.display()),
                    None => format!("{} in {file}", frame.function),
                }
            }
            None => frame.function.clone(),
        },
    }
}

/// Whether a function's name is without its module, as DWARF of line tables only gives an
/// inlined function's (`try_allocate_in<alloc::alloc::Global>`: the generic arguments' paths
/// do not count).
fn is_bare(function: &str) -> bool {
    let f = function.trim_start_matches('<');
    !f.split('<').next().unwrap_or_default().contains("::")
}

/// Frames that allocate on a site's behalf: the allocator, the runtime's sampler, and the
/// standard library's collections; by name, or by the file, one of the standard library's
/// sources or hashbrown's (line tables only name inlined functions without their module).
fn is_library(frame: &NativeFrame) -> bool {
    let f = frame.function.trim_start_matches('<');
    let by_name = f.is_empty()
        || [
            "runtime::heap::",
            "runtime::sample::",
            "alloc::",
            "core::",
            "std::",
            "hashbrown::",
        ]
        .iter()
        .any(|p| f.starts_with(p))
        || f.starts_with("__r");
    by_name
        || frame.file.as_deref().is_some_and(|file| {
            let file = file.replace('\\', "/");
            ["/library/alloc/", "/library/core/", "/library/std/"]
                .iter()
                .any(|lib| file.contains(lib))
                || file.rsplit('/').any(|dir| dir.starts_with("hashbrown-"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str) -> NativeFrame {
        NativeFrame {
            function: function.to_owned(),
            file: Some(file.to_owned()),
            line: Some(40),
        }
    }

    #[test]
    fn the_allocator_and_the_standard_library_are_not_sites() {
        let named = |f: &str| frame(f, "/src/app.rs");
        assert!(is_library(&named("alloc::raw_vec::finish_grow")));
        assert!(is_library(&named(
            "<alloc::vec::Vec<T> as core::clone::Clone>::clone"
        )));
        assert!(is_library(&named("__rust_alloc")));
        assert!(is_library(&named("runtime::heap::alloc::tagged")));
        assert!(!is_library(&named("app::parse")));
        assert!(!is_library(&named("<app::Cache as app::Store>::put")));
        // Line tables only: the standard library's inlined frames by their files.
        assert!(is_library(&frame(
            "with_capacity<u8>",
            "/rustc/abc/library/alloc/src/vec/mod.rs"
        )));
        assert!(is_library(&frame(
            "insert<u64, u64>",
            "/rust/deps/hashbrown-0.15.2/src/map.rs"
        )));
        assert!(!is_library(&frame("{closure#0}", "/home/u/app/src/app.rs")));
    }

    static KEEP: Callsite = Callsite::new("app", "keep_blocks", 2, "src/app.rs", 38).ending_at(42);

    /// Line tables only, optimized: the allocator's inlined helpers and the standard
    /// library's have bare names; the site is the traced function's closure that allocated.
    #[test]
    fn the_allocators_bare_frames_are_not_a_site() {
        let native = [
            frame("{closure#0}", "/src/runtime/src/heap/alloc.rs"),
            frame("alloc", "/src/runtime/src/heap/alloc.rs"),
            frame("__rustc::__rg_alloc", "/src/app.rs"),
            frame(
                "with_capacity<u8>",
                "/rustc/abc/library/alloc/src/vec/mod.rs",
            ),
            frame(
                "try_allocate_in<alloc::alloc::Global>",
                "/rustc/abc/library/alloc/src/raw_vec/mod.rs",
            ),
            frame("{closure#0}", "/home/u/app/src/app.rs"),
            frame("keep_blocks", "/home/u/app/src/app.rs"),
        ];
        assert_eq!(
            site_of(native.iter(), &[&KEEP], None).as_deref(),
            Some("app::keep_blocks::{closure#0}")
        );
        // With no traced function, the closure is named by its file; nothing of the
        // allocator's is ever the site.
        assert_eq!(
            site_of(native.iter(), &[], None).as_deref(),
            Some("{closure#0} in /home/u/app/src/app.rs")
        );
        assert_eq!(site_of(native[..5].iter(), &[], None), None);
    }

    /// A bare name of the traced function's body is named by the function; a qualified name
    /// stays; a bare one outside any traced function says its file (relative to the working
    /// directory when under it); without a file it stays bare.
    #[test]
    fn a_bare_frame_of_a_traced_function_is_named_by_it() {
        let in_body = frame("{closure#0}", "/home/u/app/src/app.rs");
        assert_eq!(
            site_name(&in_body, &[&KEEP], None),
            "app::keep_blocks::{closure#0}"
        );
        let own = frame("keep_blocks", "/home/u/app/src/app.rs");
        assert_eq!(site_name(&own, &[&KEEP], None), "app::keep_blocks");
        let qualified = frame("app::other::{{closure}}", "/home/u/app/src/app.rs");
        assert_eq!(
            site_name(&qualified, &[&KEEP], None),
            "app::other::{{closure}}"
        );
        let elsewhere = frame("{closure#0}", "/home/u/app/src/other.rs");
        assert_eq!(
            site_name(&elsewhere, &[&KEEP], None),
            "{closure#0} in /home/u/app/src/other.rs"
        );
        assert_eq!(
            site_name(&in_body, &[], None),
            "{closure#0} in /home/u/app/src/app.rs"
        );
        let here = std::path::Path::new("/home/u/app");
        let local = frame("{closure#2}", "/home/u/app/src/jobs.rs");
        assert_eq!(
            site_name(&local, &[], Some(here)),
            "{closure#2} in src/jobs.rs"
        );
        let outside = frame("{closure#2}", "/elsewhere/src/jobs.rs");
        assert_eq!(
            site_name(&outside, &[], Some(here)),
            "{closure#2} in /elsewhere/src/jobs.rs"
        );
        let no_file = NativeFrame {
            file: None,
            ..frame("{closure#0}", "")
        };
        assert_eq!(site_name(&no_file, &[], None), "{closure#0}");
    }
}
