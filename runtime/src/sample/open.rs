//! The sample sessions open on each node, for readers that use what they measured without
//! owning them: a census names the sessions whose paths it read
//! ([`NodeHandle::open_sample_sessions`]).
//!
//! One entry per open session (a node has at most 64: one per trace session slot), added as
//! the session opens and removed as it is dropped, under a lock no poll takes.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::Sampler;
use crate::node::NodeHandle;

/// A sample session open on a node, as [`NodeHandle::open_sample_sessions`] lists it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct OpenSampleSession {
    /// Its trace session's slot ([`TraceSession::slot`](crate::trace::TraceSession::slot)).
    pub slot: u32,
    /// Its sampler.
    pub sampler: Sampler,
    /// Its rate (samples per second per thread or tick; unused by the allocation sampler).
    pub hz: u32,
    /// How long it has been open.
    pub open_for: Duration,
}

/// A trace session open on a node that measures its processes' polls (call_time,
/// call_memory), as [`NodeHandle::poll_measuring_sessions`] lists it: the function each
/// process is in, as a census reads it, may be what it recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollMeasuringSession {
    /// Its slot ([`TraceSession::slot`](crate::trace::TraceSession::slot)).
    pub slot: u32,
    /// What it measures.
    pub types: crate::trace::TraceTypes,
}

/// An open session: its node, slot, sampler, rate and when it opened.
type Entry = (u32, u32, Sampler, u32, Instant);

/// The sessions open.
static OPEN: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// Notes that the session in `slot` opened on node `node`.
pub(super) fn opened(node: u32, slot: u32, sampler: Sampler, hz: u32) {
    crate::heap::suppressed(|| {
        OPEN.lock().push((node, slot, sampler, hz, Instant::now()));
    });
}

/// Notes that the session in `slot` of node `node` is gone.
pub(super) fn closed(node: u32, slot: u32) {
    OPEN.lock().retain(|&(n, s, ..)| (n, s) != (node, slot));
}

impl NodeHandle {
    /// The sample sessions open on this node now, by slot: whoever opened them (this program,
    /// an attached `tprof`, a control endpoint's request).
    ///
    /// ```
    /// use runtime::sample::{SampleOptions, Sampler};
    ///
    /// let node = runtime::Node::new().unwrap();
    /// assert!(node.handle().open_sample_sessions().is_empty());
    /// let session = node
    ///     .handle()
    ///     .sample_session(SampleOptions::new().sampler(Sampler::Wall).hz(10))
    ///     .unwrap();
    /// let open = node.handle().open_sample_sessions();
    /// assert_eq!(open.len(), 1);
    /// assert_eq!((open[0].slot, open[0].sampler), (session.trace().slot(), Sampler::Wall));
    /// drop(session);
    /// assert!(node.handle().open_sample_sessions().is_empty());
    /// ```
    pub fn open_sample_sessions(&self) -> Vec<OpenSampleSession> {
        let node = self.id();
        let mut open: Vec<OpenSampleSession> = OPEN
            .lock()
            .iter()
            .filter(|&&(n, ..)| n == node)
            .map(|&(_, slot, sampler, hz, since)| OpenSampleSession {
                slot,
                sampler,
                hz,
                open_for: since.elapsed(),
            })
            .collect();
        open.sort_by_key(|s| s.slot);
        open
    }

    /// The trace sessions open on this node now that measure its processes' polls (call_time,
    /// call_memory), by slot, sample sessions left out ([`open_sample_sessions`](Self::open_sample_sessions)
    /// lists those): each measured poll records the function its process is in, which a census
    /// of the node reads.
    ///
    /// ```
    /// use runtime::trace::TraceTypes;
    ///
    /// let node = runtime::Node::new().unwrap();
    /// let counting = node.trace_session_with(TraceTypes::CALL_COUNT).unwrap();
    /// assert!(node.handle().poll_measuring_sessions().is_empty());
    /// let timing = node.trace_session_with(TraceTypes::CALL_TIME).unwrap();
    /// let open = node.handle().poll_measuring_sessions();
    /// assert_eq!(open.len(), 1);
    /// assert_eq!((open[0].slot, open[0].types), (timing.slot(), TraceTypes::CALL_TIME));
    /// drop((counting, timing));
    /// assert!(node.handle().poll_measuring_sessions().is_empty());
    /// ```
    pub fn poll_measuring_sessions(&self) -> Vec<PollMeasuringSession> {
        crate::trace::poll_measuring_on(self.id())
            .into_iter()
            .map(|(slot, types)| PollMeasuringSession { slot, types })
            .collect()
    }
}
