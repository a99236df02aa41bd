//! Introspection: `processes()` and `process_info(pid)`.

use crate::traced;
use std::borrow::Cow;
use std::sync::atomic::Ordering;

use super::{Process, STATUS_EXITING, STATUS_NEW, STATUS_RUNNING, with_current};
use crate::Pid;
use crate::node::NodeInner;
use crate::registry::Name;

/// What a process is doing, as `process_info` reports it (Erlang's `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProcessStatus {
    /// Being polled right now.
    Running,
    /// Not being polled, with a message or signal waiting for it.
    Runnable,
    /// Suspended, waiting for a message or some other event.
    Waiting,
    /// Ending: its exit bookkeeping is running.
    Exiting,
}

/// A snapshot of one process, Erlang's `process_info/1`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// The process.
    pub pid: Pid,
    /// Its registered name, if any.
    pub registered_name: Option<Name>,
    /// The process that spawned it (`None` when spawned from outside any process).
    pub parent: Option<Pid>,
    /// What it was started with: the type name of its future, or the name given in
    /// [`SpawnOptions::initial_call`](crate::SpawnOptions::initial_call).
    pub initial_call: Cow<'static, str>,
    /// What it is doing.
    pub status: ProcessStatus,
    /// Messages in its mailbox.
    pub message_queue_len: usize,
    /// The processes it is linked to.
    pub links: Vec<Pid>,
    /// The processes it monitors.
    pub monitors: Vec<Pid>,
    /// The processes that monitor it.
    pub monitored_by: Vec<Pid>,
    /// Whether it traps exits.
    pub trap_exit: bool,
    /// The trace sessions that trace it: bit `n` is the session in slot `n`
    /// ([`TraceSession::slot`](crate::trace::TraceSession::slot)).
    pub trace_sessions: u64,
    /// Its heap figures; `None` unless [`CountingAlloc`](crate::CountingAlloc) is the global
    /// allocator ([`heap::process_heap`](crate::heap::process_heap) says why).
    pub heap: Option<crate::heap::HeapStats>,
    /// The traced function it is running, or suspended in, while a session measures it
    /// (call_time or call_memory); `None` otherwise, or outside any traced function.
    pub current_function: Option<&'static crate::trace::Callsite>,
}

/// What [`Process::inspect`] reads under the process's lock.
pub(crate) struct Inspected {
    pub(crate) name: Option<Name>,
    pub(crate) is_supervisor: bool,
    /// What it is doing, as [`ProcessInfo::status`].
    pub(crate) status: ProcessStatus,
    /// What it waits for, told from the same read of its status.
    pub(crate) waiting: Option<(super::Wait, Option<Pid>)>,
    /// Messages (and exit signals not yet acted on) in its mailbox.
    pub(crate) queue_len: usize,
    /// The bytes they hold: the queues' buffers and the boxed envelopes.
    pub(crate) queue_bytes: u64,
}

impl Process {
    /// Its registered name, if any.
    pub(crate) fn registered_name(&self) -> Option<Name> {
        self.state().name.clone()
    }

    /// What it is doing now, and its message queue's length: one lock, its mailbox's queue
    /// of incoming messages, taken briefly.
    pub(crate) fn status_and_queue(&self) -> (ProcessStatus, usize) {
        let (len, incoming) = self.mailbox.len_and_incoming();
        (self.status_given(incoming).0, len)
    }

    /// [`status_and_queue`](Self::status_and_queue), and what it waits for as the same read
    /// of its status says ([`Process::waiting_given`]).
    pub(crate) fn status_queue_and_wait(
        &self,
    ) -> (ProcessStatus, usize, Option<(super::Wait, Option<Pid>)>) {
        let (len, incoming) = self.mailbox.len_and_incoming();
        let (status, word) = self.status_given(incoming);
        (status, len, self.waiting_given(word))
    }

    /// What it is doing now, given whether its incoming queue holds anything; and the status
    /// byte it was told from.
    fn status_given(&self, incoming: bool) -> (ProcessStatus, u8) {
        let word = self.status.load(Ordering::Acquire);
        let status = match word & super::wait::STATUS_MASK {
            STATUS_RUNNING => ProcessStatus::Running,
            STATUS_EXITING => ProcessStatus::Exiting,
            STATUS_NEW => ProcessStatus::Runnable,
            // Woken and queued for a worker (see `waker`); or a message wakes a process
            // waiting for one (or in an unknown wait: it may), not one waiting for a call's
            // reply.
            _ if word & super::wait::WOKEN != 0
                || self.flags.load(Ordering::Relaxed) & !super::HEAP_LIMITED != 0
                || (incoming && super::wait::woken_by_messages(word)) =>
            {
                ProcessStatus::Runnable
            }
            _ => ProcessStatus::Waiting,
        };
        (status, word)
    }

    /// What a walk of its node reads of it ([`crate::introspect`]): its links and the
    /// processes it monitors (into `links` and `monitors`, cleared first, so that a walk
    /// reuses two buffers), its name, whether it is a supervisor, and its mailbox's messages
    /// and bytes. Its own lock once (the mailbox's incoming queue with its state), and its
    /// saved queue's once if it has saved messages: never more than one at a time.
    pub(crate) fn inspect(&self, links: &mut Vec<Pid>, monitors: &mut Vec<Pid>) -> Inspected {
        links.clear();
        monitors.clear();
        let ((name, is_supervisor), incoming, incoming_bytes) =
            self.mailbox.inspect_incoming(|state| {
                links.extend_from_slice(state.links.as_slice());
                monitors.extend(state.monitoring.iter().map(|(_, p)| *p));
                (state.name.clone(), state.is_supervisor)
            });
        let (saved, saved_bytes) = self.mailbox.inspect_saved();
        let (status, word) = self.status_given(incoming > 0);
        Inspected {
            name,
            is_supervisor,
            status,
            waiting: self.waiting_given(word),
            queue_len: incoming + saved,
            queue_bytes: incoming_bytes + saved_bytes,
        }
    }

    pub(crate) fn info(&self) -> ProcessInfo {
        let (status, message_queue_len) = self.status_and_queue();
        let state = self.state();
        ProcessInfo {
            pid: self.pid,
            registered_name: state.name.clone(),
            parent: self.parent(),
            initial_call: self.initial_call(),
            status,
            message_queue_len,
            links: state.links.as_slice().to_vec(),
            monitors: state.monitoring.iter().map(|(_, p)| *p).collect(),
            monitored_by: state
                .monitored_by
                .as_slice()
                .iter()
                .map(|(_, p)| *p)
                .collect(),
            trap_exit: self.trap_exit.load(Ordering::Relaxed),
            trace_sessions: self.trace_flags.traced(),
            heap: self.heap_account().map(|a| a.stats()),
            current_function: self
                .current_function()
                .and_then(|id| crate::trace::callsites().get(id as usize)),
        }
    }
}

/// The pids of every live process on the caller's node, in slot order; empty outside a process
/// (use [`NodeHandle::processes`](crate::NodeHandle::processes) there).
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn processes() -> Vec<Pid> {
    with_current(|c| c.map(|p| p.node.processes()).unwrap_or_default())
}

/// A snapshot of the process `pid` (on any node of this OS process), or `None` if it is not
/// alive.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn process_info(pid: Pid) -> Option<ProcessInfo> {
    NodeInner::with_process(pid, Process::info)
}
