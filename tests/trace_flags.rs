//! Process trace flags: enable/disable by pid, name, all/existing/new, children, lists, and
//! set_on_spawn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use runtime::trace::{FlagError, ProcessSpec, TraceSession};
use runtime::{Node, Pid, SpawnOptions, receive, self_pid, send, spawn};

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

async fn idle() {
    let () = receive().await;
}

/// Spawns `n` idle children from inside a new process; returns (parent, children).
fn family(node: &Node, n: usize) -> (Pid, Vec<Pid>) {
    node.run(async move {
        let me = self_pid();
        let parent = spawn(async move {
            let kids: Vec<Pid> = (0..n).map(|_| spawn(idle()).unwrap()).collect();
            send(me, kids);
            idle().await;
        })
        .unwrap();
        let kids: Vec<Pid> = receive().await;
        (parent, kids)
    })
    .unwrap()
}

fn traced(s: &TraceSession, pids: &[Pid]) -> Vec<bool> {
    pids.iter().map(|p| s.is_traced(*p)).collect()
}

#[test]
fn enable_and_disable_by_pid_name_and_list() {
    let node = node();
    let s = node.trace_session().unwrap();
    let a = node.spawn(idle()).unwrap();
    let b = node.spawn(idle()).unwrap();
    node.register("b", b).unwrap();
    assert_eq!(s.enable_trace(a, false).unwrap().count, 1);
    assert!(s.is_traced(a));
    let info = node.process_info(a).unwrap();
    assert_eq!(info.trace_sessions, 1 << s.slot());
    assert_eq!(s.enable_trace("b", false).unwrap().count, 1);
    assert!(s.is_traced(b));
    assert_eq!(s.disable_trace(a).unwrap().count, 1);
    assert!(!s.is_traced(a));
    // Errors for one item; failures in input order for a list.
    let dead = node.run(async { self_pid() }).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        s.enable_trace(dead, false).unwrap_err(),
        FlagError::NoProc(dead)
    );
    assert!(matches!(
        s.enable_trace("nobody", false).unwrap_err(),
        FlagError::NotRegistered(_)
    ));
    let list = ProcessSpec::List(vec![
        ProcessSpec::Name("nobody".into()),
        ProcessSpec::Pid(a),
        ProcessSpec::Pid(dead),
        ProcessSpec::Name("b".into()),
    ]);
    let outcome = s.enable_trace(list, false).unwrap();
    assert_eq!(outcome.count, 2);
    assert_eq!(
        outcome.failures,
        vec![
            (
                ProcessSpec::Name("nobody".into()),
                FlagError::NotRegistered("nobody".into())
            ),
            (ProcessSpec::Pid(dead), FlagError::NoProc(dead)),
        ]
    );
}

#[test]
fn children_and_all_children_follow_spawning_parents() {
    let node = node();
    let s = node.trace_session().unwrap();
    let (root, kids) = family(&node, 2);
    assert_eq!(
        s.enable_trace(ProcessSpec::children(root), false)
            .unwrap()
            .count,
        2
    );
    assert_eq!(traced(&s, &kids), vec![true, true]);
    assert!(!s.is_traced(root));
    s.disable_trace(ProcessSpec::children(root)).unwrap();
    // A three-level tree: all_children reaches the grandchildren.
    let (top, mids) = node
        .run(async {
            let me = self_pid();
            let top = spawn(async move {
                let mids: Vec<Pid> = (0..2)
                    .map(|_| {
                        spawn(async {
                            spawn(idle()).unwrap();
                            idle().await;
                        })
                        .unwrap()
                    })
                    .collect();
                send(me, mids);
                idle().await;
            })
            .unwrap();
            let mids: Vec<Pid> = receive().await;
            (top, mids)
        })
        .unwrap();
    // Wait until the grandchildren exist.
    let start = std::time::Instant::now();
    while node
        .processes()
        .iter()
        .filter(|p| {
            node.process_info(**p)
                .and_then(|i| i.parent)
                .is_some_and(|parent| mids.contains(&parent))
        })
        .count()
        < 2
    {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::yield_now();
    }
    assert_eq!(
        s.enable_trace(ProcessSpec::children(top), false)
            .unwrap()
            .count,
        2
    );
    assert_eq!(
        s.enable_trace(ProcessSpec::all_children(top), false)
            .unwrap()
            .count,
        4
    );
}

/// `Children` and `AllChildren` take a registered name as every other spec does; a name
/// that is not registered is an error naming it.
#[test]
fn children_and_all_children_take_a_registered_name() {
    let node = node();
    let s = node.trace_session().unwrap();
    let (root, kids) = family(&node, 3);
    node.register("family_root", root).unwrap();
    assert_eq!(
        s.enable_trace(ProcessSpec::children("family_root"), false)
            .unwrap()
            .count,
        3
    );
    assert_eq!(traced(&s, &kids), vec![true; 3]);
    assert!(!s.is_traced(root));
    assert_eq!(
        s.disable_trace(ProcessSpec::all_children("family_root"))
            .unwrap()
            .count,
        3
    );
    assert_eq!(traced(&s, &kids), vec![false; 3]);
    assert_eq!(
        s.enable_trace(ProcessSpec::children("nobody_by_that_name"), false)
            .unwrap_err(),
        FlagError::NotRegistered("nobody_by_that_name".into())
    );
}

#[test]
fn set_on_spawn_passes_the_flag_to_children_only_when_asked() {
    let node = node();
    let s = std::sync::Arc::new(node.trace_session().unwrap());
    let spawn_child_of = |parent_traced_with: Option<bool>| {
        let s = std::sync::Arc::clone(&s);
        node.run(async move {
            let me = self_pid();
            if let Some(on_spawn) = parent_traced_with {
                s.enable_trace(me, on_spawn).unwrap();
            }
            let child = spawn(async move {
                let grandchild = spawn(idle()).unwrap();
                send(me, grandchild);
                idle().await;
            })
            .unwrap();
            let grandchild: Pid = receive().await;
            (child, grandchild)
        })
        .unwrap()
    };
    let (c, g) = spawn_child_of(Some(true));
    assert_eq!(traced(&s, &[c, g]), vec![true, true]);
    let (c, g) = spawn_child_of(Some(false));
    assert_eq!(traced(&s, &[c, g]), vec![false, false]);
    let (c, g) = spawn_child_of(None);
    assert_eq!(traced(&s, &[c, g]), vec![false, false]);
}

#[test]
fn all_existing_and_new() {
    let node = node();
    let other_node = self::node();
    let s = node.trace_session().unwrap();
    let before = node.spawn(idle()).unwrap();
    let n = s.enable_trace(ProcessSpec::Existing, false).unwrap().count;
    assert!(n >= 1);
    assert!(s.is_traced(before));
    let after_existing = node.spawn(idle()).unwrap();
    assert!(!s.is_traced(after_existing));
    s.enable_trace(ProcessSpec::New, false).unwrap();
    let new = node.spawn(idle()).unwrap();
    assert!(s.is_traced(new));
    // Another node's new processes are not this session's.
    let elsewhere = other_node.spawn(idle()).unwrap();
    assert_eq!(
        other_node.process_info(elsewhere).unwrap().trace_sessions & (1 << s.slot()),
        0
    );
    s.disable_trace(ProcessSpec::New).unwrap();
    let later = node.spawn(idle()).unwrap();
    assert!(!s.is_traced(later));
    s.disable_trace(ProcessSpec::All).unwrap();
    assert!(!s.is_traced(before) && !s.is_traced(new));
}

#[test]
fn flags_given_at_spawn_and_cleared_when_the_session_stops() {
    let node = node();
    let s = node.trace_session().unwrap();
    let pid = node
        .spawn_opt(idle(), SpawnOptions::new().traced_by(&s, false))
        .unwrap()
        .pid;
    assert!(s.is_traced(pid));
    let slot = s.slot();
    drop(s);
    assert_eq!(
        node.process_info(pid).unwrap().trace_sessions & (1 << slot),
        0
    );
}

#[runtime::traced]
fn flagged_work() -> u32 {
    std::hint::black_box(7)
}

/// For a session that measures processes, `enable_trace` returns only once the polls of the
/// processes it traces that were running when it was called have ended: a poll reads its
/// process's flags as it begins, so a call made later in a poll that began before would not
/// be measured (issue 28). Here the process's poll goes on until another thread lets it go;
/// once `enable_trace` has returned, that poll has ended, and the call the process makes
/// when told is measured.
#[test]
fn enable_trace_waits_for_the_polls_running_when_called() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    let node = node();
    let s = node
        .trace_session_with(runtime::trace::TraceTypes::CALL_TIME)
        .unwrap();
    s.set_pattern(&runtime::trace::TracePattern::function(
        module_path!(),
        "flagged_work",
    ))
    .unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    let ended = Arc::new(AtomicBool::new(false));
    let poll_ended = Arc::clone(&ended);
    let pid = node
        .spawn(async move {
            started_tx.send(()).unwrap();
            // Blocks this poll (its worker too) until let go.
            go_rx.recv().unwrap();
            poll_ended.store(true, Ordering::SeqCst);
            let () = receive().await;
            done_tx.send(flagged_work()).unwrap();
        })
        .unwrap();
    started_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the poll began");
    // Usually still waiting when `enable_trace` is called; whenever it lets go, the poll must
    // have ended before `enable_trace` returns.
    let letting_go = std::thread::Builder::new()
        .name("letting go".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            go_tx.send(()).unwrap();
        })
        .unwrap();
    assert_eq!(s.enable_trace(pid, false).unwrap().count, 1);
    assert!(
        ended.load(Ordering::SeqCst),
        "enable_trace returned while a poll that began before it ran"
    );
    node.send(pid, ());
    done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("called");
    letting_go.join().unwrap();
    let calls: u64 = s
        .measurements()
        .iter()
        .filter(|p| p.pid == pid)
        .flat_map(|p| p.functions.iter())
        .map(|f| f.calls)
        .sum();
    assert_eq!(calls, 1);
}
