//! The round trips that several benches measure, each written once: spawn and exit, a
//! request/reply call, and ping-pong, on the runtime and on its baselines (raw tokio, ractor).
//! `messaging` times them with criterion; `instructions` counts their instructions under
//! callgrind. Each workload runs `iters` operations in the task it is awaited in and returns
//! the time of the operations alone (setup and teardown untimed).

use std::hint::black_box;
use std::time::{Duration, Instant};

use runtime::gen_server::{self, CallReply, Caller, GenServer, StartOptions, Timeout};
use runtime::{Down, ExitReason, receive, self_pid, send};
use tokio::sync::{mpsc, oneshot};

/// The timeout the runtime's `call` rows pass (Erlang's default).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The runtime's counter server.
pub(crate) struct Counter(u64);

impl GenServer for Counter {
    type Args = ();
    type Call = ();
    type Reply = u64;
    type Cast = ();

    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Counter(0))
    }

    async fn handle_call(&mut self, (): (), _from: &mut Caller<u64>) -> CallReply<u64> {
        self.0 += 1;
        CallReply::Reply(self.0)
    }
}

pub(crate) mod ractor_actors {
    //! The ractor side: actors with the same behaviour as the runtime's processes.

    use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
    use tokio::sync::oneshot;

    /// Does nothing (spawn+exit).
    pub(crate) struct Idle;

    impl Actor for Idle {
        type Msg = ();
        type State = ();
        type Arguments = ();

        async fn pre_start(&self, _myself: ActorRef<()>, (): ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
    }

    /// A counter answering calls; also the one-way sink.
    pub(crate) struct Counter;

    pub(crate) enum CounterMsg {
        Get(RpcReplyPort<u64>),
        Item(u64),
    }

    impl Actor for Counter {
        type Msg = CounterMsg;
        type State = u64;
        type Arguments = ();

        async fn pre_start(
            &self,
            _myself: ActorRef<CounterMsg>,
            (): (),
        ) -> Result<u64, ActorProcessingErr> {
            Ok(0)
        }

        async fn handle(
            &self,
            _myself: ActorRef<CounterMsg>,
            msg: CounterMsg,
            state: &mut u64,
        ) -> Result<(), ActorProcessingErr> {
            match msg {
                CounterMsg::Get(reply) => {
                    *state += 1;
                    let _ = reply.send(*state);
                }
                CounterMsg::Item(n) => *state = state.wrapping_add(n),
            }
            Ok(())
        }
    }

    /// One of the two ping-pong players.
    pub(crate) struct Player;

    pub(crate) enum PlayerMsg {
        SetPeer(ActorRef<PlayerMsg>),
        /// Serve `rounds` round trips, then answer.
        Serve(u64, oneshot::Sender<()>),
        Ball(u64),
    }

    #[derive(Default)]
    pub(crate) struct PlayerState {
        peer: Option<ActorRef<PlayerMsg>>,
        done: Option<oneshot::Sender<()>>,
    }

    impl Actor for Player {
        type Msg = PlayerMsg;
        type State = PlayerState;
        type Arguments = ();

        async fn pre_start(
            &self,
            _myself: ActorRef<PlayerMsg>,
            (): (),
        ) -> Result<PlayerState, ActorProcessingErr> {
            Ok(PlayerState::default())
        }

        async fn handle(
            &self,
            _myself: ActorRef<PlayerMsg>,
            msg: PlayerMsg,
            state: &mut PlayerState,
        ) -> Result<(), ActorProcessingErr> {
            let peer = |s: &PlayerState| s.peer.clone().expect("the peer is set first");
            match msg {
                PlayerMsg::SetPeer(p) => state.peer = Some(p),
                PlayerMsg::Serve(rounds, done) => {
                    state.done = Some(done);
                    peer(state).cast(PlayerMsg::Ball(rounds))?;
                }
                PlayerMsg::Ball(n) => match &state.done {
                    // The server: one round trip is complete.
                    Some(_) if n <= 1 => {
                        if let Some(done) = state.done.take() {
                            let _ = done.send(());
                        }
                    }
                    Some(_) => state
                        .peer
                        .as_ref()
                        .expect("the peer is set first")
                        .cast(PlayerMsg::Ball(n - 1))?,
                    // The receiver: send it back.
                    None => state
                        .peer
                        .as_ref()
                        .expect("the peer is set first")
                        .cast(PlayerMsg::Ball(n))?,
                },
            }
            Ok(())
        }
    }

    /// A fan-out worker: answers each request to the coordinator.
    pub(crate) struct Worker;

    impl Actor for Worker {
        type Msg = u64;
        type State = ActorRef<CoordMsg>;
        type Arguments = ActorRef<CoordMsg>;

        async fn pre_start(
            &self,
            _myself: ActorRef<u64>,
            coord: ActorRef<CoordMsg>,
        ) -> Result<ActorRef<CoordMsg>, ActorProcessingErr> {
            Ok(coord)
        }

        async fn handle(
            &self,
            _myself: ActorRef<u64>,
            n: u64,
            coord: &mut ActorRef<CoordMsg>,
        ) -> Result<(), ActorProcessingErr> {
            coord.cast(CoordMsg::Reply(n))?;
            Ok(())
        }
    }

    /// The fan-out/fan-in coordinator.
    pub(crate) struct Coord;

    pub(crate) enum CoordMsg {
        SetWorkers(Vec<ActorRef<u64>>),
        /// Run this many rounds, then answer.
        Rounds(u64, oneshot::Sender<()>),
        Reply(u64),
    }

    #[derive(Default)]
    pub(crate) struct CoordState {
        workers: Vec<ActorRef<u64>>,
        rounds_left: u64,
        pending: usize,
        done: Option<oneshot::Sender<()>>,
    }

    impl CoordState {
        fn start_round(&mut self) -> Result<(), ActorProcessingErr> {
            self.pending = self.workers.len();
            for w in &self.workers {
                w.cast(1)?;
            }
            Ok(())
        }
    }

    impl Actor for Coord {
        type Msg = CoordMsg;
        type State = CoordState;
        type Arguments = ();

        async fn pre_start(
            &self,
            _myself: ActorRef<CoordMsg>,
            (): (),
        ) -> Result<CoordState, ActorProcessingErr> {
            Ok(CoordState::default())
        }

        async fn handle(
            &self,
            _myself: ActorRef<CoordMsg>,
            msg: CoordMsg,
            state: &mut CoordState,
        ) -> Result<(), ActorProcessingErr> {
            match msg {
                CoordMsg::SetWorkers(w) => state.workers = w,
                CoordMsg::Rounds(n, done) => {
                    state.rounds_left = n;
                    state.done = Some(done);
                    state.start_round()?;
                }
                CoordMsg::Reply(n) => {
                    std::hint::black_box(n);
                    state.pending -= 1;
                    if state.pending == 0 {
                        state.rounds_left -= 1;
                        if state.rounds_left == 0 {
                            if let Some(done) = state.done.take() {
                                let _ = done.send(());
                            }
                        } else {
                            state.start_round()?;
                        }
                    }
                }
            }
            Ok(())
        }
    }
}

pub(crate) async fn runtime_spawn_exit(iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        let (pid, _mref) = runtime::spawn_monitor(async {}).expect("spawn");
        let down: Down = receive().await;
        debug_assert_eq!(down.pid, pid);
    }
    start.elapsed()
}

pub(crate) async fn tokio_spawn_exit(iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        tokio::spawn(async {}).await.expect("join");
    }
    start.elapsed()
}

/// A tokio server answering through a oneshot per request, called `iters` times; with
/// `TIMEOUT`, each wait is bounded by [`CALL_TIMEOUT`] (a tokio timer per call). A const
/// parameter, so that the row without a timeout runs the plain loop.
pub(crate) async fn tokio_call<const TIMEOUT: bool>(iters: u64) -> Duration {
    let (tx, mut rx) = mpsc::unbounded_channel::<oneshot::Sender<u64>>();
    let server = tokio::spawn(async move {
        let mut n = 0u64;
        while let Some(reply) = rx.recv().await {
            n += 1;
            let _ = reply.send(n);
        }
    });
    let start = Instant::now();
    for _ in 0..iters {
        let (reply, answer) = oneshot::channel();
        tx.send(reply).expect("the server is alive");
        let got = if TIMEOUT {
            tokio::time::timeout(CALL_TIMEOUT, answer)
                .await
                .expect("in time")
        } else {
            answer.await
        };
        black_box(got.expect("reply"));
    }
    let elapsed = start.elapsed();
    drop(tx);
    server.await.expect("join");
    elapsed
}

pub(crate) async fn runtime_call(iters: u64, timeout: Timeout) -> Duration {
    let server = gen_server::start::<Counter>((), StartOptions::new())
        .await
        .expect("start the server");
    let start = Instant::now();
    for _ in 0..iters {
        black_box(server.call((), timeout).await.expect("call"));
    }
    let elapsed = start.elapsed();
    runtime::exit(server.pid(), ExitReason::Kill);
    elapsed
}

pub(crate) async fn ractor_call(iters: u64) -> Duration {
    let (actor, handle) = ractor::Actor::spawn(None, ractor_actors::Counter, ())
        .await
        .expect("spawn");
    let start = Instant::now();
    for _ in 0..iters {
        let r = actor
            .call(ractor_actors::CounterMsg::Get, None)
            .await
            .expect("call");
        black_box(r.success_or("reply").expect("reply"));
    }
    let elapsed = start.elapsed();
    actor.stop(None);
    handle.await.expect("join");
    elapsed
}

pub(crate) async fn runtime_ping_pong(iters: u64) -> Duration {
    let me = self_pid();
    let peer = runtime::spawn(async move {
        loop {
            let n: u64 = receive().await;
            if n == u64::MAX {
                return;
            }
            send(me, n);
        }
    })
    .expect("spawn");
    let start = Instant::now();
    for i in 0..iters {
        send(peer, i);
        black_box(receive::<u64>().await);
    }
    let elapsed = start.elapsed();
    send(peer, u64::MAX);
    elapsed
}

pub(crate) async fn tokio_ping_pong(iters: u64) -> Duration {
    let (ping_tx, mut ping_rx) = mpsc::unbounded_channel::<u64>();
    let (pong_tx, mut pong_rx) = mpsc::unbounded_channel::<u64>();
    let peer = tokio::spawn(async move {
        while let Some(n) = ping_rx.recv().await {
            if pong_tx.send(n).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    for i in 0..iters {
        ping_tx.send(i).expect("the peer is alive");
        black_box(pong_rx.recv().await.expect("pong"));
    }
    let elapsed = start.elapsed();
    drop(ping_tx);
    peer.await.expect("join");
    elapsed
}
