//! Trace patterns: `{Module, Function, Arity}` with wildcards.

use std::fmt;

use super::Callsite;

/// One part of a [`TracePattern`]: the wildcard `_` or an exact value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Part<T> {
    /// Matches anything (Erlang's `'_'`).
    Any,
    /// Matches this value only.
    Exact(T),
}

impl<T> Part<T> {
    fn matches<U: ?Sized>(&self, value: &U) -> bool
    where
        T: PartialEq<U>,
    {
        match self {
            Part::Any => true,
            Part::Exact(v) => v == value,
        }
    }
}

impl<T: fmt::Display> fmt::Display for Part<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Any => f.write_str("_"),
            Part::Exact(v) => write!(f, "{v}"),
        }
    }
}

/// Which traced functions a trace session wants: `{M, F, A}`, `{M, F, _}`, `{M, _, _}` or
/// `{_, _, _}`, where `M` is a module path (`module_path!()`), `F` a function as callsites
/// name it and `A` its arity.
///
/// ```
/// use runtime::trace::TracePattern;
///
/// let all = TracePattern::all();
/// let module = TracePattern::module("kv::server");
/// let exact = TracePattern::mfa("kv::server", "<Kv as GenServer>::handle_call", 3);
/// assert_eq!(all.to_string(), "{_, _, _}");
/// assert_eq!(module.to_string(), "{kv::server, _, _}");
/// assert_eq!(exact.to_string(), "{kv::server, <Kv as GenServer>::handle_call, 3}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TracePattern {
    /// The module path.
    pub module: Part<String>,
    /// The function.
    pub function: Part<String>,
    /// The arity.
    pub arity: Part<u8>,
}

impl TracePattern {
    /// Every traced function: `{_, _, _}`.
    pub fn all() -> TracePattern {
        TracePattern {
            module: Part::Any,
            function: Part::Any,
            arity: Part::Any,
        }
    }

    /// Every traced function of a module: `{M, _, _}`.
    pub fn module(module: impl Into<String>) -> TracePattern {
        TracePattern {
            module: Part::Exact(module.into()),
            ..TracePattern::all()
        }
    }

    /// A function of any arity: `{M, F, _}`.
    pub fn function(module: impl Into<String>, function: impl Into<String>) -> TracePattern {
        TracePattern {
            function: Part::Exact(function.into()),
            ..TracePattern::module(module)
        }
    }

    /// One function: `{M, F, A}`.
    pub fn mfa(module: impl Into<String>, function: impl Into<String>, arity: u8) -> TracePattern {
        TracePattern {
            arity: Part::Exact(arity),
            ..TracePattern::function(module, function)
        }
    }

    /// Whether the pattern selects `callsite`.
    pub fn matches(&self, callsite: &'static Callsite) -> bool {
        self.module.matches(callsite.module())
            && self.function.matches(callsite.function())
            && self.arity.matches(&callsite.arity())
    }
}

impl fmt::Display for TracePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}, {}, {}}}", self.module, self.function, self.arity)
    }
}
