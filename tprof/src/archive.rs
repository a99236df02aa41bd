//! The `.tprof` archive's companion: [`merge`] combines the profiles of several runs into one
//! that keeps their processes apart.
//!
//! # Merging
//!
//! [`merge`] (or a [`Merger`], one input at a time) combines profiles of one trace type, each
//! holding one run or several, into one that holds all their runs; see [`merge`] for what is
//! summed and what is kept apart.

use std::fmt;

use crate::TraceType;

mod merge;

pub use merge::{Merger, merge};

/// Why profiles could not be merged.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MergeError {
    /// There was no profile to merge.
    Empty,
    /// The profiles are not all of one trace type.
    MixedTypes {
        /// The trace type of the first profile.
        first: TraceType,
        /// The other trace type.
        other: TraceType,
        /// The index, from 0, of the first profile of the other type.
        index: usize,
    },
    /// A profile contradicts itself, so it cannot be merged: a process of a run it does not
    /// have, a call path of a function it does not list, and so on.
    Inconsistent {
        /// The index, from 0, of the profile.
        index: usize,
        /// What is wrong.
        what: String,
    },
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::Empty => f.write_str("nothing to merge: give at least one profile"),
            MergeError::MixedTypes {
                first,
                other,
                index,
            } => write!(
                f,
                "input {} is a {other} profile, but input 1 is {first}: only profiles of one \
                 trace type can be merged",
                index + 1
            ),
            MergeError::Inconsistent { index, what } => {
                write!(f, "cannot merge input {}: {what}", index + 1)
            }
        }
    }
}

impl std::error::Error for MergeError {}
