//! Static callsites and the frame a traced call enters.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::stack::FrameGuard;

/// Every traced function of the program, one [`Callsite`] each, gathered at link time.
///
/// A test binary links only the crates it names: a function of a crate the binary never uses
/// is not here.
#[linkme::distributed_slice]
pub static CALLSITES: [Callsite];

/// Every traced function linked into this binary.
pub fn callsites() -> &'static [Callsite] {
    &CALLSITES
}

/// One traced function: where it is and what it is called, and which trace sessions want it.
///
/// Made by `#[traced]`; read through [`callsites`].
pub struct Callsite {
    module: &'static str,
    function: &'static str,
    arity: u8,
    file: &'static str,
    line: u32,
    /// The line of the body's closing brace (`line` when not known).
    end_line: u32,
    /// The folder of the crate's manifest, when built by cargo: where `file` is resolved.
    crate_dir: Option<&'static str>,
    /// `file` resolved to a path that exists, once asked for.
    resolved: OnceLock<&'static str>,
    /// One bit per trace session that wants this function; 0 when none does.
    sessions: AtomicU64,
    /// The index in [`CALLSITES`], once computed (`u32::MAX` before).
    id: std::sync::atomic::AtomicU32,
}

impl Callsite {
    /// A callsite; `#[traced]` writes these.
    #[doc(hidden)]
    pub const fn new(
        module: &'static str,
        function: &'static str,
        arity: u8,
        file: &'static str,
        line: u32,
    ) -> Callsite {
        Callsite {
            module,
            function,
            arity,
            file,
            line,
            end_line: line,
            crate_dir: None,
            resolved: OnceLock::new(),
            sessions: AtomicU64::new(0),
            id: std::sync::atomic::AtomicU32::new(u32::MAX),
        }
    }

    /// This callsite, its function's body ending at line `end_line` (its closing brace);
    /// `#[traced]` writes these.
    #[doc(hidden)]
    pub const fn ending_at(mut self, end_line: u32) -> Callsite {
        if end_line > self.line {
            self.end_line = end_line;
        }
        self
    }

    /// This callsite, in the crate whose manifest is in `crate_dir` (`CARGO_MANIFEST_DIR`);
    /// `#[traced]` writes these.
    #[doc(hidden)]
    pub const fn in_crate(mut self, crate_dir: Option<&'static str>) -> Callsite {
        self.crate_dir = crate_dir;
        self
    }

    /// The module path, as `module_path!()` gives it.
    pub fn module(&self) -> &'static str {
        self.module
    }

    /// The function: `name`, `Type::method` or `<Type as Trait>::method`.
    ///
    /// Names are unique within a module: where two traced functions of one module would share
    /// a name and arity (functions nested in different function bodies, which `module_path!()`
    /// cannot tell apart), each gets its line appended, `helper@42`.
    pub fn function(&'static self) -> &'static str {
        unique_names()[self.id()]
    }

    /// The name as written, without the line a collision adds.
    pub fn written_name(&self) -> &'static str {
        self.function
    }

    /// The number of parameters, `self` included.
    pub fn arity(&self) -> u8 {
        self.arity
    }

    /// The source file: where it is on this machine when it can be found (`file!()` gives a
    /// path relative to the workspace the crate was built in, which reads only from there:
    /// the crate's folder and those above it are tried), or as `file!()` gave it.
    pub fn file(&self) -> &'static str {
        self.resolved
            .get_or_init(|| match resolve(self.file, self.crate_dir) {
                Some(path) => Box::leak(path.into_boxed_str()),
                None => self.file,
            })
    }

    /// The source file as `file!()` gave it.
    pub fn written_file(&self) -> &'static str {
        self.file
    }

    /// The line of the function's name in its source file.
    pub fn line(&self) -> u32 {
        self.line
    }

    /// The lines the function spans in its source file: from its name to its body's closing
    /// brace. A native frame of its body (a closure, an `async` block) lies within them.
    pub fn lines(&self) -> std::ops::RangeInclusive<u32> {
        self.line..=self.end_line
    }

    /// The callsite's dense id: its index in [`CALLSITES`].
    #[inline]
    pub fn id(&'static self) -> usize {
        let id = self.id.load(Ordering::Relaxed);
        if id != u32::MAX {
            return id as usize;
        }
        let base = CALLSITES.as_ptr() as usize;
        let id = (self as *const Callsite as usize - base) / std::mem::size_of::<Callsite>();
        self.id.store(id as u32, Ordering::Relaxed);
        id
    }

    /// The id if computed, `u32::MAX` (as `usize`) before: once a session wants the function,
    /// always computed (`set_pattern` asks for it first), but read without that order.
    #[inline(always)]
    pub(crate) fn raw_id(&self) -> usize {
        self.id.load(Ordering::Relaxed) as usize
    }

    /// The mask of trace sessions that want this function.
    #[inline(always)]
    pub(crate) fn sessions(&self) -> u64 {
        self.sessions.load(Ordering::Relaxed)
    }

    pub(crate) fn add_session(&self, bit: u32) {
        self.sessions.fetch_or(1 << bit, Ordering::Relaxed);
    }

    pub(crate) fn remove_session(&self, bit: u32) {
        self.sessions.fetch_and(!(1 << bit), Ordering::Relaxed);
    }
}

/// Every callsite's unique function name, by id (built once, on first use).
fn unique_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut seen: std::collections::HashMap<(&str, &str, u8), usize> =
            std::collections::HashMap::new();
        for cs in CALLSITES.iter() {
            *seen.entry((cs.module, cs.function, cs.arity)).or_default() += 1;
        }
        CALLSITES
            .iter()
            .map(|cs| {
                if seen[&(cs.module, cs.function, cs.arity)] > 1 {
                    // Built once per colliding function for the life of the program.
                    &*Box::leak(format!("{}@{}", cs.function, cs.line).into_boxed_str())
                } else {
                    cs.function
                }
            })
            .collect()
    })
}

/// Callsites are equal when they are the same static.
impl PartialEq for Callsite {
    fn eq(&self, other: &Callsite) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Callsite {}

impl fmt::Display for Callsite {
    /// `module::path::function/arity`, as the trace map prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let function = CALLSITES
            .iter()
            .position(|cs| std::ptr::eq(cs, self))
            .map_or(self.function, |id| unique_names()[id]);
        write!(f, "{}::{}/{}", self.module, function, self.arity)
    }
}

impl fmt::Debug for Callsite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callsite")
            .field("mfa", &format_args!("{self}"))
            .field("file", &self.file)
            .field("line", &self.line)
            .finish()
    }
}

/// The frame of a traced synchronous call: entered by [`enter`], left when dropped (on unwind
/// too).
///
/// Not `Send`: a frame belongs to the poll that entered it, so it cannot be held across an
/// `.await` in a process (a `traced!` block that awaits must be an `async` block, which is
/// traced as a future instead):
///
/// ```compile_fail
/// fn spawnable<F: std::future::Future + Send>(_: F) {}
/// spawnable(async {
///     runtime::trace::traced!("waits", { std::future::ready(()).await });
/// });
/// ```
///
/// ```
/// fn spawnable<F: std::future::Future + Send>(_: F) {}
/// spawnable(async {
///     runtime::trace::traced!("waits", async { std::future::ready(()).await }).await;
/// });
/// ```
#[must_use = "the frame is left when this guard drops"]
pub struct Frame {
    guard: FrameGuard,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Frame")
            .field("measured", &self.guard.pushed())
            .finish()
    }
}

/// Enters a traced call of `callsite`; `#[traced]` calls this first in a synchronous body.
/// One relaxed load when no trace session wants the function; a call that one call_count
/// session alone wants is counted right here (a thread-local cache, see `session/count.rs`);
/// a call the one session measuring this lean poll wants, for time alone or memory alone, is
/// pushed right here too, and popped by one call out of line (see `stack/guard.rs`); a call
/// that several call_count sessions alone want is counted here after those; anything else
/// takes one call out of line.
#[inline(always)]
pub fn enter(callsite: &'static Callsite) -> Frame {
    let Some(mask) = std::num::NonZeroU64::new(callsite.sessions()) else {
        return Frame {
            guard: FrameGuard::NONE,
            _not_send: std::marker::PhantomData,
        };
    };
    if super::session::count_single(callsite, mask) {
        return Frame {
            guard: FrameGuard::NONE,
            _not_send: std::marker::PhantomData,
        };
    }
    if let Some(guard) = FrameGuard::enter_lean(callsite, mask.get()) {
        return Frame {
            guard,
            _not_send: std::marker::PhantomData,
        };
    }
    // Asked after the lean poll's entries, which it cannot take from them (a measured
    // session's bit is never among the count-only ones): so that a measured call pays one
    // comparison for counting, not two.
    if super::session::count_several(callsite, mask) {
        return Frame {
            guard: FrameGuard::NONE,
            _not_send: std::marker::PhantomData,
        };
    }
    // A call some session wants: count it, and push a frame for the sessions measuring the
    // calling process. Marked cold so that the inlined cases above keep no register for it.
    std::hint::cold_path();
    Frame {
        guard: FrameGuard::enter_call(callsite, mask.get()),
        _not_send: std::marker::PhantomData,
    }
}

/// The first poll of a traced future some session wants: count the call; returns the sessions
/// that measure it as a call of the polling process, or as a call outside processes. The count
/// is one call further ([`count_async`]), so that a call only measured (call_time, or a sample
/// session) saves and restores no register here.
#[inline(never)]
fn enter_async(callsite: &'static Callsite, mask: u64) -> u64 {
    if mask & super::measure::counting() != 0 {
        count_async(callsite, mask);
    }
    let mask = mask & super::measure::measuring();
    if mask == 0 {
        return 0;
    }
    match super::stack::active() {
        // No measured poll here: perhaps a call outside any process, each of whose polls is
        // then measured as one (`stack::poll_in_frame`).
        0 => super::outside::wanted(mask),
        active => mask & active,
    }
}

/// [`enter_async`]'s count of a call that call_count sessions want.
#[inline(never)]
fn count_async(callsite: &'static Callsite, mask: u64) {
    super::record_call(callsite, mask);
}

/// A poll of a measured call (`call` at its first poll): its frame is on the traced stack for
/// the length of the poll.
#[inline(never)]
fn poll_measured<F: Future>(
    callsite: &'static Callsite,
    state: &mut TracedState,
    call: bool,
    future: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    let TracedState::Measured { sessions, polled } = state else {
        unreachable!("only a measured call is polled in a frame")
    };
    super::stack::poll_in_frame(callsite.id() as u32, *sessions, call, polled, || {
        future.poll(cx)
    })
}

/// Where a [`Traced`] call stands: one word to write when the future is made, and one to test
/// per poll while no session measures the call.
#[derive(Clone, Copy)]
enum TracedState {
    /// Not polled yet: the call is entered at its first poll.
    New,
    /// Polled, and measured by no session (a call first polled before tracing started is
    /// never counted).
    Plain,
    /// Measured as a call of its process by `sessions`, polled for `polled` clock ticks so
    /// far (for call durations).
    Measured { sessions: u64, polled: u64 },
}

pin_project! {
    /// A traced asynchronous call: the call is entered at its first poll and left when it
    /// completes; `#[traced]` wraps an `async fn`'s body, or the future a function returns, in
    /// one.
    pub struct Traced<F> {
        callsite: &'static Callsite,
        state: TracedState,
        #[pin]
        future: F,
    }
}

impl<F> Traced<F> {
    /// Wraps `future` as a call of `callsite`.
    #[inline(always)]
    pub fn new(callsite: &'static Callsite, future: F) -> Traced<F> {
        Traced {
            callsite,
            state: TracedState::New,
            future,
        }
    }
}

impl<F> fmt::Debug for Traced<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Traced")
            .field("callsite", &format_args!("{}", self.callsite))
            .field("started", &!matches!(self.state, TracedState::New))
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        match *this.state {
            TracedState::Plain => this.future.poll(cx),
            TracedState::New => {
                // Entered at its first poll.
                let mask = this.callsite.sessions();
                let sessions = if mask == 0 {
                    0
                } else {
                    enter_async(this.callsite, mask)
                };
                if sessions == 0 {
                    *this.state = TracedState::Plain;
                    return this.future.poll(cx);
                }
                *this.state = TracedState::Measured {
                    sessions,
                    polled: 0,
                };
                poll_measured(this.callsite, this.state, true, this.future, cx)
            }
            TracedState::Measured { .. } => {
                poll_measured(this.callsite, this.state, false, this.future, cx)
            }
        }
    }
}

/// `file` (as `file!()` gave it) as a path that exists: itself when absolute, or joined to
/// `crate_dir` or the first folder above it where it exists. `None` when it is found nowhere
/// (a program run away from its sources) or is already absolute.
fn resolve(file: &str, crate_dir: Option<&str>) -> Option<String> {
    let path = std::path::Path::new(file);
    if path.is_absolute() {
        return None;
    }
    std::path::Path::new(crate_dir?)
        .ancestors()
        .map(|dir| dir.join(path))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `file!()`'s path, relative to the workspace this crate is built in, resolves to the
    /// file on disk wherever the program runs from; one found nowhere stays as written.
    #[test]
    fn a_callsite_file_resolves_to_a_path_that_exists() {
        static HERE: Callsite =
            Callsite::new("m", "f", 0, file!(), line!()).in_crate(Some(env!("CARGO_MANIFEST_DIR")));
        let file = std::path::Path::new(HERE.file());
        assert!(file.is_absolute() && file.is_file(), "{}", file.display());
        assert!(file.ends_with(file!()), "{}", file.display());
        assert_eq!(HERE.written_file(), file!());
        static NOWHERE: Callsite = Callsite::new("m", "f", 0, "src/not_a_file.rs", 1)
            .in_crate(Some(env!("CARGO_MANIFEST_DIR")));
        assert_eq!(NOWHERE.file(), "src/not_a_file.rs");
    }

    /// A traced function's lines run from its name to its body's closing brace.
    #[test]
    fn a_callsite_spans_its_function_lines() {
        static F: Callsite = Callsite::new("m", "f", 0, "src/f.rs", 10).ending_at(14);
        static G: Callsite = Callsite::new("m", "g", 0, "src/f.rs", 10);
        assert_eq!(F.lines(), 10..=14);
        assert_eq!(G.lines(), 10..=10);
    }
}
