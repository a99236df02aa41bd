//! Exit signals, links and monitors.
//!
//! - A **link** is symmetric: when either process ends, the other is sent an exit signal with
//!   the reason (see the table in [`crate::exit`](mod@crate::exit)). Both sides record the
//!   link; `unlink` removes both, and an exit signal from a link that no longer exists is
//!   ignored.
//! - A **monitor** is one-way: when the watched process ends, the watcher gets a [`Down`]
//!   message. Monitoring a pid that is already gone delivers `Down` with reason `NoProc` at once.
//! - [`exit`] sends an exit signal without a link. With [`ExitReason::Kill`] the target dies
//!   with reason `Killed` whether it traps exits or not: a flag is set and the process is
//!   woken, and its own next poll drops its future, so destructors run inside the process.

use crate::traced;
use std::fmt;
use std::sync::Arc;

use crate::process::{Process, with_current};
use crate::{ExitReason, Pid, node::NodeInner};

/// An exit signal in flight.
pub(crate) enum Signal {
    Exit {
        from: Pid,
        reason: ExitReason,
        /// Sent because of a link (rather than by [`exit`]): ignored if the link is gone.
        via_link: bool,
        /// Sent by the process to itself (`exit(self_pid(), Normal)` ends it).
        to_self: bool,
    },
}

/// Identifies one monitor, as returned by [`monitor`]; carried by the [`Down`] message.
///
/// Unique among all the monitors of all the nodes of the OS process (a 64-bit serial that never
/// wraps in practice). Their order means nothing: a thread takes serials a block at a time.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MonitorRef(pub(crate) u64);

impl fmt::Debug for MonitorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#Ref<{}>", self.0)
    }
}

impl fmt::Display for MonitorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The message a monitor delivers when the watched process ends: Erlang's
/// `{'DOWN', Ref, process, Pid, Reason}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Down {
    /// The process that ended.
    pub pid: Pid,
    /// Why it ended (`NoProc` if it was already gone when the monitor was set up).
    pub reason: ExitReason,
    /// The monitor that fired.
    pub monitor_ref: MonitorRef,
}

/// The error of [`link`]: the other process does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// The pid names no live process: the other process for [`link`], or the calling one
    /// when it has ended and a helper task ([`spawn_task`](crate::spawn_task)) it left behind
    /// asks for a link or a monitor.
    NoProc(Pid),
    /// Called outside a process: only a process can link.
    NotInProcess,
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::NoProc(pid) => write!(f, "no such process: {pid} has exited or never existed"),
            LinkError::NotInProcess => f.write_str("link/unlink/monitor called outside a process: call it from code running in a process spawned on a node"),
        }
    }
}

impl std::error::Error for LinkError {}

/// Sends an exit signal to `pid` from `from` (see the table in [`crate::exit`](mod@crate::exit)).
pub(crate) fn send_exit_signal(target: &Process, from: Pid, reason: ExitReason, via_link: bool) {
    send_exit_signal_from(target, from, reason, via_link, false);
}

fn send_exit_signal_from(
    target: &Process,
    from: Pid,
    reason: ExitReason,
    via_link: bool,
    to_self: bool,
) {
    if matches!(reason, ExitReason::Kill) && !via_link {
        target.kill();
        return;
    }
    let reason = if via_link && matches!(reason, ExitReason::Kill) {
        ExitReason::Killed
    } else {
        reason
    };
    target.push_signal(Signal::Exit {
        from,
        reason,
        via_link,
        to_self,
    });
}

/// Sends an exit signal with `reason` to `pid`, Erlang's `exit(Pid, Reason)`: `Kill` cannot be
/// trapped; `Normal` is ignored unless the target traps exits (or is the caller); any other
/// reason kills a target that does not trap exits and is an [`Exit`](crate::Exit) message to
/// one that does. A dead pid is ignored.
///
/// Works from inside or outside a process. From outside, a trapping target sees the signal as
/// coming from itself (as node shutdown sends it), but `Normal` still does not end it.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn exit(pid: Pid, reason: ExitReason) {
    let me = crate::try_self_pid();
    let from = me.unwrap_or(pid);
    let to_self = me == Some(pid);
    NodeInner::with_process(pid, |target| {
        send_exit_signal_from(target, from, reason, false, to_self)
    });
}

/// Ends the calling process at once with `reason`, Erlang's `exit(Reason)`. It unwinds the
/// process's future like a panic, without printing a panic message.
///
/// # Panics
/// Outside a process, and in a helper task of [`spawn_task`](crate::spawn_task) or
/// [`spawn_blocking`](crate::spawn_blocking) (whose process runs elsewhere), there is no
/// process to end here: it panics with a message saying to call [`exit`] with the pid instead.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn exit_self(reason: ExitReason) -> ! {
    match crate::process::current_is_helper() {
        Some(false) => std::panic::resume_unwind(Box::new(crate::exit::ExitPayload(reason))),
        Some(true) => panic!(
            "exit_self({reason}) called in a helper task (spawn_task/spawn_blocking), which \
             cannot end its process from here: call runtime::exit(runtime::self_pid(), reason) \
             to end it, or return from the task"
        ),
        None => panic!(
            "exit_self({reason}) called outside a process: there is no process to end; call \
             runtime::exit(pid, reason) to end a process by its pid, or return (or \
             std::process::exit) to end the program"
        ),
    }
}

/// Links the calling process with `pid`, both ways.
///
/// # Errors
/// [`LinkError::NoProc`] when `pid` is not alive (or with the caller's own pid, from a helper
/// task of a process that has ended), [`LinkError::NotInProcess`] outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn link(pid: Pid) -> Result<(), LinkError> {
    let me = current_or_err()?;
    if me.pid == pid {
        return Ok(());
    }
    let linked = NodeInner::with_process(pid, |other| other.add_link(me.pid)).unwrap_or(false);
    if !linked {
        return Err(LinkError::NoProc(pid));
    }
    if !me.add_link(pid) {
        // A helper task acting for a process that has ended: no link may outlive it on one
        // side only.
        NodeInner::with_process(pid, |other| other.remove_link(me.pid));
        return Err(LinkError::NoProc(me.pid));
    }
    Ok(())
}

/// Removes the link between the calling process and `pid`, if any. After it returns, no exit
/// signal from that link is acted on.
///
/// # Errors
/// [`LinkError::NotInProcess`] outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn unlink(pid: Pid) -> Result<(), LinkError> {
    let me = current_or_err()?;
    me.remove_link(pid);
    NodeInner::with_process(pid, |other| other.remove_link(me.pid));
    Ok(())
}

/// Starts monitoring `pid`; a [`Down`] message arrives when it ends (at once, with `NoProc`, if
/// it already has). Each call makes a new monitor.
///
/// # Errors
/// [`LinkError::NotInProcess`] outside a process; [`LinkError::NoProc`] with the caller's own
/// pid from a helper task of a process that has ended.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn monitor(pid: Pid) -> Result<MonitorRef, LinkError> {
    let me = current_or_err()?;
    let mref = me.node.next_monitor_ref();
    if !monitor_with(&me, pid, mref) {
        // A helper task acting for a process that has ended: as `link`.
        return Err(LinkError::NoProc(me.pid));
    }
    Ok(mref)
}

/// Makes the monitor `mref` of `me` on `pid`; false, and nothing made, if `me` has ended.
pub(crate) fn monitor_with(me: &Arc<Process>, pid: Pid, mref: MonitorRef) -> bool {
    // The watcher's entry first: if the target ends right after accepting the monitor, its
    // `Down` finds the entry.
    if !me.add_monitoring(mref, pid) {
        return false;
    }
    let set =
        NodeInner::with_process(pid, |other| other.add_monitored_by(mref, me.pid)).unwrap_or(false);
    if !set {
        me.remove_monitoring(mref);
        me.push_message(crate::Message::new(Down {
            pid,
            reason: ExitReason::NoProc,
            monitor_ref: mref,
        }));
    }
    true
}

/// Removes a monitor made with [`monitor`]. A `Down` message already delivered stays in the
/// mailbox (Erlang's `demonitor/1`); returns whether the monitor was still active.
///
/// # Errors
/// [`LinkError::NotInProcess`] outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn demonitor(mref: MonitorRef) -> Result<bool, LinkError> {
    let me = current_or_err()?;
    let Some(pid) = me.remove_monitoring(mref) else {
        return Ok(false);
    };
    NodeInner::with_process(pid, |other| other.remove_monitored_by(mref));
    Ok(true)
}

/// Sets whether the calling process traps exits, returning the previous setting. A process
/// that traps exits receives exit signals (except `Kill`) as [`Exit`](crate::Exit) messages.
///
/// # Errors
/// [`LinkError::NotInProcess`] outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn trap_exit(on: bool) -> Result<bool, LinkError> {
    let me = current_or_err()?;
    Ok(me.set_trap_exit(on))
}

fn current_or_err() -> Result<Arc<Process>, LinkError> {
    with_current(|c| c.map(Arc::clone)).ok_or(LinkError::NotInProcess)
}
