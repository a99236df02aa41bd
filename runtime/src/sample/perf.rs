//! The CPU sampler's first mechanism: a perf event per thread on the thread's task clock.
//!
//! A `PERF_TYPE_SOFTWARE` / `PERF_COUNT_SW_TASK_CLOCK` event counts the nanoseconds its thread
//! spends on a CPU and overflows every `sample_period` of them. It is driven by a
//! high-resolution timer that runs while the thread runs, so a thread is sampled wherever its
//! CPU time falls, however short its turns on the CPU: unlike a POSIX CPU-time timer
//! (`timer_create` on the thread's CPU clock, the fallback in [`super::cpu`]), which the kernel
//! checks only at its scheduler tick, and only for the thread the tick interrupts, so a thread
//! that sleeps, yields or makes system calls between two ticks is never sampled however much
//! CPU it burns, and none gets more than `HZ` distinct samples per CPU-second. This is the
//! mechanism of async-profiler and dial9; per-thread timers are their fallback too.
//!
//! Each event delivers its overflow as SIGPROF to its own thread: the descriptor is made
//! asynchronous (`O_ASYNC`), its signal SIGPROF (`F_SETSIG`) and its owner the thread
//! (`F_SETOWN_EX`, `F_OWNER_TID`). It is armed for one overflow at a time
//! (`PERF_EVENT_IOC_REFRESH` with 1: the kernel disables it as it overflows), and the handler
//! re-arms it ([`rearm_in_signal`]) with a period drawn anew around the mean (uniformly within
//! half a period either side), so that a workload that repeats at the sampler's rate cannot
//! hide from it. A sample stands for the CPU time the thread's own CPU clock counted since its
//! previous one (or since the event was armed), so no CPU time is lost or counted twice
//! whatever the periods drawn: not the event's count, which stops from the overflow until the
//! handler re-arms the event, and so misses the signal's delivery and the handler's own time
//! (4 % of a spinning thread's CPU at 10 kHz). The drain clips a sample's CPU time to what its
//! session counts of the thread's ([`super::store`]: none from before the session began).
//!
//! An overflow whose signal never re-arms the event (lost) would leave its thread unsampled
//! for good: the drain's guard ([`super::cpu::guard`]) sees the thread's CPU clock run on
//! while the disabled event counts nothing, re-arms it, and the profile counts the loss and
//! the CPU time no sample saw ([`super::CpuCoverage`]'s `stalls`, and a warning).
//!
//! The events sample kernel mode too where the kernel allows it (`perf_event_paranoid` 1 or
//! less, or `CAP_PERFMON`): an overflow while the thread runs a system call is then a sample
//! of its own, taken as the call returns to user space (its stack is the call's caller). At
//! `perf_event_paranoid` 2, the usual default, a program may sample its own threads in user
//! mode only (`exclude_kernel`): an overflow in kernel mode is then no sample, and the CPU
//! time it stood for goes to the thread's next sample (nothing is lost, but code that spends
//! its time in system calls, such as message passing's futex wakes, gets fewer distinct
//! samples than the rate asked). [`probe`] tries kernel mode first and says which it got;
//! a profile says it too ([`super::CpuCoverage::kernel`]). Where
//! `perf_event_open` is refused (a seccomp filter, Docker's default among them; a paranoid
//! level of 3 or more; a kernel without perf events), [`probe`] says why, and the sampler falls
//! back to per-thread timers and says so.
//!
//! The events' cost is the kernel's: a task-clock event's timer is stopped and restarted at
//! each context switch of its thread and fires once per period, so a thread that switches
//! often pays per switch, the more so at high rates and where programming a timer traps to a
//! hypervisor (see [`SampleOptions::hz`](super::SampleOptions::hz) for what was measured).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use perf_event_open_sys as sys;

/// Whether [`open`] counts and samples kernel mode too (`exclude_kernel` 0), as [`probe`]
/// found the kernel allows.
static KERNEL: AtomicBool = AtomicBool::new(false);

/// `F_SETSIG` (`fcntl.h`): the signal a descriptor with `O_ASYNC` sends.
const F_SETSIG: libc::c_int = 10;
/// `F_SETOWN_EX` (`fcntl.h`): who receives that signal, as a [`FOwnerEx`].
const F_SETOWN_EX: libc::c_int = 15;
/// `F_OWNER_TID` (`fcntl.h`): one thread.
const F_OWNER_TID: libc::c_int = 0;

/// `struct f_owner_ex` (`fcntl.h`).
#[repr(C)]
struct FOwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}

/// Why `perf_event_open` cannot drive the CPU sampler here: what a profile says of its
/// fallback.
pub(crate) fn refusal_text(error: &io::Error) -> String {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .map(|s| s.trim().to_owned());
    match error.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => match paranoid {
            Some(level) => format!(
                "perf_event_open was refused ({error}): kernel.perf_event_paranoid is {level} \
                 (2 or less lets a program sample its own threads), or a seccomp filter \
                 (Docker's default profile) refuses it"
            ),
            None => format!(
                "perf_event_open was refused ({error}): a seccomp filter (Docker's default \
                 profile) or the kernel's perf_event_paranoid setting refuses it"
            ),
        },
        Some(libc::ENOSYS) => format!(
            "perf_event_open is not available ({error}): the kernel has no perf events, or a \
             seccomp filter (Docker's default profile) hides the call"
        ),
        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::EINVAL) => {
            format!("perf_event_open has no task-clock event here ({error})")
        }
        Some(libc::EMFILE | libc::ENFILE) => {
            format!("perf_event_open found no free file descriptor ({error})")
        }
        _ => format!("perf_event_open failed ({error})"),
    }
}

/// Whether the events [`open`] opens sample kernel mode too, as the last [`probe`] found.
pub(crate) fn kernel_sampled() -> bool {
    KERNEL.load(Ordering::Relaxed)
}

/// Opens a disabled task-clock event on thread `tid` of this process that overflows every
/// `period_ns` nanoseconds of its CPU time and then sends SIGPROF to that thread; in kernel
/// mode too when the last [`probe`] found it allowed. Enable it with [`enable`]. Not for a
/// signal handler (it is a few system calls, but the caller holds the registry's lock anyway).
pub(crate) fn open(tid: i32, period_ns: u64) -> io::Result<i32> {
    open_with(tid, period_ns, KERNEL.load(Ordering::Relaxed))
}

/// [`open`], sampling kernel mode too or not (`kernel`).
fn open_with(tid: i32, period_ns: u64, kernel: bool) -> io::Result<i32> {
    let mut attr = sys::bindings::perf_event_attr {
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        type_: sys::bindings::PERF_TYPE_SOFTWARE,
        config: u64::from(sys::bindings::PERF_COUNT_SW_TASK_CLOCK),
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = period_ns.max(1);
    attr.set_disabled(1);
    attr.set_exclude_kernel(u64::from(!kernel));
    attr.set_exclude_hv(1);
    // SAFETY: `attr` is a zero-filled `perf_event_attr` (its `Default`) with its size set, as
    // the call requires; the kernel reads it (and may write its size back on E2BIG). The
    // returned descriptor, if any, is checked before use.
    #[allow(unsafe_code)]
    let fd = unsafe {
        sys::perf_event_open(
            &mut attr,
            tid,
            -1,
            -1,
            u64::from(sys::bindings::PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let owner = FOwnerEx {
        kind: F_OWNER_TID,
        pid: tid,
    };
    // SAFETY: `fd` is the descriptor just opened, owned here; `fcntl` with F_GETFL, F_SETFL,
    // F_SETSIG take and return integers, and F_SETOWN_EX reads the `f_owner_ex` it is given,
    // which lives on this stack for the call. On failure the descriptor is closed once.
    #[allow(unsafe_code)]
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0
            || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_ASYNC) != 0
            || libc::fcntl(fd, F_SETSIG, libc::SIGPROF) != 0
            || libc::fcntl(fd, F_SETOWN_EX, &raw const owner) != 0
        {
            let error = io::Error::last_os_error();
            libc::close(fd);
            return Err(error);
        }
    }
    Ok(fd)
}

/// Starts `fd` (from [`open`]) counting from zero, armed for its first overflow.
pub(crate) fn enable(fd: i32) -> io::Result<()> {
    // SAFETY: `fd` is a perf event descriptor of [`open`]'s; RESET and REFRESH take an integer.
    #[allow(unsafe_code)]
    let done = unsafe { sys::ioctls::RESET(fd, 0) == 0 && sys::ioctls::REFRESH(fd, 1) == 0 };
    if done {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Closes `fd`: no overflow of it is signalled after this returns (a signal already queued
/// may still arrive; the handler ignores one whose descriptor is not its thread's current one).
pub(crate) fn close(fd: i32) {
    // SAFETY: `fd` is a descriptor of [`open`]'s, closed once by its owner (the registry entry
    // takes it out before closing it).
    #[allow(unsafe_code)]
    unsafe {
        libc::close(fd);
    }
}

/// The CPU time `fd` has counted since [`enable`], in nanoseconds; `None` if it cannot be read.
/// A task-clock event counts all its thread's time on a CPU, user and kernel mode alike
/// (`exclude_kernel` only keeps its overflows in kernel mode from being samples), and counts
/// nothing while it is disabled: what the drain's lost-overflow guard reads.
pub(crate) fn count(fd: i32) -> Option<u64> {
    let mut value: u64 = 0;
    // SAFETY: `read` writes at most 8 bytes into `value`, a `u64` on this stack; a perf event
    // descriptor read without a read format gives exactly its 8-byte count.
    #[allow(unsafe_code)]
    let n = unsafe { libc::read(fd, (&raw mut value).cast(), 8) };
    (n == 8).then_some(value)
}

/// In the SIGPROF handler, after an overflow of `fd`: sets its next period to `next_ns` and
/// arms it for one more overflow. Async-signal-safe: two `ioctl(2)` system calls (a thin
/// wrapper around the system call in every libc: no lock, no allocation), nothing else.
#[inline]
pub(crate) fn rearm_in_signal(fd: i32, next_ns: u64) {
    let mut period = next_ns.max(1);
    // SAFETY: `fd` is this thread's perf event descriptor (the handler checked it is its
    // thread's current one); PERF_EVENT_IOC_PERIOD reads the `u64` it is pointed at, which
    // lives on this stack for the call (`perf-event-open-sys` passes it by value, which the
    // kernel would take for an address: the raw ioctl is called instead), and REFRESH takes an
    // integer.
    #[allow(unsafe_code)]
    unsafe {
        libc::ioctl(fd, sys::bindings::PERIOD as _, &raw mut period);
        sys::ioctls::REFRESH(fd, 1);
    }
}

/// Arms `fd` for one more overflow, from the drain (not a handler): after an overflow whose
/// signal never re-armed it. An event armed already is armed for one overflow more, which
/// only keeps it enabled a little longer (the handler arms it one at a time from there).
pub(crate) fn rearm_lost(fd: i32) -> io::Result<()> {
    // SAFETY: `fd` is a perf event descriptor of [`open`]'s, open while the caller holds the
    // registry's lock; REFRESH takes an integer.
    #[allow(unsafe_code)]
    let done = unsafe { sys::ioctls::REFRESH(fd, 1) == 0 };
    if done {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether this thread can open a task-clock event on itself: the sampler's choice between
/// perf events and its fallback, made when a CPU session opens. Tries kernel mode first
/// (refused at `perf_event_paranoid` 2 or more without `CAP_PERFMON`), then user mode only;
/// [`open`] opens what it found, and the answer says whether that samples kernel mode. The
/// error says why neither.
pub(crate) fn probe() -> io::Result<bool> {
    // SAFETY: `gettid` has no preconditions.
    #[allow(unsafe_code)]
    let tid = unsafe { libc::gettid() };
    let kernel = match open_with(tid, 1_000_000_000, true) {
        Ok(fd) => {
            close(fd);
            true
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            close(open_with(tid, 1_000_000_000, false)?);
            false
        }
        Err(e) => return Err(e),
    };
    KERNEL.store(kernel, Ordering::Relaxed);
    Ok(kernel)
}

/// Armings of perf events so far in this program: part of each one's [`period_seed`].
static ARMINGS: AtomicU64 = AtomicU64::new(0);

/// A seed for the periods of an event armed now on thread `tid`, whose CPU clock reads
/// `cpu_ns`: different at every arming (a count of them, the clock and the thread's id,
/// mixed by splitmix64's finalizer), never 0. Seeded by the thread's id alone, every session
/// on a thread drew the same periods from the same first one, so that a deterministic workload
/// profiled again and again (a benchmark's runs, a test's, profiles merged) was sampled at the
/// same points of its CPU time each time: the runs of `benches/sampling.rs`'s mixes agreed with
/// each other far better than with the truth (a set's A:B 2.79 against 2.97, eight runs of ten
/// under it, while the next set's was 3.24 against 3.01).
pub(crate) fn period_seed(tid: i32, cpu_ns: u64) -> u64 {
    let arming = ARMINGS.fetch_add(1, Ordering::Relaxed);
    let mut x = cpu_ns
        ^ u64::from(tid.unsigned_abs()).rotate_left(32)
        ^ arming.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    x.max(1)
}

/// The next period around `mean_ns`: uniform in `[mean / 2, 3 * mean / 2)`, from the
/// xorshift state `rng` (advanced; never 0). Pure arithmetic: async-signal-safe.
#[inline]
pub(crate) fn next_period(mean_ns: u64, rng: &mut u64) -> u64 {
    let mut x = *rng;
    if x == 0 {
        x = 0x9e37_79b9_7f4a_7c15;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    let mean = mean_ns.max(2);
    mean / 2 + x % mean
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Periods drawn around a mean stay within half of it either side and average to it.
    #[test]
    fn periods_are_uniform_around_the_mean() {
        let mut rng = 1;
        let n = 100_000u64;
        let mean = 1_000_000;
        let mut sum = 0u64;
        for _ in 0..n {
            let p = next_period(mean, &mut rng);
            assert!((mean / 2..mean * 3 / 2).contains(&p), "{p}");
            sum += p;
        }
        let avg = sum as f64 / n as f64;
        assert!((avg / mean as f64 - 1.0).abs() < 0.01, "{avg}");
    }

    /// Two armings of one thread, even with its CPU clock reading the same, draw different
    /// periods from the first on: a session does not sample a thread at the points of its CPU
    /// time the last one did.
    #[test]
    fn every_arming_draws_its_own_periods() {
        let mean = 10_000_000;
        let periods = |seed: u64| {
            let mut rng = seed;
            (0..8)
                .map(|_| next_period(mean, &mut rng))
                .collect::<Vec<_>>()
        };
        let seeds: Vec<u64> = (0..100).map(|_| period_seed(4242, 1_000_000)).collect();
        assert!(seeds.iter().all(|s| *s != 0));
        let distinct: std::collections::HashSet<u64> = seeds.iter().copied().collect();
        assert_eq!(distinct.len(), seeds.len());
        let (a, b) = (periods(seeds[0]), periods(seeds[1]));
        assert_ne!(a[0], b[0], "{a:?} {b:?}");
        assert!(
            a.iter().zip(&b).filter(|(x, y)| x == y).count() <= 1,
            "{a:?} {b:?}"
        );
        // The first periods of many armings spread over the whole range, as the later ones do.
        let firsts: Vec<u64> = seeds.iter().map(|s| periods(*s)[0]).collect();
        let low = firsts.iter().filter(|p| **p < mean).count();
        assert!((25..=75).contains(&low), "{low} of 100 under the mean");
    }

    /// Where perf events are allowed, an event on this thread counts its CPU time, close to
    /// what the thread's CPU clock says; where they are not, the refusal says why in words.
    #[test]
    fn an_event_counts_this_threads_cpu_time_or_says_why_not() {
        match probe() {
            Err(e) => {
                let text = refusal_text(&e);
                assert!(text.starts_with("perf_event_open"), "{text}");
            }
            Ok(_) => {
                // SAFETY: `gettid` has no preconditions.
                #[allow(unsafe_code)]
                let tid = unsafe { libc::gettid() };
                let fd = open(tid, 1_000_000_000).expect("probe said yes");
                enable(fd).expect("enable");
                // Spins until the thread's own CPU clock says 20 ms went by, however long
                // that takes on a busy machine.
                let cpu = || {
                    let mut ts = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    };
                    // SAFETY: `clock_gettime` writes `ts`, a plain struct on the stack.
                    #[allow(unsafe_code)]
                    unsafe {
                        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts)
                    };
                    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
                };
                let start = cpu();
                let mut x = 0u64;
                while cpu() - start < 20_000_000 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
                }
                let counted = count(fd).expect("read");
                close(fd);
                // The event counts what the clock counts, but for the moments the kernel
                // switches the thread in and out.
                assert!(counted >= 15_000_000, "{counted} ns of 20 ms");
            }
        }
    }
}
