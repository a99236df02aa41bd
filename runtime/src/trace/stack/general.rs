//! The general push and pop: a frame measured for any number of sessions, with call trees,
//! call-duration histograms and event logs — every measured poll that is not lean or a sample
//! poll — and what they share with the lean path: the charging of what passed between two
//! events, the per-thread scratch tables and their touched accumulators.
//!
//! Uses the stack's state ([`super::Stack`]), the clock, the lean and sample pops (which
//! [`pop_any`] dispatches to) and the call-tree paths ([`crate::trace::tree`]).

use std::sync::atomic::Ordering;

use super::clock::ticks;
use super::lean::{pop_lean, pop_sample};
use super::{
    Accumulator, CAPACITY, LOG, LOG_DROPPED, POOL, RETURN_TABLES, SAMPLES, Stack, TOUCHED, Table,
    bump, record_pending, record_restore, tree,
};

/// Adds what passed since the last event to the accumulators of the innermost frames;
/// returns the clock now (0 when no session measures time).
#[inline(always)]
pub(super) fn charge(s: &Stack) -> u64 {
    let mut dt = 0;
    let mut now = 0;
    if s.timing.get() {
        now = ticks();
        dt = now.saturating_sub(s.last_ticks.replace(now));
        // The innermost frame recording durations: its own time, for its call's duration.
        if let Some(own) = s.own.get(s.hist_top.get()) {
            own.set(own.get().wrapping_add(dt));
        }
    }
    let mut dm = [0u64; 3];
    if let Some(counts) = s.memory.get() {
        // Most calls allocate nothing between two events: one load tells.
        let last = s.last_mem.get();
        if counts.blocks() != last[2] {
            let now = counts.totals();
            s.last_mem.set(now);
            dm = [
                now[0].wrapping_sub(last[0]),
                now[1].wrapping_sub(last[1]),
                now[2].wrapping_sub(last[2]),
            ];
        }
    }
    let mut m = s.active.get();
    while m != 0 {
        let bit = m.trailing_zeros() as usize;
        m &= m - 1;
        if let Some(acc) = s.current[bit].get() {
            if dt != 0 {
                bump(&acc.ticks, dt);
            }
            if dm[2] != 0 {
                bump(&acc.words, dm[0]);
                bump(&acc.bytes, dm[1]);
                bump(&acc.blocks, dm[2]);
            }
        }
    }
    now
}

/// The accumulator of function `id` in this thread's table for session slot `bit`, marked
/// touched.
#[inline(always)]
fn acc_of(s: &Stack, bit: usize, id: u32) -> &'static Accumulator {
    let table = match s.tables[bit].get() {
        Some(t) => t,
        None => new_table(s, bit),
    };
    let acc = &table[id as usize];
    if !acc.touched.load(Ordering::Relaxed) {
        touch(s, acc, bit as u32, id);
    }
    acc
}

#[cold]
pub(super) fn touch(s: &Stack, acc: &Accumulator, bit: u32, id: u32) {
    acc.touched.store(true, Ordering::Relaxed);
    let n = s.touched_len.get();
    if n < TOUCHED {
        s.touched[n].set((bit, id));
        s.touched_len.set(n + 1);
    } else {
        s.touched_overflow.set(true);
    }
}

#[cold]
pub(super) fn new_table(s: &Stack, bit: usize) -> Table {
    let table = crate::heap::suppressed(|| {
        let _ = RETURN_TABLES.try_with(|_| ());
        let len = crate::trace::callsites().len();
        let pooled = POOL.lock().ok().and_then(|mut pool| pool.pop());
        pooled.unwrap_or_else(|| {
            let fresh: Box<[Accumulator]> = (0..len).map(|_| Accumulator::default()).collect();
            Box::leak(fresh)
        })
    });
    s.tables[bit].set(Some(table));
    table
}

/// Enters a frame of function `id` for the sessions in `mask` (measuring this poll);
/// `call` when this is the call's entry (its first poll) rather than a later poll of it.
/// `prior`: the clock ticks charged to the call in its earlier polls (its own time so far,
/// for call durations).
#[inline(never)]
pub(super) fn push_in(s: &Stack, id: u32, mask: u64, call: bool, prior: u64) {
    let now = charge(s);
    let depth = s.depth.get();
    let deep = depth >= CAPACITY;
    let trees = if mask & s.extra.get() != 0 {
        push_extra(s, id, mask, now, deep)
    } else {
        0
    };
    if trees != 0 {
        push_tree(s, id, mask, trees, call, depth);
    } else if mask.is_power_of_two() {
        // The common case: one session measures this frame.
        let bit = mask.trailing_zeros() as usize;
        let acc = acc_of(s, bit, id);
        if call {
            bump(&acc.calls, 1);
        }
        if !deep {
            s.parents[depth].set(s.current[bit].replace(Some(acc)));
        }
    } else {
        let mut m = mask;
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            let acc = acc_of(s, bit, id);
            if call {
                bump(&acc.calls, 1);
            }
            if !deep {
                s.current[bit].set(Some(acc));
            }
        }
    }
    // Its function before the depth that shows it to the signal handler (see `sigcell`).
    if !deep {
        s.ids[depth + 1].set(id);
    }
    s.depth.set(depth + 1);
    if deep {
        return;
    }
    s.masks[depth].set(mask);
    if mask & s.histograms.get() != 0 {
        // Its own time so far; what passes from now on is its own until a frame it calls
        // that these sessions measure is pushed.
        s.own[depth].set(prior);
        s.hist_parents[depth].set(s.hist_top.replace(depth));
    }
    s.function.get().store(id, Ordering::Relaxed);
}

/// What a push needs beyond the common case: logs the frame for the sessions keeping an event
/// log; returns the sessions in call-tree mode among `mask`.
#[inline(always)]
fn push_extra(s: &Stack, id: u32, mask: u64, now: u64, deep: bool) -> u64 {
    let logged = mask & s.events.get();
    if logged != 0 && !deep {
        log_event(logged, id, true, now);
    }
    mask & s.tree.get()
}

/// What a pop needs beyond the common case: logs the frame's end for the sessions keeping an
/// event log, and keeps the call's duration for those recording histograms (unless it is only
/// suspended); returns the sessions in call-tree mode among `mask`.
#[inline(always)]
fn pop_extra(s: &Stack, id: u32, mask: u64, now: u64, polled: u64, pending: bool) -> u64 {
    let logged = mask & s.events.get();
    if logged != 0 {
        log_event(logged, id, false, now);
    }
    let record = s.histograms.get() & mask;
    if record != 0 && !pending {
        record_duration(s, record, id, polled);
    }
    mask & s.tree.get()
}

/// Enters the path extending call-tree session `bit`'s current path with a call of `id`:
/// returns the path it extends and the accumulator of the new one, marked touched.
#[inline(always)]
fn enter_path(s: &Stack, bit: usize, id: u32, deep: bool) -> (u32, &'static Accumulator) {
    let parent = s.paths[bit].get();
    let (path, acc) = tree::enter(bit, parent, id);
    if !acc.touched.load(Ordering::Relaxed) {
        touch(s, acc, bit as u32, path);
    }
    if !deep {
        s.paths[bit].set(path);
    }
    (parent, acc)
}

/// [`push_in`] for a frame that a session in call-tree mode measures: each such session
/// measures it into the accumulator of its path.
#[cold]
fn push_tree(s: &Stack, id: u32, mask: u64, trees: u64, call: bool, depth: usize) {
    let deep = depth >= CAPACITY;
    if mask == trees && mask.is_power_of_two() {
        // One session measures this frame: its pop restores the path and the accumulator
        // that were current from the frame.
        let bit = mask.trailing_zeros() as usize;
        let (parent, acc) = enter_path(s, bit, id, deep);
        if call {
            bump(&acc.calls, 1);
        }
        if !deep {
            s.parent_paths[depth].set(parent);
            s.parents[depth].set(s.current[bit].replace(Some(acc)));
        }
        return;
    }
    let mut m = mask;
    while m != 0 {
        let bit = m.trailing_zeros() as usize;
        m &= m - 1;
        let acc = if trees & (1 << bit) != 0 {
            enter_path(s, bit, id, deep).1
        } else {
            acc_of(s, bit, id)
        };
        if call {
            bump(&acc.calls, 1);
        }
        if !deep {
            s.current[bit].set(Some(acc));
        }
    }
}

/// Leaves the top frame; `pending` when it is a future's poll that returned `Pending`.
/// Returns the clock ticks charged to the call so far, its own time (in a poll recording its
/// duration; else 0), or `None` when the frame was not kept (deeper than the stack) or the
/// poll is lean (it records no durations).
#[inline(never)]
pub(super) fn pop_any(s: &Stack, pending: bool) -> Option<u64> {
    if s.lean.get() != 0 {
        pop_lean(s, pending);
        None
    } else if s.sample.get() != 0 {
        pop_sample(s, pending);
        None
    } else {
        pop_checked(s, pending)
    }
}

#[inline(always)]
pub(super) fn pop_checked(s: &Stack, pending: bool) -> Option<u64> {
    let depth = s.depth.get();
    if depth > CAPACITY {
        s.depth.set(depth - 1);
        return None;
    }
    if depth == 0 {
        return None; // its poll has ended (only after a leaked guard)
    }
    Some(pop_in(s, pending))
}

#[inline(always)]
fn pop_in(s: &Stack, pending: bool) -> u64 {
    let now = charge(s);
    let depth = s.depth.get() - 1;
    s.depth.set(depth);
    let id = s.ids[depth + 1].get();
    let mask = s.masks[depth].get();
    // Its own time over the call so far (`charge` has just added the last of it).
    let polled = if mask & s.histograms.get() != 0 {
        s.hist_top.set(s.hist_parents[depth].get());
        s.own[depth].get()
    } else {
        0
    };
    let trees = if mask & s.extra.get() != 0 {
        pop_extra(s, id, mask, now, polled, pending)
    } else {
        0
    };
    if trees == 0 && mask.is_power_of_two() {
        // Back to the accumulator that was current when the frame was pushed.
        let bit = mask.trailing_zeros() as usize;
        s.current[bit].set(s.parents[depth].get());
    } else if mask.is_power_of_two() {
        // One call-tree session: back to the path this one extends and its accumulator (none
        // at the root), as they were when the frame was pushed.
        if trees & s.active.get() != 0 {
            let bit = mask.trailing_zeros() as usize;
            s.paths[bit].set(s.parent_paths[depth].get());
            s.current[bit].set(s.parents[depth].get());
        }
    } else {
        let mut m = mask & s.active.get();
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            if trees & (1 << bit) != 0 {
                // Back to the path this one extends.
                let (parent, acc) = tree::leave(bit, s.paths[bit].get());
                s.paths[bit].set(parent);
                s.current[bit].set(if parent == tree::ROOT { None } else { acc });
                continue;
            }
            // Back to the innermost frame below that this session measures.
            let below = (0..depth)
                .rev()
                .find(|&i| s.masks[i].get() & (1 << bit) != 0)
                .and_then(|i| s.tables[bit].get().map(|t| &t[s.ids[i + 1].get() as usize]));
            s.current[bit].set(below);
        }
    }
    if pending {
        record_pending(s, id);
    } else {
        record_restore(s, s.ids[depth].get());
    }
    polled
}

/// Keeps a finished call's duration for the sessions in `mask`, until the end of the poll.
#[cold]
fn record_duration(s: &Stack, mut mask: u64, id: u32, ticks: u64) {
    SAMPLES.with(|samples| {
        let mut samples = samples.borrow_mut();
        while mask != 0 {
            let bit = mask.trailing_zeros();
            mask &= mask - 1;
            if samples.len() == samples.capacity() {
                if samples.len() >= MAX_SAMPLES {
                    // A long poll: hand them over now rather than grow without bound.
                    crate::heap::suppressed(|| {
                        crate::trace::measure::record_durations(&mut samples)
                    });
                } else {
                    crate::heap::suppressed(|| samples.reserve(64));
                }
            }
            samples.push((bit, s.generations[bit as usize].get(), id, ticks));
        }
    });
}

/// Logs a frame of `id` entered or left, at `now` (0: read the clock), for the sessions in
/// `mask`.
#[cold]
fn log_event(mask: u64, id: u32, entered: bool, now: u64) {
    let now = if now == 0 { ticks() } else { now };
    LOG.with(|log| {
        let mut log = log.borrow_mut();
        if log.len() >= crate::trace::measure::EVENT_LOG_CAPACITY {
            // More than a process keeps in all: the rest of this poll is dropped (and counted
            // when the poll ends).
            LOG_DROPPED.with(|d| {
                let mut m = mask;
                while m != 0 {
                    let bit = m.trailing_zeros() as usize;
                    m &= m - 1;
                    d[bit].set(d[bit].get() + 1);
                }
            });
            return;
        }
        if log.len() == log.capacity() {
            crate::heap::suppressed(|| log.reserve(64));
        }
        log.push((now, id, entered, mask));
    });
}

/// Call durations kept per thread before they go to their histograms mid-poll.
const MAX_SAMPLES: usize = 4096;
