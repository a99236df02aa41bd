//! Processes that wait for ever, for the tests of what a process waits for: a call no one
//! answers, and a wait until processes are suspended. Included by the tests that need it
//! (`#[path = "support/waits.rs"] mod waits;`); not every test uses every item.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use runtime::gen_server::{CallReply, Caller, GenServer};
use runtime::{ExitReason, Node, Pid, ProcessStatus};

/// The request type of calls made to plain processes, which never answer (a call only needs
/// the callee's mailbox).
pub(crate) struct Unanswered;

impl GenServer for Unanswered {
    type Args = ();
    type Call = ();
    type Reply = ();
    type Cast = ();
    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Unanswered)
    }
    async fn handle_call(&mut self, (): (), _from: &mut Caller<()>) -> CallReply<()> {
        CallReply::NoReply
    }
}

/// Waits (within a generous bound) until every one of `pids` is suspended, in turn: name a
/// caller before its callee, so that the callee seen waiting has taken the request in.
pub(crate) fn until_waiting(node: &Node, pids: &[Pid]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for &pid in pids {
        while node.process_info(pid).map(|i| i.status) != Some(ProcessStatus::Waiting) {
            assert!(Instant::now() < deadline, "{pid} never waited");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
