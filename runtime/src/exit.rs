//! Exit reasons and the exit messages a process that traps exits receives.
//!
//! Every process ends with an [`ExitReason`]. Its links are sent an exit signal carrying that
//! reason and its monitors a [`Down`](crate::Down) message. The rules are Erlang's:
//!
//! | signal reason      | receiver traps exits          | receiver does not trap exits |
//! |--------------------|-------------------------------|------------------------------|
//! | `Normal`           | becomes an [`Exit`] message   | ignored                      |
//! | `Kill` (by `exit`) | the receiver dies, `Killed`   | the receiver dies, `Killed`  |
//! | anything else      | becomes an [`Exit`] message   | the receiver dies, same reason |
//!
//! `Kill` is untrappable only when sent with [`exit`](fn@crate::exit); a process that itself ends
//! with reason `Kill` sends its links `Killed`, which is an ordinary reason. A panic in a process
//! ends it with [`ExitReason::Panic`] holding the panic message.

use std::fmt;
use std::sync::Arc;

use crate::Pid;

/// Why a process ended, or the reason carried by an exit signal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExitReason {
    /// The process returned normally. Linked processes that do not trap exits ignore it.
    Normal,
    /// An orderly stop, as a supervisor asks of its children; kills linked processes that do
    /// not trap exits.
    Shutdown,
    /// The untrappable kill signal sent with [`exit`](fn@crate::exit).
    Kill,
    /// The reason of a process that was killed with [`ExitReason::Kill`].
    Killed,
    /// The process did not exist (for a monitor or link set up on a dead pid).
    NoProc,
    /// The process panicked; the panic message.
    Panic(Arc<str>),
    /// An application-defined reason.
    Custom(Arc<str>),
    /// The process's live heap went over its
    /// [`max_heap_size`](crate::SpawnOptions::max_heap_size).
    MaxHeapSize,
    /// The process's mailbox went over its
    /// [`max_message_queue_len`](crate::SpawnOptions::max_message_queue_len).
    MaxMessageQueueLen,
}

impl ExitReason {
    /// An application-defined reason.
    ///
    /// ```
    /// use runtime::ExitReason;
    /// assert_eq!(ExitReason::custom("bad_config").to_string(), "bad_config");
    /// ```
    pub fn custom(reason: impl Into<Arc<str>>) -> ExitReason {
        ExitReason::Custom(reason.into())
    }

    /// Whether this reason counts as a normal end (`Normal`), which links ignore.
    pub fn is_normal(&self) -> bool {
        matches!(self, ExitReason::Normal)
    }

    /// Whether a supervisor's `Transient` child ending this way is restarted: anything but
    /// `Normal` and `Shutdown`.
    pub fn is_abnormal(&self) -> bool {
        !matches!(self, ExitReason::Normal | ExitReason::Shutdown)
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitReason::Normal => f.write_str("normal"),
            ExitReason::Shutdown => f.write_str("shutdown"),
            ExitReason::Kill => f.write_str("kill"),
            ExitReason::Killed => f.write_str("killed"),
            ExitReason::NoProc => f.write_str("noproc"),
            ExitReason::Panic(msg) => write!(f, "panic: {msg}"),
            ExitReason::Custom(reason) => f.write_str(reason),
            ExitReason::MaxHeapSize => f.write_str("max_heap_size"),
            ExitReason::MaxMessageQueueLen => f.write_str("max_message_queue_len"),
        }
    }
}

/// An exit reason is an error when a process ended without producing what was waited for
/// (see [`Node::run`](crate::Node::run)).
impl std::error::Error for ExitReason {}

/// The message a process that traps exits receives in place of an exit signal: Erlang's
/// `{'EXIT', From, Reason}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// The process the signal came from (the linked process that died, or the caller of
    /// [`exit`](fn@crate::exit)).
    pub from: Pid,
    /// The reason the signal carries.
    pub reason: ExitReason,
}

/// What the future of a process may return; it becomes the process's exit reason.
///
/// `()` is a normal exit, an [`ExitReason`] is itself, and a `Result` is normal when `Ok` and a
/// [`ExitReason::Custom`] holding the error's `Display` text when `Err`. The never type `!` (the
/// output of `async { panic!() }` or of a loop that never ends) is accepted too.
pub trait IntoExitReason {
    /// The exit reason this value stands for.
    fn into_exit_reason(self) -> ExitReason;
}

impl IntoExitReason for () {
    fn into_exit_reason(self) -> ExitReason {
        ExitReason::Normal
    }
}

impl IntoExitReason for ExitReason {
    fn into_exit_reason(self) -> ExitReason {
        self
    }
}

/// Names the never type `!` on stable Rust (it is the return type of `fn() -> !`), so that a
/// process whose future never returns normally (it loops, panics or calls
/// [`exit_self`](crate::exit_self)) can be spawned: `async { panic!() }` has output `!`.
pub trait FnReturn {
    /// The return type.
    type Output;
}

impl<R> FnReturn for fn() -> R {
    type Output = R;
}

/// The never type, `!`.
pub type Never = <fn() -> ! as FnReturn>::Output;

impl IntoExitReason for Never {
    fn into_exit_reason(self) -> ExitReason {
        self
    }
}

impl<E: fmt::Display> IntoExitReason for Result<(), E> {
    fn into_exit_reason(self) -> ExitReason {
        match self {
            Ok(()) => ExitReason::Normal,
            Err(e) => ExitReason::Custom(e.to_string().into()),
        }
    }
}

/// The panic payload [`exit_self`](crate::exit_self) unwinds with; the poll wrapper turns it
/// into the process's exit reason without calling the panic hook.
pub(crate) struct ExitPayload(pub(crate) ExitReason);

/// The text of a panic payload, as `std` prints it.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> Arc<str> {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        Arc::from(*s)
    } else if let Some(s) = payload.downcast_ref::<String>() {
        Arc::from(s.as_str())
    } else {
        Arc::from("Box<dyn Any>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_print_like_erlang_atoms() {
        assert_eq!(ExitReason::Normal.to_string(), "normal");
        assert_eq!(ExitReason::Killed.to_string(), "killed");
        assert_eq!(ExitReason::Panic("boom".into()).to_string(), "panic: boom");
        assert!(ExitReason::Normal.is_normal());
        assert!(!ExitReason::Shutdown.is_abnormal());
        assert!(ExitReason::Killed.is_abnormal());
    }

    #[test]
    fn results_become_reasons() {
        assert_eq!(Ok::<(), String>(()).into_exit_reason(), ExitReason::Normal);
        assert_eq!(
            Err::<(), _>("disk full").into_exit_reason(),
            ExitReason::custom("disk full")
        );
        let payload: Box<dyn std::any::Any + Send> = Box::new(String::from("x"));
        assert_eq!(&*panic_message(&*payload), "x");
    }
}
