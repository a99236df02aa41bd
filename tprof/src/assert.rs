//! Allocation reports and assertions for tests: run code under call_memory, then assert on a
//! function's calls, words, bytes and blocks — in one process or across all of them — with
//! the table of the processes involved printed when an assertion fails.

use std::fmt;
use std::future::Future;

use runtime::Pid;

use crate::adhoc::{
    Failure, ProfileError, ProfileOptions, Report, profile_async, profile_blocking,
};
use crate::profile::{FunctionTrace, Group, LookupError, Profile, TraceType};
use crate::table::{Tables, heading, records};

/// What a function allocated: calls, words, bytes and blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Allocated {
    /// Calls.
    pub calls: u64,
    /// Words (8 bytes, rounded up per allocation).
    pub words: u64,
    /// Bytes.
    pub bytes: u64,
    /// Allocations.
    pub blocks: u64,
}

impl fmt::Display for Allocated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} call{}: {} block{}, {} bytes, {} words",
            self.calls,
            if self.calls == 1 { "" } else { "s" },
            self.blocks,
            if self.blocks == 1 { "" } else { "s" },
            self.bytes,
            self.words
        )
    }
}

/// What code allocated, per process and function, as [`allocations`] measured it.
#[derive(Debug)]
pub struct Allocations<T> {
    /// The code's output, or why there is none.
    pub result: Result<T, Failure>,
    /// The call_memory profile (functions that allocated nothing included).
    pub profile: Profile,
}

/// Runs `fun` in a process of a private multi-thread node under call_memory, tracing every
/// traced function in it and in the processes it spawns, and returns what each allocated.
/// Tests that run in parallel never see each other's figures.
///
/// ```
/// #[global_allocator]
/// static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
///
/// #[runtime::traced]
/// fn checksum(data: &[u8]) -> u32 { data.iter().map(|b| u32::from(*b)).sum() }
///
/// #[runtime::traced]
/// fn frame(data: &[u8]) -> Vec<u8> { let mut v = Vec::with_capacity(data.len() + 4); v.extend(data); v }
///
/// # fn main() {
/// let report = tprof::allocations(|| async {
///     let payload = b"hello".to_vec();
///     frame(&payload);
///     checksum(&payload)
/// });
/// report.function("checksum").allocates_nothing();
/// report.function("frame").calls(1).blocks(1).bytes(9);
/// # }
/// ```
///
/// From async code (`#[tokio::test]`, a process), await [`allocations_async`] instead; on a
/// thread of tokio's blocking pool (`tokio::task::spawn_blocking`) this one runs, as
/// [`profile`](crate::profile) does.
///
/// # Panics
/// When profiling cannot run: most often because [`CountingAlloc`](runtime::CountingAlloc) is
/// not the test binary's global allocator (the message says how to install it); and when
/// called on a thread that runs async code (`#[tokio::test]`, `#[tokio::main]`, a task, a
/// process), where it would block a thread the runtime drives (the message names
/// [`allocations_async`]).
#[track_caller]
pub fn allocations<F, Fut, T>(fun: F) -> Allocations<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    allocations_with(ProfileOptions::new(), fun)
}

/// [`allocations`] with options (patterns, rootset, set_on_spawn, timeout); the type is
/// always call_memory and nothing is printed.
///
/// # Panics
/// As [`allocations`].
#[track_caller]
pub fn allocations_with<F, Fut, T>(options: ProfileOptions, fun: F) -> Allocations<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let options = options
        .trace_type(TraceType::CallMemory)
        .report(Report::Return);
    allocated(profile_blocking(
        fun,
        options,
        "tprof::allocations",
        "tprof::allocations_async",
    ))
}

/// [`allocations`] from async code: `#[tokio::test]`, `#[tokio::main]`, a process. Inside a
/// process it measures on that process's node; elsewhere on a private node started on the
/// current tokio runtime for the call, so tests in parallel never see each other's figures.
///
/// ```
/// #[global_allocator]
/// static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();
///
/// #[runtime::traced]
/// fn greet(name: &str) -> String { format!("hello, {name}") }
///
/// #[tokio::main(flavor = "current_thread")] // as #[tokio::test] runs a test
/// async fn main() {
///     let report = tprof::allocations_async(|| async { greet("world") }).await;
///     assert_eq!(report.result.as_deref(), Ok("hello, world"));
///     report.function("greet").calls(1).blocks(1);
/// }
/// ```
///
/// # Panics
/// When profiling cannot run (as [`allocations`]), or when polled outside any process and
/// any tokio runtime.
pub async fn allocations_async<F, Fut, T>(fun: F) -> Allocations<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    allocations_async_with(ProfileOptions::new(), fun).await
}

/// [`allocations_async`] with options, as [`allocations_with`].
///
/// # Panics
/// As [`allocations_async`].
pub async fn allocations_async_with<F, Fut, T>(options: ProfileOptions, fun: F) -> Allocations<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let options = options
        .trace_type(TraceType::CallMemory)
        .report(Report::Return);
    allocated(profile_async(fun, options).await)
}

/// The allocations of a profile run, or the panic that says why there are none.
#[track_caller]
fn allocated<T>(outcome: Result<crate::adhoc::Outcome<T>, ProfileError>) -> Allocations<T> {
    match outcome {
        Ok(outcome) => Allocations {
            result: outcome.result,
            profile: outcome.profile,
        },
        // It says what to call instead.
        Err(e @ ProfileError::InAsyncContext { .. }) => panic!("{e}"),
        Err(e) => panic!("tprof::allocations could not run: {e}"),
    }
}

impl<T> Allocations<T> {
    /// Checks on the function `name` names, summed over every process: its bare name
    /// (`parse`, `Type::method`, `<Type as Trait>::method`), or the name the tables print,
    /// `module::name/arity`, with or without the arity, and with as much of the module as
    /// tells it apart (`a::parse`): see [`Profile::lookup`].
    ///
    /// # Panics
    /// When no function of that name was called under measurement, or when several were
    /// (a bare name two modules share): the message lists them, and the tables.
    #[track_caller]
    #[must_use = "a check does nothing until one of its assertions is called"]
    pub fn function(&self, name: &str) -> FunctionCheck<'_> {
        let f = match self.profile.lookup(name) {
            Ok(f) => f,
            Err(LookupError::NotFound { .. }) => panic!(
                "`{name}` was never called in a measured process: is it #[traced], and did the \
                 code call it?\n{}",
                self.table()
            ),
            Err(e) => panic!("{e}\n{}", self.table()),
        };
        let pids = f
            .entries
            .iter()
            .filter_map(|e| match e.group {
                Group::Process(pid) => Some(pid),
                Group::All => None,
            })
            .collect();
        FunctionCheck {
            name: f.function.mfa(),
            figures: sum(f.entries.iter()),
            function: f,
            pids,
            profile: &self.profile,
        }
    }

    /// What the function `name` names (as [`function`](Self::function) reads it) allocated
    /// in process `pid`: zero when no such function made a call there, or none at all.
    ///
    /// # Panics
    /// When several functions go by `name`: the message lists them.
    #[track_caller]
    pub fn in_process(&self, pid: Pid, name: &str) -> Allocated {
        match self.profile.lookup(name) {
            Ok(f) => sum(f.entries.iter().filter(|e| e.group == Group::Process(pid))),
            Err(LookupError::NotFound { .. }) => Allocated::default(),
            Err(e) => panic!("{e}"),
        }
    }

    /// Everything process `pid` allocated in traced functions.
    pub fn process(&self, pid: Pid) -> Allocated {
        sum(self
            .profile
            .functions
            .iter()
            .flat_map(|f| f.entries.iter())
            .filter(|e| e.group == Group::Process(pid)))
    }

    /// The per-function tables of every process measured, each headed by the process's pid,
    /// name and initial call.
    pub fn table(&self) -> String {
        let mut out = tables(&self.profile, &self.profile.pids());
        if out.is_empty() {
            out.push_str("(no measured process called a traced function)\n");
        }
        out
    }
}

/// The function tables of the processes `pids`, each headed by `process`, its pid, name and
/// initial call.
fn tables(profile: &Profile, pids: &[Pid]) -> String {
    let tables = Tables::new(
        profile,
        crate::SortBy::descending(crate::Column::Measurement),
    );
    let records = records(profile);
    let mut out = String::new();
    for &pid in pids {
        let group = Group::Process(pid);
        out.push_str(&format!(
            "process {}:\n{}\n",
            heading(group, records.get(&pid).copied()),
            tables.table(group)
        ));
    }
    out
}

fn sum<'a>(entries: impl Iterator<Item = &'a crate::Entry>) -> Allocated {
    entries.fold(Allocated::default(), |a, e| Allocated {
        calls: a.calls + e.calls,
        words: a.words + e.measurement,
        bytes: a.bytes + e.bytes,
        blocks: a.blocks + e.blocks,
    })
}

/// Assertions on one function's allocations; each returns the check for chaining and, when
/// it fails, panics with what was measured and the tables of the processes that called it.
#[derive(Debug)]
pub struct FunctionCheck<'a> {
    /// The function, as the tables print it.
    name: String,
    function: &'a FunctionTrace,
    figures: Allocated,
    pids: Vec<Pid>,
    profile: &'a Profile,
}

impl FunctionCheck<'_> {
    /// The figures checked.
    pub fn figures(&self) -> Allocated {
        self.figures
    }

    /// Narrows the check to process `pid`.
    #[must_use = "a check does nothing until one of its assertions is called"]
    pub fn in_process(mut self, pid: Pid) -> Self {
        self.figures = sum(self
            .function
            .entries
            .iter()
            .filter(|e| e.group == Group::Process(pid)));
        self.pids = vec![pid];
        self
    }

    #[track_caller]
    fn check(self, ok: bool, expected: fmt::Arguments<'_>) -> Self {
        if !ok {
            let tables = tables(self.profile, &self.pids);
            panic!(
                "allocation assertion failed for `{}`: expected {expected}, measured {}\n{tables}",
                self.name, self.figures
            );
        }
        self
    }

    /// It made no allocation at all.
    #[track_caller]
    pub fn allocates_nothing(self) -> Self {
        let ok = self.figures.blocks == 0;
        self.check(ok, format_args!("no allocation"))
    }

    /// It was called exactly `n` times.
    #[track_caller]
    pub fn calls(self, n: u64) -> Self {
        let ok = self.figures.calls == n;
        self.check(ok, format_args!("{n} calls"))
    }

    /// It allocated exactly `n` words.
    #[track_caller]
    pub fn words(self, n: u64) -> Self {
        let ok = self.figures.words == n;
        self.check(ok, format_args!("{n} words"))
    }

    /// It allocated exactly `n` bytes.
    #[track_caller]
    pub fn bytes(self, n: u64) -> Self {
        let ok = self.figures.bytes == n;
        self.check(ok, format_args!("{n} bytes"))
    }

    /// It made exactly `n` allocations.
    #[track_caller]
    pub fn blocks(self, n: u64) -> Self {
        let ok = self.figures.blocks == n;
        self.check(ok, format_args!("{n} blocks"))
    }

    /// It made exactly `n` allocations per call, on average.
    #[track_caller]
    pub fn blocks_per_call(self, n: u64) -> Self {
        let ok = self.figures.blocks == n * self.figures.calls;
        self.check(ok, format_args!("{n} blocks per call"))
    }

    /// It allocated at most `n` bytes per call, on average.
    #[track_caller]
    pub fn at_most_bytes_per_call(self, n: u64) -> Self {
        let ok = self.figures.bytes <= n * self.figures.calls;
        self.check(ok, format_args!("at most {n} bytes per call"))
    }

    /// It allocated at most `n` words per call, on average.
    #[track_caller]
    pub fn at_most_words_per_call(self, n: u64) -> Self {
        let ok = self.figures.words <= n * self.figures.calls;
        self.check(ok, format_args!("at most {n} words per call"))
    }
}
