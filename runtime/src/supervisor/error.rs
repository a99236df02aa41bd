//! Why starting a supervisor, starting one of its children, or a request to it failed.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::gen_server::{self, ServerRef};
use crate::name::Name;
use crate::process::SpawnError;
use crate::{ExitReason, Pid};

/// Why a child's start function failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartChildError {
    /// Its process could not be spawned.
    Spawn(SpawnError),
    /// A gen_server child did not start.
    GenServer(gen_server::StartError),
    /// A supervisor child did not start.
    Supervisor(Box<StartError>),
    /// Any other reason a start function gives.
    Other(Arc<str>),
}

impl StartChildError {
    /// An application-defined start failure, described by `reason`.
    pub fn other(reason: impl fmt::Display) -> StartChildError {
        StartChildError::Other(reason.to_string().into())
    }
}

impl fmt::Display for StartChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartChildError::Spawn(e) => fmt::Display::fmt(e, f),
            StartChildError::GenServer(e) => fmt::Display::fmt(e, f),
            StartChildError::Supervisor(e) => fmt::Display::fmt(e, f),
            StartChildError::Other(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for StartChildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartChildError::Spawn(e) => Some(e),
            StartChildError::GenServer(e) => Some(e),
            StartChildError::Supervisor(e) => Some(&**e),
            StartChildError::Other(_) => None,
        }
    }
}

impl From<SpawnError> for StartChildError {
    fn from(e: SpawnError) -> StartChildError {
        StartChildError::Spawn(e)
    }
}

impl From<gen_server::StartError> for StartChildError {
    fn from(e: gen_server::StartError) -> StartChildError {
        StartChildError::GenServer(e)
    }
}

impl From<StartError> for StartChildError {
    fn from(e: StartError) -> StartChildError {
        StartChildError::Supervisor(Box::new(e))
    }
}

/// Why a supervisor did not start.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// The name in [`StartOptions::name`](super::StartOptions::name) is registered to another
    /// process.
    AlreadyStarted {
        /// The name asked for.
        name: Name,
        /// The process holding it.
        pid: Pid,
    },
    /// Two child specs have the same id.
    DuplicateChildId(String),
    /// A child failed to start; the children started before it were stopped, last first, and
    /// the supervisor exited.
    ChildFailed {
        /// The child's id.
        id: String,
        /// Why its start function failed.
        error: StartChildError,
    },
    /// The supervisor's process could not be spawned.
    Spawn(SpawnError),
    /// The supervisor's process ended (was killed) while starting its children.
    Exited(ExitReason),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::AlreadyStarted { name, pid } => write!(
                f,
                "cannot start the supervisor: `{name}` is already registered to {pid}"
            ),
            StartError::DuplicateChildId(id) => write!(
                f,
                "cannot start the supervisor: two child specs have the id `{id}`; child ids \
                 must be unique"
            ),
            StartError::ChildFailed { id, error } => write!(
                f,
                "the supervisor's child `{id}` failed to start: {error} (the children started \
                 before it were stopped)"
            ),
            StartError::Spawn(e) => write!(f, "cannot start the supervisor: {e}"),
            StartError::Exited(reason) => write!(
                f,
                "the supervisor exited while starting its children, with reason `{reason}`"
            ),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::ChildFailed { error, .. } => Some(error),
            StartError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a request to a supervisor ([`which_children`](super::which_children),
/// [`count_children`](super::count_children)) got no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The supervisor was not alive (or the name not registered), or it exited before
    /// answering.
    NoProc(ServerRef),
    /// No answer came in time: the supervisor may be busy stopping or starting a child.
    Timeout {
        /// The supervisor asked.
        supervisor: ServerRef,
        /// The timeout that passed.
        after: Duration,
    },
    /// A name was used outside a process, where there is no current node: use the pid.
    NotInProcess(Name),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::NoProc(sup) => write!(
                f,
                "supervisor {sup} is not alive (or the name is not registered), or it exited \
                 before answering"
            ),
            CallError::Timeout { supervisor, after } => write!(
                f,
                "supervisor {supervisor} did not answer within {after:?}: it may be busy \
                 stopping or starting a child (or the process is not a supervisor)"
            ),
            CallError::NotInProcess(name) => write!(
                f,
                "cannot reach supervisor `{name}` by name outside a process: use its pid, or \
                 call from a process of its node"
            ),
        }
    }
}

impl std::error::Error for CallError {}

/// Why [`terminate_child`](super::terminate_child), [`restart_child`](super::restart_child) or
/// [`delete_child`](super::delete_child) failed. Each names the child.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChildError {
    /// The supervisor has no child with this id.
    NotFound(String),
    /// The child is running: [`terminate_child`](super::terminate_child) it first.
    Running(String),
    /// The child's start function failed; it stays listed, not running.
    Start {
        /// The child's id.
        id: String,
        /// Why it failed.
        error: StartChildError,
    },
    /// The supervisor did not answer.
    Call(CallError),
}

impl fmt::Display for ChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildError::NotFound(id) => write!(f, "the supervisor has no child `{id}`"),
            ChildError::Running(id) => write!(
                f,
                "child `{id}` is running: stop it with terminate_child first"
            ),
            ChildError::Start { id, error } => write!(f, "child `{id}` failed to start: {error}"),
            ChildError::Call(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for ChildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ChildError::Start { error, .. } => Some(error),
            ChildError::Call(e) => Some(e),
            _ => None,
        }
    }
}

impl From<CallError> for ChildError {
    fn from(e: CallError) -> ChildError {
        ChildError::Call(e)
    }
}
