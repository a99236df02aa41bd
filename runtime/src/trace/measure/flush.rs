//! What a poll's end moves into its process's table, under the table's lock: the figures per
//! function or path ([`flush`]), the event log ([`flush_events`]) and the call durations,
//! into histograms ([`record_durations`]); and the registration of a table in a session's list
//! at its first figures for that session.
//!
//! Uses the tables ([`super::ProcTrace`]), the masks (what is paused) and the sessions' slots.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use super::masks::PAUSED;
use super::{
    Acc, EVENT_LOG_CAPACITY, ProcTable, ProcTrace, ProcTraceRef, SessionData, TracedProcess, lock,
};
use crate::trace::session::{generation_of, session_in_slot};
use crate::trace::stack::Accumulator;

/// Where a measured poll's figures go: the table of a process (its own poll's, or a helper
/// task's), or a thread's table of the traced calls it made outside any process
/// ([`crate::trace::outside`]).
pub(crate) enum Target<'a> {
    /// The table of the process, made at its first flush.
    Process(&'a dyn TracedProcess),
    /// A table of traced calls outside any process.
    Outside(&'a ProcTraceRef),
}

impl Target<'_> {
    fn data(&self) -> &ProcTraceRef {
        match self {
            Target::Process(process) => table_of(*process),
            Target::Outside(data) => data,
        }
    }

    /// The node whose sessions the table may join; `None` for any (outside processes: the
    /// sessions measuring it were chosen when its poll began).
    fn node(&self) -> Option<u32> {
        match self {
            Target::Process(process) => Some(process.node_id()),
            Target::Outside(_) => None,
        }
    }
}

/// A process's table, locked while a poll's figures move into it ([`flush`]).
pub(crate) struct Flush<'a> {
    table: MutexGuard<'a, ProcTrace>,
    target: &'a Target<'a>,
    /// The paused sessions, read once the lock is held.
    paused: u64,
}

/// Moves the figures of a poll measured for `sessions` into its target's table: `drain` hands
/// over each (session slot, session generation, callsite id, figures) the poll gathered
/// through [`Flush::add`], under the table's lock. What it allocates (rarely: a new table,
/// session or function) is charged to no process.
#[inline]
pub(crate) fn flush(target: &Target<'_>, sessions: u64, drain: impl FnOnce(&mut Flush<'_>)) {
    let table = lock(target.data());
    let paused = paused_here(sessions);
    drain(&mut Flush {
        table,
        target,
        paused,
    });
}

impl Flush<'_> {
    /// Moves the figures of `acc` (zeroing it), gathered for the session in slot `bit` of
    /// `generation` in function (or path) `id`, into the process's figures; dropped when that
    /// session is paused or no longer measures.
    #[inline(always)]
    pub(crate) fn add(&mut self, bit: u32, generation: u64, id: u32, acc: &Accumulator) {
        // The common case: the function the last flush ended on, for a session still measuring
        // (as `session_data` checks), read and zeroed in place.
        if self.paused & (1 << bit) == 0
            && let Some((b, g, index, at)) = self.table.hint
            && b == bit
            && g == generation
            && g == generation_of(bit)
            && let Some(f) = self.table.sessions[index].functions.get_mut(at)
            && f.0 == id
        {
            f.1 = f.1.plus(&acc.take());
            return;
        }
        self.add_taken(bit, generation, id, acc.take());
    }

    /// [`add`](Self::add) in every case, with the figures already taken.
    #[inline(never)]
    fn add_taken(&mut self, bit: u32, generation: u64, id: u32, acc: Acc) {
        if self.paused & (1 << bit) != 0 || acc.is_zero() {
            return;
        }
        let table = &mut *self.table;
        let (index, hinted) = match table.hint {
            // Still measuring (as `session_data` checks)?
            Some((b, g, index, at)) if b == bit && g == generation && g == generation_of(bit) => {
                (index, at)
            }
            _ => {
                let target = self.target;
                let found = crate::heap::suppressed(|| {
                    session_data(table, bit, generation, target.data(), target.node())
                });
                let Some(index) = found else {
                    return;
                };
                (index, usize::MAX)
            }
        };
        let functions = &mut table.sessions[index].functions;
        let at = if functions.get(hinted).is_some_and(|f| f.0 == id) {
            functions[hinted].1 = functions[hinted].1.plus(&acc);
            hinted
        } else {
            match functions.binary_search_by_key(&id, |(i, _)| *i) {
                Ok(i) => {
                    functions[i].1 = functions[i].1.plus(&acc);
                    i
                }
                Err(i) => {
                    crate::heap::suppressed(|| functions.insert(i, (id, acc)));
                    i
                }
            }
        };
        table.hint = Some((bit, generation, index, at));
    }
}

/// The paused sessions among `sessions` whose figures this thread's poll drops: all of them,
/// but those that were measuring it when they paused (see [`crate::trace::inflight`]). Read
/// under the lock that the figures then go in under (a table's, a session's list or
/// histograms).
#[inline(always)]
fn paused_here(sessions: u64) -> u64 {
    let paused = PAUSED.load(Ordering::SeqCst) & sessions;
    if paused == 0 {
        return 0;
    }
    paused & !crate::trace::inflight::kept()
}

/// `process`'s table, made at its first measured poll.
pub(super) fn table_of<P: TracedProcess + ?Sized>(process: &P) -> &ProcTraceRef {
    process.trace_data().get_or_init(|| {
        crate::heap::suppressed(|| {
            Arc::new(ProcTable::new(ProcTrace::new(
                process.pid(),
                process.initial_call(),
            )))
        })
    })
}

/// The index of the figures of the session in slot `bit` of `generation` in `table` (the table
/// `data` holds: of a process of node `node`, or with `None` one that any node's sessions may
/// join), made if need be; `None` when that session no longer measures (its figures are
/// dropped).
pub(super) fn session_data(
    table: &mut ProcTrace,
    bit: u32,
    generation: u64,
    data: &ProcTraceRef,
    node: Option<u32>,
) -> Option<usize> {
    // Only the session that was measuring when the poll began, if it still is.
    if generation == 0 || generation != generation_of(bit) {
        return None;
    }
    if let Some(i) = table
        .sessions
        .iter()
        .position(|d| d.bit == bit && d.generation == generation)
    {
        return Some(i);
    }
    // A session that held this slot before is gone: its figures go with it (and the indices
    // of `sessions` change).
    table.hint = None;
    table.sessions.retain(|d| d.bit != bit);
    if !register(bit, generation, data, node) {
        return None;
    }
    table.sessions.push(SessionData {
        bit,
        generation,
        functions: Vec::new(),
        histograms: Vec::new(),
        events: Vec::new(),
        dropped: 0,
    });
    Some(table.sessions.len() - 1)
}

/// Adds a table to the list of session `bit`, unless the session is gone or paused, or (for a
/// process's table) belongs to another node than `node`.
fn register(bit: u32, generation: u64, data: &ProcTraceRef, node: Option<u32>) -> bool {
    let Some(session) = session_in_slot(bit) else {
        return false;
    };
    if session.generation() != generation || node.is_some_and(|node| session.node() != node) {
        return false;
    }
    let mut measured = lock(&session.measured);
    if paused_here(1 << bit) != 0 {
        return false;
    }
    measured.push(Arc::clone(data));
    true
}

thread_local! {
    /// While a poll records call durations: the table they go to ([`record_durations`]),
    /// mid-poll too — its process's, for a poll of the process or of a helper task of it —
    /// and the node whose sessions it may join ([`session_data`]).
    pub(super) static RECORDING: RefCell<Option<(ProcTraceRef, Option<u32>)>> = const { RefCell::new(None) };
}

/// Moves a poll's event log into the process's table (run with allocation suppressed):
/// `log` holds (clock ticks, callsite id, entered, sessions), `dropped` per session slot the
/// events the poll could not log, `generations` each slot's session generation when the poll
/// began.
pub(crate) fn flush_events(
    target: &Target<'_>,
    log: &mut Vec<(u64, u32, bool, u64)>,
    dropped: &[u64; crate::trace::MAX_SESSIONS],
    generations: &[u64; crate::trace::MAX_SESSIONS],
) {
    let mut table = lock(target.data());
    let paused = paused_here(u64::MAX);
    let with_drops = dropped
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .fold(0u64, |m, (bit, _)| m | 1 << bit);
    let mut sessions = (log.iter().fold(0, |m, e| m | e.3) | with_drops) & !paused;
    while sessions != 0 {
        let bit = sessions.trailing_zeros();
        sessions &= sessions - 1;
        let Some(index) = session_data(
            &mut table,
            bit,
            generations[bit as usize],
            target.data(),
            target.node(),
        ) else {
            continue;
        };
        let d = &mut table.sessions[index];
        d.dropped += dropped[bit as usize];
        for &(ticks, id, entered, mask) in log.iter() {
            if mask & (1 << bit) == 0 {
                continue;
            }
            if d.events.len() < EVENT_LOG_CAPACITY {
                d.events.push((ticks, id, entered));
            } else {
                d.dropped += 1;
            }
        }
    }
    log.clear();
}

/// Records call durations (session slot, its generation, callsite id, clock ticks) into the
/// histograms of the table this thread's poll records into (its process's; run with
/// allocation suppressed), under its
/// table's lock: after `pause` has taken that lock, nothing more lands. Durations of a
/// session paused, or no longer the one in its slot, are dropped.
pub(crate) fn record_durations(samples: &mut Vec<(u32, u64, u32, u64)>) {
    RECORDING.with(|recording| {
        if let (Some(clock), Some((data, node))) =
            (crate::trace::stack::clock_if_set(), &*recording.borrow())
        {
            record_into(clock, data, *node, samples);
        }
    });
    samples.clear();
}

/// [`record_durations`], the last of the poll: the poll no longer records.
pub(crate) fn finish_durations(samples: &mut Vec<(u32, u64, u32, u64)>) {
    if !samples.is_empty() {
        record_durations(samples);
    }
    RECORDING.with(|recording| recording.borrow_mut().take());
}

fn record_into(
    clock: &quanta::Clock,
    data: &ProcTraceRef,
    node: Option<u32>,
    samples: &mut [(u32, u64, u32, u64)],
) {
    samples.sort_unstable_by_key(|s| (s.0, s.1, s.2));
    let mut table = lock(data);
    // Under the lock `pause` takes once: after it returns, nothing more lands (but for a poll
    // it kept, which it waited for: asked only when a session of these samples is paused).
    let paused = PAUSED.load(Ordering::SeqCst);
    let mut rest = &samples[..];
    while let Some(&(bit, generation, _, _)) = rest.first() {
        let n = rest
            .iter()
            .take_while(|s| (s.0, s.1) == (bit, generation))
            .count();
        let (these, next) = rest.split_at(n);
        rest = next;
        if paused & (1 << bit) != 0 && paused_here(1 << bit) != 0 {
            continue;
        }
        let Some(index) = session_data(&mut table, bit, generation, data, node) else {
            continue;
        };
        let histograms = &mut table.sessions[index].histograms;
        let mut at = 0;
        for &(_, _, id, ticks) in these {
            // The samples are sorted by callsite: each finds its histogram at or after the
            // last one's.
            at += histograms[at..].partition_point(|(i, _)| *i < id);
            if histograms.get(at).is_none_or(|(i, _)| *i != id) {
                let Some(h) = new_histogram(bit, generation) else {
                    continue;
                };
                histograms.insert(at, (id, h));
            }
            // `record` grows the histogram to the value (`saturating_record` would clamp it to
            // the range so far); it fails only past i64::MAX / 2 nanoseconds.
            let _ = histograms[at]
                .1
                .record(clock.delta_as_nanos(0, ticks).max(1));
        }
    }
}

/// An auto-resizing histogram with the precision of the session in slot `bit` of
/// `generation`; `None` when that session is gone.
fn new_histogram(bit: u32, generation: u64) -> Option<hdrhistogram::Histogram<u64>> {
    let session = session_in_slot(bit).filter(|s| s.generation() == generation)?;
    hdrhistogram::Histogram::new(session.histogram_precision()).ok()
}
