//! The CPU sampler: one clock per registered thread that counts that thread's CPU time and
//! signals SIGPROF to that thread, and the handler that records a sample there.
//!
//! Not pprof-rs's process-wide `setitimer`: the kernel coalesces a process-wide SIGPROF and
//! sends it to whichever thread, which undercounts busy multi-threaded programs (Go measured
//! 2.4 of 20 busy cores before moving to per-thread timers, golang/go#35057), and pprof-rs's
//! handler drops every sample that finds its one global lock taken. Here each thread's clock
//! counts that thread's CPU time only and signals that thread only, and the handler writes
//! into that thread's own ring.
//!
//! # Two mechanisms
//!
//! - **Perf events** ([`super::perf`], the first choice): a task-clock event per thread,
//!   driven by a high-resolution timer while the thread runs. Each sample stands for the CPU
//!   time the thread's clock counted since its previous sample, and the next period is drawn
//!   at random around the mean, so that no CPU time is lost or counted twice and periodic
//!   work cannot alias with the sampler.
//! - **Per-thread CPU timers**, the fallback where perf events are refused (a seccomp filter,
//!   Docker's default among them; `perf_event_paranoid` 3 or more; no kernel support), or when
//!   [`SampleOptions::cpu_source`](super::SampleOptions::cpu_source) asks for them:
//!   `timer_create` on the clock of `pthread_getcpuclockid`, `SIGEV_THREAD_ID`. The kernel
//!   checks these only at its scheduler tick (`run_posix_cpu_timers`, from the tick), and only
//!   for the thread the tick interrupts: at most `HZ` distinct samples per CPU-second (250 on
//!   a common kernel, whatever the rate asked), each weighted by `1 + timer_getoverrun` periods,
//!   and a thread whose time on the CPU begins and ends between two ticks (it sleeps, yields,
//!   makes system calls or shares the CPU) is never sampled, however much CPU it burns.
//!
//! The mechanism is chosen when the sampler starts (the first CPU session) and kept until it
//! stops; a profile says which one took its samples and why ([`super::CpuCoverage`]). A thread
//! that cannot get a perf event (no free descriptor) gets a timer alone, and is counted.
//!
//! # Which threads are timed
//!
//! Sessions are per node, the sampler per OS process: a thread gets a timer only while the
//! sampler wants it ([`wanted`]), so a program with two nodes, one profiled, pays no signal,
//! stack walk or ring write on the other node's threads. A thread is timed while a CPU session
//! runs
//!
//! - for its node: the node of the runtime it was started by (a node's workers and blocking
//!   threads, registered by the node's thread-start hook), or else the node of the first
//!   process it polled (a thread of a runtime the program owns, [`Node::start_on`]);
//! - for any node, while its node is unknown (0: registered before it polled any process), or
//!   once it is *shared*: it has polled processes of another node than its own (a runtime two
//!   nodes started on share its threads), or opened a session on another node (it may run
//!   that node's processes, `Node::run` on a current-thread node). Such a thread may poll a
//!   sampled node's process at any moment, so it is timed while any CPU session runs; the
//!   drain keeps, of its samples, those for each session's node, as for every thread.
//!
//! Every poll of a process checks, with relaxed loads of the thread's own slot, that its
//! thread is registered for the process's node or shared; the first poll of another node's
//! process takes the registry's lock once, to learn the node (0 -> N, disarmed if no session
//! is open for N) or to mark the thread shared (armed), before the process runs. Opening a
//! node's first session arms its threads; closing it disarms them while other nodes' sessions
//! go on; closing the last stops every timer. Each walks the registered threads once, under
//! the registry's lock, as registering and arming always did: never in a handler.
//!
//! [`Node::start_on`]: crate::Node::start_on
//!
//! # The handler
//!
//! Async-signal-safe, and provably so from what it calls: it saves and restores `errno`; reads
//! this thread's [`ThreadSlot`](super::threads::ThreadSlot), the current pid
//! ([`crate::process::pid_in_signal`]) and the traced stack ([`crate::trace::read_in_signal`]),
//! all `const` thread-locals without destructors holding atomics; calls `timer_getoverrun` and
//! `clock_gettime` (the time, and the thread's CPU clock), both on POSIX's list of
//! async-signal-safe functions, and `ioctl` twice (to re-arm a perf event: a thin wrapper
//! around the system call in every libc, which takes no lock and allocates nothing); walks
//! frame pointers
//! inside the thread's stack ([`super::native::walk`]); and writes one record into the ring
//! ([`super::ring::Ring::push`]: relaxed stores into memory allocated beforehand). It takes no
//! lock and allocates nothing (the test `the_handler_neither_locks_nor_allocates` checks that
//! a thread holding the allocator's and the registry's locks, which an allocating or locking
//! handler would deadlock on, is still sampled).

#![cfg(target_os = "linux")]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::SampleError;
use super::ring::Ring;
use super::ring::{MAX_NATIVE, NATIVE_TRUNCATED, Record};
use super::threads::{REGISTRY, Registry, THREAD, ThreadEntry, bounds_in_signal};
use super::truth::CpuSource;

/// The timers' period, in nanoseconds.
static PERIOD_NS: AtomicU64 = AtomicU64::new(0);
/// Whether native stacks are walked past the interrupted instruction ([`super::native::walkable`]).
static WALK: AtomicBool = AtomicBool::new(false);

/// Whether the CPU sampler runs.
#[inline(always)]
pub(crate) fn running() -> bool {
    super::threads::running(super::threads::CPU)
}

/// Installs the handler, unless it is installed already; refuses when another handler of
/// SIGPROF is installed (another profiler's, or the program's own). Checked at every start, so
/// a profiler that took SIGPROF between two sessions is seen.
fn install() -> Result<(), SampleError> {
    let ours = handler as *const () as usize;
    // SAFETY: `sigaction` with a null new action only reads the current one into `old`; the
    // second call installs `handler`, an `extern "C"` function of the signature SA_SIGINFO
    // requires, with an empty mask. Both structs are zeroed (a valid `sigaction`) before the
    // fields are set.
    #[allow(unsafe_code)]
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old) != 0 {
            return Err(SampleError::Os {
                what: "sigaction(SIGPROF)",
                error: std::io::Error::last_os_error(),
            });
        }
        if old.sa_sigaction == ours {
            return Ok(());
        }
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
            return Err(SampleError::SignalTaken);
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ours;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut()) != 0 {
            return Err(SampleError::Os {
                what: "sigaction(SIGPROF)",
                error: std::io::Error::last_os_error(),
            });
        }
    }
    Ok(())
}

/// Opens a CPU session for `node`: starts the sampler at `hz` on the mechanism `source` asks
/// for (choosing perf events or timers for `Auto`), or joins it when it already runs at that
/// rate (on a mechanism `source` accepts); then arms the threads the session wants that have
/// no clock yet (all those [`wanted`] when the sampler starts, `node`'s when it already ran
/// for another node). Linear in the registered threads, under the registry's lock.
pub(crate) fn start(hz: u32, node: u32, source: CpuSource) -> Result<(), SampleError> {
    let period = 1_000_000_000 / u64::from(hz.max(1));
    let mut guard = REGISTRY.lock();
    install()?;
    if running() {
        let running = PERIOD_NS.load(Ordering::Relaxed);
        if running != period {
            return Err(SampleError::RateTaken {
                running_hz: (1_000_000_000 / running.max(1)) as u32,
                asked_hz: hz,
                under_tprof_run: std::env::var_os(crate::trace::env_run::ENV_TYPE)
                    .is_some_and(|t| t == "sample"),
            });
        }
        if source != CpuSource::Auto && source != guard.cpu_source {
            return Err(SampleError::SourceTaken {
                running: guard.cpu_source,
                asked: source,
            });
        }
    } else {
        let (chosen, fallback) = choose(source)?;
        guard.cpu_source = chosen;
        guard.cpu_fallback = fallback;
        WALK.store(super::native::walkable(), Ordering::Relaxed);
        PERIOD_NS.store(period, Ordering::Relaxed);
        super::threads::set_running(super::threads::CPU, true);
    }
    match guard.cpu_nodes.iter_mut().find(|(n, _)| *n == node) {
        Some((_, open)) => *open += 1,
        None => guard.cpu_nodes.push((node, 1)),
    }
    refit(&mut guard);
    Ok(())
}

/// Closes a CPU session for `node` (one [`start`] for it): the last one of every node stops
/// every timer; the last one of `node` while other nodes' stay open disarms the threads
/// they no longer want (`node`'s own).
pub(crate) fn stop(node: u32) {
    let mut guard = REGISTRY.lock();
    let cpu_nodes = &mut guard.cpu_nodes;
    if let Some(at) = cpu_nodes.iter().position(|(n, _)| *n == node) {
        cpu_nodes[at].1 -= 1;
        if cpu_nodes[at].1 == 0 {
            cpu_nodes.swap_remove(at);
        }
    }
    let stopped = cpu_nodes.is_empty();
    if stopped {
        super::threads::set_running(super::threads::CPU, false);
        PERIOD_NS.store(0, Ordering::Relaxed);
    }
    refit(&mut guard);
    if stopped {
        guard.cpu_source = CpuSource::Auto;
        guard.cpu_fallback = None;
    }
}

/// The mechanism the sampler starts on for `source`, and why it is the fallback when it is:
/// perf events where the kernel lets this thread open one (`Auto`, `PerfEvents`), timers
/// otherwise. Asked for perf events that are refused: the error says why.
fn choose(source: CpuSource) -> Result<(CpuSource, Option<String>), SampleError> {
    match source {
        CpuSource::Timers => Ok((
            CpuSource::Timers,
            Some(
                "asked for (SampleOptions::cpu_source, `tprof run --cpu-source` or \
                 TPROF_RUN_CPU_SOURCE)"
                    .to_owned(),
            ),
        )),
        CpuSource::PerfEvents | CpuSource::Auto => match super::perf::probe() {
            Ok(_) => Ok((CpuSource::PerfEvents, None)),
            Err(error) => {
                let why = super::perf::refusal_text(&error);
                if source == CpuSource::PerfEvents {
                    Err(SampleError::PerfEvents { why })
                } else {
                    Ok((CpuSource::Timers, Some(why)))
                }
            }
        },
    }
}

/// Arms or disarms every registered thread as the open sessions want it ([`fit`]): one walk
/// of the occupied entries, under the registry's lock (held by the caller).
fn refit(reg: &mut Registry) {
    let Registry {
        threads,
        occupied,
        pool,
        cpu_nodes,
        cpu_source,
        ..
    } = reg;
    for &i in occupied.iter() {
        fit(&mut threads[i as usize], pool, cpu_nodes, *cpu_source);
    }
}

/// Whether the CPU sampler wants `entry`'s thread timed, given the nodes CPU sessions are
/// open for (`cpu_nodes`, empty when it does not run): when its node is unknown (0) or it
/// is shared, since it may poll a sampled node's processes, or when a session is open for
/// its node.
pub(crate) fn wanted(entry: &ThreadEntry, cpu_nodes: &[(u32, u32)]) -> bool {
    !cpu_nodes.is_empty()
        && (entry.node == 0 || entry.shared || cpu_nodes.iter().any(|(n, _)| *n == entry.node))
}

/// Arms `entry`'s thread if the CPU sampler wants it timed ([`wanted`]) and it has no clock,
/// or disarms it if it is not wanted; under the registry's lock. `source` is the mechanism
/// the sampler runs on.
pub(crate) fn fit(
    entry: &mut ThreadEntry,
    pool: &mut Vec<&'static Ring>,
    cpu_nodes: &[(u32, u32)],
    source: CpuSource,
) {
    if running() && wanted(entry, cpu_nodes) {
        arm(entry, pool, source);
    } else {
        disarm(entry);
    }
}

/// Gives `entry`'s thread a ring (from `pool`, or a new one) and arms its clock, under the
/// registry's lock: a perf event when the sampler runs on them (a timer alone if the thread
/// cannot get one, and it is counted), else a timer. A thread that has just exited makes
/// both fail, which is ignored: it has nothing left to sample.
pub(crate) fn arm(entry: &mut ThreadEntry, pool: &mut Vec<&'static Ring>, source: CpuSource) {
    if entry.timer.is_some() || entry.perf.is_some() || !entry.alive {
        return;
    }
    let period = PERIOD_NS.load(Ordering::Relaxed);
    if period == 0 {
        return;
    }
    let ring = match entry.ring {
        Some(ring) => ring,
        None => {
            let ring = pool
                .pop()
                .unwrap_or_else(|| crate::heap::suppressed(|| Box::leak(Box::new(Ring::new()))));
            ring.tid.store(entry.tid as u32, Ordering::Relaxed);
            entry.ring = Some(ring);
            entry.publish_ring(Some(ring));
            ring
        }
    };
    if source == CpuSource::PerfEvents {
        // The first period is drawn at random too, from a generator seeded afresh at every
        // arming: a session's samples fall at other points of a thread's CPU time than the
        // last session's did.
        let mut rng = super::perf::period_seed(entry.tid, entry.cpu_now());
        let first = super::perf::next_period(period, &mut rng);
        match super::perf::open(entry.tid, first) {
            Ok(fd) => {
                // The handler knows the descriptor, the thread's CPU clock its first sample
                // counts from and its generator of periods, before the event can overflow.
                let now = entry.cpu_now();
                entry.publish_perf(fd, now, rng);
                if super::perf::enable(fd).is_ok() {
                    entry.perf = Some(fd);
                    entry.guard = (0, now);
                    entry.unarmed = false;
                    return;
                }
                entry.publish_perf(-1, 0, 0);
                super::perf::close(fd);
                entry.fallback = true;
            }
            Err(_) => entry.fallback = true,
        }
    }
    entry.unarmed = !arm_timer(entry, ring, period);
}

/// Arms a CPU-time timer of `period` nanoseconds for `entry`'s thread (whose ring is `ring`);
/// whether it did.
fn arm_timer(entry: &mut ThreadEntry, ring: &'static Ring, period: u64) -> bool {
    // SAFETY: `sev` is zeroed (a valid `sigevent`) and then describes a signal to one thread;
    // `timer_create` writes `timer` on success, which is checked before it is used, and
    // `timer_settime` reads `spec`, a plain struct on the stack.
    #[allow(unsafe_code)]
    unsafe {
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = libc::SIGPROF;
        sev.sigev_notify_thread_id = entry.tid;
        let mut timer: libc::timer_t = std::ptr::null_mut();
        if libc::timer_create(entry.clock, &mut sev, &mut timer) != 0 {
            return false;
        }
        let ts = libc::timespec {
            tv_sec: (period / 1_000_000_000) as libc::time_t,
            tv_nsec: (period % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: ts,
            it_value: ts,
        };
        if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
            libc::timer_delete(timer);
            return false;
        }
        entry.timer = Some(timer);
        ring.set_timer(Some(timer as usize));
    }
    true
}

/// Closes `entry`'s perf event, or deletes its timer, if any (under the registry's lock).
/// The handler forgets the perf event's descriptor before it is closed, and ignores a signal
/// of a descriptor that is not its thread's current one.
///
/// After `timer_delete` returns, the kernel arms the timer no more; a signal of it already
/// queued may still be delivered (older kernels deliver it, newer ones drop it), which the
/// handler ignores: the ring has forgotten the timer first, so that a handler on the entry's
/// own thread (the thread's exit disarms it there) never reads an id already deleted: one
/// that interrupts before the ring forgets it runs to its end before the delete. A handler on
/// the entry's thread while another thread disarms it (the sampler's stop) may have read the
/// id just before: see the handler's `timer_getoverrun`.
pub(crate) fn disarm(entry: &mut ThreadEntry) {
    if let Some(fd) = entry.perf.take() {
        entry.publish_perf(-1, 0, 0);
        super::perf::close(fd);
    }
    if let Some(timer) = entry.timer.take() {
        if let Some(ring) = entry.ring {
            ring.set_timer(None);
        }
        // SAFETY: `timer` was made by `timer_create` and is deleted once (taken out above).
        #[allow(unsafe_code)]
        unsafe {
            libc::timer_delete(timer);
        }
    }
}

/// Periods of CPU time a thread may run with its perf event not counting before the drain
/// takes an overflow as lost ([`guard`]).
const STALL_PERIODS: u64 = 4;

/// The drain's guard against a lost overflow, for `entry` (under the registry's lock): a
/// perf event is armed for one overflow at a time and re-armed by the handler, so an overflow
/// whose signal never ran the handler (lost, or the handler failed to re-arm) would leave the
/// thread unsampled for good. A disabled event counts nothing, so an event whose count has not
/// moved while its thread's CPU clock ran [`STALL_PERIODS`] periods is taken as stalled: it is
/// re-armed, its thread's next sample counts from now, and the CPU time since its last sample,
/// which no sample can stand for, is returned (the gap the profile reports). `None` for a
/// thread without a perf event, or one that counts.
pub(crate) fn guard(entry: &mut ThreadEntry) -> Option<u64> {
    let fd = entry.perf?;
    if !entry.alive {
        return None;
    }
    let count = super::perf::count(fd)?;
    let now = entry.cpu_now();
    let (seen, since) = entry.guard;
    if count != seen {
        entry.guard = (count, now);
        return None;
    }
    let period = PERIOD_NS.load(Ordering::Relaxed).max(1);
    if now.saturating_sub(since) < STALL_PERIODS * period {
        return None;
    }
    let last = entry.perf_last();
    // The handler has not moved the last sample's clock since it was read (no sample came
    // after all): the next sample counts from now, and the event is armed again.
    if !entry.restart_perf_last(last, now) {
        return None;
    }
    entry.guard = (count, now);
    super::perf::rearm_lost(fd).ok()?;
    Some(now.saturating_sub(last))
}

/// The calling thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`) in nanoseconds, `None` if it
/// cannot be read. Async-signal-safe: `clock_gettime` is on POSIX's list.
#[inline]
fn thread_cpu_in_signal() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes `ts`, a plain struct on the stack.
    #[allow(unsafe_code)]
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC in nanoseconds (async-signal-safe).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes `ts`, a plain struct on the stack.
    #[allow(unsafe_code)]
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `POLL_IN` .. `POLL_HUP` (`siginfo.h`): the codes of a signal a descriptor with `O_ASYNC`
/// sends (`F_SETSIG`), which carries the descriptor in `si_fd`.
const POLL_CODES: std::ops::RangeInclusive<libc::c_int> = 1..=6;

/// The descriptor of a signal sent by a descriptor (`si_fd`, for the `POLL_*` codes).
///
/// # Safety
/// `info` is the kernel's `siginfo_t` of this delivery (SA_SIGINFO), for a signal whose
/// `si_code` is one of [`POLL_CODES`].
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn signalled_fd(info: *const libc::siginfo_t) -> libc::c_int {
    // Linux's `siginfo_t` on 64-bit targets: three `int`s and padding, then the union at
    // byte 16, whose SIGPOLL member is `{ long si_band; int si_fd; }`: `si_fd` at byte 24.
    const _: () = assert!(std::mem::size_of::<libc::c_long>() == 8);
    // SAFETY: `info` points at a whole `siginfo_t` (128 bytes) by the caller; byte 24 is
    // inside it and 4-aligned (the struct is 8-aligned).
    unsafe { info.cast::<u8>().add(24).cast::<libc::c_int>().read() }
}

/// The SIGPROF handler. See the module documentation for why each step is
/// async-signal-safe.
///
/// A signal from a perf event (its `si_code` a `POLL_*` code) is taken only from the
/// thread's current event: one sent by an event closed since (a new session's arming
/// replaced it) is ignored. The sample stands for the CPU time the thread's clock counted
/// since its last sample (or its arming); the event is re-armed for one more overflow, its
/// period drawn anew around the mean ([`super::perf::rearm_in_signal`], two `ioctl` system
/// calls). A signal from a timer stands for `1 + timer_getoverrun` periods.
extern "C" fn handler(_signal: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: `__errno_location` returns this thread's errno, valid for the thread's life.
    #[allow(unsafe_code)]
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: `info` is the kernel's `siginfo_t` for this delivery (SA_SIGINFO).
    #[allow(unsafe_code)]
    let code = unsafe { (*info).si_code };
    let from_event = POLL_CODES.contains(&code);
    THREAD.with(|t| {
        let ring = t.ring.load(Ordering::Acquire);
        // SAFETY: a non-null ring pointer was made from a `&'static Ring` (rings are leaked
        // and pooled, never freed) by this thread's registration.
        #[allow(unsafe_code)]
        let Some(ring) = (unsafe { ring.as_ref() }) else {
            return;
        };
        let period = PERIOD_NS.load(Ordering::Relaxed);
        // The sample's CPU time, and the thread's CPU clock as it was taken (which the drain
        // clips the first with: see `Record::cpu_at`).
        let (cpu_ns, cpu_at) = if from_event {
            // Acquire: pairs with `publish_perf`, so `perf_last` and `perf_rng` are as it left
            // them for this descriptor.
            let fd = t.perf_fd.load(Ordering::Acquire);
            // SAFETY: `code` is a `POLL_*` code, so `si_fd` is set.
            #[allow(unsafe_code)]
            let sent_by = unsafe { signalled_fd(info) };
            if fd < 0 || sent_by != fd {
                return;
            }
            // The thread's CPU clock, not the event's count: the event stops counting from
            // its overflow until the re-arming below (`PERF_EVENT_IOC_REFRESH` armed it for
            // one), so the CPU time of the signal's delivery and of this handler is in its
            // count of no sample; the clock counts it, for the next sample (a spinning
            // thread lost 4 % of its CPU so at 10 kHz, 2 % at 5 kHz).
            let Some(now) = thread_cpu_in_signal() else {
                return;
            };
            let last = t.perf_last.swap(now, Ordering::Relaxed);
            let mut rng = t.perf_rng.load(Ordering::Relaxed);
            let next = super::perf::next_period(period, &mut rng);
            t.perf_rng.store(rng, Ordering::Relaxed);
            // Tests: an overflow whose re-arming is skipped, as if its signal had been lost
            // (an atomic of this thread's slot: no lock, no allocation).
            #[cfg(test)]
            let skip = t
                .skip_rearms
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok();
            #[cfg(not(test))]
            let skip = false;
            if !skip {
                super::perf::rearm_in_signal(fd, next);
            }
            (now.saturating_sub(last), now)
        } else {
            let Some(timer) = ring.timer() else {
                // A timer's signal queued before it was deleted, or none of ours.
                return;
            };
            // SAFETY: `timer` is this thread's timer, made by `timer_create`; `disarm` may
            // delete it from another thread while this handler runs (after the handler read
            // the id above), and `timer_getoverrun` of a deleted timer fails with EINVAL (-1,
            // taken as 0), or reads another timer's overrun if the kernel reused the id: only
            // a weight is wrong, once. glibc's `timer_t` is the kernel's id since 2.34 (not a
            // pointer: older ones pointed it at a block `timer_delete` frees, which this call
            // would then read). `timer_getoverrun` is async-signal-safe.
            #[allow(unsafe_code)]
            let overrun = unsafe { libc::timer_getoverrun(timer as libc::timer_t).max(0) as u64 };
            ((1 + overrun) * period, thread_cpu_in_signal().unwrap_or(0))
        };
        let mut r = Record::new();
        r.weight = 1;
        r.cpu_ns = cpu_ns;
        r.cpu_at = cpu_at;
        r.time_ns = monotonic_ns();
        r.fill_current();
        // SAFETY: `ctx` is the kernel's `ucontext_t` for this delivery (SA_SIGINFO).
        #[allow(unsafe_code)]
        let (pc, fp, sp) = unsafe { super::native::registers(ctx) };
        if WALK.load(Ordering::Relaxed) {
            let (len, more) = super::native::walk(pc, fp, sp, bounds_in_signal(t), &mut r.native);
            r.native_len = len;
            if more {
                r.flags |= NATIVE_TRUNCATED;
            }
        } else if pc != 0 {
            r.native[0] = pc;
            r.native_len = 1;
        }
        debug_assert!(r.native_len <= MAX_NATIVE);
        ring.push(&r);
    });
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe {
        *libc::__errno_location() = errno;
    }
}
