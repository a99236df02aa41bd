//! Whether a process's current function is known: the mark a session's flag leaves on a
//! process whose running or last poll no session measured.
//!
//! A measured poll records the traced function its process is in (the account's
//! current-function cell, written by the traced stack's pushes and pops); an unmeasured poll
//! writes nothing, so what the cell holds was true at the end of the last measured poll, long
//! ago or never. A session that begins measuring a process in the middle of a long poll (a
//! loop one attaches to) thus finds an old function there, or none, and a reader could not
//! tell "no traced function" from "not known".
//!
//! Nothing per process records whether a session measured its current poll, and the process
//! record is at its size bound, so the cell itself carries it. When a session's flag is set on
//! a process that no session measures yet ([`mark`], from `enable_trace`), the cell is given
//! the number of the process's poll running or last run, with its top bit set (callsite ids
//! never reach it): "unknown as of poll N" (a process without an account has had no measured
//! poll at all, which says as much without a mark). The first measured poll with a traced frame
//! overwrites it (its pushes and pops write the cell, as always); a reader that finds the mark
//! compares it with the process's poll counter ([`read_process`]): the same poll, running or
//! suspended, is one no session measured, whose function is unknown; a later one was measured
//! and entered no traced function. The poll path pays nothing for it: only the flag's setting
//! writes the mark, and only readers decode it.
//!
//! Where it can be wrong, and which way: a process that begins a poll between the mark and
//! its flag's setting (microseconds) reads as in no traced function during that poll (as
//! before this mark existed), not as unknown; a session paused and resumed leaves the polls of
//! the pause unmeasured and unmarked; a poll counter that went 2³¹ polls round reads a mark
//! as current again. None of them names a wrong function.

use super::FlaggedProcess;

/// The top bit: set in a mark, never in a callsite id.
const MARK: u32 = 1 << 31;

/// The current function as the cell tells it, decoded against the process's polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Current {
    /// In this traced function (a callsite id).
    Function(u32),
    /// In no traced function, or nothing recorded.
    None,
    /// Not known: the poll running, or the last one, is one no session measured.
    Unknown,
}

/// What a process whose poll counter reads `polls` is in, by its account's cell, `None`
/// without an account: every measured poll makes the process one, so a process without one
/// that has polled ran only polls no session measured.
pub(crate) fn read_process(account: Option<&crate::heap::Account>, polls: u32) -> Current {
    match account {
        Some(account) => read(account.current_function(), polls),
        None if polls != 0 => Current::Unknown,
        None => Current::None,
    }
}

/// What the cell value `raw` (`None`: the cell's "no function") says of a process whose poll
/// counter reads `polls`.
fn read(raw: Option<u32>, polls: u32) -> Current {
    match raw {
        None => Current::None,
        Some(raw) if raw & MARK == 0 => Current::Function(raw),
        Some(raw) if raw == mark_of(polls) => Current::Unknown,
        Some(_) => Current::None,
    }
}

/// The mark for poll number `polls`; never the cell's "no function" (`u32::MAX`), which the
/// one poll number in 2³¹ that would give it gives up (read as in no traced function).
fn mark_of(polls: u32) -> u32 {
    let mark = MARK | (polls & !MARK);
    if mark == u32::MAX { mark - 1 } else { mark }
}

/// Marks `p`'s current function as unknown as of its poll running or last run, unless a
/// session measures it already (its cell is then kept up to date). Called as session `bit`'s
/// flag is about to be set on it: a flag already set is a session measuring it.
pub(crate) fn mark(p: &dyn FlaggedProcess) {
    // As `sessions_measuring` reads it (a generic of sized processes): the sessions measuring,
    // flagged on it, open on its node.
    let measured = super::measuring()
        & p.trace_flags().traced()
        & p.node_trace_sessions()
            .load(std::sync::atomic::Ordering::Relaxed);
    if measured != 0 {
        return;
    }
    // Without an account it was never measured: [`read_process`] says so without a mark
    // (none is made for it here, which would cost an idle process an account).
    if let Some(account) = p.account_if_any() {
        account
            .current_function_cell()
            .store(mark_of(p.polls()), std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_unknown_for_its_own_poll_and_nothing_after() {
        assert_eq!(read(Some(7), 3), Current::Function(7));
        assert_eq!(read(None, 3), Current::None);
        assert_eq!(read(Some(mark_of(3)), 3), Current::Unknown);
        assert_eq!(read(Some(mark_of(3)), 4), Current::None);
        // Poll numbers past 2³¹ still mark.
        let big = (1 << 31) + 5;
        assert_eq!(read(Some(mark_of(big)), big), Current::Unknown);
        assert_ne!(mark_of(u32::MAX), u32::MAX);
        // Without an account: never measured, unknown once it has polled.
        assert_eq!(read_process(None, 0), Current::None);
        assert_eq!(read_process(None, 3), Current::Unknown);
    }
}
