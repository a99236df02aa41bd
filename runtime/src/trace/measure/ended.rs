//! What a sample session keeps of a process once the process has ended.
//!
//! A sample session ([`TraceTypes::SAMPLE`]) keeps a table per process it samples, as
//! call_time does: its initial call and its name, and the calls of its polls that the session
//! shared with another (those it measured alone are counted per thread, apart from any
//! process).
//! call_time and call_memory keep the tables of ended processes as long as the session lives
//! (tprof's collect reports every process measured), but a sample profile needs of a process
//! only its calls, which it sums over every process, and its name and initial call, which
//! label its samples. Kept for ever, the tables of a service that spawns a process per request
//! grow with the requests served (about 750 bytes each), however few samples the session keeps.
//!
//! So a sample session *folds* a process once it is gone — its record dropped, so that nothing
//! flushes into its table again — and the samples taken of it are in the session's buffer
//! (drained from the threads' rings): its calls are added to the session's calls of ended
//! processes, one counter per traced function (snapshots give them as their call counts), and
//! its table leaves the session. What it leaves behind is a row of its pid, initial call and
//! name, with no figures, while the buffer holds samples of it (so that they are still
//! labelled); one without samples leaves nothing but its calls in the sum.
//!
//! A fold walks the session's tables, so it runs only once their number has doubled since the
//! last one, and is at least [`FOLD_AT`]: its cost per table registered is constant, and a
//! session holds at most about twice as many tables as it has live processes, plus
//! [`FOLD_AT`], plus a row per process with samples in the buffer. The sampler's thread asks
//! for it ([`crate::sample`]). A paused session folds nothing, so that what its reads return
//! stays as it was (it registers no table meanwhile either). call_time and call_memory
//! sessions never fold.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::masks::PAUSED;
use super::{ProcessMeasurement, TraceTypes, lock};
use crate::Pid;
use crate::trace::callsites;
use crate::trace::session::session_in_slot;

/// Tables a sample session holds before it first folds the ended ones.
pub(crate) const FOLD_AT: usize = 1024;

/// A sample session's processes folded once they ended.
pub(crate) struct Folded {
    /// Per callsite id, the calls of the processes folded.
    calls: Vec<u64>,
    /// The processes folded that the buffer holds samples of: pid, initial call and name.
    rows: Vec<ProcessMeasurement>,
    /// The number of tables at which the next fold is due.
    due_at: usize,
}

impl Default for Folded {
    fn default() -> Folded {
        Folded {
            calls: Vec::new(),
            rows: Vec::new(),
            due_at: FOLD_AT,
        }
    }
}

impl Folded {
    /// The processes folded that keep a row, with no figures.
    pub(in crate::trace) fn rows(&self) -> &[ProcessMeasurement] {
        &self.rows
    }

    /// The calls of the processes folded, per callsite (id, calls), those made.
    pub(in crate::trace) fn calls(&self) -> Vec<(u32, u64)> {
        self.calls
            .iter()
            .enumerate()
            .filter(|(_, calls)| **calls > 0)
            .map(|(id, calls)| (id as u32, *calls))
            .collect()
    }

    /// Zeroes the calls (a restart).
    pub(in crate::trace) fn clear_calls(&mut self) {
        self.calls.clear();
    }

    fn add(&mut self, id: u32, calls: u64) {
        let at = id as usize;
        if at >= self.calls.len() {
            self.calls.resize(callsites().len().max(at + 1), 0);
        }
        self.calls[at] += calls;
    }
}

/// Folds the processes of the sample session in slot `bit` of `generation` that have ended,
/// when a fold is due (see the [module documentation](self)); returns how many it folded.
///
/// `drained` is called once the ended processes are known and before they are folded: it
/// moves the samples taken of them into the session's buffer, and gives whether the buffer
/// holds samples of a pid (those keep their rows). Called with allocation charging suppressed
/// (it allocates the session's own bookkeeping), outside any table's lock.
pub(crate) fn fold_ended<F: FnMut(Pid) -> bool>(
    bit: u32,
    generation: u64,
    drained: impl FnOnce() -> F,
) -> usize {
    let Some(session) = session_in_slot(bit).filter(|s| s.generation() == generation) else {
        return 0;
    };
    if session.types() != TraceTypes::SAMPLE {
        return 0;
    }
    // Held throughout: reads take it too, so that they see each process before or after its
    // fold, never in between.
    let mut folded = lock(&session.folded);
    if lock(&session.measured).len() < folded.due_at
        || PAUSED.load(Ordering::SeqCst) & (1 << bit) != 0
    {
        return 0;
    }
    let tables = session.tables();
    // Ended before the samples are drained: every sample of them is then in the buffer.
    let ended: Vec<bool> = tables.iter().map(|t| lock(t).ended).collect();
    let mut has_samples = drained();
    folded.rows.retain(|row| has_samples(row.pid));
    let mut count = 0;
    for (data, _) in tables.iter().zip(&ended).filter(|(_, gone)| **gone) {
        let mut table = lock(data);
        let Some(at) = table
            .sessions
            .iter()
            .position(|d| d.bit == bit && d.generation == generation)
        else {
            continue;
        };
        let d = table.sessions.remove(at);
        // Its indices moved (and nothing flushes here again).
        table.hint = None;
        for (id, acc) in &d.functions {
            folded.add(*id, acc.calls);
        }
        if has_samples(table.pid) {
            folded.rows.push(ProcessMeasurement {
                pid: table.pid,
                initial_call: table.initial_call.clone(),
                registered_name: table.name.clone(),
                functions: Vec::new(),
            });
        }
        count += 1;
    }
    // The list only grew since it was copied (tables are removed only here, under `folded`):
    // its first entries are the copy's.
    let mut measured = lock(&session.measured);
    let mut at = 0;
    measured.retain(|t| {
        let keep = match tables.get(at) {
            Some(copied) => {
                debug_assert!(Arc::ptr_eq(t, copied));
                !ended[at]
            }
            None => true,
        };
        at += 1;
        keep
    });
    let left = measured.len();
    if measured.capacity() > 4 * left.max(FOLD_AT) {
        measured.shrink_to(2 * left.max(FOLD_AT));
    }
    folded.due_at = FOLD_AT.max(2 * left);
    count
}
