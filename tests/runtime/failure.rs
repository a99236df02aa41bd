//! Links, monitors, exit signals, trap_exit, kills and panics.

use std::sync::mpsc;
use std::time::Duration;

use runtime::{
    Down, Exit, ExitReason, LinkError, Node, demonitor, exit, exit_self, link, monitor, receive,
    receive_timeout, self_pid, send, spawn, spawn_link, spawn_monitor, trap_exit, unlink,
};

const LONG: Duration = Duration::from_secs(30);

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

async fn wait_forever() {
    std::future::pending::<()>().await
}

async fn down_of(pid: runtime::Pid) -> Down {
    runtime::receive_where(move |d: &Down| d.pid == pid).await
}

#[test]
fn an_abnormal_exit_kills_linked_processes_both_ways() {
    let node = node();
    let reasons = node
        .run(async {
            // child -> parent direction
            let (parent, _) = spawn_monitor(async {
                spawn_link(async { exit_self(ExitReason::custom("boom")) }).unwrap();
                wait_forever().await;
            })
            .unwrap();
            let up = down_of(parent).await.reason;
            // parent -> child direction
            let me = self_pid();
            let (owner, _) = spawn_monitor(async move {
                let child = spawn_link(wait_forever()).unwrap();
                send(me, child);
                let () = receive().await;
                exit_self(ExitReason::custom("owner died"));
            })
            .unwrap();
            let child: runtime::Pid = receive().await;
            let mref = monitor(child).unwrap();
            send(owner, ());
            let down = receive_where_ref(mref).await;
            (up, down.reason)
        })
        .unwrap();
    assert_eq!(reasons.0, ExitReason::custom("boom"));
    assert_eq!(reasons.1, ExitReason::custom("owner died"));
}

async fn receive_where_ref(mref: runtime::MonitorRef) -> Down {
    runtime::receive_where(move |d: &Down| d.monitor_ref == mref).await
}

#[test]
fn a_normal_exit_does_not_kill_linked_processes() {
    let node = node();
    let alive = node
        .run(async {
            let (parent, _) = spawn_monitor(async {
                spawn_link(async {}).unwrap();
                let () = receive().await;
            })
            .unwrap();
            let early = receive_timeout::<Down>(Duration::from_millis(50)).await;
            send(parent, ());
            let later = down_of(parent).await;
            (early.is_none(), later.reason)
        })
        .unwrap();
    assert_eq!(alive, (true, ExitReason::Normal));
}

#[test]
fn trap_exit_turns_exit_signals_into_messages() {
    let node = node();
    let exits = node
        .run(async {
            trap_exit(true).unwrap();
            let a = spawn_link(async {}).unwrap();
            let b = spawn_link(async { panic!("bad") }).unwrap();
            let c = spawn_link(async { exit_self(ExitReason::Shutdown) }).unwrap();
            let mut got = Vec::new();
            for _ in 0..3 {
                let e: Exit = receive().await;
                got.push(e);
            }
            got.sort_by_key(|e| e.from);
            let mut expected = vec![
                Exit {
                    from: a,
                    reason: ExitReason::Normal,
                },
                Exit {
                    from: b,
                    reason: ExitReason::Panic("bad".into()),
                },
                Exit {
                    from: c,
                    reason: ExitReason::Shutdown,
                },
            ];
            expected.sort_by_key(|e| e.from);
            (got, expected)
        })
        .unwrap();
    assert_eq!(exits.0, exits.1);
}

#[test]
fn kill_cannot_be_trapped_and_links_see_killed() {
    let node = node();
    let out = node
        .run(async {
            let me = self_pid();
            let (victim, _) = spawn_monitor(async move {
                trap_exit(true).unwrap();
                let watcher = spawn_link(async {
                    trap_exit(true).unwrap();
                    let e: Exit = receive().await;
                    e.reason
                })
                .unwrap();
                send(me, watcher);
                wait_forever().await;
            })
            .unwrap();
            let watcher: runtime::Pid = receive().await;
            let wref = monitor(watcher).unwrap();
            exit(victim, ExitReason::Kill);
            let victim_down = down_of(victim).await.reason;
            // The watcher ends with the reason its link delivered.
            let watcher_down = receive_where_ref(wref).await.reason;
            (victim_down, watcher_down)
        })
        .unwrap();
    assert_eq!(out, (ExitReason::Killed, ExitReason::Killed));
}

#[test]
fn exit_signals_follow_erlang_rules() {
    let node = node();
    let out = node
        .run(async {
            // Normal to a process that does not trap: ignored.
            let (p1, _) = spawn_monitor(async {
                let () = receive().await;
            })
            .unwrap();
            exit(p1, ExitReason::Normal);
            let ignored = receive_timeout::<Down>(Duration::from_millis(50))
                .await
                .is_none();
            send(p1, ());
            let _ = down_of(p1).await;
            // A custom reason kills a process that does not trap.
            let (p2, _) = spawn_monitor(wait_forever()).unwrap();
            exit(p2, ExitReason::custom("stop it"));
            let custom = down_of(p2).await.reason;
            // A trapping process receives it as a message, Normal included.
            let me = self_pid();
            let p3 = runtime::spawn_opt(
                async move {
                    let a: Exit = receive().await;
                    let b: Exit = receive().await;
                    send(me, (a.reason, b.reason, a.from == me));
                },
                runtime::SpawnOptions::new().trap_exit().monitor(),
            )
            .unwrap()
            .pid;
            exit(p3, ExitReason::Normal);
            exit(p3, ExitReason::custom("x"));
            let trapped: (ExitReason, ExitReason, bool) = receive().await;
            let _ = down_of(p3).await;
            (ignored, custom, trapped)
        })
        .unwrap();
    assert!(out.0);
    assert_eq!(out.1, ExitReason::custom("stop it"));
    assert_eq!(out.2, (ExitReason::Normal, ExitReason::custom("x"), true));
}

/// Runs inside the process when its future is dropped.
struct DropProbe(mpsc::Sender<Option<runtime::Pid>>);

impl Drop for DropProbe {
    fn drop(&mut self) {
        let _ = self.0.send(runtime::try_self_pid());
    }
}

#[test]
fn a_kill_drops_the_future_inside_the_process_even_while_it_sleeps() {
    let node = node();
    let (tx, rx) = mpsc::channel();
    let pid = node
        .spawn(async move {
            let _probe = DropProbe(tx);
            tokio::time::sleep(Duration::from_secs(3600)).await;
        })
        .unwrap();
    // Let it reach its sleep, then kill it.
    while node
        .process_info(pid)
        .is_some_and(|i| i.status != runtime::ProcessStatus::Waiting)
    {
        std::thread::yield_now();
    }
    node.exit(pid, ExitReason::Kill);
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Some(pid));
}

#[test]
fn a_panic_becomes_the_exit_reason_and_spares_unlinked_processes() {
    let node = node();
    let out = node
        .run(async {
            let bystander = spawn(async {
                let (from, n): (runtime::Pid, u32) = receive().await;
                send(from, n + 1);
            })
            .unwrap();
            let (p, _) = spawn_monitor(async {
                let v: Vec<u32> = Vec::new();
                let _ = v[3];
            })
            .unwrap();
            let reason = down_of(p).await.reason;
            send(bystander, (self_pid(), 1u32));
            let answer: u32 = receive().await;
            (reason, answer)
        })
        .unwrap();
    assert!(
        matches!(&out.0, ExitReason::Panic(msg) if msg.contains("index out of bounds")),
        "{:?}",
        out.0
    );
    assert_eq!(out.1, 2);
    // The node is still up.
    assert_eq!(node.run(async { 1 + 1 }).unwrap(), 2);
}

#[test]
fn unlink_stops_propagation() {
    let node = node();
    let out = node
        .run(async {
            let (p, _) = spawn_monitor(async {
                let child = spawn_link(async {
                    let () = receive().await;
                    exit_self(ExitReason::custom("child failed"));
                })
                .unwrap();
                unlink(child).unwrap();
                send(child, ());
                let () = receive().await;
            })
            .unwrap();
            let early = receive_timeout::<Down>(Duration::from_millis(100)).await;
            exit(p, ExitReason::Kill);
            let late = down_of(p).await.reason;
            (early.is_none(), late)
        })
        .unwrap();
    assert_eq!(out, (true, ExitReason::Killed));
}

#[test]
fn monitors_of_dead_pids_fire_noproc_and_demonitor_silences() {
    let node = node();
    let out = node
        .run(async {
            let (dead, _) = spawn_monitor(async {}).unwrap();
            let _ = down_of(dead).await;
            let mref = monitor(dead).unwrap();
            let noproc: Down = receive().await;
            let live = spawn(async {
                let () = receive().await;
            })
            .unwrap();
            let m2 = monitor(live).unwrap();
            let was_active = demonitor(m2).unwrap();
            send(live, ());
            let silent = receive_timeout::<Down>(Duration::from_millis(100)).await;
            (noproc, mref, was_active, silent)
        })
        .unwrap();
    assert_eq!(out.0.reason, ExitReason::NoProc);
    assert_eq!(out.0.monitor_ref, out.1);
    assert!(out.2);
    assert!(out.3.is_none());
}

#[test]
fn linking_to_a_dead_pid_is_an_error() {
    let node = node();
    let err = node
        .run(async {
            let (dead, _) = spawn_monitor(async {}).unwrap();
            let _ = down_of(dead).await;
            link(dead).unwrap_err()
        })
        .unwrap();
    assert!(matches!(err, LinkError::NoProc(_)));
    assert!(err.to_string().contains("no such process"));
    assert_eq!(
        link(runtime::Pid::from_parts(1, 1, 1)),
        Err(LinkError::NotInProcess)
    );
}

#[test]
fn exit_self_ends_the_process_with_the_reason() {
    let node = node();
    let reason = node
        .run(async {
            let (p, _) = spawn_monitor(async {
                exit_self(ExitReason::Shutdown);
            })
            .unwrap();
            down_of(p).await.reason
        })
        .unwrap();
    assert_eq!(reason, ExitReason::Shutdown);
    // run reports a process that ended without output.
    let err = node
        .run(async { exit_self(ExitReason::custom("gone")) })
        .unwrap_err();
    assert_eq!(err, ExitReason::custom("gone"));
    let err = node.run(async { panic!("kaboom") }).unwrap_err();
    assert_eq!(err, ExitReason::Panic("kaboom".into()));
}

/// Outside a process, `exit_self` has no process to end: it panics with a message that says
/// what to call instead (it used to unwind with an empty payload, printed as `Box<dyn Any>`).
#[test]
fn exit_self_outside_a_process_says_what_to_call_instead() {
    let payload = std::panic::catch_unwind(|| exit_self(ExitReason::Shutdown)).unwrap_err();
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .expect("a panic message");
    assert!(message.contains("outside a process"), "{message}");
    assert!(message.contains("runtime::exit("), "{message}");
    // In a helper task: the process runs elsewhere; the message points at `exit` too.
    let node = node();
    let message = node
        .run(async {
            let helper = runtime::spawn_task(async { exit_self(ExitReason::Shutdown) }).unwrap();
            let payload = helper.await.unwrap_err().into_panic();
            payload
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_default()
        })
        .unwrap();
    assert!(message.contains("helper task"), "{message}");
    assert!(message.contains("runtime::exit("), "{message}");
}

#[test]
fn a_fired_monitor_is_gone_from_the_watcher() {
    let node = node();
    let out = node
        .run(async {
            for _ in 0..100 {
                let (p, _) = spawn_monitor(async {}).unwrap();
                let _ = down_of(p).await;
            }
            let (p, mref) = spawn_monitor(async {}).unwrap();
            let _ = down_of(p).await;
            let monitors = runtime::process_info(self_pid()).unwrap().monitors.len();
            (monitors, demonitor(mref).unwrap())
        })
        .unwrap();
    assert_eq!(out, (0, false));
}

#[test]
fn exit_normal_from_outside_a_process_does_not_end_the_target() {
    let node = node();
    let (tx, rx) = mpsc::channel();
    let pid = node
        .spawn(async move {
            let n: u32 = receive().await;
            tx.send(n).unwrap();
        })
        .unwrap();
    node.exit(pid, ExitReason::Normal);
    std::thread::sleep(Duration::from_millis(50));
    send(pid, 5u32);
    assert_eq!(rx.recv_timeout(LONG).unwrap(), 5);
}

/// A message whose destructor panics.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("drop of a message failed");
    }
}

#[test]
fn a_message_whose_drop_panics_does_not_keep_an_exiting_process_from_telling_its_monitors() {
    let node = node();
    let (reason, gone) = node
        .run(async {
            let (p, _) = spawn_monitor(async {
                let () = receive().await;
            })
            .unwrap();
            send(p, PanicsOnDrop);
            send(p, ());
            let reason = down_of(p).await.reason;
            (reason, !runtime::processes().contains(&p))
        })
        .unwrap();
    assert_eq!(reason, ExitReason::Normal);
    assert!(gone);
}

#[test]
fn a_panicking_matcher_leaves_the_message_in_the_mailbox() {
    let node = node();
    let got = node
        .run(async {
            send(self_pid(), 7u32);
            let mut receive = std::pin::pin!(runtime::receive_where(|_: &u32| -> bool {
                panic!("matcher failed")
            }));
            let polled = std::future::poll_fn(|cx| {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    receive.as_mut().poll(cx)
                }));
                std::task::Poll::Ready(r.is_err())
            })
            .await;
            (polled, receive_timeout::<u32>(Duration::from_secs(5)).await)
        })
        .unwrap();
    assert_eq!(got, (true, Some(7)));
}

#[test]
fn a_helper_of_an_ended_process_cannot_leave_a_one_sided_link() {
    let node = node();
    let (target, helper_result) = node
        .run(async {
            let target = spawn(async {
                let () = receive().await;
            })
            .unwrap();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<()>();
            let (owner, _) = spawn_monitor(async move {
                // The helper outlives its process and links only after the process ended.
                runtime::spawn_task(async move {
                    let _ = gate_rx.await;
                    let _ = tx.send(runtime::link(target));
                })
                .unwrap();
            })
            .unwrap();
            let down: Down = receive().await;
            assert_eq!(down.pid, owner);
            gate_tx.send(()).unwrap();
            (target, rx.await.unwrap())
        })
        .unwrap();
    assert!(
        matches!(helper_result, Err(LinkError::NoProc(_))),
        "{helper_result:?}"
    );
    assert!(
        node.process_info(target).unwrap().links.is_empty(),
        "the target keeps no link to a process that has ended"
    );
    node.send(target, ());
}

/// What a helper task left behind by an ended process may no longer do in its name: tie a new
/// process to it. Each refusal is typed, and no process is left running.
#[test]
fn a_helper_of_an_ended_process_cannot_tie_new_processes_to_it() {
    let node = node();
    let (owner, results) = node
        .run(async {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<()>();
            let (owner, _) = spawn_monitor(async move {
                runtime::spawn_task(async move {
                    let _ = gate_rx.await;
                    let linked = spawn_link(wait_forever());
                    let monitored = spawn_monitor(wait_forever()).map(|(pid, _)| pid);
                    let named = runtime::spawn_opt(
                        wait_forever(),
                        runtime::SpawnOptions::new().name("orphan").link(),
                    )
                    .map(|s| s.pid);
                    let watched = monitor(self_pid());
                    let plain = spawn(async {});
                    let _ = tx.send((linked, monitored, named, watched, plain));
                })
                .unwrap();
            })
            .unwrap();
            let down: Down = receive().await;
            assert_eq!(down.pid, owner);
            gate_tx.send(()).unwrap();
            (owner, rx.await.unwrap())
        })
        .unwrap();
    let (linked, monitored, named, watched, plain) = results;
    let refused = runtime::SpawnError::CallerExited { pid: owner };
    assert_eq!(linked, Err(refused.clone()));
    assert_eq!(monitored, Err(refused.clone()));
    assert_eq!(named, Err(refused));
    assert_eq!(watched, Err(LinkError::NoProc(owner)));
    assert!(
        runtime::SpawnError::CallerExited { pid: owner }
            .to_string()
            .contains(&owner.to_string())
    );
    // A process with no tie may still be started (Erlang's `spawn` names no one to signal).
    assert!(plain.is_ok(), "{plain:?}");
    assert_eq!(
        node.whereis("orphan"),
        None,
        "the refused process's name is free"
    );
    let deadline = std::time::Instant::now() + LONG;
    while !node.processes().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(node.processes(), vec![], "no refused process runs");
}

#[test]
fn a_message_owning_another_nodes_runtime_is_dropped_cleanly_at_exit() {
    let outer = node();
    let inner = Node::builder().current_thread().build().unwrap();
    let (inner_pid, watch) = inner
        .spawn_watched(
            async {
                let () = receive().await;
            },
            runtime::SpawnOptions::new(),
        )
        .unwrap();
    // Drive the inner node once so its process is set up.
    inner.block_on(async { tokio::task::yield_now().await });
    let holder = outer
        .spawn(async {
            let () = receive().await; // never sent: the node below stays queued
        })
        .unwrap();
    outer.send(holder, inner);
    outer.exit(holder, ExitReason::Kill);
    // Dropping the queued node (as the holder ends) drops its runtime and, with it, the task
    // of its process, which ends as killed, inside the holder's exit.
    let reason = outer
        .block_on(async { tokio::time::timeout(Duration::from_secs(60), watch.wait()).await })
        .expect("the inner process ended");
    assert_eq!(reason, ExitReason::Killed, "{inner_pid}");
}

/// A spawn that fails because its name is taken leaves no trace at its parent: no exit signal
/// through the link it would have had, no `Down` for the monitor (they are set as the process
/// is built, before the name is registered, and forgotten when that fails).
#[test]
fn a_spawn_refused_for_its_name_tells_its_parent_nothing() {
    let node = node();
    let got = node
        .run(async {
            trap_exit(true).unwrap();
            let holder = spawn(wait_forever()).unwrap();
            runtime::register("taken", holder).unwrap();
            let refused = runtime::spawn_opt(
                wait_forever(),
                runtime::SpawnOptions::new().name("taken").link().monitor(),
            );
            assert!(matches!(refused, Err(runtime::SpawnError::Name(_))));
            let exit: Option<Exit> = receive_timeout(Duration::from_millis(200)).await;
            let down: Option<Down> = receive_timeout(Duration::from_millis(50)).await;
            exit.map(|e| e.from).or(down.map(|d| d.pid))
        })
        .unwrap();
    assert_eq!(got, None);
}

#[test]
fn monitor_references_are_unique_across_nodes_and_threads() {
    // Two current-thread nodes driven by this one thread in turn (so each switch abandons the
    // thread's block of references), and a 2-worker node monitored from both of its workers.
    let a = Node::builder().current_thread().build().unwrap();
    let b = Node::builder().current_thread().build().unwrap();
    let c = node();
    let mut refs = Vec::new();
    let monitor_one = || async {
        let target = spawn(wait_forever()).unwrap();
        let mref = monitor(target).unwrap();
        exit(target, ExitReason::Kill);
        let down: Down = receive().await;
        assert_eq!(down.monitor_ref, mref);
        mref
    };
    for _ in 0..50 {
        refs.push(a.run(monitor_one()).unwrap());
        refs.push(b.run(monitor_one()).unwrap());
    }
    refs.extend(
        c.run(async move {
            let me = self_pid();
            for _ in 0..20 {
                spawn(async move {
                    for _ in 0..20 {
                        let target = spawn(wait_forever()).unwrap();
                        send(me, monitor(target).unwrap());
                        exit(target, ExitReason::Kill);
                    }
                })
                .unwrap();
            }
            let mut refs = Vec::new();
            for _ in 0..400 {
                refs.push(receive_timeout::<runtime::MonitorRef>(LONG).await.unwrap());
            }
            refs
        })
        .unwrap(),
    );
    assert_eq!(refs.len(), 500);
    let distinct: std::collections::HashSet<_> = refs.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        refs.len(),
        "a monitor reference was handed out twice"
    );
}
