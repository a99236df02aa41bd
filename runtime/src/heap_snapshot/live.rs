//! The live set of an allocation sample session, as the sites a heap snapshot shows under
//! their processes.

use std::collections::HashMap;

use super::LiveSite;
use crate::sample::{SampleSession, symbolize};

/// The sampled live allocations of `session` (an allocation sample session; empty for
/// others), named and summed per process and site: a site is the innermost native function
/// outside the allocator and the standard library, else the innermost traced function, else
/// `(unknown site)`. Blocks allocated outside any process are left out. Sorted by process,
/// then by bytes, largest first.
pub fn live_sites(session: &SampleSession) -> Vec<LiveSite> {
    let mut names: HashMap<(u64, bool), Option<String>> = HashMap::new();
    let mut sums: HashMap<(crate::Pid, String), (f64, f64)> = HashMap::new();
    for site in session.live() {
        let Some(pid) = site.pid else { continue };
        let native = site.native.iter().enumerate().find_map(|(i, addr)| {
            names
                .entry((*addr, i > 0))
                .or_insert_with(|| {
                    // Innermost (most inlined) first: the first that is the program's.
                    symbolize(*addr, i > 0)
                        .into_iter()
                        .rev()
                        .map(|f| f.function)
                        .find(|f| !is_library(f))
                })
                .clone()
        });
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

/// Frames that allocate on a site's behalf: the allocator, the runtime's sampler, and the
/// standard library's collections.
fn is_library(function: &str) -> bool {
    let f = function.trim_start_matches('<');
    f.is_empty()
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
        || f.starts_with("__r")
}

#[cfg(test)]
mod tests {
    use super::is_library;

    #[test]
    fn the_allocator_and_the_standard_library_are_not_sites() {
        assert!(is_library("alloc::raw_vec::finish_grow"));
        assert!(is_library(
            "<alloc::vec::Vec<T> as core::clone::Clone>::clone"
        ));
        assert!(is_library("__rust_alloc"));
        assert!(is_library("runtime::heap::alloc::tagged"));
        assert!(!is_library("app::parse"));
        assert!(!is_library("<app::Cache as app::Store>::put"));
    }
}
