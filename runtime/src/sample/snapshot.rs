//! A sample session's samples as plain data, with native addresses named: what `tprof` reads,
//! in the same process ([`SampleSession::snapshot`](super::SampleSession::snapshot)) or from a
//! file a profiled program wrote ([`crate::trace::env_run`]).
//!
//! Each sample's stack is one path, outermost first: the traced frames (functions, as indices
//! into the trace snapshot's function list), then the native frames the process ran below its
//! innermost traced call (CPU samples). Stacks are stored once each, as a tree of
//! (parent, frame) nodes, so a million samples of a few hundred distinct stacks take a few
//! hundred nodes.
//!
//! Which native frames: the native stack runs from the thread's start through tokio's
//! scheduler and the runtime's poll wrapper into the process's code. A sample keeps the frames
//! below the innermost traced function's own frame, found by its name, or else the frames
//! below the runtime's poll machinery (`runtime::process`, `runtime::trace`), that is the
//! untraced code the process was running; a sample outside any process keeps the whole native
//! stack (the scheduler, a plain tokio task).

use std::collections::HashMap;

use super::{SampleData, symbolize};
use crate::sampled::{
    SampleSnapshot, SnapshotFrame, SnapshotMapping, SnapshotSample, SnapshotStack, SnapshotThread,
};
use crate::trace::{Callsite, SnapshotFunction};

/// Builds a [`SampleSnapshot`]: interns frames and stacks, names addresses once each.
struct Builder<'a> {
    function_id: &'a mut dyn FnMut(&'static Callsite) -> u32,
    frames: Vec<SnapshotFrame>,
    frame_ids: HashMap<SnapshotFrame, u32>,
    stacks: Vec<SnapshotStack>,
    stack_ids: HashMap<(Option<u32>, u32), u32>,
    /// Each address's frames (outermost first), by (address, is a return address).
    symbols: HashMap<(u64, bool), Vec<super::NativeFrame>>,
}

impl Builder<'_> {
    fn frame(&mut self, frame: SnapshotFrame) -> u32 {
        if let Some(&id) = self.frame_ids.get(&frame) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        id
    }

    fn push(&mut self, parent: Option<u32>, frame: u32) -> Option<u32> {
        let next = self.stacks.len() as u32;
        let id = *self.stack_ids.entry((parent, frame)).or_insert(next);
        if id == next {
            self.stacks.push(SnapshotStack { parent, frame });
        }
        Some(id)
    }

    fn symbols(&mut self, addr: u64, ret: bool) -> Vec<super::NativeFrame> {
        self.symbols
            .entry((addr, ret))
            .or_insert_with(|| symbolize(addr, ret))
            .clone()
    }

    /// The stack of a sample: its traced frames, then the native frames kept (see the module
    /// documentation).
    fn stack(&mut self, sample: &super::Sample) -> Option<u32> {
        // Native frames, innermost first, each address with its inlined frames.
        let mut native: Vec<(u64, super::NativeFrame)> = Vec::new();
        for (i, addr) in sample.native.iter().enumerate() {
            let frames = self.symbols(*addr, i > 0);
            // Innermost (most inlined) first.
            for f in frames.into_iter().rev() {
                native.push((*addr, f));
            }
        }
        // An allocation's stack starts inside the allocator: its frames are left out.
        let from = if sample.size > 0 {
            allocator_frames(native.iter().map(|(_, f)| f))
        } else {
            0
        };
        let native = &native[from..];
        let lines = traced_lines(native, &sample.traced);
        let mut at = None;
        for (cs, line) in sample.traced.iter().zip(lines) {
            let function = (self.function_id)(cs);
            let frame = self.frame(SnapshotFrame {
                function: Some(function),
                name: String::new(),
                file: None,
                line,
                address: 0,
            });
            at = self.push(at, frame);
        }
        let keep = if sample.pid.is_none() {
            native.len()
        } else {
            kept_below(native, sample.traced.last().copied())
        };
        for (addr, f) in native[..keep].iter().rev() {
            let frame = self.frame(SnapshotFrame {
                function: None,
                name: f.function.clone(),
                file: f.file.clone(),
                line: f.line,
                address: *addr,
            });
            at = self.push(at, frame);
        }
        at
    }
}

/// The line each of `traced` (outermost first) was at, from its own native frame in `native`
/// (innermost first): the line of the sampled instruction for the innermost, of the call it
/// was in for the others. The frames are matched by name, innermost first, each after the
/// last one matched, so that a recursive function's frames each find their own; `None` for
/// a traced function whose frame is not found (no native stack, a name the native frame does
/// not carry) or whose native frame is in another file than the function (a line there would
/// mean nothing in its file).
fn traced_lines(
    native: &[(u64, super::NativeFrame)],
    traced: &[&'static Callsite],
) -> Vec<Option<u32>> {
    let mut lines = vec![None; traced.len()];
    let mut from = 0;
    for (i, cs) in traced.iter().enumerate().rev() {
        let Some(at) = native
            .get(from..)
            .and_then(|rest| rest.iter().position(|(_, f)| is_own_frame(f, cs)))
        else {
            continue;
        };
        let frame = &native[from + at].1;
        from += at + 1;
        lines[i] = frame
            .file
            .as_deref()
            .filter(|file| same_file(file, cs.file()))
            .and(frame.line);
    }
    lines
}

/// Whether native frame `frame` is traced function `cs`'s own frame: by its qualified name
/// (see [`names`]), or else, where the debug info names functions without their module (DWARF
/// of `debug = "line-tables-only"`: `crunch`, `{closure#0}`, `poll<…>`), by its bare name and
/// place: in the function's file, named as the function (`parse` for `Parser::parse`), or a
/// closure or `async` block of its body at a line within the function's lines.
pub(crate) fn is_own_frame(frame: &super::NativeFrame, cs: &Callsite) -> bool {
    if names(&frame.function, cs) {
        return true;
    }
    // The name without its generic arguments: `poll<F>` is `poll`.
    let bare = frame.function.split('<').next().unwrap_or_default();
    if bare.is_empty() || bare.contains("::") {
        return false;
    }
    if !frame
        .file
        .as_deref()
        .is_some_and(|f| same_file(f, cs.file()))
    {
        return false;
    }
    let own_name = cs.written_name().rsplit("::").next().unwrap_or_default();
    let within = frame.line.is_some_and(|l| cs.lines().contains(&l));
    bare == own_name || (bare.starts_with('{') && bare.ends_with('}') && within)
}

/// Whether a native frame's file (absolute, from the debug info) is a traced function's
/// (as `file!()` gave it: relative to the workspace it was built in, or absolute).
fn same_file(native: &str, traced: &str) -> bool {
    !traced.is_empty() && std::path::Path::new(native).ends_with(traced)
}

/// Whether native function `function` is traced function `cs`'s own frame: its name
/// (`module::name`), or its body's closure (`module::name::{{closure}}`, an `async fn`'s).
fn names(function: &str, cs: &Callsite) -> bool {
    function
        .strip_prefix(cs.module())
        .and_then(|rest| rest.strip_prefix("::"))
        .and_then(|rest| rest.strip_prefix(cs.written_name()))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::{{closure}}"))
}

/// How many of `native` (innermost first) lie below the process's innermost traced call:
/// up to that function's own frame, found by name, or else up to the runtime's poll machinery.
fn kept_below(native: &[(u64, super::NativeFrame)], innermost: Option<&'static Callsite>) -> usize {
    if let Some(cs) = innermost
        && let Some(i) = native.iter().position(|(_, f)| is_own_frame(f, cs))
    {
        return i;
    }
    native
        .iter()
        .position(|(_, f)| is_runtime_machinery(f))
        .unwrap_or(native.len())
}

/// How deep into an allocation's native stack (innermost first) the allocator's frames are
/// looked for.
const ALLOCATOR_DEPTH: usize = 24;

/// How many of an allocation's native frames (innermost first) are the allocator's: up to the
/// outermost of them within [`ALLOCATOR_DEPTH`].
pub(crate) fn allocator_frames<'a>(
    native: impl IntoIterator<Item = &'a super::NativeFrame>,
) -> usize {
    native
        .into_iter()
        .take(ALLOCATOR_DEPTH)
        .enumerate()
        .filter(|(_, f)| is_allocator(&f.function))
        .last()
        .map_or(0, |(i, _)| i + 1)
}

/// Whether a native function is the allocator's: the counting allocator and the sampler's
/// hook, or the global allocator's entry points (`__rust_alloc` and its kin, the default
/// allocator's `__rdl_*` and a `#[global_allocator]`'s `__rg_*` shims; recent compilers name
/// them inside a `__rustc` module). An allocation's stack keeps the frames outside the
/// outermost of them (those of the code that allocated; the standard library's `alloc::`
/// frames above them stay, and reports by site pass over them).
///
/// Only those names: other `__rust` symbols are the standard library's, and some sit in every
/// process's stack a few frames above the code that allocated (`__rust_try`, the landing pad
/// of the `catch_unwind` that each poll runs in). Taken for the allocator's, such a frame cut
/// the code that allocated out of the stack: an unoptimized build with `debug = "limited"`
/// sited every allocation of a traced function's body at the poll wrapper.
fn is_allocator(function: &str) -> bool {
    let f = function.trim_start_matches('<');
    if f.starts_with("runtime::heap::") || f.starts_with("runtime::sample::alloc") {
        return true;
    }
    let entry = f.strip_prefix("__rustc::").unwrap_or(f);
    matches!(
        entry,
        "__rust_alloc" | "__rust_dealloc" | "__rust_realloc" | "__rust_alloc_zeroed"
    ) || entry.starts_with("__rdl_")
        || entry.starts_with("__rg_")
}

/// Whether a native frame is the runtime's poll wrapper or trace machinery: by its qualified
/// name, or (debug info that names functions without their module) by its file, one of this
/// crate's sources there.
fn is_runtime_machinery(frame: &super::NativeFrame) -> bool {
    const MODULES: [&str; 3] = ["trace", "process", "sample"];
    let f = frame.function.trim_start_matches('<');
    MODULES.iter().any(|m| {
        f.strip_prefix("runtime::")
            .is_some_and(|r| r.starts_with(&format!("{m}::")))
    }) || frame.file.as_deref().is_some_and(|file| {
        let file = std::path::Path::new(file);
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        MODULES.iter().any(|m| file.starts_with(src.join(m)))
    })
}

/// The executable mappings of this process that hold one of `addrs`.
fn mappings(addrs: &[u64]) -> Vec<SnapshotMapping> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    let mut out: Vec<SnapshotMapping> = Vec::new();
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms), Some(offset)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let file = parts.nth(2).unwrap_or("").to_owned();
        if !perms.contains('x') || file.is_empty() {
            continue;
        }
        let Some((start, limit)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(limit), Ok(offset)) = (
            u64::from_str_radix(start, 16),
            u64::from_str_radix(limit, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        if addrs.iter().any(|a| (start..limit).contains(a)) {
            out.push(SnapshotMapping {
                start,
                limit,
                offset,
                file,
            });
        }
    }
    out
}

impl SampleData {
    /// These samples as plain data, naming native addresses; traced functions get their ids
    /// from `function_id` (the trace snapshot's function list).
    pub fn snapshot(
        &self,
        function_id: &mut dyn FnMut(&'static Callsite) -> u32,
    ) -> SampleSnapshot {
        crate::heap::suppressed(|| {
            let mut b = Builder {
                function_id,
                frames: Vec::new(),
                frame_ids: HashMap::new(),
                stacks: Vec::new(),
                stack_ids: HashMap::new(),
                symbols: HashMap::new(),
            };
            let thread_index: HashMap<u32, u32> = self
                .threads
                .iter()
                .enumerate()
                .map(|(i, t)| (t.index, i as u32))
                .collect();
            let samples = self
                .samples
                .iter()
                .map(|s| SnapshotSample {
                    pid: s.pid.map(|p| p.to_string()),
                    thread: s.thread.and_then(|t| thread_index.get(&t).copied()),
                    time_ns: s.time_ns,
                    weight: s.weight,
                    stack: b.stack(s),
                    state: s.state.map(|st| st.name().to_owned()),
                    mailbox_len: s.mailbox_len,
                    registered_name: s.registered_name.as_deref().map(str::to_owned),
                    callee: s.callee.map(|p| p.to_string()),
                    size: s.size,
                    live: s.live,
                })
                .collect();
            let mut addrs: Vec<u64> = b
                .frames
                .iter()
                .map(|f| f.address)
                .filter(|a| *a != 0)
                .collect();
            addrs.sort_unstable();
            addrs.dedup();
            SampleSnapshot {
                sampler: self.sampler.name().to_owned(),
                hz: self.hz,
                alloc_rate: self.alloc_rate,
                mappings: mappings(&addrs),
                frames: b.frames,
                stacks: b.stacks,
                samples,
                threads: self
                    .threads
                    .iter()
                    .map(|t| SnapshotThread {
                        tid: t.tid,
                        name: t.name.clone(),
                    })
                    .collect(),
                dropped: self.dropped,
                lost_frees: self.lost_frees,
                before_sampling: self.before_sampling,
                native_walked: self.native_walked,
                duration_ns: self.duration_ns,
                capacity: self.capacity as u64,
                cpu: self.cpu.as_ref().map(|cpu| {
                    let mut cpu = cpu.clone();
                    // Indices of `self.threads`, as `threads` keeps them (and samples name them).
                    cpu.threads.retain_mut(|(i, _)| match thread_index.get(i) {
                        Some(&at) => {
                            *i = at;
                            true
                        }
                        None => false,
                    });
                    cpu
                }),
            }
        })
    }
}

/// A function of the trace snapshot's list, as plain data (for a caller building one).
pub(super) fn snapshot_function(cs: &'static Callsite) -> SnapshotFunction {
    SnapshotFunction {
        module: cs.module().to_owned(),
        name: cs.function().to_owned(),
        arity: cs.arity(),
        file: cs.file().to_owned(),
        line: cs.line(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::NativeFrame;

    static OUTER: Callsite = Callsite::new("app::server", "serve", 1, "src/server.rs", 10);
    static INNER: Callsite = Callsite::new("app::server", "parse", 1, "src/server.rs", 40);

    fn native(function: &str, file: &str, line: u32) -> (u64, NativeFrame) {
        (
            0x1000,
            NativeFrame {
                function: function.to_owned(),
                file: Some(file.to_owned()),
                line: Some(line),
            },
        )
    }

    /// An allocation's stack loses the allocator's frames and no more: the standard
    /// library's other `__rust` symbols are not the allocator's, though `__rust_try` (each
    /// poll's `catch_unwind`) sits within the frames looked through in an unoptimized build.
    #[test]
    fn an_allocation_keeps_the_frames_of_the_code_that_allocated() {
        let stack: Vec<_> = [
            "runtime::heap::alloc::CountingAlloc::alloc",
            "__rustc::__rust_alloc",
            "alloc::alloc::alloc",
            "alloc::vec::Vec<T>::with_capacity",
            "app::allocate_much",
            "app::main::{{closure}}",
            "runtime::world::process::task::ProcessTask<F>::poll::{{closure}}",
            "std::panicking::catch_unwind::do_call",
            "__rust_try",
            "std::panicking::catch_unwind",
            "std::sys::backtrace::__rust_begin_short_backtrace",
        ]
        .iter()
        .map(|f| native(f, "/src/app.rs", 1))
        .collect();
        assert_eq!(
            allocator_frames(stack.iter().map(|(_, f)| f)),
            2,
            "up to __rust_alloc"
        );
        for entry in [
            "__rust_alloc",
            "__rust_dealloc",
            "__rust_realloc",
            "__rustc::__rust_alloc_zeroed",
            "__rdl_alloc",
            "__rustc::__rdl_realloc",
            "__rg_alloc",
            "<runtime::heap::alloc::CountingAlloc as core::alloc::global::GlobalAlloc>::alloc",
        ] {
            assert!(is_allocator(entry), "{entry}");
        }
        for other in [
            "__rust_try",
            "__rust_begin_short_backtrace",
            "__rustc::__rust_start_panic",
        ] {
            assert!(!is_allocator(other), "{other}");
        }
    }

    /// Each traced frame gets the line of its own native frame: the innermost the sampled
    /// line, an outer one the line of the call it was in (an `async fn`'s frame is its body's
    /// closure); frames below and between them lend none.
    #[test]
    fn traced_frames_get_the_lines_of_their_native_frames() {
        let stack = [
            native("app::checksum", "/src/app/src/sum.rs", 3),
            native("app::server::parse", "/src/app/src/server.rs", 44),
            native(
                "core::ops::function::FnOnce::call_once",
                "/rustc/x/core.rs",
                250,
            ),
            native(
                "app::server::serve::{{closure}}",
                "/src/app/src/server.rs",
                17,
            ),
            native("runtime::process::poll", "/src/runtime/process.rs", 99),
        ];
        assert_eq!(
            traced_lines(&stack, &[&OUTER, &INNER]),
            [Some(17), Some(44)]
        );
        // Recursion: each frame of `parse` finds its own, innermost first.
        let recursive = [
            native("app::server::parse", "/src/app/src/server.rs", 45),
            native("app::server::parse", "/src/app/src/server.rs", 52),
        ];
        assert_eq!(
            traced_lines(&recursive, &[&INNER, &INNER]),
            [Some(52), Some(45)]
        );
    }

    /// No native frame of the function (a wall sample, a name the frames do not carry), or
    /// one in another file: no line.
    #[test]
    fn a_traced_frame_without_its_own_native_frame_has_no_line() {
        assert_eq!(traced_lines(&[], &[&OUTER]), [None]);
        let elsewhere = [
            native("app::server::parse", "/src/other/server_copy.rs", 44),
            native("app::server::parsed", "/src/app/src/server.rs", 45),
        ];
        assert_eq!(traced_lines(&elsewhere, &[&INNER]), [None]);
    }

    static WORKER: Callsite =
        Callsite::new("kv::pool", "worker", 1, "src/pool.rs", 40).ending_at(48);
    static CRUNCH: Callsite =
        Callsite::new("kv::pool", "crunch", 1, "src/pool.rs", 25).ending_at(33);

    /// The native stack of a sample in `crunch` (called by `worker`'s `async` body) as DWARF of
    /// `debug = "line-tables-only"` names it: no module paths, closures as `{closure#0}`.
    fn line_tables_only_stack() -> Vec<(u64, NativeFrame)> {
        vec![
            native("fnv_hash", "/home/u/kv/src/pool.rs", 12),
            native("crunch", "/home/u/kv/src/pool.rs", 31),
            native(
                "{closure#0}<kv::pool::worker::{async_block_env#0}>",
                "/r/src/trace/callsite.rs",
                289,
            ),
            native("{async_block#0}", "/home/u/kv/src/pool.rs", 42),
            native(
                "poll_measured<kv::pool::worker::{async_block_env#0}>",
                "/r/src/trace/callsite.rs",
                288,
            ),
            native("poll", "/t/tokio/src/runtime/task/raw.rs", 267),
        ]
    }

    /// Without module paths in the names, a traced function's own frame is found by its name
    /// and file, and its body's `async` block by its file and lines: the native stack is cut
    /// at the traced frame, and each traced frame gets its line.
    #[test]
    fn line_tables_only_frames_are_joined_by_name_file_and_lines() {
        let stack = line_tables_only_stack();
        assert_eq!(
            traced_lines(&stack, &[&WORKER, &CRUNCH]),
            [Some(42), Some(31)]
        );
        assert_eq!(
            kept_below(&stack, Some(&CRUNCH)),
            1,
            "only fnv_hash is kept"
        );
        assert_eq!(kept_below(&stack[2..], Some(&WORKER)), 1);
    }

    /// A bare name in another file, or a closure of the same file outside the function's
    /// lines, is not the function's frame.
    #[test]
    fn bare_names_elsewhere_are_not_the_traced_frame() {
        let elsewhere = [
            native("crunch", "/home/u/kv/src/other.rs", 31),
            native("{closure#0}", "/home/u/kv/src/pool.rs", 60),
            native("{closure#0}", "/home/u/kv/src/pool.rs", 39),
        ];
        assert_eq!(traced_lines(&elsewhere, &[&CRUNCH]), [None]);
        assert_eq!(traced_lines(&elsewhere, &[&WORKER]), [None]);
        assert_eq!(kept_below(&elsewhere, Some(&CRUNCH)), 3);
    }
}
