//! The traced stack: per worker thread, the traced calls of the process being polled.
//!
//! Frames never outlive a poll: each poll of a traced future pushes its frame and pops it when
//! the poll returns (or unwinds), and a synchronous traced call pushes on entry and pops on
//! return; `join!` and `select!` nest within one poll. So one fixed-capacity stack per thread
//! serves every process, costs nothing per process and never allocates. Calls nested deeper
//! than [`CAPACITY`] are counted, and their time and memory go to the deepest frame kept.
//!
//! Between two events (a push, a pop, the start or end of a poll) the time that passed and
//! the memory the process allocated are charged to the frame on top: the innermost traced call,
//! exclusive of its traced callees and inclusive of untraced ones. A popped frame's figures are
//! added, per session that measures it, to the thread's scratch table, which the end of the
//! poll flushes into the process's own table ([`super::measure`]).
//!
//! Only processes that a session measures (call_time or call_memory, and a trace flag) touch
//! this stack; for every other poll the cost is two relaxed loads in the poll wrapper.

use std::cell::{Cell, RefCell};
use std::sync::OnceLock;

use super::measure::{Acc, Scratch};
use crate::heap::Account;

/// Frames kept per thread; deeper calls are charged to the deepest frame kept.
pub const CAPACITY: usize = 128;

/// `u32::MAX`: no function.
pub(crate) const NO_FUNCTION: u32 = u32::MAX;

struct Slot {
    id: Cell<u32>,
    /// The sessions this frame is measured for.
    mask: Cell<u64>,
    acc: Cell<Acc>,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            id: Cell::new(NO_FUNCTION),
            mask: Cell::new(0),
            acc: Cell::new(Acc::ZERO),
        }
    }
}

struct Stack {
    depth: Cell<usize>,
    /// Calls deeper than `CAPACITY` now open.
    overflow: Cell<usize>,
    /// The sessions measuring the process being polled; 0 between polls.
    active: Cell<u64>,
    /// Whether one of them measures time.
    timing: Cell<bool>,
    /// The process's account, when one of them measures memory.
    memory: Cell<Option<&'static Account>>,
    /// The process's account, to record its current function in.
    account: Cell<Option<&'static Account>>,
    last_ticks: Cell<u64>,
    last_mem: Cell<[u64; 3]>,
    /// A pending poll has recorded where the process is suspended.
    suspended: Cell<bool>,
    slots: [Slot; CAPACITY],
}

thread_local! {
    // `const` and without a destructor: no registration, nothing to run at thread exit.
    static STACK: Stack = const {
        Stack {
            depth: Cell::new(0),
            overflow: Cell::new(0),
            active: Cell::new(0),
            timing: Cell::new(false),
            memory: Cell::new(None),
            account: Cell::new(None),
            last_ticks: Cell::new(0),
            last_mem: Cell::new([0; 3]),
            suspended: Cell::new(false),
            slots: [const { Slot::new() }; CAPACITY],
        }
    };
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The TSC clock call_time reads, set up (calibrated) by the first session that measures time.
static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();

/// Calibrates the clock, once; the first call takes a few milliseconds.
pub(crate) fn clock() -> &'static quanta::Clock {
    CLOCK.get_or_init(|| crate::heap::suppressed(quanta::Clock::new))
}

/// The clock, if a session measuring time ever set it up.
pub(crate) fn clock_if_set() -> Option<&'static quanta::Clock> {
    CLOCK.get()
}

#[inline(always)]
fn ticks() -> u64 {
    CLOCK.get().map_or(0, quanta::Clock::raw)
}

/// The sessions measuring the process this thread polls (0 outside such a poll).
#[inline(always)]
pub(crate) fn active() -> u64 {
    STACK.with(|s| s.active.get())
}

/// Starts measuring a poll of a process for the sessions in `active` (non-zero).
pub(crate) fn begin_poll(active: u64, timing: bool, memory: bool, account: &'static Account) {
    STACK.with(|s| {
        s.active.set(active);
        s.timing.set(timing);
        s.memory.set(memory.then_some(account));
        s.account.set(Some(account));
        s.suspended.set(false);
        // Frames never outlive a poll; start clean whatever happened before.
        s.depth.set(0);
        s.overflow.set(0);
        if timing {
            s.last_ticks.set(ticks());
        }
        if memory {
            s.last_mem.set(account.owner_totals());
        }
    });
}

/// Ends the measured poll: what the scratch table gathered goes to the process's table.
pub(crate) fn end_poll(process: &crate::process::Process) {
    STACK.with(|s| {
        if s.depth.get() > 0 {
            // Only when a frame guard was leaked (mem::forget): close what is open.
            while s.depth.get() > 0 {
                pop_frame(s, false);
            }
        }
        s.active.set(0);
        s.memory.set(None);
        s.account.set(None);
    });
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        if scratch.has_data() {
            crate::heap::suppressed(|| super::measure::flush(process, &mut scratch));
        }
    });
}

/// Charges what passed since the last event to the frames on top, and restarts the count.
#[inline(always)]
fn charge(s: &Stack) {
    let mut delta = Acc::ZERO;
    if s.timing.get() {
        let now = ticks();
        delta.ticks = now.saturating_sub(s.last_ticks.get());
        s.last_ticks.set(now);
    }
    if let Some(account) = s.memory.get() {
        let now = account.owner_totals();
        let last = s.last_mem.replace(now);
        delta.words = now[0].wrapping_sub(last[0]);
        delta.bytes = now[1].wrapping_sub(last[1]);
        delta.blocks = now[2].wrapping_sub(last[2]);
    }
    let depth = s.depth.get();
    if depth == 0 {
        return;
    }
    let top = &s.slots[depth - 1];
    top.acc.set(top.acc.get().plus(&delta));
    let rest = s.active.get() & !top.mask.get();
    if rest != 0 {
        charge_lower(s, rest, &delta);
    }
}

/// Sessions that do not measure the top frame: the delta goes to their own innermost frame.
#[cold]
fn charge_lower(s: &Stack, mut rest: u64, delta: &Acc) {
    let depth = s.depth.get();
    while rest != 0 {
        let bit = rest.trailing_zeros();
        rest &= rest - 1;
        if let Some(slot) = s.slots[..depth]
            .iter()
            .rev()
            .find(|f| f.mask.get() & (1 << bit) != 0)
        {
            merge(bit, slot.id.get(), delta);
        }
    }
}

/// Adds `acc` to the scratch table for session `bit`, function `id`.
#[inline]
fn merge(bit: u32, id: u32, acc: &Acc) {
    SCRATCH.with(|scratch| scratch.borrow_mut().add(bit, id, acc));
}

/// Enters a frame of function `id` for the sessions in `mask` (measuring this process);
/// `call` when this is the call's entry (its first poll) rather than a later poll of it.
#[inline]
fn push(id: u32, mask: u64, call: bool) {
    STACK.with(|s| {
        charge(s);
        let depth = s.depth.get();
        if depth == CAPACITY {
            s.overflow.set(s.overflow.get() + 1);
            if call {
                let one = Acc {
                    calls: 1,
                    ..Acc::ZERO
                };
                let mut m = mask;
                while m != 0 {
                    let bit = m.trailing_zeros();
                    m &= m - 1;
                    merge(bit, id, &one);
                }
            }
            return;
        }
        let slot = &s.slots[depth];
        slot.id.set(id);
        slot.mask.set(mask);
        slot.acc.set(Acc {
            calls: u64::from(call),
            ..Acc::ZERO
        });
        s.depth.set(depth + 1);
        if let Some(account) = s.account.get() {
            account.set_current_function(id);
        }
    });
}

/// Leaves the top frame; `pending` when it is a future's poll that returned `Pending`.
#[inline]
fn pop(pending: bool) {
    STACK.with(|s| {
        if s.overflow.get() > 0 {
            s.overflow.set(s.overflow.get() - 1);
            return;
        }
        if s.depth.get() == 0 {
            return; // the poll it was pushed in has ended (cannot happen through the guards)
        }
        charge(s);
        let id = pop_frame(s, pending);
        if let Some(account) = s.account.get() {
            if pending {
                if !s.suspended.replace(true) {
                    account.set_current_function(id);
                }
            } else if !s.suspended.get() {
                let depth = s.depth.get();
                let parent = if depth == 0 {
                    NO_FUNCTION
                } else {
                    s.slots[depth - 1].id.get()
                };
                account.set_current_function(parent);
            }
        }
    });
}

/// Removes the top frame and merges its figures; returns its function.
#[inline]
fn pop_frame(s: &Stack, _pending: bool) -> u32 {
    let depth = s.depth.get() - 1;
    s.depth.set(depth);
    let slot = &s.slots[depth];
    let acc = slot.acc.get();
    let id = slot.id.get();
    if !acc.is_zero() {
        let mut mask = slot.mask.get() & s.active.get();
        while mask != 0 {
            let bit = mask.trailing_zeros();
            mask &= mask - 1;
            merge(bit, id, &acc);
        }
    }
    id
}

/// A frame on the traced stack, popped when dropped (on unwind too) or by
/// [`FrameGuard::leave`].
pub(crate) struct FrameGuard {
    pushed: bool,
}

impl FrameGuard {
    /// No frame.
    pub(crate) const NONE: FrameGuard = FrameGuard { pushed: false };

    /// Pushes a frame of `id` for the sessions of `mask` that measure this poll, if any.
    #[inline]
    pub(crate) fn enter(id: u32, mask: u64, call: bool) -> FrameGuard {
        let mask = mask & active();
        if mask != 0 {
            push(id, mask, call);
        }
        FrameGuard { pushed: mask != 0 }
    }

    /// Whether a frame was pushed.
    #[inline(always)]
    pub(crate) fn pushed(&self) -> bool {
        self.pushed
    }

    /// Pops the frame after a poll returned (`pending` when it returned `Pending`).
    #[inline]
    pub(crate) fn leave(mut self, pending: bool) {
        if self.pushed {
            self.pushed = false;
            pop(pending);
        }
    }
}

impl Drop for FrameGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.pushed {
            pop(false);
        }
    }
}
