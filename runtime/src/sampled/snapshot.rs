//! A sample session's samples as plain data (see [`crate::sample::SampleSnapshot`]); the
//! runtime's sample layer builds it ([`crate::sample::SampleData::snapshot`]).

use serde::{Deserialize, Serialize};

/// One frame of a sampled stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SnapshotFrame {
    /// A traced function: an index into the snapshot's functions. `None` for a native frame.
    pub function: Option<u32>,
    /// The native frame's function name (demangled, without hash); empty for a traced one.
    #[serde(default)]
    pub name: String,
    /// The native frame's source file, when known.
    #[serde(default)]
    pub file: Option<String>,
    /// The line, when known: a native frame's; a traced frame's is the line the sample was
    /// at in that function (of the sampled instruction, or of the call it was in), from its
    /// own native frame, and `None` when that was not found (wall samples have none).
    #[serde(default)]
    pub line: Option<u32>,
    /// The native frame's instruction address (0 for a traced frame).
    #[serde(default)]
    pub address: u64,
}

/// One node of the stack tree: a stack, as its innermost frame and the stack it extends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotStack {
    /// The stack it extends (a smaller index); `None` for a stack of one frame.
    pub parent: Option<u32>,
    /// Its innermost frame: an index into [`SampleSnapshot::frames`].
    pub frame: u32,
}

/// One sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnapshotSample {
    /// The process, as it prints (`<1.5.0>`); `None` for CPU time outside any process.
    pub pid: Option<String>,
    /// The thread (CPU samples): an index into [`SampleSnapshot::threads`].
    pub thread: Option<u32>,
    /// Nanoseconds since sampling started.
    pub time_ns: u64,
    /// What it stands for: timer periods (CPU) or processes (wall).
    pub weight: f64,
    /// Its stack: an index into [`SampleSnapshot::stacks`]; `None` for an empty stack.
    pub stack: Option<u32>,
    /// The process's state (wall samples): as [`crate::sample::ProcessState::name`] prints it.
    #[serde(default)]
    pub state: Option<String>,
    /// Messages in its mailbox (wall samples).
    #[serde(default)]
    pub mailbox_len: u32,
    /// Its registered name (wall samples).
    #[serde(default)]
    pub registered_name: Option<String>,
    /// The process it waits for a reply from, when its state is `call` (wall samples), as
    /// it prints.
    #[serde(default)]
    pub callee: Option<String>,
    /// The allocation's size in bytes (allocation samples; `weight` is then the bytes it
    /// stands for).
    #[serde(default)]
    pub size: u64,
    /// Whether the allocation's block was still allocated when the samples were read (its
    /// sample is in the live set).
    #[serde(default)]
    pub live: bool,
}

/// A thread CPU samples were taken on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotThread {
    /// The OS thread id.
    pub tid: i32,
    /// Its name, if any.
    pub name: Option<String>,
}

/// A mapped file that sampled addresses fall in (an executable mapping of `/proc/self/maps`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub limit: u64,
    /// The file offset `start` maps.
    pub offset: u64,
    /// The file.
    pub file: String,
}

/// A sample session's samples, as plain data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleSnapshot {
    /// `cpu`, `wall` or `alloc`.
    pub sampler: String,
    /// The rate, in Hz (CPU and wall samplers).
    pub hz: u32,
    /// The allocation sampler's rate (allocation samples).
    #[serde(default)]
    pub alloc_rate: Option<super::AllocRate>,
    /// The frames the stacks name.
    pub frames: Vec<SnapshotFrame>,
    /// The stacks; a parent comes before its children.
    pub stacks: Vec<SnapshotStack>,
    /// The samples, oldest first per thread.
    pub samples: Vec<SnapshotSample>,
    /// The threads samples name.
    pub threads: Vec<SnapshotThread>,
    /// The executable mappings sampled addresses fall in.
    pub mappings: Vec<SnapshotMapping>,
    /// Weight dropped (a full buffer or ring).
    pub dropped: f64,
    /// Allocation samples: frees of sampled blocks lost because the queue of frees was full,
    /// so that the in-use figures may over-count by as many blocks.
    #[serde(default)]
    pub lost_frees: u64,
    /// Samples of processes taken in a poll that began before sampling began, whose traced
    /// frames are unknown ([`SampleData::before_sampling`](crate::sample::SampleData::before_sampling)).
    /// 0 in files written before it was kept.
    #[serde(default)]
    pub before_sampling: u64,
    /// Whether native stacks were walked past the interrupted instruction.
    pub native_walked: bool,
    /// How long the session sampled, in nanoseconds.
    pub duration_ns: u64,
    /// The buffer's size, in samples.
    pub capacity: u64,
    /// CPU samples: the mechanism that took them and each timed thread's CPU time against
    /// what its samples stand for ([`SampleData::cpu`](crate::sample::SampleData::cpu)); its thread
    /// indices are [`threads`](Self::threads)'. `None` for other samplers, and in files
    /// written before it was kept.
    #[serde(default)]
    pub cpu: Option<super::CpuCoverage>,
}

impl SampleSnapshot {
    /// The frames of stack `stack`, outermost first (indices into [`Self::frames`]).
    pub fn frames_of(&self, stack: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = Some(stack);
        while let Some(s) = at {
            let Some(node) = self.stacks.get(s as usize) else {
                break;
            };
            out.push(node.frame);
            at = node.parent.filter(|p| *p < s);
        }
        out.reverse();
        out
    }
}
