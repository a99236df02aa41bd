//! The server side: starting a supervisor, its process's receive loop, and how it starts,
//! stops and restarts its children.

use crate::traced;
use std::any::Any;
use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::client::Request;
use super::intensity::{RestartIntensity, RestartVerdict};
use super::{
    ChildError, ChildInfo, ChildSpec, Restart, Shutdown, StartChildError, StartError, StartOptions,
    Strategy, SupervisorSpec, reached_max_restart_intensity,
};
use crate::gen_server::StopRequest;
use crate::node::NodeInner;
use crate::process::{Process, SpawnError, SpawnOptions, spawn_on_node, with_current};
use crate::registry::RegistryError;
use crate::{Down, Exit, ExitReason, NodeHandle, Pid};

/// Starts a supervisor linked to the calling process (its parent), and returns once all its
/// children have started, Erlang's `supervisor:start_link/2,3`.
///
/// If a child fails to start, the children started before it are stopped in reverse order,
/// the supervisor is unlinked from the caller (so the caller is not killed) and exits, and
/// the error, naming the child, is returned once the supervisor's process is gone (its name is
/// free again). When the caller exits, the supervisor stops its children and exits with the
/// caller's reason.
///
/// ```
/// use runtime::supervisor::{self, ChildSpec, StartOptions, SupervisorFlags, SupervisorSpec};
/// use runtime::{Node, receive, self_pid, send};
///
/// let node = Node::new().unwrap();
/// let restarted = node.run(async {
///     let me = self_pid();
///     let spec = SupervisorSpec::new(SupervisorFlags::default()).child(ChildSpec::worker(
///         "echo",
///         move || async move {
///             send(me, self_pid()); // tell the test who we are
///             let crash: &str = receive().await;
///             runtime::ExitReason::custom(crash)
///         },
///     ));
///     supervisor::start_link(spec, StartOptions::new().name("top")).await.unwrap();
///     let first: runtime::Pid = receive().await;
///     send(first, "boom");
///     let second: runtime::Pid = receive().await; // restarted by the supervisor
///     first != second
/// });
/// assert!(restarted.unwrap());
/// ```
///
/// # Errors
/// [`StartError::ChildFailed`], [`StartError::DuplicateChildId`],
/// [`StartError::AlreadyStarted`], [`StartError::Spawn`] (`NotInProcess` outside a process: use
/// [`start_on`] there), [`StartError::Exited`].
#[allow(unsafe_code)]
#[traced(module = "runtime::supervisor")]
pub async fn start_link(spec: SupervisorSpec, opts: StartOptions) -> Result<Pid, StartError> {
    let parent =
        with_current(|c| c.map(Arc::clone)).ok_or(StartError::Spawn(SpawnError::NotInProcess))?;
    let node = Arc::clone(&parent.node);
    start_inner(&node, Some(&parent), spec, opts, true).await
}

/// As [`start_link`], without the link: the calling process is the supervisor's parent (an
/// `Exit` from it still stops the supervisor), but its death does not reach the supervisor.
///
/// # Errors
/// As [`start_link`].
#[allow(unsafe_code)]
#[traced(module = "runtime::supervisor")]
pub async fn start(spec: SupervisorSpec, opts: StartOptions) -> Result<Pid, StartError> {
    let parent =
        with_current(|c| c.map(Arc::clone)).ok_or(StartError::Spawn(SpawnError::NotInProcess))?;
    let node = Arc::clone(&parent.node);
    start_inner(&node, Some(&parent), spec, opts, false).await
}

/// Starts a supervisor on `node` from outside any process (it has no parent; stop it with
/// `exit(pid, ExitReason::Shutdown)` or by shutting the node down). Returns once all its
/// children have started.
///
/// # Errors
/// As [`start_link`].
#[allow(unsafe_code)]
#[traced(module = "runtime::supervisor")]
pub async fn start_on(
    node: &NodeHandle,
    spec: SupervisorSpec,
    opts: StartOptions,
) -> Result<Pid, StartError> {
    start_inner(&node.inner, None, spec, opts, false).await
}

/// What a supervisor sends itself to retry a restart that failed to start a child.
struct RetryRestart(String);

const INITIAL_CALL: &str = "runtime::supervisor::init/1";

async fn start_inner(
    node: &Arc<NodeInner>,
    parent: Option<&Arc<Process>>,
    spec: SupervisorSpec,
    opts: StartOptions,
    link: bool,
) -> Result<Pid, StartError> {
    for (i, child) in spec.children.iter().enumerate() {
        if spec.children[..i].iter().any(|c| c.id == child.id) {
            return Err(StartError::DuplicateChildId(child.id.clone()));
        }
    }
    let (ack_tx, ack_rx) = oneshot::channel();
    let parent_pid = parent.map(|p| p.pid);
    let mut spawn_opts = SpawnOptions::new()
        .trap_exit()
        .supervisor()
        .initial_call(Cow::Borrowed(INITIAL_CALL));
    if let Some(name) = opts.name {
        spawn_opts = spawn_opts.name(name);
    }
    if link {
        spawn_opts = spawn_opts.link();
    }
    let future = run(spec, parent_pid, link, ack_tx);
    let (process, _) = match spawn_on_node(node, parent, future, spawn_opts) {
        Ok(spawned) => spawned,
        Err(SpawnError::Name(RegistryError::NameTaken { name, holder })) => {
            return Err(StartError::AlreadyStarted { name, pid: holder });
        }
        Err(e) => return Err(StartError::Spawn(e)),
    };
    let outcome = match ack_rx.await {
        Ok(Ok(())) => return Ok(process.pid),
        Ok(Err(e)) => e,
        Err(_) => {
            node.wait_until(|| process.exit_reason().is_some()).await;
            StartError::Exited(process.exit_reason().cloned().unwrap_or(ExitReason::Killed))
        }
    };
    // As OTP's proc_lib does, return the failure only once the process is gone, so that its
    // name is free again for a retry.
    let pid = process.pid;
    drop(process);
    node.wait_until(|| NodeInner::with_process(pid, |_| ()).is_none())
        .await;
    Err(outcome)
}

/// The supervisor process: start the children, answer the starter, supervise.
async fn run(
    spec: SupervisorSpec,
    parent: Option<Pid>,
    linked: bool,
    ack: oneshot::Sender<Result<(), StartError>>,
) -> ExitReason {
    let mut sup = Supervisor {
        // Untraced: a supervisor's own start shows no `self_pid` call in a profile.
        me: crate::try_self_pid().expect("a supervisor runs in its process"),
        parent,
        strategy: spec.flags.strategy,
        intensity: RestartIntensity::new(spec.flags.intensity, spec.flags.period),
        children: spec
            .children
            .into_iter()
            .map(|spec| Child {
                spec,
                pid: None,
                restarting: false,
            })
            .collect(),
    };
    if let Err((id, error)) = sup.start_all().await {
        if linked && let Some(parent) = parent {
            let _ = crate::unlink(parent);
        }
        let reason = ExitReason::custom(format!("failed_to_start_child `{id}`: {error}"));
        let _ = ack.send(Err(StartError::ChildFailed { id, error }));
        return reason;
    }
    let _ = ack.send(Ok(()));
    sup.serve().await
}

struct Child {
    spec: ChildSpec,
    /// The running process, if any.
    pid: Option<Pid>,
    /// A restart failed to start it; a [`RetryRestart`] is on its way.
    restarting: bool,
}

/// A supervisor's state, owned by its process.
struct Supervisor {
    me: Pid,
    parent: Option<Pid>,
    strategy: Strategy,
    intensity: RestartIntensity,
    /// In start order.
    children: Vec<Child>,
}

impl Supervisor {
    /// Starts every child in order; on a failure, stops the started ones in reverse.
    async fn start_all(&mut self) -> Result<(), (String, StartChildError)> {
        for i in 0..self.children.len() {
            if let Err(error) = self.start_child(i).await {
                self.stop_all().await;
                return Err((self.children[i].spec.id.clone(), error));
            }
        }
        Ok(())
    }

    /// Runs child `i`'s start function and records its pid.
    async fn start_child(&mut self, i: usize) -> Result<Pid, StartChildError> {
        // A start function that panics fails the start, as OTP turns a crash in a child's
        // start into `{error, Reason}`; it does not take the supervisor down.
        let start = &self.children[i].spec.start;
        let started = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| start())) {
            Ok(future) => match (CatchUnwind { future }).await {
                Ok(result) => result,
                Err(msg) => Err(StartChildError::other(format!(
                    "the start function panicked: {msg}"
                ))),
            },
            Err(payload) => Err(StartChildError::other(format!(
                "the start function panicked: {}",
                crate::exit::panic_message(&*payload)
            ))),
        };
        if let Ok(pid) = started {
            let child = &mut self.children[i];
            child.pid = Some(pid);
            child.restarting = false;
        }
        started
    }

    /// Stops every running child, last started first.
    async fn stop_all(&mut self) {
        for i in (0..self.children.len()).rev() {
            self.stop_child(i).await;
        }
    }

    async fn stop_child(&mut self, i: usize) {
        if let Some(pid) = self.children[i].pid.take() {
            shutdown_child(pid, self.children[i].spec.shutdown).await;
        }
    }

    /// The receive loop; returns the reason to exit with.
    async fn serve(mut self) -> ExitReason {
        loop {
            let msg = crate::receive_any().await;
            let msg = match msg.downcast::<Exit>() {
                Ok(exit) => match self.handle_exit(exit).await {
                    Some(reason) => return reason,
                    None => continue,
                },
                Err(msg) => msg,
            };
            let msg = match msg.downcast::<Request>() {
                Ok(request) => {
                    self.handle_request(request).await;
                    continue;
                }
                Err(msg) => msg,
            };
            let msg = match msg.downcast::<StopRequest>() {
                Ok(StopRequest(reason)) => {
                    self.stop_all().await;
                    return reason;
                }
                Err(msg) => msg,
            };
            if let Ok(RetryRestart(id)) = msg.downcast::<RetryRestart>()
                && let Some(i) = self.index_of_id(&id)
                && self.children[i].restarting
                && self.children[i].pid.is_none()
                && let Some(reason) = self.restart(&id).await
            {
                return reason;
            }
            // Any other message is dropped, as OTP's supervisor drops (and logs) it.
        }
    }

    async fn handle_exit(&mut self, exit: Exit) -> Option<ExitReason> {
        if exit.from == self.me || Some(exit.from) == self.parent {
            self.stop_all().await;
            return Some(exit.reason);
        }
        // An exit of a process that is no longer a child (stopped and unlinked already) is
        // stale: ignore it.
        let i = self
            .children
            .iter()
            .position(|c| c.pid == Some(exit.from))?;
        let child = &mut self.children[i];
        child.pid = None;
        match child.spec.restart {
            Restart::Temporary => {
                self.children.remove(i);
                None
            }
            Restart::Transient if !exit.reason.is_abnormal() => None,
            Restart::Permanent | Restart::Transient => {
                let id = child.spec.id.clone();
                self.restart(&id).await
            }
        }
    }

    /// Restarts child `id` by the strategy, counting it against the intensity. Returns the
    /// reason to exit with when the intensity is exceeded.
    async fn restart(&mut self, id: &str) -> Option<ExitReason> {
        match self.intensity.record_restart(Instant::now()) {
            RestartVerdict::Allowed => {}
            RestartVerdict::Exceeded => {
                self.stop_all().await;
                return Some(reached_max_restart_intensity());
            }
        }
        let failed = self.index_of_id(id)?;
        let range = self.strategy.affected(failed, self.children.len());
        for i in range.clone().rev() {
            self.stop_child(i).await;
        }
        // Temporary children stopped for a group restart are not started again.
        let (start, mut end) = (range.start, range.end);
        let mut i = start;
        while i < end {
            if self.children[i].spec.restart == Restart::Temporary {
                self.children.remove(i);
                end -= 1;
            } else {
                i += 1;
            }
        }
        for i in start..end {
            if self.start_child(i).await.is_err() {
                // Retried through the mailbox, so that requests and exits are served
                // meanwhile; each retry counts against the intensity, as in OTP.
                let child = &mut self.children[i];
                child.restarting = true;
                crate::send(self.me, RetryRestart(child.spec.id.clone()));
                break;
            }
        }
        None
    }

    async fn handle_request(&mut self, request: Request) {
        match request {
            Request::WhichChildren(reply) => {
                let _ = reply.send(self.which_children());
            }
            Request::TerminateChild(id, reply) => {
                let answer = match self.index_of_id(&id) {
                    None => Err(ChildError::NotFound(id)),
                    Some(i) => {
                        self.stop_child(i).await;
                        self.children[i].restarting = false;
                        if self.children[i].spec.restart == Restart::Temporary {
                            self.children.remove(i);
                        }
                        Ok(())
                    }
                };
                let _ = reply.send(answer);
            }
            Request::RestartChild(id, reply) => {
                let answer = match self.index_of_id(&id) {
                    None => Err(ChildError::NotFound(id)),
                    Some(i) if self.children[i].pid.is_some() => Err(ChildError::Running(id)),
                    Some(i) => self
                        .start_child(i)
                        .await
                        .map_err(|error| ChildError::Start { id, error }),
                };
                let _ = reply.send(answer);
            }
            Request::DeleteChild(id, reply) => {
                let answer = match self.index_of_id(&id) {
                    None => Err(ChildError::NotFound(id)),
                    Some(i) if self.children[i].pid.is_some() => Err(ChildError::Running(id)),
                    Some(i) => {
                        self.children.remove(i);
                        Ok(())
                    }
                };
                let _ = reply.send(answer);
            }
        }
    }

    fn which_children(&self) -> Vec<ChildInfo> {
        self.children
            .iter()
            .map(|c| ChildInfo {
                id: c.spec.id.clone(),
                pid: c.pid,
                kind: c.spec.kind,
                restart: c.spec.restart,
            })
            .collect()
    }

    fn index_of_id(&self, id: &str) -> Option<usize> {
        self.children.iter().position(|c| c.spec.id == id)
    }
}

/// Stops `pid` by `policy` and waits until it has ended (see the [module
/// table](super#stopping-a-child)). Runs in the supervisor's process.
async fn shutdown_child(pid: Pid, policy: Shutdown) {
    let Ok(mref) = crate::monitor(pid) else {
        crate::exit(pid, ExitReason::Kill);
        return;
    };
    // From here no exit signal from the child's link is acted on; one it already turned into
    // a message is taken out, so the receive loop never sees it.
    let _ = crate::unlink(pid);
    let _ = take_now::<Exit, _>(move |e| e.from == pid).await;
    let down = move |d: &Down| d.monitor_ref == mref;
    match policy {
        Shutdown::BrutalKill => {
            crate::exit(pid, ExitReason::Kill);
            let _: Down = crate::receive_where(down).await;
        }
        Shutdown::Timeout(after) => {
            crate::exit(pid, ExitReason::Shutdown);
            if tokio::time::timeout(after, crate::receive_where(down))
                .await
                .is_err()
            {
                crate::exit(pid, ExitReason::Kill);
                let _: Down = crate::receive_where(down).await;
            }
        }
        Shutdown::Infinity => {
            crate::exit(pid, ExitReason::Shutdown);
            let _: Down = crate::receive_where(down).await;
        }
    }
}

/// Takes the first message of type `T` that `matches` accepts if one is already in the
/// mailbox, without waiting.
async fn take_now<T, F>(matches: F) -> Option<T>
where
    T: Any + Send,
    F: FnMut(&T) -> bool + Unpin,
{
    let mut receive = std::pin::pin!(crate::receive_where::<T, F>(matches));
    std::future::poll_fn(|cx| {
        Poll::Ready(match receive.as_mut().poll(cx) {
            Poll::Ready(msg) => Some(msg),
            Poll::Pending => None,
        })
    })
    .await
}

pin_project_lite::pin_project! {
    /// Polls a future, turning a panic into the panic's message.
    struct CatchUnwind<F> {
        #[pin]
        future: F,
    }
}

impl<F: std::future::Future> std::future::Future for CatchUnwind<F> {
    type Output = Result<F::Output, std::sync::Arc<str>>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let future = self.project().future;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.poll(cx))) {
            Ok(std::task::Poll::Ready(out)) => std::task::Poll::Ready(Ok(out)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(payload) => std::task::Poll::Ready(Err(crate::exit::panic_message(&*payload))),
        }
    }
}
