//! The clock call_time reads: quanta's TSC clock, calibrated once by the first session that
//! measures time, and the time-stamp counter itself, which a lean poll reads inline when the
//! clock's raw readings are that counter.
//!
//! Owns the clock and the test of its readings; uses nothing else of the stack.

use std::sync::OnceLock;

/// The TSC clock call_time reads, set up (calibrated) by the first session that measures time.
static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();

/// Whether the clock's raw readings are the CPU's time-stamp counter (quanta's usual clock on
/// x86_64), which a lean poll then reads inline ([`rdtsc`]).
pub(super) static RAW_IS_TSC: OnceLock<bool> = OnceLock::new();

/// Calibrates the clock, once; the first call takes a few milliseconds.
pub(crate) fn clock() -> &'static quanta::Clock {
    let clock = CLOCK.get_or_init(|| crate::heap::suppressed(quanta::Clock::new));
    RAW_IS_TSC.get_or_init(|| crate::heap::suppressed(|| raw_is_tsc(clock)));
    clock
}

/// Whether `clock`'s raw readings are the time-stamp counter: quanta says it counts with its
/// counter source, and in two of eight tries a TSC read falls between two of its raw readings
/// taken around it, at most a few milliseconds apart (a clock in nanoseconds lags the counter,
/// which counts cycles since boot, by the CPU's frequency in GHz).
fn raw_is_tsc(clock: &quanta::Clock) -> bool {
    if !cfg!(target_arch = "x86_64") || !format!("{clock:?}").contains("Counter(") {
        return false;
    }
    let within = (0..8)
        .filter(|_| {
            let before = clock.raw();
            let tsc = rdtsc();
            let after = clock.raw();
            before <= tsc && tsc <= after && after - before < 1 << 24
        })
        .count();
    within >= 2
}

/// The time-stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU and has no precondition: it reads the time-stamp
    // counter into registers and touches no memory (the intrinsic is `unsafe` as all of
    // `core::arch` is). Exercised by `tests::raw_readings_are_the_tsc_when_quanta_says_so`.
    #[allow(unsafe_code)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

/// No time-stamp counter read here: [`raw_is_tsc`] is false.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn rdtsc() -> u64 {
    0
}

/// Whether the clock's raw readings are the time-stamp counter (false until a session
/// measuring time has set the clock up).
pub(crate) fn clock_is_tsc() -> bool {
    RAW_IS_TSC.get() == Some(&true)
}

/// The clock, if a session measuring time ever set it up.
pub(crate) fn clock_if_set() -> Option<&'static quanta::Clock> {
    CLOCK.get()
}

#[inline(always)]
pub(super) fn ticks() -> u64 {
    CLOCK.get().map_or(0, quanta::Clock::raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_readings_are_the_tsc_when_quanta_says_so() {
        let clock = clock();
        let tsc = rdtsc();
        if cfg!(target_arch = "x86_64") {
            assert!(tsc > 0);
        }
        if RAW_IS_TSC.get() == Some(&true) {
            let before = clock.raw();
            let tsc = rdtsc();
            let after = clock.raw();
            assert!(before <= tsc && tsc <= after);
        }
    }
}
