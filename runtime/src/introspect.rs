//! A read-only walk of a node's processes: what each one is, holds and is tied to, for tools
//! that look at a whole node at once (a heap snapshot, [`crate::heap_snapshot`]).
//!
//! [`walk`] visits the live processes of a node one after another, in slot order. It never
//! stops the world and holds no lock across the node: each process is read under its own lock
//! (its mailbox's, which also guards its links, monitors and name), briefly, and the visitor
//! runs after that lock is let go, so it may do anything (send, spawn, even walk again). The
//! cost is linear: one look at each slot, and per process its links, monitors and queued
//! messages; two buffers are reused from one process to the next, so a walk allocates nothing
//! per process.
//!
//! The processes are not read at one instant: one that spawns or ends while the walk runs may
//! be visited or not, and a link or monitor may name a process that has ended since (or that
//! the walk visited before it was linked). Tools should treat a pid they did not see as gone.
//!
//! ```
//! use runtime::{Node, introspect, receive, spawn};
//!
//! let node = Node::new().unwrap();
//! node.run(async {
//!     // It waits for a `String`: the `u32` stays in its mailbox.
//!     let worker = spawn(async { let _: String = receive().await; }).unwrap();
//!     runtime::send(worker, 7u32);
//!     runtime::register("worker", worker).unwrap();
//! }).unwrap();
//! let mut seen = Vec::new();
//! introspect::walk(&node, |p| {
//!     seen.push((p.registered_name.map(|n| n.to_string()), p.message_queue_len))
//! });
//! // The process that spawned it has ended; the worker waits.
//! assert_eq!(seen, [(Some("worker".to_owned()), 1)]);
//! ```

use crate::heap::HeapStats;
use crate::name::Name;
use crate::sample::ProcessState;
use crate::trace::Callsite;
use crate::{NodeHandle, Pid, ProcessStatus};

/// One process as [`walk`] sees it; borrowed for the visit only.
#[derive(Debug)]
#[non_exhaustive]
pub struct ProcessView<'a> {
    /// The process.
    pub pid: Pid,
    /// The process that spawned it, if a process did (a supervisor, for its children).
    pub parent: Option<Pid>,
    /// What it was started with ([`ProcessInfo::initial_call`](crate::ProcessInfo)).
    pub initial_call: &'a str,
    /// Its registered name, if any.
    pub registered_name: Option<&'a Name>,
    /// Whether it is a supervisor ([`crate::supervisor`]): its children are the processes
    /// whose `parent` it is.
    pub is_supervisor: bool,
    /// Its heap figures; `None` unless [`CountingAlloc`](crate::CountingAlloc) is the global
    /// allocator. Its live bytes include its mailbox's (see [`crate::heap`]).
    pub heap: Option<HeapStats>,
    /// Messages in its mailbox (with exit signals not yet acted on).
    pub message_queue_len: usize,
    /// The bytes its mailbox holds: its queues' buffers and each message's envelope (a boxed
    /// message's box). What a message's value owns (a `Vec`'s buffer, say) is not counted: it
    /// belongs to whoever allocated it.
    pub mailbox_bytes: u64,
    /// The processes it is linked to.
    pub links: &'a [Pid],
    /// The processes it monitors.
    pub monitors: &'a [Pid],
    /// What it is doing ([`ProcessInfo::status`](crate::ProcessInfo)).
    pub status: ProcessStatus,
    /// What it is doing, told finer: for a waiting process, what it waits for (`receive`, a
    /// `receive` with a timer, a call's reply), as its wait noted it when it suspended (read
    /// with [`status`](Self::status), from one load), or else as
    /// [`current_function`](Self::current_function) names it.
    pub state: ProcessState,
    /// The process it waits for in a call (a `gen_server` or supervisor call), when
    /// [`state`](Self::state) is [`ProcessState::Call`] and its wait noted whom.
    pub callee: Option<Pid>,
    /// Its polls so far, wrapping at `u32::MAX`: the polls between two walks are the
    /// difference, taken with `wrapping_sub`.
    pub polls: u32,
    /// The traced function it runs or is suspended in, while a session measures it
    /// ([`ProcessInfo::current_function`](crate::ProcessInfo)).
    pub current_function: Option<&'static Callsite>,
    /// Whether a session measures it now (a sample session of any sampler, call_time or
    /// call_memory) but its current poll (running) or last one (suspended) began before any
    /// did: what it runs or waits in is then unknown (no traced frame entered before the
    /// session began is known), and [`current_function`](Self::current_function) is `None`.
    /// False while no session measures it. (A session's flag leaves a mark on a process no
    /// session measures yet, which its first measured poll overwrites: see
    /// `runtime::trace::unmeasured` in the sources for what it can miss.)
    pub polled_before_sampling: bool,
}

/// Visits every live process of `node`, in slot order, and returns how many it visited. See
/// the [module docs](self) for what it reads, how, and what it guarantees.
pub fn walk(node: &NodeHandle, mut visit: impl FnMut(&ProcessView<'_>)) -> usize {
    let table = &node.inner.table;
    let mut links = Vec::new();
    let mut monitors = Vec::new();
    let mut call = String::new();
    let mut visited = 0;
    for index in 0..table.high_water() {
        // Read under the slot's hold (which an exiting process waits for), then let go of it
        // before the visitor runs.
        let (pid, parent, inspected, heap, polls, current, before) = {
            let Some(read) = table.at_index(index) else {
                continue;
            };
            let Some(p) = read.as_deref() else {
                continue;
            };
            call.clear();
            call.push_str(&p.initial_call());
            let inspected = p.inspect(&mut links, &mut monitors);
            let heap = p.heap_account().map(|a| a.stats());
            let current = p
                .current_function()
                .and_then(|id| crate::trace::callsites().get(id as usize));
            let before = p.function_unknown();
            (
                p.pid,
                p.parent(),
                inspected,
                heap,
                p.polls(),
                current,
                before,
            )
        };
        // The wait as read with the status, from one load of it.
        let waiting = inspected.waiting;
        let state = ProcessState::of(inspected.status, waiting, current);
        visit(&ProcessView {
            pid,
            parent,
            initial_call: &call,
            registered_name: inspected.name.as_ref(),
            is_supervisor: inspected.is_supervisor,
            heap,
            message_queue_len: inspected.queue_len,
            mailbox_bytes: inspected.queue_bytes,
            links: &links,
            monitors: &monitors,
            status: inspected.status,
            state,
            callee: waiting.and_then(|(_, callee)| callee),
            polls,
            current_function: current,
            polled_before_sampling: before,
        });
        visited += 1;
    }
    visited
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Node, receive, send, spawn};

    #[test]
    fn a_walk_reads_each_processs_polls_and_status() {
        let node = Node::new().unwrap();
        let (worker, told) = node
            .run(async {
                let me = crate::self_pid();
                // Acknowledges each message it takes, then yields: each message ends a poll
                // (without the yield, a message that arrives while the worker is polled is
                // taken in the same poll).
                let worker = spawn(async move {
                    loop {
                        let n: u32 = receive().await;
                        send(me, n);
                        tokio::task::yield_now().await;
                    }
                })
                .unwrap();
                for n in 0..5u32 {
                    send(worker, n);
                    let _: u32 = receive().await;
                }
                (worker, 5)
            })
            .unwrap();
        // After its last ack it still yields and polls once more before it waits.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while node.process_info(worker).map(|i| i.status) != Some(ProcessStatus::Waiting) {
            assert!(
                std::time::Instant::now() < deadline,
                "the worker never waited"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut seen = None;
        walk(node.handle(), |p| {
            if p.pid == worker {
                seen = Some((p.polls, p.status, p.current_function.is_none()));
            }
        });
        let (polls, status, no_function) = seen.expect("the worker is walked");
        // At least one poll per message it took: each ended with a yield.
        assert!(polls >= told, "{polls} polls for {told} messages");
        assert_eq!(status, ProcessStatus::Waiting);
        assert!(no_function, "no session measures it");
    }
}
