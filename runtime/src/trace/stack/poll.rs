//! The beginning and end of a measured poll: the general begin, which decides per poll how
//! its frames are measured (lean or not, which sessions, what they measure), the begins that
//! stand in for it where nothing is to decide (a plain, lean or sample poll), and the end,
//! which closes leaked frames and flushes what the poll gathered into its target's table.
//!
//! Uses the stack's state ([`super::Stack`]), the general path's table set-up and pop, the
//! lean path's pop, and the measurements it flushes into ([`crate::trace::measure`]).

use std::sync::atomic::{AtomicU32, Ordering};

use super::clock::{RAW_IS_TSC, clock_is_tsc};
use super::general::{new_table, pop_checked};
use super::lean::pop_lean;
use super::{
    LOG, LOG_DROPPED, MAX_SESSIONS, NO_BLOCKS, NO_CELL, NO_FRAME, SAMPLES, STACK, Stack, tree,
    with_stack,
};
use crate::heap::Counts;

/// Starts measuring a poll of a process for the sessions in `active` (non-zero); `memory`:
/// what counts the poll's allocations, when one of them measures memory; `function`: where its
/// current function is recorded.
pub(crate) fn begin_poll(
    active: u64,
    trees: u64,
    events: u64,
    timing: bool,
    memory: Option<&'static Counts>,
    histograms: u64,
    function: &'static AtomicU32,
) {
    crate::trace::inflight::begin(active);
    if active & crate::trace::paths::wanted() != 0 {
        crate::trace::paths::begin();
    }
    with_stack(|s| {
        let trees_here = trees & active;
        let events = events & active;
        let histograms = if timing { histograms & active } else { 0 };
        s.active.set(active);
        s.tree.set(trees_here);
        s.events.set(events);
        s.timing.set(timing);
        s.histograms.set(histograms);
        s.extra.set(trees_here | events | histograms);
        s.memory.set(memory);
        s.blocks
            .set(memory.map_or(&NO_BLOCKS, Counts::blocks_counter));
        s.function.set(function);
        s.restore.set(function);
        let tsc = timing && RAW_IS_TSC.get() == Some(&true);
        s.tsc.set(tsc);
        // Frames never outlive a poll; start clean whatever happened before.
        s.depth.set(0);
        s.hist_top.set(NO_FRAME);
        // Lean: one session, no event log or histograms (call-tree mode allowed), and time (if
        // measured) from the time-stamp counter.
        if active.is_power_of_two() && events | histograms == 0 && (tsc || !timing) {
            let bit = active.trailing_zeros();
            let in_tree = trees_here != 0;
            s.lean.set(active);
            s.lean_slot.set(bit);
            s.lean_tree.set(in_tree);
            s.lean_path.set(tree::ROOT);
            s.lean_table.set(if in_tree {
                &[]
            } else {
                match s.tables[bit as usize].get() {
                    Some(t) => t,
                    None => new_table(s, bit as usize),
                }
            });
            s.lean_current.set(None);
            let (quick, timed) = fast_kind(active, in_tree, timing, memory.is_some());
            s.quick.set(quick);
            s.timed.set(timed);
        } else {
            s.lean.set(0);
            s.quick.set(0);
            s.timed.set(0);
        }
        let mut m = active;
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            s.current[bit].set(None);
            // Before the caller checks the process's flags again (see measure::begin_poll).
            let generation = crate::trace::session::generation_acquire(bit as u32);
            s.generations[bit].set(generation);
            if trees & (1 << bit) != 0 {
                s.paths[bit].set(tree::ROOT);
                tree::begin_poll(bit, generation);
            }
        }
        // No clock read here: what passes before the poll's first frame is charged to no
        // frame (no accumulator is current at the root), so the first event's reading only
        // starts the count. That saves one clock read per measured poll.
        s.last_mem.set(memory.map_or([0; 3], Counts::totals));
    });
}

/// The synchronous calls a lean poll of session `active` (one bit) enters inline, as
/// ([`Stack::quick`], [`Stack::timed`]): in flat mode (not `in_tree`), memory alone (or
/// nothing) takes the quick entry, time from the time-stamp counter alone the timed one, and
/// time and memory together neither. Neither when the session counts calls apart (its calls
/// are counted out of line too) or does not measure (paused), which the entries then need not
/// ask per call.
#[inline(always)]
pub(super) fn fast_kind(active: u64, in_tree: bool, timing: bool, memory: bool) -> (u64, u64) {
    if in_tree || active & crate::trace::measure::not_lean() != 0 {
        return (0, 0);
    }
    match (timing, memory) {
        (false, _) => (active, 0),
        (true, false) => (0, active),
        (true, true) => (0, 0),
    }
}

/// [`begin_poll`] for one session (`active`, a single bit) that measures neither time nor
/// memory, and records no histograms, call tree or event log: a sample session's poll, which
/// is measured only so that its traced stack is kept. Leaves the stack as [`begin_poll`] would
/// (the lean, quick case), without its decisions: about half its instructions, on every poll
/// of every sampled process.
#[inline]
pub(crate) fn begin_plain_poll(active: u64, function: &'static AtomicU32) {
    begin_lean_poll(active, false, None, function);
}

/// [`begin_poll`] for one session (`active`, a single bit) in flat mode, without an event log
/// or histograms, that measures time (`timing`, from the time-stamp counter) or memory
/// (counted by `memory`) or both: the lean case, left as [`begin_poll`] leaves it without its
/// decisions, on every poll of every process such a session measures. Inlined into
/// `measure::begin_poll` always: with the choice of its inline entries ([`fast_kind`]) the
/// compiler left it a call of its own (+66 Ir per gen_server round trip under call_time).
#[inline(always)]
pub(crate) fn begin_lean_poll(
    active: u64,
    timing: bool,
    memory: Option<&'static Counts>,
    function: &'static AtomicU32,
) {
    debug_assert!(active.is_power_of_two());
    debug_assert!(!timing || clock_is_tsc());
    crate::trace::inflight::begin(active);
    if active & crate::trace::paths::wanted() != 0 {
        crate::trace::paths::begin();
    }
    with_stack(|s| {
        let bit = active.trailing_zeros();
        let slot = bit as usize;
        s.active.set(active);
        s.tree.set(0);
        s.events.set(0);
        s.timing.set(timing);
        s.histograms.set(0);
        s.extra.set(0);
        s.memory.set(memory);
        s.blocks
            .set(memory.map_or(&NO_BLOCKS, Counts::blocks_counter));
        s.function.set(function);
        s.restore.set(function);
        s.tsc.set(timing);
        s.depth.set(0);
        s.hist_top.set(NO_FRAME);
        s.lean.set(active);
        s.lean_slot.set(bit);
        s.lean_tree.set(false);
        s.lean_path.set(tree::ROOT);
        s.lean_table.set(match s.tables[slot].get() {
            Some(t) => t,
            None => new_table(s, slot),
        });
        s.lean_current.set(None);
        let (quick, timed) = fast_kind(active, false, timing, memory.is_some());
        s.quick.set(quick);
        s.timed.set(timed);
        s.current[slot].set(None);
        // Before the caller checks the process's flags again (see measure::begin_poll).
        s.generations[slot].set(crate::trace::session::generation_acquire(bit));
        // No clock read, as in `begin_poll`.
        s.last_mem.set(memory.map_or([0; 3], Counts::totals));
    });
}

/// Starts a sample poll ([`Stack::sample`]) for `active`, one sample session's bit, of
/// `generation`: its frames are kept on the stack for the samplers to read (the CPU sampler's
/// signal handler, and for a wall session the path the process suspends in), its calls are
/// counted in this thread's counters for the session, and `function` records the function the
/// process is in. Nothing is accumulated per function, so nothing is flushed at its end, and no
/// reader waits for it ([`crate::trace::inflight`] does not know it): its counts are visible as
/// each call is made, as call_count's are.
#[inline]
pub(crate) fn begin_sample_poll(active: u64, function: &'static AtomicU32, generation: u64) {
    debug_assert!(active.is_power_of_two());
    with_stack(|s| {
        if s.active.get() != 0 {
            // A poll begins inside a call outside processes being measured (a current-thread
            // node run from a traced function): that call's measure ends here.
            crate::trace::outside::end();
        }
        if active & crate::trace::paths::wanted() != 0 {
            crate::trace::paths::begin();
        }
        s.lean.set(0);
        s.quick.set(0);
        s.timed.set(0);
        s.function.set(function);
        s.restore.set(function);
        // Frames never outlive a poll; start clean whatever happened before.
        s.depth.set(0);
        s.generations[active.trailing_zeros() as usize].set(generation);
        s.sample.set(active);
        s.active.set(active);
    });
}

/// Gives up measuring the poll that just began for the sessions in `stale`: what it gathers
/// for them is dropped at its end (generation 0 is no session's).
#[cold]
pub(crate) fn forget_sessions(stale: u64) {
    STACK.with(|s| {
        let mut m = stale;
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            m &= m - 1;
            s.generations[bit].set(0);
        }
    });
}

/// Ends the measured poll: what it gathered goes to `target`'s table.
pub(crate) fn end_poll(target: &crate::trace::measure::Target<'_>) {
    let sampled = with_stack(|s| {
        if end_sample_poll(s, target) {
            return true;
        }
        // Only a leaked frame guard (mem::forget) leaves frames open: close them.
        while s.depth.get() > 0 {
            if s.lean.get() != 0 {
                pop_lean(s, false);
            } else {
                pop_checked(s, false);
            }
        }
        s.memory.set(None);
        s.blocks.set(&NO_BLOCKS);
        s.function.set(&NO_CELL);
        s.restore.set(&NO_CELL);
        s.tsc.set(false);
        if s.touched_len.get() > 0 || s.touched_overflow.get() {
            crate::trace::measure::flush(target, s.active.get(), |table| drain(s, table));
        }
        // Call durations are sampled only for histograms, events logged only for event logs.
        if s.histograms.get() | s.events.get() != 0 {
            end_poll_extra(s, target);
        }
        // Where a process (not a helper task of it) suspends, for the wall sampler.
        if s.active.get() & crate::trace::paths::wanted() != 0
            && let crate::trace::measure::Target::Process(process) = target
            && crate::context::current_is_helper() == Some(false)
        {
            crate::trace::paths::finish(process.trace_account());
        }
        s.active.set(0);
        s.lean.set(0);
        s.quick.set(0);
        s.timed.set(0);
        s.tree.set(0);
        s.events.set(0);
        s.extra.set(0);
        false
    });
    if !sampled {
        crate::trace::inflight::end();
    }
}

/// Ends the poll if it is a sample poll (and says so): it has nothing to flush; for a wall
/// session, the path the process suspended in is published.
#[inline(always)]
fn end_sample_poll(s: &Stack, target: &crate::trace::measure::Target<'_>) -> bool {
    let sample = s.sample.get();
    if sample == 0 {
        return false;
    }
    s.active.set(0);
    s.sample.set(0);
    // Only a leaked frame guard (mem::forget) leaves frames open: gone with the poll.
    s.depth.set(0);
    s.function.set(&NO_CELL);
    s.restore.set(&NO_CELL);
    if sample & crate::trace::paths::wanted() != 0
        && let crate::trace::measure::Target::Process(process) = target
        && crate::context::current_is_helper() == Some(false)
    {
        crate::trace::paths::finish(process.trace_account());
    }
    true
}

/// What [`end_poll`] does for histograms and event logs.
#[cold]
#[inline(never)]
fn end_poll_extra(s: &Stack, target: &crate::trace::measure::Target<'_>) {
    if s.histograms.get() != 0 {
        SAMPLES.with(|samples| {
            let mut samples = samples.borrow_mut();
            crate::heap::suppressed(|| crate::trace::measure::finish_durations(&mut samples));
        });
    }
    if s.events.get() != 0 {
        LOG.with(|log| {
            let mut log = log.borrow_mut();
            if !log.is_empty() {
                let generations: [u64; MAX_SESSIONS] =
                    std::array::from_fn(|i| s.generations[i].get());
                let dropped: [u64; MAX_SESSIONS] =
                    LOG_DROPPED.with(|d| std::array::from_fn(|i| d[i].replace(0)));
                crate::heap::suppressed(|| {
                    crate::trace::measure::flush_events(target, &mut log, &dropped, &generations);
                });
            }
        });
    }
}

/// Moves every figure this poll gathered into the process's table, as (session slot, the
/// session's generation when the poll began, callsite id, figures), and zeroes them.
#[inline(always)]
fn drain(s: &Stack, table: &mut crate::trace::measure::Flush<'_>) {
    if s.touched_overflow.replace(false) {
        drain_all(s, table);
    } else {
        for i in 0..s.touched_len.get() {
            let (bit, id) = s.touched[i].get();
            let acc = if s.tree.get() & (1 << bit) != 0 {
                tree::accumulator(bit as usize, id)
            } else {
                s.tables[bit as usize]
                    .get()
                    .and_then(|t| t.get(id as usize))
            };
            if let Some(acc) = acc {
                table.add(bit, s.generations[bit as usize].get(), id, acc);
            }
        }
    }
    s.touched_len.set(0);
}

/// [`drain`] when the poll touched more than it kept track of: scans the active tables.
#[cold]
#[inline(never)]
fn drain_all(s: &Stack, table: &mut crate::trace::measure::Flush<'_>) {
    let mut m = s.active.get();
    while m != 0 {
        let bit = m.trailing_zeros();
        m &= m - 1;
        let generation = s.generations[bit as usize].get();
        if s.tree.get() & (1 << bit) != 0 {
            tree::for_each_touched(bit as usize, &mut |path, acc| {
                table.add(bit, generation, path, acc);
            });
        } else if let Some(t) = s.tables[bit as usize].get() {
            for (id, acc) in t.iter().enumerate() {
                if acc.touched.load(Ordering::Relaxed) {
                    table.add(bit, generation, id as u32, acc);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::super::clock;
    use super::*;

    /// Every field a poll's frames and its end read, as begin left them for session `bit`.
    fn poll_state(bit: usize) -> String {
        with_stack(|s| {
            format!(
                "active {} lean {} slot {} table {:p}/{} current {} quick {} timed {} lean_tree {} \
                 path {} tsc {} tree {} events {} extra {} timing {} histograms {} memory {} \
                 blocks {:p} function {:p} restore {:p} last_mem {:?} depth {} hist_top {} \
                 current[bit] {} generation {}",
                s.active.get(),
                s.lean.get(),
                s.lean_slot.get(),
                s.lean_table.get().as_ptr(),
                s.lean_table.get().len(),
                s.lean_current.get().is_some(),
                s.quick.get(),
                s.timed.get(),
                s.lean_tree.get(),
                s.lean_path.get(),
                s.tsc.get(),
                s.tree.get(),
                s.events.get(),
                s.extra.get(),
                s.timing.get(),
                s.histograms.get(),
                s.memory.get().is_some(),
                s.blocks.get(),
                s.function.get(),
                s.restore.get(),
                s.last_mem.get(),
                s.depth.get(),
                s.hist_top.get(),
                s.current[bit].get().is_some(),
                s.generations[bit].get(),
            )
        })
    }

    /// Leaves every field [`poll_state`] reads as no begin would.
    fn dirty(bit: usize) {
        with_stack(|s| {
            s.active.set(!0);
            s.lean.set(0);
            s.lean_slot.set(63);
            s.lean_table.set(&[]);
            s.lean_current
                .set(s.tables.iter().find_map(Cell::get).and_then(|t| t.first()));
            s.quick.set(0);
            s.timed.set(!0);
            s.lean_tree.set(true);
            s.lean_path.set(77);
            s.tsc.set(true);
            s.tree.set(!0);
            s.events.set(!0);
            s.extra.set(!0);
            s.timing.set(true);
            s.histograms.set(!0);
            s.blocks.set(&NO_BLOCKS);
            s.function.set(&NO_CELL);
            s.restore.set(&NO_CELL);
            s.last_mem.set([1, 2, 3]);
            s.hist_top.set(5);
            s.generations[bit].set(12_345);
        });
    }

    #[test]
    fn a_plain_poll_begins_as_the_general_begin_leaves_it() {
        static FUNCTION: AtomicU32 = AtomicU32::new(0);
        let bit = 5;
        let active = 1u64 << bit;
        // The general begin, for one session that measures neither time nor memory and keeps
        // no tree, histograms or events: the case `begin_plain_poll` stands in for.
        dirty(bit);
        begin_poll(active, 0, 0, false, None, 0, &FUNCTION);
        let general = poll_state(bit);
        dirty(bit);
        assert_ne!(poll_state(bit), general, "dirty() changes what is compared");
        begin_plain_poll(active, &FUNCTION);
        assert_eq!(poll_state(bit), general);
        with_stack(|s| {
            s.active.set(0);
            s.lean.set(0);
            s.quick.set(0);
            s.timed.set(0);
        });
        crate::trace::inflight::end();
    }

    /// The lean begin leaves every field as the general one does, for each combination of
    /// what a lean session measures: time alone, memory alone, both.
    #[test]
    fn a_lean_poll_begins_as_the_general_begin_leaves_it() {
        static FUNCTION: AtomicU32 = AtomicU32::new(0);
        static COUNTS: Counts = Counts::new();
        clock();
        let bit = 6;
        let active = 1u64 << bit;
        let cases: &[(bool, Option<&'static Counts>)] = if clock_is_tsc() {
            &[(true, None), (false, Some(&COUNTS)), (true, Some(&COUNTS))]
        } else {
            &[(false, Some(&COUNTS))]
        };
        for &(timing, memory) in cases {
            dirty(bit);
            begin_poll(active, 0, 0, timing, memory, 0, &FUNCTION);
            let general = poll_state(bit);
            dirty(bit);
            assert_ne!(poll_state(bit), general, "dirty() changes what is compared");
            begin_lean_poll(active, timing, memory, &FUNCTION);
            assert_eq!(
                poll_state(bit),
                general,
                "timing {timing}, memory {}",
                memory.is_some()
            );
            with_stack(|s| {
                s.active.set(0);
                s.lean.set(0);
                s.quick.set(0);
                s.timed.set(0);
                s.memory.set(None);
                s.blocks.set(&NO_BLOCKS);
            });
            crate::trace::inflight::end();
        }
    }
}
