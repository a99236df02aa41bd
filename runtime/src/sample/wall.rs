//! The wall sampler: processes, running or not, sampled from one thread of its own.
//!
//! Each tick reads a bounded number of the node's process slots chosen at random (as
//! async-profiler's wall mode samples a few threads per tick), so a tick costs the same with
//! 100 processes or 1,000,000. A sample of a process the session samples records its state,
//! mailbox length, registered name and the traced path it last suspended in ([`super::paths`]),
//! each read with a load (the name under the process's own lock, briefly): workers are never
//! stopped. Weights make the samples estimate process-ticks: a slot drawn with probability
//! `k / slots` stands for `slots / k` of them, so summed weights per state estimate how many
//! processes were in it, tick by tick, whatever the population.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::store::{Store, now_ns};
use super::{ProcessState, Sample};
use crate::node::NodeInner;
use crate::process::{Process, ProcessStatus, Wait};
use crate::trace::{Callsite, callsites};

/// The wall sampler of one session: stops when dropped.
pub(crate) struct WallSampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for WallSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Starts sampling `node`'s processes for `store`'s session, `per_tick` slots a tick at `hz`.
pub(crate) fn start(
    node: Arc<NodeInner>,
    store: Arc<Store>,
    hz: u32,
    per_tick: usize,
) -> std::io::Result<WallSampler> {
    let stop = Arc::new(AtomicBool::new(false));
    let period = Duration::from_nanos(1_000_000_000 / u64::from(hz.max(1)));
    let thread = std::thread::Builder::new()
        .name(format!("tprof-wall-{}", node.id))
        .spawn({
            let stop = Arc::clone(&stop);
            move || {
                crate::heap::suppressed(|| {
                    let mut rng = Rng::seeded(now_ns() ^ u64::from(store.bit) << 32);
                    let mut next = Instant::now() + period;
                    while !stop.load(Ordering::SeqCst) {
                        let now = Instant::now();
                        if now < next {
                            std::thread::park_timeout(next - now);
                            continue;
                        }
                        // A late tick is taken once, not caught up on.
                        next = now.max(next) + period;
                        tick(&node, &store, per_tick, &mut rng, &mut Paths::default());
                    }
                });
            }
        })?;
    Ok(WallSampler {
        stop,
        thread: Some(thread),
    })
}

/// One tick: up to `per_tick` slots drawn at random (every slot, each once, when there are no
/// more than that).
fn tick(node: &NodeInner, store: &Store, per_tick: usize, rng: &mut Rng, paths: &mut Paths) {
    let slots = node.table.high_water();
    // A paused session samples nothing (its bit leaves the measuring mask while paused).
    if slots == 0 || per_tick == 0 || crate::trace::measuring() & (1 << store.bit) == 0 {
        return;
    }
    let time = now_ns().saturating_sub(*store.started_ns.lock());
    if slots as usize <= per_tick {
        for i in 0..slots {
            sample_slot(node, store, i, 1.0, time, paths);
        }
        return;
    }
    let weight = f64::from(slots) / per_tick as f64;
    for _ in 0..per_tick {
        let i = (rng.next() % u64::from(slots)) as u32;
        sample_slot(node, store, i, weight, time, paths);
    }
}

/// Interned paths as the session's traced frames, looked up once per path for a tick or a
/// census (a pattern may change between two).
#[derive(Default)]
struct Paths(HashMap<u32, Vec<&'static Callsite>>);

impl Paths {
    fn frames(&mut self, id: u32, bit: u32) -> Vec<&'static Callsite> {
        self.0
            .entry(id)
            .or_insert_with(|| {
                let all = callsites();
                super::paths::path_of(id)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|id| all.get(*id as usize))
                    .filter(|cs| cs.sessions() & (1 << bit) != 0)
                    .collect()
            })
            .clone()
    }
}

fn sample_slot(
    node: &NodeInner,
    store: &Store,
    index: u32,
    weight: f64,
    time: u64,
    paths: &mut Paths,
) {
    let Some(read) = node.table.at_index(index) else {
        return;
    };
    let Some(p) = read.as_deref() else {
        return;
    };
    if p.trace_flags.traced() & (1 << store.bit) == 0 {
        return;
    }
    store.keep(sample_of(p, store.bit, weight, time, paths));
}

/// Every process of `node` the session samples, once each (weight 1): a census.
pub(crate) fn census(node: &NodeInner, bit: u32, time: u64) -> Vec<Sample> {
    crate::heap::suppressed(|| {
        let slots = node.table.high_water();
        let mut out = Vec::with_capacity(node.table.len());
        let mut paths = Paths::default();
        for i in 0..slots {
            if let Some(read) = node.table.at_index(i)
                && let Some(p) = read.as_deref()
                && p.trace_flags.traced() & (1 << bit) != 0
            {
                out.push(sample_of(p, bit, 1.0, time, &mut paths));
            }
        }
        out
    })
}

/// A wall sample of `p`.
fn sample_of(p: &Process, bit: u32, weight: f64, time: u64, paths: &mut Paths) -> Sample {
    let (status, queue) = p.status_and_queue();
    let waiting = p.waiting_for();
    let account = p.trace_account_if_any();
    let path: Vec<&'static Callsite> = match (status, account) {
        (ProcessStatus::Waiting | ProcessStatus::Runnable, Some(account)) => {
            paths.frames(account.suspended_path(), bit)
        }
        _ => Vec::new(),
    };
    let state = match status {
        ProcessStatus::Running => ProcessState::Running,
        ProcessStatus::Runnable => ProcessState::Runnable,
        ProcessStatus::Exiting => ProcessState::Exiting,
        _ => match waiting {
            Some((Wait::Receive, _)) => ProcessState::Receive,
            Some((Wait::ReceiveTimeout, _)) => ProcessState::ReceiveTimeout,
            Some((Wait::Call, _)) => ProcessState::Call,
            None => waiting_in(path.last().copied()),
        },
    };
    Sample {
        pid: Some(p.pid),
        thread: None,
        time_ns: time,
        weight,
        traced: path,
        native: Vec::new(),
        truncated: false,
        state: Some(state),
        mailbox_len: u32::try_from(queue).unwrap_or(u32::MAX),
        registered_name: p.registered_name(),
        callee: waiting.and_then(|(_, callee)| callee),
        size: 0,
        address: 0,
        live: false,
    }
}

/// What a waiting process waits for, from the innermost traced function it suspended in.
fn waiting_in(innermost: Option<&'static Callsite>) -> ProcessState {
    let Some(cs) = innermost else {
        return ProcessState::Waiting;
    };
    match (cs.module(), cs.written_name()) {
        ("runtime", "receive_timeout" | "receive_any_timeout") => ProcessState::ReceiveTimeout,
        ("runtime", name) if name.starts_with("receive") => ProcessState::Receive,
        ("runtime::gen_server", "call") | ("runtime::supervisor", _) => ProcessState::Call,
        _ => ProcessState::Waiting,
    }
}

/// A small xorshift generator: slots drawn at random, no dependency, no allocation.
struct Rng(u64);

impl Rng {
    fn seeded(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}
