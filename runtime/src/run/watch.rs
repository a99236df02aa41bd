//! The threads that write the profile of a program's nodes while they run: every few seconds
//! (a snapshot), and as SIGINT or SIGTERM arrives (see "A program that does not stop its
//! nodes" in [`super`]). They start with the first profiled node of the OS process, and serve
//! every node profiled after it.

use std::sync::{Arc, Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use super::{DEFAULT_SNAPSHOT_EVERY, ENV_SIGNALS, ENV_SNAPSHOT_EVERY, Moment, Profiled, Signals};

/// The nodes being profiled now.
static PROFILED: Mutex<Vec<Arc<Profiled>>> = Mutex::new(Vec::new());

/// Adds a node to those the threads write, starting them with the first one.
pub(super) fn add(profiled: &Arc<Profiled>) {
    static START: Once = Once::new();
    START.call_once(start);
    PROFILED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Arc::clone(profiled));
}

/// Removes a node that stopped.
pub(super) fn remove(profiled: &Arc<Profiled>) {
    PROFILED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|p| !Arc::ptr_eq(p, profiled));
}

/// Writes the run file of every node being profiled, as of `moment`.
fn write_all(moment: Moment) {
    let profiled = PROFILED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for p in profiled {
        p.write(moment);
    }
}

/// Reads [`ENV_SNAPSHOT_EVERY`] and [`ENV_SIGNALS`] and starts the threads they ask for.
fn start() {
    let every = match std::env::var(ENV_SNAPSHOT_EVERY) {
        Err(_) => Some(DEFAULT_SNAPSHOT_EVERY),
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(0.0) => None,
            Ok(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s.min(1e9))),
            _ => {
                eprintln!(
                    "tprof: {ENV_SNAPSHOT_EVERY}={v} is not a number of seconds; snapshots \
                     are taken every {} s",
                    DEFAULT_SNAPSHOT_EVERY.as_secs_f64()
                );
                Some(DEFAULT_SNAPSHOT_EVERY)
            }
        },
    };
    let signals = match std::env::var(ENV_SIGNALS) {
        Err(_) => Signals::default(),
        Ok(v) => v.parse().unwrap_or_else(|e| {
            eprintln!("tprof: {ENV_SIGNALS}: {e}; using exit");
            Signals::default()
        }),
    };
    if let Some(every) = every {
        let started = std::thread::Builder::new()
            .name("tprof-snapshots".into())
            .spawn(move || snapshots(every));
        if let Err(e) = started {
            eprintln!("tprof: cannot start the snapshot thread: {e}; no snapshots are taken");
        }
    }
    if signals != Signals::Off {
        handle_signals(signals);
    }
}

/// Writes a snapshot of every node so that the newest is at most `every` old ([`Cadence`]).
fn snapshots(every: Duration) {
    let mut cadence = Cadence::new(every);
    loop {
        std::thread::sleep(cadence.wait());
        let clock = Instant::now();
        write_all(Moment::Snapshot);
        cadence.wrote(clock.elapsed());
    }
}

/// When the next snapshot starts. A snapshot's age at a SIGKILL is the time since it was
/// written: the wait before the next one and that one's own writing. So the wait is `every`
/// less twice the longest of the last few writes (room for the next to take twice as long):
/// the newest snapshot stays at most `every` old while writing one takes at most half of it.
/// Past that the bound cannot hold, and the thread waits as long as it writes, so that
/// snapshots take at most half its time.
#[derive(Debug)]
struct Cadence {
    every: Duration,
    /// The times the last [`Cadence::KEPT`] snapshots took to write, the newest last.
    took: [Duration; Cadence::KEPT],
}

impl Cadence {
    /// How many writes the next wait looks back on.
    const KEPT: usize = 4;

    fn new(every: Duration) -> Cadence {
        Cadence {
            every,
            took: [Duration::ZERO; Cadence::KEPT],
        }
    }

    /// The wait before the next snapshot.
    fn wait(&self) -> Duration {
        let longest = self.took.iter().copied().max().unwrap_or_default();
        self.every
            .saturating_sub(longest.saturating_mul(2))
            .max(longest)
    }

    /// A snapshot was written, in `took`.
    fn wrote(&mut self, took: Duration) {
        self.took.rotate_left(1);
        self.took[Cadence::KEPT - 1] = took;
    }
}

/// Installs the handler of SIGINT and SIGTERM: it wakes a thread (signal-hook's self-pipe),
/// which writes every node's profile, then raises the signal again with its default action
/// (for [`Signals::Exit`]). For [`Signals::Keep`], a signal the program has no handler of
/// yet gets tprof's own instead ([`bare`](super::bare)), after which the program dies of it
/// unless it installed a handler of its own by then.
#[cfg(unix)]
fn handle_signals(mode: Signals) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::iterator::Signals as Incoming;

    let (bare, handled): (Vec<i32>, Vec<i32>) = [SIGINT, SIGTERM]
        .into_iter()
        .partition(|&s| mode == Signals::Keep && super::bare::is_default(s));
    if !bare.is_empty()
        && let Err(e) = super::bare::install(&bare, |name| write_all(Moment::Signal(name)))
    {
        eprintln!("tprof: cannot handle SIGINT and SIGTERM: {e}; a signal loses the profile");
    }
    if handled.is_empty() {
        return;
    }
    let mut incoming = match Incoming::new(&handled) {
        Ok(incoming) => incoming,
        Err(e) => {
            eprintln!("tprof: cannot handle SIGINT and SIGTERM: {e}; a signal loses the profile");
            return;
        }
    };
    let started = std::thread::Builder::new()
        .name("tprof-signals".into())
        .spawn(move || {
            for signal in incoming.forever() {
                let name = if signal == SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
                write_all(Moment::Signal(name));
                if mode == Signals::Exit {
                    // Dies of the signal, as the program would have without tprof.
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                    std::process::exit(128 + signal);
                }
            }
        });
    if let Err(e) = started {
        eprintln!("tprof: cannot start the signal thread: {e}; a signal loses the profile");
    }
}

/// No signals to handle off Unix.
#[cfg(not(unix))]
fn handle_signals(_: Signals) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The age of the newest snapshot just before each one is written, for snapshots that
    /// take `took` to write (the last written at time 0).
    fn ages(every: Duration, took: &[Duration]) -> Vec<Duration> {
        let mut cadence = Cadence::new(every);
        let mut written = Duration::ZERO;
        let mut now = Duration::ZERO;
        let mut ages = Vec::new();
        for &t in took {
            now += cadence.wait() + t;
            if written > Duration::ZERO {
                ages.push(now - written);
            }
            written = now;
            cadence.wrote(t);
        }
        ages
    }

    #[test]
    fn the_newest_snapshot_stays_within_the_bound_when_writing_one_takes_long() {
        let every = Duration::from_secs(2);
        // Sample mode's snapshots took 0.3 s: waiting nine times that made them 3 s apart.
        for took in [0.0, 0.01, 0.3, 0.6] {
            let took = vec![Duration::from_secs_f64(took); 50];
            let ages = ages(every, &took);
            let oldest = ages.iter().max().unwrap();
            assert!(*oldest <= every, "{took:?}: {oldest:?}");
        }
        // Writes that vary up to twice the last few keep it too.
        let varied: Vec<Duration> = (0..60)
            .map(|i| Duration::from_millis([200, 400, 300, 100][i % 4]))
            .collect();
        assert!(ages(every, &varied).iter().all(|a| *a <= every));
    }

    #[test]
    fn snapshots_that_cannot_keep_the_bound_take_at_most_half_the_thread() {
        let every = Duration::from_secs(2);
        let mut cadence = Cadence::new(every);
        for _ in 0..10 {
            cadence.wrote(Duration::from_secs(3));
        }
        assert_eq!(cadence.wait(), Duration::from_secs(3));
        assert_eq!(Cadence::new(every).wait(), every);
    }
}
