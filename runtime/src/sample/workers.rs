//! The worker threads of a node's tokio runtime, registered when a CPU sample session opens:
//! a runtime the program built (a node started with [`Node::start_on`](crate::Node::start_on),
//! `profile_async` from `#[tokio::main]`) runs plain tokio tasks on workers that may never poll
//! a process, and a thread registers itself only as it polls one ([`super::on_poll`]). Their
//! CPU time, "outside processes", is then timed too.
//!
//! tokio offers no way to run code on a given worker of a runtime it did not start for us (its
//! thread-start hook is the builder's), so one registration task per worker is spawned, each
//! holding its worker (a short sleep loop, no lock) until every one of them has started or
//! [`HOLD`] has passed: a worker that holds one cannot take another, so they spread over the
//! workers that are free. A worker busy in a task that never yields is missed (and stays
//! untimed until it polls a process); the others wait [`HOLD`] for it at most.

#![cfg(target_os = "linux")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a registration task holds its worker, at most, waiting for the others.
const HOLD: Duration = Duration::from_millis(50);

/// Registers every worker thread of `runtime` for `node`: spawns the registration tasks and,
/// when the caller is not a thread of that runtime (it may block), waits for them, [`HOLD`]
/// and a little more at most.
pub(crate) fn register_workers(runtime: &tokio::runtime::Handle, node: u32) {
    if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread {
        // Its one thread is the one in its `block_on`, registered as it polls a process (or
        // by the session's opening, when that thread opens it).
        return;
    }
    let workers = runtime.metrics().num_workers();
    let on_it = tokio::runtime::Handle::try_current().is_ok_and(|h| h.id() == runtime.id())
        && tokio::runtime::worker_index().is_some();
    // The calling worker registered itself already, and runs none of the tasks until it
    // yields.
    let wanted = workers - usize::from(on_it);
    if wanted == 0 {
        return;
    }
    let started = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(wanted);
    for _ in 0..wanted {
        let started = Arc::clone(&started);
        tasks.push(runtime.spawn(async move {
            if tokio::runtime::worker_index().is_some() {
                super::threads::register_current(node);
            }
            started.fetch_add(1, Ordering::AcqRel);
            let deadline = Instant::now() + HOLD;
            while started.load(Ordering::Acquire) < wanted && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
        }));
    }
    if tokio::runtime::Handle::try_current().is_err() {
        let deadline = Instant::now() + 2 * HOLD;
        while tasks.iter().any(|t| !t.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}
