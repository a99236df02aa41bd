//! Messaging: the runtime against raw tokio, ractor and kameo (issue #2).
//!
//! One criterion group per workload; each bench id is `workload/implementation/scheduler`, for
//! example `call/runtime/current_thread` or `call/ractor/2_workers`.
//!
//! # Fairness rules
//!
//! - **Same scheduler for all.** Every implementation runs on a tokio runtime built the same
//!   way: `current_thread` (one thread) or `2_workers` (multi-thread, two workers), timers and
//!   I/O enabled. The runtime's rows use `Node::builder().current_thread()` /
//!   `.worker_threads(2)`, which build exactly that.
//! - **The timed loop runs in a task on the runtime under test**, never as the `block_on`
//!   future: in a process for the runtime (`Node::run`), in a `tokio::spawn`ed task for tokio,
//!   ractor and kameo. Each measurement (`iter_custom`) sets up its servers or peers inside
//!   that task, times `iters` operations, then tears them down untimed. Reported times are per
//!   operation.
//! - **"Ready"**: a server is ready when its start call has returned and it has finished its
//!   init (`gen_server::start`, ractor's `Actor::spawn`; kameo's `wait_for_startup` is awaited
//!   in the untimed setup). Plain processes and tokio tasks are ready once spawned: their
//!   mailbox or channel exists and queues messages.
//! - **"Exited"** (spawn+exit): the spawner has observed the end. tokio: the `JoinHandle` is
//!   awaited. runtime: `spawn_monitor` and the `Down` message received (Erlang's way, and what
//!   the runtime's exit bookkeeping delivers after the future is dropped, the mailbox closed and
//!   the table slot freed). ractor: `Actor::spawn` (which returns once the actor started),
//!   `stop(None)`, and its `JoinHandle` awaited. kameo: spawned from a `PreparedActor` (so a
//!   `JoinHandle` exists), `stop_gracefully`, and the `JoinHandle` awaited.
//! - **Mailbox kinds**: the runtime's mailbox is unbounded (a message of up to 16 bytes
//!   travels inline; a larger one, such as spawn_exit's `Down`, is boxed once); tokio uses
//!   `mpsc::unbounded_channel` (plus `oneshot` for replies); ractor's mailbox is always
//!   unbounded; kameo is given `mailbox::unbounded()` (its default is bounded, 64).
//! - **Replies**: runtime `gen_server::call` (through its one-shot reply slot) with the default
//!   5 s timeout (`runtime`) and with `Timeout::Infinity` (`runtime_infinity`); tokio: mpsc +
//!   oneshot, without timeout (`tokio`, the baseline, to compare with
//!   `runtime_infinity`) and with the same 5 s timeout as `tokio::time::timeout` around the
//!   oneshot (`tokio_timeout`, to compare with `runtime`); ractor: `ActorRef::call` without
//!   timeout; kameo: `ask` without timeout.
//!
//! # Workloads
//!
//! - `spawn_exit`: spawn a process/task/actor that does nothing and observe its exit.
//! - `call`: request/reply round trip to a server holding a `u64` counter.
//! - `ping_pong`: a `u64` sent back and forth between two processes; per round trip. For
//!   ractor and kameo both players are actors (the timed task only serves the ball and awaits a
//!   final oneshot, amortized over the rounds).
//! - `one_way`: messages sent to a sink, then one synchronising round trip (once every
//!   [`ONE_WAY_CHUNK`] messages, to bound the queue); per message.
//! - `fan_out_in_1000`: a coordinator sends one message to each of 1,000 workers and waits for
//!   the 1,000 replies; per round. ractor and kameo use a coordinator actor.
//! - `selective_receive_1000`: 1,000 unmatched messages sit in the mailbox; each operation
//!   sends one matching message to self and receives it selectively (scanning past the 1,000).
//!   The runtime matches by type (`receive::<T>`, `runtime`) or by a predicate on one type
//!   (`receive_where`, `runtime_where`). tokio has no selective receive: its row is the
//!   hand-written equivalent (a save queue scanned before the channel). ractor and kameo have
//!   none either; an actor would need the same hand-written queue, so they have no row.
//!
//! # Ratios
//!
//! The `ratio` group (`messaging/ratio.rs`) measures the targets as ratios: each sample
//! times the runtime's loop and its baseline's back to back, so that both see the same state
//! of a shared machine, and reports the runtime's time in percent of the baseline's
//! (`ratio/call_vs_tokio/current_thread`, ...). Prefer these rows to dividing two rows of the
//! groups above, which criterion measures seconds or minutes apart.
//!
//! Run with `cargo bench --bench messaging` (criterion's options after `--`, e.g.
//! `-- call/` to filter, `-- ratio/` for the ratios alone, `--measurement-time 5`).

use std::collections::VecDeque;
use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use runtime::gen_server::Timeout;
use runtime::{ExitReason, Node, Pid, receive, receive_where, self_pid, send};
use tokio::sync::{mpsc, oneshot};

#[path = "messaging/ratio.rs"]
mod ratio;
#[path = "ratio_measurement.rs"]
mod ratio_measurement;
#[path = "messaging/workloads.rs"]
mod workloads;

use workloads::{
    CALL_TIMEOUT, ractor_actors, ractor_call, runtime_call, runtime_ping_pong, runtime_spawn_exit,
    tokio_call, tokio_ping_pong, tokio_spawn_exit,
};

/// Workers in the fan-out/fan-in workload.
const FAN: usize = 1_000;
/// Unmatched messages in the mailbox for the selective receive.
const UNMATCHED: u64 = 1_000;
/// One-way messages sent between synchronisations (bounds the queue under a current-thread
/// scheduler, where the sender never yields).
const ONE_WAY_CHUNK: u64 = 100_000;

// ---------------------------------------------------------------------------------------------
// Schedulers and where the timed loop runs.

#[derive(Clone, Copy, Debug)]
enum Sched {
    CurrentThread,
    TwoWorkers,
}

impl Sched {
    const ALL: [Sched; 2] = [Sched::CurrentThread, Sched::TwoWorkers];

    fn label(self) -> &'static str {
        match self {
            Sched::CurrentThread => "current_thread",
            Sched::TwoWorkers => "2_workers",
        }
    }

    /// A plain tokio runtime, built as `NodeBuilder::build` builds the node's.
    fn tokio(self) -> tokio::runtime::Runtime {
        let mut builder = match self {
            Sched::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            Sched::TwoWorkers => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(2);
                b
            }
        };
        builder
            .enable_all()
            .thread_name("bench-worker")
            .build()
            .expect("cannot build the tokio runtime")
    }

    fn node(self) -> Node {
        let builder = match self {
            Sched::CurrentThread => Node::builder().current_thread(),
            Sched::TwoWorkers => Node::builder().worker_threads(2),
        };
        builder.build().expect("cannot start the node")
    }
}

/// Runs the timed loop `f` in a task spawned on `rt` (not as the `block_on` future).
fn on_tokio<F>(rt: &tokio::runtime::Runtime, f: F) -> Duration
where
    F: Future<Output = Duration> + Send + 'static,
{
    rt.block_on(async move { tokio::spawn(f).await.expect("the timed task panicked") })
}

/// Runs the timed loop `f` in a process of `node`.
fn on_node<F>(node: &Node, f: F) -> Duration
where
    F: Future<Output = Duration> + Send + 'static,
{
    node.run(f).expect("the timed process failed")
}

/// Registers the four (or fewer) implementations of one workload on both schedulers.
struct Rows<'a> {
    group: criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>,
}

impl Rows<'_> {
    fn node<F, Fut>(&mut self, name: &str, sched: Sched, make: F)
    where
        F: Fn(u64) -> Fut,
        Fut: Future<Output = Duration> + Send + 'static,
    {
        let node = sched.node();
        self.group
            .bench_function(BenchmarkId::new(name, sched.label()), |b| {
                b.iter_custom(|iters| on_node(&node, make(iters)))
            });
        drop(node);
    }

    fn tokio<F, Fut>(&mut self, name: &str, sched: Sched, make: F)
    where
        F: Fn(u64) -> Fut,
        Fut: Future<Output = Duration> + Send + 'static,
    {
        let rt = sched.tokio();
        self.group
            .bench_function(BenchmarkId::new(name, sched.label()), |b| {
                b.iter_custom(|iters| on_tokio(&rt, make(iters)))
            });
        drop(rt);
    }
}

fn group<'a>(c: &'a mut Criterion, name: &str) -> Rows<'a> {
    Rows {
        group: c.benchmark_group(name),
    }
}

// ---------------------------------------------------------------------------------------------
// Actors and servers shared by several workloads.

mod kameo_actors {
    //! The kameo side: actors with the same behaviour as the runtime's processes.

    use kameo::Actor;
    use kameo::actor::ActorRef;
    use kameo::error::Infallible;
    use kameo::message::{Context, Message};
    use tokio::sync::oneshot;

    /// Does nothing (spawn+exit).
    pub(crate) struct Idle;

    impl Actor for Idle {
        type Args = Self;
        type Error = Infallible;

        async fn on_start(args: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(args)
        }
    }

    /// A counter answering asks; also the one-way sink.
    pub(crate) struct Counter(pub(crate) u64);

    impl Actor for Counter {
        type Args = Self;
        type Error = Infallible;

        async fn on_start(args: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(args)
        }
    }

    #[derive(Debug)]
    pub(crate) struct Get;

    impl Message<Get> for Counter {
        type Reply = u64;

        async fn handle(&mut self, _: Get, _: &mut Context<Self, u64>) -> u64 {
            self.0 += 1;
            self.0
        }
    }

    #[derive(Debug)]
    pub(crate) struct Item(pub(crate) u64);

    impl Message<Item> for Counter {
        type Reply = ();

        async fn handle(&mut self, Item(n): Item, _: &mut Context<Self, ()>) {
            self.0 = self.0.wrapping_add(n);
        }
    }

    /// One of the two ping-pong players.
    #[derive(Default)]
    pub(crate) struct Player {
        peer: Option<ActorRef<Player>>,
        done: Option<oneshot::Sender<()>>,
    }

    impl Actor for Player {
        type Args = Self;
        type Error = Infallible;

        async fn on_start(args: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(args)
        }
    }

    #[derive(Debug)]
    pub(crate) struct SetPeer(pub(crate) ActorRef<Player>);

    impl Message<SetPeer> for Player {
        type Reply = ();

        async fn handle(&mut self, SetPeer(p): SetPeer, _: &mut Context<Self, ()>) {
            self.peer = Some(p);
        }
    }

    #[derive(Debug)]
    pub(crate) struct Serve(pub(crate) u64, pub(crate) oneshot::Sender<()>);

    impl Message<Serve> for Player {
        type Reply = ();

        async fn handle(&mut self, Serve(rounds, done): Serve, _: &mut Context<Self, ()>) {
            self.done = Some(done);
            let peer = self.peer.as_ref().expect("the peer is set first");
            peer.tell(Ball(rounds)).await.expect("the peer is alive");
        }
    }

    #[derive(Debug)]
    pub(crate) struct Ball(u64);

    impl Message<Ball> for Player {
        type Reply = ();

        async fn handle(&mut self, Ball(n): Ball, _: &mut Context<Self, ()>) {
            let peer = self.peer.as_ref().expect("the peer is set first");
            match &self.done {
                Some(_) if n <= 1 => {
                    if let Some(done) = self.done.take() {
                        let _ = done.send(());
                    }
                }
                Some(_) => peer.tell(Ball(n - 1)).await.expect("the peer is alive"),
                None => peer.tell(Ball(n)).await.expect("the peer is alive"),
            }
        }
    }

    /// A fan-out worker: answers each request to the coordinator.
    pub(crate) struct Worker(pub(crate) ActorRef<Coord>);

    impl Actor for Worker {
        type Args = Self;
        type Error = Infallible;

        async fn on_start(args: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(args)
        }
    }

    #[derive(Debug)]
    pub(crate) struct Work(u64);

    impl Message<Work> for Worker {
        type Reply = ();

        async fn handle(&mut self, Work(n): Work, _: &mut Context<Self, ()>) {
            self.0
                .tell(Reply(n))
                .await
                .expect("the coordinator is alive");
        }
    }

    /// The fan-out/fan-in coordinator.
    #[derive(Default)]
    pub(crate) struct Coord {
        workers: Vec<ActorRef<Worker>>,
        rounds_left: u64,
        pending: usize,
        done: Option<oneshot::Sender<()>>,
    }

    impl Coord {
        async fn start_round(&mut self) {
            self.pending = self.workers.len();
            for w in &self.workers {
                w.tell(Work(1)).await.expect("the worker is alive");
            }
        }
    }

    impl Actor for Coord {
        type Args = Self;
        type Error = Infallible;

        async fn on_start(args: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(args)
        }
    }

    #[derive(Debug)]
    pub(crate) struct SetWorkers(pub(crate) Vec<ActorRef<Worker>>);

    impl Message<SetWorkers> for Coord {
        type Reply = ();

        async fn handle(&mut self, SetWorkers(w): SetWorkers, _: &mut Context<Self, ()>) {
            self.workers = w;
        }
    }

    #[derive(Debug)]
    pub(crate) struct Rounds(pub(crate) u64, pub(crate) oneshot::Sender<()>);

    impl Message<Rounds> for Coord {
        type Reply = ();

        async fn handle(&mut self, Rounds(n, done): Rounds, _: &mut Context<Self, ()>) {
            self.rounds_left = n;
            self.done = Some(done);
            self.start_round().await;
        }
    }

    #[derive(Debug)]
    pub(crate) struct Reply(u64);

    impl Message<Reply> for Coord {
        type Reply = ();

        async fn handle(&mut self, Reply(n): Reply, _: &mut Context<Self, ()>) {
            std::hint::black_box(n);
            self.pending -= 1;
            if self.pending == 0 {
                self.rounds_left -= 1;
                if self.rounds_left == 0 {
                    if let Some(done) = self.done.take() {
                        let _ = done.send(());
                    }
                } else {
                    self.start_round().await;
                }
            }
        }
    }
}

use kameo::actor::Spawn as _;

// ---------------------------------------------------------------------------------------------
// spawn + exit

fn spawn_exit(c: &mut Criterion) {
    let mut rows = group(c, "spawn_exit");
    for sched in Sched::ALL {
        rows.node("runtime", sched, runtime_spawn_exit);
        rows.tokio("tokio", sched, tokio_spawn_exit);
        rows.tokio("ractor", sched, |iters| async move {
            let start = Instant::now();
            for _ in 0..iters {
                let (actor, handle) = ractor::Actor::spawn(None, ractor_actors::Idle, ())
                    .await
                    .expect("spawn");
                actor.stop(None);
                handle.await.expect("join");
            }
            start.elapsed()
        });
        rows.tokio("kameo", sched, |iters| async move {
            let start = Instant::now();
            for _ in 0..iters {
                let prepared =
                    kameo_actors::Idle::prepare_with_mailbox(kameo::mailbox::unbounded());
                let actor = prepared.actor_ref().clone();
                let handle = prepared.spawn(kameo_actors::Idle);
                actor.stop_gracefully().await.expect("stop");
                let _ = handle.await.expect("join");
            }
            start.elapsed()
        });
    }
    rows.group.finish();
}

// ---------------------------------------------------------------------------------------------
// call (request/reply round trip)

fn call(c: &mut Criterion) {
    let mut rows = group(c, "call");
    for sched in Sched::ALL {
        rows.node("runtime", sched, |iters| {
            runtime_call(iters, Timeout::After(CALL_TIMEOUT))
        });
        rows.node("runtime_infinity", sched, |iters| {
            runtime_call(iters, Timeout::Infinity)
        });
        rows.tokio("tokio", sched, tokio_call::<false>);
        rows.tokio("tokio_timeout", sched, tokio_call::<true>);
        rows.tokio("ractor", sched, ractor_call);
        rows.tokio("kameo", sched, |iters| async move {
            let actor = kameo_actors::Counter::spawn_with_mailbox(
                kameo_actors::Counter(0),
                kameo::mailbox::unbounded(),
            );
            actor.wait_for_startup().await;
            let start = Instant::now();
            for _ in 0..iters {
                black_box(actor.ask(kameo_actors::Get).await.expect("ask"));
            }
            let elapsed = start.elapsed();
            actor.stop_gracefully().await.expect("stop");
            actor.wait_for_shutdown().await;
            elapsed
        });
    }
    rows.group.finish();
}

// ---------------------------------------------------------------------------------------------
// ping-pong between two processes

fn ping_pong(c: &mut Criterion) {
    let mut rows = group(c, "ping_pong");
    for sched in Sched::ALL {
        rows.node("runtime", sched, runtime_ping_pong);
        rows.tokio("tokio", sched, tokio_ping_pong);
        rows.tokio("ractor", sched, |iters| async move {
            use ractor_actors::{Player, PlayerMsg};
            let (a, ha) = ractor::Actor::spawn(None, Player, ()).await.expect("spawn");
            let (b, hb) = ractor::Actor::spawn(None, Player, ()).await.expect("spawn");
            a.cast(PlayerMsg::SetPeer(b.clone())).expect("cast");
            b.cast(PlayerMsg::SetPeer(a.clone())).expect("cast");
            let (done, finished) = oneshot::channel();
            let start = Instant::now();
            a.cast(PlayerMsg::Serve(iters, done)).expect("cast");
            finished.await.expect("done");
            let elapsed = start.elapsed();
            a.stop(None);
            b.stop(None);
            ha.await.expect("join");
            hb.await.expect("join");
            elapsed
        });
        rows.tokio("kameo", sched, |iters| async move {
            use kameo_actors::{Player, Serve, SetPeer};
            let a = Player::spawn_with_mailbox(Player::default(), kameo::mailbox::unbounded());
            let b = Player::spawn_with_mailbox(Player::default(), kameo::mailbox::unbounded());
            a.ask(SetPeer(b.clone())).await.expect("ask");
            b.ask(SetPeer(a.clone())).await.expect("ask");
            let (done, finished) = oneshot::channel();
            let start = Instant::now();
            a.tell(Serve(iters, done)).await.expect("tell");
            finished.await.expect("done");
            let elapsed = start.elapsed();
            for p in [a, b] {
                p.stop_gracefully().await.expect("stop");
                p.wait_for_shutdown().await;
            }
            elapsed
        });
    }
    rows.group.finish();
}

// ---------------------------------------------------------------------------------------------
// one-way throughput

/// What the runtime's sink receives: one type, so `receive` takes the oldest at once.
enum SinkMsg {
    Item(u64),
    Sync(Pid),
}

/// Splits `iters` messages into chunks of at most [`ONE_WAY_CHUNK`].
fn chunks(iters: u64) -> impl Iterator<Item = u64> {
    let full = iters / ONE_WAY_CHUNK;
    let rest = iters % ONE_WAY_CHUNK;
    std::iter::repeat_n(ONE_WAY_CHUNK, full as usize).chain((rest > 0).then_some(rest))
}

fn one_way(c: &mut Criterion) {
    let mut rows = group(c, "one_way");
    rows.group.throughput(Throughput::Elements(1));
    for sched in Sched::ALL {
        rows.node("runtime", sched, |iters| async move {
            let me = self_pid();
            let sink = runtime::spawn(async {
                let mut total = 0u64;
                loop {
                    match receive::<SinkMsg>().await {
                        SinkMsg::Item(n) => total = total.wrapping_add(n),
                        SinkMsg::Sync(from) => send(from, total),
                    }
                }
            })
            .expect("spawn");
            let start = Instant::now();
            for chunk in chunks(iters) {
                for i in 0..chunk {
                    send(sink, SinkMsg::Item(i));
                }
                send(sink, SinkMsg::Sync(me));
                black_box(receive::<u64>().await);
            }
            let elapsed = start.elapsed();
            runtime::exit(sink, ExitReason::Kill);
            elapsed
        });
        rows.tokio("tokio", sched, |iters| async move {
            enum Msg {
                Item(u64),
                Sync(oneshot::Sender<u64>),
            }
            let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
            let sink = tokio::spawn(async move {
                let mut total = 0u64;
                while let Some(msg) = rx.recv().await {
                    match msg {
                        Msg::Item(n) => total = total.wrapping_add(n),
                        Msg::Sync(reply) => {
                            let _ = reply.send(total);
                        }
                    }
                }
            });
            let start = Instant::now();
            for chunk in chunks(iters) {
                for i in 0..chunk {
                    tx.send(Msg::Item(i)).expect("the sink is alive");
                }
                let (reply, answer) = oneshot::channel();
                tx.send(Msg::Sync(reply)).expect("the sink is alive");
                black_box(answer.await.expect("sync"));
            }
            let elapsed = start.elapsed();
            drop(tx);
            sink.await.expect("join");
            elapsed
        });
        rows.tokio("ractor", sched, |iters| async move {
            use ractor_actors::{Counter, CounterMsg};
            let (actor, handle) = ractor::Actor::spawn(None, Counter, ())
                .await
                .expect("spawn");
            let start = Instant::now();
            for chunk in chunks(iters) {
                for i in 0..chunk {
                    actor.cast(CounterMsg::Item(i)).expect("cast");
                }
                let r = actor.call(CounterMsg::Get, None).await.expect("call");
                black_box(r.success_or("reply").expect("reply"));
            }
            let elapsed = start.elapsed();
            actor.stop(None);
            handle.await.expect("join");
            elapsed
        });
        rows.tokio("kameo", sched, |iters| async move {
            use kameo_actors::{Counter, Get, Item};
            let actor = Counter::spawn_with_mailbox(Counter(0), kameo::mailbox::unbounded());
            actor.wait_for_startup().await;
            let start = Instant::now();
            for chunk in chunks(iters) {
                for i in 0..chunk {
                    actor.tell(Item(i)).await.expect("tell");
                }
                black_box(actor.ask(Get).await.expect("ask"));
            }
            let elapsed = start.elapsed();
            actor.stop_gracefully().await.expect("stop");
            actor.wait_for_shutdown().await;
            elapsed
        });
    }
    rows.group.finish();
}

// ---------------------------------------------------------------------------------------------
// fan-out / fan-in over 1,000 processes

fn fan_out_in(c: &mut Criterion) {
    let mut rows = group(c, "fan_out_in_1000");
    for sched in Sched::ALL {
        rows.node("runtime", sched, |iters| async move {
            let me = self_pid();
            let workers: Vec<Pid> = (0..FAN)
                .map(|_| {
                    runtime::spawn(async move {
                        loop {
                            let n: u64 = receive().await;
                            if n == u64::MAX {
                                return;
                            }
                            send(me, n);
                        }
                    })
                    .expect("spawn")
                })
                .collect();
            let start = Instant::now();
            for _ in 0..iters {
                for w in &workers {
                    send(*w, 1u64);
                }
                for _ in 0..FAN {
                    black_box(receive::<u64>().await);
                }
            }
            let elapsed = start.elapsed();
            for w in &workers {
                send(*w, u64::MAX);
            }
            elapsed
        });
        rows.tokio("tokio", sched, |iters| async move {
            let (reply_tx, mut replies) = mpsc::unbounded_channel::<u64>();
            let mut workers = Vec::with_capacity(FAN);
            let mut handles = Vec::with_capacity(FAN);
            for _ in 0..FAN {
                let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
                let reply_tx = reply_tx.clone();
                handles.push(tokio::spawn(async move {
                    while let Some(n) = rx.recv().await {
                        if reply_tx.send(n).is_err() {
                            break;
                        }
                    }
                }));
                workers.push(tx);
            }
            let start = Instant::now();
            for _ in 0..iters {
                for w in &workers {
                    w.send(1).expect("the worker is alive");
                }
                for _ in 0..FAN {
                    black_box(replies.recv().await.expect("reply"));
                }
            }
            let elapsed = start.elapsed();
            drop(workers);
            for h in handles {
                h.await.expect("join");
            }
            elapsed
        });
        rows.tokio("ractor", sched, |iters| async move {
            use ractor_actors::{Coord, CoordMsg, Worker};
            let (coord, coord_handle) = ractor::Actor::spawn(None, Coord, ()).await.expect("spawn");
            let mut workers = Vec::with_capacity(FAN);
            let mut handles = Vec::with_capacity(FAN);
            for _ in 0..FAN {
                let (w, h) = ractor::Actor::spawn(None, Worker, coord.clone())
                    .await
                    .expect("spawn");
                workers.push(w);
                handles.push(h);
            }
            coord
                .cast(CoordMsg::SetWorkers(workers.clone()))
                .expect("cast");
            let (done, finished) = oneshot::channel();
            let start = Instant::now();
            coord.cast(CoordMsg::Rounds(iters, done)).expect("cast");
            finished.await.expect("done");
            let elapsed = start.elapsed();
            coord.stop(None);
            for w in &workers {
                w.stop(None);
            }
            coord_handle.await.expect("join");
            for h in handles {
                h.await.expect("join");
            }
            elapsed
        });
        rows.tokio("kameo", sched, |iters| async move {
            use kameo_actors::{Coord, Rounds, SetWorkers, Worker};
            let coord = Coord::spawn_with_mailbox(Coord::default(), kameo::mailbox::unbounded());
            let workers: Vec<_> = (0..FAN)
                .map(|_| {
                    Worker::spawn_with_mailbox(Worker(coord.clone()), kameo::mailbox::unbounded())
                })
                .collect();
            for w in &workers {
                w.wait_for_startup().await;
            }
            coord.ask(SetWorkers(workers.clone())).await.expect("ask");
            let (done, finished) = oneshot::channel();
            let start = Instant::now();
            coord.tell(Rounds(iters, done)).await.expect("tell");
            finished.await.expect("done");
            let elapsed = start.elapsed();
            coord.stop_gracefully().await.expect("stop");
            coord.wait_for_shutdown().await;
            for w in &workers {
                w.stop_gracefully().await.expect("stop");
            }
            for w in &workers {
                w.wait_for_shutdown().await;
            }
            elapsed
        });
    }
    rows.group.finish();
}

// ---------------------------------------------------------------------------------------------
// selective receive over 1,000 unmatched messages

/// A message the selective receive skips (by type).
struct Unmatched(u64);
/// The message it looks for.
struct Wanted(u64);
/// One type for the predicate variant: `(tag, payload)`, wanted when the tag is 1.
struct Tagged(u64, u64);

fn selective_receive(c: &mut Criterion) {
    let mut rows = group(c, "selective_receive_1000");
    for sched in Sched::ALL {
        rows.node("runtime", sched, |iters| async move {
            let me = self_pid();
            for i in 0..UNMATCHED {
                send(me, Unmatched(i));
            }
            // Read the unmatched ones at the end, so they are real messages to the compiler too.
            let mut unmatched = 0;
            // Moves the unmatched ones from incoming to the saved queue.
            send(me, Wanted(0));
            black_box(receive::<Wanted>().await.0);
            let start = Instant::now();
            for i in 0..iters {
                send(me, Wanted(i));
                black_box(receive::<Wanted>().await.0);
            }
            let elapsed = start.elapsed();
            for _ in 0..UNMATCHED {
                unmatched += receive::<Unmatched>().await.0;
            }
            black_box(unmatched);
            elapsed
        });
        rows.node("runtime_where", sched, |iters| async move {
            let me = self_pid();
            for i in 0..UNMATCHED {
                send(me, Tagged(0, i));
            }
            send(me, Tagged(1, 0));
            black_box(receive_where(|t: &Tagged| t.0 == 1).await.1);
            let start = Instant::now();
            for i in 0..iters {
                send(me, Tagged(1, i));
                black_box(receive_where(|t: &Tagged| t.0 == 1).await.1);
            }
            start.elapsed()
        });
        rows.tokio("tokio", sched, |iters| async move {
            /// The hand-written selective receive: the save queue first, then the channel.
            async fn recv_matching(
                rx: &mut mpsc::UnboundedReceiver<Tagged>,
                saved: &mut VecDeque<Tagged>,
                tag: u64,
            ) -> Tagged {
                if let Some(i) = saved.iter().position(|t| t.0 == tag) {
                    return saved.remove(i).expect("position is in range");
                }
                loop {
                    let msg = rx.recv().await.expect("the sender is held");
                    if msg.0 == tag {
                        return msg;
                    }
                    saved.push_back(msg);
                }
            }
            let (tx, mut rx) = mpsc::unbounded_channel::<Tagged>();
            let mut saved = VecDeque::new();
            for i in 0..UNMATCHED {
                tx.send(Tagged(0, i)).expect("send");
            }
            tx.send(Tagged(1, 0)).expect("send");
            black_box(recv_matching(&mut rx, &mut saved, 1).await.1);
            let start = Instant::now();
            for i in 0..iters {
                tx.send(Tagged(1, i)).expect("send");
                black_box(recv_matching(&mut rx, &mut saved, 1).await.1);
            }
            start.elapsed()
        });
    }
    rows.group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args();
    spawn_exit(&mut c);
    call(&mut c);
    ping_pong(&mut c);
    one_way(&mut c);
    fan_out_in(&mut c);
    selective_receive(&mut c);
    c.final_summary();
    // The measurement time is in percent-operations here (see `ratio`): a row runs about
    // three to ten times as long.
    let mut r = Criterion::default()
        .with_measurement(ratio::Ratio)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .configure_from_args();
    ratio::ratios(&mut r);
    r.final_summary();
}
