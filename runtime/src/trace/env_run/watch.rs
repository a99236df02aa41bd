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

/// Writes a snapshot of every node every `every`, or less often when writing one takes more
/// than a tenth of that.
fn snapshots(every: Duration) {
    let mut wait = every;
    loop {
        std::thread::sleep(wait);
        let clock = Instant::now();
        write_all(Moment::Snapshot);
        wait = every.max(clock.elapsed().saturating_mul(9));
    }
}

/// Installs the handler of SIGINT and SIGTERM: it wakes a thread (signal-hook's self-pipe),
/// which writes every node's profile, then raises the signal again with its default action
/// (for [`Signals::Exit`]).
#[cfg(unix)]
fn handle_signals(mode: Signals) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::iterator::Signals as Incoming;

    let mut incoming = match Incoming::new([SIGINT, SIGTERM]) {
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
