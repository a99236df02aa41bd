//! tprof for the actor runtime: OTP's process profiler, in Rust.
//!
//! `tprof` measures the processes of a [`runtime`] node the way OTP's `tprof` measures BEAM
//! processes: **calls** per function (call_count), **time** per process and function, counted
//! only while the process is polled (call_time), and **memory** allocated per process and
//! function — words, bytes and blocks (call_memory). It runs ad hoc around one call, or as a
//! server you start on a live system, and prints tprof's own report layout, richer tables, or
//! hands you the raw data; in tests it asserts what a function allocates.
//!
//! # Set-up
//!
//! Mark the functions to measure with `#[runtime::traced]` (on a `fn`, an `async fn`, an `impl`
//! block, an `async-trait` impl). The runtime's own API (spawn, send, receive, call, ...) is
//! traced already, as BIFs are on the BEAM. For call_memory and heap figures, install the
//! counting allocator in the binary (or in each integration-test file) — one line:
//!
//! ```
//! #[global_allocator]
//! static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
//! # fn main() {}
//! ```
//!
//! Without it, call_memory fails with an error that says exactly that.
//!
//! # Ad hoc
//!
//! [`profile`] runs an async function in a new process of a private node, profiles it (and the
//! processes it spawns, `set_on_spawn`), and prints per process, as `tprof:profile/2` does:
//!
//! ```
//! use runtime::trace::TracePattern;
//! use tprof::{ProfileOptions, Report, TraceType};
//!
//! #[global_allocator]
//! static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
//!
//! #[runtime::traced(module = "example")]
//! fn seq(n: u64) -> Vec<u64> {
//!     (1..=n).collect()
//! }
//!
//! # fn main() {
//! let outcome = tprof::profile(
//!     || async { seq(16).len() },
//!     ProfileOptions::new()
//!         .trace_type(TraceType::CallMemory)
//!         .pattern(TracePattern::function("example", "seq"))
//!         .report(Report::Return), // leave it out to print the report on stdout
//! )
//! .unwrap();
//! assert_eq!(outcome.result, Ok(16));
//! let text = tprof::format_to_string(&tprof::inspect(
//!     &outcome.profile,
//!     tprof::Aggregate::Process,
//!     tprof::SortBy::default(),
//! ));
//! assert_eq!(text, concat!(
//!     "\n",
//!     "****** Process <1.0.1>  --  100.00% of total *** \n",
//!     "FUNCTION        CALLS  WORDS  PER CALL  [     %]\n",
//!     "example::seq/1      1     16     16.00  [100.00]\n",
//!     "                          16            [ 100.0]\n",
//! ));
//! # }
//! ```
//!
//! The options are tprof's, with its defaults ([`ProfileOptions`]): `type` (call_count),
//! `timeout` (none; on expiry the process is stopped, the outcome says [`Failure::Timeout`] and
//! the data gathered so far is returned), `pattern` (every traced function), `set_on_spawn`
//! (true), `rootset` (extra processes — a registered server the code calls, say — or all,
//! existing, new), `report` (per process or total, with a sort, or [`Report::Return`]) and
//! `device` (any `io::Write`). A panic in the function comes back as [`Failure::Panic`], with
//! the data; a report that cannot be printed (a closed stdout) comes back beside them
//! ([`Outcome::print_error`]). [`profile_on`] profiles on a node you already have. Nothing the
//! profiler itself does shows in the profile.
//!
//! `profile` blocks until the profile is done. **From async code** — `#[tokio::main]`,
//! `#[tokio::test]`, a process — await [`profile_async`] instead: it takes the same arguments
//! and profiles on the current process's node or, outside processes, on a private node on the
//! current tokio runtime. Called there, `profile` returns [`ProfileError::InAsyncContext`],
//! which says so. On a thread of tokio's blocking pool (`tokio::task::spawn_blocking`), where
//! blocking is what the thread is for, the blocking forms run.
//!
//! ```
//! use tprof::{ProfileOptions, Report};
//!
//! #[runtime::traced]
//! fn parse(line: &str) -> usize { line.split(',').count() }
//!
//! #[tokio::main]
//! async fn main() {
//!     let options = || ProfileOptions::new().report(Report::Return);
//!     let outcome = tprof::profile_async(|| async { parse("a,b,c") }, options()).await.unwrap();
//!     assert_eq!(outcome.result, Ok(3));
//!     assert_eq!(outcome.profile.function("parse").unwrap().entries[0].calls, 1);
//!
//!     let err = tprof::profile(|| async { parse("a") }, options()).unwrap_err();
//!     assert!(err.to_string().contains("tprof::profile_async"), "{err}");
//!
//!     let blocking = tokio::task::spawn_blocking(move || {
//!         tprof::profile(|| async { parse("a,b") }, options())
//!     });
//!     let outcome = blocking.await.unwrap().unwrap();
//!     assert_eq!(outcome.profile.function("parse").unwrap().entries[0].calls, 1);
//! }
//! ```
//!
//! # Server-aided
//!
//! On a running system, start a server ([`Tprof::start`]; one default server per node, named
//! servers beside it), give it patterns and processes, and collect while the system works:
//!
//! ```
//! use runtime::Node;
//! use runtime::trace::{ProcessSpec, TracePattern};
//! use tprof::{ServerOptions, Tprof, TraceType};
//!
//! #[runtime::traced]
//! fn handle(request: u32) -> u32 { request * 2 }
//!
//! let node = Node::new().unwrap();
//! let tprof = node
//!     .block_on(Tprof::start(&node, ServerOptions::new().trace_type(TraceType::CallTime)))
//!     .unwrap();
//! node.block_on(tprof.set_pattern(TracePattern::module(module_path!()))).unwrap();
//! node.block_on(tprof.enable_trace(ProcessSpec::New, true)).unwrap();
//! let pid = node.run(async { (0..100).map(handle).sum::<u32>(); runtime::self_pid() }).unwrap();
//! node.block_on(tprof.pause()).unwrap(); // from here on, collect is stable
//! let profile = node.block_on(tprof.collect()).unwrap();
//! let calls = &profile.function("handle").unwrap().entries[0];
//! assert_eq!((calls.group, calls.calls), (tprof::Group::Process(pid), 100));
//! node.block_on(tprof.stop()).unwrap();
//! ```
//!
//! `set_pattern` / `clear_pattern` return how many functions they matched; `get_trace_map`,
//! `enable_trace` / `disable_trace` (a pid, a name, all, existing, new, children, all
//! children, a list: a count, and the failures in input order), `pause` (an error when paused),
//! `resume` (an error when running), `restart` and `collect` are tprof's; `pause` keeps what
//! was gathered before it returns, and `stop` returns once the server has ended (its name is
//! free for the next `start`). Each server and each ad-hoc run is its own trace session:
//! stopping or restarting one never touches another (if their patterns overlap, both count the
//! same calls, as in OTP).
//!
//! # Calls outside processes
//!
//! A traced function called outside any process — in `main`, a plain `tokio::spawn` task, the
//! future given to `Node::block_on` — is measured too, under [`OUTSIDE_PROCESSES`]: one entry
//! per node (call_count, call_memory) or per thread (call_time), in the raw profile, every
//! export and [`rich_report`]. tprof's own tables ([`inspect`], [`format()`]) stay as OTP prints
//! them and end with a line saying how many such calls they leave out;
//! [`ProfileOptions::outside_processes`] (and [`ServerOptions::outside_processes`]) shows them
//! there, as groups of their own, and measures them on every thread rather than on the
//! node's only. A helper task ([`runtime::spawn_task`], [`runtime::spawn_blocking`]) is not
//! outside: its calls, time and memory are its process's.
//!
//! # Reports
//!
//! [`inspect`] turns a raw [`Profile`] into lines per process (or in total) with calls, the
//! measurement, per call and percent, sorted by any column; [`format()`] prints them in tprof's
//! layout, byte for byte (call_time in microseconds, rounded from the nanoseconds the raw data
//! keeps). tprof's layout names processes by pid only; the reports of our own name them as the
//! profile recorded them, registered name and initial call. [`rich_report`] prints
//! comfy-table tables: a per-process summary (name, initial call, calls, measurement, bytes,
//! blocks, live heap) and each process's functions with bytes and blocks per call. The
//! `pretty` export prints tprof's report between a table of the processes and, when the
//! profile has call paths, the call tree of each process. With
//! [`ProfileOptions::percentiles`], call_time also keeps, per process and function, the
//! distribution of each call's own time — the time column's measure, call by call — to the
//! precision [`ProfileOptions::percentile_precision`] asks for; the rich tables show its p50,
//! p90, p99 and max beside the time per call.
//!
//! # Call trees and exports
//!
//! tprof's tables are flat. With [`ProfileOptions::call_tree`] (or
//! [`ServerOptions::call_tree`]), call_time and call_memory are also measured per traced call
//! path — `summer → parse`, `client → send` — in [`Profile::call_tree`]; the flat table is the
//! sum of the paths that end in each function. [`export::write`] writes any profile in the
//! formats people open profiles with ([`export::Format`]): `pretty` (tprof's report, the
//! processes named, and the call tree), `json`,
//! `speedscope`, `chrome` (Perfetto), `pprof` (`go tool pprof`), `folded`, `svg` (a flame
//! graph) and `html` (a self-contained viewer with a zoomable, searchable flame graph and the
//! per-process tables). A profile without call paths draws each function as one frame. With
//! [`ProfileOptions::event_log`], each process also keeps a bounded log of its traced frames
//! entered and left, with their times ([`Profile::event_logs`]): the `chrome` export then
//! draws its real timeline.
//!
//! ```
//! use runtime::trace::TracePattern;
//! use tprof::export::{self, Format};
//! use tprof::{ProfileOptions, Report, TraceType};
//!
//! #[global_allocator]
//! static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
//!
//! #[runtime::traced(module = "example")]
//! fn leaf() -> Vec<u64> {
//!     vec![0; 4]
//! }
//!
//! #[runtime::traced(module = "example")]
//! fn branch() -> usize {
//!     leaf().len() + leaf().len()
//! }
//!
//! # fn main() {
//! let outcome = tprof::profile(
//!     || async { branch() },
//!     ProfileOptions::new()
//!         .trace_type(TraceType::CallMemory)
//!         .call_tree(true)
//!         .pattern(TracePattern::module("example"))
//!         .report(Report::Return),
//! )
//! .unwrap();
//! let folded = export::to_string(Format::Folded, &outcome.profile).unwrap();
//! // The process, then the path; valued in bytes: two calls of leaf, 32 bytes each.
//! assert!(folded.ends_with(";example::branch;example::leaf 64\n"), "{folded}");
//! # }
//! ```
//!
//! # Sampling
//!
//! [`ProfileOptions::sample`] profiles in sample mode ([`runtime::sample`]): a CPU sampler
//! records what each worker thread runs — the process, its traced stack and the native code
//! below it, so untraced code shows up with no change to it — or a wall sampler where every
//! process waits. The samples are in [`Profile::samples`], and [`sample_report`] prints them
//! as Julia's `Profile.print` does: the tree of stacks and the flat list of frames, with
//! `maxdepth`, `mincount`, `noisefloor`, `sortedby`, `groupby` (process, thread), `recur`,
//! `combine`, which native frames show — by default the user's code, the runtime's, tokio's
//! and std's plumbing folded ([`sample_report::Native`]) —, the frames of some crates only,
//! and pprof's `focus` and `hide` ([`sample_report::PrintOptions`]);
//! [`sample_report::callers`] says who called a function. A report of wall samples starts
//! with where the processes wait, per state and per process. The `pretty` export of a profile
//! with samples is that tree and that list. [`Profile::listing`] annotates the source of the
//! functions a regular expression matches, line by line, as `go tool pprof -list` does
//! ([`listing`]).
//!
//! ```
//! # #[cfg(target_os = "linux")] {
//! use runtime::sample::SampleOptions;
//! use tprof::sample_report::{self, GroupBy, PrintOptions};
//! use tprof::{ProfileOptions, Report};
//!
//! #[runtime::traced]
//! fn checksum(n: u64) -> u64 {
//!     (0..n).fold(0, |a, i| a.rotate_left(5) ^ i)
//! }
//!
//! let outcome = tprof::profile(
//!     || async { (0..100).fold(0, |a, _| a ^ checksum(100_000)) },
//!     ProfileOptions::new().sample(SampleOptions::new().hz(999)).report(Report::Return),
//! )
//! .unwrap();
//! let options = PrintOptions::new().groupby(GroupBy::Process).native(false);
//! let mut text = Vec::new();
//! sample_report::print(&mut text, &outcome.profile, &options).unwrap();
//! let text = String::from_utf8(text).unwrap();
//! if !outcome.profile.samples.samples.is_empty() {
//!     // What the CPU samples could see comes first, then the tree.
//!     assert!(text.starts_with("CPU samples by "));
//!     assert!(text.contains("\nOverhead ╎ [+additional indent] Count File:Line; Function\n"));
//! }
//! # }
//! ```
//!
//! ```text
//! Overhead ╎ [+additional indent] Count File:Line; Function
//! =========================================================
//! Process <1.0.1> Total snapshots: 130. Utilization: 75%
//!   3╎130 src/main.rs:16; app::work/0
//! 127╎ 127 src/main.rs:11; app::busy/1
//! ```
//!
//! ## Allocations
//!
//! The allocation sampler ([`Sampler::Alloc`](runtime::sample::Sampler::Alloc), in
//! [`runtime::CountingAlloc`]) samples allocations by bytes (one sample per 512 KiB on
//! average, as Go and jemalloc do) or with Julia's `sample_rate` ([`runtime::sample::AllocRate`];
//! 1 records every allocation). Each sample weighs the bytes it stands for, so reports and
//! exports estimate the bytes and allocations per stack, process and site; a sampled block that
//! is freed leaves the live set, shown as "in use". [`alloc_sites`] sums them per allocation
//! site, [`Profile::sampled_allocations`] per function for assertions, and pprof writes Go's
//! heap profile (`alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space`).
//!
//! ```
//! #[global_allocator]
//! static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
//!
//! #[runtime::traced]
//! fn build(n: usize) -> Vec<u64> { (0..n as u64).collect() }
//!
//! # fn main() {
//! # if cfg!(target_os = "linux") {
//! use runtime::sample::{AllocRate, SampleOptions, Sampler};
//! use tprof::{ProfileOptions, Report};
//!
//! let outcome = tprof::profile(
//!     || async { build(1000).len() },
//!     ProfileOptions::new()
//!         .sample(
//!             SampleOptions::new()
//!                 .sampler(Sampler::Alloc)
//!                 .alloc_rate(AllocRate::SampleRate(1.0)),
//!         )
//!         .report(Report::Return),
//! )
//! .unwrap();
//! let built = outcome.profile.sampled_allocations("build", None);
//! assert_eq!((built.objects, built.bytes), (1.0, 8000.0));
//! # }
//! # }
//! ```
//!
//! # Archives
//!
//! [`archive::write`] saves a [`Profile`] in a compact, versioned, checksummed `.tprof` file
//! that [`archive::read`] reads back exactly, on another machine or with a later tprof;
//! [`archive::merge`] combines the profiles of several runs into one, keeping their processes
//! apart.
//!
//! # Heap snapshots
//!
//! [`heap_snapshot`] writes a node's processes as a Chrome DevTools `.heapsnapshot` (open it in
//! DevTools' Memory tab, or memlab): each process with its heap, its mailbox, its name and, from
//! an allocation profile's live set, its sampled live allocation sites ([`HeapSnapshot`],
//! [`LiveSite`]); supervisors hold their children, so retained sizes say which supervisor
//! subtree holds memory, and links and monitors are weak edges. It streams, and never stops the
//! node ([`runtime::heap_snapshot`] tells the shape). `tprof run --heap-snapshot FILE` takes
//! one of a program as it stops, or as SIGINT or SIGTERM arrives.
//!
//! ```
//! #[global_allocator]
//! static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
//!
//! # fn main() {
//! let node = runtime::Node::new().unwrap();
//! node.run(async {
//!     let parent = runtime::self_pid();
//!     let cache = runtime::spawn(async move {
//!         let table = vec![0u8; 1 << 20];
//!         runtime::send(parent, ()); // the table is there
//!         let () = runtime::receive().await;
//!         drop(table);
//!     })
//!     .unwrap();
//!     runtime::register("cache", cache).unwrap();
//!     let () = runtime::receive().await;
//! })
//! .unwrap();
//! let mut file = Vec::new(); // a `File` in real use
//! let written = tprof::heap_snapshot(&node, &mut file).unwrap();
//! assert_eq!(written.processes, 1);
//! let snapshot: serde_json::Value = serde_json::from_slice(&file).unwrap();
//! // The cache's node: an object named after what it runs, its self size its live heap.
//! let strings = snapshot["strings"].as_array().unwrap();
//! let nodes = snapshot["nodes"].as_array().unwrap();
//! let cache = nodes.chunks(7).find(|n| n[3].as_u64().unwrap() >= 1 << 20).unwrap();
//! assert!(strings[cache[1].as_u64().unwrap() as usize].as_str().unwrap().contains("main"));
//! assert!(strings.iter().any(|s| s == "cache"));
//! # }
//! ```
//!
//! # The `tprof` command
//!
//! `cargo install --path tprof` installs it: it is the crate's feature `cli`, on by default. A
//! program that only profiles itself can leave it out (`default-features = false`), and with
//! it the command's own dependencies (clap, indicatif, ctrlc). The command profiles any
//! program built on the runtime without a change to its code — the runtime reads the environment as a node starts and
//! writes what it gathered as the node stops ([`runtime::trace::env_run`]) — and turns
//! profile files into any export:
//!
//! ```text
//! tprof run --type call_time -- ./my_service --port 8080   # writes my_service.tprof
//! tprof run -t call_memory -f pprof -o mem.pb.gz -- ./my_service
//! tprof report --format speedscope -o time.speedscope.json my_service.tprof
//! tprof report --groupby process --no-native --maxdepth 12 sampled.json   # a sample profile
//! tprof report --list 'app::serve' sampled.json            # its source, line by line
//! tprof run --mode alloc --sample-rate 1 -f pprof -o heap.pb.gz -- ./my_service
//! tprof merge -o all.tprof monday.tprof tuesday.tprof
//! tprof view my_service.tprof                              # the HTML viewer, in a browser
//! tprof run -o - -- ./my_service | tprof report -f folded - # `-`: standard output / input
//! tprof run --heap-snapshot heap.heapsnapshot -- ./my_service # and a heap snapshot as it stops
//! ```
//!
//! `run` measures call paths too (`--flat` turns that off); call_memory needs the program to
//! install [`runtime::CountingAlloc`]. Without `--format`, `-o`'s extension names the format
//! (`x.speedscope.json`, `x.svg`; an archive otherwise). A program killed by SIGINT or SIGTERM
//! writes its profile as it dies; one killed by SIGKILL leaves a snapshot at most
//! `--snapshot-every` seconds old (default 2), and `run` says how old. `report`, `merge` and
//! `view` also read the run files a program run with `TPROF_RUN` set writes, and their folder.
//! Exit codes: 2 bad usage, 3 a file that is not a profile or is damaged (the message names the
//! file and the byte, or what kind of file it looks like and what reads it), 4 a program that
//! cannot run or wrote no profile; `run` passes on the program's own exit code when it fails,
//! after writing its profile. `report`'s pretty report of a profile with samples takes
//! Julia's options (`--maxdepth`, `--mincount`, `--noisefloor`, `--sortedby`, `--groupby`,
//! `--recur`, `--no-native`, `--no-combine`, `--width`: `tprof report --help`); `--list
//! REGEX` prints the annotated source of the functions it matches instead (`--source-path`:
//! where relative source paths are read from; `--list-sampler cpu|wall`: whose samples).
//! The library side is [`command`].
//!
//! # Testing what allocates
//!
//! The most common allocation question in Rust — "does this handler allocate?" — is one call
//! of [`allocations`] and one assertion. It runs on a private multi-thread node, so tests in
//! parallel never see each other, and a failed check prints the table of the processes that
//! called the function (from async code, `#[tokio::test]` above all, await
//! [`allocations_async`]):
//!
//! ```
//! #[global_allocator]
//! static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
//!
//! #[runtime::traced]
//! fn parse(line: &str) -> Vec<&str> { line.split(',').collect() }
//!
//! #[runtime::traced]
//! fn sum(fields: &[&str]) -> u64 { fields.iter().filter_map(|f| f.parse::<u64>().ok()).sum() }
//!
//! # fn main() {
//! let report = tprof::allocations(|| async { sum(&parse("1,2,3")) });
//! assert_eq!(report.result, Ok(6));
//! report.function("sum").calls(1).allocates_nothing();
//! report.function("parse").calls(1).blocks_per_call(1);
//! # }
//! ```
//!
//! # Layers
//!
//! The modules are laid in four layers, lowest first. **The one rule: a module uses only those
//! of its own layer and below**, and no modules of a layer use each other in a circle
//! (`tests/layers.rs` checks both on the sources: a new module goes in its list and here).
//!
//! 1. **Data** — `functions` (traced functions and call paths, each stored once), `samples`
//!    (sample mode's samples) and `profile` (the [`Profile`] holding both, and its figures):
//!    plain data, which every layer above reads.
//! 2. **Reports** — a profile as text: `choice` (an option's choices, parsed), `inspect` and
//!    `format` (tprof's tables), `table` (the rich tables), `sample_report`, `alloc_sites` and
//!    `listing`.
//! 3. **Exports** — a profile as a file: `export` (the formats others read) and `archive`
//!    (tprof's own).
//! 4. **Command** — what takes a profile and shows it: `adhoc` ([`profile()`]), `server`
//!    ([`Tprof`]), `assert` ([`allocations`]), `notebook`, `peek`, `control` and `command`
//!    (the `tprof` binary's library side; the binary in `src/bin/` is a crate of its own).

mod adhoc;
pub mod alloc_sites;
pub mod archive;
mod assert;
mod choice;
pub mod command;
#[cfg(unix)]
pub mod control;
pub mod export;
mod format;
mod functions;
mod inspect;
pub mod listing;
mod notebook;
#[cfg(unix)]
pub mod peek;
mod profile;
pub mod sample_report;
pub mod samples;
mod server;
mod table;

pub use adhoc::{
    Failure, Outcome, ProcessRef, ProfileError, ProfileOptions, Report, RootSet, profile,
    profile_async, profile_on,
};
pub use assert::{
    Allocated, Allocations, FunctionCheck, allocations, allocations_async, allocations_async_with,
    allocations_with,
};
pub use comfy_table;
pub use format::{format, format_group, format_to_string};
pub use functions::{Function, PathNode};
pub use inspect::{
    Aggregate, Column, Direction, GroupProfile, Inspected, Line, SortBy, inspect, sort_lines,
};
pub use notebook::{notebook_blocks, notebook_blocks_of_tables};
pub use profile::{
    CallTree, Entry, Event, EventKind, EventLog, FunctionTrace, Group, Labels, LookupError, Meta,
    OUTSIDE_PROCESSES, PathEntry, Percentiles, ProcessRecord, Profile, RUN_QUEUE_NOTE_SHARE, Run,
    TraceType, TraceTypeError,
};
pub use runtime::heap_snapshot::{HeapSnapshot, LiveSite, SnapshotSummary, heap_snapshot};
pub use server::{DEFAULT_NAME, ServerError, ServerOptions, Tprof};
pub use table::{function_table, process_summary, rich_report};
