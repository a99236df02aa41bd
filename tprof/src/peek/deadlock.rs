//! Deadlocks: cycles of processes blocked in `call` on each other.
//!
//! Each process waiting in a call waits for one callee, so the waits form a functional graph
//! (at most one edge out of each process), whose cycles are found by one walk from each
//! process, colouring the processes each walk visits: a walk that comes back to a process of
//! its own colour has closed a cycle; one that reaches a process an earlier walk coloured, or
//! a process that waits in no call (in a `receive`, running, gone), has not. Each process is
//! coloured once: linear in the processes.

use std::collections::HashMap;

use runtime::Pid;

/// The cycles among `calls` (each waiting process and the process it calls), each from its
/// lowest pid in call order, sorted by that pid.
pub(crate) fn cycles(calls: &HashMap<Pid, Pid>) -> Vec<Vec<Pid>> {
    let mut colour: HashMap<Pid, usize> = HashMap::with_capacity(calls.len());
    let mut found = Vec::new();
    for (walk, &start) in calls.keys().enumerate() {
        let mut at = start;
        while !colour.contains_key(&at) {
            colour.insert(at, walk);
            let Some(&next) = calls.get(&at) else {
                break;
            };
            if colour.get(&next) == Some(&walk) {
                found.push(cycle_from(calls, next));
                break;
            }
            at = next;
        }
    }
    found.sort();
    found
}

/// The cycle through `member`, from its lowest pid.
fn cycle_from(calls: &HashMap<Pid, Pid>, member: Pid) -> Vec<Pid> {
    let mut cycle = vec![member];
    let mut at = calls[&member];
    while at != member {
        cycle.push(at);
        at = calls[&at];
    }
    let lowest = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
    cycle.rotate_left(lowest);
    cycle
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(i: u32) -> Pid {
        Pid::from_parts(1, i, 1)
    }

    fn graph(edges: &[(u32, u32)]) -> HashMap<Pid, Pid> {
        edges.iter().map(|&(a, b)| (pid(a), pid(b))).collect()
    }

    #[test]
    fn two_and_three_process_cycles_are_found_once_each() {
        // 1 <-> 2; 3 -> 4 -> 5 -> 3; 6 -> 1 (into a cycle, not part of it); 7 -> 8 (8 waits
        // in no call).
        let calls = graph(&[(1, 2), (2, 1), (3, 4), (4, 5), (5, 3), (6, 1), (7, 8)]);
        assert_eq!(
            cycles(&calls),
            [vec![pid(1), pid(2)], vec![pid(3), pid(4), pid(5)]]
        );
    }

    #[test]
    fn a_chain_into_a_process_not_in_a_call_is_no_cycle() {
        assert!(cycles(&graph(&[(1, 2), (2, 3), (4, 3)])).is_empty());
        assert!(cycles(&HashMap::new()).is_empty());
    }

    /// A long chain ending in a long cycle: found, in time linear in its length.
    #[test]
    fn a_long_cycle_is_found() {
        let n = 100_000;
        let mut edges: Vec<(u32, u32)> = (0..n).map(|i| (i, i + 1)).collect();
        edges.extend((n..2 * n).map(|i| (i, if i + 1 == 2 * n { n } else { i + 1 })));
        let found = cycles(&graph(&edges));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].len(), n as usize);
        assert_eq!(found[0][0], pid(n));
    }
}
