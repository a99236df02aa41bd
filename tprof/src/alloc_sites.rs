//! Allocation samples by site and by function: what each allocation site allocated, in each
//! process, estimated from the samples, and what it still holds (the live set).
//!
//! A sample's *site* is the innermost frame of its stack outside the standard library's
//! allocation machinery (`alloc::`, `core::`, `std::`, `hashbrown::`): the code that asked for
//! the memory, as `pprof -top` would show it once those frames are hidden. A *function*'s
//! figures count every sample whose stack goes through it (inclusive), once each.
//!
//! ```
//! use runtime::Pid;
//! use tprof::samples::{AllocRate, SampleFrame, SampleRecord, SampleSource, SampleStack, SamplerKind};
//! use tprof::{Function, Profile, TraceType};
//!
//! let mut profile = Profile::empty(TraceType::CallCount);
//! profile.function_table = vec![Function {
//!     module: "app".into(), name: "load".into(), arity: 0, file: "src/app.rs".into(), line: 3,
//! }];
//! let set = &mut profile.samples;
//! set.sources = vec![SampleSource {
//!     run: 0, node: 0, sampler: SamplerKind::Alloc, hz: 0,
//!     alloc_rate: Some(AllocRate::SampleRate(1.0)), dropped: 0.0, native_walked: true,
//!     duration_ns: 0, capacity: 100, lost_frees: 0, before_sampling: 0,
//!     cpu: None,
//! }];
//! set.frames = vec![
//!     SampleFrame { function: Some(0), name: String::new(), file: None, line: None, address: 0 },
//!     SampleFrame {
//!         function: None, name: "alloc::raw_vec::finish_grow".into(), file: None, line: None,
//!         address: 0x10,
//!     },
//! ];
//! set.stacks = vec![SampleStack { parent: None, frame: 0 }, SampleStack { parent: Some(0), frame: 1 }];
//! let pid: Pid = "<0.5.0>".parse().unwrap();
//! let sample = |size: u64, live| SampleRecord {
//!     source: 0, pid: Some(pid), thread: None, time_ns: 0, weight: size as f64, stack: Some(1),
//!     state: None, mailbox_len: 0, callee: None, size, live,
//! };
//! set.samples = vec![sample(100, true), sample(50, false)];
//!
//! let sites = tprof::alloc_sites::by_site(&profile);
//! assert_eq!(sites[0].site, "app::load/0");
//! let f = sites[0].figures;
//! assert_eq!((f.bytes, f.objects, f.inuse_bytes), (150.0, 2.0, 100.0));
//! let load = profile.sampled_allocations("load", Some(pid));
//! assert_eq!((load.bytes, load.inuse_objects), (150.0, 1.0));
//! ```

use std::collections::HashMap;
use std::io::{self, Write};

use runtime::Pid;

use crate::functions::Function;
use crate::profile::Profile;
use crate::samples::{SampleFrame, SampleRecord, SampleSet, SamplerKind};

/// Estimated figures of some allocation samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SampledAllocation {
    /// Bytes allocated.
    pub bytes: f64,
    /// Allocations made.
    pub objects: f64,
    /// Bytes of those allocations still allocated (the live set).
    pub inuse_bytes: f64,
    /// Allocations still allocated.
    pub inuse_objects: f64,
    /// The samples behind the estimate.
    pub samples: u64,
}

impl SampledAllocation {
    fn add(&mut self, s: &SampleRecord) {
        let objects = s.objects();
        self.bytes += s.weight;
        self.objects += objects;
        if s.live {
            self.inuse_bytes += s.weight;
            self.inuse_objects += objects;
        }
        self.samples += 1;
    }
}

/// What one site allocated in one process.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteAllocation {
    /// The site, named as reports name frames (`module::name/arity` for a traced function).
    pub site: String,
    /// Where it is, `file:line`, when known.
    pub location: Option<(String, u32)>,
    /// The process; `None` outside any process.
    pub pid: Option<Pid>,
    /// Its figures.
    pub figures: SampledAllocation,
}

/// Whether a frame of the standard library's allocation machinery (not a site): by its
/// qualified name, or, where the debug info names functions without their module (DWARF of
/// `debug = "line-tables-only"`: `alloc`, `finish_grow`), by its file, one of the standard
/// library's sources (`…/library/alloc/src/…`) or hashbrown's.
fn is_machinery(set: &SampleSet, functions: &[Function], frame: u32) -> bool {
    let name = set.frame_name(functions, frame);
    let n = name.trim_start_matches('<');
    if ["alloc::", "core::", "std::", "hashbrown::"]
        .iter()
        .any(|p| n.starts_with(p))
    {
        return true;
    }
    let Some(SampleFrame {
        function: None,
        file: Some(file),
        ..
    }) = set.frames.get(frame as usize)
    else {
        return false;
    };
    let file = file.replace('\\', "/");
    ["/library/alloc/", "/library/core/", "/library/std/"]
        .iter()
        .any(|lib| file.contains(lib))
        || file.rsplit('/').any(|dir| dir.starts_with("hashbrown-"))
}

/// Where site `frame` is, `file:line`: a traced function's site at the line that allocated
/// (the line its own native frame was at), or at the function's line when that is not known.
fn site_location(set: &SampleSet, functions: &[Function], frame: u32) -> Option<(String, u32)> {
    let (file, line) = set.frame_location(functions, frame)?;
    match set.frames.get(frame as usize) {
        Some(SampleFrame {
            function: Some(_),
            line: Some(at),
            ..
        }) => Some((file, *at)),
        _ => Some((file, line)),
    }
}

/// The allocation samples of `set`.
fn allocation_samples(set: &SampleSet) -> impl Iterator<Item = &SampleRecord> {
    set.samples.iter().filter(|s| {
        set.sources
            .get(s.source as usize)
            .is_some_and(|src| src.sampler == SamplerKind::Alloc)
    })
}

/// The site of `stack`: its innermost frame outside the allocation machinery (the innermost
/// frame when every frame is).
fn site_of(set: &SampleSet, functions: &[Function], stack: u32) -> Option<u32> {
    let frames = set.frames_of(stack);
    frames
        .iter()
        .rev()
        .find(|&&f| !is_machinery(set, functions, f))
        .or(frames.last())
        .copied()
}

/// `profile`'s allocation samples summed per site and process, most bytes first (then by
/// site and pid). Linear in the samples, plus one walk per distinct stack.
pub fn by_site(profile: &Profile) -> Vec<SiteAllocation> {
    let set = &profile.samples;
    let functions = &profile.function_table;
    let mut sites_of_stacks: HashMap<Option<u32>, Option<u32>> = HashMap::new();
    let mut sums: HashMap<(Option<u32>, Option<Pid>), SampledAllocation> = HashMap::new();
    for s in allocation_samples(set) {
        let site = *sites_of_stacks
            .entry(s.stack)
            .or_insert_with(|| s.stack.and_then(|st| site_of(set, functions, st)));
        sums.entry((site, s.pid)).or_default().add(s);
    }
    let mut out: Vec<SiteAllocation> = sums
        .into_iter()
        .map(|((site, pid), figures)| SiteAllocation {
            site: site.map_or_else(|| "(no stack)".to_owned(), |f| set.frame_name(functions, f)),
            location: site.and_then(|f| site_location(set, functions, f)),
            pid,
            figures,
        })
        .collect();
    out.sort_by(|a, b| {
        b.figures
            .bytes
            .total_cmp(&a.figures.bytes)
            .then_with(|| a.site.cmp(&b.site))
            .then_with(|| a.pid.cmp(&b.pid))
    });
    out
}

/// Whether report name `full` (`module::name/arity`, or a native function's path) is what
/// `name` asks for: the whole name, without its arity, or its last path segments.
fn names(full: &str, name: &str) -> bool {
    let bare = full.rsplit_once('/').map_or(full, |(f, arity)| {
        if arity.chars().all(|c| c.is_ascii_digit()) {
            f
        } else {
            full
        }
    });
    [full, bare]
        .iter()
        .any(|f| *f == name || f.ends_with(&format!("::{name}")))
}

impl Profile {
    /// What the allocation samples estimate was allocated under `function` (every sample whose
    /// stack goes through a frame it names: `module::name/arity`, `module::name`, `name`, or a
    /// native function's path or last segments), in process `pid`, or in every process for
    /// `None`. Zero when no sample matches. See [`crate::alloc_sites`].
    pub fn sampled_allocations(&self, function: &str, pid: Option<Pid>) -> SampledAllocation {
        let set = &self.samples;
        let matching: Vec<bool> = (0..set.frames.len())
            .map(|f| names(&set.frame_name(&self.function_table, f as u32), function))
            .collect();
        let mut through: HashMap<u32, bool> = HashMap::new();
        let mut out = SampledAllocation::default();
        for s in allocation_samples(set).filter(|s| pid.is_none_or(|p| s.pid == Some(p))) {
            let Some(stack) = s.stack else {
                continue;
            };
            let hit = *through.entry(stack).or_insert_with(|| {
                set.frames_of(stack)
                    .iter()
                    .any(|f| matching.get(*f as usize).copied().unwrap_or(false))
            });
            if hit {
                out.add(s);
            }
        }
        out
    }
}

/// Prints the table of allocation sites (at most `rows` lines; all for `None`): per site and
/// process, the estimated bytes and allocations, and those still in use.
///
/// # Errors
/// Those of `out`.
pub fn print(out: &mut dyn Write, profile: &Profile, rows: Option<usize>) -> io::Result<()> {
    let sites = by_site(profile);
    if sites.is_empty() {
        return Ok(());
    }
    writeln!(out, "Allocation sites (estimated):")?;
    writeln!(
        out,
        "{:>14} {:>10} {:>14} {:>10}  {:<14} Site",
        "Bytes", "Allocs", "In use bytes", "In use", "Process"
    )?;
    let shown = rows.unwrap_or(usize::MAX);
    for s in sites.iter().take(shown) {
        let pid = s
            .pid
            .map_or_else(|| "outside".to_owned(), |p| p.to_string());
        let at = s
            .location
            .as_ref()
            .map_or_else(String::new, |(file, line)| format!(" ({file}:{line})"));
        writeln!(
            out,
            "{:>14} {:>10} {:>14} {:>10}  {:<14} {}{at}",
            s.figures.bytes.round(),
            s.figures.objects.round(),
            s.figures.inuse_bytes.round(),
            s.figures.inuse_objects.round(),
            pid,
            s.site
        )?;
    }
    if sites.len() > shown {
        writeln!(out, "({} more sites)", sites.len() - shown)?;
    }
    if let Some(note) = lost_frees_note(&profile.samples) {
        writeln!(out, "{note}")?;
    }
    let before: u64 = profile
        .samples
        .sources
        .iter()
        .filter(|s| s.sampler == SamplerKind::Alloc)
        .fold(0, |n, s| n.saturating_add(s.before_sampling));
    if before > 0 {
        writeln!(
            out,
            "{before} allocation {} fell in polls begun before sampling began: their traced \
             frames are unknown, so they are sited by their native frames alone (open the \
             session before the work begins)",
            if before == 1 { "sample" } else { "samples" }
        )?;
    }
    Ok(())
}

/// What to say beside in-use figures when the runtime lost frees of sampled blocks (its
/// queue of frees was full, [`SampleSet::lost_frees`]): those blocks were counted as still
/// in use. `None` when it lost none.
///
/// ```
/// use tprof::alloc_sites::lost_frees_note;
/// use tprof::samples::SampleSet;
///
/// assert_eq!(lost_frees_note(&SampleSet::default()), None);
/// ```
pub fn lost_frees_note(set: &SampleSet) -> Option<String> {
    match set.lost_frees() {
        0 => None,
        1 => Some(
            "1 free of a sampled block was lost (queue full): in-use figures may over-count"
                .to_owned(),
        ),
        n => Some(format!(
            "{n} frees of sampled blocks were lost (queue full): in-use figures may over-count"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceType;
    use crate::samples::{AllocRate, SampleSource, SampleStack};

    /// An allocation in a traced function's own body, its stack named as DWARF of
    /// `debug = "line-tables-only"` names it (the standard library's frames without their
    /// module): sited at the traced function, at the line that allocated.
    #[test]
    fn a_traced_body_allocation_is_sited_at_its_line_whatever_names_std_frames_have() {
        let mut profile = Profile::empty(TraceType::CallCount);
        profile.function_table = vec![Function {
            module: "kv".into(),
            name: "crunch".into(),
            arity: 1,
            file: "src/main.rs".into(),
            line: 30,
        }];
        let set = &mut profile.samples;
        set.sources = vec![SampleSource {
            run: 0,
            node: 0,
            sampler: SamplerKind::Alloc,
            hz: 0,
            alloc_rate: Some(AllocRate::SampleRate(1.0)),
            dropped: 0.0,
            native_walked: true,
            duration_ns: 0,
            capacity: 100,
            lost_frees: 0,
            before_sampling: 0,
            cpu: None,
        }];
        let native = |name: &str, file: &str| SampleFrame {
            function: None,
            name: name.into(),
            file: Some(file.into()),
            line: Some(100),
            address: 0x10,
        };
        set.frames = vec![
            SampleFrame {
                function: Some(0),
                name: String::new(),
                file: None,
                line: Some(34),
                address: 0,
            },
            native("format_inner", "/rustc/abc/library/alloc/src/fmt.rs"),
            native(
                "finish_grow<alloc::alloc::Global>",
                "/rustc/abc/library/alloc/src/raw_vec/mod.rs",
            ),
            native("alloc", "/rustc/abc/library/alloc/src/alloc.rs"),
        ];
        set.stacks = (0..4)
            .map(|i: u32| SampleStack {
                parent: i.checked_sub(1),
                frame: i,
            })
            .collect();
        set.samples = vec![SampleRecord {
            source: 0,
            pid: None,
            thread: None,
            time_ns: 0,
            weight: 64.0,
            stack: Some(3),
            state: None,
            mailbox_len: 0,
            callee: None,
            size: 64,
            live: false,
        }];
        let sites = by_site(&profile);
        assert_eq!(sites.len(), 1);
        assert_eq!(sites[0].site, "kv::crunch/1");
        assert_eq!(sites[0].location, Some(("src/main.rs".to_owned(), 34)));
    }
}
