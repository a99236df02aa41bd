//! Layer 1, plain data: the names processes are registered under, and a process named by its
//! pid or by its name. The registry itself ([`crate::register`], [`crate::whereis`]) is the
//! process layer's.

use std::fmt;
use std::sync::Arc;

use crate::Pid;

/// A registered name.
pub type Name = Arc<str>;

/// A process named by its pid or by the name it is registered under: what
/// [`ProcessSpec`](crate::trace::ProcessSpec)'s children specs and tprof's rootset take.
///
/// ```
/// use runtime::{Pid, ProcessRef};
///
/// let by_pid = ProcessRef::from(Pid::from_parts(1, 4, 1));
/// let by_name = ProcessRef::from("db");
/// assert_eq!(by_pid.to_string(), "<1.4.1>");
/// assert_eq!(by_name.to_string(), "`db`");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProcessRef {
    /// A pid.
    Pid(Pid),
    /// A registered name.
    Name(Name),
}

impl From<Pid> for ProcessRef {
    fn from(pid: Pid) -> ProcessRef {
        ProcessRef::Pid(pid)
    }
}

impl From<&str> for ProcessRef {
    fn from(name: &str) -> ProcessRef {
        ProcessRef::Name(Arc::from(name))
    }
}

impl From<String> for ProcessRef {
    fn from(name: String) -> ProcessRef {
        ProcessRef::Name(Arc::from(name))
    }
}

impl From<Name> for ProcessRef {
    fn from(name: Name) -> ProcessRef {
        ProcessRef::Name(name)
    }
}

impl fmt::Display for ProcessRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessRef::Pid(pid) => write!(f, "{pid}"),
            ProcessRef::Name(name) => write!(f, "`{name}`"),
        }
    }
}
