//! Sending messages.

use crate::traced;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::node::NodeInner;
use crate::process::with_current;
use crate::registry::Name;
use crate::{Message, Pid};

/// Sends `msg` to `pid`, Erlang's `Pid ! Msg`. Never blocks; a pid that names no live process
/// drops the message, as in Erlang. Works from any thread, inside a process or not, for a pid
/// of any node in this OS process; resolving the pid takes no lock.
///
/// Messages from one process to another arrive in the order they were sent.
#[inline]
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn send<M: Any + Send>(pid: Pid, msg: M) {
    crate::heap::checkpoint();
    let msg = Message::new(msg);
    NodeInner::with_process(pid, move |p| p.push_message(msg));
}

/// Sends `msg` to the process registered as `name` on the caller's node, Erlang's
/// `Name ! Msg`.
///
/// # Errors
/// [`SendError::NotRegistered`] when no process has that name (Erlang raises `badarg`),
/// [`SendError::NotInProcess`] outside a process (use
/// [`NodeHandle::send_named`](crate::NodeHandle::send_named) there). Both give the message back.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn send_named<M: Any + Send>(name: &str, msg: M) -> Result<(), SendError<M>> {
    match with_current(|c| c.map(|p| p.node.registry.whereis(name))) {
        None => Err(SendError::NotInProcess { msg }),
        Some(None) => Err(SendError::NotRegistered {
            name: Arc::from(name),
            msg,
        }),
        Some(Some(pid)) => {
            send(pid, msg);
            Ok(())
        }
    }
}

/// Why a message could not be sent; holds the message, to take back with
/// [`SendError::into_inner`].
#[non_exhaustive]
pub enum SendError<M> {
    /// No process is registered under the name.
    NotRegistered {
        /// The name sent to.
        name: Name,
        /// The message, given back.
        msg: M,
    },
    /// A name was sent to from outside a process, where there is no current node.
    NotInProcess {
        /// The message, given back.
        msg: M,
    },
}

impl<M> SendError<M> {
    /// The message that was not sent.
    pub fn into_inner(self) -> M {
        match self {
            SendError::NotRegistered { msg, .. } | SendError::NotInProcess { msg } => msg,
        }
    }
}

impl<M> fmt::Debug for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NotRegistered { name, .. } => f
                .debug_struct("NotRegistered")
                .field("name", name)
                .finish_non_exhaustive(),
            SendError::NotInProcess { .. } => {
                f.debug_struct("NotInProcess").finish_non_exhaustive()
            }
        }
    }
}

impl<M> fmt::Display for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NotRegistered { name, .. } => {
                write!(f, "cannot send to `{name}`: no process is registered under that name")
            }
            SendError::NotInProcess { .. } => f.write_str(
                "cannot send to a name outside a process: use NodeHandle::send_named, or send to a pid",
            ),
        }
    }
}

impl<M> std::error::Error for SendError<M> {}
