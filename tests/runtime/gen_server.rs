//! gen_server: call, cast, info, deferred replies, stops, errors and timeouts.

use std::time::Duration;

use runtime::gen_server::{
    self, CallError, CallReply, Caller, CastError, GenServer, Next, ReplyTo, Server, StartError,
    StartOptions, Timeout,
};
use runtime::{Down, ExitReason, Message, Node, Pid, receive, self_pid, send, spawn};

/// Long enough never to fire on a loaded machine; under Miri, which runs the tests thousands
/// of times slower on the host's clock, an hour.
const LONG: Duration = if cfg!(miri) {
    Duration::from_secs(3600)
} else {
    Duration::from_secs(30)
};

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

/// A key-value store that reports its lifecycle to an observer.
struct Kv {
    map: std::collections::HashMap<String, u64>,
    observer: Option<Pid>,
    deferred: Vec<ReplyTo<Reply>>,
}

#[derive(Debug)]
enum Req {
    Get(String),
    Put(String, u64),
    Panic,
    Hang,
    DeferThenReplyFrom,
    DropWithoutReply,
    StopWith(Option<u64>),
    Sleep(Duration),
}

#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Value(Option<u64>),
    Ok,
}

enum Cast {
    Put(String, u64),
    Stop,
}

impl GenServer for Kv {
    type Args = Option<Pid>;
    type Call = Req;
    type Reply = Reply;
    type Cast = Cast;

    async fn init(observer: Option<Pid>) -> Result<Self, ExitReason> {
        Ok(Kv {
            map: Default::default(),
            observer,
            deferred: Vec::new(),
        })
    }

    async fn handle_call(&mut self, req: Req, from: &mut Caller<Reply>) -> CallReply<Reply> {
        match req {
            Req::Get(k) => CallReply::Reply(Reply::Value(self.map.get(&k).copied())),
            Req::Put(k, v) => {
                self.map.insert(k, v);
                CallReply::Reply(Reply::Ok)
            }
            Req::Panic => panic!("kv crashed"),
            Req::Hang => {
                self.deferred.push(from.defer().unwrap());
                CallReply::NoReply
            }
            Req::DeferThenReplyFrom => {
                let reply_to = from.defer().unwrap();
                spawn(async move {
                    reply_to.reply(Reply::Value(Some(7)));
                })
                .unwrap();
                CallReply::NoReply
            }
            Req::DropWithoutReply => CallReply::NoReply,
            Req::StopWith(v) => CallReply::Stop(
                ExitReason::custom("asked"),
                v.map(|v| Reply::Value(Some(v))),
            ),
            Req::Sleep(d) => {
                tokio::time::sleep(d).await;
                CallReply::Reply(Reply::Ok)
            }
        }
    }

    async fn handle_cast(&mut self, msg: Cast) -> Next {
        match msg {
            Cast::Put(k, v) => {
                self.map.insert(k, v);
                Next::Continue
            }
            Cast::Stop => Next::Stop(ExitReason::Normal),
        }
    }

    async fn handle_info(&mut self, msg: Message) -> Next {
        if let Some(observer) = self.observer {
            match msg.downcast::<Down>() {
                Ok(down) => send(observer, ("down", down.pid)),
                Err(msg) => {
                    if let Ok(text) = msg.downcast::<&'static str>() {
                        send(observer, ("info", text));
                    }
                }
            }
        }
        Next::Continue
    }

    async fn terminate(&mut self, reason: &ExitReason) {
        if let Some(observer) = self.observer {
            send(observer, ("terminate", reason.clone()));
        }
    }
}

#[test]
fn call_and_cast_by_pid_name_and_handle() {
    let node = node();
    let out = node
        .run(async {
            let kv = gen_server::start::<Kv>(None, StartOptions::new().name("kv"))
                .await
                .unwrap();
            let put = kv.call(Req::Put("a".into(), 1), LONG).await.unwrap();
            gen_server::cast::<Kv>("kv", Cast::Put("b".into(), 2)).unwrap();
            kv.cast(Cast::Put("c".into(), 3));
            let a = gen_server::call::<Kv>("kv", Req::Get("a".into()), LONG)
                .await
                .unwrap();
            let b = gen_server::call::<Kv>(kv.pid(), Req::Get("b".into()), Timeout::Infinity)
                .await
                .unwrap();
            let c = kv.call(Req::Get("c".into()), LONG).await.unwrap();
            let z = kv.call(Req::Get("z".into()), LONG).await.unwrap();
            (put, a, b, c, z)
        })
        .unwrap();
    assert_eq!(
        out,
        (
            Reply::Ok,
            Reply::Value(Some(1)),
            Reply::Value(Some(2)),
            Reply::Value(Some(3)),
            Reply::Value(None)
        )
    );
}

#[test]
fn many_concurrent_callers_each_get_their_own_replies() {
    let node = node();
    let total = node
        .run(async {
            let kv = gen_server::start::<Kv>(None, StartOptions::new())
                .await
                .unwrap();
            let me = self_pid();
            for c in 0..8u64 {
                spawn(async move {
                    for i in 0..500u64 {
                        let key = format!("{c}-{i}");
                        kv.call(Req::Put(key.clone(), c * 1000 + i), LONG)
                            .await
                            .unwrap();
                        let got = kv.call(Req::Get(key), LONG).await.unwrap();
                        assert_eq!(got, Reply::Value(Some(c * 1000 + i)));
                    }
                    send(me, c);
                })
                .unwrap();
            }
            let mut done = 0;
            for _ in 0..8 {
                let _: u64 = receive().await;
                done += 1;
            }
            done
        })
        .unwrap();
    assert_eq!(total, 8);
}

#[test]
fn a_call_from_outside_any_process_works_by_pid() {
    let node = node();
    let kv: Server<Kv> = node
        .block_on(gen_server::start_on::<Kv>(&node, None, StartOptions::new()))
        .unwrap();
    let reply = node
        .block_on(kv.call(Req::Put("k".into(), 5), LONG))
        .unwrap();
    assert_eq!(reply, Reply::Ok);
    let by_name = node.block_on(gen_server::call::<Kv>("kv", Req::Get("k".into()), LONG));
    assert!(matches!(by_name, Err(CallError::NotInProcess(_))));
}

#[test]
fn a_call_times_out_never_early_and_the_server_lives_on() {
    let node = node();
    let (err, elapsed, after) = node
        .run(async {
            let kv = gen_server::start::<Kv>(None, StartOptions::new())
                .await
                .unwrap();
            let started = std::time::Instant::now();
            let err = kv
                .call(Req::Hang, Duration::from_millis(50))
                .await
                .unwrap_err();
            let elapsed = started.elapsed();
            let after = kv.call(Req::Get("x".into()), LONG).await.unwrap();
            (err, elapsed, after)
        })
        .unwrap();
    assert!(
        matches!(err, CallError::Timeout { after, .. } if after == Duration::from_millis(50)),
        "{err:?}"
    );
    assert!(
        elapsed >= Duration::from_millis(50),
        "timed out early: {elapsed:?}"
    );
    assert_eq!(after, Reply::Value(None));
}

/// The processes of one thread take turns with its spare reply slot, which keeps the last
/// caller's call timer: each timed call arms its own process's deadline (checked in debug
/// builds where the call arms it), and each times out when it should.
#[test]
fn timed_calls_of_processes_taking_turns_on_one_thread_each_time_out() {
    let node = Node::builder().current_thread().build().unwrap();
    let outcomes = node
        .run(async {
            let kv = gen_server::start::<Kv>(None, StartOptions::new())
                .await
                .unwrap();
            // Echoes requests of 2 and up.
            let echo = gen_server::start::<Defers>((), StartOptions::new())
                .await
                .unwrap();
            let me = self_pid();
            let mut outcomes = Vec::new();
            for i in 2..6u8 {
                spawn(async move {
                    // Answered: its slot goes back to the thread's spare, which the next
                    // process's echo call takes, with this process's timer in it.
                    let echoed = echo.call(i, LONG).await;
                    send(me, echoed == Ok(i));
                    // Held by the server (a slot of another reply type: the spare stays).
                    let call = kv.call(Req::Hang, Duration::from_millis(20));
                    let outcome = tokio::time::timeout(LONG, call).await;
                    send(me, matches!(outcome, Ok(Err(CallError::Timeout { .. }))));
                })
                .unwrap();
                for _ in 0..2 {
                    // Bounded: a caller that failed otherwise sends nothing.
                    outcomes.push(runtime::receive_timeout::<bool>(LONG).await == Some(true));
                }
            }
            outcomes
        })
        .unwrap();
    assert_eq!(outcomes, vec![true; 8]);
}

#[test]
fn a_call_polled_with_another_waker_than_its_process_still_times_out() {
    let node = node();
    let (first, second, third) = node
        .run(async {
            let kv = gen_server::start::<Kv>(None, StartOptions::new())
                .await
                .unwrap();
            // Polled by the process's task: its waker is the one the deadline keeps.
            let first = kv.call(Req::Hang, Duration::from_millis(20)).await;
            // Armed by the process, then awaited by another task: the deadline must wake that
            // task, not (only) the process.
            let mut second = Box::pin(kv.call(Req::Hang, Duration::from_millis(20)));
            std::future::poll_fn(|cx| {
                assert!(second.as_mut().poll(cx).is_pending());
                std::task::Poll::Ready(())
            })
            .await;
            let second = tokio::spawn(second).await.unwrap();
            let third = kv.call(Req::Get("k".into()), LONG).await;
            (first, second, third)
        })
        .unwrap();
    assert!(matches!(first, Err(CallError::Timeout { .. })), "{first:?}");
    assert!(
        matches!(second, Err(CallError::Timeout { .. })),
        "{second:?}"
    );
    assert_eq!(third.unwrap(), Reply::Value(None));
}

#[test]
fn calling_a_dead_server_or_an_unknown_name_is_noproc() {
    let node = node();
    let out = node
        .run(async {
            let (dead, _) = runtime::spawn_monitor(async {}).unwrap();
            let _: Down = receive().await;
            let by_pid = gen_server::call::<Kv>(dead, Req::Get("a".into()), LONG)
                .await
                .unwrap_err();
            let by_name = gen_server::call::<Kv>("missing", Req::Get("a".into()), LONG)
                .await
                .unwrap_err();
            let cast = gen_server::cast::<Kv>("missing", Cast::Stop).unwrap_err();
            (by_pid, by_name, cast, dead)
        })
        .unwrap();
    assert_eq!(out.0, CallError::NoProc(out.3.into()));
    assert_eq!(out.1, CallError::NoProc("missing".into()));
    assert_eq!(out.2, CastError::NotRegistered("missing".into()));
    assert!(out.1.to_string().contains("missing"));
}

#[test]
fn a_server_that_dies_during_the_call_gives_its_exit_reason() {
    let node = node();
    let out = node
        .run(async {
            let kv = gen_server::start::<Kv>(None, StartOptions::new())
                .await
                .unwrap();
            let panicked = kv.call(Req::Panic, LONG).await.unwrap_err();
            let kv2 = gen_server::start::<Kv>(None, StartOptions::new())
                .await
                .unwrap();
            let pid2 = kv2.pid();
            spawn(async move {
                let err = kv2.call(Req::Hang, LONG).await.unwrap_err();
                send(runtime::whereis("test").unwrap(), err);
            })
            .unwrap();
            runtime::register("test", self_pid()).unwrap();
            // Wait until the request is in hand, then kill the server.
            loop {
                let info = runtime::process_info(pid2).unwrap();
                if info.status == runtime::ProcessStatus::Waiting && info.message_queue_len == 0 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            runtime::exit(pid2, ExitReason::Kill);
            let killed: CallError = receive().await;
            (panicked, killed, kv.pid(), pid2)
        })
        .unwrap();
    assert_eq!(
        out.0,
        CallError::Exit {
            server: out.2,
            reason: ExitReason::Panic("kv crashed".into())
        }
    );
    assert_eq!(
        out.1,
        CallError::Exit {
            server: out.3,
            reason: ExitReason::Killed
        }
    );
}

#[test]
fn requests_queued_behind_a_dying_server_fail_with_its_reason() {
    let node = node();
    let errs = node
        .run(async {
            let kv = gen_server::start::<Kv>(None, StartOptions::new())
                .await
                .unwrap();
            let me = self_pid();
            // The server sleeps in one call while others queue up, then a cast stops it.
            spawn(async move {
                let r = kv.call(Req::Sleep(Duration::from_millis(100)), LONG).await;
                send(me, r.is_ok());
            })
            .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            kv.cast(Cast::Stop);
            let mut errs = Vec::new();
            for _ in 0..3 {
                errs.push(kv.call(Req::Get("x".into()), LONG).await.unwrap_err());
            }
            let first_ok: bool = receive().await;
            (first_ok, errs, kv.pid())
        })
        .unwrap();
    assert!(errs.0);
    // The first queued call saw the server die normally; later ones found it gone.
    assert_eq!(
        errs.1[0],
        CallError::Exit {
            server: errs.2,
            reason: ExitReason::Normal
        }
    );
    for e in &errs.1[1..] {
        assert_eq!(*e, CallError::NoProc(errs.2.into()));
    }
}

#[test]
fn deferred_replies_no_reply_and_stop() {
    let node = node();
    let out = node
        .run(async {
            let me = self_pid();
            let kv = gen_server::start::<Kv>(Some(me), StartOptions::new())
                .await
                .unwrap();
            let deferred = kv.call(Req::DeferThenReplyFrom, LONG).await.unwrap();
            let dropped = kv.call(Req::DropWithoutReply, LONG).await.unwrap_err();
            let stopped = kv.call(Req::StopWith(Some(9)), LONG).await.unwrap();
            let terminate: (&str, ExitReason) = receive().await;
            let kv2 = gen_server::start::<Kv>(Some(me), StartOptions::new())
                .await
                .unwrap();
            let no_reply_stop = kv2.call(Req::StopWith(None), LONG).await.unwrap_err();
            let _: (&str, ExitReason) = receive().await;
            (
                deferred,
                dropped,
                stopped,
                terminate,
                no_reply_stop,
                kv.pid(),
                kv2.pid(),
            )
        })
        .unwrap();
    assert_eq!(out.0, Reply::Value(Some(7)));
    assert_eq!(out.1, CallError::NoReply(out.5));
    assert_eq!(out.2, Reply::Value(Some(9)));
    assert_eq!(out.3, ("terminate", ExitReason::custom("asked")));
    assert_eq!(
        out.4,
        CallError::Exit {
            server: out.6,
            reason: ExitReason::custom("asked")
        }
    );
}

#[test]
fn handle_info_gets_other_messages() {
    let node = node();
    let got = node
        .run(async {
            let me = self_pid();
            let kv = gen_server::start::<Kv>(Some(me), StartOptions::new())
                .await
                .unwrap();
            send(kv.pid(), "hello");
            let info: (&str, &str) = receive().await;
            info
        })
        .unwrap();
    assert_eq!(got, ("info", "hello"));
}

struct FailsInit;

impl GenServer for FailsInit {
    type Args = bool;
    type Call = ();
    type Reply = ();
    type Cast = ();

    async fn init(panic: bool) -> Result<Self, ExitReason> {
        if panic {
            panic!("init exploded");
        }
        Err(ExitReason::custom("bad config"))
    }

    async fn handle_call(&mut self, _: (), _: &mut Caller<()>) -> CallReply<()> {
        CallReply::Reply(())
    }
}

/// A server whose `init` tells `Args` its pid and then never returns.
struct HangsInInit;

impl GenServer for HangsInInit {
    type Args = Pid;
    type Call = ();
    type Reply = ();
    type Cast = ();

    async fn init(tell: Pid) -> Result<Self, ExitReason> {
        send(tell, self_pid());
        std::future::pending().await
    }

    async fn handle_call(&mut self, _: (), _: &mut Caller<()>) -> CallReply<()> {
        CallReply::Reply(())
    }
}

/// A kill during `init` is a failed start too: the linked caller, which does not trap exits,
/// gets the error and lives on.
#[test]
fn start_link_survives_a_server_killed_in_init() {
    let node = node();
    let (outcome, starter_down) = node
        .run(async {
            let me = self_pid();
            let (starter, mref) = runtime::spawn_monitor(async move {
                let started = gen_server::start_link::<HangsInInit>(me, StartOptions::new()).await;
                send(me, started.map(|s| s.pid()).unwrap_err());
                // Alive after the error: it ends normally, not with the server's reason.
            })
            .unwrap();
            let server: Pid = receive().await;
            runtime::exit(server, ExitReason::Kill);
            // Bounded: were the starter killed with its server, no outcome would come.
            let outcome: Option<StartError> =
                runtime::receive_timeout(Duration::from_secs(30)).await;
            let down: Down = runtime::receive_where(move |d: &Down| d.monitor_ref == mref).await;
            assert_eq!(down.pid, starter);
            (outcome, down.reason)
        })
        .unwrap();
    assert_eq!(outcome, Some(StartError::Init(ExitReason::Killed)));
    assert_eq!(starter_down, ExitReason::Normal);
}

#[test]
fn start_errors_are_typed() {
    let node = node();
    let out = node
        .run(async {
            let init_err =
                gen_server::start_link::<FailsInit>(false, StartOptions::new().name("f"))
                    .await
                    .unwrap_err();
            let panicked = gen_server::start::<FailsInit>(true, StartOptions::new())
                .await
                .unwrap_err();
            // A panic is a failed init too: the link goes before the exit signal would.
            let panicked_linked = gen_server::start_link::<FailsInit>(true, StartOptions::new())
                .await
                .unwrap_err();
            assert_eq!(panicked_linked, panicked);
            let kv = gen_server::start::<Kv>(None, StartOptions::new().name("kv"))
                .await
                .unwrap();
            let taken = gen_server::start::<Kv>(None, StartOptions::new().name("kv"))
                .await
                .unwrap_err();
            let name_free_again = runtime::whereis("f").is_none();
            (init_err, panicked, taken, kv.pid(), name_free_again)
        })
        .unwrap();
    // start_link's failed init did not kill the caller (run returned).
    assert_eq!(out.0, StartError::Init(ExitReason::custom("bad config")));
    assert_eq!(
        out.1,
        StartError::Init(ExitReason::Panic("init exploded".into()))
    );
    assert_eq!(
        out.2,
        StartError::AlreadyStarted {
            name: "kv".into(),
            pid: out.3
        }
    );
    assert!(out.4);
    assert!(out.2.to_string().contains("kv"));
    let outside = node.block_on(gen_server::start::<Kv>(None, StartOptions::new()));
    assert!(matches!(outside, Err(StartError::Spawn(_))));
}

#[test]
fn a_trapping_server_terminates_when_its_parent_exits() {
    let node = node();
    let reason = node
        .run(async {
            let me = self_pid();
            let (parent, _) = runtime::spawn_monitor(async move {
                gen_server::start_link::<Kv>(Some(me), StartOptions::new().trap_exit())
                    .await
                    .unwrap();
                let () = receive().await;
                runtime::exit_self(ExitReason::Shutdown);
            })
            .unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
            send(parent, ());
            let (what, reason): (&str, ExitReason) = receive().await;
            assert_eq!(what, "terminate");
            reason
        })
        .unwrap();
    assert_eq!(reason, ExitReason::Shutdown);
}

#[test]
fn concurrent_timed_calls_of_one_process_each_time_out() {
    let node = node();
    let out = node
        .run(async {
            let kv = gen_server::start::<Kv>(None, StartOptions::new())
                .await
                .unwrap();
            // The first call arms the process's reusable deadline, the second a one-off entry.
            let (a, b) = tokio::join!(
                kv.call(Req::Hang, Duration::from_millis(30)),
                kv.call(Req::Hang, Duration::from_millis(60)),
            );
            // The reusable deadline is re-armed by the next call and still works.
            let c = kv.call(Req::Hang, Duration::from_millis(10)).await;
            let d = kv
                .call(Req::Get("k".into()), Duration::from_millis(10_000))
                .await;
            (a.unwrap_err(), b.unwrap_err(), c.unwrap_err(), d.unwrap())
        })
        .unwrap();
    for e in [&out.0, &out.1, &out.2] {
        assert!(matches!(e, CallError::Timeout { .. }), "{e:?}");
    }
    assert_eq!(out.3, Reply::Value(None));
}

struct Defers;

impl GenServer for Defers {
    type Args = ();
    type Call = u8;
    type Reply = u8;
    type Cast = ();

    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Defers)
    }

    async fn handle_call(&mut self, req: u8, from: &mut Caller<u8>) -> CallReply<u8> {
        match req {
            // The deferred reply dies with a panicking helper task; the server lives on.
            0 => {
                let reply_to = from.defer().unwrap();
                runtime::spawn_task(async move {
                    let _held = reply_to;
                    panic!("helper failed");
                })
                .unwrap();
                CallReply::NoReply
            }
            // Calls itself.
            1 => {
                let me = self_pid();
                let err = gen_server::call::<Defers>(me, 2, LONG).await.unwrap_err();
                assert_eq!(err, CallError::CallingSelf(me));
                CallReply::Reply(1)
            }
            n => CallReply::Reply(n),
        }
    }
}

#[test]
fn a_reply_dropped_by_a_panicking_helper_is_no_reply_and_self_calls_fail_fast() {
    let node = node();
    let out = node
        .run(async {
            let s = gen_server::start::<Defers>((), StartOptions::new())
                .await
                .unwrap();
            let dropped = s.call(0, Duration::from_secs(20)).await.unwrap_err();
            let self_call = s.call(1, LONG).await.unwrap();
            // A timeout too large for any clock behaves as no timeout.
            let huge = s.call(7, Duration::from_secs(u64::MAX)).await.unwrap();
            (dropped, self_call, huge, s.pid())
        })
        .unwrap();
    assert_eq!(out.0, CallError::NoReply(out.3));
    assert_eq!(out.1, 1);
    assert_eq!(out.2, 7);
}

#[test]
fn a_parentless_trapping_server_terminates_at_node_stop() {
    let node = Node::builder()
        .worker_threads(2)
        .shutdown_grace(Duration::from_secs(20))
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // The observer traps exits, so the node's Shutdown does not end it before the report.
    let observer = node
        .spawn_opt(
            async move {
                let (what, reason): (&str, ExitReason) = receive().await;
                tx.send((what, reason)).unwrap();
            },
            runtime::SpawnOptions::new().trap_exit(),
        )
        .unwrap()
        .pid;
    node.block_on(gen_server::start_on::<Kv>(
        &node,
        Some(observer),
        StartOptions::new().trap_exit(),
    ))
    .unwrap();
    node.stop();
    assert_eq!(rx.try_recv().unwrap(), ("terminate", ExitReason::Shutdown));
}

#[test]
fn a_server_reports_its_type_as_its_initial_call() {
    let node = node();
    let call = node
        .run(async {
            let kv = gen_server::start::<Kv>(None, StartOptions::new())
                .await
                .unwrap();
            runtime::process_info(kv.pid()).unwrap().initial_call
        })
        .unwrap();
    assert_eq!(call, std::any::type_name::<Kv>());
}

/// A server whose `terminate` takes a while: it waits for a message from its observer, then
/// reports, so that a stop returning before `terminate` ends would be seen.
struct SlowTerminate(Pid);

impl GenServer for SlowTerminate {
    type Args = Pid;
    type Call = ();
    type Reply = ();
    type Cast = ();

    async fn init(observer: Pid) -> Result<Self, ExitReason> {
        Ok(SlowTerminate(observer))
    }

    async fn handle_call(&mut self, (): (), _from: &mut Caller<()>) -> CallReply<()> {
        CallReply::Reply(())
    }

    async fn terminate(&mut self, reason: &ExitReason) {
        send(self.0, ("terminating", reason.clone()));
        let () = receive().await;
    }
}

/// `stop` asks the server to stop after what its mailbox holds, runs its `terminate` and
/// returns once it has ended, name freed: a new server starts under the name at once. Stopping
/// a dead server is `NoProc`, one that ends otherwise is `Exit`, and a server stopping itself
/// is refused.
#[test]
fn stop_waits_until_the_server_has_ended() {
    let node = node();
    node.run(async {
        let me = self_pid();
        let opts = || StartOptions::new().name("slow");
        let server = gen_server::start::<SlowTerminate>(me, opts())
            .await
            .unwrap();
        let stopper = runtime::spawn_task(async move {
            gen_server::stop("slow", ExitReason::Shutdown, Timeout::Infinity).await
        });
        let (what, reason): (&str, ExitReason) = receive().await;
        assert_eq!((what, reason), ("terminating", ExitReason::Shutdown));
        // terminate waits: the stop has not returned, the name is still taken.
        assert!(runtime::whereis("slow").is_some());
        let stopper = stopper.unwrap();
        assert!(!stopper.is_finished());
        send(server.pid(), ());
        stopper.await.unwrap().unwrap();
        assert_eq!(runtime::whereis("slow"), None);
        assert!(runtime::process_info(server.pid()).is_none());
        gen_server::start::<SlowTerminate>(me, opts())
            .await
            .unwrap();
        // Gone already; no such name.
        assert_eq!(
            server.stop(ExitReason::Normal, LONG).await,
            Err(gen_server::StopError::NoProc(server.pid().into()))
        );
        assert_eq!(
            gen_server::stop("nobody", ExitReason::Normal, LONG).await,
            Err(gen_server::StopError::NoProc("nobody".into()))
        );
        // A server that ends with another reason first (a cast queued before the request
        // stops it) reports that reason.
        let kv = gen_server::start::<Kv>(None, StartOptions::new())
            .await
            .unwrap();
        kv.cast(Cast::Stop);
        assert_eq!(
            kv.stop(ExitReason::Shutdown, LONG).await,
            Err(gen_server::StopError::Exit {
                server: kv.pid(),
                reason: ExitReason::Normal
            })
        );
        // A server that asks to stop itself would wait for ever.
        let me_stopping = gen_server::stop(me, ExitReason::Normal, LONG).await;
        assert_eq!(me_stopping, Err(gen_server::StopError::CallingSelf(me)));
    })
    .unwrap();
    // From outside any process, by pid; a stop that outlasts its timeout says so.
    let observer = node.spawn(async { receive::<()>().await }).unwrap();
    let server = node
        .block_on(gen_server::start_on::<SlowTerminate>(
            &node,
            observer,
            StartOptions::new(),
        ))
        .unwrap();
    let timed_out = node.block_on(server.stop(
        ExitReason::Normal,
        Timeout::After(Duration::from_millis(50)),
    ));
    assert_eq!(
        timed_out,
        Err(gen_server::StopError::Timeout {
            server: server.pid().into(),
            after: Duration::from_millis(50)
        })
    );
    node.send(server.pid(), ());
    node.send(observer, ());
}
