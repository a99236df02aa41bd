//! Allocation sampling's hook in the counting allocator: which allocations are sampled, and
//! what each sampled one stands for. What a sampled allocation records is not the allocator's
//! business: it calls the recorder that [`start`] installed (`runtime::sample`'s), a narrow
//! hook that keeps the heap out of the sampler's imports.
//!
//! Two models, never mixed (Go mixed them once and over-counted large allocations by 58 %,
//! golang/go#26618), chosen per [`start`]:
//! - [`AllocModel::Bytes`]: Poisson sampling by bytes, as Go and jemalloc do. Each byte is
//!   sampled with probability `1 / rate`, so an allocation of `size` bytes is sampled with
//!   probability `1 - exp(-size / rate)`, and stands for `size / (1 - exp(-size / rate))`
//!   bytes (its inverse probability: an unbiased estimate). A per-thread countdown of bytes,
//!   drawn from an exponential distribution of mean `rate`, makes the decision: an allocation
//!   that takes it below zero is sampled, and a fresh countdown is drawn.
//! - [`AllocModel::Probability`]: Julia's `sample_rate`, each allocation with probability
//!   `p` (1: every one), standing for `1 / p` allocations of its size. The countdown then
//!   counts allocations: it is drawn from the geometric distribution of the number of
//!   allocations skipped before the next sampled one.
//!
//! # Cost
//!
//! Off (no allocation sampling session open): one relaxed load of a flag and a branch per
//! allocation. On: that, one thread-local read, one subtraction (of the size, or of 1 for the
//! per-allocation model: a conditional move, not a branch) and a branch; the rest is out of
//! line. Frees cost nothing more, but those of the blocks sampled: the allocator marks a
//! sampled block's tag, a mark that sends its free out of line anyway (see `account`'s
//! `SAMPLED`), where [`on_free`] tells the sampler (the live set).
//!
//! # Never allocating, never locking
//!
//! The allocator is running when the hook runs: it may not allocate (that would re-enter it),
//! lock (the thread may hold any lock, the allocator's own included) or unwind. The hook reads
//! and writes one `const` thread-local without a destructor ([`STATE`]: three plain cells) and
//! a few atomics; draws with an xorshift generator in that thread-local and `f64::ln` / `exp`
//! (pure arithmetic); and calls the recorder, whose own proof is in `runtime::sample`'s alloc
//! module. `runtime::sample`'s test `the_alloc_sampler_neither_locks_nor_allocates` checks it.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::account::{Charge, current_charge};

/// How allocations are chosen for sampling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum AllocModel {
    /// Poisson sampling by bytes, mean one sample per this many bytes (at least 1).
    Bytes(u64),
    /// Each allocation with this probability, in `[0, 1]`.
    Probability(f64),
}

impl AllocModel {
    /// What a sampled allocation of `size` bytes stands for: (bytes, allocations).
    #[inline]
    pub(crate) fn weight(self, size: usize) -> (f64, f64) {
        let size = size as f64;
        match self {
            AllocModel::Bytes(rate) => {
                let p = -(-size / rate.max(1) as f64).exp_m1();
                if p > 0.0 {
                    (size / p, 1.0 / p)
                } else {
                    // A zero-sized request: never drawn in practice (the countdown only
                    // crosses zero on bytes), counted as one allocation of no bytes.
                    (0.0, 1.0)
                }
            }
            AllocModel::Probability(p) if p > 0.0 => (size / p, 1.0 / p),
            AllocModel::Probability(_) => (0.0, 0.0),
        }
    }
}

/// What the sampler records a sampled allocation with: the block, its size, and the bytes it
/// stands for (the allocations it stands for are those over its size). Never allocates, locks
/// or unwinds (see the module documentation).
pub(crate) type Recorder = fn(block: *mut u8, size: usize, bytes: f64);

/// Whether allocation sampling is on, and since which [`start`]: 0 while off, else the epoch
/// of the last start. The only thing an allocation reads while off; while on, a thread whose
/// countdown was drawn in another epoch (an earlier session's, with its own model) draws a
/// fresh one from the current model before counting, at its first allocation.
static ON: AtomicU32 = AtomicU32::new(0);
/// The last epoch given out: bumped at every [`start`] (never 0).
static EPOCH: AtomicU32 = AtomicU32::new(0);
/// The model: the rate in bytes (`KIND_BYTES`), or the probability's bits.
static MODEL: AtomicU64 = AtomicU64::new(0);
static MODEL_KIND: AtomicU32 = AtomicU32::new(KIND_BYTES);
const KIND_BYTES: u32 = 0;
const KIND_PROBABILITY: u32 = 1;
/// The recorder (one per program: `runtime::sample`'s). `get` is one atomic load.
static RECORDER: OnceLock<Recorder> = OnceLock::new();
/// Seeds the threads' generators differently.
static SEEDS: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);

/// A thread's countdown.
struct Countdown {
    /// Bytes (or allocations) left before the next sampled allocation; below zero: sample.
    left: Cell<i64>,
    /// What an allocation takes from `left` at most: `i64::MAX` (its size) by bytes, 1 per
    /// allocation.
    cap: Cell<u64>,
    /// The epoch `left` was drawn in (0: never).
    epoch: Cell<u32>,
    /// The generator's state (0: not seeded yet).
    rng: Cell<u64>,
}

thread_local! {
    /// `const`, plain cells, no destructor: readable from the allocator at any point of the
    /// thread's life, with no registration and nothing run at exit.
    static STATE: Countdown = const {
        Countdown {
            left: Cell::new(0),
            cap: Cell::new(i64::MAX as u64),
            epoch: Cell::new(0),
            rng: Cell::new(0),
        }
    };
}

/// What the sampler is told a sampled block's free with. Never allocates, locks or unwinds.
pub(crate) type Freer = fn(block: *mut u8);

/// The freer (one per program, as the recorder).
static FREER: OnceLock<Freer> = OnceLock::new();

/// Turns sampling on with `model`, calling `recorder` for each sampled allocation and `freer`
/// for the free of each block sampled. Every thread draws a fresh countdown from `model` at its
/// next allocation.
pub(crate) fn start(model: AllocModel, recorder: Recorder, freer: Freer) {
    let _ = FREER.set(freer);
    match model {
        AllocModel::Bytes(rate) => {
            MODEL.store(rate.max(1), Ordering::Relaxed);
            MODEL_KIND.store(KIND_BYTES, Ordering::Relaxed);
        }
        AllocModel::Probability(p) => {
            MODEL.store(p.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
            MODEL_KIND.store(KIND_PROBABILITY, Ordering::Relaxed);
        }
    }
    let _ = RECORDER.set(recorder);
    let mut epoch = EPOCH.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
    if epoch == 0 {
        // 4 billion starts later: 0 means off.
        epoch = EPOCH.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
    }
    // Release: a thread that sees the epoch sees the model stored above.
    ON.store(epoch, Ordering::Release);
}

/// Turns sampling off.
pub(crate) fn stop() {
    ON.store(0, Ordering::Release);
}

/// The model sampling runs with now.
pub(crate) fn model() -> AllocModel {
    let bits = MODEL.load(Ordering::Relaxed);
    if MODEL_KIND.load(Ordering::Relaxed) == KIND_PROBABILITY {
        AllocModel::Probability(f64::from_bits(bits))
    } else {
        AllocModel::Bytes(bits.max(1))
    }
}

/// The allocator's hook, after a block of `size` bytes was handed out at `block`: one load and
/// a branch while sampling is off; while it is on, one subtraction, and one comparison of the
/// thread's epoch with the session's, and a branch. Whether
/// the allocation was sampled (recorded): the allocator then marks the block, so that its free
/// is seen ([`on_free`]).
#[inline(always)]
pub(super) fn on_alloc(block: *mut u8, size: usize) -> bool {
    let on = ON.load(Ordering::Relaxed);
    on != 0 && count(block, size, on)
}

/// Counts an allocation against the thread's countdown while sampling is on in epoch `on`.
#[inline(always)]
fn count(block: *mut u8, size: usize, on: u32) -> bool {
    // `try_with`: a thread-local of this kind is never destroyed, but a failure would only
    // mean this allocation is not counted.
    STATE
        .try_with(|s| {
            let take = (size as u64).min(s.cap.get()) as i64;
            let left = s.left.get().wrapping_sub(take);
            s.left.set(left);
            // A countdown of an earlier epoch counts for nothing now, whatever is left of it.
            (left < 0 || s.epoch.get() != on) && crossed(s, block, size)
        })
        .unwrap_or(false)
}

/// The allocator's hook for the free (or move, by `realloc`) of a block it marked sampled: tells
/// the sampler, which takes it out of the live set. Nothing while sampling is off.
#[cold]
#[inline(never)]
pub(super) fn on_free(block: *mut u8) {
    if ON.load(Ordering::Relaxed) != 0
        && let Some(freer) = FREER.get()
    {
        freer(block);
    }
}

/// The countdown went below zero (or was drawn in another epoch): draws afresh, and records
/// the allocation if it is sampled; whether it did.
#[cold]
#[inline(never)]
fn crossed(s: &Countdown, block: *mut u8, size: usize) -> bool {
    // Acquire: the model of this epoch, stored before it.
    let epoch = ON.load(Ordering::Acquire);
    if epoch == 0 {
        // Stopped since the caller looked.
        return false;
    }
    let model = model();
    if s.epoch.get() != epoch {
        // A countdown from before this epoch (or none): draw one and count this allocation
        // against it, as if the thread had counted from the start.
        s.epoch.set(epoch);
        s.cap.set(match model {
            AllocModel::Bytes(_) => i64::MAX as u64,
            AllocModel::Probability(_) => 1,
        });
        let take = (size as u64).min(s.cap.get()) as i64;
        let left = draw(s, model).saturating_sub(take);
        s.left.set(left);
        if left >= 0 {
            return false;
        }
    }
    // Sampled: the next countdown starts afresh (the exponential and geometric distributions
    // forget what this allocation used up).
    s.left.set(draw(s, model));
    if matches!(current_charge(), Charge::None) {
        // The runtime's and the profiler's own work, charged to no one, is not sampled either
        // (the sampler's drain among it).
        return false;
    }
    let Some(recorder) = RECORDER.get() else {
        return false;
    };
    recorder(block, size, model.weight(size).0);
    true
}

/// A fresh countdown from `model`: an exponential number of bytes of mean `rate`, or a
/// geometric number of allocations skipped for probability `p`.
fn draw(s: &Countdown, model: AllocModel) -> i64 {
    let u = uniform(s);
    match model {
        AllocModel::Bytes(rate) => {
            let x = -u.ln() * rate as f64;
            if x >= i64::MAX as f64 {
                i64::MAX
            } else {
                x as i64
            }
        }
        AllocModel::Probability(p) if p >= 1.0 => 0,
        AllocModel::Probability(p) if p <= 0.0 => i64::MAX,
        AllocModel::Probability(p) => {
            let x = (u.ln() / (-p).ln_1p()).floor();
            if x >= i64::MAX as f64 {
                i64::MAX
            } else {
                x as i64
            }
        }
    }
}

/// A uniform draw in `(0, 1]` from the thread's xorshift64* generator.
fn uniform(s: &Countdown) -> f64 {
    let mut x = s.rng.get();
    if x == 0 {
        // Seeded once per thread: a global counter and the address of this thread's state
        // (laid out anew by each run of the program where addresses are randomized, as
        // tcmalloc's sampler seeds itself), mixed (splitmix64), never 0. The counter alone gave
        // the n-th thread of every run the same draws: a deterministic program profiled twice
        // had the same allocations sampled twice, so that profiles of two runs agreed with each
        // other, not only with the truth. No call, no lock: an address and an add.
        let mut z = SEEDS.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            ^ (std::ptr::from_ref(s).addr() as u64).rotate_left(29);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x = (z ^ (z >> 31)) | 1;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s.rng.set(x);
    let bits = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11; // 53 random bits
    (bits as f64 + 1.0) / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes model's countdowns have mean `rate`; the probability model's skip `1/p - 1`
    /// allocations on average, none at `p = 1`.
    #[test]
    fn draws_have_the_models_means() {
        let s = Countdown {
            left: Cell::new(0),
            cap: Cell::new(0),
            epoch: Cell::new(0),
            rng: Cell::new(0),
        };
        // Under Miri, fewer draws (its time) and tolerances as many standard deviations
        // wide: 8 % is 5.6 of the exponential mean's at 5,000 draws, 0.3 six of the skips'.
        let (n, mean_tolerance, skips_tolerance) = if cfg!(miri) {
            (5_000, 0.08, 0.3)
        } else {
            (200_000, 0.02, 0.1)
        };
        let mean = (0..n)
            .map(|_| draw(&s, AllocModel::Bytes(4096)) as f64)
            .sum::<f64>()
            / f64::from(n);
        assert!((mean / 4096.0 - 1.0).abs() < mean_tolerance, "mean {mean}");
        let skips = (0..n)
            .map(|_| draw(&s, AllocModel::Probability(0.25)) as f64)
            .sum::<f64>()
            / f64::from(n);
        assert!((skips - 3.0).abs() < skips_tolerance, "mean skips {skips}");
        assert!((0..100).all(|_| draw(&s, AllocModel::Probability(1.0)) == 0));
        assert!((0..100).all(|_| draw(&s, AllocModel::Probability(0.0)) == i64::MAX));
    }

    /// Weights are inverse probabilities: exactly the size at `p = 1`; at least the size and
    /// the rate (for a small block) by bytes.
    #[test]
    fn weights_are_inverse_probabilities() {
        assert_eq!(AllocModel::Probability(1.0).weight(48), (48.0, 1.0));
        assert_eq!(AllocModel::Probability(0.5).weight(48), (96.0, 2.0));
        let (bytes, objects) = AllocModel::Bytes(1 << 19).weight(64);
        assert!((bytes - f64::from(1 << 19)).abs() < 64.0, "{bytes}");
        assert!((bytes / objects - 64.0).abs() < 1e-6);
        // A block much larger than the rate is sampled nearly surely: it stands for itself.
        let (big, _) = AllocModel::Bytes(1024).weight(1 << 20);
        assert!((big - f64::from(1 << 20)).abs() < 1.0);
    }
}
