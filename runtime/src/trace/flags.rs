//! Process trace flags: which processes a session traces.
//!
//! Each process carries two masks with a bit per trace session: the sessions that trace it,
//! and those of them whose flag passes to the processes it spawns (`set_on_spawn`). A session
//! can also ask for every process spawned on its node from now on (`New`). The flags are what
//! the per-process trace types (call_time, call_memory) look at; call_count needs none.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::measure::TracedProcess;
use super::session::{SessionNode, SessionState, session_in_slot};
use crate::Pid;
use crate::name::{Name, ProcessRef};

/// What setting flags reads of a process record beyond [`TracedProcess`]: the process layer's
/// `Process` implements it.
pub(crate) trait FlaggedProcess: TracedProcess + Send + Sync {
    /// Its spawning parent's pid, if any.
    fn parent(&self) -> Option<Pid>;
    /// The number of its poll running now, if one is.
    fn poll_running(&self) -> Option<u32>;
    /// Whether it is the process running on this thread (not a helper task of it).
    fn is_current_owner(&self) -> bool;
    /// Its polls so far, wrapping at `u32::MAX`.
    fn polls(&self) -> u32;
    /// Its account, if it has one: every measured poll has made it one.
    fn account_if_any(&self) -> Option<&'static crate::heap::Account>;
}

/// Sessions that want every new process of their node, one bit per session slot.
static NEW_MASK: AtomicU64 = AtomicU64::new(0);
/// Of those, the ones that also want `set_on_spawn` on the new processes.
static NEW_ON_SPAWN_MASK: AtomicU64 = AtomicU64::new(0);

/// A process's flags: see the module documentation.
#[derive(Default)]
pub(crate) struct TraceFlags {
    traced: AtomicU64,
    on_spawn: AtomicU64,
}

impl TraceFlags {
    #[inline]
    pub(crate) fn traced(&self) -> u64 {
        self.traced.load(Ordering::Relaxed)
    }

    pub(crate) fn clear(&self, bit: u32) {
        self.set(bit, false, false);
    }

    fn set(&self, bit: u32, on: bool, set_on_spawn: bool) {
        let m = 1u64 << bit;
        if on {
            self.traced.fetch_or(m, Ordering::Relaxed);
            if set_on_spawn {
                self.on_spawn.fetch_or(m, Ordering::Relaxed);
            } else {
                self.on_spawn.fetch_and(!m, Ordering::Relaxed);
            }
        } else {
            self.traced.fetch_and(!m, Ordering::Relaxed);
            self.on_spawn.fetch_and(!m, Ordering::Relaxed);
        }
    }
}

/// The flags a process spawned on `node` by `parent` starts with: what its parent passes on,
/// what sessions wanting new processes of the node give it, and the sessions its spawn options
/// name (`traced_by`: node, session slot, session generation, `set_on_spawn`). Called once the
/// child is in the node's process table.
///
/// A session opening in a slot clears that slot's bit on every process of the table (a dropped
/// session may have left it); a spawn racing with that must not leave a bit the opening
/// session's sweep missed. So the decision rests on values read after each candidate slot's
/// generation, and once the flags are stored, a fence and a second read of those generations
/// clear any bit whose slot changed hands meanwhile. The opening session stores its
/// generation, fences, then sweeps: of the two, one sees the other (see
/// [`super::session`]'s `trace_session_with`).
///
/// Inline as far as the common case, a spawn no session traces: three loads and no call.
#[inline(always)]
pub(crate) fn flags_at_spawn<P: TracedProcess>(
    node: &dyn SessionNode,
    parent: Option<&P>,
    child: &TraceFlags,
    traced_by: &[(u32, u32, u64, bool)],
) {
    let from_parent = parent.map_or(0, |p| {
        p.trace_flags().traced() & p.trace_flags().on_spawn.load(Ordering::Relaxed)
    });
    let candidates = from_parent | NEW_MASK.load(Ordering::Acquire);
    if candidates != 0 || !traced_by.is_empty() {
        flags_for_candidates(node, parent, child, traced_by, candidates);
    }
}

/// [`flags_at_spawn`] once some session may trace the child: `candidates` are the sessions
/// its parent passes on and those wanting new processes, read in that order.
#[inline(never)]
fn flags_for_candidates<P: TracedProcess>(
    node: &dyn SessionNode,
    parent: Option<&P>,
    child: &TraceFlags,
    traced_by: &[(u32, u32, u64, bool)],
    mut candidates: u64,
) {
    for &(session_node, bit, _, _) in traced_by {
        if session_node == node.id() {
            candidates |= 1 << bit;
        }
    }
    if candidates == 0 {
        return;
    }
    // The generation of each candidate slot, before the values the decision rests on (acquire:
    // a dropped session's clearing of them is seen once its slot's generation is).
    let mut generations = [0u64; super::MAX_SESSIONS];
    let mut m = candidates;
    while m != 0 {
        let bit = m.trailing_zeros() as usize;
        m &= m - 1;
        generations[bit] = super::session::generation_acquire(bit as u32);
    }
    // Only bits of sessions still open on the node pass on: a parent may keep a dropped
    // session's bit for a moment.
    let open = node.trace_sessions().load(Ordering::SeqCst);
    let (mut traced, mut on_spawn) = match parent {
        Some(p) => {
            let pass = p.trace_flags().traced()
                & p.trace_flags().on_spawn.load(Ordering::Relaxed)
                & open
                & candidates;
            (pass, pass)
        }
        None => (0, 0),
    };
    let mut new = NEW_MASK.load(Ordering::Acquire) & candidates;
    if new != 0 {
        let new_on_spawn = NEW_ON_SPAWN_MASK.load(Ordering::Relaxed);
        while new != 0 {
            let bit = new.trailing_zeros();
            new &= new - 1;
            if session_in_slot(bit).is_some_and(|s| s.node() == node.id()) {
                traced |= 1 << bit;
                on_spawn |= (1 << bit) & new_on_spawn;
            }
        }
    }
    for &(session_node, bit, generation, set_on_spawn) in traced_by {
        // The session still open (options can outlive it, and its slot be taken by another).
        if session_node == node.id() && generations[bit as usize] == generation {
            traced |= 1 << bit;
            if set_on_spawn {
                on_spawn |= 1 << bit;
            } else {
                on_spawn &= !(1 << bit);
            }
        }
    }
    if traced == 0 {
        return;
    }
    child.traced.store(traced, Ordering::Relaxed);
    child.on_spawn.store(on_spawn, Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::SeqCst);
    let mut m = traced;
    while m != 0 {
        let bit = m.trailing_zeros();
        m &= m - 1;
        if super::session::generation_acquire(bit) != generations[bit as usize] {
            child.clear(bit);
        }
    }
}

/// Which processes [`TraceSession::enable_trace`](super::TraceSession::enable_trace) and
/// `disable_trace` act on: Erlang's `trace:process` specs, plus tprof's children.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProcessSpec {
    /// One process.
    Pid(Pid),
    /// The process registered under a name.
    Name(Name),
    /// Every process of the node, existing and new.
    All,
    /// Every process alive now.
    Existing,
    /// Every process spawned from now on.
    New,
    /// The processes this one (a pid, or a name registered on the session's node) spawned:
    /// its direct children, alive now.
    Children(ProcessRef),
    /// Every live descendant of this process (a pid or a registered name), by spawning
    /// parent.
    AllChildren(ProcessRef),
    /// Several pids or names; failures are reported per item, in input order.
    List(Vec<ProcessSpec>),
}

impl From<Pid> for ProcessSpec {
    fn from(pid: Pid) -> ProcessSpec {
        ProcessSpec::Pid(pid)
    }
}

impl From<&str> for ProcessSpec {
    fn from(name: &str) -> ProcessSpec {
        ProcessSpec::Name(Arc::from(name))
    }
}

impl From<ProcessRef> for ProcessSpec {
    fn from(process: ProcessRef) -> ProcessSpec {
        match process {
            ProcessRef::Pid(pid) => ProcessSpec::Pid(pid),
            ProcessRef::Name(name) => ProcessSpec::Name(name),
        }
    }
}

impl ProcessSpec {
    /// [`ProcessSpec::Children`] of `parent`, a pid or a registered name.
    pub fn children(parent: impl Into<ProcessRef>) -> ProcessSpec {
        ProcessSpec::Children(parent.into())
    }

    /// [`ProcessSpec::AllChildren`] of `ancestor`, a pid or a registered name.
    pub fn all_children(ancestor: impl Into<ProcessRef>) -> ProcessSpec {
        ProcessSpec::AllChildren(ancestor.into())
    }
}

impl fmt::Display for ProcessSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessSpec::Pid(pid) => write!(f, "{pid}"),
            ProcessSpec::Name(name) => write!(f, "`{name}`"),
            ProcessSpec::All => f.write_str("all"),
            ProcessSpec::Existing => f.write_str("existing"),
            ProcessSpec::New => f.write_str("new"),
            ProcessSpec::Children(parent) => write!(f, "children of {parent}"),
            ProcessSpec::AllChildren(ancestor) => write!(f, "all children of {ancestor}"),
            ProcessSpec::List(items) => write!(f, "a list of {} processes", items.len()),
        }
    }
}

/// Why one item of a spec could not be traced.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FlagError {
    /// The pid names no live process of the session's node.
    NoProc(Pid),
    /// No process is registered under the name on the session's node.
    NotRegistered(Name),
    /// A list inside a list.
    NestedList,
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagError::NoProc(pid) => {
                write!(f, "{pid} is not a live process of the session's node")
            }
            FlagError::NotRegistered(name) => {
                write!(
                    f,
                    "no process is registered as `{name}` on the session's node"
                )
            }
            FlagError::NestedList => f.write_str("a process list cannot contain another list"),
        }
    }
}

impl std::error::Error for FlagError {}

/// What `enable_trace` / `disable_trace` did: how many processes they changed, and for a list,
/// the items that failed, in input order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlagOutcome {
    /// Processes whose flag was set (or cleared).
    pub count: usize,
    /// The items that could not be acted on, with why.
    pub failures: Vec<(ProcessSpec, FlagError)>,
}

/// Sets or clears session `state`'s flag on the processes `spec` names. A flag set for a
/// session that measures processes is in effect for every poll of theirs once this returns:
/// it waits for the polls that began before (see [`wait_for_polls`]).
pub(crate) fn apply(
    state: &SessionState,
    node: &dyn SessionNode,
    spec: &ProcessSpec,
    on: bool,
    set_on_spawn: bool,
) -> Result<FlagOutcome, FlagError> {
    let bit = state.bit();
    let set = |p: &dyn FlaggedProcess| {
        if on {
            // Before the flag: a poll that begins after it is measured and overwrites the
            // mark (see `unmeasured`).
            super::unmeasured::mark(p);
        }
        p.trace_flags().set(bit, on, set_on_spawn);
    };
    let mut outcome = FlagOutcome::default();
    // The processes whose flag was set or cleared.
    let mut changed: Vec<Arc<dyn FlaggedProcess>> = Vec::new();
    match spec {
        ProcessSpec::Pid(_) | ProcessSpec::Name(_) => {
            changed.push(one(node, spec, &set)?);
            outcome.count = 1;
        }
        ProcessSpec::List(items) => {
            for item in items {
                match one(node, item, &set) {
                    Ok(p) => changed.push(p),
                    Err(e) => outcome.failures.push((item.clone(), e)),
                }
            }
            outcome.count = changed.len();
        }
        ProcessSpec::All | ProcessSpec::Existing | ProcessSpec::New => {
            if !matches!(spec, ProcessSpec::New) {
                changed = node.processes();
                for p in &changed {
                    set(&**p);
                }
                outcome.count = changed.len();
            }
            if !matches!(spec, ProcessSpec::Existing) {
                let m = 1u64 << bit;
                if on {
                    NEW_MASK.fetch_or(m, Ordering::Relaxed);
                    if set_on_spawn {
                        NEW_ON_SPAWN_MASK.fetch_or(m, Ordering::Relaxed);
                    } else {
                        NEW_ON_SPAWN_MASK.fetch_and(!m, Ordering::Relaxed);
                    }
                } else {
                    clear_new(bit);
                }
            }
        }
        ProcessSpec::Children(parent) | ProcessSpec::AllChildren(parent) => {
            let root = match parent {
                // A parent that has ended may have children alive: no error for a pid.
                ProcessRef::Pid(pid) => *pid,
                ProcessRef::Name(name) => node
                    .whereis(name)
                    .ok_or_else(|| FlagError::NotRegistered(name.clone()))?,
            };
            let all = node.processes();
            // Each process's children, found in one pass over the table (then a walk down
            // from the root for every descendant): linear in the processes of the node.
            let mut children: HashMap<Pid, Vec<&Arc<dyn FlaggedProcess>>> = HashMap::new();
            for p in &all {
                if let Some(parent) = p.parent() {
                    children.entry(parent).or_default().push(p);
                }
            }
            let deep = matches!(spec, ProcessSpec::AllChildren(_));
            let mut parents = vec![root];
            while let Some(current) = parents.pop() {
                for p in children.remove(&current).unwrap_or_default() {
                    set(&**p);
                    changed.push(Arc::clone(p));
                    if deep {
                        parents.push(p.pid());
                    }
                }
            }
            outcome.count = changed.len();
        }
    }
    // Only flags set matter to polls that run (a cleared one leaves a poll measuring to its
    // end), and only to sessions that measure polls (call_count needs no flag).
    if on && state.types().per_process() {
        wait_for_polls(&changed);
    }
    Ok(outcome)
}

/// Waits until every poll of `flagged` that may have read its trace flags before they were
/// just set has ended, for at most [`SETTLE_LIMIT`](super::TraceSession::SETTLE_LIMIT).
///
/// A poll reads its process's flags once, as it begins (`sessions_measuring`), and measures
/// for the sessions they name until it ends. A poll already running when a flag is set is
/// not measured for it, nor is any call it makes afterwards: a process that is told, once
/// `enable_trace` has returned, to call a traced function, and gets that message in the poll
/// that was running, would make an unmeasured call, missing from every collect since. So
/// `enable_trace` waits for those polls to end, as `pause` waits for the polls measuring
/// when it is called; the next poll of each process reads the flag.
///
/// Which polls: a poll stores "running" and counts itself, and only then reads the flags
/// (the poll wrapper in `process::task`, with a compiler fence between). Here, once the flags
/// are set, [`barrier`] makes every thread of the process pass a full memory barrier; then a
/// poll that read the flags before they were set stored "running" before that barrier, and is
/// seen running below, with its number, until it ends. A poll that begins after the barrier
/// reads the flags after it, set. The calling process's own poll is not waited for: it
/// cannot end while it waits. A poll running longer than the limit (a process computing
/// without yielding) is not waited for further: the rest of it is not measured.
fn wait_for_polls(flagged: &[Arc<dyn FlaggedProcess>]) {
    if flagged.is_empty() {
        return;
    }
    barrier();
    let mut running: Vec<(&dyn FlaggedProcess, u32)> = flagged
        .iter()
        .filter(|p| !p.is_current_owner())
        .filter_map(|p| Some((&**p, p.poll_running()?)))
        .collect();
    let start = std::time::Instant::now();
    let mut spins = 0u32;
    loop {
        running.retain(|(p, poll)| p.poll_running() == Some(*poll));
        if running.is_empty() || start.elapsed() >= super::TraceSession::SETTLE_LIMIT {
            return;
        }
        super::inflight::backoff(&mut spins);
    }
}

/// Makes every thread of this OS process pass a full memory barrier before this returns,
/// after whatever the calling thread stored before it: the heavy side of an asymmetric fence,
/// whose light side in each poll is a compiler fence (no instruction), so that polls pay
/// nothing for it. On Linux, `membarrier(2)`'s private expedited command (a barrier on each
/// CPU that runs a thread of this process: an interrupt each, a few microseconds); elsewhere,
/// or where the kernel refuses it (before 4.14, or a seccomp filter), a fence on this thread
/// only, which leaves a poll that begins at that very moment (its first stores not yet
/// visible here, its read of the flags already done) unseen.
fn barrier() {
    std::sync::atomic::fence(Ordering::SeqCst);
    #[cfg(target_os = "linux")]
    membarrier::private_expedited();
}

#[cfg(target_os = "linux")]
mod membarrier {
    use std::sync::OnceLock;

    /// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (`linux/membarrier.h`).
    const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    /// `MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED`: once per process, before the first use.
    const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn membarrier(command: libc::c_long) -> bool {
        // SAFETY: `syscall` passes the number and three integers as the kernel reads them
        // (`membarrier(int cmd, unsigned int flags, int cpu_id)`); membarrier reads and
        // writes no memory of this process, and returns -1 for a command it does not know or
        // refuses.
        #[allow(unsafe_code)]
        let done = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                command,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        };
        done == 0
    }

    /// Every thread of this process passes a memory barrier, if the kernel lets it (after a
    /// refusal, the caller's fence is all there is).
    pub(super) fn private_expedited() {
        static REGISTERED: OnceLock<bool> = OnceLock::new();
        if *REGISTERED.get_or_init(|| membarrier(REGISTER_PRIVATE_EXPEDITED)) {
            membarrier(PRIVATE_EXPEDITED);
        }
    }
}

fn one(
    node: &dyn SessionNode,
    spec: &ProcessSpec,
    set: &dyn Fn(&dyn FlaggedProcess),
) -> Result<Arc<dyn FlaggedProcess>, FlagError> {
    let pid = match spec {
        ProcessSpec::Pid(pid) => *pid,
        ProcessSpec::Name(name) => node
            .whereis(name)
            .ok_or_else(|| FlagError::NotRegistered(name.clone()))?,
        _ => return Err(FlagError::NestedList),
    };
    if pid.node() != node.id() {
        return Err(FlagError::NoProc(pid));
    }
    let process = node.process(pid).ok_or(FlagError::NoProc(pid))?;
    set(&*process);
    Ok(process)
}

/// Forgets session slot `bit`'s wish for new processes (when it stops or disables `New`).
pub(crate) fn clear_new(bit: u32) {
    let m = 1u64 << bit;
    NEW_MASK.fetch_and(!m, Ordering::Relaxed);
    NEW_ON_SPAWN_MASK.fetch_and(!m, Ordering::Relaxed);
}
