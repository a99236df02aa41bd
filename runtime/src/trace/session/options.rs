//! What a session is opened with ([`SessionOptions`]) and the errors of opening one and of its
//! patterns ([`SessionError`], [`PatternError`]).
//!
//! Plain data: uses nothing of the sessions.

use std::fmt;

use crate::trace::TracePattern;

/// Why a session could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionError {
    /// [`MAX_SESSIONS`](crate::trace::MAX_SESSIONS) sessions are open in this OS process.
    TooManySessions {
        /// The limit.
        limit: usize,
    },
    /// call_memory was asked for, but [`CountingAlloc`](crate::CountingAlloc) is not the
    /// global allocator.
    AllocatorNotInstalled,
    /// Call-duration histograms were asked to keep a number of significant figures outside
    /// [`SessionOptions::PRECISIONS`].
    HistogramPrecision {
        /// What was asked for.
        significant_figures: u8,
    },
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::TooManySessions { limit } => write!(
                f,
                "cannot open a trace session: {limit} are already open in this OS process; \
                 drop (stop) one first"
            ),
            SessionError::AllocatorNotInstalled => write!(
                f,
                "call_memory figures {}",
                crate::heap::NEEDS_THE_ALLOCATOR
            ),
            SessionError::HistogramPrecision {
                significant_figures,
            } => write!(
                f,
                "call-duration histograms keep {} to {} significant figures, not \
                 {significant_figures}; the default, {}, reads durations to 1%",
                SessionOptions::PRECISIONS.start(),
                SessionOptions::PRECISIONS.end(),
                SessionOptions::DEFAULT_PRECISION
            ),
        }
    }
}

impl std::error::Error for SessionError {}

/// How a trace session measures, beyond its [`TraceTypes`](crate::trace::TraceTypes)
/// ([`NodeHandle::trace_session_with_options`](crate::NodeHandle::trace_session_with_options)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionOptions {
    pub(super) histogram_precision: u8,
}

impl SessionOptions {
    /// The significant figures a call-duration histogram may keep: hdrhistogram's range.
    pub const PRECISIONS: std::ops::RangeInclusive<u8> = 1..=5;
    /// The significant figures call-duration histograms keep unless told otherwise: 2, each
    /// duration to within 1%.
    pub const DEFAULT_PRECISION: u8 = 2;

    /// The defaults: histograms of [`DEFAULT_PRECISION`](Self::DEFAULT_PRECISION).
    pub const fn new() -> SessionOptions {
        SessionOptions {
            histogram_precision: Self::DEFAULT_PRECISION,
        }
    }

    /// The significant figures each call-duration histogram
    /// ([`TraceTypes::CALL_TIME_HISTOGRAMS`](crate::trace::TraceTypes::CALL_TIME_HISTOGRAMS))
    /// keeps, in [`PRECISIONS`](Self::PRECISIONS): a duration is read to within one part in
    /// 10^`significant_figures`. Each figure more makes a histogram about ten times larger (at
    /// 2, a few KiB per process and function).
    pub const fn histogram_precision(mut self, significant_figures: u8) -> SessionOptions {
        self.histogram_precision = significant_figures;
        self
    }
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions::new()
    }
}

/// Why a pattern could not be set or cleared; each names the pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatternError {
    /// No traced function linked into this binary matches.
    NoMatch {
        /// The pattern.
        pattern: TracePattern,
        /// How many traced functions the binary links.
        linked: usize,
    },
    /// The pattern's module has no function traced by this session.
    NotTraced {
        /// The pattern.
        pattern: TracePattern,
    },
    /// The build has no instrumentation at all: the feature `runtime/no-trace` is on
    /// ([`INSTRUMENTED`](crate::trace::INSTRUMENTED) is false), so no pattern can match.
    CompiledOut {
        /// The pattern.
        pattern: TracePattern,
    },
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::NoMatch { pattern, linked } => write!(
                f,
                "no traced function matches {pattern} (this binary links {linked} traced \
                 functions); check the module path (`module_path!()`), the function name \
                 (`Type::method`, `<Type as Trait>::method`) and the arity (`self` counts). A \
                 binary links only the crates it uses: a test binary that never names a crate \
                 has none of its functions"
            ),
            PatternError::CompiledOut { pattern } => write!(
                f,
                "no traced function matches {pattern}: instrumentation is compiled out of this \
                 build. {COMPILED_OUT}"
            ),
            PatternError::NotTraced { pattern } => {
                write!(
                    f,
                    "cannot clear {pattern}: this session traces nothing in that module"
                )
            }
        }
    }
}

impl std::error::Error for PatternError {}

/// Why a build has no instrumentation, and how to find what turned it off: the feature is
/// often enabled by another crate of the build, through feature unification.
pub(crate) const COMPILED_OUT: &str = "The feature `runtime/no-trace` is on, so every \
     #[traced] function was built without its callsite; a crate in the build may enable it \
     for all (`cargo tree -e features -i runtime` shows which). Build without it to profile.";
