//! The allocation sampler's rate, as a profile records it.

use std::fmt;

/// The allocation sampler's default: one sample per 512 KiB allocated, on average (Go's and
/// jemalloc's).
pub const DEFAULT_ALLOC_RATE_BYTES: u64 = 512 * 1024;

/// How the allocation sampler ([`Sampler::Alloc`](crate::sample::Sampler::Alloc)) chooses allocations. The two models are
/// never mixed in one estimate: a profile says which one its samples were taken with.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocRate {
    /// Poisson sampling by bytes: each byte allocated is sampled with probability
    /// `1 / bytes`, so an allocation of `size` bytes is sampled with probability
    /// `1 - exp(-size / bytes)` and stands for `size / (1 - exp(-size / bytes))` bytes.
    Bytes(u64),
    /// Julia's `sample_rate`: each allocation with this probability, in `[0, 1]` (1: every
    /// one), standing for `1 / p` allocations of its size.
    SampleRate(f64),
}

impl Default for AllocRate {
    fn default() -> Self {
        AllocRate::Bytes(DEFAULT_ALLOC_RATE_BYTES)
    }
}

impl PartialEq for AllocRate {
    fn eq(&self, other: &AllocRate) -> bool {
        match (self, other) {
            (AllocRate::Bytes(a), AllocRate::Bytes(b)) => a == b,
            (AllocRate::SampleRate(a), AllocRate::SampleRate(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for AllocRate {}

impl fmt::Display for AllocRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocRate::Bytes(bytes) => write!(f, "one sample per {bytes} bytes"),
            AllocRate::SampleRate(p) => write!(f, "sample_rate {p}"),
        }
    }
}

impl AllocRate {
    /// The probability that an allocation of `size` bytes is sampled.
    pub fn probability(self, size: u64) -> f64 {
        match self {
            AllocRate::Bytes(bytes) => -(-(size as f64) / bytes.max(1) as f64).exp_m1(),
            AllocRate::SampleRate(p) => p,
        }
    }

    /// Whether it is in range: at least one byte, or a probability in `[0, 1]`.
    pub(crate) fn valid(self) -> bool {
        match self {
            AllocRate::Bytes(bytes) => bytes > 0,
            AllocRate::SampleRate(p) => (0.0..=1.0).contains(&p),
        }
    }
}
