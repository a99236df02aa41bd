//! The traced calls' entries into the stack: a synchronous call's [`FrameGuard`], which pushes
//! its frame on entry (inline in the commonest cases, [`FrameGuard::enter_lean`]) and pops it
//! when dropped, an async call's poll in its frame ([`poll_in_frame`]), and both made where no
//! poll is measured, as calls outside processes ([`crate::trace::outside`]).
//!
//! Uses the lean, sample and general pushes and pops, which it chooses between.

use std::sync::atomic::Ordering;

use super::clock::rdtsc;
use super::general::{pop_any, push_in};
use super::lean::{
    charge_quick, count_sample, pop_lean, pop_sample, push_lean, push_sample, push_sample_frame,
};
use super::{Accumulator, CAPACITY, Stack, bump, record_restore, with_stack};
use crate::trace::Callsite;

/// Pops a synchronous call's frame pushed by [`push_lean`]. Finds the stack itself: the
/// caller keeps nothing live across the traced body for it.
#[inline(never)]
fn pop_sync_lean() {
    with_stack(pop_lean_sync);
}

/// Pops a synchronous call's frame pushed by [`push_sample`] ([`PUSHED_SAMPLE`]), finding the
/// stack itself: out of line and taking nothing, as [`pop_quick_out`].
#[inline(never)]
fn pop_sample_out() {
    with_stack(|s| pop_sample(s, false));
}

/// Pops a synchronous call's frame pushed by [`push_in`] (`pushed` is [`PUSHED`]) or by
/// [`enter_outside`] ([`PUSHED_OUTSIDE`]); finds the stack itself.
#[inline(never)]
fn pop_sync_any(pushed: u32) {
    std::hint::cold_path();
    if pushed == PUSHED_OUTSIDE {
        return pop_outside();
    }
    pop_sync()
}

/// Leaves the top frame, kept at `depth`, of a flat lean poll once it is charged: its
/// caller's frame is the innermost again.
#[inline(always)]
fn pop_kept(s: &Stack, depth: usize) {
    s.depth.set(depth);
    s.lean_current.set(s.parents[depth].get());
    record_restore(s, s.ids[depth].get());
}

/// Pops a synchronous call's frame pushed by [`FrameGuard::enter_quick`], finding the stack
/// itself: in the common case (a frame kept on the stack is the top one, and nothing was
/// allocated since the last event: the poll measures nothing else) it leaves it with nothing to
/// charge; any other case takes [`pop_lean_sync`], which pops the top frame as the other
/// entries' pops do.
///
/// Out of line, and taking nothing: in this library the stack is found by a call to the
/// thread-local resolver (which the linker relaxes, but not the registers saved around it), so
/// that any value the pop were given would be saved and restored around it. The top frame's
/// depth is read back from the stack, as [`pop_lean_sync`] reads it. Inline, the pops made the
/// guard's drop large enough that the compiler left its drop glue a call of its own in large
/// traced functions (`send`: +16 Ir per ping-pong round trip).
#[inline(never)]
fn pop_quick_out() {
    with_stack(|s| {
        let depth = s.depth.get().wrapping_sub(1);
        if depth < CAPACITY && s.blocks.get().load(Ordering::Relaxed) == s.last_mem.get()[2] {
            pop_kept(s, depth);
            return;
        }
        std::hint::cold_path();
        pop_lean_sync_full(s);
    });
}

/// Pops a synchronous call's frame pushed by [`FrameGuard::enter_timed`], finding the stack
/// itself: in the common case (a frame kept on the stack is the top one: the poll measures time
/// from the time-stamp counter and nothing else) it charges the clock to it and leaves it, with
/// no test of what the poll measures; any other case takes [`pop_lean_sync`]. Out of line and
/// taking nothing, as [`pop_quick_out`].
#[inline(never)]
fn pop_timed_out() {
    with_stack(|s| {
        let depth = s.depth.get().wrapping_sub(1);
        if depth < CAPACITY {
            let now = rdtsc();
            let dt = now.saturating_sub(s.last_ticks.replace(now));
            if let Some(acc) = s.lean_current.get() {
                bump(&acc.ticks, dt);
            }
            pop_kept(s, depth);
            return;
        }
        std::hint::cold_path();
        pop_lean_sync_full(s);
    });
}

/// Pops a synchronous call's frame pushed as `pushed` says, other than [`PUSHED_TIMED`]
/// (which the guard's drop pops itself): the drop's one call for the rest, each of which
/// takes one further call (a jump), with nothing saved around it.
#[inline(never)]
fn pop_other(pushed: u32) {
    if pushed == PUSHED_QUICK {
        pop_quick_out();
    } else if pushed == PUSHED_LEAN {
        pop_sync_lean();
    } else if pushed == PUSHED_SAMPLE {
        pop_sample_out();
    } else {
        pop_sync_any(pushed);
    }
}

/// Pops a synchronous call's frame pushed by [`push_in`]; finds the stack itself.
#[inline(never)]
fn pop_sync() {
    with_stack(|s| pop_any(s, false));
}

/// Pops a synchronous call's frame pushed by [`push_lean`]. Its common case, a kept frame
/// with nothing to charge, takes no call (nor saves a register).
#[inline(always)]
fn pop_lean_sync(s: &Stack) {
    let depth = s.depth.get();
    if depth.wrapping_sub(1) >= CAPACITY || !charge_quick(s) {
        return pop_lean_sync_full(s);
    }
    let depth = depth - 1;
    s.depth.set(depth);
    s.lean_current.set(s.parents[depth].get());
    record_restore(s, s.ids[depth].get());
}

#[inline(never)]
fn pop_lean_sync_full(s: &Stack) {
    pop_lean(s, false);
}

/// A call of `callsite` that some session wants (`mask`) and that the inlined cases did not
/// take: counts it for the sessions that count, and pushes a frame for those measuring this
/// poll, if any. One call out of line for the whole entry ([`FrameGuard::enter_call`], which
/// this is inlined into); its common case in a lean poll with nothing to charge takes no
/// further call.
#[inline(always)]
fn enter_call_in(s: &Stack, callsite: &'static Callsite, mask: u64) -> FrameGuard {
    // Every session of `mask` measures and none counts (one load), and the poll is lean for
    // one of them.
    if mask & s.lean.get() == 0 || mask & crate::trace::measure::not_lean() != 0 {
        // Or a sample poll's session wants it, and no session counts it apart.
        if mask & s.sample.get() != 0 && mask & crate::trace::measure::not_lean() == 0 {
            push_sample(s, callsite.id() as u32, true);
            return FrameGuard::of(PUSHED_SAMPLE);
        }
        return enter_call_full(s, callsite, mask);
    }
    let depth = s.depth.get();
    let table = s.lean_table.get();
    let id = callsite.raw_id();
    if id >= table.len() || depth >= CAPACITY || !table[id].touched.load(Ordering::Relaxed) {
        return enter_call_full(s, callsite, mask);
    }
    let acc = &table[id];
    if !charge_quick(s) {
        return enter_call_full(s, callsite, mask);
    }
    push_kept(s, depth, id, acc);
    FrameGuard::of(PUSHED_LEAN)
}

/// [`enter_call_in`] in every case.
#[inline(never)]
fn enter_call_full(s: &Stack, callsite: &'static Callsite, mask: u64) -> FrameGuard {
    if mask & crate::trace::measure::counting() != 0 {
        crate::trace::record_call(callsite, mask);
    }
    let mask = mask & crate::trace::measure::measuring();
    if mask == 0 {
        return FrameGuard::NONE;
    }
    if s.active.get() == 0 {
        // No measured poll here: a process no session measures (one thread-local load tells),
        // or perhaps a call outside any process.
        if crate::context::current_node_id() & crate::context::OUTSIDE == 0 {
            return FrameGuard::NONE;
        }
        return enter_outside(callsite, mask);
    }
    push_call(s, callsite, mask)
}

/// Pushes the frame of a synchronous call of `callsite` for the sessions of `mask` that
/// measure this poll, if any.
#[inline(always)]
fn push_call(s: &Stack, callsite: &'static Callsite, mask: u64) -> FrameGuard {
    let id = callsite.id() as u32;
    if mask & s.lean.get() != 0 {
        push_lean(s, id, true);
        // A call-tree frame is popped by `pop_lean`, which restores its path too.
        let pushed = if s.lean_tree.get() {
            PUSHED
        } else {
            PUSHED_LEAN
        };
        return FrameGuard::of(pushed);
    }
    let mask = mask & s.active.get();
    if mask != 0 {
        if s.sample.get() != 0 {
            push_sample(s, id, true);
            return FrameGuard::of(PUSHED_SAMPLE);
        }
        push_in(s, id, mask, true, 0);
        return FrameGuard::of(PUSHED);
    }
    FrameGuard::NONE
}

/// Enters a synchronous call of `callsite`, wanted by the measuring sessions of `mask`, made
/// where no poll is measured: outside any process, it is measured as a call outside processes
/// ([`crate::trace::outside`]) until it returns, if a session of `mask` measures those here.
#[cold]
#[inline(never)]
fn enter_outside(callsite: &'static Callsite, mask: u64) -> FrameGuard {
    let sessions = crate::trace::outside::begin(mask);
    if sessions == 0 {
        return FrameGuard::NONE;
    }
    let mut guard = with_stack(|s| push_call(s, callsite, sessions));
    if !guard.pushed() {
        crate::trace::outside::end();
        return guard;
    }
    // Popped as the outermost frame, which ends the measure.
    guard.pushed = PUSHED_OUTSIDE;
    guard
}

/// Leaves the outermost frame of a call outside processes, and ends its measure (unless a
/// poll that began inside it ended it already).
#[cold]
#[inline(never)]
fn pop_outside() {
    if crate::trace::outside::active() {
        with_stack(|s| pop_any(s, false));
        crate::trace::outside::end();
    }
}

/// [`poll_in_frame`] where no poll is measured: outside any process, the poll is measured as a
/// call outside processes ([`crate::trace::outside`]) for the sessions of `mask` that measure
/// those here.
#[cold]
#[inline(never)]
fn poll_outside<R>(
    id: u32,
    mask: u64,
    call: bool,
    polled: &mut u64,
    poll: impl FnOnce() -> std::task::Poll<R>,
) -> std::task::Poll<R> {
    let sessions = crate::trace::outside::begin(mask);
    if sessions == 0 {
        return poll();
    }
    /// Ends the measure when dropped, on unwind too.
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            crate::trace::outside::end();
        }
    }
    let _end = End;
    with_stack(|s| {
        if s.lean.get() != 0 {
            push_lean(s, id, call);
        } else {
            push_in(s, id, sessions, call, *polled);
        }
    });
    let out = poll();
    // Unless a poll that began inside it ended the measure.
    if crate::trace::outside::active()
        && let Some(so_far) = with_stack(|s| pop_any(s, out.is_pending()))
    {
        *polled = so_far;
    }
    out
}

/// In a flat lean poll, where a call of `callsite` is kept and its function's accumulator
/// already touched in this poll: (the stack's depth, the callsite's id, that accumulator);
/// `None` otherwise.
#[inline(always)]
fn kept_touched(s: &Stack, callsite: &Callsite) -> Option<(usize, usize, &'static Accumulator)> {
    let depth = s.depth.get();
    let table = s.lean_table.get();
    let id = callsite.raw_id();
    if depth >= CAPACITY || id >= table.len() {
        return None;
    }
    let acc = &table[id];
    acc.touched
        .load(Ordering::Relaxed)
        .then_some((depth, id, acc))
}

/// The rest of [`push_lean`] for a call of function `id` kept at `depth`, whose accumulator
/// is `acc`: counts the call and makes its frame the innermost, its function before the depth
/// that shows it to the signal handler (see `sigcell`).
#[inline(always)]
fn push_kept(s: &Stack, depth: usize, id: usize, acc: &'static Accumulator) {
    push_kept_under(s, depth, id, acc, s.lean_current.get());
}

/// [`push_kept`] where the innermost frame's accumulator, `parent`, is already read.
#[inline(always)]
fn push_kept_under(
    s: &Stack,
    depth: usize,
    id: usize,
    acc: &'static Accumulator,
    parent: Option<&'static Accumulator>,
) {
    bump(&acc.calls, 1);
    s.parents[depth].set(parent);
    s.lean_current.set(Some(acc));
    s.ids[depth + 1].set(id as u32);
    s.depth.set(depth + 1);
    s.function.get().store(id as u32, Ordering::Relaxed);
}

/// No frame pushed.
const NOT_PUSHED: u32 = 0;
/// A frame pushed by [`push_in`].
const PUSHED: u32 = 1;
/// A synchronous call's frame pushed by [`push_lean`].
const PUSHED_LEAN: u32 = 2;
/// The outermost frame of a call outside processes ([`enter_outside`]).
const PUSHED_OUTSIDE: u32 = 3;
/// A synchronous call's frame pushed by [`push_sample`].
const PUSHED_SAMPLE: u32 = 4;
/// A synchronous call's frame pushed by [`FrameGuard::enter_quick`].
const PUSHED_QUICK: u32 = 5;
/// A synchronous call's frame pushed by [`FrameGuard::enter_timed`].
const PUSHED_TIMED: u32 = 6;

/// A frame on the traced stack, popped when dropped (on unwind too) unless its pusher pops
/// it itself ([`poll_in_frame`]).
pub(crate) struct FrameGuard {
    pushed: u32,
}

impl FrameGuard {
    /// No frame.
    pub(crate) const NONE: FrameGuard = FrameGuard::of(NOT_PUSHED);

    /// A frame pushed as `pushed` says.
    const fn of(pushed: u32) -> FrameGuard {
        FrameGuard { pushed }
    }

    /// Enters a synchronous call of `callsite`, which the sessions of `mask` want: counts it
    /// for those that count, and pushes a frame for those that measure this poll, if any.
    #[inline(never)]
    pub(crate) fn enter_call(callsite: &'static Callsite, mask: u64) -> FrameGuard {
        with_stack(|s| enter_call_in(s, callsite, mask))
    }

    /// A synchronous call of `callsite` in the lean poll's common cases, inline where it is
    /// called: the sessions of `mask` are exactly the one measuring this lean poll, in flat
    /// mode, counting no calls apart, and measuring time from the time-stamp counter alone
    /// ([`Stack::timed`]: [`enter_timed`](Self::enter_timed)) or memory alone ([`Stack::quick`]:
    /// [`enter_quick`](Self::enter_quick)). `None`, having done nothing, in every other case.
    #[inline(always)]
    pub(crate) fn enter_lean(callsite: &'static Callsite, mask: u64) -> Option<FrameGuard> {
        with_stack(|s| {
            if mask == s.timed.get() {
                return Self::enter_timed(s, callsite);
            }
            if mask == s.quick.get() {
                return Self::enter_quick(s, callsite);
            }
            if mask == s.sample.get() && mask & crate::trace::measure::not_lean() == 0 {
                // A sample poll's, its session measuring (not paused): the call's only
                // session.
                return Some(Self::enter_sample(callsite.id() as u32));
            }
            None
        })
    }

    /// [`enter_lean`](Self::enter_lean) in a sample poll whose session alone wants the call of
    /// function `id`: pushes its frame and counts it (as [`push_sample`] does), in one call out
    /// of line that takes the id alone, and returns its guard, whose pop ([`pop_sample_out`])
    /// reads the stack back. (It still saves registers around the count's thread-local, a
    /// second one: 42 Ir of the sample session's +100 per call are here.)
    #[inline(never)]
    fn enter_sample(id: u32) -> FrameGuard {
        // The frame first and the count last: one instruction fewer than the other order.
        with_stack(|s| {
            push_sample_frame(s, id);
            count_sample(s, id);
        });
        FrameGuard::of(PUSHED_SAMPLE)
    }

    /// [`enter_lean`](Self::enter_lean) in a poll measuring time alone: the call is kept on
    /// the stack and its function's accumulator is already touched in this poll. Charges the
    /// clock to the caller, pushes the frame as [`push_lean`] would and returns its guard,
    /// whose pop ([`pop_timed_out`]) reads the depth back; `None`, having done nothing,
    /// otherwise.
    #[inline(always)]
    fn enter_timed(s: &Stack, callsite: &Callsite) -> Option<FrameGuard> {
        let (depth, id, acc) = kept_touched(s, callsite)?;
        let now = rdtsc();
        let dt = now.saturating_sub(s.last_ticks.replace(now));
        // Read once: the charge's store could otherwise be taken to change it.
        let parent = s.lean_current.get();
        if let Some(parent) = parent {
            bump(&parent.ticks, dt);
        }
        push_kept_under(s, depth, id, acc, parent);
        Some(FrameGuard::of(PUSHED_TIMED))
    }

    /// [`enter_lean`](Self::enter_lean) in a poll measuring memory alone: the call is kept on
    /// the stack, its function's accumulator is already touched in this poll, and nothing was
    /// allocated since the last event. Pushes its frame as [`push_lean`] would and returns its
    /// guard, whose pop ([`pop_quick_out`]) reads the depth back; `None`, having done nothing,
    /// otherwise.
    #[inline(always)]
    fn enter_quick(s: &Stack, callsite: &Callsite) -> Option<FrameGuard> {
        // Something allocated since the last event (common where the call does real work):
        // such a call gives up here at the least cost, before the stack's other fields are
        // read.
        if s.blocks.get().load(Ordering::Relaxed) != s.last_mem.get()[2] {
            return None;
        }
        let (depth, id, acc) = kept_touched(s, callsite)?;
        push_kept(s, depth, id, acc);
        Some(FrameGuard::of(PUSHED_QUICK))
    }

    /// Whether a frame was pushed.
    #[inline(always)]
    pub(crate) fn pushed(&self) -> bool {
        self.pushed != NOT_PUSHED
    }
}

/// Runs `poll`, one poll of an async call of function `id`, in the call's frame: pushed for
/// the sessions of `mask` that measure this poll, if any (`call` at the call's first poll), and
/// popped when `poll` returns or unwinds. `polled`: the clock ticks charged to the call in
/// its earlier polls, exclusive of the traced calls it made (its own time, for its duration),
/// brought up to date when a poll recording durations pops the frame.
///
/// The thread's stack is found once for the push and the pop; a lean poll's push and pop are
/// inline (their uncommon cases out of line).
#[inline(always)]
pub(crate) fn poll_in_frame<R>(
    id: u32,
    mask: u64,
    call: bool,
    polled: &mut u64,
    poll: impl FnOnce() -> std::task::Poll<R>,
) -> std::task::Poll<R> {
    with_stack(|s| {
        let mut guard = FrameGuard::NONE;
        if mask & s.lean.get() != 0 {
            push_lean(s, id, call);
            guard.pushed = PUSHED;
        } else if mask & s.sample.get() != 0 {
            // A sample poll (its session is then the only one active): one test, not two.
            push_sample(s, id, call);
            guard.pushed = PUSHED_SAMPLE;
        } else if mask & s.active.get() != 0 {
            push_in(s, id, mask & s.active.get(), call, *polled);
            guard.pushed = PUSHED;
        } else if s.active.get() == 0 {
            // No measured poll here: perhaps a call outside any process.
            return poll_outside(id, mask, call, polled, poll);
        }
        // Popped by `guard` if this unwinds.
        let out = poll();
        if guard.pushed != NOT_PUSHED {
            let pushed = std::mem::replace(&mut guard.pushed, NOT_PUSHED);
            let pending = out.is_pending();
            let so_far = if s.lean.get() != 0 {
                pop_lean(s, pending);
                None
            } else if pushed == PUSHED_SAMPLE {
                pop_sample(s, pending);
                None
            } else {
                pop_any(s, pending)
            };
            if let Some(so_far) = so_far {
                *polled = so_far;
            }
        }
        out
    })
}

impl Drop for FrameGuard {
    #[inline(always)]
    fn drop(&mut self) {
        // This shape (one comparison with a constant, then the rest out of line) lets the
        // compiler keep a small traced body's inlined cases free of any test here, and the
        // drop small enough to be inlined into large traced functions (an if-chain of equal
        // tests became a jump table, which a guard of no frame paid too). The one constant is
        // the time-only inline entry's, whose pop takes no argument.
        if self.pushed == PUSHED_TIMED {
            pop_timed_out();
        } else if self.pushed != NOT_PUSHED {
            pop_other(self.pushed);
        }
    }
}
