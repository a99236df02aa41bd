//! The fast paths: the push and pop of a lean poll (one session, no event log or histograms,
//! time from the time-stamp counter), with its charging, and those of a sample poll, which
//! keeps its frames and counts its calls and measures nothing.
//!
//! Uses the stack's state ([`super::Stack`]), the time-stamp counter, the general path's
//! [`touch`] and the call-tree paths ([`crate::trace::tree`]).

use std::sync::atomic::Ordering;

use super::clock::rdtsc;
use super::general::touch;
use super::{Accumulator, CAPACITY, Stack, bump, record_pending, record_restore, tree};
use crate::heap::Counts;

/// Adds what passed since the last event to the innermost frame's accumulator, in a lean
/// poll.
#[inline(always)]
fn charge_lean(s: &Stack) {
    if s.tsc.get() {
        let now = rdtsc();
        let dt = now.saturating_sub(s.last_ticks.replace(now));
        if let Some(acc) = s.lean_current.get() {
            bump(&acc.ticks, dt);
        }
    }
    if let Some(counts) = s.memory.get() {
        // Most calls allocate nothing between two events: one load tells.
        if counts.blocks() != s.last_mem.get()[2] {
            charge_memory_lean(s, counts);
        }
    }
}

#[cold]
#[inline(never)]
fn charge_memory_lean(s: &Stack, counts: &Counts) {
    let last = s.last_mem.get();
    let now = counts.totals();
    s.last_mem.set(now);
    if let Some(acc) = s.lean_current.get() {
        bump(&acc.words, now[0].wrapping_sub(last[0]));
        bump(&acc.bytes, now[1].wrapping_sub(last[1]));
        bump(&acc.blocks, now[2].wrapping_sub(last[2]));
    }
}

/// [`push_in`](super::general::push_in) in a lean poll: enters a frame of function `id` for the
/// one session measuring it; `call` when this is the call's entry. A lean poll records no call
/// durations (no session measuring it asks for them), so it keeps no frame's own time.
#[inline(always)]
pub(super) fn push_lean(s: &Stack, id: u32, call: bool) {
    charge_lean(s);
    let depth = s.depth.get();
    let acc = if s.lean_tree.get() {
        push_lean_tree(s, id, depth)
    } else {
        let acc = &s.lean_table.get()[id as usize];
        if !acc.touched.load(Ordering::Relaxed) {
            touch(s, acc, s.lean_slot.get(), id);
        }
        acc
    };
    if call {
        bump(&acc.calls, 1);
    }
    if depth >= CAPACITY {
        s.depth.set(depth + 1);
        return; // counted; its time and memory go to the deepest frame kept
    }
    s.parents[depth].set(s.lean_current.replace(Some(acc)));
    // Its function before the depth that shows it to the signal handler (see `sigcell`).
    s.ids[depth + 1].set(id);
    s.depth.set(depth + 1);
    s.function.get().store(id, Ordering::Relaxed);
}

/// [`push_lean`] in call-tree mode, at `depth`: enters the path extending the innermost
/// frame's with a call of `id` (its path, unless the frame is deeper than the stack) and
/// returns its accumulator, marked touched; the pop restores the path from `parent_paths`.
#[inline(never)]
pub(super) fn push_lean_tree(s: &Stack, id: u32, depth: usize) -> &'static Accumulator {
    let bit = s.lean_slot.get();
    let parent = s.lean_path.get();
    let (path, acc) = tree::enter(bit as usize, parent, id);
    if !acc.touched.load(Ordering::Relaxed) {
        touch(s, acc, bit, path);
    }
    if depth < CAPACITY {
        s.parent_paths[depth].set(parent);
        s.lean_path.set(path);
    }
    acc
}

/// [`pop_checked`](super::general::pop_checked) in a lean poll: leaves the top frame (`pending`
/// when it is a future's poll that returned `Pending`).
#[inline(always)]
pub(super) fn pop_lean(s: &Stack, pending: bool) {
    let depth = s.depth.get();
    if depth.wrapping_sub(1) >= CAPACITY {
        // Deeper than the stack (nothing kept), or its poll has ended (a leaked guard).
        if depth > 0 {
            s.depth.set(depth - 1);
        }
        return;
    }
    charge_lean(s);
    let depth = depth - 1;
    s.depth.set(depth);
    s.lean_current.set(s.parents[depth].get());
    if s.lean_tree.get() {
        s.lean_path.set(s.parent_paths[depth].get());
    }
    if pending {
        record_pending(s, s.ids[depth + 1].get());
    } else {
        record_restore(s, s.ids[depth].get());
    }
}

/// Enters a frame of function `id` in a sample poll ([`Stack::sample`]); `call` when this is
/// the call's entry, which is counted for the poll's session in this thread's counters. The
/// frame's function is written before the depth that makes it visible to the signal handler
/// (see [`crate::trace::sigcell`]).
#[inline(always)]
pub(super) fn push_sample(s: &Stack, id: u32, call: bool) {
    if call {
        count_sample(s, id);
    }
    push_sample_frame(s, id);
}

/// [`push_sample`]'s count of a call of function `id`, for the sample poll's session.
#[inline(always)]
pub(super) fn count_sample(s: &Stack, id: u32) {
    let bit = s.sample.get().trailing_zeros();
    crate::trace::session::count_sampled(id, bit, s.generations[bit as usize].get());
}

/// [`push_sample`]'s frame of function `id`.
#[inline(always)]
pub(super) fn push_sample_frame(s: &Stack, id: u32) {
    let depth = s.depth.get();
    if depth < CAPACITY {
        s.ids[depth + 1].set(id);
        s.function.get().store(id, Ordering::Relaxed);
    }
    // Deeper than the stack: counted, not kept.
    s.depth.set(depth + 1);
}

/// Leaves the top frame in a sample poll (`pending` when it is a future's poll that returned
/// `Pending`), recording the function the process is back in, or where it suspends.
#[inline(always)]
pub(super) fn pop_sample(s: &Stack, pending: bool) {
    let depth = s.depth.get();
    if depth == 0 {
        return; // its poll has ended (only after a leaked guard)
    }
    let depth = depth - 1;
    s.depth.set(depth);
    if depth >= CAPACITY {
        return; // deeper than the stack: nothing kept
    }
    if pending {
        record_pending(s, s.ids[depth + 1].get());
    } else {
        record_restore(s, s.ids[depth].get());
    }
}

/// [`charge_lean`] in its common case, inline, and true: time read from the time-stamp counter
/// or not measured, and no memory allocated since the last event (or memory not measured).
/// False, having charged nothing, otherwise.
#[inline(always)]
pub(super) fn charge_quick(s: &Stack) -> bool {
    if s.blocks.get().load(Ordering::Relaxed) != s.last_mem.get()[2] {
        return false;
    }
    if s.tsc.get() {
        let now = rdtsc();
        let dt = now.saturating_sub(s.last_ticks.replace(now));
        if let Some(acc) = s.lean_current.get() {
            bump(&acc.ticks, dt);
        }
    }
    true
}
