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
//!
//! While its session is paused (its bit out of the measuring mask) the sampler's thread takes
//! no tick at all: it parks, and the session's resume (or restart) wakes it
//! ([`resumed`], called by the trace session), so a paused profile of a large node costs
//! nothing between two collects.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::store::{Store, now_ns};
use super::{ProcessState, Sample};
use crate::node::NodeInner;
use crate::process::{Process, ProcessStatus};
use crate::trace::unmeasured::Current;
use crate::trace::{Callsite, callsites};

/// The wall sampler of one session: stops when dropped.
pub(crate) struct WallSampler {
    stop: Arc<AtomicBool>,
    #[cfg(test)]
    counts: Arc<Counters>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a wall sampler's thread has done, counted as it goes.
#[derive(Default)]
struct Counters {
    /// Ticks taken.
    ticks: AtomicU64,
    /// Process slots read, over every tick: the per-process work.
    slots: AtomicU64,
    /// Times it parked because its session measured nothing (paused).
    parks: AtomicU64,
    /// Samples built (kept, or dropped by a buffer that filled during the tick).
    built: AtomicU64,
}

/// A copy of a wall sampler's [`Counters`] (tests).
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) ticks: u64,
    pub(crate) slots: u64,
    pub(crate) parks: u64,
    pub(crate) built: u64,
}

#[cfg(test)]
impl WallSampler {
    /// What its thread has done so far.
    pub(crate) fn counts(&self) -> Counts {
        Counts {
            ticks: self.counts.ticks.load(Ordering::Relaxed),
            slots: self.counts.slots.load(Ordering::Relaxed),
            parks: self.counts.parks.load(Ordering::Relaxed),
            built: self.counts.built.load(Ordering::Relaxed),
        }
    }
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

/// Starts sampling `node`'s processes for `store`'s session, `per_tick` slots a tick at `hz`,
/// folding the session's ended processes (`ended`) between ticks, at least every
/// [`FOLD_EVERY`].
pub(crate) fn start(
    node: Arc<NodeInner>,
    store: Arc<Store>,
    ended: Arc<super::ended::Ended>,
    hz: u32,
    per_tick: usize,
) -> std::io::Result<WallSampler> {
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counters::default());
    let period = Duration::from_nanos(1_000_000_000 / u64::from(hz.max(1)));
    let thread = std::thread::Builder::new()
        .name(format!("tprof-wall-{}", node.id))
        .spawn({
            let stop = Arc::clone(&stop);
            let counts = Arc::clone(&counts);
            move || {
                crate::heap::suppressed(|| {
                    let mut rng = Rng::seeded(now_ns() ^ u64::from(store.bit) << 32);
                    let mut next = Instant::now() + period;
                    let bit = store.bit;
                    set_thread(bit, Some(std::thread::current()));
                    while !stop.load(Ordering::SeqCst) {
                        if crate::trace::measuring() & (1 << bit) == 0 {
                            // Paused: nothing to sample until [`resumed`] (or the drop) wakes
                            // it. Set before the check, a resume's unpark is never lost.
                            counts.parks.fetch_add(1, Ordering::Relaxed);
                            std::thread::park();
                            next = Instant::now() + period;
                            continue;
                        }
                        // Here, between ticks: no sample read from a process is on its way to
                        // the buffer while the process is folded.
                        ended.fold();
                        let now = Instant::now();
                        if now < next {
                            std::thread::park_timeout((next - now).min(FOLD_EVERY));
                            continue;
                        }
                        // A late tick is taken once, not caught up on.
                        next = now.max(next) + period;
                        counts.ticks.fetch_add(1, Ordering::Relaxed);
                        let (read, built) =
                            tick(&node, &store, per_tick, &mut rng, &mut Paths::default());
                        counts.slots.fetch_add(read, Ordering::Relaxed);
                        counts.built.fetch_add(built, Ordering::Relaxed);
                    }
                    set_thread(bit, None);
                });
            }
        })?;
    Ok(WallSampler {
        stop,
        #[cfg(test)]
        counts,
        thread: Some(thread),
    })
}

/// The longest the wall sampler's thread waits between two looks at whether a fold of its
/// session's ended processes is due (a session sampling at 1 Hz still folds promptly).
const FOLD_EVERY: Duration = Duration::from_millis(10);

/// The thread of each session slot's wall sampler, for [`resumed`] to wake.
static THREADS: Mutex<[Option<std::thread::Thread>; 64]> = Mutex::new([const { None }; 64]);

/// Records (or forgets) the wall sampler thread of session slot `bit`.
fn set_thread(bit: u32, thread: Option<std::thread::Thread>) {
    if let Some(slot) = THREADS.lock().get_mut(bit as usize) {
        *slot = thread;
    }
}

/// Wakes the wall sampler of session slot `bit`, if it has one, after the session measures
/// again (resume, restart): a paused sampler's thread sleeps until then, taking no tick and
/// reading no process.
pub(crate) fn resumed(bit: u32) {
    if let Some(Some(thread)) = THREADS.lock().get(bit as usize) {
        thread.unpark();
    }
}

/// One tick: up to `per_tick` slots drawn at random (every slot, each once, when there are no
/// more than that). Returns how many slots it read and how many samples it built.
fn tick(
    node: &NodeInner,
    store: &Store,
    per_tick: usize,
    rng: &mut Rng,
    paths: &mut Paths,
) -> (u64, u64) {
    let slots = node.table.high_water();
    // A paused session samples nothing (its bit leaves the measuring mask while paused).
    if slots == 0 || per_tick == 0 || crate::trace::measuring() & (1 << store.bit) == 0 {
        return (0, 0);
    }
    let time = now_ns().saturating_sub(*store.started_ns.lock());
    // A full buffer keeps nothing more: the tick only counts what it would have kept (the
    // processes the session samples, by their weight), without building their samples.
    let full = store.is_full();
    let mut dropped = 0.0;
    let mut built = 0;
    let mut read = |i: u32, weight: f64| {
        if sample_slot(
            node,
            store,
            i,
            (!full).then_some((weight, time, &mut *paths)),
        ) {
            if full {
                dropped += weight;
            } else {
                built += 1;
            }
        }
    };
    let count = if slots as usize <= per_tick {
        for i in 0..slots {
            read(i, 1.0);
        }
        u64::from(slots)
    } else {
        let weight = f64::from(slots) / per_tick as f64;
        for _ in 0..per_tick {
            read((rng.next() % u64::from(slots)) as u32, weight);
        }
        per_tick as u64
    };
    if dropped > 0.0 {
        store.drop_full(dropped);
    }
    (count, built)
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
                crate::trace::paths::path_of(id)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|id| all.get(*id as usize))
                    .filter(|cs| cs.sessions() & (1 << bit) != 0)
                    .collect()
            })
            .clone()
    }
}

/// Whether slot `index` of `node`'s table holds a process `store`'s session samples; if so,
/// with `build` (its weight, the time, the paths), its sample is made and kept.
fn sample_slot(
    node: &NodeInner,
    store: &Store,
    index: u32,
    build: Option<(f64, u64, &mut Paths)>,
) -> bool {
    let Some(read) = node.table.at_index(index) else {
        return false;
    };
    let Some(p) = read.as_deref() else {
        return false;
    };
    if p.trace_flags.traced() & (1 << store.bit) == 0 {
        return false;
    }
    if let Some((weight, time, paths)) = build {
        store.keep(sample_of(p, store.bit, weight, time, paths, false));
    }
    true
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
                out.push(sample_of(p, bit, 1.0, time, &mut paths, true));
            }
        }
        out
    })
}

/// A wall sample of `p`; in a `census`, a process with no suspended path known (running, or
/// waiting after a poll no wall session measured) is given the traced function a session
/// measuring its poll recorded, if one did (see [`census_function`]).
fn sample_of(
    p: &Process,
    bit: u32,
    weight: f64,
    time: u64,
    paths: &mut Paths,
    census: bool,
) -> Sample {
    let (status, queue, waiting) = p.status_queue_and_wait();
    let account = p.trace_account_if_any();
    // Running in, or suspended after, a poll no wall session measured: where it runs or
    // waits is not known to the session (the path its account holds is an older poll's).
    let mut before_sampling = p.polled_before_sampling();
    let mut path: Vec<&'static Callsite> = match (status, account) {
        (ProcessStatus::Waiting | ProcessStatus::Runnable, Some(account)) if !before_sampling => {
            paths.frames(account.suspended_path(), bit)
        }
        _ => Vec::new(),
    };
    if census && path.is_empty() {
        (path, before_sampling) = census_function(p, bit, before_sampling);
    }
    let state = ProcessState::of(status, waiting, path.last().copied());
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
        before_sampling,
    }
}

/// What a census knows of `p`, which has no suspended path a wall session recorded (running,
/// or waiting after a poll no wall session measured; `before` says the latter): the traced
/// function the traced stack recorded in its poll, when a session of any kind measured that
/// poll (a path of that innermost frame alone, if session `bit` traces it), and whether what
/// it runs or waits in is unknown. A wall tick does not read it: its samples of running
/// processes stay without traced frames, as the wall report says.
fn census_function(p: &Process, bit: u32, before: bool) -> (Vec<&'static Callsite>, bool) {
    match p.current() {
        Current::Function(id) => {
            let path = callsites()
                .get(id as usize)
                .filter(|cs| cs.sessions() & (1 << bit) != 0)
                .map(|cs| vec![cs])
                .unwrap_or_default();
            (path, false)
        }
        Current::Unknown => (Vec::new(), true),
        Current::None => (Vec::new(), before),
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::Node;
    use crate::sample::{SampleOptions, SampleSession, Sampler};
    use crate::trace::ProcessSpec;

    /// Waits (within a generous bound) until `done` holds.
    fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "{what} within 60 s");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A wall session on `node` (500 Hz, 1,000 slots a tick, a buffer of `n`) sampling the
    /// processes spawned from now.
    fn open(node: &Node, n: usize) -> SampleSession {
        let session = node
            .sample_session(
                SampleOptions::new()
                    .sampler(Sampler::Wall)
                    .hz(500)
                    .per_tick(1000)
                    .n(n),
            )
            .expect("wall session");
        session
            .trace()
            .enable_trace(ProcessSpec::New, true)
            .expect("flags");
        session
    }

    /// Spawns `count` processes on `node` that wait in `receive` for ever.
    fn spawn_waiting(node: &Node, count: usize) {
        for _ in 0..count {
            node.spawn(async {
                crate::receive::<()>().await;
            })
            .expect("spawn");
        }
    }

    /// Waits until `session`'s sampler has taken `n` more ticks.
    fn ticks(session: &SampleSession, n: u64) {
        let from = session.wall_counts().ticks;
        until("ticks", || session.wall_counts().ticks >= from + n);
    }

    /// A paused wall session's thread does nothing at all — no tick, no process read — while
    /// another session's ticks on (so its own would have come many times), and samples again
    /// once resumed. Asserted on counts, not on time.
    #[test]
    fn a_paused_wall_sampler_does_no_work_and_samples_again_once_resumed() {
        let node = Node::builder().worker_threads(1).build().expect("node");
        let (paused, running) = (open(&node, 1 << 20), open(&node, 1 << 20));
        spawn_waiting(&node, 20);
        until("both sessions sample the processes", || {
            paused.samples().samples.len() >= 20 && running.samples().samples.len() >= 20
        });

        let parks = paused.wall_counts().parks;
        assert!(paused.trace().pause());
        // A tick under way when the pause came may end after it: count once the thread has
        // gone to sleep.
        until("the paused sampler sleeps", || {
            paused.wall_counts().parks > parks
        });
        let before = paused.wall_counts();
        let samples = paused.samples().samples.len();
        ticks(&running, 10);
        let after = paused.wall_counts();
        assert_eq!(
            (after.ticks, after.slots),
            (before.ticks, before.slots),
            "no tick, no slot read"
        );
        assert_eq!(paused.samples().samples.len(), samples);

        assert!(paused.trace().resume());
        until("the resumed session samples again", || {
            let now = paused.wall_counts();
            now.ticks > before.ticks
                && now.slots >= before.slots + 20
                && paused.samples().samples.len() >= samples + 20
        });
    }

    /// A full buffer makes a tick count what it would have kept, by weight, without building
    /// a sample: the samples built stop growing while the ticks and the dropped weight go on.
    #[test]
    fn a_full_buffer_builds_no_more_samples_and_counts_what_it_drops() {
        let node = Node::builder().worker_threads(1).build().expect("node");
        let session = open(&node, 10);
        spawn_waiting(&node, 20);
        until("the buffer fills", || session.samples().samples.len() == 10);
        // A tick that began before the buffer was full may still build its samples.
        ticks(&session, 2);
        let (built, dropped) = (session.wall_counts().built, session.samples().dropped);
        // The count goes up as a tick begins: once it has gone up 11 times, 10 ticks have
        // ended (waiting for 10 read the drops before the tenth tick's came, under
        // AddressSanitizer: "180 dropped in 10 ticks").
        ticks(&session, 11);
        let now = session.wall_counts();
        assert_eq!(now.built, built, "no sample built once full: {now:?}");
        let more = session.samples().dropped - dropped;
        // Each of the ten ticks (at least) counts the 20 processes (weight 1 each).
        assert!(
            more >= 200.0 && more % 20.0 == 0.0,
            "{more} dropped in 10 ticks"
        );
        assert_eq!(session.samples().samples.len(), 10);
    }
}
