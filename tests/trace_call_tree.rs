//! Call-tree mode: figures per traced call path, summing to the flat figures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{YieldOnce, run_in_process};

use std::collections::BTreeMap;

use runtime::trace::{CallTreeMeasurement, ProcessSpec, TracePattern, TraceSession, TraceTypes};
use runtime::{ExitReason, Node, Pid, traced};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

const CHUNK: usize = 800; // 100 words

fn allocate(bytes: usize) -> Vec<u8> {
    std::hint::black_box(Vec::with_capacity(bytes))
}

#[traced]
fn outer() -> usize {
    allocate(CHUNK).capacity() + middle() + inner()
}

/// Never traced by these tests' patterns: its allocation goes to its traced caller's path.
#[traced]
fn middle() -> usize {
    allocate(CHUNK).capacity() + inner()
}

#[traced]
fn inner() -> usize {
    allocate(CHUNK).capacity()
}

#[traced]
fn other() -> usize {
    inner() + inner()
}

#[traced]
fn recurse(depth: u32) -> usize {
    let v = allocate(8 * depth as usize + 8);
    if depth == 0 {
        v.capacity()
    } else {
        v.capacity() + recurse(depth - 1)
    }
}

#[traced]
fn boom(depth: u32) -> u32 {
    let _v = allocate(CHUNK);
    if depth == 0 {
        panic!("boom at the bottom");
    }
    boom(depth - 1) + 1
}

#[traced]
async fn async_outer() -> usize {
    let a = async_inner().await;
    YieldOnce(false).await;
    a + async_inner().await + inner()
}

#[traced]
async fn async_inner() -> usize {
    let v = allocate(CHUNK);
    YieldOnce(false).await;
    v.capacity() + allocate(CHUNK).capacity()
}

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

fn session(node: &Node, types: TraceTypes, functions: &[&str]) -> TraceSession {
    let s = node.trace_session_with(types).unwrap();
    for f in functions {
        s.set_pattern(&TracePattern::function(module_path!(), *f))
            .unwrap();
    }
    s.enable_trace(ProcessSpec::New, true).unwrap();
    s
}

/// Per path (function names joined by `;`) of `pid`: (calls, words).
fn paths_of(tree: &CallTreeMeasurement, pid: Pid) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for p in tree.processes.iter().filter(|p| p.pid == pid) {
        for m in &p.paths {
            let name: Vec<&str> = tree.stack(m.path).iter().map(|c| c.function()).collect();
            let e = out.entry(name.join(";")).or_insert((0, 0));
            e.0 += m.calls;
            e.1 += m.words;
        }
    }
    out
}

/// The flat figures the session reports, and the paths' summed by last function, agree.
fn assert_sums_match(s: &TraceSession, pid: Pid) {
    let tree = s.call_tree();
    // Per function: calls, words, summed ns, number of paths.
    let mut summed: BTreeMap<&str, (u64, u64, u64, u64)> = BTreeMap::new();
    for p in tree.processes.iter().filter(|p| p.pid == pid) {
        for m in &p.paths {
            let last = tree.paths[m.path as usize].callsite.function();
            let e = summed.entry(last).or_default();
            e.0 += m.calls;
            e.1 += m.words;
            e.2 += m.time_ns;
            e.3 += 1;
        }
    }
    let flat: BTreeMap<&str, (u64, u64, u64)> = s
        .measurements()
        .into_iter()
        .filter(|p| p.pid == pid)
        .flat_map(|p| p.functions)
        .map(|f| (f.callsite.function(), (f.calls, f.words, f.time_ns)))
        .collect();
    let exact = |m: &BTreeMap<&str, (u64, u64, u64, u64)>| -> Vec<(String, u64, u64)> {
        m.iter().map(|(k, v)| (k.to_string(), v.0, v.1)).collect()
    };
    let flat_exact: Vec<(String, u64, u64)> = flat
        .iter()
        .map(|(k, v)| (k.to_string(), v.0, v.1))
        .collect();
    assert_eq!(exact(&summed), flat_exact);
    // Time is kept in clock ticks: each path's conversion to ns rounds by under 1 ns.
    for (f, (_, _, ns, paths)) in &summed {
        assert!(
            flat[f].2.abs_diff(*ns) <= *paths,
            "{f}: {ns} vs {}",
            flat[f].2
        );
    }
}

#[test]
fn memory_goes_to_each_path_and_sums_to_the_flat_figures() {
    let node = node();
    let s = session(
        &node,
        TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE,
        &["outer", "inner", "other"],
    );
    let (pid, reason) = run_in_process(&node, async {
        assert_eq!(outer(), 4 * CHUNK);
        assert_eq!(other(), 2 * CHUNK);
    });
    assert_eq!(reason, ExitReason::Normal);
    let tree = s.call_tree();
    let paths = paths_of(&tree, pid);
    assert_eq!(
        paths.get("outer"),
        Some(&(1, 200)),
        "its own and middle's: {paths:?}"
    );
    // inner called through the untraced middle and directly: one path, two calls.
    assert_eq!(paths.get("outer;inner"), Some(&(2, 200)), "{paths:?}");
    assert_eq!(paths.get("other"), Some(&(1, 0)), "{paths:?}");
    assert_eq!(paths.get("other;inner"), Some(&(2, 200)), "{paths:?}");
    assert_eq!(paths.len(), 4, "{paths:?}");
    assert_sums_match(&s, pid);
    // A parent always comes before its children.
    for (i, p) in tree.paths.iter().enumerate() {
        assert!(p.parent.is_none_or(|q| (q as usize) < i));
    }
}

#[test]
fn recursion_makes_one_path_per_depth() {
    let node = node();
    let s = session(
        &node,
        TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE,
        &["recurse"],
    );
    let (pid, _) = run_in_process(&node, async {
        recurse(3);
        recurse(3);
    });
    let paths = paths_of(&s.call_tree(), pid);
    for depth in 1..=4 {
        let name = vec!["recurse"; depth].join(";");
        let words = 5 - depth as u64; // recurse(d) allocates d + 1 words
        assert_eq!(paths.get(&name), Some(&(2, 2 * words)), "{name}: {paths:?}");
    }
    assert_eq!(paths.len(), 4);
    assert_sums_match(&s, pid);
}

#[test]
fn recursion_deeper_than_the_stack_extends_the_deepest_path_kept() {
    let node = node();
    let s = session(
        &node,
        TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE,
        &["recurse"],
    );
    let (pid, total) = node
        .run(async {
            let before = runtime::heap::process_heap(runtime::self_pid()).unwrap();
            recurse(300);
            let after = runtime::heap::process_heap(runtime::self_pid()).unwrap();
            (runtime::self_pid(), after.words - before.words)
        })
        .unwrap();
    let paths = paths_of(&s.call_tree(), pid);
    let kept = runtime::trace::STACK_CAPACITY;
    // One path per depth kept, each called once; the calls deeper than the stack are calls
    // from the deepest frame kept: one path more, called by all of them.
    assert_eq!(paths.len(), kept + 1);
    assert_eq!(
        paths.get(&vec!["recurse"; kept + 1].join(";")).map(|p| p.0),
        Some(301 - kept as u64)
    );
    assert_eq!(paths.values().map(|p| p.0).sum::<u64>(), 301);
    assert_eq!(paths.values().map(|p| p.1).sum::<u64>(), total);
    assert_sums_match(&s, pid);
}

#[test]
fn an_async_call_keeps_its_path_across_polls() {
    let node = node();
    let s = session(
        &node,
        TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE,
        &["async_outer", "async_inner", "inner"],
    );
    let (pid, _) = run_in_process(&node, async {
        assert_eq!(async_outer().await, 5 * CHUNK);
    });
    let paths = paths_of(&s.call_tree(), pid);
    assert_eq!(paths.get("async_outer"), Some(&(1, 0)), "{paths:?}");
    assert_eq!(
        paths.get("async_outer;async_inner"),
        Some(&(2, 400)),
        "{paths:?}"
    );
    assert_eq!(paths.get("async_outer;inner"), Some(&(1, 100)), "{paths:?}");
    assert_eq!(paths.len(), 3, "{paths:?}");
    assert_sums_match(&s, pid);
}

#[test]
fn time_per_path_sums_to_the_flat_time() {
    let node = node();
    let s = session(
        &node,
        TraceTypes::CALL_TIME | TraceTypes::CALL_TREE,
        &["outer", "inner", "other", "recurse"],
    );
    let (pid, _) = run_in_process(&node, async {
        for _ in 0..50 {
            outer();
            other();
            recurse(5);
        }
    });
    let tree = s.call_tree();
    let total: u64 = tree
        .processes
        .iter()
        .flat_map(|p| p.paths.iter())
        .map(|m| m.time_ns)
        .sum();
    assert!(total > 0);
    assert_sums_match(&s, pid);
    let paths = paths_of(&tree, pid);
    assert_eq!(paths.get("outer;inner").map(|p| p.0), Some(100));
    assert_eq!(paths.get("recurse;recurse;recurse").map(|p| p.0), Some(50));
}

#[test]
fn a_flat_session_beside_a_tree_session_sees_the_same_calls() {
    let node = node();
    let tree = session(
        &node,
        TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE,
        &["outer", "inner"],
    );
    let flat = session(&node, TraceTypes::CALL_MEMORY, &["inner", "other"]);
    let (pid, _) = run_in_process(&node, async {
        outer();
        other();
    });
    let paths = paths_of(&tree.call_tree(), pid);
    assert_eq!(paths.get("outer"), Some(&(1, 200)), "{paths:?}");
    // The tree session does not trace `other`: its inner calls are outermost.
    assert_eq!(paths.get("inner"), Some(&(2, 200)), "{paths:?}");
    assert_eq!(paths.get("outer;inner"), Some(&(2, 200)), "{paths:?}");
    assert_sums_match(&tree, pid);
    let flat_m = flat.measurements();
    let f = |name: &str| {
        flat_m
            .iter()
            .flat_map(|p| p.functions.iter())
            .find(|f| f.callsite.function() == name)
            .map(|f| (f.calls, f.words))
    };
    assert_eq!(f("inner"), Some((4, 400)));
    assert_eq!(f("other"), Some((1, 0)));
    assert!(flat.call_tree().processes.is_empty());
}

#[test]
fn a_panic_leaves_the_tree_consistent_and_the_next_process_clean() {
    let node = node();
    let s = session(
        &node,
        TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE,
        &["boom", "inner"],
    );
    let (pid, reason) = run_in_process(&node, async {
        boom(2);
    });
    assert!(matches!(reason, ExitReason::Panic(_)), "{reason:?}");
    let paths = paths_of(&s.call_tree(), pid);
    assert_eq!(paths.get("boom").map(|p| p.0), Some(1));
    assert_eq!(paths.get("boom;boom;boom").map(|p| p.0), Some(1));
    assert_sums_match(&s, pid);
    // The next processes (on either worker) start at the root.
    for _ in 0..4 {
        let (next, _) = run_in_process(&node, async {
            inner();
        });
        let paths = paths_of(&s.call_tree(), next);
        assert_eq!(paths.get("inner"), Some(&(1, 100)), "{paths:?}");
        assert_eq!(paths.len(), 1);
    }
}

#[test]
fn restart_zeroes_the_paths_figures() {
    let node = node();
    let s = session(
        &node,
        TraceTypes::CALL_MEMORY | TraceTypes::CALL_TREE,
        &["outer", "inner"],
    );
    run_in_process(&node, async {
        outer();
    });
    s.restart();
    let (pid, _) = run_in_process(&node, async {
        inner();
    });
    let tree = s.call_tree();
    let calls: u64 = tree
        .processes
        .iter()
        .flat_map(|p| p.paths.iter())
        .map(|m| m.calls)
        .sum();
    assert_eq!(calls, 1);
    assert_eq!(paths_of(&tree, pid).get("inner"), Some(&(1, 100)));
}
