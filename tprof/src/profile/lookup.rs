//! Finding a function of a profile by the name a person types: the bare name, or the name the
//! reports print (`module::name/arity`, `module::name`), or its tail (`a::parse`).

use std::fmt;

use super::{FunctionTrace, Profile};
use crate::functions::Function;

/// Why [`Profile::lookup`] found no one function.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LookupError {
    /// No function of the profile goes by that name.
    NotFound {
        /// The name looked up.
        name: String,
    },
    /// Several functions go by that name (a bare name two modules share, say).
    Ambiguous {
        /// The name looked up.
        name: String,
        /// Each function it names, as the reports print it, with where it is defined.
        candidates: Vec<String>,
    },
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LookupError::NotFound { name } => {
                write!(f, "no function named `{name}` has figures in the profile")
            }
            LookupError::Ambiguous { name, candidates } => {
                write!(
                    f,
                    "`{name}` names {} functions: {}; name one as the table prints it, \
                     `module::function/arity`",
                    candidates.len(),
                    candidates.join(", ")
                )
            }
        }
    }
}

impl std::error::Error for LookupError {}

impl Profile {
    /// The function `name` names, which is one of:
    ///
    /// - the name as the reports print it, `module::name/arity`, or without the arity,
    ///   `module::name`;
    /// - its tail: the function's name after the last parts of its module (`a::parse` for
    ///   `app::a::parse`), with or without the arity;
    /// - its bare name (`parse`, `Type::method`, `<Type as Trait>::method`), with or without
    ///   the arity (`parse/1`).
    ///
    /// When the name is the whole `module::name` of some function, those are the only ones
    /// it names. Looking up takes one pass over the functions.
    ///
    /// ```
    /// use tprof::{Entry, Function, FunctionTrace, Group, LookupError, Profile, TraceType};
    ///
    /// let function = |module: &str| Function {
    ///     module: module.into(),
    ///     name: "parse".into(),
    ///     arity: 1,
    ///     file: String::new(),
    ///     line: 0,
    /// };
    /// let entry = Entry { group: Group::All, calls: 1, measurement: 1, bytes: 0, blocks: 0 };
    /// let profile = Profile::new(
    ///     TraceType::CallCount,
    ///     ["app::a", "app::b"]
    ///         .map(|m| FunctionTrace { function: function(m), entries: vec![entry] })
    ///         .into(),
    /// );
    /// assert_eq!(profile.lookup("app::b::parse/1").unwrap().module(), "app::b");
    /// assert_eq!(profile.lookup("a::parse").unwrap().module(), "app::a");
    /// assert!(matches!(profile.lookup("parse"), Err(LookupError::Ambiguous { .. })));
    /// ```
    ///
    /// # Errors
    ///
    /// [`LookupError::NotFound`] when no function goes by `name`;
    /// [`LookupError::Ambiguous`], listing them, when several do.
    pub fn lookup(&self, name: &str) -> Result<&FunctionTrace, LookupError> {
        let query = Query::parse(name);
        let mut exact: Vec<&FunctionTrace> = Vec::new();
        let mut loose: Vec<&FunctionTrace> = Vec::new();
        for f in &self.functions {
            match query.matches(&f.function) {
                Some(Match::Exact) => exact.push(f),
                Some(Match::Loose) => loose.push(f),
                None => {}
            }
        }
        let found = if exact.is_empty() { loose } else { exact };
        match found.as_slice() {
            [one] => Ok(one),
            [] => Err(LookupError::NotFound {
                name: name.to_owned(),
            }),
            many => Err(LookupError::Ambiguous {
                name: name.to_owned(),
                candidates: many
                    .iter()
                    .map(|f| {
                        let at = &f.function;
                        if at.file.is_empty() {
                            at.mfa()
                        } else {
                            format!("{} ({}:{})", at.mfa(), at.file, at.line)
                        }
                    })
                    .collect(),
            }),
        }
    }
}

/// How a function matches a [`Query`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Match {
    /// It is the function's whole `module::name`.
    Exact,
    /// It is the function's bare name, or its tail.
    Loose,
}

/// A name looked up: the path, and the arity when it ends in `/N`.
#[derive(Debug)]
struct Query<'a> {
    path: &'a str,
    arity: Option<u8>,
}

impl<'a> Query<'a> {
    fn parse(name: &'a str) -> Query<'a> {
        let name = name.trim();
        match name.rsplit_once('/') {
            Some((path, arity)) if !path.is_empty() => match arity.parse::<u8>() {
                Ok(arity) => Query {
                    path,
                    arity: Some(arity),
                },
                Err(_) => Query {
                    path: name,
                    arity: None,
                },
            },
            _ => Query {
                path: name,
                arity: None,
            },
        }
    }

    fn matches(&self, f: &Function) -> Option<Match> {
        if self.arity.is_some_and(|a| a != f.arity) {
            return None;
        }
        if self.path == f.name {
            return Some(if f.module.is_empty() {
                Match::Exact
            } else {
                Match::Loose
            });
        }
        // `module_tail::name`, where `module_tail` is the module or its last parts.
        let module_tail = self
            .path
            .strip_suffix(f.name.as_str())?
            .strip_suffix("::")?;
        if module_tail == f.module {
            Some(Match::Exact)
        } else if f
            .module
            .strip_suffix(module_tail)
            .is_some_and(|head| head.ends_with("::"))
        {
            Some(Match::Loose)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(module: &str, name: &str, arity: u8) -> Function {
        Function {
            module: module.to_owned(),
            name: name.to_owned(),
            arity,
            file: String::new(),
            line: 0,
        }
    }

    #[test]
    fn a_query_matches_the_printed_forms_and_tails_only_at_path_boundaries() {
        let f = function("app::a", "Parser::parse", 2);
        let m = |q: &str| Query::parse(q).matches(&f);
        assert_eq!(m("app::a::Parser::parse/2"), Some(Match::Exact));
        assert_eq!(m("app::a::Parser::parse"), Some(Match::Exact));
        assert_eq!(m("a::Parser::parse"), Some(Match::Loose));
        assert_eq!(m("Parser::parse"), Some(Match::Loose));
        assert_eq!(m("Parser::parse/2"), Some(Match::Loose));
        assert_eq!(m("pp::a::Parser::parse"), None);
        assert_eq!(m("parse"), None, "a part of the name is not the name");
        assert_eq!(m("app::a::Parser::parse/1"), None);
        assert_eq!(m("app::a::Parser::parse/x"), None);
        assert_eq!(m(""), None);
        let slash = function("m", "<A as Div</2>>::f", 1);
        assert_eq!(
            Query::parse("m::<A as Div</2>>::f/1").matches(&slash),
            Some(Match::Exact)
        );
    }
}
