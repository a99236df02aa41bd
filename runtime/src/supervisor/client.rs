//! The client side: the requests a running supervisor answers, through a one-shot channel, so
//! that they work from a process or from any async code.

use crate::traced;
use tokio::sync::oneshot;

use super::{CallError, ChildCounts, ChildError, ChildInfo, ChildKind};
use crate::gen_server::{ServerRef, StopError, Timeout, stop_process};
use crate::node::NodeInner;
use crate::process::with_current;
use crate::{ExitReason, Message, Pid};

/// The supervisor's children, in start order, Erlang's `supervisor:which_children/1`. Works
/// from a process or from any async code (a name needs a process, to know the node).
///
/// # Errors
/// [`CallError::NoProc`], [`CallError::Timeout`], [`CallError::NotInProcess`].
#[allow(unsafe_code)]
#[traced(module = "runtime::supervisor")]
pub async fn which_children(
    supervisor: impl Into<ServerRef>,
    timeout: impl Into<Timeout>,
) -> Result<Vec<ChildInfo>, CallError> {
    request(supervisor.into(), timeout.into(), Request::WhichChildren).await
}

/// How many children the supervisor has, by kind and running, Erlang's
/// `supervisor:count_children/1`.
///
/// # Errors
/// As [`which_children`].
#[allow(unsafe_code)]
#[traced(module = "runtime::supervisor")]
pub async fn count_children(
    supervisor: impl Into<ServerRef>,
    timeout: impl Into<Timeout>,
) -> Result<ChildCounts, CallError> {
    // The request itself, not `which_children`: a profile shows one call, as in OTP.
    let children: Vec<ChildInfo> =
        request(supervisor.into(), timeout.into(), Request::WhichChildren).await?;
    let mut counts = ChildCounts {
        specs: children.len(),
        ..ChildCounts::default()
    };
    for child in &children {
        counts.active += usize::from(child.pid.is_some());
        match child.kind {
            ChildKind::Worker => counts.workers += 1,
            ChildKind::Supervisor => counts.supervisors += 1,
        }
    }
    Ok(counts)
}

/// Stops the child `id` by its [`Shutdown`](super::Shutdown) policy, without restarting it,
/// Erlang's `supervisor:terminate_child/2`. A temporary child leaves the list; any other stays
/// listed, not running, until [`restart_child`] or [`delete_child`]. Stopping a child that is not
/// running succeeds. Not counted as a restart.
///
/// # Errors
/// [`ChildError::NotFound`], [`ChildError::Call`].
#[allow(unsafe_code)]
#[traced(module = "runtime::supervisor")]
pub async fn terminate_child(
    supervisor: impl Into<ServerRef>,
    id: &str,
    timeout: impl Into<Timeout>,
) -> Result<(), ChildError> {
    let id = id.to_owned();
    request(supervisor.into(), timeout.into(), |reply| {
        Request::TerminateChild(id, reply)
    })
    .await?
}

/// Starts the listed, not running child `id` again, Erlang's `supervisor:restart_child/2`.
/// Not counted as a restart.
///
/// # Errors
/// [`ChildError::NotFound`], [`ChildError::Running`], [`ChildError::Start`],
/// [`ChildError::Call`].
#[allow(unsafe_code)]
#[traced(module = "runtime::supervisor")]
pub async fn restart_child(
    supervisor: impl Into<ServerRef>,
    id: &str,
    timeout: impl Into<Timeout>,
) -> Result<Pid, ChildError> {
    let id = id.to_owned();
    request(supervisor.into(), timeout.into(), |reply| {
        Request::RestartChild(id, reply)
    })
    .await?
}

/// Removes the not running child `id` from the list, Erlang's `supervisor:delete_child/2`.
///
/// # Errors
/// [`ChildError::NotFound`], [`ChildError::Running`], [`ChildError::Call`].
#[allow(unsafe_code)]
#[traced(module = "runtime::supervisor")]
pub async fn delete_child(
    supervisor: impl Into<ServerRef>,
    id: &str,
    timeout: impl Into<Timeout>,
) -> Result<(), ChildError> {
    let id = id.to_owned();
    request(supervisor.into(), timeout.into(), |reply| {
        Request::DeleteChild(id, reply)
    })
    .await?
}

/// Stops the supervisor with `reason` and waits until it has ended, as `gen_server:stop/3`
/// stops an OTP supervisor: it takes the request after the messages already in its mailbox,
/// stops every child by its shutdown policy, last started first, and exits with `reason`.
/// When this returns `Ok`, the supervisor and its children are gone and their names are free.
///
/// # Errors
/// As [`gen_server::stop`](crate::gen_server::stop).
#[allow(unsafe_code)]
#[traced(module = "runtime::supervisor")]
pub async fn stop(
    supervisor: impl Into<ServerRef>,
    reason: ExitReason,
    timeout: impl Into<Timeout>,
) -> Result<(), StopError> {
    stop_process(supervisor.into(), reason, timeout.into()).await
}

/// A request as it travels to a supervisor: a private type, so only this module's functions
/// can make one.
pub(super) enum Request {
    WhichChildren(oneshot::Sender<Vec<ChildInfo>>),
    TerminateChild(String, oneshot::Sender<Result<(), ChildError>>),
    RestartChild(String, oneshot::Sender<Result<Pid, ChildError>>),
    DeleteChild(String, oneshot::Sender<Result<(), ChildError>>),
}

/// Sends a request built around a one-shot reply channel and waits for the answer. A dead
/// supervisor drops the request, and with it the sender: that is `NoProc`.
async fn request<R>(
    supervisor: ServerRef,
    timeout: Timeout,
    make: impl FnOnce(oneshot::Sender<R>) -> Request,
) -> Result<R, CallError> {
    let pid = match &supervisor {
        ServerRef::Pid(pid) => *pid,
        ServerRef::Name(name) => match with_current(|c| c.map(|p| p.node.registry.whereis(name))) {
            Some(Some(pid)) => pid,
            Some(None) => return Err(CallError::NoProc(supervisor)),
            None => return Err(CallError::NotInProcess(name.clone())),
        },
    };
    crate::process::calling(pid);
    let (tx, rx) = oneshot::channel();
    let rx = crate::process::noting(crate::process::Wait::Call, rx);
    let msg = Message::new(make(tx));
    let queued = NodeInner::with_process(pid, |p| p.try_push_message(msg).is_ok());
    if queued != Some(true) {
        return Err(CallError::NoProc(supervisor));
    }
    let answer = match timeout {
        Timeout::After(after) => match tokio::time::timeout(after, rx).await {
            Ok(answer) => answer,
            Err(_) => return Err(CallError::Timeout { supervisor, after }),
        },
        Timeout::Infinity => rx.await,
    };
    answer.map_err(|_| CallError::NoProc(supervisor))
}
