//! Sampling processes: what each worker runs (CPU), and where every process waits (wall).
//!
//! A [`SampleSession`] is a trace session ([`TraceSession`]) of type [`TraceTypes::SAMPLE`]
//! (which keeps the traced stack of the processes it samples, and counts their calls per
//! function: the profile has each traced function's calls too) plus a sampler: its patterns say which traced functions appear in the samples' traced
//! stacks, and its process flags which processes are sampled, exactly as for tracing
//! ([`SampleSession::trace`]). It coexists with trace sessions and other sample sessions.
//!
//! - [`Sampler::Cpu`] (the default): every thread that runs the node's processes gets a perf
//!   event on its own task clock (or, where perf events are refused, a timer on its CPU-time
//!   clock: [`CpuSource`]), at [`SampleOptions::hz`] (99 by default, at most 10,000); the
//!   threads of nodes no CPU session samples get none (a thread of a runtime several nodes
//!   share is timed while any node's CPU session runs). Each tick records, from a signal
//!   handler on that thread and without locks or allocation, the pid being polled (or none:
//!   time spent outside processes, in the scheduler or in plain tokio tasks), the process's
//!   traced stack, the thread's native stack walked by frame pointers, the thread, a
//!   timestamp and a weight (the CPU time the thread's clock counted since its last sample;
//!   on timers, `1 + timer overruns` periods). The perf events sample kernel mode too where
//!   the kernel allows it (`perf_event_paranoid` 1 or less, or `CAP_PERFMON`); at the usual
//!   default, 2, user mode only: a period that ends in a system call is no sample of its
//!   own, its CPU time goes to the thread's next sample, and code that lives in system calls
//!   (message passing's futex wakes) takes fewer distinct samples than the rate asked. A
//!   profile says which ([`CpuCoverage::kernel`]). Native addresses are named later
//!   ([`symbolize`]). Untraced code thus shows up with no code change, and the traced stack
//!   says which process and which traced call it ran under. Linux only.
//! - [`Sampler::Wall`]: a thread of its own samples processes, running or not, at `hz`: a
//!   bounded number of slots chosen at random per tick ([`SampleOptions::per_tick`]), so its
//!   cost does not grow with the process count. Each sample gives the process's state
//!   ([`ProcessState`]: running, runnable, waiting in `receive`, in a `call`, ...), registered
//!   name, mailbox length and the traced path it last suspended in. Julia 1.12's all-tasks
//!   profiler and Go's goroutine profile, for actors. [`SampleSession::census`] samples every
//!   process once, on demand.
//!
//! - [`Sampler::Alloc`]: allocations, in the counting allocator
//!   ([`CountingAlloc`](crate::CountingAlloc)): Poisson sampling by bytes, one sample per
//!   [`AllocRate::Bytes`] bytes on average (512 KiB by default, as Go and jemalloc), or
//!   Julia's `sample_rate`, each allocation with a probability ([`AllocRate::SampleRate`]; 1
//!   records every one). Each sample is one allocation made while polling a sampled process:
//!   its size ([`Sample::size`]), the bytes it stands for ([`Sample::weight`], its inverse
//!   probability times its size: an unbiased estimate of the bytes allocated), the pid, the
//!   traced and native stacks and a timestamp. The allocator writes it into a per-thread ring
//!   without allocating or locking; the drain does the rest. Linux only.
//!
//! Samples go into a bounded buffer of [`SampleOptions::n`] samples (Julia's `init(n, delay)`);
//! when it is full, a warning names the setting to raise, later samples are counted as dropped,
//! and the program runs on. [`SampleSession::samples`] copies them out (Julia's `fetch`),
//! [`SampleSession::clear`] forgets them.
//!
//! A session open for days under a service that spawns a process per request stays bounded:
//! what it keeps of a process that has ended is its calls, summed with every ended process's,
//! and, while the buffer holds samples of it, its name (see
//! [processes that end](SampleSession#processes-that-end)).
//!
//! ```
//! use runtime::Node;
//! use runtime::sample::{SampleOptions, Sampler};
//! use runtime::trace::{ProcessSpec, TracePattern};
//!
//! #[runtime::traced]
//! async fn wait_for_work() -> u64 { runtime::receive::<u64>().await }
//!
//! let node = Node::new().unwrap();
//! let session = node
//!     .sample_session(SampleOptions::new().sampler(Sampler::Wall).hz(500))
//!     .unwrap();
//! session.trace().set_pattern(&TracePattern::all()).unwrap();
//! session.trace().enable_trace(ProcessSpec::New, true).unwrap();
//! let idle = node.spawn(async { wait_for_work().await; }).unwrap();
//! // A census reads every sampled process now: this one waits in `receive`.
//! let seen = loop {
//!     let census = session.census();
//!     if let Some(s) = census.iter().find(|s| s.pid == Some(idle) && !s.traced.is_empty()) {
//!         break s.clone();
//!     }
//!     std::thread::sleep(std::time::Duration::from_millis(5));
//! };
//! assert_eq!(seen.state, Some(runtime::sample::ProcessState::Receive));
//! assert!(seen.traced.iter().any(|cs| cs.function() == "wait_for_work"));
//! node.send(idle, 1u64);
//! ```
//!
//! # Building for samples: frame pointers and debug info
//!
//! Native stacks are walked by frame pointers, which Rust omits by default: build with
//! `RUSTFLAGS="-C force-frame-pointers=yes"` (or in `.cargo/config.toml`, as this workspace
//! does) for whole native stacks. A session tells whether this build's stacks walk
//! ([`SampleData::native_walked`]) and says so once on stderr when they do not; samples then
//! keep the interrupted instruction and their traced stacks.
//!
//! For file and line, the recommended setting is `debug = "line-tables-only"` in the profile
//! you build with (`[profile.release]`): the smallest debug info with lines. Each level, with
//! frame pointers (`tests/join_debug_levels.rs` builds a traced function calling untraced
//! helpers at each and checks it):
//!
//! | `debug =` | native frames | a traced function's samples |
//! | --- | --- | --- |
//! | `0` | function names (symbol table), no file or line | cut at the traced frame; listings put its time on its `fn` line, allocation sites too |
//! | `"line-tables-only"` (recommended) | names, file and line | cut at the traced frame, each on the line it ran |
//! | `"limited"` | the same | the same |
//! | `"full"` | the same, a larger binary | the same |
//!
//! With line tables only, DWARF names functions without their module (`crunch`,
//! `{closure#0}`); the symbol table gives each sampled function its full name, and the native
//! frame of a traced function is found by name, file and lines. A function inlined into
//! another keeps the bare name DWARF gives it (the symbol table names only the function it
//! was inlined into).
//!
//! # Signals
//!
//! The CPU sampler uses SIGPROF: a program (or another profiler) with its own SIGPROF handler
//! gets [`SampleError::SignalTaken`] rather than a broken handler. System calls interrupted by
//! it restart (`SA_RESTART`).

use std::fmt;
use std::sync::Arc;

use crate::node::NodeHandle;
use crate::trace::{Callsite, TraceSession, TraceTypes, paths};
// The CPU profile's coverage is plain data now (`crate::sampled`); the samplers keep
// naming it `super::truth`.
use crate::sampled::truth;

#[cfg(target_os = "linux")]
mod alloc;
#[cfg(target_os = "linux")]
mod cpu;
mod data;
mod ended;
mod native;
mod open;
mod options;
#[cfg(target_os = "linux")]
mod perf;
mod ring;
mod snapshot;
pub(crate) use snapshot::{allocator_frames, is_own_frame};
mod store;
mod symbols;
mod symtab;
#[cfg(all(test, target_os = "linux"))]
mod tests;
mod threads;
mod wall;
#[cfg(target_os = "linux")]
mod workers;

pub use crate::sampled::{
    AllocRate, DEFAULT_ALLOC_RATE_BYTES, SampleSnapshot, SnapshotFrame, SnapshotMapping,
    SnapshotSample, SnapshotStack, SnapshotThread,
};
pub use crate::sampled::{BUSY_THREAD_NS, CpuCoverage, CpuSource, JUDGED_PERIODS, ThreadCoverage};
use data::live_sites;
pub use data::{LiveSite, ProcessState, Sample, SampleData, SampledThread};
pub use native::walkable as native_stacks_walkable;
pub use open::{OpenSampleSession, PollMeasuringSession};
pub use options::{MAX_HZ, SampleError, SampleOptions, Sampler};
pub use symbols::{NativeFrame, symbolize, symbolize_all};

/// A sampler and the trace session whose patterns and flags select what it samples. Stops
/// when dropped.
///
/// # What it costs a process
///
/// A poll of a process that the session alone measures (the common case) keeps the process's
/// traced calls on the thread's traced stack for the sampler to read, and counts each call in
/// the polling thread's counters for the session, as call_count counts: nothing is gathered
/// per process during the poll, so nothing is moved anywhere when it ends. Measured with
/// callgrind on ping-pong (a round trip is two polls and four traced calls, `send` and
/// `receive` on each side, on a current-thread node), a CPU session adds about 940 instructions per round trip to an unprofiled 2,060, and
/// a wall session 1,310, where measuring each poll as call_time does added 2,160 and 3,080
/// (`examples/pingpong_ir.rs`). A poll that another session measures as well, and a helper
/// task's, are measured as that session's are, and count their calls into the process's
/// table.
///
/// # Processes that end
///
/// The trace session keeps a table per process it samples, made at its first poll: its
/// initial call and its registered name, which label its samples, and the calls its polls
/// shared with other sessions made (the rest are counted per thread, apart from any process).
/// Once a process has ended (its record dropped) and the samples taken of it are in the buffer
/// (drained from the threads' rings), the session *folds* it: its calls join the calls of
/// every ended process, one counter per traced function, and its table goes. All an ended
/// process leaves behind is those calls, and, while the buffer holds samples of it, a row of
/// its pid, initial call and name with no figures ([`clear`](Self::clear) lets those rows go
/// at the next fold). So what the session holds grows with its live processes and the samples
/// it keeps, never with the processes it has seen.
///
/// A fold walks the session's tables, so it runs once their number has doubled since the last
/// one (and reached 1,024), on the sampler's own thread; the tables of ended processes not
/// folded yet are read as before. A paused session folds nothing. In a
/// [`snapshot`](Self::snapshot), the calls counted per thread and those of the processes
/// folded are its [`call_counts`](crate::trace::Snapshot::call_counts), and the others are in
/// the processes' rows, [`processes`](crate::trace::Snapshot::processes): a profile's calls
/// per function are the two together, as `tprof` sums them; [`TraceSession::measurements`]
/// gives the rows.
pub struct SampleSession {
    store: Arc<store::Store>,
    /// Folds its ended processes.
    ended: Arc<ended::Ended>,
    options: SampleOptions,
    node: NodeHandle,
    wall: Option<wall::WallSampler>,
    native_walked: bool,
    // Dropped last: the sampler stops first.
    trace: TraceSession,
}

impl fmt::Debug for SampleSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SampleSession")
            .field("sampler", &self.options.sampler)
            .field("hz", &self.options.hz)
            .field("trace", &self.trace)
            .finish_non_exhaustive()
    }
}

impl NodeHandle {
    /// Opens a sample session on this node: a trace session of type
    /// [`TraceTypes::SAMPLE`] with no patterns and no process flags (set them through
    /// [`SampleSession::trace`]), and its sampler, started.
    ///
    /// # Errors
    /// [`SampleError::Rate`] or [`SampleError::NoBuffer`] for options out of range;
    /// [`SampleError::Unsupported`] for the CPU sampler off Linux; [`SampleError::SignalTaken`]
    /// when SIGPROF has another handler; [`SampleError::RateTaken`] when a CPU session runs at
    /// another rate; [`SampleError::Session`] when no trace session slot is free.
    pub fn sample_session(&self, options: SampleOptions) -> Result<SampleSession, SampleError> {
        if options.hz == 0 || options.hz > MAX_HZ {
            return Err(SampleError::Rate { hz: options.hz });
        }
        if options.n == 0 {
            return Err(SampleError::NoBuffer);
        }
        if options.sampler != Sampler::Wall && !cfg!(target_os = "linux") {
            return Err(SampleError::Unsupported);
        }
        if options.sampler == Sampler::Alloc && !options.alloc_rate.valid() {
            return Err(SampleError::AllocRate {
                rate: options.alloc_rate,
            });
        }
        let trace = self
            .trace_session_with(TraceTypes::SAMPLE)
            .map_err(SampleError::Session)?;
        let store = Arc::new(store::Store::new(
            trace.slot(),
            self.id(),
            options.sampler,
            options.n,
            options.hz,
        ));
        let ended = ended::Ended::new(
            trace.slot(),
            trace.generation(),
            Arc::clone(&store),
            options.sampler != Sampler::Wall,
        );
        let mut native_walked = false;
        let mut wall = None;
        match options.sampler {
            Sampler::Cpu => {
                #[cfg(target_os = "linux")]
                {
                    cpu::start(options.hz, self.id(), options.cpu_source)?;
                    // This thread may run the node's processes (`Node::run` on a
                    // current-thread node): registered for it (shared, if it is another
                    // node's thread).
                    threads::register_current(self.id());
                    // And every worker of its runtime, which may run plain tokio tasks and
                    // never a process.
                    workers::register_workers(&self.inner.handle, self.id());
                    // Each timed thread's CPU time counts from here.
                    store.begin_coverage();
                    store::add_store(Arc::clone(&store));
                }
                native_walked = native::walkable();
                if !native_walked {
                    warn_unwalkable();
                }
            }
            Sampler::Alloc => {
                #[cfg(target_os = "linux")]
                {
                    alloc::start(options.alloc_rate)?;
                    threads::register_current(self.id());
                    store::add_store(Arc::clone(&store));
                }
                native_walked = native::walkable();
            }
            Sampler::Wall => {
                paths::want(trace.slot(), true);
                wall = Some(
                    wall::start(
                        Arc::clone(&self.inner),
                        Arc::clone(&store),
                        Arc::clone(&ended),
                        options.hz,
                        options.per_tick,
                    )
                    .map_err(|error| SampleError::Os {
                        what: "spawning the wall sampler's thread",
                        error,
                    })?,
                );
            }
        }
        open::opened(self.id(), trace.slot(), options.sampler, options.hz);
        Ok(SampleSession {
            store,
            ended,
            options,
            node: self.clone(),
            wall,
            native_walked,
            trace,
        })
    }
}

/// Says once per program that native stacks cannot be walked.
fn warn_unwalkable() {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!(
            "tprof: this program was built without frame pointers, so CPU samples keep only \
             the interrupted function of each native stack (traced stacks are whole); build \
             with RUSTFLAGS=\"-C force-frame-pointers=yes\" for whole native stacks"
        );
    });
}

impl SampleSession {
    /// The trace session under it: set patterns (which traced functions appear in the traced
    /// stacks) and process flags (which processes are sampled) here; pause, resume and restart
    /// it here too. Its [`snapshot`](TraceSession::snapshot) counts the sampled processes' calls
    /// per function (see [processes that end](Self#processes-that-end)).
    pub fn trace(&self) -> &TraceSession {
        &self.trace
    }

    /// The options it was opened with.
    pub fn options(&self) -> &SampleOptions {
        &self.options
    }

    /// A copy of the samples taken so far (Julia's `fetch`): every one taken before the call.
    pub fn samples(&self) -> SampleData {
        if self.options.sampler != Sampler::Wall {
            store::drain();
            // When it is due (the drain thread's folds may be missing: a thread that could not
            // be started).
            self.ended.fold();
        }
        crate::heap::suppressed(|| {
            // The CPU each timed thread used, read now: it may add threads to the store's.
            #[cfg(target_os = "linux")]
            let cpu = (self.options.sampler == Sampler::Cpu).then(|| self.store.coverage());
            #[cfg(not(target_os = "linux"))]
            let cpu = None;
            // The threads as the drain found them when it took their samples: an entry of the
            // registry may be another thread's by now.
            let (samples, dropped, lost_frees, before_sampling, threads) = {
                let inner = self.store.inner.lock();
                (
                    inner.samples.clone(),
                    inner.dropped,
                    inner.lost_frees,
                    inner.before_sampling,
                    inner.threads.clone(),
                )
            };
            SampleData {
                sampler: self.options.sampler,
                hz: if self.options.sampler == Sampler::Alloc {
                    0
                } else {
                    self.options.hz
                },
                alloc_rate: (self.options.sampler == Sampler::Alloc)
                    .then_some(self.options.alloc_rate),
                samples,
                dropped,
                lost_frees,
                before_sampling,
                threads,
                native_walked: self.native_walked,
                duration_ns: store::now_ns().saturating_sub(*self.store.started_ns.lock()),
                capacity: self.options.n,
                cpu,
            }
        })
    }

    /// The trace session's snapshot (the sampled processes' names and call counts) with these
    /// samples in it, native addresses named: plain data for `tprof` (Julia's `retrieve`).
    pub fn snapshot(&self) -> crate::trace::Snapshot {
        self.snapshot_of(self.samples())
    }

    /// The trace session's snapshot with a [`census`](Self::census) as its samples: one
    /// sample per sampled process, at the path it runs or waits in (Go's goroutine profile).
    /// Its `before_sampling` counts the processes whose path is unknown, their current or last
    /// poll having begun before sampling began ([`Sample::before_sampling`]).
    pub fn census_snapshot(&self) -> crate::trace::Snapshot {
        let mut data = self.samples();
        data.samples = self.census();
        data.dropped = 0.0;
        data.before_sampling = data.samples.iter().filter(|s| s.before_sampling).count() as u64;
        self.snapshot_of(data)
    }

    /// The trace session's snapshot with `data` as its samples, native addresses named.
    fn snapshot_of(&self, data: SampleData) -> crate::trace::Snapshot {
        let mut snap = self.trace.snapshot();
        crate::heap::suppressed(|| {
            let mut index: std::collections::HashMap<crate::trace::SnapshotFunction, u32> = snap
                .functions
                .iter()
                .enumerate()
                .map(|(i, f)| (f.clone(), i as u32))
                .collect();
            let functions = &mut snap.functions;
            let mut function_id = |cs: &'static Callsite| {
                let f = snapshot::snapshot_function(cs);
                *index.entry(f.clone()).or_insert_with(|| {
                    functions.push(f);
                    (functions.len() - 1) as u32
                })
            };
            let samples = data.snapshot(&mut function_id);
            snap.samples = Some(samples);
        });
        snap
    }

    /// The live set (allocation sessions): the samples of blocks not freed yet, as of now,
    /// summed per process and stack. Each entry estimates the bytes and allocations that
    /// process holds, allocated at that stack ([`LiveSite`]). Empty for other samplers.
    pub fn live(&self) -> Vec<LiveSite> {
        if self.options.sampler != Sampler::Alloc {
            return Vec::new();
        }
        let data = self.samples();
        crate::heap::suppressed(|| live_sites(&data.samples))
    }

    /// Forgets the samples taken so far and the drops (Julia's `clear`); the threads' CPU time
    /// counts from here again.
    pub fn clear(&self) {
        if self.options.sampler != Sampler::Wall {
            store::drain();
        }
        self.ended.clear(|| self.store.clear());
        #[cfg(target_os = "linux")]
        if self.options.sampler == Sampler::Cpu {
            self.store.begin_coverage();
        }
    }

    /// Every process this session samples, read once now (weight 1 each), whatever the
    /// sampler: its state, name, mailbox and where it waits. Takes no process's time: it reads
    /// what their polls published. Where a process waits is known when a wall sample session
    /// measured the poll it suspended in; a process running, or suspended after, a poll that
    /// began before any did has [`Sample::before_sampling`] set (a census by a session just
    /// opened finds every process that has not polled since so).
    pub fn census(&self) -> Vec<Sample> {
        let time = store::now_ns().saturating_sub(*self.store.started_ns.lock());
        wall::census(&self.node.inner, self.trace.slot(), time)
    }

    /// What the wall sampler's thread has done so far (tests; zero for other samplers).
    #[cfg(test)]
    pub(crate) fn wall_counts(&self) -> wall::Counts {
        self.wall
            .as_ref()
            .map(wall::WallSampler::counts)
            .unwrap_or_default()
    }
}

impl Drop for SampleSession {
    fn drop(&mut self) {
        open::closed(self.node.id(), self.trace.slot());
        self.ended.close();
        match self.options.sampler {
            Sampler::Cpu => {
                #[cfg(target_os = "linux")]
                {
                    store::remove_store(&self.store);
                    cpu::stop(self.node.id());
                }
            }
            Sampler::Alloc =>
            {
                #[cfg(target_os = "linux")]
                if store::remove_store(&self.store) == 0 {
                    alloc::stop();
                }
            }
            Sampler::Wall => {
                self.wall.take();
                paths::want(self.trace.slot(), false);
            }
        }
    }
}

/// Wakes the wall sampler of session slot `bit` (if any): its session measures again.
// linkme's `link_section` static is flagged by `unsafe_code`; nothing here is unsafe.
#[allow(unsafe_code)]
#[linkme::distributed_slice(crate::trace::MEASURING_RESUMED)]
static MEASURING_RESUMED: fn(u32) = wall::resumed;

/// At each poll of a process of node `node` while the CPU or the allocation sampler runs (the
/// process layer's [`on_poll`](crate::world::observe::on_poll) checks that with one load):
/// makes sure the polling thread has a timer and rings (a thread of a runtime the node does
/// not own, or a blocking thread running a helper).
// linkme's `link_section` static is flagged by `unsafe_code`; nothing here is unsafe.
#[allow(unsafe_code)]
#[linkme::distributed_slice(crate::world::observe::POLL_SAMPLED)]
static ON_POLL: fn(u32) = on_poll;

fn on_poll(node: u32) {
    #[cfg(target_os = "linux")]
    if threads::running(threads::CPU | threads::ALLOC) {
        threads::register_current(node);
        if alloc::running() {
            alloc::relieve();
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = node;
}

/// A thread of node `node`'s runtime starting: registered so that a CPU sampler started later
/// can time it (without a ring or timer until then).
#[allow(unsafe_code)]
#[linkme::distributed_slice(crate::world::observe::THREAD_STARTED)]
static THREAD_STARTED: fn(u32) = thread_started;

fn thread_started(node: u32) {
    #[cfg(target_os = "linux")]
    threads::register_current(node);
    #[cfg(not(target_os = "linux"))]
    let _ = node;
}
