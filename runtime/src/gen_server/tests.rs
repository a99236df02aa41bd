//! Tests of the process layer's and the observers' behaviour seen through a gen_server: they
//! live here, at the top layer, because the layers they test never name the behaviours.

use std::time::Duration;

use crate::ExitReason;
use crate::gen_server::{self, CallError, CallReply, Caller, GenServer, Timeout};
use crate::introspect::walk;
use crate::sample::ProcessState;
use crate::{Node, ProcessStatus, receive};

/// A server type for calls to a process that never answers.
struct Silent;

impl GenServer for Silent {
    type Args = ();
    type Call = ();
    type Reply = ();
    type Cast = ();
    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Silent)
    }
    async fn handle_call(&mut self, (): (), _from: &mut Caller<()>) -> CallReply<()> {
        CallReply::NoReply
    }
}

/// A process whose first call comes in its first poll makes its call deadline before it
/// has kept its task's waker: the deadline gets the waker at the first suspension, and
/// that call's timeout and the next one's still wake it.
#[test]
fn calls_made_before_the_first_suspension_time_out() {
    let node = Node::builder().current_thread().build().expect("node");
    let (first, second) = node
        .run(async {
            let sink = crate::spawn(std::future::pending::<()>()).expect("spawn");
            let after = Timeout::After(Duration::from_millis(20));
            let first = gen_server::call::<Silent>(sink, (), after).await;
            let second = gen_server::call::<Silent>(sink, (), after).await;
            (first, second)
        })
        .expect("ran");
    assert!(matches!(first, Err(CallError::Timeout { .. })), "{first:?}");
    assert!(
        matches!(second, Err(CallError::Timeout { .. })),
        "{second:?}"
    );
}

/// A request no one answers: the process called is a plain process.
struct Unanswered;

impl crate::gen_server::GenServer for Unanswered {
    type Args = ();
    type Call = ();
    type Reply = ();
    type Cast = ();
    async fn init((): ()) -> Result<Self, crate::ExitReason> {
        Ok(Unanswered)
    }
    async fn handle_call(
        &mut self,
        (): (),
        _from: &mut crate::gen_server::Caller<()>,
    ) -> crate::gen_server::CallReply<()> {
        crate::gen_server::CallReply::NoReply
    }
}

#[test]
fn a_walk_tells_what_each_waiting_process_waits_for() {
    use crate::gen_server::{Timeout, call};
    use std::time::{Duration, Instant};
    let node = Node::new().unwrap();
    let quiet = node
        .spawn(async {
            let _: String = receive().await;
        })
        .unwrap();
    let timed = node
        .spawn(async {
            let _: Option<String> = crate::receive_timeout(Duration::from_secs(3600)).await;
        })
        .unwrap();
    let caller = node
        .spawn(async move {
            let _ = call::<Unanswered>(quiet, (), Timeout::Infinity).await;
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    // The caller first: once it waits, its request is in `quiet`'s mailbox, so `quiet`
    // seen waiting afterwards has taken it in and waits again.
    for pid in [caller, quiet, timed] {
        while node.process_info(pid).map(|i| i.status) != Some(ProcessStatus::Waiting) {
            assert!(Instant::now() < deadline, "{pid} never waited");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let mut seen = std::collections::HashMap::new();
    walk(node.handle(), |p| {
        seen.insert(p.pid, (p.state, p.callee));
    });
    assert_eq!(seen[&quiet], (ProcessState::Receive, None));
    assert_eq!(seen[&timed], (ProcessState::ReceiveTimeout, None));
    assert_eq!(seen[&caller], (ProcessState::Call, Some(quiet)));
}
