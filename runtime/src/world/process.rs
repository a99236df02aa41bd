//! Processes: what one is, its lifecycle, and who may touch which part of it.
//!
//! A process is a tokio task whose future is wrapped by the runtime ([`task`]): every poll of
//! it makes the process "current" on the polling thread, and clears it on return, on unwind
//! too. Free functions such as [`self_pid`], [`send`](fn@crate::send) and
//! [`receive`](crate::receive) find their process that way.
//!
//! ```text
//!  spawn ──► Waiting ◄──► Running ──► Exiting ──► gone
//!                 (poll)        │  return / panic / exit signal / kill
//!                               ▼
//!             mailbox closed, links and monitors told, name released, slot freed
//! ```
//!
//! Fields and their owners:
//! - `pid`, `node`, `parent`, `initial_call`: fixed at spawn.
//! - `mailbox`: incoming pushed by anyone; saved touched only by the process itself (and read
//!   by `process_info`).
//! - `State` (links, monitors, name, pending exit): under the mailbox's incoming lock (one lock
//!   per process), taken briefly by the process and by whoever sends to it, links to it,
//!   monitors it, registers it or signals it.
//! - `flags`: set by senders of exit signals, cleared by the process.
//! - `exit_reason`: written once, by the process as it ends, before its mailbox closes, so a
//!   caller that sees its request dropped can read why.

mod current;
mod few;
mod helpers;
mod info;
mod once;
mod spawn;
mod table;
mod task;
mod wait;
mod waker;

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Waker;

use parking_lot::MappedMutexGuard;

pub(crate) use crate::context::{ThreadNode, current_is_helper, set_thread_node};
pub(crate) use current::{
    current_process_for_receive, pid_in_signal, with_current, with_current_owner,
};
pub use current::{self_pid, try_self_pid};
pub(crate) use helpers::Helpers;
pub use info::{ProcessInfo, ProcessStatus, process_info, processes};
pub use spawn::{
    SpawnError, SpawnOptions, Spawned, spawn, spawn_blocking, spawn_link, spawn_monitor, spawn_opt,
    spawn_task,
};
pub(crate) use spawn::{default_initial_call, spawn_on_node, spawn_pid_on_node};
pub(crate) use table::{InsertError, ProcessTable};
pub(crate) use wait::{Wait, calling, note_current_wait, noting};

use crate::heap::{Account, AccountCell};
use crate::mailbox::{Closed, Envelope, Mailbox, Pushed};
use crate::node::NodeInner;
use crate::registry::Name;
use crate::signal::{Down, MonitorRef, Signal, send_exit_signal};
use crate::timer::CallTimer;
use crate::trace::TraceFlags;
use crate::trace::unmeasured::Current;
use crate::{Exit, ExitReason, Message, Pid};
use few::Few;
use once::SetOnce;

/// An exit signal is queued in incoming and has not been acted on.
const SIGNAL_PENDING: u8 = 1;
/// The process must end at its next poll boundary (killed, or a signal it acted on).
const EXIT_PENDING: u8 = 2;
/// The process has a `max_heap_size`: each poll boundary checks it.
const HEAP_LIMITED: u8 = 4;

/// Spawned, not yet polled. (The status byte's low two bits; what a waiting process waits for
/// is above them, see [`wait`].)
const STATUS_NEW: u8 = 0;
const STATUS_RUNNING: u8 = 1;
const STATUS_EXITING: u8 = 2;
const STATUS_WAITING: u8 = 3;

/// One process's shared record. See the module documentation for who touches what.
///
/// 472 bytes (488 with its `Arc`'s counts, a 496-byte chunk of glibc's): see
/// `benches/idle_memory.rs` before changing its size, as the RSS per idle process depends on
/// how its block and the task cell pack (the test `the_record_fits_its_chunk` bounds it).
pub(crate) struct Process {
    pub(crate) pid: Pid,
    pub(crate) node: Arc<NodeInner>,
    /// Its parent, or a pid that names no process ([`Pid::outside`]) for none: 12 bytes where
    /// an `Option<Pid>` takes 16 (see [`Process::parent`]).
    parent: Pid,
    initial_call: InitialCall,
    pub(crate) mailbox: Mailbox,
    flags: AtomicU8,
    /// Running, waiting, ending, and what it waits for ([`wait`]): written by its own task,
    /// but for one bit its wakers set, "woken since this poll began" ([`waker`]).
    status: AtomicU8,
    trap_exit: AtomicBool,
    /// Its polls so far, wrapping (`tprof top`'s polls per refresh): written only by the
    /// thread that polls it, a load and a store, no read-modify-write.
    polls: AtomicU32,
    /// The task's waker, kept before the process's first poll: to wake the process for a
    /// signal, and the task its own wakers ([`waker`]) wake.
    task_waker: SetOnce<Waker>,
    exit_reason: SetOnce<ExitReason>,
    finished: AtomicBool,
    /// The deadline its calls re-arm, made at its first call with a timeout.
    call_timer: OnceLock<Arc<CallTimer>>,
    /// The trace sessions that trace it.
    pub(crate) trace_flags: TraceFlags,
    /// Its heap account, given back when this record is dropped: taken at spawn when
    /// [`CountingAlloc`](crate::CountingAlloc) is installed; otherwise only if a trace session
    /// measures the process (the traced stack records the function it is in there), as nothing
    /// else reads it then (128 bytes and two atomic read-modify-writes fewer per process).
    account: AccountCell,
    /// `max_message_queue_len`; `u32::MAX` for none (a limit past four billion messages is
    /// none: four bytes fewer, for the callee below).
    max_queue_len: AtomicU32,
    /// The process its last call called (slot index and serial; its node below): written
    /// before the call waits, read while [`wait`] says it waits for a call.
    callee: AtomicU64,
    callee_node: AtomicU32,
    /// Its call_time / call_memory figures, made at the first poll a session measures.
    pub(crate) trace_data: OnceLock<crate::trace::ProcTraceRef>,
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(account) = self.account.get() {
            account.release();
        }
        // Nothing flushes into its table from now on: a sample session may fold it.
        if let Some(data) = self.trace_data.get() {
            crate::trace::process_dropped(data);
        }
    }
}

/// What a process was spawned to run, as its record keeps it: a call given at spawn, or the
/// type name of its future, read as the function it names only when asked for
/// ([`Process::initial_call`]): finding that name costs a spawn some 60 instructions, which
/// most processes' records never need.
pub(crate) enum InitialCall {
    /// Given with [`SpawnOptions::initial_call`](crate::SpawnOptions::initial_call).
    Given(Cow<'static, str>),
    /// The type name of the process's future ([`std::any::type_name`]).
    Future(&'static str),
}

/// The link and the monitor a process is born with (`spawn_link`, `spawn_monitor`): set as it
/// is built, before anyone can reach it, rather than each under its lock afterwards.
#[derive(Default)]
pub(crate) struct Ties {
    /// Its parent, linked to it.
    pub(crate) link: Option<Pid>,
    /// Its parent's monitor on it.
    pub(crate) monitored_by: Option<(MonitorRef, Pid)>,
}

/// What others change in a process besides its mailbox: kept under its mailbox's lock
/// ([`Mailbox::state`]).
#[derive(Default)]
pub(crate) struct State {
    alive: bool,
    links: Few<Pid>,
    /// Monitors this process holds on others.
    monitoring: Vec<(MonitorRef, Pid)>,
    /// Monitors others hold on this process.
    monitored_by: Few<(MonitorRef, Pid)>,
    name: Option<Name>,
    pending_exit: Option<ExitReason>,
    /// Set by the runtime for supervisors, so node shutdown can stop them first.
    is_supervisor: bool,
}

impl State {
    /// Forgets the monitor `mref` this process holds; its target, if it held it.
    fn remove_monitoring(&mut self, mref: MonitorRef) -> Option<Pid> {
        let i = self.monitoring.iter().position(|(r, _)| *r == mref)?;
        Some(self.monitoring.swap_remove(i).1)
    }
}

impl Process {
    /// A new process record in its `Arc`, written in place (as `Arc::new` takes it, the record is
    /// built on the stack and then copied into its block: a 464-byte copy per spawn).
    #[inline(always)]
    pub(crate) fn new_arc(
        pid: Pid,
        node: Arc<NodeInner>,
        parent: Option<Pid>,
        initial_call: InitialCall,
        account: Option<&'static Account>,
        ties: Ties,
    ) -> Arc<Process> {
        let arc = Arc::<Process>::new_uninit();
        let links = ties.link.map_or(Few::Zero, Few::One);
        let monitored_by = ties.monitored_by.map_or(Few::Zero, Few::One);
        let record = Process {
            pid,
            node,
            parent: parent.unwrap_or(Pid::outside(0, 0)),
            initial_call,
            mailbox: Mailbox::new(State {
                alive: true,
                links,
                monitored_by,
                ..State::default()
            }),
            flags: AtomicU8::new(0),
            status: AtomicU8::new(STATUS_NEW),
            trap_exit: AtomicBool::new(false),
            polls: AtomicU32::new(0),
            task_waker: SetOnce::new(),
            exit_reason: SetOnce::new(),
            finished: AtomicBool::new(false),
            call_timer: OnceLock::new(),
            trace_flags: TraceFlags::default(),
            account: AccountCell::new(account),
            max_queue_len: AtomicU32::new(u32::MAX),
            callee: AtomicU64::new(0),
            callee_node: AtomicU32::new(0),
            trace_data: OnceLock::new(),
        };
        // SAFETY: the `Arc` was made just above and no reference to its value exists (no clone,
        // no borrow), so this is the only access to it: writing through its pointer (from
        // `Arc::as_ptr`, derived from the block's own pointer, not from a shared reference) is
        // exclusive. (`Arc::get_mut` would check that with a compare-and-swap.) Its docs do not
        // promise that the pointer may be written through; std derives it with `&raw mut` from
        // the block's pointer precisely so that it keeps write provenance (its source says so,
        // for `get_mut` after `from_raw`), and this relies on that. Once written, the value is
        // initialized, so `assume_init` is sound.
        #[allow(unsafe_code)]
        unsafe {
            Arc::as_ptr(&arc)
                .cast_mut()
                .write(std::mem::MaybeUninit::new(record));
            arc.assume_init()
        }
    }

    /// What it was spawned to run ([`SpawnOptions::initial_call`](crate::SpawnOptions::initial_call),
    /// or by default the function its future's type names).
    pub(crate) fn initial_call(&self) -> Cow<'static, str> {
        match &self.initial_call {
            InitialCall::Given(call) => call.clone(),
            InitialCall::Future(type_name) => Cow::Borrowed(spawn::initial_call_of(type_name)),
        }
    }

    /// The account its allocations are charged to: `Some` exactly when
    /// [`CountingAlloc`](crate::CountingAlloc) is installed.
    #[inline]
    pub(crate) fn heap_account(&self) -> Option<&'static Account> {
        if crate::heap::installed() {
            self.account.get()
        } else {
            None
        }
    }

    /// The account the traced stack records the current function in, taken now if the process
    /// has none (run by the process itself, at a poll a trace session measures).
    pub(crate) fn trace_account(&self) -> &'static Account {
        self.account.get_or_acquire()
    }

    /// [`trace_account`](Self::trace_account) inline where the account is taken already (every
    /// measured poll but the process's first): a poll's begin and end call nothing for it.
    #[inline]
    pub(crate) fn trace_account_inline(&self) -> &'static Account {
        match self.account.get() {
            Some(account) => account,
            None => self.trace_account(),
        }
    }

    /// Its account, if it has one (no account is taken here).
    pub(crate) fn trace_account_if_any(&self) -> Option<&'static Account> {
        self.account.get()
    }

    /// The process that spawned it, if any.
    #[inline]
    pub(crate) fn parent(&self) -> Option<Pid> {
        (!self.parent.is_outside()).then_some(self.parent)
    }

    /// Counts a poll. Only the thread polling the process calls it, and the executor orders
    /// one poll of a task before the next (wherever it runs), so a load and a store lose none.
    #[inline(always)]
    pub(crate) fn note_poll(&self) {
        let polls = self.polls.load(Ordering::Relaxed);
        self.polls.store(polls.wrapping_add(1), Ordering::Relaxed);
    }

    /// Its polls so far, wrapping at `u32::MAX`.
    pub(crate) fn polls(&self) -> u32 {
        self.polls.load(Ordering::Relaxed)
    }

    /// Notes that the poll running now is measured by a wall sample session (its suspended
    /// path is recorded), in its account ([`Account::path_poll`]). Called by the thread
    /// polling it, after [`note_poll`](Self::note_poll), in such polls only.
    #[inline]
    pub(crate) fn note_path_poll(&self) {
        self.trace_account().set_path_poll(self.polls());
    }

    /// Whether its current poll (running) or its last one (suspended) began before any wall
    /// sample session measured it: one whose traced path no wall session recorded, for want
    /// of the frames entered before the session began. False before its first poll.
    pub(crate) fn polled_before_sampling(&self) -> bool {
        let polls = self.polls();
        polls != 0 && self.account.get().is_none_or(|a| a.path_poll() != polls)
    }

    /// Whether a wall sample session samples it now, but its current poll (running) or its
    /// last one (suspended) began before any did ([`polled_before_sampling`](Self::polled_before_sampling)):
    /// the traced function it runs or waits in is then unknown to the session, for want of the
    /// frames entered before sampling began. False while no wall session samples it (nothing
    /// records where it is then, whenever its poll began).
    pub(crate) fn path_unknown_to_sampling(&self) -> bool {
        crate::trace::sessions_measuring(self) & crate::trace::paths::wanted() != 0
            && self.polled_before_sampling()
    }

    /// Whether a session measures it now (of any kind: a sample session, call_time,
    /// call_memory) but the traced function it runs or waits in is unknown: its current poll
    /// (running) or last one (suspended) began before any session measured it, as the mark
    /// its first flag left says ([`crate::trace::unmeasured`]), or, under a wall sample
    /// session, as [`path_unknown_to_sampling`](Self::path_unknown_to_sampling) says, unless
    /// another session measured that poll and recorded its function.
    pub(crate) fn function_unknown(&self) -> bool {
        match self.current() {
            Current::Function(_) => false,
            Current::Unknown => crate::trace::sessions_measuring(self) != 0,
            Current::None => self.path_unknown_to_sampling(),
        }
    }

    /// While one of its polls runs, the number that poll counted itself as
    /// ([`polls`](Self::polls)); `None` between polls (suspended, not polled yet, or ending).
    /// A poll seen running has ended once this gives `None` or another number: a poll leaves
    /// "running" as it suspends or ends, and the next one counts itself.
    pub(crate) fn poll_running(&self) -> Option<u32> {
        let status = self.status.load(Ordering::Acquire);
        (status & wait::STATUS_MASK == STATUS_RUNNING).then(|| self.polls())
    }

    /// The traced function it runs or is suspended in, as its account recorded it.
    pub(crate) fn current_function(&self) -> Option<u32> {
        match self.current() {
            Current::Function(id) => Some(id),
            Current::None | Current::Unknown => None,
        }
    }

    /// What its account's current-function cell says, decoded against its polls: a function,
    /// none, or unknown (a poll no session measured; see [`crate::trace::unmeasured`]).
    pub(crate) fn current(&self) -> Current {
        crate::trace::unmeasured::read_process(self.account.get(), self.polls())
    }

    /// Its links, monitors, name and pending exit, under its mailbox's lock. Every critical
    /// section on it is a few field updates that cannot panic halfway (and `parking_lot`'s
    /// lock does not poison), and none touches a mailbox (that lock is not reentrant, and
    /// holding it while taking another process's could deadlock).
    #[inline]
    fn state(&self) -> MappedMutexGuard<'_, State> {
        self.mailbox.state()
    }

    /// Queues a message; a dead process drops it.
    #[inline]
    pub(crate) fn push_message(&self, msg: Message) {
        // Dropped here when the mailbox is closed, as Erlang drops messages to dead pids.
        let _ = self.try_push_message(msg);
    }

    /// Queues a message, giving it back when the process has exited. Its envelope moves to
    /// this process's heap account, and growing the queue is charged here too.
    #[inline]
    pub(crate) fn try_push_message(&self, msg: Message) -> Result<(), Message> {
        self.push_message_with(msg, None)
    }

    /// [`Process::try_push_message`], or with `down_of` the `Down` of that monitor, queued
    /// only as the monitor is removed.
    #[inline(always)]
    fn push_message_with(
        &self,
        mut msg: Message,
        down_of: Option<MonitorRef>,
    ) -> Result<(), Message> {
        let account = self.heap_account();
        if let Some(account) = account {
            msg.move_to(account);
        }
        let env = Envelope::Message(msg);
        let pushed = match down_of {
            None => self.mailbox.push(env, account),
            Some(mref) => self.mailbox.push_if(env, account, |state| {
                state.remove_monitoring(mref).is_some()
            }),
        };
        match pushed {
            Ok(pushed) => {
                if let Pushed::WakeTask = pushed {
                    self.wake_task();
                }
                let max = self.max_queue_len.load(Ordering::Relaxed);
                if max != u32::MAX && self.mailbox.len() > max as usize {
                    self.set_pending_exit(ExitReason::MaxMessageQueueLen);
                    self.wake();
                }
                Ok(())
            }
            Err(Envelope::Message(msg)) => Err(msg),
            Err(Envelope::Signal(_)) => unreachable!("pushed a message"),
        }
    }

    /// Sets `max_message_queue_len`.
    pub(crate) fn set_max_queue_len(&self, max: usize) {
        self.max_queue_len
            .store(u32::try_from(max).unwrap_or(u32::MAX), Ordering::Relaxed);
    }

    pub(crate) fn push_signal(&self, signal: Signal) {
        // The wake below wakes the task whatever a receive asked for.
        if let Ok(_pushed) = self.mailbox.push(Envelope::Signal(Box::new(signal)), None) {
            self.flags.fetch_or(SIGNAL_PENDING, Ordering::Release);
            self.wake();
        }
    }

    /// Marks the process killed and wakes it; its next poll drops its future.
    pub(crate) fn kill(&self) {
        self.set_pending_exit(ExitReason::Killed);
        self.wake();
    }

    /// Wakes the process after a flag was set for it. The fence pairs with the one in
    /// [`Process::keep_task_waker`]: either this sees the waker, or the process's checkpoint
    /// after keeping it sees the flag.
    fn wake(&self) {
        self.note_woken();
        std::sync::atomic::fence(Ordering::SeqCst);
        if let Some(waker) = self.task_waker.get() {
            waker.wake_by_ref();
        }
    }

    /// The task's waker, once the process has kept it (see [`Process::keep_task_waker`]).
    #[inline]
    pub(crate) fn task_waker(&self) -> Option<&Waker> {
        self.task_waker.get()
    }

    /// Whether `waker` wakes this process's own task: the waker its polls are given, or the
    /// task's.
    #[inline]
    pub(crate) fn owns_waker(&self, waker: &Waker) -> bool {
        waker::is_of(waker, self) || self.task_waker.get().is_some_and(|t| t.will_wake(waker))
    }

    /// Wakes the task for a receive that waits with its waker (`Pushed::WakeTask`): the
    /// receive set its flag after the waker was kept, under the mailbox lock the push took.
    #[inline]
    fn wake_task(&self) {
        self.note_woken();
        if let Some(waker) = self.task_waker.get() {
            waker.wake_by_ref();
        }
    }

    /// Keeps the task's waker, before the process's first poll (run by the poll wrapper
    /// before its checkpoint): to wake it for signals, for its own wakers ([`waker`]) to
    /// wake, and for its call deadline if a call came before.
    #[cold]
    #[inline(never)]
    pub(crate) fn keep_task_waker(&self, waker: &Waker) {
        if self.task_waker.set(waker.clone()).is_ok()
            && let Some(timer) = self.call_timer.get()
        {
            timer.set_task(waker.clone());
        }
        // Pairs with the fence in `wake` (and the call timer's in `fire`): the checkpoint that
        // follows sees the flags set before a wake that missed the waker.
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    fn set_pending_exit(&self, reason: ExitReason) {
        let mut state = self.state();
        if state.pending_exit.is_none() {
            state.pending_exit = Some(reason);
        }
        drop(state);
        self.flags.fetch_or(EXIT_PENDING, Ordering::Release);
    }

    pub(crate) fn exit_pending(&self) -> bool {
        self.flags.load(Ordering::Acquire) & EXIT_PENDING != 0
    }

    /// Acts on an envelope taken from incoming (owner only). Returns the message to save, if
    /// it is one (a trapped exit signal becomes an [`Exit`] message).
    pub(crate) fn ingest(&self, env: Envelope) -> Option<Message> {
        match env {
            Envelope::Message(msg) => Some(msg),
            Envelope::Signal(signal) => match *signal {
                Signal::Exit {
                    from,
                    reason,
                    via_link,
                    to_self,
                } => {
                    if via_link && !self.remove_link(from) {
                        return None; // unlinked since: the signal no longer applies
                    }
                    if self.trap_exit.load(Ordering::Relaxed) {
                        Some(Message::new(Exit { from, reason }))
                    } else {
                        if !reason.is_normal() || to_self {
                            self.set_pending_exit(reason);
                        }
                        None
                    }
                }
            },
        }
    }

    /// Whether exit signals or a kill wait to be acted on.
    #[inline]
    fn has_flags(&self) -> bool {
        self.flags.load(Ordering::Acquire) != 0
    }

    /// At a poll boundary: acts on pending signals; returns the reason to exit with, if any
    /// (a pending exit, or going over the heap limit).
    fn take_exit(&self) -> Option<ExitReason> {
        let flags = self.flags.load(Ordering::Acquire);
        if flags & SIGNAL_PENDING != 0
            && self.flags.fetch_and(!SIGNAL_PENDING, Ordering::AcqRel) & SIGNAL_PENDING != 0
        {
            self.mailbox.drain_incoming(self);
        }
        if self.flags.load(Ordering::Acquire) & EXIT_PENDING != 0 {
            return self.state().pending_exit.clone();
        }
        if flags & HEAP_LIMITED != 0 && self.account.get().is_some_and(|a| a.over_limit()) {
            return Some(ExitReason::MaxHeapSize);
        }
        None
    }

    /// Sets `max_heap_size` (live bytes).
    pub(crate) fn set_heap_limit(&self, bytes: u64) {
        // Without the counting allocator there is no account (and spawn refuses a limit).
        if let Some(account) = self.account.get() {
            account.set_limit(bytes);
        }
        self.flags.fetch_or(HEAP_LIMITED, Ordering::Release);
    }

    pub(crate) fn set_trap_exit(&self, on: bool) -> bool {
        self.trap_exit.swap(on, Ordering::Relaxed)
    }

    /// Adds a link to `other`; false when this process has exited.
    pub(crate) fn add_link(&self, other: Pid) -> bool {
        let mut state = self.state();
        if !state.alive {
            return false;
        }
        if !state.links.as_slice().contains(&other) {
            state.links.push(other);
        }
        true
    }

    /// Removes the link to `other`; returns whether there was one.
    pub(crate) fn remove_link(&self, other: Pid) -> bool {
        self.state()
            .links
            .swap_remove_where(|p| *p == other)
            .is_some()
    }

    /// Forgets the link and monitor it was built with ([`Ties`]).
    /// Forgets the ties its spawner `parent` was given at spawn (a link to it, its monitor
    /// `monitor`), leaving those other processes made since.
    pub(crate) fn clear_ties_of(&self, parent: Option<Pid>, monitor: Option<MonitorRef>) {
        let Some(parent) = parent else {
            return;
        };
        let mut state = self.state();
        state.links.retain(|p| *p != parent);
        if let Some(mref) = monitor {
            state.monitored_by.retain(|(r, _)| *r != mref);
        }
    }

    pub(crate) fn add_monitored_by(&self, mref: MonitorRef, watcher: Pid) -> bool {
        let mut state = self.state();
        if !state.alive {
            return false;
        }
        state.monitored_by.push((mref, watcher));
        true
    }

    pub(crate) fn remove_monitored_by(&self, mref: MonitorRef) {
        self.state().monitored_by.retain(|(r, _)| *r != mref);
    }

    pub(crate) fn add_monitoring(&self, mref: MonitorRef, target: Pid) -> bool {
        let mut state = self.state();
        if !state.alive {
            return false;
        }
        state.monitoring.push((mref, target));
        true
    }

    /// Delivers the `Down` of a monitor this process holds, unless it was removed (by
    /// `demonitor`) first. Removal and delivery happen in one critical section, so no `Down`
    /// arrives after `demonitor` returns.
    pub(crate) fn fire_monitor(&self, down: Down) {
        let mref = down.monitor_ref;
        let _ = self.push_message_with(Message::new(down), Some(mref));
    }

    pub(crate) fn remove_monitoring(&self, mref: MonitorRef) -> Option<Pid> {
        self.state().remove_monitoring(mref)
    }

    /// Records `name` as this process's registered name; false if it has exited or has one.
    pub(crate) fn set_name(&self, name: &Name) -> Result<(), Option<Name>> {
        let mut state = self.state();
        if !state.alive {
            return Err(None);
        }
        if let Some(existing) = &state.name {
            return Err(Some(existing.clone()));
        }
        state.name = Some(name.clone());
        Ok(())
    }

    pub(crate) fn clear_name(&self) -> Option<Name> {
        self.state().name.take()
    }

    pub(crate) fn mark_supervisor(&self) {
        self.state().is_supervisor = true;
    }

    pub(crate) fn is_supervisor(&self) -> bool {
        self.state().is_supervisor
    }

    /// Why the process ended, once it has.
    pub(crate) fn exit_reason(&self) -> Option<&ExitReason> {
        self.exit_reason.get()
    }

    /// The deadline this process's calls re-arm.
    #[inline]
    pub(crate) fn call_timer(&self) -> &Arc<CallTimer> {
        self.call_timer
            .get_or_init(|| Arc::new(CallTimer::new(self.task_waker.get().cloned())))
    }

    /// Whether the process has begun to end (its future is being dropped, or its exit
    /// bookkeeping runs).
    pub(crate) fn is_exiting(&self) -> bool {
        // Its reason, not its status byte: set once, as it begins to end, and never undone.
        self.exit_reason.get().is_some()
    }

    /// Records why the process is ending, before its future is dropped, so that whatever
    /// that drop tells others (a call left unanswered) can name the reason. The first reason
    /// recorded stands.
    #[inline]
    pub(crate) fn begin_exit(&self, reason: ExitReason) {
        let _ = self.exit_reason.set(reason);
        self.status.store(STATUS_EXITING, Ordering::Relaxed);
    }

    /// The bookkeeping of an ending process, run inside it (or, when a runtime shuts down
    /// under it, wherever its task is dropped), `reason` recorded first unless one was. See
    /// [`finish_begun`](Self::finish_begun).
    fn finish(&self, reason: ExitReason) {
        self.begin_exit(reason);
        self.finish_begun();
    }

    /// The bookkeeping of an ending process whose reason is recorded
    /// ([`begin_exit`](Self::begin_exit)): what its poll runs after dropping its future,
    /// reading the reason where it is kept rather than a copy of it. Idempotent. Its callers
    /// never run at the same time (the process's task, or its spawner before the task
    /// exists), so the guard is a load and a store, not a read-modify-write.
    fn finish_begun(&self) {
        if self.finished.load(Ordering::Relaxed) {
            return;
        }
        self.finished.store(true, Ordering::Relaxed);
        // Last, or on the way out if anything below panics: its slot holds no count of its
        // own, so the process must leave it before its task lets go of it.
        let _leave = LeaveTable(self);
        let reason = match self.exit_reason.get() {
            Some(reason) => reason,
            None => &ExitReason::Normal,
        };
        // One critical section: later pushes fail, and later links and monitors see it dead.
        let (mut links, mut monitored_by, mut monitoring, mut name) =
            (Few::Zero, Few::Zero, Vec::new(), None);
        let Closed { incoming, saved } = self.mailbox.close(|state| {
            state.alive = false;
            std::mem::swap(&mut links, &mut state.links);
            std::mem::swap(&mut monitored_by, &mut state.monitored_by);
            std::mem::swap(&mut monitoring, &mut state.monitoring);
            std::mem::swap(&mut name, &mut state.name);
        });
        if let Some(name) = name {
            crate::heap::suppressed(|| crate::trace::remember_name(self, &name));
            self.node.registry.remove_if(&name, self.pid);
        }
        // Dropped here, inside the process, one at a time: a call request among them tells its
        // caller that the server died, and a message whose destructor panics does not keep
        // the others, or the links and monitors below, from being dealt with.
        if let Some(incoming) = incoming {
            for env in incoming {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(env)));
            }
        }
        if let Some(saved) = saved {
            for msg in saved {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(msg)));
            }
        }
        for pid in links {
            self.node.with_process_near(pid, |other| {
                send_exit_signal(other, self.pid, reason.clone(), true)
            });
        }
        for (monitor_ref, watcher) in monitored_by {
            self.node.with_process_near(watcher, |w| {
                w.fire_monitor(Down {
                    pid: self.pid,
                    reason: reason.clone(),
                    monitor_ref,
                })
            });
        }
        for (mref, target) in monitoring {
            self.node
                .with_process_near(target, |t| t.remove_monitored_by(mref));
        }
    }
}

/// The end of [`Process::finish`]: frees the process's slot and tells the node, when dropped
/// (also when `finish` unwinds).
struct LeaveTable<'a>(&'a Process);

impl Drop for LeaveTable<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.node.process_exited(self.0);
    }
}

#[cfg(test)]
mod tests {
    /// A process record with its `Arc`'s two counts, as glibc's allocator chunks it (an 8-byte
    /// header, 16-byte granules), stays within a 496-byte chunk: with the task cell's 272-byte
    /// chunk that makes six 128-byte lines, so that idle processes pack without gaps (see
    /// `benches/idle_memory.rs`; a 512-byte chunk costs about 110 bytes of RSS per process).
    #[test]
    fn the_record_fits_its_chunk() {
        let block = std::mem::size_of::<super::Process>() + 2 * std::mem::size_of::<usize>();
        let chunk = (block + 8).next_multiple_of(16);
        assert!(
            chunk <= 496,
            "a process record's block is {block} bytes, in a {chunk}-byte chunk: see \
             benches/idle_memory.rs before growing it"
        );
    }

    /// Keeping the future's type name unread ([`super::InitialCall`]) takes no more room
    /// than the call it stands for.
    #[test]
    fn an_initial_call_takes_the_room_of_a_cow() {
        assert_eq!(
            std::mem::size_of::<super::InitialCall>(),
            std::mem::size_of::<std::borrow::Cow<'static, str>>()
        );
    }

    /// A process spawned with no initial call reports the function its future names, and
    /// one given reports that, untouched.
    #[test]
    fn the_initial_call_is_read_from_the_future_or_as_given() {
        let node = crate::Node::builder()
            .current_thread()
            .build()
            .expect("node");
        let (default, given) = node
            .run(async {
                let default = crate::spawn(async {}).expect("spawn");
                let given = crate::spawn_opt(
                    async {},
                    crate::SpawnOptions::new().initial_call("app::given::{{closure}}"),
                )
                .expect("spawn");
                (
                    crate::process_info(default).map(|i| i.initial_call),
                    crate::process_info(given.pid).map(|i| i.initial_call),
                )
            })
            .expect("ran");
        let default = default.expect("alive: not polled yet");
        // A block inside this test's own: one `{{closure}}` taken off (the other stays).
        assert!(
            default.ends_with("the_initial_call_is_read_from_the_future_or_as_given::{{closure}}"),
            "{default}"
        );
        assert_eq!(given.as_deref(), Some("app::given::{{closure}}"));
    }
}
