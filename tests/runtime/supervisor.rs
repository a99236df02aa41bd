//! Supervisors: start and stop order, the three strategies, restart types, restart intensity,
//! `which_children` and friends, start failures, nested supervisors and node shutdown.
//!
//! Workers report to an unbounded channel: `Started` is sent by the start function, inside the
//! supervisor (so its order is the start order), and `Stopped` by the worker when its
//! supervisor's exit signal reaches it (it traps exits from its first instruction), before it
//! ends (so its order is the stop order). Waits are bounded generously; nothing asserts on time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use runtime::gen_server::{self, CallReply, Caller, GenServer};
use runtime::supervisor::{
    self, ChildError, ChildInfo, ChildKind, ChildSpec, Restart, Shutdown, StartChildError,
    StartError, StartOptions, Strategy, SupervisorFlags, SupervisorSpec,
};
use runtime::{
    Down, Exit, ExitReason, Node, Pid, SpawnOptions, monitor, receive_any, receive_where, send,
    spawn_opt,
};
use tokio::sync::mpsc::{
    UnboundedReceiver, UnboundedSender, error::TryRecvError, unbounded_channel,
};

const WAIT: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Started(&'static str, Pid),
    Stopped(&'static str, ExitReason),
}

/// Tells a test worker to end with this reason.
struct Die(ExitReason);

/// A worker that traps exits, reports `Stopped` when its supervisor stops it, and ends with
/// the reason of a `Die` it is sent.
fn worker(id: &'static str, log: &UnboundedSender<Event>) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new(id, move || {
        let log = log.clone();
        async move {
            let body_log = log.clone();
            let spawned = spawn_opt(
                async move {
                    loop {
                        let msg = receive_any().await;
                        match msg.downcast::<Exit>() {
                            Ok(exit) => {
                                let _ = body_log.send(Event::Stopped(id, exit.reason.clone()));
                                return exit.reason;
                            }
                            Err(msg) => {
                                if let Ok(Die(reason)) = msg.downcast::<Die>() {
                                    return reason;
                                }
                            }
                        }
                    }
                },
                SpawnOptions::new().link().trap_exit(),
            )?;
            let _ = log.send(Event::Started(id, spawned.pid));
            Ok::<Pid, runtime::SpawnError>(spawned.pid)
        }
    })
}

/// A worker that ends with `reason` as soon as it starts.
fn dies_at_once(id: &'static str, reason: ExitReason, log: &UnboundedSender<Event>) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new(id, move || {
        let log = log.clone();
        let reason = reason.clone();
        async move {
            let pid = runtime::spawn_link(async move { reason })?;
            let _ = log.send(Event::Started(id, pid));
            Ok::<Pid, runtime::SpawnError>(pid)
        }
    })
}

async fn next(rx: &mut UnboundedReceiver<Event>) -> Event {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("no event in time")
        .expect("every sender is gone")
}

async fn events(rx: &mut UnboundedReceiver<Event>, n: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(next(rx).await);
    }
    out
}

fn started_pid(event: &Event, expected_id: &str) -> Pid {
    match event {
        Event::Started(id, pid) if *id == expected_id => *pid,
        other => panic!("expected {expected_id} to start, got {other:?}"),
    }
}

fn stopped(id: &'static str) -> Event {
    Event::Stopped(id, ExitReason::Shutdown)
}

fn assert_no_more_events(rx: &mut UnboundedReceiver<Event>) {
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

/// Ends `pid` with `reason` and waits until it is gone. Its supervisor is told before the
/// monitor is (links are served first), so a request sent afterwards is handled after the exit.
async fn kill_with(pid: Pid, reason: ExitReason) {
    let mref = monitor(pid).expect("called from a process");
    send(pid, Die(reason));
    let down: Down =
        tokio::time::timeout(WAIT, receive_where(move |d: &Down| d.monitor_ref == mref))
            .await
            .expect("the child did not end");
    assert_eq!(down.pid, pid);
}

async fn children(sup: Pid) -> Vec<ChildInfo> {
    supervisor::which_children(sup, WAIT)
        .await
        .expect("the supervisor answers which_children")
}

fn pids(children: &[ChildInfo]) -> Vec<Option<Pid>> {
    children.iter().map(|c| c.pid).collect()
}

fn spec(strategy: Strategy, ids: &[&'static str], log: &UnboundedSender<Event>) -> SupervisorSpec {
    SupervisorSpec::new(
        SupervisorFlags::new(strategy)
            .intensity(10)
            .period(Duration::from_secs(60)),
    )
    .children(ids.iter().map(|id| worker(id, log)))
}

#[test]
fn children_start_in_order_and_stop_in_reverse() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let sup = supervisor::start(
            spec(Strategy::OneForOne, &["a", "b", "c"], &tx),
            StartOptions::new(),
        )
        .await
        .unwrap();
        let started = events(&mut rx, 3).await;
        let a = started_pid(&started[0], "a");
        let b = started_pid(&started[1], "b");
        let c = started_pid(&started[2], "c");
        assert_eq!(pids(&children(sup).await), [Some(a), Some(b), Some(c)]);

        let mref = monitor(sup).unwrap();
        runtime::exit(sup, ExitReason::Shutdown);
        assert_eq!(
            events(&mut rx, 3).await,
            [stopped("c"), stopped("b"), stopped("a")]
        );
        let down: Down = receive_where(move |d: &Down| d.monitor_ref == mref).await;
        assert_eq!(down.reason, ExitReason::Shutdown);
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

#[test]
fn a_linked_supervisor_stops_its_children_when_its_parent_exits() {
    let node = Node::new().unwrap();
    let (tx, mut rx) = unbounded_channel();
    let sup = node
        .run(async move {
            supervisor::start_link(
                spec(Strategy::OneForOne, &["a", "b"], &tx),
                StartOptions::new(),
            )
            .await
            .unwrap()
        })
        .unwrap();
    // The parent has returned normally: the supervisor stops its children and exits.
    let all = node.block_on(events(&mut rx, 4));
    assert_eq!(all[2..], [stopped("b"), stopped("a")]);
    let reason = node
        .run(async move {
            let mref = monitor(sup).unwrap();
            let down: Down = receive_where(move |d: &Down| d.monitor_ref == mref).await;
            down.reason
        })
        .unwrap();
    assert!(
        matches!(reason, ExitReason::Normal | ExitReason::NoProc),
        "{reason:?}"
    );
}

#[test]
fn one_for_one_restarts_only_the_crashed_child() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let sup = supervisor::start_link(
            spec(Strategy::OneForOne, &["a", "b", "c"], &tx),
            StartOptions::new(),
        )
        .await
        .unwrap();
        let started = events(&mut rx, 3).await;
        let (a, b, c) = (
            started_pid(&started[0], "a"),
            started_pid(&started[1], "b"),
            started_pid(&started[2], "c"),
        );
        kill_with(b, ExitReason::custom("boom")).await;
        let b2 = started_pid(&next(&mut rx).await, "b");
        assert_ne!(b2, b);
        assert_eq!(pids(&children(sup).await), [Some(a), Some(b2), Some(c)]);
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

#[test]
fn one_for_all_stops_the_others_in_reverse_and_restarts_all_in_order() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let sup = supervisor::start_link(
            spec(Strategy::OneForAll, &["a", "b", "c"], &tx),
            StartOptions::new(),
        )
        .await
        .unwrap();
        let before: Vec<Pid> = events(&mut rx, 3)
            .await
            .iter()
            .zip(["a", "b", "c"])
            .map(|(e, id)| started_pid(e, id))
            .collect();
        kill_with(before[1], ExitReason::custom("boom")).await;
        let after = events(&mut rx, 5).await;
        assert_eq!(after[..2], [stopped("c"), stopped("a")]);
        let restarted: Vec<Pid> = after[2..]
            .iter()
            .zip(["a", "b", "c"])
            .map(|(e, id)| started_pid(e, id))
            .collect();
        for (old, new) in before.iter().zip(&restarted) {
            assert_ne!(old, new);
        }
        let now = children(sup).await;
        assert_eq!(
            pids(&now),
            restarted.iter().copied().map(Some).collect::<Vec<_>>()
        );
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

#[test]
fn rest_for_one_restarts_the_crashed_child_and_the_later_ones() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let sup = supervisor::start_link(
            spec(Strategy::RestForOne, &["a", "b", "c", "d"], &tx),
            StartOptions::new(),
        )
        .await
        .unwrap();
        let before: Vec<Pid> = events(&mut rx, 4)
            .await
            .iter()
            .zip(["a", "b", "c", "d"])
            .map(|(e, id)| started_pid(e, id))
            .collect();
        kill_with(before[1], ExitReason::custom("boom")).await;
        let after = events(&mut rx, 5).await;
        assert_eq!(after[..2], [stopped("d"), stopped("c")]);
        let b2 = started_pid(&after[2], "b");
        let c2 = started_pid(&after[3], "c");
        let d2 = started_pid(&after[4], "d");
        assert_eq!(
            pids(&children(sup).await),
            [Some(before[0]), Some(b2), Some(c2), Some(d2)]
        );
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

#[test]
fn permanent_children_restart_after_any_exit() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let sup =
            supervisor::start_link(spec(Strategy::OneForOne, &["p"], &tx), StartOptions::new())
                .await
                .unwrap();
        let mut pid = started_pid(&next(&mut rx).await, "p");
        for reason in [
            ExitReason::Normal,
            ExitReason::Shutdown,
            ExitReason::custom("boom"),
        ] {
            kill_with(pid, reason).await;
            let new = started_pid(&next(&mut rx).await, "p");
            assert_ne!(new, pid);
            pid = new;
        }
        assert_eq!(pids(&children(sup).await), [Some(pid)]);
    })
    .unwrap();
}

#[test]
fn transient_children_restart_only_after_abnormal_exits() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let flags = SupervisorFlags::default()
            .intensity(10)
            .period(Duration::from_secs(60));
        let spec = SupervisorSpec::new(flags)
            .child(worker("t1", &tx).restart(Restart::Transient))
            .child(worker("t2", &tx).restart(Restart::Transient));
        let sup = supervisor::start_link(spec, StartOptions::new())
            .await
            .unwrap();
        let t1 = started_pid(&next(&mut rx).await, "t1");
        let t2 = started_pid(&next(&mut rx).await, "t2");

        kill_with(t1, ExitReason::custom("boom")).await;
        let t1b = started_pid(&next(&mut rx).await, "t1");

        kill_with(t1b, ExitReason::Normal).await;
        kill_with(t2, ExitReason::Shutdown).await;
        let now = children(sup).await;
        assert_eq!(
            pids(&now),
            [None, None],
            "normal and shutdown exits are not restarted"
        );
        assert_eq!(now[0].id, "t1");
        assert_eq!(now[0].restart, Restart::Transient);
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

#[test]
fn temporary_children_never_restart_and_leave_the_list() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let spec = SupervisorSpec::new(SupervisorFlags::default())
            .child(worker("keep", &tx))
            .child(worker("tmp1", &tx).restart(Restart::Temporary))
            .child(worker("tmp2", &tx).restart(Restart::Temporary));
        let sup = supervisor::start_link(spec, StartOptions::new())
            .await
            .unwrap();
        let started = events(&mut rx, 3).await;
        let keep = started_pid(&started[0], "keep");
        kill_with(started_pid(&started[1], "tmp1"), ExitReason::custom("boom")).await;
        kill_with(started_pid(&started[2], "tmp2"), ExitReason::Normal).await;
        let now = children(sup).await;
        assert_eq!(now.len(), 1);
        assert_eq!((now[0].id.as_str(), now[0].pid), ("keep", Some(keep)));
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

#[test]
fn one_for_all_drops_temporary_siblings_instead_of_restarting_them() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let flags = SupervisorFlags::new(Strategy::OneForAll)
            .intensity(10)
            .period(Duration::from_secs(60));
        let spec = SupervisorSpec::new(flags)
            .child(worker("tmp", &tx).restart(Restart::Temporary))
            .child(worker("p", &tx));
        let sup = supervisor::start_link(spec, StartOptions::new())
            .await
            .unwrap();
        let started = events(&mut rx, 2).await;
        kill_with(started_pid(&started[1], "p"), ExitReason::custom("boom")).await;
        let after = events(&mut rx, 2).await;
        assert_eq!(after[0], stopped("tmp"));
        let p2 = started_pid(&after[1], "p");
        let now = children(sup).await;
        assert_eq!(now.len(), 1);
        assert_eq!(now[0].pid, Some(p2));
    })
    .unwrap();
}

#[test]
fn too_many_restarts_stop_the_supervisor_with_the_documented_reason() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let flags = SupervisorFlags::new(Strategy::OneForOne)
            .intensity(2)
            .period(Duration::from_secs(3600));
        let spec = SupervisorSpec::new(flags)
            .child(worker("steady", &tx))
            .child(dies_at_once("crasher", ExitReason::custom("boom"), &tx));
        let sup = supervisor::start(spec, StartOptions::new()).await.unwrap();
        let mref = monitor(sup).unwrap();
        // The first start and two restarts; the third restart is one too many.
        let all = events(&mut rx, 5).await;
        started_pid(&all[0], "steady");
        for event in &all[1..4] {
            started_pid(event, "crasher");
        }
        assert_eq!(all[4], stopped("steady"));
        let down: Down =
            tokio::time::timeout(WAIT, receive_where(move |d: &Down| d.monitor_ref == mref))
                .await
                .unwrap();
        assert_eq!(down.reason, supervisor::reached_max_restart_intensity());
        assert_eq!(
            down.reason.to_string(),
            supervisor::REACHED_MAX_RESTART_INTENSITY
        );
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

/// A worker whose start function fails on the attempts (counted from 0) that `fails` picks.
fn flaky(
    id: &'static str,
    log: &UnboundedSender<Event>,
    attempts: &Arc<AtomicUsize>,
    fails: fn(usize) -> bool,
) -> ChildSpec {
    let log = log.clone();
    let attempts = Arc::clone(attempts);
    ChildSpec::new(id, move || {
        let log = log.clone();
        let attempt = attempts.fetch_add(1, Ordering::SeqCst);
        async move {
            if fails(attempt) {
                return Err(StartChildError::other(format!("attempt {attempt} refused")));
            }
            let pid = runtime::spawn_link(async {
                let Die(reason) = runtime::receive().await;
                reason
            })?;
            let _ = log.send(Event::Started(id, pid));
            Ok(pid)
        }
    })
}

#[test]
fn a_failed_restart_is_retried() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let attempts = Arc::new(AtomicUsize::new(0));
        let flags = SupervisorFlags::default()
            .intensity(5)
            .period(Duration::from_secs(3600));
        let spec = SupervisorSpec::new(flags).child(flaky("f", &tx, &attempts, |n| n == 1));
        let sup = supervisor::start_link(spec, StartOptions::new())
            .await
            .unwrap();
        let first = started_pid(&next(&mut rx).await, "f");
        kill_with(first, ExitReason::custom("boom")).await;
        // Attempt 1 fails; the retry (attempt 2) succeeds.
        let second = started_pid(&next(&mut rx).await, "f");
        assert_ne!(first, second);
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
        assert_eq!(pids(&children(sup).await), [Some(second)]);
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

#[test]
fn failed_restarts_count_against_the_intensity() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let attempts = Arc::new(AtomicUsize::new(0));
        let flags = SupervisorFlags::default()
            .intensity(2)
            .period(Duration::from_secs(3600));
        let spec = SupervisorSpec::new(flags)
            .child(worker("steady", &tx))
            .child(flaky("f", &tx, &attempts, |n| n > 0));
        let sup = supervisor::start(spec, StartOptions::new()).await.unwrap();
        let mref = monitor(sup).unwrap();
        let started = events(&mut rx, 2).await;
        kill_with(started_pid(&started[1], "f"), ExitReason::custom("boom")).await;
        // Restart and retry fail (2 restarts); the next retry is one too many.
        let down: Down =
            tokio::time::timeout(WAIT, receive_where(move |d: &Down| d.monitor_ref == mref))
                .await
                .unwrap();
        assert_eq!(down.reason, supervisor::reached_max_restart_intensity());
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
        assert_eq!(next(&mut rx).await, stopped("steady"));
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

#[test]
fn intensity_zero_gives_up_at_the_first_crash() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let flags = SupervisorFlags::default().intensity(0);
        let sup = supervisor::start(
            SupervisorSpec::new(flags).child(worker("a", &tx)),
            StartOptions::new(),
        )
        .await
        .unwrap();
        let mref = monitor(sup).unwrap();
        kill_with(
            started_pid(&next(&mut rx).await, "a"),
            ExitReason::custom("boom"),
        )
        .await;
        let down: Down = receive_where(move |d: &Down| d.monitor_ref == mref).await;
        assert_eq!(down.reason, supervisor::reached_max_restart_intensity());
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

struct Counter(u64);

impl GenServer for Counter {
    type Args = u64;
    type Call = ();
    type Reply = u64;
    type Cast = ExitReason;

    async fn init(start: u64) -> Result<Counter, ExitReason> {
        Ok(Counter(start))
    }

    async fn handle_call(&mut self, _: (), _: &mut Caller<u64>) -> CallReply<u64> {
        self.0 += 1;
        CallReply::Reply(self.0)
    }

    async fn handle_cast(&mut self, reason: ExitReason) -> gen_server::Next {
        gen_server::Next::Stop(reason)
    }
}

#[test]
fn which_children_lists_every_kind_in_start_order() {
    let node = Node::new().unwrap();
    let (tx, mut rx) = unbounded_channel();
    let inner = SupervisorSpec::new(SupervisorFlags::default()).child(worker("inner_w", &tx));
    let spec = SupervisorSpec::new(SupervisorFlags::default())
        .child(worker("w", &tx).restart(Restart::Transient))
        .child(ChildSpec::gen_server::<Counter>(
            "counter",
            0,
            gen_server::StartOptions::new(),
        ))
        .child(ChildSpec::supervisor("inner", inner, StartOptions::new()))
        .child(
            worker("tmp", &tx)
                .restart(Restart::Temporary)
                .shutdown(Shutdown::BrutalKill),
        );
    let sup = node
        .block_on(supervisor::start_on(
            &node,
            spec,
            StartOptions::new().name("top"),
        ))
        .unwrap();

    // From outside a process, by pid.
    let outside = node
        .block_on(supervisor::which_children(sup, WAIT))
        .unwrap();
    let summary: Vec<_> = outside
        .iter()
        .map(|c| (c.id.as_str(), c.kind, c.restart))
        .collect();
    assert_eq!(
        summary,
        [
            ("w", ChildKind::Worker, Restart::Transient),
            ("counter", ChildKind::Worker, Restart::Permanent),
            ("inner", ChildKind::Supervisor, Restart::Permanent),
            ("tmp", ChildKind::Worker, Restart::Temporary),
        ]
    );
    assert!(outside.iter().all(|c| c.pid.is_some()));
    let started = node.block_on(events(&mut rx, 3));
    assert_eq!(outside[0].pid, Some(started_pid(&started[0], "w")));
    assert_eq!(outside[3].pid, Some(started_pid(&started[2], "tmp")));

    // The nested supervisor answers too; the gen_server child works.
    let inner_pid = outside[2].pid.unwrap();
    let inner_children = node
        .block_on(supervisor::which_children(inner_pid, WAIT))
        .unwrap();
    assert_eq!(
        inner_children[0].pid,
        Some(started_pid(&started[1], "inner_w"))
    );
    let counter = gen_server::Server::<Counter>::from_pid(outside[1].pid.unwrap());
    assert_eq!(node.block_on(counter.call((), WAIT)).unwrap(), 1);

    // From a process, by name, with counts.
    let (by_name, counts) = node
        .run(async {
            (
                supervisor::which_children("top", WAIT).await.unwrap(),
                supervisor::count_children("top", WAIT).await.unwrap(),
            )
        })
        .unwrap();
    assert_eq!(by_name, outside);
    assert_eq!(
        (
            counts.specs,
            counts.active,
            counts.supervisors,
            counts.workers
        ),
        (4, 4, 1, 3)
    );

    // By name outside a process: there is no node to look the name up on.
    assert_eq!(
        node.block_on(supervisor::which_children("top", WAIT)),
        Err(supervisor::CallError::NotInProcess("top".into()))
    );
}

#[test]
fn a_gen_server_child_is_restarted_with_fresh_state() {
    let node = Node::new().unwrap();
    node.run(async {
        let spec = SupervisorSpec::new(SupervisorFlags::default()).child(ChildSpec::gen_server::<
            Counter,
        >(
            "counter",
            10,
            gen_server::StartOptions::new().name("counter"),
        ));
        let sup = supervisor::start_link(spec, StartOptions::new())
            .await
            .unwrap();
        assert_eq!(
            gen_server::call::<Counter>("counter", (), WAIT)
                .await
                .unwrap(),
            11
        );
        let first = children(sup).await[0].pid.unwrap();
        let mref = monitor(first).unwrap();
        gen_server::cast::<Counter>("counter", ExitReason::custom("crash")).unwrap();
        let _: Down = receive_where(move |d: &Down| d.monitor_ref == mref).await;
        // The exit reached the supervisor before the Down reached us: it has restarted it.
        let second = children(sup).await[0].pid.unwrap();
        assert_ne!(first, second);
        assert_eq!(
            gen_server::call::<Counter>("counter", (), WAIT)
                .await
                .unwrap(),
            11
        );
    })
    .unwrap();
}

#[test]
fn a_child_that_fails_to_start_fails_the_start_and_stops_the_earlier_children() {
    let node = Node::new().unwrap();
    let (tx, mut rx) = unbounded_channel();
    let spec = SupervisorSpec::new(SupervisorFlags::default())
        .child(worker("a", &tx))
        .child(worker("b", &tx))
        .child(ChildSpec::new("db", || async {
            Err::<Pid, _>(StartChildError::other("connection refused"))
        }))
        .child(worker("never", &tx));
    let err = node
        .run(async move { supervisor::start_link(spec, StartOptions::new().name("sup")).await })
        .expect("the caller is not killed by the failed start")
        .unwrap_err();
    assert_eq!(
        err,
        StartError::ChildFailed {
            id: "db".into(),
            error: StartChildError::other("connection refused"),
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("`db`") && text.contains("connection refused"),
        "{text}"
    );
    node.block_on(async {
        let all = events(&mut rx, 4).await;
        started_pid(&all[0], "a");
        started_pid(&all[1], "b");
        assert_eq!(all[2..], [stopped("b"), stopped("a")]);
        assert_no_more_events(&mut rx);
    });
    assert_eq!(node.whereis("sup"), None);
}

#[test]
fn a_nested_supervisor_that_fails_to_start_is_named_in_the_error() {
    let node = Node::new().unwrap();
    let inner = SupervisorSpec::new(SupervisorFlags::default())
        .child(ChildSpec::new("broken", || async {
            Err::<Pid, _>(StartChildError::other("no config"))
        }));
    let spec = SupervisorSpec::new(SupervisorFlags::default()).child(ChildSpec::supervisor(
        "inner",
        inner,
        StartOptions::new(),
    ));
    let err = node
        .block_on(supervisor::start_on(&node, spec, StartOptions::new()))
        .unwrap_err();
    let StartError::ChildFailed {
        id,
        error: StartChildError::Supervisor(inner_err),
    } = &err
    else {
        panic!("unexpected error {err:?}");
    };
    assert_eq!(id, "inner");
    assert!(matches!(&**inner_err, StartError::ChildFailed { id, .. } if id == "broken"));
}

#[test]
fn bad_specs_and_taken_names_are_refused() {
    let node = Node::new().unwrap();
    let (tx, _rx) = unbounded_channel();
    let dup = SupervisorSpec::new(SupervisorFlags::default())
        .child(worker("x", &tx))
        .child(worker("x", &tx));
    let err = node
        .block_on(supervisor::start_on(&node, dup, StartOptions::new()))
        .unwrap_err();
    assert_eq!(err, StartError::DuplicateChildId("x".into()));
    assert!(err.to_string().contains("`x`"));

    let holder = node
        .spawn(async {
            let () = runtime::receive().await;
        })
        .unwrap();
    node.register("taken", holder).unwrap();
    let err = node
        .block_on(supervisor::start_on(
            &node,
            SupervisorSpec::default(),
            StartOptions::new().name("taken"),
        ))
        .unwrap_err();
    assert_eq!(
        err,
        StartError::AlreadyStarted {
            name: "taken".into(),
            pid: holder
        }
    );

    assert_eq!(
        node.block_on(supervisor::start(
            SupervisorSpec::default(),
            StartOptions::new()
        )),
        Err(StartError::Spawn(runtime::SpawnError::NotInProcess))
    );
}

#[test]
fn requests_to_a_dead_or_missing_supervisor_fail_with_noproc() {
    let node = Node::new().unwrap();
    let gone = node.spawn(async {}).unwrap();
    // Whether it has ended yet or not, the request is dropped with its mailbox.
    let err = node
        .block_on(supervisor::which_children(gone, WAIT))
        .unwrap_err();
    assert_eq!(err, supervisor::CallError::NoProc(gone.into()));
    let err = node
        .run(async {
            supervisor::terminate_child("nobody", "x", WAIT)
                .await
                .unwrap_err()
        })
        .unwrap();
    assert_eq!(
        err,
        ChildError::Call(supervisor::CallError::NoProc("nobody".into()))
    );
}

#[test]
fn terminate_restart_and_delete_child() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let spec = SupervisorSpec::new(SupervisorFlags::default())
            .child(worker("a", &tx))
            .child(worker("tmp", &tx).restart(Restart::Temporary));
        let sup = supervisor::start_link(spec, StartOptions::new())
            .await
            .unwrap();
        events(&mut rx, 2).await;

        assert_eq!(
            supervisor::delete_child(sup, "a", WAIT).await,
            Err(ChildError::Running("a".into()))
        );
        supervisor::terminate_child(sup, "a", WAIT).await.unwrap();
        assert_eq!(next(&mut rx).await, stopped("a"));
        assert_eq!(
            children(sup).await[0].pid,
            None,
            "terminated, not restarted"
        );
        // Terminating it again is fine; a temporary child leaves the list.
        supervisor::terminate_child(sup, "a", WAIT).await.unwrap();
        supervisor::terminate_child(sup, "tmp", WAIT).await.unwrap();
        assert_eq!(next(&mut rx).await, stopped("tmp"));
        assert_eq!(children(sup).await.len(), 1);
        assert_eq!(
            supervisor::restart_child(sup, "tmp", WAIT).await,
            Err(ChildError::NotFound("tmp".into()))
        );

        let a2 = supervisor::restart_child(sup, "a", WAIT).await.unwrap();
        assert_eq!(started_pid(&next(&mut rx).await, "a"), a2);
        assert_eq!(
            supervisor::restart_child(sup, "a", WAIT).await,
            Err(ChildError::Running("a".into()))
        );
        supervisor::terminate_child(sup, "a", WAIT).await.unwrap();
        assert_eq!(next(&mut rx).await, stopped("a"));
        supervisor::delete_child(sup, "a", WAIT).await.unwrap();
        assert!(children(sup).await.is_empty());
        let err = supervisor::terminate_child(sup, "a", WAIT)
            .await
            .unwrap_err();
        assert_eq!(err, ChildError::NotFound("a".into()));
        assert!(err.to_string().contains("`a`"));
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

/// A child that traps exits and ignores them: only a kill ends it.
fn stubborn(id: &'static str, log: &UnboundedSender<Event>) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new(id, move || {
        let log = log.clone();
        async move {
            let spawned = spawn_opt(
                async {
                    loop {
                        let _ = receive_any().await;
                    }
                },
                SpawnOptions::new().link().trap_exit(),
            )?;
            let _ = log.send(Event::Started(id, spawned.pid));
            Ok::<Pid, runtime::SpawnError>(spawned.pid)
        }
    })
}

#[test]
fn shutdown_policies_kill_children_that_do_not_stop() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let spec = SupervisorSpec::new(SupervisorFlags::default())
            .child(stubborn("slow", &tx).shutdown(Shutdown::Timeout(Duration::from_millis(50))))
            .child(worker("brutal", &tx).shutdown(Shutdown::BrutalKill));
        let sup = supervisor::start(spec, StartOptions::new()).await.unwrap();
        let started = events(&mut rx, 2).await;
        let slow = started_pid(&started[0], "slow");
        let brutal = started_pid(&started[1], "brutal");
        let (m_slow, m_brutal, m_sup) = (
            monitor(slow).unwrap(),
            monitor(brutal).unwrap(),
            monitor(sup).unwrap(),
        );
        runtime::exit(sup, ExitReason::Shutdown);
        let mut reasons = Vec::new();
        for _ in 0..3 {
            let down: Down = tokio::time::timeout(WAIT, receive_any())
                .await
                .unwrap()
                .downcast()
                .unwrap();
            reasons.push((down.monitor_ref, down.reason));
        }
        reasons.sort_by_key(|(mref, _)| *mref);
        assert_eq!(
            reasons,
            [
                (m_slow, ExitReason::Killed),
                (m_brutal, ExitReason::Killed),
                (m_sup, ExitReason::Shutdown),
            ]
        );
        // The brutally killed worker trapped exits, but a kill cannot be trapped.
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

#[test]
fn a_killed_nested_supervisor_is_restarted_with_its_children() {
    let node = Node::new().unwrap();
    node.run(async {
        let (tx, mut rx) = unbounded_channel();
        let inner = SupervisorSpec::new(SupervisorFlags::default())
            .child(worker("x", &tx))
            .child(worker("y", &tx));
        let spec = SupervisorSpec::new(SupervisorFlags::default())
            .child(worker("a", &tx))
            .child(ChildSpec::supervisor("inner", inner, StartOptions::new()));
        let sup = supervisor::start_link(spec, StartOptions::new())
            .await
            .unwrap();
        let started = events(&mut rx, 3).await;
        let a = started_pid(&started[0], "a");
        let inner_pid = children(sup).await[1].pid.unwrap();

        runtime::exit(inner_pid, ExitReason::Kill);
        // The old x and y see their supervisor die (in any order); the new ones start in order.
        let mut after = events(&mut rx, 4).await;
        let killed = [
            Event::Stopped("x", ExitReason::Killed),
            Event::Stopped("y", ExitReason::Killed),
        ];
        let stops: Vec<Event> = after
            .iter()
            .filter(|e| matches!(e, Event::Stopped(..)))
            .cloned()
            .collect();
        assert_eq!(stops.len(), 2);
        assert!(killed.iter().all(|k| stops.contains(k)), "{stops:?}");
        after.retain(|e| matches!(e, Event::Started(..)));
        started_pid(&after[0], "x");
        started_pid(&after[1], "y");

        let now = children(sup).await;
        assert_eq!(now[0].pid, Some(a));
        assert_ne!(now[1].pid, Some(inner_pid));
        assert_eq!(now[1].kind, ChildKind::Supervisor);
    })
    .unwrap();
}

#[test]
fn node_shutdown_stops_a_supervision_tree_children_in_reverse_order() {
    let node = Node::builder()
        .shutdown_grace(Duration::from_secs(10))
        .build()
        .unwrap();
    let (tx, mut rx) = unbounded_channel();
    let inner = SupervisorSpec::new(SupervisorFlags::new(Strategy::OneForAll))
        .child(worker("x", &tx))
        .child(worker("y", &tx));
    let spec = SupervisorSpec::new(SupervisorFlags::default())
        .child(worker("a", &tx))
        .child(ChildSpec::supervisor("inner", inner, StartOptions::new()))
        .child(worker("b", &tx));
    drop(tx);
    let sup = node
        .block_on(supervisor::start_on(
            &node,
            spec,
            StartOptions::new().name("root"),
        ))
        .unwrap();
    // A plain process beside the tree.
    let bystander = node
        .spawn(async {
            let () = runtime::receive().await;
        })
        .unwrap();
    let started = node.block_on(events(&mut rx, 4));
    for (event, id) in started.iter().zip(["a", "x", "y", "b"]) {
        started_pid(event, id);
    }

    node.block_on(node.shutdown());
    assert!(node.processes().is_empty());
    assert!(node.process_info(sup).is_none() && node.process_info(bystander).is_none());
    let mut stops = Vec::new();
    while let Ok(event) = rx.try_recv() {
        stops.push(event);
    }
    assert_eq!(
        stops,
        [stopped("b"), stopped("y"), stopped("x"), stopped("a")]
    );
}

#[test]
fn node_stop_stops_supervisors_first() {
    let node = Node::builder()
        .shutdown_grace(Duration::from_secs(10))
        .build()
        .unwrap();
    let (tx, mut rx) = unbounded_channel();
    let spec = spec(Strategy::OneForOne, &["a", "b", "c"], &tx);
    drop(tx);
    node.block_on(supervisor::start_on(&node, spec, StartOptions::new()))
        .unwrap();
    node.block_on(events(&mut rx, 3));
    node.stop();
    let mut stops = Vec::new();
    while let Ok(event) = rx.try_recv() {
        stops.push(event);
    }
    assert_eq!(stops, [stopped("c"), stopped("b"), stopped("a")]);
}

/// Root supervisors stop one at a time, last started first (as OTP stops applications): the
/// first one's worker is told only once the second tree is gone, even though the second
/// tree's worker takes its time to stop.
#[test]
fn node_shutdown_stops_root_supervisors_last_started_first() {
    let node = Node::builder()
        .shutdown_grace(Duration::from_secs(10))
        .build()
        .unwrap();
    let (tx, mut rx) = unbounded_channel();
    let slow_log = tx.clone();
    let slow = ChildSpec::new("slow", move || {
        let log = slow_log.clone();
        async move {
            let body_log = log.clone();
            let spawned = spawn_opt(
                async move {
                    let exit: Exit = runtime::receive().await;
                    // Takes a while: a concurrent stop would let the other tree's worker
                    // report first.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let _ = body_log.send(Event::Stopped("slow", exit.reason.clone()));
                    exit.reason
                },
                SpawnOptions::new().link().trap_exit(),
            )?;
            let _ = log.send(Event::Started("slow", spawned.pid));
            Ok::<Pid, runtime::SpawnError>(spawned.pid)
        }
    });
    let first = spec(Strategy::OneForOne, &["a"], &tx);
    let second = SupervisorSpec::new(SupervisorFlags::default()).child(slow);
    drop(tx);
    node.block_on(supervisor::start_on(&node, first, StartOptions::new()))
        .unwrap();
    node.block_on(supervisor::start_on(&node, second, StartOptions::new()))
        .unwrap();
    let started = node.block_on(events(&mut rx, 2));
    started_pid(&started[0], "a");
    started_pid(&started[1], "slow");
    node.stop();
    let mut stops = Vec::new();
    while let Ok(event) = rx.try_recv() {
        stops.push(event);
    }
    assert_eq!(stops, [stopped("slow"), stopped("a")]);
}

#[test]
fn a_start_function_that_panics_fails_the_start_without_killing_the_caller() {
    let node = Node::new().unwrap();
    let err = node
        .run(async {
            let spec = SupervisorSpec::new(SupervisorFlags::new(Strategy::OneForOne)).child(
                ChildSpec::new("bad", || async {
                    let config: Option<Pid> = std::hint::black_box(None);
                    Ok::<Pid, runtime::SpawnError>(config.expect("no config"))
                }),
            );
            supervisor::start_link(spec, supervisor::StartOptions::new())
                .await
                .unwrap_err()
        })
        .unwrap();
    assert!(
        matches!(&err, supervisor::StartError::ChildFailed { id, .. } if id == "bad"),
        "{err:?}"
    );
    assert!(err.to_string().contains("no config"), "{err}");
}

/// `supervisor::stop` stops the children, last started first, and returns once the supervisor
/// has ended: its name is free and its children are gone.
#[test]
fn stop_stops_the_children_and_returns_once_the_supervisor_has_ended() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let (tx, mut rx) = unbounded_channel();
    node.run(async move {
        let spec = SupervisorSpec::new(SupervisorFlags::new(Strategy::OneForOne))
            .child(worker("a", &tx))
            .child(worker("b", &tx));
        let sup = supervisor::start(spec, StartOptions::new().name("sup"))
            .await
            .unwrap();
        let started = events(&mut rx, 2).await;
        let (a, b) = (started_pid(&started[0], "a"), started_pid(&started[1], "b"));
        supervisor::stop("sup", ExitReason::Shutdown, WAIT)
            .await
            .unwrap();
        assert_eq!(events(&mut rx, 2).await, vec![stopped("b"), stopped("a")]);
        assert_eq!(runtime::whereis("sup"), None);
        for pid in [sup, a, b] {
            assert!(runtime::process_info(pid).is_none(), "{pid}");
        }
        assert_no_more_events(&mut rx);
    })
    .unwrap();
}

/// A worker's loop, as an `async fn`: a child running it is known by its name.
async fn crunch_loop() {
    loop {
        let _ = receive_any().await;
    }
}

/// A worker child's initial call names what it runs, as OTP names a process by its initial
/// call: the `async fn` its start calls, or, for an `async` block inside closures (which names
/// no function: `...::{{closure}}::{{closure}}`), the spec's id. Restarted, it keeps the name.
#[test]
fn worker_children_are_named_by_their_function_or_their_id() {
    let node = Node::new().unwrap();
    node.run(async {
        let make = || {
            ChildSpec::worker("cruncher-1", || async {
                loop {
                    let _ = receive_any().await;
                }
            })
        };
        let sup = supervisor::start_link(
            SupervisorSpec::new(SupervisorFlags::default())
                .children([make(), ChildSpec::worker("looper", crunch_loop)]),
            StartOptions::new(),
        )
        .await
        .unwrap();
        let started = children(sup).await;
        let call_of = |pid: Option<Pid>| {
            runtime::process_info(pid.expect("running"))
                .expect("alive")
                .initial_call
                .into_owned()
        };
        assert_eq!(call_of(started[0].pid), "cruncher-1");
        assert!(
            call_of(started[1].pid).ends_with("crunch_loop"),
            "{}",
            call_of(started[1].pid)
        );
        runtime::exit(started[0].pid.expect("running"), ExitReason::Kill);
        let deadline = std::time::Instant::now() + WAIT;
        let restarted = loop {
            let now = children(sup).await;
            if now[0].pid.is_some() && now[0].pid != started[0].pid {
                break now[0].pid;
            }
            assert!(std::time::Instant::now() < deadline, "no restart");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(call_of(restarted), "cruncher-1");
    })
    .unwrap();
}
