//! Layer 1, plain data: what a sample profile holds — the samples of a session with their
//! stacks, threads and mappings, the allocation sampler's rate, and a CPU profile's coverage.
//! The samplers ([`crate::sample`]) fill them; a trace snapshot carries them, and `tprof`
//! reads them back from files. Public as `runtime::sample::...`.

mod rate;
mod snapshot;
pub(crate) mod truth;

pub use rate::{AllocRate, DEFAULT_ALLOC_RATE_BYTES};
pub use snapshot::{
    SampleSnapshot, SnapshotFrame, SnapshotMapping, SnapshotSample, SnapshotStack, SnapshotThread,
};
pub use truth::{BUSY_THREAD_NS, CpuCoverage, CpuSource, JUDGED_PERIODS, ThreadCoverage};
