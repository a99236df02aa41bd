//! The node's side of tracing: opening a trace session on a node, and what a session reads of
//! the node and its processes (the traits tracing defines, implemented here).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::{NodeHandle, NodeInner};
use crate::Pid;
use crate::name::Name;
use crate::process::{Process, with_current_owner};
use crate::trace::{
    FlaggedProcess, SessionError, SessionNode, SessionOptions, TraceSession, TraceTypes,
    TracedProcess,
};

impl NodeHandle {
    /// Opens a call_count trace session on this node: no patterns, counters at zero.
    ///
    /// # Errors
    /// [`SessionError::TooManySessions`] when [`MAX_SESSIONS`](crate::trace::MAX_SESSIONS) are open in this OS process.
    pub fn trace_session(&self) -> Result<TraceSession, SessionError> {
        self.trace_session_with(TraceTypes::CALL_COUNT)
    }

    /// Opens a trace session on this node that measures `types`: no patterns, no process
    /// flags, figures at zero.
    ///
    /// # Errors
    /// [`SessionError::TooManySessions`] when [`MAX_SESSIONS`](crate::trace::MAX_SESSIONS) are open in this OS process;
    /// [`SessionError::AllocatorNotInstalled`] for call_memory without
    /// [`CountingAlloc`](crate::CountingAlloc).
    pub fn trace_session_with(&self, types: TraceTypes) -> Result<TraceSession, SessionError> {
        self.trace_session_with_options(types, SessionOptions::new())
    }

    /// [`trace_session_with`](Self::trace_session_with), with `options`: the precision of
    /// call-duration histograms.
    ///
    /// ```
    /// use runtime::trace::{SessionError, SessionOptions, TraceTypes};
    ///
    /// let node = runtime::Node::new().unwrap();
    /// let precise = SessionOptions::new().histogram_precision(4);
    /// let session = node.trace_session_with_options(TraceTypes::CALL_TIME_HISTOGRAMS, precise);
    /// assert!(session.is_ok());
    /// let wrong = SessionOptions::new().histogram_precision(9);
    /// assert_eq!(
    ///     node.trace_session_with_options(TraceTypes::CALL_TIME_HISTOGRAMS, wrong).unwrap_err(),
    ///     SessionError::HistogramPrecision { significant_figures: 9 },
    /// );
    /// ```
    ///
    /// # Errors
    /// As [`trace_session_with`](Self::trace_session_with), and
    /// [`SessionError::HistogramPrecision`] for a precision out of range.
    pub fn trace_session_with_options(
        &self,
        types: TraceTypes,
        options: SessionOptions,
    ) -> Result<TraceSession, SessionError> {
        TraceSession::open(
            Arc::clone(&self.inner) as Arc<dyn SessionNode>,
            types,
            options,
        )
    }
}

impl SessionNode for NodeInner {
    fn id(&self) -> u32 {
        self.id
    }

    fn trace_sessions(&self) -> &AtomicU64 {
        &self.trace_sessions
    }

    fn whereis(&self, name: &Name) -> Option<Pid> {
        self.registry.whereis(name)
    }

    fn process(&self, pid: Pid) -> Option<Arc<dyn FlaggedProcess>> {
        self.table
            .get_arc(pid)
            .map(|p| p as Arc<dyn FlaggedProcess>)
    }

    fn processes(&self) -> Vec<Arc<dyn FlaggedProcess>> {
        self.table
            .all()
            .into_iter()
            .map(|p| p as Arc<dyn FlaggedProcess>)
            .collect()
    }
}

impl FlaggedProcess for Process {
    fn parent(&self) -> Option<Pid> {
        Process::parent(self)
    }

    fn poll_running(&self) -> Option<u32> {
        Process::poll_running(self)
    }

    fn is_current_owner(&self) -> bool {
        with_current_owner(|p| p.is_some_and(|p| std::ptr::eq(&**p, self)))
    }

    fn polls(&self) -> u32 {
        Process::polls(self)
    }

    fn account_if_any(&self) -> Option<&'static crate::heap::Account> {
        self.trace_account_if_any()
    }
}

/// What tracing reads of a process at each poll: field reads, inlined into the generic poll
/// functions of `crate::trace`.
impl TracedProcess for Process {
    #[inline(always)]
    fn pid(&self) -> Pid {
        self.pid
    }

    #[inline(always)]
    fn initial_call(&self) -> std::borrow::Cow<'static, str> {
        Process::initial_call(self)
    }

    #[inline(always)]
    fn node_id(&self) -> u32 {
        self.node.id
    }

    #[inline(always)]
    fn node_trace_sessions(&self) -> &std::sync::atomic::AtomicU64 {
        &self.node.trace_sessions
    }

    #[inline(always)]
    fn trace_flags(&self) -> &crate::trace::TraceFlags {
        &self.trace_flags
    }

    #[inline(always)]
    fn trace_data(&self) -> &std::sync::OnceLock<crate::trace::ProcTraceRef> {
        &self.trace_data
    }

    #[inline(always)]
    fn trace_account(&self) -> &'static crate::heap::Account {
        Process::trace_account_inline(self)
    }
}
